/* Per-second timeline (see lg_timeline.h). */
#include "lg_timeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_SECONDS 64

void lg_tl_init(struct lg_timeline *t, uint64_t start_us)
{
    memset(t, 0, sizeof *t);
    t->start_us = start_us;
}

void lg_tl_free(struct lg_timeline *t)
{
    free(t->sec);
    t->sec = NULL;
    t->nsec = t->used = 0;
}

size_t lg_tl_index(const struct lg_timeline *t, uint64_t now_us)
{
    uint64_t s = now_us > t->start_us ? (now_us - t->start_us) / 1000000u : 0;
    return s >= LG_TL_MAX_S ? LG_TL_MAX_S - 1 : (size_t)s;
}

/* The second's bucket, growing the array (doubling) when needed; NULL when
 * memory ran out (the event is dropped and t->oom set). */
static struct lg_tl_sec *at(struct lg_timeline *t, size_t i)
{
    if (i >= t->nsec) {
        size_t n = t->nsec ? t->nsec : FIRST_SECONDS;
        while (n <= i)
            n *= 2;
        if (n > LG_TL_MAX_S)
            n = LG_TL_MAX_S;
        struct lg_tl_sec *p = realloc(t->sec, n * sizeof *p);
        if (!p) {
            t->oom = 1;
            return NULL;
        }
        memset(p + t->nsec, 0, (n - t->nsec) * sizeof *p);
        t->sec = p;
        t->nsec = n;
    }
    if (i + 1 > t->used)
        t->used = i + 1;
    return &t->sec[i];
}

size_t lg_tl_slot(uint64_t us)
{
    if (us < 4)
        return (size_t)us;
    int e = 63 - __builtin_clzll(us);          /* 2^e <= us < 2^(e+1), e >= 2 */
    size_t slot = 4 + (size_t)(e - 2) * 4 + (size_t)((us >> (e - 2)) & 3);
    return slot < LG_TL_SLOTS ? slot : LG_TL_SLOTS - 1;
}

uint64_t lg_tl_slot_value(size_t slot)
{
    if (slot < 4)
        return slot;
    size_t e = (slot - 4) / 4 + 2, sub = (slot - 4) % 4;
    uint64_t lo = (uint64_t)(4 + sub) << (e - 2);
    uint64_t width = (uint64_t)1 << (e - 2);
    return lo + width / 2;
}

void lg_tl_response(struct lg_timeline *t, uint64_t now_us, int status, uint64_t latency_us)
{
    struct lg_tl_sec *s = at(t, lg_tl_index(t, now_us));
    if (!s)
        return;
    if (status >= 200 && status < 300)
        s->ok++;
    else
        s->errors++;
    s->lat[lg_tl_slot(latency_us)]++;
}

void lg_tl_errors(struct lg_timeline *t, uint64_t now_us, uint64_t n)
{
    struct lg_tl_sec *s;
    if (n == 0 || !(s = at(t, lg_tl_index(t, now_us))))
        return;
    s->errors += (uint32_t)n;
}

void lg_tl_sent(struct lg_timeline *t, uint64_t now_us)
{
    struct lg_tl_sec *s = at(t, lg_tl_index(t, now_us));
    if (s)
        s->sent++;
}

int lg_tl_merge(struct lg_timeline *dst, const struct lg_timeline *src)
{
    dst->oom |= src->oom;
    for (size_t i = 0; i < src->used; i++) {
        const struct lg_tl_sec *a = &src->sec[i];
        struct lg_tl_sec *b = at(dst, i);
        if (!b)
            return -1;
        b->ok += a->ok;
        b->errors += a->errors;
        b->sent += a->sent;
        for (size_t k = 0; k < LG_TL_SLOTS; k++)
            b->lat[k] += a->lat[k];
    }
    return 0;
}

uint64_t lg_tl_percentile(const struct lg_tl_sec *s, double pct)
{
    uint64_t total = 0, cum = 0, want;
    for (size_t k = 0; k < LG_TL_SLOTS; k++)
        total += s->lat[k];
    if (total == 0)
        return 0;
    want = (uint64_t)ceil(pct / 100.0 * (double)total);
    if (want < 1)
        want = 1;
    for (size_t k = 0; k < LG_TL_SLOTS; k++) {
        cum += s->lat[k];
        if (cum >= want)
            return lg_tl_slot_value(k);
    }
    return lg_tl_slot_value(LG_TL_SLOTS - 1);
}
