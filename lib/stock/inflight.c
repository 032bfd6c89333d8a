/* In-flight table (see inflight.h): a small array under one mutex. The
 * scan is over the SKUs in flight, at most one per request thread. */
#include "inflight.h"

#include "deduct.h"

#include <pthread.h>
#include <string.h>

struct slot {
    char sku[STOCK_SKU_MAX + 1];   /* "" = free */
    int deducting;
    int reseeding;
};

static struct slot slots[INFLIGHT_SLOTS];
static int used;                   /* slots holding a SKU */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* The slot of sku, or a free one claimed for it when `claim`; NULL when
 * absent (or full). The scan stops once every used slot was seen: it is
 * over the SKUs in flight, not the whole table. Caller holds mu. */
static struct slot *find(const char *sku, int claim)
{
    struct slot *free_slot = NULL;
    for (int i = 0, seen = 0; i < INFLIGHT_SLOTS && (seen < used || !free_slot); i++) {
        if (!slots[i].sku[0]) {
            if (!free_slot)
                free_slot = &slots[i];
        } else if (seen++, strcmp(slots[i].sku, sku) == 0) {
            return &slots[i];
        }
    }
    if (claim && free_slot) {
        strncpy(free_slot->sku, sku, STOCK_SKU_MAX);
        free_slot->sku[STOCK_SKU_MAX] = '\0';
        used++;
    }
    return claim ? free_slot : NULL;
}

static void release_if_idle(struct slot *s)
{
    if (s->deducting == 0 && !s->reseeding) {
        s->sku[0] = '\0';
        used--;
    }
}

int inflight_enter(const char *sku)
{
    pthread_mutex_lock(&mu);
    struct slot *s = find(sku, 1);
    int rc = !s ? INFLIGHT_FULL : s->reseeding ? INFLIGHT_BUSY : INFLIGHT_OK;
    if (rc == INFLIGHT_OK)
        s->deducting++;
    pthread_mutex_unlock(&mu);
    return rc;
}

void inflight_leave(const char *sku)
{
    pthread_mutex_lock(&mu);
    struct slot *s = find(sku, 0);
    if (s && s->deducting > 0) {
        s->deducting--;
        release_if_idle(s);
    }
    pthread_mutex_unlock(&mu);
}

int inflight_reseed_begin(const char *sku, int *deducting)
{
    pthread_mutex_lock(&mu);
    struct slot *s = find(sku, 1);
    *deducting = s ? s->deducting : 0;
    int rc = !s ? INFLIGHT_FULL : (s->deducting || s->reseeding) ? INFLIGHT_BUSY : INFLIGHT_OK;
    if (rc == INFLIGHT_OK)
        s->reseeding = 1;
    else if (s)
        release_if_idle(s);
    pthread_mutex_unlock(&mu);
    return rc;
}

void inflight_reseed_done(const char *sku)
{
    pthread_mutex_lock(&mu);
    struct slot *s = find(sku, 0);
    if (s) {
        s->reseeding = 0;
        release_if_idle(s);
    }
    pthread_mutex_unlock(&mu);
}
