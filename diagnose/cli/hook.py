"""`mdiag hook`: print the lines that make SLURM diagnose every failed job automatically (the scripts
and the report store are diagnose.slurm.hook)."""
from __future__ import annotations

import sys

import click

from diagnose.slurm.hook import (EPILOG_PATH, STORE_MAX_BYTES, HookError, default_timeout, dependent, epilog,
                                 install_lines, snippet, store)

EXIT_USAGE = 2


def _fail(message: str) -> None:
    click.echo(f"mdiag: error: {message}", err=True)
    sys.exit(EXIT_USAGE)


@click.command("hook", help="Print the sbatch lines (--trap, --dependent-job; both by default) or, with --epilog, "
                            "an Epilog script that run mdiag automatically when a SLURM job fails, writing "
                            "DIR/<job id>.json.")
@click.option("--trap", "want_trap", is_flag=True, help="Print only the trap for the batch script.")
@click.option("--dependent-job", "want_dep", is_flag=True,
              help="Print only the afternotok dependent job (no admin needed; also catches time limits).")
@click.option("--epilog", "as_epilog", is_flag=True,
              help=f"Print an Epilog script for administrators (install it as {EPILOG_PATH}; the install "
                   "lines go to stderr).")
@click.option("--timeout", "timeout_s", type=click.IntRange(1, 3600), default=None,
              help="Seconds mdiag may read before it stops (the job is never held longer) "
                   "[SLURM's KillWait - 5, else 25].")
@click.option("--json-out", "out", default=None, metavar="DIR",
              help="Folder for the reports, taken literally [sbatch: $SLURM_SUBMIT_DIR/mdiag; epilog: /var/log/mdiag].")
@click.option("--jsonl", default=None, metavar="FILE", help="Also append each report to this JSON-lines file.")
@click.option("--mdiag", "mdiag_bin", default=None, metavar="PATH",
              help="mdiag executable the snippet runs [the one running now].")
@click.option("--store", "as_store", is_flag=True, hidden=True)
@click.option("--name", "store_name", default=None, hidden=True)
def hook(want_trap: bool, want_dep: bool, as_epilog: bool, timeout_s: int | None, out: str | None,
         jsonl: str | None, mdiag_bin: str | None, as_store: bool, store_name: str | None) -> None:
    if as_store:
        if not out or not store_name:
            raise click.UsageError("--store needs --json-out DIR and --name NAME")
        try:
            store(sys.stdin.buffer.read(STORE_MAX_BYTES + 1), out, store_name, jsonl)
        except (ValueError, OSError) as exc:
            _fail(f"cannot store the report: {exc}")
        return
    if as_epilog and (want_trap or want_dep):
        raise click.UsageError("--epilog prints a script of its own: not with --trap or --dependent-job")
    timeout = timeout_s or default_timeout()
    kw = dict(timeout=timeout, out=out, jsonl=jsonl, mdiag=mdiag_bin)
    both = not (want_trap or want_dep)
    try:
        if as_epilog:
            texts = [epilog(**kw)]
        else:
            texts = ([snippet(**kw)] if want_trap or both else []) + ([dependent(**kw)] if want_dep or both else [])
    except HookError as exc:  # a value no shell line should carry: nothing printed but the reason
        _fail(str(exc))
    click.echo("\n".join(texts), nl=False)
    if as_epilog:
        click.echo(install_lines(EPILOG_PATH), err=True, nl=False)
