"""Literal strings a regex's every match must contain, read from its parse tree: the gate that lets
the scan run a pattern's regex only on the lines holding one of them."""
from __future__ import annotations

import re

try:  # Python's own regex parser and its opcodes (named so since 3.11)
    from re import _constants as C, _parser as sre  # noqa: N812
except ImportError:  # pragma: no cover  (Python 3.10)
    import sre_constants as C  # noqa: N812
    import sre_parse as sre


_EXPAND = 64  # a finite piece of a regex is spelled out when it has at most this many strings


def _finite(op, av) -> set[str] | None:
    """The strings one parsed regex node matches, when they are few (None: infinite, or too many)."""
    if op is C.LITERAL:
        return {chr(av)}
    if op is C.IN:
        chars: set[str] = set()
        for kind, val in av:
            if kind is C.LITERAL:
                chars.add(chr(val))
            elif kind is C.RANGE and val[1] - val[0] < 16:
                chars |= {chr(c) for c in range(val[0], val[1] + 1)}
            else:
                return None  # a negated or large class, or a category such as \s
        return chars if len(chars) <= 16 else None
    if op is C.SUBPATTERN and not (av[1] & 2):  # a group without a local (?i:…)
        return _finite_seq(av[3])
    if op is C.BRANCH:
        out: set[str] = set()
        for branch in av[1]:
            sub = _finite_seq(branch)
            if sub is None:
                return None
            out |= sub
        return out if len(out) <= _EXPAND else None
    if op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[1] is not C.MAXREPEAT and av[1] - av[0] <= 3:
        body = _finite_seq(av[2])
        if body is None:
            return None
        out, power = set(), {""}
        for k in range(av[1] + 1):
            if k >= av[0]:
                out |= power
            power = {a + b for a in power for b in body}
            if len(power) > _EXPAND:
                return None
        return out if len(out) <= _EXPAND else None
    return None


def _finite_seq(nodes) -> set[str] | None:
    out = {""}
    for op, av in nodes:
        piece = _finite(op, av)
        if piece is None:
            return None
        out = {a + b for a in out for b in piece}
        if len(out) > _EXPAND:
            return None
    return out


def needed_literals(rx: str, avoid: frozenset[str] | None = None) -> set[str] | None:
    """Literal strings one of which every match of the regex rx contains (see _required), or None: none known,
    a case-insensitive regex, or a construct Python's parser lacks (the `regex` module's own)."""
    try:
        tree = sre.parse(rx)
        return None if tree.state.flags & re.IGNORECASE else _required(list(tree), avoid)
    except Exception:  # noqa: BLE001  (be safe: no gate)
        return None


def _required(nodes, avoid: frozenset[str] | None = None) -> set[str] | None:
    """Literal strings one of which every match of the parsed regex `nodes` contains (None: unknown).

    Consecutive finite pieces are spelled out (`grad norm: (?:nan|inf)` → both full strings), so a
    gate literal is as specific as the regex allows and common log text does not open the gate."""
    best: set[str] | None = None
    run: set[str] = {""}

    def consider(cands):
        nonlocal best
        if cands and all(cands) and (best is None or gate_rank(cands, avoid) > gate_rank(best, avoid)):
            best = cands

    def flush():
        nonlocal run
        consider(run)
        run = {""}

    for op, av in nodes:
        piece = _finite(op, av)
        if piece is not None and len(run) * len(piece) <= _EXPAND:
            run = {a + b for a in run for b in piece}
            continue
        flush()
        if piece is not None:  # finite but too many together with the run before it: start afresh
            run = piece
            continue
        if op is C.SUBPATTERN and not (av[1] & 2):
            consider(_required(av[3], avoid))
        elif op is C.BRANCH:
            subs = [_required(b, avoid) for b in av[1]]
            if all(subs):
                consider(set().union(*subs))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] >= 1:
            consider(_required(av[2], avoid))
    flush()
    return best


# words that a healthy training log prints on every progress line: a gate on them opens on every line
# (Megatron's prints `number of nan iterations:` on every one; `inf` is in `info`)
_COMMON = frozenset({"loss", "step", "epoch", "iteration", "iter", "rank", "time", "grad", "batch", "info", "lr", "nan", "inf",
                     "nccl info"})  # (every line of NCCL_DEBUG=INFO)


