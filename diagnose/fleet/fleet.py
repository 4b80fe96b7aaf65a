"""`mdiag fleet`: trends over many diagnoses — categories, weeks, recurring fingerprints, suspect nodes.

Reads JSON reports (`mdiag --json` output files, folders of them, or JSONL with one report per
line as the hook writes) into one polars frame, one row per report, and aggregates it.  JSONL is
read with a lazy `pl.scan_ndjson` over only the fields used here, so 100,000 reports take seconds.

Suspect nodes.  A host is *suspect* when it is the root-cause host of failed jobs more often than
chance would give:

* hardware rule: it is the root-cause host in >= 3 failures of the categories `cuda` or `nccl`
  (ECC / Xid / NVLink / NIC trouble shows up as these); or
* statistical rule: it is the root-cause host in >= 3 failures of any category and that count is
  significantly above the fleet mean: P(X >= count) < 0.01 / hosts for X ~ Poisson(mean), where
  the mean is failures-with-a-host / hosts seen in the reports (root-cause and rank hosts), i.e. a
  1 % false-alarm rate over the whole fleet (Bonferroni).

`localhost` and loopback names are never suspects (they name no machine).

GPU-hours lost, per report: elapsed time x GPUs, where the report has a top-level `slurm` object
with `Elapsed` (`[D-]HH:MM:SS` or seconds) and the GPUs are `job.world_size` when known, else the
node count (`slurm.NNodes`, or the nodes in `slurm.NodeList`) x `--gpus-per-node`.  Reports
without that are counted as failures but add no GPU-hours.

`slurm` keys are read in sacct's spelling (`JobId`, `Elapsed`, `NNodes`, `NodeList`, `End`) or
mdiag's own (`job_id`, `elapsed`, `node_list`).

Job id per report: `slurm.JobId`, else the report's `job_id`, else the file name stem (for JSONL
files, `name:line`).
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path

import click

HW_CATEGORIES = ("cuda", "nccl")
HW_THRESHOLD = 3
MIN_COUNT = 3
ALPHA = 0.01
NOT_A_NODE = re.compile(r"^(localhost(\.localdomain)?|127\.\d+\.\d+\.\d+|::1|)$", re.I)
SLURM_KEYS = {"job_id": ("JobId", "job_id"), "elapsed": ("Elapsed", "elapsed"), "nnodes": ("NNodes", "nnodes"),
              "node_list": ("NodeList", "node_list"), "end": ("End", "end"), "start": ("Start", "start")}
TABLES = ("by_category", "by_week", "fingerprints", "suspect_nodes")


def _schema():
    import polars as pl

    return {
        "job_id": pl.String,
        "status": pl.String,
        "root_cause": pl.Struct({
            "category": pl.String, "pattern": pl.String, "title": pl.String, "host": pl.String,
            "time": pl.String, "fingerprint": pl.String, "message": pl.String,
            "frames": pl.List(pl.Struct({"file": pl.String, "function": pl.String})),
        }),
        "ranks": pl.List(pl.Struct({"host": pl.String})),
        "job": pl.Struct({"world_size": pl.String}),
        # sacct / scontrol spelling and mdiag's own (diagnose.slurm: job_id, elapsed, node_list)
        "slurm": pl.Struct({k: pl.String for pair in SLURM_KEYS.values() for k in pair}),
    }


# ---------------------------------------------------------------- reading


def _flatten(lf, source: str, jsonl: bool):
    """Nested report columns → one flat row per report."""
    import polars as pl

    rc = pl.col("root_cause")
    def sl(key: str):
        return pl.coalesce(*[pl.col("slurm").struct.field(k) for k in SLURM_KEYS[key]])

    if jsonl:
        fallback = pl.lit(f"{source}:") + (pl.col("_line") + 1).cast(pl.String)
    else:
        fallback = pl.lit(Path(source).stem)
    explicit = pl.coalesce(sl("job_id"), pl.col("job_id"))
    t = rc.struct.field("time")
    return lf.select(
        pl.coalesce(explicit, fallback).alias("job_id"),
        explicit.is_not_null().alias("_explicit_id"),
        pl.col("status"),
        rc.struct.field("category").alias("category"),
        rc.struct.field("pattern").alias("pattern"),
        rc.struct.field("title").alias("title"),
        rc.struct.field("host").alias("host"),
        rc.struct.field("fingerprint").alias("fingerprint"),
        rc.struct.field("message").alias("_message"),
        rc.struct.field("frames").alias("_frames"),
        pl.coalesce(t, sl("end"), sl("start")).str.slice(0, 19)
        .str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S", strict=False).alias("time"),
        sl("elapsed").alias("_elapsed"),
        sl("nnodes").alias("_nnodes"),
        sl("node_list").alias("_nodelist"),
        pl.col("job").struct.field("world_size").cast(pl.Int64, strict=False).alias("_world_size"),
        pl.col("ranks").list.eval(pl.element().struct.field("host")).alias("_rank_hosts"),
        pl.lit(source).alias("source"),
    )


def _read_jsonl(path: Path, warnings: list[str]):
    import polars as pl

    try:
        lf = pl.scan_ndjson(path, schema=_schema(), ignore_errors=True).with_row_index("_line")
        return _flatten(lf, path.name, True).collect()
    except Exception as exc:  # a malformed line: parse line by line, skip what isn't a report
        rows, bad = [], 0
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except ValueError:
                    bad += 1
                    continue
                if isinstance(doc, dict):
                    doc["_line"] = i
                    rows.append(doc)
                else:
                    bad += 1
        if bad:
            warnings.append(f"{path}: skipped {bad} line(s) that are not JSON reports ({str(exc).splitlines()[0][:80]})")
        return _frame_of_docs(rows, path.name, jsonl=True)


def _frame_of_docs(docs: list[dict], source: str, jsonl: bool = False):
    import polars as pl

    schema = _schema()
    clean = [{k: _conform(d.get(k), schema[k]) for k in schema} | ({"_line": d.get("_line", 0)} if jsonl else {})
             for d in docs]
    full = dict(schema) | ({"_line": pl.UInt32} if jsonl else {})
    return _flatten(pl.DataFrame(clean, schema=full, strict=False).lazy(), source, jsonl).collect()


def _conform(v, dtype):
    """A JSON value shaped for `dtype` (numbers → strings where strings are expected, junk → None)."""
    import polars as pl

    if v is None:
        return None
    if isinstance(dtype, pl.Struct):
        if not isinstance(v, dict):
            return None
        return {f.name: _conform(v.get(f.name), f.dtype) for f in dtype.fields}
    if isinstance(dtype, pl.List):
        return [_conform(x, dtype.inner) for x in v] if isinstance(v, list) else None
    if isinstance(v, (dict, list)):
        return None
    return str(v)


def load(paths: list[str], warnings: list[str] | None = None):
    """One row per report found under `paths` (files, folders, JSONL)."""
    import polars as pl

    warnings = warnings if warnings is not None else []
    frames, singles = [], []
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            files += sorted(x for x in path.rglob("*") if x.is_file() and x.suffix in (".json", ".jsonl", ".ndjson"))
        elif path.is_file():
            files.append(path)
        else:
            raise click.UsageError(f"no such file or folder: {p}")
    for f in files:
        if f.suffix in (".jsonl", ".ndjson"):
            frames.append(_read_jsonl(f, warnings))
            continue
        try:
            doc = json.loads(f.read_text(encoding="utf-8", errors="replace"))
        except ValueError:
            frames.append(_read_jsonl(f, warnings))  # a .json file with one report per line
            continue
        if isinstance(doc, dict) and "status" in doc:
            singles.append((doc, f.name))
        else:
            warnings.append(f"{f}: not an mdiag report, skipped")
    if singles:
        one = _frame_of_docs([d for d, _ in singles], "", jsonl=False)
        names = [n for _, n in singles]
        one = one.with_columns(
            pl.Series("source", names),
            pl.when(pl.col("_explicit_id")).then(pl.col("job_id"))
            .otherwise(pl.Series([Path(n).stem for n in names])).alias("job_id"),
        )
        frames.append(one)
    if not frames:
        return _frame_of_docs([], "", jsonl=False)
    df = pl.concat(frames, how="vertical_relaxed")
    # the same job diagnosed twice (a rerun, a hook that fired twice): keep the last report
    keep = df.filter(pl.col("_explicit_id")).unique(subset=["job_id"], keep="last", maintain_order=True)
    return pl.concat([keep, df.filter(~pl.col("_explicit_id"))], how="vertical_relaxed")


# ---------------------------------------------------------------- derived columns


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


def _poisson_sf(k: int, lam: float) -> float:
    """P(X >= k) for X ~ Poisson(lam)."""
    if k <= 0:
        return 1.0
    term, cdf = math.exp(-lam), 0.0
    for i in range(k):
        cdf += term
        term *= lam / (i + 1)
    return max(0.0, 1.0 - cdf)


# ---------------------------------------------------------------- tables


def _gpu_sum():
    """Sum of GPU-hours, null (not 0) when no report in the group has SLURM accounting."""
    import polars as pl

    g = pl.col("gpu_hours")
    return pl.when(g.is_not_null().any()).then(g.sum()).otherwise(None).alias("gpu_hours_lost")


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
        fails.filter(pl.col("week").is_not_null())
        .group_by("week")
        .agg(pl.len().alias("failures"), _gpu_sum(),
             pl.col("category").fill_null("unknown").mode().sort().first().alias("top_category"))
        .sort("week")
    )
    fingerprints = (
        fails.filter(pl.col("fingerprint").is_not_null())
        .sort("time", nulls_last=True)
        .group_by("fingerprint")
        .agg(pl.len().alias("failures"), pl.col("category").first(), pl.col("pattern").first(),
             pl.col("title").drop_nulls().first(), pl.col("time").min().alias("first_seen"),
             pl.col("time").max().alias("last_seen"), pl.col("job_id").last().alias("example_job"),
             pl.col("host").drop_nulls().n_unique().alias("hosts"))
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
        "first": times.min().isoformat() if len(times) else None,
        "last": times.max().isoformat() if len(times) else None,
        "suspect_rule": (f"root-cause host in >= {HW_THRESHOLD} {'/'.join(HW_CATEGORIES)} failures, or in >= {MIN_COUNT} "
                         f"failures with P(Poisson(fleet mean) >= count) < {ALPHA} / hosts"),
    }
    return {"summary": summary, "by_category": by_category, "by_week": by_week, "fingerprints": fingerprints,
            "suspect_nodes": suspects}


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
             pl.col("time").min().alias("first_seen"), pl.col("time").max().alias("last_seen"))
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
            "categories": ", ".join(f"{c}×{n}" for c, n in sorted(cats.items(), key=lambda x: (-x[1], x[0]))),
            "p_value": p, "first_seen": r["first_seen"], "last_seen": r["last_seen"],
            "jobs": ", ".join(map(str, r["jobs"][:20])) + (f", … ({len(r['jobs'])})" if len(r["jobs"]) > 20 else ""),
            "reason": "; ".join(reasons),
        })
    schema = {"host": pl.String, "failures": pl.Int64, "hw_failures": pl.Int64, "categories": pl.String,
              "p_value": pl.Float64, "first_seen": pl.Datetime("us"), "last_seen": pl.Datetime("us"),
              "jobs": pl.String, "reason": pl.String}
    return pl.DataFrame(rows, schema=schema).sort(["failures", "host"], descending=[True, False])


# ---------------------------------------------------------------- outputs


def to_json(tables: dict) -> dict:
    out = {"summary": tables["summary"]}
    for name in TABLES:
        rows = tables[name].to_dicts()
        for row in rows:
            for k, v in row.items():
                if isinstance(v, datetime):
                    row[k] = v.isoformat()
                elif isinstance(v, float):
                    row[k] = round(v, 4) if k != "p_value" else float(f"{v:.3g}")
        out[name] = rows
    return out


def _prom_label(v: object) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(v) -> str:
    v = float(v or 0)
    return str(int(v)) if v.is_integer() else f"{v:.4f}".rstrip("0")


def prometheus(tables: dict, top: int = 20) -> str:
    s = tables["summary"]
    out = [
        "# HELP mdiag_reports_total mdiag reports read by mdiag fleet.",
        "# TYPE mdiag_reports_total counter",
        f"mdiag_reports_total {s['reports']}",
        "# HELP mdiag_failures_total Failed jobs by root-cause category.",
        "# TYPE mdiag_failures_total counter",
    ]
    for r in tables["by_category"].iter_rows(named=True):
        out.append(f'mdiag_failures_total{{category="{_prom_label(r["category"])}"}} {r["failures"]}')
    out += ["# HELP mdiag_gpu_hours_lost_total GPU-hours of failed jobs (elapsed x GPUs) by root-cause category.",
            "# TYPE mdiag_gpu_hours_lost_total counter"]
    for r in tables["by_category"].iter_rows(named=True):
        out.append(f'mdiag_gpu_hours_lost_total{{category="{_prom_label(r["category"])}"}} {_num(r["gpu_hours_lost"])}')
    out += ["# HELP mdiag_fingerprint_failures_total Failed jobs per root-cause fingerprint (the most frequent).",
            "# TYPE mdiag_fingerprint_failures_total counter"]
    for r in tables["fingerprints"].head(top).iter_rows(named=True):
        out.append(f'mdiag_fingerprint_failures_total{{fingerprint="{_prom_label(r["fingerprint"])}",'
                   f'category="{_prom_label(r["category"])}",pattern="{_prom_label(r["pattern"])}"}} {r["failures"]}')
    out += ["# HELP mdiag_suspect_nodes Hosts that are the root-cause host of failed jobs more often than chance.",
            "# TYPE mdiag_suspect_nodes gauge",
            f"mdiag_suspect_nodes {tables['suspect_nodes'].height}",
            "# HELP mdiag_suspect_node_failures_total Failed jobs whose root cause was on this suspect node.",
            "# TYPE mdiag_suspect_node_failures_total counter"]
    for r in tables["suspect_nodes"].iter_rows(named=True):
        out.append(f'mdiag_suspect_node_failures_total{{host="{_prom_label(r["host"])}"}} {r["failures"]}')
    return "\n".join(out) + "\n"


def write_atomic(path: str | os.PathLike, text: str) -> None:
    from diagnose.render.outputs import write_text_atomic

    write_text_atomic(path, text)


def export(tables: dict, folder: str, fmt: str) -> list[Path]:
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for name in TABLES:
        p = d / f"{name}.{fmt}"
        if fmt == "csv":
            tables[name].write_csv(p)
        else:
            tables[name].write_parquet(p)
        out.append(p)
    return out


def _fmt(v, col: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d")
    if isinstance(v, float):
        return f"{v:,.1f}"
    return str(v)


def render(tables: dict, console) -> None:
    from rich.table import Table
    from rich.text import Text

    from diagnose.render.report import inert

    s = tables["summary"]
    head = Text()
    head.append("mdiag fleet", style="bold")
    head.append(f" · {s['reports']:,} reports · {s['failures']:,} failures")
    if s["first"]:
        head.append(f" · {s['first'][:10]} … {s['last'][:10]}")
    if s["failures_with_gpu_hours"]:
        head.append(f" · {s['gpu_hours_lost']:,.1f} GPU-hours lost ({s['failures_with_gpu_hours']:,} jobs with SLURM accounting)")
    console.print(head)

    def table(title, df, cols, right=(), wrap=()):
        t = Table(title=Text(title, style="bold"), title_justify="left", expand=False)
        for c, label in cols:
            t.add_column(label, justify="right" if c in right else "left", overflow="fold", no_wrap=c not in wrap)
        for row in df.iter_rows(named=True):
            t.add_row(*[Text(inert(_fmt(row[c], c))) for c, _ in cols])
        if df.height == 0:
            t.add_row(*([Text("none", style="dim")] + [Text("")] * (len(cols) - 1)))
        console.print(t)

    bc = tables["by_category"].with_columns((tables["by_category"]["share"] * 100).round(1).alias("share"))
    table("Failures by category", bc, [("category", "category"), ("failures", "failures"), ("share", "%"),
                                       ("gpu_hours_lost", "GPU-h lost")], right=("failures", "share", "gpu_hours_lost"))
    table("Failures by ISO week", tables["by_week"], [("week", "week"), ("failures", "failures"),
                                                      ("top_category", "top category"), ("gpu_hours_lost", "GPU-h lost")],
          right=("failures", "gpu_hours_lost"))
    table("Top fingerprints", tables["fingerprints"],
          [("fingerprint", "fingerprint"), ("failures", "n"), ("category", "category"), ("title", "what"),
           ("first_seen", "first seen"), ("last_seen", "last seen"), ("example_job", "example job")], right=("failures",),
          wrap=("title", "category"))
    table("Suspect nodes", tables["suspect_nodes"],
          [("host", "host"), ("failures", "n"), ("categories", "categories"), ("jobs", "jobs"), ("reason", "why")],
          right=("failures",), wrap=("categories", "jobs", "reason"))
    console.print(Text(f"suspect rule: {s['suspect_rule']}", style="dim"))


def _date(value: str | None, end: bool = False) -> datetime | None:
    if not value:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"not a date: {value!r} (use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS)")
    if t.tzinfo is not None:
        t = t.replace(tzinfo=None)
    if end and len(value) <= 10:
        t += timedelta(days=1)  # --until 2026-12-02 includes that day
    return t


@click.command("fleet")
@click.argument("paths", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the tables as one JSON object.")
@click.option("--csv", "csv_dir", type=click.Path(file_okay=False), help="Write each table as DIR/<table>.csv.")
@click.option("--parquet", "parquet_dir", type=click.Path(file_okay=False), help="Write each table as DIR/<table>.parquet.")
@click.option("--prom", "prom_file", type=click.Path(dir_okay=False),
              help="Write counters in the Prometheus text format (node_exporter textfile collector), atomically.")
@click.option("--since", help="Only failures at or after this date/time (YYYY-MM-DD[THH:MM:SS]).")
@click.option("--until", help="Only failures before this date/time; a bare date includes that day.")
@click.option("--top", default=10, show_default=True, help="How many fingerprints to list.")
@click.option("--gpus-per-node", default=8, show_default=True,
              help="GPUs per node, for GPU-hours when a report has a node count but no world size.")
def fleet(paths, as_json, csv_dir, parquet_dir, prom_file, since, until, top, gpus_per_node) -> None:
    """Summarize many mdiag JSON reports: failures by category and week, recurring root-cause
    fingerprints, suspect nodes, GPU-hours lost.

    PATHS are report files (`mdiag --json` output), folders of them, or JSONL files with one
    report per line.

    \b
    Suspect node: the root-cause host of >= 3 cuda/nccl failures, or of >= 3 failures with
    P(Poisson(fleet mean per host) >= count) < 0.01 / hosts.
    """
    import os as _os

    from rich.console import Console

    s, u = _date(since), _date(until, end=True)
    warnings: list[str] = []
    df = prepare(load(list(paths), warnings), gpus_per_node=gpus_per_node)
    tables = summarize(df, s, u, top=top)
    for w in warnings:
        click.echo(f"mdiag: warning: {w}", err=True)
    if csv_dir:
        export(tables, csv_dir, "csv")
    if parquet_dir:
        export(tables, parquet_dir, "parquet")
    if prom_file:
        write_atomic(prom_file, prometheus(tables))
    if as_json:
        sys.stdout.write(json.dumps(to_json(tables), ensure_ascii=True) + "\n")
    else:
        console = Console(no_color=bool(_os.environ.get("NO_COLOR")), highlight=False)
        render(tables, console)
