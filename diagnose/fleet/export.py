"""The fleet tables as JSON, CSV, Parquet and the Prometheus text format."""
from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from diagnose.fleet.tables import TABLES


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


def _registry(tables: dict, top: int = 20, now: float | None = None):
    """The fleet's figures as Prometheus gauges (a snapshot of the reports read, which may go down when
    reports age out of --since, hence gauges, not counters), in base units: GPU time in GPU-seconds."""
    import time

    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry()

    def gauge(name, doc, labels=()):
        return Gauge(name, doc, list(labels), registry=reg)

    def lbl(v) -> str:
        return "" if v is None else str(v)

    gauge("mdiag_fleet_reports", "mdiag reports read by mdiag fleet.").set(tables["summary"]["reports"])
    failures = gauge("mdiag_fleet_failures", "Failed jobs by root-cause category.", ["category"])
    lost = gauge("mdiag_fleet_gpu_time_lost_seconds",
                 "GPU time of failed jobs (elapsed seconds x GPUs) by root-cause category.", ["category"])
    for r in tables["by_category"].iter_rows(named=True):
        failures.labels(lbl(r["category"])).set(r["failures"])
        lost.labels(lbl(r["category"])).set(float(r.get("gpu_hours_lost") or 0.0) * 3600)
    fps = gauge("mdiag_fleet_fingerprint_failures", "Failed jobs per root-cause fingerprint (the most frequent).",
                ["fingerprint", "category", "pattern"])
    for r in tables["fingerprints"].head(top).iter_rows(named=True):
        fps.labels(lbl(r["fingerprint"]), lbl(r["category"]), lbl(r["pattern"])).set(r["failures"])
    gauge("mdiag_fleet_suspect_nodes", "Hosts that are the root-cause host of failed jobs more often than chance."
          ).set(tables["suspect_nodes"].height)
    per_node = gauge("mdiag_fleet_suspect_node_failures", "Failed jobs whose root cause was on this suspect node.",
                     ["host"])
    for r in tables["suspect_nodes"].iter_rows(named=True):
        per_node.labels(lbl(r["host"])).set(r["failures"])
    gauge("mdiag_fleet_last_run_timestamp_seconds", "When mdiag fleet wrote these figures (Unix time)."
          ).set(time.time() if now is None else now)
    return reg


def prometheus(tables: dict, top: int = 20, now: float | None = None) -> str:
    """The Prometheus text exposition format."""
    from prometheus_client import generate_latest

    return generate_latest(_registry(tables, top, now)).decode("utf-8")


def write_prometheus(path: str | os.PathLike, tables: dict, top: int = 20) -> None:
    """For node_exporter's textfile collector: written to a temporary file and renamed (atomic)."""
    from prometheus_client import write_to_textfile

    write_to_textfile(str(path), _registry(tables, top))


FORMULA_START = r"^[=+\-@\t\r]"  # what a spreadsheet may run as a formula (OWASP CSV injection)


def defuse(df):
    """Text cells a spreadsheet would read as a formula get a leading `'` (OWASP's rule)."""
    import polars as pl

    text = [c for c, t in df.schema.items() if t == pl.String]
    return df.with_columns(
        pl.when(pl.col(c).str.contains(FORMULA_START)).then(pl.lit("'") + pl.col(c)).otherwise(pl.col(c)).alias(c)
        for c in text
    )


def export(tables: dict, folder: str, fmt: str) -> list[Path]:
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for name in TABLES:
        p = d / f"{name}.{fmt}"
        if fmt == "csv":
            defuse(tables[name]).write_csv(p)
        else:
            defuse(tables[name]).write_parquet(p)
        out.append(p)
    return out
