"""Rank attribution: strip launcher prefixes off each kept line and keep what they said as fields.

Which number is which (see the reference on prefixes): `[rankN]:` and mpirun's tag are global ranks;
`[defaultN]:` (torchrun --tee) is a local rank; srun's `N: ` label is the task id, which is the global
rank only when srun starts the ranks itself (no torchrun prefix on the same line).  A local rank
becomes a global rank only where the logs establish the mapping; otherwise it stays null.
"""
from __future__ import annotations

import polars as pl

from . import grammar
from .model import Source


def attribute(frame: pl.DataFrame, sources: list[Source]) -> pl.DataFrame:
    """Adds msg, rank, local_rank, task, host, pid and stream (the key of one process's output)."""
    g = pl.col("line").str.extract_groups("^" + grammar.PREFIX)
    df = frame.with_columns(g.alias("_p")).unnest("_p")
    tee_rank = lambda t, n: pl.when(pl.col(t) == "rank").then(pl.col(n).cast(pl.Int64))  # noqa: E731
    tee_local = lambda t, n: pl.when(pl.col(t).is_not_null() & (pl.col(t) != "rank")).then(pl.col(n).cast(pl.Int64))  # noqa: E731
    src_local = pl.col("src").replace_strict(
        {s.index: s.local_rank for s in sources}, default=None, return_dtype=pl.Int64
    )
    src_task = pl.col("src").replace_strict({s.index: s.task for s in sources}, default=None, return_dtype=pl.Int64)
    df = df.with_columns(
        msg=pl.col("line").str.slice(pl.col("pfx").str.len_chars().fill_null(0)),
        _rank=pl.coalesce(tee_rank("t2", "n2"), tee_rank("t1", "n1"), pl.col("mpi").cast(pl.Int64)),
        local_rank=pl.coalesce(tee_local("t1", "n1"), tee_local("t2", "n2"), src_local),
        task=pl.coalesce(pl.col("task").cast(pl.Int64), src_task),
    )
    # srun's task label is the rank when nothing finer is on the line (srun launched the ranks itself).
    df = df.with_columns(
        rank=pl.coalesce(
            pl.col("_rank"),
            pl.when(pl.col("local_rank").is_null() & pl.col("t1").is_null()).then(pl.col("task")),
        )
    )
    origin = pl.col("msg").str.extract_groups(grammar.NCCL_ORIGIN)
    df = df.with_columns(origin.alias("_o")).unnest("_o")
    df = df.with_columns(
        host=pl.coalesce(pl.col("host"), pl.col("runner")),
        stream=pl.concat_str(
            [pl.col("src").cast(pl.String), pl.col("pfx").str.replace_all(r"\s", "").fill_null("")],
            separator="|",
        ),
    )
    return df.drop("_rank", "t1", "n1", "t2", "n2", "mpi", "runner", "tid", "dev", "pfx")
