/* The MySQL side of a redis-stream flush batch (see stream_batch.h). */
#include "guards/redis_stream/stream_batch.h"

#include "base/db.h"
#include "stock/store.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_NAME "redis-stream"

/* The batch's valid sales as [[order_id, line, sku, qty, remaining,
 * instance]]: a cart's lines are rows of one order. */
static char *rows_json(const struct sale *sales, int n, int *nvalid)
{
    json_t *a = json_array();
    *nvalid = 0;
    for (int i = 0; a && i < n; i++) {
        const struct sale *s = &sales[i];
        if (!s->valid)
            continue;
        json_t *row = json_pack("[s,i,s,I,I,s]", s->order_id, s->line, s->sku,
                                (json_int_t)s->qty, (json_int_t)s->remaining, s->instance);
        if (!row || json_array_append_new(a, row) != 0) {
            json_decref(a);
            return NULL;
        }
        (*nvalid)++;
    }
    char *txt = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return txt;
}

/* 1 when the ledger row of s->order_id (its line) is this very sale written before (a
 * lost COMMIT reply, a claim of a batch its first flusher had committed):
 * same guard, SKU, quantity, instance and remaining stock, and not
 * released. 0 when it is another sale under that order_id -- the first
 * sale of a repeat whose order memory had expired, or was of an older
 * epoch, or was sold by another guard: then Redis took a unit MySQL never
 * will. A released row is never this sale written before: a release waits
 * until the sale's entry is flushed and acknowledged (guard.h `queued`),
 * so no replay of it follows; and a repeat of it after the order memory
 * expired sells with the remaining stock the first sale had (the release
 * gave that unit back). Negative DB_E* on failure. */
static long long same_sale(struct db_conn *db, const struct sale *s)
{
    struct ledger_row row = {0};
    long long n = store_ledger_get_line(db, s->order_id, s->line, &row);
    if (n < 0)
        return n;
    return n > 0 && strcmp(row.guard, GUARD_NAME) == 0 && strcmp(row.sku, s->sku) == 0 &&
           row.qty == s->qty && row.remaining == s->remaining &&
           strcmp(row.instance, s->instance) == 0 && row.released == 0;
}

/* The ledger rows of the batch, in the open transaction. Usually one
 * statement; when an order_id is already there (a replay), one INSERT
 * IGNORE per sale learns which rows are new. Marks sale.inserted.
 * Returns 0 or a negative DB_E* code. */
long long sbatch_insert_rows(struct db_conn *db, struct sale *sales, int nsales,
                           unsigned long long *skipped)
{
    int nvalid;
    char *rows = rows_json(sales, nsales, &nvalid);
    if (!rows)
        return DB_ERR;
    long long n = nvalid ? store_ledger_insert_lines(db, rows, GUARD_NAME) : 0;
    free(rows);
    if (n == nvalid) {
        for (int i = 0; i < nsales; i++)
            sales[i].inserted = sales[i].valid;
        return 0;
    }
    if (n >= 0 || n == DB_EDUP) {
        /* statement undone by InnoDB; the transaction goes on */
        for (int i = 0; i < nsales; i++) {
            struct sale *s = &sales[i];
            if (!s->valid)
                continue;
            long long m = store_ledger_insert_ignore(db, s->order_id, s->line, s->sku, s->qty,
                                                     s->remaining, GUARD_NAME, s->instance);
            if (m < 0)
                return m;
            s->inserted = m == 1;
            if (!s->inserted) {
                (*skipped)++;
                long long same = same_sale(db, s);
                if (same < 0)
                    return same;
                s->give_back = !same;
            }
        }
        return 0;
    }
    return n;
}

/* One stock update per SKU by the units of the rows this transaction
 * inserted; never below 0 (stock MySQL does not have was answered from
 * Redis all the same: counted, and visible in the audit). */
