"""What every renderer shares: table columns, series labels, escaping."""

import html

from ..verdicts import verdict

E = html.escape


VARYING_KEYS = ("instances", "path", "stock", "requests", "concurrency", "hold_ms", "rate")
KEY_FMT = {"instances": "{} inst", "path": "{}", "stock": "stock {}", "requests": "{} req",
           "concurrency": "{} conn", "hold_ms": "hold {} ms", "rate": "{}/s"}


def series_of(cells):
    """Label of each cell's non-guard dimensions (only those that vary)."""
    vary = [k for k in VARYING_KEYS if len({c[k] for c in cells}) > 1]
    if not vary:
        vary = ["instances"]
    return {c["cell"]: ", ".join(KEY_FMT[k].format(c[k]) for k in vary) for c in cells}


def ordered_unique(xs):
    seen, out = set(), []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def fmt_num(v, nd=1):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def kv(d):
    return " ".join(f"{k}:{v}" for k, v in sorted(d.items())) if d else "-"


TABLE_COLS = [
    # (header, function of cell)
    ("guard", lambda c: c["label"]),
    ("inst", lambda c: c["instances"]),
    ("path", lambda c: c["path"]),
    ("stock", lambda c: c["stock"]),
    ("req", lambda c: c["requests"]),
    ("conn", lambda c: c["concurrency"]),
    ("hold ms", lambda c: c["hold_ms"]),
    ("rate", lambda c: c["rate"] or "closed"),
    ("sold", lambda c: c.get("sold", "-")),
    ("oversold", lambda c: c.get("oversold", "-")),
    ("lost upd", lambda c: c.get("lost_updates", "-")),
    ("consistent", lambda c: ("yes" if c["consistent"] else "no") if c.get("status") == "ok" else "-"),
    ("orders", lambda c: fmt_num(c.get("orders_written"))),
    ("ok/s", lambda c: fmt_num(c.get("ok_per_s"))),
    ("req/s", lambda c: fmt_num(c.get("rps"))),
    ("p50 ms", lambda c: fmt_num(c.get("latency_ms", {}).get("p50"), 2)),
    ("p90 ms", lambda c: fmt_num(c.get("latency_ms", {}).get("p90"), 2)),
    ("p99 ms", lambda c: fmt_num(c.get("latency_ms", {}).get("p99"), 2)),
    ("p99.9 ms", lambda c: fmt_num(c.get("latency_ms", {}).get("p999"), 2)),
    ("max ms", lambda c: fmt_num(c.get("latency_ms", {}).get("max"), 2)),
    ("status", lambda c: kv(c.get("by_status", {}))),
    ("errors", lambda c: kv(c.get("by_error", {}))),
    ("retries", lambda c: c.get("retries", "-")),
    ("lock waits", lambda c: c.get("lock_waits", "-")),
    ("wait ms (mean)", lambda c: fmt_num(c.get("lock_wait_mean_ms"), 2)),
    ("lock timeouts", lambda c: c.get("lock_timeouts", "-")),
    ("runs", lambda c: (c.get("repeat") or {}).get("n", 1)),
    ("ok/s range", lambda c: spread_text(c, "ok_per_s")),
    ("p99 range", lambda c: spread_text(c, "p99_ms")),
    ("verdict", verdict),
]
# Shown only when some cell ran more than once.
REPEAT_COLS = ("runs", "ok/s range", "p99 range")


def spread_text(c, key):
    sp = ((c.get("repeat") or {}).get("spread") or {}).get(key)
    return f"{sp['min']:g}..{sp['max']:g}" if sp else "-"

SUMMARY_COLS = ["guard", "inst", "path", "sold", "oversold", "lost upd", "ok/s", "req/s",
                "p50 ms", "p99 ms", "max ms", "verdict"]


