/* lg_http: response parsing fed whole, byte by byte and pipelined; chunked
 * bodies, Connection: close, close-delimited bodies, bad input; the JSON
 * error-code scan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "../../loadtest/loadgen/lg_http.h"

#define ERR_BODY "{\"ok\":false,\"error\":\"out_of_stock\",\"detail\":\"no stock\"}"

struct resp_case {
    const char *label;
    const char *input;
    int head;            /* request was HEAD */
    int want;            /* LG_HTTP_DONE / LG_HTTP_MORE / LG_HTTP_ERR */
    int status;
    int conn_close;
    const char *body;    /* kept body prefix, NULL: don't check */
    size_t left;         /* bytes after the response (pipelining) */
};

static const struct resp_case cases[] = {
    {"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 0, LG_HTTP_DONE, 200, 0,
     "hello", 0},
    {"zero length", "HTTP/1.1 204 No Content\r\n\r\n", 0, LG_HTTP_DONE, 204, 0, "", 0},
    {"empty content-length", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, LG_HTTP_DONE, 200, 0,
     "", 0},
    {"error body", "HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: 55\r\n\r\n" ERR_BODY,
     0, LG_HTTP_DONE, 409, 0, ERR_BODY, 0},
    {"bare LF lines", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", 0, LG_HTTP_DONE, 200, 0, "ok", 0},
    {"no reason phrase", "HTTP/1.1 503\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n", 0, LG_HTTP_DONE,
     503, 0, "", 0},
    {"header case and spaces", "HTTP/1.1 200 OK\r\ncOnTeNt-LeNgTh:    3  \r\n\r\nabc", 0, LG_HTTP_DONE,
     200, 0, "abc", 0},
    {"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", 0,
     LG_HTTP_DONE, 200, 1, "ok", 0},
    {"connection token list", "HTTP/1.1 200 OK\r\nConnection: Upgrade, Close\r\nContent-Length: 0\r\n\r\n",
     0, LG_HTTP_DONE, 200, 1, "", 0},
    {"keep-alive explicit", "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", 0,
     LG_HTTP_DONE, 200, 0, "", 0},
    {"HTTP/1.0 closes", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", 0, LG_HTTP_DONE, 200, 1, "x", 0},
    {"HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx", 0,
     LG_HTTP_DONE, 200, 0, "x", 0},
    {"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n",
     0, LG_HTTP_DONE, 200, 0, "hello world", 0},
    {"chunked with trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n",
     0, LG_HTTP_DONE, 200, 0, "0123456789", 0},
    {"chunked beats content-length", "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
     0, LG_HTTP_DONE, 200, 0, "ok", 0},
    {"HEAD has no body", "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", 1, LG_HTTP_DONE, 200, 0, "", 0},
    {"304 has no body", "HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n", 0, LG_HTTP_DONE, 304, 0,
     "", 0},
    {"100 continue then 200", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
     0, LG_HTTP_DONE, 201, 0, "ok", 0},
    {"pipelined: two responses", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 404 NF\r\nContent-Length: 0\r\n\r\n",
     0, LG_HTTP_DONE, 200, 0, "a", 38},
    {"close-delimited body waits for EOF", "HTTP/1.1 200 OK\r\n\r\nuntil close", 0, LG_HTTP_MORE, 200, 1,
     "until close", 0},
    {"partial body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, LG_HTTP_MORE, 200, 0, "abc", 0},
    {"partial head", "HTTP/1.1 200 OK\r\nContent-Le", 0, LG_HTTP_MORE, 200, 0, NULL, 0},
    {"bad status line: not HTTP", "HTTX/1.1 200 OK\r\n\r\n", 0, LG_HTTP_ERR, 0, 0, NULL, 0},
    {"bad status line: letters", "HTTP/1.1 2x0 OK\r\n\r\n", 0, LG_HTTP_ERR, 0, 0, NULL, 0},
    {"bad status line: HTTP/2", "HTTP/2 200\r\n\r\n", 0, LG_HTTP_ERR, 0, 0, NULL, 0},
    {"bad status line: empty", "\r\n", 0, LG_HTTP_ERR, 0, 0, NULL, 0},
    {"bad status line: code 099", "HTTP/1.1 099 Low\r\n\r\n", 0, LG_HTTP_ERR, 0, 0, NULL, 0},
    {"header without colon", "HTTP/1.1 200 OK\r\nBogus\r\n\r\n", 0, LG_HTTP_ERR, 200, 0, NULL, 0},
    {"bad content-length", "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", 0, LG_HTTP_ERR, 200, 0, NULL, 0},
    {"huge content-length", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", 0,
     LG_HTTP_ERR, 200, 0, NULL, 0},
    {"conflicting content-length", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 0,
     LG_HTTP_ERR, 200, 0, NULL, 0},
    {"unknown transfer-encoding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0, LG_HTTP_ERR,
     200, 0, NULL, 0},
    {"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, LG_HTTP_ERR, 200,
     0, NULL, 0},
    {"chunk without CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n0\r\n\r\n", 0,
     LG_HTTP_ERR, 200, 0, NULL, 0},
};

static void check(const struct resp_case *c, int r, const struct lg_http_parser *p, size_t left,
                  const char *how)
{
    if (r != c->want)
        fail_msg("%s (%s): result %d, want %d (%s)", c->label, how, r, c->want,
                 p->errstr ? p->errstr : "");
    if (r == LG_HTTP_ERR)
        return;
    if (p->status != c->status)
        fail_msg("%s (%s): status %d, want %d", c->label, how, p->status, c->status);
    if (c->body && (p->body_len != strlen(c->body) || memcmp(p->body, c->body, p->body_len)))
        fail_msg("%s (%s): body '%.*s', want '%s'", c->label, how, (int)p->body_len, p->body,
                 c->body);
    if (r == LG_HTTP_DONE) {
        if (p->conn_close != c->conn_close)
            fail_msg("%s (%s): conn_close %d, want %d", c->label, how, p->conn_close, c->conn_close);
        if (left != c->left)
            fail_msg("%s (%s): %zu bytes left, want %zu", c->label, how, left, c->left);
    }
}

static void test_whole_buffer(void **state)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct resp_case *c = &cases[i];
        struct lg_http_parser p;
        lg_http_init(&p, c->head);
        size_t used, len = strlen(c->input);
        int r = lg_http_feed(&p, c->input, len, &used);
        if (r == LG_HTTP_MORE && used != len)
            fail_msg("%s: MORE but used %zu of %zu", c->label, used, len);
        check(c, r, &p, len - used, "whole");
    }
}

/* Feed one byte at a time, as the slowest network would: same outcome. */
static void test_byte_by_byte(void **state)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct resp_case *c = &cases[i];
        struct lg_http_parser p;
        lg_http_init(&p, c->head);
        size_t len = strlen(c->input), k = 0;
        int r = LG_HTTP_MORE;
        for (; k < len && r == LG_HTTP_MORE; k++) {
            size_t used;
            r = lg_http_feed(&p, c->input + k, 1, &used);
            if (r == LG_HTTP_MORE)
                assert_int_equal(used, 1);
            if (r == LG_HTTP_DONE && used == 0)
                k--;   /* completed without consuming (cannot happen) */
        }
        check(c, r, &p, len - k, "byte by byte");
    }
}