def gate_rank(cands: set[str], avoid: frozenset[str] | None = None) -> int:
    """How good a gate a candidate set is: its shortest literal's length, or 0 when one of its literals
    is a word every progress line holds (`loss`; `avoid`, default _COMMON), so that any rarer literal of
    the regex is taken."""
    avoid = _COMMON if avoid is None else avoid
    if any(c.strip(" '\":=").lower() in avoid for c in cands):
        return 0
    return min(map(len, cands))


def _minimal(literals: set[str]) -> set[str]:
    """The literals that hold no other one of the set (a line holds one of these iff it holds one of all)."""
    out: list[str] = []
    for lit in sorted(literals, key=len):
        if not any(k in lit for k in out):
            out.append(lit)
    return set(out)


def _alternation(literals: set[str]) -> str:
    return "|".join(re.escape(x) for x in sorted(literals, key=lambda x: (-len(x), x)))


_MESSAGE_START = r"(?:^|[\s:\]>|)]|\x1b\[[0-9;]*m)"


def _rewrite(rx: str, outside) -> str:
    """rx with each character or escape outside a character class replaced by what `outside(rx, i)` gives: None
    keeps it, else (text, where to go on)."""
    out, i, in_class = [], 0, False
    while i < len(rx):
        c = rx[i]
        if c == "\\":
            got = None if in_class else outside(rx, i)
            out.append(rx[i:i + 2] if got is None else got[0])
            i = i + 2 if got is None else got[1]
            continue
        if in_class:
            in_class = c != "]" or (out and out[-1] in ("[", "[^"))
        elif c == "[":
            in_class = True
            if rx[i + 1:i + 2] == "^":
                out.append("[^")
                i += 2
                continue
        elif (got := outside(rx, i)) is not None:
            out.append(got[0])
            i = got[1]
            continue
        out.append(c)
        i += 1
    return "".join(out)


_COLOUR = r"\x1b\[[0-9;]*m"


def loosen_colours(rx: str) -> str:
    """rx with each word boundary and line end also met at a terminal colour's escape (`\x1b[36mSegmentation fault:
    11\x1b[0m`): the scan tests raw lines, where a colour's `m` runs into the word after it; the pattern's own regex
    reads the message later, its colours taken out."""
    def at_colour(s: str, i: int):
        if s.startswith("\\b", i):
            return f"(?:\\b|{_COLOUR})", i + 2
        if s[i] == "$":
            return f"(?:{_COLOUR}|\\s)*$", i + 1
        return None

    return _rewrite(rx, at_colour)


def loosen_anchors(rx: str) -> str:
    """rx with each `^` (outside a character class) also matching after a space, colon, bracket or colour.

    Patterns run on a line's message, its wrapper prefixes peeled (`node03: `, `Dec 05 12:00:00 `), but
    the scan tests the raw line, where the message does not start the line: a superset is what the
    scan needs, and the pattern's own regex decides on the message later."""
    return _rewrite(rx, lambda s, i: (_MESSAGE_START, i + 1) if s[i] == "^" else None)


_LONG_REPEAT = 50


def loosen_repeats(rx: str) -> str:
    """rx with each bounded repeat of _LONG_REPEAT or more (`.{0,400}`, `(?:…){1,60}`) left unbounded above
    (`.*`, `(?:…){1,}`), outside character classes.

    A superset, as the scan needs (the pattern's own regex decides later): Rust's regex compiles a bounded
    repeat into that many copies of its atom, which made compiling the pattern groups the bulk of
    filtering a chunk's few hot lines."""
    def unbound(s: str, i: int):
        if s[i] != "{" or not (m := _BOUNDED.match(s, i)) or int(m["hi"]) < _LONG_REPEAT:
            return None
        lo = int(m["lo"] or 0)
        return ("*" if lo == 0 else f"{{{lo},}}"), m.end()

    return _rewrite(rx, unbound)


_BOUNDED = re.compile(r"\{(?P<lo>\d*),(?P<hi>\d+)\}")
