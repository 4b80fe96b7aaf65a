"""Job context read from the logs: Megatron's arguments dump and parallel sizes, torchrun's
ChildFailedError summaries (which map local ranks to global ranks and hosts)."""
from __future__ import annotations

import bisect

from dataclasses import dataclass, field
from datetime import datetime

import polars as pl
import regex

_ARG = regex.compile(r"^  (\S+) \.+ (.*?)\s*$")
_WORLD = regex.compile(
    r"using world size: (?P<world>\d+), data-parallel size: (?P<dp>\d+), context-parallel size: (?P<cp>\d+)"
    r".*?tensor-model-parallel size: (?P<tp>\d+), pipeline-model-parallel size: (?P<pp>\d+)"
)
_FIELD = regex.compile(r"^\s+(?P<k>time|host|rank|exitcode|error_file|traceback)\s+: (?P<v>.*?)\s*$"
                       # a paste that lost the indentation keeps the entry's rank and exit code recognisable
                       # (torch 1.9-1.10 wrote the keys unpadded: `  rank: 1 (local_rank: 1)`)
                       r"|^\s*(?P<k>rank|exitcode): (?P<v>-?\d+ \((?:local_rank|pid): -?\d+\).*?)\s*$")
# DeepSpeed's launcher: global_rank_mapping=defaultdict(<class 'list'>, {'10.0.0.1': [0, 1], '10.0.0.2': [2, 3]})
_MAPPING = regex.compile(r"global_rank_mapping=.*?\{(?P<m>.*)\}")
_MAPPING_HOST = regex.compile(r"'(?P<host>[^']+)': \[(?P<ranks>[\d, ]*)\]")
# NCCL_DEBUG=INFO names each process's rank in a communicator: `host:pid:tid [dev] NCCL INFO comm 0x… rank 3
# nranks 8 … Init COMPLETE`, and (old NCCL) the ring it builds: `… NCCL INFO Ring 00 : 3[3d000] -> 0[1a000] via …`
# (the lines the scan keeps for it, grammar.KEEP_LITERAL)
_NCCL_RANK = regex.compile(
    r"^(?:\[[^\]]*\] ?)?(?P<host>[\w.-]*[A-Za-z][\w.-]*):(?P<pid>\d+):\d+ \[\d+\] NCCL INFO "
    r"(?:.*?\bcomm 0x[0-9a-f]+ rank (?P<rank>\d+) n[Rr]anks (?P<n>\d+)|Ring 00 : (?P<ring>\d+)(?:\[\w+\])? ->)")
# one process in all: its rank is 0 (also LAVIS's `| distributed init (rank 0, world 1): env://`)
_ONE_PROCESS = regex.compile(r"\b(?:world[_ ]size|WORLD_SIZE|dist_world_size)(?: is|=|:| =)\s*1\b(?![.\d])|\(rank 0, world 1\)")
# one process a node (torch.distributed.launch's and torchrun's `--nproc_per_node=1`): rank 0 where the job ran on one node
_ONE_PER_NODE = regex.compile(r"--nproc[_-]per[_-]node[= ]1\b")
# the job runs on one node: a local rank is then the global rank. torchrun's `--nnodes=1` (quoted or not),
# `max_nodes: 1`, `--standalone`, its rendezvous result with one agent (`group_world_size=1`); DeepSpeed's
# runner without a hostfile (it then runs on this host only) and its launcher's WORLD INFO DICT with a single host
_ONE_NODE = regex.compile(
    r"""\bnnodes[=: ]+["']?1\b(?!:)|\bmax_nodes\s*[:=]\s*1\b|--standalone\b|\bgroup_world_size=1\b"""
    r"|Unable to find hostfile, will proceed with training with local resources only"
    r"|WORLD INFO DICT: \{'[^']+': \[[\d, ]*\]\}"
)
# ... and what says it ran on several, which outweighs the above: torchrun's `--nnodes=2` (`NNODES=2`,
# `'--nnodes', '2'`, an elastic range `1:4`, its launch config's `min_nodes : 2`), a node rank above 0,
# accelerate's `--num_machines 2`, DeepSpeed's WORLD INFO DICT with several hosts, SLURM's node count
_MANY_NODES = regex.compile(
    r"""(?i:\bnnodes['"]?(?:[=: ]+|,\s*)["']?)(?:[2-9]|[1-9]\d+|\d+:(?:[2-9]|[1-9]\d+))\b"""
    r"""|(?i:\bnode[_-]rank['"]?(?:[=: ]+|,\s*)["']?)[1-9]|\b(?:min|max)_nodes\s*[:=]\s*(?:[2-9]|[1-9]\d+)\b"""
    r"|\bnum_machines[`'\"]?(?:[=: ]+| was set to a value of )[`'\"]?(?:[2-9]|[1-9]\d+)\b|\bgroup_world_size=(?:[2-9]|[1-9]\d+)\b"
    r"|WORLD INFO DICT: \{'[^']+': \[[\d, ]*\], '|\bSLURM_(?:JOB_)?NNODES=(?:[2-9]|[1-9]\d+)\b"
)
# more ranks than one node usually holds (8 GPUs): beyond it, a local rank is not taken for the global rank
_NODE_SIZE = 8
_CF_RANK = regex.compile(r"(?P<rank>-?\d+) \(local_rank: (?P<local>-?\d+)\)")
_CF_EXIT = regex.compile(r"(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)")

