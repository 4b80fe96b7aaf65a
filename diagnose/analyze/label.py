"""Labelling: each kept line and each rebuilt traceback becomes an Event, named by the highest-priority
pattern that matches it (frame patterns refine a generic exception), with its rank, host and time."""
from __future__ import annotations

import bisect
import json
from datetime import datetime

import polars as pl
import regex

from diagnose.read import normalize, scan_keep
from diagnose.analyze import levels
from diagnose.analyze.context import ChildFailure, JobContext
from diagnose.analyze.ranks import rank_beside, rank_from, rank_of
from diagnose.model import Event, Evidence, Frame, Source, TracebackBlock
from diagnose.patterns.library import Pattern
from diagnose.analyze.tracebacks import Chain


GENERIC = "python.exception"
ERROR_LINE = "fallback.error_line"
UNKNOWN = "unknown.no_evidence"
_TIMEOUTS = ("nccl.watchdog_timeout", "nccl.gloo_timeout")
# A rank that lost its peer only says another rank went away first (often after that rank's own timeout).
_PEER_GONE = ("nccl.peer_closed",)
# A rank relaying the flight recorder's dump signal: another rank timed out.
_RELAYS = ("nccl.timeout_dump_signal",)
# Communication failures that name the rank that noticed, not the rank that failed (and a relay of another rank's
# timeout).
_WAITED = _TIMEOUTS + _PEER_GONE + _RELAYS


def match_patterns(df: pl.DataFrame, patterns: tuple[Pattern, ...]) -> pl.DataFrame:
    """Adds `pid`: the highest-priority pattern matching each kept line's message."""
    ordered = sorted((p for p in patterns if not p.frames), key=lambda p: -p.priority)  # frame patterns: see _chain_event
    # only the regexes whose literals some message holds (one Aho-Corasick pass): compiling all of them
    # cost most of the time of diagnosing a short log
    gates = scan_keep.keep_plan(tuple(p.regex for p in patterns)).pattern_gates
    lits = sorted(set().union(*(g for g in gates.values() if g)))
    present = set(df.select(pl.col("msg").str.extract_many(lits, overlapping=True).explode().drop_nulls()
                            .unique()).to_series().to_list()) if lits and df.height else set()
    ordered = [p for p in ordered if gates.get(p.regex) is None or gates[p.regex] & present]
    if not ordered:
        return df.with_columns(pid=pl.lit(None, dtype=pl.String))
    # every regex in one select (polars runs them on all cores), then the first hit in priority order
    # (a when/then chain over the regexes themselves runs them one after another); a flood that repeats
    # its messages has each distinct one matched once
    msgs = df.select("msg")
    uniq = msgs.unique() if df.height > 1000 else msgs
    repeats = uniq.height * 2 < df.height
    texts = uniq if repeats else msgs
    hits = texts.select(pl.col("msg").str.contains(p.regex).alias(f"_{i}") for i, p in enumerate(ordered))
    expr = pl.when(pl.col("_0")).then(pl.lit(ordered[0].id))
    for i, p in enumerate(ordered[1:], 1):
        expr = expr.when(pl.col(f"_{i}")).then(pl.lit(p.id))
    pid = hits.select(pid=expr.otherwise(pl.lit(None, dtype=pl.String))).to_series()
    if repeats:
        table = texts.with_columns(pid)
        pid = msgs.join(table, on="msg", how="left", maintain_order="left", nulls_equal=True).get_column("pid")
    if "lead" in df.columns and any(p.id == ERROR_LINE for p in patterns):
        # a fatal line, or one logged at the error level, that no pattern names: an error line, as if it said `Error:`
        fatal = df.select(levels.error_level(pl.col("lead"), pl.col("msg"))).to_series()
        pid = pl.select(pl.when(pid.is_null() & fatal).then(pl.lit(ERROR_LINE)).otherwise(pid)).to_series()
    return df.with_columns(pid=pid)


def _order(t: datetime | None, src: int, line: int) -> tuple:
    return (t is None, t or datetime.min, src, line)


