"""Two processes of one job that announce the same global rank: the framework computed ranks without the node's
rank (each node started its own local processes as if it were the first), so the world never forms. No line says
so; the announcements (Lightning's `Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/8`) do, side by side."""
from __future__ import annotations

from datetime import datetime

import polars as pl

from diagnose.model import Event, Evidence, Source
from diagnose.patterns.library import Pattern

ANNOUNCED = "config.duplicate_global_rank"  # its pattern (role context) names the announcement and keeps it


def duplicate_rank(df: pl.DataFrame, sources: list[Source], patterns: dict[str, Pattern]) -> Event | None:
    """The first announcement of a global rank that another process of the same file announced before it."""
    p = patterns.get(ANNOUNCED)
    said = df.filter(pl.col("pid") == ANNOUNCED) if p is not None else df.clear()
    if said.height < 2:
        return None
    said = said.with_columns(g=pl.col("msg").str.extract(r"GLOBAL_RANK: (\d+)").cast(pl.Int64),
                             n=pl.col("msg").str.extract(r"MEMBER: \d+/(\d+)").cast(pl.Int64)).filter(
        pl.col("g").is_not_null()).sort("src", "lineno")
    # file -> global rank -> the process (stream) that announced it in this round; a round ends when all N ranks were
    # announced (a restart of the workers, the next trial of a sweep, announce them all again)
    rounds: dict[int, dict[int, str]] = {}
    for src, line, stream, g, n, msg, t, ot in said.select("src", "lineno", "stream", "g", "n", "msg", "time",
                                                          "order_time").iter_rows():
        seen = rounds.setdefault(src, {})
        if seen.get(g, stream) != stream:  # (a restart in the same stream announces its own rank again: no collision)
            display = {s.index: s.display for s in sources}
            return Event(kind="line", category=p.category, pattern=p.id, role="root", message=msg.strip(),
                         evidence=Evidence(display[src], line), time=t, order=(ot is None, ot or datetime.min, src, line))
        seen[g] = stream
        if n is not None and len(seen) >= n:
            seen.clear()
    return None
