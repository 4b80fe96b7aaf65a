"""diagnose.render.outputs: atomic per-job JSON files and a JSON-lines file many processes append to at once."""
from __future__ import annotations

import json
import multiprocessing as mp
import os
from pathlib import Path

from diagnose.render.outputs import append_jsonl, report_name, write_json_atomic


def test_report_name():
    assert report_name("1234", ["x.err"]) == "1234"
    assert report_name(None, ["logs/megatron-1234.err"]) == "megatron-1234"
    assert report_name(None, ["logs/run.log.gz"]) == "run"
    assert report_name(None, ["logs/"]) == "logs"
    assert report_name(None, ["a b/../x y.out"]) == "x_y"


def test_write_json_atomic_replaces_and_leaves_no_temp(tmp_path):
    write_json_atomic(tmp_path / "out", "7", {"a": 1})
    p = write_json_atomic(tmp_path / "out", "7", {"a": 2})
    assert json.loads(p.read_text()) == {"a": 2}
    assert [x.name for x in (tmp_path / "out").iterdir()] == ["7.json"]


def test_write_json_atomic_failure_keeps_old_file(tmp_path):
    write_json_atomic(tmp_path, "7", {"a": 1})
    try:
        write_json_atomic(tmp_path, "7", {"bad": object()})
    except TypeError:
        pass
    assert json.loads((tmp_path / "7.json").read_text()) == {"a": 1}
    assert [x.name for x in tmp_path.iterdir()] == ["7.json"]


def _writer(path: str, worker: int, n: int) -> None:
    big = "x" * 70000  # larger than PIPE_BUF: interleaving would show without the lock
    for i in range(n):
        append_jsonl(path, {"worker": worker, "i": i, "pad": big})


def test_concurrent_jsonl_appends(tmp_path):
    path = str(tmp_path / "all.jsonl")
    ctx = mp.get_context("fork" if hasattr(os, "fork") else "spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 25)) for w in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = Path(path).read_text().splitlines()
    docs = [json.loads(line) for line in lines]
    assert len(docs) == 150
    assert sorted((d["worker"], d["i"]) for d in docs) == [(w, i) for w in range(6) for i in range(25)]


def test_reports_are_not_world_readable(tmp_path):
    p = write_json_atomic(tmp_path / "out", "1", {"a": 1})
    j = append_jsonl(tmp_path / "all.jsonl", {"a": 1})
    assert p.stat().st_mode & 0o007 == 0 and j.stat().st_mode & 0o007 == 0


def test_jsonl_never_follows_a_link_or_opens_a_fifo(tmp_path):
    import pytest

    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    (tmp_path / "all.jsonl").symlink_to(target)
    with pytest.raises(OSError):
        append_jsonl(tmp_path / "all.jsonl", {"a": 1})
    assert target.read_text() == "keep\n"
    os.mkfifo(tmp_path / "fifo.jsonl")
    with pytest.raises(OSError):
        append_jsonl(tmp_path / "fifo.jsonl", {"a": 1})


def test_torn_last_line_is_closed_before_the_next_record(tmp_path):
    from diagnose.render.outputs import read_jsonl

    path = tmp_path / "all.jsonl"
    append_jsonl(path, {"job": 1})
    with open(path, "a") as f:
        f.write('{"job": 2, "half')  # a writer killed mid-record
    append_jsonl(path, {"job": 3})
    docs, bad = read_jsonl(path)
    assert [d["job"] for d in docs] == [1, 3] and bad == 1


def test_stale_temp_files_are_swept_and_sigterm_cleans_up(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    stale = tmp_path / ".1.json.abc.tmp"
    stale.write_text("{")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    write_json_atomic(tmp_path, "1", {"a": 1})
    assert sorted(x.name for x in tmp_path.iterdir()) == ["1.json"]
    # a writer stopped by SIGTERM in the middle of its write leaves no temp file
    code = ("import os, sys, time\nfrom diagnose.render import outputs\n"
            "real = os.fsync\nos.fsync = lambda fd: (print('in', flush=True), time.sleep(30))\n"
            f"outputs.write_json_atomic({str(tmp_path)!r}, '2', {{'a': 1}})\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "in"
    p.send_signal(signal.SIGTERM)
    p.wait(30)
    assert p.returncode != 0 and sorted(x.name for x in tmp_path.iterdir()) == ["1.json"]
