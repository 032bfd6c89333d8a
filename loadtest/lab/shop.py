"""The shop cells: scenario kinds `cart`, `limits` and `retry`, each driven
from Python (a thread pool of urllib clients, one request per call), each
judged from the audit and the answers, never from what was meant to happen.

- cart: carts of 2-3 SKUs, crossed ({A,B} and {B,A}), some with one SKU on
  two lines, round-robin over the instances; held = every SKU's audit
  exact and the 200 answers' units = the ledger's, per SKU. Deadlocks and
  lock timeouts are counted (lab_cart_conflicts_total, lab_lock_timeouts_total
  and the 503 answers), not judged: a cart lost to a deadlock sold nothing.
- limits: one SKU with limit_per_user, a few users racing their purchases
  over the instances; held = over_limit 0, every user's 200 units <= the
  limit, stock exact; a guard that does not enforce limits must refuse
  every sale (400): measured "refused".
- retry: buyers through the order service with a short client timeout and
  retries (plain: the same body again; new-ids: a new order_id per try;
  key: one Idempotency-Key per buyer); held = the orders placed and the
  ledger's units equal the buyers.
Fills the cell dict in place like lab.holds."""

import concurrent.futures
import json
import time
import urllib.error
import urllib.request

from .cell import run_prefix
from .holds import latency, timed
from .net import http, http_json, label_of

POOL = 16
SETTLE_S = 10          # longest wait for the order service to finish what timed-out clients left
CART_METRICS = ("lab_cart_conflicts_total", "lab_lock_timeouts_total")
# the cart shapes, cycled over the buyers: crossed pairs and one SKU twice
CART_SHAPES = ([("A", 1), ("B", 1)], [("B", 1), ("A", 1)], [("A", 2), ("A", 2)],
               [("C", 1), ("B", 1), ("A", 1)], [("A", 1), ("C", 1)], [("B", 2), ("B", 2)])


def post(url, body, headers=None, timeout=10):
    """(status, json, ms); status 0 when nothing answered in `timeout` s."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            st, text = r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        st, text = e.code, e.read().decode("utf-8", "replace")
    except OSError as e:
        return 0, {"error": "timeout_or_socket", "message": str(e)}, (time.monotonic() - t0) * 1000.0
    try:
        j = json.loads(text)
    except ValueError:
        j = {"raw": text[:200]}
    return st, j, (time.monotonic() - t0) * 1000.0


def seed(url, sku, stock, limit=0):
    st, j = http_json("PUT", f"{url}/inventory/{sku}", {"stock": stock, "limit_per_user": limit})
    if st != 200:
        raise RuntimeError(f"seeding {sku} answered {st}: {j}")


def audit(url, sku):
    st, a = http_json("GET", f"{url}/inventory/{sku}/audit")
    if st != 200:
        raise RuntimeError(f"audit of {sku} answered {st}: {a}")
    return a


def conflicts(urls):
    """{kind: count} of the cart conflicts and lock timeouts over the instances."""
    out = {}
    for u in urls:
        try:
            st, text = http("GET", u + "/metrics", timeout=5)
        except OSError:
            continue
        for line in text.splitlines() if st == 200 else []:
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name not in CART_METRICS:
                continue
            labels = line[len(name):].split(" ", 1)[0] if line[len(name):].startswith("{") else ""
            kind = label_of(labels, "kind") or "lock_timeout"
            try:
                out[kind] = out.get(kind, 0) + float(line.rsplit(" ", 1)[1])
            except (ValueError, IndexError):
                pass
    return out


def tally(rows):
    by_status, by_error = {}, {}
    for st, j, _ in rows:
        by_status[str(st)] = by_status.get(str(st), 0) + 1
        if isinstance(j, dict) and j.get("error"):
            by_error[j["error"]] = by_error.get(j["error"], 0) + 1
    return by_status, by_error


def finish(c, rows, audits, n, broke, why, dur):
    """The cell's common figures (those lab.render and lab.verdicts read)."""
    by_status, by_error = tally(rows)
    okn = by_status.get("200", 0) + by_status.get("201", 0)
    n.update({"verdict": "refused" if n.get("refused") else ("broke" if broke else "held"),
              "why": "; ".join(why) or n.get("why_refused") or "held"})
    c.update({"status": "ok", "shop": n, "measured": n["verdict"],
              "sold": sum(a["sold"] for a in audits), "oversold": sum(a["oversold"] for a in audits),
              "lost_updates": sum(a["lost_updates"] for a in audits), "consistent": not broke,
              "stock_left": sum(a["stock"] for a in audits), "initial": sum(a["initial"] for a in audits),
              "successes": okn, "answered": len(rows), "duration_s": round(dur, 3),
              "rps": round(len(rows) / dur, 1), "ok_per_s": round(okn / dur, 1),
              "latency_ms": latency([{"ms": ms} for _, _, ms in rows]), "latency_curve": [],
              "by_status": by_status, "by_error": by_error, "socket_errors": {},
              "n503": by_status.get("503", 0),
              "audit_why": "; ".join(a["why"] for a in audits if a.get("why"))})