ARG_KEYS = {
    "world_size": int, "tensor_model_parallel_size": int, "pipeline_model_parallel_size": int,
    "virtual_pipeline_model_parallel_size": int, "num_layers_per_virtual_pipeline_stage": int,
    "context_parallel_size": int, "expert_model_parallel_size": int, "expert_tensor_parallel_size": int,
    "data_parallel_size": int, "micro_batch_size": int, "global_batch_size": int, "seq_length": int,
    "max_position_embeddings": int, "num_layers": int, "hidden_size": int, "ffn_hidden_size": int,
    "num_attention_heads": int, "num_query_groups": int, "group_query_attention": bool,
    "num_experts": int, "sequence_parallel": bool, "use_distributed_optimizer": bool,
    "use_torch_fsdp2": bool, "use_megatron_fsdp": bool, "use_custom_fsdp": bool,
    "overlap_moe_expert_parallel_comm": bool, "bf16": bool, "fp16": bool, "fp8": str,
    "params_dtype": str, "train_iters": int, "recompute_granularity": str, "distributed_backend": str,
    "distributed_timeout_minutes": float,
}
_MEMORY = regex.compile(
    r"\[Rank (?P<rank>\d+)\] \(after (?P<it>\d+) iterations\) memory \(MB\) \| allocated: (?P<a>\d+(?:\.\d+)?) \| "
    r"max allocated: (?P<ma>\d+(?:\.\d+)?) \| reserved: (?P<r>\d+(?:\.\d+)?) \| max reserved: (?P<mr>\d+(?:\.\d+)?)"
)
_ITER = regex.compile(r"iteration\s+(?P<it>\d+)/\s*(?P<of>\d+) \|")
_NAN_ITERS = regex.compile(r"number of nan iterations:\s+(?P<n>\d+)")
_CDMC = regex.compile(r"CUDA_DEVICE_MAX_CONNECTIONS\s*[=:]\s*['\"]?(?P<v>\d+)")
_GPU = regex.compile(r"NVIDIA (?P<gpu>(?:GB|[ABHLV])\d{2,3}\w*(?:[ -]\w+)?|A100[\w -]*|RTX \w+)")


def _convert(conv, val: str):
    if conv is bool:
        if val in ("True", "False"):
            return val == "True"
        raise ValueError(val)
    if val == "None":
        return None
    return conv(val)


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
    end: int = 0  # last line of the entry (its traceback echo runs until the next entry)
    exit_line: int | None = None  # the entry's `exitcode : N (pid: P)` line, and its text
    exit_text: str | None = None


