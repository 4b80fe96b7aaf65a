"""Report writers for dashboards: one JSON file per job (atomic) and a shared JSON-lines file (locked)."""
from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def report_name(job_id: str | None, paths: list[str]) -> str:
    """`<job_id>` or, without one, a name made from the first input (`megatron-1234.err` → `megatron-1234`)."""
    if job_id:
        base = job_id
    elif paths:
        p = Path(paths[0].rstrip("/"))
        base = p.name
        for suffix in (".gz", ".err", ".out", ".log", ".txt"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
        base = base or "logs"
    else:
        base = "diagnosis"
    return _UNSAFE.sub("_", base).strip("._") or "diagnosis"


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write `path` so readers never see a partial file: a temp file in the same folder, fsync, rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def write_json_atomic(folder: str | Path, name: str, doc: dict) -> Path:
    """Write `folder/name.json` atomically (see write_text_atomic)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(folder / f"{name}.json", json.dumps(doc, ensure_ascii=True, indent=1) + "\n")


def append_jsonl(path: str | Path, doc: dict) -> Path:
    """Append one line to a JSON-lines file under an exclusive lock (safe when many jobs end at once)."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(doc, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            view = memoryview(line)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return path
