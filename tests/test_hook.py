"""`mdiag hook`: the sbatch snippet run by bash in a fake job environment (no SLURM needed)."""
from __future__ import annotations

import json
import os
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
    out = CliRunner().invoke(main, ["hook", "--timeout", "30", "--json-out", "/data/mdiag"]).stdout
    assert "trap _mdiag_on_exit EXIT" in out and "/data/mdiag" in out
    # every way passes the limit to mdiag (a partial report) and kills it 5 s later in any case
    assert out.count("--timeout 30") == 2 and out.count("timeout -s KILL 35") == 2
    assert "--dependency=afternotok:" in out and "--kill-on-invalid-dep=yes" in out
    ep = CliRunner().invoke(main, ["hook", "--epilog", "--timeout", "60"]).stdout
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
    env = {"SLURM_JOB_ID": "88", "SLURM_JOB_EXIT_CODE": "256", "SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_EXIT_CODE2": "1:0",
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
        env = {"SLURM_JOB_ID": jid, "SLURM_JOB_EXIT_CODE": "0", "SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_EXIT_CODE2": "0:0",
               "SLURM_JOB_STDOUT": str(out)}
        assert subprocess.run(["/bin/bash", str(script)], env=env, timeout=120).returncode == 0
    assert json.loads((tmp_path / "rep" / "5.json").read_text())["root_cause"]["category"] == "slurm"
    assert not (tmp_path / "rep" / "6.json").exists()


# ---------------------------------------------------------------- values quoted, scripts clean

HOSTILE_VALUES = ["$(touch {pwned})", "`touch {pwned}`", "a b;touch {pwned}", "it's \"quoted\" $HOME *"]


def _hook_out(*args: str) -> str:
    r = CliRunner().invoke(main, ["hook", *args])
    assert r.exit_code == 0, r.output
    return r.stdout


def _check_script(tmp_path: Path, text: str, hostile: bool = False) -> None:
    f = tmp_path / "check.sh"
    f.write_text(text)
    r = subprocess.run(["bash", "-n", str(f)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    if shutil.which("shellcheck"):
        # a hostile value is a single-quoted literal: shellcheck's note that it will not expand (SC2016) is the point
        extra = ["-e", "SC2016"] if hostile else []
        r = subprocess.run(["shellcheck", "-s", "bash", *extra, str(f)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout


@pytest.mark.parametrize("which", [[], ["--trap"], ["--dependent-job"], ["--epilog"]])
def test_every_script_passes_bash_n_and_shellcheck(tmp_path, which):
    _check_script(tmp_path, _hook_out(*which, "--timeout", "20"))
    _check_script(tmp_path, _hook_out(*which, "--timeout", "20", "--jsonl", "/shared/all.jsonl", "--mdiag", "/opt/m d/mdiag"))


def test_trap_and_dependent_job_are_offered_separately():
    trap, dep = _hook_out("--trap"), _hook_out("--dependent-job")
    assert "trap _mdiag_on_exit EXIT" in trap and "afternotok" not in trap
    assert "afternotok" in dep and "_mdiag_on_exit" not in dep
    assert _hook_out() == trap + "\n" + dep
    r = CliRunner().invoke(main, ["hook", "--epilog", "--trap"])
    assert r.exit_code == 2


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_hostile_json_out_is_a_literal_folder_in_the_trap(tmp_path, value):
    pwned = tmp_path / "w" / "pwned"
    value = value.format(pwned="pwned")
    out = tmp_path / "w" / value
    (tmp_path / "w").mkdir()
    mdiag = _fake_mdiag(tmp_path, 'while [ $# -gt 0 ]; do [ "$1" = --json-out ] && d=$2; shift; done\n'
                                  'printf "{}" > "$d/4321.json"; exit 1')
    script = tmp_path / "job.sh"
    text = hook_mod.snippet(timeout=5, out=str(out), mdiag=str(mdiag))
    _check_script(tmp_path, text, hostile=True)
    script.write_text(text + "exit 3\n")
    env = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "4321", "HOME": str(tmp_path)}
    r = subprocess.run(["bash", str(script)], cwd=tmp_path / "w", env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and not pwned.exists(), r.stderr
    assert (out / "4321.json").exists() and "mdiag: diagnosis of job 4321" in r.stderr


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_hostile_values_in_the_dependent_job_never_run(tmp_path, value):
    """A fake sbatch runs the --wrap string with sh, as sbatch does: the values arrive as data."""
    pwned = tmp_path / "pwned"
    value = value.format(pwned="pwned")
    seen = tmp_path / "args"
    mdiag = _fake_mdiag(tmp_path, f'printf "%s\\n" "$@" > {seen}')
    sbatch = tmp_path / "bin" / "sbatch"
    sbatch.write_text('#!/bin/bash\nwhile [ $# -gt 0 ]; do [ "$1" = --wrap ] && w=$2; shift; done\nexec sh -c "$w"\n')
    sbatch.chmod(0o755)
    text = hook_mod.dependent(timeout=7, out=value, jsonl=value + ".jsonl", mdiag=str(mdiag))
    _check_script(tmp_path, text, hostile=True)
    (tmp_path / "dep.sh").write_text(text)
    env = {"PATH": f"{sbatch.parent}:/usr/bin:/bin", "SLURM_JOB_ID": "77", "HOME": str(tmp_path)}
    r = subprocess.run(["bash", str(tmp_path / "dep.sh")], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and not pwned.exists(), r.stderr
    assert seen.read_text().splitlines() == ["--job", "77", "--timeout", "7", "--json-out", value, "--jsonl",
                                             value + ".jsonl"]


@pytest.mark.parametrize("value", ["a\nb", "x\x1b]0;t\x07", "\x00", "a\u202eb", ""])
def test_control_characters_are_refused(value):
    r = CliRunner().invoke(main, ["hook", "--json-out", value])
    assert r.exit_code == 2 and r.stdout == "" and r.stderr.startswith("mdiag: error: --json-out"), r.output
    assert r.stderr.count("\n") == 1


def test_epilog_needs_absolute_paths():
    r = CliRunner().invoke(main, ["hook", "--epilog", "--json-out", "reports"])
    assert r.exit_code == 2 and "absolute" in r.stderr


def test_the_library_refuses_with_an_exception_not_an_exit():
    """diagnose.slurm.hook raises HookError (a ValueError); only the command (diagnose/cli/hook.py) prints
    and exits."""
    for call in (lambda: hook_mod.snippet(out="a\nb"), lambda: hook_mod.dependent(jsonl="x\x1b"),
                 lambda: hook_mod.epilog(out="relative")):
        with pytest.raises(ValueError) as exc:
            call()
        assert isinstance(exc.value, hook_mod.HookError)
    assert "chmod 0755 /etc/slurm/epilog.d/mdiag.sh" in hook_mod.install_lines()


# ---------------------------------------------------------------- the trap's messages per exit code


@pytest.mark.parametrize("code,writes,says", [
    (1, True, "mdiag: diagnosis of job 4321 in"),
    (0, True, "mdiag: no failure found in the logs of job 4321"),
    (2, False, "mdiag: no diagnosis (mdiag exit 2"),
    (1, False, "mdiag: no diagnosis (mdiag exit 1 but no report"),
    (0, False, "mdiag: no diagnosis (mdiag exit 0 but no report"),
])
def test_trap_message_follows_mdiag_exit_code_and_the_report(tmp_path, code, writes, says):
    write = 'while [ $# -gt 0 ]; do [ "$1" = --json-out ] && d=$2; shift; done; printf "{}" > "$d/4321.json"; '
    r = run_job(tmp_path, _fake_mdiag(tmp_path, (write if writes else "") + f"exit {code}"), "exit 9\n", timeout=5)
    assert r.returncode == 9 and says in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1
    if code == 1 and writes:
        assert "no diagnosis" not in r.stderr and "kept" not in r.stderr


def test_unwritable_report_folder_is_not_claimed(tmp_path):
    (tmp_path / "reports").write_text("a file where the folder should be")
    r = run_job(tmp_path, _fake_mdiag(tmp_path, "exit 1"), "exit 4\n", timeout=5)
    assert r.returncode == 4 and "no diagnosis" in r.stderr and "diagnosis of job" not in r.stderr, r.stderr


# ---------------------------------------------------------------- default timeout from KillWait


def test_default_timeout_fits_inside_killwait(tmp_path, monkeypatch):
    sc = tmp_path / "bin" / "scontrol"
    sc.parent.mkdir()
    sc.write_text("#!/bin/sh\necho 'KillWait                = 60 sec'\necho 'MaxJobCount = 10000'\n")
    sc.chmod(0o755)
    monkeypatch.setenv("PATH", f"{sc.parent}:/usr/bin:/bin")
    assert hook_mod.default_timeout() == 55
    assert "timeout -s KILL 60 " in _hook_out("--trap")
    sc.write_text("#!/bin/sh\nexit 1\n")
    assert hook_mod.default_timeout() == 25
    monkeypatch.setenv("PATH", "/nonexistent")
    assert hook_mod.default_timeout() == 25


def test_epilog_install_lines_agree_with_the_script():
    r = CliRunner().invoke(main, ["hook", "--epilog"])
    assert f"Epilog={hook_mod.EPILOG_PATH}" in r.stdout and f"Epilog={hook_mod.EPILOG_PATH}" in r.stderr
    assert f"chmod 0755 {hook_mod.EPILOG_PATH}" in r.stderr
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert f"Epilog={hook_mod.EPILOG_PATH}" in readme


# ---------------------------------------------------------------- the Epilog: exit codes, privilege, writes


def _epilog_env(jid: str, **kw) -> dict:
    env = {"SLURM_JOB_ID": jid, "SLURM_JOB_EXIT_CODE": "256", "SLURM_JOB_EXIT_CODE2": "1:0",
           "SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid())}
    env.update(kw)
    return env


@pytest.mark.parametrize("code", [0, 1, 2])
def test_epilog_exits_0_whatever_mdiag_does(tmp_path, code):
    log = tmp_path / "job-5.out"
    log.write_text("RuntimeError: x\n")
    body = '[ "$1" = hook ] && exec cat >/dev/null\n'
    body += 'echo \'{"status": "failed", "root_cause": null}\'' if code < 2 else "echo garbage; echo oops >&2"
    mdiag = _fake_mdiag(tmp_path, body + f"\nexit {code}")
    script = tmp_path / "epilog.sh"
    script.write_text(hook_mod.epilog(timeout=5, out=str(tmp_path / "rep"), mdiag=str(mdiag)))
    r = subprocess.run(["/bin/bash", str(script)], env=_epilog_env("5", SLURM_JOB_STDOUT=str(log)), timeout=60,
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "", r.stderr
    assert not list((tmp_path / "rep").glob(".mdiag-5.*")), "temp file left"


def test_epilog_writes_0640_and_one_line_per_report(tmp_path):
    log = tmp_path / "job-6.out"
    log.write_text(SAMPLE.read_text())
    script = tmp_path / "epilog.sh"
    script.write_text(hook_mod.epilog(timeout=60, out=str(tmp_path / "rep"), jsonl=str(tmp_path / "all.jsonl"),
                                      mdiag=str(_real_mdiag(tmp_path))))
    r = subprocess.run(["/bin/bash", str(script)], env=_epilog_env("6", SLURM_JOB_STDOUT=str(log)), timeout=120,
                       capture_output=True, text=True)
    assert r.returncode == 0
    rep = tmp_path / "rep" / "6.json"
    assert json.loads(rep.read_text())["root_cause"]["category"] == "shape"
    assert rep.stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "all.jsonl").stat().st_mode & 0o777 in (0o640, 0o600)
    assert len((tmp_path / "all.jsonl").read_text().splitlines()) == 1


def test_epilog_does_nothing_as_root_without_a_job_user(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the root path needs root")
    log = tmp_path / "job-7.out"
    log.write_text("RuntimeError: x\n")
    mdiag = _fake_mdiag(tmp_path, f"touch {tmp_path}/ran")
    script = tmp_path / "epilog.sh"
    script.write_text(hook_mod.epilog(timeout=5, out=str(tmp_path / "rep"), mdiag=str(mdiag)))
    env = _epilog_env("7", SLURM_JOB_STDOUT=str(log))
    del env["SLURM_JOB_UID"]
    assert subprocess.run(["/bin/bash", str(script)], env=env, timeout=60).returncode == 0
    assert not (tmp_path / "ran").exists()


def test_epilog_reads_the_logs_as_the_job_user_never_following_links_as_root(tmp_path_factory):
    """A user's slurm-%j.out linked to a root-only file: the Epilog (root) reads the logs as the
    job's user, so the secret never reaches the report; the user's own log is read."""
    import pwd

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv")
    nobody = pwd.getpwnam("nobody")
    base = Path("/tmp") / f"mdiag-epilog-{os.getpid()}"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(mode=0o755)
    try:
        secret = base / "root-only"
        secret.write_text("TOP-SECRET-ROOT-ONLY\n")
        secret.chmod(0o600)
        work = base / "work"
        work.mkdir(mode=0o777)
        (work / "slurm-9.out").symlink_to(secret)
        (work / "slurm-9.err").write_text("RuntimeError: the user's own failure\n")
        os.chown(work / "slurm-9.err", nobody.pw_uid, nobody.pw_gid)
        bindir = base / "bin"
        bindir.mkdir(mode=0o755)
        mdiag = bindir / "mdiag"
        # as the user: print what it can read of its inputs (base64) and who it is
        mdiag.write_text('#!/bin/bash\n[ "$1" = hook ] && exec ' + sys.executable + ' -m diagnose.cli.main "$@"\n'
                         'for f; do :; done\n'
                         'printf \'{"status": "failed", "uid": %s, "text": "%s"}\' "$(id -u)" '
                         '"$(cat -- "$@" 2>/dev/null | base64 -w0)"\nexit 1\n')
        mdiag.chmod(0o755)
        script = base / "epilog.sh"
        script.write_text(hook_mod.epilog(timeout=10, out=str(base / "rep"), mdiag=str(mdiag)))
        script.chmod(0o755)
        env = _epilog_env("9", SLURM_JOB_UID=str(nobody.pw_uid), SLURM_JOB_GID=str(nobody.pw_gid),
                          SLURM_JOB_USER="nobody", SLURM_JOB_WORK_DIR=str(work), SLURM_JOB_STDOUT="slurm-%j.out",
                          SLURM_JOB_STDERR="slurm-%j.err", PYTHONPATH=os.environ.get("PYTHONPATH", ""))
        r = subprocess.run(["/bin/bash", str(script)], env=env, timeout=60, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        doc = json.loads((base / "rep" / "9.json").read_text())
        import base64

        text = base64.b64decode(doc["text"]).decode()
        assert doc["uid"] == nobody.pw_uid
        assert "the user's own failure" in text and "TOP-SECRET" not in text
        assert (base / "rep" / "9.json").stat().st_mode & 0o777 == 0o640
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_epilog_glob_characters_in_the_path_stay_literal(tmp_path):
    """`for g in $f` would split `my logs` and glob `*`: the path is one word, only %-patterns match."""
    work = tmp_path / "my logs [x]"
    work.mkdir()
    (work / "out-3-train.txt").write_text("RuntimeError: x\n")
    (work / "decoy-3.txt").write_text("RuntimeError: decoy\n")
    seen = tmp_path / "seen"
    mdiag = _fake_mdiag(tmp_path, f'[ "$1" = hook ] && exit 0\nprintf "%s\\n" "$@" > {seen}\nexit 0')
    script = tmp_path / "epilog.sh"
    script.write_text(hook_mod.epilog(timeout=5, out=str(tmp_path / "rep"), mdiag=str(mdiag)))
    env = _epilog_env("3", SLURM_JOB_WORK_DIR=str(work), SLURM_JOB_STDOUT="out-%j-%x.txt")
    assert subprocess.run(["/bin/bash", str(script)], env=env, timeout=60).returncode == 0
    args = seen.read_text().splitlines()
    assert args[-1] == str(work / "out-3-train.txt") and not any("decoy" in a for a in args)


def test_store_refuses_what_is_not_one_report(tmp_path):
    for data in (b"", b"[1]", b"{not json", b'{"a": 1}', b"[" * 100000):
        r = CliRunner().invoke(main, ["hook", "--store", "--json-out", str(tmp_path / "r"), "--name", "1"],
                               input=data)
        assert r.exit_code == 2 and r.stderr.startswith("mdiag: error: cannot store"), r.output
    doc = {"status": "failed", "note": "line1\n{\"status\": \"forged\"}", "k": "hf_" + "a" * 34}
    r = CliRunner().invoke(main, ["hook", "--store", "--json-out", str(tmp_path / "r"), "--name", "../../x",
                                  "--jsonl", str(tmp_path / "all.jsonl")], input=json.dumps(doc, indent=2))
    assert r.exit_code == 0, r.output
    lines = (tmp_path / "all.jsonl").read_text().splitlines()
    assert len(lines) == 1 and "hf_" + "a" * 34 not in lines[0]
    assert [p.name for p in (tmp_path / "r").iterdir()] == ["x.json"]
