/* The field rows of the lock options (locks/lock_opts.h), for the lock
 * guards' own tables: a guard lists the ones it honours, e.g.
 *   static const struct guard_field fields[] = {LOCK_FIELD_TTL, LOCK_FIELD_FENCING};
 * and points .fields/.nfields at it, .opts_size = sizeof(struct
 * lock_req_opts), .opts_default = &lock_req_opts_default. */
#ifndef LAB_LOCK_FIELDS_H
#define LAB_LOCK_FIELDS_H

#include "guards/guard.h"
#include "locks/lock_opts.h"

#include <stddef.h>

extern const struct lock_req_opts lock_req_opts_default;

/* A lock guard's options for req: the body's, else the defaults (a
 * release, the seeds' GET). Same as guard_opts(self, req) for a guard
 * whose opts_default is lock_req_opts_default. */
static inline const struct lock_req_opts *lock_opts_of(const struct deduct_req *req)
{
    return req->opts ? (const struct lock_req_opts *)req->opts : &lock_req_opts_default;
}

/* CHOICE parsers of acquire / release (rlock's names). */
int lock_field_acquire(const char *s, int *out);
int lock_field_release(const char *s, int *out);

#define LOCK_FIELD_TTL \
    {"lock_ttl_ms", GUARD_FIELD_INT, offsetof(struct lock_req_opts, ttl_ms), 0, LOCK_OPTS_TTL_MAX_MS, NULL, NULL}
#define LOCK_FIELD_WATCHDOG \
    {"watchdog", GUARD_FIELD_BOOL, offsetof(struct lock_req_opts, watchdog), 0, 1, NULL, NULL}
#define LOCK_FIELD_ACQUIRE \
    {"acquire", GUARD_FIELD_CHOICE, offsetof(struct lock_req_opts, acquire), 0, 0, \
     lock_field_acquire, rlock_acquire_choices}
#define LOCK_FIELD_RELEASE \
    {"release", GUARD_FIELD_CHOICE, offsetof(struct lock_req_opts, release), 0, 0, \
     lock_field_release, rlock_release_choices}
#define LOCK_FIELD_FENCING \
    {"fencing", GUARD_FIELD_BOOL, offsetof(struct lock_req_opts, fencing), 0, 1, NULL, NULL}
#define LOCK_FIELD_REPLICAS_ACK \
    {"replicas_ack", GUARD_FIELD_INT, offsetof(struct lock_req_opts, replicas_ack), 0, \
     LOCK_OPTS_REPLICAS_ACK_MAX, NULL, NULL}
#define LOCK_FIELD_FAIR \
    {"fair", GUARD_FIELD_BOOL, offsetof(struct lock_req_opts, fair), 0, 1, NULL, NULL}

#endif
