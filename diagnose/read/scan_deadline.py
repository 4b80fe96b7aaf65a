"""The run's wall-clock limit (`--timeout`), shared by every stage that can take long.

Reading stops at READ_SHARE of the limit and filtering what was read at FILTER_SHARE, so that what
was kept can still be analysed in the rest; the analysis then gets at most the candidate lines the time left allows (trim), the first of each
file, and the report says what was not read and what was read but not analysed.
"""
from __future__ import annotations

import time

import polars as pl

LIST_SHARE = 0.25  # listing folders and globs stops here, so the files found can still be described and read
READ_SHARE = 0.7
# Files a run can describe, open and read per second of its limit (about a third of what it does, as for
# ROWS_PER_SECOND); listing stops at this many, never fewer than MIN_FILES.
FILES_PER_SECOND = 4_000
MIN_FILES = 1_000
FILTER_SHARE = 0.85  # lines read before READ_SHARE are filtered until this share of the limit
# Candidate lines the analysis gets through per second of time left, counted low (about a third of
# what one busy core does) so a run ends near its limit; never fewer than MIN_ROWS.
ROWS_PER_SECOND = 20_000
MIN_ROWS = 2_000


class Deadline:
    """A wall-clock limit for a run (`--timeout`), checked before each chunk and each file.

    When it fires, what was not read is said in the scan's warnings and `fired` stays True."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        now = time.monotonic()
        self.end = now + seconds
        self.list_at = now + LIST_SHARE * seconds  # when listing folders and globs stops
        self.max_files = MIN_FILES if not seconds > 0 else int(min(max(MIN_FILES, seconds * FILES_PER_SECOND), 2**62))
        self.at = now + READ_SHARE * seconds  # when reading stops
        self.filter_at = now + FILTER_SHARE * seconds  # when filtering what was read stops
        self.fired = False
        self.unlisted = False  # listing stopped (listing_over) before every folder was listed
        self.unread: list[str] = []  # files not opened at all

    def summary(self) -> str:
        head = f"--timeout {self.seconds:g} s reached: the diagnosis is partial"
        if not self.unread:
            return head
        shown = ", ".join(self.unread[:5]) + (f" and {len(self.unread) - 5} more" if len(self.unread) > 5 else "")
        return f"{head}; {len(self.unread)} file(s) not read: {shown}"

    def expired(self) -> bool:
        if not self.fired and time.monotonic() >= self.at:
            self.fired = True
        return self.fired

    def listing_over(self, listed: int = 0) -> bool:
        """Past the time for listing folders and globs, or `listed` files are all the run can read in its
        time: the files not listed make the run partial."""
        if listed >= self.max_files or time.monotonic() >= self.list_at:
            self.unlisted = True
            return True
        return False

    @property
    def partial(self) -> bool:
        """Something was not listed, read or analysed."""
        return self.fired or self.unlisted

    def late(self) -> bool:
        """Past the time for filtering what was read ahead (then the rest is not analysed)."""
        if time.monotonic() >= self.filter_at:
            self.fired = True
            return True
        return False

    def rows_left(self) -> int:
        """How many candidate lines the analysis can take in the time left."""
        left = (self.end - time.monotonic()) * ROWS_PER_SECOND
        return max(MIN_ROWS, int(left)) if left < 2**62 else 2**62  # an endless limit (inf, nan) leaves room for all


def trim(kept: pl.DataFrame, deadline: Deadline) -> tuple[pl.DataFrame, str | None]:
    """kept (src, lineno, line), cut to what the analysis can take before the deadline: the first lines
    of each file, as many from each as the budget allows (None: nothing cut).  Cutting fires the deadline."""
    budget = deadline.rows_left()
    if kept.height <= budget:
        return kept, None
    deadline.fired = True
    files = kept.get_column("src").n_unique()
    per_file = max(budget // max(files, 1), 1)
    out = kept.filter(pl.int_range(pl.len()).over("src") < per_file)
    return out, (f"--timeout {deadline.seconds:g} s: {out.height:,} of {kept.height:,} candidate lines analysed "
                 f"(the first {per_file:,} of each file); the others were read but not analysed")
