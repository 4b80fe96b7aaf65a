"""Files mdiag keeps between runs to start faster (the compiled scan automaton, the scan plan's literals, the parsed
built-in patterns): derived data only, keyed by a hash of what they are derived from, so a stale or foreign file is
never read."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_file(kind: str, *inputs: object, suffix: str) -> Path:
    """Where the cached result of `kind` for these inputs lives (XDG cache directory, else ~/.cache)."""
    key = hashlib.sha256(repr(inputs).encode()).hexdigest()[:24]
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mdiag" / f"{kind}-{key}{suffix}"


KEEP = 6  # files of one kind kept (each version of the patterns makes new ones)


def write_atomic(path: Path, data: bytes) -> None:
    """Write data to path through a private temporary file, or not at all (a read-only home: no cache);
    then drop all but the KEEP newest files of its kind."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        kind = path.name.rsplit("-", 1)[0]
        olds = sorted(path.parent.glob(f"{kind}-*{path.suffix}"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in olds[KEEP:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass
