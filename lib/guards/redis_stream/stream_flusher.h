/* The redis-stream flusher: one thread per inventory instance that moves
 * the sales stream (keys.h KEYS_SALES_STREAM) into MySQL.
 *
 * It reads through the consumer group KEYS_SALES_GROUP as consumer
 * <instance>: first its own pending entries (a restart), then new ones
 * (XREADGROUP, up to `batch`, BLOCK block_ms), and now and then takes over
 * entries another consumer read and left unacknowledged for claim_idle_ms
 * (XAUTOCLAIM: that instance died). Each batch is ONE MySQL transaction: a
 * multi-row ledger insert, then one stock update per SKU by the units of
 * the rows actually inserted (a replay after a lost COMMIT reply or a claim
 * inserts nothing: the ledger's unique order_id), never below 0. Only after
 * the COMMIT are the entries acknowledged, deleted from the stream and
 * taken off the per-SKU pending counts, in one script: an entry two
 * flushers wrote is counted off once. MySQL or Redis failing: the batch is
 * retried after a bounded backoff, sales keep being answered from Redis,
 * the stream backs up and drains when MySQL returns. */
#ifndef LAB_STREAM_FLUSHER_H
#define LAB_STREAM_FLUSHER_H

#include <stddef.h>

struct db_conf;
struct rconn_endpoint;

#define SFLUSH_BATCH_MAX 1000
/* Sales per transaction at most (an entry carries one sale or a group's:
 * an entry that would not fit waits for the next batch). */
#define SFLUSH_SALES_MAX 4096
/* How long a flusher's "about to commit" mark holds (KEYS_SALES_FLUSHING):
 * longer than a batch's MySQL transaction takes; a flusher that dies
 * marked delays audits' snapshots this long at most. */
#define SFLUSH_MARK_MS 10000
/* An audit's hold on commits (KEYS_SALES_AUDIT_HOLD) lasts at most this;
 * a flusher waits for it up to SFLUSH_HOLD_WAIT_MS, then retries the batch. */
#define SFLUSH_AUDIT_HOLD_MS 500
#define SFLUSH_HOLD_WAIT_MS 1000

/* The guard's option rows (guard_redis_stream.c) land here. */
struct sflush_conf {
    long batch;                /* entries per transaction */
    long block_ms;             /* XREADGROUP BLOCK */
    long claim_idle_ms;        /* XAUTOCLAIM min-idle */
    long backoff_max_ms;       /* longest wait between failed attempts */
    long hold_ms;              /* tests: wait this long between read and write */
    long linger_ms;            /* after a batch that was not full: let the
                                * next one gather this long */
    int enabled;               /* 0: no flusher thread in this instance */
    long order_ttl_ms;         /* the sale script's order memory (not ours) */
    long coalesce_max;         /* the guard's: sales of a SKU per script call */
};

/* Start the thread (when conf->enabled and db is set). Redis or MySQL down
 * is not a failure: the thread retries. Returns 0, or -1 with err (thread
 * or memory). conf and db must outlive the thread. */
int sflush_start(const struct sflush_conf *conf, const struct db_conf *db,
                 struct rconn_endpoint *ep, const char *instance, char *err, size_t errlen);
/* Stop and join the thread (within about block_ms plus one MySQL
 * transaction); a no-op when not started. */
void sflush_stop(void);

/* The instance name given to sflush_start ("" before): written into each
 * sale as the instance that answered it. */
const char *sflush_instance(void);

/* Tests only: the pause set by the environment variable `name`, one of
 * LAB_TEST_STREAM_MARK_PAUSE_MS (a flusher, between its pre-COMMIT mark
 * and its COMMIT), LAB_TEST_STREAM_UNDO_PAUSE_MS (a replicas_ack sale,
 * before its undo) and LAB_TEST_STREAM_RELOAD_PAUSE_MS (a reload of a lost
 * stock key, between its MySQL read and its read of the queued units):
 * 1..60000 ms, else 0 (unset: no pause). They hold one thread at a named
 * point so a test can make the interleaving it checks. */
long sflush_test_pause_ms(const char *name);
/* Sleep that pause (nothing when 0). */
void sflush_test_pause(const char *name);

/* Mirror the flusher's counters into lib/base/metrics. */
void sflush_export_metrics(void);

#endif
