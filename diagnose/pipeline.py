"""The pipeline: collect → scan → attribute → timeline → tracebacks → classify → Diagnosis."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from diagnose.read import attribute, collect, scan, timeline
from diagnose.analyze import classify, context, findings, tracebacks
from diagnose.patterns import library as patterns_mod
from diagnose.model import Diagnosis


def diagnose(
    paths: list[str | Path],
    pattern_dirs: tuple[str | Path, ...] = (),
    progress: Callable[[int], None] | None = None,
    timeout: float | None = None,
) -> Diagnosis:
    """Diagnose the logs at `paths` (files, folders, globs).  Raises collect.InputError on bad input.
    With `timeout` (seconds), reading stops when it is reached and the diagnosis is marked partial."""
    deadline = scan.Deadline(timeout) if timeout else None
    files, warnings = collect.expand([str(p) for p in paths])
    sources = collect.describe(files)
    pats = patterns_mod.load(tuple(Path(d) for d in pattern_dirs))
    by_id = {p.id: p for p in pats}

    summary: dict = {}
    kept, read_warnings = scan.scan(sources, [p.regex for p in pats], progress, deadline=deadline, summary=summary)
    warnings += read_warnings
    if deadline and deadline.fired:
        warnings.append(deadline.summary())
    df = attribute.attribute(kept, sources)
    df, _year = timeline.add_times(df, sources)
    df = classify.match_patterns(df, pats)
    df = tracebacks.flags(df)
    ctx = context.read_context(df)

    multi = set(df.group_by("src").agg(pl.col("stream").n_unique().alias("n")).filter(pl.col("n") > 1)["src"].to_list())
    chains = tracebacks.assemble(df, multi)
    events = classify.build_events(df, chains, sources, by_id, ctx)
    root_ev, same, notes = classify.choose_root(events, ctx)
    root = classify.make_root(root_ev, same, notes, by_id, ctx) if root_ev else None
    job = ctx.to_dict()
    job["checks"] = findings.config_checks(ctx)
    silent = findings.ranks_without_output(ctx, sources)
    if silent:
        job["ranks_without_output"] = silent
        warnings.append(f"no output from ranks {silent}: were their logs written to a node-local path?")
    if root:
        enrich(root, ctx, job)
        root.summary = summarize(root)
    return Diagnosis(
        status="failed" if root else "no_failure_found",
        root_cause=root,
        symptoms=classify.symptoms(events, root_ev, same, by_id),
        ranks=classify.rank_summaries(df, events, ctx),
        sources=sources,
        job=job,
        warnings=warnings,
        partial=bool(deadline and deadline.fired),
        summarised=bool(summary.get("summarised")),
        summarised_lines=summary.get("summarised_lines", 0),
    )


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
