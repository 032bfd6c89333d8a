/* Guard `redlock`: the read-modify-write under a Redlock lease over K
 * independent Redis masters (quorum K/2+1). Survives losing a minority of
 * masters; with a majority gone it answers 503 and sells nothing. The
 * lease is renewed by a watchdog while the work runs (like redis-lock) and
 * its validity is checked right before the write: a holder that outlived
 * it answers 503 lease_expired and writes nothing. */
#include "guard.h"

#include "base/metrics.h"
#include "locks/redlock.h"
#include "base/util.h"
#include "guards/core/fault_point.h"
#include "guards/core/key_gate.h"
#include "guards/core/cart_locks.h"
#include "guards/core/lock_fields.h"
#include "stock/keys.h"
#include "stock/txn.h"

#include <stddef.h>
#include <stdio.h>

static struct redlock_guard_conf {
    char nodes[512];
    long fault_pause_ms;
} conf;

static const struct cfg_opt options[] = {
    {"redlock-nodes", "REDLOCK_NODES", CFG_STR,
     "127.0.0.1:6391,127.0.0.1:6392,127.0.0.1:6393", 0, 0,
     offsetof(struct redlock_guard_conf, nodes), sizeof(conf.nodes),
     "independent Redis masters for redlock (host:port,...; a bare port means 127.0.0.1)"},
    {"redlock-fault-pause-after-check", "LAB_FAULT_REDLOCK_PAUSE_AFTER_CHECK_MS", CFG_MS, "0", 0,
     60000, offsetof(struct redlock_guard_conf, fault_pause_ms), 0,
     "TEST ONLY, fault injection: stop this whole process this long right after "
     "redlock's lease check passed, before the COMMIT (the window the check cannot "
     "close); 0 = off"},
};

static struct redlock *redlock;
static struct redlock_stats stats;

/* ---- one contender per process, turns across processes ----
 * Redlock has no queue: a loser sleeps a random delay and tries again. With
 * every worker of two processes polling, most sales won at once while a few
 * lost round after round (saturation p99/p50 in the hundreds). So threads
 * of one process that want the same key queue on a local gate and only the
 * gate's holder contends for the quorum. A holder with a waiter behind it
 * passes its lease on (no DEL and SET on the masters: the keys stay ours,
 * with the same token, watchdog and validity), at most RL_RUN times in a
 * row; then it releases and the next holder yields RL_YIELD_MS, longer
 * than a contender's retry delay (RL_RETRY_MS: random in [1, 3] ms), so a
 * waiting process takes its turn. With one contender per process the short
 * retry delay costs the masters little. A slot belongs to one key while
 * used; a key whose slot is taken contends without a gate
 * (guards/core/key_gate). */
#define RL_RUN 32
#define RL_YIELD_MS 5
#define RL_RETRY_MS 2

/* What a holder passes on is its whole live lease. */
_Static_assert(sizeof(struct redlock_lease) <= KEY_GATE_PAYLOAD_MAX,
               "a redlock lease must fit a key gate's payload");

static struct key_gate_table gates = KEY_GATE_TABLE_INIT(RL_RUN);

/* Enter key's gate (key_gate_enter). *inherited: *lease is the last
 * holder's live lease, ours now (to use or unlock). A waiter woken with the
 * gate free always becomes its holder, so a passed lease always has an
 * owner. */
static struct key_gate *gate_enter(const char *key, double deadline, int *timeout, int *yield,
                                   struct redlock_lease *lease, int *inherited)
{
    size_t n;
    struct key_gate *g =
        key_gate_enter(&gates, key, deadline, timeout, yield, lease, sizeof *lease, &n);
    *inherited = n == sizeof *lease;
    return g;
}

/* Leave the gate to a queued thread together with our lease (still ours
 * on the masters): 1 passed, 0 not (no waiter, or the run is at RL_RUN:
 * unlock and gate_leave, which makes the next holder yield). */
static int gate_pass(struct key_gate *g, const struct redlock_lease *lease)
{
    return key_gate_pass(&gates, g, lease, sizeof *lease);
}

static void gate_leave(struct key_gate *g)
{
    key_gate_leave(&gates, g);
}
static char unusable[160];   /* why there is no redlock (a bad node list) */

