"""The scripts behind `mdiag hook`: the lines that make SLURM diagnose every failed job automatically
(the click command is `diagnose/cli/hook.py`).

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

`store` (`mdiag hook --store`, used by the Epilog, as root) takes a report read from stdin, checks it is
one JSON object, redacts it and writes it 0640 to --json-out DIR (and --jsonl FILE) without following links.
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

KILL_AFTER_S = 5  # `timeout -s KILL` ends mdiag this long after its own --timeout, whatever it is doing
DEFAULT_KILLWAIT_S = 30  # SLURM's default KillWait
EPILOG_PATH = "/etc/slurm/epilog.d/mdiag.sh"  # the one install path (README and the script agree)
TRAP_OUT = '"${SLURM_SUBMIT_DIR:-$PWD}/mdiag"'  # shell code, not a value: the trap's default folder
EPILOG_OUT = "/var/log/mdiag"
STORE_MAX_BYTES = 64 * 1024 * 1024
_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class HookError(ValueError):
    """A value the scripts must not carry (the command says so in one line and exits 2)."""


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


def install_lines(path: str = EPILOG_PATH) -> str:
    """Shell comments that say how to install the Epilog script at `path`."""
    q = shlex.quote(path)
    return (f"# install: mdiag hook --epilog > {q} && chown root:root {q} && chmod 0755 {q}\n"
            f"# slurm.conf (every node): Epilog={path}   then: scontrol reconfigure\n")
