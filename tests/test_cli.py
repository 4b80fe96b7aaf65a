"""The command line through click's CliRunner: output, JSON contract, exit codes, bad input."""
import json
from pathlib import Path

from click.testing import CliRunner

from diagnose.cli.main import main

from .conftest import SAMPLES

OOM = SAMPLES / "megatron-1234.err"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_report_names_root_cause_and_evidence():
    res = run(OOM)
    assert res.exit_code == 1
    out = res.output
    assert "OOM" in out and "rank 3" in out and "megatron-1234.err:" in out
    assert "What to do" in out and "Downstream symptoms" in out


def test_json_is_one_object_that_validates(validate):
    res = run("--json", OOM)
    assert res.exit_code == 1
    doc = validate(json.loads(res.stdout))
    assert doc["status"] == "failed" and doc["root_cause"]["category"] == "oom"
    assert doc["root_cause"]["evidence"]["file"].endswith("megatron-1234.err")


def test_clean_run_exits_zero(validate):
    res = run("--json", SAMPLES / "clean-run.log")
    assert res.exit_code == 0
    assert validate(json.loads(res.stdout))["root_cause"] is None


def test_missing_path_is_one_line_exit_2(tmp_path):
    res = run(tmp_path / "nope.err")
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and "no such file" in res.output and "Traceback" not in res.output


def test_empty_folder_is_exit_2(tmp_path):
    res = run(tmp_path)
    assert res.exit_code == 2 and "no log files" in res.output


def test_nothing_read_is_exit_2_not_a_clean_bill(tmp_path):
    """0 means "logs were read and show no failure"; an empty log or a timeout before the first line is 2."""
    (tmp_path / "e.log").write_text("")
    res = run("--json", tmp_path / "e.log")
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr == "mdiag: error: nothing to read: 1 file, 0 lines\n"
    res = run("--timeout", "1e-9", OOM)
    assert res.exit_code == 2 and "before the first line" in res.stderr
    (tmp_path / "one.log").write_text("step 1 loss 2.0\n")
    res = run(tmp_path / "one.log")
    assert res.exit_code == 0 and "read 1 line from 1 file" in res.stdout


def test_fleet_without_reports_is_exit_2(tmp_path):
    res = run("fleet", tmp_path)
    assert res.exit_code == 2 and res.stderr.startswith("mdiag: error: no mdiag reports")
    res = run("fleet", tmp_path / "missing")
    assert res.exit_code == 2 and res.stderr == f"mdiag: error: no such file or folder: {tmp_path / 'missing'}\n"


def test_help_teaches():
    res = run("--help")
    assert res.exit_code == 0
    assert "mdiag logs/" in res.output and "Exit status" in res.output
    # the diagnosis's own options are on the top-level help, not only on a hidden `run --help`
    for opt in ("--json", "--format", "--html", "--timeout", "--no-redact", "--version", "fleet", "patterns"):
        assert opt in res.output, opt
    assert "130" in res.output and "143" in res.output and "- reads stdin" in res.output


def test_usage_errors_are_one_line_with_the_help_hint():
    for args, hint in ((["--bogus", OOM], "mdiag --help"), (["fleet", "--top", "0", OOM], "mdiag fleet --help"),
                       (["fleet", "--gpus-per-node", "0", OOM], "mdiag fleet --help"),
                       (["--format", "yaml", OOM], "mdiag --help"), ([], "mdiag --help")):
        res = run(*args)
        assert res.exit_code == 2, args
        assert res.stdout == "" and res.stderr.count("\n") == 1 and res.stderr.startswith("mdiag: error: "), res.stderr
        assert f"(try '{hint}')" in res.stderr and "Usage:" not in res.stderr


def test_dash_reads_stdin_and_names_it(validate):
    res = CliRunner().invoke(main, ["--json", "-"], input=OOM.read_bytes())
    assert res.exit_code == 1, res.output
    doc = validate(json.loads(res.stdout))
    assert doc["root_cause"]["evidence"] == {"file": "<stdin>", "line": 97}
    assert doc["sources"] == [{"file": "<stdin>", "lines": 263, "layout": "merged"}]
    import gzip

    res = CliRunner().invoke(main, ["-"], input=gzip.compress(OOM.read_bytes()))
    assert res.exit_code == 1 and "<stdin>:97" in res.stdout
    assert CliRunner().invoke(main, ["-"], input=b"").exit_code == 2  # nothing to read