static int redlock_init(const struct guard *self, const struct guard_backends *b, char *err,
                        size_t errlen)
{
    struct redlock_config cfg;
    redlock_config_default(&cfg);
    cfg.instance = b->instance;
    cfg.stats = &stats;
    cfg.retry_delay_ms = RL_RETRY_MS;   /* one contender per process: see the gate */
    /* A stack may run without Redlock masters: only this guard fails then,
     * per request, saying why. */
    if (redlock_parse_nodes(conf.nodes, "127.0.0.1", &cfg) != 0) {
        snprintf(unusable, sizeof(unusable), "bad redlock node list '%.100s'", conf.nodes);
        return 0;
    }
    if (!(redlock = redlock_new(&cfg))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static void redlock_fini(const struct guard *self)
{
    redlock_free(redlock);
    redlock = NULL;
}

struct held {
    struct redlock_lease lease;
    struct key_gate *gate;     /* NULL: contended without one */
};

/* An inherited lease serves this request only when it is what the request
 * would have asked for (ttl, watchdog) and has at least half its ttl of
 * validity left (a lease nobody renews ages along a run). */
static int lease_fits(const struct redlock_lease *l, long ttl, int watchdog)
{
    return l->ttl_ms == ttl && (l->wd_id != 0) == (watchdog != 0) &&
           redlock_validity_left(redlock, l) >= ttl / 2;
}

/* Give the lock back: to the next thread of this process (lease passed
 * on) or to everyone (unlock on the masters, then leave the gate). */
static void give(struct held *h)
{
    if (h->gate && gate_pass(h->gate, &h->lease))
        return;
    redlock_unlock(redlock, &h->lease);
    gate_leave(h->gate);
}

/* Take the Redlock lease on req->sku with req's ttl and wait (the local
 * gate first, then the quorum), watched by the watchdog unless the request
 * turned it off. 0 held, -1 with res filled. */
static int take(const struct deduct_env *env, const struct deduct_req *req, struct held *h,
                struct deduct_res *res)
{
    const struct lock_req_opts *lo = lock_opts_of(req);
    if (lo->fencing) {
        /* Kleppmann's point ("How to do distributed locking", 2016): the
         * masters share no counter, so no token Redlock could hand out is
         * monotonic across holders, and a paused holder cannot be fenced. */
        res->outcome = DEDUCT_BAD_REQUEST;
        snprintf(res->detail, sizeof(res->detail),
                 "redlock cannot issue fencing tokens: its masters share no counter, so no "
                 "token is monotonic (Kleppmann); use redis-lock or lock-table");
        return -1;
    }
    if (!redlock) {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "%s", unusable);
        return -1;
    }
    char key[KEYS_MAX];
    keys_lock(key, req->sku);
    long ttl = lock_opts_ttl(lo, env->default_ttl_ms);
    double t0 = util_now(), deadline = t0 + (double)req->lock_wait_ms / 1000.0;
    int gate_timeout, yield, inherited;
    h->gate = gate_enter(key, deadline, &gate_timeout, &yield, &h->lease, &inherited);
    if (gate_timeout) {
        res->lock_wait_s = util_now() - t0;
        res->outcome = DEDUCT_LOCK_TIMEOUT;
        snprintf(res->detail, sizeof(res->detail),
                 "redlock over %d masters: %s busy in this process for %ld ms",
                 redlock_nodes(redlock), key, req->lock_wait_ms);
        return -1;
    }
    if (inherited && !lease_fits(&h->lease, ttl, lo->watchdog)) {
        redlock_unlock(redlock, &h->lease);   /* token-checked: never another's */
        inherited = 0;
    }
    if (!inherited) {
        if (yield) {
            long left_ms = (long)((deadline - util_now()) * 1000.0);
            util_sleep_ms(left_ms < RL_YIELD_MS ? left_ms : RL_YIELD_MS);
        }
        long left_ms = (long)((deadline - util_now()) * 1000.0);
        int rc = redlock_lock(redlock, key, ttl, left_ms > 0 ? left_ms : 0, &h->lease);
        if (rc != REDLOCK_OK) {
            gate_leave(h->gate);
            res->lock_wait_s = util_now() - t0;
            res->outcome = rc == REDLOCK_TIMEOUT    ? DEDUCT_LOCK_TIMEOUT
                           : rc == REDLOCK_EUNAVAIL ? DEDUCT_UNAVAILABLE
                                                    : DEDUCT_INTERNAL;
            snprintf(res->detail, sizeof(res->detail), "redlock over %d masters: %.100s",
                     redlock_nodes(redlock), h->lease.errstr);
            return -1;
        }
        /* Without renewals a holder outliving its lease would write
         * unprotected; the watchdog keeps the quorum's keys alive instead.
         * A watchdog that cannot start leaves the validity check to refuse. */
        if (lo->watchdog && redlock_watch(redlock, &h->lease) != 0)
            fprintf(stderr, "redlock: watchdog not started for %s\n", key);
    }
    res->lock_wait_s = util_now() - t0;
    if (guard_deadline_passed(req, res)) {
        give(h);
        return -1;
    }
    return 0;
}

/* Right before a write: the lease must still be valid (ttl - elapsed -
 * drift, renewals included). Past it, another holder may already be in:
 * refuse rather than write over its work. */
static int still_valid(void *ctx, struct deduct_res *res)
{
    struct held *h = ctx;
    if (redlock_validity_left(redlock, &h->lease) > 0) {
        fault_point_pause(conf.fault_pause_ms);   /* test only: the window after the check */
        return 1;
    }
    res->outcome = DEDUCT_LEASE_EXPIRED;
    snprintf(res->detail, sizeof(res->detail),
             "redlock lease on %.60s (%ld ms) ran out before the write; nothing was written",
             h->lease.key, h->lease.ttl_ms);
    return 0;
}

static int redlock_locked(const struct guard *self, const struct deduct_env *env,
                          const struct deduct_req *req, guard_work_fn work, void *ctx,
                          struct deduct_res *res)
{
    struct held h;
    if (take(env, req, &h, res) != 0)
        return -1;
    int ret = -1;
    if (still_valid(&h, res))
        ret = work(ctx, env, req, res);
    give(&h);
    return ret;
}

static void redlock_deduct(const struct guard *self, const struct deduct_env *env,
                           const struct deduct_req *req, struct deduct_res *res)
{
    struct held h;
    if (take(env, req, &h, res) != 0)
        return;
    stock_rmw_checked(self->name, env, req, still_valid, &h, res);
    give(&h);
}

static void mirror(const char *name, atomic_ullong *v)
{
    metrics_set(name, "", (double)atomic_load(v));
}

static void redlock_export_metrics(void)
{
    mirror("lab_redlock_acquired_total", &stats.acquired);
    mirror("lab_redlock_quorum_failures_total", &stats.quorum_failures);
    mirror("lab_redlock_timeouts_total", &stats.timeouts);
    mirror("lab_redlock_unavailable_total", &stats.unavailable);
    mirror("lab_redlock_lost_total", &stats.lost);
    mirror("lab_redlock_node_errors_total", &stats.node_errors);
    mirror("lab_redlock_renewals_total", &stats.renewals);
    mirror("lab_redlock_expired_total", &stats.expired);
}

/* fencing is accepted to be refused with its reason (take). */
static const struct guard_field redlock_fields[] = {LOCK_FIELD_TTL, LOCK_FIELD_WATCHDOG,
                                                    LOCK_FIELD_FENCING};

/* The guard's description for GET /guards (guard.h: struct guard_doc). */
static const char *const doc_steps[] = {
    "The lock is taken on K masters; it holds when a quorum accepted within the "
    "lease's validity.",
    "Right before the MySQL write the holder checks the validity: expired answers "
    "503 lease_expired.",
    "No fencing: the masters share no counter (Kleppmann's point).",
    NULL,
};
static const struct guard_metric doc_metrics[] = {
    {"lab_redlock_acquired_total", "counter", "redlock: locks acquired on a quorum", ""},
    {"lab_redlock_quorum_failures_total", "counter", "redlock: rounds that missed the quorum", ""},
    {"lab_redlock_timeouts_total", "counter", "redlock: acquisitions that timed out", ""},
    {"lab_redlock_unavailable_total", "counter",
     "redlock: acquisitions refused because too few masters answered", ""},
    {"lab_redlock_lost_total", "counter", "redlock: holders that found their lock gone", ""},
    {"lab_redlock_node_errors_total", "counter", "redlock: errors talking to one master", ""},
    {"lab_redlock_renewals_total", "counter", "redlock: watchdog rounds extended on a quorum", ""},
    {"lab_redlock_expired_total", "counter",
     "redlock: holders that found their validity gone before the write", ""},
};
static const struct guard_doc doc = {
    .needs = "3 independent Redis masters",
    .use_when = "the lock must survive losing a minority of Redis servers",
    .breaks = "a pause between the validity check and the write (no fence)",
    .origin = "Redis' Redlock and Kleppmann's critique",
    .steps = doc_steps,
    .statements = "SET lock NX PX ttl on each master (50 ms timeouts); quorum K/2+1;\ncheck "
        "validity; MySQL write; release everywhere",
    .code = __FILE__,
    .lock_home = "redis-quorum",
    .metrics = doc_metrics,
    .nmetrics = sizeof(doc_metrics) / sizeof(doc_metrics[0]),
};

const struct guard guard_redlock = {
    .name = "redlock",
    .doc = &doc,
    .how = "Redlock: the lock on a quorum (N/2+1) of N independent Redis masters, watchdog renewal, validity checked before the write",
    .expect = "correct, survives loss of a minority",
    .flags = GUARD_SAFE_ACROSS_INSTANCES,
    .options = options,
    .noptions = sizeof(options) / sizeof(options[0]),
    .options_conf = &conf,
    .fields = redlock_fields,
    .nfields = sizeof(redlock_fields) / sizeof(redlock_fields[0]),
    .opts_size = sizeof(struct lock_req_opts),
    .opts_default = &lock_req_opts_default,
    .init = redlock_init,
    .fini = redlock_fini,
    .deduct = redlock_deduct,
    .locked = redlock_locked,
    .deduct_cart = guard_lock_cart,   /* its locks nested, sorted (core/cart_locks) */
    .export_metrics = redlock_export_metrics,
};
