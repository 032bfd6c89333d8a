/* Zipf ranks for a catalogue workload: rank k in 1..n with probability
 * proportional to k^-s, drawn by rejection-inversion (Hoermann & Derflinger
 * 1996, as Apache Commons RNG and numpy do): O(1) per draw, no table, so a
 * catalogue of a billion SKUs costs the same memory as one of ten. */
#ifndef LG_ZIPF_H
#define LG_ZIPF_H

#include <stdint.h>

#define LG_ZIPF_MAX_N 1000000000000ull   /* ranks stay exact in a double */
#define LG_ZIPF_MAX_S 20.0

struct lg_zipf {
    uint64_t n;          /* ranks 1..n */
    double s;            /* exponent, > 0 */
    double h_x1;         /* H(1.5) - 1: upper end of the inversion interval */
    double h_n;          /* H(n + 0.5): lower end */
    double squeeze;      /* accept without the exact test when k - x <= this */
};

/* Set z up for ranks 1..n with exponent s. Returns 0, or -1 when n is 0 or
 * above LG_ZIPF_MAX_N, or s is not in (0, LG_ZIPF_MAX_S]; z is then unset. */
int lg_zipf_init(struct lg_zipf *z, uint64_t n, double s);

/* One rank in 1..z->n; advances *rng only, through next (the caller's
 * generator, e.g. lg_rand_next: the sampler knows no template), so the same
 * rng state gives the same rank (the op log replays bodies this way). */
uint64_t lg_zipf_draw(const struct lg_zipf *z, uint64_t (*next)(uint64_t *), uint64_t *rng);

#endif
