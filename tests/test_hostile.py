"""Hostile and broken input: a diagnosis as far as the input allows, or one clear line and exit 2 —
never a traceback, never a hang; log text never drives the terminal; bounded work."""
from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from diagnose.read import scan as scan_mod
from diagnose.read import scan_blocks
from diagnose.cli.main import main
from diagnose.patterns.library import PatternError, load_file
from diagnose.pipeline import diagnose
from diagnose.render.report import to_dict

from .conftest import SAMPLES

OOM = SAMPLES / "megatron-1234.err"
TB = (
    "Traceback (most recent call last):\n"
    '  File "/job/train.py", line 10, in <module>\n'
    "    main()\n"
    "RuntimeError: the real failure\n"
)


def run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def run_json(*args, validate=None):
    res = run("--json", *args)
    assert res.exit_code in (0, 1), res.output
    assert "Traceback" not in (res.stderr if hasattr(res, "stderr") else "")
    doc = json.loads(res.stdout)
    if validate:
        validate(doc)
    return doc


def mdiag_proc(*args, timeout=60, **kw):
    """The console script in a subprocess (for inputs that could hang the test process itself)."""
    return subprocess.run([sys.executable, "-m", "diagnose.cli.main", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kw)


def one_line_error(res) -> str:
    out = res.stderr if hasattr(res, "stderr") and isinstance(res.stderr, str) else res.output
    assert res.exit_code == 2 if hasattr(res, "exit_code") else res.returncode == 2
    assert out.count("\n") == 1 and out.startswith("mdiag: error: ") and "Traceback" not in out, out
    return out


# ---------------------------------------------------------------- paths


def test_missing_path_alone_is_one_line(tmp_path):
    assert "no such file" in one_line_error(run(tmp_path / "nope.err"))


def test_missing_path_next_to_good_ones_is_a_warning(tmp_path, validate):
    doc = run_json(tmp_path / "nope.err", OOM, validate=validate)
    assert doc["root_cause"]["category"] == "oom"
    assert any("nope.err" in w and "no such file" in w for w in doc["warnings"])


def test_permission_denied_file_is_skipped_and_named(tmp_path, write, validate, monkeypatch):
    """One unreadable file among readable ones.  Root ignores file modes, so as root the open is made
    to fail the way it would for a user (os.open raising PermissionError); otherwise chmod 000."""
    good = write("job/rank-0.log", OOM.read_text())
    bad = write("job/rank-1.log", TB)
    if os.geteuid() == 0:
        real_open = os.open

        def fake_open(path, flags, *a, **k):
            if Path(path) == bad:
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, flags, *a, **k)

        monkeypatch.setattr(os, "open", fake_open)
    else:
        bad.chmod(0)
    doc = run_json(good.parent, validate=validate)
    assert doc["root_cause"]["category"] == "oom"
    assert any("rank-1.log" in w and "permission denied" in w for w in doc["warnings"])


def test_unlistable_subfolder_is_a_warning(tmp_path, write, validate, monkeypatch):
    write("job/a/rank-0.log", OOM.read_text())
    (tmp_path / "job" / "locked").mkdir()
    real_scandir = os.scandir

    def scandir(path):  # what listing a folder without permission does (root may list anything)
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr("diagnose.read.collect.os.scandir", scandir)
    doc = run_json(tmp_path / "job", validate=validate)
    assert doc["root_cause"]["category"] == "oom"
    assert any("locked" in w and "permission denied" in w for w in doc["warnings"])


def test_folder_without_logs_is_one_line(tmp_path):
    (tmp_path / "notes.md").write_text("hello")
    assert "no log files" in one_line_error(run(tmp_path))


def test_empty_file(tmp_path):
    """Nothing read is not "no failure found": exit 2, one line on stderr, nothing on stdout."""
    (tmp_path / "e.log").write_text("")
    res = run("--json", tmp_path / "e.log")
    assert res.exit_code == 2 and res.stdout == "" and res.stderr.count("\n") == 1
    d = diagnose([tmp_path / "e.log"])
    assert d.status == "no_failure_found" and d.sources[0].lines == 0


def test_same_file_twice_is_read_once(tmp_path, validate):
    link = tmp_path / "link.err"
    link.symlink_to(OOM)
    doc = run_json(OOM, OOM, link, validate=validate)
    assert len(doc["sources"]) == 1 and doc["root_cause"]["category"] == "oom"
    assert sum("read once" in w for w in doc["warnings"]) == 2


