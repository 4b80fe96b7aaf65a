"""Root-cause report: the JSON document and the terminal rendering of a Diagnosis.

Log text is data.  In the terminal it only ever goes into rich `Text` objects (never markup) after
control characters are made visible, so a log line can't restyle or drive the terminal.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported where the terminal report is drawn, not for JSON
    from rich.console import Console

from diagnose.analyze.findings import rank_ranges as _ranges
from diagnose.model import Diagnosis, Evidence, Frame, RankSummary, RootCause, Source, Symptom

SCHEMA_VERSION = 1
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")


def inert(text: str) -> str:
    """ANSI/OSC escape sequences and other control characters (C0, C1, bidi, zero-width) shown as visible escapes."""
    from diagnose.render.redact import inert_text

    text = _ANSI.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)
    return inert_text(_CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text))


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 line', '2 lines', '1,024 lines'."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def read_line(sources) -> str:
    """'read 1 line from 1 file' for a list of Source or of JSON `sources` entries."""
    n = sum(s["lines"] if isinstance(s, dict) else s.lines for s in sources)
    return f"read {plural(n, 'line')} from {plural(len(sources), 'file')}"


class _Clock:
    """Times as RFC 3339 with a UTC offset.  A log's timestamp that carried none (nearly all do) is
    written as UTC (`+00:00`) and remembered, so the document can say so (`times_assumed_utc`)."""

    def __init__(self) -> None:
        self.assumed = False

    def __call__(self, t: datetime | str | None) -> str | None:
        if isinstance(t, str):  # already text (the job's last iteration): a time only if it reads as one
            try:
                t = datetime.fromisoformat(t)
            except ValueError:
                return t
        if t is None:
            return None
        if t.tzinfo is None or t.utcoffset() is None:
            self.assumed = True
            t = t.replace(tzinfo=timezone.utc)
        return t.isoformat()


def _job(job: dict, clock: _Clock) -> dict:
    """The job's facts with their times (the last iteration's) as RFC 3339."""
    it = job.get("last_iteration")
    if isinstance(it, dict) and it.get("time") is not None:
        job = {**job, "last_iteration": {**it, "time": clock(it["time"])}}
    return job


# How each model class shows in the JSON document: JSON key → the attribute it holds.  to_dict writes
# these; render/schema.py generates schema.json from the same table and the classes' annotations.
VIEWS: dict[type, dict[str, str]] = {
    Diagnosis: {"status": "status", "partial": "partial", "summarised": "summarised",
                "summarised_lines": "summarised_lines", "root_cause": "root_cause", "symptoms": "symptoms",
                "ranks": "ranks", "job": "job", "sources": "sources", "warnings": "warnings", "slurm": "slurm"},
    RootCause: {k: k for k in ("category", "pattern", "title", "summary", "confidence", "rank", "local_rank", "host",
                               "time", "message", "text", "evidence", "traceback", "frames", "why", "remediation",
                               "details")},
    Symptom: {k: k for k in ("category", "pattern", "title", "message", "ranks", "count", "first_time", "evidence")},
    RankSummary: {k: k for k in ("rank", "host", "last_time", "first_error_time", "category", "last_line",
                                 "last_message")},
    Source: {"file": "display", "lines": "lines", "layout": "layout"},
    Evidence: {"file": "file", "line": "line"},
    Frame: {"file": "file", "line": "line", "function": "func"},
}


def _view(obj, when: _Clock):
    """A model object as the document shows it (VIEWS), times as RFC 3339; dicts are the analysis's own."""
    view = VIEWS.get(type(obj))
    if view is not None:
        return {key: _view(getattr(obj, attr), when) for key, attr in view.items()}
    if isinstance(obj, list):
        return [_view(x, when) for x in obj]
    if isinstance(obj, datetime):
        return when(obj)
    return obj


def to_dict(d: Diagnosis, job_id: str | None = None) -> dict:
    """The JSON document; `job_id` (e.g. the SLURM job id) goes into the top-level `job_id` when known.
    Times are RFC 3339 with an offset; `times_assumed_utc` says the log gave none and UTC was assumed."""
    from diagnose.analyze.fingerprint import fingerprint

    slurm = d.slurm
    if job_id is None and isinstance(slurm, dict) and (slurm.get("job_id") or slurm.get("JobId")):
        job_id = str(slurm.get("job_id") or slurm["JobId"])
    when = _Clock()
    body = _view(d, when)
    if body["root_cause"]:
        body["root_cause"]["fingerprint"] = fingerprint(body["root_cause"])
    body["job"] = _job(d.job, when)
    if not isinstance(slurm, dict):
        del body["slurm"]
    head = {"schema_version": SCHEMA_VERSION, "job_id": job_id, "status": body.pop("status"),
            "partial": body.pop("partial"), "times_assumed_utc": when.assumed}
    return head | body


