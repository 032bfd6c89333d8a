/* Clocks, sleeps, randomness and ids shared by the services. */
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

double util_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

long long util_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void util_sleep_ms(long ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static _Thread_local uint64_t rng_state;

uint64_t util_rand(void)
{
    if (!rng_state) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        rng_state = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
                    (uint64_t)(uintptr_t)&rng_state ^ (uint64_t)pthread_self();
        if (!rng_state)
            rng_state = 0x9E3779B97F4A7C15ULL;
    }
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

long util_rand_range(long lo, long hi)
{
    if (hi <= lo)
        return lo;
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1;   /* 0 when the span is 2^64 */
    uint64_t r = span ? util_rand() % span : util_rand();
    return (long)((uint64_t)lo + r);
}

long util_backoff_ms(int attempt, long cap_ms)
{
    if (cap_ms < 1)
        cap_ms = 1;
    long base = attempt < 0 ? 1 : attempt >= 30 ? cap_ms : (1L << attempt);
    if (base > cap_ms)
        base = cap_ms;
    if (base < 1)
        base = 1;
    return util_rand_range(base / 2, base);
}

char *util_make_id(char *buf, size_t len, const char *prefix)
{
    static atomic_ullong counter;
    unsigned long long n = atomic_fetch_add(&counter, 1) + 1;
    snprintf(buf, len, "%s-%llx-%llu-%04x", prefix, (unsigned long long)util_wall_ms(),
             n, (unsigned)(util_rand() & 0xffff));
    return buf;
}
