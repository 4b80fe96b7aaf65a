"""The run's wall-clock limit (`--timeout`), shared by every stage that can take long."""
from __future__ import annotations

import time


class Deadline:
    """A wall-clock limit for a run (`--timeout`), checked before each chunk and each file.

    When it fires, what was not read is said in the scan's warnings and `fired` stays True."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.fired = False
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
