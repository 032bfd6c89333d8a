"""Scenario files (format: loadtest/scenarios/default.conf's header): parse
with FILE:LINE: reasons, and expand a scenario into its cells."""

import itertools
import os
import re

from . import SCEN_DIR
from .faultplan import FAULTS, expect


class ScenarioError(Exception):
    """A bad scenario file; str() is 'FILE:LINE: reason'."""


LIST_INT_KEYS = {
    # key: (min, max)
    "instances": (1, 16),
    "stock": (0, 10**12),
    "requests": (1, 100_000_000),
    "concurrency": (1, 100_000),
    "hold_ms": (0, 10_000),
    "rate": (0, 10_000_000),
}
SCALAR_INT_KEYS = {"threads": (1, 256), "timeout": (1, 3600),
                   # kind = holds (lab.holds): the hold's ttl, and who pays when
                   "ttl_ms": (100, 60_000), "pay_pct": (0, 100), "late_pct": (0, 100),
                   # kind = limits / retry (lab.shop)
                   "limit_per_user": (1, 1000), "users": (1, 100),
                   "retries": (0, 5), "client_timeout_ms": (50, 10_000)}
TEXT_KEYS = {"name", "description", "sku_prefix", "mysql", "kind"}
KINDS = ("load", "holds", "cart", "limits", "retry")
SHOP_KINDS = ("cart", "limits", "retry")
SHOP_KEYS = {"limit_per_user": "limits", "users": "limits", "retries": "retry",
             "client_timeout_ms": "retry"}
# Body fields whose value makes a holds cell the broken pattern.
HOLDS_BROKEN = {"confirm_check": "none"}
MYSQL_MODES = ("single", "galera3")
REPEAT_KEYS = {"variant", "field"}
# Keys a variant may override instead of sending them in the body.
OVERRIDE_KEYS = {"stock", "requests", "concurrency", "threads", "rate", "hold_ms"}
# Body fields the runner writes itself.
RESERVED_FIELDS = {"sku", "order_id", "user_id", "qty"}
PATHS = ("direct", "order")
DRAIN_WAIT_S = 30   # longest wait for a write-behind cell's queue before its audit

DEFAULTS = {
    "instances": [2], "path": ["direct"], "stock": [1000], "requests": [2000],
    "concurrency": [32], "hold_ms": [0], "rate": [0], "threads": 2, "timeout": 10,
    "sku_prefix": "CMP", "mysql": "single",
    "kind": "load", "ttl_ms": 1500, "pay_pct": 70, "late_pct": 10,
    "limit_per_user": 2, "users": 4, "retries": 2, "client_timeout_ms": 200,
}


def _split_list(value):
    return [v for v in re.split(r"[\s,]+", value.strip()) if v]


def _int(text, lo, hi, what):
    if not re.fullmatch(r"[0-9]+", text):
        raise ValueError(f"{what} must be a whole number, got '{text}'")
    v = int(text)
    if v < lo or v > hi:
        raise ValueError(f"{what} must be {lo}..{hi}, got {v}")
    return v


def _field_value(text):
    """key=value text to a JSON value: whole numbers, true/false, else string."""
    if re.fullmatch(r"-?[0-9]+", text):
        return int(text)
    if text in ("true", "false"):
        return text == "true"
    return text


def _pairs(text, what):
    out = {}
    for tok in text.split():
        if "=" not in tok:
            raise ValueError(f"{what}: expected key=value, got '{tok}'")
        k, v = tok.split("=", 1)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise ValueError(f"{what}: bad field name '{k}'")
        if v == "":
            raise ValueError(f"{what}: empty value for '{k}'")
        if k in out:
            raise ValueError(f"{what}: '{k}' given twice")
        out[k] = v
    if not out:
        raise ValueError(f"{what}: needs at least one key=value")
    return out


