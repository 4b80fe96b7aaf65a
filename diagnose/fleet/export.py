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