def table_rows(cells, cols):
    sel = [(h, f) for h, f in TABLE_COLS if h in cols] if cols else TABLE_COLS
    if not any((c.get("repeat") or {}).get("n", 1) > 1 for c in cells):
        sel = [(h, f) for h, f in sel if h not in REPEAT_COLS]
    return [h for h, _ in sel], [[str(f(c)) for _, f in sel] for c in cells]


def verdict_grid(cells):
    ser = series_of(cells)
    rows = ordered_unique(c["label"] for c in cells)
    cols = ordered_unique(ser[c["cell"]] for c in cells)
    grid = {(c["label"], ser[c["cell"]]): c for c in cells}
    return rows, cols, grid


def md_escape(s):
    return str(s).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")




HOLDS_COLS = [
    # (header, function of a holds cell's "holds" block and the cell)
    ("guard", lambda n, c: c["label"]),
    ("inst", lambda n, c: c["instances"]),
    ("stock", lambda n, c: c["stock"]),
    ("buyers", lambda n, c: n["buyers"]),
    ("ttl ms", lambda n, c: c["ttl_ms"]),
    ("held", lambda n, c: n["held"]),
    ("paid", lambda n, c: n["paid"]),
    ("expired", lambda n, c: n["expired"]),
    ("late refused", lambda n, c: n["late_refused"]),
    ("late fresh", lambda n, c: n["late_fresh"]),
    ("late stale", lambda n, c: n["late_stale"]),
    ("resold", lambda n, c: n["resold"]),
    ("sold", lambda n, c: c["sold"]),
    ("oversold", lambda n, c: c["oversold"]),
    ("held after", lambda n, c: n["live_after"]),
    ("expired unswept", lambda n, c: n["expired_unswept"]),
    ("late confirms", lambda n, c: len(n["late_confirms"])),
    ("exact", lambda n, c: "yes" if n["exact"] else "no"),
    ("answers = ledger", lambda n, c: "yes" if n["answers_match"] else "no"),
    ("expected", lambda n, c: c.get("expected", "-")),
    ("measured", lambda n, c: n["verdict"]),
]
HOLDS_NOTE = ("held = reserves answered held; paid = confirmed within the deadline; expired = held "
              "but not paid in time (the sweepers give their units back); late refused / late fresh / "
              "late stale = the late payers' confirms answered 409 hold_expired / 200 on fresh units / "
              "200 on the swept hold itself (the broken confirm); resold = buyers refused at first who "
              "reserved and paid for the units given back; sold and oversold from the audit; held after "
              "/ expired unswept = live and past-deadline holds the audit still counts once the sweepers "
              "had their time (stranded units); late confirms = the audit's confirms of holds whose "
              "units had been given back; exact = initial = stock + sold + held; answers = ledger: the "
              "200 confirms equal the ledger's units. measured held = all of oversold 0, nothing "
              "stranded, no late confirm, exact, answers = ledger.")


def holds_rows(cells):
    """[(cell, [values])] of the holds cells that ran."""
    return [(c, [str(f(c["holds"], c)) for _, f in HOLDS_COLS])
            for c in cells if c.get("status") == "ok" and c.get("holds")]


def _yn(b):
    return "yes" if b else "no"


