"""The fault choreographies' plans (buyers, duration, rate) and the verdict
each cell is expected to reach, with why: a table of fault x capability
(VERDICTS), the capabilities being the guard's own (GET /guards, derived
from its fields and hooks in lib/guards/core/guard_doc.c; lab.guardinfo),
plus the cell's option values. No stack, no I/O here."""

from . import guardinfo

FAULTS = ("pause", "crash", "failover", "restart", "reseed", "sigterm", "stall", "skew", "starve",
          "netdelay", "hold-crash", "hold-sigterm", "hold-reseed")
# The faults of a holds cell (lab.holds: reserve, pay in time / late /
# never, resale), injected between the reserve round and the confirms.
HOLD_FAULTS = ("hold-crash", "hold-sigterm", "hold-reseed")

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
    # hold-*: a holds cell (lab.holds) of `buyers` buyers of `stock` units,
    # ttl_ms 1500, 70% pay, 10% late, round-robin over both instances; once
    # every reserve is answered (the holds live), inventory-1 is killed
    # (SIGKILL) / stopped (SIGTERM, drained) / the SKU reseeded to the same
    # stock through inventory-2, and everything after goes to inventory-2;
    # inventory-1 is started again after the audit.
    "hold-crash": {"buyers": 80, "stock": 40, "ttl_ms": 1500, "pay_pct": 70, "late_pct": 10},
    "hold-sigterm": {"buyers": 80, "stock": 40, "ttl_ms": 1500, "pay_pct": 70, "late_pct": 10},
    "hold-reseed": {"buyers": 80, "stock": 40, "ttl_ms": 1500, "pay_pct": 70, "late_pct": 10},
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



def facts(guard, fields):
    """What the table looks at: the guard's capabilities, two derived from
    them, and the cell's option values."""
    c = guardinfo.caps(guard)
    f = dict(c)
    # a lock that runs out by itself: a lease, or a session checked before the write
    f["expiring_lock"] = bool(c.get("lease") or (c.get("lock") and c.get("checks_lease_before_write")))
    f["fencing_on"] = fields.get("fencing") is True
    f["watchdog_on"] = fields.get("watchdog") is not False
    f["replicas_ack_on"] = bool(fields.get("replicas_ack"))
    f["setnx_acquire"] = fields.get("acquire") == "setnx-then-expire"
    return f


# What runs out while a stalled holder sleeps, by where its lock lives.
LEASE_WHAT = {"redis-quorum": "its 1 s lease on the masters", "etcd": "its 2 s etcd lease",
              "zookeeper": "its ZooKeeper session (4 s)"}

NO_GUARD_WHY = ("not the fault: {g} has no guard across instances; the holder's long hold_ms on "
                "inventory-1 overlaps sales on inventory-2 and its write, computed from the stock it "
                "read, loses them. Use any other guard")
STALL_WHY = ("the holder passed its lease check, then its whole process stopped (the fault point, "
             "{p} ms) with its write not committed: {what} ran out, a buyer on inventory-2 took "
             "the lock and read the stock without the holder's write, and its own write waited on "
             "the row lock; the holder woke and committed without another look, then the buyer "
             "wrote the stock it had read: a lost update. No check closes this window")
CHECKERS = ("redis-quorum", "etcd", "zookeeper")   # lock homes whose holder checks before the write
REDIS_LOCK = {"lock_home": "redis", "lock": True}   # a whole-SKU lock in Redis

