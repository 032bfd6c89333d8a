/* Warm start (services/API.md GET /healthz): an instance says ready only
 * once every worker holds an open MySQL connection and has reached Redis,
 * so the first requests after "ready" pay no connection set-up. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <stdio.h>

static int group_setup(void **state) { return it_setup(); }

static long long app_connections(void)
{
    return it_sql_value("SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                        "WHERE USER = 'lab_app'");
}

static void test_ready_means_every_worker_connected(void **state)
{
    const long threads = 6;
    long long before = app_connections();
    assert_true(before >= 0);
    long port = it_port_base() + 23;
    const char *args[] = {"--threads", "6", NULL};
    int pid = it_start_inventory("inventory-warm", port, NULL, args);   /* waits for 200 */
    assert_true(pid > 0);
    long long after = app_connections();
    it_stop_pid(pid);
    print_message("warm: lab_app connections %lld -> %lld (%ld workers)\n", before, after,
                  threads);
    /* Every worker's own connection, plus the one of the /healthz thread. */
    assert_true(after - before >= threads + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ready_means_every_worker_connected),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
