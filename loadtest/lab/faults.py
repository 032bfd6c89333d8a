"""Fault cells (see loadtest/README.md, "Fault scenarios"): pause, crash,
failover, restart, reseed, sigterm (and, in lab.faults_more, stall, skew,
starve). Each cell runs open-loop buyers (loadgen -R,
per-second timeline) while a holder request and the driver's fault verbs
(pause|resume|kill|stop|start) are driven at known moments; then the
audit, the ledger's sale times (for the time to recover) and the expected
verdict next to the measured one."""

import json
import os
import subprocess
import threading
import time

from .drivers import CellSkip
from .faults_more import MoreFaults
from . import guardinfo
from .faultplan import OPTION_PROBES, PLAN, expect
from .cell import run_prefix, shquote
from .checker import MAX_IDS, invariant_block, outcomes
from .evidence import append_ops, check_file, history_path
from .history import runner_op, seed_op
from .net import http_json


class FaultRunner(MoreFaults):
    """Runs fault cells through a stack driver (lab.drivers) that has fault verbs."""

    def __init__(self, stack, loadgen, work, log, run_id, sku_prefix):
        self.stack = stack
        self.loadgen = loadgen
        self.work = work
        self.log = log
        self.run_id = run_id
        self.prefix = sku_prefix
        self.replica_ready = False

    # ---- the stack ------------------------------------------------------

    def ensure(self, need_replica):
        """Two inventory instances; a Redis replica and Sentinels when a
        failover cell is to run and the driver can."""
        self.replica_ready = self.stack.fault_ready(need_replica)

    # ---- requests -------------------------------------------------------

    def inv(self, i):
        return self.stack.inventory[i - 1]

    def probe(self, c):
        """A 400 to the cell's body options means this build lacks the guard
        or an option (fencing, replicas_ack, ...): skip, do not fail."""
        sku = f"{self.prefix}-{run_prefix(self.run_id, c)}-probe"
        st, r = http_json("PUT", f"{self.inv(1)}/inventory/{sku}", {"stock": 10})
        if st != 200:
            raise RuntimeError(f"seeding {sku} answered {st}: {r}")
        body = dict(c["fields"], sku=sku, order_id=f"{sku}-1", guard=c["guard"], hold_ms=0)
        st, r = http_json("POST", f"{self.inv(1)}/inventory/deduct", body, timeout=15)
        if st == 400:
            raise CellSkip(f"not in this build: {r.get('detail', r)}"[:200])
        # A build that does not know an option ignores it: an invalid value
        # that is not refused means the option is not there.
        for k, bad in OPTION_PROBES.items():
            if k in c["fields"]:
                st, r = http_json("POST", f"{self.inv(1)}/inventory/deduct",
                                            dict(body, order_id=f"{sku}-{k}", **{k: bad}), timeout=15)
                if st != 400:
                    raise CellSkip(f"option {k} not in this build")
        if c["fields"].get("fencing") is True and not self.has_fence_table():
            raise CellSkip("fencing not in this build (no inventory_fence table)")

    def has_fence_table(self):
        rc, out, _ = self.stack.sql("SHOW TABLES FROM db_shopping LIKE 'inventory_fence'")
        return rc == 0 and "inventory_fence" in out

    def body(self, c, extra):
        b = {"sku": c["sku"], "qty": 1, "guard": c["guard"]}
        b.update(c["fields"])
        b.update(extra)
        if not guardinfo.caps(c["guard"]).get("lease"):
            b.pop("lock_ttl_ms", None)   # a guard without a lease refuses it (400)
        return b

    def holder(self, url, body, timeout, out):
        # the history's process and times (monotonic, as loadgen's) are set
        # before the request goes: one never answered is still an operation
        out.update({"body": body, "invoke_ns": time.monotonic_ns()})

        def go():
            t = time.time()
            try:
                st, r = http_json("POST", url + "/inventory/deduct", body, timeout=timeout)
            except OSError as e:
                st, r = 0, {"error": "no_answer", "detail": str(e)[:100]}
            out.update({"status": st, "answer": r, "sent_at": t, "done_at": time.time(),
                        "complete_ns": time.monotonic_ns()})
        th = threading.Thread(target=go, daemon=True)
        th.start()
        return th

    def ledger_times(self, sku):
        """[(unix time, instance, order_id)] of the SKU's sales, oldest first."""
        q = ("SELECT UNIX_TIMESTAMP(created_at), instance, order_id FROM db_shopping.ledger "
             f"WHERE sku='{sku}' ORDER BY created_at, id")
        rc, out, err = self.stack.sql(q)
        if rc != 0:
            raise RuntimeError(f"reading the ledger failed: {err.strip()[:200]}")
        rows = []
        for line in out.splitlines():
            parts = line.split("\t")
            if len(parts) == 3:
                rows.append((float(parts[0]), parts[1], parts[2]))
        return rows

    def same_stock_sales(self, sku):
        """order_ids (oldest first, at most MAX_IDS) of the SKU's sales that
        left the same stock as another sale: both read one value, so one of
        them was lost (a lost update outside a holder's window)."""
        q = ("SELECT l.order_id FROM db_shopping.ledger l JOIN (SELECT remaining FROM "
             f"db_shopping.ledger WHERE sku='{sku}' GROUP BY remaining HAVING COUNT(*) > 1) d "
             f"ON d.remaining = l.remaining WHERE l.sku='{sku}' ORDER BY l.created_at, l.id "
             f"LIMIT {MAX_IDS}")
        rc, out, _ = self.stack.sql(q)
        return out.split() if rc == 0 else []

    # ---- one cell -------------------------------------------------------

    def run(self, c):
        plan = PLAN[c["fault"]]
        c.update({"instances": 2, "path": "direct", "stock": plan["stock"], "requests": 0,
                  "concurrency": 16, "threads": 2, "hold_ms": c.get("hold_ms", 0) or 0,
                  "rate": plan["rate"]})
        c["expected"], c["expected_why"] = expect(c["fault"], c["guard"], c["fields"])
        if c["fault"] == "failover":
            if not self.replica_ready:
                raise CellSkip("needs up --redis-replica (redis-sentinel not installed?)")
            self.stack.reset_redis_topology()
        self.probe(c)
        prefix = run_prefix(self.run_id, c)
        c["sku"] = sku = f"{self.prefix}-{prefix}"
        t_seed = time.monotonic_ns()
        st, r = http_json("PUT", f"{self.inv(1)}/inventory/{sku}", {"stock": c["stock"]})
        if st != 200:
            raise RuntimeError(f"seeding {sku} answered {st}: {r}")
        hpath = history_path(self.work, prefix)
        self.own_ops = [seed_op("seed", sku, c["stock"], t_seed, time.monotonic_ns())]

        # the buyers hold 20 ms, or the variant's hold_ms (a cell that must
        # show overlapping buyers, e.g. no guard under restart)
        buyers = self.body(c, {"order_id": f"{prefix}-{{seq}}", "hold_ms": c["hold_ms"] or 20})
        buyers.setdefault("lock_wait_ms", 3000)
        for k, v in list(buyers.items()):
            if isinstance(v, str):
                buyers[k] = v.replace("{", "\\{") if k != "order_id" else v
        jpath = os.path.join(self.work, f"cell-{c['cell']}.loadgen.json")
        cmd = [self.loadgen, "-t", "2", "-c", "16", "-R", str(plan["rate"]),
               "-d", f"{plan['duration']}s", "--timeout", "20s", "--progress", "off",
               "--json", jpath, "--history", hpath, "-m", "POST", "-H", "Content-Type: application/json",
               "-b", json.dumps(buyers, separators=(",", ":"))]
        if c.get("seed"):
            cmd += ["--seed", str(c["seed"])]
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
            self.stack.stop("inventory-1")
            self.stack.start("inventory-1", env={"LAB_TEST_SETNX_PAUSE_MS": "3000"})
        after_cell = self.prepare(c)   # lab.faults_more: the cells that arm inventory-1
        t0 = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        th = None
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
        self.finish(c, lg, events, hold, t0, hpath)

    # pause: the holder stalls past its lease, a buyer sells, the holder wakes
    def _pause(self, c, at, ev, hold, prefix, after):
        at(1.0)
        th = self.holder(self.inv(1), self.body(c, {"order_id": f"{prefix}-holder", "hold_ms": 2500,
                                                    "lock_wait_ms": 5000}), 30, hold)
        ev("holder in (inventory-1, hold_ms 2500)", "mark")
        # It holds the lock by then (buyers hold it 20 ms at a time): 1.2 s,
        # not less, because a first lock wait on a fresh instance (its lock
        # subscription, a Sentinel lookup under compose) took over 0.6 s
        # there, and a pause before the holder is in measures no race; the
        # hold (2500 ms) still outlasts the wait.
        time.sleep(1.2)
        ev("pause inventory-1")
        self.stack.pause("inventory-1")
        after.append(lambda: self.stack.resume("inventory-1", check=False))
        time.sleep(4.0)   # > the leases (1 s); the holder's hold_ms is over by then
        ev("resume inventory-1", "end")
        self.stack.resume("inventory-1")
        return th

    # crash: the holder dies holding the lock
    def _crash(self, c, at, ev, hold, prefix, after):
        after.append(lambda: self.stack.start("inventory-1"))
        at(1.0)
        th = self.holder(self.inv(1), self.body(c, {"order_id": f"{prefix}-holder", "hold_ms": 5000,
                                                    "lock_wait_ms": 3000}), 30, hold)
        ev("holder in (inventory-1, hold_ms 5000)", "mark")
        time.sleep(0.5)   # it holds the lock by then
        ev("kill inventory-1")
        self.stack.kill("inventory-1")
        return th

    # failover: stalled replica, lock on the master, master killed, promotion
    def _failover(self, c, at, ev, hold, prefix, after):
        redlock = c["guard"] == "redlock"
        rport = self.stack.port("redis")
        at(1.0)
        if not redlock:
            self.stack.pause("redis-replica")
            after.append(lambda: self.stack.resume("redis-replica", check=False))
            # what the master already sent sits in the stalled replica's
            # socket: cut the link, so the lock below reaches no replica
            self.stack.redis_cli(rport, "CLIENT", "KILL", "TYPE", "replica")
            ev("pause redis-replica (link cut)", "mark")
        at(1.3)
        th = self.holder(self.inv(1), self.body(c, {"order_id": f"{prefix}-holder", "hold_ms": 6000,
                                                    "lock_ttl_ms": 10000, "lock_wait_ms": 5000}),
                         40, hold)
        ev("holder A in (inventory-1, hold_ms 6000)", "mark")
        time.sleep(0.5)   # A holds the lock by then
        if redlock:
            ev("kill redis-m1")
            self.stack.kill("redis-m1")
            self.stack.start("redis-m1")
            ev("redis-m1 back, empty", "end")
        else:
            ev("kill redis (master)")
            self.stack.kill("redis")
            self.stack.resume("redis-replica")
            deadline = time.time() + 20
            while time.time() < deadline and self.stack.sentinel_master_port() != self.stack.port("redis-replica"):
                time.sleep(0.1)
            if self.stack.sentinel_master_port() == self.stack.port("redis-replica"):
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
            self.stack.start("redis")
        return th

    # restart: MariaDB, then the Redis master, away for 2 s each
    def _restart(self, c, at, ev, hold, prefix, after):
        at(2.0)
        ev("stop mysql")
        self.stack.stop("mysql")
        at(4.0)
        ev("mysql back", "end")
        self.stack.start("mysql")
        at(7.0)
        m = self.stack.current_master(self.replica_ready)
        ev(f"stop {m} (Redis master)")
        self.stack.stop(m)
        at(9.0)
        ev(f"{m} back", "end")
        self.stack.start(m)
        return None

    # reseed: a holder mid-sale on inventory-1, the SKU reseeded through
    # inventory-2 (same stock: a new seed)
    def _reseed(self, c, at, ev, hold, prefix, after):
        at(1.0)
        th = self.holder(self.inv(1), self.body(c, {"order_id": f"{prefix}-holder", "hold_ms": 2000,
                                                    "lock_wait_ms": 5000}), 30, hold)
        ev("holder in (inventory-1, hold_ms 2000)", "mark")
        at(1.5)
        ev("reseed through inventory-2")
        st, r = 0, {}
        for _ in range(20):     # a reseed refused (sku_busy, 503) changed nothing: again
            t_put = time.monotonic_ns()
            st, r = http_json("PUT", f"{self.inv(2)}/inventory/{c['sku']}", {"stock": c["stock"]},
                              timeout=15)
            if st == 200:
                self.own_ops.append(seed_op("reseed", c["sku"], c["stock"], t_put,
                                            time.monotonic_ns()))
                break
            time.sleep(0.2)
        hold["reseed"] = {"status": st, "error": r.get("error")}
        ev(f"reseed answered {st}{' ' + str(r.get('error')) if st != 200 else ''}", "end")
        return th

    # sigterm: `stack stop` (SIGTERM, graceful drain) of inventory-1 while
    # its holder is mid-sale, started again 3 s later
    def _sigterm(self, c, at, ev, hold, prefix, after):
        after.append(lambda: self.stack.start("inventory-1", check=False))
        at(1.0)
        th = self.holder(self.inv(1), self.body(c, {"order_id": f"{prefix}-holder", "hold_ms": 1500,
                                                    "lock_wait_ms": 3000}), 30, hold)
        ev("holder in (inventory-1, hold_ms 1500)", "mark")
        at(1.5)
        ev("SIGTERM inventory-1 (stack stop)")
        t = time.time()
        self.stack.stop("inventory-1")
        hold["stop_s"] = round(time.time() - t, 2)
        ev(f"inventory-1 exited after {hold['stop_s']} s", "mark")
        at(4.5)
        self.stack.start("inventory-1")
        ev("inventory-1 started", "end")
        return th

    def settled_audit(self, c, wait_s=30):
        """The audit once the Redis-stock guards settled: no pending
        (write-behind) sale and a drift that could be read; the last audit
        after wait_s."""
        deadline = time.time() + wait_s
        last, same = None, 0
        while True:
            st, audit = http_json("GET", f"{self.inv(2)}/inventory/{c['sku']}/audit")
            if st != 200:
                raise RuntimeError(f"audit of {c['sku']} answered {st}: {audit}")
            if not guardinfo.caps(c["guard"]).get("redis_stock"):
                return audit
            if not audit.get("pending") and audit.get("drift") == 0:
                return audit
            # a drift that stays put with nothing pending is the verdict
            d = audit.get("drift")
            same = same + 1 if (d is not None and d == last and not audit.get("pending")) else 0
            last = d
            if same >= 6:
                return audit
            if time.time() > deadline:
                return audit
            time.sleep(0.5)

    # ---- results --------------------------------------------------------

    def finish(self, c, lg, events, hold, t0, hpath):
        audit = self.settled_audit(c)
        self.log.write(f"audit {c['sku']}: {json.dumps(audit)}\n")
        sales = self.ledger_times(c["sku"])
        for name, h in (("holder", hold), ("buyer-b", hold.get("buyer_b") or {})):
            if h.get("invoke_ns"):
                self.own_ops.append(runner_op(name, h["invoke_ns"], h.get("complete_ns"),
                                              h["body"], h.get("status", 0), h.get("answer")))
        append_ops(hpath, self.own_ops)
        checker = check_file(hpath, self.work, [s[2] for s in sales])
        by_status = dict(lg["by_status"])
        by_error = dict(lg["by_error"])
        for h in (hold, hold.get("buyer_b") or {}):
            if not isinstance(h, dict):
                continue
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
        # requests still unanswered when loadgen stopped (and a holder that
        # never answered) may yet sell: indeterminate, as in the history
        unanswered = lg.get("in_flight", 0) + (1 if hold.get("invoke_ns") and "status" not in hold else 0)
        outc = outcomes(by_status, dict(lg["errors"], in_flight=unanswered), by_error)
        window = None
        if hold.get("sent_at"):
            # the holder's stale write overwrote what others sold between its
            # grant and its own ledger row
            mine = next((s[0] for s in sales if s[2].endswith("-holder")), None)
            window = (hold["sent_at"], mine if mine is not None else hold.get("done_at", t0 + 1e9))
        inv = invariant_block(audit, sales, outc, window)
        if inv["lost_updates"] and not inv["violations"]["lost_updates"]:
            inv["violations"]["lost_updates"] = self.same_stock_sales(c["sku"])
        if c["fault"] == "reseed":
            # the reseed cleared the ledger of the sales answered before it:
            # answered sales missing from the ledger are not a violation here
            inv["unacknowledged_unchecked"] = inv["unacknowledged"]
            inv["unacknowledged"] = 0
            inv["valid"] = not (inv["oversold"] or inv["lost_updates"] or inv["undersold"]
                                or inv["duplicates"] or inv["phantom"])
        if c["fault"] != "reseed":
            # an answered sale missing from the ledger (a failover that lost
            # it, a drain that stranded it) breaks the cell too; a reseed
            # clears the ledger of the sales before it
            held = held and inv["unacknowledged"] == 0
        drift = audit.get("drift")
        if guardinfo.caps(c["guard"]).get("redis_stock") and drift != 0:
            held = False     # Redis and MySQL apart once settled (or unreadable)
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
            "fenced": fenced, "n503": n503, "drift": drift, "pending": audit.get("pending"),
            "in_flight": unanswered,
            "unacknowledged": inv["unacknowledged"], "stop_s": hold.get("stop_s"),
            "reseed": hold.get("reseed"),
            "holder": {"status": hold.get("status"), "error": hans.get("error"),
                       "detail": (hans.get("detail") or "")[:160]} if hold else None,
            "measured": "held" if held else "broke",
            "events": events, "recovery": recover,
            "recover_s": next((r["recover_s"] for r in recover), None),
            "timeline": lg.get("timeline", {}),
            "outcomes": outc, "invariant": inv, "checker": checker, "valid": checker["valid"],
            "reproduce": reproduce_command(c),
        })



def reproduce_command(c):
    """A shell command that runs this one cell again (a one-cell scenario)."""
    label = c["label"].split("/", 1)[1] if "/" in c["label"] else c["label"]
    pairs = [f"guard={c['guard']}"]
    for k, v in c["fields"].items():
        pairs.append(f"{k}={'true' if v is True else 'false' if v is False else v}")
    conf = f"fault = {c['fault']}\\nvariant = {label} : {' '.join(pairs)}\\n"
    return (f"printf {shquote(conf)} > /tmp/cell.conf && "
            "loadtest/compare --scenario /tmp/cell.conf --dir ./run"
            + (f" --seed {c['seed']}" if c.get("seed") else ""))
