/* Reconciliation after Redis lost a Redis-stock guard's state, and the
 * epoch-checked ways units flow back into Redis (see redis_reconcile.h).
 * Every decision is one Lua script, so two instances (or a sale and a
 * reload) cannot interleave inside it; the clock is Redis's TIME, the one
 * clock every instance shares. */
#include "guards/core/redis_reconcile.h"

#include "base/metrics.h"
#include "base/util.h"
#include "guards/core/redis_shared.h"
#include "stock/store.h"
#include "stock/txn.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define LUA_NOW                                                              \
    "local t = redis.call('TIME') "                                          \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "

enum { GATE_READY = 0, GATE_WAIT = 1, GATE_DUE = 2 };

/* KEYS[1] state, KEYS[2] marker; ARGV[1] horizon ms, ARGV[2] token.
 * {0} state there; {1, ms left}; {2, marker} the reload may run now. The
 * first caller to find the state missing starts the wait. */
static struct rconn_script gate_script = RCONN_SCRIPT(
    "if redis.call('EXISTS', KEYS[1]) == 1 then return {0} end "
    LUA_NOW
    "local m = redis.call('GET', KEYS[2]) "
    "if not m then "
    "  m = string.format('%.0f', now + tonumber(ARGV[1])) .. '-' .. ARGV[2] "
    "  redis.call('SET', KEYS[2], m) "
    "end "
    "local nb = tonumber(string.match(m, '^(%d+)-')) or 0 "
    "if now < nb then return {1, nb - now} end "
    "return {2, m}");

/* KEYS[1] marker, KEYS[2] epoch, KEYS[3..] state; ARGV[1] the marker the
 * loader claimed, ARGV[2] random, ARGV[3..] values. 1 loaded; 0 already
 * there; -1 the marker changed (a newer reconciliation: our MySQL read may
 * be older than sales it must wait for). */
static struct rconn_script load_script = RCONN_SCRIPT(
    RREC_LUA_GEN
    "if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end "
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end "
    LUA_NOW
    "for i = 3, #KEYS do redis.call('SET', KEYS[i], ARGV[i]) end "
    "redis.call('SET', KEYS[2], 'r' .. string.format('%.0f', now) .. '-' .. ARGV[2] "
    "  .. '@' .. lab_gen()) "
    "redis.call('DEL', KEYS[1]) "
    "return 1");

/* KEYS[1] marker, KEYS[2] epoch, KEYS[3..2+n] state, the rest deleted
 * first; ARGV[1] random, ARGV[2] n, ARGV[3..] values. */
static struct rconn_script seed_script = RCONN_SCRIPT(
    RREC_LUA_GEN
    "local n = tonumber(ARGV[2]) "
    "for i = 3 + n, #KEYS do redis.call('DEL', KEYS[i]) end "
    "for i = 1, n do redis.call('SET', KEYS[2 + i], ARGV[2 + i]) end "
    LUA_NOW
    "redis.call('SET', KEYS[2], 's' .. string.format('%.0f', now) .. '-' .. ARGV[1] "
    "  .. '@' .. lab_gen()) "
    "redis.call('DEL', KEYS[1]) "
    "return 1");

/* KEYS[1] state, KEYS[2] epoch, KEYS[3] target; ARGV[1] epoch, ARGV[2]
 * number. 1 done, 0 the state is gone or another epoch. */
static struct rconn_script give_script = RCONN_SCRIPT(
    "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end "
    "if (redis.call('GET', KEYS[2]) or '') ~= ARGV[1] then return 0 end "
    "redis.call('INCRBY', KEYS[3], ARGV[2]) "
    "return 1");

static struct rconn_script set_script = RCONN_SCRIPT(
    "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end "
    "if (redis.call('GET', KEYS[2]) or '') ~= ARGV[1] then return 0 end "
    "redis.call('SET', KEYS[3], ARGV[2]) "
    "return 1");

/* KEYS[1] state, KEYS[2] epoch, KEYS[3] marker, KEYS[4] target, KEYS[5..]
 * the state's other keys; ARGV[1] qty, ARGV[2] horizon ms, ARGV[3] token.
 * 1 added; 0 state missing; 2 reloaded too recently to tell whether the
 * reload saw this release: state dropped, reconciliation started. */