def run_shop_cell(c, sc, stack, run_id, offered):
    """One cell of kind cart | limits | retry; `offered`: GET /guards says
    the guard takes carts (cart) or enforces limits (limits)."""
    {"cart": run_cart, "limits": run_limits, "retry": run_retry}[c["kind"]](
        c, sc, stack, run_prefix(run_id, c), offered)


def run_cart(c, sc, stack, prefix, offered):
    urls = stack.inventory
    skus = {k: f"{sc['sku_prefix']}-{prefix}-{k}" for k in "ABC"}
    for s in skus.values():
        seed(urls[0], s, c["stock"])
    before = conflicts(urls)
    fields = dict(c["fields"])

    def one(i):
        lines = [{"sku": skus[k], "qty": q} for k, q in CART_SHAPES[i % len(CART_SHAPES)]]
        body = {"order_id": f"{prefix}-c{i}", "lines": lines, "guard": c["guard"], "hold_ms": c["hold_ms"]}
        body.update(fields)
        return (*post(urls[i % len(urls)] + "/inventory/deduct", body), lines)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(POOL, c["concurrency"])) as pool:
        out = list(pool.map(one, range(c["requests"])))
    dur = time.monotonic() - t0
    after = conflicts(urls)
    answered = {s: 0 for s in skus.values()}
    for st, j, _, lines in out:
        if st == 200:
            for ln in lines:
                answered[ln["sku"]] += ln["qty"]
    audits = [audit(urls[0], s) for s in skus.values()]
    delta = {k: int(after.get(k, 0) - before.get(k, 0)) for k in set(after) | set(before)}
    rows = [(st, j, ms) for st, j, ms, _ in out]
    n = {"carts": c["requests"], "skus": len(skus), "ok": sum(1 for r in rows if r[0] == 200),
         "n409": sum(1 for r in rows if r[0] == 409), "n503": sum(1 for r in rows if r[0] == 503),
         "deadlocks": delta.get("deadlock", 0), "lock_wait_timeouts": delta.get("lock_wait_timeout", 0),
         "lock_timeouts": delta.get("lock_timeout", 0),
         "answers_match": all(answered[a["sku"]] == a["sold"] for a in audits),
         "exact": all(a["oversold"] == 0 and a["lost_updates"] == 0 and a["stock"] >= 0 for a in audits)}
    why = []
    if not n["exact"]:
        why.append("audit not exact: " + "; ".join(a["why"] for a in audits if a.get("why")))
    if not n["answers_match"]:
        why.append(f"200 answers {answered} != ledger {({a['sku']: a['sold'] for a in audits})}")
    finish(c, rows, audits, n, bool(why), why, dur)


def run_limits(c, sc, stack, prefix, offered):
    urls = stack.inventory
    sku = f"{sc['sku_prefix']}-{prefix}-L"
    seed(urls[0], sku, c["stock"], sc["limit_per_user"])
    users = [f"{prefix}-u{k}" for k in range(sc["users"])]
    per = max(1, c["requests"] // len(users))
    fields = dict(c["fields"])

    def one(i):
        u = users[i % len(users)]
        body = {"order_id": f"{prefix}-l{i}", "sku": sku, "qty": 1, "user_id": u,
                "guard": c["guard"], "hold_ms": c["hold_ms"]}
        body.update(fields)
        return (*post(urls[i % len(urls)] + "/inventory/deduct", body), u)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(POOL, c["concurrency"])) as pool:
        out = list(pool.map(one, range(per * len(users))))
    dur = time.monotonic() - t0
    a = audit(urls[0], sku)
    bought = {u: 0 for u in users}
    for st, _, _, u in out:
        bought[u] += 1 if st == 200 else 0
    rows = [(st, j, ms) for st, j, ms, _ in out]
    n = {"users": len(users), "per_user": per, "limit": sc["limit_per_user"],
         "ok": sum(1 for r in rows if r[0] == 200),
         "limit_exceeded": sum(1 for r in rows if r[0] == 409 and r[1].get("error") == "limit_exceeded"),
         "n400": sum(1 for r in rows if r[0] == 400), "max_bought": max(bought.values()),
         "over_limit": a.get("over_limit", 0), "offered": offered,
         "exact": a["oversold"] == 0 and a["lost_updates"] == 0,
         "answers_match": sum(bought.values()) == a["sold"]}
    why = []
    if not offered:
        # not held: the guard does not sell a limited SKU at all
        n["refused"] = n["n400"] == len(rows) and a["sold"] == 0
        if not n["refused"]:
            why.append(f"a guard without limits sold {a['sold']} unit(s) of a limited SKU")
        else:
            n["why_refused"] = f"refused (not offered): {n['n400']} sales answered 400, nothing sold"
    if a.get("over_limit") or n["max_bought"] > n["limit"]:
        why.append(f"over_limit {a.get('over_limit')}: {a.get('over_limit_users')}")
    if not n["exact"] or not n["answers_match"] or not a["consistent"]:
        why.append(f"audit: {a.get('why')}; 200 answers {sum(bought.values())}, ledger {a['sold']}")
    finish(c, rows, [a], n, bool(why), why, dur)


