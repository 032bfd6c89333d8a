/* The outcome table (see deduct.h). */
#include "deduct.h"

static const struct deduct_outcome_info outcomes[] = {
#define DEDUCT_ROW(id, name, status, code, retry) [id] = {name, status, code, retry},
    DEDUCT_OUTCOMES(DEDUCT_ROW)
#undef DEDUCT_ROW
};

const struct deduct_outcome_info *deduct_outcome_info(enum deduct_outcome o)
{
    if ((unsigned)o >= sizeof(outcomes) / sizeof(outcomes[0]))
        o = DEDUCT_INTERNAL;
    return &outcomes[o];
}
