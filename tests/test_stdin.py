"""`mdiag -`: the stdin copy is removed whenever Ctrl-C or SIGTERM arrives, even while it is being made."""
import io
import os
import signal
import sys
import tempfile

import pytest

from diagnose.cli import stdin


def test_a_signal_while_the_folder_is_made_still_removes_it(tmp_path, monkeypatch):
    made = []
    real = tempfile.mkdtemp

    def mkdtemp_then_ctrl_c(**kw):
        folder = real(dir=tmp_path, **kw)
        made.append(folder)
        os.kill(os.getpid(), signal.SIGINT)  # before mkdtemp has returned the name
        return folder

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp_then_ctrl_c)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"step 1\n")))
    with pytest.raises(KeyboardInterrupt):
        with stdin.stdin_as_file(["-"]):
            pytest.fail("the signal is handled before the log is read")
    assert made and not any(tmp_path.iterdir())
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_held_signals_run_their_handler_once_released():
    release = stdin.hold_signals()
    os.kill(os.getpid(), signal.SIGINT)  # deferred
    with pytest.raises(KeyboardInterrupt):
        release()
    release()  # idempotent: nothing left to run
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
