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
EXIT_SIGINT, EXIT_SIGTERM = 130, 143  # 128 + the signal's number, as a shell reports a killed command

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
  zcat job.err.gz | mdiag -             a log on stdin

\b
Exit status:
  0    logs were read and no failure was found
  1    a failure was diagnosed
  2    nothing could be read (no log lines, or --timeout before the first line),
       or a usage or input error (one line on stderr)
  130  interrupted (SIGINT, Ctrl-C); 143 terminated (SIGTERM)
"""


# Subcommands live in their own modules and are imported only when used (keeps `mdiag` start-up fast).
SUBCOMMANDS = {
    "patterns": ("diagnose.cli.patterns", "patterns"),
    "hook": ("diagnose.cli.hook", "hook"),
    "fleet": ("diagnose.cli.fleet", "fleet"),
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

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Errors the Unix way: a usage error is one line on stderr with the --help hint, exit 2;
        Ctrl-C exits 130 (and SIGTERM 143, see entry())."""
        prog_name = prog_name or "mdiag"
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            cmd = exc.ctx.command if exc.ctx else None
            where = "mdiag" if cmd is None or cmd.name in ("run", "mdiag") else exc.ctx.command_path
            click.echo(f"mdiag: error: {_one_line(exc.format_message()).rstrip('.')} (try '{where} --help')", err=True)
            sys.exit(EXIT_USAGE)
        except click.ClickException as exc:
            click.echo(f"mdiag: error: {_one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:  # KeyboardInterrupt (click has printed a newline)
            sys.exit(EXIT_SIGINT)
        sys.exit(rv if isinstance(rv, int) else EXIT_OK)

    def format_usage(self, ctx, formatter):
        formatter.write("Usage: mdiag [OPTIONS] PATHS...    (a file, folder or glob; - reads stdin)\n"
                        "       mdiag [OPTIONS] JOBID       (a SLURM job)\n"
                        "       mdiag COMMAND [ARGS]...\n")

    def format_options(self, ctx, formatter):
        """The diagnosis's options (the default command's), then the subcommands."""
        run_cmd = self.commands.get("run")
        params = [p for p in (run_cmd.get_params(ctx) if run_cmd else []) if p.name != "help"]
        rows = [r for p in params + self.get_params(ctx) if (r := p.get_help_record(ctx))]
        if rows:
            with formatter.section("Options"):
                formatter.write_dl(rows)
        self.format_commands(ctx, formatter)

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in SUBCOMMANDS and args[0] not in ("--help", "-h", "--version"):
            args = ["run", *args]
        elif not args:
            args = ["run"]
        return super().parse_args(ctx, args)


MAX_TIMEOUT_S = 1e9  # about 30 years: any longer --timeout (inf included) is no bound at all


def _timeout(value: float | None) -> float | None:
    """--timeout as a number of seconds, or None: `nan` is refused, a value past MAX_TIMEOUT_S (`inf`, `1e308`)
    bounds nothing."""
    if value is None or value < MAX_TIMEOUT_S:
        return value
    if value != value:
        raise click.BadParameter("not a number of seconds")
    return None


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


@click.group("mdiag", cls=_DefaultGroup, help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mdiag")
def main() -> None:
    pass


@main.command("run", help=HELP, hidden=True)  # `mdiag [OPTIONS] PATHS...`: the default command
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
              callback=lambda ctx, param, value: _timeout(value),
              help="Bound the whole run: stop reading when it is reached and report what was read, "
                   "marked partial (JSON \"partial\": true; warnings say what was not read).")
@click.option("--no-redact", "no_redact", is_flag=True,
              help="Keep secrets found in the logs (tokens, passwords, API keys) in the report; "
                   "by default they are replaced by <redacted>.")
def run(paths: tuple[str, ...], as_json: bool, fmt: str | None, html_file: str | None, job_id: str | None,
        pattern_dirs: tuple[str, ...], slurm_job: str | None = None, json_out: str | None = None,
        jsonl: str | None = None, timeout: float | None = None, no_redact: bool = False) -> None:
    from diagnose.slurm import job as slurm
    from diagnose.read.scan import reuse_freed_blocks

    reuse_freed_blocks()
    # what the imports made lives as long as the process: the collector need not walk it each time the
    # scan's allocations set it off (about 140 times per GB, 1-2% of the run's instructions)
    gc.freeze()
    if slurm_job is None and paths and slurm.is_job_id(paths[0]):
        slurm_job, paths = paths[0], paths[1:]
    if not paths and not slurm_job:
        click.echo("mdiag: error: give log files, folders or globs, - for stdin, or a SLURM job id (try 'mdiag --help')", err=True)
        sys.exit(EXIT_USAGE)
    from diagnose.cli.stdin import STDIN_NAME, rename_source, stdin_as_file

    with stdin_as_file(list(paths)) as (paths, stdin_file):
        d = _diagnose(paths, slurm_job, pattern_dirs, timeout)
        if stdin_file is not None:
            rename_source(d, stdin_file, STDIN_NAME)
    job_id = job_id or slurm_job
    _report(d, paths, as_json, fmt, html_file, job_id, json_out, jsonl, no_redact)


def _diagnose(paths, slurm_job, pattern_dirs, timeout):
    from diagnose.slurm import job as slurm
    from diagnose.read.collect import InputError
    from diagnose.patterns.library import PatternError
    from diagnose.pipeline import diagnose

    try:
        if slurm_job:
            return slurm.diagnose_job(slurm_job, list(paths), pattern_dirs=pattern_dirs, timeout=timeout)
        else:
            with _progress(list(paths)) as advance:
                return diagnose(list(paths), pattern_dirs=pattern_dirs, timeout=timeout, progress=advance)
    except (InputError, PatternError) as exc:
        from diagnose.render.report import inert

        click.echo(f"mdiag: error: {inert(str(exc))}", err=True)
        sys.exit(EXIT_USAGE)


def _report(d, paths, as_json, fmt, html_file, job_id, json_out, jsonl, no_redact) -> None:
    """Print (and write) the diagnosis `d`, then exit with its status."""
    from diagnose.render.report import render, to_dict

    if d.status != "failed" and not any(src.lines for src in d.sources):
        # nothing was read: "no failure found" would be a claim about logs mdiag never saw
        why = ("--timeout was reached before the first line was read" if d.partial
               else f"nothing to read: {_plural(len(d.sources), 'file')}, 0 lines")
        if d.warnings and not d.partial:  # why: a corrupt .gz, an unreadable file
            from diagnose.render.report import inert

            why += f" ({inert(' '.join(d.warnings[0].split()))[:300]})"
        click.echo(f"mdiag: error: {why}", err=True)
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


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


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
    polars' thread pools and every module object costs about 60 ms, after the report is written).
    SIGTERM exits 143 after cleaning up (temporary files), unless it was ignored when mdiag started
    (as the SLURM hook starts it): then it stays ignored."""
    import signal

    def _terminated(signum, frame):
        raise SystemExit(EXIT_SIGTERM)

    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)
    try:
        main(prog_name="mdiag")
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
