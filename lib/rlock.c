/* Redis lock: pooled hiredis contexts, Lua acquire/release/renew scripts, one
 * watchdog thread per client, pub/sub-woken bounded waits. See rlock.h. */
#include "rlock.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define POOL_IDLE_MAX   64
#define WAIT_SLICE_MAX  100   /* ms: a lost notification costs at most this */
#define WAIT_SLICE_DEF  50    /* ms: when the holder's PTTL is unknown */
#define TTL_MAX         86400000L

/* ---- small helpers ---------------------------------------------------- */

int64_t rlock_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Per-thread xorshift64*, seeded from the kernel: jitter only, not tokens. */
static uint64_t rand_u64(void)
{
    static _Thread_local uint64_t s;
    if (s == 0) {
        if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s)
            s = (uint64_t)now_us() ^ ((uint64_t)gettid() << 32);
        if (s == 0)
            s = 0x9e3779b97f4a7c15ULL;
    }
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dULL;
}

static atomic_ullong token_counter;

int rlock_token_make(char *out, size_t outlen, const char *instance)
{
    char inst[41];
    size_t n = 0;
    uint64_t rnd;

    if (!instance || !*instance)
        instance = "anon";
    for (; instance[n] && n < sizeof inst - 1; n++) {
        char ch = instance[n];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                 (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        inst[n] = ok ? ch : '_';
    }
    inst[n] = '\0';
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = rand_u64();
    unsigned long long cnt = atomic_fetch_add(&token_counter, 1) + 1;
    int len = snprintf(out, outlen, "%s:%d:%llu:%016" PRIx64, inst, (int)gettid(),
                       cnt, rnd);
    if (len < 0 || (size_t)len >= outlen)
        return -1;
    return len;
}

redisContext *rlock_connect(const char *host, int port, int connect_timeout_ms,
                            int cmd_timeout_ms, char *errbuf, size_t errlen)
{
    struct timeval ct = { connect_timeout_ms / 1000, (connect_timeout_ms % 1000) * 1000 };
    struct timeval rt = { cmd_timeout_ms / 1000, (cmd_timeout_ms % 1000) * 1000 };
    redisContext *ctx = redisConnectWithTimeout(host, port, ct);

    if (!ctx) {
        if (errbuf)
            snprintf(errbuf, errlen, "redis %s:%d: out of memory", host, port);
        return NULL;
    }
    if (ctx->err || redisSetTimeout(ctx, rt) != REDIS_OK) {
        if (errbuf)
            snprintf(errbuf, errlen, "redis %s:%d: %s", host, port,
                     ctx->errstr[0] ? ctx->errstr : "cannot set timeout");
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

/* ---- scripts: EVALSHA, falling back to EVAL on NOSCRIPT ---------------- */

struct rscript {
    const char *src;
    atomic_int ready;  /* sha valid; written once under script_mu */
    char sha[41];
};

static pthread_mutex_t script_mu = PTHREAD_MUTEX_INITIALIZER;

/* KEYS[1] lock, ARGV[1] ttl ms, ARGV[2] owner. {1, count} or {0, holder pttl}. */
static struct rscript s_acquire_hash = { .src =
    "if redis.call('exists', KEYS[1]) == 0 or "
    "   redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1) "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return {1, n} "
    "end "
    "return {0, redis.call('pttl', KEYS[1])}" };

/* KEYS[1] lock, KEYS[2] channel, ARGV[1] ttl, ARGV[2] owner.
 * n > 0 still ours n times, 0 released, -1 not ours. */
static struct rscript s_release_hash = { .src =
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return -1 end "
    "local n = redis.call('hincrby', KEYS[1], ARGV[2], -1) "
    "if n > 0 then "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return n "
    "end "
    "redis.call('del', KEYS[1]) "
    "redis.call('publish', KEYS[2], 'released') "
    "return 0" };

/* KEYS[1] lock, optional KEYS[2] channel, ARGV[1] token. 1 deleted, 0 not ours. */
static struct rscript s_release_str = { .src =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "  redis.call('del', KEYS[1]) "
    "  if KEYS[2] then redis.call('publish', KEYS[2], 'released') end "
    "  return 1 "
    "end "
    "return 0" };

/* KEYS[1] lock, ARGV[1] ttl, ARGV[2] owner. 1 extended, 0 not ours. */
static struct rscript s_renew_hash = { .src =
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  return redis.call('pexpire', KEYS[1], ARGV[1]) "
    "end "
    "return 0" };

static struct rscript s_renew_str = { .src =
    "if redis.call('get', KEYS[1]) == ARGV[2] then "
    "  return redis.call('pexpire', KEYS[1], ARGV[1]) "
    "end "
    "return 0" };

/* Run a script with keys then args (argc = nkeys + nargs <= 8). NULL means
 * the connection failed (ctx->err set); an error reply is returned as is. */
static redisReply *script_run(redisContext *ctx, struct rscript *s, int nkeys,
                              int argc, const char **argv)
{
    const char *av[12];
    char nk[8];
    redisReply *r;

    if (!atomic_load_explicit(&s->ready, memory_order_acquire)) {
        r = redisCommand(ctx, "SCRIPT LOAD %s", s->src);
        if (!r)
            return NULL;
        if (r->type != REDIS_REPLY_STRING || r->len != 40)
            return r;
        pthread_mutex_lock(&script_mu);
        if (!atomic_load_explicit(&s->ready, memory_order_relaxed)) {
            memcpy(s->sha, r->str, 40);
            s->sha[40] = '\0';
            atomic_store_explicit(&s->ready, 1, memory_order_release);
        }
        pthread_mutex_unlock(&script_mu);
        freeReplyObject(r);
    }
    snprintf(nk, sizeof nk, "%d", nkeys);
    av[0] = "EVALSHA";
    av[1] = s->sha;
    av[2] = nk;
    for (int i = 0; i < argc && i < 8; i++)
        av[3 + i] = argv[i];
    r = redisCommandArgv(ctx, 3 + argc, av, NULL);
    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        /* Server restarted or SCRIPT FLUSH: EVAL also re-caches it there. */
        freeReplyObject(r);
        av[0] = "EVAL";
        av[1] = s->src;
        r = redisCommandArgv(ctx, 3 + argc, av, NULL);
    }
    return r;
}

int rlock_raw_release(redisContext *ctx, const char *key, const char *chan,
                      const char *token)
{
    const char *av[3] = { key, chan, token };
    redisReply *r;
    int rc;

    if (chan)
        r = script_run(ctx, &s_release_str, 2, 3, av);
    else {
        av[1] = token;
        r = script_run(ctx, &s_release_str, 1, 2, av);
    }
    if (!r)
        return RLOCK_EUNAVAIL;
    rc = r->type == REDIS_REPLY_INTEGER ? (r->integer == 1) : RLOCK_ERR;
    freeReplyObject(r);
    return rc;
}

/* ---- client: config, connection pool, watchdog ------------------------- */

struct wd_entry {
    struct wd_entry *next;
    uint64_t id;
    int64_t due;       /* next renewal, monotonic ms */
    long ttl_ms;
    int hash;          /* reentrant (hash) lock, else string */
    int lost;          /* renewal found it not ours: no more renewals */
    char key[RLOCK_KEY_MAX + 1];
    char token[RLOCK_TOKEN_MAX];
};

struct rlock_client {
    int err;
    char errstr[128];
    char host[128];
    int port;
    int connect_timeout_ms, cmd_timeout_ms;
    char instance[64];
    struct rlock_stats own_stats;
    struct rlock_stats *stats;

    pthread_mutex_t pool_mu;
    redisContext *idle[POOL_IDLE_MAX];
    int nidle;

    pthread_mutex_t wd_mu;
    pthread_cond_t wd_cv;
    pthread_t wd_thread;
    int wd_started, wd_stop;
    uint64_t wd_next_id;
    struct wd_entry *wd_head;
};

static void pool_flush(struct rlock_client *c)
{
    redisContext *all[POOL_IDLE_MAX];
    int n;

    pthread_mutex_lock(&c->pool_mu);
    n = c->nidle;
    memcpy(all, c->idle, sizeof(all[0]) * (size_t)n);
    c->nidle = 0;
    pthread_mutex_unlock(&c->pool_mu);
    for (int i = 0; i < n; i++)
        redisFree(all[i]);
}

static redisContext *pool_get(struct rlock_client *c, char *errbuf, size_t errlen)
{
    redisContext *ctx = NULL;

    pthread_mutex_lock(&c->pool_mu);
    if (c->nidle > 0)
        ctx = c->idle[--c->nidle];
    pthread_mutex_unlock(&c->pool_mu);
    if (ctx)
        return ctx;
    return rlock_connect(c->host, c->port, c->connect_timeout_ms,
                         c->cmd_timeout_ms, errbuf, errlen);
}

/* A context that saw an error is freed, and so is every idle one: after a
 * Redis restart they are all dead, and the next call should reconnect. */
static void pool_put(struct rlock_client *c, redisContext *ctx)
{
    if (!ctx)
        return;
    if (ctx->err) {
        redisFree(ctx);
        pool_flush(c);
        return;
    }
    pthread_mutex_lock(&c->pool_mu);
    if (c->nidle < POOL_IDLE_MAX) {
        c->idle[c->nidle++] = ctx;
        ctx = NULL;
    }
    pthread_mutex_unlock(&c->pool_mu);
    if (ctx)
        redisFree(ctx);
}

static int wd_renew(redisContext *ctx, const struct wd_entry *e)
{
    char ttl[24];
    const char *av[3] = { e->key, ttl, e->token };
    redisReply *r;
    int rc;

    snprintf(ttl, sizeof ttl, "%ld", e->ttl_ms);
    r = script_run(ctx, e->hash ? &s_renew_hash : &s_renew_str, 1, 3, av);
    if (!r)
        return RLOCK_EUNAVAIL;
    rc = r->type == REDIS_REPLY_INTEGER ? (r->integer == 1) : RLOCK_ERR;
    freeReplyObject(r);
    return rc;
}

static struct wd_entry *wd_find(struct rlock_client *c, uint64_t id)
{
    for (struct wd_entry *e = c->wd_head; e; e = e->next)
        if (e->id == id)
            return e;
    return NULL;
}

static void ms_to_abstime(int64_t due_ms, struct timespec *ts)
{
    struct timespec now;
    int64_t delta;

    clock_gettime(CLOCK_MONOTONIC, &now);
    delta = due_ms - rlock_now_ms();
    if (delta < 0)
        delta = 0;
    ts->tv_sec = now.tv_sec + delta / 1000;
    ts->tv_nsec = now.tv_nsec + (delta % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

/* The single renewal thread: sleeps until the earliest due entry, renews it
 * over its own connection with the mutex released, then files the result
 * only if the entry is still registered (a release may have raced it). */
static void *wd_main(void *arg)
{
    struct rlock_client *c = arg;
    redisContext *ctx = NULL;
    struct wd_entry work;

    pthread_mutex_lock(&c->wd_mu);
    while (!c->wd_stop) {
        struct wd_entry *next = NULL;
        for (struct wd_entry *e = c->wd_head; e; e = e->next)
            if (!e->lost && (!next || e->due < next->due))
                next = e;
        if (!next) {
            pthread_cond_wait(&c->wd_cv, &c->wd_mu);
            continue;
        }
        int64_t now = rlock_now_ms();
        if (next->due > now) {
            struct timespec ts;
            ms_to_abstime(next->due, &ts);
            pthread_cond_timedwait(&c->wd_cv, &c->wd_mu, &ts);
            continue;
        }
        work = *next;
        next->due = now + (next->ttl_ms / 3 > 0 ? next->ttl_ms / 3 : 1);
        pthread_mutex_unlock(&c->wd_mu);

        int rc = RLOCK_EUNAVAIL;
        if (!ctx)
            ctx = rlock_connect(c->host, c->port, c->connect_timeout_ms,
                                c->cmd_timeout_ms, NULL, 0);
        if (ctx) {
            rc = wd_renew(ctx, &work);
            if (ctx->err) {
                redisFree(ctx);
                ctx = NULL;
            }
        }

        pthread_mutex_lock(&c->wd_mu);
        struct wd_entry *e = wd_find(c, work.id);
        if (!e)
            continue;
        if (rc == 1) {
            atomic_fetch_add(&c->stats->renewals, 1);
        } else if (rc == 0) {
            e->lost = 1;
            atomic_fetch_add(&c->stats->lost, 1);
        } else {
            /* Redis away: try again soon, well before the lease runs out. */
            long retry = e->ttl_ms / 10;
            e->due = rlock_now_ms() + (retry < 10 ? 10 : retry);
        }
    }
    pthread_mutex_unlock(&c->wd_mu);
    if (ctx)
        redisFree(ctx);
    return NULL;
}

/* Returns the registration id, 0 when the thread could not start. */
static uint64_t wd_register(struct rlock_client *c, const struct rlock *l)
{
    struct wd_entry *e = calloc(1, sizeof *e);
    uint64_t id = 0;

    if (!e)
        return 0;
    memcpy(e->key, l->key, sizeof e->key);
    memcpy(e->token, l->token, sizeof e->token);
    e->ttl_ms = l->opts.ttl_ms;
    e->hash = l->opts.kind == RLOCK_REENTRANT;
    e->due = rlock_now_ms() + (e->ttl_ms / 3 > 0 ? e->ttl_ms / 3 : 1);

    pthread_mutex_lock(&c->wd_mu);
    if (!c->wd_started && !c->wd_stop) {
        if (pthread_create(&c->wd_thread, NULL, wd_main, c) == 0)
            c->wd_started = 1;
    }
    if (c->wd_started) {
        e->id = id = ++c->wd_next_id;
        e->next = c->wd_head;
        c->wd_head = e;
        pthread_cond_signal(&c->wd_cv);
        e = NULL;
    }
    pthread_mutex_unlock(&c->wd_mu);
    free(e);
    return id;
}

/* Remove a registration; returns 1 when the watchdog had found it lost. */
static int wd_unregister(struct rlock_client *c, uint64_t id)
{
    struct wd_entry **pp, *e = NULL;
    int lost = 0;

    if (!id)
        return 0;
    pthread_mutex_lock(&c->wd_mu);
    for (pp = &c->wd_head; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            e = *pp;
            *pp = e->next;
            lost = e->lost;
            break;
        }
    }
    pthread_mutex_unlock(&c->wd_mu);
    free(e);
    return lost;
}

struct rlock_client *rlock_client_new(const struct rlock_config *cfg)
{
    struct rlock_client *c = calloc(1, sizeof *c);
    pthread_condattr_t ca;
    char host[64];
    redisContext *ctx;

    if (!c)
        return NULL;
    snprintf(c->host, sizeof c->host, "%s", cfg && cfg->host ? cfg->host : "127.0.0.1");
    c->port = cfg && cfg->port > 0 ? cfg->port : 6379;
    c->connect_timeout_ms = cfg && cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 500;
    c->cmd_timeout_ms = cfg && cfg->cmd_timeout_ms > 0 ? cfg->cmd_timeout_ms : 1000;
    if (cfg && cfg->instance && *cfg->instance) {
        snprintf(c->instance, sizeof c->instance, "%s", cfg->instance);
    } else {
        if (gethostname(host, sizeof host) != 0)
            snprintf(host, sizeof host, "host");
        host[sizeof host - 1] = '\0';
        snprintf(c->instance, sizeof c->instance, "%.40s-%d", host, (int)getpid());
    }
    c->stats = cfg && cfg->stats ? cfg->stats : &c->own_stats;
    pthread_mutex_init(&c->pool_mu, NULL);
    pthread_mutex_init(&c->wd_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->wd_cv, &ca);
    pthread_condattr_destroy(&ca);

    ctx = pool_get(c, c->errstr, sizeof c->errstr);
    if (!ctx)
        c->err = RLOCK_EUNAVAIL;
    pool_put(c, ctx);
    return c;
}

void rlock_client_free(struct rlock_client *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->wd_mu);
    c->wd_stop = 1;
    pthread_cond_signal(&c->wd_cv);
    pthread_mutex_unlock(&c->wd_mu);
    if (c->wd_started)
        pthread_join(c->wd_thread, NULL);
    while (c->wd_head) {
        struct wd_entry *e = c->wd_head;
        c->wd_head = e->next;
        free(e);
    }
    pool_flush(c);
    pthread_cond_destroy(&c->wd_cv);
    pthread_mutex_destroy(&c->wd_mu);
    pthread_mutex_destroy(&c->pool_mu);
    free(c);
}

int rlock_client_ping(struct rlock_client *c, char *errbuf, size_t errlen)
{
    char tmp[128];
    redisContext *ctx = pool_get(c, tmp, sizeof tmp);
    redisReply *r;
    int rc = RLOCK_EUNAVAIL;

    if (!ctx) {
        if (errbuf)
            snprintf(errbuf, errlen, "%s", tmp);
        return rc;
    }
    r = redisCommand(ctx, "PING");
    if (r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING))
        rc = RLOCK_OK;
    else if (errbuf)
        snprintf(errbuf, errlen, "redis %s:%d: %s", c->host, c->port,
                 r ? (r->type == REDIS_REPLY_ERROR ? r->str : "odd reply") : ctx->errstr);
    if (r)
        freeReplyObject(r);
    pool_put(c, ctx);
    return rc;
}

int rlock_client_err(const struct rlock_client *c, const char **errstr)
{
    if (errstr)
        *errstr = c->errstr;
    return c->err;
}

struct rlock_stats *rlock_client_stats(struct rlock_client *c)
{
    return c->stats;
}

const char *rlock_client_instance(const struct rlock_client *c)
{
    return c->instance;
}

void rlock_stats_read(const struct rlock_stats *s, struct rlock_stats_snap *o)
{
#define RD(f) o->f = atomic_load_explicit(&s->f, memory_order_relaxed)
    RD(acquired); RD(released); RD(timeouts); RD(waits); RD(wait_us_total);
    RD(notifications); RD(renewals); RD(lost); RD(foreign_release); RD(unavailable);
#undef RD
}

/* ---- options ---------------------------------------------------------- */

static const char *const acquire_names[] = { "set-nx-px", "setnx-then-expire" };
static const char *const release_names[] = { "token-lua", "plain-del", "get-then-del" };
static const char *const kind_names[] = { "reentrant", "simple" };

static int name_lookup(const char *const *names, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

int rlock_acquire_parse(const char *name, enum rlock_acquire *out)
{
    int i = name_lookup(acquire_names, 2, name);
    if (i < 0)
        return -1;
    *out = (enum rlock_acquire)i;
    return 0;
}

int rlock_release_parse(const char *name, enum rlock_release *out)
{
    int i = name_lookup(release_names, 3, name);
    if (i < 0)
        return -1;
    *out = (enum rlock_release)i;
    return 0;
}

int rlock_kind_parse(const char *name, enum rlock_kind *out)
{
    int i = name_lookup(kind_names, 2, name);
    if (i < 0)
        return -1;
    *out = (enum rlock_kind)i;
    return 0;
}

const char *rlock_acquire_name(enum rlock_acquire a)
{
    return (unsigned)a < 2 ? acquire_names[a] : "?";
}

const char *rlock_release_name(enum rlock_release r)
{
    return (unsigned)r < 3 ? release_names[r] : "?";
}

const char *rlock_kind_name(enum rlock_kind k)
{
    return (unsigned)k < 2 ? kind_names[k] : "?";
}

const char *rlock_strerror(int code)
{
    switch (code) {
    case RLOCK_OK:       return "ok";
    case RLOCK_ERR:      return "error";
    case RLOCK_EUNAVAIL: return "unavailable";
    case RLOCK_TIMEOUT:  return "timeout";
    case RLOCK_ELOST:    return "lost";
    case RLOCK_EINVAL:   return "invalid";
    default:             return "unknown";
    }
}

void rlock_opts_default(struct rlock_opts *o)
{
    o->kind = RLOCK_REENTRANT;
    o->ttl_ms = 30000;
    o->watchdog = 1;
    o->acquire = RLOCK_ACQUIRE_SET_NX_PX;
    o->release = RLOCK_RELEASE_TOKEN_LUA;
}

/* ---- locks ------------------------------------------------------------ */

static int set_err(struct rlock *l, int code, const char *fmt, ...)
{
    va_list ap;

    l->err = code;
    va_start(ap, fmt);
    vsnprintf(l->errstr, sizeof l->errstr, fmt, ap);
    va_end(ap);
    if (code == RLOCK_EUNAVAIL)
        atomic_fetch_add(&l->client->stats->unavailable, 1);
    return code;
}

static void clear_err(struct rlock *l)
{
    l->err = RLOCK_OK;
    l->errstr[0] = '\0';
}

/* Map a NULL or error reply to a status code; the reply is not freed. */
static int reply_fail(struct rlock *l, redisContext *ctx, redisReply *r, const char *what)
{
    if (!r)
        return set_err(l, RLOCK_EUNAVAIL, "%s: redis %s", what,
                       ctx->errstr[0] ? ctx->errstr : "connection failed");
    if (r->type == REDIS_REPLY_ERROR)
        return set_err(l, RLOCK_ERR, "%s: %.100s", what, r->str);
    return set_err(l, RLOCK_ERR, "%s: unexpected reply type %d", what, r->type);
}

struct rlock *rlock_new(struct rlock_client *c, const char *key,
                        const struct rlock_opts *o)
{
    struct rlock *l = calloc(1, sizeof *l);

    if (!l)
        return NULL;
    l->client = c;
    if (o)
        l->opts = *o;
    else
        rlock_opts_default(&l->opts);
    if (l->opts.acquire != RLOCK_ACQUIRE_SET_NX_PX ||
        l->opts.release != RLOCK_RELEASE_TOKEN_LUA)
        l->opts.kind = RLOCK_SIMPLE;
    rlock_token_make(l->token, sizeof l->token, c->instance);
    if (!key || !*key || strlen(key) > RLOCK_KEY_MAX) {
        l->err = RLOCK_EINVAL;
        snprintf(l->errstr, sizeof l->errstr, "key empty or longer than %d", RLOCK_KEY_MAX);
        return l;
    }
    if (l->opts.ttl_ms < 1 || l->opts.ttl_ms > TTL_MAX ||
        (unsigned)l->opts.kind > RLOCK_SIMPLE ||
        (unsigned)l->opts.acquire > RLOCK_ACQUIRE_SETNX_THEN_EXPIRE ||
        (unsigned)l->opts.release > RLOCK_RELEASE_GET_THEN_DEL) {
        l->err = RLOCK_EINVAL;
        snprintf(l->errstr, sizeof l->errstr, "bad lock options");
        return l;
    }
    snprintf(l->key, sizeof l->key, "%s", key);
    snprintf(l->chan, sizeof l->chan, "rlock:chan:{%s}", key);
    return l;
}

static int bad_handle(const struct rlock *l)
{
    return l->key[0] == '\0';
}

/* One attempt. 1 acquired, 0 busy (*pttl = holder's PTTL or -1), <0 error. */
static int try_once(struct rlock *l, redisContext *ctx, long *pttl)
{
    char ttl[24];
    redisReply *r;
    int rc;

    *pttl = -1;
    snprintf(ttl, sizeof ttl, "%ld", l->opts.ttl_ms);
    if (l->opts.kind == RLOCK_REENTRANT) {
        const char *av[3] = { l->key, ttl, l->token };
        r = script_run(ctx, &s_acquire_hash, 1, 3, av);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_INTEGER ||
            r->element[1]->type != REDIS_REPLY_INTEGER) {
            rc = reply_fail(l, ctx, r, "acquire");
            if (r)
                freeReplyObject(r);
            return rc;
        }
        rc = r->element[0]->integer == 1;
        if (!rc)
            *pttl = (long)r->element[1]->integer;
        freeReplyObject(r);
        return rc;
    }

    if (l->opts.acquire == RLOCK_ACQUIRE_SET_NX_PX) {
        const char *av[6] = { "SET", l->key, l->token, "NX", "PX", ttl };
        r = redisCommandArgv(ctx, 6, av, NULL);
        if (r && r->type == REDIS_REPLY_STATUS)
            rc = 1;
        else if (r && r->type == REDIS_REPLY_NIL)
            rc = 0;
        else
            rc = reply_fail(l, ctx, r, "SET NX PX");
    } else {
        const char *av[3] = { "SETNX", l->key, l->token };
        r = redisCommandArgv(ctx, 3, av, NULL);
        if (r && r->type == REDIS_REPLY_INTEGER) {
            rc = r->integer == 1;
            if (rc) {
                /* The seeds' mistake: a second command, not atomic. */
                const char *ev[3] = { "PEXPIRE", l->key, ttl };
                freeReplyObject(r);
                r = redisCommandArgv(ctx, 3, ev, NULL);
                if (!r || r->type != REDIS_REPLY_INTEGER)
                    rc = reply_fail(l, ctx, r, "PEXPIRE");
            }
        } else {
            rc = reply_fail(l, ctx, r, "SETNX");
        }
    }
    if (r)
        freeReplyObject(r);
    if (rc == 0) {
        const char *av[2] = { "PTTL", l->key };
        r = redisCommandArgv(ctx, 2, av, NULL);
        if (r && r->type == REDIS_REPLY_INTEGER)
            *pttl = (long)r->integer;
        else
            rc = reply_fail(l, ctx, r, "PTTL");
        if (r)
            freeReplyObject(r);
    }
    return rc;
}

/* Subscribe a pooled connection to the lock's channel. */
static redisContext *sub_open(struct rlock *l)
{
    char why[128];
    redisContext *ctx = pool_get(l->client, why, sizeof why);
    redisReply *r;
    const char *av[2] = { "SUBSCRIBE", l->chan };

    if (!ctx) {
        set_err(l, RLOCK_EUNAVAIL, "subscribe: %s", why);
        return NULL;
    }
    r = redisCommandArgv(ctx, 2, av, NULL);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3) {
        reply_fail(l, ctx, r, "SUBSCRIBE");
        if (r)
            freeReplyObject(r);
        redisFree(ctx);
        return NULL;
    }
    freeReplyObject(r);
    return ctx;
}

