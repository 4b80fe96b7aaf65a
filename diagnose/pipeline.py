"""The pipeline: collect → scan → attribute → timeline → tracebacks → label → root → Diagnosis."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from diagnose.read import attribute, collect, rejoin, scan, scan_deadline, timeline
from diagnose.analyze import context, duplicates, explain, findings, label, loose, root as choose, summaries, tracebacks
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
    files, warnings = collect.expand([str(p) for p in paths], deadline=deadline)
    sources = collect.describe(files)
    pats = patterns_mod.load(tuple(Path(d) for d in pattern_dirs))
    by_id = {p.id: p for p in pats}

    summary: dict = {}
    kept, read_warnings = scan.scan(sources, [p.regex for p in pats], progress, deadline=deadline, summary=summary)
    warnings += read_warnings
    if deadline:
        kept, cut = scan_deadline.trim(kept, deadline)
        warnings += [cut] if cut else []
    if deadline and deadline.partial:
        warnings.append(deadline.summary())
    df = attribute.attribute(kept, sources)
    df, _year = timeline.add_times(df, sources)
    df = label.match_patterns(df, pats)
    df = tracebacks.flags(df)
    ctx = context.read_context(df)

    multi = set(df.group_by("src").agg(pl.col("stream").n_unique().alias("n")).filter(pl.col("n") > 1)["src"].to_list())
    chains = tracebacks.assemble(df, multi)
    events = label.build_events(df, chains, sources, by_id, ctx)
    events += [e for e in (duplicates.duplicate_rank(df, sources, by_id),) if e]
    cut = label.cut_traceback(chains, sources, ctx, by_id)
    root_ev, same, notes = choose.choose_root(events, ctx, by_id, label.traceback_starts(chains, sources, ctx),
                                              failed=cut is not None)
    if root_ev is None and (root_ev := cut):
        notes = {"confidence": "low", "no_root_evidence": "the traceback is cut off before its exception"}
    if root_ev is None and (root_ev := label.summary_root(sources, ctx, by_id)):
        notes = {"confidence": "low", "no_root_evidence": "the failing rank's own error is not in these logs"}
    if root_ev is not None:
        label.point_at_root_cause_entry(root_ev, sources, ctx, by_id)
        notes = {**notes, **loose.kind_from_words(root_ev, by_id)}
    root = choose.make_root(root_ev, same, notes, by_id, ctx) if root_ev else None
    job = ctx.to_dict()
    job["checks"] = findings.config_checks(ctx)
    silent = findings.ranks_without_output(ctx, sources)
    if silent:
        job["ranks_without_output"] = silent
        warnings.append(f"no output from ranks {silent}: were their logs written to a node-local path?")
    if root:
        explain.enrich(root, ctx, job)
        root.summary = explain.summarize(root)
    diagnosis = Diagnosis(
        status="failed" if root else "no_failure_found",
        root_cause=root,
        symptoms=summaries.symptoms(events, root_ev, same, by_id),
        ranks=summaries.rank_summaries(df, events, ctx, sources),
        sources=sources,
        job=job,
        warnings=warnings,
        partial=bool(deadline and deadline.partial),
        summarised=bool(summary.get("summarised")),
        summarised_lines=summary.get("summarised_lines", 0),
    )
    rejoin.to_physical(diagnosis, sources)  # file:line of a rejoined log points at the line in the file
    return diagnosis