def test_symlink_loop(tmp_path, validate):
    (tmp_path / "a.log").symlink_to(tmp_path / "b.log")
    (tmp_path / "b.log").symlink_to(tmp_path / "a.log")
    assert "symbolic link loop" in one_line_error(run(tmp_path / "a.log"))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "up").symlink_to(tmp_path)  # a folder loop: links to folders are not followed
    (tmp_path / "real.log").write_text(TB)
    doc = run_json(tmp_path, validate=validate)
    assert doc["root_cause"]["message"] == "RuntimeError: the real failure"
    assert any("a.log" in w and "symbolic link loop" in w for w in doc["warnings"])


def test_fifo_is_skipped_without_hanging(tmp_path):
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    (tmp_path / "real.log").write_text(TB)
    res = mdiag_proc("--json", tmp_path, timeout=60)  # no writer on the FIFO: opening it could block forever
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert any("pipe.log" in w and "FIFO" in w for w in doc["warnings"])
    res = mdiag_proc(fifo, timeout=60)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "not a regular file (a FIFO)" in res.stderr


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_device_is_refused_without_hanging(dev):
    if not os.path.exists(dev):
        pytest.skip(f"{dev} absent")
    res = mdiag_proc(dev, timeout=60)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "not a regular file" in res.stderr


def test_file_swapped_for_a_fifo_after_collection_does_not_hang(tmp_path):
    """The open itself refuses what is not a regular file (O_NONBLOCK + fstat), whatever collect saw."""
    fifo = tmp_path / "x.log"
    os.mkfifo(fifo)
    src = scan_mod.Source(index=0, path=fifo, display="x.log", layout="merged")
    warnings: list[str] = []
    with pytest.raises(OSError, match="not a regular file"):
        list(scan_mod.read_chunks(src, warnings))


def test_ten_thousand_files(tmp_path, validate):
    d = tmp_path / "many"
    d.mkdir()
    for i in range(10_000):
        (d / f"rank-{i}.log").write_text(f"[rank{i}]: iteration 1 | loss 2.3\n")
    (d / "rank-7.log").write_text("[rank7]: " + TB.replace("\n", "\n[rank7]: ").rstrip("[rank7]: ") + "\n")
    t = time.monotonic()
    doc = run_json(d, validate=validate)
    took = time.monotonic() - t
    assert len(doc["sources"]) == 10_000 and doc["root_cause"]["message"] == "RuntimeError: the real failure"
    assert took < 90, f"{took:.1f} s for 10,000 files"


# ---------------------------------------------------------------- contents


def test_binary_and_nul_bytes(tmp_path, validate):
    noise = bytes(range(256)) * 40 + b"\x00" * 5000
    (tmp_path / "bin.log").write_bytes(noise + b"\n" + TB.encode() + noise)
    doc = run_json(tmp_path / "bin.log", validate=validate)
    assert doc["root_cause"]["message"] == "RuntimeError: the real failure"
    (tmp_path / "rand.log").write_bytes(os.urandom(300_000))
    run_json(tmp_path / "rand.log", validate=validate)


def test_invalid_utf8_and_latin1(tmp_path, validate):
    text = "caf\xe9 na\xefve \xff\xfe\n".encode("latin-1") + b"\xc3\x28 \xed\xa0\x80 \xf0\x28\x8c\x28\n" + TB.replace(
        "real failure", "real failure \xe9t\xe9").encode("latin-1")
    (tmp_path / "l1.log").write_bytes(text)
    doc = run_json(tmp_path / "l1.log", validate=validate)
    assert doc["root_cause"]["message"].startswith("RuntimeError: the real failure \ufffdt\ufffd")


def test_crlf_line_endings(tmp_path, validate):
    (tmp_path / "w.log").write_bytes(("noise\n" + TB).replace("\n", "\r\n").encode())
    doc = run_json(tmp_path / "w.log", validate=validate)
    rc = doc["root_cause"]
    assert rc["message"] == "RuntimeError: the real failure" and rc["evidence"]["line"] == 5
    assert rc["frames"][0] == {"file": "/job/train.py", "line": 10, "function": "<module>"}


