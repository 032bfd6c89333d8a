/* The redis-stream flusher thread (see stream_flusher.h). */
#include "guards/redis_stream/stream_flusher.h"

#include "guards/redis_stream/stream_batch.h"

#include "base/db.h"
#include "base/metrics.h"
#include "locks/rconn.h"
#include "base/util.h"
#include "stock/keys.h"
#include "stock/store.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define GUARD_NAME "redis-stream"
#define CONNECT_TIMEOUT_MS 500
#define CMD_TIMEOUT_MS 5000
#define SFLUSH_REWRITE 1       /* write_batch: sales were taken back, write again */
#define SFLUSH_DEFER_NAP_MS 5  /* before reading deferred sales again */

struct flusher {
    const struct sflush_conf *conf;
    const struct db_conf *dbconf;
    struct rconn_endpoint *ep; /* the shared Redis (the guard's, borrowed) */
    char instance[64];
    pthread_t thread;
    int running;
    atomic_int stop;
    redisContext *rc;
    struct db_conn *db;
    struct sale sales[SFLUSH_SALES_MAX];
    int n;                     /* sales; an entry's sales are adjacent */
    int more;                  /* an entry read did not fit: read ours again */
};

static struct flusher fl;

/* Counters, read by sflush_export_metrics. */
static atomic_ullong n_batches, n_entries, n_inserted, n_failures, n_claimed, n_skipped,
    n_floor;
static atomic_llong last_batch, lag_max_ms;

const char *sflush_instance(void)
{
    return fl.instance;
}

static long long wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

long sflush_test_pause_ms(const char *name)
{
    const char *v = getenv(name);
    char *end;
    long ms = v && *v ? strtol(v, &end, 10) : 0;
    return ms > 0 && ms <= 60000 && !*end ? ms : 0;
}

void sflush_test_pause(const char *name)
{
    long ms = sflush_test_pause_ms(name);
    if (ms > 0)
        util_sleep_ms(ms);
}

/* Sleep up to ms, waking early when asked to stop. */
static void nap(long ms)
{
    for (long slept = 0; slept < ms && !atomic_load(&fl.stop); slept += 50)
        util_sleep_ms(ms - slept < 50 ? ms - slept : 50);
}

/* ---- Redis ------------------------------------------------------------ */

/* KEYS[1] stream, [2] pending entries, [3] pending units, [4] the flushing
 * marks, [5] the flush counter, [6] cancelled entries, [7] unacked
 * entries (an entry flushed after its wait ran out); ARGV[1] group, [2]
 * instance, then (id, sku, sales, units, give) per entry and SKU (a
 * cart's entry has one per SKU of its lines, its id repeated; sku "" for
 * an entry that is only acknowledged: malformed, or taken back by its
 * sale, which counted it off itself). The pending counts are in sales (an entry
 * carries one sale or a group's). An entry is counted off only by the
 * XACK that removed it from the group's pending list: a claimed entry two
 * flushers wrote is counted once. give > 0: units of sales whose order_id
 * the ledger already had under another sale (a repeat Redis no longer
 * remembered), so MySQL took nothing for them and they go back to the
 * SKU's Redis stock -- when that stock exists; a missing one is reloaded
 * from MySQL less pending, which this very script lowers. The mark goes
 * and the counter moves in the same script: the audit's snapshot
 * (sflush_side_script) relies on it. */
