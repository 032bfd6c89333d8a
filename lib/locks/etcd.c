/* The etcd v3 JSON-gateway client (see etcd.h). */
#include "etcd.h"

#include "renewer.h"

#include "base/util.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_MAX 64
#define REPLY_MAX (256 * 1024)
#define URL_MAX 128

struct etcd_client {
    char urls[ETCD_ENDPOINTS_MAX][URL_MAX];
    int nurls;
    atomic_int good;           /* endpoint tried first: the last that answered */
    long op_timeout_ms;
    struct etcd_stats own_stats, *stats;
    struct renewer *wd;
    pthread_mutex_t mu;        /* guards pool */
    CURL *pool[POOL_MAX];
    int npool;
};

/* ---- pure helpers ------------------------------------------------------ */

static const char b64chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

long etcd_b64_encode(const void *in, size_t n, char *out, size_t outlen)
{
    const unsigned char *p = in;
    size_t need = (n + 2) / 3 * 4 + 1, o = 0;
    if (outlen < need)
        return -1;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        out[o++] = b64chars[(v >> 18) & 63];
        out[o++] = b64chars[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64chars[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? b64chars[v & 63] : '=';
    }
    out[o] = '\0';
    return (long)o;
}

static int b64val(char ch)
{
    const char *p = ch ? strchr(b64chars, ch) : NULL;
    return p ? (int)(p - b64chars) : -1;
}

long etcd_b64_decode(const char *in, void *out, size_t outlen)
{
    unsigned char *o = out;
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (const char *s = in; *s && *s != '='; s++) {
        int v = b64val(*s);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n + 1 >= outlen)
                return -1;
            o[n++] = (unsigned char)((acc >> bits) & 0xff);
        }
    }
    if (outlen == 0)
        return -1;
    o[n] = '\0';
    return (long)n;
}

long etcd_ttl_seconds(long ttl_ms)
{
    return ttl_ms <= 0 ? 0 : (ttl_ms + 999) / 1000;
}

long etcd_drift_ms(long ttl_ms)
{
    return ttl_ms / 100 + 2;
}

/* ---- HTTP -------------------------------------------------------------- */

struct reply {
    char *buf;
    size_t len, cap;
    int too_big;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct reply *r = ud;
    size_t n = size * nmemb;
    if (r->len + n + 1 > REPLY_MAX) {
        r->too_big = 1;
        return 0;
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 1024;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *b = realloc(r->buf, cap);
        if (!b)
            return 0;
        r->buf = b;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, ptr, n);
    r->len += n;
    r->buf[r->len] = '\0';
    return n;
}

static CURL *handle_get(struct etcd_client *c)
{
    CURL *h = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->npool > 0)
        h = c->pool[--c->npool];
    pthread_mutex_unlock(&c->mu);
    return h ? h : curl_easy_init();
}

/* Back to the pool; a handle whose transfer failed is closed instead (its
 * connection may be half-dead). */
static void handle_put(struct etcd_client *c, CURL *h, int healthy)
{
    if (!h)
        return;
    if (healthy) {
        pthread_mutex_lock(&c->mu);
        if (c->npool < POOL_MAX) {
            c->pool[c->npool++] = h;
            h = NULL;
        }
        pthread_mutex_unlock(&c->mu);
    }
    if (h)
        curl_easy_cleanup(h);
}

/* Map a gateway error answer (HTTP status and gRPC code) to ETCD_*. */
static int error_kind(long status, json_t *j, char *err, size_t errlen)
{
    const char *msg = j ? json_string_value(json_object_get(j, "error")) : NULL;
    long code = j ? (long)json_integer_value(json_object_get(j, "code")) : -1;
    snprintf(err, errlen, "etcd: HTTP %ld: %.100s", status, msg ? msg : "(no error text)");
    if (code == 5 || status == 404)
        return ETCD_ENOENT;
    /* Unavailable, deadline exceeded, no leader, canceled: etcd is away. */
    if (code == 14 || code == 4 || code == 1 || status >= 500 || status == 408)
        return ETCD_EUNAVAIL;
    return ETCD_ERR;
}

/* A lock call waits on purpose, and a hung etcd looks just like a busy
 * lock: no answer. So while it waits, the waiter's lease is kept alive
 * every probe_ms as a probe; a keep-alive that gets no answer (or finds
 * the lease gone) ends the wait: etcd is unreachable, not the lock busy. */
