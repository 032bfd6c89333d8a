/* The reconciliation every report is built on (services/API.md, audit). */
#ifndef LAB_AUDIT_H
#define LAB_AUDIT_H

#define AUDIT_SIDES_MAX 8

struct audit {
    long long initial;       /* stock set by the last seed */
    long long stock;         /* stock row now */
    long long sold;          /* units in unreleased ledger rows */
    long long oversold;      /* max(0, sold - initial): units that never existed */
    long long lost_updates;  /* sold - (initial - stock): sales the stock never saw */
    int consistent;          /* both zero, stock >= 0, and drift 0 where known */
    /* Write-behind sales answered, not in MySQL yet (pending_known 0: a
     * guard's backend could not be read). */
    int pending_known;
    long long pending, pending_units;
    /* Redis and MySQL apart: per Redis-stock guard that sold the SKU,
     * Redis stock - (MySQL stock - pending units); 0 when they agree.
     * drift is their sum; drift_known 0 when a side could not be read. */
    int drift_known;
    long long drift;
    int nsides;
    struct { const char *guard; long long drift; } side[AUDIT_SIDES_MAX];
};

/* Derive oversold, lost_updates and consistent from initial, stock, sold
 * (and drift, when drift_known). */
void audit_compute(struct audit *a);

#endif
