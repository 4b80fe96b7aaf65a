"""Read every line of every source once, in bounded chunks, and keep only the few that matter.

All per-line work is polars expressions (Rust regex, no Python loop over lines): one unanchored
alternation of the failure patterns' regexes, one anchored regex for structure (tracebacks,
timestamps, launcher summaries), and the two lines after each traceback-shaped line.
"""
from __future__ import annotations

import errno
import io
import queue
import threading
import os
import re
import stat
import time
import zlib
from collections.abc import Callable, Iterator

import polars as pl

from diagnose.read import grammar
from diagnose.read.caps import Summariser
from diagnose.read.prefilter import BlockFilter
from diagnose.model import Source

CHUNK_BYTES = 16 * 1024 * 1024
BATCH_LINES = 150_000  # filter at least this many lines at once: per-call overhead stays small
COMPACT_ROWS = 100_000
# Rows per piece of work in polars' streaming engine (its default is 100,000): about 1.5 MB of log, so
# each test over all lines reads a piece the previous test left in the CPU cache (5-9% less time).
MORSEL_ROWS = 8192
SMALL_FILE = 1024 * 1024  # files below this are split in batches, not one by one
MAX_LINE = 256 * 1024  # a longer line keeps its first MAX_LINE bytes (memory and regex time stay bounded)
LINE_CUT = " …[mdiag: line cut at 256 KiB]"


