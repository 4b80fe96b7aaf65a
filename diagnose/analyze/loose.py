"""Which error-looking lines that no pattern names may be the likeliest root of a log (the fallbacks, named with low
confidence where nothing better is): not NCCL's connection retries of a process that went on to set up its
communicator, nor an error word in a line logged at warning level; and the kind that such a root's words name."""
from __future__ import annotations

import regex

from diagnose.analyze.context import JobContext
from diagnose.analyze.label import ERROR_LINE, GENERIC
from diagnose.analyze.levels import LAST_WORD, WARNED, WARNING_LEVEL
from diagnose.model import Event
from diagnose.patterns import library
from diagnose.patterns.library import Pattern
from diagnose.read import grammar

# NCCL's connection retries of a process that went on to set up its communicator were a peer starting late
_NCCL_ORIGIN = regex.compile(grammar.NCCL_ORIGIN)
_NCCL_RECOVERABLE = ("fallback.nccl_connect_retry", "fallback.nccl_error_trace")

# a line logged at warning level (`wandb: WARNING Retrying request after error: …`, `WARNING  Error: could not read
# .netrc`): the program said it goes on; an error word in it names no failure (NCCL's `WARN` is its failure report,
# a fallback of its own)
_ERROR_WORDS = (ERROR_LINE, GENERIC, "fallback.module_not_found")


def loose_roots(events: list[Event], ctx: JobContext, failed: bool = False) -> list[Event]:
    """The likeliest roots where no pattern names a failure: error lines no pattern knows, and a failure's words
    said in a warning (levels.WARNED) where the logs show that the job failed in the process's own words (an error
    line, a logger's last error, a traceback cut before its exception: `failed`), after them. A launcher's report
    alone says only that a process failed, and every process prints a routine warning: it says more than one."""
    loose = [e for e in events if e.role == "fallback" and loose_root(e, ctx)]
    if loose or failed or any(e.role == LAST_WORD for e in events):
        loose += [e for e in events if e.role == WARNED]
    return loose


def loose_rank(e: Event) -> int:
    """Error lines no pattern knows before a failure's words in a warning (a traceback cut before its exception
    comes after both: a warning that names a kind says more than a traceback that names none, as joblib's
    `UserWarning: [Errno 28] No space left on device` above mp.spawn's traceback cut at `ctx.Lock()`)."""
    return int(e.role == WARNED)


def loose_root(e: Event, ctx: JobContext) -> bool:
    """May the fallback event e be the likeliest root?"""
    return not _joined_later(e, ctx) and not _unstuck_later(e, ctx) and not _at_warning_level(e)


def _at_warning_level(e: Event) -> bool:
    return e.pattern in _ERROR_WORDS and bool(WARNING_LEVEL.search(e.lead + e.message))


def _joined_later(e: Event, ctx: JobContext) -> bool:
    m = _NCCL_ORIGIN.match(e.message) if e.pattern in _NCCL_RECOVERABLE else None
    # (a communicator of a subgroup too: Megatron's TP groups print their own, and the process went on)
    return bool(m) and (m["host"], int(m["pid"])) in ctx.nccl_procs


def _unstuck_later(e: Event, ctx: JobContext) -> bool:
    """XLA said, later in the same file, that a rendezvous it warned about ended: the warning was a false alarm."""
    src, line = e.order[2], e.order[3]
    return (e.pattern == "fallback.xla_rendezvous_stuck" and "may be stuck" in e.message
            and any(s == src and n > line for s, n in ctx.xla_unstuck))


def kind_from_words(root: Event, patterns: dict[str, Pattern]) -> dict:
    """A root that no pattern names (the generic exception, an error line only the fallback names) whose message
    names a kind's own vocabulary (patterns/hints.toml: NCCL, a CUDA error, a divisibility) takes that kind's
    category; the rest of what is said of it stays."""
    if root.category not in ("python", "unknown") or not (root.pattern == GENERIC or patterns[root.pattern].role == "fallback"):
        return {}
    hint = library.hinted(root.message)
    if hint is None or hint.category == root.category:
        return {}
    root.category = hint.category
    return {"category_from": hint.id}