/* Every split point of every case into two reads. */
static void test_two_reads(void **state)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct resp_case *c = &cases[i];
        size_t len = strlen(c->input);
        for (size_t cut = 0; cut <= len; cut++) {
            struct lg_http_parser p;
            lg_http_init(&p, c->head);
            size_t used = 0, consumed;
            int r = lg_http_feed(&p, c->input, cut, &used);
            consumed = used;
            if (r == LG_HTTP_MORE) {
                r = lg_http_feed(&p, c->input + cut, len - cut, &used);
                consumed += used;
            }
            check(c, r, &p, len - consumed, "split");
        }
    }
}

static void test_pipelined_sequence(void **state)
{
    /* four responses of every framing back to back in one read */
    const char *in =
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        "HTTP/1.1 409 Conflict\r\nContent-Length: 55\r\n\r\n" ERR_BODY
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        "HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    const int want_status[] = {200, 409, 200, 503};
    const int want_close[] = {0, 0, 0, 1};
    size_t len = strlen(in), off = 0;
    struct lg_http_parser p;
    for (int k = 0; k < 4; k++) {
        lg_http_init(&p, 0);
        size_t used;
        int r = lg_http_feed(&p, in + off, len - off, &used);
        assert_int_equal(r, LG_HTTP_DONE);
        assert_int_equal(p.status, want_status[k]);
        assert_int_equal(p.conn_close, want_close[k]);
        off += used;
    }
    assert_int_equal(off, len);
    char code[48];
    lg_http_init(&p, 0);
    size_t used;
    lg_http_feed(&p, in + 40, len - 40, &used);   /* second response alone */
    assert_int_equal(lg_http_error_code(p.body, p.body_len, code, sizeof code), 12);
    assert_string_equal(code, "out_of_stock");
}

