"""What mdiag works out from the job's context, whatever the error was: the runbook's configuration
checks, the OOM checklist and figures, and how far training got.  Pure functions over plain data."""
from __future__ import annotations

from datetime import datetime

import regex

from diagnose.analyze.context import JobContext

_SIZE = r"(\d+(?:\.\d+)? (?:bytes|[KMGT]iB))"
_OOM_NEW = {
    "tried_to_allocate": regex.compile(r"Tried to allocate " + _SIZE),
    "gpu": regex.compile(r"GPU (\d+) has a total capac"),
    "total_capacity": regex.compile(r"has a total capac(?:i)?ty of " + _SIZE),
    "free": regex.compile(r"of which " + _SIZE + " is free"),
    "in_use_by_process": regex.compile(r"this process has " + _SIZE + " memory in use"),
    "allocated_by_pytorch": regex.compile(r"Of the allocated memory " + _SIZE + " is allocated by PyTorch"),
    "reserved_unallocated": regex.compile(r"and " + _SIZE + " is reserved by PyTorch but unallocated"),
}
_OOM_OLD = regex.compile(
    r"Tried to allocate " + _SIZE + r" \(GPU (\d+); " + _SIZE + r" total capacity; " + _SIZE + r" already allocated; "
    + _SIZE + r" free; " + _SIZE + r" reserved in total by PyTorch\)"
)


def oom_figures(message: str) -> dict:
    """The sizes in PyTorch's CUDA OOM message (all three generations of its wording)."""
    if m := _OOM_OLD.search(message):
        return {"tried_to_allocate": m[1], "gpu": int(m[2]), "total_capacity": m[3], "allocated_by_pytorch": m[4],
                "free": m[5], "reserved_by_pytorch": m[6]}
    out = {}
    for key, rx in _OOM_NEW.items():
        if m := rx.search(message):
            out[key] = int(m[1]) if key == "gpu" else m[1]
    return out


def _check(name: str, status: str, detail: str) -> dict:
    return {"check": name, "status": status, "detail": detail}


def config_checks(ctx: JobContext) -> list[dict]:
    """WORLD_SIZE = TP×PP×CP×DP, heads % TP, groups % TP, layers % PP, batch split, seq % 2CP, and the
    CUDA_DEVICE_MAX_CONNECTIONS rules: pass / fail / unknown with the numbers."""
    v = ctx.value
    world, tp, pp, cp, dp = v("world_size"), v("tensor_model_parallel_size"), v("pipeline_model_parallel_size"), \
        v("context_parallel_size") or (1 if v("tensor_model_parallel_size") else None), v("data_parallel_size")
    out = []
    if None in (world, tp, pp, cp):
        out.append(_check("world_size", "unknown", "world size or TP/PP/CP not in the logs"))
    else:
        model = tp * pp * cp
        if world % model:
            out.append(_check("world_size", "fail", f"WORLD_SIZE {world} is not divisible by TP×PP×CP = {tp}×{pp}×{cp} = {model}"))
        else:
            dp = dp or world // model
            ok = world == tp * pp * cp * dp
            out.append(_check("world_size", "pass" if ok else "fail", f"WORLD_SIZE {world} = TP {tp} × PP {pp} × CP {cp} × DP {dp}"))
    for key, label in (("num_attention_heads", "heads"), ("num_query_groups", "query groups")):
        n = v(key)
        if n is None or tp is None:
            if key == "num_attention_heads":
                out.append(_check(f"{key}_vs_tp", "unknown", f"{key} or TP not in the logs"))
            continue
        if key == "num_query_groups" and (n % tp == 0 or tp % n == 0):
            out.append(_check(f"{key}_vs_tp", "pass", f"{label} {n} vs TP {tp}"))
        elif key == "num_query_groups":
            out.append(_check(f"{key}_vs_tp", "fail", f"{label} {n} is neither a multiple nor a divisor of TP {tp}"))
        else:
            status = "pass" if n % tp == 0 else "fail"
            out.append(_check(f"{key}_vs_tp", status, f"{label} {n} % TP {tp} = {n % tp}"))
    layers, vpp = v("num_layers"), v("virtual_pipeline_model_parallel_size")
    if layers is None or pp is None:
        out.append(_check("num_layers_vs_pp", "unknown", "num_layers or PP not in the logs"))
    else:
        per = pp * (vpp or 1)
        out.append(_check("num_layers_vs_pp", "pass" if layers % per == 0 else "fail",
                          f"num_layers {layers} % (PP {pp}{f' × VPP {vpp}' if vpp else ''}) = {layers % per}"))
    gbs, mbs = v("global_batch_size"), v("micro_batch_size")
    if None in (gbs, mbs, dp) or not dp:
        out.append(_check("global_batch_size", "unknown", "global/micro batch size or DP not in the logs"))
    else:
        out.append(_check("global_batch_size", "pass" if gbs % (mbs * dp) == 0 else "fail",
                          f"global batch {gbs} % (micro batch {mbs} × DP {dp}) = {gbs % (mbs * dp)}"))
    seq = v("seq_length")
    if cp and cp > 1:
        if seq is None:
            out.append(_check("seq_length_vs_cp", "unknown", "seq_length not in the logs"))
        else:
            out.append(_check("seq_length_vs_cp", "pass" if seq % (2 * cp) == 0 else "fail",
                              f"seq_length {seq} % (2 × CP {cp}) = {seq % (2 * cp)}"))
    out.append(cuda_device_max_connections(ctx, tp, cp))
    return out


