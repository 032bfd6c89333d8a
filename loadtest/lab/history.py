"""The history checker: every operation of a cell (loadgen --history, the
fault runner's own requests) checked against a model, one by one, the way
Jepsen's Knossos and Porcupine check a history, then joined with the ledger.

The model is a decrement-if-enough counter per SKU: stock n; "sell q"
succeeds iff n >= q and leaves n - q (an ok answer's `remaining` says what
it left); an out_of_stock refusal saw n < q; any other refusal sold nothing
and constrains nothing; an indeterminate operation (no answer, a timeout, a
5xx, 503 backend_unavailable, in flight at the end) may or may not have
taken effect, at any one moment after its invoke; a seed or reseed sets n.

The search is Wing and Gong's, with Lowe's memoisation (the set of
operations placed and the stock), bounded by a step budget: past it the
verdict is "unknown (budget)", never a guess. Indeterminate operations of
the same qty are interchangeable once invoked (nothing bounds them after),
so the search places the earliest one first and remembers how many it
placed, not which.

Pure functions of the history and the ledger; no I/O but load()."""

import json
import math

MODEL = "counter"
DEFAULT_BUDGET = 3_000_000   # search steps per SKU (about a second or two of Python each)
WINDOW_MAX = 40              # operations shown around the first one that cannot be placed
MAX_IDS = 10

# Op kinds in the search.
OK, OUT_OF_STOCK, SEED = "ok", "out_of_stock", "seed"
INF = math.inf


def load(path):
    """The operations of a JSON-lines history file (blank lines skipped)."""
    ops = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                ops.append(json.loads(line))
    return ops


def qty_of(op):
    q = op.get("qty")
    return int(q) if isinstance(q, (int, float)) else 1


def is_seed(op):
    return op.get("op") in ("seed", "reseed")


def is_noop(op):
    """A refusal that constrains nothing (not out_of_stock), or the echo of
    an order already sold (duplicate): the model skips it."""
    if op.get("outcome") == "refused":
        return op.get("error") != "out_of_stock"
    return op.get("outcome") == "ok" and bool(op.get("duplicate"))


def by_sku(ops):
    """{sku: [op]} (operations without a sku are dropped)."""
    out = {}
    for op in ops:
        if op.get("sku") is not None:
            out.setdefault(op["sku"], []).append(op)
    return out


# ---- the linearizability search ---------------------------------------------

class _Search:
    """One SKU's history prepared for the search: required operations (ok,
    out_of_stock, seeds: each must be placed, between its invoke and its
    complete) in a time-ordered doubly linked list of call and return
    entries, and the indeterminate ones by qty, in invoke order."""

    def __init__(self, ops, initial):
        self.initial = initial
        self.req = sorted((op for op in ops if op.get("outcome") != "indeterminate"
                           and not is_noop(op)), key=lambda o: o["invoke_ns"])
        self.ind = {}
        for op in sorted((op for op in ops if op.get("outcome") == "indeterminate"),
                         key=lambda o: o["invoke_ns"]):
            self.ind.setdefault(qty_of(op), []).append(op)
        self.qtys = sorted(self.ind)
        ents = []
        for i, op in enumerate(self.req):
            done = op.get("complete_ns")
            ents.append((op["invoke_ns"], 0, i))
            ents.append((done if done is not None else INF, 1, i))
        ents.sort()   # calls before returns at one instant: those overlap
        n = len(ents)
        self.kind = [e[1] for e in ents]            # 0 call, 1 return
        self.opi = [e[2] for e in ents]
        self.time = [e[0] for e in ents]
        self.nxt = list(range(1, n + 2))            # index n + 1 ... sentinel: head is -1 -> 0
        self.prv = list(range(-1, n))
        self.head_next = 0 if n else None
        self.ret_of = [0] * len(self.req)
        self.call_of = [0] * len(self.req)
        for e in range(n):
            if self.kind[e]:
                self.ret_of[self.opi[e]] = e
            else:
                self.call_of[self.opi[e]] = e
        self.n = n

    # the linked list: entries 0..n-1, n = end; head_next points at the first
    def _unlink(self, e):
        p, x = self.prv[e], self.nxt[e]
        if p < 0:
            self.head_next = x if x < self.n else None
        else:
            self.nxt[p] = x
        if x < self.n:
            self.prv[x] = p

    def _relink(self, e):
        p, x = self.prv[e], self.nxt[e]
        if p < 0:
            self.head_next = e
        else:
            self.nxt[p] = e
        if x < self.n:
            self.prv[x] = e

    def lift(self, i):
        self._unlink(self.call_of[i])
        self._unlink(self.ret_of[i])

    def unlift(self, i):
        self._relink(self.ret_of[i])
        self._relink(self.call_of[i])

    def op_of(self, choice, m):
        """(op, qty) of a candidate: a required op's index, or -1 - k for
        the next indeterminate op of the k-th qty."""
        if choice >= 0:
            op = self.req[choice]
            return op, qty_of(op)
        k = -1 - choice
        return self.ind[self.qtys[k]][m[k]], self.qtys[k]

    def candidates(self, m):
        """(required ops that may go next, indeterminate qtys that may, the
        op whose return bounds them or None)."""
        cands, e, block = [], self.head_next, None
        while e is not None and e < self.n:
            if self.kind[e]:
                block = self.opi[e]
                break
            cands.append(self.opi[e])
            e = self.nxt[e]
        until = self.time[self.ret_of[block]] if block is not None else INF
        iq = [k for k, q in enumerate(self.qtys)
              if m[k] < len(self.ind[q]) and self.ind[q][m[k]]["invoke_ns"] <= until]
        return cands, iq, block