/* Unsubscribe and give the connection back (only if it is clean again). */
static void sub_close(struct rlock *l, redisContext *ctx)
{
    const char *av[1] = { "UNSUBSCRIBE" };
    int clean = 0;

    if (!ctx)
        return;
    if (!ctx->err && redisAppendCommandArgv(ctx, 1, av, NULL) == REDIS_OK) {
        /* Messages may still be queued ahead of the confirmation. */
        for (int i = 0; i < 256; i++) {
            redisReply *r = NULL;
            if (redisGetReply(ctx, (void **)&r) != REDIS_OK || !r)
                break;
            int done = r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                       r->element[0]->type == REDIS_REPLY_STRING &&
                       strcmp(r->element[0]->str, "unsubscribe") == 0 &&
                       r->element[2]->type == REDIS_REPLY_INTEGER &&
                       r->element[2]->integer == 0;
            freeReplyObject(r);
            if (done) {
                clean = 1;
                break;
            }
        }
    }
    if (clean)
        pool_put(l->client, ctx);
    else
        redisFree(ctx);
}

/* Wait up to ms for a message. 1 woken, 0 slice over, <0 connection lost.
 * poll() rather than a socket timeout: in hiredis 0.14 a read timeout
 * leaves the context unusable. */
static int sub_wait(redisContext *ctx, long ms)
{
    void *reply = NULL;
    struct pollfd pfd = { .fd = ctx->fd, .events = POLLIN };
    int n;

    if (redisReaderGetReply(ctx->reader, &reply) != REDIS_OK)
        return RLOCK_EUNAVAIL;
    if (reply) {
        freeReplyObject(reply);
        return 1;
    }
    n = poll(&pfd, 1, (int)ms);
    if (n == 0 || (n < 0 && errno == EINTR))
        return 0;
    if (n < 0 || redisBufferRead(ctx) != REDIS_OK)
        return RLOCK_EUNAVAIL;
    if (redisReaderGetReply(ctx->reader, &reply) != REDIS_OK)
        return RLOCK_EUNAVAIL;
    if (reply)
        freeReplyObject(reply);
    return 1;   /* even a partial message means "something happened": retry */
}

