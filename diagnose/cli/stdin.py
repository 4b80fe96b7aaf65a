"""`mdiag -`: stdin copied to a private temporary file that is removed whatever happens (Ctrl-C and
SIGTERM included), and evidence from it named `<stdin>`."""
from __future__ import annotations

import contextlib
import sys

import click

STDIN_NAME = "<stdin>"


def hold_signals():
    """Defer SIGINT and SIGTERM where Python handles them; returns a function that puts the handlers
    back and runs each one for a signal that came meanwhile (idempotent).  pthread_sigmask would not
    do: a signal sent to the process reaches any thread, and Python runs its handler anyway."""
    import signal
    import threading

    came: list[int] = []
    saved = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            if callable(signal.getsignal(sig)):
                saved[sig] = signal.signal(sig, lambda n, _frame: came.append(n))

    def release() -> None:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        saved.clear()
        while came:
            n = came.pop(0)
            came.clear()
            signal.getsignal(n)(n, None)

    return release


@contextlib.contextmanager
def stdin_as_file(paths: list[str]):
    """`-` among the paths: stdin copied to a private temporary file (gzip kept as such), removed after."""
    if "-" not in paths:
        yield paths, None
        return
    import shutil
    import tempfile
    from pathlib import Path

    if sys.stdin is None:
        click.echo("mdiag: error: - names stdin, but there is none", err=True)
        from diagnose.cli.main import EXIT_USAGE

        sys.exit(EXIT_USAGE)
    if sys.stdin.isatty():
        click.echo("mdiag: reading the log from stdin (Ctrl-D ends it)", err=True)
    # Ctrl-C or SIGTERM while the folder is being made (or while tempfile probes TMPDIR with a file of
    # its own) would leave it behind: their handlers wait until the folder is ours to remove.
    held = hold_signals()
    folder = None
    try:
        folder = Path(tempfile.mkdtemp(prefix="mdiag-stdin-"))
        held()  # a signal that came meanwhile is handled here, inside the try
        src = getattr(sys.stdin, "buffer", sys.stdin)
        head = src.read(2)
        head = head.encode() if isinstance(head, str) else head
        f = folder / ("stdin.log.gz" if head == b"\x1f\x8b" else "stdin.log")
        with open(f, "wb") as out:
            out.write(head)
            if isinstance(src.read(0), str):
                for chunk in iter(lambda: src.read(1 << 20), ""):
                    out.write(chunk.encode("utf-8", "surrogateescape"))
            else:
                shutil.copyfileobj(src, out, 1 << 20)
        yield [str(f) if p == "-" else p for p in dict.fromkeys(paths)], f
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        held()


def rename_source(d, path, name: str) -> None:
    """Evidence from the stdin copy names `<stdin>`, not the temporary file."""
    for s in d.sources:
        if s.path == path:
            old, s.display = s.display, name
            break
    else:
        return
    evidence = [d.root_cause.evidence] if d.root_cause and d.root_cause.evidence else []
    evidence += [s.evidence for s in d.symptoms]
    for e in evidence:
        if e.file == old:
            e.file = name
    d.warnings = [w.replace(old, name).replace(str(path), name) for w in d.warnings]
