/* Carts: the body's lines checked and planned, and the answers built (see
 * cart.h). Pure functions: no I/O. */
#include "cart.h"

#include "request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cart_field(const char *name)
{
    return strcmp(name, "lines") == 0 || strcmp(name, "line_check") == 0 ||
           strcmp(name, "lock_order") == 0;
}

/* A choice field: absent keeps *out (the default). */
static int cart_choice(json_t *o, const char *key, const char *a, const char *b, int *out,
                       char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    if (strcmp(s, a) == 0 || strcmp(s, b) == 0) {
        *out = strcmp(s, b) == 0;
        return 0;
    }
    snprintf(err, errlen, "%s must be %s | %s", key, a, b);
    return -1;
}

/* Line i of the body: an object of exactly sku and qty. */
static int cart_line_from(json_t *v, size_t i, struct cart_line *line, char *err, size_t errlen)
{
    if (!json_is_object(v)) {
        snprintf(err, errlen, "lines[%zu] must be an object {\"sku\":..., \"qty\":...}", i);
        return -1;
    }
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x) {
        if (strcmp(key, "sku") != 0 && strcmp(key, "qty") != 0) {
            snprintf(err, errlen, "lines[%zu] has an unknown field \"%.40s\" (a line takes sku "
                     "and qty)", i, key);
            return -1;
        }
    }
    json_t *sku = json_object_get(v, "sku"), *qty = json_object_get(v, "qty");
    char what[32];
    snprintf(what, sizeof(what), "lines[%zu].sku", i);
    if (!json_is_string(sku) || !json_is_integer(qty)) {
        snprintf(err, errlen, "lines[%zu] needs a string sku and an integer qty", i);
        return -1;
    }
    if (req_check_id(what, json_string_value(sku), err, errlen) != 0)
        return -1;
    long long q = json_integer_value(qty);
    if (q < 1 || q > REQ_QTY_MAX) {
        snprintf(err, errlen, "lines[%zu].qty must be 1..%d, got %lld", i, REQ_QTY_MAX, q);
        return -1;
    }
    snprintf(line->sku, sizeof(line->sku), "%s", json_string_value(sku));
    line->qty = (long)q;
    return 0;
}

int cart_from(json_t *o, struct cart *c, char *err, size_t errlen)
{
    json_t *lines = json_object_get(o, "lines");
    c->nlines = 0;
    c->check = CART_CHECK_SUMMED;
    c->order = CART_ORDER_SORTED;
    if (!lines) {
        if (json_object_get(o, "line_check") || json_object_get(o, "lock_order")) {
            snprintf(err, errlen, "line_check and lock_order apply to \"lines\" only");
            return -1;
        }
        return 1;
    }
    if (json_object_get(o, "sku") || json_object_get(o, "qty")) {
        snprintf(err, errlen, "give either \"lines\" or \"sku\"/\"qty\", not both");
        return -1;
    }
    size_t n = json_array_size(lines);
    if (!json_is_array(lines) || n < 1 || n > CART_LINES_MAX) {
        snprintf(err, errlen, "lines must be an array of 1..%d {\"sku\",\"qty\"} objects",
                 CART_LINES_MAX);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (cart_line_from(json_array_get(lines, i), i, &c->line[i], err, errlen) != 0)
            return -1;
    int check = 0, order = 0;
    if (cart_choice(o, "line_check", "summed", "per-line", &check, err, errlen) ||
        cart_choice(o, "lock_order", "sorted", "as-given", &order, err, errlen))
        return -1;
    c->nlines = (int)n;
    c->check = check ? CART_CHECK_PER_LINE : CART_CHECK_SUMMED;
    c->order = order ? CART_ORDER_AS_GIVEN : CART_ORDER_SORTED;
    return 0;
}

static int touch_cmp(const void *a, const void *b)
{
    return strcmp(((const struct cart_touch *)a)->sku, ((const struct cart_touch *)b)->sku);
}

int cart_plan(const struct cart *c, struct cart_touch *t)
{
    int nt = 0;
    for (int i = 0; i < c->nlines; i++) {
        int k = 0;
        while (k < nt && strcmp(t[k].sku, c->line[i].sku) != 0)
            k++;
        if (k == nt) {
            memset(&t[nt], 0, sizeof(t[nt]));
            snprintf(t[nt].sku, sizeof(t[nt].sku), "%s", c->line[i].sku);
            nt++;
        }
        t[k].qty += c->line[i].qty;
    }
    /* One order for every cart: two carts that share SKUs take them in
     * the same order, so neither holds a row the other waits for while
     * waiting for one the other holds. */
    if (c->order == CART_ORDER_SORTED)
        qsort(t, (size_t)nt, sizeof(*t), touch_cmp);
    return nt;
}

void cart_fill_remaining(const struct cart *c, const struct cart_touch *t, int nt,
                         struct cart_res *res)
{
    long long left[CART_LINES_MAX];
    for (int k = 0; k < nt; k++)
        left[k] = t[k].before;
    for (int i = 0; i < c->nlines; i++)
        for (int k = 0; k < nt; k++)
            if (strcmp(t[k].sku, c->line[i].sku) == 0) {
                left[k] -= c->line[i].qty;
                res->remaining[i] = left[k];
                break;
            }
}

json_t *cart_answer_json(const struct cart *c, const struct cart_res *res)
{
    json_t *lines = json_array();
    for (int i = 0; lines && i < c->nlines; i++)
        json_array_append_new(lines, json_pack("{s:s,s:i,s:I}", "sku", c->line[i].sku, "qty",
                                               (int)c->line[i].qty, "remaining",
                                               (json_int_t)res->remaining[i]));
    json_t *j = json_pack("{s:b,s:o,s:s,s:s,s:s}", "ok", 1, "lines", lines, "order_id",
                          c->req.order_id, "guard", res->base.guard, "instance",
                          res->base.instance);
    if (j && res->base.outcome == DEDUCT_DUPLICATE)
        json_object_set_new(j, "duplicate", json_true());
    if (j && res->base.retries)
        json_object_set_new(j, "retries", json_integer(res->base.retries));
    return j;
}

json_t *cart_short_json(const struct cart_res *res)
{
    json_t *a = json_array();
    for (int i = 0; a && i < res->nshort; i++)
        json_array_append_new(a, json_pack("{s:s,s:I,s:I}", "sku", res->shortage[i].sku,
                                           "requested", (json_int_t)res->shortage[i].requested,
                                           "available", (json_int_t)res->shortage[i].available));
    return a;
}
