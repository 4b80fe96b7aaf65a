"""Read every line of every source once, in bounded chunks, and keep only the few that matter.

All per-line work is polars expressions (Rust regex, no Python loop over lines): one unanchored
alternation of the failure patterns' regexes, one anchored regex for structure (tracebacks,
timestamps, launcher summaries), and the two lines after each traceback-shaped line.
"""
from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable, Iterator

import polars as pl

from . import grammar
from .model import Source

CHUNK_BYTES = 32 * 1024 * 1024
_CR_PROGRESS = re.compile(r"[^\n]*\r(?!\n|$)")


def _open(src: Source):
    if src.path.name.endswith(".gz"):
        return gzip.open(src.path, "rb")
    return open(src.path, "rb")


def read_chunks(src: Source, warnings: list[str], chunk_bytes: int = CHUNK_BYTES) -> Iterator[str]:
    """Text chunks that end on a line boundary; odd bytes become U+FFFD, CRLF becomes LF, and a
    carriage-return progress bar glued before a line keeps only what was printed last."""
    tail = b""
    with _open(src) as fh:
        while True:
            try:
                block = fh.read(chunk_bytes)
            except (EOFError, OSError, zlib.error) as exc:  # truncated or corrupt .gz: keep what was read
                warnings.append(f"{src.display}: read stopped early ({exc.__class__.__name__}: {exc})")
                block = b""
            if not block:
                break
            data = tail + block
            cut = data.rfind(b"\n")
            if cut < 0:
                tail = data
                continue
            tail = data[cut + 1 :]
            yield _decode(data[:cut])
    if tail:
        yield _decode(tail)


def _decode(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    if "\r" in text:
        text = _CR_PROGRESS.sub("", text.replace("\r\n", "\n")).replace("\r", "")
    if "\x00" in text:
        text = text.replace("\x00", "")
    return text


def keep_expr(pattern_regexes: list[str]) -> pl.Expr:
    line = pl.col("line")
    literal = "|".join(f"(?:{r})" for r in [*grammar.KEEP_LITERAL, *pattern_regexes])
    struct = line.str.contains(grammar.KEEP_STRUCT)
    near = struct.shift(1, fill_value=False) | struct.shift(2, fill_value=False)
    return line.str.contains(literal) | line.str.contains(grammar.KEEP_ANCHORED) | near


def scan(
    sources: list[Source],
    pattern_regexes: list[str],
    progress: Callable[[int], None] | None = None,
) -> tuple[pl.DataFrame, list[str]]:
    """Kept lines of all sources as one frame: src (index), lineno (1-based), line."""
    warnings: list[str] = []
    keep = keep_expr(pattern_regexes)
    parts = []
    for src in sources:
        if src.layout == "error-json":
            continue
        first = 1
        try:
            for text in read_chunks(src, warnings):
                lines = pl.Series("line", [text], dtype=pl.String).str.split("\n").explode()
                n = len(lines)
                df = pl.DataFrame({"line": lines}).with_row_index("lineno", offset=first)
                kept = df.filter(keep)
                if kept.height:
                    parts.append(kept.with_columns(pl.lit(src.index, dtype=pl.Int32).alias("src")))
                first += n
                if progress:
                    progress(len(text))
        except PermissionError:
            warnings.append(f"{src.display}: permission denied, skipped")
        except OSError as exc:
            warnings.append(f"{src.display}: cannot read ({exc.strerror or exc}), skipped")
        src.lines = first - 1
    if not parts:
        frame = pl.DataFrame(schema={"lineno": pl.UInt32, "line": pl.String, "src": pl.Int32})
    else:
        frame = pl.concat(parts)
    frame = frame.with_columns(pl.col("lineno").cast(pl.Int64)).select("src", "lineno", "line")
    return frame, warnings