def build_events(
    df: pl.DataFrame,
    chains: list[Chain],
    sources: list[Source],
    patterns: dict[str, Pattern],
    ctx: JobContext,
) -> list[Event]:
    display = {s.index: s.display for s in sources}
    ends = {s.index: s.lines for s in sources}
    events: list[Event] = []
    in_chain, warned = set(), set()
    spans: dict[tuple, list[tuple[int, int]]] = {}  # (src, stream) -> a traceback's frames and source lines
    for c in chains:
        rows = c.rows
        for r in rows:
            in_chain.add((r["src"], r["lineno"]))
        spans.setdefault((c.src, c.stream), []).extend(
            (b.start, b.exception_line) for b in c.blocks if b.exception_line is not None)
        ev = _chain_event(c, rows, df, display, patterns, ctx)
        if ev:
            events.append(ev)
            if ev.role == levels.WARNED and rows:  # (its message's next lines at the same level are the warning's too)
                warned.update((c.src, c.stream, rows[-1]["lineno"] + k) for k in (1, 2, 3))
    for s in spans.values():
        s.sort()
    lines = df.filter(pl.col("pid").is_not_null())
    beside = rank_beside(df)
    # one Python list per column, zipped: thousands of ranks' timeouts are thousands of rows
    cols = ("src", "lineno", "pid", "msg", "time", "order_time", "rank", "local_rank", "host", "stream", "lead", "proc_rank",
            "proc_rank_line")
    rows = list(zip(*(lines.get_column(c).to_list() for c in cols)))
    matched = {(r[0], r[1]) for r in rows}
    for src, lineno, pid, msg, t, order_t, rank, local, host, stream, lead, prank, prank_line in rows:
        if (src, lineno) in in_chain:
            continue
        if msg.lstrip().startswith("raise ") and (src, lineno + 1) in matched:
            continue  # a traceback's source line above its exception line (the frames above were cut off)
        # a traceback's own source line (`raise RendezvousConnectionError(`) is no report of its own
        if _within(spans.get((src, stream)), lineno):
            continue
        p = patterns[pid]
        if p.role == "context":
            continue
        # an exception line outside any traceback (its traceback was not printed, or cut off): a
        # candidate only when nothing better is in the logs
        role = "fallback" if pid == GENERIC else p.role
        if pid in levels.LAST_WORD_ONLY or (pid == ERROR_LINE and levels.by_level_only(lead or "", msg, p)):
            if lineno <= ends.get(src, 0) - levels.LAST_WORD_ONLY.get(pid, levels.LAST_LINES):
                continue
            role = levels.LAST_WORD
        if levels.warned(role, lead or "", msg, traceback=(src, stream, lineno) in warned):
            role = levels.WARNED
        rank, local, host, basis = rank_from(rank, local, host, msg, ctx)
        if rank is None and local is None and (src, lineno) in beside:
            rank, line = beside[(src, lineno)]
            basis = {"rank_from": f"{display[src]}:{line}"}
        if rank is None and local is None and prank is not None and role != "symptom":  # (its process's other line)
            rank, basis = prank, {"rank_from": f"{display[src]}:{prank_line}"}
        events.append(
            Event(
                kind="line", category=p.category, pattern=p.id, role=role, message=msg.strip(),
                evidence=Evidence(display[src], lineno), rank=rank, local_rank=local, host=host,
                time=t, order=_order(order_t, src, lineno), details=basis, lead=lead or "",
            )
        )
    for s in sources:
        if s.layout == "error-json":
            ev = _error_file_event(s, patterns, ctx)
            if ev:
                events.append(ev)
    for e in events:
        if "_rank_line" in e.details:  # the NCCL line that states the process's rank
            src, line = e.details.pop("_rank_line")
            e.details["rank_from"] = f"{display[src]}:{line}"
    return _mark_echoes(events, ctx, {s.display: s.index for s in sources})


def traceback_starts(chains: list[Chain], sources: list[Source], ctx: JobContext) -> list[tuple]:
    """Where each traceback begins and whose it is, cut ones too: (file, line, rank, local rank, host)."""
    display = {s.index: s.display for s in sources}
    out = []
    for c in chains:
        rank, local, host = c.head
        if rank is None and local is None:
            continue
        rank, local, host, _ = rank_from(rank, local, host, "", ctx)
        if rank is not None:
            out.append((display[c.src], c.start, rank, local, host))
    return out


CUT = "unknown.traceback_cut"


