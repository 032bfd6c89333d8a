"""The holds cell (scenario `kind = holds`): buyers reserve with a short
ttl_ms, pay_pct% of the holds are confirmed within the window, late_pct%
after the deadline (once the sweeper gave their units back, while buyers
refused at first buy the units again), the rest never pay. Every answer is
recorded; the verdict comes from the audit (oversold, held,
expired_unswept, late_confirms, initial = stock + sold + held) and from the
answers matching the ledger. Fills the cell dict in place like lab.cell."""

import concurrent.futures
import random
import time

from .cell import run_prefix
from .faultplan import HOLD_FAULTS, PLAN
from .net import http_json

SWEEP_WAIT_S = 15     # longest wait past the last deadline for the sweepers
POOL = 16             # client threads (HTTP/1.0 per request: urllib)
CONFIRM_FIELDS = ("confirm_check",)   # body fields that go to confirm, not reserve


def split_fields(fields):
    """(reserve extras, confirm extras) of a cell's body fields."""
    res = {k: v for k, v in fields.items() if k not in CONFIRM_FIELDS}
    con = {k: v for k, v in fields.items() if k in CONFIRM_FIELDS}
    return res, con


def timed(method, url, body):
    """(status, json, ms); status 0 when nothing answered."""
    t0 = time.monotonic()
    try:
        st, j = http_json(method, url, body, timeout=10)
    except OSError as e:
        st, j = 0, {"error": "socket", "message": str(e)}
    return st, j, (time.monotonic() - t0) * 1000.0


class Answers:
    """Every request's (what, status, error, fresh, ms), in one list."""

    def __init__(self):
        self.rows = []

    def add(self, what, st, j, ms):
        self.rows.append({"what": what, "status": st, "error": j.get("error"),
                          "fresh": bool(j.get("fresh")), "ms": ms})
        return st, j


def roles(held_ids, pay_pct, late_pct, rng):
    """{order_id: pay | late | never}, drawn by the cell's seed."""
    ids = list(held_ids)
    rng.shuffle(ids)
    n_pay = round(len(ids) * pay_pct / 100)
    n_late = min(len(ids) - n_pay, round(len(ids) * late_pct / 100))
    out = {o: "pay" for o in ids[:n_pay]}
    out.update({o: "late" for o in ids[n_pay:n_pay + n_late]})
    out.update({o: "never" for o in ids[n_pay + n_late:]})
    return out


def wait_swept(audit_url, deadline_ms):
    """Poll the audit until the clock is past the last deadline and no hold
    is live or expired-unswept, SWEEP_WAIT_S at most. Returns (audit, s
    past the deadline)."""
    end = time.monotonic() + max(0.0, deadline_ms / 1000.0 - time.time()) + SWEEP_WAIT_S
    while True:
        st, a = http_json("GET", audit_url)
        if st != 200:
            raise RuntimeError(f"audit answered {st}: {a}")
        past = time.time() * 1000.0 > deadline_ms
        if (past and not a.get("held") and not a.get("expired_unswept")) or time.monotonic() >= end:
            return a, round(time.time() - deadline_ms / 1000.0, 2)
        time.sleep(0.1)


def buyer_round(pool, urls, sku, ids, c, rfields, cfields, ans, confirm):
    """Reserve every id (round-robin over the instances); confirm the held
    ones at once when `confirm`. Returns {order_id: reserve answer}."""
    def one(i, oid):
        u = urls[i % len(urls)]
        body = {"order_id": oid, "sku": sku, "qty": 1, "ttl_ms": c["ttl_ms"], "guard": c["guard"]}
        body.update(rfields)
        st, j = ans.add("reserve", *timed("POST", u + "/inventory/reserve", body))
        if confirm and st == 200 and j.get("held"):
            b = {"order_id": oid}
            b.update(cfields)
            ans.add("resale", *timed("POST", urls[(i + 1) % len(urls)] + "/inventory/confirm", b))
        return oid, st, j
    run = pool.map if pool is not None else map
    return {oid: (st, j) for oid, st, j in run(lambda a: one(*a), enumerate(ids))}


