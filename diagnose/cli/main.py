"""The `mdiag` command: parses options, calls the library, prints.  Nothing else lives here."""
from __future__ import annotations

import contextlib
import gc
import json
import os
import sys

import click

from diagnose import __version__

EXIT_OK, EXIT_FAILURE_FOUND, EXIT_USAGE = 0, 1, 2

HELP = """Name the root cause of a failed distributed training job from its logs.

PATHS are log files (.err/.out/.log, optionally .gz), folders (searched recursively,
including torchrun --log-dir trees with error.json) or globs.  mdiag reads every line,
orders events on one timeline and reports the earliest real failure, not the NCCL
timeouts and SIGTERMs that follow it.

\b
Examples:
  mdiag logs/megatron-1234.err          one merged sbatch output file
  mdiag logs/                           a folder of per-rank / per-node files
  mdiag --json logs/ > diag.json        the same diagnosis as JSON for a dashboard

\b
Exit status: 0 no failure found, 1 a failure was diagnosed, 2 usage or input error.
"""


# Subcommands live in their own modules and are imported only when used (keeps `mdiag` start-up fast).
SUBCOMMANDS = {
    "patterns": ("diagnose.cli.patterns", "patterns"),
    "hook": ("diagnose.slurm.hook", "hook"),
    "fleet": ("diagnose.fleet.fleet", "fleet"),
}


class _DefaultGroup(click.Group):
    """`mdiag PATHS...` runs the diagnosis; `mdiag patterns ...` etc. are subcommands."""

    def list_commands(self, ctx):
        return sorted(self.commands) + sorted(n for n in SUBCOMMANDS if n not in self.commands)

    def get_command(self, ctx, name):
        if name in SUBCOMMANDS and name not in self.commands:
            import importlib

            module, attr = SUBCOMMANDS[name]
            try:
                self.add_command(getattr(importlib.import_module(module), attr), name)
            except (ImportError, AttributeError):
                return None
        return super().get_command(ctx, name)

    def invoke(self, ctx):
        """Safety net: an unexpected exception is one line on stderr and exit 2, not a traceback
        (MDIAG_DEBUG=1 shows the traceback)."""
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except BrokenPipeError:  # `mdiag … | head`: the reader went away
            try:
                sys.stdout = open(os.devnull, "w")
            except OSError:
                pass
            sys.exit(EXIT_USAGE)
        except Exception as exc:
            if os.environ.get("MDIAG_DEBUG", "") not in ("", "0"):
                raise
            from diagnose.render.report import inert

            msg = inert(" ".join(str(exc).split()))[:500]
            click.echo(f"mdiag: internal error: {type(exc).__name__}: {msg} (MDIAG_DEBUG=1 shows the traceback)", err=True)
            sys.exit(EXIT_USAGE)

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in SUBCOMMANDS and args[0] not in ("--help", "-h", "--version"):
            args = ["run", *args]
        elif not args:
            args = ["run"]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultGroup, help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mdiag")
def main() -> None:
    pass


@main.command("run", help=HELP)
@click.argument("paths", nargs=-1, required=False)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout and nothing else (= --format json).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default=None,
              help="text (default, for the terminal), json, or markdown (a summary for a GitHub issue or chat).")
@click.option("--html", "html_file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Also write a self-contained HTML report with a per-rank timeline to this file.")
@click.option("--job-id", default=None, help="The job's id (e.g. SLURM job id), recorded in the JSON as job_id.")
@click.option("--job", "slurm_job", default=None, metavar="JOBID",
              help="Diagnose SLURM job JOBID: logs from scontrol (StdOut/StdErr/WorkDir), else files under PATHS "
                   "(default ./logs) whose names carry the id; adds sacct/scontrol State, ExitCode, Elapsed, "
                   "NodeList.  `mdiag 1234` is the same as `mdiag --job 1234`.")
