"""Lines out of raw chunks: the whole chunk, or only the hot stretches the prefilter found (with their
line numbers), split in Rust by polars' CSV reader."""
from __future__ import annotations

import io

import polars as pl

from diagnose.read import scan_blocks
from diagnose.read.prefilter import BlockFilter


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
    long = df.select(pl.arg_where(pl.col("line").str.len_bytes() > scan_blocks.MAX_LINE)).to_series()
    if len(long):
        line = df.get_column("line")
        df = df.with_columns(line.scatter(long, [_cut(x) for x in line.gather(long).to_list()]))
    return df


Part = tuple[bytes, "list[int] | None", "list[int] | None", int]


def hot_spans(data: bytes, blocks: BlockFilter | None) -> Part:
    """What of a chunk to split, found on its bytes (no polars: a helper process runs it too):
    (text, starts, ends, lines), where text is the hot spans joined (see prefilter.BlockFilter), the
    i-th of them holding the chunk's lines starts[i] to ends[i] (from 0), and lines the chunk's line
    count; starts is None when text is the whole chunk.  Quiet stretches are counted, not split."""
    spans = blocks.spans(data) if blocks is not None else None
    if spans is None:
        return data, None, None, 0
    starts: list[int] = []
    ends: list[int] = []
    k, at = 0, 0
    for s, e in spans:  # each byte's newlines counted once: between spans, in them, after the last
        k += data.count(b"\n", at, s)
        starts.append(k)
        ends.append(k + data.count(b"\n", s, e) + 1)
        k, at = ends[-1] - 1, e
    total = k + data.count(b"\n", at) + 1
    text = b"\n".join(data[s:e] for s, e in spans)
    if spans and text.count(b"\n") + 1 != sum(ends) - sum(starts):  # (never expected) the whole chunk
        return data, None, None, 0
    return text, starts, ends, total


def lines_of(part: Part, first: int) -> tuple[pl.DataFrame, int]:
    """hot_spans' part of a chunk whose first line is number `first`, as a frame (lineno, line), and
    the chunk's line count."""
    text, starts, ends, total = part
    if starts is None:
        df = split_lines(text).with_row_index("lineno", offset=first).select(pl.col("lineno").cast(pl.Int64), "line")
        return df, df.height
    if not starts:
        return pl.DataFrame(schema={"lineno": pl.Int64, "line": pl.String}), total
    df = split_lines(text)
    linenos = pl.select(pl.int_ranges(pl.Series(starts, dtype=pl.Int64) + first,
                                      pl.Series(ends, dtype=pl.Int64) + first)).to_series().explode()
    return df.select(lineno=linenos.cast(pl.Int64), line="line"), total


def hot_lines(data: bytes, first: int, blocks: BlockFilter | None) -> tuple[pl.DataFrame, int]:
    """The lines of a chunk that can matter, as a frame (lineno, line), and the chunk's line count."""
    return lines_of(hot_spans(data, blocks), first)


def _cut(text: str) -> str:
    cut = scan_blocks.MAX_LINE
    return text[:cut] + scan_blocks.LINE_CUT if len(text) > cut else text
