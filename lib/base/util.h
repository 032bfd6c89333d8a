/* The one home of clocks, bounded sleeps, per-thread random numbers,
 * jittered backoff and unique ids: every module uses these, none writes
 * its own. */
#ifndef LAB_UTIL_H
#define LAB_UTIL_H

#include <stddef.h>
#include <stdint.h>

double util_now(void);                 /* monotonic seconds */
int64_t util_now_ms(void);             /* monotonic milliseconds */
int64_t util_now_us(void);             /* monotonic microseconds */
long long util_wall_ms(void);          /* wall clock, ms since epoch */
void util_sleep_ms(long ms);           /* ms <= 0 returns at once */
/* Per-thread xorshift64*, seeded once per thread from the kernel: for
 * jitter and ids, not for secrets. */
uint64_t util_rand(void);
/* Uniform in [lo, hi]; hi < lo returns lo. */
long util_rand_range(long lo, long hi);
/* Jittered exponential backoff for attempt n (0-based): a random value in
 * [base/2, base] with base = min(cap_ms, 1 << n). */
long util_backoff_ms(int attempt, long cap_ms);
/* "<prefix>-<hex ms>-<counter>-<4 hex rand>" into buf; unique per process
 * and, via the prefix (the instance) and the random part, across processes.
 * The tail is never cut: a prefix too long for len is cut and ends with
 * ".<8 hex>", a hash of the whole prefix. Prefix bytes outside
 * [A-Za-z0-9._:-] become '_'. Only a len too small for any tail truncates.
 * Returns buf. */
char *util_make_id(char *buf, size_t len, const char *prefix);
/* A lock owner token "<instance>:<tid>:<counter>:<16 hex random>".
 * instance characters outside [A-Za-z0-9._-] become '_', cut at 40; NULL
 * or "" means "anon". Returns the length, or -1 when outlen is too small
 * (UTIL_TOKEN_MAX always suffices). Thread-safe. */
#define UTIL_TOKEN_MAX 96
int util_make_token(char *out, size_t outlen, const char *instance);
/* "<hostname>-<pid>" (hostname cut at 40) into buf: the default instance
 * name of a process. Returns buf. */
char *util_default_instance(char *buf, size_t len);

#endif
