# --- mdiag, no admin needed: a dependent job that runs only if this job fails -----------
# (from `mdiag hook --dependent-job`)  Also catches a time limit, node failure or OOM kill,
# which a trap may not survive.  Put it in the sbatch script (it uses this job's id), or run it
# after `SLURM_JOB_ID=$(sbatch --parsable ...)`.  The values reach the wrapped command through
# its environment (--export=ALL), never as shell code.
# shellcheck disable=SC2016
MDIAG_DEP_BIN=@@MDIAG@@ MDIAG_DEP_OUT=@@OUT@@ MDIAG_DEP_JSONL=@@JSONL@@ \
MDIAG_DEP_JOB="${SLURM_JOB_ID:?run this in the sbatch script, or set SLURM_JOB_ID to the job id}" \
  sbatch --export=ALL --dependency=afternotok:"${SLURM_JOB_ID}" --kill-on-invalid-dep=yes \
  --job-name=mdiag-"${SLURM_JOB_ID}" --ntasks=1 --time=5 --output=/dev/null --wrap \
  'exec timeout -s KILL @@HARD@@ "$MDIAG_DEP_BIN" --job "$MDIAG_DEP_JOB" --timeout @@TIMEOUT@@ --json-out "$MDIAG_DEP_OUT"@@JSONL_ARG@@' >/dev/null
# --- end mdiag --------------------------------------------------------------------------
