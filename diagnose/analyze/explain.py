"""What the report says around the root cause: the context the runbook asks for (OOM figures and
checklist, progress, failed configuration checks, launch pitfalls) and the one-line summary."""
from __future__ import annotations

from diagnose.analyze import findings

def enrich(root, ctx, job: dict) -> None:
    """Add the context the runbook asks for to the root cause: OOM figures and checklist, progress,
    failed configuration checks, launch pitfalls."""
    prog = findings.progress(ctx, root.time)
    if prog:
        root.details["progress"] = prog
    if root.category == "oom":
        root.details["oom"] = findings.oom_figures(" ".join([root.message, *root.traceback[-3:]]))
        root.details["checklist"] = findings.oom_checklist(root, ctx)
        if root.rank is not None and root.rank in ctx.memory:
            root.details["last_memory_report"] = ctx.memory[root.rank]
    if "no_root_evidence" in root.details:
        root.remediation = [
            "Collect every rank's own output: torchrun --log-dir (or --tee 3), srun --output=%x-%j-%t.out, "
            "and logs on shared storage (node-local paths vanish with the node).",
            "Decorate the entrypoint with torch.distributed.elastic.multiprocessing.errors.record so the "
            "failing rank's traceback reaches torchrun's summary and error.json.",
            *root.remediation,
        ]
    failed = [c for c in job["checks"] if c["status"] == "fail"]
    if failed:
        root.details["failed_checks"] = failed
    if root.category == "import" and ctx.launcher and "torchrun" in ctx.launcher:
        root.remediation.insert(
            0, "The job was launched with torchrun: a bare `torchrun` may not run in the project's venv; "
            "launch with `uv run python -m torch.distributed.run ...` (or the venv's python -m torch.distributed.run).",
        )
    if "inconsistent_arguments" in job:
        root.remediation.append(
            "Nodes printed different arguments (" + ", ".join(job["inconsistent_arguments"]) + "): make the command identical on every node."
        )


def summarize(root) -> str:
    who = f"rank {root.rank}" if root.rank is not None else "an unidentified rank"
    if root.host:
        who += f" on {root.host}"
    phase = root.details.get("phase")
    when = f" at {root.time:%Y-%m-%d %H:%M:%S}" if root.time else ""
    return f"{root.title}: {who}{f' in the {phase} phase' if phase else ''}{when}"
