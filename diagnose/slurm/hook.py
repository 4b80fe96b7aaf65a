"""`mdiag hook`: print the lines that make SLURM diagnose every failed job automatically.

Three ways, all leaving the job's exit code as it was.  Each passes `--timeout T` (reading stops and
the report says it is partial) and `timeout -s KILL T+5` ends mdiag in any case:

* the sbatch snippet (default): a `trap … EXIT` in the batch script that runs mdiag on the job's
  own logs only when the script exits non-zero;
* the dependent job (no admin needed, also catches time limits and node failures):
  `sbatch --dependency=afternotok:$SLURM_JOB_ID --kill-on-invalid-dep=yes …`;
* `--epilog`: an Epilog script for administrators (slurm.conf `Epilog=`), which always exits 0
  (a failing Epilog would drain the node).
"""
from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import click

KILL_AFTER_S = 5  # `timeout -s KILL` ends mdiag this long after its own --timeout, whatever it is doing

SNIPPET = r"""# --- mdiag: diagnose this job automatically when it fails ------------------------------
# Put these lines near the top of the sbatch script (before the training command).  They
# only act when the script exits non-zero, never run longer than {hard} s, never print
# into the job's output except one line on stderr, and keep the job's exit code.
MDIAG_BIN="${{MDIAG_BIN:-{mdiag}}}"
MDIAG_OUT="${{MDIAG_OUT:-{out}}}"
_mdiag_on_exit() {{
  local rc=$?
  trap - EXIT
  # SLURM sends SIGTERM to every process of the job (time limit, scancel): mdiag ignores it and
  # stops reading after {timeout} s; `timeout` sends SIGKILL {hard} s after the start in any case.
  trap '' TERM
  if [ "$rc" -ne 0 ] && [ -n "${{SLURM_JOB_ID:-}}" ]; then
    local st=0
    if command -v timeout >/dev/null 2>&1; then
      timeout -s KILL {hard} bash -c 'trap "" TERM; exec "$0" "$@"' "$MDIAG_BIN" --job "$SLURM_JOB_ID" --timeout {timeout} \
        --json-out "$MDIAG_OUT"{jsonl} >/dev/null 2>"$MDIAG_OUT/.mdiag-$SLURM_JOB_ID.err" || st=$?
    else
      st=127
    fi
    case $st in
      0|1) echo "mdiag: diagnosis of job $SLURM_JOB_ID in $MDIAG_OUT/$SLURM_JOB_ID.json" >&2 ;;
      *) echo "mdiag: no diagnosis (mdiag exit $st, see $MDIAG_OUT/.mdiag-$SLURM_JOB_ID.err); job exit code $rc kept" >&2 ;;
    esac
  fi
  exit "$rc"
}}
mkdir -p "$MDIAG_OUT" 2>/dev/null || true
trap _mdiag_on_exit EXIT
trap 'exit 143' TERM   # time limit / scancel: SIGTERM → run the EXIT trap (SLURM sends SIGKILL KillWait s later)
# --- end mdiag --------------------------------------------------------------------------
"""

DEPENDENT = r"""# --- mdiag, no admin needed: a dependent job that runs only if this job fails -----------
# (also after a time limit, node failure or OOM kill, which the trap above may not survive).
# Put it in the sbatch script (it uses this job's id) or run it after `jid=$(sbatch --parsable …)`.
sbatch --dependency=afternotok:"$SLURM_JOB_ID" --kill-on-invalid-dep=yes --job-name=mdiag-"$SLURM_JOB_ID" \
  --ntasks=1 --time=5 --output=/dev/null --wrap \
  "timeout -s KILL {hard} {mdiag} --job $SLURM_JOB_ID --timeout {timeout} --json-out {out}{jsonl_wrap}" >/dev/null
# --- end mdiag --------------------------------------------------------------------------
"""