def confirm_all(pool, urls, ids, cfields, ans, what):
    def one(i, oid):
        b = {"order_id": oid}
        b.update(cfields)
        return ans.add(what, *timed("POST", urls[(i + 1) % len(urls)] + "/inventory/confirm", b))
    return list(pool.map(lambda a: one(*a), enumerate(ids)))


def plan_fault_cell(c):
    """A hold-* fault cell takes its holds figures from the fault's PLAN."""
    p = PLAN[c["fault"]]
    c.update({"kind": "holds", "stock": p["stock"], "requests": p["buyers"], "concurrency": POOL,
              "ttl_ms": p["ttl_ms"], "pay_pct": p["pay_pct"], "late_pct": p["late_pct"]})


def inject(c, stack, urls, sku, t0, log):
    """The cell's fault, once every reserve is answered and before any
    confirm: (the instances to talk to from now on, its event, whether
    inventory-1 must be started again)."""
    f = c.get("fault")
    if f not in HOLD_FAULTS:
        return urls, None, False
    t = round(time.monotonic() - t0, 2)
    if f == "hold-crash":
        stack.kill("inventory-1")
        what = "kill -9 inventory-1 with live holds"
    elif f == "hold-sigterm":
        stack.stop("inventory-1")
        what = "SIGTERM inventory-1 (drained) with live holds"
    else:
        st, j = http_json("PUT", f"{urls[1]}/inventory/{sku}", {"stock": c["stock"]})
        if st != 200:
            raise RuntimeError(f"reseeding {sku} through inventory-2 answered {st}: {j}")
        what = "reseed (same stock) through inventory-2 with live holds"
    log.write(f"holds cell {c['cell']}: {what} at {t} s\n")
    return urls[1:], {"t": t, "what": what, "kind": "fault"}, f != "hold-reseed"


def run_holds_cell(c, sc, stack, run_id, work, log):
    if c.get("fault") in HOLD_FAULTS:
        plan_fault_cell(c)
    prefix = run_prefix(run_id, c)
    sku = f"{sc['sku_prefix']}-{prefix}"
    c["sku"] = sku
    urls = stack.inventory
    st, seeded = http_json("PUT", f"{urls[0]}/inventory/{sku}", {"stock": c["stock"]})
    if st != 200:
        raise RuntimeError(f"seeding {sku} answered {st}: {seeded}")
    rfields, cfields = split_fields(c["fields"])
    rng = random.Random(c.get("seed") or 1)
    ans = Answers()
    ids = [f"{prefix}-h{i}" for i in range(c["requests"])]
    t0 = time.monotonic()
    restart = False
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(POOL, c["concurrency"])) as pool:
            first = buyer_round(pool, urls, sku, ids, c, rfields, cfields, ans, confirm=False)
            urls, event, restart = inject(c, stack, urls, sku, t0, log)
            audit_url = f"{urls[0]}/inventory/{sku}/audit"
            held = {o: j for o, (s, j) in first.items() if s == 200 and j.get("held")}
            refused = [o for o, (s, j) in first.items() if s == 409 and j.get("error") == "out_of_stock"]
            role = roles(sorted(held), c["pay_pct"], c["late_pct"], rng)
            pay = [o for o in sorted(held) if role[o] == "pay"]
            late = [o for o in sorted(held) if role[o] == "late"]
            paid = confirm_all(pool, urls, pay, cfields, ans, "confirm")
            last_ms = max((j.get("expires_at_ms", 0) for j in held.values()), default=0)
            swept, past_s = wait_swept(audit_url, last_ms)
            log.write(f"holds cell {c['cell']}: {len(held)} held, {len(pay)} paid, swept "
                      f"{past_s} s past the last deadline: {swept}\n")
            # The buyers refused at first buy the units given back while the late
            # payers pay: a late payment must not take a unit someone bought since.
            again, late_ans = second_round(pool, urls, sku, refused, late, c, rfields, cfields, ans, rng)
        a, _ = wait_swept(audit_url, 0)
        fill_cell(c, a, ans, held, paid, late_ans, again, past_s, time.monotonic() - t0)
        if event:
            c.update({"measured": c["holds"]["verdict"], "events": [event], "recovery": []})
    finally:
        if restart:
            stack.start("inventory-1", check=False)