def parse_scenario(path):
    """Parse a scenario file. Returns a dict; raises ScenarioError."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"{path}:0: cannot read: {e}") from None
    sc = {"file": path, "variants": [], "fields": {}}
    seen = {}
    for no, raw in enumerate(lines, 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if not line:
            continue

        def fail(msg, no=no):
            raise ScenarioError(f"{path}:{no}: {msg}")

        if "=" not in line:
            fail(f"expected 'key = value', got '{line}'")
        key, value = (s.strip() for s in line.split("=", 1))
        if not re.fullmatch(r"[a-z_]+", key):
            fail(f"bad key '{key}'")
        known = set(LIST_INT_KEYS) | set(SCALAR_INT_KEYS) | TEXT_KEYS | REPEAT_KEYS | {"guards", "path", "fault"}
        if key not in known:
            fail(f"unknown key '{key}' (known: {', '.join(sorted(known))})")
        if key in seen and key not in REPEAT_KEYS:
            fail(f"'{key}' already set on line {seen[key]}")
        seen[key] = no
        if value == "":
            fail(f"'{key}' needs a value")
        try:
            if key in LIST_INT_KEYS:
                lo, hi = LIST_INT_KEYS[key]
                vals = [_int(v, lo, hi, key) for v in _split_list(value)]
                if len(set(vals)) != len(vals):
                    fail(f"'{key}' lists a value twice")
                sc[key] = vals
            elif key in SCALAR_INT_KEYS:
                lo, hi = SCALAR_INT_KEYS[key]
                sc[key] = _int(value, lo, hi, key)
            elif key in TEXT_KEYS:
                if key == "sku_prefix" and not re.fullmatch(r"[A-Za-z0-9_-]{1,20}", value):
                    fail("sku_prefix must be 1..20 of A-Z a-z 0-9 _ -")
                if key == "kind" and value not in KINDS:
                    fail(f"kind must be one of {', '.join(KINDS)}, got '{value}'")
                if key == "mysql" and value not in MYSQL_MODES:
                    fail(f"mysql must be one of {', '.join(MYSQL_MODES)}, got '{value}'")
                sc[key] = value
            elif key == "path":
                vals = _split_list(value)
                for v in vals:
                    if v not in PATHS:
                        fail(f"path must be direct or order, got '{v}'")
                if len(set(vals)) != len(vals):
                    fail("'path' lists a value twice")
                sc["path"] = vals
            elif key == "fault":
                vals = _split_list(value)
                for v in vals:
                    # several faults: each a choreography name or a scenario
                    # file (loadtest/scenarios/NAME.conf) of one fault
                    if v not in FAULTS and not (len(vals) > 1 and os.path.exists(resolve_scenario(v))):
                        fail(f"fault must be one of {', '.join(FAULTS)}, got '{v}'")
                if len(set(vals)) != len(vals):
                    fail("'fault' lists a value twice")
                sc["fault"] = vals
            elif key == "guards":
                vals = _split_list(value)
                if "all" in vals and len(vals) > 1:
                    fail("'all' cannot be combined with guard names")
                for v in vals:
                    if not re.fullmatch(r"[a-z0-9-]{1,32}", v):
                        fail(f"bad guard name '{v}'")
                if len(set(vals)) != len(vals):
                    fail("'guards' lists a guard twice")
                sc["guards"] = vals
            elif key == "field":
                for k, v in _pairs(value, "field").items():
                    if k in RESERVED_FIELDS:
                        fail(f"field '{k}' is set by the runner")
                    if k in OVERRIDE_KEYS or k == "guard":
                        fail(f"field '{k}': use the '{k if k != 'guard' else 'guards'}' key")
                    if k in sc["fields"]:
                        fail(f"field '{k}' already set")
                    sc["fields"][k] = _field_value(v)
            elif key == "variant":
                if ":" not in value:
                    fail("variant needs 'LABEL : key=value ...'")
                label, rest = (s.strip() for s in value.split(":", 1))
                if not re.fullmatch(r"[A-Za-z0-9_./+-]{1,64}", label):
                    fail(f"bad variant label '{label}' (1..64 of A-Z a-z 0-9 _ . / + -)")
                if any(v["label"] == label for v in sc["variants"]):
                    fail(f"variant '{label}' defined twice")
                pairs = _pairs(rest, f"variant {label}")
                if "guard" not in pairs:
                    fail(f"variant {label}: guard=NAME is required")
                if not re.fullmatch(r"[a-z0-9-]{1,32}", pairs["guard"]):
                    fail(f"variant {label}: bad guard name '{pairs['guard']}'")
                over, fields = {}, {}
                for k, v in pairs.items():
                    if k == "guard":
                        continue
                    if k in RESERVED_FIELDS:
                        fail(f"variant {label}: field '{k}' is set by the runner")
                    if k in OVERRIDE_KEYS:
                        lo, hi = LIST_INT_KEYS.get(k) or SCALAR_INT_KEYS[k]
                        over[k] = _int(v, lo, hi, f"variant {label}: {k}")
                    else:
                        fields[k] = _field_value(v)
                sc["variants"].append({"label": label, "guard": pairs["guard"],
                                       "overrides": over, "fields": fields, "line": no})
        except ValueError as e:
            fail(str(e))
    if sc.get("fault") and len(sc["fault"]) > 1 and (sc["variants"] or "guards" in sc):
        raise ScenarioError(f"{path}:{seen['fault']}: several faults take their cells from their "
                            "own files: no 'guards' or 'variant' here")
    if "guards" not in sc and not sc["variants"] and not (sc.get("fault") and len(sc["fault"]) > 1):
        last = len(lines) - (1 if lines and lines[-1] == "" else 0)
        raise ScenarioError(f"{path}:{max(last, 1)}: no 'guards' and no 'variant' lines: nothing to run")
    check_holds(sc, seen, path)
    check_shop(sc, seen, path)
    for k, v in DEFAULTS.items():
        sc.setdefault(k, v)
    sc.setdefault("guards", [])
    sc.setdefault("fault", [])
    sc.setdefault("name", os.path.splitext(os.path.basename(path))[0])
    sc.setdefault("description", "")
    return sc


def check_holds(sc, seen, path):
    """kind = holds: its keys make sense together; the holds keys belong to it."""
    holds = sc.get("kind") == "holds"
    for k in ("ttl_ms", "pay_pct", "late_pct"):
        if k in sc and not holds:
            raise ScenarioError(f"{path}:{seen[k]}: '{k}' belongs to kind = holds")
    if not holds:
        return
    for k in ("fault", "path", "rate", "hold_ms"):
        if k in sc and k in seen:
            raise ScenarioError(f"{path}:{seen[k]}: '{k}' is not a holds scenario's key")
    if sc.get("mysql", "single") != "single":
        raise ScenarioError(f"{path}:{seen['mysql']}: a holds scenario runs on one MySQL server")
    if sc.get("pay_pct", 70) + sc.get("late_pct", 10) > 100:
        raise ScenarioError(f"{path}:{seen.get('late_pct', seen.get('pay_pct'))}: "
                            "pay_pct + late_pct must be at most 100")


def check_shop(sc, seen, path):
    """kind = cart | limits | retry: their keys belong to them; one MySQL, no faults."""
    for k, kind in SHOP_KEYS.items():
        if k in sc and sc.get("kind") != kind:
            raise ScenarioError(f"{path}:{seen[k]}: '{k}' belongs to kind = {kind}")
    if sc.get("kind") not in SHOP_KINDS:
        return
    for k in ("fault", "path", "rate", "mysql"):
        if k in seen:
            raise ScenarioError(f"{path}:{seen[k]}: '{k}' is not a {sc['kind']} scenario's key")


def shop_expect(kind, fields):
    """(expected verdict, why) of a cart | limits | retry cell."""
    if kind == "cart" and fields.get("line_check") == "per-line":
        return "broke", ("line_check:per-line checks each line against one stock read: a cart with one "
                         "SKU on two lines sells past zero")
    if kind == "cart":
        why = ("lock_order:as-given locks in the body's order: crossed carts deadlock or time out, "
               "each such cart sells nothing (counted, not a broken invariant)"
               if fields.get("lock_order") == "as-given" else
               "a cart's lines are summed per SKU and its rows locked in sorted order in one transaction")
        return "held", why
    if kind == "limits" and fields.get("limit_check") == "separate":
        return "broke", ("limit_check:separate reads the count apart from the sale's transaction: one "
                         "user racing over two instances passes the check several times")
    if kind == "limits":
        return "held", "the buyer's count moves by a conditional UPDATE inside the sale's transaction"
    if fields.get("retry", "plain") in ("plain", "new-ids"):
        return "broke", ("a client that times out and sends again without a key is a second order "
                         "(a generated or new order_id): the buyer pays twice")
    return "held", "every send of a buyer carries its Idempotency-Key: a repeat is the same order"


def holds_expect(fields):
    """(expected verdict, why) of a holds cell."""
    for k, v in HOLDS_BROKEN.items():
        if fields.get(k) == v:
            return "broke", (f"{k}:{v} confirms a late payment without looking at the deadline or at "
                             "whether its units went back: a swept and resold unit is sold twice")
    return "held", ("the confirm is one conditional transition inside the stock's transaction: a late "
                    "payment takes fresh units or gets 409 hold_expired")


def resolve_scenario(arg):
    if os.sep in arg or arg.endswith(".conf") or os.path.exists(arg):
        return arg
    return os.path.join(SCEN_DIR, arg + ".conf")


def guard_rows(sc, available):
    """The guard axis: [{label, guard, overrides, fields}]. `available` is the
    running build's guard list (or None when unknown)."""
    rows = []
    names = sc["guards"]
    if names == ["all"]:
        names = list(available or [])
    for g in names:
        rows.append({"label": g, "guard": g, "overrides": {}, "fields": {}})
    for v in sc["variants"]:
        rows.append({"label": v["label"], "guard": v["guard"],
                     "overrides": v["overrides"], "fields": v["fields"]})
    return rows