def cut_traceback(chains: list[Chain], sources: list[Source], ctx: JobContext,
                  patterns: dict[str, Pattern]) -> Event | None:
    """The earliest traceback cut off before its exception, as a low-confidence root: the one sign of failure in a
    log whose error line was not written or not pasted (its kind is the pattern CUT's)."""
    cut = [c for c in chains if all(b.exception is None for b in c.blocks) and any(b.frames for b in c.blocks)]
    if not cut:
        return None
    display = {s.index: s.display for s in sources}
    c = min(cut, key=lambda c: (c.src, c.start))
    rank, local, host = c.head
    rank, local, host, basis = rank_from(rank, local, host, "", ctx)
    p = patterns[CUT]
    return Event(kind="traceback", category=p.category, pattern=p.id, role="fallback",
                 message=(c.blocks[0].text[0].strip() if c.blocks[0].text else p.examples[0]),
                 evidence=Evidence(display[c.src], c.start),
                 rank=rank, local_rank=local, host=host, time=None, order=_order(None, c.src, c.start),
                 blocks=c.blocks, details=basis)


def summary_root(sources: list[Source], ctx: JobContext, patterns: dict[str, Pattern]) -> Event | None:
    """torchrun's failure summary alone (no line of it matched, e.g. posted without its header): its Root Cause
    entry, as the launcher's word that a worker failed (a summary posted alone:
    https://github.com/pytorch/pytorch/issues/121209)."""
    display = {s.index: s.display for s in sources}
    f = _failed_root_entry(ctx, display)
    if f is None:
        return None
    p = patterns.get(_BY_SIGNAL.get(f.exitcode, ""), patterns["launcher.worker_failed"])
    return Event(kind="line", category=p.category, pattern=p.id, role="symptom", message=f.exit_text,
                 evidence=Evidence(display[f.src], f.exit_line), rank=f.rank, local_rank=f.local_rank,
                 host=f.host, time=f.time, order=_order(f.time, f.src, f.line))


def _failed_root_entry(ctx: JobContext, display: dict[int, str], file: str | None = None) -> ChildFailure | None:
    """torchrun's Root Cause entry of a worker that exited non-zero (with its `exitcode : N (pid: P)` line), one
    in `file` first."""
    entries = [f for f in ctx.failures if f.root and f.exitcode not in (None, 0)]
    return min(entries, key=lambda f: display[f.src] != file, default=None)


# a worker's death by a signal, as torchrun's summary gives it (exitcode -N), read as the signal's own report is
_BY_SIGNAL = {-9: "host_oom.childfailed_sigkill", -7: "host_oom.bus_error", -11: "unknown.fatal_signal",
              -6: "unknown.fatal_signal", -4: "unknown.fatal_signal", -8: "unknown.fatal_signal"}


def point_at_root_cause_entry(ev: Event, sources: list[Source], ctx: JobContext, patterns: dict[str, Pattern]) -> None:
    """torchrun's ChildFailedError header named as the root (no worker's own error in the logs): its Root Cause
    entry's `exitcode : N (pid: P)` line (in the header's file first) becomes the evidence of which worker failed,
    and how (a signal's exit code is read as that signal's report: -9, SIGKILL, is host memory)."""
    if ev.pattern != "launcher.child_failed":
        return
    display = {s.index: s.display for s in sources}
    f = _failed_root_entry(ctx, display, ev.evidence.file)
    if f is None or (ev.rank is not None and f.rank != ev.rank):
        return
    ev.evidence, ev.message, ev.lead = Evidence(display[f.src], f.exit_line), f.exit_text, ""
    if (p := patterns.get(_BY_SIGNAL.get(f.exitcode, ""))) is not None:
        ev.pattern, ev.category = p.id, p.category


def _within(spans: list[tuple[int, int]] | None, line: int) -> bool:
    """Is `line` strictly inside one of the sorted, disjoint spans?"""
    if not spans:
        return False
    k = bisect.bisect_left(spans, (line, line)) - 1
    return k >= 0 and spans[k][0] < line < spans[k][1]


def _mark_echoes(events: list[Event], ctx: JobContext, index: dict[str, int]) -> list[Event]:
    """Errors repeated inside torchrun's ChildFailedError summary belong to the entry's rank; when the
    rank's own output already shows the same error, the echo is dropped."""
    originals = {(e.rank, e.pattern) for e in events}
    out = []
    for e in events:
        entry = ctx.echo_of(index.get(e.evidence.file, -1), e.evidence.line) if e.kind != "error_file" else None
        if entry is None or e.pattern.startswith("launcher."):
            out.append(e)
            continue
        e.details["echo_of_rank"] = entry.rank
        if e.rank is None:
            e.rank, e.local_rank, e.host = entry.rank, entry.local_rank, entry.host
            if (e.rank, e.pattern) in originals:
                continue
        out.append(e)
    return out


