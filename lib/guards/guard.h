/* The guard interface: every way of protecting a deduction is one entry of
 * lib/guards/ that defines one `struct guard`, listed once in guard_list.h:
 * a file guard_NAME.c, or, for a guard with private helpers, a folder
 * NAME/ holding guard_NAME.c and them (redis_stream/, redis_decr/,
 * batched_update/); lib/guards/core/ holds only what several guards share.
 * The service calls the entry points at the bottom (guard_deduct,
 * guard_seed, guard_release, ...) and never switches on a guard's name,
 * like redis's ae.c calling the aeApi* of ae_epoll.c.
 *
 * A guard owns what it needs: its option rows (merged into the inventory's
 * --help and environment twins), its connections (init/fini), and the side
 * state it keeps next to MySQL (its mirror: seed/release/describe). */
#ifndef LAB_GUARD_H
#define LAB_GUARD_H

#include "base/config.h"
#include "stock/cart.h"
#include "stock/deduct.h"
#include "stock/txn.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

struct db_conf;
struct guard;
struct redis_shared;

/* What the process gives every guard's init: plain objects the registry
 * owns, valid from init until after fini. A guard keeps the pointers it
 * needs. */
struct guard_backends {
    const char *instance;            /* written into ledgers, lock tokens */
    const struct db_conf *db;        /* MySQL settings, for a guard's own
                                      * background connections; NULL = none */
    struct redis_shared *redis;      /* the shared Redis server (pool + lock
                                      * client, guards/core/redis_shared.h);
                                      * NULL unless the guard has GUARD_USES_REDIS */
};

/* ---- request options -------------------------------------------------- */

/* One body field a guard accepts beyond the sale's own (stock/request.h),
 * like a config row: name, type, bounds, where it goes in the guard's own
 * options struct. The 400 texts follow from the row: "NAME must be an
 * integer", "NAME must be LO..HI, got X", "NAME must be true or false",
 * "NAME must be " + choices(). */
enum guard_field_type {
    GUARD_FIELD_INT,           /* JSON integer lo..hi, stored as long */
    GUARD_FIELD_BOOL,          /* true/false, stored as int 0/1 */
    GUARD_FIELD_CHOICE,        /* a string choice(s) maps to an int */
};

struct guard_field {
    const char *name;          /* JSON key: "lock_ttl_ms" */
    enum guard_field_type type;
    size_t offset;             /* into the guard's options struct */
    long long lo, hi;          /* INT bounds */
    int (*choice)(const char *s, int *out);   /* CHOICE: 0 and *out, or -1 */
    const char *(*choices)(void);             /* CHOICE: "a | b" for the 400 */
};

/* Storage for any guard's parsed options (a guard's opts_size fits). */
#define GUARD_OPTS_MAX 64
struct guard_opts {
    union {
        max_align_t align;
        unsigned char bytes[GUARD_OPTS_MAX];
    } u;
};

#define GUARD_FACTS_MAX 8
#define GUARD_FACT_VALUES 64

/* One fact a guard reports about a SKU's side state (GET /inventory/{sku}):
 * a number, or a list of numbers. */
struct guard_fact {
    const char *name;          /* JSON key: "redis_stock", "segments" */
    int is_list;               /* 1: values[0..n-1] as an array */
    int n;
    long long values[GUARD_FACT_VALUES];
};

struct guard_facts {
    int n;
    struct guard_fact fact[GUARD_FACTS_MAX];
};

/* A guard's Redis side state of one SKU, for the audit (see `side`). */
struct guard_side {
    int has_stock;             /* 0: no stock in Redis (never seeded, being
                                * reconciled): no drift to report */
    long long stock;           /* the units Redis would still sell */
    long long pending, pending_units; /* answered, not in MySQL yet */
    long long in_flight_units; /* decided in Redis, being written to MySQL
                                * by a live request (redis-decr) */
    long long stale_intents;   /* past their write deadline, not settled:
                                * shown as drift (redis-decr) */
    long long flush_seq;       /* moves whenever sales move to MySQL */
    int flushing;              /* 1: a move may be committing right now */
    long long held;            /* units of the guard's own holds (live or
                                * past their deadline, not swept): out of
                                * `stock`, still in MySQL's */
    long long expired_unswept; /* of those, holds past their deadline */
};

