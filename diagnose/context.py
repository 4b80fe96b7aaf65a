"""Job context read from the logs: Megatron's arguments dump and parallel sizes, torchrun's
ChildFailedError summaries (which map local ranks to global ranks and hosts)."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import polars as pl
import regex

_ARG = regex.compile(r"^  (\S+) \.+ (.*?)\s*$")
_WORLD = regex.compile(
    r"using world size: (?P<world>\d+), data-parallel size: (?P<dp>\d+), context-parallel size: (?P<cp>\d+)"
    r".*?tensor-model-parallel size: (?P<tp>\d+), pipeline-model-parallel size: (?P<pp>\d+)"
)
_FIELD = regex.compile(r"^\s+(?P<k>time|host|rank|exitcode|error_file|traceback)\s+: (?P<v>.*?)\s*$")
_CF_RANK = regex.compile(r"(?P<rank>-?\d+) \(local_rank: (?P<local>-?\d+)\)")
_CF_EXIT = regex.compile(r"(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)")

ARG_KEYS = {
    "world_size": int, "tensor_model_parallel_size": int, "pipeline_model_parallel_size": int,
    "virtual_pipeline_model_parallel_size": int, "context_parallel_size": int, "expert_model_parallel_size": int,
    "data_parallel_size": int, "micro_batch_size": int, "global_batch_size": int, "seq_length": int,
    "num_layers": int, "hidden_size": int, "num_attention_heads": int, "num_query_groups": int,
    "sequence_parallel": str, "use_distributed_optimizer": str, "train_iters": int,
}


@dataclass
class ChildFailure:
    """One entry of torchrun's ChildFailedError summary."""

    src: int
    line: int
    root: bool
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    exitcode: int | None = None
    pid: int | None = None
    time: datetime | None = None
    traceback: str | None = None


@dataclass
class JobContext:
    args: dict = field(default_factory=dict)
    parallel: dict = field(default_factory=dict)
    failures: list[ChildFailure] = field(default_factory=list)
    local_to_global: dict[tuple[str | None, int], int] = field(default_factory=dict)
    rank_host: dict[int, str] = field(default_factory=dict)

    @property
    def world_size(self) -> int | None:
        return self.parallel.get("world_size") or self.args.get("world_size")

    def global_rank(self, local_rank: int | None, host: str | None = None) -> int | None:
        if local_rank is None:
            return None
        if (host, local_rank) in self.local_to_global:
            return self.local_to_global[(host, local_rank)]
        hosts = {h for h, _ in self.local_to_global}
        if len(hosts) == 1 and host is None:  # one node: its agent's summary gives the mapping
            return self.local_to_global.get((next(iter(hosts)), local_rank))
        return None

    def to_dict(self) -> dict:
        out = {k: self.args[k] for k in ARG_KEYS if k in self.args}
        out.update(self.parallel)
        return out


def read_context(df: pl.DataFrame) -> JobContext:
    ctx = JobContext()
    msgs = df.filter(
        pl.col("msg").str.contains(r"^  \S+ \.{3,} |using world size:|Root Cause \(first observed|^Failures:|^\s+(?:time|host|rank|exitcode|error_file|traceback)\s+: ")
    ).select("src", "lineno", "msg", "ts")
    in_root = False
    cur: ChildFailure | None = None
    for src, lineno, msg, ts in msgs.iter_rows():
        if m := _ARG.match(msg):
            key, val = m.group(1), m.group(2)
            if key in ARG_KEYS and key not in ctx.args:
                conv = ARG_KEYS[key]
                try:
                    ctx.args[key] = conv(val) if conv is int else val
                except ValueError:
                    pass
            continue
        if m := _WORLD.search(msg):
            ctx.parallel = {
                "world_size": int(m["world"]), "data_parallel_size": int(m["dp"]),
                "context_parallel_size": int(m["cp"]), "tensor_model_parallel_size": int(m["tp"]),
                "pipeline_model_parallel_size": int(m["pp"]),
            }
            continue
        if "Root Cause (first observed" in msg:
            in_root = True
            continue
        if msg.startswith("Failures:"):
            in_root = False
            continue
        if m := _FIELD.match(msg):
            k, v = m["k"], m["v"]
            if k == "time" or cur is None or cur.src != src or lineno - cur.line > 8:
                cur = ChildFailure(src=src, line=lineno, root=in_root)
                ctx.failures.append(cur)
            if k == "time":
                cur.time = ts
            elif k == "host":
                cur.host = v
            elif k == "rank" and (r := _CF_RANK.search(v)):
                cur.rank, cur.local_rank = int(r["rank"]), int(r["local"])
            elif k == "exitcode" and (e := _CF_EXIT.search(v)):
                cur.exitcode, cur.pid = int(e["code"]), int(e["pid"])
            elif k == "traceback":
                cur.traceback = v
    for f in ctx.failures:
        if f.rank is not None and f.local_rank is not None:
            ctx.local_to_global[(f.host, f.local_rank)] = f.rank
            if f.host:
                ctx.rank_host[f.rank] = f.host
    return ctx
