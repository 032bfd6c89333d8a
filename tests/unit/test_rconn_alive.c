/* rconn_alive: an idle pooled context is reusable only while its socket has
 * neither the peer's FIN nor unread bytes (a Redis restart closes every
 * pooled connection; the pool must not hand those out). A socketpair plays
 * the server, so no Redis is needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/socket.h>
#include <unistd.h>

#include "locks/rconn.h"

static redisContext *pair_ctx(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    redisContext *c = redisConnectFd(sv[0]);
    assert_non_null(c);
    assert_int_equal(c->err, 0);
    return c;
}

static void test_idle_open_socket_is_alive(void **state)
{
    (void)state;
    int sv[2];
    redisContext *c = pair_ctx(sv);
    assert_int_equal(rconn_alive(c), 1);
    assert_int_equal(rconn_alive(c), 1);   /* the check consumes nothing */
    redisFree(c);
    close(sv[1]);
}

static void test_peer_closed_is_dead(void **state)
{
    (void)state;
    int sv[2];
    redisContext *c = pair_ctx(sv);
    close(sv[1]);                          /* the server restarted */
    assert_int_equal(rconn_alive(c), 0);
    redisFree(c);
}

static void test_unread_bytes_are_dead(void **state)
{
    (void)state;
    int sv[2];
    redisContext *c = pair_ctx(sv);
    assert_int_equal(write(sv[1], "+OK\r\n", 5), 5);   /* a reply nobody asked for */
    assert_int_equal(rconn_alive(c), 0);
    redisFree(c);
    close(sv[1]);
}

static void test_null_and_failed_contexts_are_dead(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(rconn_alive(NULL), 0);
    redisContext *c = pair_ctx(sv);
    c->err = REDIS_ERR_EOF;
    assert_int_equal(rconn_alive(c), 0);
    redisFree(c);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_open_socket_is_alive),
        cmocka_unit_test(test_peer_closed_is_dead),
        cmocka_unit_test(test_unread_bytes_are_dead),
        cmocka_unit_test(test_null_and_failed_contexts_are_dead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
