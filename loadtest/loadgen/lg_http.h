/* Incremental HTTP/1.x response parser: fed whatever recv() returned, byte
 * by byte or several pipelined responses at once; keeps a bounded status/
 * header line and the first bytes of the body, never allocates. */
#ifndef LG_HTTP_H
#define LG_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define LG_HTTP_LINE_MAX  256     /* longer header lines are truncated */
#define LG_HTTP_HEAD_MAX  65536   /* status line + headers, else an error */
#define LG_HTTP_BODY_KEEP 512     /* body prefix kept for the error scan */

#define LG_HTTP_MORE  0   /* everything consumed, response not complete */
#define LG_HTTP_DONE  1   /* one response complete, see *used */
#define LG_HTTP_ERR  -1   /* malformed response; errstr says why */

struct lg_http_parser {
    int state;
    int no_body;            /* response to HEAD: headers only */
    int status;             /* 100..599 once the status line is parsed */
    int minor;              /* HTTP/1.<minor> */
    int conn_close;         /* server will close after this response */
    int keep_alive_hdr;     /* "Connection: keep-alive" (HTTP/1.0) */
    int chunked;
    int has_clen;
    uint64_t clen;
    uint64_t remaining;     /* bytes left in the body or current chunk */
    uint64_t body_total;    /* body bytes seen (dechunked) */
    size_t head_bytes;
    size_t line_len;
    int line_trunc;
    char line[LG_HTTP_LINE_MAX];
    size_t body_len;        /* bytes kept in body[] */
    char body[LG_HTTP_BODY_KEEP];
    const char *errstr;
};

/* Prepare for the next response; no_body is 1 when the request was HEAD. */
void lg_http_init(struct lg_http_parser *p, int no_body);

/* Feed len bytes. Sets *used to the bytes consumed: on LG_HTTP_DONE the rest
 * of buf (buf + *used) belongs to the next response (pipelining), call
 * lg_http_init and feed it again. On LG_HTTP_MORE all bytes were used. */
int lg_http_feed(struct lg_http_parser *p, const char *buf, size_t len, size_t *used);

/* The peer closed the connection: LG_HTTP_DONE when the body was delimited
 * by the close (no Content-Length, not chunked), else LG_HTTP_ERR. */
int lg_http_eof(struct lg_http_parser *p);

/* Find "error":"<code>" in a JSON body prefix. Copies the code (only
 * [A-Za-z0-9_.-], at most cap-1 bytes, NUL-terminated) and returns its
 * length; 0 when there is none. */
size_t lg_http_error_code(const char *body, size_t len, char *out, size_t cap);

#endif