static long wait_slice(long pttl, long remaining)
{
    long base = pttl > 0 ? pttl : WAIT_SLICE_DEF;
    long slice;

    if (base > WAIT_SLICE_MAX)
        base = WAIT_SLICE_MAX;
    /* 0.75x .. 1.25x so waiters woken together spread out again. */
    slice = base * 3 / 4 + (long)(rand_u64() % (uint64_t)(base / 2 + 1));
    if (slice < 1)
        slice = 1;
    return slice < remaining ? slice : remaining;
}

int rlock_acquire(struct rlock *l, long wait_ms)
{
    struct rlock_client *c;
    struct rlock_stats *st;
    redisContext *ctx, *sub = NULL;
    char why[128];
    int64_t t0 = now_us(), deadline;
    long pttl;
    int rc, waited = 0;

    if (!l)
        return RLOCK_EINVAL;
    c = l->client;
    st = c->stats;
    if (bad_handle(l))
        return l->err = RLOCK_EINVAL;
    if (l->opts.kind == RLOCK_SIMPLE && l->depth > 0)
        return set_err(l, RLOCK_EINVAL, "simple lock is not reentrant");
    clear_err(l);
    l->last_wait_ms = 0;

    ctx = pool_get(c, why, sizeof why);
    if (!ctx)
        return set_err(l, RLOCK_EUNAVAIL, "%s", why);
    rc = try_once(l, ctx, &pttl);
    if (rc == 0 && wait_ms > 0) {
        waited = 1;
        atomic_fetch_add(&st->waits, 1);
        deadline = t0 + (int64_t)wait_ms * 1000;
        sub = sub_open(l);
        if (!sub)
            rc = l->err;
        while (sub) {
            /* Subscribed first, then retried: no release can slip between. */
            rc = try_once(l, ctx, &pttl);
            if (rc != 0)
                break;
            long remaining = (long)((deadline - now_us()) / 1000);
            if (remaining <= 0)
                break;
            int w = sub_wait(sub, wait_slice(pttl, remaining));
            if (w < 0) {
                rc = set_err(l, RLOCK_EUNAVAIL, "subscription: %s",
                             sub->errstr[0] ? sub->errstr : "connection lost");
                redisFree(sub);
                sub = NULL;
                break;
            }
            if (w == 1)
                atomic_fetch_add(&st->notifications, 1);
        }
        sub_close(l, sub);
    }
    pool_put(c, ctx);

    if (waited) {
        int64_t us = now_us() - t0;
        atomic_fetch_add(&st->wait_us_total, (unsigned long long)us);
        l->last_wait_ms = (long)(us / 1000);
    }
    if (rc == 1) {
        if (++l->depth == 1 && l->opts.watchdog) {
            l->wd_lost_counted = 0;
            l->wd_id = wd_register(c, l);
        }
        atomic_fetch_add(&st->acquired, 1);
        return RLOCK_OK;
    }
    if (rc == 0) {
        atomic_fetch_add(&st->timeouts, 1);
        return set_err(l, RLOCK_TIMEOUT, "lock %s still held after %ld ms", l->key,
                       wait_ms > 0 ? wait_ms : 0);
    }
    return rc;
}

