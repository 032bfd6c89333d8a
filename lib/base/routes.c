/* The route table's dispatch (routes.h): match, refuse, run, count. */
#include "routes.h"

#include "metrics.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

static const struct {
    unsigned bit;
    const char *name;
} route_methods[] = {{ROUTE_GET, "GET"}, {ROUTE_POST, "POST"}, {ROUTE_PUT, "PUT"}};
#define NMETHODS (sizeof(route_methods) / sizeof(route_methods[0]))

static unsigned method_bit(const char *method)
{
    for (size_t i = 0; i < NMETHODS; i++)
        if (strcmp(route_methods[i].name, method) == 0)
            return route_methods[i].bit;
    return 0;
}

/* 1 when path fits pattern; *param and *plen: its {name} segment (NULL, 0
 * when the pattern has none). */
static int fits(const char *pattern, const char *path, const char **param, size_t *plen)
{
    *param = NULL;
    *plen = 0;
    const char *open = strchr(pattern, '{');
    if (!open)
        return strcmp(pattern, path) == 0;
    size_t head = (size_t)(open - pattern);
    const char *close = strchr(open, '}');
    if (!close || strncmp(pattern, path, head) != 0)
        return 0;
    const char *seg = path + head;
    size_t n = strcspn(seg, "/");
    if (n == 0 || strcmp(close + 1, seg + n) != 0)
        return 0;
    *param = seg;
    *plen = n;
    return 1;
}

/* The first row of the resource that owns path, or NULL. */
static const struct route *resource_of(const struct route_table *t, const char *path,
                                       const char **param, size_t *plen)
{
    for (const struct route *r = t->rows; r->path; r++)
        if (fits(r->path, path, param, plen))
            return r;
    return NULL;
}

/* The row of resource `first` that takes method, or NULL; order[0..
 * *norder): every method the resource takes, as the rows list them. */
static const struct route *row_for(const struct route *first, unsigned method,
                                   unsigned char *order, size_t *norder)
{
    const struct route *hit = NULL;
    *norder = 0;
    for (const struct route *r = first; r->path; r++) {
        if (strcmp(r->path, first->path) != 0)
            continue;
        if (!hit && (r->methods & method))
            hit = r;
        for (size_t i = 0; i < NMETHODS; i++) {
            int seen = 0;
            for (size_t k = 0; k < *norder; k++)
                seen |= order[k] == i;
            if ((r->methods & route_methods[i].bit) && !seen)
                order[(*norder)++] = (unsigned char)i;
        }
    }
    return hit;
}

/* 405 with Allow: "GET, PUT" in the header, "use GET or PUT <path>" in
 * the detail, in the order the table lists them. */
static void refuse_method(const struct http_req *req, const unsigned char *order,
                          size_t norder, struct http_resp *resp)
{
    char words[64] = "";
    size_t at = 0, wat = 0;
    for (size_t k = 0; k < norder; k++) {
        const char *m = route_methods[order[k]].name;
        at += (size_t)snprintf(resp->allow + at, sizeof(resp->allow) - at, "%s%s",
                               k ? ", " : "", m);
        wat += (size_t)snprintf(words + wat, sizeof(words) - wat, "%s%s", k ? " or " : "", m);
        if (at >= sizeof(resp->allow) || wat >= sizeof(words))
            break;
    }
    http_error(resp, 405, "method_not_allowed", "use %s %s", words, req->path);
}

/* The parameter's checks, before the method's: a bad SKU is a 400 on any
 * method. Returns 0 with call->param set, else -1 after answering. */
static int take_param(const struct route *r, const char *param, size_t plen,
                      struct route_call *call, struct http_resp *resp)
{
    char err[256];
    call->param[0] = '\0';
    if (!param)
        return 0;
    if (r->check && r->check(param, plen, err, sizeof(err)) != 0) {
        http_error(resp, 400, "bad_request", "%s", err);
        return -1;
    }
    if (plen >= sizeof(call->param)) {
        http_error(resp, 400, "bad_request", "the path segment is over %d bytes",
                   ROUTE_PARAM_MAX - 1);
        return -1;
    }
    memcpy(call->param, param, plen);
    call->param[plen] = '\0';
    return 0;
}

/* Route the request: returns the label it counts under. */
static const char *answer(const struct route_table *t, void *app, struct route_call *call,
                          const struct http_req *req, struct http_resp *resp)
{
    const char *param;
    size_t plen;
    const struct route *first = resource_of(t, req->path, &param, &plen);
    if (!first) {
        http_error(resp, 404, "not_found", "no route %s %s", req->method, req->path);
        return "other";
    }
    if (take_param(first, param, plen, call, resp) != 0)
        return first->label;
    unsigned char order[NMETHODS];
    size_t norder;
    const struct route *r = row_for(first, method_bit(req->method), order, &norder);
    if (!r) {
        refuse_method(req, order, norder, resp);
        return first->label;
    }
    size_t body_max = r->body_max ? r->body_max : HTTP_MAX_BODY;
    if (req->body_len > body_max) {
        http_error(resp, 413, "body_too_large", "request body exceeds %zu bytes", body_max);
        return r->label;
    }
    call->route = r;
    r->handler(app, call, req, resp);
    return r->label;
}

void route_dispatch(const struct route_table *t, const char *instance, void *app,
                    const struct http_req *req, struct http_resp *resp)
{
    struct route_call call = {.route = NULL, .tag = "-"};
    const char *label = answer(t, app, &call, req, resp);
    if (resp->status >= 500)   /* operators need the reason, not just the count */
        fprintf(stderr, "%s %s: %s %s -> %d %.300s\n", t->service, instance, req->method,
                req->path, resp->status, resp->text ? resp->text : "");
    char labels[160];
    if (t->tag)
        snprintf(labels, sizeof(labels), "route=\"%s\",status=\"%d\",%s=\"%s\"", label,
                 resp->status, t->tag, call.tag);
    else
        snprintf(labels, sizeof(labels), "route=\"%s\",status=\"%d\"", label, resp->status);
    metrics_add("lab_http_requests_total", labels, 1);
    snprintf(labels, sizeof(labels), "route=\"%s\"", label);
    metrics_observe("lab_http_request_duration_seconds", labels, util_now() - req->started);
}

size_t route_paths(const struct route_table *t, enum route_thread thread,
                   const char **out, size_t max)
{
    size_t n = 0;
    for (const struct route *r = t->rows; r->path && n + 1 < max; r++) {
        if (r->thread != thread || strchr(r->path, '{'))
            continue;
        int seen = 0;
        for (size_t k = 0; k < n; k++)
            seen |= strcmp(out[k], r->path) == 0;
        if (!seen)
            out[n++] = r->path;
    }
    if (max)
        out[n] = NULL;
    return n;
}
