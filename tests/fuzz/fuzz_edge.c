/* libFuzzer target for the HTTP edge and request parsing, without a socket:
 * the same checks http.c applies (lib/base/edge.h), then the parsers a route
 * runs on what passed (lib/stock/request.h, every guard's options), then the error body the client
 * would get (http_error). Properties, not just "no crash":
 *   - edge_utf8_valid agrees with jansson's own UTF-8 check;
 *   - whatever is refused is a 400/401/403/415 whose body encodes (never the
 *     500 "cannot encode response" a non-UTF-8 detail used to cause);
 *   - the bearer check accepts exactly "Bearer <token>";
 *   - the route table answers any method and path with 200, 400, 404, 405
 *     (and Allow) or 413, a parameter never past its buffer.
 * Input: fields separated by NUL bytes: method, path, header value,
 * content type, authorization, token, body (missing fields are empty). */
#include "base/edge.h"
#include "base/http.h"
#include "base/routes.h"
#include "guards/guard.h"
#include "stock/cart.h"
#include "stock/request.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NFIELDS 7

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_edge: property violated: %s\n", what);
        abort();
    }
}

/* The client's view of a refusal: an error body that encodes. */
static void answer(int status, const char *code, const char *detail)
{
    struct http_resp r = {0};
    http_error(&r, status, code, "%s", detail);
    must(r.status == status, "error body failed to encode (would be a 500)");
    must(r.text != NULL, "error body missing");
    json_t *j = json_loads(r.text, 0, NULL);
    must(j != NULL, "error body is not JSON");
    json_decref(j);
    free(r.text);
}

/* The deduct route's cart: cart_from refuses with a 400 that encodes, or
 * hands back 1..CART_LINES_MAX lines, each a valid SKU and quantity. */
static void cart_checked(json_t *o)
{
    static struct cart c;   /* large; the fuzzer runs one input at a time */
    char err[512];
    int rc = cart_from(o, &c, err, sizeof(err));
    must(rc != 1, "a body with lines and no sku was not read as a cart");
    if (rc < 0) {
        answer(400, "bad_request", err);
        return;
    }
    must(c.nlines >= 1 && c.nlines <= CART_LINES_MAX, "cart line count out of bounds");
    for (int i = 0; i < c.nlines; i++) {
        must(req_check_id("sku", c.line[i].sku, err, sizeof(err)) == 0, "cart accepted a bad sku");
        must(c.line[i].qty >= 1 && c.line[i].qty <= REQ_QTY_MAX, "cart qty out of bounds");
    }
}

static void parsers(const char *path, const char *body, size_t blen)
{
    char err[512], guard[32], id[STOCK_ID_MAX + 1];
    struct req_defaults d = {3000};
    struct deduct_req dr;
    long long stock;
    int segments;
    if (req_check_id("sku", path, err, sizeof(err)) != 0)
        answer(400, "bad_request", err);
    /* The deduct route's way: the body parsed once, the sale's fields,
     * then every guard's options from the same object. */
    json_t *o = req_body_object(body, blen, err, sizeof(err));
    int rc = o ? req_deduct_from(o, &d, &dr, guard, sizeof(guard), err, sizeof(err)) : -1;
    int nextra;
    char guard2[32], err2[512];
    struct deduct_req dr2;
    /* A body with "lines" and no "sku" is a cart: the single-SKU parser
     * refuses it, the route hands it to cart_from. */
    int is_cart = rc == 0 && !dr.sku[0];
    must((req_parse_deduct(body, blen, &d, &dr2, guard2, sizeof(guard2), &nextra, err2,
                           sizeof(err2)) == 0) == (rc == 0 && !is_cart),
         "req_parse_deduct and req_deduct_from disagree on a single-SKU sale");
    if (rc != 0) {
        answer(400, "bad_request", err);
    } else if (is_cart) {
        cart_checked(o);
    } else {
        must(req_check_id("sku", dr.sku, err, sizeof(err)) == 0, "accepted a bad sku");
        /* The options of every guard: a 400 that quotes the client's key
         * still encodes. */
        size_t n;
        const struct guard *const *all = guard_all(&n);
        for (size_t i = 0; i < n; i++) {
            struct guard_opts store;
            const void *opts;
            if (guard_opts_from(all[i], o, &store, &opts, err, sizeof(err)) != 0) {
                must(nextra > 0, "a guard refused a body of the sale's own fields");
                answer(400, "bad_request", err);
            }
        }
    }
    json_decref(o);
    if (req_parse_seed(body, blen, &stock, &segments, err, sizeof(err)) != 0)
        answer(400, "bad_request", err);
    else
        must(stock >= 0 && stock <= REQ_STOCK_MAX && segments >= 1 &&
                 segments <= REQ_SEGMENTS_MAX, "seed out of bounds");
    if (req_parse_release(body, blen, id, sizeof(id), err, sizeof(err)) != 0)
        answer(400, "bad_request", err);
}

