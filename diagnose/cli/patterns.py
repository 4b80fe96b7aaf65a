"""`mdiag patterns list|test|explain`: the pattern library from the command line."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from diagnose.patterns import library as pm

_dirs = click.option("--patterns", "pattern_dirs", multiple=True, type=click.Path(file_okay=False),
                     help="Extra folder of pattern *.toml files (repeatable).")


def _load(pattern_dirs) -> tuple[pm.Pattern, ...]:
    try:
        return pm.load(tuple(Path(d) for d in pattern_dirs))
    except pm.PatternError as exc:
        click.echo(f"mdiag: error: {exc}", err=True)
        sys.exit(2)


@click.group("patterns", help="List, test and explain the failure patterns (patterns/*.toml and --patterns folders).")
def patterns() -> None:
    pass


@patterns.command("list", help="One line per pattern: id, category, role, priority, title.")
@click.option("--category", "-c", help="Only this category.")
@click.option("--json", "as_json", is_flag=True, help="Print the patterns as a JSON array.")
@click.option("--markdown", is_flag=True, help="Print the README's table of categories.")
@_dirs
def list_cmd(category, as_json, markdown, pattern_dirs) -> None:
    pats = [p for p in _load(pattern_dirs) if category is None or p.category == category]
    if as_json:
        keys = ("id", "category", "role", "priority", "title", "why", "remediation", "regex", "source")
        click.echo(json.dumps([{k: getattr(p, k) for k in keys} for p in pats], indent=1, default=list))
    elif markdown:
        click.echo(category_table(pats))
    else:
        for p in sorted(pats, key=lambda p: (p.category, -p.priority, p.id)):
            click.echo(f"{p.id:<42} {p.category:<9} {p.role:<8} {p.priority:>3}  {p.title}")


@patterns.command("test", help="Run every example and near-miss of the patterns in DIR (default: all loaded).")
@click.argument("directory", required=False, type=click.Path(exists=True, file_okay=False))
@_dirs
def test_cmd(directory, pattern_dirs) -> None:
    if directory:
        try:
            pats = [p for f in sorted(Path(directory).glob("*.toml")) for p in pm.load_file(f)]
        except pm.PatternError as exc:
            click.echo(f"mdiag: error: {exc}", err=True)
            sys.exit(2)
    else:
        pats = _load(pattern_dirs)
    problems = pm.check_examples(pats)
    n = sum(len(p.examples) + len(p.near_misses) for p in pats)
    for line in problems:
        click.echo(f"FAIL {line}")
    click.echo(f"{len(pats)} patterns, {n} examples and near-misses: {len(problems)} failed")
    sys.exit(1 if problems else 0)


@patterns.command("explain", help="Everything about one pattern: what it matches, why it happens, what to do.")
@click.argument("pattern_id")
@_dirs
def explain_cmd(pattern_id, pattern_dirs) -> None:
    by_id = {p.id: p for p in _load(pattern_dirs)}
    p = by_id.get(pattern_id)
    if p is None:
        close = [i for i in by_id if pattern_id.split(".")[-1] in i][:5]
        click.echo(f"mdiag: error: no pattern {pattern_id!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""), err=True)
        sys.exit(2)
    click.echo(f"{p.id}  [{p.category}, {p.role}, priority {p.priority}]  ({p.source})")
    click.echo(f"\n{p.title}\n\nWhy: {p.why}\n\nWhat to do:")
    for r in p.remediation:
        click.echo(f"  - {r}")
    click.echo(f"\nRegex: {p.regex}\n\nMatches, for example:")
    for e in p.examples:
        click.echo(f"  {e}")
    if p.near_misses:
        click.echo("\nDoes not match:")
        for e in p.near_misses:
            click.echo(f"  {e}")


CATEGORY_BLURB = {
    "oom": "GPU memory exhausted (allocator, CUDA runtime, cuBLAS, NCCL buffers)",
    "shape": "tensor shape mismatches and divisibility of parallel / model sizes",
    "import": "modules missing, ABI / version mismatches of compiled extensions",
    "nccl": "distributed communication: NCCL, gloo, watchdog timeouts, TCPStore / rendezvous",
    "cuda": "CUDA faults: illegal memory access, device asserts, ECC / Xid, cuBLAS / cuDNN",
    "host_oom": "host RAM exhausted: cgroup / kernel OOM killer, SIGKILLed workers",
    "slurm": "scheduler: time limit, preemption, node failure, requeue, allocation",
    "config": "argument and environment validation (CUDA_DEVICE_MAX_CONNECTIONS, …)",
    "data": "datasets, indexes and checkpoints missing, corrupt or unreadable",
    "nan": "NaN / Inf loss or gradients, loss scale at its minimum",
    "python": "any other Python exception",
    "unknown": "native crashes and C++ exceptions of no named kind, error lines no pattern knows (low confidence), launcher summaries",
}


def category_table(pats) -> str:
    """The README's category table, generated from the pattern data (a test keeps them in sync)."""
    rows = ["| category | what it covers | patterns | examples |", "|---|---|---:|---:|"]
    for cat in pm.CATEGORIES:
        ps = [p for p in pats if p.category == cat]
        if not ps:
            continue
        rows.append(f"| `{cat}` | {CATEGORY_BLURB[cat]} | {len(ps)} | {sum(len(p.examples) for p in ps)} |")
    return "\n".join(rows)
