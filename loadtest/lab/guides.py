"""What the report says about each guard beyond its figures: what it needs,
when to use it, how it works (the statements it runs), the seed passage it
comes from, what breaks it and the file that implements it. The runner
copies the entries of the guards it saw into results.json ("guards"), so
the renderers read them from there. Keep in step with README.md, "Guards"."""

GUIDES = {
    "none": {
        "needs": "MySQL",
        "use_when": "never: the baseline that shows the race",
        "how": ["Reads the stock row, computes stock - qty in C, writes it back.",
                "Two requests that both read 800 both write 799: one sale is lost to the stock row."],
        "statements": "SELECT stock FROM inventory WHERE sku=?\nUPDATE inventory SET stock=? WHERE sku=?\nINSERT INTO ledger ...",
        "seed": "the seeds' \"item 799 sold twice\"",
        "breaks": "any concurrency, even on one instance",
        "code": "lib/guards/guard_none.c",
    },
    "mutex": {
        "needs": "MySQL",
        "use_when": "one instance only (a pthread mutex orders the threads of one process)",
        "how": ["`none` inside a pthread mutex striped per SKU.",
                "A second instance has its own mutex: the race is back."],
        "statements": "lock(stripe(sku)); SELECT stock ...; UPDATE inventory SET stock=? ...; unlock",
        "seed": "the seeds' point about `synchronized`",
        "breaks": "two or more instances",
        "code": "lib/guards/guard_mutex.c",
    },
    "optimistic": {
        "needs": "MySQL",
        "use_when": "low contention per SKU; retries are cheap",
        "how": ["Reads stock and version, writes only if the version is unchanged.",
                "A miss retries with jittered backoff, at most --max-retries, then 503 retry_exhausted."],
        "statements": "SELECT stock, version FROM inventory WHERE sku=?\n"
                      "UPDATE inventory SET stock=?, version=version+1 WHERE sku=? AND version=?",
        "seed": "compare-and-set on a version column",
        "breaks": "nothing in correctness; collapses into retries on one hot row",
        "code": "lib/guards/guard_optimistic.c",
    },
    "for-update": {
        "needs": "MySQL",
        "use_when": "the read-modify-write must stay in application code",
        "how": ["Holds the row lock from the read to the commit.",
                "Deadlocks and lock-wait timeouts are retried a bounded number of times."],
        "statements": "BEGIN; SELECT stock FROM inventory WHERE sku=? FOR UPDATE;\n"
                      "UPDATE inventory SET stock=? WHERE sku=?; INSERT INTO ledger ...; COMMIT",
        "seed": "pessimistic locking in the database",
        "breaks": "nothing in correctness; one hot row serialises every instance",
        "code": "lib/guards/guard_for_update.c",
    },
    "conditional-update": {
        "needs": "MySQL",
        "use_when": "the default choice: one statement checks and writes",
        "how": ["No window at all: the check and the write are one statement.",
                "0 rows changed means out of stock."],
        "statements": "UPDATE inventory SET stock=stock-? WHERE sku=? AND stock>=?\nINSERT INTO ledger ...",
        "seed": "the seeds' fix: let the database decide",
        "breaks": "nothing found; bounded by one durable commit per sale",
        "code": "lib/guards/guard_conditional_update.c",
    },
    "batched-update": {
        "needs": "MySQL",
        "use_when": "one very hot SKU and MySQL must stay the only system of record",
        "how": ["Concurrent deductions of a SKU in one instance queue; the first leads.",
                "The leader runs one transaction for the batch: row lock, one conditional UPDATE of the sum, one multi-row ledger insert, one COMMIT.",
                "Each member gets its own answer; a batch bigger than the stock is split, never oversold."],
        "statements": "BEGIN; SELECT stock ... FOR UPDATE;\n"
                      "UPDATE inventory SET stock=stock-SUM WHERE sku=? AND stock>=SUM;\n"
                      "INSERT INTO ledger SELECT ... FROM JSON_TABLE(?); COMMIT",
        "seed": "AliSQL's inventory hint (seed material in issue 11)",
        "breaks": "nothing in correctness; a failed batch fails all its members (503, nothing written)",
        "code": "lib/guards/guard_batched_update.c",
    },
    "redis-lock": {
        "needs": "Redis (+ Sentinel for failover)",
        "use_when": "a lock is needed across instances and Redis is already there; add fencing against pauses",
        "how": ["Redisson-style reentrant lock per SKU: unique token, Lua release of our own lock only, a watchdog that renews every ttl/3.",
                "Waiting is bounded by lock_wait_ms (503 lock_timeout).",
                "fencing=true: a counter INCR'd at each grant; MySQL refuses an older token (409 fenced).",
                "replicas_ack=N: WAIT N after the grant, so a failover cannot promote a replica without the lock."],
        "statements": "EVAL acquire (HSET lock:inventory:{sku} token 1, PEXPIRE ttl)\n"
                      "... read-modify-write in MySQL ...\nEVAL release (delete only our token; PUBLISH)",
        "seed": "the seeds' mistakes: SETNX without TTL, DEL of another's lock (the ABC problem)",
        "breaks": "a holder paused past its lease (lost update) without fencing; a failover before the lock reached the replica without replicas_ack",
        "code": "lib/guards/guard_redis_lock.c",
    },
    "segmented": {
        "needs": "Redis",
        "use_when": "a hot SKU whose stock can be split into K independent parts",
        "how": ["Stock split over K Redis keys, one lock each.",
                "A deduction starts at a random segment and walks on past busy or empty ones; never spans segments."],
        "statements": "lock seg:{sku}:i; GET; DECRBY; unlock; UPDATE inventory ...; INSERT INTO ledger ...",
        "seed": "segment locks (ConcurrentHashMap style) for a hot SKU",
        "breaks": "nothing in correctness; a buyer may see 409 while another segment holds fewer units than qty",
        "code": "lib/guards/guard_segmented.c",
    },
    "redis-decr": {
        "needs": "Redis",
        "use_when": "high throughput with Redis as the gate and MySQL following",
        "how": ["One Lua script checks and decrements stock:{sku}; the sale is then written to MySQL.",
                "If MySQL refuses, the units go back to Redis (503).",
                "After Redis lost its data, sales answer 503 for --redis-reload-wait before reloading from MySQL."],
        "statements": "EVAL if stock>=qty then DECRBY ... end\nUPDATE inventory ...; INSERT INTO ledger ...",
        "seed": "decide in the kv store",
        "breaks": "nothing found; Redis restarts cost a reload wait",
        "code": "lib/guards/guard_redis_decr.c",
    },
    "redlock": {
        "needs": "3 independent Redis masters",
        "use_when": "the lock must survive losing a minority of Redis servers",
        "how": ["The lock is taken on K masters; it holds when a quorum accepted within the lease's validity.",
                "Right before the MySQL write the holder checks the validity: expired answers 503 lease_expired.",
                "No fencing: the masters share no counter (Kleppmann's point)."],
        "statements": "SET lock NX PX ttl on each master (50 ms timeouts); quorum K/2+1;\n"
                      "check validity; MySQL write; release everywhere",
        "seed": "Redis' Redlock and Kleppmann's critique",
        "breaks": "a pause between the validity check and the write (no fence)",
        "code": "lib/guards/guard_redlock.c",
    },
    "lock-table": {
        "needs": "MySQL",
        "use_when": "a cross-instance lock without another server",
        "how": ["Inserts a row into lock_table (unique lock_name); deletes it to release.",
                "An expired row (lock_ttl_ms) is taken over; fencing uses the row's AUTO_INCREMENT id."],
        "statements": "INSERT INTO lock_table (lock_name, expires_at) ...\n... read-modify-write ...\nDELETE FROM lock_table WHERE ...",
        "seed": "a database row as the lock",
        "breaks": "a holder slower than lock_ttl_ms loses its row to the next buyer (without fencing)",
        "code": "lib/guards/guard_lock_table.c",
    },
    "redis-stream": {
        "needs": "Redis (AOF, fsync always) + MySQL behind",
        "use_when": "the hottest sales: answer from Redis, write MySQL in batches behind",
        "how": ["One Lua script: idempotency by order_id, check-and-decrement, XADD to lab:sales.",
                "A flusher per instance writes batches of up to 500 to MySQL in one transaction.",
                "Exact once drained; the audit reports the unflushed tail as pending."],
        "statements": "EVAL (SISMEMBER order; DECRBY sstock:{sku}; XADD lab:sales ...)\n"
                      "flusher: XREADGROUP; BEGIN; INSERT INTO ledger ...; UPDATE inventory ...; COMMIT; XACK",
        "seed": "seed 001: decide in the kv store, write the database later through a queue",
        "breaks": "nothing found; Redis is the system of record until the flush",
        "code": "lib/guards/guard_redis_stream.c",
    },
    "zookeeper": {
        "needs": "ZooKeeper",
        "use_when": "FIFO fairness and a lock that goes with a crashed holder's session",
        "how": ["An ephemeral-sequential node per attempt; the lowest holds; each waiter watches only its predecessor.",
                "Before the write the holder checks its session is connected (503 lease_expired otherwise).",
                "fencing=true makes the write conditional on the node's sequence number."],
        "statements": "create -e -s /locks/inventory/{sku}/lock-<id>-\n... read-modify-write ...\ndelete node",
        "seed": "the seeds' third lock family (Curator's InterProcessMutex)",
        "breaks": "a pause past the session timeout may write before the expiry is seen (without fencing)",
        "code": "lib/guards/guard_zookeeper.c",
    },
}


def guide(name):
    """The guide of a guard (an unknown one gets '?' fields)."""
    return GUIDES.get(name, {"needs": "?", "use_when": "?", "how": [], "statements": "",
                             "seed": "", "breaks": "", "code": ""})
