"""The fault choreographies' plans (buyers, duration, rate) and the verdict
each cell is expected to reach, with why. Pure data: no stack, no I/O."""

FAULTS = ("pause", "crash", "failover", "restart", "reseed", "sigterm", "stall", "skew", "starve",
          "netdelay")

# Guards that take a lease (accept lock_ttl_ms); the others get a 400 for it.
LEASE_GUARDS = ("redis-lock", "segmented", "redlock", "lock-table", "etcd")
# Guards that keep the stock (or a part of it) in Redis: the audit's drift
# (Redis vs MySQL minus pending) is part of their verdict.
REDIS_STOCK_GUARDS = ("segmented", "redis-decr", "redis-stream")
# No guard across instances: every cell with buyers (or a holder) on one
# instance and buyers on another loses updates, whatever the fault.
NO_GUARD = ("none", "mutex")
NO_GUARD_WHY = ("not the fault: {g} has no guard across instances; the holder's long hold_ms on "
                "inventory-1 overlaps sales on inventory-2 and its write, computed from the stock it "
                "read, loses them. Use any other guard")

# Options other branches add: an invalid value of each must be refused
# (400) by a build that has it.
OPTION_PROBES = {"replicas_ack": 99, "fair": "not-a-bool"}

# Every cell: these buyers, this long (seconds), at this rate (req/s).
PLAN = {
    # pause: holder in at 1.0 (hold 2.5 s), paused at 2.2 for 4 s (> any lease
    # below: lock_ttl_ms 1000, a ZooKeeper session of a few s), resumed at 6.2
    # after its hold_ms is over, so it writes at once.
    "pause": {"duration": 10, "rate": 10, "buyers": [2], "stock": 100000},
    # crash: holder in at 1.0 (hold 5 s), killed at 1.5; lock_ttl_ms 2000.
    "crash": {"duration": 8, "rate": 10, "buyers": [2], "stock": 100000},
    # failover: replica stalled at 1.0, holder in at 1.3 (hold 6 s), master
    # killed at 1.8, replica resumed and promoted by Sentinel.
    "failover": {"duration": 12, "rate": 5, "buyers": [2], "stock": 100000},
    # restart: MariaDB down 2..4 s, then the Redis master down 7..9 s.
    "restart": {"duration": 13, "rate": 20, "buyers": [1, 2], "stock": 100000},
    # reseed: holder in on inventory-1 at 1.0 (hold 2 s), buyers on
    # inventory-1, the SKU reseeded (same stock) through inventory-2 at 1.5.
    "reseed": {"duration": 6, "rate": 10, "buyers": [1], "stock": 100000},
    # sigterm: holder in on inventory-1 at 1.0 (hold 1.5 s), buyers on both,
    # `stack stop inventory-1` (SIGTERM, graceful drain) at 1.5, started
    # again at 4.5.
    "sigterm": {"duration": 8, "rate": 20, "buyers": [1, 2], "stock": 100000},
    # stall: inventory-1 restarted with its guard's fault point armed; holder
    # in at 1.0 (hold 200 ms), the process stops itself right after the
    # lease check for STALL_PAUSE_MS[guard]; buyers on inventory-2.
    "stall": {"duration": 12, "rate": 10, "buyers": [2], "stock": 100000},
    # skew: inventory-1 restarted under libfaketime, its clocks (wall and
    # monotonic, its sleeps and timed waits) running at SKEW_RATE; holder in
    # at 1.0 (hold_ms SKEW_HOLD_MS of its own time); buyers on inventory-2.
    "skew": {"duration": 10, "rate": 10, "buyers": [2], "stock": 100000},
    # starve: holder in at 1.0 (hold 2500 ms), inventory-1's CPU quota cut to
    # 1 ms per second (a cgroup) from 1.5 to 5.5; buyers on inventory-2.
    "starve": {"duration": 9, "rate": 10, "buyers": [2], "stock": 100000},
    # netdelay: holder in at 1.0 (hold 2500 ms), what inventory-1 sends to
    # MySQL (to Redis for redis-lock) held NETDELAY_S from 1.5 to 4.5.
    "netdelay": {"duration": 10, "rate": 10, "buyers": [2], "stock": 100000},
}

# stall: how long the process stops after the check, per guard: past the
# lease (redlock's lock_ttl_ms 1000, etcd's 2000 plus its 0.5 s expiry
# tick, ZooKeeper's 4 s session plus its 0.5 s tick) by about 1.5 s, so a
# buyer has taken the lock and read the stock by then and its write still
# waits on the holder's row lock (buyers' lock_wait_ms 3000: a 3 s row-lock
# wait) when the holder wakes.
STALL_PAUSE_MS = {"redlock": 2500, "etcd": 4000, "zookeeper": 6500}
# The option (its environment twin) that arms each guard's fault point.
STALL_ENV = {"redlock": "LAB_FAULT_REDLOCK_PAUSE_AFTER_CHECK_MS",
             "etcd": "LAB_FAULT_ETCD_PAUSE_AFTER_CHECK_MS",
             "zookeeper": "LAB_FAULT_ZK_PAUSE_AFTER_CHECK_MS"}
