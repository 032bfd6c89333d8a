/* Per-process FIFO gate by key: one contender per key per process. Threads
 * of one process that want the same key queue on a local gate and only the
 * gate's holder contends on the backend; waiters wait by deadline on a
 * condvar. A holder with a waiter behind it may pass what it holds (an
 * opaque payload the guard copies in: a lease, a lock row's owner) to that
 * waiter, at most run_limit times in a row; then it releases on the backend
 * and the next holder yields, so another process waiting on the backend
 * takes its turn. A slot belongs to one key while used; a key whose slot is
 * taken contends without a gate. Each guard keeps its own table, run limit
 * and the meaning of the payload. */
#ifndef LAB_KEY_GATE_H
#define LAB_KEY_GATE_H

#include "stock/keys.h"

#include <pthread.h>
#include <stddef.h>

#define KEY_GATE_SLOTS 64
#define KEY_GATE_PAYLOAD_MAX 512   /* bytes a holder can pass on */

struct key_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char key[KEYS_MAX];       /* "" = free slot */
    int held, waiters;
    int run;                  /* payloads passed on in a row */
    int yield;                /* the next holder yields before its first try */
    size_t kept;              /* bytes of `payload` passed on, 0 = none */
    unsigned char payload[KEY_GATE_PAYLOAD_MAX];
};

struct key_gate_table {
    int run_limit;            /* passes in a row before the next holder yields */
    struct key_gate gate[KEY_GATE_SLOTS];
};

/* A static table: `static struct key_gate_table t = KEY_GATE_TABLE_INIT(32);` */
#define KEY_GATE_TABLE_INIT(run)                                                          \
    {                                                                                     \
        .run_limit = (run), .gate = {                                                     \
            [0 ... KEY_GATE_SLOTS - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER,                \
                                          .cv = PTHREAD_COND_INITIALIZER}                 \
        }                                                                                 \
    }

/* Enter key's gate by deadline (util_now clock). Returns the gate (held),
 * or NULL to contend without one (slot used by another key) or with
 * *timeout set when the deadline passed while queued. *yield: give other
 * processes a turn first. *inherited: the bytes of the payload the last
 * holder passed on (copied into inherit, at most cap), 0 when none; the new
 * holder owns what it stands for (to use or release). A waiter woken with
 * the gate free always becomes its holder, so a passed payload always has
 * an owner. Cannot fail otherwise. */
struct key_gate *key_gate_enter(struct key_gate_table *t, const char *key, double deadline,
                                int *timeout, int *yield, void *inherit, size_t cap,
                                size_t *inherited);

/* Leave the gate to a queued thread together with len bytes of payload
 * (what the holder still holds on the backend): 1 passed (gate left), 0
 * not (no waiter, the run is at run_limit, or len is 0 or over
 * KEY_GATE_PAYLOAD_MAX: release on the backend and key_gate_leave, which
 * makes the next holder yield at the run's end). */
int key_gate_pass(struct key_gate_table *t, struct key_gate *g, const void *payload,
                  size_t len);

/* Leave the gate with nothing passed on. NULL (no gate) does nothing. */
void key_gate_leave(struct key_gate_table *t, struct key_gate *g);

#endif