@click.option("--json-out", "json_out", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Also write the JSON report to DIR/<job id or input name>.json (atomically).")
@click.option("--jsonl", "jsonl", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also append the JSON report as one line to FILE (under a file lock; many jobs may share it).")
@click.option("--patterns", "pattern_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra folder of pattern *.toml files (repeatable); a pattern with a built-in id replaces it.")
@click.option("--timeout", "timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Bound the whole run: stop reading when it is reached and report what was read, "
                   "marked partial (JSON \"partial\": true; warnings say what was not read).")
@click.option("--no-redact", "no_redact", is_flag=True,
              help="Keep secrets found in the logs (tokens, passwords, API keys) in the report; "
                   "by default they are replaced by <redacted>.")
def run(paths: tuple[str, ...], as_json: bool, fmt: str | None, html_file: str | None, job_id: str | None,
        pattern_dirs: tuple[str, ...], slurm_job: str | None = None, json_out: str | None = None,
        jsonl: str | None = None, timeout: float | None = None, no_redact: bool = False) -> None:
    from diagnose.slurm import job as slurm
    from diagnose.read.collect import InputError
    from diagnose.patterns.library import PatternError
    from diagnose.pipeline import diagnose
    from diagnose.render.report import render, to_dict
    from diagnose.read.scan import reuse_freed_blocks

    reuse_freed_blocks()
    # what the imports made lives as long as the process: the collector need not walk it each time the
    # scan's allocations set it off (about 140 times per GB, 1-2% of the run's instructions)
    gc.freeze()
    if slurm_job is None and paths and slurm.is_job_id(paths[0]):
        slurm_job, paths = paths[0], paths[1:]
    if not paths and not slurm_job:
        click.echo("mdiag: error: give log files, folders or globs, or a SLURM job id (mdiag --help)", err=True)
        sys.exit(EXIT_USAGE)
    try:
        if slurm_job:
            d = slurm.diagnose_job(slurm_job, list(paths), pattern_dirs=pattern_dirs, timeout=timeout)
            job_id = job_id or slurm_job
        else:
            with _progress(list(paths)) as advance:
                d = diagnose(list(paths), pattern_dirs=pattern_dirs, timeout=timeout, progress=advance)
    except (InputError, PatternError) as exc:
        from diagnose.render.report import inert

        click.echo(f"mdiag: error: {inert(str(exc))}", err=True)
        sys.exit(EXIT_USAGE)
    from diagnose.render.redact import redact  # the output boundary: secrets (unless --no-redact) and control characters

    d = redact(d, secrets=not no_redact)
    if as_json and fmt not in (None, "json"):
        click.echo(f"mdiag: error: --json conflicts with --format {fmt}", err=True)
        sys.exit(EXIT_USAGE)
    fmt = "json" if as_json else (fmt or "text")
    doc = to_dict(d, job_id=job_id) if fmt != "text" or html_file or json_out or jsonl else None
    doc = redact(doc, secrets=not no_redact) if doc is not None else None
    if json_out or jsonl:
        from diagnose.render.outputs import append_jsonl, report_name, write_json_atomic

        try:
            if json_out:
                write_json_atomic(json_out, report_name(job_id, list(paths)), doc)
            if jsonl:
                append_jsonl(jsonl, doc)
        except OSError as exc:
            click.echo(f"mdiag: error: cannot write the report: {exc}", err=True)
            sys.exit(EXIT_USAGE)
    if html_file:
        from diagnose.render.html import write_html

        try:
            write_html(doc, html_file)
        except OSError as exc:
            click.echo(f"mdiag: error: cannot write {html_file}: {exc.strerror or exc}", err=True)
            sys.exit(EXIT_USAGE)
    if fmt == "json":
        sys.stdout.write(json.dumps(doc, ensure_ascii=True) + "\n")
    elif fmt == "markdown":
        from diagnose.render.markdown import render as render_markdown

        sys.stdout.write(render_markdown(doc))
    else:
        from rich.console import Console  # imported only for the terminal report

        no_color = bool(os.environ.get("NO_COLOR"))
        out = Console(no_color=no_color, highlight=False, soft_wrap=False)
        render(d, out)
    sys.exit(EXIT_FAILURE_FOUND if d.status == "failed" else EXIT_OK)


PROGRESS_BYTES = 200 * 1024 * 1024


@contextlib.contextmanager
def _progress(paths: list[str]):
    """A progress bar of bytes read on stderr, for big inputs and only when stderr is a terminal
    (stdout carries nothing but the report or the JSON)."""
    total = 0
    if sys.stderr.isatty():
        from diagnose.read.collect import InputError, expand

        try:
            total = sum(f.stat().st_size for f in expand(paths)[0])
        except (InputError, OSError):
            total = 0
    if total < PROGRESS_BYTES:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    with Progress("reading logs", BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("read", total=total)
        yield lambda n: bar.advance(task, n)


def entry() -> None:
    """The installed `mdiag` command: main(), then out without the interpreter's teardown (freeing
    polars' thread pools and every module object costs about 60 ms, after the report is written)."""
    try:
        main()
        code = EXIT_OK
    except SystemExit as exc:
        code = exc.code
    if code is not None and not isinstance(code, int):  # sys.exit("message"): print it, as Python would
        print(code, file=sys.stderr)
        code = EXIT_FAILURE_FOUND
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code or 0)


if __name__ == "__main__":  # pragma: no cover
    entry()
