"""Limits given as odd numbers: --timeout that is not finite, numbers of any size in the logs."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from diagnose.cli.main import main
from diagnose.pipeline import diagnose

TB = 'Traceback (most recent call last):\n  File "/job/train.py", line 3, in <module>\nRuntimeError: boom\n'


@pytest.mark.parametrize("value,code", [("inf", 1), ("1e308", 1), ("nan", 2), ("-inf", 2)])
def test_timeout_that_is_not_finite(tmp_path, value, code):
    log = tmp_path / "a.log"
    log.write_text(TB)
    r = CliRunner().invoke(main, ["--timeout", value, str(log)])
    assert r.exit_code == code, r.output
    assert "internal error" not in r.output and "Traceback (most recent" not in r.stderr
    if code == 1:
        assert "partial" not in r.output


@pytest.mark.parametrize("value", [math.inf, 1e308, math.nan])
def test_library_timeout_that_is_not_finite(tmp_path, value):
    log = tmp_path / "a.log"
    log.write_text(TB)
    d = diagnose([str(log)], timeout=value)
    assert d.root_cause is not None and not d.partial


@pytest.mark.parametrize("as_glob", [False, True])
def test_listing_stops_at_the_files_the_time_can_read(tmp_path, monkeypatch, as_glob):
    """Many files under --timeout: listing (a folder walk or a glob) stops at what the run can describe and read
    in its time, so the rest of the run is not spent on files it would never open; the report is partial."""
    from diagnose.read import scan_deadline

    monkeypatch.setattr(scan_deadline, "MIN_FILES", 10)
    monkeypatch.setattr(scan_deadline, "FILES_PER_SECOND", 2)
    for i in range(100):
        (tmp_path / f"r{i:03d}.log").write_text(TB if i == 0 else "ok\n")
    d = diagnose([str(tmp_path / "*.log") if as_glob else str(tmp_path)], timeout=5)
    assert len(d.sources) == 10 and d.partial
    assert any("stopped by --timeout" in w for w in d.warnings)
    assert d.root_cause is not None or as_glob  # a glob lists in directory order


def test_display_paths_without_relpath_agree_with_relpath(tmp_path, monkeypatch):
    import os

    from diagnose.read.collect import _display

    monkeypatch.chdir(tmp_path)
    cwd = os.getcwd()
    for p in [f"{cwd}/a/b.log", "a/b.log", f"{os.path.dirname(cwd)}/x.log", "/x/y/z.log", f"{cwd}/../.h/x", cwd]:
        rel = os.path.relpath(p)
        assert _display(Path(p), cwd) == (rel if not rel.startswith("../../") else str(Path(p)))


def test_huge_world_size_with_per_rank_files(tmp_path):
    """A world size of 10^11 next to per-rank files: the ranks without output are named as ranges, without
    a list of the whole world in memory."""
    dump = ("------------------------ arguments ------------------------\n"
            "  world_size ...................................... 100000000000\n"
            "-------------------- end of arguments ---------------------\n")
    (tmp_path / "job-rank0.log").write_text(dump + TB)
    (tmp_path / "job-rank2.log").write_text("ok\n")
    d = diagnose([str(tmp_path)])
    assert d.job.get("ranks_without_output") == "1, 3-99999999999"
