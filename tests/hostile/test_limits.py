"""Limits given as odd numbers: --timeout that is not finite, numbers of any size in the logs."""
from __future__ import annotations

import math

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
