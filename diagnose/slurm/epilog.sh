#!/bin/bash
# mdiag Epilog for administrators: diagnose every failed job on the node it ran on.
# Install it (one path everywhere; the script must be readable by everyone, writable by root only):
#   mdiag hook --epilog > @@EPILOG_PATH@@
#   chown root:root @@EPILOG_PATH@@ && chmod 0755 @@EPILOG_PATH@@
#   slurm.conf on every node:   Epilog=@@EPILOG_PATH@@      then: scontrol reconfigure
# slurmd runs it as root after each job; SLURM >= 22.05 sets SLURM_JOB_EXIT_CODE (raw wait status)
# and SLURM_JOB_STDOUT/STDERR.  The job's logs are found and read as the job's user
# (setpriv to SLURM_JOB_UID), never as root; the report is written by root, mode 0640, to
# @@OUT@@/<job id>.json.  Always exits 0: a failing Epilog would drain the node.  Bounded by
# --timeout @@TIMEOUT@@ and `timeout -s KILL @@HARD@@`.
MDIAG_BIN=@@MDIAG@@
MDIAG_OUT=@@OUT@@
MDIAG_JSONL=@@JSONL@@
export PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}"
export MDIAG_BIN
umask 027

# As the job's user: find the job's logs (SLURM_JOB_STDOUT/STDERR hold the sbatch patterns, %j,
# %u, %x, ..., relative to the work dir), decide whether the job failed, print mdiag's JSON.
# shellcheck disable=SC2317  # run through `declare -f` below
_mdiag_user_part() {
  local out f g lit failed=0 IFS=
  local -a logs=() found=()
  [ "${SLURM_JOB_EXIT_CODE:-0}" != "0" ] && failed=1
  [ "${SLURM_JOB_DERIVED_EC:-0}" != "0" ] && failed=1
  shopt -s nullglob
  out="${SLURM_JOB_STDOUT:-slurm-%j.out}"
  for f in "${SLURM_JOB_STDERR:-$out}" "$out"; do
    f="${f//%j/$SLURM_JOB_ID}"; f="${f//%J/$SLURM_JOB_ID}"; f="${f//%A/$SLURM_JOB_ID}"
    f="${f//%u/${SLURM_JOB_USER:-}}"; f="${f//%N/${SLURMD_NODENAME:-}}"
    case $f in /*) ;; *) f="${SLURM_JOB_WORK_DIR:-/}/$f" ;; esac
    # the path's own glob characters stay literal; each remaining %-pattern matches any text
    lit="$f"
    f="${f//\\/\\\\}"; f="${f//\*/\\*}"; f="${f//\?/\\?}"; f="${f//\[/\\[}"
    if [[ $lit =~ %[0-9]*[a-zA-Z] ]]; then
      while [[ $f =~ ^(.*)%[0-9]*[a-zA-Z](.*)$ ]]; do f="${BASH_REMATCH[1]}*${BASH_REMATCH[2]}"; done
      # shellcheck disable=SC2206  # IFS is empty: no word splitting, only the globbing wanted here
      found=($f)
    else
      found=("$lit")  # no pattern left: the path itself (an escaped glob would not be expanded)
    fi
    for g in "${found[@]}"; do
      [ -f "$g" ] && [[ ! " ${logs[*]} " == *" $g "* ]] && logs+=("$g")
    done
  done
  [ "${#logs[@]}" -gt 0 ] || return 0
  # A job SLURM itself ended (time limit, scancel, node failure) reaches the Epilog with exit
  # code 0 (the terminate request comes before the script's status): slurmstepd's banner says so.
  if [ "$failed" = 0 ]; then
    tail -n 200 -- "${logs[@]}" 2>/dev/null | grep -qE '\*\*\* (JOB|STEP) [0-9].* (CANCELLED|FAILED)' && failed=1
  fi
  [ "$failed" = 1 ] || return 0
  # Only this node's copy of a multi-node job's output is read.  No RPCs to slurmctld from an
  # Epilog (MDIAG_SLURM_QUERY=0): the exit code comes from SLURM_JOB_EXIT_CODE2.
  MDIAG_SLURM_QUERY=0 "$MDIAG_BIN" --json --job "$SLURM_JOB_ID" --timeout @@TIMEOUT@@ -- "${logs[@]}"
}

[ -n "${SLURM_JOB_ID:-}" ] || exit 0
case $SLURM_JOB_ID in *[!0-9_]*) exit 0 ;; esac
errlog="$MDIAG_OUT/.mdiag-epilog.err"
run_as=()
if [ "$(id -u)" = 0 ]; then
  uid="${SLURM_JOB_UID:-}"
  gid="${SLURM_JOB_GID:-}"
  case $uid in '' | *[!0-9]*) exit 0 ;; esac   # no job user known: read nothing as root
  if [ "$uid" != 0 ]; then
    case $gid in '' | *[!0-9]*) gid="$(id -g -- "$uid" 2>/dev/null)" || exit 0 ;; esac
    if command -v setpriv >/dev/null 2>&1; then
      run_as=(setpriv --reuid="$uid" --regid="$gid" --clear-groups --)
    elif command -v runuser >/dev/null 2>&1 && [ -n "${SLURM_JOB_USER:-}" ]; then
      run_as=(runuser -u "$SLURM_JOB_USER" --)
    else
      exit 0
    fi
  fi
fi
[ -d "$MDIAG_OUT" ] || mkdir -p -- "$MDIAG_OUT" 2>/dev/null || exit 0   # 0750 (umask 027)
[ -d "$MDIAG_OUT" ] && [ ! -L "$MDIAG_OUT" ] || exit 0
tmp="$(mktemp -- "$MDIAG_OUT/.mdiag-$SLURM_JOB_ID.XXXXXX")" || exit 0
trap 'rm -f -- "$tmp"' EXIT
# the job's user may make its part print anything: its output is capped and checked by `hook --store`
timeout -s KILL @@HARD@@ "${run_as[@]}" /bin/bash -c "$(declare -f _mdiag_user_part)"'
_mdiag_user_part' 2> >(head -c 65536 >>"$errlog") | head -c 67108864 >"$tmp"
if [ -s "$tmp" ]; then
  store=(hook --store --json-out "$MDIAG_OUT" --name "$SLURM_JOB_ID")
  if [ -n "$MDIAG_JSONL" ]; then store+=(--jsonl "$MDIAG_JSONL"); fi
  timeout -s KILL 30 "$MDIAG_BIN" "${store[@]}" <"$tmp" >/dev/null 2>>"$errlog"
fi
exit 0
