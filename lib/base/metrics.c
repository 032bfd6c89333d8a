/* Fixed-size series tables rendered as Prometheus text. Every thread
 * updates one of METRICS_SHARDS tables, each under its own mutex, and
 * rendering sums them: with one table the HTTP I/O threads queued on one
 * mutex for every request (seen in a profile of GET /livez). */
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_LEN 64
#define LABELS_LEN 160
#define NBUCKETS METRICS_MAX_BUCKETS
#define MAX_FAMILIES 64
#define METRICS_SHARDS 4

static const double bucket_le[NBUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

enum kind { KIND_COUNTER = 1, KIND_HISTOGRAM = 2 };

struct series {
    enum kind kind;
    char name[NAME_LEN];
    char labels[LABELS_LEN];
    double value;                       /* counter value or histogram sum */
    unsigned long long count;           /* histogram count */
    const double *le;                   /* histogram bounds (bucket_le or the caller's) */
    int nle;
    unsigned long long buckets[NBUCKETS];
};

struct family { char name[NAME_LEN]; char type[16]; char help[128]; };

struct shard {
    pthread_mutex_t mu;
    struct series table[METRICS_MAX_SERIES];
    size_t nseries;
};

static struct shard shards[METRICS_SHARDS] = {
    [0 ... METRICS_SHARDS - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER}};
static pthread_mutex_t fam_mu = PTHREAD_MUTEX_INITIALIZER;  /* families */
static atomic_ullong dropped;
static struct family families[MAX_FAMILIES];
static size_t nfamilies;
static atomic_uint next_shard;
static _Thread_local int my_shard = -1;

/* This thread's shard, locked. */
static struct shard *shard_lock(void)
{
    if (my_shard < 0)
        my_shard = (int)(atomic_fetch_add(&next_shard, 1) % METRICS_SHARDS);
    struct shard *sh = &shards[my_shard];
    pthread_mutex_lock(&sh->mu);
    return sh;
}

static unsigned long hash(const char *a, const char *b)
{
    unsigned long h = 5381;
    for (; *a; a++) h = h * 33 + (unsigned char)*a;
    h = h * 33 + '|';
    for (; *b; b++) h = h * 33 + (unsigned char)*b;
    return h;
}

/* Open addressing over a power-of-two table; nseries stays below 3/4 of it
 * so probes stay short. Called with sh->mu held. */
static struct series *find(struct shard *sh, enum kind kind, const char *name,
                           const char *labels)
{
    struct series *table = sh->table;
    size_t mask = METRICS_MAX_SERIES - 1;
    for (size_t i = hash(name, labels) & mask, n = 0; n < METRICS_MAX_SERIES;
         i = (i + 1) & mask, n++) {
        struct series *s = &table[i];
        if (!s->kind) {
            if (sh->nseries >= METRICS_MAX_SERIES * 3 / 4 ||
                strlen(name) >= NAME_LEN || strlen(labels) >= LABELS_LEN) {
                atomic_fetch_add(&dropped, 1);
                return NULL;
            }
            s->kind = kind;
            strcpy(s->name, name);
            strcpy(s->labels, labels);
            sh->nseries++;
            return s;
        }
        if (s->kind == kind && strcmp(s->name, name) == 0 &&
            strcmp(s->labels, labels) == 0)
            return s;
    }
    atomic_fetch_add(&dropped, 1);
    return NULL;
}

void metrics_add(const char *name, const char *labels, double v)
{
    struct shard *sh = shard_lock();
    struct series *s = find(sh, KIND_COUNTER, name, labels ? labels : "");
    if (s)
        s->value += v;
    pthread_mutex_unlock(&sh->mu);
}

/* The value lives in shard 0; the other shards' copies (from a metrics_add
 * of the same series) are zeroed so the rendered sum is v. */
void metrics_set(const char *name, const char *labels, double v)
{
    for (int i = 0; i < METRICS_SHARDS; i++) {
        struct shard *sh = &shards[i];
        pthread_mutex_lock(&sh->mu);
        struct series *s = find(sh, KIND_COUNTER, name, labels ? labels : "");
        if (s)
            s->value = i == 0 ? v : 0;
        pthread_mutex_unlock(&sh->mu);
    }
}

void metrics_observe_le(const char *name, const char *labels, double v,
                        const double *le, int nle)
{
    if (nle < 1 || nle > NBUCKETS)
        return;
    struct shard *sh = shard_lock();
    struct series *s = find(sh, KIND_HISTOGRAM, name, labels ? labels : "");
    if (s) {
        if (!s->le) {
            s->le = le;
            s->nle = nle;
        }
        s->value += v;
        s->count++;
        for (int i = 0; i < s->nle; i++)
            if (v <= s->le[i])
                s->buckets[i]++;
    }
    pthread_mutex_unlock(&sh->mu);
}

void metrics_observe(const char *name, const char *labels, double seconds)
{
    metrics_observe_le(name, labels, seconds, bucket_le, NBUCKETS);
}

void metrics_describe(const char *name, const char *type, const char *help)
{
    pthread_mutex_lock(&fam_mu);
    size_t i;
    for (i = 0; i < nfamilies; i++)
        if (strcmp(families[i].name, name) == 0)
            break;
    if (i == nfamilies && nfamilies < MAX_FAMILIES)
        nfamilies++;
    if (i < nfamilies) {
        snprintf(families[i].name, NAME_LEN, "%s", name);
        snprintf(families[i].type, sizeof(families[i].type), "%s", type);
        snprintf(families[i].help, sizeof(families[i].help), "%s", help);
    }
    pthread_mutex_unlock(&fam_mu);
}

double metrics_get(const char *name, const char *labels)
{
    double v = 0;
    for (int k = 0; k < METRICS_SHARDS; k++) {
        struct shard *sh = &shards[k];
        pthread_mutex_lock(&sh->mu);
        for (size_t i = 0; i < METRICS_MAX_SERIES; i++)
            if (sh->table[i].kind == KIND_COUNTER && strcmp(sh->table[i].name, name) == 0 &&
                strcmp(sh->table[i].labels, labels ? labels : "") == 0)
                v += sh->table[i].value;
        pthread_mutex_unlock(&sh->mu);
    }
    return v;
}

void metrics_reset(void)
{
    for (int k = 0; k < METRICS_SHARDS; k++) {
        struct shard *sh = &shards[k];
        pthread_mutex_lock(&sh->mu);
        memset(sh->table, 0, sizeof(sh->table));
        sh->nseries = 0;
        pthread_mutex_unlock(&sh->mu);
    }
    atomic_store(&dropped, 0);
    pthread_mutex_lock(&fam_mu);
    nfamilies = 0;
    pthread_mutex_unlock(&fam_mu);
}

struct sbuf { char *p; size_t len, cap; int oom; };

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) { b->oom = 1; return; }
        if ((size_t)n < b->cap - b->len) { b->len += (size_t)n; return; }
        size_t cap = b->cap * 2 + (size_t)n;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
}

