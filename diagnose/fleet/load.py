"""Reading many mdiag JSON reports into one polars frame, one row per report.

Reads JSON reports (`mdiag --json` output files, folders of them, or JSONL with one report per
line as the hook writes).  JSONL is read with a lazy `pl.scan_ndjson` over only the fields used
here, so 100,000 reports take seconds.

`slurm` keys are read in sacct's spelling (`JobId`, `Elapsed`, `NNodes`, `NodeList`, `End`) or
mdiag's own (`job_id`, `elapsed`, `node_list`).

Job id per report: `slurm.JobId`, else the report's `job_id`, else the file name stem (for JSONL
files, `name:line`).
"""
from __future__ import annotations

import json
from pathlib import Path


class FleetInputError(ValueError):
    """A path that names no file or folder."""

SLURM_KEYS = {"job_id": ("JobId", "job_id"), "elapsed": ("Elapsed", "elapsed"), "nnodes": ("NNodes", "nnodes"),
              "node_list": ("NodeList", "node_list"), "end": ("End", "end"), "start": ("Start", "start")}


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


# an RFC 3339 time's offset (`Z`, `+01:00`); SLURM's End/Start and reports written before times had one carry none
_OFFSET = r"(?:[Zz]|[+-]\d\d:?\d\d)$"


def _utc(text):
    """A report's time as UTC (without tzinfo, one clock for the fleet): converted by its offset when it has
    one, else taken as UTC (what the report then says with times_assumed_utc)."""
    import polars as pl

    aware = text.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%#z", strict=False, time_zone="UTC").dt.replace_time_zone(None)
    naive = text.str.slice(0, 19).str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S", strict=False)
    return pl.when(text.str.contains(_OFFSET)).then(aware).otherwise(naive).cast(pl.Datetime("us"))


def _no_offset(text):
    """Whether the time was taken as UTC for want of an offset (null where there is no time)."""
    import polars as pl

    return pl.when(_utc(text).is_not_null()).then(~text.str.contains(_OFFSET))


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
        _utc(pl.coalesce(t, sl("end"), sl("start"))).alias("time"),
        _no_offset(pl.coalesce(t, sl("end"), sl("start"))).alias("time_assumed_utc"),
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
            what = "line that is not a JSON report" if bad == 1 else "lines that are not JSON reports"
            warnings.append(f"{path}: skipped {bad:,} {what} ({str(exc).splitlines()[0][:80]})")
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
            raise FleetInputError(f"no such file or folder: {p}")
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
