/* The process's MySQL settings for guards with background connections of
 * their own (the redis-stream flusher). Apart from registry.c: guards call
 * it, and the registry refers to every guard, so one file would be a
 * circle. */
#include "guards/guard.h"

static const struct db_conf *db_conf;

void guard_use_db(const struct db_conf *conf)
{
    db_conf = conf;
}

const struct db_conf *guard_db(void)
{
    return db_conf;
}
