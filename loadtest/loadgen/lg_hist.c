/* Log-linear latency histogram (see lg_hist.h). */
#include "lg_hist.h"

#include <math.h>
#include <string.h>

void lg_hist_init(struct lg_hist *h)
{
    memset(h, 0, sizeof *h);
}

size_t lg_hist_index(uint64_t us)
{
    if (us > LG_HIST_MAX_US)
        us = LG_HIST_MAX_US;
    if (us < 2 * LG_HIST_HALF)
        return (size_t)us;
    unsigned msb = 63u - (unsigned)__builtin_clzll(us);
    unsigned shift = msb - (LG_HIST_SUB_BITS - 1);
    return (size_t)(shift + 1) * LG_HIST_HALF + (size_t)((us >> shift) - LG_HIST_HALF);
}

uint64_t lg_hist_lowest(size_t idx)
{
    if (idx < 2 * LG_HIST_HALF)
        return idx;
    unsigned shift = (unsigned)(idx / LG_HIST_HALF) - 1;
    uint64_t sub = idx % LG_HIST_HALF + LG_HIST_HALF;
    return sub << shift;
}

uint64_t lg_hist_highest(size_t idx)
{
    if (idx < 2 * LG_HIST_HALF)
        return idx;
    unsigned shift = (unsigned)(idx / LG_HIST_HALF) - 1;
    return lg_hist_lowest(idx) + ((1ull << shift) - 1);
}

void lg_hist_record(struct lg_hist *h, uint64_t us)
{
    if (us > LG_HIST_MAX_US) {
        us = LG_HIST_MAX_US;
        h->clamped++;
    }
    h->slots[lg_hist_index(us)]++;
    if (h->count == 0 || us < h->min)
        h->min = us;
    if (us > h->max)
        h->max = us;
    h->count++;
    h->sum += us;
}

void lg_hist_merge(struct lg_hist *dst, const struct lg_hist *src)
{
    if (src->count == 0)
        return;
    for (size_t i = 0; i < LG_HIST_SLOTS; i++)
        dst->slots[i] += src->slots[i];
    if (dst->count == 0 || src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
    dst->count += src->count;
    dst->sum += src->sum;
    dst->clamped += src->clamped;
}

static uint64_t representative(const struct lg_hist *h, size_t idx)
{
    uint64_t lo = lg_hist_lowest(idx), hi = lg_hist_highest(idx);
    uint64_t v = lo + (hi - lo) / 2;
    if (v < h->min)
        v = h->min;
    if (v > h->max)
        v = h->max;
    return v;
}

uint64_t lg_hist_percentile(const struct lg_hist *h, double pct)
{
    if (h->count == 0)
        return 0;
    if (pct >= 100.0)
        return h->max;
    if (pct < 0)
        pct = 0;
    uint64_t want = (uint64_t)ceil(pct / 100.0 * (double)h->count);
    if (want < 1)
        want = 1;
    uint64_t cum = 0;
    for (size_t i = 0; i < LG_HIST_SLOTS; i++) {
        cum += h->slots[i];
        if (cum >= want)
            return representative(h, i);
    }
    return h->max;
}

double lg_hist_mean(const struct lg_hist *h)
{
    return h->count ? (double)h->sum / (double)h->count : 0.0;
}

void lg_hist_foreach(const struct lg_hist *h,
                     void (*fn)(void *arg, uint64_t us, uint64_t count,
                                uint64_t cumulative),
                     void *arg)
{
    uint64_t cum = 0;
    for (size_t i = 0; i < LG_HIST_SLOTS; i++) {
        if (!h->slots[i])
            continue;
        cum += h->slots[i];
        fn(arg, representative(h, i), h->slots[i], cum);
    }
}
