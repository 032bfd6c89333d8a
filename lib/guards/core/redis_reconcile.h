/* What the Redis-stock guards (redis-decr, segmented) do about Redis losing
 * their state (a restart without persistence, a FLUSHALL, a failover to an
 * empty replica), and how units flow back into Redis safely.
 *
 * The danger: sales already decided in Redis but not yet written to MySQL.
 * Reloading MySQL's stock at once counts their units a second time. So when
 * a guard finds its state key missing, an atomic script creates a per-SKU
 * reconcile marker "not before = Redis TIME + horizon" (--redis-reload-wait)
 * and the guard answers 503 until then; the first request after it reads
 * MySQL and writes the state back only if it is still missing and the
 * marker is still the one it claimed. The horizon must exceed the longest
 * time a Redis decision takes to reach MySQL (hold_ms, then the write; a
 * sale past its deadline gives up instead of writing).
 *
 * Every seed and reload sets a new epoch ("s|r<Redis ms>-<random>"). Units
 * go back into Redis only into the state they came from:
 * - a sale MySQL refused gives back only when the epoch is still the one it
 *   was decided in (a reload already counted it as unsold);
 * - a release adds to Redis only when the state exists (a pending reload
 *   reads MySQL, which has the units) and was not reloaded within the
 *   horizon (the reload may or may not have seen the release's commit: then
 *   the state is dropped and reconciled again, never guessed). */
#ifndef LAB_REDIS_RECONCILE_H
#define LAB_REDIS_RECONCILE_H

#include "guards/guard.h"
#include "stock/keys.h"
#include "stock/segments.h"

#include <hiredis/hiredis.h>

/* Lua: lab_gen(), the data set's generation, and in_gen(epoch). A Redis
 * promoted from a replica holds what had reached it, possibly behind the
 * old master (sales answered and flushed to MySQL missing, their units
 * there to be sold again). The promotion shows: the server's replication
 * id is new and its replid2 is the id of the master whose data it held;
 * the last id a script saw is in lab:replid (replicated with the data).
 * Then lab:gen becomes the new id, and every state whose epoch ends in
 * another generation ("@<gen>", written by every seed and reload) counts
 * as lost: reconciled from MySQL, never sold from. A restart (new id, no
 * replid2) keeps the generation. Call lab_gen() in a script that may
 * write (the master). */
#define RREC_LUA_GEN                                                              \
    "local function lab_gen() "                                                   \
    "  local info = redis.call('INFO', 'replication') "                           \
    "  local cur = string.sub(string.match(info, 'master_replid:(%w+)') or '', 1, 12) " \
    "  local seen = redis.call('GET', 'lab:replid') "                             \
    "  if seen ~= cur then "                                                      \
    "    local r2 = string.sub(string.match(info, 'master_replid2:(%w+)') or '', 1, 12) " \
    "    if seen and r2 == seen then redis.call('SET', 'lab:gen', cur) end "      \
    "    redis.call('SET', 'lab:replid', cur) "                                   \
    "  end "                                                                      \
    "  return redis.call('GET', 'lab:gen') or '' "                                \
    "end "                                                                        \
    "local function in_gen(ep) "                                                  \
    "  return (string.match(ep, '@(%w*)$') or '') == lab_gen() "                  \
    "end "

/* A SKU's bookkeeping keys for one guard. */
struct redis_shared;

struct rrec {
    struct redis_shared *redis;   /* the guard's Redis (received at init) */
    const char *guard;         /* "redis-decr", "segmented": messages */
    char state[KEYS_MAX];      /* present = Redis holds the SKU's stock */
    char epoch[KEYS_MAX];
    char marker[KEYS_MAX];
};

#define RREC_EPOCH_MAX 64      /* "r<ms>-<16 hex>@<12 hex>" fits */

/* The state keys a seed or a load writes: keys[0] must be the state key.
 * del[] (seed only) are deleted first. */
struct rrec_state {
    int n, ndel;
    char keys[1 + SEG_MAX][KEYS_MAX];
    char vals[1 + SEG_MAX][24];
    char del[2 * SEG_MAX][KEYS_MAX];
    long long seeds;           /* the MySQL row's `seeds` the stock was read
                                * under (set before fill; a guard may keep it) */
};

/* Write a fresh state with a new seed epoch and no marker, atomically.
 * Returns 0, or -1 with err. */
int rrec_seed(const struct rrec *k, const struct rrec_state *s, char *err, size_t errlen);

/* Fill s with the state for `stock` units (and `segments`, for guards
 * that use them) read from MySQL. Returns 0, or -1 with res filled. */
typedef int (*rrec_fill_fn)(const char *sku, long long stock, int segments,
                            struct rrec_state *s, struct deduct_res *res);

/* The guard found k->state missing. Unknown SKU: 404. While the marker's
 * time has not come: 503 backend_unavailable ("reconciling"). When due:
 * read MySQL and load. Returns 1 when the state is there again (retry the
 * deduction), 0 when res holds the answer. */
int rrec_recover(const struct rrec *k, const struct deduct_env *env, const char *sku,
                 rrec_fill_fn fill, struct deduct_res *res);

/* Give back `qty` units of a sale decided in `epoch` (MySQL refused it)
 * into `target` (a key of the state): only when the state exists and its
 * epoch is still `epoch`. Returns 1 given, 0 not needed (the state was lost
 * or reloaded: the reload counts MySQL, which never had the sale), -1 with
 * err. */
int rrec_give_back(const struct rrec *k, const char *target, const char *epoch, long qty,
                   char *err, size_t errlen);

/* Write `value` into `target` (the segmented guard's locked write) only
 * when the state exists and its epoch is still `epoch`. Returns 1 written,
 * 0 the state was lost or replaced, -1 with err. */
int rrec_set_if_epoch(const struct rrec *k, const char *target, const char *epoch,
                      long long value, char *err, size_t errlen);

/* A release MySQL has committed: add `qty` to `target` (see the top of this
 * file). drop[] are the state's keys besides k->state and target, deleted
 * too when the state has to be reconciled again. Returns 1 added, 0 not
 * needed (state missing), 2 reconciliation started, -1 with err. */
int rrec_release(const struct rrec *k, const char *target, const char *const *drop, int ndrop,
                 long qty, char *err, size_t errlen);

/* Redis can no longer be trusted for a sale decided in `epoch`: MySQL
 * refused it because it holds fewer units than Redis believed (the floor),
 * or the COMMIT's outcome could not be learnt (MySQL went away mid-commit).
 * Giving the units back could count them twice, keeping them could lose
 * them; so the state (k->state and drop[]) is dropped and the reconcile
 * wait started, if it is still that epoch's. The reload then reads MySQL,
 * the truth, once in-flight sales are done. Returns 1 started, 0 not needed
 * (already lost or replaced), -1 with err. */
int rrec_distrust(const struct rrec *k, const char *epoch, const char *const *drop, int ndrop,
                  char *err, size_t errlen);

/* For GET /inventory/{sku}: 1 when the state is there, 0 when it is being
 * reconciled (*left_ms until the reload may run; the wait starts now if
 * nobody had noticed), -1 with err. */
int rrec_status(const struct rrec *k, long *left_ms, char *err, size_t errlen);

/* The epoch reply of a script as a C string (empty for nil). */
void rrec_epoch_copy(char out[RREC_EPOCH_MAX], const redisReply *r);

#endif
