/* The domain's vocabulary: one deduction request, its result, and the ONE
 * outcome table that says, for every outcome, its name (metrics label),
 * HTTP status, API error code and whether the client should retry later.
 * Guards fill results; the services only look them up here. */
#ifndef LAB_DEDUCT_H
#define LAB_DEDUCT_H

#include "base/util.h"

#include <stddef.h>

#define STOCK_SKU_MAX 64
#define STOCK_ID_MAX 64
/* A ledger row's `intent`: the id its writer gave the sale (redis-decr's
 * intent nonce), VARCHAR(96) in sql/006_ledger_intent.sql. */
#define STOCK_INTENT_MAX 95
/* Most requests one group commit carries (batched-update's and
 * redis-decr's; batched-update's --batch-max is bounded by it). */
#define STOCK_BATCH_MAX 256

/* One validated deduction request: what every sale has, whatever guard
 * protects it. Options of one guard (lock_ttl_ms, watchdog, fencing, ...)
 * are that guard's own: parsed by it into `opts`, opaque here. */
struct deduct_req {
    char sku[STOCK_SKU_MAX + 1];
    char order_id[STOCK_ID_MAX + 1];
    char user_id[STOCK_ID_MAX + 1];   /* the buyer; "" when not given */
    long qty;                  /* 1..1000 */
    long hold_ms;              /* 0..10000: time spent holding the guard */
    long lock_wait_ms;         /* how long the sale may wait for a lock (a
                                * guard's, or MySQL's row locks); part of
                                * the deadline */
    double deadline;           /* util_now() by which the request must have
                                * finished or given up; 0 = none. Set by the
                                * service; every wait and retry honours it. */
    const void *opts;          /* the chosen guard's own options (guards/
                                * guard.h: guard_opts); NULL = its defaults */
    /* The write's fence, set by a lock guard on its copy of the request,
     * never by the body: */
    int fencing;               /* the write must be fenced: a token is due */
    unsigned long long fence;  /* the token the guard obtained with its lock;
                                * 0 = none (no fenced write) */
    /* Purchase limits (stock/limits.h): */
    int limit_separate;        /* body "limit_check": "separate" (the
                                * field's defect: the count checked apart
                                * from the sale's transaction); 0 atomic */
    long long limit;           /* the SKU's limit_per_user as the entry
                                * point read it, only for limit_check
                                * "separate" (its precheck) or a guard that
                                * refuses limited SKUs; else 0: the guard's
                                * own statement reads the limit */
};

/* 1 when the request's deadline has passed (never when it has none). */
static inline int deduct_expired(const struct deduct_req *r)
{
    return r->deadline > 0 && util_now() >= r->deadline;
}

/* Seconds left before the deadline (a large number when there is none,
 * 0 when passed). */
static inline double deduct_time_left(const struct deduct_req *r)
{
    if (r->deadline <= 0)
        return 1e9;
    double left = r->deadline - util_now();
    return left > 0 ? left : 0;
}

/* X-macro: outcome, name, HTTP status, error code (NULL: success), Retry-After. */
#define DEDUCT_OUTCOMES(X)                                                   \
    X(DEDUCT_SOLD,            "sold",                200, NULL,                  0) \
    X(DEDUCT_DUPLICATE,       "duplicate",           200, NULL,                  0) \
    X(DEDUCT_OUT_OF_STOCK,    "out_of_stock",        409, "out_of_stock",        0) \
    X(DEDUCT_ORDER_CONFLICT,  "order_id_conflict",   409, "order_id_conflict",   0) \
    X(DEDUCT_SKU_BUSY,        "sku_busy",            409, "sku_busy",            0) \
    X(DEDUCT_FENCED,          "fenced",              409, "fenced",              0) \
    X(DEDUCT_LIMIT_EXCEEDED,  "limit_exceeded",      409, "limit_exceeded",      0) \
    X(DEDUCT_BAD_REQUEST,     "bad_request",         400, "bad_request",         0) \
    X(DEDUCT_UNKNOWN_SKU,     "unknown_sku",         404, "unknown_sku",         0) \
    X(DEDUCT_LOCK_TIMEOUT,    "lock_timeout",        503, "lock_timeout",        1) \
    X(DEDUCT_LEASE_EXPIRED,   "lease_expired",       503, "lease_expired",       1) \
    X(DEDUCT_RETRY_EXHAUSTED, "retry_exhausted",     503, "retry_exhausted",     1) \
    X(DEDUCT_UNAVAILABLE,     "backend_unavailable", 503, "backend_unavailable", 1) \
    X(DEDUCT_DEADLINE,        "deadline_exceeded",   503, "deadline_exceeded",   1) \
    X(DEDUCT_IN_PROGRESS,     "in_progress",         503, "order_in_progress",   1) \
    X(DEDUCT_INTERNAL,        "internal",            500, "internal",            0)

enum deduct_outcome {
#define DEDUCT_ENUM(id, name, status, code, retry) id,
    DEDUCT_OUTCOMES(DEDUCT_ENUM)
#undef DEDUCT_ENUM
};

struct deduct_outcome_info {
    const char *name;          /* metrics label: "sold", "lock_timeout", ... */
    int http_status;
    const char *error_code;    /* API error code; NULL for the 200 outcomes */
    int retry_after;           /* 1: answer with Retry-After: 1 */
};

/* The table row of an outcome; an out-of-range value gets the internal row.
 * Never NULL. */
const struct deduct_outcome_info *deduct_outcome_info(enum deduct_outcome o);

struct deduct_res {
    enum deduct_outcome outcome;
    long long remaining;       /* stock after this sale (or the first sale) */
    long qty;                  /* units of the recorded sale */
    char guard[32];            /* for duplicates: the guard of the first sale */
    char instance[64];         /* for duplicates: where it was first sold */
    int retries;               /* optimistic CAS misses, deadlock retries */
    double lock_wait_s;        /* time spent acquiring the guard */
    char detail[160];          /* human sentence for errors */
    long long refused_limit;   /* > 0: the guard refused the SKU for its
                                * purchase limit (it enforces none); the
                                * entry point words the 400 (naming the
                                * guards that do), which a guard file cannot
                                * without a call circle through the registry */
};

struct db_conn;

/* What one deduction runs with, filled by the service per request: the
 * calling thread's MySQL connection and the instance-wide policy. */
struct deduct_env {
    struct db_conn *db;
    const char *instance;      /* written into the ledger and answers */
    long max_retries;          /* optimistic / deadlock retry bound */
    long default_ttl_ms;       /* lock lease when the request gives none */
    long default_wait_ms;      /* lock wait of a release (it has no body
                                * options): the instance's lock_wait_ms */
};

#endif
