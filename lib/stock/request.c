/* Request validation with jansson: strict types, bounded values. */
#include "request.h"

#include "limits.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

int req_id_char_ok(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == ':' || c == '-';
}

int req_check_id(const char *what, const char *s, char *err, size_t errlen)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > STOCK_SKU_MAX) {
        snprintf(err, errlen, "%s must be 1..%d bytes", what, STOCK_SKU_MAX);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!req_id_char_ok(c)) {
            snprintf(err, errlen,
                     "%s may only hold A-Z a-z 0-9 . _ : - (byte 0x%02x at %zu is not)", what,
                     c, i);
            return -1;
        }
    }
    return 0;
}

int req_check_sku_n(const char *s, size_t n, char *err, size_t errlen)
{
    char sku[STOCK_SKU_MAX + 1];
    if (n >= sizeof(sku)) {
        snprintf(err, errlen, "sku must be 1..%d bytes", STOCK_SKU_MAX);
        return -1;
    }
    memcpy(sku, s, n);
    sku[n] = '\0';
    return req_check_id("sku", sku, err, errlen);
}

static json_t *load_object(const char *body, size_t len, char *err, size_t errlen)
{
    if (!body || len == 0) {
        snprintf(err, errlen, "a JSON object body is required");
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "malformed JSON at line %d column %d: %.80s", je.line,
                 je.column, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        snprintf(err, errlen, "the body must be a JSON object");
        json_decref(root);
        return NULL;
    }
    return root;
}

/* Integer field in [lo, hi]; absent keeps *out. Returns -1 with err on a
 * wrong type or range. */
static int get_int(json_t *o, const char *key, long long lo, long long hi,
                   long long *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    if (!json_is_integer(v)) {
        snprintf(err, errlen, "%s must be an integer", key);
        return -1;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        snprintf(err, errlen, "%s must be %lld..%lld, got %lld", key, lo, hi, x);
        return -1;
    }
    *out = x;
    return 0;
}

