"""Normalization: each kept line becomes its source facts (rank, local rank, task, host, pid, time)
and the bare message the process printed.

Launchers, wrappers, loggers and log viewers stack prefixes in any order (`[default0]:[rank12]:`,
`10.0.0.1: [2024-05-01 10:00:00,123] [INFO] `, `(RayTrainWorker pid=1, ip=…) `).  The prefix kinds
are data (``patterns/prefixes.toml``, each with samples); `peel` strips any stack of them, so a new
wrapper is one entry, not a code change.  Terminal colours are dropped first, and a rich-boxed
traceback (`╭─ Traceback ─╮`, `│ /x.py:12 in fn │`) is rewritten in Python's own layout so the
traceback grammar reads it.  This runs on the lines the scan kept, so clean lines cost nothing.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import regex

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# a launcher's rank label (`[rank3]:`, `[default0]:`, srun's `3: `, mpirun's `[1,3]<stderr>:`): left out of
# the line as reported; every other prefix (a host, a logger's columns) is part of it
_RANK_LABELS = frozenset({"torch_rank", "tee_local", "srun_label", "mpirun_tag"})
MAX_PEEL = 12  # prefixes stacked on one line, at most (a bound on the work per line)
FACTS = ("rank", "local_rank", "task", "host", "pid", "time")
_INT_FACTS = ("rank", "local_rank", "task", "pid")
_MAX_INT = 2**31 - 1  # a rank or pid beyond this is no rank: null, never an overflow

# CSI / OSC escape sequences and lone ESCs (colours, cursor moves, titles)
ANSI = regex.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_BOX_HEADER = regex.compile(r"^\s*╭─+ (Traceback \(most recent call last\)) ─+╮\s*$")
_BOX_FRAME = regex.compile(r"^\s*│ (?P<file>\S.*?):(?P<line>\d+) in (?P<func>\S+?)\s*│\s*$")
_BOX_LINE = regex.compile(r"^\s*│(?P<body>.*?)│\s*$")
_BOX_END = regex.compile(r"^\s*╰─+╯\s*$")


@dataclass(frozen=True)
class PrefixKind:
    id: str
    regex: str
    identity: bool = True
    samples: tuple = ()
    near_misses: tuple = ()
    faulty: bool = False  # (text_rank) the text names another rank as the one that failed, not its writer

    @property
    def compiled(self):
        return _compile(self.regex)


@dataclass
class Normalized:
    """One line's facts and message.  `key` is the identity part of its prefix (whose output it is)."""

    message: str
    rank: int | None = None
    local_rank: int | None = None
    task: int | None = None
    host: str | None = None
    pid: int | None = None
    time: str | None = None
    key: str = ""
    kinds: list[str] = field(default_factory=list)
    # the prefixes from the first one that is not a launcher's rank label (a host; a logger's columns,
    # `[E0916 17:44:14.56 ProcessGroupNCCL.cpp:1515] `): with the message, the line as the log prints it
    lead: str = ""
    end: int = 0  # where the prefixes end in the line (ANSI colours taken out)


@lru_cache(maxsize=None)
def _compile(rx: str):
    return regex.compile(rx)


def prefix_file() -> Path:
    from diagnose.patterns.library import PREFIX_FILE, builtin_dir

    return builtin_dir() / PREFIX_FILE


@lru_cache(maxsize=4)
def load(path: Path | None = None, table: str = "prefix") -> tuple[PrefixKind, ...]:
    """The prefix kinds (table `prefix`) or the ranks named in text (table `text_rank`)."""
    path = path or prefix_file()
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    kinds = []
    for entry in data.get(table, []):
        kinds.append(PrefixKind(
            id=entry["id"], regex=entry["regex"], identity=bool(entry.get("identity", True)),
            samples=tuple(entry.get("samples", ())), near_misses=tuple(entry.get("near_misses", ())),
            faulty=bool(entry.get("faulty", False)),
        ))
    for k in kinds:
        k.compiled  # noqa: B018  (a broken regex fails at load, naming nothing else)
    return tuple(kinds)


