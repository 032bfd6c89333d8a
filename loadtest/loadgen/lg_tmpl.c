/* Template compiler and expander (see lg_tmpl.h). */
#include "lg_tmpl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIGITS_U64 20
#define DIGITS_I64 20

uint64_t lg_rand_seed(uint64_t x)
{
    /* splitmix64 finaliser spreads small seeds (thread ids) over the state */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x ? x : 0x2545f4914f6cdd1dull;
}

uint64_t lg_rand_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

void lg_uuid4(uint64_t *rng, char out[36])
{
    static const char hex[] = "0123456789abcdef";
    uint8_t b[16];
    uint64_t a = lg_rand_next(rng), c = lg_rand_next(rng);
    memcpy(b, &a, 8);
    memcpy(b + 8, &c, 8);
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);   /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);   /* RFC 4122 variant */
    size_t o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
}

static int add_seg(struct lg_tmpl *t, size_t *cap, struct lg_seg s)
{
    if (s.kind == LG_SEG_LIT && s.len == 0)
        return 0;
    /* merge adjacent literals so expansion is one memcpy per run of text */
    if (s.kind == LG_SEG_LIT && t->nsegs &&
        t->segs[t->nsegs - 1].kind == LG_SEG_LIT &&
        t->segs[t->nsegs - 1].off + t->segs[t->nsegs - 1].len == s.off) {
        t->segs[t->nsegs - 1].len += s.len;
        return 0;
    }
    if (t->nsegs == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        struct lg_seg *n = realloc(t->segs, ncap * sizeof *n);
        if (!n)
            return -1;
        t->segs = n;
        *cap = ncap;
    }
    t->segs[t->nsegs++] = s;
    return 0;
}

static int parse_i64(const char *s, const char *end, int64_t *out, const char **next)
{
    char buf[32];
    size_t n = 0;
    const char *p = s;
    if (p < end && (*p == '-' || *p == '+'))
        buf[n++] = *p++;
    while (p < end && *p >= '0' && *p <= '9' && n < sizeof buf - 1)
        buf[n++] = *p++;
    buf[n] = '\0';
    if (n == 0 || buf[n - 1] < '0' || buf[n - 1] > '9')
        return -1;
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno)
        return -1;
    *out = v;
    *next = p;
    return 0;
}