struct lock_probe {
    struct etcd_client *c;
    struct etcd_lease *lease;    /* its waited_ms is set by each answered probe */
    long probe_ms;               /* between probes */
    long bound_ms;               /* one probe's bound: the op timeout */
    int64_t next_ms, until_ms;   /* next probe; end of the wait */
    int failed;                  /* 1: a probe got no answer; 2: lease gone */
};

static int probe_on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                             curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    struct lock_probe *p = ud;
    int64_t now = util_now_ms();
    if (now < p->next_ms || now >= p->until_ms)
        return 0;
    long bound = p->bound_ms;
    if (bound > p->until_ms - now)
        bound = (long)(p->until_ms - now);
    /* Another handle from the pool: allowed inside this callback, and the
     * lock answer, if it comes meanwhile, waits in the socket. */
    int64_t sent = util_now_ms();
    long ttl = etcd_lease_keepalive_once(p->c, p->lease->id, bound);
    if (ttl > 0) {
        /* The server renewed the lease when this keep-alive arrived: after
         * `sent`. The lock may come without anyone else renewing it. */
        p->lease->waited_ms = sent;
        p->next_ms = util_now_ms() + p->probe_ms;
        return 0;
    }
    /* The wait's end came during the probe: that is the busy lock's
     * timeout, not a verdict on etcd. */
    if (ttl == ETCD_EUNAVAIL && util_now_ms() >= p->until_ms)
        return 0;
    p->failed = ttl == 0 ? 2 : 1;
    return 1;   /* abort the lock call */
}

/* One request (body NULL: GET) to path within timeout_ms, on each endpoint
 * in turn until one answers. ETCD_OK with *out the parsed JSON answer
 * (caller frees), or ETCD_* with err. With probe (a lock call: it waits on
 * purpose) a timeout is ETCD_TIMEOUT, and a failed probe ETCD_EUNAVAIL
 * (etcd hung) or ETCD_ENOENT (the lease is gone); without, a timeout is
 * ETCD_EUNAVAIL. */
static int call(struct etcd_client *c, const char *path, const char *body, long timeout_ms,
                struct lock_probe *probe, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (timeout_ms < 1)
        timeout_ms = 1;
    int64_t until = util_now_ms() + timeout_ms;
    int first = atomic_load(&c->good), rc = ETCD_EUNAVAIL;
    snprintf(err, errlen, "etcd: no endpoint");
    for (int k = 0; k < c->nurls; k++) {
        int i = (first + k) % c->nurls;
        long left = (long)(until - util_now_ms());
        if (left < 1)
            break;
        char url[URL_MAX + 64];
        snprintf(url, sizeof(url), "%s%s", c->urls[i], path);
        CURL *h = handle_get(c);
        if (!h) {
            snprintf(err, errlen, "etcd: out of memory");
            return ETCD_ERR;
        }
        struct reply r = {0};
        struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
        curl_easy_reset(h);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, left);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, left < c->op_timeout_ms ? left
                                                                             : c->op_timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
        if (body)
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        if (probe) {
            probe->failed = 0;
            probe->until_ms = util_now_ms() + left;
            probe->next_ms = util_now_ms() + probe->probe_ms;
            curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
            curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, probe_on_progress);
            curl_easy_setopt(h, CURLOPT_XFERINFODATA, probe);
        }
        atomic_fetch_add(&c->stats->calls, 1);
        CURLcode cc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(hdr);
        handle_put(c, h, cc == CURLE_OK);
        if (cc != CURLE_OK) {
            free(r.buf);
            if (cc == CURLE_OPERATION_TIMEDOUT && probe) {
                snprintf(err, errlen, "etcd: lock wait of %ld ms ran out", timeout_ms);
                return ETCD_TIMEOUT;
            }
            if (probe && probe->failed == 2) {
                snprintf(err, errlen, "etcd: the waiter's lease is gone");
                return ETCD_ENOENT;
            }
            atomic_fetch_add(&c->stats->call_failures, 1);
            if (probe && probe->failed)
                snprintf(err, errlen, "etcd %s: no answer to a keep-alive within %ld ms while "
                         "waiting for the lock", c->urls[i], probe->bound_ms);
            else
                snprintf(err, errlen, "etcd %s: %s", c->urls[i], curl_easy_strerror(cc));
            rc = ETCD_EUNAVAIL;
            /* A timed-out endpoint used up the time; a refused one did not. */
            continue;
        }
        json_t *j = r.buf ? json_loads(r.buf, 0, NULL) : NULL;
        free(r.buf);
        if (status == 200 && j) {
            atomic_store(&c->good, i);
            *out = j;
            return ETCD_OK;
        }
        rc = status == 200 ? ETCD_ERR : error_kind(status, j, err, errlen);
        if (status == 200)
            snprintf(err, errlen, "etcd: unreadable answer to %s", path);
        json_decref(j);
        if (rc != ETCD_EUNAVAIL)
            return rc;
        atomic_fetch_add(&c->stats->call_failures, 1);
    }
    return rc;
}

