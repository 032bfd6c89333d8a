"""The cluster scenario's tables (lab.cluster's results.json "cluster"
block and its cells) as Markdown lines: cluster.md and report.md."""


def cluster_table(res):
    """Markdown lines of the cluster scenario's tables."""
    cells = res.get("cells", [])
    ex = res.get("cluster") or {}
    single = {c["guard"]: c for c in cells if c.get("db") == "single" and c.get("status") == "ok"}
    lines = ["| guard | inst | expected (Galera) | measured | sold | oversold | lost | 1213s seen "
             "| retries | 503 | cert failures / node | bf aborts / node | sales/s | sales/s 1 server (3 inst) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        if c.get("db") != "galera3":
            continue
        if c.get("status") != "ok":
            lines.append(f"| {c['guard']} | {c['instances']} | {c.get('expected', '-')} | "
                         f"{c.get('status')}: {c.get('reason', '')} |" + " |" * 10)
            continue
        w = c.get("wsrep") or {}
        s = single.get(c["guard"])
        lines.append(
            f"| {c['label']} | {c['instances']} | {c.get('expected', '-')} | **{c.get('measured')}** "
            f"| {c['sold']} | {c['oversold']} | {c['lost_updates']} | {c.get('conflicts', 0)} "
            f"| {c['retries']} | {c.get('n503', 0)} "
            f"| {'/'.join(str(x) for x in w.get('cert_failures', []))} "
            f"| {'/'.join(str(x) for x in w.get('bf_aborts', []))} | {c['ok_per_s']} "
            f"| {s['ok_per_s'] if s and c['instances'] == 3 else ''} |")
    for kind in ("kill", "pause"):
        f = ex.get(f"node_{kind}") or {}
        lines.append("")
        if f.get("error"):
            lines.append(f"node {kind}: error: {f['error']}")
            continue
        a = f.get("audit") or {}
        txt = (f"**galera-3 {'killed (SIGKILL)' if kind == 'kill' else 'paused 9 s (SIGSTOP)'} "
               f"at {f.get('marks', {}).get(kind)} s** under conditional-update on 3 nodes: "
               f"survivors' longest write stall {f.get('survivor_stall_s')} s (inventory-1, -2), "
               f"first sale after the fault {f.get('recover_s')} s; answers {f.get('by_status')}; "
               f"audit sold {a.get('sold')}, oversold {a.get('oversold')}, lost {a.get('lost_updates')}, "
               f"converged {a.get('converged')}")
        if kind == "pause":
            txt += (f"; the resumed node refused writes from {f.get('resumed_refusal_s')} s after "
                    f"the resume (first sale there {f.get('resumed_first_sale_s')} s after it)")
        else:
            txt += f"; galera-3 started again and Synced in {f.get('rejoin_s')} s"
        lines.append(txt)
        tl = f.get("timeline") or []
        if tl:
            lines.append("")
            lines.append("sales per 0.5 s (inventory-1 / -2 / -3): " + " ".join(
                "/".join(str(tl[k][i]) for k in range(len(tl))) for i in range(len(tl[0]))))
    sr = ex.get("stale_read") or {}
    lines.append("")
    if sr.get("error"):
        lines.append(f"stale read: error: {sr['error']}")
    elif sr:
        lines.append(f"**stale read**: after each of {sr['reads']} sales on node 1, the stock read at "
                     f"once on node 2 showed more than the sale left in {sr['stale_without_sync_wait']} "
                     f"reads (at most {sr['max_units_behind']} units behind) without wsrep_sync_wait; "
                     f"{sr['stale_with_sync_wait']} of {sr.get('sync_reads', '?')} reads with "
                     f"wsrep_sync_wait=1; the deductions themselves stayed exact")
    return lines