long long sbatch_update_stock(struct db_conn *db, const struct sale *sales, int nsales,
                            unsigned long long *floored)
{
    const char *sku[SKUS_MAX];
    long long units[SKUS_MAX];
    int nsku = 0;
    for (int i = 0; i < nsales; i++) {
        const struct sale *s = &sales[i];
        if (!s->inserted)
            continue;
        int k = 0;
        while (k < nsku && strcmp(sku[k], s->sku) != 0)
            k++;
        if (k == nsku) {
            if (nsku == SKUS_MAX)
                return DB_ERR;   /* cannot happen: the caller cut the batch */
            sku[nsku] = s->sku;
            units[nsku++] = 0;
        }
        units[k] += s->qty;
    }
    for (int k = 0; k < nsku; k++) {
        long long n = store_take_if_enough(db, sku[k], units[k]);
        if (n == 0) {
            (*floored)++;
            fprintf(stderr, "redis-stream flusher: MySQL has fewer than %lld of %s left: "
                    "stock floored at 0\n", units[k], sku[k]);
            n = store_take_floor(db, sku[k], units[k]);
        }
        if (n < 0)
            return n;
    }
    return 0;
}

long long sbatch_ledger_find(struct db_conn *db, const char *const *order_ids, int n,
                            struct ledger_row *rows, int *found)
{
    json_t *ids = json_array();
    for (int i = 0; ids && i < n; i++)
        if (json_array_append_new(ids, json_string(order_ids[i])) != 0) {
            json_decref(ids);
            ids = NULL;
        }
    char *txt = ids ? json_dumps(ids, JSON_COMPACT) : NULL;
    json_decref(ids);
    /* A row is at most ~300 bytes of JSON; a group has n sales. */
    size_t cap = (size_t)n * 400 + 64;
    char *out = txt ? malloc(cap) : NULL;
    if (!out) {
        free(txt);
        return DB_ERR;
    }
    /* One statement for the group: the ids travel as one JSON parameter,
     * the rows come back as one JSON array (the unique key finds each). */
    long long rc = store_ledger_rows_of(db, txt, out, cap);
    free(txt);
    json_t *all = rc > 0 ? json_loads(out, 0, NULL) : NULL;
    free(out);
    if (rc < 0)
        return rc;
    if (!json_is_array(all)) {   /* cut short by the buffer, or not JSON */
        json_decref(all);
        return DB_ERR;
    }
    long long nfound = 0;
    size_t k;
    json_t *row;
    json_array_foreach(all, k, row) {
        const char *oid, *sku, *guard, *inst;
        json_int_t qty, rem;
        if (json_unpack(row, "[s,s,I,I,s,s]", &oid, &sku, &qty, &rem, &guard, &inst) != 0)
            continue;
        for (int i = 0; i < n; i++) {
            if (strcmp(order_ids[i], oid) != 0)
                continue;
            struct ledger_row *r = &rows[i];
            memset(r, 0, sizeof(*r));
            snprintf(r->sku, sizeof(r->sku), "%s", sku);
            snprintf(r->guard, sizeof(r->guard), "%s", guard);
            snprintf(r->instance, sizeof(r->instance), "%s", inst);
            r->qty = qty;
            r->remaining = rem;
            found[i] = 1;
            nfound++;
        }
    }
    json_decref(all);
    return nfound;
}

/* Keep at most SKUS_MAX distinct SKUs in the batch; the rest stay pending
 * in our list and come back with the next read of our own entries. */
int sbatch_cut(const struct sale *sales, int *nsales)
{
    const char *seen[SKUS_MAX];
    int nseen = 0;
    for (int i = 0; i < *nsales; i++) {
        if (!sales[i].valid)
            continue;
        int k = 0;
        while (k < nseen && strcmp(seen[k], sales[i].sku) != 0)
            k++;
        if (k < nseen)
            continue;
        if (nseen == SKUS_MAX) {
            while (i > 0 && strcmp(sales[i - 1].id, sales[i].id) == 0)
                i--;   /* whole entries only */
            *nsales = i;
            return 1;
        }
        seen[nseen++] = sales[i].sku;
    }
    return 0;
}