/* An int64 that the gateway writes as a decimal string (or a number);
 * missing means 0 (proto3 omits zero values). */
static int64_t json_i64(json_t *v)
{
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_string(v))
        return (int64_t)strtoll(json_string_value(v), NULL, 10);
    return 0;
}

/* ---- leases ------------------------------------------------------------ */

long etcd_lease_keepalive_once(struct etcd_client *c, int64_t id, long timeout_ms)
{
    char body[64], err[160];
    snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", id);
    json_t *j;
    int rc = call(c, "/v3/lease/keepalive", body, timeout_ms, NULL, &j, err, sizeof(err));
    if (rc != ETCD_OK)
        return rc == ETCD_ENOENT ? 0 : rc;
    /* A stream of one message: {"result":{..., "TTL":"n"}}; no TTL (0)
     * when etcd no longer knows the lease. */
    json_t *res = json_object_get(j, "result");
    if (!res) {
        /* A stream that failed (no leader, shutting down) answers 200
         * with {"error":{...}}: that says nothing about the lease. */
        json_decref(j);
        return ETCD_EUNAVAIL;
    }
    long ttl = (long)json_i64(json_object_get(res, "TTL"));
    json_decref(j);
    return ttl > 0 ? ttl : 0;
}

/* The renewer's callback: one keep-alive. */
static int wd_renew(void *owner, void **conn, const struct renewer_lease *l)
{
    struct etcd_client *c = owner;
    int64_t id = strtoll(l->token, NULL, 10);
    /* Answer before the next renewal is due. */
    long ttl = etcd_lease_keepalive_once(c, id, l->ttl_ms / 3 > 0 ? l->ttl_ms / 3 : 1);
    return ttl > 0 ? 1 : ttl == 0 ? 0 : -1;
}

static const struct renewer_ops wd_ops = {wd_renew, NULL};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct etcd_client *etcd_client_new(const char *endpoints, long op_timeout_ms,
                                    struct etcd_stats *stats, char *err, size_t errlen)
{
    char dummy[8];
    if (!err) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    pthread_once(&curl_once, curl_init_once);
    struct etcd_client *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->stats = stats ? stats : &c->own_stats;
    c->op_timeout_ms = op_timeout_ms > 0 ? op_timeout_ms : 1000;
    const char *p = endpoints ? endpoints : "";
    while (*p) {
        size_t n = strcspn(p, ",");
        const char *scheme = strncmp(p, "http://", 7) == 0 ? "" : "http://";
        if (n == 0 || n + strlen(scheme) >= URL_MAX - 1 || c->nurls == ETCD_ENDPOINTS_MAX) {
            snprintf(err, errlen, "bad etcd endpoint list '%.100s'", endpoints);
            goto err;
        }
        snprintf(c->urls[c->nurls], URL_MAX, "%s%.*s", scheme, (int)n, p);
        size_t len = strlen(c->urls[c->nurls]);
        if (c->urls[c->nurls][len - 1] == '/')
            c->urls[c->nurls][len - 1] = '\0';
        c->nurls++;
        p += n;
        if (*p == ',')
            p++;
    }
    if (c->nurls == 0) {
        snprintf(err, errlen, "empty etcd endpoint list");
        goto err;
    }
    pthread_mutex_init(&c->mu, NULL);
    if (!(c->wd = renewer_new(&wd_ops, c, &c->stats->renewals, &c->stats->leases_lost))) {
        pthread_mutex_destroy(&c->mu);
        snprintf(err, errlen, "out of memory");
        goto err;
    }
    return c;
err:
    free(c);
    return NULL;
}

