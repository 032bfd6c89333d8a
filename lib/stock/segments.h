/* Segmented stock arithmetic: how S units are spread over K segment keys.
 * Pure functions, no I/O; the guard owns key names and locking. */
#ifndef LAB_SEGMENTS_H
#define LAB_SEGMENTS_H

#define SEG_MIN 1
#define SEG_MAX 64

/* 0 when 1 <= k <= 64 and stock >= 0, else -1. */
int seg_valid(long stock, int k);

/* Units in segment i (0-based) when `stock` is split into k segments as
 * evenly as possible: the first stock % k segments hold one more. With
 * k > stock the last k - stock segments hold 0. Returns -1 when the split
 * is invalid (see seg_valid) or i is outside 0..k-1. */
long seg_share(long stock, int k, int i);

/* Fill out[0..k-1] with every segment's share (out needs k slots).
 * Returns the number of non-empty segments, or -1 when invalid (out
 * untouched). The shares always sum to stock. */
int seg_split(long stock, int k, long *out);

/* Index of the segment visited at step `step` (0..k-1) of a walk that
 * starts at `start` and wraps around: (start + step) % k. -1 if invalid. */
int seg_walk(int start, int step, int k);

#endif
