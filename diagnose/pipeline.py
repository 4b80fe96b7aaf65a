"""The pipeline: collect → scan → attribute → timeline → tracebacks → classify → Diagnosis."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from . import classify, collect, context, patterns as patterns_mod, scan, timeline, tracebacks
from .model import Diagnosis


def diagnose(
    paths: list[str | Path],
    pattern_dirs: tuple[str | Path, ...] = (),
    progress: Callable[[int], None] | None = None,
) -> Diagnosis:
    """Diagnose the logs at `paths` (files, folders, globs).  Raises collect.InputError on bad input."""
    files, warnings = collect.expand([str(p) for p in paths])
    sources = collect.describe(files)
    pats = patterns_mod.load(tuple(Path(d) for d in pattern_dirs))
    by_id = {p.id: p for p in pats}

    kept, read_warnings = scan.scan(sources, [p.regex for p in pats], progress)
    warnings += read_warnings
    df = context_frame(kept, sources)
    df, _year = timeline.add_times(df, sources)
    df = classify.match_patterns(df, pats)
    df = tracebacks.flags(df)
    ctx = context.read_context(df)

    multi = set(df.group_by("src").agg(pl.col("stream").n_unique().alias("n")).filter(pl.col("n") > 1)["src"].to_list())
    chains = tracebacks.assemble(df, multi)
    events = classify.build_events(df, chains, sources, by_id, ctx)
    root_ev, same, notes = classify.choose_root(events, ctx)
    root = classify.make_root(root_ev, same, notes, by_id, ctx) if root_ev else None
    if root:
        root.summary = summarize(root)
    return Diagnosis(
        status="failed" if root else "no_failure_found",
        root_cause=root,
        symptoms=classify.symptoms(events, root_ev, same, by_id),
        ranks=classify.rank_summaries(df, events, ctx),
        sources=sources,
        job=ctx.to_dict(),
        warnings=warnings,
    )


def context_frame(kept: pl.DataFrame, sources) -> pl.DataFrame:
    from .attribute import attribute

    return attribute(kept, sources)


def summarize(root) -> str:
    who = f"rank {root.rank}" if root.rank is not None else "an unidentified rank"
    if root.host:
        who += f" on {root.host}"
    phase = root.details.get("phase")
    when = f" at {root.time:%Y-%m-%d %H:%M:%S}" if root.time else ""
    return f"{root.title}: {who}{f' in the {phase} phase' if phase else ''}{when}"
