/* One request table per service, in the shape of redis's command table
 * (name, handler, arity, flags): each row names a path pattern, the methods
 * it takes, its handler, its metric label, its body limit and the thread it
 * runs on. route_dispatch refuses what fits no row before any handler runs
 * -- an unknown path (404), a path parameter its check refuses (400), a
 * method the path does not take (405 with Allow), a body over the row's
 * limit (413) -- and counts every request by route label and status. */
#ifndef LAB_ROUTES_H
#define LAB_ROUTES_H

#include "http.h"

#include <stddef.h>

/* Methods a row takes (a bit set). HEAD, DELETE and the rest fit no row. */
#define ROUTE_GET  (1u << 0)
#define ROUTE_POST (1u << 1)
#define ROUTE_PUT  (1u << 2)

/* Where a row's handler runs (http_start). */
enum route_thread {
    ROUTE_WORKER = 0,  /* a worker thread: may block on a backend */
    ROUTE_CONTROL,     /* the control pool: answers while every worker holds a sale */
    ROUTE_INLINE,      /* MHD's I/O thread, no hand-off: only for handlers that never block */
};

/* The longest path parameter a handler can be given, NUL included. */
#define ROUTE_PARAM_MAX 128

struct route;

/* A matched request as its handler sees it. */
struct route_call {
    const struct route *route;
    char param[ROUTE_PARAM_MAX];   /* the pattern's {name} segment; "" when it has none */
    const char *tag;               /* the table's extra label value (static storage); "-" */
};

typedef void (*route_handler_fn)(void *app, struct route_call *call,
                                 const struct http_req *req, struct http_resp *resp);

/* The check of a path parameter s[0..n) (not NUL-terminated, n >= 1):
 * 0 when the handler may have it, else -1 with the 400 detail in err. */
typedef int (*route_param_fn)(const char *s, size_t n, char *err, size_t errlen);

struct route {
    /* Exact ("/healthz"), or with one parameter segment of 1+ bytes
     * without '/' ("/inventory/{sku}/audit"). Rows with the same path
     * are one resource, one row per method set; the first resource (in
     * table order) whose pattern fits a request's path owns it, so exact
     * paths go before the patterns they would also fit. */
    const char *path;
    unsigned methods;           /* ROUTE_GET | ROUTE_POST | ... */
    route_handler_fn handler;
    const char *label;          /* route="..." of the request metrics */
    size_t body_max;            /* bytes; 0: HTTP_MAX_BODY, the server's own cap */
    enum route_thread thread;
    route_param_fn check;       /* the parameter's check; NULL: any that fits */
};

struct route_table {
    const char *service;        /* first word of the log line of a 5xx answer */
    const struct route *rows;   /* ends with a row whose path is NULL */
    /* An extra label of the request metrics a handler may set through
     * call->tag ("guard"); NULL: none. */
    const char *tag;
};

/* Answer a request from the table t (app goes to the handler as is; the
 * instance names the service in the 5xx log line), then add it to
 * lab_http_requests_total{route,status[,tag]} and
 * lab_http_request_duration_seconds{route}. Requests that fit no row count
 * as route="other". */
void route_dispatch(const struct route_table *t, const char *instance, void *app,
                    const struct http_req *req, struct http_resp *resp);

/* The exact paths of t's rows that run on `thread`, into out[0..max-1]
 * NULL-terminated (a path once, however many rows share it; past max-1 the
 * rest are left out). Returns how many. For http_start's lists. */
size_t route_paths(const struct route_table *t, enum route_thread thread,
                   const char **out, size_t max);

#endif
