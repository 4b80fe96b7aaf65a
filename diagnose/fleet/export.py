"""The fleet tables as JSON, CSV, Parquet and the Prometheus text format."""
from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from diagnose.fleet.suspects import list_text
from diagnose.fleet.tables import TABLES, rfc3339


def to_json(tables: dict) -> dict:
    out = {"summary": tables["summary"]}
    for name in TABLES:
        rows = tables[name].to_dicts()
        for row in rows:
            for k, v in row.items():
                if isinstance(v, datetime):
                    row[k] = rfc3339(v)
                elif isinstance(v, float):
                    row[k] = round(v, 4) if k != "p_value" else float(f"{v:.3g}")
        out[name] = rows
    return out


def _metrics(tables: dict, top: int = 20, now: float | None = None) -> list[tuple[str, str, tuple, list]]:
    """The fleet's figures as gauges (a snapshot of the reports read, which may go down when reports age
    out of --since, hence gauges, not counters), in base units: GPU time in GPU-seconds.
    Each: (name, help, label names, [(label values, value)])."""
    import time

    def lbl(v) -> str:
        return "" if v is None else str(v)

    out = [("mdiag_fleet_reports", "mdiag reports read by mdiag fleet.", (), [((), tables["summary"]["reports"])])]
    cats = list(tables["by_category"].iter_rows(named=True))
    out.append(("mdiag_fleet_failures", "Failed jobs by root-cause category.", ("category",),
                [((lbl(r["category"]),), r["failures"]) for r in cats]))
    out.append(("mdiag_fleet_gpu_time_lost_seconds",
                "GPU time of failed jobs (elapsed seconds x GPUs) by root-cause category.", ("category",),
                [((lbl(r["category"]),), float(r.get("gpu_hours_lost") or 0.0) * 3600) for r in cats]))
    out.append(("mdiag_fleet_fingerprint_failures", "Failed jobs per root-cause fingerprint (the most frequent).",
                ("fingerprint", "category", "pattern"),
                [((lbl(r["fingerprint"]), lbl(r["category"]), lbl(r["pattern"])), r["failures"])
                 for r in tables["fingerprints"].head(top).iter_rows(named=True)]))
    out.append(("mdiag_fleet_suspect_nodes", "Hosts that are the root-cause host of failed jobs more often than chance.",
                (), [((), tables["suspect_nodes"].height)]))
    out.append(("mdiag_fleet_suspect_node_failures", "Failed jobs whose root cause was on this suspect node.",
                ("host",), [((lbl(r["host"]),), r["failures"]) for r in tables["suspect_nodes"].iter_rows(named=True)]))
    out.append(("mdiag_fleet_last_run_timestamp_seconds", "When mdiag fleet wrote these figures (Unix time).", (),
                [((), time.time() if now is None else now)]))
    return out


def _registry(tables: dict, top: int = 20, now: float | None = None):
    """The gauges in a prometheus_client registry."""
    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry()
    for name, doc, labels, samples in _metrics(tables, top, now):
        g = Gauge(name, doc, list(labels), registry=reg)
        for values, value in samples:
            (g.labels(*values) if labels else g).set(value)
    return reg


def _escape_label(v: str) -> str:
    """A label value in the text exposition format: backslash, double quote and newline escaped."""
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n")


def _number(x) -> str:
    x = float(x)
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "+Inf" if x > 0 else "-Inf"
    return repr(x)


def text_format(tables: dict, top: int = 20, now: float | None = None) -> str:
    """The Prometheus text exposition format (0.0.4) written without prometheus_client: what its
    generate_latest writes for the same gauges, label values escaped the same way."""
    lines = []
    for name, doc, labels, samples in _metrics(tables, top, now):
        lines += [f"# HELP {name} {_escape_help(doc)}", f"# TYPE {name} gauge"]
        if not labels and not samples:
            samples = [((), 0.0)]
        for values, value in samples:
            tags = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sorted(zip(labels, values)))
            lines.append(f"{name}{{{tags}}} {_number(value)}" if labels else f"{name} {_number(value)}")
    return "\n".join(lines) + "\n"


def prometheus(tables: dict, top: int = 20, now: float | None = None) -> str:
    """The Prometheus text exposition format (through prometheus_client when it is installed)."""
    try:
        from prometheus_client import generate_latest
    except ImportError:
        return text_format(tables, top, now)
    return generate_latest(_registry(tables, top, now)).decode("utf-8")


def write_prometheus(path: str | os.PathLike, tables: dict, top: int = 20) -> None:
    """For node_exporter's textfile collector (which runs as its own user, hence 0644): the text of
    prometheus_client's generate_latest written to a temporary file created exclusively and renamed into place
    (never through a link, never over a device or FIFO)."""
    from diagnose.render.outputs import write_text_atomic

    write_text_atomic(path, prometheus(tables, top), mode=0o644)


FORMULA_START = r"^[=+\-@\t\r]"  # what a spreadsheet may run as a formula (OWASP CSV injection)


def defuse(df):
    """Text cells (and the text items of list cells) a spreadsheet would read as a formula get a leading `'`
    (OWASP's rule)."""
    import polars as pl

    def safe(e):
        return pl.when(e.str.contains(FORMULA_START)).then(pl.lit("'") + e).otherwise(e)

    text = [c for c, t in df.schema.items() if t == pl.String]
    lists = [c for c, t in df.schema.items() if t == pl.List(pl.String)]
    return df.with_columns([safe(pl.col(c)).alias(c) for c in text]
                           + [pl.col(c).list.eval(safe(pl.element())).alias(c) for c in lists])


def _utc(df):
    """Time columns (UTC held without tzinfo) marked as UTC, so files carry the offset."""
    import polars as pl

    return df.with_columns(pl.col(c).dt.replace_time_zone("UTC") for c, t in df.schema.items()
                           if isinstance(t, pl.Datetime) and t.time_zone is None)


def _joined(df):
    """List columns as their joined text (CSV has no lists)."""
    import polars as pl

    lists = [c for c, t in df.schema.items() if isinstance(t, pl.List)]
    return df.with_columns(
        pl.Series(c, [list_text(v) for v in df[c].to_list()], dtype=pl.String) for c in lists
    ) if lists else df


EXPORT_MODE = 0o640  # like the reports: host names and job ids are not for every user of the machine


def export(tables: dict, folder: str, fmt: str) -> list[Path]:
    """Each table as DIR/<table>.csv or .parquet, written like the reports (a temp file renamed into place: a
    link planted at a table's name is replaced, never followed), mode EXPORT_MODE.  Times are UTC with their
    offset (CSV: RFC 3339, Parquet: timestamps in UTC); `times_assumed_utc` says where a report's time had none."""
    from diagnose.render.outputs import write_atomic_with

    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for name in TABLES:
        p = d / f"{name}.{fmt}"
        if fmt == "csv":
            df = _utc(defuse(_joined(tables[name])))
            write_atomic_with(p, lambda fd, tmp: df.write_csv(tmp, datetime_format="%Y-%m-%dT%H:%M:%S%.f%:z"), EXPORT_MODE)
        else:
            df = _utc(defuse(tables[name]))
            write_atomic_with(p, lambda fd, tmp: df.write_parquet(tmp), EXPORT_MODE)
        out.append(p)
    return out