/* The handle is no longer held; returns 1 when the watchdog already counted
 * the loss, so release does not count it twice. */
static int drop_hold(struct rlock *l)
{
    int counted = l->wd_lost_counted;

    if (l->wd_id) {
        counted |= wd_unregister(l->client, l->wd_id);
        l->wd_id = 0;
    }
    l->depth = 0;
    l->wd_lost_counted = 0;
    return counted;
}

static int release_lost(struct rlock *l, int counted)
{
    if (!counted)
        atomic_fetch_add(&l->client->stats->lost, 1);
    return set_err(l, RLOCK_ELOST, "lock %s was no longer ours", l->key);
}

static int release_hash(struct rlock *l, redisContext *ctx)
{
    char ttl[24];
    const char *av[4] = { l->key, l->chan, ttl, l->token };
    int counted = 0;
    redisReply *r;
    long long n;

    /* Stop renewals before the final delete, so a renewal that lands after
     * it is not mistaken for a loss. */
    if (l->depth == 1)
        counted = drop_hold(l);
    snprintf(ttl, sizeof ttl, "%ld", l->opts.ttl_ms);
    r = script_run(ctx, &s_release_hash, 2, 4, av);
    if (!r || r->type != REDIS_REPLY_INTEGER) {
        int rc = reply_fail(l, ctx, r, "release");
        if (r)
            freeReplyObject(r);
        drop_hold(l);
        return rc;
    }
    n = r->integer;
    freeReplyObject(r);
    if (n < 0) {
        counted |= drop_hold(l);
        return release_lost(l, counted);
    }
    atomic_fetch_add(&l->client->stats->released, 1);
    if (n == 0 || l->depth <= 1)
        drop_hold(l);
    else
        l->depth--;
    return RLOCK_OK;
}

