"""A self-contained HTML report of one diagnosis: the root-cause panel and a per-rank timeline.

One file, no network: inline CSS, inline SVG, no scripts, and a Content-Security-Policy that
forbids fetching anything.  Built from the JSON document (report.to_dict), so stored reports can be
drawn too.  Every piece of log text goes through html.escape.

The timeline has a lane per rank (a lane per node when there are more than MAX_RANK_LANES ranks):
a grey bar up to the rank's last output, a diamond in the category's colour at its first error,
the root-cause lane highlighted (`class="lane root"`, `data-root="true"`) and a red line at the
root-cause time, and dashed lines where each downstream symptom first appears (the cascade).
Marks whose time the logs don't give go into a "time?" column on the right.
"""
from __future__ import annotations

import math
import os
from datetime import datetime, timedelta, timezone
from html import escape
from pathlib import Path

from diagnose.render.markdown import trimmed_traceback
from diagnose.render.report import inert, plural

MAX_RANK_LANES = 64
COLORS = {
    "oom": "#d62728", "shape": "#9467bd", "import": "#8c564b", "nccl": "#1f77b4", "cuda": "#e377c2",
    "host_oom": "#ff7f0e", "slurm": "#7f7f7f", "config": "#bcbd22", "data": "#17becf", "nan": "#2ca02c",
    "python": "#555555", "unknown": "#999999",
}
CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;padding:18px 24px;color:#1b1f24;background:#f6f7f9}
h1{font-size:18px;margin:0 0 12px}
h2{font-size:15px;margin:18px 0 8px}
.panel{background:#fff;border:1px solid #d0d7de;border-left:6px solid var(--cat);border-radius:6px;padding:12px 16px;margin-bottom:16px}
.badge{display:inline-block;background:var(--cat);color:#fff;font-weight:600;border-radius:4px;padding:1px 8px;margin-right:8px;font-size:12px;letter-spacing:.04em}
.summary{font-weight:600;font-size:15px}
.facts{color:#57606a;margin:6px 0}
.facts b{color:#1b1f24;font-weight:600}
pre{background:#f6f8fa;border:1px solid #e1e4e8;border-radius:4px;padding:8px 10px;overflow:auto;font:12px/1.4 ui-monospace,"DejaVu Sans Mono",monospace;white-space:pre-wrap;word-break:break-word;max-height:340px;margin:6px 0}
pre.msg{color:#b31d28;max-height:90px}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:16px}
ul{margin:4px 0;padding-left:20px}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
th,td{border-bottom:1px solid #e1e4e8;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;vertical-align:middle}
.timeline{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:8px;overflow-x:auto}
svg text{font-family:system-ui,"DejaVu Sans",sans-serif;font-size:11px;fill:#1b1f24}
svg .axis text{fill:#57606a;font-size:10px}
svg .lane.root .bg{fill:#fff4d6;stroke:#d62728;stroke-width:1.5}
svg .lane.root text.label{font-weight:700;fill:#b31d28}
.legend{color:#57606a;font-size:12px;margin:6px 2px}
.legend span{margin-right:14px}
.note{color:#57606a;font-size:12px}
"""


def _t(s: str | None) -> datetime | None:
    """A report's time on one clock: UTC without tzinfo (reports from before times had an offset have none)."""
    if not s:
        return None
    try:
        t = datetime.fromisoformat(s)
    except (TypeError, ValueError):
        return None
    if t.tzinfo is None:
        return t
    try:
        return t.astimezone(timezone.utc).replace(tzinfo=None)
    except OverflowError:  # year 1 or 9999 with an offset
        return t.replace(tzinfo=None)


def _e(x: object) -> str:
    return escape(inert(str(x)), quote=True)


def _color(cat: str | None) -> str:
    return COLORS.get(cat or "unknown", "#999999")


def lanes(doc: dict) -> tuple[str, list[dict]]:
    """('rank' | 'node', lanes): each lane has label, key, last, err, category, root, ranks."""
    r = doc.get("root_cause") or {}
    ranks = list(doc.get("ranks") or [])
    if r.get("rank") is not None and all(k.get("rank") != r["rank"] for k in ranks):
        ranks.append({"rank": r["rank"], "host": r.get("host"), "last_time": None,
                      "first_error_time": r.get("time"), "category": r.get("category")})
    ws = (doc.get("job") or {}).get("world_size")
    if isinstance(ws, int) and 0 < ws <= MAX_RANK_LANES:  # ranks that logged nothing get a lane too
        seen = {k.get("rank") for k in ranks}
        ranks += [{"rank": i, "host": None, "last_time": None, "first_error_time": None, "category": None}
                  for i in range(ws) if i not in seen]
    ranks.sort(key=lambda k: k.get("rank", 0))
    if len(ranks) <= MAX_RANK_LANES:
        out = []
        for k in ranks:
            is_root = r.get("rank") is not None and k.get("rank") == r.get("rank")
            label = f"rank {k['rank']}" + (f" · {k['host']}" if k.get("host") else "")
            out.append({"label": label, "key": str(k["rank"]), "last": _t(k.get("last_time")),
                        "err": _t(k.get("first_error_time")) or (_t(r.get("time")) if is_root else None),
                        "category": (r.get("category") if is_root else k.get("category")), "root": is_root,
                        "ranks": [k["rank"]]})
        return "rank", out
    nodes: dict[str, dict] = {}
    for k in ranks:
        host = k.get("host") or "unknown host"
        n = nodes.setdefault(host, {"label": host, "key": host, "last": None, "err": None, "category": None,
                                    "root": False, "ranks": []})
        n["ranks"].append(k["rank"])
        last, err = _t(k.get("last_time")), _t(k.get("first_error_time"))
        if last and (n["last"] is None or last > n["last"]):
            n["last"] = last
        if err and (n["err"] is None or err < n["err"]):
            n["err"], n["category"] = err, k.get("category")
        if n["category"] is None and k.get("category"):
            n["category"] = k["category"]
        if r.get("rank") is not None and k.get("rank") == r.get("rank"):
            n["root"] = True
    if r.get("rank") is None and r.get("host") in nodes:
        nodes[r["host"]]["root"] = True
    for n in nodes.values():
        if n["root"]:
            n["category"] = r.get("category")
            n["err"] = _t(r.get("time")) or n["err"]
        lo, hi = min(n["ranks"]), max(n["ranks"])
        n["label"] = f"{n['label']} · ranks {lo}–{hi}" if lo != hi else f"{n['label']} · rank {lo}"
    return "node", sorted(nodes.values(), key=lambda n: min(n["ranks"]))


MAX_TICKS = 12


def _shift(t: datetime, seconds: float) -> datetime:
    """t moved by seconds, clipped to the years datetime can hold (a log may say year 1 or 9999)."""
    try:
        return t + timedelta(seconds=seconds)
    except OverflowError:
        return datetime.max.replace(tzinfo=t.tzinfo) if seconds > 0 else datetime.min.replace(tzinfo=t.tzinfo)


def _ticks(t0: datetime, t1: datetime) -> list[datetime]:
    """At most MAX_TICKS round times between t0 and t1, whatever the span (a second or millennia)."""
    span = max((t1 - t0).total_seconds(), 0.0)
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400):
        if span / step <= 8:
            break
    else:
        step = 86400 * math.ceil(span / 8 / 86400)
    base = t0.replace(hour=0, minute=0, second=0, microsecond=0)
    first = _shift(base, math.ceil((t0 - base).total_seconds() / step) * step)
    out, t = [], first
    while t <= t1 and len(out) < MAX_TICKS:
        out.append(t)
        nxt = _shift(t, step)
        if nxt <= t:
            break
        t = nxt
    return out


def timeline_svg(doc: dict) -> str:
    kind, ls = lanes(doc)
    r = doc.get("root_cause") or {}
    syms = [s for s in (doc.get("symptoms") or [])]
    times = [t for n in ls for t in (n["last"], n["err"]) if t]
    times += [t for t in (_t(r.get("time")),) if t] + [t for s in syms if (t := _t(s.get("first_time")))]
    if not ls:
        return '<p class="note">No rank could be identified in the logs, so there is no per-rank timeline.</p>'
    W, LABEL, RIGHT, UNK, LH, TOP = 1120, 200, 70, 46, 22, 40
    x0, x1 = LABEL + 10, W - RIGHT - UNK
    if times:
        t0, t1 = min(times), max(times)
        if (t1 - t0).total_seconds() < 4:
            t0, t1 = _shift(t0, -2), _shift(t1, 2)
        pad = (t1 - t0).total_seconds() * 0.04
        t0, t1 = _shift(t0, -pad), _shift(t1, pad)
    else:
        t0 = t1 = None

    def X(t: datetime | None) -> float:
        if t is None or t0 is None:
            return W - RIGHT - UNK / 2
        return x0 + (x1 - x0) * (t - t0).total_seconds() / max((t1 - t0).total_seconds(), 1e-9)

    H = TOP + LH * len(ls) + 34
    p = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" '
         f'aria-label="per-{kind} timeline">']
    # axis
    p.append('<g class="axis">')
    if t0 is not None:
        for t in _ticks(t0, t1):
            x = X(t)
            p.append(f'<line x1="{x:.1f}" y1="{TOP - 6}" x2="{x:.1f}" y2="{H - 30}" stroke="#eaeef2"/>')
            label = f"{t:%H:%M:%S}" if (t1 - t0).total_seconds() <= 2 * 86400 else f"{t.year:04d}-{t:%m-%d}"
            p.append(f'<text x="{x:.1f}" y="{H - 16}" text-anchor="middle">{label}</text>')
        p.append(f'<text x="{x0}" y="{H - 3}">{t0.year:04d}-{t0:%m-%d}</text>')
    ux = W - RIGHT - UNK / 2
    p.append(f'<line x1="{ux - UNK / 2 + 4:.1f}" y1="{TOP - 6}" x2="{ux - UNK / 2 + 4:.1f}" y2="{H - 30}" stroke="#d0d7de" stroke-dasharray="2 2"/>')
    p.append(f'<text x="{ux:.1f}" y="{H - 16}" text-anchor="middle">time?</text>')
    p.append("</g>")
    # lanes
    for i, n in enumerate(ls):
        y = TOP + i * LH
        cls = "lane root" if n["root"] else "lane"
        attrs = f'data-{kind}="{_e(n["key"])}" data-root="{"true" if n["root"] else "false"}"'
        if n["category"]:
            attrs += f' data-category="{_e(n["category"])}"'
        p.append(f'<g class="{cls}" {attrs}>')
        fill = "#ffffff" if i % 2 else "#f6f8fa"
        p.append(f'<rect class="bg" x="2" y="{y}" width="{W - 4}" height="{LH}" fill="{fill}" rx="3"/>')
        p.append(f'<text class="label" x="8" y="{y + 15}">{_e(n["label"][:34])}{" ◀ root cause" if n["root"] else ""}</text>')
        cy = y + LH / 2
        end = n["last"]
        if n["err"] and end and n["err"] < end:
            end_bar = n["err"]
        else:
            end_bar = end
        if end_bar and t0 is not None:
            p.append(f'<rect x="{x0}" y="{cy - 3}" width="{max(X(end_bar) - x0, 1):.1f}" height="6" fill="#c9d1d9" rx="2">'
                     f'<title>output until {end_bar:%H:%M:%S}</title></rect>')
        if n["last"]:
            p.append(f'<circle class="last" cx="{X(n["last"]):.1f}" cy="{cy}" r="4" fill="#57606a">'
                     f'<title>{_e(n["label"])}: last output {n["last"]:%H:%M:%S}</title></circle>')
        if n["category"]:
            x, c = X(n["err"]), _color(n["category"])
            s = 8 if n["root"] else 6
            hollow = n["err"] is None
            p.append(f'<path class="first-error" d="M{x:.1f} {cy - s}L{x + s:.1f} {cy}L{x:.1f} {cy + s}L{x - s:.1f} {cy}Z" '
                     f'fill="{"#fff" if hollow else c}" stroke="{c}" stroke-width="{2 if n["root"] else 1.2}">'
                     f'<title>{_e(n["label"])}: first error ({_e(n["category"])})'
                     f'{" at " + format(n["err"], "%H:%M:%S") if n["err"] else ", time unknown"}</title></path>')
            if not hollow or n["root"]:
                p.append(f'<text x="{x + s + 4:.1f}" y="{cy + 4}" fill="{c}" style="fill:{c}">{_e(n["category"])}</text>')
        p.append("</g>")
    # root-cause time and the cascade of symptoms
    rt = _t(r.get("time"))
    if rt and t0 is not None:
        x = X(rt)
        p.append(f'<g class="root-time"><line x1="{x:.1f}" y1="{TOP - 14}" x2="{x:.1f}" y2="{H - 30}" stroke="#d62728" stroke-width="1.5"/>'
                 f'<text x="{x:.1f}" y="{TOP - 18}" text-anchor="middle" style="fill:#b31d28;font-weight:700">root cause</text></g>')
    used: dict[int, int] = {}  # symptoms at the same time sit side by side
    for j, s in enumerate(syms[:9], 1):
        st = _t(s.get("first_time"))
        if not st or t0 is None:
            continue
        x = X(st)
        k = round(x)
        x += 13 * used.get(k, 0) + (8 if rt and st == rt else 0)
        used[k] = used.get(k, 0) + 1
        c = _color(s.get("category"))
        p.append(f'<g class="symptom" data-pattern="{_e(s.get("pattern"))}"><line x1="{x:.1f}" y1="{TOP - 4}" x2="{x:.1f}" y2="{H - 30}" '
                 f'stroke="{c}" stroke-dasharray="4 3"/><circle cx="{x:.1f}" cy="{TOP - 4}" r="6" fill="{c}"/>'
                 f'<text x="{x:.1f}" y="{TOP - 1}" text-anchor="middle" style="fill:#fff;font-size:9px;font-weight:700">{j}</text>'
                 f'<title>{j}. {_e(s.get("title") or s.get("pattern"))} at {st:%H:%M:%S}</title></g>')
    p.append("</svg>")
    return "".join(p)


def _delay(a: datetime | None, b: datetime | None) -> str:
    if not a or not b:
        return "time unknown"
    s = (b - a).total_seconds()
    sign = "+" if s >= 0 else "−"
    s = abs(s)
    return f"{sign}{int(s // 60)} min {int(s % 60)} s" if s >= 60 else f"{sign}{s:.0f} s"


def render_html(doc: dict) -> str:
    r = doc.get("root_cause")
    job = f" · job {doc['job_id']}" if doc.get("job_id") else ""
    title = f"mdiag{job} · {r['category'].upper()} · {r.get('summary', '')}" if r else f"mdiag{job} · no failure found"
    out = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">",
           '<meta name="viewport" content="width=device-width,initial-scale=1">',
           f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
           f'<h1>mdiag · root cause{_e(job)}</h1>']
    if not r:
        n = sum(s.get("lines", 0) for s in doc.get("sources", []))
        out.append(f'<div class="panel" style="--cat:#2ca02c"><span class="summary">No failure found</span>'
                   f'<div class="facts">read {plural(n, "line")} from {plural(len(doc.get("sources", [])), "file")}</div></div>')
    else:
        c = _color(r.get("category"))
        out.append(f'<section class="panel root-cause" style="--cat:{c}" data-category="{_e(r.get("category"))}" '
                   f'data-rank="{_e(r.get("rank"))}">')
        out.append(f'<div><span class="badge">{_e(str(r.get("category", "")).upper())}</span>'
                   f'<span class="summary">{_e(r.get("summary") or r.get("title") or "")}</span></div>')
        facts = []
        for label, key in (("rank", "rank"), ("local rank", "local_rank"), ("host", "host"), ("time", "time"),
                           ("pattern", "pattern"), ("fingerprint", "fingerprint")):
            v = r.get(key)
            facts.append(f"{label} <b>{_e(v) if v is not None else 'unknown'}</b>")
        ev = r.get("evidence")
        if ev:
            facts.append(f"at <b>{_e(ev.get('file'))}:{_e(ev.get('line'))}</b>")
        out.append(f'<div class="facts">{" · ".join(facts)}</div>')
        out.append(f'<pre class="msg">{_e(r.get("message", ""))}</pre></section>')
    kind = lanes(doc)[0]
    out.append(f"<h2>Timeline (a lane per {kind})</h2>")
    out.append('<div class="legend"><span><span class="swatch" style="background:#c9d1d9"></span>output</span>'
               '<span>● last output</span><span>◆ first error (colour = category)</span>'
               '<span style="color:#b31d28">│ root cause</span><span>┆ ① downstream symptoms (the cascade)</span></div>')
    out.append(f'<div class="timeline">{timeline_svg(doc)}</div>')
    syms = doc.get("symptoms") or []
    if r or syms:
        rt = _t(r.get("time")) if r else None
        out.append("<h2>Cascade</h2><table><thead><tr><th>#</th><th>what</th><th>ranks</th><th>count</th>"
                   "<th>after the root cause</th><th>first evidence</th></tr></thead><tbody>")
        if r:
            ev = r.get("evidence") or {}
            out.append(f'<tr class="root"><td>★</td><td><span class="swatch" style="background:{_color(r.get("category"))}"></span>'
                       f'<b>{_e(r.get("title") or r.get("pattern"))}</b> (root cause)</td><td>{_e(r.get("rank") if r.get("rank") is not None else "?")}</td>'
                       f'<td class="num">1</td><td>0 s</td><td>{_e(ev.get("file", ""))}:{_e(ev.get("line", ""))}</td></tr>')
        for j, s in enumerate(syms, 1):
            ranks = ", ".join(map(str, s.get("ranks", [])[:12])) + (" …" if len(s.get("ranks", [])) > 12 else "")
            ev = s.get("evidence") or {}
            out.append(f'<tr><td>{j}</td><td><span class="swatch" style="background:{_color(s.get("category"))}"></span>'
                       f'{_e(s.get("title") or s.get("pattern"))}</td><td>{_e(ranks or "-")}</td><td class="num">{_e(s.get("count", ""))}</td>'
                       f'<td>{_e(_delay(rt, _t(s.get("first_time"))))}</td><td>{_e(ev.get("file", ""))}:{_e(ev.get("line", ""))}</td></tr>')
        out.append("</tbody></table>")
    if r:
        c = _color(r.get("category"))
        out.append(f'<section class="panel details" style="--cat:{c}">')
        tb = trimmed_traceback(r)
        if len(tb) > 1:
            out.append(f'<details open><summary>Traceback (library frames folded)</summary><pre>{_e(chr(10).join(tb))}</pre></details>')
        out.append('<div class="cols"><div>')
        if r.get("why"):
            out.append(f"<h2>Why</h2><p>{_e(r['why'])}</p>")
        out.append("</div><div>")
        if r.get("remediation"):
            out.append("<h2>What to do</h2><ul>" + "".join(f"<li>{_e(x)}</li>" for x in r["remediation"]) + "</ul>")
        out.append("</div></div></section>")
    srcs = doc.get("sources") or []
    n = sum(s.get("lines", 0) for s in srcs)
    out.append(f'<p class="note">mdiag read {plural(n, "line")} from {plural(len(srcs), "file")}. '
               + "".join(f"<br>warning: {_e(w)}" for w in doc.get("warnings") or []) + "</p>")
    out.append("</body></html>\n")
    return "\n".join(out)


def write_html(doc: dict, path: str | os.PathLike) -> Path:
    """Write the report atomically (temp file in the same folder, then rename)."""
    path = Path(path)
    text = render_html(doc)
    from diagnose.render.outputs import write_text_atomic

    write_text_atomic(path, text)
    return path