/* Work run while a guard's lock is held (see struct guard's `locked`):
 * fills res and returns what the caller of `locked` should see. */
typedef int (*guard_work_fn)(void *ctx, const struct deduct_env *env,
                             const struct deduct_req *req, struct deduct_res *res);

/* ---- the guard's description (GET /guards, core/guard_doc.c) ---------- */

/* One metric family a guard exports: registered with lib/base/metrics at
 * guard_init_all (its # HELP and # TYPE), served by GET /guards. */
struct guard_metric {
    const char *name, *type, *help;
    const char *labels;        /* its label names, "guard,outcome"; "" none */
};

/* What a reader is told about a guard, written once in its own file. Its
 * capabilities (takes a lease, keeps stock in Redis, ...) are not written
 * here: guard_doc.c derives them from the guard's fields and hooks. */
struct guard_doc {
    const char *needs;         /* the backends it needs: "Redis (+ Sentinel)" */
    const char *use_when;      /* when to choose it */
    const char *breaks;        /* what breaks it (a fault, a misuse) */
    const char *origin;        /* the seed passage or peer it comes from */
    const char *const *steps;  /* how it works, sentences; NULL-terminated */
    const char *statements;    /* what one deduction runs, lines */
    const char *code;          /* the file that implements it */
    const char *lock_home;     /* lock guards: where the lock lives ("redis",
                                * "redis-quorum", "mysql", "process",
                                * "zookeeper", "etcd"); NULL: no lock */
    const struct guard_metric *metrics;   /* its own families */
    size_t nmetrics;
};

/* The yes/no facts of a guard, bits of struct guard's flags. */
enum guard_flag {
    /* it must never oversell, with any number of instances */
    GUARD_SAFE_ACROSS_INSTANCES = 1u << 0,
    /* its ledger insert answers a repeated order id itself (as
     * guard_deduct's check would), so guard_deduct skips the ledger read
     * before it: one round trip less */
    GUARD_OWN_IDEMPOTENCY = 1u << 1,
    /* the guard works on the shared Redis server; init receives it in
     * b->redis (its health and metrics are the registry's, once) */
    GUARD_USES_REDIS = 1u << 2,
    /* deduct answers from the guard's own backend (write-behind,
     * redis-stream) and checks order_id itself (its own ledger read, which
     * it skips while MySQL fails); the entry point then skips the ledger
     * read and the session setup, and env->db may be NULL: no MySQL write
     * on the request path, and MySQL down does not stop its sales */
    GUARD_NO_MYSQL_DEDUCT = 1u << 3,
    /* the guard does not enforce purchase limits (its count would have
     * to move with its Redis stock or its group commit): a sale of a SKU
     * with limit_per_user under it is a 400 naming the guards that do
     * (core/limit_gate.c), never a sale past the limit. The entry point
     * reads no limit for a guard with GUARD_NO_MYSQL_DEDUCT: such a guard
     * refuses a limited SKU itself (redis-stream: its sale scripts read
     * the limit's mirror) */
    GUARD_NO_PURCHASE_LIMITS = 1u << 4,
    /* with GUARD_NO_PURCHASE_LIMITS: the guard refuses a limited SKU itself,
     * from a read or write of the row its deduction makes anyway
     * (batched-update: its batch's conditional write matches unlimited SKUs
     * only, its locking read brings the limit), so the entry point reads no
     * limit for it */
    GUARD_LIMITS_IN_DEDUCT = 1u << 5,
};
#define GUARD_FLAGS_ALL 0x3fu      /* every bit above */

/* The hooks of the guards that mirror a SKU's stock in Redis next to
 * MySQL (redis-decr, redis-stream, segmented), struct guard's `mirror`:
 * the side state they seed, give back, describe and let the audit read.
 * A guard without a mirror (NULL) keeps its stock in MySQL alone. */
struct hold_reserve_req;
struct hold_answer;