static struct rconn_script ack_script = RCONN_SCRIPT(
    "local n = 0 "
    "local nc = redis.call('SCARD', KEYS[6]) "
    "local nu = redis.call('ZCARD', KEYS[7]) "
    "local cnt, units, ids, acked = {}, {}, {}, {} "
    "for i = 3, #ARGV, 5 do "
    "  local sku = ARGV[i + 1] "
    "  if acked[ARGV[i]] == nil then "
    "    acked[ARGV[i]] = redis.call('XACK', KEYS[1], ARGV[1], ARGV[i]) == 1 "
    "    if acked[ARGV[i]] then n = n + 1 end "
    "  end "
    "  if acked[ARGV[i]] then "
    "    if sku ~= '' then "
    "      cnt[sku] = (cnt[sku] or 0) + tonumber(ARGV[i + 2]) "
    "      units[sku] = (units[sku] or 0) + tonumber(ARGV[i + 3]) "
    "      if tonumber(ARGV[i + 4]) > 0 then "
    "        local st = 'sstock:{' .. sku .. '}' "
    "        if redis.call('EXISTS', st) == 1 then "
    "          redis.call('INCRBY', st, ARGV[i + 4]) end "
    "      end "
    "    end "
    "  end "
    "  ids[#ids + 1] = ARGV[i] "
    "  if nc > 0 then redis.call('SREM', KEYS[6], ARGV[i]) end "
    "  if nu > 0 then redis.call('ZREM', KEYS[7], ARGV[i]) end "
    "end "
    "for k = 1, #ids, 500 do "
    "  redis.call('XDEL', KEYS[1], unpack(ids, k, math.min(k + 499, #ids))) "
    "end "
    "for sku, c in pairs(cnt) do "
    "  if redis.call('HINCRBY', KEYS[2], sku, -c) <= 0 then redis.call('HDEL', KEYS[2], sku) end "
    "  if redis.call('HINCRBY', KEYS[3], sku, -units[sku]) <= 0 then "
    "    redis.call('HDEL', KEYS[3], sku) end "
    "end "
    "redis.call('HDEL', KEYS[4], ARGV[2]) "
    "redis.call('INCR', KEYS[5]) "
    "return n");

/* KEYS[1] the flushing marks, [2] the audit hold, [3] cancelled entries,
 * [4] unacked entries; ARGV[1] instance, [2] ms, [3..] the batch's entry
 * ids. Marks this flusher as about to commit, until Redis TIME + ms (a
 * flusher that dies there does not block audits for longer): 1. 0 without
 * a mark while an audit holds commits off. {id, 'c'|'d', ...}, no mark:
 * entries of the batch taken back by their sale ('c', replicas_ack not
 * met, guard_redis_stream.c undo_script: dropped) or still waiting for
 * its replicas ('d': deferred, read again later); the batch is written
 * again without them. Atomic with the undo: an entry is either taken back
 * before the mark or committed after it. */
static struct rconn_script mark_script = RCONN_SCRIPT(
    "if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end "
    "local t = redis.call('TIME') "
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "local out = {} "
    "local nc = redis.call('SCARD', KEYS[3]) "
    "local nu = redis.call('ZCARD', KEYS[4]) "
    "if nc > 0 or nu > 0 then "
    "  for i = 3, #ARGV do "
    "    if nc > 0 and redis.call('SISMEMBER', KEYS[3], ARGV[i]) == 1 then "
    "      out[#out + 1] = ARGV[i] out[#out + 1] = 'c' "
    "    elseif nu > 0 then "
    "      local u = redis.call('ZSCORE', KEYS[4], ARGV[i]) "
    "      if u and tonumber(u) > now then out[#out + 1] = ARGV[i] out[#out + 1] = 'd' end "
    "    end "
    "  end "
    "end "
    "if #out > 0 then return out end "
    "redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', now + tonumber(ARGV[2]))) "
    "return 1");

static void redis_drop(void)
{
    redisFree(fl.rc);
    fl.rc = NULL;
}

/* A live context with the group created (from the stream's start: after
 * Redis lost everything, every entry there is unflushed). 0 or -1. */
static int redis_ready(void)
{
    if (fl.rc && !fl.rc->err)
        return 0;
    redis_drop();
    char err[128];
    fl.rc = rconn_connect(fl.ep, CONNECT_TIMEOUT_MS, CMD_TIMEOUT_MS, err, sizeof(err));
    if (!fl.rc)
        return -1;
    redisReply *r = redisCommand(fl.rc, "XGROUP CREATE %s %s 0 MKSTREAM", KEYS_SALES_STREAM,
                                 KEYS_SALES_GROUP);
    int ok = r && (r->type != REDIS_REPLY_ERROR || strstr(r->str, "BUSYGROUP"));
    freeReplyObject(r);
    if (!ok) {
        redis_drop();
        return -1;
    }
    return 0;
}

