"""Cells and results documents as the runner writes them, for the verdict
and renderer tests."""


def load_cell(n, label, instances, sold, oversold, lost, consistent, ok, **kw):
    c = {"cell": n, "label": label, "guard": label.split("/")[0], "instances": instances,
         "path": "direct", "stock": 1000, "requests": 2000, "concurrency": 32, "threads": 2,
         "hold_ms": 2, "rate": 0, "fields": {}, "sku": f"CMP-x-{n}", "status": "ok",
         "sold": sold, "oversold": oversold, "lost_updates": lost, "consistent": consistent,
         "stock_left": 0, "initial": 1000, "orders_written": None, "successes": ok,
         "answered": 2000, "duration_s": 2.0, "rps": 1000.0, "ok_per_s": ok / 2.0,
         "latency_ms": {"p50": 3.1, "p90": 9.5, "p99": 40.2, "p999": 60.0, "max": 61.0,
                        "mean": 5.0, "min": 0.9},
         "latency_curve": [[0.0, 0.9], [90.0, 9.5], [99.0, 40.2], [99.9, 60.0], [100.0, 61.0]],
         "by_status": {"200": ok, "409": 2000 - ok}, "by_error": {"out_of_stock": 2000 - ok},
         "socket_errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0, "parse": 0},
         "reconnects": 0, "retries": 0, "lock_waits": 0, "lock_wait_s": 0,
         "lock_wait_mean_ms": 0, "lock_timeouts": 0, "deductions_by_outcome": {},
         "loadgen_cmd": "build/bin/loadgen -t 2 -c 32 -n 2000"}
    c.update(kw)
    return c


def fault_cell(n, fault, label, expected, measured, lost=0, **kw):
    c = load_cell(n, f"{fault}/{label}", 2, 100 + lost, 0, lost, lost == 0, 100)
    c.update({"guard": label.split("/")[0], "fault": fault, "expected": expected,
              "expected_why": "because", "measured": measured, "rate": 10,
              "fenced": 0, "n503": 1, "holder": {"status": 200, "error": None, "detail": ""},
              "events": [{"t": 1.0, "what": "holder in", "kind": "mark"},
                         {"t": 1.6, "what": "pause inventory-1", "kind": "fault"},
                         {"t": 5.6, "what": "resume inventory-1", "kind": "end"}],
              "recovery": [{"fault": "pause inventory-1", "at_s": 1.6, "recover_s": 0.8}],
              "recover_s": 0.8,
              "timeline": {"seconds": [{"ok": 10, "errors": 0, "p99_ms": 20.0, "offered": 10}] * 10}})
    c.update(kw)
    return c


def results(cells, name="fixture"):
    return {"version": 2, "started": "2026-01-01 00:00:00 UTC", "elapsed_s": 10,
            "interrupted": False, "git": "abc123", "run_id": "x", "loadgen": "build/bin/loadgen",
            "port_base": "", "driver": "local", "repeat": 1,
            "machine": {"cores": 2, "kernel": "6.1.0", "cpu": "", "mariadb": "MariaDB 10.11",
                        "redis": "Redis 7.0", "hostname": "h"},
            "scenario": {"name": name, "description": "escape <script>x</script> & \"q\"",
                         "file": "tests/x.conf", "guards": ["none"], "instances": [1, 2],
                         "path": ["direct"], "stock": [1000], "requests": [2000],
                         "concurrency": [32], "threads": 2, "hold_ms": [2], "rate": [0],
                         "timeout": 10, "fields": {}, "variants": [], "fault": []},
            "cells": cells}


def holds_cell(n, label, measured, expected, oversold=0, late_stale=0, late_refused=2):
    """A holds cell (lab.holds) as the runner writes it."""
    sold = 20 + oversold
    c = load_cell(n, label, 2, sold, oversold, oversold, measured == "held", sold)
    c.update({"kind": "holds", "ttl_ms": 1000, "pay_pct": 70, "late_pct": 10, "stock": 20,
              "requests": 40, "expected": expected, "expected_why": "because",
              "audit_why": "" if measured == "held" else "holds confirmed after their deadline",
              "holds": {"buyers": 40, "held": 20, "paid": 14, "expired": 6, "late": 2,
                        "late_refused": late_refused, "late_fresh": 0, "late_stale": late_stale,
                        "resold": 6, "second_buyers": 20, "errors": 0, "live_after": 0,
                        "expired_unswept": 0, "late_confirms": ["o-1"] * late_stale,
                        "answered_sales": sold, "exact": oversold == 0, "answers_match": True,
                        "swept_after_s": 0.3, "verdict": measured}})
    return c
