"""The cluster scenario's tables (lab.cluster's results.json "cluster"
block and its cells): the rows and notes once, as plain values, and the
two views of them: Markdown lines (cluster.md and report.md) and HTML
(report.html)."""

from .common import E

CLUSTER_HEADS = ["guard", "inst", "expected (Galera)", "measured", "sold", "oversold", "lost",
                 "1213s seen", "retries", "503", "cert failures / node", "bf aborts / node",
                 "sales/s", "sales/s 1 server (3 inst)"]


def cluster_rows(res):
    """One (cell, values) per galera3 cell, in cell order. values has
    len(CLUSTER_HEADS) strings, or 4 (guard, inst, expected, "status:
    reason") for a cell that did not run."""
    cells = res.get("cells", [])
    single = {c["guard"]: c for c in cells if c.get("db") == "single" and c.get("status") == "ok"}
    rows = []
    for c in cells:
        if c.get("db") != "galera3":
            continue
        if c.get("status") != "ok":
            rows.append((c, [str(c["guard"]), str(c["instances"]), str(c.get("expected", "-")),
                             f"{c.get('status')}: {c.get('reason', '')}"]))
            continue
        w = c.get("wsrep") or {}
        s = single.get(c["guard"])
        rows.append((c, [str(c["label"]), str(c["instances"]), str(c.get("expected", "-")),
                         str(c.get("measured")), str(c["sold"]), str(c["oversold"]),
                         str(c["lost_updates"]), str(c.get("conflicts", 0)), str(c["retries"]),
                         str(c.get("n503", 0)),
                         "/".join(str(x) for x in w.get("cert_failures", [])),
                         "/".join(str(x) for x in w.get("bf_aborts", [])), str(c["ok_per_s"]),
                         str(s["ok_per_s"]) if s and c["instances"] == 3 else ""]))
    return rows


def cluster_notes(res):
    """The fault and stale-read findings as paragraphs: (strong, rest),
    strong "" when the paragraph has no emphasised opening."""
    ex = res.get("cluster") or {}
    notes = []
    for kind in ("kill", "pause"):
        f = ex.get(f"node_{kind}") or {}
        if f.get("error"):
            notes.append(("", f"node {kind}: error: {f['error']}"))
            continue
        a = f.get("audit") or {}
        strong = (f"galera-3 {'killed (SIGKILL)' if kind == 'kill' else 'paused 9 s (SIGSTOP)'} "
                  f"at {f.get('marks', {}).get(kind)} s")
        txt = (f" under conditional-update on 3 nodes: "
               f"survivors' longest write stall {f.get('survivor_stall_s')} s (inventory-1, -2), "
               f"first sale after the fault {f.get('recover_s')} s; answers {f.get('by_status')}; "
               f"audit sold {a.get('sold')}, oversold {a.get('oversold')}, lost {a.get('lost_updates')}, "
               f"converged {a.get('converged')}")
        if kind == "pause":
            txt += (f"; the resumed node refused writes from {f.get('resumed_refusal_s')} s after "
                    f"the resume (first sale there {f.get('resumed_first_sale_s')} s after it)")
        else:
            txt += f"; galera-3 started again and Synced in {f.get('rejoin_s')} s"
        notes.append((strong, txt))
        tl = f.get("timeline") or []
        if tl:
            notes.append(("", "sales per 0.5 s (inventory-1 / -2 / -3): " + " ".join(
                "/".join(str(tl[k][i]) for k in range(len(tl))) for i in range(len(tl[0])))))
    sr = ex.get("stale_read") or {}
    if sr.get("error"):
        notes.append(("", f"stale read: error: {sr['error']}"))
    elif sr:
        notes.append(("stale read",
                      f": after each of {sr['reads']} sales on node 1, the stock read at "
                      f"once on node 2 showed more than the sale left in {sr['stale_without_sync_wait']} "
                      f"reads (at most {sr['max_units_behind']} units behind) without wsrep_sync_wait; "
                      f"{sr['stale_with_sync_wait']} of {sr.get('sync_reads', '?')} reads with "
                      f"wsrep_sync_wait=1; the deductions themselves stayed exact"))
    return notes


def cluster_table(res):
    """Markdown lines of the cluster scenario's tables."""
    lines = ["| " + " | ".join(CLUSTER_HEADS) + " |", "|" + "---|" * len(CLUSTER_HEADS)]
    for c, v in cluster_rows(res):
        if len(v) < len(CLUSTER_HEADS):
            lines.append("| " + " | ".join(v) + " |" + " |" * (len(CLUSTER_HEADS) - len(v)))
            continue
        v = list(v)
        v[3] = f"**{v[3]}**"
        lines.append("| " + " | ".join(v) + " |")
    for strong, rest in cluster_notes(res):
        lines += ["", (f"**{strong}**" if strong else "") + rest]
    return lines


def cluster_html(res):
    """HTML of the same tables, for report.html: the measured verdict
    coloured against the expected one."""
    rows = cluster_rows(res)
    notes = cluster_notes(res)
    if not rows and not notes:
        return []
    left = {"guard", "expected (Galera)", "measured"}
    o = ['<h2 id="cluster">On a cluster (MariaDB Galera, 3 nodes)</h2>',
         '<div class="wide"><table class="cluster"><tr>'
         + "".join(f'<th class="l">{E(h)}</th>' if h in left else f"<th>{E(h)}</th>"
                   for h in CLUSTER_HEADS)
         + "</tr>"]
    for c, v in rows:
        tds = []
        for h, x in zip(CLUSTER_HEADS, v):
            cl = "l" if h in left else ""
            if h == "measured" and len(v) == len(CLUSTER_HEADS):
                cl += " good" if x == str(c.get("expected")) else " bad"
            tds.append(f'<td class="{cl.strip()}">{E(x)}</td>' if cl else f"<td>{E(x)}</td>")
        if len(v) < len(CLUSTER_HEADS):
            tds[-1] = (f'<td class="l skip" colspan="{len(CLUSTER_HEADS) - len(v) + 1}">'
                       f"{E(v[-1])}</td>")
        o.append("<tr>" + "".join(tds) + "</tr>")
    o.append("</table></div>")
    for strong, rest in notes:
        o.append("<p>" + (f"<b>{E(strong)}</b>" if strong else "") + E(rest) + "</p>")
    return o