static void field_copy(char *out, size_t outlen, const redisReply *v)
{
    snprintf(out, outlen, "%s", v->type == REDIS_REPLY_STRING ? v->str : "");
}

/* Sales in one entry: 'o' (order_id) starts the next, 'q' and 'r' are
 * its own, and a cart's line has its own 'k' (SKU) and 'l' (line); 's',
 * 'i', 't' are the entry's (every sale's, but a cart line's SKU). One
 * entry is one sale (sale_script, replicas_ack), a whole group
 * (group_script) or every line of one cart (cart_script).
 * Returns the sales, or 0 for a malformed entry (acknowledged as one). */
static int entry_sales(const redisReply *kv)
{
    int n = 0;
    for (size_t k = 0; kv && kv->type == REDIS_REPLY_ARRAY && k + 1 < kv->elements; k += 2)
        if (kv->element[k]->type == REDIS_REPLY_STRING && strcmp(kv->element[k]->str, "o") == 0)
            n++;
    return n;
}

/* Append the entries of `list` ([id, [field, value, ...]] each) to the
 * batch, whole entries only: one that does not fit stays pending in our
 * list (fl.more: read our own entries again next). */
static void take_entries(const redisReply *list)
{
    for (size_t i = 0; list && list->type == REDIS_REPLY_ARRAY && i < list->elements; i++) {
        const redisReply *e = list->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 1 ||
            e->element[0]->type != REDIS_REPLY_STRING)
            continue;
        const redisReply *kv = e->elements >= 2 ? e->element[1] : NULL;
        int ns = entry_sales(kv);
        if (fl.n + (ns ? ns : 1) > SFLUSH_SALES_MAX) {
            fl.more = 1;
            return;
        }
        int first = fl.n;
        char sku[STOCK_SKU_MAX + 1] = "", inst[64] = "";
        long long t_ms = 0;
        struct sale *s = NULL;
        for (size_t k = 0; kv && kv->type == REDIS_REPLY_ARRAY && k + 1 < kv->elements; k += 2) {
            const redisReply *name = kv->element[k], *v = kv->element[k + 1];
            if (name->type != REDIS_REPLY_STRING || !name->str[0] || name->str[1])
                continue;
            switch (name->str[0]) {
            case 's': field_copy(sku, sizeof(sku), v); break;
            case 'i': field_copy(inst, sizeof(inst), v); break;
            case 't': t_ms = v->type == REDIS_REPLY_STRING ? atoll(v->str) : 0; break;
            case 'o':
                s = &fl.sales[fl.n++];
                memset(s, 0, sizeof(*s));
                field_copy(s->order_id, sizeof(s->order_id), v);
                break;
            case 'q':
                if (s)
                    s->qty = v->type == REDIS_REPLY_STRING ? atoll(v->str) : 0;
                break;
            case 'r':
                if (s)
                    s->remaining = v->type == REDIS_REPLY_STRING ? atoll(v->str) : 0;
                break;
            case 'k':          /* a cart's line: its own SKU */
                if (s)
                    field_copy(s->sku, sizeof(s->sku), v);
                break;
            case 'l':
                if (s)
                    s->line = v->type == REDIS_REPLY_STRING ? atoi(v->str) : 0;
                break;
            }
        }
        if (fl.n == first) {   /* no sale in it: only acknowledged */
            s = &fl.sales[fl.n++];
            memset(s, 0, sizeof(*s));
        }
        for (int j = first; j < fl.n; j++) {
            s = &fl.sales[j];
            snprintf(s->id, sizeof(s->id), "%s", e->element[0]->str);
            if (!s->sku[0])
                snprintf(s->sku, sizeof(s->sku), "%s", sku);
            snprintf(s->instance, sizeof(s->instance), "%s", inst);
            s->t_ms = t_ms;
            s->valid = s->qty > 0 && s->sku[0] && s->order_id[0];
            if (kv && kv->type == REDIS_REPLY_ARRAY && !s->valid)
                fprintf(stderr, "redis-stream flusher: malformed sale in entry %s acknowledged\n",
                        s->id);
        }
    }
}