struct guard_mirror {
    /* Optional, guards that keep stock in Redis and hold it there (holds
     * of their own, services/API.md "Holds"): reserve, confirm, release
     * and the sweep's batch, each deciding in the guard's backend. They
     * return 0 with a->result (HOLD_UNKNOWN_ORDER: not this guard's), or
     * -1 with a->res; sweep: how many it gave back, or -1. */
    int (*hold_reserve)(const struct guard *self, const struct deduct_env *env,
                        const struct hold_reserve_req *r, struct hold_answer *a);
    int (*hold_confirm)(const struct guard *self, const struct deduct_env *env,
                        const char *order_id, struct hold_answer *a);
    int (*hold_release)(const struct guard *self, const struct deduct_env *env,
                        const char *order_id, struct hold_answer *a);
    int (*hold_sweep)(const struct guard *self, int max);
    /* Optional: (re)seed side state (Redis keys) when a SKU is seeded.
     * Returns 0, or -1 with res->detail set (backend unavailable). */
    int (*seed)(const struct guard *self, const struct deduct_env *env, const char *sku,
                long long stock, int segments, struct deduct_res *res);
    /* Optional: give `qty` units back to side state on release. Returns 0,
     * or -1 with res->detail set. */
    int (*release)(const struct guard *self, const struct deduct_env *env, const char *sku,
                   long qty, struct deduct_res *res);
    /* Optional: add facts about this guard's side state of `sku`. Returns
     * 0, or -1 when the backend cannot be read (best effort). */
    int (*describe)(const struct guard *self, const char *sku, struct guard_facts *out);
    /* Optional, guards that keep stock in Redis: read the SKU's side
     * state in one Redis round trip (one script: the fields agree with
     * each other). Returns 0, or -1 when Redis cannot be read. */
    int (*side)(const struct guard *self, const char *sku, struct guard_side *out);
    /* Optional, guards whose sales in flight are intents that outlive their
     * MySQL commit for a moment (redis-decr): `side`, read by the audit
     * after its MySQL figures, inside the transaction that read them (db,
     * its snapshot), with in_flight_units counting only the intents whose
     * sale that snapshot does not hold, and flush_seq moving whenever an
     * intent goes. Returns 0, or -1 when Redis or MySQL cannot be read. */
    int (*side_in_snapshot)(const struct guard *self, struct db_conn *db, const char *sku,
                            struct guard_side *out);
    /* Optional, guards whose side state can hold work of requests that
     * died (redis-decr's intents past their write deadline): settle it for
     * sku, asking MySQL (db) what landed, so the audit reads the side state
     * as it stands once things settle, not as it stands until the SKU's
     * next sale. Best effort: returns 0, or -1 when a backend could not be
     * reached (what is left unsettled shows as drift). */
    int (*settle)(const struct guard *self, struct db_conn *db, const char *sku);
    /* Optional, guards with `settle`: the SKU's last settlements (what,
     * when, by whom, with what outcome), newest first, as a JSON array
     * text into buf (len bytes), for the audit to show why its Redis
     * stock moved. Returns 0, or -1 when it cannot be read ("[]"). */
    int (*settled)(const struct guard *self, const char *sku, char *buf, size_t len);
    /* Optional: sales of sku answered but not yet in MySQL (write-behind):
     * *entries sales, *units units. Returns 0, or -1 when the backend
     * cannot be read. */
    int (*pending)(const struct guard *self, const char *sku, long long *entries,
                   long long *units);
    /* Optional: 1 when order_id is a sale answered by this guard and still
     * queued for MySQL (a release must wait for it), 0 when not, -1 when
     * the backend cannot be read. */
    int (*queued)(const struct guard *self, const char *order_id);
    /* Optional, write-behind guards: on=1 holds off the commits of their
     * flushes for a short while (bounded by the guard) so an audit can
     * read Redis and MySQL as one snapshot; on=0 lets them go. Returns 1
     * held, 0 not now (a flush is committing: retry soon), -1 when the
     * backend cannot be reached. */
    int (*freeze)(const struct guard *self, int on);
};

struct guard {
    const char *name;
    const char *how;           /* one line: what it does per deduction */
    const char *expect;        /* one line: expected result with 2+ instances */
    const struct guard_doc *doc; /* the rest of its description (GET /guards) */
    unsigned flags;            /* enum guard_flag bits; read with guard_has */

    /* Optional option rows; offsets into options_conf, the guard's own
     * config struct. A shared backend's rows (the Redis address) are the
     * backend's, listed once by the registry, not the guard's. */
    const struct cfg_opt *options;
    size_t noptions;
    void *options_conf;

