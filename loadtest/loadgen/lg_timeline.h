/* Per-second timeline of a run: for every second since the start, the
 * responses that completed in it (2xx = ok, the rest and socket errors =
 * errors), the requests actually sent in it, and a coarse latency
 * histogram for that second's p99. One per worker thread, merged after
 * join; grows as the run goes (up to LG_TL_MAX_S seconds, later events
 * count in the last second). Lets a report show a fault happen: sales/s
 * dropping to 0 while a holder is paused, errors while a backend is away. */
#ifndef LG_TIMELINE_H
#define LG_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#define LG_TL_MAX_S    3600
#define LG_TL_SLOTS    104    /* 4 per power of two up to 2^26 us (67 s) */

struct lg_tl_sec {
    uint32_t ok, errors, sent;
    uint32_t lat[LG_TL_SLOTS];
};

struct lg_timeline {
    uint64_t start_us;         /* second 0 starts here */
    struct lg_tl_sec *sec;
    size_t nsec;               /* seconds with room */
    size_t used;               /* highest second touched + 1 */
    int oom;                   /* growth failed: later events were dropped */
};

void lg_tl_init(struct lg_timeline *t, uint64_t start_us);
void lg_tl_free(struct lg_timeline *t);

/* The second an event at now_us falls in (clamped to LG_TL_MAX_S - 1). */
size_t lg_tl_index(const struct lg_timeline *t, uint64_t now_us);

/* A response completed at now_us with this status after latency_us. */
void lg_tl_response(struct lg_timeline *t, uint64_t now_us, int status, uint64_t latency_us);
/* n socket errors (connect, read, write, timeout, parse) seen by now_us. */
void lg_tl_errors(struct lg_timeline *t, uint64_t now_us, uint64_t n);
/* A request written at now_us. */
void lg_tl_sent(struct lg_timeline *t, uint64_t now_us);

/* Add src into dst (same start). Returns 0, or -1 when out of memory. */
int lg_tl_merge(struct lg_timeline *dst, const struct lg_timeline *src);

/* Latency slot of a value and a slot's representative value (its middle). */
size_t lg_tl_slot(uint64_t us);
uint64_t lg_tl_slot_value(size_t slot);

/* The pct percentile (0..100) of one second in us; 0 when it had no response. */
uint64_t lg_tl_percentile(const struct lg_tl_sec *s, double pct);

#endif
