/* Zipf sampler by rejection-inversion (see lg_zipf.h). The names follow
 * Apache Commons RNG's RejectionInversionZipfSampler so the two can be read
 * side by side: h is the unnormalised density x^-s, H its integral. */
#include "lg_zipf.h"

#include <math.h>

/* log1p(x)/x, with its series near 0 where the quotient loses digits */
static double log1p_over_x(double x)
{
    if (fabs(x) > 1e-8)
        return log1p(x) / x;
    return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

/* expm1(x)/x, likewise */
static double expm1_over_x(double x)
{
    if (fabs(x) > 1e-8)
        return expm1(x) / x;
    return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
}

static double zipf_h(const struct lg_zipf *z, double x)
{
    return exp(-z->s * log(x));
}

/* H(x) = (x^(1-s) - 1) / (1 - s), which tends to log(x) as s -> 1 */
static double zipf_H(const struct lg_zipf *z, double x)
{
    double lx = log(x);
    return expm1_over_x((1.0 - z->s) * lx) * lx;
}

static double zipf_H_inverse(const struct lg_zipf *z, double x)
{
    double t = x * (1.0 - z->s);
    if (t < -1.0)   /* rounding can step just past the domain's edge */
        t = -1.0;
    return exp(log1p_over_x(t) * x);
}

int lg_zipf_init(struct lg_zipf *z, uint64_t n, double s)
{
    if (n == 0 || n > LG_ZIPF_MAX_N || !(s > 0.0) || !(s <= LG_ZIPF_MAX_S))
        return -1;
    z->n = n;
    z->s = s;
    z->h_x1 = zipf_H(z, 1.5) - 1.0;
    z->h_n = zipf_H(z, (double)n + 0.5);
    z->squeeze = 2.0 - zipf_H_inverse(z, zipf_H(z, 2.5) - zipf_h(z, 2.0));
    return 0;
}

uint64_t lg_zipf_draw(const struct lg_zipf *z, uint64_t (*next)(uint64_t *), uint64_t *rng)
{
    /* the acceptance rate is above 0.9 for every n and s, so the bound only
     * guards against a NaN; rank 1 is the mode and an honest fallback */
    for (int tries = 0; tries < 1000; tries++) {
        double uniform = (double)(next(rng) >> 11) * 0x1.0p-53;
        double u = z->h_n + uniform * (z->h_x1 - z->h_n);
        double x = zipf_H_inverse(z, u);
        double kd = floor(x + 0.5);
        if (kd < 1.0)
            kd = 1.0;
        else if (kd > (double)z->n)
            kd = (double)z->n;
        if (kd - x <= z->squeeze || u >= zipf_H(z, kd + 0.5) - zipf_h(z, kd))
            return (uint64_t)kd;
    }
    return 1;
}
