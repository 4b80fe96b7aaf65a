"""A real one-node SLURM cluster (Debian's slurm-wlm + munge): failed jobs diagnosed by the hooks.

The session fixture starts munged, slurmctld and slurmd as root (tests/e2e/slurm/cluster.py) with
the Epilog printed by `mdiag hook --epilog`, and submits at once:

* a torchrun job (`srun --label` → `0: ` prefixes) whose rank 2 hits a real shape error, with the
  trap snippet printed by `mdiag hook`;
* a job over its `--time=1` limit (SLURM ends it 60–90 s after the start; KillWait=30), with the
  trap snippet and the dependent-job alternative (`sbatch --dependency=afternotok:...`).

Then it waits for them and checks the JSON reports the hooks wrote, and `mdiag JOBID` through
scontrol.  Skipped with the reason when SLURM cannot start here (not root, not installed).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e" / "slurm"))
import cluster  # noqa: E402

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).resolve().parent / "e2e" / "tiny_megatron.py"
WAIT_S = 240
DONE = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
        "DEADLINE"}


def _mdiag() -> str:
    return shutil.which("mdiag") or pytest.skip("the mdiag console script is not on PATH (pip install -e .)")


def _hook(*args: str) -> tuple[str, str]:
    """`mdiag hook ARGS` → (trap snippet, dependent-job lines)."""
    out = subprocess.run([_mdiag(), "hook", *args], capture_output=True, text=True, check=True).stdout
    trap, dep = out.split("# --- mdiag, no admin needed", 1)
    return trap, "# --- mdiag, no admin needed" + dep


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    why = cluster.missing()
    if why:
        pytest.skip(f"SLURM cannot start here: {why}")
    pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    base = tmp_path_factory.mktemp("slurm")
    epilog = base / "epilog.sh"
    epilog.write_text(subprocess.run([_mdiag(), "hook", "--epilog", "--timeout", "60", "--json-out",
                                      str(base / "epilog-reports")], capture_output=True, text=True,
                                     check=True).stdout)
    epilog.chmod(0o755)
    try:
        env = cluster.start(base / "cluster", epilog=epilog)
    except cluster.ClusterError as exc:
        pytest.skip(f"SLURM cannot start here: {exc}")
    try:
        yield {"env": env, "base": base}
    finally:
        cluster.stop(base / "cluster")


def sbatch(env: dict, script: Path) -> str:
    r = subprocess.run(["sbatch", "--parsable", str(script)], env=env, capture_output=True, text=True,
                       cwd=script.parent)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().split(";")[0]


def job_state(env: dict, jid: str) -> str | None:
    r = subprocess.run(["scontrol", "show", "job", jid], env=env, capture_output=True, text=True)
    for tok in r.stdout.split():
        if tok.startswith("JobState="):
            return tok.split("=", 1)[1]
    return None


def wait_for(env, jids: list[str], timeout: float = WAIT_S) -> dict:
    deadline = time.monotonic() + timeout
    states = {}
    while time.monotonic() < deadline:
        states = {j: job_state(env, j) for j in jids}
        if all(s in DONE for s in states.values()):
            return states
        time.sleep(2)
    pytest.fail(f"jobs did not end within {timeout:.0f} s: {states}")


def wait_file(path: Path, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return json.loads(path.read_text())
        time.sleep(1)
    pytest.fail(f"{path} was not written within {timeout:.0f} s; folder holds "
                f"{sorted(p.name for p in path.parent.glob('*')) if path.parent.exists() else 'nothing'}")


@pytest.fixture(scope="session")
def jobs(slurm):
    env, base = slurm["env"], slurm["base"]
    work = base / "work"
    (work / "logs").mkdir(parents=True)
    trap, _ = _hook("--timeout", "60", "--json-out", str(base / "reports"), "--jsonl", str(base / "all.jsonl"))
    _, dep = _hook("--timeout", "60", "--json-out", str(base / "dep-reports"))
    py = sys.executable
    shape = work / "train.sbatch"
    shape.write_text(f"""#!/bin/bash
#SBATCH --job-name=gpt-shape
#SBATCH --ntasks=1
#SBATCH --output={work}/logs/train-%j.out
#SBATCH --error={work}/logs/train-%j.err
{trap}
export OMP_NUM_THREADS=1
srun --label --ntasks=1 {py} -m torch.distributed.run --standalone --nproc-per-node 4 {SCRIPT} \\
  --fail shape --fail-rank 2 --fail-iter 2 --iter-sleep 0 --train-iters 4
