/* Request templates: text compiled once into literal and placeholder
 * segments, expanded per request into a caller buffer without allocating.
 * Placeholders: {seq} {uuid} {rand:A..B} {zipf:N:S} {thread}; \{ and \} are literal
 * braces; any other '{' (JSON objects) is literal text. */
#ifndef LG_TMPL_H
#define LG_TMPL_H

#include <stddef.h>
#include <stdint.h>

#include "lg_zipf.h"

enum lg_seg_kind { LG_SEG_LIT, LG_SEG_SEQ, LG_SEG_UUID, LG_SEG_RAND, LG_SEG_ZIPF,
                   LG_SEG_THREAD };

struct lg_seg {
    enum lg_seg_kind kind;
    size_t off, len;     /* LIT: bytes in lg_tmpl.text */
    int64_t lo, hi;      /* RAND: inclusive bounds */
    struct lg_zipf zipf; /* ZIPF: ranks 1..N, exponent S */
};

struct lg_tmpl {
    int err;             /* 0, or nonzero with errstr set */
    char errstr[128];
    char *text;          /* literal bytes, escapes removed */
    struct lg_seg *segs;
    size_t nsegs;
    size_t max_len;      /* upper bound of any expansion */
    int dynamic;         /* any placeholder at all */
    int uses_seq;
};

/* Per-request values. seq is one value per request (the same in path and
 * body); {uuid}, {rand} and {zipf} draw from *rng at each occurrence. */
struct lg_tmpl_vars {
    uint64_t seq;
    unsigned thread;
    uint64_t *rng;       /* per-thread state for lg_rand_next */
};

/* Compile len bytes of src. Returns NULL only when out of memory; otherwise
 * check t->err (unknown or malformed placeholder, with the byte offset in
 * errstr). Free with lg_tmpl_free. */
struct lg_tmpl *lg_tmpl_compile(const char *src, size_t len);

/* Free a template; NULL is fine. */
void lg_tmpl_free(struct lg_tmpl *t);

/* Expand into out[cap] (no NUL added). Returns the number of bytes written,
 * or -1 when cap is too small, which cannot happen if cap >= t->max_len. */
long lg_tmpl_expand(const struct lg_tmpl *t, const struct lg_tmpl_vars *v,
                    char *out, size_t cap);

/* Write v in decimal to out (no NUL; at most 20 bytes); returns the length. */
size_t lg_put_dec(char *out, uint64_t v);

/* xorshift64* step; state must be nonzero (lg_rand_seed makes it so). */
uint64_t lg_rand_next(uint64_t *state);
uint64_t lg_rand_seed(uint64_t x);

/* Write a random version-4 UUID (36 chars, lowercase, no NUL) to out. */
void lg_uuid4(uint64_t *rng, char out[36]);

#endif