def _chain_event(c: Chain, rows, df, display, patterns, ctx) -> Event | None:
    if not rows:
        return None  # a traceback cut off before its exception: nothing to classify
    # a traceback printed under a wrapper's message as its cause (mp.spawn's `ProcessRaisedException:` /
    # `-- Process 1 terminated with the following error:`): its lines name the failure, unless only the
    # wrapper's own lines name one
    cause = next((b.start for b in c.blocks if b.introduced and b.exception_line is not None), None)
    named = [r for r in rows if r["lineno"] >= cause] if cause is not None else rows
    best_row, best = _best_row(named, patterns)
    if named is not rows and (best is None or best.id == GENERIC):
        whole_row, whole = _best_row(rows, patterns)
        if whole is not None and whole.id != GENERIC and whole.role == "root":
            best_row, best = whole_row, whole
    if best is None:
        best, best_row = patterns[GENERIC], named[0]
    if best.id == GENERIC:  # a generic exception: where it was raised may name its kind
        best = _by_frames(best, best_row["msg"], [f for b in c.blocks for f in b.frames], patterns)
    if stray := _stray_cause(c, best, patterns):
        best_row, best = stray
    first = rows[0]
    rank, local, host, basis = rank_of(first, ctx)
    if rank is None and local is None:
        # a parent's traceback around its worker's (mp.spawn's `-- Process 1 terminated with the following
        # error:`): the worker named there raised the reported line
        rank, local, host, basis = rank_of(best_row, ctx)
    if rank is None and local is None:
        # a later line of the exception's message that names its rank (DDP's `… did not receive grad for rank 1:`)
        told = [(n, normalize.rank_in_text(t)) for b in c.blocks for n, t in b.continuation]
        said = next(((n, d) for n, d in told if d.get("rank") is not None), None)
        local_said = next((d["local_rank"] for _, d in told if d.get("local_rank") is not None), None)
        if said:
            rank, host = said[1]["rank"], host or said[1].get("host")
            basis = {"rank_from": f"{display[c.src]}:{said[0]}"}
        elif local_said is not None:  # a local rank (mp.spawn's process index): global only where the node is established
            local = local_said
            rank, basis = ctx.global_rank(local, host), ctx.rank_basis(local, host)
    start_order = first["order_time"]
    message = _message(c, best_row)
    warned = levels.warned(best.role, best_row.get("lead") or "", best_row["msg"], traceback=True)
    return Event(
        kind="traceback", category=best.category, pattern=best.id, role=levels.WARNED if warned else best.role,
        message=message, evidence=Evidence(display[c.src], best_row["lineno"]),
        rank=rank, local_rank=local, host=host, time=best_row["time"],
        order=_order(start_order, c.src, c.start), blocks=c.blocks, details=basis,
        lead=(best_row.get("lead") or "") if message == best_row["msg"].strip() else "",
    )


def _best_row(rows: list[dict], patterns: dict[str, Pattern]) -> tuple[dict | None, Pattern | None]:
    """The row of an exception's lines whose pattern has the highest priority, and that pattern."""
    best_row, best = None, None
    for r in rows:
        p = patterns.get(r["pid"]) if r["pid"] else None
        if p and p.role != "root" and r is not rows[0]:
            continue  # a symptom glued to a later line of the message (a launcher's SIGTERM notice) names no cause
        if p and (best is None or p.priority > best.priority):
            best_row, best = r, p
    return best_row, best


def _stray_cause(c: Chain, best: Pattern, patterns: dict[str, Pattern]) -> tuple[dict, Pattern] | None:
    """A line among the frames of a traceback whose exception names no cause (NCCL's generic `NCCL error in: …,
    internal error`) that is none of its lines (another process's, interleaved: two ranks failing together in a
    merged log) and names the failure: a root pattern of higher priority (NCCL's `Failed to CUDA calloc` detail).
    Any other traceback's own exception stands (a warning another rank printed among its frames is no cause of
    it).  Fallbacks and the generic exception name nothing more."""
    if best.id != "nccl.error":
        return None  # only a traceback whose own lines name no cause (`NCCL error in: …, internal error`)
    found = None
    for r in c.strays:
        p = patterns.get(r["pid"]) if r["pid"] else None
        if (p is None or p.role != "root" or p.id == GENERIC or p.priority <= best.priority
                or (found is not None and p.priority <= found[1].priority)):
            continue
        found = (r, p)
    return found


