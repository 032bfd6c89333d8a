/* One subscription per lock channel per process, and a release wakes one
 * waiter (Redisson's LockPubSub: a semaphore permit per unlock message).
 * A subscription per waiter woke every waiter of the process on every
 * release, and all of them retried at once: the thundering herd. One
 * listener thread per client owns the subscribing connection; waiters
 * only touch the channel's entry under the mutex. Within a process the
 * waiter that has waited longest is woken first.
 *
 * A holder whose process has a waiter blocked on the same lock hands the
 * lock straight to it (rlock_sub_handoff): no release script, no message,
 * no retry; the hand-over is one signal under this mutex. The key in
 * Redis is untouched, so the lock stays excluded across processes, its
 * lease and watchdog go on, and a process that dies mid-chain leaves a
 * lease that expires as before. A run of hand-overs is bounded so the
 * other processes get the lock too. */
#include "rlock_private.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SUB_MAX_CHANNELS 1024   /* beyond: a waiter subscribes on its own */

/* A waiter blocked in rlock_sub_wait: a message wakes the one that has
 * waited longest (its first wait), so a waiter that keeps losing the race
 * for the lock is not passed over by newer ones of its own process. */
struct sub_waiter {
    int64_t since_us;
    int woken;
    struct rlock *self;   /* its handle, for a hand-over (NULL: none) */
    pthread_cond_t cv;
    struct sub_waiter *next;
};

struct rlock_sub_entry {
    char chan[sizeof(((struct rlock *)0)->chan)];
    int refs;          /* waiters using it */
    int permits;       /* release messages no waiter took yet (<= refs) */
    struct sub_waiter *blocked;   /* oldest first */
    int subscribed;    /* Redis confirmed the subscription */
    int want;          /* 1: be subscribed, 0: be unsubscribed */
    int sent;          /* a (un)subscribe is on its way */
    int run;           /* hand-overs in a row within this process */
    int64_t yield_until_us;   /* a run ended: our woken waiters wait until then */
    pthread_cond_t cv;
    struct rlock_sub_entry *next;
};

struct rlock_sub {
    struct rlock_client *c;
    pthread_mutex_t mu;
    struct rlock_sub_entry *entries;
    int nentries;
    int wake[2];       /* pipe: a waiter needs a (un)subscribe sent */
    int stop;
    pthread_t thread;
    redisContext *ctx; /* the listener thread's only */
};

static void sub_wake(struct rlock_sub *s)
{
    char b = 1;
    ssize_t n = write(s->wake[1], &b, 1);
    (void)n;   /* a full pipe already holds a wake-up */
}

/* Under mu: every waiter retries (the connection dropped: messages may be
 * lost) and every entry must be subscribed again. */
static void sub_lost_all(struct rlock_sub *s)
{
    for (struct rlock_sub_entry *e = s->entries; e; e = e->next) {
        e->subscribed = 0;
        e->sent = 0;
        e->permits = e->refs;
        pthread_cond_broadcast(&e->cv);
        for (struct sub_waiter *w = e->blocked; w; w = w->next) {
            w->woken = 1;
            pthread_cond_signal(&w->cv);
        }
        e->blocked = NULL;
    }
}

static struct rlock_sub_entry *sub_find(struct rlock_sub *s, const char *chan)
{
    for (struct rlock_sub_entry *e = s->entries; e; e = e->next)
        if (strcmp(e->chan, chan) == 0)
            return e;
    return NULL;
}

/* Under mu: queue what the entries want, drop entries nobody uses. */
static void sub_sync(struct rlock_sub *s)
{
    struct rlock_sub_entry **pp = &s->entries;
    while (*pp) {
        struct rlock_sub_entry *e = *pp;
        if (!e->want && !e->refs && !e->subscribed && !e->sent) {
            *pp = e->next;
            pthread_cond_destroy(&e->cv);
            free(e);
            s->nentries--;
            continue;
        }
        if (s->ctx && !e->sent && e->want != e->subscribed) {
            const char *av[2] = {e->want ? "SUBSCRIBE" : "UNSUBSCRIBE", e->chan};
            if (redisAppendCommandArgv(s->ctx, 2, av, NULL) == REDIS_OK)
                e->sent = 1;
        }
        pp = &e->next;
    }
}

static void sub_on_reply(struct rlock_sub *s, redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    struct rlock_sub_entry *e = sub_find(s, r->element[1]->str);
    if (!e)
        return;
    if (strcmp(kind, "message") == 0) {
        struct sub_waiter *w = e->blocked;
        if (w) {   /* one waiter, the oldest, not the herd */
            e->blocked = w->next;
            w->woken = 1;
            pthread_cond_signal(&w->cv);
        } else if (e->permits < e->refs) {
            e->permits++;
        }
    } else if (strcmp(kind, "subscribe") == 0) {
        e->subscribed = 1;
        e->sent = 0;
        pthread_cond_broadcast(&e->cv);   /* waiters waiting to be ready */
    } else if (strcmp(kind, "unsubscribe") == 0) {
        e->subscribed = 0;
        e->sent = 0;
    }
}