def test_log_text_cannot_drive_the_terminal(tmp_path):
    (tmp_path / "evil.log").write_text(
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "    g()\n"
        "RuntimeError: [bold red]boom[/] \x1b]52;c;ZXZpbA==\x07 \x1b[2J done\n"
    )
    res = run(tmp_path / "evil.log")
    assert "\x1b]52" not in res.output and "\x1b[2J" not in res.output
    assert "[bold red]boom[/]" in res.output


def test_progress_bar_only_for_big_inputs_on_a_terminal(monkeypatch, capsys):
    import diagnose.cli.main as cli

    with cli._progress([str(OOM)]) as advance:  # stderr is not a terminal under pytest
        assert advance is None
    monkeypatch.setattr(cli.sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(cli, "PROGRESS_BYTES", 1)
    with cli._progress([str(OOM)]) as advance:
        advance(1000)
    assert capsys.readouterr().out == ""


def test_the_installed_command_exits_with_the_diagnosis_code_and_flushes_what_it_wrote(tmp_path):
    """`mdiag` leaves without the interpreter's teardown: the report is still whole and the code right."""
    import subprocess
    import sys

    def mdiag(*args):
        return subprocess.run([sys.executable, "-m", "diagnose.cli.main", *map(str, args)], capture_output=True, text=True,
                              timeout=120)

    res = mdiag("--json", OOM, "--html", tmp_path / "r.html")
    assert res.returncode == 1 and json.loads(res.stdout)["root_cause"]["category"] == "oom"
    assert (tmp_path / "r.html").read_text().rstrip().endswith("</html>")
    assert mdiag("--version").returncode == 0
    bad = mdiag(tmp_path / "missing.err")
    assert bad.returncode == 2 and bad.stderr.startswith("mdiag: error: ") and bad.stderr.count("\n") == 1


def _mdiag_proc(*args, **kw):
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-m", "diagnose", *map(str, args)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_python_dash_m_diagnose_is_mdiag():
    p = _mdiag_proc("--json", OOM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1 and json.loads(out)["root_cause"]["category"] == "oom", err


def test_signals_exit_130_and_143_and_leave_no_temporary_file(tmp_path):
    """Ctrl-C and SIGTERM while mdiag waits on stdin: 128 + the signal, no traceback, the stdin copy removed."""
    import os
    import signal
    import time

    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        p = _mdiag_proc("-", env=dict(os.environ, TMPDIR=str(tmp_path)))
        p.stdin.write("step 1\n")
        p.stdin.flush()
        deadline = time.monotonic() + 60
        while not any(tmp_path.iterdir()) and time.monotonic() < deadline:  # it is copying stdin
            time.sleep(0.05)
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
        assert p.returncode == code, (sig, p.returncode, err)
        assert "Traceback" not in err and out == ""
        assert not any(tmp_path.iterdir())


def test_root_cause_path_line_is_whole_on_one_line_even_at_40_columns(tmp_path):
    """In a pipe or a narrow terminal the root cause's `path:line` is never wrapped: it can be copied."""
    deep = tmp_path / "a-rather-long-folder-name" / "with-another-level" / "megatron-job-1234567.err"
    deep.parent.mkdir(parents=True)
    deep.write_bytes(OOM.read_bytes())
    res = CliRunner().invoke(main, [str(deep)], env={"COLUMNS": "40", "NO_COLOR": "1"})
    assert res.exit_code == 1
    # the path is shown as given or relative to the working directory, whole on its own line
    shown = [ln.removeprefix("root cause at ") for ln in res.stdout.splitlines() if ln.startswith("root cause at ")]
    assert len(shown) == 1 and shown[0].endswith(":97")
    assert Path(shown[0].removesuffix(":97")).resolve() == deep.resolve()


def test_symptom_evidence_is_whole_and_rows_are_never_wrapped_at_any_width(tmp_path):
    """The symptoms table cuts `what` with … rather than wrapping; every `path:line` stays whole on
    one line, in the table when it fits, else listed below it."""
    for cols in (40, 60, 80, 100, 160):
        res = CliRunner().invoke(main, [str(OOM)], env={"COLUMNS": str(cols), "NO_COLOR": "1"})
        table = res.stdout.split("Downstream symptoms")[1].split("read 263 lines")[0].splitlines()
        rows = [ln for ln in table if ln.startswith("│")]
        assert len(rows) == 4, (cols, res.stdout)  # one line per symptom
        assert all(len(ln) <= cols and ln[-1] in "┓┃┩│┘" for ln in table if ln[:1] in "┏┃┡│└"), cols
        for n in (121, 146, 149, 167):
            assert sum(f"megatron-1234.err:{n} " in ln for ln in table) == 1, (cols, n)
