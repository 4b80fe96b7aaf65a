"""`mdiag hook`: print the lines that make SLURM diagnose every failed job automatically.

Three ways, all leaving the job's exit code as it was.  Each passes `--timeout T` (reading stops and
the report says it is partial) and `timeout -s KILL T+5` ends mdiag in any case:

* `--trap`: a `trap … EXIT` for the batch script that runs mdiag on the job's own logs only when
  the script exits non-zero (``trap.sh``);
* `--dependent-job` (no admin needed, also catches time limits and node failures):
  `sbatch --dependency=afternotok:$SLURM_JOB_ID --kill-on-invalid-dep=yes …` (``dependent.sh``);
* `--epilog`: an Epilog script for administrators (slurm.conf `Epilog=`), which reads the job's
  logs as the job's user and always exits 0 (a failing Epilog would drain the node) (``epilog.sh``).

Without one of them both sbatch ways are printed.  The scripts are package data; every value put
into them is quoted for the shell (shlex.quote), and values no shell line should carry (control
characters) are refused.  The default --timeout fits inside SLURM's KillWait (the SIGTERM → SIGKILL
grace of a time limit): KillWait − 5 s from `scontrol show config`, else 25 s.

`mdiag hook --store` (used by the Epilog, as root) reads a report from stdin, checks it is one JSON
object, redacts it and writes it 0640 to --json-out DIR (and --jsonl FILE) without following links.
"""
from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import click

KILL_AFTER_S = 5  # `timeout -s KILL` ends mdiag this long after its own --timeout, whatever it is doing
DEFAULT_KILLWAIT_S = 30  # SLURM's default KillWait
EPILOG_PATH = "/etc/slurm/epilog.d/mdiag.sh"  # the one install path (README and the script agree)
TRAP_OUT = '"${SLURM_SUBMIT_DIR:-$PWD}/mdiag"'  # shell code, not a value: the trap's default folder
EPILOG_OUT = "/var/log/mdiag"
STORE_MAX_BYTES = 64 * 1024 * 1024
_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class HookError(click.ClickException):
    """A value the scripts must not carry: one line on stderr, exit 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"mdiag: error: {self.format_message()}", err=True)


def _template(name: str) -> str:
    return files("diagnose.slurm").joinpath(name).read_text(encoding="utf-8")


def _value(what: str, value: str, absolute: bool = False) -> str:
    """`value` quoted for the shell, or refused (control characters, or a relative path where the
    script runs elsewhere)."""
    if value == "" or _BAD.search(value):
        raise HookError(f"{what} {value!r}: must be non-empty and hold no control characters")
    if absolute and not value.startswith("/"):
        raise HookError(f"{what} {value!r}: must be an absolute path (the Epilog runs in another folder)")
    return shlex.quote(value)


def _fill(name: str, **values: str) -> str:
    text = _template(name)
    for key, val in values.items():
        text = text.replace(f"@@{key}@@", val)
    left = re.search(r"@@[A-Z_]+@@", text)
    assert left is None, f"{name}: {left.group(0)} not filled in"
    return text


def _mdiag_path() -> str:
    found = shutil.which("mdiag")
    if found:
        return str(Path(found).resolve())
    exe = Path(sys.argv[0])
    return str(exe.resolve()) if exe.name == "mdiag" and exe.exists() else "mdiag"


def default_timeout() -> int:
    """Seconds mdiag may read so that it ends (SIGKILL KILL_AFTER_S later) within SLURM's KillWait."""
    wait = DEFAULT_KILLWAIT_S
    scontrol = shutil.which("scontrol")
    if scontrol:
        try:
            r = subprocess.run([scontrol, "show", "config"], capture_output=True, text=True, timeout=3,
                               stdin=subprocess.DEVNULL)
            m = re.search(r"^KillWait\s*=\s*(\d+)", r.stdout, re.M)
            if r.returncode == 0 and m:
                wait = int(m.group(1))
        except (OSError, subprocess.SubprocessError, ValueError):
            pass
    return max(1, min(3600, wait - KILL_AFTER_S))


def _common(timeout: int, mdiag: str | None, jsonl: str | None, absolute: bool) -> dict:
    return dict(TIMEOUT=str(int(timeout)), HARD=str(int(timeout) + KILL_AFTER_S),
                MDIAG=_value("--mdiag", mdiag or _mdiag_path()),
                JSONL=_value("--jsonl", jsonl, absolute) if jsonl is not None else "''")


def snippet(timeout: int = 25, out: str | None = None, jsonl: str | None = None, mdiag: str | None = None) -> str:
    """The trap for the batch script."""
    return _fill("trap.sh", OUT=_value("--json-out", out) if out is not None else TRAP_OUT, **_common(timeout, mdiag, jsonl, False))


def dependent(timeout: int = 25, out: str | None = None, jsonl: str | None = None, mdiag: str | None = None) -> str:
    """The afternotok dependent job."""
    return _fill("dependent.sh", OUT=_value("--json-out", out) if out is not None else TRAP_OUT,
                 JSONL_ARG=' --jsonl "$MDIAG_DEP_JSONL"' if jsonl else "", **_common(timeout, mdiag, jsonl, False))


def epilog(timeout: int = 25, out: str | None = None, jsonl: str | None = None, mdiag: str | None = None,
           epilog_path: str = EPILOG_PATH) -> str:
    """The administrators' Epilog script."""
    return _fill("epilog.sh", OUT=_value("--json-out", EPILOG_OUT if out is None else out, True),
                 EPILOG_PATH=_value("Epilog path", epilog_path, True), **_common(timeout, mdiag, jsonl, True))


def store(data: bytes, out: str, name: str, jsonl: str | None) -> Path:
    """Write a report handed over on stdin (by a process the job's user may control): one JSON
    object, redacted, 0640, no links followed.  Raises ValueError when it is not one."""
    from diagnose.render.outputs import append_jsonl, report_name, write_json_atomic
    from diagnose.render.redact import redact

    if len(data) > STORE_MAX_BYTES:
        raise ValueError(f"report over {STORE_MAX_BYTES} bytes")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"not a JSON report ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or "status" not in doc:
        raise ValueError("not a JSON report (no object with a status)")
    doc = redact(doc)
    path = write_json_atomic(out, report_name(name, []), doc)
    if jsonl:
        append_jsonl(jsonl, doc)
    return path


def _install_lines(path: str) -> str:
    q = shlex.quote(path)
    return (f"# install: mdiag hook --epilog > {q} && chown root:root {q} && chmod 0755 {q}\n"
            f"# slurm.conf (every node): Epilog={path}   then: scontrol reconfigure\n")


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
            click.echo(f"mdiag: error: cannot store the report: {exc}", err=True)
            sys.exit(2)
        return
    if as_epilog and (want_trap or want_dep):
        raise click.UsageError("--epilog prints a script of its own: not with --trap or --dependent-job")
    timeout = timeout_s or default_timeout()
    if as_epilog:
        click.echo(epilog(timeout, out, jsonl, mdiag_bin), nl=False)
        click.echo(_install_lines(EPILOG_PATH), err=True, nl=False)
        return
    kw = dict(timeout=timeout, out=out, jsonl=jsonl, mdiag=mdiag_bin)
    both = not (want_trap or want_dep)
    if want_trap or both:
        click.echo(snippet(**kw), nl=False)
    if both:
        click.echo("")
    if want_dep or both:
        click.echo(dependent(**kw), nl=False)