/* Fill the batch: own pending entries first (a restart), then a claim of a
 * dead consumer's when due, then new ones. Returns 0 (fl.n may be 0) or -1
 * when Redis failed. */
static int read_batch(int *own_done, double *next_claim)
{
    char count[16], idle[24];
    snprintf(count, sizeof(count), "%ld", fl.conf->batch);
    snprintf(idle, sizeof(idle), "%ld", fl.conf->claim_idle_ms);
    fl.n = 0;
    fl.more = 0;
    redisReply *r;
    if (!*own_done) {
        r = redisCommand(fl.rc, "XREADGROUP GROUP %s %s COUNT %s STREAMS %s 0",
                         KEYS_SALES_GROUP, fl.instance, count, KEYS_SALES_STREAM);
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
            r->element[0]->elements == 2)
            take_entries(r->element[0]->element[1]);
        if (r && r->type != REDIS_REPLY_ERROR && fl.n == 0)
            *own_done = 1;
    } else if (util_now() >= *next_claim) {
        *next_claim = util_now() + (double)fl.conf->claim_idle_ms / 2000.0;
        r = redisCommand(fl.rc, "XAUTOCLAIM %s %s %s %s 0-0 COUNT %s", KEYS_SALES_STREAM,
                         KEYS_SALES_GROUP, fl.instance, idle, count);
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 2)
            take_entries(r->element[1]);
        if (fl.n > 0) {
            atomic_fetch_add(&n_claimed, (unsigned long long)fl.n);
            fprintf(stderr, "redis-stream flusher %s: took over %d unflushed sale(s)\n",
                    fl.instance, fl.n);
        }
    } else {
        char block[16];
        snprintf(block, sizeof(block), "%ld", fl.conf->block_ms);
        r = redisCommand(fl.rc, "XREADGROUP GROUP %s %s COUNT %s BLOCK %s STREAMS %s >",
                         KEYS_SALES_GROUP, fl.instance, count, block, KEYS_SALES_STREAM);
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
            r->element[0]->elements == 2)
            take_entries(r->element[0]->element[1]);
    }
    if (fl.more)
        *own_done = 0;
    int rc = 0;
    if (!r || r->type == REDIS_REPLY_ERROR) {
        /* NOGROUP: Redis lost the group (and the stream): recreate it */
        if (r)
            fprintf(stderr, "redis-stream flusher: %s\n", r->str);
        redis_drop();
        rc = -1;
    }
    freeReplyObject(r);
    return rc;
}

/* Mark this flusher as committing (see mark_script), waiting out an
 * audit's hold (SFLUSH_HOLD_WAIT_MS at most). 0 marked; 1 some sales of
 * the batch were taken back (now invalid: written again without them);
 * -1 Redis failed or the hold outlasted the wait (the batch is rolled
 * back and retried). */
static int mark_flushing(void)
{
    char ms[24];
    snprintf(ms, sizeof(ms), "%d", SFLUSH_MARK_MS);
    int argc = 6 + fl.n, nargs = 6;
    const char **argv = malloc((size_t)argc * sizeof(*argv));
    if (!argv)
        return -1;
    argv[0] = KEYS_SALES_FLUSHING;
    argv[1] = KEYS_SALES_AUDIT_HOLD;
    argv[2] = KEYS_SALES_CANCELLED;
    argv[3] = KEYS_SALES_UNACKED;
    argv[4] = fl.instance;
    argv[5] = ms;
    for (int i = 0; i < fl.n; i++)
        if (fl.sales[i].valid &&   /* not the ones already dropped or deferred */
            (nargs == 6 || strcmp(argv[nargs - 1], fl.sales[i].id) != 0))
            argv[nargs++] = fl.sales[i].id;
    int rc = -1;
    for (long waited = 0; waited <= SFLUSH_HOLD_WAIT_MS; waited++) {
        redisReply *r = rconn_script_run(fl.rc, &mark_script, 4, nargs, argv);
        int marked = !r ? -1 : r->type == REDIS_REPLY_INTEGER ? (int)r->integer
                     : r->type == REDIS_REPLY_ARRAY ? 2 : -1;
        for (size_t k = 0; marked == 2 && k + 1 < r->elements; k += 2) {
            const redisReply *id = r->element[k], *how = r->element[k + 1];
            for (int i = 0; i < fl.n; i++) {
                if (id->type != REDIS_REPLY_STRING || how->type != REDIS_REPLY_STRING ||
                    strcmp(fl.sales[i].id, id->str) != 0)
                    continue;
                fl.sales[i].valid = 0;   /* not written... */
                fl.sales[i].deferred = how->str[0] == 'd';   /* ...nor acknowledged */
            }
        }
        if (marked < 0 && (!r || fl.rc->err))
            redis_drop();
        freeReplyObject(r);
        if (marked != 0) {
            rc = marked == 1 ? 0 : marked == 2 ? 1 : -1;
            break;
        }
        util_sleep_ms(1);
    }
    free(argv);
    return rc;
}