# (fault, when, verdict, why): the first row of the cell's fault whose
# `when` holds decides. `when` maps a fact (facts()) to the value it must
# have: a bool, a string, or a tuple of strings. {g} in why is the guard,
# {p} its stall pause (STALL_PAUSE_MS), {what} what ran out (LEASE_WHAT).
VERDICTS = [
    ("reseed", {"safe_across_instances": False}, "held",
     "buyers and holder on inventory-1 only (mutex serializes them; none's buyers at 10 req/s never "
     "overlap); the holder read the stock before the reseed, so its write is refused by the row's "
     "seeds (503, nothing sold)"),
    ("restart", {"safe_across_instances": False}, "broke",
     "not the fault: {g} has no guard across instances; buyers on both instances overlap (hold_ms "
     "200 at 20 req/s) and lose updates. Use any other guard"),
    ("pause", {"safe_across_instances": False}, "broke", NO_GUARD_WHY),
    ("failover", {"safe_across_instances": False}, "broke", NO_GUARD_WHY),
    ("sigterm", {"safe_across_instances": False}, "broke", NO_GUARD_WHY),

    ("reseed", {"write_behind": True}, "held",
     "the reseed waits for the SKU's unflushed sales and clears the ledger with them; sales after "
     "it start the new seed; drift 0"),
    ("reseed", {"settles_intents": True}, "held",
     "the reseed writes a new epoch and the row's reseed count (seeds) with the new Redis stock; a "
     "sale decided on the old stock writes MySQL only while the row has the seeds it was decided "
     "under: refused (503 reseeded, nothing sold), its units not given to the new state; drift 0"),
    ("reseed", {"redis_stock": True}, "held",
     "the reseed writes a new epoch; a sale decided in the old epoch gives its units back only into "
     "that epoch, and MySQL's relative write keeps the floor; drift 0 once settled"),
    ("reseed", {"expiring_lock": True}, "held",
     "the holder read the stock before the reseed: its write is refused (503, the row's seeds moved "
     "on), nothing sold; exact"),
    ("reseed", {}, "held",
     "the reseed takes the row lock (waits for a holder's transaction) and resets stock and ledger "
     "at once; later writes are relative or version-checked"),

    ("sigterm", {}, "held",
     "graceful drain: inventory-1 stops accepting, answers queued requests 503, finishes the holder "
     "within its deadline, exits 0; buyers on inventory-2 go on; every answered sale is in the "
     "ledger, nothing stranded"),

    ("pause", {"expiring_lock": False, "write_behind": True}, "held",
     "write-behind in one Redis script: a paused instance holds no lease; its unflushed entries "
     "wait for it (or are claimed); drift 0 once settled"),
    ("pause", {"expiring_lock": False, "settles_intents": True}, "held",
     "no lease: the paused holder's decision stands in Redis as an intent; it writes MySQL "
     "relatively (with the floor) when resumed; drift 0"),
    ("pause", {"expiring_lock": False}, "held",
     "{g} holds no lease that can run out: a paused holder keeps its row lock or has its "
     "version-checked / relative write checked against what others sold"),
    ("pause", {"redis_stock": True}, "held",
     "the paused holder's segment lease (lock_ttl_ms 1000) runs out, but the buyers' first pass "
     "takes a free segment (K = 10) without waiting, so nobody takes the holder's segment and its "
     "write (same epoch) lands once; drift 0. segmented has no fencing: with every segment busy a "
     "buyer would take the expired one and the resumed holder would overwrite its write"),

    ("failover", {"redis_stock": True, "lease": True, "replicas_ack_on": True}, "held",
     "replicas_ack=1: each segment write waits (WAIT 1) for the replica before MySQL is written; "
     "the stalled replica acknowledges none, so those units go back into their segment and the "
     "sale answers 503, MySQL untouched. Every segment write MySQL has is on the promoted replica: "
     "no answered sale lost, no unit sold twice; drift 0"),
    ("failover", {"redis_stock": True, "replicas_ack_on": True}, "held",
     "replicas_ack=1: a sale the stalled replica did not acknowledge is undone and answered 503, so "
     "the promoted replica misses no answered sale; drift 0"),
    ("failover", {"redis_stock": True, "lease": True}, "broke",
     "the replica is asynchronous: the segment writes made while it lagged never reached it, and "
     "segmented does not detect a promoted replica (only redis-decr and redis-stream keep "
     "lab:replid): the promoted replica's segments hold more than MySQL (drift > 0), units it will "
     "sell again, until a floor refusal reconciles. replicas_ack=1 makes it hold (a segment write "
     "no replica acknowledged is given back, 503); or run it on Redis without a replica"),
    ("failover", {"redis_stock": True, "settles_intents": True}, "held",
     "the replica is asynchronous and lost the decrements made while it lagged, but redis-decr "
     "writes MySQL on the request path and its scripts see the promotion (master_replid2 = the "
     "lab:replid they ran under): the SKU's state is dropped and reloaded from MySQL after "
     "--redis-reload-wait (503 meanwhile); drift 0"),
    ("failover", {"redis_stock": True}, "held",
     "the promotion is detected (new generation) and the SKU reloaded from MySQL minus pending (503 "
     "meanwhile); the sales answered while the replica lagged were read by a flusher before the "
     "master died, so none is lost here. A sale answered and not yet read by a flusher when the "
     "master dies IS lost (an asynchronous replica): replicas_ack=1 closes that window"),

    ("pause", {"fencing_on": True}, "held",
     "the resumed holder's write carries an older token than the buyer's: refused (409 fenced, "
     "counted), audit exact"),
    ("pause", {"lock_home": "redis-quorum"}, "held",
     "redlock checks its lease validity right before the write: the resumed holder answers 503 "
     "lease_expired and writes nothing. A pause AFTER that check (between check and write) would "
     "still write: Redlock has no fence"),
    ("pause", {"lock_home": "etcd"}, "held",
     "etcd's holder checks its lease on its own monotonic clock right before the write: paused past "
     "it, it answers 503 lease_expired and writes nothing. A pause AFTER that check would still "
     "write: use fencing"),
    ("pause", {"lock_home": "zookeeper"}, "held",
     "right before its COMMIT the holder asks the server (sync + exists of its lock node, owner = "
     "its session), never its client's cached state: the session expired while paused, so the "
     "resumed holder answers 503 lease_expired and writes nothing. A pause AFTER that confirmation "
     "(before the COMMIT leaves) would still write: only fencing closes that"),
    ("pause", {}, "broke",
     "lost update: the lease ran out while the holder was paused, a buyer on the other instance "
     "sold, and the holder wrote the stock it had read"),

    ("crash", {"setnx_acquire": True}, "broke",
     "killed between SETNX and PEXPIRE: a lock without TTL; every buyer waits lock_wait_ms and "
     "gives up (bounded, never hung); no sale until someone deletes the key"),
    ("crash", {"lock_home": "zookeeper"}, "held",
     "the ephemeral node goes with the session: buyers sell after the session timeout"),
    ("crash", {"lock_home": "mysql"}, "held",
     "the lock row is taken over after its expiry (lock_ttl_ms): buyers sell again"),
    ("crash", {"lock_home": "redis-quorum"}, "held",
     "the lease expires on every master after lock_ttl_ms: buyers sell again"),
    ("crash", {"lock_home": "etcd"}, "held",
     "nobody keeps the lease alive: etcd expires it and deletes the lock key after lock_ttl_ms"),
    ("crash", {"settles_intents": True}, "held",
     "killed between its Redis decision and its MySQL write: the intent passes its deadline and "
     "the next sale of the SKU, or its audit, settles it (the ledger tells whether the sale "
     "landed; if not, its units go back); drift 0"),
    ("crash", {"write_behind": True}, "held",
     "the killed instance's unflushed stream entries are claimed by the other's flusher"),
    ("crash", {"safe_across_instances": False}, "held",
     "the holder dies before writing (nothing lost); buyers on inventory-2 alone at 10 req/s, "
     "hold_ms 20, one at a time: nothing overlaps"),
    ("crash", {"lease": False}, "held",
     "MySQL rolls back the dead holder's transaction and frees its row lock"),
    ("crash", {}, "held", "the lock expires after its TTL (lock_ttl_ms): buyers sell again"),

    ("failover", {"lock_home": "redis-quorum"}, "held",
     "one of three masters restarted empty: the second buyer cannot reach a quorum while the "
     "holder's lease stands on the other two; exact"),
    ("failover", {"replicas_ack_on": True}, "held",
     "WAIT 1 gets no acknowledgement from the stalled replica: the holder's lock is refused, so the "
     "promoted replica holds no lock anybody relies on; exact"),
    ("failover", {}, "broke",
     "the lock never reached the stalled replica; Sentinel promoted it, a second buyer locked the "
     "same SKU: two holders, a lost update. replicas_ack=1 (or redlock, or fencing) makes it hold"),

    ("restart", {}, "held",
     "0 oversold, 0 lost; 503 backend_unavailable while MariaDB or Redis is away"),

    ("stall", {"fencing_on": True}, "held",
     "the buyer's fencing token claims the row before its read; the claim waits behind the stopped "
     "holder's uncommitted write, so the buyer reads after the holder's COMMIT (or, once the holder "
     "moved the row's version, its write is refused: 409 fenced); both sales counted, exact"),
    ("stall", {"lock_home": "redis-quorum"}, "broke",
     STALL_WHY + "; Redlock cannot fence (its masters share no counter)"),
    ("stall", {}, "broke", STALL_WHY + "; fencing=true closes it"),

    ("skew", {"lock_home": "zookeeper"}, "held",
     "the holder's clock runs at 1/4 (its hold takes 4 s, its client pings every 4/3 of a 4 s "
     "session): the session may or may not lapse before its check (measured: the holder sold and "
     "buyers waited, a close call), but that check asks the server, not the holder's clock: a "
     "lapsed session answers 503 lease_expired, a live one is still the only holder"),
    ("skew", {"watchdog_on": True}, "held",
     "the holder's clock runs at 1/4, so its watchdog renews every 4/3 of a lease: the lease runs "
     "out on the server and a buyer takes the lock, but the next renewal finds the lease gone and "
     "marks it lost; the holder, done with its hold 4 s later, is refused by its own check (503 "
     "lease_expired), nothing written"),
    ("skew", {"fencing_on": True}, "held",
     "no watchdog and a clock at 1/4: the holder believes its lease has 3/4 of its time left when a "
     "buyer already took the lock; its write carries the older token: 409 fenced, nothing written"),
    ("skew", {}, "broke",
     "no watchdog and a clock at 1/4: the validity the holder computes counts a quarter of the time "
     "that passed, so it writes 4 s after taking a 2 s lease that a buyer took over at 2 s: a lost "
     "update. A lease on the holder's clock assumes bounded drift; the watchdog, a server-side "
     "check (zookeeper) or fencing holds"),

    # netdelay: a slow link from the holder breaks a lock that lives at the
    # far end of that link, not one kept alive over another
    ("netdelay", {"lock_home": CHECKERS}, "held",
     "only inventory-1's MySQL link is slow (1.5 s): its lease (session) is kept alive over its own "
     "link by the watchdog (the client's pings), so nobody else takes the lock; the holder's writes "
     "land late but alone, and its check before the COMMIT passes rightly; buyers wait (503 "
     "lock_timeout)"),
    ("netdelay", dict(REDIS_LOCK, fencing_on=True), "held",
     "its watchdog's renewals reach Redis 1.5 s late, after the 1 s lease ran out; a buyer takes "
     "the lock with a newer token, and the holder's late write is refused (409 fenced), nothing "
     "written"),
    ("netdelay", REDIS_LOCK, "broke",
     "the holder's link to Redis is slow: its watchdog's renewals reach Redis 1.5 s late, after the "
     "1 s lease ran out; a buyer takes the lock and sells, and the holder, with no check before its "
     "write, writes the stock it read: a lost update. fencing=true holds"),
    ("netdelay", {"lock_home": "mysql", "fencing_on": True}, "held",
     "its lock row (lock_ttl_ms 3000, no renewal) expires while its delayed writes are on their "
     "way; a buyer takes the lock with a newer token, and the holder's late write is refused (409 "
     "fenced), nothing written"),
    ("netdelay", {"lock_home": "mysql"}, "broke",
     "the holder's link to MySQL is slow: its lock row (lock_ttl_ms 3000, no renewal) expires while "
     "its delayed writes are on their way; a buyer takes the lock and sells, and the holder, with "
     "no check before its write, writes the stock it read: a lost update. fencing=true holds"),
    ("netdelay", {}, "held", "not a cell: {g} takes no lease on a link that can be slowed"),

    ("starve", {"lock_home": ("redis-quorum", "etcd")}, "held",
     "starved (1 ms of CPU per second), the holder's renewals come late or not at all; if the lease "
     "runs out a buyer sells, but the holder's own check before the write sees it (the monotonic "
     "clock ran on): 503 lease_expired, nothing written"),
    ("starve", {"lock_home": "zookeeper"}, "held",
     "starved, the ZooKeeper client still pings within the 4 s session (a ping needs microseconds, "
     "the quota gives 1 ms a second), so the holder keeps its lock and the buyers wait (503 "
     "lock_timeout); its confirmation before the COMMIT counts only if it came back within a third "
     "of the session (measured both ways: the holder sold, or a 1.4 s confirmation answered 503 "
     "lease_expired and nothing was written)"),
    ("starve", dict(REDIS_LOCK, fencing_on=True), "held",
     "the starved watchdog cannot renew the 300 ms lease: a buyer takes the lock with a newer "
     "token, and the holder's late write is refused (409 fenced), nothing written"),
    ("starve", REDIS_LOCK, "broke",
     "the starved watchdog cannot renew the 300 ms lease in time (1 ms of CPU per second): a buyer "
     "takes the lock and sells, and the holder, with no check before its write, writes the stock "
     "it read: a lost update. fencing holds"),
    ("starve", {}, "held",
     "not a cell: {g} has no lease watchdog to starve (a starved holder is a slow one: see pause)"),

    ("hold-crash", {}, "held",
     "a hold is a row in MySQL, not a promise of the instance that took it: the holds reserved "
     "through the killed inventory-1 are confirmed on inventory-2 or expire through its sweeper "
     "(any instance sweeps); the audit stays exact and nothing is stranded"),
    ("hold-sigterm", {}, "held",
     "inventory-1 drains and stops with live holds; they are MySQL rows, so inventory-2 confirms "
     "them or its sweeper expires them; the audit stays exact and nothing is stranded"),
    ("hold-reseed", {}, "held",
     "the reseed deletes the SKU's live holds (their units are in the new stock): their confirms "
     "answer 404 unknown_order, late or not, the refused buyers buy the new stock, and the audit "
     "of the new seed is exact with nothing held"),
]

