"""Collector: turn the user's paths (files, folders, globs) into the list of log sources to read."""
from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from .model import Source

LOG_SUFFIXES = (".err", ".out", ".log", ".txt")
# torchrun --log-dir: <run_id>/attempt_<n>/<local_rank>/{stdout,stderr}.log and error.json
_ATTEMPT = re.compile(r"(?:^|/)attempt_(\d+)/(\d+)/(stdout|stderr)\.log$|(?:^|/)attempt_(\d+)/(\d+)/error\.json$")
# srun/sbatch filename patterns: %t task id, %N node name, e.g. job-1234-3.err, job-1234-node004.out
_TASK = re.compile(r"(?:task|rank|proc)[-_.]?(\d+)", re.I)


class InputError(Exception):
    """Bad input: reported as one line on stderr with exit code 2."""


def _wanted(path: Path) -> bool:
    name = path.name
    if name.endswith(".gz"):
        name = name[:-3]
    return name.endswith(LOG_SUFFIXES) or name == "error.json"


def expand(paths: list[str]) -> tuple[list[Path], list[str]]:
    """Files, folders (recursively) and globs → (files, warnings).  Raises InputError if nothing is readable."""
    files: list[tuple[Path, str]] = []
    warnings: list[str] = []
    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            found = []
            for root, dirs, names in os.walk(p, followlinks=False):
                dirs.sort()
                for n in sorted(names):
                    f = Path(root) / n
                    if _wanted(f) and f.is_file():
                        found.append(f)
            if not found:
                warnings.append(f"{arg}: no log files (*.err, *.out, *.log, error.json) in this folder")
            files.extend((f, str(p)) for f in found)
        elif p.exists():
            if not p.is_file():
                raise InputError(f"{arg}: not a regular file")
            files.append((p, ""))
        elif any(ch in arg for ch in "*?["):
            matches = sorted(glob.glob(arg, recursive=True))
            if not matches:
                raise InputError(f"{arg}: no file matches this pattern")
            files.extend((Path(m), "") for m in matches if Path(m).is_file())
        else:
            raise InputError(f"{arg}: no such file or folder")
    seen, out = set(), []
    for f, _ in files:
        key = f.resolve()
        if key in seen:
            continue
        seen.add(key)
        out.append(f)
    if not out:
        raise InputError("no log files found in " + ", ".join(paths))
    return out, warnings


def describe(files: list[Path]) -> list[Source]:
    """What each path says: layout, stream, local rank, attempt, task, node."""
    sources = []
    for i, f in enumerate(files):
        posix = f.as_posix()
        name = f.name[:-3] if f.name.endswith(".gz") else f.name
        src = Source(index=i, path=f, display=_display(f), layout="merged")
        m = _ATTEMPT.search(posix[:-3] if posix.endswith(".gz") else posix)
        if m:
            if m.group(1) is not None:
                src.attempt, src.local_rank, src.stream = int(m.group(1)), int(m.group(2)), m.group(3)
                src.layout = "torchrun-logdir"
            else:
                src.attempt, src.local_rank = int(m.group(4)), int(m.group(5))
                src.layout = "error-json"
        elif name == "error.json":
            src.layout = "error-json"
        else:
            if name.endswith(".err"):
                src.stream = "stderr"
            elif name.endswith(".out"):
                src.stream = "stdout"
            t = _TASK.search(name)
            if t:
                src.task = int(t.group(1))
                src.layout = "per-rank"
        sources.append(src)
    return sources


def _display(f: Path) -> str:
    try:
        rel = os.path.relpath(f)
    except ValueError:
        return str(f)
    return rel if not rel.startswith("../../") else str(f)