@dataclass
class JobContext:
    args: dict = field(default_factory=dict)
    parallel: dict = field(default_factory=dict)
    arg_dumps: list[dict] = field(default_factory=list)  # one per printed arguments dump (per node)
    memory: dict[int, dict] = field(default_factory=dict)  # rank → last Megatron memory report
    iteration: dict = field(default_factory=dict)  # last iteration line: it, of, time, nan_iterations
    cuda_device_max_connections: int | None = None
    gpu: str | None = None
    launcher: str | None = None
    _by_src: dict | None = field(default=None, repr=False)  # failures by file, for echo_of
    failures: list[ChildFailure] = field(default_factory=list)
    local_to_global: dict[tuple[str | None, int], int] = field(default_factory=dict)
    rank_host: dict[int, str] = field(default_factory=dict)
    one_node: bool = False  # the logs say the job ran on one node (see _ONE_NODE)
    many_nodes: bool = False  # the logs show another node (several hosts, a node rank > 0, …): outweighs one_node
    one_process: bool = False  # the logs say the world size is 1
    one_per_node: bool = False  # the launcher was told one process a node (`--nproc_per_node=1`)
    nccl_ranks: dict[tuple[str, int], tuple[int, int, int]] = field(default_factory=dict)  # (host, pid) → (rank, src, line)
    nccl_procs: set[tuple[str, int]] = field(default_factory=set)  # (host, pid) of processes that set up a communicator
    # (src, line) of XLA's words that a rendezvous it had warned about completed after all (a false alarm before them)
    xla_unstuck: list[tuple[int, int]] = field(default_factory=list)

    @property
    def world_size(self) -> int | None:
        return self.parallel.get("world_size") or self.args.get("world_size")

    def global_rank(self, local_rank: int | None, host: str | None = None) -> int | None:
        if local_rank is None:
            return None
        mapped = self._mapped(local_rank, host)
        if mapped is not None:
            return mapped
        return local_rank if self.local_is_global(host) else None

    def rank_basis(self, local_rank: int | None, host: str | None = None) -> dict:
        """`rank_from` for a global rank that global_rank took from the local rank itself, else {}."""
        if local_rank is None or self._mapped(local_rank, host) is not None or not self.local_is_global(host):
            return {}
        basis = "the logs say the job ran on one node" if self.one_node else "the logs show no other node"
        return {"rank_from": f"local rank {local_rank}: {basis}"}

    def _mapped(self, local_rank: int, host: str | None) -> int | None:
        """The global rank a launcher's summary or mapping gives this local rank (of the one host it names,
        when the line names none)."""
        if (host, local_rank) in self.local_to_global:
            return self.local_to_global[(host, local_rank)]
        hosts = {h for h, _ in self.local_to_global}
        if host is None and len(hosts) == 1:  # one node: its agent's summary gives the mapping
            return self.local_to_global.get((next(iter(hosts)), local_rank))
        return None

    def local_is_global(self, host: str | None = None) -> bool:
        """Is a local rank the global rank, not by a mapping the logs print but because the job ran on one
        node, said or the only one the logs show (the summary names only the ranks that failed)?"""
        hosts = {h for h, _ in self.local_to_global}
        return not self.many_nodes and len(hosts) <= 1 and (host is None or hosts <= {host})

    def echo_of(self, src: int, line: int) -> ChildFailure | None:
        """The torchrun summary entry whose echoed traceback contains this line, if any."""
        if self._by_src is None:
            self._by_src = {}
            for f in sorted(self.failures, key=lambda f: (f.src, f.line)):
                self._by_src.setdefault(f.src, ([], []))
                self._by_src[f.src][0].append(f.line)
                self._by_src[f.src][1].append(f)
        starts, entries = self._by_src.get(src, ((), ()))
        i = bisect.bisect_right(starts, line) - 1
        return entries[i] if i >= 0 and line <= entries[i].end else None

    def value(self, key: str):
        """A parallel size or argument, from the 'using world size' line first, then the arguments dump."""
        v = self.parallel.get(key)
        return v if v is not None else self.args.get(key)

    def to_dict(self) -> dict:
        out = {k: self.args[k] for k in ARG_KEYS if k in self.args}
        out.update(self.parallel)
        if self.cuda_device_max_connections is not None:
            out["cuda_device_max_connections"] = self.cuda_device_max_connections
        if self.gpu:
            out["gpu"] = self.gpu
        if self.launcher:
            out["launcher"] = self.launcher
        if self.iteration:
            out["last_iteration"] = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in self.iteration.items()}
        if len(self.arg_dumps) > 1:
            diff = _differing(self.arg_dumps)
            if diff:
                out["inconsistent_arguments"] = diff
        return out


def _differing(dumps: list[dict]) -> dict:
    """Arguments whose values differ between the dumps printed by different nodes."""
    keys = set().union(*dumps) - {"rank", "local_rank"}
    return {k: sorted({str(d.get(k)) for d in dumps}) for k in sorted(keys) if len({str(d.get(k)) for d in dumps}) > 1}


