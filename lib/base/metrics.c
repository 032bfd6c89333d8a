/* Fixed-size, mutex-guarded series table rendered as Prometheus text. One
 * mutex is fine: a series update is nanoseconds next to the database round
 * trip every request makes. */
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_LEN 64
#define LABELS_LEN 160
#define NBUCKETS METRICS_MAX_BUCKETS
#define MAX_FAMILIES 64

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

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct series table[METRICS_MAX_SERIES];
static size_t nseries;
static unsigned long long dropped;
static struct family families[MAX_FAMILIES];
static size_t nfamilies;

static unsigned long hash(const char *a, const char *b)
{
    unsigned long h = 5381;
    for (; *a; a++) h = h * 33 + (unsigned char)*a;
    h = h * 33 + '|';
    for (; *b; b++) h = h * 33 + (unsigned char)*b;
    return h;
}

/* Open addressing over a power-of-two table; nseries stays below 3/4 of it
 * so probes stay short. Called with mu held. */
static struct series *find(enum kind kind, const char *name, const char *labels)
{
    size_t mask = METRICS_MAX_SERIES - 1;
    for (size_t i = hash(name, labels) & mask, n = 0; n < METRICS_MAX_SERIES;
         i = (i + 1) & mask, n++) {
        struct series *s = &table[i];
        if (!s->kind) {
            if (nseries >= METRICS_MAX_SERIES * 3 / 4 ||
                strlen(name) >= NAME_LEN || strlen(labels) >= LABELS_LEN) {
                dropped++;
                return NULL;
            }
            s->kind = kind;
            strcpy(s->name, name);
            strcpy(s->labels, labels);
            nseries++;
            return s;
        }
        if (s->kind == kind && strcmp(s->name, name) == 0 &&
            strcmp(s->labels, labels) == 0)
            return s;
    }
    dropped++;
    return NULL;
}

void metrics_add(const char *name, const char *labels, double v)
{
    pthread_mutex_lock(&mu);
    struct series *s = find(KIND_COUNTER, name, labels ? labels : "");
    if (s)
        s->value += v;
    pthread_mutex_unlock(&mu);
}

void metrics_set(const char *name, const char *labels, double v)
{
    pthread_mutex_lock(&mu);
    struct series *s = find(KIND_COUNTER, name, labels ? labels : "");
    if (s)
        s->value = v;
    pthread_mutex_unlock(&mu);
}

void metrics_observe_le(const char *name, const char *labels, double v,
                        const double *le, int nle)
{
    if (nle < 1 || nle > NBUCKETS)
        return;
    pthread_mutex_lock(&mu);
    struct series *s = find(KIND_HISTOGRAM, name, labels ? labels : "");
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
    pthread_mutex_unlock(&mu);
}

void metrics_observe(const char *name, const char *labels, double seconds)
{
    metrics_observe_le(name, labels, seconds, bucket_le, NBUCKETS);
}

void metrics_describe(const char *name, const char *type, const char *help)
{
    pthread_mutex_lock(&mu);
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
    pthread_mutex_unlock(&mu);
}

double metrics_get(const char *name, const char *labels)
{
    double v = 0;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < METRICS_MAX_SERIES; i++)
        if (table[i].kind == KIND_COUNTER && strcmp(table[i].name, name) == 0 &&
            strcmp(table[i].labels, labels ? labels : "") == 0)
            v = table[i].value;
    pthread_mutex_unlock(&mu);
    return v;
}

void metrics_reset(void)
{
    pthread_mutex_lock(&mu);
    memset(table, 0, sizeof(table));
    nseries = 0;
    dropped = 0;
    nfamilies = 0;
    pthread_mutex_unlock(&mu);
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
    return c ? c : strcmp(x->labels, y->labels);
}

/* HELP and TYPE: metrics_describe() first, then the catalogue; a family in
 * neither gets its kind as TYPE and no HELP (promtool then names it). A
 * value set with metrics_set() may be a gauge: the type says so. */
static void render_family_header(struct sbuf *b, const struct series *s)
{
    const char *help = NULL, *type = NULL;
    for (size_t i = 0; i < nfamilies; i++)
        if (strcmp(families[i].name, s->name) == 0) {
            help = families[i].help;
            type = families[i].type;
            break;
        }
    const struct metrics_family *f = help ? NULL : metrics_family_of(s->name);
    if (f) {
        help = f->help;
        type = f->type;
    }
    if (!type || (s->kind == KIND_HISTOGRAM) != (strcmp(type, "histogram") == 0))
        type = s->kind == KIND_COUNTER ? "counter" : "histogram";
    if (help)
        sb_printf(b, "# HELP %s %s\n", s->name, help);
    sb_printf(b, "# TYPE %s %s\n", s->name, type);
}

char *metrics_render(void)
{
    struct sbuf b = {.cap = 8192};
    b.p = malloc(b.cap);
    if (!b.p)
        return NULL;
    b.p[0] = '\0';
    pthread_mutex_lock(&mu);
    struct series *sorted[METRICS_MAX_SERIES];
    size_t n = 0;
    for (size_t i = 0; i < METRICS_MAX_SERIES; i++)
        if (table[i].kind)
            sorted[n++] = &table[i];
    qsort(sorted, n, sizeof(sorted[0]), by_name);
    for (size_t i = 0; i < n; i++) {
        const struct series *s = sorted[i];
        if (i == 0 || strcmp(sorted[i - 1]->name, s->name) != 0)
            render_family_header(&b, s);
        const char *sep = s->labels[0] ? "," : "";
        if (s->kind == KIND_COUNTER) {
            if (s->labels[0])
                sb_printf(&b, "%s{%s} %.17g\n", s->name, s->labels, s->value);
            else
                sb_printf(&b, "%s %.17g\n", s->name, s->value);
            continue;
        }
        for (int k = 0; k < s->nle; k++)
            sb_printf(&b, "%s_bucket{%s%sle=\"%g\"} %llu\n", s->name, s->labels,
                      sep, s->le[k], s->buckets[k]);
        sb_printf(&b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", s->name, s->labels,
                  sep, s->count);
        const char *open = s->labels[0] ? "{" : "", *close = s->labels[0] ? "}" : "";
        sb_printf(&b, "%s_sum%s%s%s %.9g\n", s->name, open, s->labels, close, s->value);
        sb_printf(&b, "%s_count%s%s%s %llu\n", s->name, open, s->labels, close, s->count);
    }
    sb_printf(&b, "# HELP lab_metrics_dropped_total %s\n"
              "# TYPE lab_metrics_dropped_total counter\nlab_metrics_dropped_total %llu\n",
              metrics_family_of("lab_metrics_dropped_total")->help, dropped);
    pthread_mutex_unlock(&mu);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