/* The batch was not written: take the mark off (best effort; it expires). */
static void unmark_flushing(void)
{
    if (!fl.rc || fl.rc->err)
        return;
    redisReply *r = redisCommand(fl.rc, "HDEL %s %s", KEYS_SALES_FLUSHING, fl.instance);
    if (!r)
        redis_drop();
    freeReplyObject(r);
}

/* The ack_script quintuples of the entry fl.sales[i..j) into argv from
 * argc, their numbers in num from *q: one per SKU of its valid sales (a
 * cart's lines may name several), or one with sku "" when none is valid.
 * Returns the new argc. */
static int ack_entry(int i, int j, const char **argv, int argc, char (*num)[3][24], int *q)
{
    int any = 0;
    for (int k = i; k < j; k++) {
        const struct sale *s = &fl.sales[k];
        int seen = 0;
        for (int p = i; p < k && !seen; p++)
            seen = fl.sales[p].valid && strcmp(fl.sales[p].sku, s->sku) == 0;
        if (!s->valid || seen)
            continue;
        long long sales = 0, units = 0, give = 0;
        for (int p = k; p < j; p++) {
            const struct sale *t = &fl.sales[p];
            if (!t->valid || strcmp(t->sku, s->sku) != 0)
                continue;
            sales++;
            units += t->qty;
            if (t->give_back)
                give += t->qty;
        }
        snprintf(num[*q][0], sizeof(num[*q][0]), "%lld", sales);
        snprintf(num[*q][1], sizeof(num[*q][1]), "%lld", units);
        snprintf(num[*q][2], sizeof(num[*q][2]), "%lld", give);
        argv[argc++] = s->id;
        argv[argc++] = s->sku;
        argv[argc++] = num[*q][0];
        argv[argc++] = num[*q][1];
        argv[argc++] = num[*q][2];
        (*q)++;
        any = 1;
    }
    if (!any) {
        argv[argc++] = fl.sales[i].id;
        argv[argc++] = "";
        argv[argc++] = "0";
        argv[argc++] = "0";
        argv[argc++] = "0";
    }
    return argc;
}

/* Acknowledge, delete and count off the batch, give back the units of
 * repeats, unmark. 0 or -1 (Redis failed: the entries stay pending and are
 * written again, harmlessly). */
