/* The checks every lock-service guard (etcd, zookeeper) must pass, written
 * once: a test file names its guard, its instances and how to count the
 * SKU's lock entries (etcd keys, ZooKeeper nodes) in its service. Each
 * function asserts with cmocka, so it is called from inside a test. */
#ifndef LAB_LOCK_SUITE_H
#define LAB_LOCK_SUITE_H

#include <stddef.h>

#include "itest.h"

/* Lock entries (holder + waiters) of sku in the lock service now, or -1
 * when the service cannot be asked. */
typedef long (*ls_count_fn)(const char *sku);

/* Monotonic seconds. */
double ls_now_s(void);

/* A sale run in its own thread (ls_sale_run): url and body in, the answer's
 * status (0: none) and error code out. */
struct ls_sale {
    const char *url;
    const char *body;
    long status;
    char error[64];
};
void *ls_sale_run(void *sale);

/* The "error" field of an answer, "" when there is none. */
const char *ls_error_of(const struct it_resp *r);

/* "<base>/inventory/deduct" into out. */
void ls_deduct_url(const char *base, char *out, size_t len);

/* Poll until count(sku) == n: 0 when it did within 10 s, else -1. */
int ls_wait_count(ls_count_fn count, const char *sku, long n);

/* Stock 100 on sku, 1000 deductions from 32 clients over both instances
 * (base[0], base[1]) with guard: exactly 100 sold (200) and 900 refused
 * (409), audit exact, no lock entry left. */
void ls_exact(const char *guard, const char *sku, const char *const base[2], ls_count_fn count);

/* A holder on base[0] (hold_ms 2000); a waiter on base[1] with lock_wait_ms
 * 300 answers 503 lock_timeout after at least 0.3 s, its entry gone while
 * the holder still holds (1 left); then none, sold 1. When extra is given,
 * it is sampled with the entries while the holder holds and must be
 * extra_want (etcd: the leases, the waiter's revoked). */
void ls_waiter_gives_up(const char *guard, const char *sku, const char *const base[2],
                        ls_count_fn count, long (*extra)(void), long extra_want);

/* fencing:true sells on each instance and the stored fence is positive and
 * grows from one sale to the next. */
void ls_fencing(const char *guard, const char *sku, const char *const base[2]);

/* A holder on holder_base (an instance the test started, pid) is killed
 * (SIGKILL) inside its hold_ms 8000 (holder_extra: more body fields, ""
 * or e.g. ",\"lock_ttl_ms\":2000"); a buyer on buyer_base waiting up to
 * 8 s sells once the lock service let the holder's entry go (not sooner
 * than min_wait_s), the holder never answered and wrote nothing, no entry
 * is left. Stock 5 on sku. */
void ls_killed_holder_frees(const char *guard, const char *sku, const char *holder_base,
                            int pid, const char *holder_extra, const char *buyer_base,
                            ls_count_fn count, double min_wait_s);

/* What ls_paused_holder saw: the buyer's answer and wait, the holder's
 * answer once resumed. */
struct ls_paused {
    long buyer_status;
    double buyer_took_s;
    long holder_status;
    char holder_error[64];
};

/* Stock 1 on sku. A holder on holder_base (an instance the test started,
 * pid; stopped here at the end) with hold_ms 6000 is paused (SIGSTOP) 0.3 s
 * into its hold; a buyer on buyer_base waiting up to 8 s must sell the
 * unit (200) once the lock service gave up on the holder; the holder is
 * resumed and its answer returned in out for the caller's verdict. extra:
 * more body fields for both ("" or e.g. ",\"fencing\":true"). Asserts sold
 * 1, never 2, and an exact audit. */
void ls_paused_holder(const char *guard, const char *sku, const char *holder_base, int pid,
                      const char *extra, const char *buyer_base, ls_count_fn count,
                      struct ls_paused *out);

/* A sale on base[0] released on base[1]: the release runs under the SKU's
 * lock and gives the unit back; no entry left. */
void ls_release(const char *guard, const char *sku, const char *const base[2],
                ls_count_fn count);

#endif
