/* Carts: one order of several lines ("lines":[{"sku","qty"}, ...]), sold
 * all or nothing in one MySQL transaction. This header holds the request
 * (parsed from the deduct body), its plan (which rows, in which order),
 * the result, and the transaction the MySQL guards share. */
#ifndef LAB_CART_H
#define LAB_CART_H

#include "deduct.h"
#include "store.h"

#include <jansson.h>
#include <stddef.h>

#define CART_LINES_MAX 50

/* How a line is checked. SUMMED (the default): lines on the same SKU are
 * added up first and the sum is checked against the stock. PER_LINE, the
 * field's defect: each line is checked against one stock read taken
 * before any line is written, so the same SKU twice sells past zero. */
enum cart_line_check { CART_CHECK_SUMMED, CART_CHECK_PER_LINE };

/* In which order the rows are taken. SORTED (the default): by SKU, so two
 * carts never wait on each other in a circle. AS_GIVEN, the field's
 * defect: in the cart's order, so {A,B} and {B,A} deadlock (MySQL 1213)
 * or wait until a lock wait timeout. */
enum cart_lock_order { CART_ORDER_SORTED, CART_ORDER_AS_GIVEN };

struct cart_line {
    char sku[STOCK_SKU_MAX + 1];
    long qty;                  /* 1..REQ_QTY_MAX */
};

struct cart {
    struct deduct_req req;     /* order_id, user_id, hold_ms, lock_wait_ms,
                                * deadline; sku "" and qty 0 */
    int nlines;                /* 1..CART_LINES_MAX */
    struct cart_line line[CART_LINES_MAX];   /* as the body gave them */
    enum cart_line_check check;
    enum cart_lock_order order;
};

/* One row the cart touches: a SKU and every unit its lines ask for. */
struct cart_touch {
    char sku[STOCK_SKU_MAX + 1];
    long long qty;             /* the lines' sum */
    long long before;          /* the stock the cart found (set by the txn) */
    long long version;         /* the row's version then (optimistic) */
    long long seeds;           /* the row's reseed count then (the RMW) */
};

struct cart_short {
    char sku[STOCK_SKU_MAX + 1];
    long long requested, available;
};

struct cart_res {
    struct deduct_res base;    /* outcome, guard, instance, retries, detail */
    long long remaining[CART_LINES_MAX];   /* SOLD / DUPLICATE: per line, the
                                * SKU's stock after that line (in the
                                * cart's order) */
    int nshort;                /* OUT_OF_STOCK: every short SKU */
    struct cart_short shortage[CART_LINES_MAX];
    int deadlocks;             /* MySQL 1213s met (retried or not) */
    int lock_timeouts;         /* MySQL 1205s met */
};

/* The body's cart fields: "lines" (1..50 objects of exactly sku and qty),
 * "line_check" ("summed" | "per-line"), "lock_order" ("sorted" |
 * "as-given"). Returns 1 when the body has no "lines" (a single-SKU sale:
 * then line_check and lock_order are refused), 0 with c->line, check and
 * order filled (c->req is the caller's), or -1 with err (the 400 detail:
 * "lines" with "sku" or "qty", an empty or too long array, a bad line). */
int cart_from(json_t *o, struct cart *c, char *err, size_t errlen);

/* 1 when name is a body field cart_from reads ("lines", "line_check",
 * "lock_order"): every guard's option parser skips them. */
int cart_field(const char *name);

/* The rows c touches, each SKU once with its lines' sum, into t (room for
 * CART_LINES_MAX): sorted by SKU (bytewise), or in the order of first
 * appearance when c->order is AS_GIVEN. Returns the count. */
int cart_plan(const struct cart *c, struct cart_touch *t);

/* res->remaining from the touches' `before`: each line takes its qty from
 * what the SKU's earlier lines left. */
void cart_fill_remaining(const struct cart *c, const struct cart_touch *t, int nt,
                         struct cart_res *res);

/* The 200 body of a sold (or duplicate) cart, and the "short" array of a
 * refused one: new references. */
json_t *cart_answer_json(const struct cart *c, const struct cart_res *res);
json_t *cart_short_json(const struct cart_res *res);

struct deduct_env;

/* How the guard takes its rows. */
enum cart_style {
    CART_STYLE_CONDITIONAL,    /* UPDATE ... WHERE stock >= sum, per row */
    CART_STYLE_ROW_LOCK,       /* SELECT ... FOR UPDATE per row, check, write */
    CART_STYLE_VERSION,        /* plain reads, check, then per row UPDATE ...
                                * WHERE version = the one read; a miss
                                * rolls back and starts again */
    CART_STYLE_RMW,            /* plain reads, check, absolute writes of
                                * what was computed: the bare
                                * read-modify-write (none), which two carts
                                * on one SKU race on purpose; a reseed
                                * since the read refuses the write (503) */
};

/* Sell cart c under guard `guard_name` in one transaction, touching its
 * rows in c's lock order, with c->req.hold_ms spent in equal parts after
 * each row is taken (the per-item work a shop does while it holds the
 * rows); repeated after a deadlock, a lock wait timeout or (VERSION) a
 * version miss up to env->max_retries times within the deadline. The order id is checked
 * first (a repeat answers DUPLICATE with the first sale's lines, other
 * lines under it ORDER_CONFLICT). Fills res (SOLD, OUT_OF_STOCK with every
 * short SKU, UNKNOWN_SKU, or a failure: nothing written). Counts every
 * 1213 and 1205 in lab_cart_conflicts_total{guard,kind}. Returns 0. */
int stock_cart_sell(const char *guard_name, const struct deduct_env *env, const struct cart *c,
                    enum cart_style style, struct cart_res *res);

/* What the ledger holds for c's order id (env->db, no lock): 0 nothing
 * (sell it), 1 res filled (DUPLICATE with the first sale's lines, or
 * ORDER_CONFLICT when the order id names other lines), or a negative DB_E*
 * code. stock_cart_sell asks it first; redis-stream before its script. */
int stock_cart_lookup(const struct deduct_env *env, const struct cart *c, struct cart_res *res);

/* Give every line of a cart order back in one transaction. Returns a
 * stock_release_result (txn.h) for the whole order, or a negative DB_E*
 * code (nothing changed). *first receives line 0. */
int stock_cart_release(struct db_conn *db, const char *order_id, long long lines,
                       struct ledger_row *first);

#endif
