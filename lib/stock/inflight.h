/* Which SKUs this process is deducting right now, and which it is
 * reseeding: a reseed must not reset a SKU under a sale that will still
 * write, and a sale must not start under a reseed. Bounded: one slot per
 * SKU in flight, and a process never has more SKUs in flight than
 * request threads. */
#ifndef LAB_INFLIGHT_H
#define LAB_INFLIGHT_H

#define INFLIGHT_SLOTS 512

enum inflight_rc {
    INFLIGHT_OK = 0,
    INFLIGHT_BUSY = -1,        /* the other kind of work holds the SKU */
    INFLIGHT_FULL = -2,        /* no free slot (more SKUs than slots) */
};

/* A deduction of sku starts: INFLIGHT_OK (call inflight_leave after),
 * INFLIGHT_BUSY while the SKU is being reseeded, or INFLIGHT_FULL. */
int inflight_enter(const char *sku);
void inflight_leave(const char *sku);

/* A reseed of sku starts: INFLIGHT_OK (call inflight_reseed_done after),
 * INFLIGHT_BUSY while deductions (or another reseed) of it run, or
 * INFLIGHT_FULL. *deducting receives the number of deductions in flight. */
int inflight_reseed_begin(const char *sku, int *deducting);
void inflight_reseed_done(const char *sku);

#endif