static struct rconn_script release_script = RCONN_SCRIPT(
    "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end "
    "local e = redis.call('GET', KEYS[2]) or '' "
    "local loaded = tonumber(string.match(e, '^r(%d+)-')) "
    LUA_NOW
    "if loaded and now - loaded < tonumber(ARGV[2]) then "
    "  redis.call('DEL', KEYS[1], KEYS[4]) "
    "  for i = 5, #KEYS do redis.call('DEL', KEYS[i]) end "
    "  redis.call('SET', KEYS[3], string.format('%.0f', now + tonumber(ARGV[2])) .. '-' .. ARGV[3]) "
    "  return 2 "
    "end "
    "redis.call('INCRBY', KEYS[4], ARGV[1]) "
    "return 1");

/* KEYS[1] state, KEYS[2] epoch, KEYS[3] marker, KEYS[4..] the state's
 * other keys; ARGV[1] epoch, ARGV[2] horizon ms, ARGV[3] token. 1 dropped
 * and the wait started; 0 the state is gone or another epoch. */
static struct rconn_script diverged_script = RCONN_SCRIPT(
    "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end "
    "if (redis.call('GET', KEYS[2]) or '') ~= ARGV[1] then return 0 end "
    LUA_NOW
    "for i = 4, #KEYS do redis.call('DEL', KEYS[i]) end "
    "redis.call('DEL', KEYS[1]) "
    "redis.call('SET', KEYS[3], string.format('%.0f', now + tonumber(ARGV[2])) .. '-' .. ARGV[3]) "
    "return 1");

static void random_hex(char out[17])
{
    snprintf(out, 17, "%016" PRIx64, util_rand());
}

static void num(char out[24], long long v)
{
    snprintf(out, 24, "%lld", v);
}

/* A script whose reply must be an integer: the integer, or -2 with err
 * (-2 because -1 is a legitimate answer of load_script). */
static long long run_int(const struct rrec *k, struct rconn_script *s, int nkeys, int argc,
                         const char **argv, char *err, size_t errlen)
{
    redisReply *r = rconn_eval(k->redis->pool, err, errlen, s, nkeys, argc, argv);
    if (!r)
        return -2;
    long long v = -2;
    if (r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else
        snprintf(err, errlen, "unexpected reply from a reconcile script");
    freeReplyObject(r);
    return v;
}

void rrec_epoch_copy(char out[RREC_EPOCH_MAX], const redisReply *r)
{
    if (r && r->type == REDIS_REPLY_STRING)
        snprintf(out, RREC_EPOCH_MAX, "%.*s", (int)r->len, r->str);
    else
        out[0] = '\0';
}

/* GATE_* with *left_ms or marker, or -1 with err. */
static int gate(const struct rrec *k, long *left_ms, char marker[RREC_EPOCH_MAX], char *err,
                size_t errlen)
{
    char horizon[24], token[17];
    num(horizon, k->redis->conf.reload_wait_ms);
    random_hex(token);
    const char *argv[4] = {k->state, k->marker, horizon, token};
    redisReply *r = rconn_eval(k->redis->pool, err, errlen, &gate_script, 2, 4, argv);
    if (!r)
        return -1;
    int rc = -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_INTEGER) {
        rc = (int)r->element[0]->integer;
        if (rc == GATE_WAIT && r->elements == 2 && r->element[1]->type == REDIS_REPLY_INTEGER)
            *left_ms = (long)r->element[1]->integer;
        else if (rc == GATE_DUE && r->elements == 2)
            rrec_epoch_copy(marker, r->element[1]);
        else if (rc != GATE_READY)
            rc = -1;
    }
    if (rc < 0)
        snprintf(err, errlen, "unexpected reply from the reconcile gate");
    freeReplyObject(r);
    return rc;
}

