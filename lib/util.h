/* Small helpers every module needs: clocks, bounded sleeps, per-thread
 * random numbers, unique ids. */
#ifndef LAB_UTIL_H
#define LAB_UTIL_H

#include <stddef.h>
#include <stdint.h>

double util_now(void);                 /* monotonic seconds */
long long util_wall_ms(void);          /* wall clock, ms since epoch */
void util_sleep_ms(long ms);           /* ms <= 0 returns at once */
uint64_t util_rand(void);              /* per-thread xorshift, seeded once */
/* Uniform in [lo, hi]; hi < lo returns lo. */
long util_rand_range(long lo, long hi);
/* Jittered exponential backoff for attempt n (0-based): a random value in
 * [base/2, base] with base = min(cap_ms, 1 << n). */
long util_backoff_ms(int attempt, long cap_ms);
/* "<prefix>-<ms>-<counter>-<rand>" into buf; unique per process and, via
 * the random part, across processes. Returns buf. */
char *util_make_id(char *buf, size_t len, const char *prefix);

#endif