static void sub_drop_conn(struct rlock_sub *s)
{
    redisFree(s->ctx);
    s->ctx = NULL;
    pthread_mutex_lock(&s->mu);
    sub_lost_all(s);
    pthread_mutex_unlock(&s->mu);
}

static void *sub_main(void *arg)
{
    struct rlock_sub *s = arg;
    struct rlock_client *c = s->c;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            break;
        if (!s->ctx) {
            /* The pool's endpoint: with Sentinels, the current master. */
            s->ctx = rconn_connect(rconn_pool_endpoint(c->pool), c->connect_timeout_ms,
                                   c->cmd_timeout_ms, NULL, 0);
            if (!s->ctx) {
                struct pollfd w = {.fd = s->wake[0], .events = POLLIN};
                poll(&w, 1, 100);   /* Redis down: try again, bounded */
                continue;
            }
            /* Entries start (or were reset by sub_drop_conn) unsubscribed:
             * sub_sync subscribes them on this connection. */
        }
        pthread_mutex_lock(&s->mu);
        sub_sync(s);
        pthread_mutex_unlock(&s->mu);
        int done = 0;
        while (!done)
            if (redisBufferWrite(s->ctx, &done) != REDIS_OK)
                break;
        if (s->ctx->err) {
            sub_drop_conn(s);
            continue;
        }
        struct pollfd pfd[2] = {{.fd = s->ctx->fd, .events = POLLIN},
                                {.fd = s->wake[0], .events = POLLIN}};
        int n = poll(pfd, 2, 100);
        if (n < 0 && errno != EINTR) {
            sub_drop_conn(s);
            continue;
        }
        if (n > 0 && pfd[1].revents) {
            char buf[64];
            ssize_t k = read(s->wake[0], buf, sizeof buf);
            (void)k;
        }
        if (n > 0 && pfd[0].revents) {
            if (redisBufferRead(s->ctx) != REDIS_OK) {
                sub_drop_conn(s);
                continue;
            }
            void *reply = NULL;
            pthread_mutex_lock(&s->mu);
            while (redisReaderGetReply(s->ctx->reader, &reply) == REDIS_OK && reply) {
                sub_on_reply(s, reply);
                freeReplyObject(reply);
                reply = NULL;
            }
            pthread_mutex_unlock(&s->mu);
        }
    }
    redisFree(s->ctx);
    s->ctx = NULL;
    return NULL;
}

struct rlock_sub *rlock_sub_new(struct rlock_client *c)
{
    struct rlock_sub *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->c = c;
    pthread_mutex_init(&s->mu, NULL);
    if (pipe(s->wake) != 0)
        goto err;
    for (int i = 0; i < 2; i++) {
        int fl = fcntl(s->wake[i], F_GETFL);
        fcntl(s->wake[i], F_SETFL, fl | O_NONBLOCK);
    }
    if (pthread_create(&s->thread, NULL, sub_main, s) != 0) {
        close(s->wake[0]);
        close(s->wake[1]);
        goto err;
    }
    return s;
err:
    pthread_mutex_destroy(&s->mu);
    free(s);
    return NULL;
}

