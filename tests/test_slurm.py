"""diagnose.slurm.job: parsing scontrol/sacct output (captured from the real test cluster), finding a job's
logs by name, and the State deciding the category when the logs are silent."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from diagnose.slurm import job as slurm
from diagnose.model import Diagnosis

FIX = Path(__file__).resolve().parent / "fixtures" / "slurm"


def test_parse_scontrol_multiline_and_oneline():
    for name in ("scontrol-failed.txt", "scontrol-failed-oneline.txt"):
        kv = slurm.parse_scontrol((FIX / name).read_text())
        assert kv["JobId"] == "2" and kv["JobState"] == "FAILED" and kv["ExitCode"] == "3:0"
        assert kv["StdOut"] == "/tmp/sj/w-2.out" and kv["WorkDir"] == "/tmp/sj"
        assert kv["NodeList"] == "vm" and kv["TRES"].startswith("cpu=1")
        assert kv["NtasksPerN:B:S:C"] == "0:0:*:*"


def test_parse_scontrol_value_with_spaces():
    kv = slurm.parse_scontrol("JobId=7 JobName=my job\n   StdOut=/data/my logs/out-7.txt Power=\n")
    assert kv["JobName"] == "my job" and kv["StdOut"] == "/data/my logs/out-7.txt" and kv["Power"] == ""


def test_parse_sacct_job_row():
    row = slurm.parse_sacct((FIX / "sacct-timeout.txt").read_text(), "4242")
    assert row == {"job_id": "4242", "state": "TIMEOUT", "exit_code": "0:0", "elapsed": "00:01:07",
                   "node_list": "vm", "name": "over-time"}
    assert slurm.parse_sacct((FIX / "sacct-disabled.txt").read_text(), "2") is None


def test_is_job_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert slurm.is_job_id("1234") and slurm.is_job_id("1234_7")
    (tmp_path / "99").write_text("x")
    assert not slurm.is_job_id("99") and not slurm.is_job_id("logs") and not slurm.is_job_id("12a")


def test_find_by_name_per_task_and_logdir(tmp_path):
    for n in ("train-1234.err", "train-1234.out", "train-1234-3.err", "node01-1234.log", "train-12345.err",
              "train-1233.err", "notes-1234.md"):
        (tmp_path / "logs" / n).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "logs" / n).write_text("x\n")
    (tmp_path / "logs" / "run-1234" / "attempt_0" / "0").mkdir(parents=True)
    (tmp_path / "logs" / "run-1234" / "attempt_0" / "0" / "stderr.log").write_text("x\n")
    found = sorted(p.relative_to(tmp_path / "logs").as_posix() for p in slurm.find_by_name("1234", tmp_path / "logs"))
    assert found == ["node01-1234.log", "run-1234", "train-1234-3.err", "train-1234.err", "train-1234.out"]


def test_find_logs_expands_leftover_patterns(tmp_path):
    for t in range(2):
        (tmp_path / f"job-55-{t}.out").write_text("x\n")
    info = slurm.JobInfo(job_id="55", std_out=str(tmp_path / "job-%j-%t.out"))
    logs, warnings = slurm.find_logs(info)
    assert sorted(p.name for p in logs) == ["job-55-0.out", "job-55-1.out"] and not warnings


def _empty():
    return Diagnosis(status="no_failure_found", root_cause=None, symptoms=[], ranks=[], sources=[])


def test_state_decides_when_logs_are_silent():
    for state, cat in (("TIMEOUT", "slurm"), ("OUT_OF_MEMORY", "host_oom"), ("NODE_FAIL", "slurm"),
                       ("PREEMPTED", "slurm")):
        d = slurm.apply(_empty(), slurm.JobInfo(job_id="9", state=state, exit_code="0:15", node_list="vm",
                                                source="sacct"))
        assert d.status == "failed" and d.root_cause.category == cat
        assert state in d.root_cause.message and d.root_cause.host == "vm"
    d = slurm.apply(_empty(), slurm.JobInfo(job_id="9", state="FAILED", exit_code="1:0"))
    assert d.root_cause is None and d.slurm["state"] == "FAILED"


def test_without_slurm_commands_warns_once_and_reads_files(tmp_path, monkeypatch, validate):
    """No scontrol/sacct on PATH: one warning, logs found under ./logs by the job id."""
    sample = Path(__file__).resolve().parents[1] / "sample_logs" / "shape-rank2.log"
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "gpt-777.err").write_text(sample.read_text())
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}  # this checkout, not an installed mdiag
    r = subprocess.run([sys.executable, "-m", "diagnose.cli.main", "--json", "777"], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    doc = validate(json.loads(r.stdout))
    assert (doc["root_cause"]["category"], doc["root_cause"]["rank"]) == ("shape", 2)
    assert doc["job_id"] == "777" and doc["slurm"]["source"] is None
    assert sum("SLURM commands" in w for w in doc["warnings"]) == 1


def test_epilog_environment(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "31")
    monkeypatch.setenv("SLURM_JOB_EXIT_CODE2", "3:0")
    monkeypatch.setenv("SLURM_NODELIST", "vm")
    info = slurm.query("31", use_slurm=False)
    assert (info.exit_code, info.node_list, info.source) == ("3:0", "vm", "environment")