def _message(c: Chain, row: dict) -> str:
    """The line that names the failure; a later line of an exception's message (NCCL's `Last error:` detail
    under `DistBackendError: NCCL error in: …`) comes with the exception line it belongs to."""
    msg = row["msg"].strip()
    for b in c.blocks:
        if msg.endswith(":") and b.exception_line == row["lineno"] and b.continuation:
            # `torch.OutOfMemoryError:` with its message on the next line (a wrapped or re-printed exception)
            return f"{msg} {b.continuation[0][1].strip()}"
        if b.exception and b.exception_line is not None and any(n == row["lineno"] for n, _ in b.continuation):
            return f"{b.exception} … {msg}"
    return msg


_LIBRARY = regex.compile(r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python3?[\d.]*[/\\](?!site-|dist-)|^<frozen ")


def _by_frames(best: Pattern, exception: str, frames: list[Frame], patterns: dict[str, Pattern]) -> Pattern:
    """The frame pattern whose exception regex matches and whose frames regex matches one of the three
    innermost frames: file, function and source line (`ValueError` raised while loading a tokenizer: a
    corrupt input file; `assert n % k == 0`: a divisibility check)."""
    # the three innermost frames, and the innermost of the job's own code: a library's internals (pandas'
    # indexing under `data["height"]`) sit between the failing line and the exception
    own = next((f for f in reversed(frames[:-3]) if not _LIBRARY.search(f.file)), None)
    inner = [f"{f.file} {f.func} {f.code or ''}" for f in ([own] if own else []) + frames[-3:]]
    every = [f"{f.file} {f.func} {f.code or ''}" for f in frames]
    for p in sorted((p for p in patterns.values() if p.frames), key=lambda p: -p.priority):
        # a symptom's frames may be anywhere in the stack: the launcher's own code that raised it (torchrun
        # failing to read a worker's error file) sits under the library frames it called
        if p.search(exception) and any(regex.search(p.frames, x) for x in (every if p.role == "symptom" else inner)):
            return p
    return best


def _error_file_event(s: Source, patterns: dict[str, Pattern], ctx: JobContext) -> Event | None:
    """torchrun's error.json (written by @record): message, py_callstack, timestamp."""
    try:
        data = json.loads(s.path.read_text(encoding="utf-8", errors="replace"))
        msg = data["message"]
        if isinstance(msg, str):
            msg = {"message": msg}
        text = msg.get("message", "")
        extra = msg.get("extraInfo", {}) or {}
        stack = extra.get("py_callstack", "")
        stamp = int(extra.get("timestamp", 0)) or None
        t = datetime.fromtimestamp(stamp) if stamp else None
        if not isinstance(text, str) or not isinstance(stack, str):
            raise TypeError("message and py_callstack must be text")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError):
        return None  # not torchrun's error file after all: its log lines still count
    block = TracebackBlock(start=1)
    for m in regex.finditer(r'File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<func>.*)', stack):
        block.frames.append(Frame(file=m["file"], line=int(m["line"]), func=m["func"].strip()))
    block.text = stack.rstrip("\n").splitlines() if stack else [text]
    lines = [ln for ln in (text.splitlines() or [""])]
    block.exception = lines[0] if lines else text
    best, best_line = None, block.exception
    for ln in lines:
        for p in patterns.values():
            if p.id != GENERIC and p.search(ln) and (best is None or p.priority > best.priority):
                best, best_line = p, ln
    if best is None:
        best = patterns[GENERIC]
    rank, basis = ctx.global_rank(s.local_rank), ctx.rank_basis(s.local_rank)
    return Event(
        kind="error_file", category=best.category, pattern=best.id, role=best.role, message=best_line.strip(),
        evidence=Evidence(s.display, 1), rank=rank, local_rank=s.local_rank, host=ctx.rank_host.get(rank) if rank is not None else None,
        time=t, order=_order(t, s.index, 1), blocks=[block], details=basis,
    )
