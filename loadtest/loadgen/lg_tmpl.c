/* Template compiler and expander (see lg_tmpl.h). */
#include "lg_tmpl.h"

#include <errno.h>
#include <stdarg.h>
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

__attribute__((format(printf, 2, 3)))
static int tmpl_fail(struct lg_tmpl *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->errstr, sizeof t->errstr, fmt, ap);
    va_end(ap);
    t->err = 1;
    return -1;
}

/* A plain decimal exponent such as 1, 1.0 or 0.85 (no sign, no e-notation:
 * the placeholder's text should read like the law it asks for). */
static int parse_exponent(const char *s, const char *end, double *out, const char **next)
{
    char buf[32];
    size_t n = 0;
    int dots = 0;
    const char *p = s;
    while (p < end && ((*p >= '0' && *p <= '9') || *p == '.') && n < sizeof buf - 1) {
        dots += *p == '.';
        buf[n++] = *p++;
    }
    buf[n] = '\0';
    if (n == 0 || dots > 1 || buf[0] == '.' || buf[n - 1] == '.')
        return -1;
    *out = strtod(buf, NULL);
    *next = p;
    return 0;
}

/* {rand:A..B}: p points at the ':' after the name */
static int parse_rand(struct lg_tmpl *t, const char *p, const char *end, size_t at,
                      struct lg_seg *s, const char **close)
{
    int64_t lo, hi;
    if (p >= end || *p != ':' || parse_i64(p + 1, end, &lo, &p) ||
        end - p < 2 || p[0] != '.' || p[1] != '.' ||
        parse_i64(p + 2, end, &hi, &p) || p >= end || *p != '}')
        return tmpl_fail(t, "malformed placeholder at byte %zu: use {rand:A..B} with integers A <= B", at);
    if (lo > hi)
        return tmpl_fail(t, "{rand:%lld..%lld} at byte %zu: lower bound above upper bound",
                         (long long)lo, (long long)hi, at);
    *s = (struct lg_seg){LG_SEG_RAND, 0, 0, lo, hi, {0}};
    t->max_len += DIGITS_I64;
    *close = p;
    return 0;
}

/* {zipf:N:S}: p points at the ':' after the name */
static int parse_zipf(struct lg_tmpl *t, const char *p, const char *end, size_t at,
                      struct lg_seg *s, const char **close)
{
    int64_t n;
    double e;
    if (p >= end || *p != ':' || parse_i64(p + 1, end, &n, &p) ||
        p >= end || *p != ':' || parse_exponent(p + 1, end, &e, &p) ||
        p >= end || *p != '}')
        return tmpl_fail(t, "malformed placeholder at byte %zu: use {zipf:N:S}, N ranks and "
                            "a decimal exponent S, e.g. {zipf:100000:1.0}", at);
    *s = (struct lg_seg){LG_SEG_ZIPF, 0, 0, 0, 0, {0}};
    if (n < 1 || lg_zipf_init(&s->zipf, (uint64_t)n, e))
        return tmpl_fail(t, "{zipf:%lld:%g} at byte %zu: N must be 1..%llu and S in (0, %g]",
                         (long long)n, e, at, (unsigned long long)LG_ZIPF_MAX_N, LG_ZIPF_MAX_S);
    t->max_len += DIGITS_U64;
    *close = p;
    return 0;
}

/* The placeholder whose name is src[i+1..*j) (known, followed by '}' or
 * ':'): fill *s and move *j to its closing '}'. Returns -1 with t->err set. */
static int parse_placeholder(struct lg_tmpl *t, const char *src, size_t len, size_t i,
                             size_t *j, struct lg_seg *s)
{
    const char *name = src + i + 1, *end = src + len, *close = src + *j;
    size_t nlen = *j - (i + 1);
    int rc = 0;
    if (nlen == 4 && !memcmp(name, "rand", 4)) {
        rc = parse_rand(t, src + *j, end, i, s, &close);
    } else if (nlen == 4 && !memcmp(name, "zipf", 4)) {
        rc = parse_zipf(t, src + *j, end, i, s, &close);
    } else if (src[*j] != '}') {
        return tmpl_fail(t, "placeholder '{%.*s}' at byte %zu takes no argument", (int)nlen, name, i);
    } else if (nlen == 3) {
        s->kind = LG_SEG_SEQ;
        t->max_len += DIGITS_U64;
        t->uses_seq = 1;
    } else if (nlen == 4) {
        s->kind = LG_SEG_UUID;
        t->max_len += 36;
    } else {
        s->kind = LG_SEG_THREAD;
        t->max_len += 10;
    }
    *j = (size_t)(close - src);
    return rc;
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
    while (i < len) {
        char ch = src[i];
        if (ch == '\\' && i + 1 < len && (src[i + 1] == '{' || src[i + 1] == '}')) {
            t->text[tl] = src[i + 1];
            if (add_seg(t, &segcap, (struct lg_seg){LG_SEG_LIT, tl, 1, 0, 0, {0}}))
                goto oom;
            tl++;
            i += 2;
            continue;
        }
        if (ch != '{') {
            t->text[tl] = ch;
            if (add_seg(t, &segcap, (struct lg_seg){LG_SEG_LIT, tl, 1, 0, 0, {0}}))
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
                    (nlen == 4 && !memcmp(name, "zipf", 4)) ||
                    (nlen == 6 && !memcmp(name, "thread", 6));
        int delim = j < len && (src[j] == '}' || src[j] == ':');
        if (nlen == 0 || (!known && !delim)) {
            t->text[tl] = ch;
            if (add_seg(t, &segcap, (struct lg_seg){LG_SEG_LIT, tl, 1, 0, 0, {0}}))
                goto oom;
            tl++;
            i++;
            continue;
        }
        if (!known) {
            snprintf(t->errstr, sizeof t->errstr,
                     "unknown placeholder '{%.*s' at byte %zu (known: seq uuid rand:A..B zipf:N:S thread; \\{ for a literal brace)",
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
        struct lg_seg s = {LG_SEG_LIT, 0, 0, 0, 0, {0}};
        if (parse_placeholder(t, src, len, i, &j, &s))
            return t;
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
        case LG_SEG_ZIPF:
            n = put_u64(num, lg_zipf_draw(&s->zipf, lg_rand_next, v->rng));
            break;
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
