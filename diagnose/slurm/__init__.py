"""SLURM integration: job lookup through scontrol/sacct (job) and the sbatch hook / Epilog (hook)."""
