"""Root-cause report: the JSON document and the terminal rendering of a Diagnosis.

Log text is data.  In the terminal it only ever goes into rich `Text` objects (never markup) after
control characters are made visible, so a log line can't restyle or drive the terminal.
"""
from __future__ import annotations

import re
from datetime import datetime

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .model import Diagnosis, Evidence

SCHEMA_VERSION = 1
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")


def inert(text: str) -> str:
    """ANSI/OSC escape sequences and other control characters shown as visible escapes."""
    text = _ANSI.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def _ev(e: Evidence | None) -> dict | None:
    return {"file": e.file, "line": e.line} if e else None


def to_dict(d: Diagnosis) -> dict:
    r = d.root_cause
    root = None
    if r:
        root = {
            "category": r.category, "pattern": r.pattern, "title": r.title, "summary": r.summary,
            "rank": r.rank, "local_rank": r.local_rank, "host": r.host, "time": _iso(r.time),
            "message": r.message, "evidence": _ev(r.evidence), "traceback": r.traceback,
            "frames": [{"file": f.file, "line": f.line, "function": f.func} for f in r.frames],
            "why": r.why, "remediation": r.remediation, "details": r.details,
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "status": d.status,
        "root_cause": root,
        "symptoms": [
            {"category": s.category, "pattern": s.pattern, "title": s.title, "message": s.message, "ranks": s.ranks,
             "count": s.count, "first_time": _iso(s.first_time), "evidence": _ev(s.evidence)}
            for s in d.symptoms
        ],
        "ranks": [
            {"rank": k.rank, "host": k.host, "last_time": _iso(k.last_time),
             "first_error_time": _iso(k.first_error_time), "category": k.category}
            for k in d.ranks
        ],
        "job": d.job,
        "sources": [{"file": s.display, "lines": s.lines, "layout": s.layout} for s in d.sources],
        "warnings": d.warnings,
    }


_LIBRARY = re.compile(r"site-packages|dist-packages|/lib/python\d|^<frozen|/torch/|/usr/lib/")


def _frames_view(r) -> list[Text]:
    """The job's own frames, library frames folded into a count."""
    out, folded = [], 0
    for f in r.frames:
        if _LIBRARY.search(f.file):
            folded += 1
            continue
        if folded:
            out.append(Text(f"    … {folded} library frame{'s' * (folded > 1)}", style="dim"))
            folded = 0
        out.append(Text(f"  {inert(f.file)}:{f.line} in {inert(f.func)}"))
        if f.code:
            out.append(Text(f"      {inert(f.code)}", style="dim"))
    if folded:
        out.append(Text(f"    … {folded} library frame{'s' * (folded > 1)}", style="dim"))
    return out


def _delay(a: datetime | None, b: datetime | None) -> str:
    if not a or not b:
        return ""
    s = (b - a).total_seconds()
    if s < 1:
        return ""
    return f" {int(s // 60)} min {int(s % 60)} s later" if s >= 60 else f" {int(s)} s later"


def render(d: Diagnosis, console: Console) -> None:
    r = d.root_cause
    if r is None:
        console.print(Text("mdiag: no failure found", style="bold green"))
        console.print(Text(f"read {sum(s.lines for s in d.sources):,} lines from {len(d.sources)} file(s)"))
        for w in d.warnings:
            console.print(Text(f"warning: {inert(w)}", style="yellow"))
        return
    head = Text()
    head.append(f"{r.category.upper()}", style="bold red")
    head.append("  ")
    head.append(inert(r.summary), style="bold")
    body: list = [head, Text("")]
    body.append(Text(inert(r.message), style="red"))
    if r.evidence:
        body.append(Text(f"  at {inert(str(r.evidence))}", style="cyan"))
    facts = []
    for label, value in (("rank", r.rank), ("local rank", r.local_rank), ("host", r.host),
                         ("time", r.time and r.time.strftime("%Y-%m-%d %H:%M:%S"))):
        facts.append(f"{label}: {value if value is not None else 'unknown'}")
    body.append(Text("  " + " · ".join(facts), style="dim"))
    extra = {k: v for k, v in r.details.items() if k not in ("traceback_truncated",)}
    if extra:
        body.append(Text("  " + "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in extra.items()), style="dim"))
    if r.frames:
        body += [Text(""), Text("Traceback (job frames first):", style="bold")] + _frames_view(r)
    body += [Text(""), Text("Why", style="bold"), Text(inert(r.why))]
    if r.remediation:
        body.append(Text("What to do", style="bold"))
        body += [Text(f"  • {inert(x)}") for x in r.remediation]
    console.print(Panel(Group(*body), title=Text("mdiag · root cause"), border_style="red", expand=True))
    if d.symptoms:
        t = Table(title=Text("Downstream symptoms"), show_lines=False, expand=True)
        t.add_column("what")
        t.add_column("ranks", justify="right")
        t.add_column("count", justify="right")
        t.add_column("when")
        t.add_column("first evidence")
        for s in d.symptoms[:12]:
            ranks = ", ".join(map(str, s.ranks[:8])) + (" …" if len(s.ranks) > 8 else "") if s.ranks else "-"
            t.add_row(Text(inert(s.title)), Text(ranks), str(s.count), Text(_delay(r.time, s.first_time).strip() or "-"),
                      Text(inert(str(s.evidence))))
        if len(d.symptoms) > 12:
            t.caption = f"and {len(d.symptoms) - 12} more"
        console.print(t)
    n = sum(s.lines for s in d.sources)
    console.print(Text(f"read {n:,} lines from {len(d.sources)} file(s)", style="dim"))
    for w in d.warnings:
        console.print(Text(f"warning: {inert(w)}", style="yellow"))
