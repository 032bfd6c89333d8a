/* Log-linear (HDR-style) latency histogram in microseconds: fixed-size, no
 * allocation, ~0.4% value error, merged by adding counts. */
#ifndef LG_HIST_H
#define LG_HIST_H

#include <stddef.h>
#include <stdint.h>

/* 2^LG_HIST_SUB_BITS linear sub-buckets per power of two: values below 256us
 * are exact, above that each bucket spans 1/128 of its value. */
#define LG_HIST_SUB_BITS 8
#define LG_HIST_HALF     (1u << (LG_HIST_SUB_BITS - 1))
#define LG_HIST_MAX_US   60000000ull   /* 60 s; larger values clamp here */
#define LG_HIST_SLOTS    (20u * LG_HIST_HALF)

struct lg_hist {
    uint64_t count;
    uint64_t sum;        /* exact sum of recorded (clamped) values, for mean */
    uint64_t min, max;   /* exact extremes */
    uint64_t clamped;    /* values above LG_HIST_MAX_US recorded as the max */
    uint64_t slots[LG_HIST_SLOTS];
};

/* Zero the histogram. The struct is plain memory: embed it or allocate it;
 * it never allocates and never grows, whatever the number of values. */
void lg_hist_init(struct lg_hist *h);

/* Record one value in microseconds (0 allowed, above 60 s clamped). */
void lg_hist_record(struct lg_hist *h, uint64_t us);

/* Add every count of src into dst (per-thread histograms after join). */
void lg_hist_merge(struct lg_hist *dst, const struct lg_hist *src);

/* Value (us) at percentile pct (0..100): the middle of the bucket holding
 * the ceil(pct% * count)-th smallest value, clamped to [min, max]; 100
 * returns max. 0 when empty. */
uint64_t lg_hist_percentile(const struct lg_hist *h, double pct);

/* Mean in microseconds (0 when empty). */
double lg_hist_mean(const struct lg_hist *h);

/* Slot helpers, exposed for the distribution dump and the tests. */
size_t lg_hist_index(uint64_t us);
uint64_t lg_hist_lowest(size_t idx);    /* smallest value mapping to idx */
uint64_t lg_hist_highest(size_t idx);   /* largest value mapping to idx */

/* Call fn for every non-empty slot in increasing order with the slot's
 * representative value (us), its count and the cumulative count so far. */
void lg_hist_foreach(const struct lg_hist *h,
                     void (*fn)(void *arg, uint64_t us, uint64_t count,
                                uint64_t cumulative),
                     void *arg);

#endif