void rlock_sub_free(struct rlock_sub *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_mutex_unlock(&s->mu);
    sub_wake(s);
    pthread_join(s->thread, NULL);
    while (s->entries) {
        struct rlock_sub_entry *e = s->entries;
        s->entries = e->next;
        pthread_cond_destroy(&e->cv);
        free(e);
    }
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

struct rlock_sub *rlock_sub_of(struct rlock_client *c)
{
    pthread_mutex_lock(&c->sub_mu);
    struct rlock_sub *s = c->sub;
    pthread_mutex_unlock(&c->sub_mu);
    return s;
}

int rlock_sub_queued(struct rlock_sub *s, const char *chan)
{
    pthread_mutex_lock(&s->mu);
    struct rlock_sub_entry *e = sub_find(s, chan);
    int queued = e && e->refs > 0 && e->subscribed && e->want;
    pthread_mutex_unlock(&s->mu);
    return queued;
}

struct rlock_sub_entry *rlock_sub_join(struct rlock_sub *s, const char *chan, int *queued)
{
    pthread_mutex_lock(&s->mu);
    struct rlock_sub_entry *e = sub_find(s, chan);
    if (queued)
        *queued = e && e->refs > 0 && e->subscribed && e->want;
    if (!e && s->nentries < SUB_MAX_CHANNELS && strlen(chan) < sizeof e->chan) {
        e = calloc(1, sizeof *e);
        if (e) {
            snprintf(e->chan, sizeof e->chan, "%s", chan);
            pthread_cond_init(&e->cv, NULL);
            e->next = s->entries;
            s->entries = e;
            s->nentries++;
        }
    }
    if (e) {
        e->refs++;
        e->want = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (e)
        sub_wake(s);
    return e;
}

/* Wait on cv (with s->mu) until until_us (util_now_us clock); 0 when it
 * has passed. */
static int cv_wait_until(struct rlock_sub *s, pthread_cond_t *cv, int64_t until_us)
{
    int64_t left = until_us - util_now_us();
    if (left <= 0)
        return 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += left / 1000000;
    ts.tv_nsec += (long)(left % 1000000) * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cv, &s->mu, &ts);
    return 1;
}

int rlock_sub_ready(struct rlock_sub *s, struct rlock_sub_entry *e, long ms)
{
    int64_t until = util_now_us() + (int64_t)ms * 1000;
    pthread_mutex_lock(&s->mu);
    while (!e->subscribed && cv_wait_until(s, &e->cv, until))
        ;
    int ok = e->subscribed;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

int rlock_sub_wait(struct rlock_sub *s, struct rlock_sub_entry *e, long ms, int64_t since_us,
                   struct rlock *self)
{
    int64_t until = util_now_us() + (int64_t)ms * 1000;
    pthread_mutex_lock(&s->mu);
    if (e->permits > 0) {   /* a message came while we were trying */
        e->permits--;
        pthread_mutex_unlock(&s->mu);
        return 1;
    }
    struct sub_waiter w = {.since_us = since_us, .self = self};
    pthread_cond_init(&w.cv, NULL);
    struct sub_waiter **pp = &e->blocked;
    while (*pp && (*pp)->since_us <= since_us)
        pp = &(*pp)->next;
    w.next = *pp;
    *pp = &w;
    while (!w.woken && cv_wait_until(s, &w.cv, until))
        ;
    if (!w.woken)   /* timed out: leave the line */
        for (pp = &e->blocked; *pp; pp = &(*pp)->next)
            if (*pp == &w) {
                *pp = w.next;
                break;
            }
    /* Read under mu: a hand-over wrote self->handed before it woke us. */
    int got = w.woken ? (self && self->handed ? 2 : 1) : 0;
    pthread_mutex_unlock(&s->mu);
    pthread_cond_destroy(&w.cv);
    return got;
}

/* Whether a waiter's handle can take over from's hold as it is: the same
 * lease and renewal, and nothing its own acquire would have added (a
 * fencing token, a fair queue, replica acknowledgements). */
static int handoff_fits(const struct rlock *from, const struct rlock *to)
{
    return to && to->depth == 0 && !to->handed && to->opts.kind == RLOCK_REENTRANT &&
           to->opts.watchdog && !to->opts.fencing && !to->opts.fair &&
           to->opts.replicas_ack == 0 && to->opts.ttl_ms == from->opts.ttl_ms &&
           strcmp(to->key, from->key) == 0;
}

int rlock_sub_handoff(struct rlock_sub *s, struct rlock *from)
{
    int done = 0;
    pthread_mutex_lock(&s->mu);
    struct rlock_sub_entry *e = sub_find(s, from->chan);
    struct sub_waiter *w = e ? e->blocked : NULL;
    if (e && w && e->run < RLOCK_HANDOFF_RUN && handoff_fits(from, w->self)) {
        struct rlock *to = w->self;
        /* The waiter becomes the owner Redis already knows: same token,
         * same watchdog registration, the lease's first grant time. */
        memcpy(to->token, from->token, sizeof to->token);
        to->wd_id = from->wd_id;
        to->wd_lost_counted = 0;
        to->granted_ms = from->granted_ms;
        to->fence = 0;
        to->handed = 1;
        from->wd_id = 0;
        from->depth = 0;
        e->blocked = w->next;
        w->woken = 1;
        pthread_cond_signal(&w->cv);
        e->run++;
        done = 1;
    } else if (e) {
        /* This release goes through Redis. When it ends a full run with
         * waiters of ours still queued, they give the other processes'
         * waiters (woken by the same message) a head start: otherwise the
         * race for the released key is a coin toss that our process may
         * win run after run, starving the others (p99/p50 ~10 at c32). */
        if (w && e->run >= RLOCK_HANDOFF_RUN)
            e->yield_until_us = util_now_us() + RLOCK_YIELD_US;
        e->run = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return done;
}

long rlock_sub_yield_us(struct rlock_sub *s, struct rlock_sub_entry *e)
{
    pthread_mutex_lock(&s->mu);
    int64_t left = e->yield_until_us - util_now_us();
    pthread_mutex_unlock(&s->mu);
    return left > 0 ? (long)left : 0;
}

void rlock_sub_leave(struct rlock_sub *s, struct rlock_sub_entry *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&s->mu);
    if (--e->refs == 0) {
        e->want = 0;
        e->permits = 0;
    } else if (e->permits > e->refs) {
        e->permits = e->refs;
    }
    pthread_mutex_unlock(&s->mu);
    sub_wake(s);
}