def test_tqdm_progress_bars_glued_to_lines(tmp_path, validate):
    bar = "".join(f"\r{i:3d}%|{'#' * (i // 5):20s}| {i}/100 [00:0{i % 10}<00:00, 3.2it/s]" for i in range(101))
    text = "epoch 0\n" + bar * 50 + "\r" + TB.replace("    main()\n", "    main()\n" + bar + "\r")
    (tmp_path / "tqdm.log").write_text(text)
    doc = run_json(tmp_path / "tqdm.log", validate=validate)
    rc = doc["root_cause"]
    assert rc["message"] == "RuntimeError: the real failure" and rc["evidence"]["line"] == 5
    assert not any("it/s" in ln for ln in rc["traceback"])


def test_single_50mb_line(tmp_path, validate):
    p = tmp_path / "huge.log"
    with open(p, "w") as f:
        f.write("start\n")
        f.write("RuntimeError: " + "x" * 50_000_000 + "\n")
        f.write(TB)
    t = time.monotonic()
    doc = run_json(p, validate=validate)
    assert time.monotonic() - t < 30
    assert doc["sources"][0]["lines"] == 6
    assert all(len(json.dumps(doc)) < 2_000_000 for _ in [0])  # the report holds at most a cut line


def test_50mb_tqdm_line_keeps_what_was_printed_last(tmp_path, validate):
    p = tmp_path / "bar.log"
    bar = "".join(f"\r{i:3d}%|{'#' * (i // 5):20s}| {i}/100" for i in range(101))
    with open(p, "w") as f:
        for _ in range(50_000_000 // len(bar)):
            f.write(bar)
        f.write("\r" + TB)
    doc = run_json(p, validate=validate)
    assert doc["root_cause"]["message"] == "RuntimeError: the real failure"
    assert doc["root_cause"]["evidence"]["line"] == 4


def test_long_lines_are_cut_across_chunk_boundaries(tmp_path, monkeypatch):
    monkeypatch.setattr(scan_blocks, "MAX_LINE", 64)
    long = "y" * 1000
    text = f"a\n{long}\nb\r{long}\r\nc{long}\rlast\nd\n{long}"
    p = tmp_path / "x.log"
    p.write_bytes(text.encode())
    src = scan_mod.Source(index=0, path=p, display="x.log", layout="merged")
    for chunk in (1, 7, 64, 65, 200, 10_000):
        lines = [ln for data in scan_mod.read_chunks(src, [], chunk_bytes=chunk)
                 for ln in scan_mod.split_lines(data).get_column("line").to_list()]
        assert len(lines) == 6 and lines[0] == "a" and lines[4] == "d", (chunk, lines)
        assert lines[3] == "last", (chunk, lines)  # a progress bar overwritten by what came after its \r
        for ln in (lines[1], lines[2], lines[5]):
            assert ln == "y" * 64 + scan_mod.LINE_CUT, (chunk, lines)


@pytest.mark.parametrize("cut", ["mid-frame", "mid-line", "header-only", "no-exception"])
def test_truncated_traceback(tmp_path, validate, cut):
    frames = (
        "[rank2]: Traceback (most recent call last):\n"
        '[rank2]:   File "/job/train.py", line 10, in <module>\n'
        "[rank2]:     main()\n"
        '[rank2]:   File "/job/model.py", line 42, in forward\n'
    )
    text = {
        "mid-frame": frames + "[rank2]:     return self.lin",
        "mid-line": frames + "[rank2]:     y = x @ w\n[rank2]: RuntimeError: mat1 and mat2 shapes cannot be multip",
        "header-only": "[rank2]: Traceback (most recent call last):",
        "no-exception": frames,
    }[cut]
    (tmp_path / "t.log").write_text("[rank0]: iteration 5 | loss 1.0\n" + text)
    doc = run_json(tmp_path / "t.log", validate=validate)
    if cut == "mid-line":
        assert doc["root_cause"]["rank"] == 2 and "mat1 and mat2" in doc["root_cause"]["message"]


def test_file_growing_while_read(tmp_path, validate):
    """A writer keeps appending while mdiag reads: mdiag reads what was there when it opened the file."""
    p = tmp_path / "growing.log"
    p.write_text(TB + "[rank0]: iteration 1 | loss 2.0\n" * 200_000)
    stop = threading.Event()

    def writer():
        with open(p, "a") as f:
            while not stop.is_set():
                f.write("[rank0]: iteration 2 | loss 1.9\n" * 300)
                f.flush()
                time.sleep(0.002)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        res = mdiag_proc("--json", p, timeout=60)
    finally:
        stop.set()
        t.join()
    assert res.returncode == 1, res.stderr
    doc = validate(json.loads(res.stdout))
    assert doc["root_cause"]["message"] == "RuntimeError: the real failure"


def test_truncated_and_corrupt_gz(tmp_path, validate):
    full = gzip.compress(OOM.read_bytes())
    (tmp_path / "cut.err.gz").write_bytes(full[: len(full) * 2 // 3])
    doc = run_json(tmp_path / "cut.err.gz", validate=validate)
    assert doc["sources"][0]["lines"] > 50
    assert any("truncated .gz" in w for w in doc["warnings"])
    (tmp_path / "bad.log.gz").write_bytes(b"\x1f\x8b\x08\x00garbage" + os.urandom(2000))
    (tmp_path / "plain.log.gz").write_text(TB)  # not gzip at all
    for name in ("bad.log.gz", "plain.log.gz"):  # nothing readable: exit 2, the warning says why
        assert any("corrupt .gz" in w for w in validate(to_dict(diagnose([tmp_path / name])))["warnings"])
        res = run("--json", tmp_path / name)
        assert res.exit_code == 2 and res.stdout == "" and "corrupt .gz" in res.stderr
    flipped = bytearray(full)
    flipped[len(flipped) // 2] ^= 0xFF
    (tmp_path / "flip.err.gz").write_bytes(bytes(flipped))
    res = run("--json", tmp_path / "flip.err.gz")  # a diagnosis of what was read, or exit 2 if nothing was
    assert res.exit_code in (0, 1, 2) and "Traceback" not in res.output


def test_concatenated_gz_members(tmp_path, validate):
    (tmp_path / "two.err.gz").write_bytes(gzip.compress(b"hello\n") + gzip.compress(OOM.read_bytes()))
    doc = run_json(tmp_path / "two.err.gz", validate=validate)
    assert doc["root_cause"]["category"] == "oom" and not doc["warnings"]


# ---------------------------------------------------------------- terminal and markup safety

ESC = "\x1b"
HOSTILE = (
    f"[rank0]: {ESC}]0;pwned title{ESC}\\ {ESC}]52;c;ZWNobyBwd25lZA=={ESC}\\ hello\n"
    "[rank1]: Traceback (most recent call last):\n"
    f'[rank1]:   File "/job/tr{ESC}[31main.py", line 5, in f{ESC}[2J\n'
    "[rank1]:     x()\n"
    f"[rank1]: RuntimeError: bad {ESC}[1;31mRED{ESC}[0m {ESC}]8;;http://evil.example/{ESC}\\click{ESC}]8;;{ESC}\\ "
    f"[bold]B[/bold] [link=http://x]L[/link] \x07 \x9b31m {ESC}[10A {ESC}]2;title\x07\n"
)


def _no_control(out: str, colour: bool):
    if colour:
        out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # rich's own colours (log text's are shown escaped, below)
    assert ESC not in out and "\x07" not in out and "\x9b" not in out and "\x00" not in out


def test_escapes_and_markup_are_inert_in_the_terminal(tmp_path, monkeypatch):
    d = tmp_path / f"dir{ESC}[31m"
    d.mkdir()
    (d / f"na{ESC}]0;x\x07me.log").write_text(HOSTILE)
    (d / f"fi{ESC}[2Jfo.log").mkdir()  # shows up in no warning, but a FIFO would:
    os.mkfifo(d / f"pi{ESC}[2Jpe.log")
    for env in ({}, {"FORCE_COLOR": "1", "TERM": "xterm-256color"}):
        res = run(d, env=env)
        assert res.exit_code == 1, res.output
        _no_control(res.output, colour=bool(env))
        assert "bad RED" in res.output  # the log's own colours are dropped by normalization
        assert "\\x9b31m" in res.output  # a C1 control is shown escaped
        assert "[bold]B[/bold]" in res.output and "[link=http://x]L[/link]" in res.output  # markup shown as is
        flat = re.sub(r"\x1b\[[0-9;]*m", "", res.output).replace("\n", "")
        assert "pi\\x1b[2Jpe.log" in flat  # file names in warnings too
    res = run(d / f"nope{ESC}[2J.log")
    assert res.exit_code == 2 and ESC not in res.output and "nope\\x1b[2J.log" in res.output


def test_json_escapes_control_characters(tmp_path, validate):
    (tmp_path / "h.log").write_text(HOSTILE)
    res = run("--json", tmp_path / "h.log")
    # control characters are shown as text (\\x07), so a consumer printing a value gets no raw BEL either
    assert ESC not in res.stdout and "\\u0007" not in res.stdout and "\\\\x07" in res.stdout and "\x07" not in res.stdout
    doc = validate(json.loads(res.stdout))
    assert "bad RED" in doc["root_cause"]["message"]  # the text itself is kept, less the log's colours
    d = diagnose([tmp_path / "h.log"])
    d.root_cause.message += "\x00nul"
    assert "\\u0000nul" in json.dumps(to_dict(d), ensure_ascii=True)


# ---------------------------------------------------------------- bounded work


def fire_after(monkeypatch, n: int) -> None:
    """The deadline passes after its n-th check (no clock involved)."""
    calls = [0]

    def expired(self):
        calls[0] += 1
        self.fired = self.fired or calls[0] > n
        return self.fired

    monkeypatch.setattr(scan_mod.Deadline, "expired", expired)


def test_timeout_marks_the_report_partial(tmp_path, validate, monkeypatch):
    for i in range(5):
        (tmp_path / f"rank-{i}.log").write_text(TB if i == 0 else "[rank1]: iteration 1 | loss 2\n" * 100)
    fire_after(monkeypatch, 2)  # the checks before and after the first file's only chunk
    res = run("--json", "--timeout", "1.5", tmp_path)
    doc = validate(json.loads(res.stdout))
    assert doc["partial"] is True
    assert doc["root_cause"]["message"] == "RuntimeError: the real failure"
    assert any("--timeout 1.5 s reached" in w and "not read" in w for w in doc["warnings"])


def test_timeout_on_a_big_file_stops_between_chunks(tmp_path, monkeypatch):
    p = tmp_path / "big.log"
    p.write_text(TB + "[rank0]: iteration 1 | loss 2.0\n" * 100_000)
    monkeypatch.setattr(scan_mod, "CHUNK_BYTES", 64 * 1024)
    monkeypatch.setattr(scan_mod.read_chunks, "__defaults__", (64 * 1024, None))
    fire_after(monkeypatch, 3)
    d = diagnose([p], timeout=3)
    assert d.partial and d.sources[0].lines < 100_000
    assert any("read stopped after" in w for w in d.warnings)
    assert d.root_cause.message == "RuntimeError: the real failure"


def test_timeout_bounds_a_big_gzipped_log(tmp_path, validate):
    """A .gz log that decompresses to ~1.2 GB (a few MB on disk, many gzip members) is read only until
    --timeout: the report comes back within the bound, marked partial, with what was read."""
    p = tmp_path / "big.log.gz"
    member = gzip.compress(b"[rank0]: iteration 1 | loss 2.0 | 2026-12-01 10:00:00\n" * 40_000)
    with open(p, "wb") as f:
        f.write(gzip.compress(TB.encode()))
        for _ in range(600):  # 24 M lines: far more than a second's reading
            f.write(member)
    t0 = time.monotonic()
    d = diagnose([p], timeout=1)
    took = time.monotonic() - t0
    assert took < 15, took
    assert d.partial and 0 < d.sources[0].lines < 24_000_000
    assert any("big.log.gz: read stopped after" in w and "--timeout 1 s reached" in w for w in d.warnings)
    assert d.root_cause.message == "RuntimeError: the real failure"
    t0 = time.monotonic()
    res = run("--json", "--timeout", "1", p)
    assert time.monotonic() - t0 < 15 and res.exit_code == 1, res.output
    doc = validate(json.loads(res.stdout))
    assert doc["partial"] is True and doc["root_cause"]["message"] == "RuntimeError: the real failure"


def test_real_timeout_fires(tmp_path, validate):
    (tmp_path / "a.log").write_text(TB)
    d = diagnose([tmp_path / "a.log"], timeout=1e-9)
    validate(to_dict(d))
    assert d.partial is True and d.status == "no_failure_found"
    assert any("1 file(s) not read:" in w and w.endswith("a.log") for w in d.warnings)
    res = run("--json", "--timeout", "1e-9", tmp_path / "a.log")  # nothing read: exit 2, not a clean bill
    assert res.exit_code == 2 and res.stdout == "" and "before the first line" in res.stderr
    assert run("--timeout", "0", OOM).exit_code == 2 and run("--timeout", "abc", OOM).exit_code == 2


def test_no_timeout_is_not_partial(validate):
    doc = run_json("--timeout", "60", OOM, validate=validate)
    assert doc["partial"] is False


def test_pathological_user_pattern_is_refused(tmp_path):
    (tmp_path / "p.toml").write_text(
        'category = "python"\n[[pattern]]\nid = "user.bad"\nrole = "root"\nregex = \'(a+)+$\'\n'
        'title = "t"\nwhy = "w"\nremediation = ["r"]\nexamples = ["aaa"]\n'
    )
    with pytest.raises(PatternError, match="nested quantifiers"):
        load_file(tmp_path / "p.toml")
    res = run("--patterns", tmp_path, OOM)
    assert res.exit_code == 2 and "nested quantifiers" in res.output and res.output.count("\n") == 1


def test_crafted_line_cannot_stall_the_python_engine(tmp_path):
    """A pattern that slipped past the check ((a|aa)+$ is exponential in backtracking engines) times
    out in the Python engine and counts as no match; the Rust engine is linear anyway."""
    from diagnose.patterns.library import Pattern

    p = Pattern(id="x", category="python", role="root", regex=r"(a|aa)+$", title="t", why="w", remediation=(),
                examples=())
    t = time.monotonic()
    assert p.search("a" * 60 + "!") is None
    assert time.monotonic() - t < 5


# ---------------------------------------------------------------- safety net


def test_internal_error_is_one_line(monkeypatch, tmp_path):
    def boom(*a, **k):
        raise ValueError("unexpected\nthing \x1b[2J")

    monkeypatch.setattr("diagnose.pipeline.diagnose", boom)
    res = run(OOM)
    assert res.exit_code == 2
    assert res.output.startswith("mdiag: internal error: ValueError: unexpected thing \\x1b[2J")
    assert res.output.count("\n") == 1 and "Traceback" not in res.output
    monkeypatch.setenv("MDIAG_DEBUG", "1")
    res = run(OOM)
    assert isinstance(res.exception, ValueError)


@pytest.mark.parametrize("content", [
    '{"message": {"message": ["a"], "extraInfo": {}}}',
    '{"message": {"message": "RuntimeError: x", "extraInfo": {"py_callstack": 7}}}',
    '{"message": {"message": "ValueError: y", "extraInfo": {"timestamp": 1e300}}}',
])
def test_corrupt_error_json_does_not_stop_the_diagnosis(tmp_path, validate, content):
    (tmp_path / "attempt_0" / "0").mkdir(parents=True)
    (tmp_path / "attempt_0" / "0" / "error.json").write_text(content)
    (tmp_path / "attempt_0" / "1").mkdir(parents=True)
    (tmp_path / "attempt_0" / "1" / "stderr.log").write_text(TB)
    doc = run_json(tmp_path, validate=validate)
    assert doc["root_cause"]["message"] == "RuntimeError: the real failure"


def test_corrupt_error_json_is_never_a_traceback(tmp_path):
    (tmp_path / "attempt_0" / "0").mkdir(parents=True)
    (tmp_path / "attempt_0" / "0" / "error.json").write_text('{"message": {"message": ["a"]}}')
    res = run(tmp_path)
    assert res.exit_code in (1, 0, 2) and "Traceback" not in res.output and res.output.count("\n") >= 1


def test_mangled_memory_report_line(tmp_path, validate):
    (tmp_path / "m.log").write_text(
        "[Rank 1] (after 1 iterations) memory (MB) | allocated: 2.06 | max allocated: 2.93 | reserved: 4.00 | "
        "max reserved: 4.002.93 | reserved: 4.00 | max reserved: 4.00\n" + TB)
    doc = run_json(tmp_path / "m.log", validate=validate)
    assert doc["root_cause"]["message"] == "RuntimeError: the real failure"