# skew: the holder's clocks run at a quarter of real time: its hold_ms of
# 1000 takes 4 s, its lease renewals (every ttl/3 of its time) come 4/3 of
# a lease apart, and the validity it computes counts a quarter of the time
# that passed.
SKEW_RATE = 0.25
SKEW_HOLD_MS = 1000
# netdelay: one-way delay on inventory-1's link, longer than a lock_ttl_ms of
# 1000 and than what is left of lock-table's 3000 after the hold.
NETDELAY_S = 1.5


def netdelay_link(guard):
    """The link a netdelay cell slows: where the guard's lock lives
    (redis-lock: Redis; lock-table: MySQL) or, for the guards whose lock
    lives elsewhere, MySQL (their writes)."""
    return "redis" if guard == "redis-lock" else "mysql"



def expect(fault, guard, fields):
    """(expected 'held'|'broke', why) for one cell."""
    if fault in ("stall", "skew", "starve", "netdelay"):
        return expect_more(fault, guard, fields)
    fencing = fields.get("fencing") is True
    if guard in NO_GUARD and fault == "reseed":
        return "held", ("buyers and holder on inventory-1 only (mutex serializes them; none's buyers "
                        "at 10 req/s never overlap); the holder read the stock before the reseed, so "
                        "its write is refused by the row's seeds (503, nothing sold)")
    if guard in NO_GUARD and fault in ("pause", "failover", "sigterm", "restart"):
        if fault == "restart":
            return "broke", ("not the fault: {g} has no guard across instances; buyers on both "
                             "instances overlap (hold_ms 200 at 20 req/s) and lose updates. Use any "
                             "other guard").format(g=guard)
        return "broke", NO_GUARD_WHY.format(g=guard)
    if fault == "reseed":
        if guard == "redis-stream":
            return "held", ("the reseed waits for the SKU's unflushed sales and clears the ledger "
                            "with them; sales after it start the new seed; drift 0")
        if guard == "redis-decr":
            return "held", ("the reseed writes a new epoch and the row's reseed count (seeds) with "
                            "the new Redis stock; a sale decided on the old stock writes MySQL only "
                            "while the row has the seeds it was decided under: refused (503 "
                            "reseeded, nothing sold), its units not given to the new state; drift 0")
        if guard == "segmented":
            return "held", ("the reseed writes a new epoch; a sale decided in the old epoch gives its "
                            "units back only into that epoch, and MySQL's relative write keeps the "
                            "floor; drift 0 once settled")
        if guard in LEASE_GUARDS or guard in ("zookeeper",):
            return "held", ("the holder read the stock before the reseed: its write is refused "
                            "(503, the row's seeds moved on), nothing sold; exact")
        return "held", ("the reseed takes the row lock (waits for a holder's transaction) and "
                        "resets stock and ledger at once; later writes are relative or version-checked")
    if fault == "sigterm":
        why = ("graceful drain: inventory-1 stops accepting, answers queued requests 503, finishes "
               "the holder within its deadline, exits 0; buyers on inventory-2 go on; every answered "
               "sale is in the ledger, nothing stranded")
        if guard == "redis-stream":
            why += "; its unflushed stream entries are claimed by inventory-2 (pending 0, drift 0)"
        if guard == "redis-decr":
            why += "; no intent left behind (drift 0)"
        return "held", why
    if fault == "pause" and guard not in LEASE_GUARDS and guard != "zookeeper":
        if guard == "redis-stream":
            return "held", ("write-behind in one Redis script: a paused instance holds no lease; its "
                            "unflushed entries wait for it (or are claimed); drift 0 once settled")
        if guard == "redis-decr":
            return "held", ("no lease: the paused holder's decision stands in Redis as an intent; it "
                            "writes MySQL relatively (with the floor) when resumed; drift 0")
        return "held", (f"{guard} holds no lease that can run out: a paused holder keeps its row lock or "
                        "has its version-checked / relative write checked against what others sold")
    if fault == "pause" and guard == "segmented":
        return "held", ("the paused holder's segment lease (lock_ttl_ms 1000) runs out, but the buyers' "
                        "first pass takes a free segment (K = 10) without waiting, so nobody takes the "
                        "holder's segment and its write (same epoch) lands once; drift 0. segmented has "
                        "no fencing: with every segment busy a buyer would take the expired one and "
                        "the resumed holder would overwrite its write")
    if fault == "failover" and guard in ("redis-decr", "redis-stream", "segmented"):
        if fields.get("replicas_ack") and guard == "segmented":
            return "held", ("replicas_ack=1: each segment write waits (WAIT 1) for the replica before "
                            "MySQL is written; the stalled replica acknowledges none, so those units go "
                            "back into their segment and the sale answers 503, MySQL untouched. Every "
                            "segment write MySQL has is on the promoted replica: no answered sale "
                            "lost, no unit sold twice; drift 0")
        if fields.get("replicas_ack"):
            return "held", ("replicas_ack=1: a sale the stalled replica did not acknowledge is undone "
                            "and answered 503, so the promoted replica misses no answered sale; drift 0")
        if guard == "segmented":
            return "broke", ("the replica is asynchronous: the segment writes made while it lagged never "
                             "reached it, and segmented does not detect a promoted replica (only "
                             "redis-decr and redis-stream keep lab:replid): the promoted replica's "
                             "segments hold more than MySQL (drift > 0), units it will sell again, until "
                             "a floor refusal reconciles. replicas_ack=1 makes it hold (a segment write "
                             "no replica acknowledged is given back, 503); or run it on Redis without a "
                             "replica")
        if guard == "redis-decr":
            return "held", ("the replica is asynchronous and lost the decrements made while it lagged, "
                            "but redis-decr writes MySQL on the request path and its scripts see the "
                            "promotion (master_replid2 = the lab:replid they ran under): the SKU's "
                            "state is dropped and reloaded from MySQL after --redis-reload-wait (503 "
                            "meanwhile); drift 0")
        return "held", ("the promotion is detected (new generation) and the SKU reloaded from MySQL "
                        "minus pending (503 meanwhile); the sales answered while the replica lagged "
                        "were read by a flusher before the master died, so none is lost here. A sale "
                        "answered and not yet read by a flusher when the master dies IS lost (an "
                        "asynchronous replica): replicas_ack=1 closes that window")
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
        if guard == "redis-decr":
            return "held", ("killed between its Redis decision and its MySQL write: the intent passes its "
                            "deadline and the next sale of the SKU, or its audit, settles it (the "
                            "ledger tells whether the sale landed; if not, its units go back); drift 0")
        if guard == "redis-stream":
            return "held", "the killed instance's unflushed stream entries are claimed by the other's flusher"
        if guard in NO_GUARD:
            return "held", ("the holder dies before writing (nothing lost); buyers on inventory-2 alone at "
                            "10 req/s, hold_ms 20, one at a time: nothing overlaps")
        if guard not in LEASE_GUARDS:
            return "held", "MySQL rolls back the dead holder's transaction and frees its row lock"
        return "held", "the lock expires after its TTL (lock_ttl_ms): buyers sell again"
    if fault == "failover":
        if guard == "redlock":
            return "held", ("one of three masters restarted empty: the second buyer cannot reach a "
                            "quorum while the holder's lease stands on the other two; exact")
        if fields.get("replicas_ack"):
            return "held", ("WAIT 1 gets no acknowledgement from the stalled replica: the holder's lock "
                            "is refused, so the promoted replica holds no lock anybody relies on; exact")
        return "broke", ("the lock never reached the stalled replica; Sentinel promoted it, a second "
                         "buyer locked the same SKU: two holders, a lost update. replicas_ack=1 "
                         "(or redlock, or fencing) makes it hold")
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
            why += ("; with --redis-replica, Sentinel may promote the replica while the master is "
                    "away, and the stopped master then comes back as its replica (the stack waits "
                    "for the failover to end: started as a second master it granted the same "
                    "redis-lock lock as the promoted one, and lost updates; without that wait "
                    "fencing holds, replicas_ack: 1 only by refusing while no replica is linked)")
        return "held", why
    return "held", ""




