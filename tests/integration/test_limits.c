/* Resource limits under abuse (services/API.md "Connection limits"): one
 * client holding thousands of connections that trickle their headers a
 * byte at a time cannot make an instance unreachable. The per-client cap
 * refuses most of them, the request-read deadline (which trickling does
 * not extend) closes the rest, and /healthz and a sale from another
 * client answer meanwhile. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TRICKLERS 4100

static int group_setup(void **state) { return it_setup(); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void nap_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* A connection from 127.0.0.2 (the abusive client; the checks come from
 * 127.0.0.1) that has sent a request line and the start of a header. -1
 * when it could not connect. */
static int trickler(long port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in me = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.2", &me.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    to.sin_port = htons((uint16_t)port);
    static const char start[] = "GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    if (bind(fd, (struct sockaddr *)&me, sizeof(me)) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof(to)) != 0 ||
        send(fd, start, sizeof(start) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(start) - 1)) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* 1 while the server keeps fd open: one more header byte goes out and
 * nothing (no EOF, no reset) came back. */
static int still_open(int fd)
{
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
        return 0;
    if (n > 0)
        return 0;   /* an answer (a refusal): not held */
    return send(fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
}

static int count_open(int *fds, int n)
{
    int open = 0;
    for (int i = 0; i < n; i++) {
        if (fds[i] < 0)
            continue;
        if (still_open(fds[i])) {
            open++;
        } else {
            close(fds[i]);
            fds[i] = -1;
        }
    }
    return open;
}

static void test_trickling_client_cannot_lock_out_others(void **state)
{
    long port = it_port_base() + 22;
    const char *args[] = {"--threads", "4", NULL};
    int pid = it_start_inventory("inventory-limits", port, NULL, args);
    assert_true(pid > 0);
    assert_int_equal(it_seed("T-limits", 10), 200);

    int *fds = malloc(TRICKLERS * sizeof(*fds));
    assert_non_null(fds);
    int connected = 0;
    for (int i = 0; i < TRICKLERS; i++)
        connected += (fds[i] = trickler(port)) >= 0;
    nap_ms(500);
    int held = count_open(fds, TRICKLERS);

    /* Another client, while the trickling goes on. */
    char health[128], sale[128];
    snprintf(health, sizeof(health), "http://127.0.0.1:%ld/healthz", port);
    snprintf(sale, sizeof(sale), "http://127.0.0.1:%ld/inventory/deduct", port);
    double t0 = now_s();
    long hs = it_status("GET", health, NULL);
    double th = now_s() - t0;
    t0 = now_s();
    long ss = it_status("POST", sale,
                        "{\"sku\":\"T-limits\",\"qty\":1,\"order_id\":\"limits-1\",\"guard\":\"for-update\"}");
    double ts = now_s() - t0;

    /* Keep trickling (a byte per connection per second) past the
     * request-read deadline: the server must have closed them all. */
    int left = held;
    for (int s = 0; s < 14 && left > 0; s++) {
        nap_ms(1000);
        left = count_open(fds, TRICKLERS);
    }
    print_message("limits: %d connected, %d held after 0.5 s, healthz %ld in %.2f s, "
                  "sale %ld in %.2f s, %d still open after the deadline\n",
                  connected, held, hs, th, ss, ts, left);
    for (int i = 0; i < TRICKLERS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    /* The instance serves again once the abuser is gone. */
    long after = it_status("GET", health, NULL);
    it_stop_pid(pid);

    assert_int_equal(hs, 200);
    assert_true(th < 3.0);
    assert_int_equal(ss, 200);
    assert_true(ts < 3.0);
    assert_true(held <= 1024);   /* the per-client cap */
    assert_int_equal(left, 0);
    assert_int_equal(after, 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trickling_client_cannot_lock_out_others),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