/* GET the key: 1 ours, 0 absent, 2 someone else's, <0 error. */
static int get_owner(struct rlock *l, redisContext *ctx)
{
    const char *av[2] = { "GET", l->key };
    redisReply *r = redisCommandArgv(ctx, 2, av, NULL);
    int rc;

    if (r && r->type == REDIS_REPLY_NIL)
        rc = 0;
    else if (r && r->type == REDIS_REPLY_STRING)
        rc = strcmp(r->str, l->token) == 0 ? 1 : 2;
    else
        rc = reply_fail(l, ctx, r, "GET");
    if (r)
        freeReplyObject(r);
    return rc;
}

static int del_and_publish(struct rlock *l, redisContext *ctx)
{
    const char *dv[2] = { "DEL", l->key };
    const char *pv[3] = { "PUBLISH", l->chan, "released" };
    redisReply *r = redisCommandArgv(ctx, 2, dv, NULL);

    if (!r || r->type != REDIS_REPLY_INTEGER) {
        int rc = reply_fail(l, ctx, r, "DEL");
        if (r)
            freeReplyObject(r);
        return rc;
    }
    freeReplyObject(r);
    r = redisCommandArgv(ctx, 3, pv, NULL);
    if (!r || r->type != REDIS_REPLY_INTEGER) {
        int rc = reply_fail(l, ctx, r, "PUBLISH");
        if (r)
            freeReplyObject(r);
        return rc;
    }
    freeReplyObject(r);
    return RLOCK_OK;
}

