"""Derived columns (fingerprint, week, GPU-hours) and the fleet tables: by category, by ISO week,
recurring fingerprints, suspect nodes.

GPU-hours lost, per report: elapsed time x GPUs, where the report has a top-level `slurm` object
with `Elapsed` (`[D-]HH:MM:SS` or seconds) and the GPUs are `job.world_size` when known, else the
node count (`slurm.NNodes`, or the nodes in `slurm.NodeList`) x `--gpus-per-node`.  Reports
without that are counted as failures but add no GPU-hours.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone

from diagnose.fleet.suspects import ALPHA, HW_CATEGORIES, HW_THRESHOLD, MIN_COUNT, suspect_nodes
from diagnose.fleet.scrub import scrub

TABLES = ("by_category", "by_week", "fingerprints", "suspect_nodes")


def rfc3339(t: datetime) -> str:
    """A fleet time (UTC, held without tzinfo) as RFC 3339 with its offset."""
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).isoformat()


def parse_elapsed(s: str | None) -> float | None:
    """SLURM Elapsed `[D-]HH:MM:SS`, `MM:SS`, `MM:SS.mmm` or plain seconds → seconds."""
    if s is None:
        return None
    s = str(s).strip()
    try:
        return float(s)
    except ValueError:
        pass
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", s)
    if not m:
        return None
    d, h, mi, sec = m.groups()
    return int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi) * 60 + float(sec)


def hostlist_count(s: str | None) -> int | None:
    """Nodes in a SLURM hostlist such as `gpu-[01-04,07],login1`."""
    if not s:
        return None
    n = 0
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", s):
        ranges = re.findall(r"\[([^\]]*)\]", part)
        if not ranges:
            n += 1
            continue
        k = 1
        for r in ranges:
            c = 0
            for item in r.split(","):
                a, _, b = item.partition("-")
                try:
                    c += int(b) - int(a) + 1 if b else 1
                except ValueError:
                    c += 1
            k *= c
        n += k
    return n or None


def _exc_fp(pattern, message, frames) -> str | None:
    from diagnose.analyze.fingerprint import fingerprint

    if pattern is None:
        return None
    return fingerprint({"pattern": pattern, "message": message, "frames": frames or []})


def prepare(df, gpus_per_node: int = 8):
    """Adds fingerprint (where missing), week, gpus, elapsed_h, gpu_hours; drops helper columns."""
    import polars as pl

    need = pl.col("fingerprint").is_null() & pl.col("pattern").is_not_null()
    if df.height and df.select(need.any()).item():  # older reports: compute it here
        df = df.with_row_index("_i")
        miss = df.filter(need)
        fps = [_exc_fp(p, m, f) for p, m, f in miss.select("pattern", "_message", "_frames").iter_rows()]
        df = (df.join(pl.DataFrame({"_i": miss["_i"], "_fp": pl.Series(fps, dtype=pl.String)}), on="_i", how="left")
              .with_columns(pl.coalesce("fingerprint", "_fp").alias("fingerprint")).drop("_i", "_fp"))
    el = {v: parse_elapsed(v) for v in df["_elapsed"].drop_nulls().unique().to_list()}
    nl = {v: hostlist_count(v) for v in df["_nodelist"].drop_nulls().unique().to_list()}
    nodes = pl.coalesce(
        pl.col("_nnodes").cast(pl.Int64, strict=False),
        pl.col("_nodelist").replace_strict(nl, default=None, return_dtype=pl.Int64),
    )
    df = df.with_columns(
        (pl.col("_elapsed").replace_strict(el, default=None, return_dtype=pl.Float64) / 3600).alias("elapsed_h"),
        pl.coalesce(pl.col("_world_size"), nodes * gpus_per_node).alias("gpus"),
        pl.col("time").dt.strftime("%G-W%V").alias("week"),
    ).with_columns((pl.col("elapsed_h") * pl.col("gpus")).alias("gpu_hours"))
    return df


def _gpu_sum():
    """Sum of GPU-hours, null (not 0) when no report in the group has SLURM accounting."""
    import polars as pl

    g = pl.col("gpu_hours")
    return pl.when(g.is_not_null().any()).then(g.sum()).otherwise(None).alias("gpu_hours_lost")


def _assumed():
    """Whether a group's times include one its report gave without a UTC offset (taken as UTC)."""
    import polars as pl

    return pl.col("time_assumed_utc").fill_null(False).any().alias("times_assumed_utc")


def summarize(df, since: datetime | None = None, until: datetime | None = None, top: int = 10) -> dict:
    """All tables as polars frames plus a summary dict."""
    import polars as pl

    if since is not None:
        df = df.filter(pl.col("time") >= since)
    if until is not None:
        df = df.filter(pl.col("time") < until)
    fails = df.filter(pl.col("status") == "failed")
    n_fail = fails.height
    by_category = (
        fails.group_by(pl.col("category").fill_null("unknown"))
        .agg(pl.len().alias("failures"), _gpu_sum(), pl.col("gpu_hours").is_not_null().sum().alias("with_gpu_hours"))
        .with_columns((pl.col("failures") / max(n_fail, 1)).round(4).alias("share"))
        .sort(["failures", "category"], descending=[True, False])
        .select("category", "failures", "share", "gpu_hours_lost", "with_gpu_hours")
    )
    by_week = (
        fails.with_columns(pl.col("week").fill_null("unknown"))  # failures without a time still count
        .group_by("week")
        .agg(pl.len().alias("failures"), _gpu_sum(),
             pl.col("category").fill_null("unknown").mode().sort().first().alias("top_category"),
             _assumed())
        .sort("week")
    )
    fingerprints = (
        fails.filter(pl.col("fingerprint").is_not_null())
        .sort("time", nulls_last=True)
        .group_by("fingerprint")
        .agg(pl.len().alias("failures"), pl.col("category").first(), pl.col("pattern").first(),
             pl.col("title").drop_nulls().first(), pl.col("time").min().alias("first_seen"),
             pl.col("time").max().alias("last_seen"), pl.col("job_id").last().alias("example_job"),
             pl.col("host").drop_nulls().n_unique().alias("hosts"), _assumed())
        .sort(["failures", "last_seen"], descending=[True, True], nulls_last=True)
        .head(top)
    )
    suspects = suspect_nodes(df, fails)
    gpu = fails["gpu_hours"].sum() if n_fail else 0.0
    times = fails["time"].drop_nulls()
    summary = {
        "reports": df.height,
        "failures": n_fail,
        "no_failure_found": df.filter(pl.col("status") == "no_failure_found").height,
        "gpu_hours_lost": round(float(gpu or 0.0), 2),
        "failures_with_gpu_hours": int(fails["gpu_hours"].is_not_null().sum()) if n_fail else 0,
        "first": rfc3339(times.min()) if len(times) else None,
        "last": rfc3339(times.max()) if len(times) else None,
        "failures_without_time": n_fail - len(times),  # counted in the by_week table's `unknown` row
        "times_assumed_utc": bool(fails["time_assumed_utc"].fill_null(False).any()) if n_fail else False,
        "suspect_rule": (f"root-cause host in >= {HW_THRESHOLD} {'/'.join(HW_CATEGORIES)} failures, or in >= {MIN_COUNT} "
                         f"failures with P(Poisson(fleet mean) >= count) < {ALPHA} / hosts"),
    }
    return scrub({"summary": summary, "by_category": by_category, "by_week": by_week, "fingerprints": fingerprints,
                  "suspect_nodes": suspects})
