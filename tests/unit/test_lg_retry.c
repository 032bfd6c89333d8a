/* loadgen's --retries and --retry-new-ids on a real socket: a small server
 * in a thread resets the first connections without answering, then answers
 * 200; it keeps every request body it read, so the test sees what a retry
 * re-sent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/config.h"
#include "../../loadtest/loadgen/lg_conf.h"

#define MAX_SEEN 8

struct flaky_server {
    int fd;
    int port;
    int resets;                  /* connections to reset before answering */
    int nseen;
    char seen[MAX_SEEN][256];    /* bodies of the requests read, in order */
    pthread_t thread;
};

/* Read one request (head and Content-Length body) into buf; -1 at EOF. */
static int read_request(int fd, char *buf, size_t cap, const char **body)
{
    size_t n = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 3000) <= 0)
            return -1;
        ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
        if (r <= 0)
            return -1;
        n += (size_t)r;
        buf[n] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        char *cl = strcasestr(buf, "Content-Length: ");
        if (end && cl && n >= (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL, 10)) {
            *body = end + 4;
            return 0;
        }
    }
}

static void *flaky_main(void *arg)
{
    struct flaky_server *s = arg;
    for (;;) {
        struct pollfd p = {s->fd, POLLIN, 0};
        if (poll(&p, 1, 3000) <= 0)
            return NULL;
        int c = accept(s->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        char buf[4096];
        const char *body;
        while (read_request(c, buf, sizeof buf, &body) == 0) {
            if (s->nseen < MAX_SEEN)
                snprintf(s->seen[s->nseen++], sizeof s->seen[0], "%s", body);
            if (s->resets > 0) {
                s->resets--;
                struct linger lin = {1, 0};   /* close with RST: a reset connection */
                setsockopt(c, SOL_SOCKET, SO_LINGER, &lin, sizeof lin);
                break;
            }
            static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
            if (send(c, ok, sizeof ok - 1, MSG_NOSIGNAL) < 0)
                break;
        }
        close(c);
    }
}

static void flaky_start(struct flaky_server *s, int resets)
{
    memset(s, 0, sizeof *s);
    s->resets = resets;
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s->fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(s->fd, (struct sockaddr *)&a, &len), 0);
    s->port = ntohs(a.sin_port);
    assert_int_equal(listen(s->fd, 16), 0);
    assert_int_equal(pthread_create(&s->thread, NULL, flaky_main, s), 0);
}

static void flaky_stop(struct flaky_server *s)
{
    shutdown(s->fd, SHUT_RDWR);
    pthread_join(s->thread, NULL);
    close(s->fd);
}

/* One request with `extra` options against s; fills *st. */
static void run_one(struct flaky_server *s, const char *const *extra, struct lg_stats *st)
{
    static struct lg_conf conf;
    char url[64], err[256] = "";
    snprintf(url, sizeof url, "http://127.0.0.1:%d/orders", s->port);
    char *argv[24];
    int argc = 0;
    const char *base[] = {"loadgen", "-t", "1", "-c", "1", "-n", "1", "--timeout", "2s",
                          "--progress", "off", "-b", "{\"id\":\"{uuid}\",\"n\":{seq}}", NULL};
    for (int i = 0; base[i]; i++)
        argv[argc++] = (char *)base[i];
    for (int i = 0; extra[i]; i++)
        argv[argc++] = (char *)extra[i];
    argv[argc++] = url;
    argv[argc] = NULL;
    memset(&conf, 0, sizeof conf);
    assert_int_equal(lg_conf_parse(&conf, argc, argv, err, sizeof err), CFG_OK);
    struct lg_plan *p = lg_plan_create(&conf, 1);
    assert_non_null(p);
    assert_false(p->err);
    double elapsed;
    assert_int_equal(lg_run(p, st, &elapsed), 0);
    lg_plan_free(p);
}

static void test_no_retry_by_default(void **state)
{
    struct flaky_server s;
    flaky_start(&s, 1);
    static struct lg_stats st;
    const char *extra[] = {NULL};
    run_one(&s, extra, &st);
    flaky_stop(&s);
    assert_int_equal(st.requests, 0);
    assert_int_equal(st.retries, 0);
    assert_int_equal(s.nseen, 1);
}

static void test_retry_sends_the_same_bytes(void **state)
{
    struct flaky_server s;
    flaky_start(&s, 2);
    static struct lg_stats st;
    const char *extra[] = {"--retries", "3", NULL};
    run_one(&s, extra, &st);
    flaky_stop(&s);
    assert_int_equal(st.requests, 1);          /* one request, answered on its third try */
    assert_int_equal(st.by_status[200], 1);
    assert_int_equal(st.retries, 2);
    assert_int_equal(s.nseen, 3);
    assert_string_equal(s.seen[0], s.seen[1]);
    assert_string_equal(s.seen[1], s.seen[2]);
}

static void test_retries_are_bounded(void **state)
{
    struct flaky_server s;
    flaky_start(&s, 5);
    static struct lg_stats st;
    const char *extra[] = {"--retries", "2", NULL};
    run_one(&s, extra, &st);
    flaky_stop(&s);
    assert_int_equal(st.requests, 0);
    assert_int_equal(st.retries, 2);
    assert_int_equal(s.nseen, 3);              /* the first try and two retries */
}

static void test_retry_new_ids_redraws(void **state)
{
    struct flaky_server s;
    flaky_start(&s, 1);
    static struct lg_stats st;
    const char *extra[] = {"--retries", "1", "--retry-new-ids", NULL};
    run_one(&s, extra, &st);
    flaky_stop(&s);
    assert_int_equal(st.requests, 1);
    assert_int_equal(st.retries, 1);
    assert_int_equal(s.nseen, 2);
    assert_string_not_equal(s.seen[0], s.seen[1]);   /* a new {uuid} */
    const char *n0 = strstr(s.seen[0], "\"n\":"), *n1 = strstr(s.seen[1], "\"n\":");
    assert_non_null(n0);
    assert_non_null(n1);
    assert_string_equal(n0, n1);                      /* the same {seq} */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_retry_by_default),
        cmocka_unit_test(test_retry_sends_the_same_bytes),
        cmocka_unit_test(test_retries_are_bounded),
        cmocka_unit_test(test_retry_new_ids_redraws),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