    /* Optional: the body fields this guard accepts beyond the sale's own,
     * parsed by guard_parse_opts into a struct of its own (opts_size
     * bytes, opts_default when the body sets none); a deduction reads them
     * with guard_opts(). Any other field is a 400 that names the guard and
     * lists what it accepts. */
    const struct guard_field *fields;
    size_t nfields;
    size_t opts_size;
    const void *opts_default;

    /* Optional: open what the guard needs, after options are parsed and
     * before any request, with the shared backends b (keep what is needed;
     * b itself is the caller's). A backend that is down is NOT a failure
     * here (it may come up later); returns 0, or -1 with err (out of
     * memory, bad option value). */
    int (*init)(const struct guard *self, const struct guard_backends *b, char *err,
                size_t errlen);
    /* Optional: close what init opened. */
    void (*fini)(const struct guard *self);

    /* Deduct under this guard. The ledger has already been checked for
     * req->order_id (unless GUARD_OWN_IDEMPOTENCY). Fills res->outcome;
     * never blocks past its bounds. */
    void (*deduct)(const struct guard *self, const struct deduct_env *env,
                   const struct deduct_req *req, struct deduct_res *res);
    /* Optional, the guards that sell carts: sell every line of c all or
     * nothing (stock/cart.h: stock_cart_sell), res filled. The order id is
     * checked by it, not before. A guard without it answers a cart with a
     * 400 naming the guards that have it. */
    void (*deduct_cart)(const struct guard *self, const struct deduct_env *env,
                        const struct cart *c, struct cart_res *res);
    /* Optional, the lock guards: run work(ctx, env, req, res) while holding
     * this guard's lock for req->sku, taken with req->lock_wait_ms and
     * its own options (guard_opts: lease, watchdog, ...) within req->deadline.
     * Returns work's value; -1 without running work when the lock was not
     * obtained in time, or was obtained after the deadline (res filled:
     * lock_timeout, deadline_exceeded, backend_unavailable). Their deduct
     * is locked(stock_rmw); a release of their sale runs inside it too, so
     * a holder's read-modify-write never straddles a release. */
    int (*locked)(const struct guard *self, const struct deduct_env *env,
                  const struct deduct_req *req, guard_work_fn work, void *ctx,
                  struct deduct_res *res);
    /* Optional, lock guards whose locks are not one per SKU (mutex: SKUs
     * share stripes): put t[0..nt-1] (a cart plan, sorted by SKU) in the
     * order their locks are taken, by a cart's sale and by the release of
     * a cart order alike, so the two never wait on each other in a
     * circle. Without it: sorted by SKU. */
    void (*lock_sort)(struct cart_touch *t, int nt);
    /* Optional, the guards that mirror stock in Redis: their side state's
     * hooks (struct guard_mirror above); NULL for the others. */
    const struct guard_mirror *mirror;
    /* Optional: reachability of the guard's own backend for /healthz (a
     * shared one is checked by the registry): 0 up, -1 with err, 1 when
     * the backend is not configured (neither checked nor listed). *backend
     * names it ("zookeeper"). */
    int (*health)(const struct guard *self, const char **backend, char *err, size_t errlen);
    /* Optional: mirror the guard's counters into lib/base/metrics before
     * /metrics renders. */
    void (*export_metrics)(void);
};

/* 1 when g has flag f (a GUARD_* bit), else 0. */
static inline int guard_has(const struct guard *g, enum guard_flag f)
{
    return (g->flags & (unsigned)f) != 0;
}

/* This guard's options for req: what the body set, else its defaults
 * (NULL for a guard without fields). */
static inline const void *guard_opts(const struct guard *g, const struct deduct_req *req)
{
    return req->opts ? req->opts : g->opts_default;
}

/* For a lock guard's `locked`: after a wait for the lock, the request's
 * deadline may have passed; then answer deadline_exceeded and write
 * nothing. Returns 1 when it has. */
static inline int guard_deadline_passed(const struct deduct_req *req, struct deduct_res *res)
{
    if (!deduct_expired(req))
        return 0;
    res->outcome = DEDUCT_DEADLINE;
    snprintf(res->detail, sizeof(res->detail),
             "request deadline passed while waiting for the lock; nothing was written");
    return 1;
}

