/* The outcome table and the key formats of lib/stock: one row per outcome
 * with a consistent status, code and Retry-After; one spelling per key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "stock/deduct.h"
#include "stock/keys.h"

static const enum deduct_outcome every[] = {
#define EVERY(id, name, status, code, retry) id,
    DEDUCT_OUTCOMES(EVERY)
#undef EVERY
};

static void test_outcome_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof every / sizeof every[0]; i++) {
        const struct deduct_outcome_info *o = deduct_outcome_info(every[i]);
        assert_non_null(o);
        assert_non_null(o->name);
        if (o->http_status == 200) {
            if (o->error_code || o->retry_after)
                fail_msg("%s: a 200 carries no error code and no Retry-After", o->name);
        } else {
            if (!o->error_code || o->http_status < 400 || o->http_status > 599)
                fail_msg("%s: an error needs a code and a 4xx/5xx status", o->name);
            if (o->retry_after && o->http_status != 503)
                fail_msg("%s: Retry-After only on 503", o->name);
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(o->name, deduct_outcome_info(every[j])->name) == 0)
                fail_msg("outcome name %s appears twice", o->name);
    }
}

static void test_outcome_contract(void **state)
{
    (void)state;
    /* The statuses services/API.md promises. */
    static const struct { enum deduct_outcome o; int status; const char *code; int retry; } want[] = {
        {DEDUCT_SOLD, 200, NULL, 0},
        {DEDUCT_DUPLICATE, 200, NULL, 0},
        {DEDUCT_OUT_OF_STOCK, 409, "out_of_stock", 0},
        {DEDUCT_FENCED, 409, "fenced", 0},
        {DEDUCT_BAD_REQUEST, 400, "bad_request", 0},
        {DEDUCT_UNKNOWN_SKU, 404, "unknown_sku", 0},
        {DEDUCT_LOCK_TIMEOUT, 503, "lock_timeout", 1},
        {DEDUCT_LEASE_EXPIRED, 503, "lease_expired", 1},
        {DEDUCT_RETRY_EXHAUSTED, 503, "retry_exhausted", 1},
        {DEDUCT_UNAVAILABLE, 503, "backend_unavailable", 1},
        {DEDUCT_INTERNAL, 500, "internal", 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct deduct_outcome_info *o = deduct_outcome_info(want[i].o);
        assert_int_equal(o->http_status, want[i].status);
        assert_int_equal(o->retry_after, want[i].retry);
        if (want[i].code)
            assert_string_equal(o->error_code, want[i].code);
        else
            assert_null(o->error_code);
    }
    /* Out of range reads as internal, never out of bounds. */
    assert_ptr_equal(deduct_outcome_info((enum deduct_outcome)999),
                     deduct_outcome_info(DEDUCT_INTERNAL));
    assert_ptr_equal(deduct_outcome_info((enum deduct_outcome)-1),
                     deduct_outcome_info(DEDUCT_INTERNAL));
}

static void test_keys(void **state)
{
    (void)state;
    char k[KEYS_MAX];
    keys_stock(k, "A");
    assert_string_equal(k, "stock:{A}");
    keys_lock(k, "A");
    assert_string_equal(k, "lock:inventory:{A}");
    keys_seg_count(k, "A");
    assert_string_equal(k, "seg:{A}:k");
    keys_seg(k, "A", 7);
    assert_string_equal(k, "seg:{A}:7");
    keys_seg_lock(k, "A", 63);
    assert_string_equal(k, "lock:seg:{A}:63");
    keys_lock_row(k, "A");
    assert_string_equal(k, "inventory:A");

    /* The longest SKU fits every key whole, hash tag closed. */
    char sku[STOCK_SKU_MAX + 1];
    memset(sku, 'x', STOCK_SKU_MAX);
    sku[STOCK_SKU_MAX] = '\0';
    void (*one[])(char *, const char *) = {keys_stock, keys_lock, keys_seg_count};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        one[i](k, sku);
        assert_non_null(strstr(k, sku));
        assert_non_null(strchr(k, '}'));
    }
    keys_seg_lock(k, sku, 63);
    assert_true(strlen(k) < KEYS_MAX);
    assert_int_equal(k[strlen(k) - 1], '3');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outcome_rows),
        cmocka_unit_test(test_outcome_contract),
        cmocka_unit_test(test_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
