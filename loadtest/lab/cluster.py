"""The `cluster` scenario (mysql = galera3): every MySQL guard on a
three-node MariaDB Galera cluster, inventory instance i on node i, next to
the expected verdict from Galera's semantics; the same guards on one MySQL
server for the sales/s; a node killed and a node paused mid-load; and the
stale-read cell. Load cells are ordinary cells (lab.cell); the rest goes to
results.json's "cluster" block and cluster.md."""

import os
import subprocess
import threading
import time

from .cell import run_cell
from .drivers import CellSkip, LocalStack
from .net import http_json

# What Galera's semantics predict, per guard: (expected, why).
# "exact" = nothing oversold, no lost update; "loses updates" = a read then
# an unconditional write of the computed value, which certification cannot
# see as a conflict when the other node's write set was applied in between.
EXPECTED = {
    "none": ("loses updates", "read, then an unlocked write of the computed value: another "
             "node's write set applied in between is overwritten, no error"),
    "mutex": ("loses updates", "the mutex is per process: two instances on two nodes are "
              "`none` to each other"),
    "optimistic": ("exact, 1213s retried", "the version check runs on the local node; two nodes' "
                   "compare-and-set of the same version both pass locally, certification "
                   "refuses the later one (1213), which is retried"),
    "for-update": ("exact, 1213s retried", "FOR UPDATE locks the row on the local node only; the "
                   "loser gets 1213 at COMMIT or its next statement (certification / "
                   "brute-force abort), retried"),
    "conditional-update": ("exact, 1213s retried", "the check is in the UPDATE; conflicting "
                           "updates of the row are certified, the loser rolls back (1213) "
                           "and is retried"),
    "batched-update": ("exact, 1213s retried", "one FOR UPDATE transaction per batch: as "
                       "for-update, a lost certification repeats the round"),
    "lock-table": ("may lose updates", "the lock row is certified (one holder), but the holder "
                   "reads the stock on its own node without wsrep_sync_wait: the previous "
                   "holder's sale may not be applied there yet"),
    "redis-lock": ("may lose updates", "one holder cluster-wide, but its stock read on its own "
                   "node may miss the previous holder's sale (no wsrep_sync_wait)"),
    "zookeeper": ("may lose updates", "as redis-lock: the lock is global, the read is local"),
    "etcd": ("may lose updates", "as redis-lock: the lock is global, the read is local"),
}
NODES = ("galera-1", "galera-2", "galera-3")
SYNC_WAIT = 3


def restart_inventories(stack, env):
    """inventory-1..3 stopped and started again with `env` added."""
    for i in (1, 2, 3):
        stack.stop(f"inventory-{i}", check=False)
    for i in (1, 2, 3):
        stack.start(f"inventory-{i}", env=env)