# kind: (title, [(header, function of the cell's "shop" block and the cell)], note)
SHOP_TABLES = {
    "cart": ("Carts", [
        ("guard", lambda n, c: c["label"]), ("inst", lambda n, c: c["instances"]),
        ("stock/SKU", lambda n, c: c["stock"]), ("carts", lambda n, c: n["carts"]),
        ("hold ms", lambda n, c: c["hold_ms"]), ("200", lambda n, c: n["ok"]),
        ("409", lambda n, c: n["n409"]), ("503", lambda n, c: n["n503"]),
        ("deadlocks", lambda n, c: n["deadlocks"]), ("lock wait timeouts", lambda n, c: n["lock_wait_timeouts"]),
        ("lock timeouts", lambda n, c: n["lock_timeouts"]), ("sold", lambda n, c: c["sold"]),
        ("oversold", lambda n, c: c["oversold"]), ("lost", lambda n, c: c["lost_updates"]),
        ("exact", lambda n, c: _yn(n["exact"])), ("answers = ledger", lambda n, c: _yn(n["answers_match"])),
        ("expected", lambda n, c: c.get("expected", "-")), ("measured", lambda n, c: n["verdict"])],
        "carts of 2-3 SKUs (A, B, C), crossed and with one SKU on two lines, round-robin over the "
        "instances; 200 / 409 / 503 = the answers; deadlocks and lock wait timeouts from "
        "lab_cart_conflicts_total, lock timeouts from lab_lock_timeouts_total (this cell's increase, "
        "every instance); sold, oversold, lost summed over the SKUs' audits; exact = every SKU oversold 0, "
        "lost_updates 0, stock >= 0; answers = ledger: the 200 carts' units equal the ledger's per SKU. "
        "measured held = exact and answers = ledger: a cart lost to a deadlock sold nothing, it is "
        "counted, not a broken invariant."),
    "limits": ("Purchase limits", [
        ("guard", lambda n, c: c["label"]), ("inst", lambda n, c: c["instances"]),
        ("stock", lambda n, c: c["stock"]), ("users", lambda n, c: n["users"]),
        ("tries/user", lambda n, c: n["per_user"]), ("limit", lambda n, c: n["limit"]),
        ("hold ms", lambda n, c: c["hold_ms"]), ("200", lambda n, c: n["ok"]),
        ("409 limit", lambda n, c: n["limit_exceeded"]), ("400", lambda n, c: n["n400"]),
        ("max/user", lambda n, c: n["max_bought"]), ("over_limit", lambda n, c: n["over_limit"]),
        ("sold", lambda n, c: c["sold"]), ("exact", lambda n, c: _yn(n["exact"])),
        ("expected", lambda n, c: c.get("expected", "-")),
        ("measured", lambda n, c: "refused (not offered)" if n["verdict"] == "refused" else n["verdict"])],
        "users race their one-unit purchases of a SKU with limit_per_user over the instances; "
        "max/user = the most 200 answers one user got; over_limit from the audit; refused (not offered) = "
        "a guard with GET /guards limits false answered every sale 400 and sold nothing. measured held = "
        "over_limit 0, max/user <= limit, stock exact, 200 answers = ledger."),
    "retry": ("Client retries", [
        ("cell", lambda n, c: c["label"]), ("guard", lambda n, c: c["guard"]),
        ("buyers", lambda n, c: n["buyers"]), ("client timeout ms", lambda n, c: c.get("client_timeout_ms", "-")),
        ("hold ms", lambda n, c: c["hold_ms"]), ("sends", lambda n, c: n["sends"]),
        ("timeouts", lambda n, c: n["timeouts"]), ("201", lambda n, c: n["n201"]),
        ("orders", lambda n, c: n["orders"]), ("bought twice+", lambda n, c: n["twice"]),
        ("bought none", lambda n, c: n["none"]), ("ledger units", lambda n, c: n["ledger"]),
        ("expected", lambda n, c: c.get("expected", "-")), ("measured", lambda n, c: n["verdict"])],
        "buyers through POST /orders, one unit each, the client giving up after its timeout and sending "
        "again (no-key: the same body; new-ids: a new order_id; key: one Idempotency-Key per buyer); "
        "each buyer on its own SKU (stock `stock`); timeouts = sends the client gave up on; orders = "
        "GET /orders?sku= summed once the service finished; bought twice+ / none = buyers with more than "
        "one / no order; ledger units from the audits. measured held = every buyer exactly one order and "
        "ledger units = buyers."),
}


def shop_rows(cells, kind):
    """[(cell, [values])] of the cells of one shop kind that ran."""
    cols = SHOP_TABLES[kind][1]
    return [(c, [str(f(c["shop"], c)) for _, f in cols])
            for c in cells if c.get("status") == "ok" and c.get("shop") and c.get("kind") == kind]