static void test_eof(void **state)
{
    struct lg_http_parser p;
    size_t used;
    lg_http_init(&p, 0);
    const char *a = "HTTP/1.0 200 OK\r\n\r\nbody to the end";
    assert_int_equal(lg_http_feed(&p, a, strlen(a), &used), LG_HTTP_MORE);
    assert_int_equal(lg_http_eof(&p), LG_HTTP_DONE);
    assert_int_equal(p.body_total, 15);
    assert_int_equal(p.conn_close, 1);

    lg_http_init(&p, 0);
    const char *b = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort";
    assert_int_equal(lg_http_feed(&p, b, strlen(b), &used), LG_HTTP_MORE);
    assert_int_equal(lg_http_eof(&p), LG_HTTP_ERR);

    lg_http_init(&p, 0);   /* closed before a single byte */
    assert_int_equal(lg_http_eof(&p), LG_HTTP_ERR);
}

static void test_bounded_memory(void **state)
{
    /* a huge header line is truncated, not stored; a huge body is counted,
     * only its first LG_HTTP_BODY_KEEP bytes kept */
    static char in[200000];
    int n = snprintf(in, sizeof in, "HTTP/1.1 200 OK\r\nX-Long: ");
    memset(in + n, 'a', 5000);
    n += 5000;
    n += snprintf(in + n, sizeof in - (size_t)n, "\r\nContent-Length: 100000\r\n\r\n");
    memset(in + n, 'b', 100000);
    n += 100000;
    struct lg_http_parser p;
    lg_http_init(&p, 0);
    size_t used;
    assert_int_equal(lg_http_feed(&p, in, (size_t)n, &used), LG_HTTP_DONE);
    assert_int_equal(used, (size_t)n);
    assert_int_equal(p.body_total, 100000);
    assert_int_equal(p.body_len, LG_HTTP_BODY_KEEP);

    /* endless headers stop at LG_HTTP_HEAD_MAX */
    lg_http_init(&p, 0);
    assert_int_equal(lg_http_feed(&p, "HTTP/1.1 200 OK\r\n", 17, &used), LG_HTTP_MORE);
    int r = LG_HTTP_MORE;
    for (int i = 0; i < 10000 && r == LG_HTTP_MORE; i++)
        r = lg_http_feed(&p, "X-Header: some value\r\n", 22, &used);
    assert_int_equal(r, LG_HTTP_ERR);
}

static void test_error_code_scan(void **state)
{
    struct { const char *label, *body, *want; } c[] = {
        {"api error body", ERR_BODY, "out_of_stock"},
        {"spaces around colon", "{ \"error\" :  \"lock_timeout\" }", "lock_timeout"},
        {"ok body", "{\"ok\":true,\"remaining\":41}", ""},
        {"error null", "{\"error\":null,\"x\":1}", ""},
        {"error later in body", "{\"error\":null,\"inner\":{\"error\":\"bad_request\"}}", "bad_request"},
        {"value with space rejected", "{\"error\":\"two words\"}", ""},
        {"unterminated value", "{\"error\":\"retry_exh", ""},
        {"key only", "\"error\"", ""},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char out[48];
        size_t n = lg_http_error_code(c[i].body, strlen(c[i].body), out, sizeof out);
        if (strcmp(out, c[i].want) != 0 || n != strlen(c[i].want))
            fail_msg("%s: got '%s' (%zu), want '%s'", c[i].label, out, n, c[i].want);
    }
    char small[5];
    assert_int_equal(lg_http_error_code(ERR_BODY, strlen(ERR_BODY), small, sizeof small), 4);
    assert_string_equal(small, "out_");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_buffer),
        cmocka_unit_test(test_byte_by_byte),
        cmocka_unit_test(test_two_reads),
        cmocka_unit_test(test_pipelined_sequence),
        cmocka_unit_test(test_eof),
        cmocka_unit_test(test_bounded_memory),
        cmocka_unit_test(test_error_code_scan),
    };
    return cmocka_run_group_tests_name("lg_http", tests, NULL, NULL);
}
