# --- mdiag: diagnose this job automatically when it fails ------------------------------
# (from `mdiag hook --trap`)  Put these lines near the top of the sbatch script, before the
# training command.  They act only when the script exits non-zero (a time limit or scancel
# included: SIGTERM runs the trap), never run longer than @@HARD@@ s, print one line on stderr
# and keep the job's exit code.  mdiag exits 1 when it diagnosed a failure, 0 when it found
# none and 2 on an error.
if [ -z "${MDIAG_BIN:-}" ]; then MDIAG_BIN=@@MDIAG@@; fi
if [ -z "${MDIAG_OUT:-}" ]; then MDIAG_OUT=@@OUT@@; fi
MDIAG_JSONL=@@JSONL@@
_mdiag_on_exit() {
  local rc=$?
  trap - EXIT
  # SLURM sends SIGTERM to every process of the job (time limit, scancel): mdiag ignores it and
  # stops reading after @@TIMEOUT@@ s; `timeout` sends SIGKILL @@HARD@@ s after the start in any case.
  trap '' TERM
  if [ "$rc" -ne 0 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    local st=0 report="$MDIAG_OUT/$SLURM_JOB_ID.json" err="$MDIAG_OUT/.mdiag-$SLURM_JOB_ID.err"
    local args=(--job "$SLURM_JOB_ID" --timeout @@TIMEOUT@@ --json-out "$MDIAG_OUT")
    if [ -n "$MDIAG_JSONL" ]; then args+=(--jsonl "$MDIAG_JSONL"); fi
    if ! { : >"$err"; } 2>/dev/null; then err=/dev/null; fi
    rm -f -- "$report" 2>/dev/null
    if command -v timeout >/dev/null 2>&1; then
      # shellcheck disable=SC2016  # $0 and $@ are the inner bash's own
      timeout -s KILL @@HARD@@ bash -c 'trap "" TERM; exec "$0" "$@"' "$MDIAG_BIN" "${args[@]}" \
        >/dev/null 2>"$err" || st=$?
    else
      st=127
    fi
    if [ "$st" -le 1 ] && [ ! -s "$report" ]; then
      echo "mdiag: no diagnosis (mdiag exit $st but no report at $report); job exit code $rc kept" >&2
    elif [ "$st" -eq 1 ]; then
      echo "mdiag: diagnosis of job $SLURM_JOB_ID in $report" >&2
    elif [ "$st" -eq 0 ]; then
      echo "mdiag: no failure found in the logs of job $SLURM_JOB_ID (report in $report); job exit code $rc kept" >&2
    else
      echo "mdiag: no diagnosis (mdiag exit $st, see $err); job exit code $rc kept" >&2
    fi
  fi
  exit "$rc"
}
mkdir -p -- "$MDIAG_OUT" 2>/dev/null || true
trap _mdiag_on_exit EXIT
trap 'exit 143' TERM   # time limit / scancel: SIGTERM runs the EXIT trap (SIGKILL follows KillWait s later)
# --- end mdiag --------------------------------------------------------------------------
