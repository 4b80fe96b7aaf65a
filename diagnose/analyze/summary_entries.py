"""torchrun's ChildFailedError summary as a witness in the choice of root: which entry an event lies in, which rank
its Root Cause entry names, and whether a SIGKILL came after that entry's failure."""
from __future__ import annotations

import regex

from diagnose.analyze.context import ChildFailure, JobContext
from diagnose.model import Event

_DIGITS = regex.compile(r"\d+")


def named_by_summary(root: Event, candidates: list[Event], ctx: JobContext) -> Event:
    """Several ranks print the same failure (whose output reached the file first is chance): the one on the
    rank torchrun's Root Cause entry names, which it saw fail first."""
    named = {f.rank for f in ctx.failures if f.root and f.rank is not None}
    if len(named) != 1 or root.rank is None or root.rank in named:
        return root
    a = _DIGITS.sub("#", root.message)
    same = [e for e in candidates if e.rank in named and e.pattern == root.pattern
            and _prefix_alike(a, _DIGITS.sub("#", e.message))]
    return min(same, key=lambda e: e.order) if same else root


def _prefix_alike(a: str, b: str) -> bool:
    """One text begins the other (lines a paste or a terminal cut at different lengths), over 20+ characters."""
    n = min(len(a), len(b))
    return n >= 20 and a[:n] == b[:n]


def _entry_of(e: Event, ctx: JobContext, root_entry: bool) -> ChildFailure | None:
    """The entry of torchrun's summary that e's line lies in, among the Root Cause entries (root_entry) or the others."""
    src, line = (e.order[2], e.order[3]) if len(e.order) == 4 else (None, None)
    return next((f for f in ctx.failures if f.root == root_entry and f.src == src and f.line <= line <= f.end), None)


def in_summary_entry(ctx: JobContext, root_entry: bool = False):
    """A test: does an event lie in an entry of torchrun's failure summary other than its `Root Cause` (with
    root_entry: in the Root Cause entry)?"""
    return lambda e: _entry_of(e, ctx, root_entry) is not None


def killed_after_root_cause(e: Event, ctx: JobContext) -> bool:
    """Is e a SIGKILL in another entry of torchrun's summary than its Root Cause, where the Root Cause is a worker
    that exited with an error (or, its code cut off, failed earlier than this kill)?"""
    entry = _entry_of(e, ctx, root_entry=False)
    if entry is None:
        return False
    return any(f.root and ((f.exitcode or 0) > 0 or (f.exitcode is None and f.time and entry.time and f.time < entry.time))
               for f in ctx.failures)