def _arch(gpu: str | None) -> str | None:
    if not gpu:
        return None
    g = gpu.upper()
    if g.startswith(("B1", "B2", "B3", "GB")):
        return "blackwell"
    if g.startswith(("H", "GH", "A", "V", "L", "RTX")):
        return "pre-blackwell"
    return None


def cuda_device_max_connections(ctx: JobContext, tp, cp) -> dict:
    """The runbook's rules: pre-Blackwell with TP>1 or CP>1 (not FSDP) needs 1; FSDP must not use 1;
    overlap_moe_expert_parallel_comm wants 32; Blackwell doesn't need it."""
    value = ctx.cuda_device_max_connections
    fsdp = any(ctx.args.get(k) for k in ("use_torch_fsdp2", "use_megatron_fsdp", "use_custom_fsdp"))
    name = "cuda_device_max_connections"
    shown = "unset or not printed" if value is None else str(value)
    if fsdp:
        if value == 1:
            return _check(name, "fail", "FSDP must not run with CUDA_DEVICE_MAX_CONNECTIONS=1")
        return _check(name, "pass" if value is not None else "unknown", f"FSDP: CUDA_DEVICE_MAX_CONNECTIONS {shown} (must not be 1)")
    if ctx.args.get("overlap_moe_expert_parallel_comm"):
        if value is None:
            return _check(name, "unknown", "overlap_moe_expert_parallel_comm wants CUDA_DEVICE_MAX_CONNECTIONS=32; value not in the logs")
        return _check(name, "pass" if value == 32 else "fail", f"overlap_moe_expert_parallel_comm: CUDA_DEVICE_MAX_CONNECTIONS={value} (wants 32)")
    if tp is None:
        return _check(name, "unknown", "TP/CP not in the logs")
    if (tp or 1) <= 1 and (cp or 1) <= 1:
        return _check(name, "pass", "TP = CP = 1: no requirement")
    arch = _arch(ctx.gpu)
    if arch == "blackwell":
        return _check(name, "pass", f"{ctx.gpu} (Blackwell) does not need CUDA_DEVICE_MAX_CONNECTIONS")
    if value is None:
        return _check(name, "unknown", f"TP {tp}, CP {cp or 1}{' on ' + ctx.gpu if ctx.gpu else ''}: needs CUDA_DEVICE_MAX_CONNECTIONS=1 before Blackwell; value not in the logs")
    if arch is None:
        return _check(name, "pass" if value == 1 else "unknown", f"CUDA_DEVICE_MAX_CONNECTIONS={value}; GPU generation not in the logs")
    return _check(name, "pass" if value == 1 else "fail", f"{ctx.gpu}, TP {tp}, CP {cp or 1}: CUDA_DEVICE_MAX_CONNECTIONS={value} (needs 1)")


def oom_checklist(root, ctx: JobContext) -> dict:
    """The runbook's OOM record: rank, phase, batch size, sequence length, parallelism, peak memory."""
    mem = ctx.memory.get(root.rank) if root.rank is not None else None
    if mem is None and ctx.memory:
        mem = max(ctx.memory.values(), key=lambda m: m["max_allocated_mb"])
    v = ctx.value
    items = {
        "rank": root.rank,
        "phase": root.details.get("phase"),
        "micro_batch_size": v("micro_batch_size"),
        "global_batch_size": v("global_batch_size"),
        "seq_length": v("seq_length"),
        "parallelism": None if v("tensor_model_parallel_size") is None else {
            "tp": v("tensor_model_parallel_size"), "pp": v("pipeline_model_parallel_size"),
            "cp": v("context_parallel_size"), "dp": v("data_parallel_size"),
        },
        "peak_memory_mb": mem and mem["max_allocated_mb"],
    }
    return {"items": items, "missing": [k for k, x in items.items() if x is None]}


def progress(ctx: JobContext, failed_at: datetime | None) -> dict:
    """How far training got: the last iteration logged and how long before the failure."""
    it = ctx.iteration
    if not it:
        return {}
    out = {"last_iteration": it["iteration"], "train_iters": it["of"]}
    if it.get("time") and failed_at and failed_at >= it["time"]:
        out["seconds_after_last_iteration"] = int((failed_at - it["time"]).total_seconds())
    if it.get("nan_iterations"):
        out["nan_iterations"] = it["nan_iterations"]
    return out


def ranks_without_output(ctx: JobContext, sources) -> str | None:
    """With one file per rank (srun %t), the ranks of the job's world that have no file at all."""
    world = ctx.world_size
    have = {s.task for s in sources if s.layout == "per-rank" and s.task is not None}
    if not world or not have or max(have) >= world:
        return None
    gaps, prev = [], -1  # the gaps between the ranks that have a file: no list of the whole world (it may be huge)
    for r in sorted(have) + [world]:
        if r > prev + 1:
            gaps.append(f"{prev + 1}-{r - 1}" if r - 1 > prev + 1 else str(prev + 1))
        prev = r
    return ", ".join(gaps) or None


def rank_ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 5] → '0-2, 5'."""
    out, start, prev = [], None, None
    for r in sorted(ranks):
        if start is None:
            start = prev = r
        elif r == prev + 1:
            prev = r
        else:
            out.append(f"{start}-{prev}" if prev > start else str(start))
            start = prev = r
    if start is not None:
        out.append(f"{start}-{prev}" if prev > start else str(start))
    return ", ".join(out)