static int by_name(const void *a, const void *b)
{
    const struct series *x = *(struct series *const *)a, *y = *(struct series *const *)b;
    int c = strcmp(x->name, y->name);
    if (!c)
        c = strcmp(x->labels, y->labels);
    return c ? c : (int)x->kind - (int)y->kind;
}

/* HELP and TYPE: metrics_describe() first, then the catalogue; a family in
 * neither gets its kind as TYPE and no HELP (promtool then names it). A
 * value set with metrics_set() may be a gauge: the type says so. */
static void render_family_header(struct sbuf *b, const struct series *s)
{
    char help[128] = "", type[16] = "";
    pthread_mutex_lock(&fam_mu);
    for (size_t i = 0; i < nfamilies; i++)
        if (strcmp(families[i].name, s->name) == 0) {
            snprintf(help, sizeof(help), "%s", families[i].help);
            snprintf(type, sizeof(type), "%s", families[i].type);
            break;
        }
    pthread_mutex_unlock(&fam_mu);
    const struct metrics_family *f = help[0] ? NULL : metrics_family_of(s->name);
    if (f) {
        snprintf(help, sizeof(help), "%s", f->help);
        snprintf(type, sizeof(type), "%s", f->type);
    }
    if (!type[0] || (s->kind == KIND_HISTOGRAM) != (strcmp(type, "histogram") == 0))
        snprintf(type, sizeof(type), "%s", s->kind == KIND_COUNTER ? "counter" : "histogram");
    if (help[0])
        sb_printf(b, "# HELP %s %s\n", s->name, help);
    sb_printf(b, "# TYPE %s %s\n", s->name, type);
}

