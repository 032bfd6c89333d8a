"""Fault scenarios for loadtest/compare (see loadtest/README.md, "Fault
scenarios"): pause, crash, failover, restart. Each cell runs open-loop
buyers (loadgen -R, per-second timeline) while a holder request and the
stack's fault verbs (deploy/local/stack pause|resume|kill|stop|start) are
driven at known moments; then the audit, the ledger's sale times (for the
time to recover) and the expected verdict next to the measured one.

Python 3 standard library only; talks to 127.0.0.1 only. Imported by
loadtest/compare, which passes its helpers in (http_json, CellSkip, ...)."""

import json
import os
import shutil
import subprocess
import threading
import time

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
            return "broke", ("lost update: the session expired while paused and a buyer sold; the "
                             "resumed holder writes at once, usually before its client hears of the "
                             "expiry (if the expiry event wins that race it refuses: then held)")
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


class Runner:
    """Runs fault cells on an embedded stack (compare's Stack)."""

    def __init__(self, stack, loadgen, work, log, run_id, sku_prefix, helpers):
        self.stack = stack
        self.loadgen = loadgen
        self.work = work
        self.log = log
        self.run_id = run_id
        self.prefix = sku_prefix
        self.h = helpers          # http_json, CellSkip
        self.replica_ready = False

    # ---- the stack ------------------------------------------------------

    def verb(self, *args, check=True):
        return self.stack.run(*args, check=check)

    def env(self):
        self.stack.read_env()
        return self.stack.env

    def ensure(self, need_replica):
        """Two inventory instances; with --redis-replica when a failover
        cell is to run (the inventories restart once to get the Sentinels).
        Without redis-sentinel the stack comes up without it and failover
        cells are skipped."""
        if need_replica and not shutil.which("redis-sentinel"):
            need_replica = False
        had = self.stack.running_before() and self._env_value("REPLICA") == "1"
        if self.stack.instances is None and not self.stack.running_before():
            self.stack.started_here = True
        args = ["up", "--inventory", "2", "--orders", "1"]
        if need_replica or had:
            args.append("--redis-replica")
        if need_replica and not had and self.stack.running_before():
            # inventories started without --redis-sentinels: start them again
            for n in ("inventory-1", "inventory-2"):
                self.verb("stop", n, check=False)
        self.verb(*args)
        self.stack.instances = 2
        self.stack.order_for = None
        self.stack.read_env()
        self.replica_ready = need_replica or had

    def _env_value(self, key):
        try:
            with open(os.path.join(self.stack.dir, "stack.env"), encoding="utf-8") as f:
                for tok in f.read().split():
                    if tok.startswith(key + "="):
                        return tok.split("=", 1)[1]
        except OSError:
            pass
        return ""

    def port(self, name):
        e = self.stack.env
        if name == "redis":
            return int(e["REDIS_PORT"])
        if name == "redis-replica":
            return int(e["REPLICA_PORT"])
        if name.startswith("sentinel-"):
            return int(e["SENTINEL_PORT"]) + int(name[9:]) - 1
        raise KeyError(name)

    def redis_cli(self, port, *args, timeout=5):
        try:
            p = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=timeout)
            return p.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    def sentinel_master_port(self):
        for i in (1, 2, 3):
            out = self.redis_cli(self.port(f"sentinel-{i}"), "SENTINEL", "get-master-addr-by-name",
                                 "lab", timeout=2).split()
            if len(out) == 2 and out[1].isdigit():
                return int(out[1])
        return None

    def current_master(self):
        """Name of the Redis process that is the master now ('redis' unless a
        failover moved it)."""
        if not self.replica_ready:
            return "redis"
        p = self.sentinel_master_port()
        return "redis-replica" if p == self.port("redis-replica") else "redis"

    def reset_topology(self):
        """redis = master, redis-replica replicating it, fresh Sentinels."""
        for n in ("sentinel-1", "sentinel-2", "sentinel-3", "redis-replica", "redis"):
            self.verb("stop", n, check=False)
        for n in ("sentinel-1", "sentinel-2", "sentinel-3", "redis-replica"):
            subprocess.run(["rm", "-rf", os.path.join(self.stack.dir, n)], check=False)
        for n in ("redis", "redis-replica", "sentinel-1", "sentinel-2", "sentinel-3"):
            self.verb("start", n)
        deadline = time.time() + 20
        while time.time() < deadline:
            info = self.redis_cli(self.port("redis-replica"), "INFO", "replication")
            if "master_link_status:up" in info and \
                    self.sentinel_master_port() == self.port("redis"):
                return
            time.sleep(0.2)
        raise RuntimeError("replica or Sentinels not ready within 20 s after a reset")

    # ---- requests -------------------------------------------------------

    def inv(self, i):
        return self.stack.inventory[i - 1]

    def probe(self, c):
        """A 400 to the cell's body options means this build lacks the guard
        or an option (fencing, replicas_ack, ...): skip, do not fail."""
        sku = f"{self.prefix}-{self.run_id}-{c['cell']}-probe"
        st, r = self.h["http_json"]("PUT", f"{self.inv(1)}/inventory/{sku}", {"stock": 10})
        if st != 200:
            raise RuntimeError(f"seeding {sku} answered {st}: {r}")
        body = dict(c["fields"], sku=sku, order_id=f"{sku}-1", guard=c["guard"], hold_ms=0)
        st, r = self.h["http_json"]("POST", f"{self.inv(1)}/inventory/deduct", body, timeout=15)
        if st == 400:
            raise self.h["CellSkip"](f"not in this build: {r.get('detail', r)}"[:200])
        # A build that does not know an option ignores it: an invalid value
        # that is not refused means the option is not there.
        for k, bad in OPTION_PROBES.items():
            if k in c["fields"]:
                st, r = self.h["http_json"]("POST", f"{self.inv(1)}/inventory/deduct",
                                            dict(body, order_id=f"{sku}-{k}", **{k: bad}), timeout=15)
                if st != 400:
                    raise self.h["CellSkip"](f"option {k} not in this build")
        if c["fields"].get("fencing") is True and not self.has_fence_column():
            raise self.h["CellSkip"]("fencing not in this build (no inventory.fence column)")

    def has_fence_column(self):
        p = subprocess.run(["mariadb", "--no-defaults", "-h127.0.0.1", f"-P{self.stack.mysql_port}",
                            "-uroot", "-N", "-B", "-e",
                            "SHOW COLUMNS FROM db_shopping.inventory LIKE 'fence'"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        return p.returncode == 0 and "fence" in p.stdout

    def body(self, c, extra):
        b = {"sku": c["sku"], "qty": 1, "guard": c["guard"]}
        b.update(c["fields"])
        b.update(extra)
        return b

    def holder(self, url, body, timeout, out):
        def go():
            t = time.time()
            try:
                st, r = self.h["http_json"]("POST", url + "/inventory/deduct", body, timeout=timeout)
            except OSError as e:
                st, r = 0, {"error": "no_answer", "detail": str(e)[:100]}
            out.update({"status": st, "answer": r, "sent_at": t, "done_at": time.time()})
        th = threading.Thread(target=go, daemon=True)
        th.start()
        return th

    def ledger_times(self, sku):
        """[(unix time, instance, order_id)] of the SKU's sales, oldest first."""
        port = self.stack.mysql_port
        q = ("SELECT UNIX_TIMESTAMP(created_at), instance, order_id FROM db_shopping.ledger "
             f"WHERE sku='{sku}' ORDER BY created_at, id")
        p = subprocess.run(["mariadb", "--no-defaults", "-h127.0.0.1", f"-P{port}", "-uroot", "-N",
                            "-B", "-e", q], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=30)
        if p.returncode != 0:
            raise RuntimeError(f"reading the ledger failed: {p.stderr.strip()[:200]}")
        rows = []
        for line in p.stdout.splitlines():
            parts = line.split("\t")
            if len(parts) == 3:
                rows.append((float(parts[0]), parts[1], parts[2]))
        return rows

    # ---- one cell -------------------------------------------------------

    def run(self, c):
        plan = PLAN[c["fault"]]
        c.update({"instances": 2, "path": "direct", "stock": plan["stock"], "requests": 0,
                  "concurrency": 16, "threads": 2, "hold_ms": c.get("hold_ms", 0) or 0,
                  "rate": plan["rate"]})
        c["expected"], c["expected_why"] = expect(c["fault"], c["guard"], c["fields"])
        if c["fault"] == "failover":
            if not self.replica_ready:
                raise self.h["CellSkip"]("needs up --redis-replica (redis-sentinel not installed?)")
            self.reset_topology()
        self.probe(c)
        prefix = f"{self.run_id}-{c['cell']}"
        c["sku"] = sku = f"{self.prefix}-{prefix}"
        st, r = self.h["http_json"]("PUT", f"{self.inv(1)}/inventory/{sku}", {"stock": c["stock"]})
        if st != 200:
            raise RuntimeError(f"seeding {sku} answered {st}: {r}")

        buyers = self.body(c, {"order_id": f"{prefix}-{{seq}}", "hold_ms": 20})
        buyers.setdefault("lock_wait_ms", 3000)
        for k, v in list(buyers.items()):
            if isinstance(v, str):
                buyers[k] = v.replace("{", "\\{") if k != "order_id" else v
        jpath = os.path.join(self.work, f"cell-{c['cell']}.loadgen.json")
        cmd = [self.loadgen, "-t", "2", "-c", "16", "-R", str(plan["rate"]),
               "-d", f"{plan['duration']}s", "--timeout", "20s", "--progress", "off",
               "--json", jpath, "-m", "POST", "-H", "Content-Type: application/json",
               "-b", json.dumps(buyers, separators=(",", ":"))]
        for i in plan["buyers"]:
            cmd += ["-u", self.inv(i) + "/inventory/deduct"]
        c["loadgen_cmd"] = " ".join(cmd)
        self.log.write(f"$ {c['loadgen_cmd']}\n")
        self.log.flush()
        events, hold = [], {}

        def at(t):
            d = t0 + t - time.time()
            if d > 0:
                time.sleep(d)

        def ev(what, kind="fault"):
            events.append({"t": round(time.time() - t0, 2), "what": what, "kind": kind})

        if c["fault"] == "crash" and c["fields"].get("acquire") == "setnx-then-expire":
            # test-only knob (lib/base/rlock_modes.c): inventory-1 sleeps 3 s
            # between SETNX and PEXPIRE, so the kill lands between them
            self.verb("stop", "inventory-1")
            os.environ["LAB_TEST_SETNX_PAUSE_MS"] = "3000"
            try:
                self.verb("start", "inventory-1")
            finally:
                del os.environ["LAB_TEST_SETNX_PAUSE_MS"]
        t0 = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        th = None
        after_cell = []
        try:
            th = getattr(self, "_" + c["fault"])(c, at, ev, hold, prefix, after_cell)
        finally:
            try:
                out, _ = proc.communicate(timeout=plan["duration"] + 60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            if th is not None:
                th.join(timeout=30)
            for f in after_cell:
                f()
        self.log.write(out + "\n")
        if proc.returncode != 0 or not os.path.exists(jpath):
            raise RuntimeError(f"loadgen exited {proc.returncode}: {out.strip()[-300:]}")
        with open(jpath, encoding="utf-8") as f:
            lg = json.load(f)
        os.unlink(jpath)
        time.sleep(1)   # answers still on their way
        self.finish(c, lg, events, hold, t0)

    # pause: the holder stalls past its lease, a buyer sells, the holder wakes
    def _pause(self, c, at, ev, hold, prefix, after):
        at(1.0)
        th = self.holder(self.inv(1), self.body(c, {"order_id": f"{prefix}-holder", "hold_ms": 2500,
                                                    "lock_wait_ms": 5000}), 30, hold)
        ev("holder in (inventory-1, hold_ms 2500)", "mark")
        time.sleep(0.6)   # it holds the lock by then (buyers hold it 20 ms at a time)
        ev("pause inventory-1")
        self.verb("pause", "inventory-1")
        after.append(lambda: self.verb("resume", "inventory-1", check=False))
        time.sleep(4.0)   # > the leases (1 s); the holder's hold_ms is over by then
        ev("resume inventory-1", "end")
        self.verb("resume", "inventory-1")
        return th

    # crash: the holder dies holding the lock
    def _crash(self, c, at, ev, hold, prefix, after):
        after.append(lambda: self.verb("start", "inventory-1"))
        at(1.0)
        th = self.holder(self.inv(1), self.body(c, {"order_id": f"{prefix}-holder", "hold_ms": 5000,
                                                    "lock_wait_ms": 3000}), 30, hold)
        ev("holder in (inventory-1, hold_ms 5000)", "mark")
        time.sleep(0.5)   # it holds the lock by then
        ev("kill inventory-1")
        self.verb("kill", "inventory-1")
        return th

    # failover: stalled replica, lock on the master, master killed, promotion
    def _failover(self, c, at, ev, hold, prefix, after):
        redlock = c["guard"] == "redlock"
        rport = self.port("redis")
        at(1.0)
        if not redlock:
            self.verb("pause", "redis-replica")
            after.append(lambda: self.verb("resume", "redis-replica", check=False))
            # what the master already sent sits in the stalled replica's
            # socket: cut the link, so the lock below reaches no replica
            self.redis_cli(rport, "CLIENT", "KILL", "TYPE", "replica")
            ev("pause redis-replica (link cut)", "mark")
        at(1.3)
        th = self.holder(self.inv(1), self.body(c, {"order_id": f"{prefix}-holder", "hold_ms": 6000,
                                                    "lock_ttl_ms": 10000, "lock_wait_ms": 5000}),
                         40, hold)
        ev("holder A in (inventory-1, hold_ms 6000)", "mark")
        time.sleep(0.5)   # A holds the lock by then
        if redlock:
            ev("kill redis-m1")
            self.verb("kill", "redis-m1")
            self.verb("start", "redis-m1")
            ev("redis-m1 back, empty", "end")
        else:
            ev("kill redis (master)")
            self.verb("kill", "redis")
            self.verb("resume", "redis-replica")
            deadline = time.time() + 20
            while time.time() < deadline and self.sentinel_master_port() != self.port("redis-replica"):
                time.sleep(0.1)
            if self.sentinel_master_port() == self.port("redis-replica"):
                ev("Sentinel promoted redis-replica", "end")
            else:
                ev("no promotion within 20 s", "end")
        b = {}
        self.holder(self.inv(2), self.body(c, {"order_id": f"{prefix}-B", "hold_ms": 0,
                                               "lock_wait_ms": 8000}), 20, b).join(25)
        ev(f"buyer B: {b.get('status')} {b.get('answer', {}).get('error', 'sold') if b.get('status') != 200 else 'sold'}",
           "mark")
        hold["buyer_b"] = b
        if not redlock:
            # the old master comes back empty and Sentinel makes it a replica
            ev("redis back (Sentinel makes it a replica)", "mark")
            self.verb("start", "redis")
        return th

    # restart: MariaDB, then the Redis master, away for 2 s each
    def _restart(self, c, at, ev, hold, prefix, after):
        at(2.0)
        ev("stop mysql")
        self.verb("stop", "mysql")
        at(4.0)
        ev("mysql back", "end")
        self.verb("start", "mysql")
        at(7.0)
        m = self.current_master()
        ev(f"stop {m} (Redis master)")
        self.verb("stop", m)
        at(9.0)
        ev(f"{m} back", "end")
        self.verb("start", m)
        return None

    # ---- results --------------------------------------------------------

    def finish(self, c, lg, events, hold, t0):
        st, audit = self.h["http_json"]("GET", f"{self.inv(2)}/inventory/{c['sku']}/audit")
        if st != 200:
            raise RuntimeError(f"audit of {c['sku']} answered {st}: {audit}")
        sales = self.ledger_times(c["sku"])
        by_status = dict(lg["by_status"])
        by_error = dict(lg["by_error"])
        for h in (hold, hold.get("buyer_b") or {}):
            if "status" in h:
                k = str(h["status"])
                by_status[k] = by_status.get(k, 0) + 1
                e = (h.get("answer") or {}).get("error")
                if e and h["status"] != 200:
                    by_error[e] = by_error.get(e, 0) + 1
        ok = sum(v for k, v in by_status.items() if k in ("200", "201"))
        dur = lg["duration_s"] or 1e-9
        fenced = by_error.get("fenced", 0)
        n503 = by_status.get("503", 0)
        recover = []
        for i, e in enumerate(events):
            if e["kind"] != "fault":
                continue
            # from the fault to the first sale after it (after the matching
            # "end" event when there is one: a restart's backend back)
            start = t0 + e["t"]
            nxt = next((x for x in events[i + 1:] if x["kind"] == "end"), None)
            after = t0 + nxt["t"] if nxt and c["fault"] == "restart" else start
            first = next((s for s in sales if s[0] >= after and not s[2].endswith("-holder")), None)
            recover.append({"fault": e["what"], "at_s": e["t"],
                            "recover_s": round(first[0] - start, 2) if first else None})
        consistent = bool(audit["consistent"])
        if c["fault"] == "crash":
            held = consistent and all(r["recover_s"] is not None for r in recover)
        else:
            held = consistent and audit["oversold"] == 0
        hans = hold.get("answer") or {}
        c.update({
            "status": "ok",
            "sold": audit["sold"], "oversold": audit["oversold"],
            "lost_updates": audit["lost_updates"], "consistent": consistent,
            "stock_left": audit["stock"], "initial": audit["initial"], "orders_written": None,
            "successes": ok, "answered": lg["requests"] + (1 if "status" in hold else 0),
            "duration_s": lg["duration_s"], "rps": round(lg["requests"] / dur, 1),
            "ok_per_s": round(ok / dur, 1), "latency_ms": lg["latency_ms"], "latency_curve": [],
            "by_status": by_status, "by_error": by_error, "socket_errors": lg["errors"],
            "reconnects": lg.get("reconnects", 0), "requests": lg["requests"],
            "fenced": fenced, "n503": n503,
            "holder": {"status": hold.get("status"), "error": hans.get("error"),
                       "detail": (hans.get("detail") or "")[:160]} if hold else None,
            "measured": "held" if held else "broke",
            "events": events, "recovery": recover,
            "recover_s": next((r["recover_s"] for r in recover), None),
            "timeline": lg.get("timeline", {}),
        })


def measured_text(c):
    if c.get("status") != "ok":
        return "-"
    parts = [f"oversold {c['oversold']}", f"lost {c['lost_updates']}", f"fenced {c.get('fenced', 0)}",
             f"503 {c.get('n503', 0)}"]
    h = c.get("holder") or {}
    if h.get("status") is not None:
        parts.append(f"holder {h['status']}{' ' + h['error'] if h.get('error') else ''}")
    return ", ".join(parts)


def recover_text(c):
    rs = c.get("recovery") or []
    if not rs:
        return "-"
    out = []
    for r in rs:
        v = "no sale after it" if r["recover_s"] is None else f"{r['recover_s']:.1f} s"
        out.append(v if len(rs) == 1 else f"{r['fault']}: {v}")
    return "; ".join(out)


# ---- report ---------------------------------------------------------------

FAULT_COLS = ["scenario", "guard", "expected", "measured", "held/broke", "time to recover"]


def fault_rows(cells):
    """[(cell, [scenario, guard, expected, measured, verdict, recover])]."""
    out = []
    for c in cells:
        if not c.get("fault"):
            continue
        label = c["label"].split("/", 1)[1] if "/" in c["label"] else c["label"]
        if c.get("status") != "ok":
            why = c.get("reason", "")
            out.append((c, [c["fault"], label, c.get("expected", "-"),
                            f"{c.get('status')}: {why}", "-", "-"]))
            continue
        mark = "as expected" if c["measured"] == c["expected"] else "NOT as expected"
        out.append((c, [c["fault"], label, c["expected"], measured_text(c),
                        f"{c['measured']} ({mark})", recover_text(c)]))
    return out


def text_table(cells):
    rows = fault_rows(cells)
    if not rows:
        return ""
    w = [max(len(h), *(len(r[i]) for _, r in rows)) for i, h in enumerate(FAULT_COLS)]
    line = lambda vals: "  ".join(v.ljust(w[i]) for i, v in enumerate(vals)).rstrip()  # noqa: E731
    return "\n".join([line(FAULT_COLS), line(["-" * x for x in w])] + [line(r) for _, r in rows])


def render_md(cells, esc):
    rows = fault_rows(cells)
    if not rows:
        return []
    o = ["## Faults", "",
         "Each cell: open-loop buyers (loadgen -R) while the stack's verbs inject the fault at a known "
         "moment. held = audit exact (0 oversold, 0 lost updates; for crash also: buyers sold again). "
         "Time to recover = from the fault to the first sale after it (restart: after the backend "
         "is back), from the ledger's timestamps.", "",
         "| " + " | ".join(FAULT_COLS) + " |", "|" + "---|" * len(FAULT_COLS)]
    for c, r in rows:
        v = r[4]
        if c.get("status") == "ok" and c["measured"] != c["expected"]:
            v = f"**{v}**"
        o.append("| " + " | ".join(esc(x) for x in r[:4]) + f" | {esc(v)} | {esc(r[5])} |")
    o += ["", "Why each verdict is expected:", ""]
    for c, _ in rows:
        if c.get("expected_why"):
            o.append(f"- `{esc(c['label'])}`: {esc(c['expected_why'])}")
    o += ["", "Fault moments (seconds since the load started):", ""]
    for c, _ in rows:
        if c.get("events"):
            o.append(f"- `{esc(c['label'])}`: " + "; ".join(f"{e['t']:.1f} s {esc(e['what'])}"
                                                          for e in c["events"]))
    o.append("")
    return o


def svg_timeline(c, esc):
    """Per-second sales/s (green), errors/s (red) and p99 ms (grey, right
    axis); every fault event a vertical line with its label."""
    secs = (c.get("timeline") or {}).get("seconds") or []
    if not secs:
        return ""
    W, H, left, right, top, bottom = 860, 260, 60, 60, 30, 40
    pw, ph = W - left - right, H - top - bottom
    n = max(len(secs), 1)
    ymax = max([s["ok"] for s in secs] + [s["errors"] for s in secs] + [1])
    ymax = _nice(ymax)
    pmax = _nice(max([s["p99_ms"] for s in secs] + [1]))
    open_loop = any("offered" in s for s in secs)

    def X(t):
        return left + pw * t / n

    def Y(v, m):
        return top + ph - ph * v / m

    o = [f'<svg class="chart timeline" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
         f'xmlns="http://www.w3.org/2000/svg" role="img">',
         f'<text x="{left}" y="18" font-size="13" font-weight="bold">{esc(c["label"])}: per second</text>',
         f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#ccc"/>']
    for k in range(5):
        v = ymax * k / 4
        y = Y(v, ymax)
        o.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        o.append(f'<text x="{left - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{v:g}</text>')
        o.append(f'<text x="{left + pw + 4}" y="{y + 4:.1f}" font-size="10" fill="#777">'
                 f'{pmax * k / 4:g}</text>')
    for t in range(0, n + 1, max(1, n // 12)):
        o.append(f'<text x="{X(t):.1f}" y="{top + ph + 14}" font-size="10" text-anchor="middle">{t}s</text>')

    def line(key, m, color, dash=""):
        pts = " ".join(f"{X(i + 0.5):.1f},{Y(s.get(key, 0), m):.1f}" for i, s in enumerate(secs))
        return (f'<polyline fill="none" stroke="{color}" stroke-width="2" {dash} points="{pts}">'
                f'<title>{key}</title></polyline>')
    if open_loop:
        o.append(line("offered", ymax, "#bbb", 'stroke-dasharray="2,3"'))
    o.append(line("ok", ymax, "#59a14f"))
    o.append(line("errors", ymax, "#e15759"))
    o.append(line("p99_ms", pmax, "#888", 'stroke-dasharray="5,3"'))
    for i, e in enumerate(c.get("events") or []):
        x = X(e["t"])
        col = "#e15759" if e["kind"] == "fault" else ("#4e79a7" if e["kind"] == "end" else "#999")
        o.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" stroke="{col}" '
                 f'stroke-dasharray="4,2"><title>{esc(e["what"])}</title></line>')
        o.append(f'<text x="{x + 3:.1f}" y="{top + 12 + 11 * (i % 4)}" font-size="10" fill="{col}">'
                 f'{esc(e["what"])}</text>')
    lg = [("sales/s", "#59a14f"), ("errors/s", "#e15759"), ("p99 ms (right axis)", "#888")]
    if open_loop:
        lg.append(("offered/s", "#bbb"))
    x = left
    for name, col in lg:
        o.append(f'<rect x="{x}" y="{H - 14}" width="10" height="10" fill="{col}"/>'
                 f'<text x="{x + 14}" y="{H - 5}" font-size="11">{esc(name)}</text>')
        x += 24 + 7 * len(name)
    o.append("</svg>")
    return "\n".join(o)


def _nice(v):
    for m in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000):
        if v <= m:
            return m
    return v


def render_html(cells, esc):
    rows = fault_rows(cells)
    if not rows:
        return []
    o = ['<h2>Faults</h2><p class="meta">Open-loop buyers while the stack\'s verbs inject the fault at '
         "a known moment (vertical lines below). held = audit exact (for crash also: buyers sold "
         "again); time to recover = fault to the first sale after it (restart: after the backend is "
         "back), from the ledger's timestamps.</p>",
         '<table class="faults"><tr>' + "".join(f'<th class="l">{esc(h)}</th>' for h in FAULT_COLS)
         + "</tr>"]
    for c, r in rows:
        cl = "skip"
        if c.get("status") == "ok":
            cl = "good" if c["measured"] == "held" else "bad"
        o.append("<tr>" + "".join(f'<td class="l">{esc(x)}</td>' for x in r[:4])
                 + f'<td class="l {cl}">{esc(r[4])}</td><td class="l">{esc(r[5])}</td></tr>')
    o.append("</table><ul>")
    for c, _ in rows:
        if c.get("expected_why"):
            o.append(f"<li><code>{esc(c['label'])}</code>: {esc(c['expected_why'])}</li>")
    o.append("</ul><h3>Timelines</h3>")
    for c, _ in rows:
        svg = svg_timeline(c, esc)
        if svg:
            o.append(svg)
            tl = c.get("timeline") or {}
            if "never_sent" in tl:
                o.append(f'<p class="meta">offered {tl.get("offered")}, never sent {tl["never_sent"]}</p>')
    return o
