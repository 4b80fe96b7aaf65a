"""Which parts of a raw chunk can hold a line the scan keeps, found on the bytes before any line is split.

A chunk (whole lines, raw bytes) is cut into windows of about WINDOW bytes at line ends.  A window is
*hot* when it holds a byte the line splitter drops or rewrites (NUL, the unit separator), or when one
multi-pattern automaton finds in it any of what KeepPlan keeps a line for: a pattern's required
literal, a pattern regex without a literal, or a line shape (traceback, exception, launcher summary;
anchored at a line start).  Carriage returns start lines too (a redrawn progress bar: the splitter
keeps its last drawing, a line of its own here), and a chunk with non-ASCII bytes is matched as UTF-8,
its classes widened to a superset of the Unicode classes the line filter reads it with.  Each search
stops at its first hit and the next starts at the window after the hit's, so a chunk costs one pass at
automaton speed, a busy window a few bytes.

Hot windows are split into lines, each with the two lines after it (the neighbourhood of a traceback
line), the window before it and the chunk's last window: lines kept only for their timestamp (the
bulk of a busy log: glog headers, Megatron iterations) make no window hot, and those near what is kept
give the timeline its times.  Quiet stretches are counted (their newlines), never split.  Every line
KeepPlan.filter keeps for its own sake is kept; of the timestamp lines, those near them.

Engines: Hyperscan (the `hyperscan` wheel) when it imports and compiles the set; else polars' Rust
regex over the windows as one column (slower, same answer).  `MDIAG_ENGINE=polars` forces the latter.
"""
from __future__ import annotations

import bisect
import functools
import os
import re
from pathlib import Path

import polars as pl

from diagnose.read import grammar
from diagnose.cache import cache_file, write_atomic

WINDOW = 64 * 1024
DENSE = 0.6  # when this share of a chunk is hot, the whole chunk is split (joining spans costs more)


def _special(chunk: bytes, start: int = 0, end: int | None = None) -> bool:
    """Bytes the line splitter drops or rewrites so that a match could appear (NUL, unit separator)."""
    return chunk.find(b"\x00", start, end) >= 0 or chunk.find(b"\x1f", start, end) >= 0


def _engine_choice() -> str:
    return os.environ.get("MDIAG_ENGINE", "auto").lower()


class _Hyperscan:
    name = "hyperscan"
    # It reads a chunk as it is: a line start after a carriage return is one too, and the bytes the line
    # splitter drops or rewrites are matches of their own (no copy of the chunk, no pass for them).
    raw_bytes = True

    def __init__(self, exprs: list[tuple[str, bool]]):
        import hyperscan as hs

        exprs = [("(?:^|\r)" + rx[1:] if ml and rx.startswith("^") else rx, ml) for rx, ml in exprs]
        exprs += [(r"\x00", False), (r"\x1f", False)]
        self.hs = hs
        self.db = self._database(exprs, 0)
        # Text with non-ASCII bytes is matched as UTF-8 (in bytes, a bounded `[^"]{1,500}` would count a
        # character's bytes), each `\w`, `\d`, `\s` widened to any non-ASCII character too: a superset of
        # the Unicode classes polars' regex reads them with.  Not Hyperscan's Unicode classes: with them
        # the line shapes are too large to compile as written, and the prefiltering approximation it
        # falls back to matched every window of a log with a progress bar in it.  (Loaded here, before a
        # helper process forks: loaded later, in each process, it cost 30 MB more at the peak.)
        self.db_utf8 = self._database(exprs, hs.HS_FLAG_UTF8, widen=True)

    def _database(self, exprs: list[tuple[str, bool]], extra: int, widen: bool = False):
        hs = self.hs
        # (widened, keyed by the expressions as written and this module's code: widening costs more than loading)
        key = (exprs, _own_code()) if widen else exprs
        cache = cache_file("hs", hs.__version__, key, extra, suffix=".db")
        try:
            db = hs.loadb(cache.read_bytes(), hs.HS_MODE_BLOCK)
            db.scratch = hs.Scratch(db)
            return db
        except Exception:  # noqa: BLE001  (absent, stale or from another platform: compile)
            pass
        if widen:
            exprs = [(widen_classes(rx), ml) for rx, ml in exprs]
        db = hs.Database(mode=hs.HS_MODE_BLOCK)
        flags = [hs.HS_FLAG_ALLOWEMPTY | hs.HS_FLAG_SINGLEMATCH | (hs.HS_FLAG_MULTILINE if ml else 0)
                 | hs.HS_FLAG_PREFILTER | extra for _, ml in exprs]
        db.compile(expressions=[rx.encode() for rx, _ in exprs], ids=list(range(len(exprs))),
                   elements=len(exprs), flags=flags)
        write_atomic(cache, hs.dumpb(db))
        return db

    def hot(self, windows: list, unicode: bool) -> list[bool]:
        return [self.first_hit(w, unicode) is not None for w in windows]

    def first_hit(self, view, unicode: bool) -> int | None:
        """The end offset of the first match in view (Hyperscan reports matches in order of their
        ends), or None."""
        db, at = (self.db_utf8 if unicode else self.db), [None]

        def stop(_id, _start, end, *_a) -> bool:
            at[0] = end
            return True

        try:
            db.scan(view, match_event_handler=stop)
        except self.hs.ScanTerminated:
            pass
        return at[0]


