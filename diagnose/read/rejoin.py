"""Logical lines of a pasted log: a terminal's hard wraps rejoined, a double-spaced paste closed up.

A log copied out of a terminal or tmux breaks every line longer than the window at its width W, so one
traceback line becomes several and no pattern sees it whole; a log pasted through some editors and web
forms gets a blank line after every line, which ends tracebacks and records early.  Both happen to
pasted logs, which are small: this runs on whole files below the scan's small-file size, after they
are split into lines.  Rows keep consecutive (logical) line numbers, so tracebacks still read as runs of
adjacent lines; the source keeps each logical line's physical number (`Source.line_map`) and the
pipeline maps evidence back to it, so `file:line` points at the line in the file.

A file counts as wrapped only on evidence of a wrap: at least two different lines exactly W characters
long (one, at a usual terminal width), none longer, most of the lines near W exactly W, and lines at W
that break inside a word or path and not at a border (a wrap cuts anywhere; a fixed-width table or
banner ends in its border, a redrawn progress bar starts its next row as it started this one).
"""
from __future__ import annotations

import re
from dataclasses import fields, is_dataclass

import polars as pl

from diagnose.model import Evidence, Source

MIN_WIDTH = 50  # narrower "wraps" are indented columns or tables, not a terminal
_TERMINAL_WIDTHS = [80, 100, 120, 132, 160, 200]  # default and common window widths
_BORDER = set("|│║┃=*-#+─━═>") | {"╮", "╯", "╗", "╝", "┐", "┘"}
# a line that starts a new record is never the rest of a wrapped one (a line exactly W long that
# was not wrapped is followed by the next line as it is)
_STARTS_RECORD = re.compile(
    r"\s*(?:Traceback \(most|File \"|\[?(?:rank|default)\d+\]|\d{4}-\d\d-\d\d[ T]|\[\d{4}-\d\d-\d\d|[EWIF]\d{4} \d\d:\d\d)"
)


def rejoin(df: pl.DataFrame, sources: dict[int, Source]) -> pl.DataFrame:
    """df (src, lineno, line) of whole small files, lineno from 1 per file → the same with wrapped lines
    joined and a double-spaced paste's added blank lines dropped, renumbered from 1; each changed source
    gets its `line_map`.  Files without either cost two vectorised passes and no Python per line."""
    line = pl.col("line")
    n = line.str.len_chars()
    stats = (
        df.lazy().group_by("src")
        .agg(rows=pl.len(), width=n.max(), at_width=(n == n.max()).sum(),
             blank=(line.str.strip_chars().str.len_chars() == 0).sum())
        .collect()
    )
    suspects = stats.filter(
        ((pl.col("width") >= MIN_WIDTH) & ((pl.col("at_width") >= 2) | pl.col("width").is_in(_TERMINAL_WIDTHS)))
        | ((pl.col("rows") >= 6) & (pl.col("blank") * 10 >= pl.col("rows") * 4))
    )
    if not suspects.height:
        return df
    changed: dict[int, pl.DataFrame] = {}
    for src in suspects.get_column("src").to_list():
        part = df.filter(pl.col("src") == src)
        lines = part.get_column("line").to_list()
        logical = _close_up(lines) if _double_spaced(lines) else None
        mapping = logical or [(i, ln) for i, ln in enumerate(lines)]
        w = _wrap_width([ln for _, ln in mapping])
        if w:
            mapping = _joined(mapping, w)
        elif logical is None:
            continue
        changed[src] = pl.DataFrame(
            {"lineno": pl.Series(range(1, len(mapping) + 1), dtype=part.schema["lineno"]),
             "line": [ln for _, ln in mapping]},
        ).with_columns(src=pl.lit(src, dtype=part.schema["src"])).select(part.columns)
        if src in sources:
            sources[src].line_map = [i + 1 for i, _ in mapping]
    if not changed:
        return df
    rest = df.filter(~pl.col("src").is_in(list(changed)))
    return pl.concat([rest, *changed.values()]).sort("src", "lineno", maintain_order=True)


def _blank(text: str) -> bool:
    return not text.strip()


def _double_spaced(lines: list[str]) -> bool:
    """Nearly every non-blank line is followed by a blank one."""
    followed = [_blank(b) for a, b in zip(lines, lines[1:]) if not _blank(a)]
    return len(followed) >= 5 and sum(followed) >= 0.9 * len(followed)


