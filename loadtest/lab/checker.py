"""The fault cells' checker, after Jepsen's: every operation's outcome
(ok / refused / indeterminate), the invariant over the final state (the
audit and the ledger), the order_ids that violate it, and valid?.

Pure functions of what a fault cell collected; no I/O."""

# A refusal the API promises wrote nothing (services/API.md: 4xx, and 503
# "nothing sold"). Anything else that is not 2xx may or may not have sold,
# and so may a 503 backend_unavailable: it is also the answer to a COMMIT
# whose reply was lost while MySQL could not be asked (API.md, "A COMMIT
# whose reply is lost"), so the checker cannot count it as a refusal.
MAX_IDS = 10
MAYBE_ERRORS = ("backend_unavailable",)

# loadgen's socket errors: a refused connect never sent the request; the
# others may have reached the service.
DEFINITE_SOCKET = ("connect",)


def outcomes(by_status, socket_errors, by_error=None):
    """{"ok", "refused", "indeterminate"} counts over every operation.
    by_status: {"200": n, "409": n, "0": n (no answer), ...};
    socket_errors: loadgen's {"connect", "read", "write", "timeout", "parse"};
    by_error: {"lock_timeout": n, ...} (the error codes of the answers)."""
    ok = refused = indet = 0
    for k, n in by_status.items():
        try:
            st = int(k)
        except ValueError:
            st = 0
        if 200 <= st < 300:
            ok += n
        elif 400 <= st < 500 or st == 503:
            refused += n
        else:
            indet += n
    for k, n in (socket_errors or {}).items():
        if k in DEFINITE_SOCKET:
            refused += n
        else:
            indet += n
    maybe = min(sum((by_error or {}).get(e, 0) for e in MAYBE_ERRORS), by_status.get("503", 0))
    return {"ok": ok, "refused": refused - maybe, "indeterminate": indet + maybe}


def invariant_block(audit, sales, outc, holder_window=None):
    """The invariant "every unit sold existed, was counted once and was
    answered", checked on the final state.

    audit: the service's audit (initial, stock, sold, oversold, lost_updates);
    sales: the SKU's ledger rows [(unix time, instance, order_id)], oldest
    first; outc: outcomes(); holder_window: (from, to) unix times in which a
    holder's stale write overwrote other sales (pause, failover), or None.
    Returns the block results.json keeps: oversold, lost_updates,
    undersold, duplicates, unacknowledged, phantom, violations (order_ids,
    at most MAX_IDS each) and valid."""
    initial, stock, sold = audit["initial"], audit["stock"], audit["sold"]
    oversold = max(0, sold - initial)
    lost = max(0, sold - (initial - stock))
    undersold = max(0, (initial - stock) - sold)     # units taken, never sold (leaked)
    seen, dups = set(), []
    for _, _, oid in sales:
        if oid in seen and oid not in dups:
            dups.append(oid)
        seen.add(oid)
    # acknowledged sales missing from the ledger, and ledger sales nobody
    # was told of beyond the indeterminate ones (a "refused" that sold)
    unack = max(0, outc["ok"] - len(seen))
    phantom = max(0, len(seen) - outc["ok"] - outc["indeterminate"])
    viol = {"oversold": [s[2] for s in sales[initial:initial + MAX_IDS]] if oversold else [],
            "lost_updates": [], "undersold": [], "duplicates": dups[:MAX_IDS]}
    if lost and holder_window:
        lo, hi = holder_window
        viol["lost_updates"] = [s[2] for s in sales
                                if lo <= s[0] <= hi and not s[2].endswith("-holder")][:MAX_IDS]
    valid = not (oversold or lost or undersold or dups or unack or phantom)
    return {"oversold": oversold, "lost_updates": lost, "undersold": undersold,
            "duplicates": len(dups), "unacknowledged": unack, "phantom": phantom,
            "violations": viol, "valid": valid}
