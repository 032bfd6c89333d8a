/* Thin HTTP server over libmicrohttpd: collects the body (bounded), applies
 * the edge rules (lib/base/edge.h: UTF-8, Content-Type), hands a finished
 * request to one handler, sends JSON or text back. MHD's own threads only
 * do I/O: the handler runs on a worker thread of ours and may block
 * (database, hold_ms); "control" paths (/healthz, /metrics) have their own
 * small pool so they answer while every worker is busy. */
#ifndef LAB_HTTP_H
#define LAB_HTTP_H

#include <jansson.h>
#include <stddef.h>

#define HTTP_MAX_BODY (16 * 1024)

struct MHD_Connection;

struct http_req {
    struct MHD_Connection *conn;
    const char *method;
    const char *path;          /* URL path without the query string */
    char *body;                /* NUL-terminated, NULL when empty */
    size_t body_len;
    int body_too_large;        /* body exceeded HTTP_MAX_BODY (already discarded) */
    double started;            /* util_now() at first byte */
};

struct http_resp {
    int status;
    char *text;                /* malloc'd body, owned by the response */
    const char *content_type;
    char retry_after[16];      /* non-empty: sent as Retry-After */
    char allow[32];            /* non-empty: sent as Allow (a 405's methods) */
};

typedef void (*http_handler_fn)(void *app, const struct http_req *req,
                                struct http_resp *resp);

struct http_server;

#define HTTP_IO_THREADS 2        /* MHD threads: sockets and parsing only */
#define HTTP_CONTROL_THREADS 2   /* the control paths' own workers */

/* Limits that hold under abuse (services/API.md "Connection limits"). */
#define HTTP_MAX_CONNS 4096          /* open connections in all */
#define HTTP_PER_CLIENT_CONNS 1024   /* open connections from one IP address */
#define HTTP_RESERVED_CONNS 64       /* kept for the control paths (/healthz) */
/* From a connection's start, or the end of its previous request, the next
 * request (headers and body) must have arrived within this many ms; bytes
 * arriving slowly do not extend it. Above HTTP_MAX_CONNS -
 * HTTP_RESERVED_CONNS open connections the short one applies. */
#define HTTP_READ_DEADLINE_MS 10000
#define HTTP_READ_DEADLINE_BUSY_MS 1000

/* Start listening on bind:port with `threads` worker threads for the
 * handler (plus HTTP_CONTROL_THREADS for the paths in `control`, a
 * NULL-terminated list that may be NULL). Paths in `inline_paths` (same
 * form) are answered on MHD's own thread, with no hand-off: only for
 * handlers that never block (the app's promise). Returns NULL and fills
 * err on failure (port taken, bad address, no threads). */
struct http_server *http_start(const char *bind_addr, long port, long threads,
                               const char *const *control, const char *const *inline_paths,
                               http_handler_fn fn, void *app, char *err, size_t errlen);

/* Warm start: each worker thread calls fn(app) before it serves (it opens
 * the thread's connections; 0 when they are all up) and again at most once
 * a second, between requests, until it succeeds. Set before http_start;
 * NULL (the default) counts every worker as warm. */
typedef int (*http_warm_fn)(void *app);
void http_set_warm(http_warm_fn fn);
/* Workers warm so far and workers started (the process's one server). */
void http_warm_state(long *warm, long *workers);
/* Stop serving: requests already handed to a worker finish, later ones get
 * 503; joins every thread; accepts NULL. */
void http_stop(struct http_server *s);

/* Query-string and header lookups; NULL when absent. */
const char *http_query(const struct http_req *req, const char *key);
const char *http_header(const struct http_req *req, const char *key);

/* Set the response body to `json` serialized (steals the reference). */
void http_json(struct http_resp *resp, int status, json_t *json);
/* The API's error body {"ok":false,"error":code,"detail":...}. */
void http_error(struct http_resp *resp, int status, const char *code,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Plain body (takes ownership of malloc'd text). */
void http_text(struct http_resp *resp, int status, const char *ctype, char *text);

#endif
