"""A stable fingerprint of a root cause, so the same failure in two jobs gets the same id.

The fingerprint hashes three things and nothing else:

* the pattern id (`oom.cuda_allocator`),
* the exception type (`torch.OutOfMemoryError`), without its message, and
* the top frame of the job's own code: the innermost traceback frame that is not in a library
  (site-packages, dist-packages, /lib/pythonX, <frozen …>), as `basename:function`.

Rank, host, time, line numbers, sizes and directories never enter it, so a job that hits the
same OOM in the same function on another node, another day, with another batch size, matches.
"""
from __future__ import annotations

import hashlib
import posixpath
import re

LIBRARY = re.compile(r"site-packages|dist-packages|[/\\]lib[/\\]python\d|^<frozen|^<string>|^<built-in")
# `torch.OutOfMemoryError: …`, `RuntimeError`, `ncclInternalError: …`: a dotted identifier that
# opens the message and is followed by a colon or nothing.
_EXC = re.compile(r"^\s*((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\s*(?::|$)")
_EXC_NAME = re.compile(r"(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault|Timeout)$|^[A-Z][a-z]+[A-Z]\w*$")


def exception_type(message: str | None) -> str | None:
    """The exception type a `Type: message` line names, or None when the line is not one."""
    if not message:
        return None
    m = _EXC.match(message)
    if not m:
        return None
    name = m.group(1)
    return name if _EXC_NAME.search(name.rsplit(".", 1)[-1]) else None


def is_library(path: str) -> bool:
    return bool(LIBRARY.search(path or ""))


def top_job_frame(frames: list[dict]) -> dict | None:
    """The innermost frame of the job's own code (frames are ordered outermost first)."""
    for f in reversed(frames or []):
        if f and f.get("file") and not is_library(f["file"]):
            return f
    return None


def frame_key(frame: dict | None) -> str:
    if not frame:
        return ""
    base = posixpath.basename(str(frame.get("file") or "").replace("\\", "/"))
    return f"{base}:{frame.get('function') or frame.get('func') or ''}"


def components(root: dict) -> tuple[str, str, str]:
    """(pattern, exception type, top job frame) of a JSON `root_cause` dict."""
    exc = exception_type(root.get("text") or root.get("message"))  # the line the pattern matched (its text alone)
    for line in reversed(root.get("traceback") or [] if exc is None else []):
        if line and not line.startswith((" ", "\t", "Traceback")):
            exc = exception_type(line)
            if exc:
                break
    return str(root.get("pattern") or ""), exc or "", frame_key(top_job_frame(root.get("frames") or []))


def fingerprint(root: dict | None) -> str | None:
    """12 hex digits of sha1 over pattern | exception type | basename:function; None without a root."""
    if not root:
        return None
    key = "|".join(components(root))
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:12]


def of_root_cause(r) -> str | None:
    """The fingerprint of a model.RootCause."""
    if r is None:
        return None
    return fingerprint({
        "pattern": r.pattern, "message": r.message, "text": r.text, "traceback": r.traceback,
        "frames": [{"file": f.file, "function": f.func} for f in r.frames],
    })
