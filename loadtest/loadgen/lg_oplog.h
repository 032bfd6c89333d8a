/* loadgen --history FILE: every request as one operation of a history (the
 * connection as its process, invoke and complete times on CLOCK_MONOTONIC,
 * the sku/qty/order_id of its body, the outcome), for a linearizability
 * checker. Each thread appends fixed-size records to its own buffer (no lock,
 * no formatting on the hot path); the file is written after join, the body
 * re-expanded from the record's seq and random state. */
#ifndef LG_OPLOG_H
#define LG_OPLOG_H

#include <stdint.h>
#include <stdio.h>

#include "lg_tmpl.h"

/* Why a request got no answer (its outcome is then indeterminate). */
enum lg_op_fail {
    LG_OP_ANSWERED = 0,
    LG_OP_READ,       /* read error or close before the answer */
    LG_OP_WRITE,      /* the request could not be written whole */
    LG_OP_TIMEOUT,    /* --timeout passed */
    LG_OP_PARSE,      /* the answer could not be parsed */
    LG_OP_IN_FLIGHT,  /* still unanswered when the run ended */
};

#define LG_OP_ERROR_LEN 32

struct lg_op {
    uint64_t invoke_ns;
    uint64_t complete_ns;     /* 0: never completed (in flight at the end) */
    uint64_t seq, rng;        /* the body's {seq} and random state before expansion */
    int64_t remaining;        /* of a 2xx answer; valid when has_remaining */
    uint32_t process;         /* connection index */
    uint16_t status;          /* HTTP status, 0 without an answer */
    uint8_t fail;             /* enum lg_op_fail */
    uint8_t has_remaining;
    char error[LG_OP_ERROR_LEN];   /* the answer's "error" code, or "" */
};

struct lg_oplog {
    struct lg_op *ops;
    size_t n, cap;
    uint64_t dropped;         /* operations not kept (out of memory) */
};

/* Start an operation; returns its index for lg_oplog_answer/_fail, or -1
 * when memory ran out (counted in dropped, the run goes on). */
long lg_oplog_begin(struct lg_oplog *l, uint32_t process, uint64_t seq, uint64_t rng,
                    uint64_t now_us);

/* The answer to operation i: its status and the first len bytes of its body
 * (for "remaining" and "error"). i < 0 is ignored. */
void lg_oplog_answer(struct lg_oplog *l, long i, uint64_t now_us, int status,
                     const char *body, size_t len);

/* Operation i ended without an answer. i < 0 is ignored. */
void lg_oplog_fail(struct lg_oplog *l, long i, uint64_t now_us, enum lg_op_fail why);

/* Append l's operations as JSON lines to out, re-expanding body (may be
 * NULL) with thread as {thread}. scratch holds body->max_len bytes.
 * Returns 0, or -1 on a write error. */
int lg_oplog_write(FILE *out, const struct lg_oplog *l, const struct lg_tmpl *body,
                   unsigned thread, char *scratch);

/* "ok", "refused" or "indeterminate": 2xx ok; 4xx and 503 (the API's
 * "nothing sold") refused, except 503 backend_unavailable, which may be a
 * COMMIT whose reply was lost; other statuses and no answer indeterminate. */
const char *lg_op_outcome(const struct lg_op *op);

/* One thread's part of the history file. */
struct lg_oplog_part {
    const struct lg_oplog *log;
    unsigned thread;          /* its {thread} */
    char *scratch;            /* body->max_len bytes */
};

/* Every part's operations into path (written whole to path.tmp, then
 * renamed: a reader never sees half a file). Returns 0, or -1 with a
 * message on stderr. */
int lg_oplog_write_file(const char *path, const struct lg_oplog_part *parts, size_t n,
                        const struct lg_tmpl *body);

/* Free the buffer (NULL is fine); l is empty after. */
void lg_oplog_free(struct lg_oplog *l);

#endif
