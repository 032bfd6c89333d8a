/* The audit as one snapshot of MySQL and the Redis guards' side state
 * (guard_audit in guard.h): MySQL's figures plus, per Redis-stock guard,
 * the pending sales and the drift. */
#include "guards/guard.h"

#include "base/db.h"
#include "base/util.h"
#include "stock/audit.h"
#include "stock/holds.h"
#include "stock/store.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* Tries before the audit gives up on a snapshot of a write-behind guard
 * and answers from the last read (a flush commits within milliseconds; a
 * flusher that died marked holds its mark SFLUSH_MARK_MS at most). */
#define SNAPSHOT_TRIES 100
#define SNAPSHOT_NAP_MS 2
/* Tries while only intents keep going (redis-decr under load: they go
 * every group commit, a snapshot is rare): then the drift is unknown. */
#define SNAPSHOT_INTENT_TRIES 10

/* Whether the reads before and after the MySQL figures make a snapshot. */
enum snapshot { SNAP_TAKEN, SNAP_FLUSH_MOVED, SNAP_INTENTS_MOVED };

struct side_read {
    const struct guard *g;
    int ok;
    struct guard_side s;
};

/* Every side of sku into r[] (at most max). db: the audit's snapshot
 * transaction, whose figures are read already (the read after them: a
 * guard with `side_in_snapshot` reads through it); NULL for the read
 * before. Returns the count. */
static int read_sides(struct db_conn *db, const char *sku, struct side_read *r, int max)
{
    size_t n;
    const struct guard *const *all = guard_all(&n);
    int k = 0;
    for (size_t i = 0; i < n && k < max; i++) {
        const struct guard_mirror *m = all[i]->mirror;
        if (!m || !m->side)
            continue;
        memset(&r[k], 0, sizeof(r[k]));
        r[k].g = all[i];
        r[k].ok = (db && m->side_in_snapshot ? m->side_in_snapshot(all[i], db, sku, &r[k].s)
                                             : m->side(all[i], sku, &r[k].s)) == 0;
        k++;
    }
    return k;
}

/* 1 when no write-behind flush can have committed between a and b: the
 * flush counter did not move and no flusher was marked, and Redis's own
 * figures agree (a sale moves stock into pending, never their sum). A
 * guard whose sales in flight are intents (`side_in_snapshot`): none went
 * between a and b (its counter did not move), so every sale the MySQL
 * figures hold that b does not show as an intent had gone before a. */
static enum snapshot stable(const struct side_read *a, const struct side_read *b, int n)
{
    enum snapshot st = SNAP_TAKEN;
    for (int i = 0; i < n; i++) {
        if (!a[i].ok || !b[i].ok)
            continue;          /* unread: its drift is unknown anyway */
        if (a[i].g->mirror->side_in_snapshot) {   /* read_sides: each has a mirror */
            if (a[i].s.flush_seq != b[i].s.flush_seq)
                st = SNAP_INTENTS_MOVED;
            continue;
        }
        if (!a[i].g->mirror->pending)
            continue;
        if (a[i].s.flush_seq != b[i].s.flush_seq || a[i].s.flushing || b[i].s.flushing)
            return SNAP_FLUSH_MOVED;
        if (a[i].s.has_stock != b[i].s.has_stock ||
            (a[i].s.has_stock &&
             a[i].s.stock + a[i].s.pending_units != b[i].s.stock + b[i].s.pending_units))
            return SNAP_FLUSH_MOVED;
    }
    return st;
}

/* freeze(on) of every write-behind guard. Returns 1 when all hold (or
 * cannot be reached: their sides fail too), 0 when one is committing (the
 * others are let go again). */
static int freeze_all(int on)
{
    size_t n;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++) {
        if (!all[i]->mirror || !all[i]->mirror->freeze)
            continue;
        if (all[i]->mirror->freeze(all[i], on) == 0 && on) {
            while (i-- > 0)
                if (all[i]->mirror && all[i]->mirror->freeze)
                    all[i]->mirror->freeze(all[i], 0);
            return 0;
        }
    }
    return 1;
}

/* Work of dead requests in the side states is settled first (guard.h
 * `settle`): what is left after is drift. */
static void settle_all(struct db_conn *db, const char *sku)
{
    size_t n;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++)
        if (all[i]->mirror && all[i]->mirror->settle)
            all[i]->mirror->settle(all[i], db, sku);
}

/* The evidence behind a verdict (best effort: the figures stand without
 * it): the settlements the guards recorded, with lost updates the ledger
 * rows without a stock move, and when inconsistent the settlements the
 * ledger contradicts. */
/* The settlements in a->settled that gave a sale back as never landed
 * while the ledger holds that very sale: their order ids into
 * a->landed_late (at most AUDIT_UNMOVED_ROWS). */
static void find_landed_late(struct db_conn *db, struct audit *a)
{
    json_t *all = json_loads(a->settled, 0, NULL), *e;
    size_t i, used = 0;
    a->landed_late[0] = '\0';
    json_array_foreach(all, i, e) {
        const char *outcome = json_string_value(json_object_get(e, "outcome"));
        const char *order = json_string_value(json_object_get(e, "order_id"));
        const char *intent = json_string_value(json_object_get(e, "intent"));
        if (!outcome || strcmp(outcome, "given_back") != 0 || !order || !intent ||
            store_ledger_has_intent(db, order, intent) <= 0)
            continue;
        int n = snprintf(a->landed_late + used, sizeof(a->landed_late) - used, "%s%s",
                         used ? "," : "", order);
        if (n < 0 || (size_t)n >= sizeof(a->landed_late) - used)
            break;   /* the list is full: the first ones stand */
        used += (size_t)n;
    }
    if (used < sizeof(a->landed_late))
        a->landed_late[used] = '\0';
    json_decref(all);
}

