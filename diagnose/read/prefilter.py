"""Which parts of a raw chunk can hold a line the scan keeps, found on the bytes before any line is split.

A chunk (whole lines, raw bytes) is cut into windows of about WINDOW bytes at line ends.  A window is
*hot* when it holds one byte the line splitter rewrites (CR, NUL, the unit separator) or a non-ASCII
byte (where Unicode classes and byte classes differ), or when one multi-pattern automaton finds in it
any of what KeepPlan's first test over all lines looks for: a pattern's required literal, the
progress-line regex, a pattern regex without a literal, or a line shape (timestamp, traceback,
launcher summary; anchored at a line start).  The search stops at the first hit, so a busy window
costs a few bytes and a quiet one one pass at automaton speed.  Only hot windows, each with the two
lines after it (the neighbourhood of a traceback line), are split into lines; quiet stretches are
counted (their newlines), never split.  That is a superset of what KeepPlan.filter keeps, so the lines
kept are the same.

Engines: Hyperscan (the `hyperscan` wheel) when it imports and compiles the set; else polars' Rust
regex over the windows as one column (slower, same answer).  `MDIAG_ENGINE=polars` forces the latter.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import polars as pl

from diagnose.read import grammar

WINDOW = 64 * 1024
DENSE = 0.6  # when this share of a chunk is hot, the whole chunk is split (joining spans costs more)


def _special(data: bytes) -> bool:
    """Bytes the line splitter rewrites (CR, NUL, unit separator), or any non-ASCII byte."""
    return not data.isascii() or b"\r" in data or b"\x00" in data or b"\x1f" in data


def _engine_choice() -> str:
    return os.environ.get("MDIAG_ENGINE", "auto").lower()


class _Hyperscan:
    name = "hyperscan"

    def __init__(self, exprs: list[tuple[str, bool]]):
        import hyperscan as hs

        self.hs = hs
        key = hashlib.sha256(repr((hs.__version__, exprs)).encode()).hexdigest()[:24]
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mdiag" / f"hs-{key}.db"
        db = None
        try:
            db = hs.loadb(cache.read_bytes(), hs.HS_MODE_BLOCK)
        except Exception:  # noqa: BLE001  (absent, stale or from another platform: compile)
            db = None
        if db is None:
            db = hs.Database(mode=hs.HS_MODE_BLOCK)
            flags = [hs.HS_FLAG_ALLOWEMPTY | hs.HS_FLAG_SINGLEMATCH | (hs.HS_FLAG_MULTILINE if ml else 0)
                     | hs.HS_FLAG_PREFILTER for _, ml in exprs]
            db.compile(expressions=[rx.encode() for rx, _ in exprs], ids=list(range(len(exprs))),
                       elements=len(exprs), flags=flags)
            try:
                cache.parent.mkdir(parents=True, exist_ok=True)
                tmp = cache.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_bytes(hs.dumpb(db))
                os.replace(tmp, cache)
            except OSError:
                pass
        else:
            db.scratch = hs.Scratch(db)
        self.db = db

    def hot(self, windows: list[bytes]) -> list[bool]:
        out = []
        found = [False]

        def stop(*_a) -> bool:
            found[0] = True
            return True  # stop at the first hit

        for w in windows:
            found[0] = False
            try:
                self.db.scan(w, match_event_handler=stop)
            except self.hs.ScanTerminated:
                found[0] = True
            out.append(found[0])
        return out


class _Polars:
    name = "polars"

    def __init__(self, exprs: list[tuple[str, bool]]):
        self.rx = "|".join(f"(?m:{rx})" if ml else f"(?:{rx})" for rx, ml in exprs)

    def hot(self, windows: list[bytes]) -> list[bool]:
        col = pl.Series("w", [bytes(w) for w in windows], dtype=pl.Binary).cast(pl.String)
        return col.str.contains(self.rx).to_list()


class BlockFilter:
    """The hot spans of a chunk (see the module's text)."""

    def __init__(self, literals: list[str], regexes: list[str]):
        exprs = [(re.escape(x), False) for x in literals] + [(r, False) for r in regexes]
        exprs.append((grammar.KEEP_ANCHORED_OR_STRUCT, True))
        self.engine = None
        choice = _engine_choice()
        if choice in ("auto", "hyperscan"):
            try:
                self.engine = _Hyperscan(exprs)
            except Exception:  # noqa: BLE001  (no wheel for this platform, or a regex it refuses)
                if choice == "hyperscan":
                    raise
        if self.engine is None:
            self.engine = _Polars(exprs)

    def spans(self, chunk: bytes) -> list[tuple[int, int]] | None:
        """Byte ranges [start, end) of whole lines to split (end at a newline or the chunk's end), in
        order and apart; None when the whole chunk should be split."""
        n = len(chunk)
        if n <= WINDOW:
            return None
        view = memoryview(chunk)
        if not _special(chunk) and not self.engine.hot([view])[0]:
            return []  # a quiet chunk: one pass of the automaton
        bounds, pos = [], 0
        while pos < n:
            end = chunk.find(b"\n", min(pos + WINDOW, n - 1))
            end = n if end < 0 else end
            bounds.append((pos, end))
            pos = end + 1
        hot = [_special(chunk[s:e]) for s, e in bounds]
        todo = [i for i, h in enumerate(hot) if not h]
        for i, h in zip(todo, self.engine.hot([view[bounds[i][0]:bounds[i][1]] for i in todo])):
            hot[i] = h
        nhot = sum(hot)
        if nhot > DENSE * len(hot):
            return None
        out: list[tuple[int, int]] = []
        for (s, e), h in zip(bounds, hot):
            if not h:
                continue
            for _ in range(2):  # the two lines after the window
                if e >= n:
                    break
                nxt = chunk.find(b"\n", e + 1)
                e = n if nxt < 0 else nxt
            if out and s <= out[-1][1] + 1:
                out[-1] = (out[-1][0], max(out[-1][1], e))
            else:
                out.append((s, e))
        return out