def _close_up(lines: list[str]) -> list[tuple[int, str]]:
    """A double-spaced paste's lines (index, text) without the added blanks: a run of r blank lines was
    (r - 1) // 2 blank lines in the log."""
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        if not _blank(lines[i]):
            out.append((i, lines[i]))
            i += 1
            continue
        j = i
        while j < len(lines) and _blank(lines[j]):
            j += 1
        out.extend((k, lines[k]) for k in range(i, i + (j - i - 1) // 2))
        i = j
    return out


def _wrap_width(lines: list[str]) -> int | None:
    """The width W the lines were wrapped at, if they were."""
    if not lines:
        return None
    width = max(len(ln) for ln in lines)
    if width < MIN_WIDTH:
        return None
    at = [i for i, ln in enumerate(lines[:-1]) if len(ln) == width]
    near = sum(1 for ln in lines if len(ln) >= 0.9 * width)
    if not at or len(at) * 4 < near:
        return None
    joinable = [i for i in at if _continues(lines[i], lines[i + 1])]
    # a wrap cuts anywhere, often inside a word or path; a fixed-width table or banner ends in its border
    in_token = [i for i in joinable if not lines[i][-1].isspace() and not lines[i + 1][:1].isspace()]
    if not in_token or all(lines[i][-1] in _BORDER for i in in_token):
        return None
    if len({lines[i] for i in at}) >= 2:
        return width if len(in_token) >= 2 and len(in_token) * 10 >= len(joinable) * 3 else None
    # one wrapped line alone: only at a terminal's usual width, where a line that long by chance is rare
    return width if width in _TERMINAL_WIDTHS and in_token else None


_DIGITS = str.maketrans("0123456789", "0000000000")


def _continues(line: str, nxt: str) -> bool:
    """`nxt` may be the rest of `line`: not blank, not the start of a record, and not begun as `line` was,
    numbers aside (a progress bar redrawn on the next row, the next record of a numbered or tagged run:
    `[80746] [rank0]:…` then `[80747] [rank4]:…`)."""
    return (bool(nxt.strip()) and not _STARTS_RECORD.match(nxt)
            and nxt[:8].translate(_DIGITS) != line[:8].translate(_DIGITS))


def _joined(mapping: list[tuple[int, str]], width: int) -> list[tuple[int, str]]:
    """Each line exactly `width` long joined with the line after it (a wrap can span many rows)."""
    out: list[tuple[int, str]] = []
    k = 0
    while k < len(mapping):
        start, text = mapping[k]
        piece = text
        while len(piece) == width and k + 1 < len(mapping) and _continues(piece, mapping[k + 1][1]):
            k += 1
            piece = mapping[k][1]
            text += piece
        out.append((start, text))
        k += 1
    return out


def to_physical(obj, sources: list[Source]) -> None:
    """Every Evidence reachable from `obj` (dataclasses, lists, dicts) re-pointed, in place, from its
    logical line to the physical line of its file, for the sources that were rejoined."""
    maps = {s.display: s.line_map for s in sources if s.line_map}
    if maps:
        _walk(obj, maps, set())


def _walk(obj, maps: dict[str, list[int]], seen: set[int]) -> None:
    if id(obj) in seen or obj is None or isinstance(obj, (str, int, float, bool)):
        return
    seen.add(id(obj))
    if isinstance(obj, Evidence):
        obj.line = _physical(maps.get(obj.file), obj.line)
    elif isinstance(obj, (list, tuple, set)):
        for v in obj:
            _walk(v, maps, seen)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, str):
                obj[k] = _ref(v, maps)  # a `file:line` kept as text (details.rank_from)
            else:
                _walk(v, maps, seen)
    elif is_dataclass(obj):
        for f in fields(obj):
            _walk(getattr(obj, f.name), maps, seen)


def _physical(m: list[int] | None, line: int) -> int:
    return m[line - 1] if m and 1 <= line <= len(m) else line


def _ref(text: str, maps: dict[str, list[int]]) -> str:
    file, _, line = text.rpartition(":")
    return f"{file}:{_physical(maps[file], int(line))}" if file in maps and line.isdigit() else text
