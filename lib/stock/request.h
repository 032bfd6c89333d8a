/* Validation of request bodies and identifiers. Pure functions: no I/O, so
 * every rule is unit-tested. Each returns 0 when valid, or -1 with a human
 * sentence in err (the API's 400 bad_request detail). */
#ifndef LAB_REQUEST_H
#define LAB_REQUEST_H

#include "deduct.h"

#include <jansson.h>
#include <stddef.h>

#define REQ_QTY_MAX 1000
#define REQ_HOLD_MAX_MS 10000
#define REQ_LOCK_WAIT_MAX_MS 60000
#define REQ_STOCK_MAX 1000000000LL
#define REQ_SEGMENTS_MAX 64
#define REQ_SEGMENTS_DEFAULT 10

struct req_defaults {
    long lock_wait_ms;
};

/* The deduct body's fields every guard accepts: sku, qty, order_id,
 * user_id, guard, hold_ms, lock_wait_ms, limit_check (in this order). Any other field
 * belongs to a guard (guards/guard.h: guard_parse_opts). */
extern const char *const req_deduct_fields[];
extern const size_t req_deduct_nfields;
/* 1 when name is one of req_deduct_fields. */
int req_deduct_field(const char *name);

/* SKUs, order ids and user ids: 1..64 bytes of A-Z a-z 0-9 . _ : -, and
 * they are compared as exact bytes everywhere (MySQL binary collation,
 * Redis keys, lock names). A narrow alphabet keeps every spelling one
 * identity: no case folding, no trailing-space padding, no Unicode
 * normalisation, nothing that needs escaping in a URL or a Redis key. */
int req_check_id(const char *what, const char *s, char *err, size_t errlen);
/* req_check_id("sku", ...) on s[0..n), not NUL-terminated: a SKU as a
 * path segment ("/inventory/{sku}", a route's parameter check). */
int req_check_sku_n(const char *s, size_t n, char *err, size_t errlen);
/* 1 when c belongs to the identifier alphabet. */
int req_id_char_ok(unsigned char c);

/* Parse POST /inventory/deduct: the sale's own fields. Fills out
 * (order_id and user_id left "" when absent, opts NULL) and guard (the
 * body's "guard", "" when absent); *nextra receives the number of other
 * fields, which the chosen guard must accept (guard_parse_opts). An empty
 * body is an error: sku is required. */
int req_parse_deduct(const char *body, size_t len, const struct req_defaults *d,
                     struct deduct_req *out, char *guard, size_t guardlen, int *nextra,
                     char *err, size_t errlen);

/* The body of a write as a JSON object (duplicate keys refused): a new
 * reference the caller json_decref's, or NULL with err (no body, malformed
 * JSON, not an object). */
json_t *req_body_object(const char *body, size_t len, char *err, size_t errlen);

/* The sale's own fields of a deduct body o (req_body_object), as
 * req_parse_deduct reads them; o's other fields are left for the chosen
 * guard (guard_opts_from), so the body is parsed once. */
int req_deduct_from(json_t *o, const struct req_defaults *d, struct deduct_req *out,
                    char *guard, size_t guardlen, char *err, size_t errlen);

/* Parse PUT /inventory/{sku}: stock 0..1e9 (required), segments 1..64
 * (default 10). */
int req_parse_seed(const char *body, size_t len, long long *stock, int *segments,
                   char *err, size_t errlen);
/* req_parse_seed with the seed's purchase limit: "limit_per_user",
 * 0..REQ_LIMIT_MAX units per user, absent = 0 (no limit: a reseed sets
 * the limit every time, it does not keep the old one). */
#define REQ_LIMIT_MAX 1000000LL
int req_parse_seed_limit(const char *body, size_t len, long long *stock, int *segments,
                         long long *limit, char *err, size_t errlen);

/* Parse POST /inventory/release: order_id required. */
int req_parse_release(const char *body, size_t len, char *order_id, size_t idlen,
                      char *err, size_t errlen);

/* Defaults for a deduction that comes without a body (the seeds' GET). */
void req_default_deduct(const struct req_defaults *d, struct deduct_req *out);

#endif
