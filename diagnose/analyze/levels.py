"""A line's level, as its logger's column says it: glog's and absl's fatal header (the process aborts on that line),
and a logger's error level (a line that is an error though its message does not say so)."""
from __future__ import annotations

import polars as pl
import regex

from diagnose.patterns.library import Pattern

# glog's and absl's fatal header (`F0710 13:11:24.494246 34492 x.cc:408] `, absl's seconds since the epoch too), peeled
# into a line's lead or left at its message's start: the process aborts on that line. (Not the error level: TensorFlow,
# JAX and test runners log errors in runs that go on.)
_FATAL_LEAD = r"^F\d{4} \d\d:\d\d:\d+(?:\.\d+)? "
_FATAL_HEAD = r"^F\d{4} \d\d:\d\d:\d+(?:\.\d+)? +\d+ [\w./-]+:\d+\] "
# A logger's error level peeled into the lead (Python logging's default `ERROR:root:`, `- ERROR - name - `,
# `| ERROR    | mod:fn:12 - `, `[ERROR] `): the message is an error line though it does not say so itself. Healthy
# runs log such lines and go on (a retried download, a skipped sample), so it is a root only as a log's last word
# (LAST_WORD) where nothing else is: a program that logs its error and exits.
_ERROR_LEAD = r"(?:^|[\s\[|:-])(?:ERROR|CRITICAL)(?:[\s\]|:-]|$)"
_ERROR_LEAD_RX = regex.compile(_ERROR_LEAD)
_FATAL_LEAD_RX = regex.compile(_FATAL_LEAD)
LAST_WORD = "last_word"  # an Event role: see _ERROR_LEAD
LAST_LINES = 2  # "the log ends on it": its file's last line, or the one before (a shell prompt, a blank)


def error_level(lead: pl.Expr, msg: pl.Expr) -> pl.Expr:
    """Lines at the fatal or the error level, their message not empty."""
    lead = lead.fill_null("")
    return ((lead.str.contains(_FATAL_LEAD) | lead.str.contains(_ERROR_LEAD) | msg.str.contains(_FATAL_HEAD))
            & (msg.str.strip_chars() != ""))


def by_level_only(lead: str, msg: str, p: Pattern) -> bool:
    """An error line only by the error level of its logger's column (no fatal header, no error word of its own)."""
    return bool(_ERROR_LEAD_RX.search(lead)) and not _FATAL_LEAD_RX.search(lead) and not p.search(msg) \
        and not regex.search(_FATAL_HEAD, msg)
