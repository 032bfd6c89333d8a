/* The guard interface: every way of protecting a deduction is one table of
 * function pointers in its own guard_*.c file; the service calls
 * guard_deduct() and never switches on the guard's name. */
#ifndef LAB_GUARD_H
#define LAB_GUARD_H

#include <stddef.h>

struct db_conn;

#define GUARD_SKU_MAX 64
#define GUARD_ID_MAX 64

enum lock_release { RELEASE_TOKEN_LUA, RELEASE_PLAIN_DEL, RELEASE_GET_THEN_DEL };
enum lock_acquire { ACQUIRE_SET_NX_PX, ACQUIRE_SETNX_THEN_EXPIRE };

/* One validated deduction request. */
struct deduct_req {
    char sku[GUARD_SKU_MAX + 1];
    char order_id[GUARD_ID_MAX + 1];
    long qty;                  /* 1..1000 */
    long hold_ms;              /* 0..10000: time spent holding the guard */
    long lock_wait_ms;         /* how long a lock guard may wait */
    long lock_ttl_ms;          /* lock lease; 0 = the instance default */
    int watchdog;              /* renew the lease while held */
    enum lock_release release;
    enum lock_acquire acquire;
};

enum deduct_outcome {
    DEDUCT_SOLD,               /* 200 */
    DEDUCT_DUPLICATE,          /* 200 with duplicate:true, first result echoed */
    DEDUCT_OUT_OF_STOCK,       /* 409 */
    DEDUCT_UNKNOWN_SKU,        /* 404 */
    DEDUCT_LOCK_TIMEOUT,       /* 503 */
    DEDUCT_RETRY_EXHAUSTED,    /* 503 */
    DEDUCT_UNAVAILABLE,        /* 503 backend_unavailable */
    DEDUCT_INTERNAL,           /* 500 */
};

struct deduct_res {
    enum deduct_outcome outcome;
    long long remaining;       /* stock after this sale (or the first sale) */
    long qty;                  /* units of the recorded sale */
    char guard[32];            /* for duplicates: the guard of the first sale */
    char instance[64];         /* for duplicates: where it was first sold */
    int retries;               /* optimistic CAS misses, deadlock retries */
    double lock_wait_s;        /* time spent acquiring the guard */
    char detail[160];          /* human sentence for errors */
};

/* What a guard may use. Filled by the service per request; `db` is the
 * calling thread's connection. */
struct guard_env {
    struct db_conn *db;
    const char *instance;
    long max_retries;          /* optimistic / deadlock retry bound */
    long default_ttl_ms;       /* lock lease when the request gives none */
    const char *redis_host;
    long redis_port;
    const char *redlock_nodes; /* "host:port,host:port,..." */
};

struct guard {
    const char *name;
    const char *how;           /* one line: what it does per deduction */
    const char *expect;        /* one line: expected result with 2+ instances */
    int safe_across_instances; /* 1 when it must never oversell */
    /* Deduct under this guard. The ledger has already been checked for
     * req->order_id. Fills res->outcome and returns 0; never blocks past
     * its bounds. */
    int (*deduct)(const struct guard_env *env, const struct deduct_req *req,
                  struct deduct_res *res);
    /* Optional: (re)seed side state (Redis keys) when a SKU is seeded.
     * Returns 0, or -1 with res->detail set (backend unavailable). */
    int (*seed)(const struct guard_env *env, const char *sku, long long stock,
                int segments, struct deduct_res *res);
    /* Optional: give `qty` units back to side state on release. */
    int (*release)(const struct guard_env *env, const char *sku, long qty,
                   struct deduct_res *res);
    /* Optional: add this guard's side state of `sku` to a JSON object
     * (GET /inventory/{sku}); `out` is a json_t *. */
    int (*describe)(const struct guard_env *env, const char *sku, void *out);
};

/* Lookup by name; NULL when unknown. */
const struct guard *guard_find(const char *name);
/* All guards in table order; *n receives the count. */
const struct guard *const *guard_all(size_t *n);
/* "none, mutex, ..." for error messages; static buffer, built once. */
const char *guard_names(void);

/* Run a deduction: idempotency check on order_id, then the guard, with
 * metrics for outcome, lock wait and retries. */
int guard_deduct(const struct guard *g, const struct guard_env *env,
                 const struct deduct_req *req, struct deduct_res *res);

/* The unguarded read-modify-write every lock guard protects: read stock,
 * check, hold req->hold_ms, then write the computed value and the ledger
 * row in one transaction. Lock guards call it while holding their lock. */
int guard_rmw(const char *guard_name, const struct guard_env *env,
              const struct deduct_req *req, struct deduct_res *res);

/* Record a sale whose check happened outside MySQL (Redis): in one
 * transaction, stock -= qty and the ledger row. Fills res (SOLD, DUPLICATE
 * or a failure) and returns 0 only when sold: on anything else the caller
 * gives its side state back. */
int guard_record_relative(const char *guard_name, const struct guard_env *env,
                          const struct deduct_req *req, struct deduct_res *res);

/* After the ledger's unique key refused our insert (DB_EDUP): answer with
 * the first sale of req->order_id. */
void guard_conflict_duplicate(const struct guard_env *env,
                              const struct deduct_req *req, struct deduct_res *res);

/* Map a db_run()/db_* error into res (unavailable, retry, internal). */
void guard_db_failure(struct db_conn *db, int rc, struct deduct_res *res);

#endif
