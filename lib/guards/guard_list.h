/* The guard list: one line per guard, in the order GET /guards shows them.
 * GUARD(id) names the `const struct guard guard_<id>` its file defines.
 * Adding a guard = one file in lib/guards/ + one line here. */
GUARD(none)
GUARD(mutex)
GUARD(optimistic)
GUARD(for_update)
GUARD(conditional_update)
GUARD(batched_update)
GUARD(redis_lock)
GUARD(segmented)
GUARD(redis_decr)
GUARD(redlock)
GUARD(lock_table)
GUARD(redis_stream)
GUARD(zookeeper)
GUARD(etcd)