struct lg_tmpl *lg_tmpl_compile(const char *src, size_t len)
{
    struct lg_tmpl *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->text = malloc(len + 1);
    if (!t->text)
        goto oom;
    size_t segcap = 0, tl = 0, i = 0;
    const char *end = src + len;
    while (i < len) {
        char ch = src[i];
        if (ch == '\\' && i + 1 < len && (src[i + 1] == '{' || src[i + 1] == '}')) {
            t->text[tl] = src[i + 1];
            if (add_seg(t, &segcap, (struct lg_seg){LG_SEG_LIT, tl, 1, 0, 0}))
                goto oom;
            tl++;
            i += 2;
            continue;
        }
        if (ch != '{') {
            t->text[tl] = ch;
            if (add_seg(t, &segcap, (struct lg_seg){LG_SEG_LIT, tl, 1, 0, 0}))
                goto oom;
            tl++;
            i++;
            continue;
        }
        /* '{' followed by a lowercase name then '}' or ':' is a placeholder;
         * anything else ('{"', '{ ', '{}') is literal JSON or text. */
        size_t j = i + 1;
        while (j < len && src[j] >= 'a' && src[j] <= 'z')
            j++;
        size_t nlen = j - (i + 1);
        const char *name = src + i + 1;
        int known = (nlen == 3 && !memcmp(name, "seq", 3)) ||
                    (nlen == 4 && !memcmp(name, "uuid", 4)) ||
                    (nlen == 4 && !memcmp(name, "rand", 4)) ||
                    (nlen == 6 && !memcmp(name, "thread", 6));
        int delim = j < len && (src[j] == '}' || src[j] == ':');
        if (nlen == 0 || (!known && !delim)) {
            t->text[tl] = ch;
            if (add_seg(t, &segcap, (struct lg_seg){LG_SEG_LIT, tl, 1, 0, 0}))
                goto oom;
            tl++;
            i++;
            continue;
        }
        if (!known) {
            snprintf(t->errstr, sizeof t->errstr,
                     "unknown placeholder '{%.*s' at byte %zu (known: seq uuid rand:A..B thread; \\{ for a literal brace)",
                     (int)(nlen > 32 ? 32 : nlen), name, i);
            t->err = 1;
            return t;
        }
        if (!delim) {
            snprintf(t->errstr, sizeof t->errstr,
                     "unterminated placeholder '{%.*s' at byte %zu", (int)nlen, name, i);
            t->err = 1;
            return t;
        }
        struct lg_seg s = {LG_SEG_LIT, 0, 0, 0, 0};
        if (nlen == 4 && !memcmp(name, "rand", 4)) {
            const char *p = src + j;
            int64_t lo, hi;
            if (*p != ':' || parse_i64(p + 1, end, &lo, &p) ||
                end - p < 2 || p[0] != '.' || p[1] != '.' ||
                parse_i64(p + 2, end, &hi, &p) || p >= end || *p != '}') {
                snprintf(t->errstr, sizeof t->errstr,
                         "malformed placeholder at byte %zu: use {rand:A..B} with integers A <= B", i);
                t->err = 1;
                return t;
            }
            if (lo > hi) {
                snprintf(t->errstr, sizeof t->errstr,
                         "{rand:%lld..%lld} at byte %zu: lower bound above upper bound",
                         (long long)lo, (long long)hi, i);
                t->err = 1;
                return t;
            }
            s = (struct lg_seg){LG_SEG_RAND, 0, 0, lo, hi};
            t->max_len += DIGITS_I64;
            j = (size_t)(p - src);
        } else {
            if (src[j] != '}') {
                snprintf(t->errstr, sizeof t->errstr,
                         "placeholder '{%.*s}' at byte %zu takes no argument", (int)nlen, name, i);
                t->err = 1;
                return t;
            }
            if (nlen == 3) {
                s.kind = LG_SEG_SEQ;
                t->max_len += DIGITS_U64;
                t->uses_seq = 1;
            } else if (nlen == 4) {
                s.kind = LG_SEG_UUID;
                t->max_len += 36;
            } else {
                s.kind = LG_SEG_THREAD;
                t->max_len += 10;
            }
        }
        if (add_seg(t, &segcap, s))
            goto oom;
        t->dynamic = 1;
        i = j + 1;
    }
    t->text[tl] = '\0';
    t->max_len += tl;
    return t;
oom:
    lg_tmpl_free(t);
    return NULL;
}

void lg_tmpl_free(struct lg_tmpl *t)
{
    if (!t)
        return;
    free(t->text);
    free(t->segs);
    free(t);
}

/* Decimal digits of v into out (no NUL), returns length. */
static size_t put_u64(char *out, uint64_t v)
{
    char tmp[DIGITS_U64];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t k = 0; k < n; k++)
        out[k] = tmp[n - 1 - k];
    return n;
}

long lg_tmpl_expand(const struct lg_tmpl *t, const struct lg_tmpl_vars *v,
                    char *out, size_t cap)
{
    size_t o = 0;
    char num[DIGITS_I64 + 1];
    for (size_t i = 0; i < t->nsegs; i++) {
        const struct lg_seg *s = &t->segs[i];
        const char *src = num;
        size_t n;
        switch (s->kind) {
        case LG_SEG_LIT:
            src = t->text + s->off;
            n = s->len;
            break;
        case LG_SEG_SEQ:
            n = put_u64(num, v->seq);
            break;
        case LG_SEG_THREAD:
            n = put_u64(num, v->thread);
            break;
        case LG_SEG_RAND: {
            uint64_t span = (uint64_t)s->hi - (uint64_t)s->lo + 1;
            uint64_t r = lg_rand_next(v->rng);
            int64_t x = (int64_t)((uint64_t)s->lo + (span ? r % span : r));
            if (x < 0) {
                num[0] = '-';
                n = 1 + put_u64(num + 1, (uint64_t)0 - (uint64_t)x);
            } else {
                n = put_u64(num, (uint64_t)x);
            }
            break;
        }
        case LG_SEG_UUID:
            if (cap - o < 36)
                return -1;
            lg_uuid4(v->rng, out + o);
            o += 36;
            continue;
        default:
            return -1;
        }
        if (cap - o < n)
            return -1;
        memcpy(out + o, src, n);
        o += n;
    }
    return (long)o;
}

size_t lg_put_dec(char *out, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t k = 0; k < n; k++)
        out[k] = tmp[n - 1 - k];
    return n;
}
