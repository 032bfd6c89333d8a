/* The reconciliation every report is built on (services/API.md, audit). */
#ifndef LAB_AUDIT_H
#define LAB_AUDIT_H

#include <stddef.h>

#define AUDIT_SIDES_MAX 8
/* The audit's evidence texts: the settlements a guard reports (JSON array
 * text) and the order ids of the ledger rows without a stock move (at most
 * AUDIT_UNMOVED_ROWS ids of up to 64 characters, comma-separated). */
#define AUDIT_SETTLED_MAX 4096
#define AUDIT_UNMOVED_ROWS 20
#define AUDIT_UNMOVED_MAX (AUDIT_UNMOVED_ROWS * 65 + 1)

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
    /* each drift's terms: drift = redis_stock - (stock - pending_units -
     * in_flight_units); stale_intents: sales past their write deadline it
     * could not settle (counted in drift, not in flight) */
    struct {
        const char *guard;
        long long drift, redis_stock, pending_units, in_flight_units, stale_intents, held;
    } side[AUDIT_SIDES_MAX];
    /* Units of holds a guard keeps in Redis (redis-stream): out of its
     * Redis stock, still in MySQL's `stock` (so not in `held`, whose units
     * are out of it): each side's drift counts them,
     * redis_stock = stock - pending_units - in_flight_units - held. Their
     * holds past the deadline are in expired_unswept. */
    long long held_redis;
    /* Why Redis moved without a sale: the settlements of sales their
     * instance never answered, as the guard recorded them (JSON array
     * text, newest first; "[]" none). */
    char settled[AUDIT_SETTLED_MAX];
    /* Ledger rows without a stock move (read only while lost_updates is
     * not 0): the order ids of unreleased rows whose `remaining` repeats an
     * earlier unreleased row's, oldest first, comma-separated ("" none). */
    char unmoved[AUDIT_UNMOVED_MAX];
    /* Settlements that gave a sale's units back as never landed while the
     * ledger holds that very sale (its order_id with its intent id): its
     * write committed after it was settled, one unit apart per unit.
     * Their order ids, comma-separated ("" none; read only while the audit
     * is inconsistent). */
    char landed_late[AUDIT_UNMOVED_MAX];
    /* Holds (stock/holds.h): units of live holds, out of `stock` but not
     * sold (initial = stock + sold + held); holds past their deadline the
     * sweeper has not given back yet; the order ids confirmed after their
     * deadline on their own units (the broken confirm), comma-separated. */
    long long held, expired_unswept;
    char late_confirms[AUDIT_UNMOVED_MAX];
    /* Purchase limits: the SKU's limit_per_user (0 none), and the users
     * whose unreleased ledger rows hold more than it (over_limit of them,
     * "user=bought,..." in over_limit_users; "" none). Set before
     * audit_compute: any makes the audit inconsistent. */
    long long limit, over_limit;
    char over_limit_users[AUDIT_UNMOVED_MAX];
};

/* Derive oversold, lost_updates and consistent from initial, stock, sold,
 * held (and drift, when drift_known). */
void audit_compute(struct audit *a);

/* Why the audit is inconsistent, in words, into buf (len bytes): each
 * cause (oversold, lost updates and their order ids, stock below zero,
 * every guard's drift with its terms); "" when consistent. Pure: reads
 * only a (audit_compute done). */
void audit_why(const struct audit *a, char *buf, size_t len);

#endif