@functools.lru_cache(maxsize=1)
def _own_code() -> bytes:
    return Path(__file__).read_bytes()


_NON_ASCII = r"[^\x00-\x7f]"


def widen_classes(rx: str) -> str:
    """rx as a superset of its Unicode reading in a non-Unicode UTF-8 automaton: `\\w`, `\\d` and `\\s` (alone,
    or in a class), and a negated class holding `\\W`, `\\D` or `\\S`, also match any non-ASCII character;
    word boundaries (`\\b`, `\\B`, which ASCII reads differently next to such a character) are dropped."""
    out, i = [], 0
    while i < len(rx):
        c = rx[i]
        if c == "\\":
            esc = rx[i:i + 2]
            if esc in ("\\b", "\\B"):
                i += 2
                continue
            out.append(f"(?:{esc}|{_NON_ASCII})" if esc in ("\\w", "\\d", "\\s") else esc)
            i += 2
            continue
        if c == "[":
            neg = rx[i + 1:i + 2] == "^"
            j = i + 1 + neg
            j += rx[j:j + 1] == "]"  # a `]` first in a class is a literal
            while j < len(rx) and rx[j] != "]":
                j += 2 if rx[j] == "\\" else 1
            cls = rx[i:j + 1]
            kinds = ("\\W", "\\D", "\\S") if neg else ("\\w", "\\d", "\\s")
            out.append(f"(?:{cls}|{_NON_ASCII})" if any(e in cls for e in kinds) else cls)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


class _Polars:
    name = "polars"

    def __init__(self, exprs: list[tuple[str, bool]]):
        self.rx = "|".join(f"(?m:{rx})" if ml else f"(?:{rx})" for rx, ml in exprs)

    def hot(self, windows: list, unicode: bool) -> list[bool]:
        col = pl.Series("w", [bytes(w) for w in windows], dtype=pl.Binary).cast(pl.String)
        return col.str.contains(self.rx).to_list()


class BlockFilter:
    """The hot spans of a chunk (see the module's text)."""

    def __init__(self, literals: list[str], regexes: list[str]):
        exprs = [(re.escape(x), False) for x in literals] + [(r, False) for r in regexes]
        exprs.append((grammar.KEEP_OTHER_OR_STRUCT_BYTES, True))
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
        # a progress bar redrawn with carriage returns: each drawing is matched as a line of its own
        # (the splitter keeps the last one; a match in it is then a match here, anchors included)
        raw = getattr(self.engine, "raw_bytes", False)
        text = chunk.replace(b"\r", b"\n") if not raw and b"\r" in chunk else chunk
        view, unicode, special = memoryview(text), not chunk.isascii(), not raw and _special(chunk)
        first_hit = getattr(self.engine, "first_hit", None)
        if first_hit is not None:
            hit = first_hit(view, unicode)
            if hit is None and not special:
                return []  # a quiet chunk: one pass of the automaton
        elif not special and not self.engine.hot([view], unicode)[0]:
            return []
        bounds, pos = [], 0
        while pos < n:
            end = chunk.find(b"\n", min(pos + WINDOW, n - 1))
            end = n if end < 0 else end
            bounds.append((pos, end))
            pos = end + 1
        hot = [special and _special(chunk, s, e) for s, e in bounds]
        if first_hit is None:
            todo = [i for i, h in enumerate(hot) if not h]
            for i, h in zip(todo, self.engine.hot([view[bounds[i][0]:bounds[i][1]] for i in todo], unicode)):
                hot[i] = h
        else:
            # One pass in all: each search runs to its first hit, whose window is hot; the windows before
            # it are quiet (a match inside one of them would have ended sooner), and the next search
            # starts at the window after.  A search costs its whole stretch however soon it hits, so it
            # spans one window after a hit and twice as many after each quiet stretch.  (Windows searched
            # one by one cost a second pass over a chunk.)
            starts = [s for s, _ in bounds]
            i, span = 0, 1
            while True:
                if hit is not None:
                    k = max(bisect.bisect_right(starts, starts[i] + hit - 1) - 1, i)
                    hot[k] = True
                    i, span = k + 1, 1
                if i >= len(bounds):
                    break
                j = min(i + span, len(bounds)) - 1
                hit = first_hit(view[starts[i]:bounds[j][1]], unicode)
                if hit is None:
                    i, span = j + 1, span * 2
        # the window before each hot one and the chunk's last window give the timeline its times
        # (the latest timestamp of each stream before a kept line, and each stream's latest)
        take = [h or (i + 1 < len(hot) and hot[i + 1]) for i, h in enumerate(hot)]
        take[-1] = True
        if sum(take) > DENSE * len(take):
            return None
        out: list[tuple[int, int]] = []
        for (s, e), h in zip(bounds, take):
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