XLA_UNSTUCK = "nccl.xla_rendezvous_unstuck"


def read_context(df: pl.DataFrame) -> JobContext:
    ctx = JobContext()
    msgs = df.filter(
        pl.col("msg").str.contains(
            r"^  \S+ \.{3,} |using world size:|Root Cause \(first observed|^Failures:|"
            r"^\s+(?:time|host|rank|exitcode|error_file|traceback)\s+: |^\s*(?:rank|exitcode): -?\d+ \(|^Root Cause:\s*$|^Other Failures:|"
            r"arguments ---|memory \(MB\) \||"
            r"iteration\s+\d+/|CUDA_DEVICE_MAX_CONNECTIONS|NVIDIA |torch/distributed/run\.py|elastic|srun: |slurmstepd|"
            r"global_rank_mapping=|(?i:nnodes|node[_-]rank)|(?:min|max)_nodes|--standalone|hostfile|WORLD INFO DICT|"
            r"(?i:world[_ ]size)|\(rank 0, world 1\)|--nproc[_-]per[_-]node[= ]1\b|num_machines|SLURM_(?:JOB_)?NNODES|NCCL INFO (?:.*comm 0x|Ring 00)"
        )
    ).select("src", "lineno", "msg", "ts", "time")
    in_root = False
    nccl: list[tuple] = []  # (host, pid, rank, nranks or None for a ring line, src, line)
    cur: ChildFailure | None = None
    dump: dict | None = None
    # an srun task id on any kept line (its --label prefix, or %t in a per-task file name)
    launchers = {"srun"} if df.get_column("task").is_not_null().any() else set()
    for src, lineno, msg, ts, time in msgs.iter_rows():
        if "-- arguments --" in msg or "--- arguments ---" in msg:
            dump = {}
            ctx.arg_dumps.append(dump)
            continue
        if m := _ARG.match(msg):
            key, val = m.group(1), m.group(2)
            if dump is not None:
                dump[key] = val
            if key in ARG_KEYS and key not in ctx.args:
                try:
                    ctx.args[key] = _convert(ARG_KEYS[key], val)
                except ValueError:
                    pass
            continue
        if m := _MEMORY.search(msg):
            ctx.memory[int(m["rank"])] = {
                "after_iterations": int(m["it"]), "allocated_mb": float(m["a"]), "max_allocated_mb": float(m["ma"]),
                "reserved_mb": float(m["r"]), "max_reserved_mb": float(m["mr"]),
            }
            continue
        if m := _ITER.search(msg):
            ctx.iteration = {"iteration": int(m["it"]), "of": int(m["of"]), "time": time}
            if n := _NAN_ITERS.search(msg):
                ctx.iteration["nan_iterations"] = int(n["n"])
            continue
        if "NCCL INFO" in msg and (m := _NCCL_RANK.match(msg)):
            rank = int(m["rank"] if m["rank"] is not None else m["ring"])
            nccl.append((m["host"], int(m["pid"]), rank, int(m["n"]) if m["n"] else None, src, lineno))
            continue
        if m := _CDMC.search(msg):
            ctx.cuda_device_max_connections = int(m["v"])
        if ctx.gpu is None and (m := _GPU.search(msg)):
            ctx.gpu = m["gpu"].strip()
        if "torch/distributed/run.py" in msg or "torch.distributed.elastic" in msg or "distributed/elastic/" in msg:
            launchers.add("torchrun")
        if msg.startswith(("srun: ", "slurmstepd")):
            launchers.add("srun")
        if m := _MAPPING.search(msg):
            for h in _MAPPING_HOST.finditer(m["m"]):
                for local, rank in enumerate(int(x) for x in h["ranks"].replace(" ", "").split(",") if x):
                    ctx.local_to_global[(h["host"], local)] = rank
                    ctx.rank_host.setdefault(rank, h["host"])
            continue
        if _ONE_NODE.search(msg):
            ctx.one_node = True
        if _MANY_NODES.search(msg):
            ctx.many_nodes = True
        if _ONE_PROCESS.search(msg):
            ctx.one_process = True
        if _ONE_PER_NODE.search(msg):
            ctx.one_per_node = True
        if m := _WORLD.search(msg):
            ctx.parallel = {
                "world_size": int(m["world"]), "data_parallel_size": int(m["dp"]),
                "context_parallel_size": int(m["cp"]), "tensor_model_parallel_size": int(m["tp"]),
                "pipeline_model_parallel_size": int(m["pp"]),
            }
            continue
        if "Root Cause (first observed" in msg or msg.rstrip() == "Root Cause:":
            in_root = True
            continue
        if msg.startswith(("Failures:", "Other Failures:")):
            in_root = False
            continue
        if m := _FIELD.match(msg):
            k, v = m["k"], m["v"]
            # (an entry starts at its time; where its time line was not kept, at a field the entry already has)
            if (k == "time" or cur is None or cur.src != src or lineno - cur.line > 16
                    or (k == "host" and cur.host is not None) or (k == "rank" and cur.rank is not None)):
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
                cur.exit_line, cur.exit_text = lineno, msg.strip()
            elif k == "traceback":
                cur.traceback = v
    for a, b in zip(ctx.failures, ctx.failures[1:] + [None]):
        a.end = b.line - 1 if b is not None and b.src == a.src else a.line + 400
    if launchers:
        ctx.launcher = "+".join(sorted(launchers, key=["srun", "torchrun"].index))
    clash = set()  # (two nodes' summaries without hosts, one local rank each: which node a line is from is unknown)
    for f in ctx.failures:
        if f.rank is not None and f.local_rank is not None:
            if ctx.local_to_global.setdefault((f.host, f.local_rank), f.rank) != f.rank:
                clash.add((f.host, f.local_rank))
            if f.host:
                ctx.rank_host[f.rank] = f.host
    ctx.many_nodes = ctx.many_nodes or _shows_many_nodes(df, ctx)  # (a clash shows another node too)
    for key in clash:
        del ctx.local_to_global[key]
    ctx.nccl_ranks = _nccl_ranks(nccl, ctx.world_size)
    ctx.nccl_procs = {(host, pid) for host, pid, *_ in nccl}
    if "pid" in df.columns:
        ctx.xla_unstuck = df.filter(pl.col("pid") == XLA_UNSTUCK).select("src", "lineno").rows()
    return ctx