ANY = -1   # slack: no bound known on the stock yet


def step(state, op, q, slack=False):
    """The model: the stock after op, or None when op cannot happen here.
    With slack, state is only the most the stock can be (sales nobody
    looks at may lower it at any time, by any amount): a looser model, for
    a window checked on its own, so whatever fails in it fails for real."""
    if is_seed(op):
        return int(op["stock"])
    out = op.get("outcome")
    if slack:
        if out == "indeterminate":
            return state
        if out == "refused":
            return q - 1 if state == ANY else min(state, q - 1)
        if state != ANY and state < q:
            return None
        rem = op.get("remaining") if out == "ok" else None
        if rem is None:
            return ANY if state == ANY else state - q
        if rem < 0 or (state != ANY and state < rem + q):
            return None
        return rem
    if out == "refused":              # out_of_stock: saw fewer than q
        return state if state < q else None
    if state < q:
        return None
    rem = op.get("remaining") if out == "ok" else None
    if rem is not None and rem != state - q:
        return None
    return state - q


class _Placed:
    """Which operations the search has placed: required ones as a prefix
    0..f-1 of their invoke order plus a few more (extra), indeterminate ones
    as a count per qty. key() is Lowe's memo key with the stock."""

    def __init__(self, nreq, nqty):
        self.lin = [False] * nreq
        self.m = [0] * nqty
        self.f, self.extra = 0, frozenset()

    def place(self, choice):
        """Returns what unplace needs."""
        saved = (self.f, self.extra)
        if choice < 0:
            self.m[-1 - choice] += 1
            return saved
        self.lin[choice] = True
        if choice == self.f:
            while self.f < len(self.lin) and self.lin[self.f]:
                self.f += 1
            self.extra = frozenset(x for x in self.extra if x >= self.f)
        else:
            self.extra = self.extra | {choice}
        return saved

    def unplace(self, choice, saved):
        if choice < 0:
            self.m[-1 - choice] -= 1
        else:
            self.lin[choice] = False
        self.f, self.extra = saved

    def key(self, state):
        return (self.f, self.extra, state, tuple(self.m))