/* The work of a lock guard's deduct: stock_rmw under the lock, ctx being
 * the guard's name (written into the ledger). */
static inline int guard_rmw_work(void *guard_name, const struct deduct_env *env,
                                 const struct deduct_req *req, struct deduct_res *res)
{
    return stock_rmw((const char *)guard_name, env, req, res);
}

/* ---- carts (core/cart_entry.c) ---------------------------------------- */

/* Sell cart c under g (g->deduct_cart), with every SKU marked in flight
 * (a reseed waits for it) and the deduction metrics of one sale; env with
 * a live MySQL connection. A guard without deduct_cart: DEDUCT_BAD_REQUEST
 * naming the guards that have it, env not looked at (may be NULL). Fills
 * res; returns 0. */
int guard_deduct_cart(const struct guard *g, const struct deduct_env *env,
                      const struct cart *c, struct cart_res *res);
/* "for-update, conditional-update": the guards that sell carts. */
const char *guard_cart_names(void);

/* ---- registry (registry.c) ------------------------------------------- */

/* Lookup by name; NULL when unknown. */
const struct guard *guard_find(const char *name);
/* All guards in list order; *n receives the count. */
const struct guard *const *guard_all(size_t *n);
/* "none, mutex, ..." for error messages; static buffer, built once. */
const char *guard_names(void);

/* The guards' option tables as cfg groups, and the shared Redis rows once
 * when a guard uses Redis, written to out[0..max-1]. Returns the count.
 * Parse them together with the service's own group (cfg_parse_groups). */
#define GUARD_GROUPS_MAX 16
size_t guard_option_groups(struct cfg_group *out, size_t max);

/* Open the shared backends (Redis when a guard uses it), then init every
 * guard with them, in list order; db is the MySQL settings for the guards'
 * background connections (must outlive the guards). On failure what was
 * started is stopped again and -1 returns with err naming the guard. */
int guard_init_all(const char *instance, const struct db_conf *db, char *err, size_t errlen);
/* fini of every guard, in reverse order, then the shared backends. */
void guard_fini_all(void);

/* The shared backends' health checks, then every guard's own; stops at
 * the first failure.
 * Returns 0, or -1 with *backend and err naming it. The names of the
 * backends that answered are appended to up[] (at most nup). */
int guard_health(const char **up, size_t nup, size_t *nup_out, const char **backend,
                 char *err, size_t errlen);
/* The shared backends' metrics, then every guard's export_metrics. */
void guard_export_metrics(void);

/* ---- descriptions (core/guard_doc.c) --------------------------------- */

/* g as GET /guards shows it: name, how, expect, safe_across_instances,
 * carts, its doc's texts, its capabilities (derived from its fields and
 * hooks), its body fields and its metric families. New reference; NULL
 * when out of memory. */
json_t *guard_json(const struct guard *g);
/* Register every guard's metric families (and the shared backends') with
 * lib/base/metrics, once; guard_init_all calls it. Returns 0, or -1 when
 * the metrics table is full. */
int guard_register_metrics(void);

/* ---- request options (core/options.c) -------------------------------- */

/* Check a deduct body (already valid JSON for req_parse_deduct) against
 * g's fields: every key must be one of the sale's own (req_deduct_field)
 * or one of g->fields, with a valid value. Returns 0 with *opts = store
 * filled (defaults, then the body's values), or *opts = NULL when g has no
 * fields; -1 with err (the 400 detail: the field's rule, or for a field g
 * does not take, g's name and every field it accepts). */
int guard_parse_opts(const struct guard *g, const char *body, size_t len,
                     struct guard_opts *store, const void **opts, char *err, size_t errlen);
/* The same on a body already parsed (req_body_object): the route parses a
 * deduct body once, for the sale's fields and the guard's alike. */
int guard_opts_from(const struct guard *g, json_t *body, struct guard_opts *store,
                    const void **opts, char *err, size_t errlen);

/* ---- entry points (entry.c): what the service calls ------------------- */

/* A deduction: idempotency check on req->order_id, then the guard, with
 * metrics for outcome, lock wait and retries. Fills res; returns 0. */