static int ack_batch(void)
{
    int argc = 9;
    const char **argv = malloc((size_t)(9 + 5 * fl.n) * sizeof(*argv));
    char (*num)[3][24] = malloc((size_t)(fl.n ? fl.n : 1) * sizeof(*num));
    if (!argv || !num) {
        free(argv);
        free(num);
        return -1;
    }
    argv[0] = KEYS_SALES_STREAM;
    argv[1] = KEYS_SALES_PENDING;
    argv[2] = KEYS_SALES_PENDING_UNITS;
    argv[3] = KEYS_SALES_FLUSHING;
    argv[4] = KEYS_SALES_FLUSH_SEQ;
    argv[5] = KEYS_SALES_CANCELLED;
    argv[6] = KEYS_SALES_UNACKED;
    argv[7] = KEYS_SALES_GROUP;
    argv[8] = fl.instance;
    /* One quintuple per entry and SKU: its sales are adjacent in fl.sales. */
    for (int i = 0, j, q = 0; i < fl.n; i = j) {
        for (j = i; j < fl.n && strcmp(fl.sales[j].id, fl.sales[i].id) == 0; j++)
            ;
        if (!fl.sales[i].deferred)
            argc = ack_entry(i, j, argv, argc, num, &q);
    }
    redisReply *r = rconn_script_run(fl.rc, &ack_script, 7, argc, argv);
    int rc = r && r->type == REDIS_REPLY_INTEGER ? 0 : -1;
    if (rc != 0) {
        fprintf(stderr, "redis-stream flusher: acknowledging failed: %s\n",
                r && r->type == REDIS_REPLY_ERROR ? r->str : fl.rc->errstr);
        if (rconn_readonly(r))   /* a demoted master: ask Sentinel again */
            rconn_endpoint_invalidate(fl.ep);
        if (!r || fl.rc->err || rconn_readonly(r))
            redis_drop();
    }
    freeReplyObject(r);
    free(argv);
    free(num);
    return rc;
}

/* ---- MySQL (the statements: stream_batch.c) ---------------------------- */

/* One transaction for the batch. 0 committed, or a negative DB_E* code
 * (nothing known to be written: the batch is tried again). */
static long long write_batch(void)
{
    if (!fl.db && !(fl.db = db_connect(fl.dbconf)))
        return DB_EUNAVAIL;
    for (int i = 0; i < fl.n; i++)
        fl.sales[i].inserted = fl.sales[i].give_back = 0;
    unsigned long long skipped = 0, floored = 0;
    long long n = db_begin(fl.db);
    if (n == DB_OK)
        n = sbatch_insert_rows(fl.db, fl.sales, fl.n, &skipped);
    if (n == DB_OK)
        n = sbatch_update_stock(fl.db, fl.sales, fl.n, &floored);
    atomic_fetch_add(&n_skipped, skipped);
    atomic_fetch_add(&n_floor, floored);
    /* The mark right before the COMMIT, taken off with the acknowledgement:
     * an audit never pairs MySQL after a flush with Redis before it. */
    int m = n == DB_OK ? mark_flushing() : 0;
    if (m == 1) {   /* sales taken back: write the batch without them */
        db_rollback(fl.db);
        return SFLUSH_REWRITE;
    }
    if (m < 0)
        n = DB_EUNAVAIL;
    if (n != DB_OK) {
        db_rollback(fl.db);
        return n;
    }
    for (int i = 0; i < fl.n; i++)
        if (fl.sales[i].valid) {   /* a batch with a sale to commit */
            sflush_test_pause("LAB_TEST_STREAM_MARK_PAUSE_MS");
            break;
        }
    /* A lost COMMIT reply returns an error here: the batch is written
     * again, and the ledger's unique order_id makes that a no-op. */
    return db_commit(fl.db);
}

static void count_batch(void)
{
    long long now = wall_ms(), inserted = 0;
    for (int i = 0; i < fl.n; i++) {
        const struct sale *s = &fl.sales[i];
        if (!s->inserted)
            continue;
        inserted++;
        long long lag = s->t_ms > 0 && now > s->t_ms ? now - s->t_ms : 0;
        metrics_observe("lab_stream_lag_seconds", "", (double)lag / 1000.0);
        long long max = atomic_load(&lag_max_ms);
        while (lag > max && !atomic_compare_exchange_weak(&lag_max_ms, &max, lag))
            ;
    }
    atomic_fetch_add(&n_batches, 1);
    atomic_fetch_add(&n_entries, (unsigned long long)fl.n);
    atomic_fetch_add(&n_inserted, (unsigned long long)inserted);
    atomic_store(&last_batch, fl.n);
}

