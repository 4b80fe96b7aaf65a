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
