"""`mdiag hook`: the sbatch snippet run by bash in a fake job environment (no SLURM needed)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from diagnose.slurm import hook as hook_mod
from diagnose.cli.main import main

SAMPLE = Path(__file__).resolve().parents[1] / "sample_logs" / "shape-rank2.log"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="needs bash and coreutils timeout")


def _fake_mdiag(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "bin" / "mdiag"
    p.parent.mkdir(exist_ok=True)
    p.write_text("#!/bin/bash\n" + body + "\n")
    p.chmod(0o755)
    return p


def _real_mdiag(tmp_path: Path) -> Path:
    return _fake_mdiag(tmp_path, f'exec {sys.executable} -m diagnose.cli.main "$@"')


def run_job(tmp_path: Path, mdiag: Path, body: str, timeout: int = 30) -> subprocess.CompletedProcess:
    """A batch script = the snippet + body, run by bash with SLURM_JOB_ID set and no SLURM commands."""
    script = tmp_path / "job.sh"
    script.write_text(hook_mod.snippet(timeout=timeout, out=str(tmp_path / "reports"), mdiag=str(mdiag)) + body)
    env = {"PATH": f"{mdiag.parent}:/usr/bin:/bin", "SLURM_JOB_ID": "4321", "HOME": str(tmp_path),
           "SLURM_SUBMIT_DIR": str(tmp_path)}
    return subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_failing_job_writes_report_and_keeps_exit_code(tmp_path):
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "train-4321.err"
    r = run_job(tmp_path, _real_mdiag(tmp_path), f"cat {SAMPLE} > {log}\nexit 7\n")
    assert r.returncode == 7, r.stderr
    doc = json.loads((tmp_path / "reports" / "4321.json").read_text())
    assert (doc["root_cause"]["category"], doc["root_cause"]["rank"], doc["job_id"]) == ("shape", 2, "4321")
    assert "mdiag: diagnosis of job 4321 in" in r.stderr


def test_successful_job_runs_nothing(tmp_path):
    r = run_job(tmp_path, _fake_mdiag(tmp_path, f"touch {tmp_path}/ran; exit 0"), "true\n")
    assert r.returncode == 0 and not (tmp_path / "ran").exists() and r.stderr == ""


@pytest.mark.parametrize("body,why", [("exit 134", "crashing"), ("kill -SEGV $$", "segfault"),
                                      ("sleep 30", "hanging"), (None, "missing")])
def test_mdiag_failure_never_changes_the_exit_code(tmp_path, body, why):
    mdiag = _fake_mdiag(tmp_path, body) if body else tmp_path / "bin" / "no-such-mdiag"
    r = run_job(tmp_path, mdiag, "echo training; exit 3\n", timeout=2)
    assert r.returncode == 3, (why, r.stderr)
    assert "job exit code 3 kept" in r.stderr, (why, r.stderr)


def test_sigterm_runs_the_hook(tmp_path):
    """Time limit / scancel: SIGTERM to the batch script still runs mdiag, then exits 143."""
    (tmp_path / "logs").mkdir()
    mdiag = _fake_mdiag(tmp_path, f"touch {tmp_path}/ran; exit 1")
    script = tmp_path / "job.sh"
    script.write_text(hook_mod.snippet(timeout=5, out=str(tmp_path / "reports"), mdiag=str(mdiag))
                      + "sleep 30 >/dev/null 2>&1 & wait $!\n")
    env = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "1", "HOME": str(tmp_path)}
    p = subprocess.Popen(["bash", str(script)], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    import time
    time.sleep(1)
    p.terminate()
    _, err = p.communicate(timeout=30)
    assert p.returncode == 143 and (tmp_path / "ran").exists(), err


def test_sigterm_to_every_process_of_the_job_does_not_stop_the_diagnosis(tmp_path):
    """slurmstepd signals every process of the job, so the TERM of a time limit can arrive again
    while the trap's mdiag runs: it must finish and write its report (SIGKILL still bounds it)."""
    import os
    import signal
    import time

    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "train-4321.err"
    mdiag = _fake_mdiag(tmp_path, f'sleep 2; exec {sys.executable} -m diagnose.cli.main "$@"')
    script = tmp_path / "job.sh"
    script.write_text(hook_mod.snippet(timeout=30, out=str(tmp_path / "reports"), mdiag=str(mdiag))
                      + f"cat {SAMPLE} > {log}\nsleep 30 >/dev/null 2>&1 & wait $!\n")
    env = {"PATH": f"{mdiag.parent}:/usr/bin:/bin", "SLURM_JOB_ID": "4321", "HOME": str(tmp_path),
           "SLURM_SUBMIT_DIR": str(tmp_path)}
    p = subprocess.Popen(["bash", str(script)], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    time.sleep(1)
    os.killpg(p.pid, signal.SIGTERM)  # the time limit: the script's TERM trap starts the diagnosis
    time.sleep(1)
    os.killpg(p.pid, signal.SIGTERM)  # ... and the same signal reaches the running mdiag
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    doc = json.loads((tmp_path / "reports" / "4321.json").read_text())
    assert (doc["root_cause"]["category"], doc["root_cause"]["rank"]) == ("shape", 2)
    assert "mdiag: diagnosis of job 4321 in" in err


def test_hook_command_prints_snippet_dependent_and_epilog(tmp_path):
    out = CliRunner().invoke(main, ["hook", "--timeout", "30", "--json-out", "/data/mdiag"]).output
    assert "trap _mdiag_on_exit EXIT" in out and "/data/mdiag" in out
    # every way passes the limit to mdiag (a partial report) and kills it 5 s later in any case
    assert out.count("--timeout 30") == 2 and out.count("timeout -s KILL 35") == 2
    assert "--dependency=afternotok:" in out and "--kill-on-invalid-dep=yes" in out
    ep = CliRunner().invoke(main, ["hook", "--epilog"]).output
    assert ep.startswith("#!/bin/bash") and "SLURM_JOB_EXIT_CODE" in ep and ep.rstrip().endswith("exit 0")
    assert "--timeout 60" in ep and "timeout -s KILL 65" in ep
    for text in (out, ep):
        f = tmp_path / "s.sh"
        f.write_text(text)
        assert subprocess.run(["bash", "-n", str(f)]).returncode == 0


def test_epilog_script_in_fake_epilog_environment(tmp_path):
    """Epilog env as slurmd 22.05 gives it: no PATH, SLURM_JOB_STDOUT still holding %j."""
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "out-88.txt").write_text(SAMPLE.read_text())
    script = tmp_path / "epilog.sh"
    script.write_text(hook_mod.epilog(timeout=60, out=str(tmp_path / "rep"), mdiag=str(_real_mdiag(tmp_path))))
    env = {"SLURM_JOB_ID": "88", "SLURM_JOB_EXIT_CODE": "256", "SLURM_JOB_EXIT_CODE2": "1:0",
           "SLURM_JOB_STDOUT": "out-%j.txt", "SLURM_JOB_WORK_DIR": str(tmp_path / "w"), "SLURM_NODELIST": "vm"}
    r = subprocess.run(["/bin/bash", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "rep" / "88.json").read_text())
    assert doc["root_cause"]["category"] == "shape"
    assert (doc["slurm"]["exit_code"], doc["slurm"]["source"]) == ("1:0", "environment")


