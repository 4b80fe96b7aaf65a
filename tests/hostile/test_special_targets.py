"""An output path that is a device, FIFO or folder is refused, never replaced by a regular file (as root,
`--html /dev/null` would otherwise turn /dev/null into a file)."""
from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from diagnose.cli.main import main
from diagnose.render.outputs import write_text_atomic

TB = 'Traceback (most recent call last):\n  File "/job/train.py", line 3, in <module>\nRuntimeError: boom\n'


def test_write_text_atomic_refuses_a_fifo_and_a_folder(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    for name in ("fifo", "dir"):
        with pytest.raises(OSError, match="not a regular file"):
            write_text_atomic(tmp_path / name, "x")
    assert (tmp_path / "dir").is_dir() and not (tmp_path / "fifo").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_html_to_a_fifo_is_an_error_and_the_fifo_stays(tmp_path):
    log = tmp_path / "a.log"
    log.write_text(TB)
    os.mkfifo(tmp_path / "r.html")
    r = CliRunner().invoke(main, ["--html", str(tmp_path / "r.html"), str(log)])
    assert r.exit_code == 2 and "not a regular file" in r.stderr, r.output
    assert not (tmp_path / "r.html").is_file()
