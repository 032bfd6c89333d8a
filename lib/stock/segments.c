/* Segmented stock arithmetic (see segments.h). */
#include "segments.h"

int seg_valid(long stock, int k)
{
    return (k >= SEG_MIN && k <= SEG_MAX && stock >= 0) ? 0 : -1;
}

long seg_share(long stock, int k, int i)
{
    if (seg_valid(stock, k) != 0 || i < 0 || i >= k)
        return -1;
    return stock / k + (i < stock % k ? 1 : 0);
}

int seg_split(long stock, int k, long *out)
{
    int nonzero = 0;

    if (seg_valid(stock, k) != 0 || !out)
        return -1;
    for (int i = 0; i < k; i++) {
        out[i] = seg_share(stock, k, i);
        if (out[i] > 0)
            nonzero++;
    }
    return nonzero;
}

int seg_walk(int start, int step, int k)
{
    if (k < SEG_MIN || k > SEG_MAX || start < 0 || start >= k || step < 0 || step >= k)
        return -1;
    return (start + step) % k;
}
