"""A big file read by two processes: a helper (forked) prefilters its second half while this process
reads the first, and hands back what it found to split, which follows the first half's lines in order.

Hyperscan holds one lock for all scans of a process, so a second thread would not scan at the same
time; a forked process does, and it needs no imports.  The helper runs only bytes work and Hyperscan
(polars' threads do not survive a fork), and buffers what it found: at most HELPER_BYTES, else (a dense
log, where splitting and filtering lines cost more than the automaton) it gives up and this process
reads that half itself.  Without fork, Hyperscan or two usable cores, or for small, compressed or
special files, nothing changes.
"""
from __future__ import annotations

import os
import pickle
import signal

from diagnose.model import Source
from diagnose.read.prefilter import BlockFilter
from diagnose.read.scan_blocks import read_chunks
from diagnose.read.scan_deadline import Deadline
from diagnose.read.scan_lines import Part, hot_spans

PARALLEL_BYTES = 128 * 1024 * 1024  # a smaller file is read by one process
HELPER_BYTES = 64 * 1024 * 1024  # what the helper may hand back


def split_point(src: Source, blocks: BlockFilter | None) -> int | None:
    """Where a helper could start reading src (the start of the line at its middle), or None."""
    if blocks is None or getattr(blocks.engine, "name", "") != "hyperscan" or not hasattr(os, "fork"):
        return None
    if src.path.name.endswith(".gz"):
        return None
    try:
        if len(os.sched_getaffinity(0)) < 2:
            return None
        size = src.path.stat().st_size
        if size < PARALLEL_BYTES:
            return None
        with open(src.path, "rb") as fh:
            fh.seek(size // 2)
            nl = fh.read(1024 * 1024).find(b"\n")
    except (OSError, AttributeError):
        return None
    return None if nl < 0 else size // 2 + nl + 1


class Helper:
    """The forked process that prefilters src from byte `start` on (see the module's text)."""

    def __init__(self, src: Source, start: int, blocks: BlockFilter, deadline: Deadline | None):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the helper: bytes and Hyperscan only, then out without running the parent's exit code
            try:
                os.close(r)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                warnings: list[str] = []
                parts: list[Part] | None = []
                held = 0
                for data in read_chunks(src, warnings, deadline=deadline, start=start):
                    part = hot_spans(data, blocks)
                    held += len(part[0])
                    if held > HELPER_BYTES:
                        parts = None
                        break
                    parts.append(part)
                with os.fdopen(w, "wb") as fh:
                    pickle.dump((parts, warnings), fh, protocol=pickle.HIGHEST_PROTOCOL)
            finally:
                os._exit(0)
        os.close(w)
        self.pid, self.r = pid, r

    def results(self) -> tuple[list[Part] | None, list[str]]:
        """What the helper found (None: read that half here) and its warnings; waits for it."""
        try:
            with os.fdopen(self.r, "rb") as fh:
                self.r = None
                parts, warnings = pickle.load(fh)
        except (EOFError, OSError, pickle.UnpicklingError):
            parts, warnings = None, []
        self.close()
        return parts, warnings

    def close(self) -> None:
        """Stop the helper if it still runs, and reap it."""
        if self.r is not None:
            os.close(self.r)
            self.r = None
        if self.pid:
            try:
                if os.waitpid(self.pid, os.WNOHANG) == (0, 0):
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = 0