def peel(line: str, kinds: tuple[PrefixKind, ...] | None = None) -> Normalized:
    """Strip any stack of known prefixes off `line`; the first value of each fact wins, except that a
    rank inside another prefix (`[default0]:[rank12]:`) is kept beside the outer one's local rank."""
    kinds = kinds if kinds is not None else load()
    compiled, gate = _compiled(kinds)
    if "\x1b" in line:
        line = ANSI.sub("", line)
    out = Normalized(message=line)
    pos, key, labels = 0, [], 0
    for _ in range(MAX_PEEL):
        # one match of all kinds at once says which kind (if any) starts here; most lines hold 1-3
        # prefixes, and trying ~20 regexes one by one at each position cost 10 µs a line
        g = gate.match(line, pos)
        if g is None:
            break
        first = int(g.lastgroup[1:]) if g.end() > pos else 0  # an empty match: try the kinds in order
        for kind, rx in compiled[first:]:
            m = rx.match(line, pos)
            if m is None or m.end() == pos:
                continue
            for name, val in m.groupdict().items():
                if val is None:
                    continue
                name = name.partition("__")[0]
                if name not in FACTS or getattr(out, name) is not None:
                    continue
                if name in _INT_FACTS:
                    num = int(val)
                    val = num if num <= _MAX_INT else None
                setattr(out, name, val)
            if kind.identity:
                key.append(line[pos:m.end()].replace(" ", ""))
                if labels == pos and kind.id in _RANK_LABELS:
                    labels = m.end()
            out.kinds.append(kind.id)
            pos = m.end()
            break
        else:
            break
    out.message = _unbox(line[pos:]) if pos else _unbox(line)
    out.key = "".join(key)
    out.lead = line[labels:pos]
    out.end = pos
    if out.rank is None and out.local_rank is None and _LABEL_HINT.search(line, pos):
        if (cut := _rank_label_after_columns(out.message, compiled)) is not None:
            return peel_behind(out, cut, kinds)
    return out


# a launcher's rank label behind columns no kind knows (`[stderr] 2024-11-20 14:37:16 [rank3]: …`): the label is
# looked for after a few leading fields that read as columns, not as a message
_LABEL_HINT = re.compile(r"\[(?:rank|default)\d|\[rank=\d|\]<std(?:err|out)>:|\((?:VllmWorker rank=|Worker_TP)\d")
_LABEL_KINDS = ("torch_rank", "tee_local", "mpirun_tag", "vllm_worker", "determined_rank")
_COLUMN = re.compile(r"[^\s\"'(]+[ \t]+")
# a field that reads as a message, not a column (read/learned_prefix.py ends a learned prefix before one too)
NOT_A_COLUMN = re.compile(r"(?:Error|Exception|Warning)\b|^(?:Traceback|File)$")
MAX_COLUMNS = 6


def _rank_label_after_columns(message: str, compiled) -> int | None:
    """Where a launcher's rank label starts in message, after at most MAX_COLUMNS fields that read as columns
    (no quote, parenthesis or exception name in them), or None."""
    labels = [rx for kind, rx in compiled if kind.id in _LABEL_KINDS]
    pos = 0
    for _ in range(MAX_COLUMNS):
        m = _COLUMN.match(message, pos)
        if m is None or NOT_A_COLUMN.search(m.group(0).strip()):
            return None
        pos = m.end()
        if any(rx.match(message, pos) for rx in labels):
            return pos
    return None


def peel_behind(n: Normalized, cut: int, kinds: tuple[PrefixKind, ...] | None = None) -> Normalized:
    """n with the first `cut` characters of its message taken as a prefix that names nothing (one that
    read/learned_prefix.py learned from the file), and the known prefixes behind it peeled: their facts
    fill those n lacks."""
    rest = n.message[cut:]
    inner = peel(rest, kinds)
    for name in FACTS:
        if getattr(n, name) is None:
            setattr(n, name, getattr(inner, name))
    n.kinds = [*n.kinds, "learned", *inner.kinds]
    n.key += inner.key
    n.lead += n.message[:cut] + rest[:inner.end]
    n.end += cut + inner.end
    n.message = inner.message
    return n


_COMPILED: dict[int, tuple] = {}


def _compiled(kinds: tuple[PrefixKind, ...]) -> list:
    """(kind, compiled regex) pairs and the gate over all of them, compiled with the standard `re` (1.7× faster than `regex` on these
    short anchored matches; they are built in and bounded).  A fact named twice in one regex (two
    alternatives that both give `rank`) is renamed `rank__2`, which peel reads as `rank`."""
    got = _COMPILED.get(id(kinds))
    if got is None or got[0] is not kinds:
        pairs = [(k, re.compile(_unique_names(k.regex))) for k in kinds]
        # the gate: every kind as one alternation, each its own group (`k7` is kind 7), inner
        # names dropped; alternatives are tried in order, as peel tries the kinds
        gate = re.compile(_one_of(kinds, tagged=True))
        got = _COMPILED[id(kinds)] = (kinds, (pairs, gate))
    return got[1]


