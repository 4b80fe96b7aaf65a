"""A prefix that no kind of patterns/prefixes.toml knows, learned from a file's own lines.

Log viewers, job platforms and shells write their own columns before every line (`[stderr] `,
`[pod/trainer-0/pytorch] `, `Dec 05 10:00:00 node03 python[4242]: `, `… - trainer - INFO - `), and
normalize.peel stops at the first prefix it does not know: the launcher's `[rank3]:` behind it, a
traceback's header and its frames no longer start their lines.  A file whose kept lines (nine in ten,
at least MIN_LINES) start with the same fields, in shape (digits stand for any digits, a log level for
any level), has such a prefix when taking it off shows a known prefix or a traceback line in one of them
at least; then it is peeled from every line that has it, and what stands behind it is peeled as usual.
Nothing is read from it (no rank, host or time is guessed from columns nobody described): it only
stops hiding the rest.  The learning runs on the lines the scan kept, a sample of them per file.
"""
from __future__ import annotations

import re
from collections import Counter

from diagnose.read import grammar
from diagnose.read.normalize import NOT_A_COLUMN

MIN_LINES = 4
SHARE = 0.9
MAX_FIELDS = 8
SAMPLE = 2000  # lines of a file that the prefix is learned from (the caller's sample)

_FIELD = re.compile(r"(\S+)([ \t]+)")
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"[A-Za-z]+")
_LEVELS = frozenset({"TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "WARNING", "ERROR", "ERR", "CRITICAL", "CRIT",
                     "FATAL", "SEVERE"})
# what a wrapped line shows once its columns are off: a traceback's header or frame, an exception, a field of
# torchrun's failure summary (a rank label is read from the peeled facts)
_REVEALS = (re.compile(grammar.TB_HEADER), re.compile(grammar.FRAME), re.compile(grammar.EXC_LINE),
            re.compile("^" + grammar.SUMMARY_FIELD))
# a field that reads as a message, not a column: the learned prefix ends before it
_WORDS = re.compile(r"[A-Za-z_.-]+:?$")


def _shape(token: str) -> str:
    """A field as a shape: its digits as `9`, a log level (any case, in its brackets) as `L`."""
    word = _WORD.findall(token)
    if len(word) == 1 and word[0].upper() in _LEVELS:
        return _WORD.sub("L", _DIGITS.sub("9", token))
    return _DIGITS.sub("9", token)


def _fields(text: str) -> list[tuple[str, str]]:
    """The leading fields of a line and the blanks after each (a line that starts with a blank has none)."""
    out, pos = [], 0
    while len(out) < MAX_FIELDS:
        m = _FIELD.match(text, pos)
        if m is None:
            break
        out.append((m.group(1), m.group(2)))
        pos = m.end()
    return out


def _field_rx(token: str) -> str:
    word = _WORD.findall(token)
    if len(word) == 1 and word[0].upper() in _LEVELS:
        head, _, tail = _DIGITS.sub("9", token).partition(word[0])
        level = "(?:" + "|".join(sorted(_LEVELS | {x.lower() for x in _LEVELS} | {x.title() for x in _LEVELS})) + ")"
        return _digits_rx(head) + level + _digits_rx(tail)
    return _digits_rx(token)


def _digits_rx(text: str) -> str:
    return r"\d+".join(re.escape(part) for part in _DIGITS.split(text))


def learn(messages: list[str], peel) -> re.Pattern | None:
    """The prefix shared by nine in ten of a file's messages (what normalize.peel left of its lines), as a
    regex, or None.  peel is normalize.peel: the learned prefix ends where a known prefix kind starts (a
    launcher's rank label behind a viewer's column stays a rank label)."""

    def known(text: str) -> bool:
        return bool(peel(text).kinds)

    lines = [m for m in messages if m.strip()]
    if len(lines) < MIN_LINES:
        return None
    need = max(MIN_LINES, SHARE * len(lines))
    # the first field alone decides most files (its shapes differ: no prefix), before any line is split further
    first = Counter(_shape(m.split(None, 1)[0]) for m in lines if not m[:1].isspace())
    if not first or first.most_common(1)[0][1] < need:
        return None
    fields = [_fields(m) for m in lines]
    shapes = [[_shape(t) for t, _ in f] for f in fields]
    # the longest run of leading fields that nine in ten lines share (a shorter run is shared at least as widely)
    k, shape = 0, ()
    while k < MAX_FIELDS:
        common = Counter(tuple(s[:k + 1]) for s in shapes if len(s) > k).most_common(1)
        if not common or common[0][1] < need:
            break
        k, shape = k + 1, common[0][0]
    if k == 0:
        return None
    if k == MAX_FIELDS:
        return None  # the lines agree as far as they are read: one message repeated (every rank's timeout)
    group = [f for f, s in zip(fields, shapes) if tuple(s[:k]) == shape]
    k = next((j for j, (t, _) in enumerate(group[0][:k]) if NOT_A_COLUMN.search(t)), k)
    # end before the first field where a known prefix starts (in most of the lines)
    before_known = False
    for j in range(k):
        rests = ["".join(t + s for t, s in f[j:]) for f in group[:200]]
        if sum(map(known, rests)) * 2 > len(rests):
            k, before_known = j, True
            break
    if k == 0:
        return None
    if not before_known and all(_WORDS.match(t) for t, _ in group[0][:k]):
        return None  # plain words (`srun: error: …`): a message that many lines start with, not a column
    # between fields any blanks; after the last, the fewest a line has (the rest is the message's indent)
    last = min((f[k - 1][1] for f in group), key=len)
    rx = re.compile(r"[ \t]+".join(_field_rx(t) for t, _ in group[0][:k]) + re.escape(last))
    return rx if _reveals(rx, lines, peel) else None


def _reveals(rx: re.Pattern, lines: list[str], peel) -> bool:
    """Whether taking the prefix off shows a rank label, a traceback line or a launcher summary's field somewhere:
    NCCL's own columns (`host:pid:tid [0] NCCL INFO`) show none, and stay."""
    for line in lines:
        m = rx.match(line)
        if m is None:
            continue
        n = peel(line[m.end():])
        if (n.rank, n.local_rank, n.task) != (None, None, None) or any(r.match(n.message) for r in _REVEALS):
            return True
    return False
