"""Raw blocks of a file, read in big chunks that end on a line boundary.

Files are read only up to the size they had when opened, FIFOs and devices are refused, `.gz` is
gunzipped on the fly (a damaged one is read up to the damage), and a line longer than MAX_LINE is cut
while it is read, so memory stays bounded whatever the file holds.  A helper thread reads ahead.
"""
from __future__ import annotations

import errno
import os
import queue
import stat
import threading
import zlib
from collections.abc import Iterator

from diagnose.model import Source
from diagnose.read.scan_deadline import Deadline

CHUNK_BYTES = 16 * 1024 * 1024
MAX_LINE = 256 * 1024  # a longer line keeps its first MAX_LINE bytes (memory and regex time stay bounded)
LINE_CUT = " …[mdiag: line cut at 256 KiB]"


class NotRegularFile(OSError):
    pass


def _open(src: Source, start: int = 0, stop: int | None = None):
    """The file as a binary stream, read only up to the size it had when opened (a file that is still
    being written can't keep the scan going forever).  FIFOs and devices are refused without blocking.
    With start/stop, only those bytes of it."""
    fd = os.open(src.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file")
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    if start:
        fh.seek(start)
    return _Bounded(fh, max(min(st.st_size, st.st_size if stop is None else stop) - start, 0))


class _Bounded:
    """A binary file cut at `limit` bytes."""

    def __init__(self, fh, limit: int):
        self.fh, self.left = fh, limit

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        if n <= 0:
            return b""
        data = self.fh.read(n)
        self.left -= len(data)
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()


def _blocks(src: Source, warnings: list[str], chunk_bytes: int, start: int = 0,
            stop: int | None = None) -> Iterator[bytes]:
    """Raw blocks of the file, gunzipped when it ends in .gz.  A truncated or corrupt .gz yields what
    decompressed before the damage, then a warning; concatenated gzip members are all read.  start and
    stop (a plain file only) bound the bytes read."""
    gz = src.path.name.endswith(".gz")
    with _open(src, *((0, None) if gz else (start, stop))) as fh:
        if not gz:
            while block := fh.read(chunk_bytes):
                yield block
            return
        dec, started = zlib.decompressobj(wbits=31), False
        while True:
            comp = fh.read(min(chunk_bytes, 4 * 1024 * 1024))
            if not comp:
                if started and not dec.eof:
                    warnings.append(f"{src.display}: compressed file ended early (truncated .gz), read up to the cut")
                return
            while comp:
                try:
                    out = dec.decompress(comp, chunk_bytes)
                except zlib.error as exc:
                    warnings.append(f"{src.display}: corrupt .gz ({exc}), read up to the damage")
                    return
                started = True
                if out:
                    yield out
                if dec.eof:  # next gzip member, if any
                    comp = dec.unused_data
                    if comp and not comp.lstrip(b"\0"):
                        comp = b""  # zero padding after the last member
                    dec = zlib.decompressobj(wbits=31)
                    started = bool(comp)
                else:
                    comp = dec.unconsumed_tail


def _last_lone_cr(seg: bytes) -> int:
    """Index of the last carriage return in seg that is not half of a CRLF (a final CR may be), else -1."""
    return seg.rfind(b"\r", 0, len(seg) - 1) if seg.endswith(b"\r") else seg.rfind(b"\r")


def read_chunks(src: Source, warnings: list[str], chunk_bytes: int = CHUNK_BYTES,
                deadline: Deadline | None = None, *, start: int = 0, stop: int | None = None) -> Iterator[bytes]:
    """Raw chunks that end on a line boundary (split_lines turns each into lines).  A line longer than
    MAX_LINE is cut while it is read, keeping what a progress bar printed after its last carriage
    return, so memory stays bounded.  With a deadline, stops between chunks when it has passed and
    says in `warnings` what was not read.  start and stop (byte offsets at line starts, in a plain
    file) read a part of it."""
    if deadline is not None and deadline.expired():
        deadline.unread.append(src.display)
        return
    tail, dropping, done, cr_before = b"", False, 0, False
    try:
        for block in _blocks(src, warnings, chunk_bytes, start, stop):
            done += len(block)
            if dropping:  # inside an overlong line: skip to its end (or to a carriage return that restarts it)
                nl = block.find(b"\n")
                seg = block if nl < 0 else block[:nl]
                r = _last_lone_cr(seg)
                if r >= 0 or (cr_before and nl != 0):  # a lone \r here, or ending the block before
                    tail, dropping = _cap(seg[r + 1 :])
                cr_before = nl < 0 and seg.endswith(b"\r")
                if nl < 0:
                    continue
                block = block[nl:]
            cut = block.rfind(b"\n")
            if cut < 0:
                tail, dropping = _cap(tail + block)
            else:  # one copy of the block, not two (joining, then cutting)
                out = b"".join((tail, memoryview(block)[:cut]))
                tail, dropping = _cap(block[cut + 1 :])
                yield out
            if deadline is not None and deadline.expired() and not _read_whole(src, start + done, stop):
                at = f"after {done:,} bytes" if not start else f"at byte {start + done:,} (read from byte {start:,})"
                warnings.append(f"{src.display}: read stopped {at} (--timeout {deadline.seconds:g} s reached)")
                return
    except (EOFError, zlib.error) as exc:
        warnings.append(f"{src.display}: read stopped early ({exc.__class__.__name__}: {exc})")
    except OSError as exc:
        if not done:
            raise
        warnings.append(f"{src.display}: read stopped after {done:,} bytes ({exc.strerror or exc})")
    if tail:
        yield tail


def _read_whole(src: Source, done: int, stop: int | None = None) -> bool:
    """Whether the first `done` bytes are all that was to read (of a plain file): then the deadline
    stopped nothing."""
    try:
        return not src.path.name.endswith(".gz") and done >= (stop or src.path.stat().st_size)
    except OSError:
        return False


def _cap(line: bytes) -> tuple[bytes, bool]:
    """An unfinished line: what a progress bar printed last, at most MAX_LINE bytes (→ True: cut)."""
    if len(line) <= MAX_LINE:
        return line, False
    r = _last_lone_cr(line)
    if r >= 0:
        line = line[r + 1 :]
        if len(line) <= MAX_LINE:
            return line, False
    return line[:MAX_LINE] + LINE_CUT.encode(), True


def reuse_freed_blocks() -> None:
    """Ask glibc to keep freed chunk-sized blocks for reuse, in one arena for all threads, instead of
    handing them back to the system: each block read would otherwise land on fresh pages (300k minor
    faults per GB here, 165k with this; about 0.2 s of system time).  For the command line (a library
    should not set its caller's allocator); a no-op without glibc."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.mallopt(-8, 1)  # M_ARENA_MAX: the reader thread's blocks come from the main arena too
        libc.mallopt(-3, 2 * CHUNK_BYTES)  # M_MMAP_THRESHOLD: chunk-sized blocks come from the heap
        # M_TRIM_THRESHOLD: and stay there for the next chunks (eight chunks' worth kept ~80 MB more resident
        # on a 1 GB log, for no time gained)
        libc.mallopt(-1, 4 * CHUNK_BYTES)
    except (OSError, AttributeError):
        pass


def _prefetch(items: Iterator, depth: int = 2) -> Iterator:
    """Run a generator in a helper thread, `depth` items ahead (polars and file reads release the GIL)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    failure: list[BaseException] = []

    def work() -> None:
        try:
            for item in items:
                q.put(item)
        except BaseException as exc:  # noqa: BLE001  (re-raised in the caller's thread)
            failure.append(exc)
        finally:
            q.put(done)

    threading.Thread(target=work, daemon=True, name="mdiag-reader").start()
    while (item := q.get()) is not done:
        yield item
    if failure:
        raise failure[0]
