"""`mdiag fleet`: trends over many diagnoses — categories, weeks, recurring fingerprints, suspect nodes."""
from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone

import click

from diagnose.fleet.export import export, to_json, write_prometheus
from diagnose.fleet.load import FleetInputError, load
from diagnose.fleet.render import render
from diagnose.fleet.tables import prepare, summarize


def _date(value: str | None, end: bool = False) -> datetime | None:
    if not value:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"not a date: {value!r} (use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS)")
    if t.tzinfo is not None:  # the fleet's clock is UTC
        t = t.astimezone(timezone.utc).replace(tzinfo=None)
    if end and len(value) <= 10:
        t += timedelta(days=1)  # --until 2026-12-02 includes that day
    return t


@click.command("fleet")
@click.argument("paths", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the tables as one JSON object.")
@click.option("--csv", "csv_dir", type=click.Path(file_okay=False), help="Write each table as DIR/<table>.csv.")
@click.option("--parquet", "parquet_dir", type=click.Path(file_okay=False), help="Write each table as DIR/<table>.parquet.")
@click.option("--prom", "prom_file", type=click.Path(dir_okay=False),
              help="Write gauges in the Prometheus text format (node_exporter textfile collector), atomically.")
@click.option("--since", help="Only failures at or after this date/time (YYYY-MM-DD[THH:MM:SS]).")
@click.option("--until", help="Only failures before this date/time; a bare date includes that day.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="How many fingerprints to list.")
@click.option("--gpus-per-node", type=click.IntRange(min=1), default=8, show_default=True,
              help="GPUs per node, for GPU-hours when a report has a node count but no world size.")
def fleet(paths, as_json, csv_dir, parquet_dir, prom_file, since, until, top, gpus_per_node) -> None:
    """Summarize many mdiag JSON reports: failures by category and week, recurring root-cause
    fingerprints, suspect nodes, GPU-hours lost.

    PATHS are report files (`mdiag --json` output), folders of them, or JSONL files with one
    report per line.

    \b
    Suspect node: the root-cause host of >= 3 cuda/nccl failures, or of >= 3 failures with
    P(Poisson(fleet mean per host) >= count) < 0.01 / hosts.

    \b
    Exit status: 0 the tables were written, 2 no report found under PATHS or a usage/input error.
    """
    import os as _os

    from rich.console import Console

    from diagnose.fleet.scrub import clean_text

    s, u = _date(since), _date(until, end=True)
    warnings: list[str] = []
    try:
        df = load(list(paths), warnings)
    except FleetInputError as exc:
        click.echo(f"mdiag: error: {clean_text(str(exc))}", err=True)
        sys.exit(2)
    for w in warnings:
        click.echo(f"mdiag: warning: {clean_text(w)}", err=True)
    if df.height == 0:
        click.echo(f"mdiag: error: no mdiag reports (*.json, *.jsonl) found in {clean_text(', '.join(paths))}", err=True)
        sys.exit(2)
    tables = summarize(prepare(df, gpus_per_node=gpus_per_node), s, u, top=top)
    if csv_dir:
        export(tables, csv_dir, "csv")
    if parquet_dir:
        export(tables, parquet_dir, "parquet")
    if prom_file:
        write_prometheus(prom_file, tables)
    if as_json:
        sys.stdout.write(json.dumps(to_json(tables), ensure_ascii=True) + "\n")
    else:
        console = Console(no_color=bool(_os.environ.get("NO_COLOR")), highlight=False)
        render(tables, console)