EPILOG = r"""#!/bin/bash
# mdiag Epilog for administrators: diagnose every failed job on the node it ran on.
#   slurm.conf:  Epilog={epilog_path}      (runs as root on each node after each job)
# SLURM >= 22.05 sets SLURM_JOB_EXIT_CODE (raw wait status) and SLURM_JOB_STDOUT/STDERR here.
# Always exits 0: a failing Epilog would drain the node.  Bounded by --timeout and timeout -s KILL.
MDIAG_BIN="${{MDIAG_BIN:-{mdiag}}}"
MDIAG_OUT="${{MDIAG_OUT:-{out}}}"
[ -n "${{SLURM_JOB_ID:-}}" ] || exit 0
failed=0
[ "${{SLURM_JOB_EXIT_CODE:-0}}" != "0" ] && failed=1
[ "${{SLURM_JOB_DERIVED_EC:-0}}" != "0" ] && failed=1
export PATH="${{PATH:-/usr/local/bin:/usr/bin:/bin}}"
# SLURM_JOB_STDOUT/STDERR hold the sbatch patterns (%j, %u, %x, ...): expand them, relative to the work dir.
out="${{SLURM_JOB_STDOUT:-slurm-%j.out}}"
logs=()
for f in "${{SLURM_JOB_STDERR:-$out}}" "$out"; do
  f="${{f//%j/$SLURM_JOB_ID}}"; f="${{f//%J/$SLURM_JOB_ID}}"; f="${{f//%A/$SLURM_JOB_ID}}"
  f="${{f//%u/${{SLURM_JOB_USER:-}}}}"; f="${{f//%N/${{SLURMD_NODENAME:-}}}}"
  case $f in /*) ;; *) f="${{SLURM_JOB_WORK_DIR:-/}}/$f" ;; esac
  f="$(printf '%s' "$f" | sed 's/%[0-9]*[a-zA-Z]/*/g')"
  for g in $f; do
    [ -f "$g" ] && [[ ! " ${{logs[*]}} " == *" $g "* ]] && logs+=("$g")
  done
done
[ "${{#logs[@]}}" -gt 0 ] || exit 0
# A job SLURM itself ended (time limit, scancel, node failure) reaches the Epilog with exit code 0
# (the terminate request comes before the script's status): slurmstepd's banner in the log says so.
if [ "$failed" = 0 ]; then
  tail -n 200 "${{logs[@]}}" 2>/dev/null | grep -qE '\*\*\* (JOB|STEP) [0-9].* (CANCELLED|FAILED)' && failed=1
fi
[ "$failed" = 1 ] || exit 0
mkdir -p "$MDIAG_OUT" 2>/dev/null || exit 0
# Only this node's copy of a multi-node job's output is read; the batch host holds it.  No RPCs to
# slurmctld from an Epilog (MDIAG_SLURM_QUERY=0): the exit code comes from SLURM_JOB_EXIT_CODE2.
MDIAG_SLURM_QUERY=0 timeout -s KILL {hard} "$MDIAG_BIN" --job "$SLURM_JOB_ID" --timeout {timeout} --json-out "$MDIAG_OUT"{jsonl} \
  "${{logs[@]}}" >/dev/null 2>>"$MDIAG_OUT/.mdiag-epilog.err" || true
exit 0
"""


def _mdiag_path() -> str:
    found = shutil.which("mdiag")
    if found:
        return str(Path(found).resolve())
    exe = Path(sys.argv[0])
    return str(exe.resolve()) if exe.name == "mdiag" and exe.exists() else "mdiag"


def snippet(timeout: int = 60, out: str = "${SLURM_SUBMIT_DIR:-$PWD}/mdiag", jsonl: str | None = None,
            mdiag: str | None = None) -> str:
    mdiag = mdiag or _mdiag_path()
    j = f' --jsonl "{jsonl}"' if jsonl else ""
    return SNIPPET.format(timeout=timeout, hard=timeout + KILL_AFTER_S, out=out, mdiag=mdiag, jsonl=j)


def dependent(timeout: int = 60, out: str = "${SLURM_SUBMIT_DIR:-$PWD}/mdiag", jsonl: str | None = None,
              mdiag: str | None = None) -> str:
    mdiag = mdiag or _mdiag_path()
    j = f" --jsonl {jsonl}" if jsonl else ""
    return DEPENDENT.format(timeout=timeout, hard=timeout + KILL_AFTER_S, out=out, mdiag=shlex.quote(mdiag), jsonl_wrap=j)


def epilog(timeout: int = 60, out: str = "/var/log/mdiag", jsonl: str | None = None, mdiag: str | None = None,
           epilog_path: str = "/etc/slurm/epilog.d/mdiag.sh") -> str:
    mdiag = mdiag or _mdiag_path()
    j = f' --jsonl "{jsonl}"' if jsonl else ""
    return EPILOG.format(timeout=timeout, hard=timeout + KILL_AFTER_S, out=out, mdiag=mdiag, jsonl=j, epilog_path=epilog_path)


@click.command("hook", help="Print the sbatch lines (or, with --epilog, an Epilog script) that run mdiag "
                            "automatically when a SLURM job fails, writing DIR/<job id>.json.")
@click.option("--epilog", "as_epilog", is_flag=True, help="Print an Epilog script for administrators instead.")
@click.option("--timeout", "timeout_s", type=click.IntRange(1, 3600), default=60, show_default=True,
              help="Seconds mdiag may run before it is stopped (the job is never held longer).")
@click.option("--json-out", "out", default=None, metavar="DIR",
              help="Folder for the reports [sbatch: $SLURM_SUBMIT_DIR/mdiag; epilog: /var/log/mdiag].")
@click.option("--jsonl", default=None, metavar="FILE", help="Also append each report to this JSON-lines file.")
@click.option("--mdiag", "mdiag_bin", default=None, metavar="PATH",
              help="mdiag executable the snippet runs [the one running now].")
def hook(as_epilog: bool, timeout_s: int, out: str | None, jsonl: str | None, mdiag_bin: str | None) -> None:
    if as_epilog:
        click.echo(epilog(timeout_s, out or "/var/log/mdiag", jsonl, mdiag_bin), nl=False)
        return
    kw = dict(timeout=timeout_s, out=out or "${SLURM_SUBMIT_DIR:-$PWD}/mdiag", jsonl=jsonl, mdiag=mdiag_bin)
    click.echo(snippet(**kw), nl=False)
    click.echo("")
    click.echo(dependent(**kw), nl=False)