def linearize(ops, initial, budget=DEFAULT_BUDGET, slack=False):
    """Check one SKU's operations (from stock initial; ANY with slack).
    Returns {"valid": True|False|"unknown", "steps", "frontier"}: frontier
    (when not valid) is the deepest point the search reached: how many
    operations it placed, the stock there, the operation that could not be
    placed and the last ones placed."""
    s = _Search(ops, initial)
    nreq = len(s.req)
    pl = _Placed(nreq, len(s.qtys))
    state, placed, steps, cache = initial, 0, 0, set()
    path, best, frames = [], None, []   # ops placed in order; deepest point
    cands, iq, block = s.candidates(pl.m)
    i = 0
    while placed < nreq:
        steps += 1
        if steps > budget:
            return {"valid": "unknown", "steps": steps, "frontier": _frontier(s, best)}
        if i < len(cands) + len(iq):
            choice = cands[i] if i < len(cands) else -1 - iq[i - len(cands)]
            i += 1
            op, q = s.op_of(choice, pl.m)
            ns = step(state, op, q, slack)
            if ns is None:
                continue
            saved = pl.place(choice)
            if pl.key(ns) in cache:
                pl.unplace(choice, saved)
                continue
            cache.add(pl.key(ns))
            if choice >= 0:
                s.lift(choice)
                placed += 1
            frames.append((cands, iq, block, i, choice, state, saved))
            path.append(op)
            state = ns
            cands, iq, block = s.candidates(pl.m)
            i = 0
            continue
        # every candidate tried here: note the frontier, go back one
        if best is None or len(path) > best[0]:
            best = (len(path), state, block, path[-6:])
        if not frames:
            return {"valid": False, "steps": steps, "frontier": _frontier(s, best)}
        cands, iq, block, i, choice, state, saved = frames.pop()
        path.pop()
        if choice >= 0:
            s.unlift(choice)
            placed -= 1
        pl.unplace(choice, saved)
    return {"valid": True, "steps": steps, "frontier": None}


def _frontier(s, best):
    if best is None:
        return None
    depth, state, block, tail = best
    return {"placed": depth, "stock": state,
            "blocked": s.req[block] if block is not None else None, "tail": tail}


# ---- the ledger join -------------------------------------------------------

def ledger_join(ops, ledger_ids):
    """Every ok in the ledger once, every refusal absent, every ledger row
    an ok or an indeterminate operation. ops: the history (every SKU of the
    ledger); ledger_ids: the ledger's order_ids (one per row). An ok that
    may come before a reseed (invoked before the reseed answered) is not
    looked for: the reseed cleared the ledger of the sales before it. Returns {class: [order_id]} of the violations (only
    non-empty classes); {} when the history has no order ids to join."""
    named = [op for op in ops if op.get("order_id") is not None and not is_seed(op)]
    if not named:
        return {}
    # a sale that may come before a reseed (invoked before the reseed was
    # answered) may have been cleared with the ledger rows before it
    reseeds = [op.get("complete_ns") or math.inf for op in ops if op.get("op") == "reseed"]
    cleared_before = max(reseeds) if reseeds else None
    count = {}
    for oid in ledger_ids:
        count[oid] = count.get(oid, 0) + 1
    outcome = {}
    for op in named:
        outcome.setdefault(op["order_id"], set()).add(op["outcome"])
    v = {"ok_not_in_ledger": [], "refused_but_sold": [], "ledger_row_unanswered": [],
         "duplicates": []}
    for op in named:
        oid = op["order_id"]
        if op["outcome"] == "ok" and oid not in count:
            if cleared_before is None or op["invoke_ns"] >= cleared_before:
                v["ok_not_in_ledger"].append(oid)
        elif op["outcome"] == "refused" and oid in count and outcome[oid] == {"refused"}:
            v["refused_but_sold"].append(oid)
    for oid, n in count.items():
        if n > 1:
            v["duplicates"].append(oid)
        if oid not in outcome:
            v["ledger_row_unanswered"].append(oid)
    return {k: sorted(set(ids)) for k, ids in v.items() if ids}


def lost_update_ids(ops):
    """order_ids of ok answers that left the same stock as another ok
    answer with no seed in between (two sales that each think they took the
    same unit: a lost update), oldest first."""
    seen, out = {}, []
    for op in sorted(ops, key=lambda o: o["invoke_ns"]):
        if is_seed(op):
            seen = {}
            continue
        if op.get("outcome") != "ok" or op.get("remaining") is None or op.get("duplicate"):
            continue
        first = seen.setdefault(op["remaining"], op)
        if first is not op:
            for o in (first, op):
                if o.get("order_id") and o["order_id"] not in out:
                    out.append(o["order_id"])
    return out