def _nccl_ranks(seen: list[tuple], world: int | None) -> dict:
    """(host, pid) → (rank, src, line) from NCCL's own lines: its communicators of the whole job (as many ranks
    as the world, or as the largest one when the world size is not in the logs; a ring line where no
    communicator line is), and only where each process has one rank there and no two share one (a
    communicator of a subgroup numbers its members anew: such ranks are no global ranks)."""
    comms = [s for s in seen if s[3] is not None]
    if comms:
        size = world or max(s[3] for s in comms)
        seen = [s for s in comms if s[3] == size]
    ranks: dict[tuple[str, int], set[int]] = {}
    first: dict[tuple[str, int], tuple] = {}
    for host, pid, rank, _n, src, line in seen:
        ranks.setdefault((host, pid), set()).add(rank)
        first.setdefault((host, pid), (rank, src, line))
    owners: dict[int, int] = {}
    for r in ranks.values():
        for rank in r:
            owners[rank] = owners.get(rank, 0) + 1
    return {k: first[k] for k, r in ranks.items() if len(r) == 1 and owners[next(iter(r))] == 1}


def _shows_many_nodes(df: pl.DataFrame, ctx: JobContext) -> bool:
    """Do the logs show more than one node: several hosts or srun tasks, a rank whose local rank differs,
    or more ranks than one node usually holds?"""
    if len({h for h, _ in ctx.local_to_global} | set(ctx.rank_host.values())) > 1:
        return True
    if any(g != l for (_, l), g in ctx.local_to_global.items()):
        return True
    if (ctx.world_size or 0) > _NODE_SIZE:
        return True
    if df.height == 0:
        return False
    # the same local rank in two files: two nodes' logs (per-node files, or two --log-dir trees)
    locals_ = df.filter(pl.col("local_rank").is_not_null()).group_by("local_rank").agg(pl.col("src").n_unique())
    if locals_.height and locals_.get_column("src").max() > 1:
        return True
    top, task = df.get_column("rank").max(), df.get_column("task").max()
    # srun's task ids: one agent per node (task = node), or one task per rank across the allocation
    return ((top is not None and top >= _NODE_SIZE) or (task is not None and task > 0)
            or df.get_column("host").drop_nulls().n_unique() > 1)
