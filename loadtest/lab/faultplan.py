"""The fault choreographies' plans (buyers, duration, rate) and the verdict
each cell is expected to reach, with why. Pure data: no stack, no I/O."""

FAULTS = ("pause", "crash", "failover", "restart")

# Options other branches add: an invalid value of each must be refused
# (400) by a build that has it.
OPTION_PROBES = {"replicas_ack": 99, "fair": "not-a-bool"}

# Every cell: these buyers, this long (seconds), at this rate (req/s).
PLAN = {
    # pause: holder in at 1.0 (hold 2.5 s), paused at 1.6 for 4 s (> any lease
    # below: lock_ttl_ms 1000, a ZooKeeper session of a few s), resumed at 5.6
    # after its hold_ms is over, so it writes at once.
    "pause": {"duration": 10, "rate": 10, "buyers": [2], "stock": 100000},
    # crash: holder in at 1.0 (hold 5 s), killed at 1.5; lock_ttl_ms 2000.
    "crash": {"duration": 8, "rate": 10, "buyers": [2], "stock": 100000},
    # failover: replica stalled at 1.0, holder in at 1.3 (hold 6 s), master
    # killed at 1.8, replica resumed and promoted by Sentinel.
    "failover": {"duration": 12, "rate": 5, "buyers": [2], "stock": 100000},
    # restart: MariaDB down 2..4 s, then the Redis master down 7..9 s.
    "restart": {"duration": 13, "rate": 20, "buyers": [1, 2], "stock": 100000},
}


def expect(fault, guard, fields):
    """(expected 'held'|'broke', why) for one cell."""
    fencing = fields.get("fencing") is True
    if fault == "pause":
        if fencing:
            return "held", ("the resumed holder's write carries an older token than the buyer's: "
                            "refused (409 fenced, counted), audit exact")
        if guard == "redlock":
            return "held", ("redlock checks its lease validity right before the write: the resumed "
                            "holder answers 503 lease_expired and writes nothing. A pause AFTER that "
                            "check (between check and write) would still write: Redlock has no fence")
        if guard == "etcd":
            return "held", ("etcd's holder checks its lease on its own monotonic clock right before "
                            "the write: paused past it, it answers 503 lease_expired and writes "
                            "nothing. A pause AFTER that check would still write: use fencing")
        if guard == "zookeeper":
            return "held", ("right before its COMMIT the holder asks the server (sync + exists of its "
                            "lock node, owner = its session), never its client's cached state: the "
                            "session expired while paused, so the resumed holder answers 503 "
                            "lease_expired and writes nothing. A pause AFTER that confirmation (before "
                            "the COMMIT leaves) would still write: only fencing closes that")
        return "broke", ("lost update: the lease ran out while the holder was paused, a buyer on the "
                         "other instance sold, and the holder wrote the stock it had read")
    if fault == "crash":
        if fields.get("acquire") == "setnx-then-expire":
            return "broke", ("killed between SETNX and PEXPIRE: a lock without TTL; every buyer waits "
                             "lock_wait_ms and gives up (bounded, never hung); no sale until someone "
                             "deletes the key")
        if guard == "zookeeper":
            return "held", "the ephemeral node goes with the session: buyers sell after the session timeout"
        if guard == "lock-table":
            return "held", "the lock row is taken over after its expiry (lock_ttl_ms): buyers sell again"
        if guard == "redlock":
            return "held", "the lease expires on every master after lock_ttl_ms: buyers sell again"
        if guard == "etcd":
            return "held", "nobody keeps the lease alive: etcd expires it and deletes the lock key after lock_ttl_ms"
        return "held", "the lock expires after its TTL (lock_ttl_ms): buyers sell again"
    if fault == "failover":
        if guard == "redlock":
            return "held", ("one of three masters restarted empty: the second buyer cannot reach a "
                            "quorum while the holder's lease stands on the other two; exact")
        if fields.get("replicas_ack"):
            return "held", ("WAIT 1 gets no acknowledgement from the stalled replica: the holder's lock "
                            "is refused, so the promoted replica holds no lock anybody relies on; exact")
        return "broke", ("the lock never reached the stalled replica; Sentinel promoted it, a second "
                         "buyer locked the same SKU: two holders, a lost update")
    if fault == "restart":
        why = "0 oversold, 0 lost; 503 backend_unavailable while MariaDB or Redis is away"
        if guard == "lock-table":
            why += ("; a lock row whose release failed while MariaDB was away blocks buyers until "
                    "it expires (lock_ttl_ms)")
        if guard in ("redis-decr", "segmented"):
            why += ("; after Redis lost the stock, sales stay refused for --redis-reload-wait "
                    "(12 s by default) before the stock is reloaded from MySQL, so no sale may "
                    "come back within the run")
        if guard in ("redis-lock", "redis-decr", "segmented"):
            why += "; with --redis-replica, Sentinel may promote the replica while the master is away"
        return "held", why
    return "held", ""