# ---- the verdict -----------------------------------------------------------

WINDOW_BUDGET = 200_000   # search steps per window tried (past it: not shown as failing)


def _answers_fail(oks):
    """Whether ok answers with `remaining` (no seed among them) cannot be
    ordered even with any other sale lowering the stock at any time: each
    needs the stock at or above its remaining + qty and leaves its
    remaining, so their order is forced, highest remaining first; it fails
    on a gap too small (two answers "9 left": a lost update) or on an
    answer that completed before one that must come before it started."""
    order = sorted(oks, key=lambda o: -o["remaining"])
    for a, b in zip(order, order[1:]):
        if b["remaining"] + qty_of(b) > a["remaining"]:
            return True
    first_done = math.inf                 # earliest answer among the later ones
    for o in reversed(order):
        if first_done < o["invoke_ns"]:
            return True
        first_done = min(first_done, o.get("complete_ns") or math.inf)
    return False


def _window_fails(ops, exact, budget):
    """Whether the operations whose indexes are in exact (of ops) cannot be
    ordered from any stock, whatever every other operation did: checked
    with slack (any other sale may have lowered the stock at any time), a
    looser model, so a failure here is a failure of the whole history,
    owed to these operations alone. Leaving an operation out loosens it
    further, except a seed (it raises the stock): the ok answers alone are
    decided at once, the rest by the search."""
    ex = [ops[i] for i in exact]
    if not any(is_seed(o) for o in ex):
        oks = [o for o in ex if o.get("outcome") == "ok" and o.get("remaining") is not None
               and not o.get("duplicate")]
        if _answers_fail(oks):
            return True
        if len(oks) == len(ex):
            return False
    r = linearize(ex, ANY, min(budget, WINDOW_BUDGET), slack=True)
    return r["valid"] is False


def minimal_window(sku_ops, blocked, budget):
    """The operations no order explains, whatever the stock before them and
    whatever the others did, found around blocked (the operation the full
    search could not place): ([op], blocked), or None when no window of up
    to 4096 operations fails on its own (the violation needs the seed's
    stock, or the search gave up). The window grows back from blocked
    (doubling) until it fails, then every operation it does not need is
    relaxed, one by one (a lost update among 16 buyers: its two answers)."""
    if blocked is None:
        return None
    ops = sorted(sku_ops, key=lambda o: o["invoke_ns"])
    b = next(i for i, o in enumerate(ops) if o is blocked)
    end = blocked.get("complete_ns") or blocked["invoke_ns"]
    k = b + 1
    while k < len(ops) and ops[k]["invoke_ns"] <= end:
        k += 1

    def tail(j):
        start = ops[j]["invoke_ns"]
        return {i for i in range(k) if not is_noop(ops[i]) and (
            i >= j or ops[i].get("complete_ns") is None or ops[i]["complete_ns"] >= start)}

    width, win = 2, None
    while True:
        j = max(0, b - width)
        cand = tail(j)
        if len(cand) > 4096:
            return None
        if _window_fails(ops, cand, budget):
            win = cand
            break
        if j == 0:
            return None
        width *= 2
    if len(win) <= 4 * WINDOW_MAX:
        for i in sorted(win, key=lambda i: abs(i - b), reverse=True):
            if i != b and len(win) > 1 and _window_fails(ops, win - {i}, budget):
                win.discard(i)
    if len(win) > WINDOW_MAX:
        win = set(sorted(win, key=lambda i: abs(i - b))[:WINDOW_MAX])
    return [ops[i] for i in sorted(win)], blocked


