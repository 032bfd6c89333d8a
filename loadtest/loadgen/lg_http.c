/* HTTP/1.x response parser (see lg_http.h). */
#include "lg_http.h"

#include <string.h>
#include <strings.h>

enum {
    S_STATUS, S_HEADER, S_BODY_CLEN, S_BODY_EOF,
    S_CHUNK_SIZE, S_CHUNK_DATA, S_CHUNK_CRLF, S_TRAILER, S_DONE, S_ERR
};

void lg_http_init(struct lg_http_parser *p, int no_body)
{
    p->state = S_STATUS;
    p->no_body = no_body;
    p->status = 0;
    p->minor = 1;
    p->conn_close = 0;
    p->keep_alive_hdr = 0;
    p->chunked = 0;
    p->has_clen = 0;
    p->clen = 0;
    p->remaining = 0;
    p->body_total = 0;
    p->head_bytes = 0;
    p->line_len = 0;
    p->line_trunc = 0;
    p->body_len = 0;
    p->errstr = NULL;
}

static int fail(struct lg_http_parser *p, const char *why)
{
    p->state = S_ERR;
    p->errstr = why;
    return LG_HTTP_ERR;
}

static void keep_body(struct lg_http_parser *p, const char *b, size_t n)
{
    size_t room = LG_HTTP_BODY_KEEP - p->body_len;
    if (n > room)
        n = room;
    memcpy(p->body + p->body_len, b, n);
    p->body_len += n;
}

/* Collect one line (without CR LF). Returns 1 with line and llen set when a
 * whole line is available (pointing into buf when it was not split across
 * reads, else into p->line), 0 when buf ran out first. Advances *i. */
static int take_line(struct lg_http_parser *p, const char *buf, size_t len,
                     size_t *i, const char **line, size_t *llen)
{
    const char *start = buf + *i;
    size_t avail = len - *i;
    const char *nl = memchr(start, '\n', avail);
    size_t n = nl ? (size_t)(nl - start) : avail;
    if (nl && p->line_len == 0 && !p->line_trunc) {
        *line = start;
        *llen = n;
    } else {
        size_t room = LG_HTTP_LINE_MAX - p->line_len;
        size_t c = n < room ? n : room;
        memcpy(p->line + p->line_len, start, c);
        p->line_len += c;
        if (c < n)
            p->line_trunc = 1;
        *line = p->line;
        *llen = p->line_len;
    }
    *i += n + (nl ? 1 : 0);
    if (p->state == S_STATUS || p->state == S_HEADER || p->state == S_TRAILER)
        p->head_bytes += n + (nl ? 1 : 0);
    if (!nl)
        return 0;
    if (*llen && (*line)[*llen - 1] == '\r')
        (*llen)--;
    return 1;
}

static void line_done(struct lg_http_parser *p)
{
    p->line_len = 0;
    p->line_trunc = 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int parse_status(struct lg_http_parser *p, const char *l, size_t n)
{
    /* "HTTP/1.x SSS[ reason]" */
    if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0 || !is_digit(l[7]) || l[8] != ' ' ||
        !is_digit(l[9]) || !is_digit(l[10]) || !is_digit(l[11]) ||
        (n > 12 && l[12] != ' '))
        return fail(p, "bad status line");
    p->minor = l[7] - '0';
    p->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
    if (p->status < 100)
        return fail(p, "bad status code");
    return 0;
}

/* Does the comma-separated token list v contain tok (case-insensitive)? */
static int has_token(const char *v, size_t n, const char *tok)
{
    size_t tl = strlen(tok), i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e - s == tl && strncasecmp(v + s, tok, tl) == 0)
            return 1;
    }
    return 0;
}

static int header_is(const char *l, size_t namelen, const char *name)
{
    return namelen == strlen(name) && strncasecmp(l, name, namelen) == 0;
}

static int parse_header(struct lg_http_parser *p, const char *l, size_t n, int trunc)
{
    const char *colon = memchr(l, ':', n);
    if (!colon || colon == l)
        return fail(p, "bad header line");
    size_t nl = (size_t)(colon - l);
    const char *v = colon + 1, *e = l + n;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    size_t vl = (size_t)(e - v);
    if (header_is(l, nl, "content-length")) {
        if (trunc || vl == 0)
            return fail(p, "bad Content-Length");
        uint64_t x = 0;
        for (size_t k = 0; k < vl; k++) {
            if (!is_digit(v[k]) || x > (UINT64_MAX - 9) / 10)
                return fail(p, "bad Content-Length");
            x = x * 10 + (uint64_t)(v[k] - '0');
        }
        if (p->has_clen && p->clen != x)
            return fail(p, "conflicting Content-Length");
        p->has_clen = 1;
        p->clen = x;
    } else if (header_is(l, nl, "transfer-encoding")) {
        if (trunc)
            return fail(p, "Transfer-Encoding too long");
        /* chunked must be the last coding; anything else we cannot frame */
        const char *last = v + vl;
        const char *c = last;
        while (c > v && c[-1] != ',')
            c--;
        if (has_token(c, (size_t)(last - c), "chunked"))
            p->chunked = 1;
        else if (!has_token(v, vl, "identity"))
            return fail(p, "unsupported Transfer-Encoding");
    } else if (header_is(l, nl, "connection")) {
        if (has_token(v, vl, "close"))
            p->conn_close = 1;
        if (has_token(v, vl, "keep-alive"))
            p->keep_alive_hdr = 1;
    }
    return 0;
}

