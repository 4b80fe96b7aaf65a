"""Assemble Python tracebacks per stream, even when ranks' lines interleave in one merged file.

The per-line flags are polars expressions; the assembly walks only the kept lines of each stream,
which are few.  A traceback may lack its header (cut off above) or its exception (cut off below);
chained exceptions ("The above exception was the direct cause…", "During handling…") and exception
groups become one chain of blocks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter

import polars as pl
import regex

from diagnose.read import grammar
from diagnose.model import Frame, TracebackBlock

_WRAPPER = regex.compile(r"[\w.]+\([A-Z][\w.]*\): ray::")
_MARGIN = regex.compile(grammar.GROUP_MARGIN)
_FRAME = regex.compile(grammar.FRAME)
_FRAME_NO_COMMA = regex.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+) in (?P<func>.*)$')
MAX_CONTINUATION = 30
# SLURM's own lines, printed into the same stream as the job's: never the continuation of an exception's message
_LAUNCHERS = ("srun: ", "slurmstepd: ")


@dataclass
class Chain:
    """Tracebacks printed as one chain by one stream; blocks[0] is printed first (the innermost cause)."""

    stream: str
    src: int
    blocks: list[TracebackBlock] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)  # the kept rows of the exception lines and continuations
    # rows among a block's frames that are none of its lines (no frame, source line or exception): another
    # process's output interleaved into it
    strays: list[dict] = field(default_factory=list)
    head: tuple = (None, None, None)  # (rank, local rank, host) of its first line, as the prefixes say

    @property
    def start(self) -> int:
        return self.blocks[0].start


def flags(df: pl.DataFrame) -> pl.DataFrame:
    m = pl.col("msg")
    body = m.str.replace(grammar.GROUP_MARGIN, "").str.strip_chars_start(" ")
    return df.with_columns(
        is_header=m.str.contains(grammar.TB_HEADER) | m.str.contains(grammar.FAULT_HEADER),
        is_frame=m.str.contains(grammar.FRAME) | m.str.contains(r'^\s*File "[^"]*", line \d+ in '),
        is_chain=m.str.contains(grammar.CHAIN),
        # source lines are indented 4+; an exception line at most 2 (torchrun's summary indents the
        # traceback it quotes by 2)
        is_exc=body.str.contains(grammar.EXC_LINE) & (~m.str.contains(r"^\s{3,}") | m.str.contains(r"^\s*[|+]")),
        indent=m.str.len_chars() - m.str.strip_chars_start(" ").str.len_chars(),
        blank=m.str.strip_chars().str.len_chars() == 0,
    )


_COLS = ("src", "lineno", "msg", "stream", "is_header", "is_frame", "is_chain", "is_exc", "indent", "blank", "ts",
         "time", "order_time", "pid", "rank", "local_rank", "host", "record", "stamp", "lead")
# rows are walked as tuples (a dict per row cost half the walk on a flood of tracebacks); these index them
(_SRC, _LINENO, _MSG, _STREAM, _HEADER, _FRAME_, _CHAIN, _EXC, _INDENT, _BLANK, _TS,
 _TIME, _ORDER_TIME, _PID, _RANK, _LOCAL, _HOST, _RECORD, _STAMP, _LEAD) = range(len(_COLS))


def assemble(df: pl.DataFrame, multi_stream_srcs: set[int]) -> list[Chain]:
    chains: list[Chain] = []
    # one sort and one pass over the rows, not a gather per stream (thousands of ranks: 30× faster);
    # only streams with a header or a frame line: a traceback starts at one, other streams make none
    has_tb = (pl.col("is_header") | pl.col("is_frame")).any().over("stream")
    rows = df.filter(has_tb).select(_COLS).sort("stream", "lineno", maintain_order=True).iter_rows()
    for stream, part in groupby(rows, key=itemgetter(_STREAM)):
        _walk(stream, part, multi_stream_srcs, chains)
    chains.sort(key=lambda c: (c.src, c.start))
    return chains


def _walk(stream, rows, multi_stream_srcs, chains):
    chain: Chain | None = None
    block: TracebackBlock | None = None
    state = "none"  # none | frames | exc
    prev_line = None
    linked = False  # a chain marker was seen after the last exception
    first = len(chains)  # this stream's chains start here
    for r in rows:
        gap_ok = prev_line is None or r[_LINENO] - prev_line <= (64 if r[_SRC] in multi_stream_srcs else 1)
        text = r[_MSG]
        if r[_HEADER] or (r[_FRAME_] and state in ("none", "exc")):
            nested = r[_HEADER] and text.lstrip().startswith(("|", "+"))  # inside an exception group
            # an exception message that ends with a colon introduces the traceback printed right after it, its cause
            # (Ray's "failed to import on the worker ...:" and the ModuleNotFoundError that says why; mp.spawn's
            # `ProcessRaisedException:` / `-- Process 1 terminated with the following error:` and the worker's own)
            # (the message's last line: a colon that introduced its own next lines, `Error(s) in loading state_dict
            # for X:` and its `Missing key(s)`, introduces no traceback)
            said = (block.continuation[-1][1] if block.continuation else block.exception or "") if block else ""
            introduced = (r[_HEADER] and state == "exc" and said.rstrip().endswith(":")
                          and prev_line is not None and r[_LINENO] - prev_line <= 2)
            # (so do the remote frames under Ray's `RayTaskError(Inner): ray::…`, ending in Inner's own line)
            introduced = introduced or (state == "exc" and linked and block is not None
                                        and bool(_WRAPPER.match((block.exception or "").strip())))
            if chain is None or not (linked or nested or introduced):
                chain = Chain(stream=stream, src=r[_SRC], head=(r[_RANK], r[_LOCAL], r[_HOST]))
                chains.append(chain)
            block = TracebackBlock(start=r[_LINENO], truncated=not r[_HEADER], introduced=introduced)
            chain.blocks.append(block)
            state, linked = "frames", False
            block.text.append(text)
            if r[_FRAME_]:
                _add_frame(block, text)
        elif state == "frames":
            if r[_FRAME_]:
                _add_frame(block, text)
                block.text.append(text)
            elif r[_INDENT] >= 4 and not r[_EXC]:
                # a caret line (`^^^^`) marks the code above it; it is no code itself
                if block.frames and block.frames[-1].code is None and text.strip().strip("^~") != "":
                    block.frames[-1].code = text.strip()
                block.text.append(text)
            elif r[_CHAIN]:
                linked = True
            elif r[_EXC] and not r[_BLANK]:
                body = _MARGIN.sub("", text)
                block.exception, block.exception_line = body.strip(), r[_LINENO]
                block.text.append(text)
                chain.rows.append(dict(zip(_COLS, r)))
                state = "exc"
                # Ray's `RayTaskError(Inner): ray::…` heads the remote worker's frames and Inner's own line
                linked = bool(_WRAPPER.match(body.strip()))
            elif not gap_ok:
                state = "none"
            elif not r[_BLANK]:
                chain.strays.append(dict(zip(_COLS, r)))
        elif state == "exc":
            if r[_CHAIN]:
                linked = True
            elif (not linked and gap_ok and not r[_BLANK] and (r[_TS] is None or r[_STAMP]) and not r[_RECORD]
                  and len(block.continuation) < MAX_CONTINUATION and not text.lstrip().startswith(_LAUNCHERS)):
                block.continuation.append((r[_LINENO], text.rstrip()))
                block.text.append(text)
                chain.rows.append(dict(zip(_COLS, r)))
            elif r[_BLANK] and not linked:
                pass
            elif not linked:
                state = "none"
        prev_line = r[_LINENO]
    for c in chains[first:]:  # (not all streams' chains again: thousands of ranks made it quadratic)
        for b in c.blocks:
            if b.exception is None:
                b.truncated = True


def _add_frame(block: TracebackBlock, text: str) -> None:
    m = _FRAME.search(text) or _FRAME_NO_COMMA.search(text)
    if m:
        block.frames.append(Frame(file=m["file"], line=int(m["line"]), func=m["func"].strip()))