static int release_simple(struct rlock *l, redisContext *ctx)
{
    int counted = drop_hold(l);
    int rc, owner;

    switch (l->opts.release) {
    case RLOCK_RELEASE_TOKEN_LUA:
        rc = rlock_raw_release(ctx, l->key, l->chan, l->token);
        if (rc == RLOCK_EUNAVAIL)
            return reply_fail(l, ctx, NULL, "release");
        if (rc < 0)
            return set_err(l, RLOCK_ERR, "release: script failed");
        if (rc == 0)
            return release_lost(l, counted);
        break;
    case RLOCK_RELEASE_PLAIN_DEL:
        /* The GET only feeds the counters; the DEL happens regardless. */
        owner = get_owner(l, ctx);
        if (owner < 0)
            return owner;
        rc = del_and_publish(l, ctx);
        if (rc < 0)
            return rc;
        if (owner == 2)
            atomic_fetch_add(&l->client->stats->foreign_release, 1);
        if (owner != 1)
            return release_lost(l, counted);
        break;
    case RLOCK_RELEASE_GET_THEN_DEL:
        owner = get_owner(l, ctx);
        if (owner < 0)
            return owner;
        if (owner != 1)
            return release_lost(l, counted);
        /* Window: the lock can expire and change hands right here. */
        rc = del_and_publish(l, ctx);
        if (rc < 0)
            return rc;
        break;
    }
    atomic_fetch_add(&l->client->stats->released, 1);
    return RLOCK_OK;
}