/* The answer while the state is being reconciled: 503, try again later. */
static void refuse(const struct rrec *k, const char *sku, long left_ms, struct deduct_res *res)
{
    res->outcome = DEDUCT_UNAVAILABLE;
    snprintf(res->detail, sizeof(res->detail),
             "Redis lost the %s stock of %.64s; reconciling with MySQL, sales resume in about "
             "%ld ms", k->guard, sku, left_ms > 0 ? left_ms : 0);
}

int rrec_seed(const struct rrec *k, const struct rrec_state *s, char *err, size_t errlen)
{
    const char *argv[2 + 1 + SEG_MAX + 2 * SEG_MAX + 2 + 1 + SEG_MAX];
    char rnd[17], n[24];
    int nkeys = 0;
    random_hex(rnd);
    num(n, s->n);
    argv[nkeys++] = k->marker;
    argv[nkeys++] = k->epoch;
    for (int i = 0; i < s->n; i++)
        argv[nkeys++] = s->keys[i];
    for (int i = 0; i < s->ndel; i++)
        argv[nkeys++] = s->del[i];
    int argc = nkeys;
    argv[argc++] = rnd;
    argv[argc++] = n;
    for (int i = 0; i < s->n; i++)
        argv[argc++] = s->vals[i];
    return run_int(k, &seed_script, nkeys, argc, argv, err, errlen) == 1 ? 0 : -1;
}

/* 1 loaded, 0 already there, -1 marker changed, -2 failure (err). */
static int load(const struct rrec *k, const char *marker, const struct rrec_state *s, char *err,
                size_t errlen)
{
    const char *argv[2 * (3 + SEG_MAX)];
    char rnd[17];
    random_hex(rnd);
    int nkeys = 0;
    argv[nkeys++] = k->marker;
    argv[nkeys++] = k->epoch;
    for (int i = 0; i < s->n; i++)
        argv[nkeys++] = s->keys[i];
    int argc = nkeys;
    argv[argc++] = marker;
    argv[argc++] = rnd;
    for (int i = 0; i < s->n; i++)
        argv[argc++] = s->vals[i];
    return (int)run_int(k, &load_script, nkeys, argc, argv, err, errlen);
}

int rrec_recover(const struct rrec *k, const struct deduct_env *env, const char *sku,
                 rrec_fill_fn fill, struct deduct_res *res)
{
    long long stock, version, initial;
    int nseg;
    /* An unknown SKU is a 404 now, not after a horizon of 503s. */
    int found = store_info(env->db, sku, &stock, &version, &initial, &nseg);
    if (found <= 0) {
        if (found < 0)
            stock_db_failure(env->db, found, res);
        else
            res->outcome = DEDUCT_UNKNOWN_SKU;
        return 0;
    }
    long left = 0;
    char marker[RREC_EPOCH_MAX] = "";
    int g = gate(k, &left, marker, res->detail, sizeof(res->detail));
    if (g < 0) {
        res->outcome = DEDUCT_UNAVAILABLE;
        return 0;
    }
    if (g == GATE_READY)
        return 1;
    if (g == GATE_WAIT) {
        refuse(k, sku, left, res);
        return 0;
    }
    /* Due: every sale decided before the loss has reached MySQL (or given
     * up), so a read from now on counts each unit once. The reseed count
     * is read first, never newer than the stock: a reseed between the two
     * reads wrote Redis itself (the load then finds the state there and
     * writes nothing). */
    long long seeds = 0, ignored_stock, ignored_version;
    found = store_read_seeded(env->db, sku, &ignored_stock, &ignored_version, &seeds);
    if (found > 0)
        found = store_info(env->db, sku, &stock, &version, &initial, &nseg);
    if (found <= 0) {
        if (found < 0)
            stock_db_failure(env->db, found, res);
        else
            res->outcome = DEDUCT_UNKNOWN_SKU;
        return 0;
    }
    struct rrec_state s;
    memset(&s, 0, sizeof(s));
    s.seeds = seeds;
    if (fill(sku, stock, nseg, &s, res) != 0)
        return 0;
    int rc = load(k, marker, &s, res->detail, sizeof(res->detail));
    if (rc == -2) {
        res->outcome = DEDUCT_UNAVAILABLE;
        return 0;
    }
    if (rc == -1) {
        refuse(k, sku, k->redis->conf.reload_wait_ms, res);
        return 0;
    }
    if (rc == 1) {
        char labels[64];
        snprintf(labels, sizeof(labels), "guard=\"%s\"", k->guard);
        metrics_add("lab_redis_reloads_total", labels, 1);
        fprintf(stderr, "%s: Redis had lost %s; reloaded %lld units from MySQL after the "
                "reconcile wait\n", k->guard, sku, stock);
    }
    return 1;
}