def window_of(sku_ops, frontier):
    """The operations around the first one that cannot be placed: the last
    ones placed before it and every operation overlapping it, by invoke."""
    if not frontier:
        return []
    b = frontier.get("blocked")
    keep = {id(o) for o in frontier.get("tail") or []}
    if b is not None:
        keep.add(id(b))
        lo = b["invoke_ns"]
        hi = b.get("complete_ns") or INF
        for t in frontier.get("tail") or []:
            lo = min(lo, t["invoke_ns"])
        for o in sku_ops:
            end = o.get("complete_ns") or INF
            if o["invoke_ns"] <= hi and end >= lo:
                keep.add(id(o))
    win = [o for o in sku_ops if id(o) in keep]
    win.sort(key=lambda o: o["invoke_ns"])
    if len(win) > WINDOW_MAX and b is not None:
        # nearest to the blocked operation
        win.sort(key=lambda o: abs(o["invoke_ns"] - b["invoke_ns"]))
        win = sorted(win[:WINDOW_MAX], key=lambda o: o["invoke_ns"])
    return [window_row(o, o is b) for o in win]


def window_row(o, blocked):
    row = {k: o.get(k) for k in ("process", "invoke_ns", "complete_ns", "order_id", "qty",
                                 "outcome", "remaining", "error")}
    if is_seed(o):
        row.update({"order_id": o.get("op"), "outcome": "ok", "remaining": o.get("stock"),
                    "seed": True})
    row["blocked"] = blocked
    return row


def describe(op):
    if op is None:
        return "?"
    if is_seed(op):
        return f"{op.get('op')} stock {op.get('stock')}"
    what = op.get("outcome")
    if what == "ok" and op.get("remaining") is not None:
        what = f"ok remaining {op['remaining']}"
    elif what == "refused":
        what = f"refused {op.get('error')}"
    return f"{op.get('order_id') or 'process ' + str(op.get('process'))} (sell {qty_of(op)}: {what})"


def quick_witness(sops):
    """Two ok answers that no order explains, whatever the stock before them
    and whatever the others did (a lost update: both "9 left"; or "9 left"
    answered before "10 left" was asked), found without the search, in
    O(n log n); None when there is none or the SKU was reseeded (a reseed
    raises the stock). Proof enough for "not linearizable" when the search
    would run out of budget on a history a broken guard left in pieces."""
    if sum(1 for o in sops if is_seed(o)) > 1:
        return None
    oks = [o for o in sops if o.get("outcome") == "ok" and o.get("remaining") is not None
           and not o.get("duplicate")]
    order = sorted(oks, key=lambda o: (-o["remaining"], o["invoke_ns"]))
    pairs = [(a, b) for a, b in zip(order, order[1:])
             if b["remaining"] + qty_of(b) > a["remaining"]]
    first_done = None                     # the earliest answer among the later ones
    for o in reversed(order):
        if first_done is not None and (first_done.get("complete_ns") or math.inf) < o["invoke_ns"]:
            pairs.append((first_done, o))
        if first_done is None or (o.get("complete_ns") or math.inf) < (
                first_done.get("complete_ns") or math.inf):
            first_done = o
    if not pairs:
        return None
    a, b = min(pairs, key=lambda p: max(p[0]["invoke_ns"], p[1]["invoke_ns"]))
    return sorted((a, b), key=lambda o: o["invoke_ns"])


def check_sku(sku, sops, start, budget):
    """One SKU: (valid True|False|"unknown", window rows, reason, steps)."""
    w = quick_witness(sops)
    if w:
        return False, [window_row(o, o is w[1]) for o in w], (
            f"{sku}: not linearizable: {describe(w[0])} and {describe(w[1])} cannot both "
            f"be ordered, whatever the stock before them and whatever the others did"), 0
    # about 4 steps per operation on a valid history; backtracking near a
    # late violation takes more
    steps_allowed = budget + 50 * len(sops)
    r = linearize(sops, start, steps_allowed)
    if r["valid"] is True:
        return True, [], "", r["steps"]
    if r["valid"] == "unknown":
        return "unknown", [], (f"{sku}: unknown (budget: {steps_allowed} search steps spent on "
                               f"{len(sops)} operations)"), r["steps"]
    fr = r["frontier"] or {}
    mw = minimal_window(sops, fr.get("blocked"), budget)
    if not mw:
        return False, window_of(sops, fr), (
            f"{sku}: not linearizable: no order of the operations places "
            f"{describe(fr.get('blocked'))}; after the {fr.get('placed')} placed before it the "
            f"stock is {fr.get('stock')}"), r["steps"]
    win, last = mw
    span = (max((o.get("complete_ns") or o["invoke_ns"]) for o in win)
            - min(o["invoke_ns"] for o in win)) / 1e6
    return False, [window_row(o, o is last) for o in win], (
        f"{sku}: not linearizable: these {len(win)} operations ({span:.1f} ms) cannot be "
        f"ordered, whatever the stock before them and whatever the others did; the search "
        f"could not place {describe(last)}"), r["steps"]