/* Headers are over: decide how the body is framed. */
static int headers_done(struct lg_http_parser *p)
{
    if (p->minor == 0 && !p->keep_alive_hdr)
        p->conn_close = 1;
    if (p->status < 200 && p->status != 101) {
        /* interim response (100 Continue): the real one follows */
        int nb = p->no_body;
        lg_http_init(p, nb);
        return 0;
    }
    if (p->no_body || p->status == 204 || p->status == 304 || p->status == 101) {
        p->state = S_DONE;
        return 1;
    }
    if (p->chunked) {
        p->has_clen = 0;   /* chunked wins over Content-Length (RFC 9112 6.3) */
        p->state = S_CHUNK_SIZE;
        return 0;
    }
    if (p->has_clen) {
        if (p->clen == 0) {
            p->state = S_DONE;
            return 1;
        }
        p->remaining = p->clen;
        p->state = S_BODY_CLEN;
        return 0;
    }
    p->conn_close = 1;
    p->state = S_BODY_EOF;
    return 0;
}

static int parse_chunk_size(struct lg_http_parser *p, const char *l, size_t n, int trunc)
{
    uint64_t x = 0;
    size_t k = 0;
    for (; k < n; k++) {
        char c = l[k];
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else break;
        if (x >> 60)
            return fail(p, "chunk size overflow");
        x = x * 16 + (uint64_t)d;
    }
    if (k == 0 || (k < n && l[k] != ';' && l[k] != ' ' && l[k] != '\t') ||
        (trunc && k == n))
        return fail(p, "bad chunk size");
    p->remaining = x;
    p->state = x ? S_CHUNK_DATA : S_TRAILER;
    return 0;
}

int lg_http_feed(struct lg_http_parser *p, const char *buf, size_t len, size_t *used)
{
    size_t i = 0;
    const char *l;
    size_t n;
    int r = LG_HTTP_MORE;
    while (r == LG_HTTP_MORE && (i < len || p->state == S_DONE)) {
        switch (p->state) {
        case S_STATUS:
        case S_HEADER:
        case S_TRAILER:
        case S_CHUNK_SIZE:
        case S_CHUNK_CRLF: {
            int st = p->state;
            if (!take_line(p, buf, len, &i, &l, &n)) {
                if (p->head_bytes > LG_HTTP_HEAD_MAX)
                    r = fail(p, "response head too large");
                break;
            }
            int trunc = p->line_trunc;
            if (p->head_bytes > LG_HTTP_HEAD_MAX) {
                r = fail(p, "response head too large");
                break;
            }
            if (st == S_STATUS) {
                if (parse_status(p, l, n) == 0)
                    p->state = S_HEADER;
                else
                    r = LG_HTTP_ERR;
            } else if (st == S_HEADER) {
                if (n == 0)
                    r = headers_done(p) ? LG_HTTP_DONE : LG_HTTP_MORE;
                else if (parse_header(p, l, n, trunc) != 0)
                    r = LG_HTTP_ERR;
            } else if (st == S_TRAILER) {
                if (n == 0) {
                    p->state = S_DONE;
                    r = LG_HTTP_DONE;
                }
            } else if (st == S_CHUNK_SIZE) {
                if (parse_chunk_size(p, l, n, trunc) != 0)
                    r = LG_HTTP_ERR;
            } else {
                if (n != 0)
                    r = fail(p, "missing CRLF after chunk");
                else
                    p->state = S_CHUNK_SIZE;
            }
            line_done(p);
            break;
        }
        case S_BODY_CLEN:
        case S_CHUNK_DATA:
        case S_BODY_EOF: {
            size_t avail = len - i;
            size_t take = avail;
            if (p->state != S_BODY_EOF && p->remaining < take)
                take = (size_t)p->remaining;
            keep_body(p, buf + i, take);
            p->body_total += take;
            i += take;
            if (p->state == S_BODY_EOF)
                break;
            p->remaining -= take;
            if (p->remaining == 0) {
                if (p->state == S_BODY_CLEN) {
                    p->state = S_DONE;
                    r = LG_HTTP_DONE;
                } else {
                    p->state = S_CHUNK_CRLF;
                }
            }
            break;
        }
        case S_DONE:
            r = LG_HTTP_DONE;
            break;
        default:
            r = fail(p, p->errstr ? p->errstr : "parser in error state");
            break;
        }
    }
    *used = i;
    return r;
}

int lg_http_eof(struct lg_http_parser *p)
{
    if (p->state == S_BODY_EOF) {
        p->state = S_DONE;
        return LG_HTTP_DONE;
    }
    if (p->state == S_DONE)
        return LG_HTTP_DONE;
    return fail(p, "connection closed mid-response");
}

size_t lg_http_error_code(const char *body, size_t len, char *out, size_t cap)
{
    static const char key[] = "\"error\"";
    const char *end = body + len, *p = body;
    while (p < end) {
        const char *k = memmem(p, (size_t)(end - p), key, sizeof key - 1);
        if (!k)
            break;
        const char *q = k + sizeof key - 1;
        p = q;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
            q++;
        if (q >= end || *q != ':')
            continue;
        q++;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
            q++;
        if (q >= end || *q != '"')
            continue;
        q++;
        size_t n = 0;
        while (q + n < end && q[n] != '"') {
            char c = q[n];
            int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                     (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
            if (!ok)
                break;
            n++;
        }
        if (n == 0 || q + n >= end || q[n] != '"' || cap == 0)
            continue;
        if (n >= cap)
            n = cap - 1;
        memcpy(out, q, n);
        out[n] = '\0';
        return n;
    }
    if (cap)
        out[0] = '\0';
    return 0;
}
