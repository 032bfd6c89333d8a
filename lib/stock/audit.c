/* Audit arithmetic, kept pure so the unit tests pin it down. */
#include "audit.h"

#include <stdio.h>

void audit_compute(struct audit *a)
{
    a->oversold = a->sold > a->initial ? a->sold - a->initial : 0;
    a->lost_updates = a->sold + a->held - (a->initial - a->stock);
    a->consistent = a->oversold == 0 && a->lost_updates == 0 && a->stock >= 0 &&
                    (!a->drift_known || a->drift == 0) && a->over_limit == 0;
}

/* Append one clause to buf (len bytes, *used so far), "; " between
 * clauses; what does not fit is cut (buf stays a string). */
static void add_clause(char *buf, size_t len, size_t *used, const char *text)
{
    int n = snprintf(buf + *used, len - *used, "%s%s", *used ? "; " : "", text);
    if (n > 0)
        *used += (size_t)n < len - *used ? (size_t)n : len - *used - 1;
}

void audit_why(const struct audit *a, char *buf, size_t len)
{
    char c[AUDIT_UNMOVED_MAX + 160];
    size_t used = 0;
    if (len == 0)
        return;
    buf[0] = '\0';
    if (a->consistent)
        return;
    if (a->oversold > 0) {
        snprintf(c, sizeof(c), "oversold %lld: the ledger holds %lld unit(s), %lld existed",
                 a->oversold, a->sold, a->initial);
        add_clause(buf, len, &used, c);
    }
    if (a->lost_updates != 0) {
        char held[48] = "";
        if (a->held)
            snprintf(held, sizeof(held), " and holds %lld", a->held);
        snprintf(c, sizeof(c), "lost_updates %lld: the ledger holds %lld unit(s)%s, the stock "
                 "moved %lld%s%s%s", a->lost_updates, a->sold, held, a->initial - a->stock,
                 a->unmoved[0] ? " (rows without a stock move: " : "", a->unmoved,
                 a->unmoved[0] ? ")" : "");
        add_clause(buf, len, &used, c);
    }
    if (a->late_confirms[0]) {
        snprintf(c, sizeof(c), "holds confirmed after their deadline on units already "
                 "given back: %s", a->late_confirms);
        add_clause(buf, len, &used, c);
    }
    if (a->landed_late[0]) {
        snprintf(c, sizeof(c), "given back as never landed, yet in the ledger (their write "
                 "committed after the settlement): %s", a->landed_late);
        add_clause(buf, len, &used, c);
    }
    if (a->over_limit > 0) {
        snprintf(c, sizeof(c), "over_limit %lld: user(s) hold more than the limit of %lld "
                 "per user (%s)", a->over_limit, a->limit, a->over_limit_users);
        add_clause(buf, len, &used, c);
    }
    if (a->stock < 0) {
        snprintf(c, sizeof(c), "stock %lld below zero", a->stock);
        add_clause(buf, len, &used, c);
    }
    for (int i = 0; a->drift_known && i < a->nsides; i++) {
        if (a->side[i].drift == 0)
            continue;
        char held[40] = "";   /* a term only for a guard with holds in Redis */
        if (a->side[i].held)
            snprintf(held, sizeof(held), " - %lld held", a->side[i].held);
        snprintf(c, sizeof(c), "%s drift %+lld: Redis %lld, MySQL %lld - %lld pending - "
                 "%lld in flight%s%s", a->side[i].guard, a->side[i].drift,
                 a->side[i].redis_stock, a->stock, a->side[i].pending_units,
                 a->side[i].in_flight_units, held,
                 a->side[i].stale_intents ? " (stale intents it could not settle are not "
                                            "in flight)" : "");
        add_clause(buf, len, &used, c);
    }
}