def expect_more(fault, guard, fields):
    """The verdicts of the faults that decide between the lease guards."""
    fencing = fields.get("fencing") is True
    watchdog = fields.get("watchdog") is not False
    if fault == "stall":
        if fencing:
            return "held", ("the buyer's fencing token claims the row before its read; the claim "
                            "waits behind the stopped holder's uncommitted write, so the buyer reads "
                            "after the holder's COMMIT (or, once the holder moved the row's version, "
                            "its write is refused: 409 fenced); both sales counted, exact")
        why = ("the holder passed its lease check, then its whole process stopped (the fault point, "
               "{p} ms) with its write not committed: {what} ran out, a buyer on inventory-2 took "
               "the lock and read the stock without the holder's write, and its own write waited on "
               "the row lock; the holder woke and committed without another look, then the buyer "
               "wrote the stock it had read: a lost update. No check closes this window")
        what = {"redlock": "its 1 s lease on the masters", "etcd": "its 2 s etcd lease",
                "zookeeper": "its ZooKeeper session (4 s)"}.get(guard, "its lease")
        why = why.format(p=STALL_PAUSE_MS.get(guard, 0), what=what)
        if guard == "redlock":
            return "broke", why + "; Redlock cannot fence (its masters share no counter)"
        return "broke", why + "; fencing=true closes it"
    if fault == "skew":
        if guard == "zookeeper":
            return "held", ("the holder's clock runs at 1/4 (its hold takes 4 s, its client pings "
                            "every 4/3 of a 4 s session): the session may or may not lapse before "
                            "its check (measured: the holder sold and buyers waited, a close call), "
                            "but that check asks the server, not the holder's clock: a lapsed "
                            "session answers 503 lease_expired, a live one is still the only "
                            "holder")
        if watchdog:
            return "held", ("the holder's clock runs at 1/4, so its watchdog renews every 4/3 of a "
                            "lease: the lease runs out on the server and a buyer takes the lock, "
                            "but the next renewal finds the lease gone and marks it lost; the "
                            "holder, done with its hold 4 s later, is refused by its own check "
                            "(503 lease_expired), nothing written")
        if fencing:
            return "held", ("no watchdog and a clock at 1/4: the holder believes its lease has "
                            "3/4 of its time left when a buyer already took the lock; its write "
                            "carries the older token: 409 fenced, nothing written")
        return "broke", ("no watchdog and a clock at 1/4: the validity the holder computes counts "
                         "a quarter of the time that passed, so it writes 4 s after taking a 2 s "
                         "lease that a buyer took over at 2 s: a lost update. A lease on the "
                         "holder's clock assumes bounded drift; the watchdog, a server-side "
                         "check (zookeeper) or fencing holds")
    if fault == "netdelay":
        return expect_netdelay(guard, fencing)
    # starve
    if guard in ("redlock", "etcd"):
        return "held", ("starved (1 ms of CPU per second), the holder's renewals come late or "
                        "not at all; if the lease runs out a buyer sells, but the holder's own "
                        "check before the write sees it (the monotonic clock ran on): 503 "
                        "lease_expired, nothing written")
    if guard == "zookeeper":
        return "held", ("starved, the ZooKeeper client still pings within the 4 s session (a "
                        "ping needs microseconds, the quota gives 1 ms a second), so the holder "
                        "keeps its lock and the buyers wait (503 lock_timeout); its confirmation "
                        "before the COMMIT counts only if it came back within a third of the "
                        "session (measured both ways: the holder sold, or a 1.4 s confirmation "
                        "answered 503 lease_expired and nothing was written)")
    if guard != "redis-lock":
        return "held", (f"not a cell: {guard} has no lease watchdog to starve (a starved holder "
                        "is a slow one: see pause)")
    if fencing:
        return "held", ("the starved watchdog cannot renew the 300 ms lease: a buyer takes the "
                        "lock with a newer token, and the holder's late write is refused (409 "
                        "fenced), nothing written")
    return "broke", ("the starved watchdog cannot renew the 300 ms lease in time (1 ms of CPU "
                     "per second): a buyer takes the lock and sells, and the holder, with no "
                     "check before its write, writes the stock it read: a lost update. fencing "
                     "holds")