""")
    over = work / "timelimit.sbatch"
    over.write_text(f"""#!/bin/bash
#SBATCH --job-name=over-time
#SBATCH --ntasks=1
#SBATCH --time=1
#SBATCH --output={work}/logs/over-%j.out
{trap}
{dep}
echo "training starts at $(date +%FT%T)"
srun --ntasks=1 sleep 600
""")
    t0 = time.monotonic()
    ids = {"shape": sbatch(env, shape), "timelimit": sbatch(env, over)}
    states = wait_for(env, list(ids.values()))
    return {"ids": ids, "states": states, "work": work, "base": base, "env": env,
            "seconds": time.monotonic() - t0}


def test_shape_job_hook_report(jobs, validate):
    jid = jobs["ids"]["shape"]
    assert jobs["states"][jid] == "FAILED"
    doc = validate(wait_file(jobs["base"] / "reports" / f"{jid}.json"))
    root = doc["root_cause"]
    assert (root["category"], root["rank"]) == ("shape", 2), root
    assert "Expected size for first two dimensions of batch2 tensor" in root["message"]
    assert doc["job_id"] == jid and doc["slurm"]["job_id"] == jid
    assert doc["slurm"]["source"] in ("scontrol", "sacct")
    # the job's exit code is the training's, not mdiag's (the trap keeps it)
    r = subprocess.run(["scontrol", "show", "job", jid], env=jobs["env"], capture_output=True, text=True)
    assert "ExitCode=1:0" in r.stdout, r.stdout
    err = (jobs["work"] / "logs" / f"train-{jid}.err").read_text()
    assert f"mdiag: diagnosis of job {jid} in" in err
    lines = [json.loads(line) for line in (jobs["base"] / "all.jsonl").read_text().splitlines()]
    assert jid in {d["job_id"] for d in lines}


def test_mdiag_jobid_through_scontrol(jobs, tmp_path, validate):
    jid = jobs["ids"]["shape"]
    r = subprocess.run([_mdiag(), "--json", jid], env=jobs["env"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    doc = validate(json.loads(r.stdout))
    assert (doc["root_cause"]["category"], doc["root_cause"]["rank"]) == ("shape", 2)
    s = doc["slurm"]
    assert (s["state"], s["exit_code"], s["source"]) == ("FAILED", "1:0", "scontrol"), s
    assert s["std_err"].endswith(f"train-{jid}.err") and s["node_list"]
    text = subprocess.run([_mdiag(), jid], env={**jobs["env"], "NO_COLOR": "1", "COLUMNS": "200"},
                          capture_output=True, text=True, cwd=tmp_path).stdout
    assert f"SLURM job {jid}: State FAILED, ExitCode 1:0" in text


def test_timelimit_job_reports(jobs, validate):
    jid = jobs["ids"]["timelimit"]
    assert jobs["states"][jid] == "TIMEOUT"
    # The trap runs between SIGTERM and SIGKILL (KillWait); the same SIGTERM reaches the mdiag it
    # starts, which must not stop it.
    trap_doc = validate(wait_file(jobs["base"] / "reports" / f"{jid}.json"))
    assert trap_doc["root_cause"]["category"] == "slurm", trap_doc["root_cause"]
    # The dependent job runs once the job has ended.
    dep_doc = validate(wait_file(jobs["base"] / "dep-reports" / f"{jid}.json"))
    assert dep_doc["root_cause"]["category"] == "slurm", dep_doc["root_cause"]
    assert dep_doc["slurm"]["state"] == "TIMEOUT"


def test_epilog_reports(jobs, validate):
    """The administrators' Epilog (slurm.conf Epilog=) wrote a report for each failed job."""
    folder = jobs["base"] / "epilog-reports"
    shape = validate(wait_file(folder / f"{jobs['ids']['shape']}.json", timeout=30))
    assert (shape["root_cause"]["category"], shape["root_cause"]["rank"]) == ("shape", 2)
    over = validate(wait_file(folder / f"{jobs['ids']['timelimit']}.json", timeout=30))
    assert over["root_cause"]["category"] == "slurm"