int guard_deduct(const struct guard *g, const struct deduct_env *env,
                 const struct deduct_req *req, struct deduct_res *res);

/* Seed or reseed a SKU: MySQL first (stock, version, ledger cleared), then
 * every guard's side state. Returns 0; -1 with res filled (outcome and
 * detail) when MySQL or a guard's backend failed. */
int guard_seed(const struct deduct_env *env, const char *sku, long long stock,
               int segments, struct deduct_res *res);
/* guard_seed that also sets the SKU's limit_per_user (0 = none) and
 * clears its buyers' counts, in the reseed's transaction. */
int guard_seed_limit(const struct deduct_env *env, const char *sku, long long stock,
                     int segments, long long limit, struct deduct_res *res);

/* ---- purchase limits (core/limit_gate.c) -------------------------------- */

/* Before g's deduction, *r a copy of req. Only for a guard that does not
 * enforce limits, or limit_check "separate", read the SKU's limit into
 * r->limit and refuse what cannot sell: the guard (a limited SKU), no
 * user_id, and with "separate" the check itself. A guard that enforces
 * limits atomically reads nothing here: its own read or write of the row
 * brings the limit along (stock_limit_charge). Returns 1 when g may
 * deduct r, 0 with res filled. */
int guard_limit_gate(const struct guard *g, const struct deduct_env *env,
                     const struct deduct_req *req, struct deduct_req *r,
                     struct deduct_res *res);
/* Before g's cart: under a guard that does not enforce limits, a line of
 * a SKU with a limit refuses the cart (res: the 400 of guard_limit_refuse).
 * Returns 1 when g may sell c, 0 with res filled. */
int guard_limit_cart_gate(const struct guard *g, const struct deduct_env *env,
                          const struct cart *c, struct cart_res *res);
/* res = the 400 of a sale under `guard`, which does not enforce limits,
 * of a SKU with `limit` per user: it names the guards that do. */
void guard_limit_refuse(const char *guard, long long limit, struct deduct_res *res);
/* "none, mutex, ...": the guards that enforce purchase limits. */
const char *guard_limit_names(void);

/* Give a recorded sale back: MySQL first, then the side state of the guard
 * that sold it. When that guard is a lock guard (it has `locked`), the
 * MySQL write runs under its lock for the SKU, taken with the instance's
 * default lock wait and lease (env): a holder that read the stock before
 * the release cannot write its stale value over it. Returns a
 * stock_release_result (STOCK_RELEASED, ...), or -1 with res filled when
 * MySQL failed or the lock was not obtained (nothing changed). *side_ok is
 * 0 when the guard's side state could not be restored (an undersell, never
 * an oversell). */
int guard_release(const struct deduct_env *env, const char *order_id,
                  struct ledger_row *row, int *side_ok, struct deduct_res *res);
/* The same for every line: a cart order's lines (all given back at once,
 * under the locks of every line's SKU when a lock guard sold it) into
 * rows (room for CART_LINES_MAX), *nrows the count (1 for a single sale),
 * each line's side state restored. Returns as guard_release. */
int guard_release_lines(const struct deduct_env *env, const char *order_id,
                        struct ledger_row *rows, int *nrows, int *side_ok,
                        struct deduct_res *res);

/* Every guard's facts about sku, best effort. */
void guard_describe(const char *sku, struct guard_facts *out);

/* The audit of sku (GET .../audit) as one snapshot: MySQL's figures
 * (stock/audit.h) read while no write-behind flush of the SKU can commit
 * (a guard's flush_seq and flushing before and after the MySQL read), with
 * the pending sales and the drift of every guard that keeps stock in
 * Redis and sold the SKU since its seed (a ledger row of that guard, or a
 * pending sale): Redis stock - (MySQL stock - pending units). Returns 1,
 * 0 unknown SKU, or a negative DB_E* code (MySQL failed). A Redis that
 * cannot be read leaves a->pending_known / a->drift_known 0. */
struct audit;
int guard_audit(struct db_conn *db, const char *sku, struct audit *a);

/* Sum of every guard's `pending` for sku (GET .../audit). Returns 0, or -1
 * when a guard's backend could not be read (the sums are then partial). */
int guard_pending(const char *sku, long long *entries, long long *units);

#endif
