/* The Idempotency-Key header of POST /orders (draft-ietf-httpapi-
 * idempotency-key-header), mapped onto the order_id: a key names one order
 * for ORDER_IDEM_KEEP_S; its first final answer is replayed to every
 * repeat (services/API.md section 4, "Idempotency-Key"). */
#ifndef ORDER_IDEM_H
#define ORDER_IDEM_H

#include "order_place.h"

#include "base/http.h"

#include <stddef.h>

#define ORDER_IDEM_KEY_MAX 255      /* bytes of a key, quotes excluded */
#define ORDER_IDEM_KEEP_S 86400     /* a key is kept at least this long */

/* Check the header's value and copy the key into out (ORDER_IDEM_KEY_MAX
 * + 1 bytes): 1..255 visible ASCII bytes other than '"' and '\', bare or
 * as a quoted string ("k-1"). 0 on success, -1 with err. */
int order_idem_parse_key(const char *value, char *out, char *err, size_t errlen);

/* The request as keys compare it: the body as canonical JSON (keys sorted,
 * no spaces) and the X-Guard header. Returns a malloc'd string, NULL when
 * out of memory. */
char *order_idem_request(json_t *body, const char *x_guard);

/* Place o under key: a new key places it (o->order_id is kept with the
 * key), a repeat answers from the key (replay, 409, 422) or, when the last
 * attempt had no final answer, places the key's order again. */
void order_idem_place(const struct order_conf *c, struct order_req *o, const char *key,
                      const char *request, struct http_resp *resp);

#endif
