/* The reconciliation every report is built on (services/API.md, audit). */
#ifndef LAB_AUDIT_H
#define LAB_AUDIT_H

struct audit {
    long long initial;       /* stock set by the last seed */
    long long stock;         /* stock row now */
    long long sold;          /* units in unreleased ledger rows */
    long long oversold;      /* max(0, sold - initial): units that never existed */
    long long lost_updates;  /* sold - (initial - stock): sales the stock never saw */
    int consistent;          /* both zero and stock >= 0 */
};

/* Derive oversold, lost_updates and consistent from initial, stock, sold. */
void audit_compute(struct audit *a);

#endif
