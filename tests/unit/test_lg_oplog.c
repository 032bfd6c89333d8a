/* loadgen --history's operation log: outcomes classified as the checker
 * reads them (ok / refused / indeterminate, 503 backend_unavailable and no
 * answer indeterminate), `remaining` and the error code taken from the
 * answer, a request in flight at the end written with complete_ns null,
 * and each line's body re-expanded from its seq and random state: the same
 * sku, qty and order_id the request carried, {rand} included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../loadtest/loadgen/lg_oplog.h"
#include "../../loadtest/loadgen/lg_tmpl.h"

static void test_outcomes(void **state)
{
    (void)state;
    static const struct {
        int status;
        const char *error;
        enum lg_op_fail fail;
        const char *want, *label;
    } cases[] = {
        {200, "", LG_OP_ANSWERED, "ok", "200 sold"},
        {201, "", LG_OP_ANSWERED, "ok", "201 placed"},
        {409, "out_of_stock", LG_OP_ANSWERED, "refused", "409"},
        {400, "bad_request", LG_OP_ANSWERED, "refused", "400"},
        {503, "lock_timeout", LG_OP_ANSWERED, "refused", "503 nothing sold"},
        {503, "lease_expired", LG_OP_ANSWERED, "refused", "503 lease_expired"},
        {503, "backend_unavailable", LG_OP_ANSWERED, "indeterminate", "503 maybe a lost COMMIT reply"},
        {500, "internal", LG_OP_ANSWERED, "indeterminate", "500"},
        {502, "", LG_OP_ANSWERED, "indeterminate", "502"},
        {0, "", LG_OP_TIMEOUT, "indeterminate", "timeout"},
        {0, "", LG_OP_IN_FLIGHT, "indeterminate", "in flight at the end"},
        {200, "", LG_OP_READ, "indeterminate", "read error after a status"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct lg_op op;
        memset(&op, 0, sizeof op);
        op.status = (uint16_t)cases[i].status;
        op.fail = (uint8_t)cases[i].fail;
        snprintf(op.error, sizeof op.error, "%s", cases[i].error);
        if (strcmp(lg_op_outcome(&op), cases[i].want) != 0)
            fail_msg("%s: %s, want %s", cases[i].label, lg_op_outcome(&op), cases[i].want);
    }
}

/* Write l's lines to a memory file and parse them. */
static json_t *lines(const struct lg_oplog *l, const struct lg_tmpl *body, char *scratch)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(lg_oplog_write(f, l, body, 7, scratch), 0);
    fclose(f);
    json_t *arr = json_array();
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        json_error_t e;
        json_t *o = json_loads(line, 0, &e);
        if (!o)
            fail_msg("not JSON: %s (%s)", line, e.text);
        json_array_append_new(arr, o);
    }
    free(buf);
    return arr;
}

static void test_lines(void **state)
{
    (void)state;
    const char *src = "{\"sku\":\"S-1\",\"qty\":2,\"order_id\":\"o-{seq}-{rand:100..999}\"}";
    struct lg_tmpl *t = lg_tmpl_compile(src, strlen(src));
    assert_non_null(t);
    assert_int_equal(t->err, 0);
    char *scratch = malloc(t->max_len);
    char sent[3][128];
    struct lg_oplog l;
    memset(&l, 0, sizeof l);
    uint64_t rng = lg_rand_seed(42);
    long idx[3];
    for (int i = 0; i < 3; i++) {   /* as conn_send: state saved, then expanded */
        idx[i] = lg_oplog_begin(&l, (uint32_t)i, (uint64_t)(10 + i), rng, 1000u + (uint64_t)i);
        struct lg_tmpl_vars v = {.seq = (uint64_t)(10 + i), .thread = 7, .rng = &rng};
        long n = lg_tmpl_expand(t, &v, scratch, t->max_len);
        snprintf(sent[i], sizeof sent[i], "%.*s", (int)n, scratch);
    }
    const char ok[] = "{\"ok\":true,\"remaining\":41,\"order_id\":\"x\"}";
    const char no[] = "{\"ok\":false,\"error\":\"out_of_stock\",\"detail\":\"none left\"}";
    lg_oplog_answer(&l, idx[0], 2000, 200, ok, sizeof ok - 1);
    lg_oplog_answer(&l, idx[1], 2001, 409, no, sizeof no - 1);
    lg_oplog_fail(&l, idx[2], 3000, LG_OP_IN_FLIGHT);
    lg_oplog_fail(&l, -1, 3000, LG_OP_READ);   /* no operation: ignored */
    json_t *arr = lines(&l, t, scratch);
    assert_int_equal(json_array_size(arr), 3);
    for (int i = 0; i < 3; i++) {
        json_t *o = json_array_get(arr, (size_t)i), *b = json_loads(sent[i], 0, NULL);
        assert_non_null(b);
        assert_string_equal(json_string_value(json_object_get(o, "order_id")),
                            json_string_value(json_object_get(b, "order_id")));
        assert_string_equal(json_string_value(json_object_get(o, "sku")), "S-1");
        assert_int_equal(json_integer_value(json_object_get(o, "qty")), 2);
        assert_int_equal(json_integer_value(json_object_get(o, "process")), i);
        assert_int_equal(json_integer_value(json_object_get(o, "invoke_ns")), (1000 + i) * 1000);
        json_decref(b);
    }
    json_t *a = json_array_get(arr, 0), *r = json_array_get(arr, 1), *f = json_array_get(arr, 2);
    assert_string_equal(json_string_value(json_object_get(a, "outcome")), "ok");
    assert_int_equal(json_integer_value(json_object_get(a, "remaining")), 41);
    assert_true(json_is_null(json_object_get(a, "error")));
    assert_int_equal(json_integer_value(json_object_get(a, "complete_ns")), 2000000);
    assert_string_equal(json_string_value(json_object_get(r, "outcome")), "refused");
    assert_string_equal(json_string_value(json_object_get(r, "error")), "out_of_stock");
    assert_true(json_is_null(json_object_get(r, "remaining")));
    assert_string_equal(json_string_value(json_object_get(f, "outcome")), "indeterminate");
    assert_string_equal(json_string_value(json_object_get(f, "error")), "in_flight");
    assert_true(json_is_null(json_object_get(f, "complete_ns")));
    json_decref(arr);
    lg_oplog_free(&l);
    lg_oplog_free(NULL);
    free(scratch);
    lg_tmpl_free(t);
}

static void test_body_without_fields(void **state)
{
    (void)state;
    struct lg_oplog l;
    memset(&l, 0, sizeof l);
    /* thousands of operations: the buffer grows */
    for (int i = 0; i < 5000; i++)
        lg_oplog_answer(&l, lg_oplog_begin(&l, 0, (uint64_t)i, 1, 5), 6, 200, "{}", 2);
    assert_int_equal(l.n, 5000);
    json_t *arr = lines(&l, NULL, NULL);
    json_t *o = json_array_get(arr, 4999);
    assert_true(json_is_null(json_object_get(o, "sku")));
    assert_true(json_is_null(json_object_get(o, "order_id")));
    assert_true(json_is_null(json_object_get(o, "remaining")));
    assert_string_equal(json_string_value(json_object_get(o, "outcome")), "ok");
    json_decref(arr);
    lg_oplog_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outcomes),
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_body_without_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