def node_status(stack, i, names=("wsrep_local_cert_failures", "wsrep_local_bf_aborts")):
    """{name: int} of node i's global status (empty when it does not answer)."""
    port = stack.mysql_port + i
    q = "SHOW GLOBAL STATUS WHERE Variable_name IN (%s)" % ",".join(f"'{n}'" for n in names)
    try:
        p = subprocess.run(["mariadb", "--no-defaults", "--connect-timeout=2", "-h127.0.0.1",
                            f"-P{port}", "-uroot", "-N", "-B", "-e", q], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    out = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition("\t")
        if v.strip().lstrip("-").isdigit():
            out[k.lower()] = int(v)
    return out


def cluster_counters(stack):
    return [node_status(stack, i) for i in range(3)]


def counter_delta(before, after):
    out = {"cert_failures": [], "bf_aborts": []}
    for b, a in zip(before, after):
        out["cert_failures"].append(a.get("wsrep_local_cert_failures", 0) -
                                    b.get("wsrep_local_cert_failures", 0))
        out["bf_aborts"].append(a.get("wsrep_local_bf_aborts", 0) -
                                b.get("wsrep_local_bf_aborts", 0))
    return out


def judged(c):
    """'holds' or 'loses' from the measured audit."""
    if c.get("status") != "ok":
        return "-"
    if c.get("converged") is False:
        return "diverged"
    return "exact" if c["consistent"] else "loses updates"


class Prober:
    """One thread per inventory URL, selling one unit at a time (a fresh
    order id each), recording (t, status, latency) from a common start."""

    def __init__(self, urls, sku, guard, prefix):
        self.urls, self.sku, self.guard, self.prefix = urls, sku, guard, prefix
        self.rows = [[] for _ in urls]
        self.stop_at = 0
        self.t0 = 0

    def _loop(self, k):
        n = 0
        while time.monotonic() < self.stop_at:
            n += 1
            t = time.monotonic()
            try:
                st, _ = http_json("POST", self.urls[k] + "/inventory/deduct",
                                  {"sku": self.sku, "guard": self.guard, "qty": 1,
                                   "order_id": f"{self.prefix}-{k}-{n}", "lock_wait_ms": 10000},
                                  timeout=15)
            except OSError:
                st = 0
            self.rows[k].append((round(t - self.t0, 3), st, round(time.monotonic() - t, 3)))
            if st != 200:
                time.sleep(0.05)

    def run(self, seconds, actions):
        """Probe for `seconds`; actions = [(at_s, fn)] run in order meanwhile."""
        self.t0 = time.monotonic()
        self.stop_at = self.t0 + seconds
        ths = [threading.Thread(target=self._loop, args=(k,), daemon=True) for k in range(len(self.urls))]
        for t in ths:
            t.start()
        for at, fn in actions:
            delay = self.t0 + at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            fn()
        for t in ths:
            t.join(timeout=seconds + 30)


def longest_stall(rows, after):
    """Longest time after `after` during which no sale (200) finished on
    this probe: from one finished 200 (or `after`) to the next."""
    last, worst = after, 0.0
    for t, st, lat in rows:
        end = t + lat
        if end < after:
            continue
        if st == 200:
            worst = max(worst, end - last)
            last = end
    return round(worst, 2)


def refusal_window(rows, after):
    """(first, last) start times of non-200/409 answers after `after`."""
    bad = [t for t, st, _ in rows if t >= after and st not in (200, 409)]
    return (bad[0], bad[-1]) if bad else None


def first_sale_after(rows, after):
    for t, st, lat in rows:
        if t >= after and st == 200:
            return round(t + lat - after, 2)
    return None


def fault_cell(stack, kind, run_id, log):
    """A node killed (kind 'kill') or paused past the suspect timeout
    ('pause') while three probes sell conditional-update on nodes 1..3."""
    sku = f"CLU-{run_id}-{kind}"
    st, _ = http_json("PUT", f"{stack.inventory[0]}/inventory/{sku}", {"stock": 100000})
    if st != 200:
        raise RuntimeError(f"seeding {sku} answered {st}")
    p = Prober(stack.inventory[:3], sku, "conditional-update", f"{run_id}-{kind}")
    victim = "galera-3"
    fault_at, resume_at, total = 3.0, 12.0, 24.0
    marks = {}

    def mark(name, fn):
        def go():
            marks[name] = round(time.monotonic() - p.t0, 2)
            fn()
        return go
    if kind == "kill":
        total = 14.0
        actions = [(fault_at, mark("kill", lambda: stack.kill(victim)))]
    else:
        actions = [(fault_at, mark("pause", lambda: stack.pause(victim))),
                   (resume_at, mark("resume", lambda: stack.resume(victim)))]
    p.run(total, actions)
    fault_t = marks.get("kill", marks.get("pause", fault_at))
    surv = [longest_stall(p.rows[k], fault_t) for k in (0, 1)]
    cell = {"kind": kind, "guard": "conditional-update", "victim": victim, "marks": marks,
            "survivor_stall_s": surv, "sales": sum(1 for r in p.rows for x in r if x[1] == 200),
            "by_status": {}, "recover_s": [first_sale_after(p.rows[k], fault_t) for k in (0, 1)]}
    for r in p.rows:
        for _, s, _ in r:
            cell["by_status"][str(s)] = cell["by_status"].get(str(s), 0) + 1
    if kind == "pause":
        res_t = marks.get("resume", resume_at)
        w = refusal_window(p.rows[2], res_t)
        cell["resumed_refusal_s"] = [round(w[0] - res_t, 2), round(w[1] - res_t, 2)] if w else None
        cell["resumed_first_sale_s"] = first_sale_after(p.rows[2], res_t)
    # the timeline: sales per 0.5 s per probe
    bins = int(total / 0.5) + 1
    cell["timeline"] = [[0] * bins for _ in p.rows]
    for k, r in enumerate(p.rows):
        for t, s, lat in r:
            if s == 200:
                cell["timeline"][k][min(bins - 1, int((t + lat) / 0.5))] += 1
    if kind == "kill":
        t = time.monotonic()
        stack.start(victim)
        cell["rejoin_s"] = round(time.monotonic() - t, 1)
    # audit from a survivor, once the cluster converged
    st, audit = http_json("GET", f"{stack.inventory[0]}/inventory/{sku}/audit", timeout=30)
    cell["audit"] = {k: audit.get(k) for k in ("sold", "oversold", "lost_updates", "consistent",
                                               "converged", "stock")} if st == 200 else {"status": st}
    log.write(f"cluster fault {kind}: {cell}\n")
    return cell


def stale_read_cell(stack, run_id, n=200):
    """Sell on inventory-1 (node 1), then at once read the stock on
    inventory-2 (node 2, GET /inventory/{sku}, no wsrep_sync_wait) and with
    wsrep_sync_wait=1 straight on node 2: how often an 'in stock' page shows
    more than the deduction left. Meanwhile three probes sell another SKU on
    the three nodes, so the appliers have a queue, as in a sale."""
    sku = f"CLU-{run_id}-stale"
    http_json("PUT", f"{stack.inventory[0]}/inventory/{sku}", {"stock": 100000})
    busy = f"CLU-{run_id}-busy"
    http_json("PUT", f"{stack.inventory[0]}/inventory/{busy}", {"stock": 1000000})
    load = Prober(stack.inventory[:3], busy, "conditional-update", f"{run_id}-busy")
    bg = threading.Thread(target=load.run, args=(3600, []), daemon=True)
    bg.start()
    try:
        return _stale_reads(stack, run_id, sku, n)
    finally:
        load.stop_at = 0
        bg.join(timeout=30)


def _stale_reads(stack, run_id, sku, n):
    stale, stale_sync, worst, sync_reads = 0, 0, 0, 0
    port2 = stack.mysql_port + 1
    for i in range(n):
        st, sale = http_json("POST", f"{stack.inventory[0]}/inventory/deduct",
                             {"sku": sku, "guard": "conditional-update", "qty": 1,
                              "order_id": f"{run_id}-stale-{i}"})
        if st != 200:
            continue
        left = sale.get("remaining")
        st2, page = http_json("GET", f"{stack.inventory[1]}/inventory/{sku}")
        shown = page.get("stock") if st2 == 200 else None
        if shown is not None and left is not None and shown > left:
            stale += 1
            worst = max(worst, shown - left)
        if i % 4:
            continue           # the client costs a process: every 4th sale
        sync_reads += 1
        p = subprocess.run(["mariadb", "--no-defaults", "-h127.0.0.1", f"-P{port2}", "-uroot",
                            "-N", "-B", "-e", "SET SESSION wsrep_sync_wait=1; SELECT stock FROM "
                            f"db_shopping.inventory WHERE sku='{sku}'"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=10)
        if p.stdout.strip().isdigit() and left is not None and int(p.stdout) > left:
            stale_sync += 1
    return {"reads": n, "stale_without_sync_wait": stale, "max_units_behind": worst,
            "sync_reads": sync_reads, "stale_with_sync_wait": stale_sync}


def measure_cluster(sc, stack, loadgen, out, log, run_id):
    """Returns (cells, extra). cells: the guards on the cluster (2 and 3
    instances), then on one server (3 instances) for the sales/s."""
    if not isinstance(stack, LocalStack):
        raise CellSkip("the cluster scenario needs the embedded stack (deploy/local/stack)")
    stack.mysql_mode = "galera3"
    stack.up(3)
    st, gj = http_json("GET", stack.inventory[0] + "/guards")
    available = [g["name"] for g in gj.get("guards", [])] if st == 200 else []
    api = {g["name"]: g for g in gj.get("guards", [])} if st == 200 else {}
    guards = [g for g in (sc["guards"] if sc["guards"] != ["all"] else EXPECTED) if g in available]
    base = {"path": "direct", "stock": sc["stock"][0], "requests": sc["requests"][0],
            "concurrency": sc["concurrency"][0], "threads": sc["threads"], "hold_ms": sc["hold_ms"][0],
            "rate": 0, "fields": dict(sc["fields"])}
    cells = []

    def one(label, guard, n, where, stk, expect=None):
        c = dict(base, label=label, guard=guard, instances=n, cell=len(cells) + 1,
                 fields=dict(base["fields"]), db=where)
        exp = expect or EXPECTED.get(guard, ("?", ""))
        if where == "galera3":
            c["expected"], c["expected_why"] = exp
        try:
            every = list(stk.inventory)
            stk.inventory = every[:n]
            before = cluster_counters(stk) if where == "galera3" else None
            try:
                run_cell(c, sc, stk, run_id, loadgen, out, log)
            finally:
                stk.inventory = every
            if before is not None:
                c["wsrep"] = counter_delta(before, cluster_counters(stk))
            c["measured"] = judged(c)
        except (RuntimeError, OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
            c.update({"status": "error", "reason": str(e).splitlines()[0][:200] if str(e) else type(e).__name__})
        cells.append(c)
        w = c.get("wsrep") or {}
        print(f"[cluster {c['cell']}] {label} x{n} on {where}: "
              + (f"expected {c.get('expected', '-')}, measured {c.get('measured')}; sold {c['sold']} "
                 f"oversold {c['oversold']} lost {c['lost_updates']} conflicts {c['conflicts']} "
                 f"retries {c['retries']} 503 {c['n503']} cert {w.get('cert_failures')} "
                 f"bf {w.get('bf_aborts')} {c['ok_per_s']} ok/s"
                 if c.get("status") == "ok" else f"{c.get('status')}: {c.get('reason')}"), flush=True)

    for g in guards:
        for n in sc["instances"]:
            one(g, g, n, "galera3", stack)
    extra = {"guards": guards, "expected": {g: EXPECTED.get(g) for g in guards}}
    # The setting that makes a read see the cluster: wsrep_sync_wait on every
    # inventory session (3 = reads and UPDATE/DELETE wait until this node
    # applied what the cluster committed before them).
    sync = [g for g in guards if g not in ("none", "mutex")]
    if sync:
        restart_inventories(stack, {"LAB_MYSQL_SYNC_WAIT": str(SYNC_WAIT)})
        try:
            for g in sync:
                one(f"{g}+sync_wait", g, 3, "galera3", stack,
                    ("exact", f"wsrep_sync_wait={SYNC_WAIT}: the read (and the UPDATE) waits "
                     "until the node applied every earlier commit"))
                cells[-1]["sync_wait"] = SYNC_WAIT
        finally:
            restart_inventories(stack, {"LAB_MYSQL_SYNC_WAIT": "0"})
    for kind in ("kill", "pause"):
        try:
            extra[f"node_{kind}"] = fault_cell(stack, kind, run_id, log)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            extra[f"node_{kind}"] = {"error": str(e)[:200]}
        print(f"[cluster] node {kind}: {extra[f'node_{kind}']}", flush=True)
    try:
        extra["stale_read"] = stale_read_cell(stack, run_id)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        extra["stale_read"] = {"error": str(e)[:200]}
    print(f"[cluster] stale read: {extra['stale_read']}", flush=True)
    # The same guards on one MySQL server, for the sales/s.
    single = LocalStack(stack.dir + "-single", log)
    try:
        single.extra_env = {"LAB_PORT_BASE": str(free_base())}
        single.up(3)
        for g in guards:
            one(g + "@1-server", g, 3, "single", single)
        extra["single_dir"] = single.dir
    except RuntimeError as e:
        extra["single_error"] = str(e)[:200]
    finally:
        single.down()
    return cells, extra, api


def free_base():
    """A port base (base..base+70 free on loopback) for the one-server stack
    next to the cluster's."""
    import random
    import socket
    for _ in range(60):
        # below Linux's ephemeral ports (32768..), where clients come from
        base = 26000 + random.randrange(60) * 100
        try:
            for p in range(base, base + 71):
                with socket.socket() as s:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return base
    raise RuntimeError("no free port base for the one-server stack")


def write_cluster_md(res, out):
    from .render.cluster import cluster_table
    lines = cluster_table(res)
    with open(os.path.join(out, "cluster.md"), "w", encoding="utf-8") as f:
        f.write("# cluster scenario (MariaDB Galera, 3 nodes)\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
