/* Audit arithmetic, kept pure so the unit tests pin it down. */
#include "audit.h"

void audit_compute(struct audit *a)
{
    a->oversold = a->sold > a->initial ? a->sold - a->initial : 0;
    a->lost_updates = a->sold - (a->initial - a->stock);
    a->consistent = a->oversold == 0 && a->lost_updates == 0 && a->stock >= 0 &&
                    (!a->drift_known || a->drift == 0);
}