_LIBRARY = re.compile(r"site-packages|dist-packages|/lib/python\d|^<frozen|/torch/|/usr/lib/")


def _frames_view(r) -> list:
    """The job's own frames, library frames folded into a count."""
    from rich.text import Text

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


def _ranks(ranks: list[int]) -> str:
    """'rank 3' or 'ranks 0-2, 5'."""
    return f"rank{'s' * (len(ranks) > 1)} {_ranges(ranks)}"


def detail_lines(d: dict) -> list[str]:
    """The root cause's details as short sentences (the JSON keeps the structure)."""
    out = []
    said = [f"{_ranks(d[key])} {what}" for key, what in
            (("timed_out_ranks", "timed out"), ("peer_closed_ranks", "lost a peer")) if d.get(key)]
    if "lagging_rank" in d:
        out.append(f"{', '.join(said)}; rank {d['lagging_rank']} did not: it hung or died first")
    elif said:
        out.append(f"{', '.join(said)}; the rank that stalled is not in the logs")
    if d.get("also_on_ranks"):
        out.append(f"same error on {_ranks(d['also_on_ranks'])} ({plural(d.get('occurrences') or 0, 'occurrence')})")
    if p := d.get("progress"):
        line = f"training reached iteration {p['last_iteration']:,} of {p['train_iters']:,}"
        if "seconds_after_last_iteration" in p:
            line += f", failed {p['seconds_after_last_iteration']} s after it"
        if p.get("nan_iterations"):
            line += f"; {plural(p['nan_iterations'], 'NaN iteration')}"
        out.append(line)
    if o := d.get("oom"):
        out.append("memory: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in o.items()))
    if c := d.get("checklist"):
        items = c["items"]
        par = items.get("parallelism") or {}
        out.append(
            "OOM checklist: "
            + ", ".join(
                f"{k.replace('_', ' ')} {v}" for k, v in items.items() if v is not None and k != "parallelism"
            )
            + ("" if not par else ", " + " ".join(f"{k.upper()} {v}" for k, v in par.items()))
            + (f"; not in the logs: {', '.join(c['missing'])}" if c["missing"] else "")
        )
    for chk in d.get("failed_checks", []):
        out.append(f"check failed: {chk['detail']}")
    if "time_from" in d:
        out.append(f"time from the {d['time_from']}")
    if d.get("traceback_truncated"):
        out.append("the traceback is cut off in the log")
    return out


def _ranks_cell(ranks: list[int], width: int = 24) -> str:
    """'0-653, 655-1023' style, shortened with the count when long."""
    if not ranks:
        return "-"
    text = _ranges(ranks)
    if len(text) <= width:
        return text
    return f"{len(ranks)} ranks: {text[: width - 8].rsplit(',', 1)[0]}, …"


def cascade(d: Diagnosis) -> str:
    """One sentence for what followed the root cause: 'then 3 ranks: …; 4× …'."""
    parts = []
    for s in d.symptoms[:4]:
        who = f"{len(s.ranks)} rank{'s' * (len(s.ranks) != 1)}" if s.ranks else f"{s.count}×"
        parts.append(f"{who}: {s.title[0].lower()}{s.title[1:]}{_delay(d.root_cause.time, s.first_time)}")
    more = f"; and {len(d.symptoms) - 4} more" if len(d.symptoms) > 4 else ""
    return "Then " + "; ".join(parts) + more + " (symptoms, not causes)"


def _delay(a: datetime | None, b: datetime | None) -> str:
    if not a or not b:
        return ""
    s = (b - a).total_seconds()
    if s < 1:
        return ""
    return f" {int(s // 60)} min {int(s % 60)} s later" if s >= 60 else f" {int(s)} s later"


def _slurm_line(d: Diagnosis, console: Console) -> None:
    """One line with what SLURM says about the job (mdiag JOBID)."""
    from rich.text import Text

    s = d.slurm
    if isinstance(s, dict):
        facts = [f"{label} {s[k]}" for label, k in (("State", "state"), ("ExitCode", "exit_code"),
                 ("Elapsed", "elapsed"), ("NodeList", "node_list")) if s.get(k)]
        src = f" (from {s['source']})" if s.get("source") else ""
        console.print(Text(inert(f"SLURM job {s.get('job_id')}: " + (", ".join(facts) or "no state known") + src)))


def _symptoms_table(d: Diagnosis, console: Console) -> None:
    """One row per symptom, never wrapped: `what` is cut with … where the terminal is narrow; each
    `path:line` stays whole, in the table where it fits, else on a line of its own below it."""
    from rich.table import Table
    from rich.text import Text

    r, shown = d.root_cause, d.symptoms[:12]
    rows = [(inert(s.title), _ranks_cell(s.ranks), str(s.count), _delay(r.time, s.first_time).strip() or "-",
             inert(str(s.evidence))) for s in shown]
    labels = ("what", "ranks", "count", "when", "first evidence")
    natural = [max([len(labels[i])] + [len(row[i]) for row in rows]) for i in range(5)]
    room = console.width - 3 * 5 - 1 - sum(natural[1:])  # borders and padding: 3 per column, 1 at the end
    inline = room >= min(12, natural[0])
    ncols = 5 if inline else 4
    if not inline:
        room = console.width - 3 * 4 - 1 - sum(natural[1:4])
    t = Table(title=Text("Downstream symptoms"), show_lines=False, title_justify="left")
    t.add_column("what", no_wrap=True, overflow="ellipsis", max_width=max(min(room, natural[0]), 4))
    for label in labels[1:ncols]:
        t.add_column(label, justify="right" if label in ("ranks", "count") else "left", no_wrap=True,
                     overflow="ellipsis" if label != "first evidence" else "ignore")
    for row in rows:
        t.add_row(*[Text(x) for x in row[:ncols]])
    if len(d.symptoms) > 12:
        t.caption = f"and {len(d.symptoms) - 12} more"
    console.print(t)
    if not inline:
        console.print(Text("first evidence:", style="dim"))
        for row in rows:
            console.print(Text(f"  {row[4]}  ({row[0]})"), soft_wrap=True)


def render(d: Diagnosis, console: Console) -> None:
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    r = d.root_cause
    if r is None:
        console.print(Text("mdiag: no failure found", style="bold green"))
        console.print(Text(read_line(d.sources)))
        _slurm_line(d, console)
        for w in d.warnings:
            console.print(Text(f"warning: {inert(w)}", style="yellow"))
        return
    head = Text()
    head.append(f"{r.category.upper()}", style="bold red")
    head.append("  ")
    head.append(inert(r.summary), style="bold")
    body: list = [head, Text("")]
    body.append(Text(inert(r.message), style="red"))
    facts = []
    for label, value in (("rank", r.rank), ("local rank", r.local_rank), ("host", r.host),
                         ("time", r.time and r.time.strftime("%Y-%m-%d %H:%M:%S"))):
        facts.append(f"{label}: {value if value is not None else 'unknown'}")
    body.append(Text("  " + " · ".join(facts), style="dim"))
    body += [Text("  " + inert(line), style="dim") for line in detail_lines(r.details)]
    if r.frames:
        body += [Text(""), Text("Traceback (job frames first):", style="bold")] + _frames_view(r)
    body += [Text(""), Text("Why", style="bold"), Text(inert(r.why))]
    if r.remediation:
        body.append(Text("What to do", style="bold"))
        body += [Text(f"  • {inert(x)}") for x in r.remediation]
    console.print(Panel(Group(*body), title=Text("mdiag · root cause"), border_style="red", expand=True))
    if r.evidence:  # outside the panel and never wrapped, whatever the width: `path:line` stays whole to copy
        console.print(Text(f"root cause at {inert(str(r.evidence))}", style="cyan"), soft_wrap=True)
    if d.symptoms:
        console.print(Text(inert(cascade(d)), style="bold"))
        _symptoms_table(d, console)
    console.print(Text(read_line(d.sources), style="dim"))
    _slurm_line(d, console)
    for w in d.warnings:
        console.print(Text(f"warning: {inert(w)}", style="yellow"))