def test_epilog_catches_time_limit_with_exit_code_zero(tmp_path):
    """slurmd 22.05 gives the Epilog SLURM_JOB_EXIT_CODE=0 for a job it ended at its time limit."""
    log = tmp_path / "over-5.out"
    log.write_text("training\nslurmstepd-vm: error: *** JOB 5 ON vm CANCELLED AT 2026-12-02T14:49:14 DUE TO TIME LIMIT ***\n")
    ok = tmp_path / "fine-6.out"
    ok.write_text("training\ndone\n")
    script = tmp_path / "epilog.sh"
    script.write_text(hook_mod.epilog(timeout=60, out=str(tmp_path / "rep"), mdiag=str(_real_mdiag(tmp_path))))
    for jid, out in (("5", log), ("6", ok)):
        env = {"SLURM_JOB_ID": jid, "SLURM_JOB_EXIT_CODE": "0", "SLURM_JOB_EXIT_CODE2": "0:0",
               "SLURM_JOB_STDOUT": str(out)}
        assert subprocess.run(["/bin/bash", str(script)], env=env, timeout=120).returncode == 0
    assert json.loads((tmp_path / "rep" / "5.json").read_text())["root_cause"]["category"] == "slurm"
    assert not (tmp_path / "rep" / "6.json").exists()