static void *flusher_main(void *arg)
{
    (void)arg;
    mysql_thread_init();
    long backoff = 0;
    int own_done = 0;
    double next_claim = util_now() + (double)fl.conf->claim_idle_ms / 1000.0;
    while (!atomic_load(&fl.stop)) {
        if (backoff > 0)
            nap(backoff);
        if (redis_ready() != 0 || read_batch(&own_done, &next_claim) != 0) {
            backoff = backoff ? backoff * 2 : 50;
            if (backoff > fl.conf->backoff_max_ms)
                backoff = fl.conf->backoff_max_ms;
            continue;
        }
        if (fl.n == 0) {
            backoff = 0;
            continue;
        }
        if (sbatch_cut(fl.sales, &fl.n))
            own_done = 0;
        if (fl.conf->hold_ms > 0)
            nap(fl.conf->hold_ms);
        if (atomic_load(&fl.stop))
            break;
        long long rc = write_batch();
        for (int again = 0; rc == SFLUSH_REWRITE && again < 3; again++)
            rc = write_batch();
        if (rc == SFLUSH_REWRITE)
            rc = DB_ERETRY;
        if (rc != DB_OK)
            unmark_flushing();
        if (rc == DB_OK && ack_batch() == 0) {
            count_batch();
            backoff = 0;
            /* Under load the next batch gathers while we wait: hundreds of
             * sales per transaction instead of whatever arrived during
             * this one. The first sale after idle is read at once (BLOCK). */
            if (fl.conf->linger_ms > 0 && fl.n < fl.conf->batch)
                nap(fl.conf->linger_ms);
            /* Sales still waiting for their replicas stay in our pending
             * list: read them again from there, shortly. */
            for (int i = 0; i < fl.n; i++)
                if (fl.sales[i].deferred) {
                    own_done = 0;
                    nap(SFLUSH_DEFER_NAP_MS);
                    break;
                }
            continue;
        }
        /* MySQL (or the acknowledgement) failed: the batch is still in
         * our pending list; read it again from there, after a pause. */
        atomic_fetch_add(&n_failures, 1);
        if (rc != DB_OK && backoff == 0)
            fprintf(stderr, "redis-stream flusher %s: MySQL write failed (%s); retrying\n",
                    fl.instance, fl.db ? fl.db->errstr : "out of memory");
        own_done = 0;
        backoff = backoff ? backoff * 2 : 50;
        if (backoff > fl.conf->backoff_max_ms)
            backoff = fl.conf->backoff_max_ms;
    }
    redis_drop();
    db_free(fl.db);
    fl.db = NULL;
    mysql_thread_end();
    return NULL;
}

int sflush_start(const struct sflush_conf *conf, const struct db_conf *db,
                 struct rconn_endpoint *ep, const char *instance, char *err, size_t errlen)
{
    snprintf(fl.instance, sizeof(fl.instance), "%s", instance);
    if (!conf->enabled || !db || fl.running)
        return 0;
    fl.conf = conf;
    fl.dbconf = db;
    fl.ep = ep;
    atomic_store(&fl.stop, 0);
    if (pthread_create(&fl.thread, NULL, flusher_main, NULL) != 0) {
        snprintf(err, errlen, "cannot start the redis-stream flusher thread");
        return -1;
    }
    fl.running = 1;
    return 0;
}

void sflush_stop(void)
{
    if (!fl.running)
        return;
    atomic_store(&fl.stop, 1);
    pthread_join(fl.thread, NULL);
    fl.running = 0;
}

void sflush_export_metrics(void)
{
    metrics_set("lab_stream_batches_total", "", (double)atomic_load(&n_batches));
    metrics_set("lab_stream_entries_total", "", (double)atomic_load(&n_entries));
    metrics_set("lab_stream_inserted_total", "", (double)atomic_load(&n_inserted));
    metrics_set("lab_stream_flush_failures_total", "", (double)atomic_load(&n_failures));
    metrics_set("lab_stream_claimed_total", "", (double)atomic_load(&n_claimed));
    metrics_set("lab_stream_replayed_total", "", (double)atomic_load(&n_skipped));
    metrics_set("lab_stream_floor_total", "", (double)atomic_load(&n_floor));
    metrics_set("lab_stream_last_batch_size", "", (double)atomic_load(&last_batch));
    metrics_set("lab_stream_lag_max_seconds", "", (double)atomic_load(&lag_max_ms) / 1000.0);
}
