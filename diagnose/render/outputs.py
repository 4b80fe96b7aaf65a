"""Report writers for dashboards: one JSON file per job (atomic) and a shared JSON-lines file (locked)."""
from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import re
import signal
import stat
import tempfile
import threading
import time
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


REPORT_MODE = 0o640  # reports can carry paths and log lines: not world-readable
STALE_TMP_S = 600  # a temp file this old was left by a writer killed with SIGKILL


@contextlib.contextmanager
def _signals_raise():
    """While a temp file exists, SIGTERM/SIGHUP/SIGINT raise SystemExit so it is removed (an ignored
    signal stays ignored: the SLURM trap runs mdiag with SIGTERM ignored on purpose)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {}

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        try:
            prev = signal.getsignal(sig)
            if prev is signal.SIG_IGN:
                continue
            old[sig] = prev
            signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
    try:
        yield
    finally:
        for sig, prev in old.items():
            try:
                signal.signal(sig, prev)
            except (ValueError, OSError, TypeError):
                pass


def _remove_stale_temps(path: Path) -> None:
    """Temp files of `path` left by a writer that was killed (SIGKILL leaves no chance to clean up)."""
    now = time.time()
    try:
        for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
            try:
                st = tmp.lstat()
                if stat.S_ISREG(st.st_mode) and now - st.st_mtime > STALE_TMP_S:
                    tmp.unlink()
            except OSError:
                pass
    except OSError:
        pass


def _refuse_special(path: Path) -> None:
    """A path that is a device, FIFO, socket or folder is never replaced (as root, `--html /dev/null` would
    otherwise turn the device into a regular file); a link there is replaced, never followed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise OSError(errno.EINVAL, f"{path} is not a regular file, not written")


def write_atomic_with(path: str | os.PathLike, write, mode: int = REPORT_MODE) -> Path:
    """Write `path` so readers never see a partial file: `write(fd, tmp)` fills a temp file in the same folder
    (created exclusively, never through a link), then it is fsynced and renamed (which replaces a link, never
    follows it).  The temp file is removed on any error and on SIGTERM/SIGHUP/SIGINT; stale ones are swept."""
    path = Path(path)
    _refuse_special(path)
    with _signals_raise():
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, mode & ~umask)
            write(fd, tmp)
            os.fsync(fd)
            os.close(fd)
            fd = -1
            os.replace(tmp, path)
        except BaseException:
            try:
                if fd >= 0:
                    os.close(fd)
            except OSError:
                pass
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    _remove_stale_temps(path)
    return path


def write_text_atomic(path: str | os.PathLike, text: str, mode: int = REPORT_MODE) -> Path:
    """Write `text` to `path` atomically (see write_atomic_with), through the temp file's own descriptor."""
    data = text.encode("utf-8")

    def write(fd: int, tmp: str) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

    return write_atomic_with(path, write, mode)


def write_json_atomic(folder: str | Path, name: str, doc: dict) -> Path:
    """Write `folder/name.json` atomically (see write_text_atomic)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(folder / f"{name}.json", json.dumps(doc, ensure_ascii=True, indent=1) + "\n")


def append_jsonl(path: str | Path, doc: dict) -> Path:
    """Append one line to a JSON-lines file under an exclusive lock (safe when many jobs end at once).

    The file is opened without following a link (O_NOFOLLOW) and must be a regular file; a new one is
    created 0640.  The record is one write(); a torn last line (a writer killed mid-record) is closed
    with a newline first, so the half record stays a line of its own that readers skip."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(doc, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NONBLOCK", 0)  # a FIFO planted at the path must not block the open
    try:
        fd = os.open(path, flags, REPORT_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(exc.errno, f"{path} is a symbolic link, not written") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file, not written")
        os.set_blocking(fd, True)
        with _signals_raise():
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                size = os.lseek(fd, 0, os.SEEK_END)
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line
                n = os.write(fd, line)
                while n < len(line):  # only on a full disk or a signal: finish the record
                    n += os.write(fd, line[n:])
                os.fsync(fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return path


def read_jsonl(path: str | Path) -> tuple[list[dict], int]:
    """The records of a JSON-lines file and the number of lines skipped (torn or not one object)."""
    docs, bad = [], 0
    with open(path, "rb") as f:
        for raw in f:
            try:
                doc = json.loads(raw)
            except (ValueError, RecursionError):
                doc = None
            if isinstance(doc, dict):
                docs.append(doc)
            elif raw.strip():
                bad += 1
    return docs, bad