void etcd_client_free(struct etcd_client *c)
{
    if (!c)
        return;
    renewer_free(c->wd);   /* first: its thread uses the pool */
    for (int i = 0; i < c->npool; i++)
        curl_easy_cleanup(c->pool[i]);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int etcd_lease_grant(struct etcd_client *c, long ttl_s, long valid_ms, long timeout_ms,
                     struct etcd_lease *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    char body[64];
    snprintf(body, sizeof(body), "{\"TTL\":%ld}", ttl_s);
    int64_t sent = util_now_ms();
    json_t *j;
    int rc = call(c, "/v3/lease/grant", body, timeout_ms, NULL, &j, err, errlen);
    if (rc != ETCD_OK)
        return rc == ETCD_ENOENT ? ETCD_ERR : rc;
    out->id = json_i64(json_object_get(j, "ID"));
    out->ttl_s = (long)json_i64(json_object_get(j, "TTL"));
    const char *e = json_string_value(json_object_get(j, "error"));
    json_decref(j);
    if (out->id == 0 || out->ttl_s <= 0) {
        snprintf(err, errlen, "etcd refused the lease: %.100s", e ? e : "no ID/TTL");
        return ETCD_ERR;
    }
    out->sent_ms = sent;
    out->valid_ms = valid_ms > 0 && valid_ms < out->ttl_s * 1000 ? valid_ms : out->ttl_s * 1000;
    return ETCD_OK;
}

int etcd_lease_watch(struct etcd_client *c, struct etcd_lease *l)
{
    struct renewer_lease rl;
    memset(&rl, 0, sizeof(rl));
    snprintf(rl.key, sizeof(rl.key), "%.*s", (int)sizeof(rl.key) - 1, l->name);
    snprintf(rl.token, sizeof(rl.token), "%" PRId64, l->id);
    /* Renew at valid/3: well inside what the holder counts on. */
    rl.ttl_ms = l->valid_ms;
    l->wd_id = renewer_add(c->wd, &rl);
    return l->wd_id ? 0 : -1;
}

long etcd_lease_validity_left(struct etcd_client *c, const struct etcd_lease *l)
{
    int64_t renewed = 0;
    if (l->wd_id && renewer_check(c->wd, l->wd_id, &renewed))
        return 0;   /* a keep-alive found it gone */
    int64_t base = renewed > l->sent_ms ? renewed : l->sent_ms;
    if (l->waited_ms > base)
        base = l->waited_ms;
    long left = (long)(base + l->valid_ms - etcd_drift_ms(l->valid_ms) - util_now_ms());
    return left > 0 ? left : 0;
}

int etcd_lease_revoke(struct etcd_client *c, struct etcd_lease *l, long timeout_ms, char *err,
                      size_t errlen)
{
    renewer_remove(c->wd, l->wd_id);
    l->wd_id = 0;
    char body[64];
    snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", l->id);
    json_t *j;
    int rc = call(c, "/v3/lease/revoke", body, timeout_ms, NULL, &j, err, errlen);
    json_decref(j);
    return rc == ETCD_ENOENT ? ETCD_OK : rc;
}

/* ---- lock and reads ---------------------------------------------------- */

int etcd_lock(struct etcd_client *c, const char *name, struct etcd_lease *lease, long wait_ms,
              char *key, size_t keylen, char *err, size_t errlen)
{
    char name64[ETCD_KEY_MAX * 2], body[ETCD_KEY_MAX * 2 + 96];
    if (etcd_b64_encode(name, strlen(name), name64, sizeof(name64)) < 0) {
        snprintf(err, errlen, "etcd: lock name too long");
        return ETCD_ERR;
    }
    snprintf(body, sizeof(body), "{\"name\":\"%s\",\"lease\":\"%" PRId64 "\"}", name64,
             lease->id);
    json_t *j;
    /* Probe twice per op bound, each probe bounded like any other call: a
     * hang is seen within 1.5 op bounds (plus the callback's period). */
    struct lock_probe probe = {.c = c, .lease = lease,
                               .probe_ms = c->op_timeout_ms / 2 > 0 ? c->op_timeout_ms / 2 : 1,
                               .bound_ms = c->op_timeout_ms};
    int rc = call(c, "/v3/lock/lock", body, wait_ms, &probe, &j, err, errlen);
    if (rc != ETCD_OK)
        return rc == ETCD_ENOENT ? ETCD_ERR : rc;   /* lease gone */
    const char *k64 = json_string_value(json_object_get(j, "key"));
    long n = k64 ? etcd_b64_decode(k64, key, keylen) : -1;
    json_decref(j);
    if (n <= 0) {
        snprintf(err, errlen, "etcd: lock answer without a key");
        return ETCD_ERR;
    }
    return ETCD_OK;
}

/* Range request for key (and up to range_end when not NULL). */
static int range(struct etcd_client *c, const char *key, const char *range_end, int count_only,
                 long timeout_ms, json_t **out, char *err, size_t errlen)
{
    char k64[ETCD_KEY_MAX * 2], e64[ETCD_KEY_MAX * 2], body[ETCD_KEY_MAX * 4 + 96];
    if (etcd_b64_encode(key, strlen(key), k64, sizeof(k64)) < 0 ||
        (range_end && etcd_b64_encode(range_end, strlen(range_end), e64, sizeof(e64)) < 0)) {
        snprintf(err, errlen, "etcd: key too long");
        return ETCD_ERR;
    }
    if (range_end)
        snprintf(body, sizeof(body), "{\"key\":\"%s\",\"range_end\":\"%s\"%s}", k64, e64,
                 count_only ? ",\"count_only\":true" : "");
    else
        snprintf(body, sizeof(body), "{\"key\":\"%s\"}", k64);
    return call(c, "/v3/kv/range", body, timeout_ms, NULL, out, err, errlen);
}

int64_t etcd_create_revision(struct etcd_client *c, const char *key, long timeout_ms, char *err,
                             size_t errlen)
{
    json_t *j;
    int rc = range(c, key, NULL, 0, timeout_ms, &j, err, errlen);
    if (rc != ETCD_OK)
        return rc;
    json_t *kv = json_array_get(json_object_get(j, "kvs"), 0);
    int64_t rev = kv ? json_i64(json_object_get(kv, "create_revision")) : 0;
    json_decref(j);
    if (rev <= 0) {
        snprintf(err, errlen, "etcd: key %.100s is gone", key);
        return ETCD_ENOENT;
    }
    return rev;
}

long etcd_count_prefix(struct etcd_client *c, const char *prefix, long timeout_ms, char *err,
                       size_t errlen)
{
    char end[ETCD_KEY_MAX];
    size_t n = strlen(prefix);
    if (n == 0 || n >= sizeof(end)) {
        snprintf(err, errlen, "etcd: bad prefix");
        return ETCD_ERR;
    }
    /* The range end of a prefix: its last byte + 1 (prefixes here are
     * printable, so no carry). */
    memcpy(end, prefix, n + 1);
    end[n - 1]++;
    json_t *j;
    int rc = range(c, prefix, end, 1, timeout_ms, &j, err, errlen);
    if (rc != ETCD_OK)
        return rc;
    long count = (long)json_i64(json_object_get(j, "count"));
    json_decref(j);
    return count;
}

long etcd_lease_count(struct etcd_client *c, long timeout_ms, char *err, size_t errlen)
{
    json_t *j;
    int rc = call(c, "/v3/lease/leases", "{}", timeout_ms, NULL, &j, err, errlen);
    if (rc != ETCD_OK)
        return rc;
    long n = (long)json_array_size(json_object_get(j, "leases"));
    json_decref(j);
    return n;
}

int etcd_health(struct etcd_client *c, long timeout_ms, char *err, size_t errlen)
{
    json_t *j;
    int rc = call(c, "/health", NULL, timeout_ms, NULL, &j, err, errlen);
    if (rc != ETCD_OK)
        return -1;
    const char *h = json_string_value(json_object_get(j, "health"));
    int ok = h && strcmp(h, "true") == 0;
    if (!ok)
        snprintf(err, errlen, "etcd /health: %.60s", h ? h : "no answer");
    json_decref(j);
    return ok ? 0 : -1;
}
