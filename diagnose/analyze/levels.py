"""A line's level, as its logger's column says it: glog's and absl's fatal header (the process aborts on that line),
a logger's error level (a line that is an error though its message does not say so), and a warning (the program
said it goes on)."""
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
WARNED = "warned"  # an Event role: see warned()
LAST_LINES = 2  # "the log ends on it": its file's last line, or the one before (a shell prompt, a blank)

# Fallbacks that are a root only where the log ends on them (as an error line by its level), and how near its end:
# a program's `Failed to …:` or an OSError's str printed with no error word (healthy runs print such lines and go
# on), argparse's usage (`--help` prints it too; its error line comes after the usage, which may wrap over lines)
LAST_WORD_ONLY = {"fallback.failed_to": LAST_LINES, "fallback.errno_printed": LAST_LINES, "fallback.argparse_usage": 40}

# A failure's words in a warning: Python's warnings module (`conv.py:456: UserWarning: Plan failed with a
# cudnnException: … CUDNN_STATUS_NOT_SUPPORTED`, torch 2.3's cuDNN v8 API, harmless by pytorch/pytorch#121834), and a
# traceback a logger printed at its warning level (dynamo's `WON'T CONVERT … due to:` under glog's `W0711 …] ` or
# `[WARNING] `: the frame runs uncompiled). The program went on; such a line is a root only where the logs show that
# the job failed and nothing else names why.
_PY_WARNING = regex.compile(r"(?:\.py|>):\d+: [A-Z]\w*Warning: ")
# a logger's warning level: `WARNING`, `[W]`, glog's `W0711 12:00:05…` (analyze/loose.py reads it too)
WARNING_LEVEL = regex.compile(r"\bWARN(?:ING)?\b|\[W(?:ARN(?:ING)?)?\]|^\[?W\d{4} \d\d:")
_WARN_INLINE = regex.compile(r"^(?:\[[^\]]{1,40}\] )?(?:[\w.]+: )?(?:\[WARN(?:ING)?\] |WARN(?:ING)?:[\w.]*:)")


def warned(role: str, lead: str, msg: str, traceback: bool) -> bool:
    """A root's words said in a warning (see _PY_WARNING): its role becomes WARNED."""
    if role not in ("root", "comm"):
        return False
    if "Traceback (most recent call last)" in msg:
        return False  # (a pasted log flattened to one line: the warning, then the traceback that failed)
    if traceback:
        return bool(WARNING_LEVEL.search(lead) or _WARN_INLINE.match(msg))
    # (a line's own logger column at warning level is no sign: NCCL, fairseq and torchelastic report failures there)
    return bool(_PY_WARNING.search(msg))


def error_level(lead: pl.Expr, msg: pl.Expr) -> pl.Expr:
    """Lines at the fatal or the error level, their message not empty."""
    lead = lead.fill_null("")
    return ((lead.str.contains(_FATAL_LEAD) | lead.str.contains(_ERROR_LEAD) | msg.str.contains(_FATAL_HEAD))
            & (msg.str.strip_chars() != ""))


def by_level_only(lead: str, msg: str, p: Pattern) -> bool:
    """An error line only by the error level of its logger's column (no fatal header, no error word of its own)."""
    return bool(_ERROR_LEAD_RX.search(lead)) and not _FATAL_LEAD_RX.search(lead) and not p.search(msg) \
        and not regex.search(_FATAL_HEAD, msg)