static void render_series(struct sbuf *b, const struct series *s)
{
    const char *sep = s->labels[0] ? "," : "";
    if (s->kind == KIND_COUNTER) {
        if (s->labels[0])
            sb_printf(b, "%s{%s} %.17g\n", s->name, s->labels, s->value);
        else
            sb_printf(b, "%s %.17g\n", s->name, s->value);
        return;
    }
    for (int k = 0; k < s->nle; k++)
        sb_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", s->name, s->labels, sep,
                  s->le[k], s->buckets[k]);
    sb_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", s->name, s->labels, sep, s->count);
    const char *open = s->labels[0] ? "{" : "", *close = s->labels[0] ? "}" : "";
    sb_printf(b, "%s_sum%s%s%s %.9g\n", s->name, open, s->labels, close, s->value);
    sb_printf(b, "%s_count%s%s%s %llu\n", s->name, open, s->labels, close, s->count);
}

/* Copies every shard's series (each shard locked only while it is copied),
 * sorts them, and sums the copies of one series before printing it. */
char *metrics_render(void)
{
    struct sbuf b = {.cap = 8192};
    b.p = malloc(b.cap);
    size_t max = (size_t)METRICS_SHARDS * METRICS_MAX_SERIES;
    struct series *copy = malloc(max * sizeof(*copy));
    struct series **sorted = malloc(max * sizeof(*sorted));
    if (!b.p || !copy || !sorted) {
        free(b.p);
        free(copy);
        free(sorted);
        return NULL;
    }
    b.p[0] = '\0';
    size_t n = 0;
    for (int k = 0; k < METRICS_SHARDS; k++) {
        struct shard *sh = &shards[k];
        pthread_mutex_lock(&sh->mu);
        for (size_t i = 0; i < METRICS_MAX_SERIES; i++)
            if (sh->table[i].kind)
                copy[n++] = sh->table[i];
        pthread_mutex_unlock(&sh->mu);
    }
    for (size_t i = 0; i < n; i++)
        sorted[i] = &copy[i];
    qsort(sorted, n, sizeof(sorted[0]), by_name);
    const char *last_name = "";
    for (size_t i = 0; i < n;) {
        struct series *s = sorted[i];
        size_t j = i + 1;
        for (; j < n && by_name(&sorted[i], &sorted[j]) == 0; j++) {
            s->value += sorted[j]->value;
            s->count += sorted[j]->count;
            for (int k = 0; k < NBUCKETS; k++)
                s->buckets[k] += sorted[j]->buckets[k];
        }
        if (strcmp(last_name, s->name) != 0)
            render_family_header(&b, s);
        last_name = s->name;
        render_series(&b, s);
        i = j;
    }
    sb_printf(&b, "# HELP lab_metrics_dropped_total %s\n"
              "# TYPE lab_metrics_dropped_total counter\nlab_metrics_dropped_total %llu\n",
              metrics_family_of("lab_metrics_dropped_total")->help,
              (unsigned long long)atomic_load(&dropped));
    free(copy);
    free(sorted);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