def check(ops, initial=None, ledger_ids=None, budget=DEFAULT_BUDGET):
    """The cell's checker block: {"valid": True|False|"unknown", "model",
    "ops", "reason", "window", "violations", "steps", "skus"}.
    initial: {sku: stock} where the history has no seed operation for a
    SKU; ledger_ids: the ledger's order_ids (None: no join)."""
    initial = initial or {}
    res = {"valid": True, "model": MODEL, "ops": len(ops), "reason": "", "window": [],
           "violations": {}, "steps": 0, "skus": 0}
    reasons, unknown = [], []
    for sku, sops in sorted(by_sku(ops).items()):
        res["skus"] += 1
        start = initial.get(sku)
        first_seed = min((o for o in sops if is_seed(o)), key=lambda o: o["invoke_ns"], default=None)
        if start is None and first_seed is None:
            unknown.append(f"{sku}: no initial stock")
            continue
        valid, win, why, steps = check_sku(sku, sops, start if start is not None
                                           else int(first_seed["stock"]), budget)
        res["steps"] += steps
        if valid == "unknown":
            unknown.append(why)
        elif valid is False:
            reasons.append(why)
            if not res["window"]:
                res["window"] = win
                res["violations"]["not_linearizable"] = [
                    w["order_id"] for w in win if w["order_id"] and not w.get("seed")][:MAX_IDS]
    lost = lost_update_ids(ops)
    if lost:
        res["violations"]["lost_updates"] = lost[:MAX_IDS]
    if ledger_ids is not None:
        for k, ids in ledger_join(ops, ledger_ids).items():
            res["violations"][k] = ids[:MAX_IDS]
            reasons.append(f"{k.replace('_', ' ')}: {len(ids)} ({', '.join(ids[:3])}"
                           f"{', ...' if len(ids) > 3 else ''})")
    if reasons or unknown:
        res["valid"] = False if reasons else "unknown"
        res["reason"] = "; ".join(reasons + unknown)
    else:
        res["reason"] = (f"linearizable: {len(ops)} operations on {res['skus']} SKU(s)"
                         + ("; every ok in the ledger once, no refusal in it, every row answered"
                            if ledger_ids is not None else ""))
    return res


# ---- the runner's own operations -------------------------------------------

def outcome_of(status, error):
    """loadgen's classification (lg_op_outcome) for one answer."""
    if not status:
        return "indeterminate"
    if 200 <= status < 300:
        return "ok"
    if status == 503 and error == "backend_unavailable":
        return "indeterminate"
    if 400 <= status < 500 or status == 503:
        return "refused"
    return "indeterminate"


def runner_op(process, invoke_ns, complete_ns, body, status, answer):
    """A history line for one deduction the runner sent itself (a fault
    cell's holder, buyer B): body is what it sent, answer what came back
    (status 0: no answer; complete_ns None: none by the end)."""
    answer = answer or {}
    error = answer.get("error") if status != 200 else None
    op = {"process": process, "invoke_ns": invoke_ns,
          "complete_ns": complete_ns if status else None,
          "sku": body.get("sku"), "qty": body.get("qty", 1), "order_id": body.get("order_id"),
          "outcome": outcome_of(status, error), "status": status,
          "remaining": answer.get("remaining") if status and 200 <= status < 300 else None,
          "error": error or (None if status else "no_answer")}
    if answer.get("duplicate"):
        op["duplicate"] = True
    return op


def seed_op(kind, sku, stock, invoke_ns, complete_ns):
    """A history line for a seed (kind "seed") or a reseed that answered 200."""
    return {"op": kind, "process": "runner", "invoke_ns": invoke_ns, "complete_ns": complete_ns,
            "sku": sku, "stock": stock, "outcome": "ok"}