def expand_fault_cells(sc, available):
    """A fault scenario's cells: its own rows (one fault), or every row of
    each named fault's file (loadtest/scenarios/FAULT.conf)."""
    if len(sc["fault"]) == 1:
        parts = [(sc["fault"][0], sc)]
    else:
        parts = []
        for name in sc["fault"]:
            sub = parse_scenario(resolve_scenario(name))
            if len(sub["fault"]) != 1:
                raise ScenarioError(f"{sub['file']}:0: a scenario listed under 'fault' must have one fault")
            parts.append((sub["fault"][0], sub))
    cells = []
    for f, sub in parts:
        for row in guard_rows(sub, available):
            fields = dict(sub["fields"])
            fields.update(row["fields"])
            exp, why = expect(f, row["guard"], fields)
            cells.append({"label": f"{f}/{row['label']}", "guard": row["guard"], "fault": f,
                          "fields": fields, "instances": 2, "path": "direct", "stock": 0,
                          "requests": 0, "concurrency": 0, "threads": 2,
                          "hold_ms": row["overrides"].get("hold_ms", 0), "rate": 0,
                          "expected": exp, "expected_why": why})
    for i, c in enumerate(cells, 1):
        c["cell"] = i
    return cells


def expand_cells(sc, available):
    if sc.get("fault"):
        return expand_fault_cells(sc, available)
    cells = []
    rows = guard_rows(sc, available)
    for inst, path, stock, req, conc, hold, rate in itertools.product(
            sc["instances"], sc["path"], sc["stock"], sc["requests"],
            sc["concurrency"], sc["hold_ms"], sc["rate"]):
        for row in rows:
            c = {"label": row["label"], "guard": row["guard"], "instances": inst,
                 "path": path, "stock": stock, "requests": req, "concurrency": conc,
                 "threads": sc["threads"], "hold_ms": hold, "rate": rate}
            c.update(row["overrides"])
            fields = dict(sc["fields"])
            fields.update(row["fields"])
            c["fields"] = fields
            if sc.get("kind") == "holds":
                c.update({"kind": "holds", "ttl_ms": sc["ttl_ms"], "pay_pct": sc["pay_pct"],
                          "late_pct": sc["late_pct"]})
                c["expected"], c["expected_why"] = holds_expect(fields)
            elif sc.get("kind") in SHOP_KINDS:
                c["kind"] = sc["kind"]
                c["client_timeout_ms"] = sc["client_timeout_ms"]
                c["expected"], c["expected_why"] = shop_expect(sc["kind"], fields)
            cells.append(c)
    for i, c in enumerate(cells, 1):
        c["cell"] = i
    return cells


