"""Read every line of every source once, in bounded chunks, and keep only the few that matter.

The parts: scan_blocks reads raw chunks, prefilter finds their hot stretches on the bytes, scan_lines
splits those into lines, scan_keep picks the lines to keep, caps bounds how many; this module runs
them over all sources and batches many small files together.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import polars as pl

from diagnose.model import Source
from diagnose.read import grammar  # noqa: F401  (named by callers that read the scan as one module)
from diagnose.read.caps import Summariser
from diagnose.read.scan_blocks import (  # noqa: F401
    CHUNK_BYTES, LINE_CUT, MAX_LINE, _prefetch, read_chunks, reuse_freed_blocks,
)
from diagnose.read.scan_deadline import Deadline
from diagnose.read.scan_keep import KeepPlan, keep_expr, keep_plan, thin_timestamps  # noqa: F401
from diagnose.read import scan_parallel
from diagnose.read.rejoin import rejoin
from diagnose.read.scan_lines import _FILE_MARK, Part, hot_spans, lines_of, split_lines
from diagnose.read.scan_literals import _minimal, _required  # noqa: F401

BATCH_LINES = 150_000  # filter at least this many lines at once: per-call overhead stays small
DEADLINE_BATCH_LINES = 20_000  # (about 0.05 s of filtering a flood of errors)
COMPACT_ROWS = 100_000
# Rows per piece of work in polars' streaming engine (its default is 100,000): about 1.5 MB of log, so
# each test over all lines reads a piece the previous test left in the CPU cache (5-9% less time).
MORSEL_ROWS = 8192
SMALL_FILE = 1024 * 1024  # files below this are split in batches, not one by one


def scan(
    sources: list[Source],
    pattern_regexes: list[str],
    progress: Callable[[int], None] | None = None,
    deadline: Deadline | None = None,
    summary: dict | None = None,
) -> tuple[pl.DataFrame, list[str]]:
    """Kept lines of all sources as one frame: src (index), lineno (1-based), line.
    With a deadline, files and chunks after it has passed are not read (see read_chunks), nor are
    the chunks read ahead analysed.  Repeats
    over the caps (see caps.Summariser) are counted, not kept: `summary` gets `summarised` and
    `summarised_lines`."""
    warnings: list[str] = []
    plan = keep_plan(tuple(pattern_regexes))
    blocks = plan.block_filter()
    caps = Summariser()
    parts: list[pl.DataFrame] = []
    batch: list[pl.DataFrame] = []  # chunks of small files, filtered together (thousands of per-rank files)
    batched = 0
    unanalysed: dict[int, int] = {}  # src → its first line read after the deadline
    # with a deadline, lines are filtered in smaller batches, so that it is checked often
    step = BATCH_LINES if deadline is None else DEADLINE_BATCH_LINES

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
        pending = first = 0

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
                s.lines = counts.get(s.index, 0)  # physical lines, before rejoining
            df = rejoin(df, {s.index: s for s, _ in small})
            small, pending = [], 0
            return df

        def emit(src: Source, part: Part, nbytes: int) -> Iterator[pl.DataFrame]:
            nonlocal first
            df, n = lines_of(part, first)
            first += n
            if df.height:
                yield df.with_columns(src=pl.lit(src.index, dtype=pl.Int32))
            if progress:
                progress(nbytes)

        for src in sources:
            if src.layout == "error-json":
                continue
            first, datas = 1, []
            split = scan_parallel.split_point(src, blocks)
            helper = scan_parallel.Helper(src, split, blocks, deadline) if split else None
            try:
                for data in (read_chunks(src, warnings, deadline=deadline) if helper is None
                             else read_chunks(src, warnings, deadline=deadline, stop=split)):
                    if first == 1 and not datas and len(data) < SMALL_FILE and helper is None:
                        datas.append(data)  # hold the first chunk: it may be the file's only one
                        continue
                    for d in [*datas, data]:
                        yield from emit(src, hot_spans(d, blocks), len(d))
                    datas = []
                if helper is not None:
                    parts, more = helper.results()
                    if deadline is not None and deadline.fired:
                        # the first half was maybe not read to its end: the second's line numbers are unknown
                        warnings.append(f"{src.display}: the part from byte {split:,} on was not analysed "
                                        f"(--timeout {deadline.seconds:g} s reached)")
                    elif parts is None:  # the helper gave up (a dense log): read the second half here
                        for data in read_chunks(src, warnings, deadline=deadline, start=split):
                            yield from emit(src, hot_spans(data, blocks), len(data))
                    else:
                        warnings.extend(more)
                        for part in parts:
                            yield from emit(src, part, 0)
                        if progress:
                            progress(src.path.stat().st_size - split)
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
            finally:
                if helper is not None:
                    helper.close()
            if not datas:  # (a small file's lines are counted when its batch is split)
                src.lines = first - 1
        if small:
            yield split_small()

    with pl.Config(streaming_chunk_size=MORSEL_ROWS):
        for df in _prefetch(chunks()):  # the next chunk is read and split while this one is filtered
            for piece in df.iter_slices(step):
                if deadline is not None and deadline.late():
                    # read ahead but past the deadline: counted as not analysed, and the reader stops soon
                    for s, n in piece.group_by("src").agg(pl.col("lineno").min()).iter_rows():
                        unanalysed[s] = min(n, unanalysed.get(s, n))
                    continue
                batch.append(piece)
                batched += piece.height
                if batched >= step:
                    flush()
        flush()
    names = {s.index: s.display for s in sources}
    warnings += [f"{names.get(s, s)}: lines from {n:,} on were read but not analysed (--timeout reached)"
                 for s, n in sorted(unanalysed.items())]
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
