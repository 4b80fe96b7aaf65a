"""Rank attribution: normalize each kept line (normalize.peel strips any stack of launcher, wrapper
and logger prefixes) and keep what the prefixes said as fields.

Which number is which (see the reference on prefixes): `[rankN]:` and mpirun's tag are global ranks;
`[defaultN]:` (torchrun --tee) is a local rank; srun's `N: ` label is the task id, which is the global
rank only when srun starts the ranks itself (no torchrun prefix on the same line).  A local rank
becomes a global rank only where the logs establish the mapping; otherwise it stays null.
"""
from __future__ import annotations

import polars as pl

from diagnose.read import grammar, normalize
from diagnose.model import Source


def attribute(frame: pl.DataFrame, sources: list[Source]) -> pl.DataFrame:
    """Adds msg, rank, local_rank, task, host, tstext (a peeled timestamp's text), record (the line
    starts a logger's record) and stream
    (the key of one process's output: its file and the identity part of its prefix)."""
    kinds = normalize.load()
    cols: dict[str, list] = {c: [] for c in ("msg", "_rank", "_local", "_task", "_host", "_pid", "tstext", "_key", "_tee", "record")}
    for line in frame.get_column("line").to_list():
        n = normalize.peel(line or "", kinds)
        cols["msg"].append(n.message)
        cols["_rank"].append(n.rank)
        cols["_local"].append(n.local_rank)
        cols["_task"].append(n.task)
        cols["_host"].append(n.host)
        cols["_pid"].append(n.pid)
        cols["tstext"].append(n.time)
        cols["_key"].append(n.key)
        cols["_tee"].append("tee_local" in n.kinds or "torch_rank" in n.kinds)
        # a logger's time or level column starts a new record (never the continuation of a message)
        cols["record"].append(n.time is not None or "log_level" in n.kinds)
    ints = ("_rank", "_local", "_task", "_pid")
    df = frame.with_columns(
        pl.Series(c, v, dtype=pl.Int64 if c in ints else (pl.Boolean if c in ("_tee", "record") else pl.String))
        for c, v in cols.items()
    )
    src_local = pl.col("src").replace_strict({s.index: s.local_rank for s in sources}, default=None, return_dtype=pl.Int64)
    src_task = pl.col("src").replace_strict({s.index: s.task for s in sources}, default=None, return_dtype=pl.Int64)
    df = df.with_columns(
        local_rank=pl.coalesce(pl.col("_local"), src_local),
        task=pl.coalesce(pl.col("_task"), src_task),
    )
    # srun's task label is the rank when nothing finer is on the line (srun launched the ranks itself).
    df = df.with_columns(
        rank=pl.coalesce(pl.col("_rank"), pl.when(pl.col("local_rank").is_null() & ~pl.col("_tee")).then(pl.col("task")))
    )
    origin = pl.col("msg").str.extract_groups(grammar.NCCL_ORIGIN)
    df = df.with_columns(origin.alias("_o")).unnest("_o")
    df = df.with_columns(
        host=pl.coalesce(pl.col("host"), pl.col("_host")),
        stream=pl.concat_str([pl.col("src").cast(pl.String), pl.col("_key")], separator="|"),
    )
    return df.drop("_rank", "_local", "_task", "_host", "_pid", "_key", "_tee", "pid", "tid", "dev")
