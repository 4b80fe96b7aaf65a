"""What the report lists besides the root cause: the other failures seen (symptoms, grouped by pattern in
timeline order) and a summary per rank (its host, last line, first error)."""
from __future__ import annotations

import polars as pl

from diagnose.analyze.context import JobContext
from diagnose.model import Event, Evidence, RankSummary, Symptom


def symptoms(events: list[Event], root: Event | None, same: list[Event], patterns) -> list[Symptom]:
    skip = {id(root), *(id(e) for e in same)}
    groups: dict[str, list[Event]] = {}
    for e in events:
        if id(e) in skip or (root is not None and e.pattern == root.pattern):
            continue  # the root failure echoed (e.g. in torchrun's summary) is not a symptom of itself
        groups.setdefault(e.pattern, []).append(e)
    out = []
    for pid, evs in groups.items():
        evs.sort(key=lambda e: e.order)
        times = [e.time for e in evs if e.time]
        out.append(
            Symptom(
                category=evs[0].category, pattern=pid, title=patterns[pid].title, message=evs[0].message,
                ranks=sorted({e.rank for e in evs if e.rank is not None}), count=len(evs),
                first_time=min(times) if times else None, evidence=evs[0].evidence,
            )
        )
    first = {pid: min(e.order for e in evs) for pid, evs in groups.items()}
    out.sort(key=lambda s: first[s.pattern])  # timeline order; file order where there is no time
    return out


def rank_summaries(df: pl.DataFrame, events: list[Event], ctx: JobContext, sources=()) -> list[RankSummary]:
    display = {s.index: s.display for s in sources}
    per = (
        df.filter(pl.col("rank").is_not_null())
        .sort("order_time", "src", "lineno", nulls_last=False)
        .group_by("rank", maintain_order=True)
        .agg(pl.col("host").drop_nulls().first(), pl.col("time").max().alias("last_time"),
             pl.col("src").last(), pl.col("lineno").last(), pl.col("msg").last())
        .sort("rank")
    )
    out = {r: RankSummary(rank=r, host=h or ctx.rank_host.get(r), last_time=t,
                          last_line=Evidence(display[src], line) if src in display else None,
                          last_message=msg.strip() if src in display else None)
           for r, h, t, src, line, msg in per.iter_rows()}
    for e in sorted(events, key=lambda e: e.order):
        if e.rank is None or e.role == "context":
            continue
        rs = out.setdefault(e.rank, RankSummary(rank=e.rank, host=e.host or ctx.rank_host.get(e.rank)))
        if rs.category is None:
            rs.category = e.category
            rs.first_error_time = e.time
    for f in ctx.failures:  # torchrun's summary says when it saw each rank fail
        if f.rank is not None and f.rank >= 0:
            rs = out.setdefault(f.rank, RankSummary(rank=f.rank, host=f.host))
            if rs.first_error_time is None:
                rs.first_error_time = f.time
            rs.host = rs.host or f.host
    return [out[k] for k in sorted(out)]