/* A route table in the services' shape: the dispatch answers every path
 * and method with a status of its own and a body that encodes. */
static void ok_handler(void *app, struct route_call *call, const struct http_req *req,
                       struct http_resp *resp)
{
    (void)app, (void)req;
    must(strlen(call->param) < ROUTE_PARAM_MAX && !strchr(call->param, '/'),
         "a path parameter past its buffer or across a '/'");
    http_json(resp, 200, json_pack("{s:s}", "param", call->param));
}

static const struct route fuzz_rows[] = {
    {"/inventory/deduct", ROUTE_POST, ok_handler, "deduct", 0, ROUTE_WORKER, NULL},
    {"/healthz", ROUTE_GET, ok_handler, "healthz", 0, ROUTE_CONTROL, NULL},
    {"/inventory/{sku}/audit", ROUTE_GET, ok_handler, "audit", 0, ROUTE_WORKER, req_check_sku_n},
    {"/inventory/{sku}", ROUTE_GET, ok_handler, "sku", 0, ROUTE_WORKER, req_check_sku_n},
    {"/inventory/{sku}", ROUTE_PUT, ok_handler, "sku", 64, ROUTE_WORKER, req_check_sku_n},
    {"/free/{any}", ROUTE_GET, ok_handler, "free", 0, ROUTE_WORKER, NULL},
    {NULL, 0, NULL, NULL, 0, ROUTE_WORKER, NULL},
};
static const struct route_table fuzz_routes = {"fuzz", fuzz_rows, "guard"};

static void route(const char *method, const char *path, size_t blen)
{
    struct http_req req = {.method = method, .path = path, .body_len = blen};
    struct http_resp resp = {0};
    route_dispatch(&fuzz_routes, "fuzz-1", NULL, &req, &resp);
    int s = resp.status;
    must(s == 200 || s == 400 || s == 404 || s == 405 || s == 413, "route status");
    must((s == 405) == (resp.allow[0] != '\0'), "Allow on a 405 and only there");
    json_t *j = resp.text ? json_loads(resp.text, 0, NULL) : NULL;
    must(j != NULL, "route body is not JSON");
    json_decref(j);
    free(resp.text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Copy so every field is NUL-terminated (C strings, as MHD gives them);
     * the body keeps its length and may hold anything after its NUL split. */
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    const char *f[NFIELDS];
    size_t flen[NFIELDS];
    size_t at = 0;
    for (int i = 0; i < NFIELDS; i++) {
        f[i] = buf + (at < size ? at : size);
        size_t n = at < size ? strnlen(f[i], size - at) : 0;
        if (i == NFIELDS - 1)
            n = at < size ? size - at : 0;   /* the body: the rest */
        flen[i] = n;
        at += n + 1;
    }
    const char *method = f[0], *path = f[1], *hval = f[2], *ctype = f[3], *authz = f[4],
               *token = f[5], *body = f[6];
    size_t blen = flen[6];

    /* UTF-8 oracle: jansson refuses exactly the strings we refuse. */
    for (int i = 0; i < NFIELDS; i++) {
        json_t *s = json_stringn(f[i], flen[i]);
        must((s != NULL) == (edge_utf8_valid(f[i], flen[i]) != 0), "UTF-8 disagrees with jansson");
        json_decref(s);
    }

    /* The edge, in http.c's order. */
    struct edge_verdict v = {0};
    int st = edge_check_text("path", path, flen[1], &v);
    if (!st)
        st = edge_check_text("header X-Fuzz", hval, flen[2], &v);
    if (!st)
        st = edge_check_body(method, ctype, body, blen, &v);
    must(st == 0 || st == 400 || st == 415, "edge status");
    must(st != 415 || (edge_method_has_body(method) && !edge_is_json_type(ctype)),
         "415 without cause");
    if (st) {
        answer(st, v.code, v.detail);
    } else {
        parsers(path, body, blen);
        route(method, path, blen);
    }

    /* Bearer: exactly "Bearer " + token, scheme case-insensitive. */
    int a = edge_bearer_check(authz, token);
    int expect_ok = !*token || (strncasecmp(authz, "Bearer ", 7) == 0 &&
                                strcmp(authz + 7, token) == 0);
    must((a == EDGE_AUTH_OK) == expect_ok, "bearer check");
    if (a != EDGE_AUTH_OK)
        answer(a, a == EDGE_AUTH_MISSING ? "unauthorized" : "forbidden", "admin token");
    free(buf);
    return 0;
}