def retry_buyer(order_url, b, prefix, c, sku, mode, tries):
    """One buyer: up to `tries` sends, each cut by the client timeout.
    Returns its answers."""
    out = []
    for k in range(tries):
        body = {"sku": sku, "qty": 1, "user_id": f"{prefix}-b{b}", "guard": c["guard"], "hold_ms": c["hold_ms"]}
        hdr = {}
        if mode == "new-ids":
            body["order_id"] = f"{prefix}-b{b}-t{k}"
        elif mode == "key":
            hdr["Idempotency-Key"] = f"{prefix}-b{b}"
        st, j, ms = post(order_url + "/orders", body, hdr, timeout=c["client_timeout_ms"] / 1000.0)
        out.append((st, j, ms))
        if st == 201 or (400 <= st < 500 and st != 409):
            break
    return out


def settle(order_url, inv_url, skus, hold_ms):
    """({sku: orders answer}, [audits]) once two reads in a row agree and
    every SKU's orders' units equal its ledger's, SETTLE_S at most: the order
    service finishes the sales the clients stopped waiting for."""
    end, last = time.monotonic() + SETTLE_S, None
    while True:
        time.sleep(max(0.2, hold_ms / 1000.0))
        orders = {}
        for s in skus:
            st, o = http_json("GET", f"{order_url}/orders?sku={s}")
            orders[s] = o if st == 200 else {}
        audits = [audit(inv_url, s) for s in skus]
        agree = all(orders[a["sku"]].get("units") == a["sold"] for a in audits)
        if (agree and orders == last) or time.monotonic() >= end:
            return orders, audits
        last = orders


def run_retry(c, sc, stack, prefix, offered):
    """Each buyer buys its own SKU (no row shared: the sales do not queue on
    one another), so its orders and ledger units are counted per buyer."""
    stack.ensure_order()
    urls = stack.inventory
    buyers = c["requests"]
    skus = [f"{sc['sku_prefix']}-{prefix}-R{b}" for b in range(buyers)]
    for s in skus:
        seed(urls[0], s, c["stock"])
    fields = dict(c["fields"])
    mode = fields.pop("retry", "plain")
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(POOL, c["concurrency"])) as pool:
        out = list(pool.map(lambda b: retry_buyer(stack.order, b, prefix, c, skus[b], mode, sc["retries"] + 1),
                            range(buyers)))
    dur = time.monotonic() - t0
    orders, audits = settle(stack.order, urls[0], skus, c["hold_ms"])
    rows = [r for b in out for r in b]
    per = [orders[s].get("orders", -1) for s in skus]
    n = {"mode": mode, "buyers": buyers, "sends": len(rows),
         "timeouts": sum(1 for r in rows if r[0] == 0), "n201": sum(1 for r in rows if r[0] == 201),
         "orders": sum(per), "twice": sum(1 for k in per if k > 1), "none": sum(1 for k in per if k < 1),
         "ledger": sum(a["sold"] for a in audits),
         "exact": all(a["oversold"] == 0 and a["lost_updates"] == 0 for a in audits)}
    why = []
    if n["twice"] or n["none"] or n["ledger"] != buyers:
        why.append(f"{buyers} buyers made {n['orders']} orders ({n['twice']} bought more than once, "
                   f"{n['none']} not at all), {n['ledger']} ledger unit(s)")
    if not n["exact"]:
        why.append("audit: " + "; ".join(a["why"] for a in audits if a.get("why")))
    finish(c, rows, audits, n, bool(why), why, dur)