_NAMED = re.compile(r"\(\?P<\w+>")


def _one_of(kinds: tuple[PrefixKind, ...], tagged: bool = False) -> str:
    """All kinds' regexes as one alternation, their group names dropped; `tagged`: kind i in group `k<i>`."""
    return "|".join(f"(?P<k{i}>{_NAMED.sub('(?:', k.regex)})" if tagged else f"(?:{_NAMED.sub('(?:', k.regex)})"
                    for i, k in enumerate(kinds)) or "(?!)"


def _unique_names(rx: str) -> str:
    seen: dict[str, int] = {}

    def rename(m):
        n = m.group(1)
        seen[n] = seen.get(n, 0) + 1
        return m.group(0) if seen[n] == 1 else f"(?P<{n}__{seen[n]}>"

    return re.sub(r"\(\?P<(\w+)>", rename, rx)


def _unbox(msg: str) -> str:
    """A rich-boxed traceback line in Python's layout (header, frame, source line, box end)."""
    if not msg or msg.lstrip()[:1] not in ("╭", "│", "╰"):
        return msg
    if m := _BOX_HEADER.match(msg):
        return m.group(1) + ":"
    if m := _BOX_FRAME.match(msg):
        return f'  File "{m["file"]}", line {m["line"]}, in {m["func"]}'
    if _BOX_END.match(msg):
        return ""
    if m := _BOX_LINE.match(msg):
        return "    " + m["body"].strip() if m["body"].strip() else ""
    return msg


_GATES: dict[int, tuple] = {}


def _text_gate(kinds: tuple[PrefixKind, ...]):
    """All text-rank kinds as one regex, and the literals one of which each of their matches holds (None:
    a kind has none): most messages name no rank, and a test of those literals says so (a flood's 50,000
    lines spent a second in the regex alone)."""
    got = _GATES.get(id(kinds))
    if got is None or got[0] is not kinds:
        got = _GATES[id(kinds)] = (kinds, (regex.compile(_one_of(kinds)), _needed_literals(kinds)))
    return got[1]


def _needed_literals(kinds: tuple[PrefixKind, ...]) -> tuple[str, ...] | None:
    """Literals one of which every match of every kind holds (scan_literals' analysis of the regexes), or None."""
    from diagnose.read.scan_literals import _minimal, needed_literals

    found: set[str] = set()
    for k in kinds:
        # (no word is too common here: `rank` is what these kinds are about)
        req = needed_literals(_NAMED.sub("(?:", k.regex), frozenset())
        if not req or min(map(len, req)) < 3:
            return None
        found |= req
    return tuple(sorted(_minimal(found)))


_FAULTY: dict[int, tuple] = {}


def _faulty_kinds(kinds: tuple[PrefixKind, ...]) -> tuple[PrefixKind, ...]:
    got = _FAULTY.get(id(kinds))
    if got is None or got[0] is not kinds:
        got = _FAULTY[id(kinds)] = (kinds, tuple(k for k in kinds if k.faulty))
    return got[1]


def rank_in_text(message: str, faulty: bool = False) -> dict:
    """Facts a message states in its text (`mpirun noticed that process rank 7 … on node n3`), or {};
    faulty: only a rank the text names as the one that failed, another than the line's writer."""
    return dict((_said if len(message) <= _SHORT else _says)(message, faulty))


def _says(message: str, faulty: bool) -> tuple:
    kinds = load(table="text_rank")
    if faulty:  # asked of every line: a gate of those kinds alone, which almost never matches
        kinds = _faulty_kinds(kinds)
    return tuple(_rank_in_text(message, kinds).items())


_SHORT = 512  # longer messages are not kept in the cache (a library user's process keeps it)
_said = lru_cache(maxsize=16384)(_says)  # a flood repeats its messages from every rank


def _rank_in_text(message: str, kinds: tuple[PrefixKind, ...]) -> dict:
    if not kinds:
        return {}
    gate, needed = _text_gate(kinds)
    if (needed is not None and not any(x in message for x in needed)) or not gate.search(message, timeout=0.5):
        return {}
    for kind in kinds:
        if m := kind.compiled.search(message, timeout=0.5):
            facts = {}
            for k, v in m.groupdict().items():  # (`rank__2`: a fact named in a second alternative)
                if v is not None and k.partition("__")[0] in FACTS:
                    facts.setdefault(k.partition("__")[0], v)
            for k in _INT_FACTS:
                if k in facts:
                    facts[k] = int(facts[k]) if int(facts[k]) <= _MAX_INT else None
            return {k: v for k, v in facts.items() if v is not None}
    return {}