# (fault, when, clause): added to the why of a held sigterm or restart cell
# for every row whose `when` holds.
CLAUSES = [
    ("sigterm", {"write_behind": True},
     "; its unflushed stream entries are claimed by inventory-2 (pending 0, drift 0)"),
    ("sigterm", {"settles_intents": True}, "; no intent left behind (drift 0)"),
    ("restart", {"lock_home": "mysql"},
     "; a lock row whose release failed while MariaDB was away blocks buyers until it expires "
     "(lock_ttl_ms)"),
    ("restart", {"redis_stock": True, "write_behind": False},
     "; after Redis lost the stock, sales stay refused for --redis-reload-wait (12 s by default) "
     "before the stock is reloaded from MySQL, so no sale may come back within the run"),
    ("restart", {"uses_redis": True, "write_behind": False},
     "; with --redis-replica, Sentinel may promote the replica while the master is away, and the "
     "stopped master then comes back as its replica (the stack waits for the failover to end: "
     "started as a second master it granted the same redis-lock lock as the promoted one, and "
     "lost updates; without that wait fencing holds, replicas_ack: 1 only by refusing while no "
     "replica is linked)"),
]


def _holds(when, f):
    for k, want in when.items():
        have = f.get(k)
        if isinstance(want, bool):
            if bool(have) != want:
                return False
        elif isinstance(want, tuple):
            if have not in want:
                return False
        elif have != want:
            return False
    return True


def expect(fault, guard, fields):
    """(expected 'held'|'broke', why) for one cell: the first VERDICTS row
    of the fault that holds for the guard's capabilities and the cell's
    options."""
    f = facts(guard, fields)
    for row_fault, when, verdict, why in VERDICTS:
        if row_fault != fault or not _holds(when, f):
            continue
        if verdict == "held" and not when:
            why += "".join(c for cf, cw, c in CLAUSES if cf == fault and _holds(cw, f))
        return verdict, why.format(g=guard, p=STALL_PAUSE_MS.get(guard, 0),
                                   what=LEASE_WHAT.get(f.get("lock_home"), "its lease"))
    return "held", ""
