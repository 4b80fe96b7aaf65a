"""Whose line is it: a line's global rank, local rank and host, from its prefixes, its own text, the job's context
(a local rank made global where the node is established), NCCL's setup lines, or the line beside it."""
from __future__ import annotations

import polars as pl
import regex

from diagnose.analyze.context import JobContext
from diagnose.read import grammar, normalize

_NCCL_ORIGIN = regex.compile(grammar.NCCL_ORIGIN)
_PG_RANK = regex.compile(grammar.PG_RANK)
_LOCAL = regex.compile(r"local_rank: (\d+)")
# Lightning's launcher names the child that failed in its own `[rank: N]` column: N is the child's index on its node
# (`rank_prefixed_message(…, rank=i + 1)` in lightning/fabric/strategies/launchers/subprocess_script.py), a local rank
_LIGHTNING_CHILD = regex.compile(r"^Child process with PID \d+ terminated with code -?[1-9]")


def rank_of(row: dict, ctx: JobContext) -> tuple[int | None, int | None, str | None, dict]:
    return rank_from(row.get("rank"), row.get("local_rank"), row.get("host"), row.get("msg"), ctx)


def rank_from(rank, local, host, msg, ctx: JobContext) -> tuple[int | None, int | None, str | None, dict]:
    """The line's global rank, local rank and host, and (as details) how a global rank was had from a local one."""
    msg = msg or ""
    if rank is not None and local is None and _LIGHTNING_CHILD.match(msg):
        rank, local = None, rank
    if (said := normalize.rank_in_text(msg, faulty=True)).get("rank") is not None:
        # the writer reports another rank's failure (rank 0's monitored barrier: `Rank 2 failed to pass`)
        return said["rank"], None, said.get("host") or ctx.rank_host.get(said["rank"]), {}
    if rank is None and local is None and (m := _LOCAL.search(msg)) and "exitcode" in msg:
        local = int(m.group(1))
    basis: dict = {}  # how a global rank was had from the local rank itself (ctx.rank_basis)
    if rank is None and local is not None:
        rank, basis = ctx.global_rank(local, host), ctx.rank_basis(local, host)
    if rank is None and (m := _PG_RANK.search(msg)) and (m["pg"] in (None, "0")):
        rank = int(m["rank"])  # c10d's [Rank N] of the default process group is the global rank
    if rank is None and local is None and (said := normalize.rank_in_text(msg)):
        rank, local = said.get("rank"), said.get("local_rank")
        if rank is None and "task" in said and "torchrun" not in (ctx.launcher or ""):
            rank = said["task"]  # srun started the ranks itself: its task id is the rank
        host = host or said.get("host")
        if rank is None and local is not None:
            rank, basis = ctx.global_rank(local, host), ctx.rank_basis(local, host)
    if rank is None and local is None and ctx.nccl_ranks and (m := _NCCL_ORIGIN.match(msg)):
        # an NCCL line of a process whose rank NCCL's own setup lines state
        if (got := ctx.nccl_ranks.get((m["host"], int(m["pid"])))) is not None:
            rank, src, line = got
            host = host or m["host"]
            basis = {"_rank_line": (src, line)}  # made `file:line` by build_events
    if host is None and rank is not None:
        host = ctx.rank_host.get(rank)
    return rank, local, host, basis


# A record's rank on the line beside it: torch_npu's error banner above its CANN report (`[ERROR] … (PID:1,
# Device:2, RankID:2) ERR00100 …`), Rust tracing's fields below a record's message (text-generation-inference's ` rank=0`),
# torch RPC's `On WorkerInfo(id=0, name=trainer0):` above the remote exception it re-raises (the worker's id is its RPC rank)
_BANNER_RANK = r"\(PID:\d+, Device:\d+, RankID:(\d+)\)"
_FIELD_RANK = r"^ ?rank=(\d{1,7})\s*$"
_RPC_WORKER = r"^On WorkerInfo\(id=(\d{1,7}), name=[^)]*\):\s*$"


def rank_beside(df: pl.DataFrame) -> dict[tuple[int, int], tuple[int, int]]:
    """(src, line) of a line → (rank, the line that states it), from the line just above or below it."""
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for rx, step in ((_BANNER_RANK, 1), (_FIELD_RANK, -1), (_RPC_WORKER, 1)):
        said = df.filter(pl.col("msg").str.contains(rx)).select("src", "lineno", r=pl.col("msg").str.extract(rx))
        for src, line, r in said.iter_rows():
            out.setdefault((src, line + step), (int(r), line))
    return out