static int get_str(json_t *o, const char *key, const char **out, char *err,
                   size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    if (!json_is_string(v)) {
        snprintf(err, errlen, "%s must be a string", key);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

const char *const req_deduct_fields[] = {"sku",     "qty",     "order_id",    "user_id",
                                         "guard",   "hold_ms", "lock_wait_ms", "limit_check"};
const size_t req_deduct_nfields = sizeof(req_deduct_fields) / sizeof(req_deduct_fields[0]);

int req_deduct_field(const char *name)
{
    for (size_t i = 0; i < req_deduct_nfields; i++)
        if (strcmp(req_deduct_fields[i], name) == 0)
            return 1;
    return 0;
}

void req_default_deduct(const struct req_defaults *d, struct deduct_req *out)
{
    memset(out, 0, sizeof(*out));
    out->qty = 1;
    out->lock_wait_ms = d->lock_wait_ms;
}

json_t *req_body_object(const char *body, size_t len, char *err, size_t errlen)
{
    return load_object(body, len, err, errlen);
}

int req_deduct_from(json_t *o, const struct req_defaults *d, struct deduct_req *out,
                    char *guard, size_t guardlen, char *err, size_t errlen)
{
    req_default_deduct(d, out);
    guard[0] = '\0';
    const char *sku = NULL, *order_id = NULL, *user_id = NULL, *g = NULL, *lc = NULL;
    long long qty = 1, hold = 0, wait = d->lock_wait_ms;
    if (get_str(o, "sku", &sku, err, errlen) || get_str(o, "order_id", &order_id, err, errlen) ||
        get_str(o, "user_id", &user_id, err, errlen) ||
        get_str(o, "guard", &g, err, errlen) || get_str(o, "limit_check", &lc, err, errlen) ||
        get_int(o, "qty", 1, REQ_QTY_MAX, &qty, err, errlen) ||
        get_int(o, "hold_ms", 0, REQ_HOLD_MAX_MS, &hold, err, errlen) ||
        get_int(o, "lock_wait_ms", 0, REQ_LOCK_WAIT_MAX_MS, &wait, err, errlen))
        return -1;
    /* A cart names its SKUs in "lines" (cart_from), the sale then has none. */
    if (!sku && !json_object_get(o, "lines")) {
        snprintf(err, errlen, "sku is required");
        return -1;
    }
    if ((sku && req_check_id("sku", sku, err, errlen)) ||
        (order_id && req_check_id("order_id", order_id, err, errlen)) ||
        (user_id && req_check_id("user_id", user_id, err, errlen)))
        return -1;
    if (lc && stock_limit_check_choice(lc, &out->limit_separate) != 0) {
        snprintf(err, errlen, "limit_check must be atomic | separate");
        return -1;
    }
    if (g && (strlen(g) == 0 || strlen(g) >= guardlen)) {
        snprintf(err, errlen, "guard must be a guard name (see GET /guards)");
        return -1;
    }
    if (sku)
        snprintf(out->sku, sizeof(out->sku), "%s", sku);
    if (order_id)
        snprintf(out->order_id, sizeof(out->order_id), "%s", order_id);
    if (user_id)
        snprintf(out->user_id, sizeof(out->user_id), "%s", user_id);
    if (g)
        snprintf(guard, guardlen, "%s", g);
    out->qty = (long)qty;
    out->hold_ms = (long)hold;
    out->lock_wait_ms = (long)wait;
    return 0;
}

int req_parse_deduct(const char *body, size_t len, const struct req_defaults *d,
                     struct deduct_req *out, char *guard, size_t guardlen, int *nextra,
                     char *err, size_t errlen)
{
    req_default_deduct(d, out);
    guard[0] = '\0';
    *nextra = 0;
    json_t *o = load_object(body, len, err, errlen);
    if (!o)
        return -1;
    int rc = req_deduct_from(o, d, out, guard, guardlen, err, errlen);
    if (rc == 0 && !out->sku[0]) {   /* "lines": a cart, not this parser's */
        snprintf(err, errlen, "sku is required");
        rc = -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        (void)v;
        if (rc == 0 && !req_deduct_field(key))
            (*nextra)++;
    }
    json_decref(o);
    return rc;
}

int req_parse_seed(const char *body, size_t len, long long *stock, int *segments,
                   char *err, size_t errlen)
{
    long long limit;
    return req_parse_seed_limit(body, len, stock, segments, &limit, err, errlen);
}

int req_parse_seed_limit(const char *body, size_t len, long long *stock, int *segments,
                         long long *limit, char *err, size_t errlen)
{
    json_t *o = load_object(body, len, err, errlen);
    if (!o)
        return -1;
    long long st = -1, seg = REQ_SEGMENTS_DEFAULT, lim = 0;
    int rc = -1;
    if (get_int(o, "stock", 0, REQ_STOCK_MAX, &st, err, errlen) ||
        get_int(o, "segments", 1, REQ_SEGMENTS_MAX, &seg, err, errlen) ||
        get_int(o, "limit_per_user", 0, REQ_LIMIT_MAX, &lim, err, errlen))
        goto out;
    *limit = lim;
    if (st < 0) {
        snprintf(err, errlen, "stock is required");
        goto out;
    }
    *stock = st;
    *segments = (int)seg;
    rc = 0;
out:
    json_decref(o);
    return rc;
}

int req_parse_release(const char *body, size_t len, char *order_id, size_t idlen,
                      char *err, size_t errlen)
{
    json_t *o = load_object(body, len, err, errlen);
    if (!o)
        return -1;
    const char *id = NULL;
    int rc = -1;
    if (get_str(o, "order_id", &id, err, errlen))
        goto out;
    if (!id) {
        snprintf(err, errlen, "order_id is required");
        goto out;
    }
    if (req_check_id("order_id", id, err, errlen))
        goto out;
    snprintf(order_id, idlen, "%s", id);
    rc = 0;
out:
    json_decref(o);
    return rc;
}