int rrec_give_back(const struct rrec *k, const char *target, const char *epoch, long qty,
                   char *err, size_t errlen)
{
    char n[24];
    num(n, qty);
    const char *argv[5] = {k->state, k->epoch, target, epoch, n};
    long long rc = run_int(k, &give_script, 3, 5, argv, err, errlen);
    return rc < 0 ? -1 : (int)rc;
}

int rrec_set_if_epoch(const struct rrec *k, const char *target, const char *epoch,
                      long long value, char *err, size_t errlen)
{
    char n[24];
    num(n, value);
    const char *argv[5] = {k->state, k->epoch, target, epoch, n};
    long long rc = run_int(k, &set_script, 3, 5, argv, err, errlen);
    return rc < 0 ? -1 : (int)rc;
}

int rrec_release(const struct rrec *k, const char *target, const char *const *drop, int ndrop,
                 long qty, char *err, size_t errlen)
{
    const char *argv[4 + SEG_MAX + 3];
    char n[24], horizon[24], token[17];
    if (ndrop < 0 || ndrop > SEG_MAX) {
        snprintf(err, errlen, "too many keys to drop");
        return -1;
    }
    num(n, qty);
    num(horizon, k->redis->conf.reload_wait_ms);
    random_hex(token);
    int nkeys = 0;
    argv[nkeys++] = k->state;
    argv[nkeys++] = k->epoch;
    argv[nkeys++] = k->marker;
    argv[nkeys++] = target;
    for (int i = 0; i < ndrop; i++)
        argv[nkeys++] = drop[i];
    int argc = nkeys;
    argv[argc++] = n;
    argv[argc++] = horizon;
    argv[argc++] = token;
    long long rc = run_int(k, &release_script, nkeys, argc, argv, err, errlen);
    if (rc == 2)
        fprintf(stderr, "%s: a release landed right after a reload of %s; reconciling it "
                "again\n", k->guard, k->state);
    return rc < 0 ? -1 : (int)rc;
}

int rrec_distrust(const struct rrec *k, const char *epoch, const char *const *drop, int ndrop,
                  char *err, size_t errlen)
{
    const char *argv[3 + SEG_MAX + 3];
    char horizon[24], token[17];
    if (ndrop < 0 || ndrop > SEG_MAX) {
        snprintf(err, errlen, "too many keys to drop");
        return -1;
    }
    num(horizon, k->redis->conf.reload_wait_ms);
    random_hex(token);
    int nkeys = 0;
    argv[nkeys++] = k->state;
    argv[nkeys++] = k->epoch;
    argv[nkeys++] = k->marker;
    for (int i = 0; i < ndrop; i++)
        argv[nkeys++] = drop[i];
    int argc = nkeys;
    argv[argc++] = epoch;
    argv[argc++] = horizon;
    argv[argc++] = token;
    long long rc = run_int(k, &diverged_script, nkeys, argc, argv, err, errlen);
    if (rc == 1) {
        char labels[64];
        snprintf(labels, sizeof(labels), "guard=\"%s\"", k->guard);
        metrics_add("lab_redis_divergence_reconciles_total", labels, 1);
        fprintf(stderr, "%s: MySQL holds fewer units than %s said; reconciling it\n", k->guard,
                k->state);
    }
    return rc < 0 ? -1 : (int)rc;
}

int rrec_status(const struct rrec *k, long *left_ms, char *err, size_t errlen)
{
    char marker[RREC_EPOCH_MAX];
    *left_ms = 0;
    int g = gate(k, left_ms, marker, err, errlen);
    if (g < 0)
        return -1;
    return g == GATE_READY ? 1 : 0;
}