class Deadline:
    """A wall-clock limit for a run (`--timeout`), checked before each chunk and each file.

    When it fires, what was not read is said in the scan's warnings and `fired` stays True."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.fired = False
        self.unread: list[str] = []  # files not opened at all

    def summary(self) -> str:
        head = f"--timeout {self.seconds:g} s reached: the diagnosis is partial"
        if not self.unread:
            return head
        shown = ", ".join(self.unread[:5]) + (f" and {len(self.unread) - 5} more" if len(self.unread) > 5 else "")
        return f"{head}; {len(self.unread)} file(s) not read: {shown}"

    def expired(self) -> bool:
        if not self.fired and time.monotonic() >= self.at:
            self.fired = True
        return self.fired


class NotRegularFile(OSError):
    pass


def _open(src: Source):
    """The file as a binary stream, read only up to the size it had when opened (a file that is still
    being written can't keep the scan going forever).  FIFOs and devices are refused without blocking."""
    fd = os.open(src.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file")
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return _Bounded(fh, st.st_size)


class _Bounded:
    """A binary file cut at `limit` bytes."""

    def __init__(self, fh, limit: int):
        self.fh, self.left = fh, limit

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        if n <= 0:
            return b""
        data = self.fh.read(n)
        self.left -= len(data)
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()


def _blocks(src: Source, warnings: list[str], chunk_bytes: int) -> Iterator[bytes]:
    """Raw blocks of the file, gunzipped when it ends in .gz.  A truncated or corrupt .gz yields what
    decompressed before the damage, then a warning; concatenated gzip members are all read."""
    gz = src.path.name.endswith(".gz")
    with _open(src) as fh:
        if not gz:
            while block := fh.read(chunk_bytes):
                yield block
            return
        dec, started = zlib.decompressobj(wbits=31), False
        while True:
            comp = fh.read(min(chunk_bytes, 4 * 1024 * 1024))
            if not comp:
                if started and not dec.eof:
                    warnings.append(f"{src.display}: compressed file ended early (truncated .gz), read up to the cut")
                return
            while comp:
                try:
                    out = dec.decompress(comp, chunk_bytes)
                except zlib.error as exc:
                    warnings.append(f"{src.display}: corrupt .gz ({exc}), read up to the damage")
                    return
                started = True
                if out:
                    yield out
                if dec.eof:  # next gzip member, if any
                    comp = dec.unused_data
                    if comp and not comp.lstrip(b"\0"):
                        comp = b""  # zero padding after the last member
                    dec = zlib.decompressobj(wbits=31)
                    started = bool(comp)
                else:
                    comp = dec.unconsumed_tail


def _last_lone_cr(seg: bytes) -> int:
    """Index of the last carriage return in seg that is not half of a CRLF (a final CR may be), else -1."""
    return seg.rfind(b"\r", 0, len(seg) - 1) if seg.endswith(b"\r") else seg.rfind(b"\r")


def read_chunks(src: Source, warnings: list[str], chunk_bytes: int = CHUNK_BYTES,
                deadline: Deadline | None = None) -> Iterator[bytes]:
    """Raw chunks that end on a line boundary (split_lines turns each into lines).  A line longer than
    MAX_LINE is cut while it is read, keeping what a progress bar printed after its last carriage
    return, so memory stays bounded.  With a deadline, stops between chunks when it has passed and
    says in `warnings` what was not read."""
    if deadline is not None and deadline.expired():
        deadline.unread.append(src.display)
        return
    tail, dropping, done, cr_before = b"", False, 0, False
    try:
        for block in _blocks(src, warnings, chunk_bytes):
            done += len(block)
            if dropping:  # inside an overlong line: skip to its end (or to a carriage return that restarts it)
                nl = block.find(b"\n")
                seg = block if nl < 0 else block[:nl]
                r = _last_lone_cr(seg)
                if r >= 0 or (cr_before and nl != 0):  # a lone \r here, or ending the block before
                    tail, dropping = _cap(seg[r + 1 :])
                cr_before = nl < 0 and seg.endswith(b"\r")
                if nl < 0:
                    continue
                block = block[nl:]
            cut = block.rfind(b"\n")
            if cut < 0:
                tail, dropping = _cap(tail + block)
            else:  # one copy of the block, not two (joining, then cutting)
                out = b"".join((tail, memoryview(block)[:cut]))
                tail, dropping = _cap(block[cut + 1 :])
                yield out
            if deadline is not None and deadline.expired():
                warnings.append(f"{src.display}: read stopped after {done:,} bytes (--timeout {deadline.seconds:g} s reached)")
                return
    except (EOFError, zlib.error) as exc:
        warnings.append(f"{src.display}: read stopped early ({exc.__class__.__name__}: {exc})")
    except OSError as exc:
        if not done:
            raise
        warnings.append(f"{src.display}: read stopped after {done:,} bytes ({exc.strerror or exc})")
    if tail:
        yield tail


def _cap(line: bytes) -> tuple[bytes, bool]:
    """An unfinished line: what a progress bar printed last, at most MAX_LINE bytes (→ True: cut)."""
    if len(line) <= MAX_LINE:
        return line, False
    r = _last_lone_cr(line)
    if r >= 0:
        line = line[r + 1 :]
        if len(line) <= MAX_LINE:
            return line, False
    return line[:MAX_LINE] + LINE_CUT.encode(), True


def keep_expr(pattern_regexes: list[str]) -> pl.Expr:
    """What the scan keeps, as one plain (slow) expression: the reference KeepPlan is tested against."""
    line = pl.col("line")
    literal = "|".join(f"(?:{r})" for r in [*grammar.KEEP_LITERAL, *grammar.KEEP_THIN, *pattern_regexes])
    struct = line.str.contains(grammar.KEEP_STRUCT)
    near = struct.shift(1, fill_value=False) | struct.shift(2, fill_value=False)
    return line.str.contains(literal) | line.str.contains(grammar.KEEP_ANCHORED) | near


_EXPAND = 64  # a finite piece of a regex is spelled out when it has at most this many strings


def _finite(op, av) -> set[str] | None:
    """The strings one parsed regex node matches, when they are few (None: infinite, or too many)."""
    from re import _constants as C  # noqa: N812

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


def _required(nodes) -> set[str] | None:
    """Literal strings one of which every match of the parsed regex `nodes` contains (None: unknown).

    Consecutive finite pieces are spelled out (`grad norm: (?:nan|inf)` → both full strings), so a
    gate literal is as specific as the regex allows and common log text does not open the gate."""
    from re import _constants as C  # noqa: N812

    best: set[str] | None = None
    run: set[str] = {""}

    def consider(cands):
        nonlocal best
        if cands and all(cands) and (best is None or min(map(len, cands)) > min(map(len, best))):
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
            consider(_required(av[3]))
        elif op is C.BRANCH:
            subs = [_required(b) for b in av[1]]
            if all(subs):
                consider(set().union(*subs))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] >= 1:
            consider(_required(av[2]))
    flush()
    return best


class KeepPlan:
    """keep_expr, cheaply: the same lines, found without running every regex on every line.

    Over all lines run three checks: a pure literal alternation (a literal every pattern match must
    contain, one DFA pass over the line), the progress-line literal (memmem), and one anchored regex
    for every line shape (it fails within a few bytes of the line start on other lines).  The failure
    patterns' regexes then run only on lines holding one of their literals, in small groups (one
    alternation of all of them defeats the regex engine's DFA and falls back to a slow NFA)."""

    GROUP = 4

    def __init__(self, pattern_regexes: list[str]):
        from re import _parser as sre

        regexes = [*grammar.KEEP_LITERAL, *pattern_regexes]
        # Progress lines (the bulk of the literal hits in a long run) are found by their own test,
        # so they stay away from the per-literal gate below.
        self.thin = "|".join(f"(?:{r})" for r in grammar.KEEP_THIN)
        lits: set[str] = set()
        self.unanchored: list[str] = []  # no usable literal: run on every line
        required: list[set[str] | None] = []
        for rx in [*regexes, *grammar.KEEP_THIN]:
            try:
                tree = sre.parse(rx)
                req = None if tree.state.flags & 2 else _required(list(tree))  # 2 = re.IGNORECASE
            except Exception:  # noqa: BLE001  (a construct Python's parser lacks: be safe)
                req = None
            if req and min(map(len, req)) >= 3:
                lits |= req
            elif rx not in grammar.KEEP_THIN:
                self.unanchored.append(rx)
                req = None
            required.append(req)
        self.literals = sorted(lits)
        hit_lits = set().union(*(r for r in required[: len(regexes)] if r))
        # progress lines are first found by their literal (memmem, cheaper per row than a regex)
        thin_lits = set().union(*(r for r in required[len(regexes) :] if r))
        if len(thin_lits) == 1 and all(required[len(regexes) :]):
            self.thin_first = pl.col("line").str.contains(next(iter(thin_lits)), literal=True)
        else:
            self.thin_first = pl.col("line").str.contains(self.thin)
        # a literal that holds another one adds no line to a `contains` (256 of 322 literals are left)
        self.hit_literals = sorted(_minimal(hit_lits))
        self.hit_anchors = _alternation(set(self.hit_literals))
        self.anchors = _alternation(_minimal(lits))  # the thinning literal too: what grep is timed with
        # Groups of regexes, each run only on the lines holding one of its members' literals (a gate
        # found by Aho-Corasick); a member without a literal leaves its group ungated.
        self.groups: list[str] = []
        self.ungated: list[int] = []
        pairs: list[tuple[str, int]] = []
        for g, i in enumerate(range(0, len(regexes), self.GROUP)):
            self.groups.append("|".join(f"(?:{r})" for r in regexes[i : i + self.GROUP]))
            reqs = required[i : min(i + self.GROUP, len(regexes))]  # not the thinning regex after them
            if any(r is None for r in reqs):
                self.ungated.append(g)
            else:
                pairs += [(lit, g) for lit in set().union(*reqs)]
        self.gate = pl.DataFrame(pairs, schema={"lit": pl.String, "g": pl.Int64}, orient="row")
        gate_lits = {lit for lit, _ in pairs}
        self.gate_literals = sorted(gate_lits)
        # only when an ungated group's literals are among the hits: one more pass sets those lines apart
        self.gate_anchors = None if gate_lits == hit_lits else _alternation(gate_lits)

    def block_filter(self) -> BlockFilter:
        """The raw-bytes test that finds the stretches of a chunk where filter can keep a line."""
        thin = [self.thin] if self.thin else []
        return BlockFilter(self.hit_literals, [*self.unanchored, *thin])

    def filter(self, df: pl.DataFrame) -> pl.DataFrame:
        """The rows of df (column `line`) that `df.filter(keep_expr(...))` keeps, in order, with a column
        `tsonly` (kept only for their timestamp: thin_timestamps decides which of those the timeline
        needs) and `_pfx`, the line's launcher prefix (thin_timestamps' stream key).

        One query in polars' streaming engine, which spreads it over all cores, runs the tests over
        every line (a literal hit, a progress line, a shaped line: timestamp or structure) and, on the
        survivors, the tests that sort them: the bulk are timestamp lines (glog warnings from every
        rank), which the structure regex fails within a few bytes.  What is left to do one by one is
        the few rows of their own kind."""
        line, i = pl.col("line"), pl.col("_i")
        maybe = line.str.contains(self.hit_anchors) if self.hit_anchors else pl.lit(False)
        for rx in self.unanchored:
            maybe = maybe | line.str.contains(rx)
        shape = pl.col("_shape")
        sub = (
            df.lazy().with_row_index("_i")
            .with_columns(_lit=maybe, _thin=self.thin_first,
                          _shape=line.str.contains(grammar.KEEP_ANCHORED_OR_STRUCT))
            .filter(pl.col("_lit") | pl.col("_thin") | shape)
            .with_columns(_os=shape & line.str.contains(grammar.KEEP_OTHER_OR_STRUCT),
                          # (a null line is skipped: the regex runs on progress-literal rows only)
                          _tr=pl.when("_thin").then(line).str.contains(self.thin).fill_null(False),
                          _pfx=_prefix_key)
            .collect(engine="streaming")
        )
        if not sub.height:
            return df.clear().with_columns(_pfx=pl.lit(""), tsonly=pl.lit(False))  # the columns of a non-empty result
        # shaped lines that are no plain timestamp line: each shape regex on its own
        shaped = sub.filter("_os").select("_i", other=line.str.contains(grammar.KEEP_OTHER),
                                          struct=line.str.contains(grammar.KEEP_STRUCT),
                                          ts=line.str.contains(grammar.KEEP_TS))
        core_ids = [shaped.filter("other").get_column("_i"), *self._pattern_hits(sub.filter("_lit"))]
        st = shaped.filter("struct").get_column("_i")
        near = pl.concat([st + 1, st + 2])
        core = pl.concat([*core_ids, near.filter(near < df.height)]).unique()
        ts = shaped.filter("ts").get_column("_i")
        in_core = i.is_in(core.implode())
        keep = sub.filter((shape & ~pl.col("_os")) | pl.col("_tr") | i.is_in(ts.implode()) | in_core).select(
            *df.columns, "_pfx", tsonly=~in_core, _i=i)
        # the lines after a traceback line that no test kept (source lines, message continuations)
        extra = core.filter(~core.is_in(sub.get_column("_i").implode()))
        if len(extra):
            more = df[extra].with_columns(_pfx=_prefix_key, tsonly=pl.lit(False), _i=extra)
            keep = pl.concat([keep, more.select(keep.columns)]).sort("_i")
        return keep.drop("_i")

    def _pattern_hits(self, lit: pl.DataFrame) -> list[pl.Series]:
        """Row ids (`_i`) of the literal hits that a failure pattern's regex matches: each group of regexes
        runs only on the lines holding one of its literals (one Aho-Corasick pass finds which)."""
        if not lit.height:
            return []
        line = pl.col("line")
        gated = lit if self.gate_anchors is None else lit.filter(line.str.contains(self.gate_anchors))
        found = (
            gated.select("_i", lit=line.str.extract_many(self.gate_literals, overlapping=True))
            .explode("lit").drop_nulls().unique().join(self.gate, on="lit").select("_i", "g").unique()
        )
        todo = {g: ids for (g,), ids in found.group_by(["g"])}
        hits = []
        for g, rx in enumerate(self.groups):
            if g in self.ungated:
                part = lit
            elif g in todo:
                part = gated.filter(pl.col("_i").is_in(todo[g].get_column("_i").implode()))
            else:
                continue
            hits.append(part.filter(line.str.contains(rx)).get_column("_i"))
        return hits


def _minimal(literals: set[str]) -> set[str]:
    """The literals that hold no other one of the set (a line holds one of these iff it holds one of all)."""
    out: list[str] = []
    for lit in sorted(literals, key=len):
        if not any(k in lit for k in out):
            out.append(lit)
    return set(out)


def _alternation(literals: set[str]) -> str:
    return "|".join(re.escape(x) for x in sorted(literals, key=lambda x: (-len(x), x)))


# A stream's key: its launcher prefix (the regex's whole match needs no capture groups, so the
# engine's fast path finds it; prefixes contain no other whitespace than spaces, and srun pads them).
_prefix_key = pl.col("line").str.extract(grammar.PREFIX_ONLY, 0).str.replace_all(" ", "", literal=True)


def thin_timestamps(kept: pl.DataFrame) -> pl.DataFrame:
    """Of the lines kept only for their timestamp, keep those the timeline needs: the last one of each
    stream before one of that stream's kept lines, the last one before any kept line of the file, and
    the last one of each stream in the chunk (its latest time).  Bulk timestamped noise (glog warnings
    from every rank) then costs nothing downstream.  `kept` is KeepPlan.filter's output: a stream is a
    file and a launcher prefix (its column `_pfx`)."""
    if not kept.height or not kept.get_column("tsonly").any():
        return kept
    t = pl.col("tsonly")
    return kept.filter(~t | ~t.shift(-1).over("src", "_pfx").fill_null(False) | ~t.shift(-1).fill_null(True))


_CSV = dict(has_header=False, separator="\x1f", quote_char=None, encoding="utf8-lossy",
            truncate_ragged_lines=True, new_columns=["line"], schema={"line": pl.String})


_FILE_MARK = b"\n\x1e\n"  # between small files split as one chunk: a line that no log line is


def split_lines(data: bytes) -> pl.DataFrame:
    """A chunk's lines as a frame, split in Rust by polars' CSV reader with a separator that never
    occurs (6× faster than decoding and splitting a str).  Empty lines stay (as ""), CRLF loses its CR,
    odd bytes become U+FFFD, NULs go, and a line redrawn with carriage returns (a progress bar) keeps
    what it showed last; an overlong line is cut."""
    if b"\x00" in data:
        data = data.replace(b"\x00", b"")
    if not data:
        return pl.DataFrame({"line": [""]})
    if b"\x1f" in data:
        data = data.replace(b"\x1f", b" ")
    if data.endswith(b"\n"):
        data += b"\n"  # the CSV reader takes a final newline as the end of the last row, not a new one
    df = pl.read_csv(io.BytesIO(data), **_CSV).select(pl.col("line").fill_null(""))
    # Progress bars: keep what a bar showed last (found and mended in parallel).  The reader drops the
    # CR of a CRLF, so a row holding a CR is a redrawn line, and CRLF logs cost one scan of the rows
    # (a search of the bytes for a CR not before LF takes 30 times longer).
    if b"\r" in data:
        line = pl.col("line")
        bars = (
            df.lazy().with_row_index("_r").filter(line.str.contains("\r", literal=True))
            .select("_r", line=line.str.strip_chars_end("\r").str.extract(r"[^\r]*$", 0))
            .collect(engine="streaming")
        )
        df = df.with_columns(df.get_column("line").scatter(bars.get_column("_r"), bars.get_column("line")))
    long = df.select(pl.arg_where(pl.col("line").str.len_bytes() > MAX_LINE)).to_series()
    if len(long):
        line = df.get_column("line")
        df = df.with_columns(line.scatter(long, [_cut(x) for x in line.gather(long).to_list()]))
    return df


def hot_lines(data: bytes, first: int, blocks: BlockFilter | None) -> tuple[pl.DataFrame, int]:
    """The lines of a chunk that can matter, as a frame (lineno, line), and the chunk's line count.
    Quiet stretches (see prefilter.BlockFilter) are counted, not split."""
    spans = blocks.spans(data) if blocks is not None else None
    if spans is None:
        df = split_lines(data).with_row_index("lineno", offset=first).select(pl.col("lineno").cast(pl.Int64), "line")
        return df, df.height
    total = data.count(b"\n") + 1
    if not spans:
        return pl.DataFrame(schema={"lineno": pl.Int64, "line": pl.String}), total
    starts, ends, k, at = [], [], first, 0
    for s, e in spans:  # (counted once from the last span on: never from the chunk's start again)
        k += data.count(b"\n", at, s)
        starts.append(k)
        ends.append(k + data.count(b"\n", s, e) + 1)
        k, at = ends[-1] - 1, e
    df = split_lines(b"\n".join(data[s:e] for s, e in spans))
    linenos = pl.select(pl.int_ranges(pl.Series(starts, dtype=pl.Int64), pl.Series(ends, dtype=pl.Int64))).to_series().explode()
    if len(linenos) != df.height:  # (never expected) the whole chunk, as without the filter
        return hot_lines(data, first, None)
    return df.select(lineno=linenos.cast(pl.Int64), line="line"), total


def _cut(text: str) -> str:
    return text[:MAX_LINE] + LINE_CUT if len(text) > MAX_LINE else text


def reuse_freed_blocks() -> None:
    """Ask glibc to keep freed chunk-sized blocks for reuse, in one arena for all threads, instead of
    handing them back to the system: each block read would otherwise land on fresh pages (300k minor
    faults per GB here, 165k with this; about 0.2 s of system time).  For the command line (a library
    should not set its caller's allocator); a no-op without glibc."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.mallopt(-8, 1)  # M_ARENA_MAX: the reader thread's blocks come from the main arena too
        libc.mallopt(-3, 2 * CHUNK_BYTES)  # M_MMAP_THRESHOLD: chunk-sized blocks come from the heap
        libc.mallopt(-1, 8 * CHUNK_BYTES)  # M_TRIM_THRESHOLD: and stay there for the next chunk
    except (OSError, AttributeError):
        pass


def _prefetch(items: Iterator, depth: int = 2) -> Iterator:
    """Run a generator in a helper thread, `depth` items ahead (polars and file reads release the GIL)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    failure: list[BaseException] = []

    def work() -> None:
        try:
            for item in items:
                q.put(item)
        except BaseException as exc:  # noqa: BLE001  (re-raised in the caller's thread)
            failure.append(exc)
        finally:
            q.put(done)

    threading.Thread(target=work, daemon=True, name="mdiag-reader").start()
    while (item := q.get()) is not done:
        yield item
    if failure:
        raise failure[0]


def scan(
    sources: list[Source],
    pattern_regexes: list[str],
    progress: Callable[[int], None] | None = None,
    deadline: Deadline | None = None,
    summary: dict | None = None,
) -> tuple[pl.DataFrame, list[str]]:
    """Kept lines of all sources as one frame: src (index), lineno (1-based), line.
    With a deadline, files and chunks after it has passed are not read (see read_chunks).  Repeats
    over the caps (see caps.Summariser) are counted, not kept: `summary` gets `summarised` and
    `summarised_lines`."""
    warnings: list[str] = []
    plan = KeepPlan(pattern_regexes)
    blocks = plan.block_filter()
    caps = Summariser()
    parts: list[pl.DataFrame] = []
    batch: list[pl.DataFrame] = []  # chunks of small files, filtered together (thousands of per-rank files)
    batched = 0

    def flush() -> None:
        nonlocal batch, batched
        if batch:
            kept = caps.cap(thin_timestamps(plan.filter(pl.concat(batch))))
            if kept.height:
                # copy the kept lines out: a gathered string column still points into (and so keeps
                # alive) the whole chunk's buffers, which would make memory grow with the log's size
                parts.append(kept.with_columns(pl.Series(c, kept.get_column(c).to_list(), dtype=pl.String)
                                               for c in ("line", "_pfx")))
            if sum(p.height for p in parts) > COMPACT_ROWS:
                # timestamp lines kept as the last of their stream in one chunk are superseded by later
                # chunks: thinning what was kept so far keeps memory flat however long the log is
                parts[:] = [thin_timestamps(pl.concat(parts))]
        batch, batched = [], 0

    def chunks() -> Iterator[pl.DataFrame]:
        small: list[tuple[Source, bytes]] = []  # whole small files, split together (thousands of per-rank files)
        pending = 0

        def split_small() -> pl.DataFrame:
            """The small files' lines, split as one chunk with a marker line between files (the marker
            byte is blanked in the data), so no Python pass counts each file's newlines."""
            nonlocal small, pending
            srcs = pl.Series([s.index for s, _ in small], dtype=pl.Int32)
            data = _FILE_MARK.join(d.replace(b"\x1e", b" ") if b"\x1e" in d else d for _, d in small)
            line = pl.col("line")
            df = (
                split_lines(data).with_columns(_f=(line == "\x1e").cum_sum())
                .filter(line != "\x1e")
                .select(lineno=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("_f"), line=line,
                        src=pl.lit(srcs).gather(pl.col("_f")))
            )
            counts = dict(df.group_by("src").len().iter_rows())
            for s, _ in small:
                s.lines = counts.get(s.index, 0)
            small, pending = [], 0
            return df

        for src in sources:
            if src.layout == "error-json":
                continue
            first, datas = 1, []
            try:
                for data in read_chunks(src, warnings, deadline=deadline):
                    if first == 1 and not datas and len(data) < SMALL_FILE:
                        datas.append(data)  # hold the first chunk: it may be the file's only one
                        continue
                    for d in [*datas, data]:
                        df, n = hot_lines(d, first, blocks)
                        first += n
                        if df.height:
                            yield df.with_columns(src=pl.lit(src.index, dtype=pl.Int32))
                        if progress:
                            progress(len(d))
                    datas = []
                if datas:  # a small file: one chunk, batched with its neighbours
                    small.append((src, datas[0]))
                    pending += len(datas[0])
                    if progress:
                        progress(len(datas[0]))
                    if pending >= CHUNK_BYTES:
                        yield split_small()
            except PermissionError:
                warnings.append(f"{src.display}: permission denied, skipped")
            except OSError as exc:
                warnings.append(f"{src.display}: cannot read ({exc.strerror or exc}), skipped")
            if not datas:  # (a small file's lines are counted when its batch is split)
                src.lines = first - 1
        if small:
            yield split_small()

    with pl.Config(streaming_chunk_size=MORSEL_ROWS):
        for df in _prefetch(chunks()):  # the next chunk is read and split while this one is filtered
            batch.append(df)
            batched += df.height
            if batched >= BATCH_LINES:
                flush()
        flush()
    if not parts:
        frame = pl.DataFrame(schema={"lineno": pl.UInt32, "line": pl.String, "src": pl.Int32})
    else:
        frame = thin_timestamps(pl.concat(parts))
    frame = frame.with_columns(pl.col("lineno").cast(pl.Int64)).select("src", "lineno", "line")
    if caps.summarised:
        warnings.append(caps.warning())
    if summary is not None:
        summary.update(summarised=caps.summarised, summarised_lines=caps.dropped)
    return frame, warnings
