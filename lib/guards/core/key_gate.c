/* Per-process FIFO gate by key: see key_gate.h. */
#include "key_gate.h"

#include "base/util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static unsigned long key_hash(const char *s)
{
    unsigned long h = 5381;
    while (*s)
        h = h * 33 + (unsigned char)*s++;
    return h;
}

struct key_gate *key_gate_enter(struct key_gate_table *t, const char *key, double deadline,
                                int *timeout, int *yield, void *inherit, size_t cap,
                                size_t *inherited)
{
    struct key_gate *g = &t->gate[key_hash(key) % KEY_GATE_SLOTS];
    *timeout = *yield = 0;
    *inherited = 0;
    pthread_mutex_lock(&g->mu);
    if (g->key[0] && strcmp(g->key, key) != 0) {
        pthread_mutex_unlock(&g->mu);
        return NULL;
    }
    snprintf(g->key, sizeof(g->key), "%s", key);
    g->waiters++;
    while (g->held) {
        double left = deadline - util_now();
        if (left <= 0)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long ns = ts.tv_nsec + (long long)(left * 1e9);
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    g->waiters--;
    if (g->held) {
        *timeout = 1;
        pthread_mutex_unlock(&g->mu);
        return NULL;
    }
    g->held = 1;
    *yield = g->yield;
    g->yield = 0;
    if (g->kept) {
        *inherited = g->kept < cap ? g->kept : cap;
        memcpy(inherit, g->payload, *inherited);
        g->kept = 0;
    }
    pthread_mutex_unlock(&g->mu);
    return g;
}

int key_gate_pass(struct key_gate_table *t, struct key_gate *g, const void *payload,
                  size_t len)
{
    int passed = 0;
    if (len == 0 || len > sizeof g->payload)
        return 0;
    pthread_mutex_lock(&g->mu);
    if (g->waiters > 0 && g->run + 1 < t->run_limit) {
        memcpy(g->payload, payload, len);
        g->kept = len;
        g->held = 0;
        g->run++;
        pthread_cond_signal(&g->cv);
        passed = 1;
    }
    pthread_mutex_unlock(&g->mu);
    return passed;
}

void key_gate_leave(struct key_gate_table *t, struct key_gate *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->held = 0;
    if (g->waiters) {
        if (++g->run >= t->run_limit) {
            g->run = 0;
            g->yield = 1;
        }
        pthread_cond_signal(&g->cv);
    } else {
        g->key[0] = '\0';
        g->run = 0;
        g->yield = 0;
    }
    pthread_mutex_unlock(&g->mu);
}
