/* Prometheus counters and histograms, created on first use by
 * (name, labels). Labels are preformatted text: route="deduct",status="200".
 * Fixed-size tables (one per shard of threads): past 3/4 of METRICS_MAX_SERIES
 * in a shard (to keep probes short)
 * new series are dropped and counted in lab_metrics_dropped_total, never a
 * crash. Thread-safe. */
#ifndef LAB_METRICS_H
#define LAB_METRICS_H

#define METRICS_MAX_SERIES 1024

/* Add v to a counter. */
void metrics_add(const char *name, const char *labels, double v);
/* Set a counter to v: for counters kept elsewhere (atomics) and mirrored
 * here just before rendering. */
void metrics_set(const char *name, const char *labels, double v);
/* Record one observation (seconds) in a histogram. */
void metrics_observe(const char *name, const char *labels, double seconds);
/* Describe a metric family for # HELP / # TYPE lines (optional). */
void metrics_describe(const char *name, const char *type, const char *help);
/* Exposition text, malloc'd (caller frees); NULL when out of memory. */
char *metrics_render(void);
/* Current value of a counter (0 when absent); for tests and audits. */
double metrics_get(const char *name, const char *labels);
/* Forget everything (tests). */
void metrics_reset(void);

#endif
