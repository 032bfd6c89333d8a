/* libmicrohttpd glue: body collection, response queueing, JSON errors. */
#include "http.h"

#include "util.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct http_server {
    struct MHD_Daemon *d;
    http_handler_fn fn;
    void *app;
};

struct req_state {
    struct http_req req;
    char *buf;
    size_t cap;
};

void http_text(struct http_resp *resp, int status, const char *ctype, char *text)
{
    free(resp->text);
    resp->status = status;
    resp->text = text;
    resp->content_type = ctype;
}

void http_json(struct http_resp *resp, int status, json_t *json)
{
    char *s = json ? json_dumps(json, JSON_COMPACT) : NULL;
    json_decref(json);
    if (!s) {
        s = strdup("{\"ok\":false,\"error\":\"internal\",\"detail\":\"cannot encode response\"}");
        status = 500;
    }
    http_text(resp, status, "application/json", s);
}

void http_error(struct http_resp *resp, int status, const char *code,
                const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    /* Truncation may have cut a UTF-8 sequence, which jansson refuses:
     * drop the partial character. */
    size_t n = strlen(detail);
    if (n == sizeof(detail) - 1) {
        size_t k = n;
        while (k > 0 && ((unsigned char)detail[k - 1] & 0xC0) == 0x80)
            k--;
        if (k > 0 && ((unsigned char)detail[k - 1] & 0x80))
            detail[k - 1] = '\0';
    }
    http_json(resp, status, json_pack("{s:b,s:s,s:s}", "ok", 0, "error", code,
                                      "detail", detail));
}

const char *http_query(const struct http_req *req, const char *key)
{
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *http_header(const struct http_req *req, const char *key)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, key);
}

static int append_body(struct req_state *st, const char *data, size_t n)
{
    if (st->req.body_too_large)
        return 0;
    if (st->req.body_len + n > HTTP_MAX_BODY) {
        st->req.body_too_large = 1;
        return 0;
    }
    if (st->req.body_len + n + 1 > st->cap) {
        size_t cap = st->cap ? st->cap : 1024;
        while (cap < st->req.body_len + n + 1)
            cap *= 2;
        char *b = realloc(st->buf, cap);
        if (!b)
            return -1;
        st->buf = b;
        st->cap = cap;
    }
    memcpy(st->buf + st->req.body_len, data, n);
    st->req.body_len += n;
    st->buf[st->req.body_len] = '\0';
    return 0;
}

static enum MHD_Result send_resp(struct MHD_Connection *conn, struct http_resp *r)
{
    const char *body = r->text ? r->text : "";
    struct MHD_Response *mr = MHD_create_response_from_buffer(
        strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!mr)
        return MHD_NO;
    MHD_add_response_header(mr, "Content-Type",
                            r->content_type ? r->content_type : "application/json");
    if (r->retry_after[0])
        MHD_add_response_header(mr, "Retry-After", r->retry_after);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned int)r->status, mr);
    MHD_destroy_response(mr);
    return ret;
}

/* MHD calls this several times per request. We answer only after the first
 * call: queueing on the first callback makes MHD 0.9.75 close the
 * connection every time (no keep-alive, ~5x slower). */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct http_server *s = cls;
    struct req_state *st = *con_cls;
    if (!st) {
        st = calloc(1, sizeof(*st));
        if (!st)
            return MHD_NO;
        st->req.conn = conn;
        st->req.method = method;
        st->req.path = url;
        st->req.started = util_now();
        *con_cls = st;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (append_body(st, upload_data, *upload_data_size) != 0)
            return MHD_NO;
        *upload_data_size = 0;
        return MHD_YES;
    }
    st->req.body = st->buf;
    struct http_resp resp = {.status = 500};
    if (st->req.body_too_large)
        http_error(&resp, 413, "body_too_large", "request body exceeds %d bytes",
                   HTTP_MAX_BODY);
    else
        s->fn(s->app, &st->req, &resp);
    if (!resp.text)
        http_error(&resp, 500, "internal", "handler produced no response");
    enum MHD_Result ret = send_resp(conn, &resp);
    free(resp.text);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct req_state *st = *con_cls;
    if (st) {
        free(st->buf);
        free(st);
    }
    *con_cls = NULL;
}

struct http_server *http_start(const char *bind_addr, long port, long threads,
                               http_handler_fn fn, void *app,
                               char *err, size_t errlen)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, bind_addr, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "bad bind address '%s' (IPv4 expected)", bind_addr);
        return NULL;
    }
    struct http_server *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->fn = fn;
    s->app = app;
    s->d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG,
        (uint16_t)port, NULL, NULL, on_request, s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)threads,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)60,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)4096,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)1024,
        MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s:%ld (port taken?)", bind_addr, port);
        free(s);
        return NULL;
    }
    return s;
}

void http_stop(struct http_server *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->d);
    free(s);
}