static void explain(struct db_conn *db, const char *sku, struct audit *a)
{
    size_t n;
    const struct guard *const *all = guard_all(&n);
    snprintf(a->settled, sizeof(a->settled), "[]");
    for (size_t i = 0; i < n; i++)
        if (all[i]->mirror && all[i]->mirror->settled) {   /* one keeps them (redis-decr) */
            all[i]->mirror->settled(all[i], sku, a->settled, sizeof(a->settled));
            break;
        }
    if (a->lost_updates != 0)
        store_unmoved_orders(db, sku, AUDIT_UNMOVED_ROWS, a->unmoved, sizeof(a->unmoved));
    if (!a->consistent)
        find_landed_late(db, a);
}

/* Each Redis guard's side into the audit: its pending sales, and its drift
 * (Redis apart from MySQL) when it sold the SKU or has sales queued. A
 * guard with intents is read from `after`, the rest from `before`. */
static void add_sides(struct audit *a, const struct side_read *before,
                      const struct side_read *after, const int *sold, int n)
{
    for (int i = 0; i < n; i++) {
        const struct side_read *r = before[i].g->mirror->side_in_snapshot ? &after[i] : &before[i];
        if (!r->ok) {
            a->pending_known = a->drift_known = 0;
            continue;
        }
        a->pending += r->s.pending;
        a->pending_units += r->s.pending_units;
        a->held_redis += r->s.held;
        a->expired_unswept += r->s.expired_unswept;
        if (!r->s.has_stock || (!sold[i] && r->s.pending == 0 && r->s.held == 0))
            continue;
        long long d = r->s.stock - (a->stock - r->s.pending_units - r->s.in_flight_units -
                                    r->s.held);
        a->side[a->nsides].held = r->s.held;
        a->side[a->nsides].guard = r->g->name;
        a->side[a->nsides].redis_stock = r->s.stock;
        a->side[a->nsides].pending_units = r->s.pending_units;
        a->side[a->nsides].in_flight_units = r->s.in_flight_units;
        a->side[a->nsides].stale_intents = r->s.stale_intents;
        a->side[a->nsides++].drift = d;
        a->drift += d;
    }
}

int guard_audit(struct db_conn *db, const char *sku, struct audit *a)
{
    struct side_read before[AUDIT_SIDES_MAX], after[AUDIT_SIDES_MAX];
    int sold[AUDIT_SIDES_MAX];
    int n = 0, rc = 0, snap = 0, intent_misses = 0;
    long long nguards = 0;
    memset(a, 0, sizeof(*a));
    settle_all(db, sku);
    for (int t = 0; t < SNAPSHOT_TRIES; t++) {
        if (t > 0)
            util_sleep_ms(SNAPSHOT_NAP_MS);
        /* Flushes hold their commits off while we read (briefly). */
        if (!freeze_all(1) && t + 1 < SNAPSHOT_TRIES)
            continue;
        n = read_sides(NULL, sku, before, AUDIT_SIDES_MAX);
        /* one MySQL snapshot for the figures and the intents' ledger rows */
        rc = db_begin(db);
        if (rc == DB_OK)
            rc = store_audit(db, sku, &a->initial, &a->stock, &a->sold);
        if (rc > 0)   /* the same snapshot: a hold's units are in one of them */
            rc = store_holds_audit(db, sku, &a->held, &a->expired_unswept, a->late_confirms,
                                   sizeof(a->late_confirms));
        if (rc > 0) {   /* the same snapshot: per-user overbuys */
            int m = store_over_limit(db, sku, &a->limit, &a->over_limit, a->over_limit_users,
                                     sizeof(a->over_limit_users));
            if (m < 0)
                rc = m;
        }
        for (int i = 0; rc > 0 && i < n; i++) {
            long long s = before[i].ok ? store_ledger_guard_sold(db, sku, before[i].g->name) : 0;
            if (s < 0)
                rc = (int)s;
            sold[i] = (int)(s > 0);
        }
        if (rc > 0 && (nguards = store_ledger_guards_count(db, sku)) < 0)
            rc = (int)nguards;
        if (rc > 0)
            read_sides(db, sku, after, AUDIT_SIDES_MAX);
        db_rollback(db);   /* read only */
        freeze_all(0);
        if (rc <= 0)
            return rc;
        enum snapshot st = stable(before, after, n);
        if ((snap = st == SNAP_TAKEN) ||
            (st == SNAP_INTENTS_MOVED && ++intent_misses >= SNAPSHOT_INTENT_TRIES))
            break;
    }
    /* The MySQL figures sit between `before` and `after` with no flush
     * between them: pair them with `before`; a guard with intents, with
     * `after` (read after the figures, its intents checked against them).
     * Without a snapshot (flushes never paused, intents kept going) the
     * figures stand, but the drift cannot be told from a sale in flight:
     * unknown. */
    a->pending_known = 1;
    a->drift_known = snap;
    /* Several guards sold the SKU: a Redis guard's stock never saw the
     * others' sales, so its drift is shown (drift_by_guard) but decides
     * nothing: a comparison run keeps one guard per SKU. */
    if (nguards > 1)
        a->drift_known = 0;
    add_sides(a, before, after, sold, n);
    audit_compute(a);
    explain(db, sku, a);
    return 1;
}
