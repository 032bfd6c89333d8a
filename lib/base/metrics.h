/* Prometheus counters and histograms, created on first use by
 * (name, labels). Labels are preformatted text: route="deduct",status="200".
 * Fixed-size tables (one per shard of threads): past 3/4 of METRICS_MAX_SERIES
 * in a shard (to keep probes short)
 * new series are dropped and counted in lab_metrics_dropped_total, never a
 * crash. Thread-safe. */
#ifndef LAB_METRICS_H
#define LAB_METRICS_H

#define METRICS_MAX_SERIES 1024
#define METRICS_MAX_BUCKETS 14

/* Add v to a counter. */
void metrics_add(const char *name, const char *labels, double v);
/* Set a counter to v: for counters kept elsewhere (atomics) and mirrored
 * here just before rendering. */
void metrics_set(const char *name, const char *labels, double v);
/* Record one observation (seconds) in a histogram. */
void metrics_observe(const char *name, const char *labels, double seconds);
/* Record one observation in a histogram with its own upper bounds: `le`
 * (ascending, at most METRICS_MAX_BUCKETS, static storage: the table keeps
 * the pointer) is fixed by the first observation of the series. For
 * histograms of counts (batch sizes). */
void metrics_observe_le(const char *name, const char *labels, double v,
                        const double *le, int nle);
/* Describe a metric family for # HELP / # TYPE lines; overrides the
 * catalogue (metrics_catalog.c) for that name. */
void metrics_describe(const char *name, const char *type, const char *help);

/* One family of the catalogue: name, type (counter, gauge, histogram), help. */
struct metrics_family { const char *name, *type, *help; };
/* Add a family to the catalogue, for a module above base that owns
 * metrics (the guard registry registers each guard's rows): the strings
 * must be static (only the pointers are kept). A name already catalogued
 * is left as it is. Returns 0, or -1 when METRICS_MAX_REGISTERED families
 * are registered already. Thread-safe. */
#define METRICS_MAX_REGISTERED 160
int metrics_register(const char *name, const char *type, const char *help);
/* The catalogue entry of a family, the service's own rows then the
 * registered ones, or NULL (metrics_catalog.c). */
const struct metrics_family *metrics_family_of(const char *name);
/* Exposition text, malloc'd (caller frees); NULL when out of memory. */
char *metrics_render(void);
/* Current value of a counter (0 when absent); for tests and audits. */
double metrics_get(const char *name, const char *labels);
/* Forget everything (tests). */
void metrics_reset(void);

#endif