def expect_netdelay(guard, fencing):
    """A slow link from the holder: it breaks a lock that lives at the far
    end of that link, not one kept alive over another."""
    if guard in ("redlock", "etcd", "zookeeper"):
        return "held", ("only inventory-1's MySQL link is slow (1.5 s): its lease (session) is "
                        "kept alive over its own link by the watchdog (the client's pings), so "
                        "nobody else takes the lock; the holder's writes land late but alone, "
                        "and its check before the COMMIT passes rightly; buyers wait (503 "
                        "lock_timeout)")
    where = {"redis-lock": ("Redis", "its watchdog's renewals reach Redis 1.5 s late, after "
                                     "the 1 s lease ran out"),
             "lock-table": ("MySQL", "its lock row (lock_ttl_ms 3000, no renewal) expires "
                                     "while its delayed writes are on their way")}.get(guard)
    if where is None:
        return "held", f"not a cell: {guard} takes no lease on a link that can be slowed"
    if fencing:
        return "held", (f"{where[1]}; a buyer takes the lock with a newer token, and the holder's "
                        "late write is refused (409 fenced), nothing written")
    return "broke", (f"the holder's link to {where[0]} is slow: {where[1]}; a buyer takes the "
                     "lock and sells, and the holder, with no check before its write, writes "
                     "the stock it read: a lost update. fencing=true holds")