def second_round(pool, urls, sku, refused, late, c, rfields, cfields, ans, rng):
    """The refused buyers (reserve, then confirm at once) and the late
    payers' confirms, shuffled into one round. Returns (rebuyers' reserve
    answers, late confirms' answers)."""
    tasks = [("rebuy", o) for o in refused] + [("late", o) for o in late]
    rng.shuffle(tasks)

    def one(i, task):
        kind, oid = task
        if kind == "rebuy":
            return kind, buyer_round(None, urls[i % len(urls):] + urls[:i % len(urls)], sku, [oid], c,
                                     rfields, cfields, ans, True)[oid]
        b = {"order_id": oid}
        b.update(cfields)
        return kind, ans.add("late", *timed("POST", urls[i % len(urls)] + "/inventory/confirm", b))
    out = list(pool.map(lambda a: one(*a), enumerate(tasks)))
    return [r for k, r in out if k == "rebuy"], [r for k, r in out if k == "late"]


def latency(rows):
    ms = sorted(r["ms"] for r in rows)
    if not ms:
        return {}

    def p(q):
        return round(ms[min(len(ms) - 1, int(q * len(ms)))], 3)
    return {"p50": p(0.5), "p90": p(0.9), "p99": p(0.99), "p999": p(0.999), "max": round(ms[-1], 3),
            "mean": round(sum(ms) / len(ms), 3)}


def counts(c, a, ans, held, paid, late_ans, again):
    ok = lambda pairs: sum(1 for s, _ in pairs if s == 200)  # noqa: E731
    resale = [r for r in ans.rows if r["what"] == "resale"]
    n = {"buyers": c["requests"], "held": len(held),
         "paid": ok(paid),
         "expired": len(held) - ok(paid),
         "late": len(late_ans),
         "late_refused": sum(1 for s, j in late_ans if s == 409 and j.get("error") == "hold_expired"),
         "late_fresh": sum(1 for s, j in late_ans if s == 200 and j.get("fresh")),
         "late_stale": sum(1 for s, j in late_ans if s == 200 and not j.get("fresh")),
         "resold": sum(1 for r in resale if r["status"] == 200),
         "second_buyers": len(again),
         "errors": sum(1 for r in ans.rows if r["status"] == 0 or r["status"] >= 500),
         "live_after": a.get("held", 0), "expired_unswept": a.get("expired_unswept", 0),
         "late_confirms": a.get("late_confirms") or []}
    # every 200 confirm is one ledger unit; anything else is a unit the
    # answers do not account for
    n["answered_sales"] = n["paid"] + n["late_fresh"] + n["late_stale"] + n["resold"]
    return n


def fill_cell(c, a, ans, held, paid, late_ans, again, past_s, dur):
    n = counts(c, a, ans, held, paid, late_ans, again)
    exact = a["initial"] == a["stock"] + a["sold"] + a.get("held", 0)
    n["exact"] = exact
    n["answers_match"] = n["answered_sales"] == a["sold"]
    n["swept_after_s"] = past_s
    broke = (a["oversold"] > 0 or not a["consistent"] or not exact or n["live_after"]
             or n["expired_unswept"] or n["late_confirms"] or not n["answers_match"])
    n["verdict"] = "broke" if broke else "held"
    by_status, by_error = {}, {}
    for r in ans.rows:
        by_status[str(r["status"])] = by_status.get(str(r["status"]), 0) + 1
        if r["error"]:
            by_error[r["error"]] = by_error.get(r["error"], 0) + 1
    okn = sum(1 for r in ans.rows if r["status"] == 200)
    c.update({"status": "ok", "holds": n,
              "sold": a["sold"], "oversold": a["oversold"], "lost_updates": a["lost_updates"],
              "consistent": not broke, "stock_left": a["stock"], "initial": a["initial"],
              "successes": okn, "answered": len(ans.rows), "duration_s": round(dur, 3),
              "rps": round(len(ans.rows) / dur, 1), "ok_per_s": round(okn / dur, 1),
              "latency_ms": latency(ans.rows), "latency_curve": [],
              "by_status": by_status, "by_error": by_error, "socket_errors": {},
              "n503": by_status.get("503", 0), "audit_why": a.get("why", "")})