int rlock_release(struct rlock *l)
{
    char why[128];
    redisContext *ctx;
    int rc;

    if (!l)
        return RLOCK_EINVAL;
    if (bad_handle(l))
        return l->err = RLOCK_EINVAL;
    if (l->depth <= 0)
        return set_err(l, RLOCK_EINVAL, "lock %s is not held", l->key);
    clear_err(l);
    ctx = pool_get(l->client, why, sizeof why);
    if (!ctx) {
        drop_hold(l);
        return set_err(l, RLOCK_EUNAVAIL, "%s", why);
    }
    if (l->opts.kind == RLOCK_REENTRANT)
        rc = release_hash(l, ctx);
    else
        rc = release_simple(l, ctx);
    pool_put(l->client, ctx);
    return rc;
}

int rlock_is_lost(struct rlock *l)
{
    struct wd_entry *e;
    int lost = 0;

    if (!l || !l->wd_id)
        return 0;
    pthread_mutex_lock(&l->client->wd_mu);
    e = wd_find(l->client, l->wd_id);
    if (e)
        lost = e->lost;
    pthread_mutex_unlock(&l->client->wd_mu);
    return lost;
}

void rlock_free(struct rlock *l)
{
    if (!l)
        return;
    while (l->depth > 0 && !bad_handle(l))
        rlock_release(l);
    drop_hold(l);
    free(l);
}
