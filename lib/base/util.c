/* Clocks, sleeps, randomness, backoff, ids and tokens (see util.h). */
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

double util_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t util_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t util_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
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

uint64_t util_rand(void)
{
    static _Thread_local uint64_t s;
    if (s == 0) {
        if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s)
            s = (uint64_t)util_now_us() ^ ((uint64_t)gettid() << 32);
        if (s == 0)
            s = 0x9e3779b97f4a7c15ULL;
    }
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dULL;
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
    if (len == 0)
        return buf;
    /* The tail is what makes an id unique: it is never cut. A prefix too
     * long for the rest is cut and ends with a hash of all of it, so two
     * prefixes that differ only at the end stay different. */
    char tail[64];
    int tl = snprintf(tail, sizeof tail, "-%llx-%llu-%04x", (unsigned long long)util_wall_ms(),
                      n, (unsigned)(util_rand() & 0xffff));
    size_t plen = strlen(prefix), room = len - 1 > (size_t)tl ? len - 1 - (size_t)tl : 0;
    size_t keep = plen <= room ? plen : room > 9 ? room - 9 : 0;
    size_t at = 0;
    for (; at < keep; at++) {   /* ids are identifiers: [A-Za-z0-9._:-] */
        char ch = prefix[at];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                 (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == ':' || ch == '-';
        buf[at] = ok ? ch : '_';
    }
    if (keep < plen && room > 9) {
        uint32_t h = 2166136261u;   /* FNV-1a over the whole prefix */
        for (size_t i = 0; i < plen; i++)
            h = (h ^ (unsigned char)prefix[i]) * 16777619u;
        at += (size_t)snprintf(buf + at, len - at, ".%08x", (unsigned)h);
    }
    snprintf(buf + at, len - at, "%s", tail);   /* cut only when len cannot hold any id */
    return buf;
}

int util_make_token(char *out, size_t outlen, const char *instance)
{
    static atomic_ullong counter;
    char inst[41];
    size_t n = 0;
    uint64_t rnd;

    if (!instance || !*instance)
        instance = "anon";
    for (; instance[n] && n < sizeof inst - 1; n++) {
        char ch = instance[n];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                 (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        inst[n] = ok ? ch : '_';
    }
    inst[n] = '\0';
    /* Tokens tell holders apart across processes: kernel randomness first. */
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = util_rand();
    unsigned long long cnt = atomic_fetch_add(&counter, 1) + 1;
    int len = snprintf(out, outlen, "%s:%d:%llu:%016" PRIx64, inst, (int)gettid(), cnt, rnd);
    if (len < 0 || (size_t)len >= outlen)
        return -1;
    return len;
}

char *util_default_instance(char *buf, size_t len)
{
    char host[64];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = '\0';
    snprintf(buf, len, "%.40s-%d", host, (int)getpid());
    return buf;
}
