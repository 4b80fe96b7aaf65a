"""Suspect nodes: hosts that are the root-cause host of failed jobs more often than chance would give.

`categories` (category and failures) and `jobs` are list columns: lists in JSON and Parquet, joined text
in CSV and the terminal (`list_text`).

A host is *suspect* when:

* hardware rule: it is the root-cause host in >= 3 failures of the categories `cuda` or `nccl`
  (ECC / Xid / NVLink / NIC trouble shows up as these); or
* statistical rule: it is the root-cause host in >= 3 failures of any category and that count is
  significantly above the fleet mean: P(X >= count) < 0.01 / hosts for X ~ Poisson(mean), where
  the mean is failures-with-a-host / hosts seen in the reports (root-cause and rank hosts), i.e. a
  1 % false-alarm rate over the whole fleet (Bonferroni).

`localhost` and loopback names are never suspects (they name no machine).
"""
from __future__ import annotations

import math
import re

HW_CATEGORIES = ("cuda", "nccl")
HW_THRESHOLD = 3
MIN_COUNT = 3
ALPHA = 0.01
NOT_A_NODE = re.compile(r"^(localhost(\.localdomain)?|127\.\d+\.\d+\.\d+|::1|)$", re.I)


def _poisson_sf(k: int, lam: float) -> float:
    """P(X >= k) for X ~ Poisson(lam)."""
    if k <= 0:
        return 1.0
    term, cdf = math.exp(-lam), 0.0
    for i in range(k):
        cdf += term
        term *= lam / (i + 1)
    return max(0.0, 1.0 - cdf)


def suspect_nodes(df, fails):
    import polars as pl

    node = pl.col("host").is_not_null() & ~pl.col("host").str.contains(NOT_A_NODE.pattern)
    hosted = fails.filter(node)
    pool = set(hosted["host"].unique().to_list())
    pool |= set(df.select(pl.col("_rank_hosts").explode().drop_nulls().unique()).to_series().to_list())
    pool = {h for h in pool if not NOT_A_NODE.match(h)}
    n_hosts = max(len(pool), 1)
    mean = hosted.height / n_hosts
    per = (
        hosted.sort("time", nulls_last=True)
        .group_by("host")
        .agg(pl.len().alias("failures"), pl.col("category").is_in(HW_CATEGORIES).sum().alias("hw_failures"),
             pl.col("category").alias("_cats"), pl.col("job_id").alias("jobs"),
             pl.col("time").min().alias("first_seen"), pl.col("time").max().alias("last_seen"),
             pl.col("time_assumed_utc").fill_null(False).any().alias("times_assumed_utc"))
    )
    rows = []
    for r in per.iter_rows(named=True):
        p = _poisson_sf(r["failures"], mean)
        reasons = []
        if r["hw_failures"] >= HW_THRESHOLD:
            reasons.append(f"{r['hw_failures']} {'/'.join(HW_CATEGORIES)} failures (>= {HW_THRESHOLD})")
        if r["failures"] >= MIN_COUNT and p < ALPHA / n_hosts:
            reasons.append(f"{r['failures']} failures vs fleet mean {mean:.2f} per host (p={p:.1e})")
        if not reasons:
            continue
        cats: dict[str, int] = {}
        for c in r["_cats"]:
            cats[c or "unknown"] = cats.get(c or "unknown", 0) + 1
        rows.append({
            "host": r["host"], "failures": r["failures"], "hw_failures": r["hw_failures"],
            "categories": [{"category": c, "failures": n} for c, n in sorted(cats.items(), key=lambda x: (-x[1], x[0]))],
            "p_value": p, "first_seen": r["first_seen"], "last_seen": r["last_seen"],
            "jobs": [str(j) for j in r["jobs"]],
            "reason": "; ".join(reasons), "times_assumed_utc": r["times_assumed_utc"],
        })
    schema = {"host": pl.String, "failures": pl.Int64, "hw_failures": pl.Int64,
              "categories": pl.List(pl.Struct({"category": pl.String, "failures": pl.Int64})),
              "p_value": pl.Float64, "first_seen": pl.Datetime("us"), "last_seen": pl.Datetime("us"),
              "jobs": pl.List(pl.String), "reason": pl.String, "times_assumed_utc": pl.Boolean}
    return pl.DataFrame(rows, schema=schema).sort(["failures", "host"], descending=[True, False])


def list_text(value, most: int | None = None) -> str:
    """A list cell in its joined form (CSV, the terminal): `cuda×3, nccl×1` for categories, `a, b` for jobs;
    with `most`, the first `most` items and the count."""
    if value is None:
        return ""
    items = [f"{v['category']}×{v['failures']}" if isinstance(v, dict) else str(v) for v in value]
    if most is not None and len(items) > most:
        return ", ".join(items[:most]) + f", … ({len(items)})"
    return ", ".join(items)
