"""Collector: turn the user's paths (files, folders, globs) into the list of log sources to read."""
from __future__ import annotations

import errno
import glob
import os
import re
import stat
from pathlib import Path

from diagnose.model import Source

LOG_SUFFIXES = (".err", ".out", ".log", ".txt", ".stderr", ".stdout")
# a rotated log keeps its name and gains a number, then maybe .gz: train.log.1, slurm-1234.err.2.gz
_ROTATED = re.compile(r"\.\d{1,4}$")
# torchrun --log-dir: <run_id>/attempt_<n>/<local_rank>/{stdout,stderr}.log and error.json
_ATTEMPT = re.compile(r"(?:^|/)attempt_(\d+)/(\d+)/(stdout|stderr)\.log$|(?:^|/)attempt_(\d+)/(\d+)/error\.json$")
# srun/sbatch filename patterns: %t task id, %N node name, e.g. job-1234-3.err, job-1234-node004.out
_TASK = re.compile(r"(?:task|rank|proc)[-_.]?(\d+)", re.I)
MAX_ID = 2**31 - 1  # a rank, attempt or task number above this is not one (polars' Int32/Int64 columns hold it)
ERROR_JSON_MAX_BYTES = 16 * 1024 * 1024  # torchrun's error.json is a few KB; a bigger one is not read


class InputError(Exception):
    """Bad input: reported as one line on stderr with exit code 2."""


def log_name(name: str) -> str:
    """A file name without .gz and without a rotation number: `train.log.2.gz` → `train.log`."""
    if name.endswith(".gz"):
        name = name[:-3]
    base = _ROTATED.sub("", name)
    return base if base.endswith(LOG_SUFFIXES) else name


def _wanted(path: Path) -> bool:
    name = log_name(path.name)
    return name.endswith(LOG_SUFFIXES) or name == "error.json"


def _number(text: str) -> int | None:
    """A rank/attempt/task number from a path, or None when it is too big to be one."""
    return int(text) if len(text) <= 10 and int(text) <= MAX_ID else None


def expand(paths: list[str], deadline=None) -> tuple[list[Path], list[str]]:
    """Files, folders (recursively) and globs → (files, warnings).  Raises InputError if nothing is readable.

    Whatever cannot be read (a missing path next to good ones, a symlink loop, a FIFO, a device, a
    folder without permission, an error.json over ERROR_JSON_MAX_BYTES) is skipped with a warning;
    only when nothing is left is it an error.  The same file named twice (or through a link) is read
    once.  Folders of any depth are walked without recursion; with `deadline` (scan.Deadline) the
    walk stops when it expires and a warning says what was not listed.
    """
    files: list[tuple[Path, os.stat_result]] = []
    warnings: list[str] = []
    problems: list[str] = []
    for arg in paths:
        p = Path(arg)
        st, why = _stat(p)
        if st is not None and stat.S_ISDIR(st.st_mode):
            found, walk_warnings = _walk(p, deadline)
            warnings += walk_warnings
            if not found:
                problems.append(f"{arg}: no log files (*.err, *.out, *.log, *.txt, *.stderr, *.stdout, "
                                f"rotated *.log.1, error.json) in this folder")
            files.extend(found)
        elif st is not None:
            if stat.S_ISREG(st.st_mode):
                files.append((p, st))
            else:
                problems.append(f"{arg}: not a regular file ({_kind(st)}), skipped")
        elif why == "no such file or folder" and any(ch in arg for ch in "*?["):
            matches = []
            for m in glob.iglob(arg, recursive=True):
                if deadline is not None and (len(matches) % 1024 == 1023 or len(matches) >= deadline.max_files) \
                        and deadline.listing_over(len(matches)):
                    warnings.append(f"{arg}: matching stopped by --timeout after {len(matches)} paths")
                    break
                matches.append(m)
            matches.sort()
            if not matches:
                problems.append(f"{arg}: no file matches this pattern")
            for m in matches:
                mst, mwhy = _stat(Path(m))
                if mst is not None and stat.S_ISREG(mst.st_mode):
                    files.append((Path(m), mst))
                elif mst is None or not stat.S_ISDIR(mst.st_mode):
                    warnings.append(f"{m}: {mwhy or 'not a regular file (' + _kind(mst) + ')'}, skipped")
        else:
            problems.append(f"{arg}: {why}")
    seen, out = set(), []
    for f, st in files:
        key = (st.st_dev, st.st_ino)
        if key in seen:
            warnings.append(f"{f}: the same file as one already given, read once")
            continue
        seen.add(key)
        if f.name == "error.json" and st.st_size > ERROR_JSON_MAX_BYTES:
            warnings.append(f"{f}: error.json of {st.st_size} bytes (over {ERROR_JSON_MAX_BYTES}), skipped")
            continue
        out.append(f)
    if not out:
        if len(problems) == 1:
            raise InputError(problems[0].removesuffix(", skipped"))
        raise InputError("no log files found in " + ", ".join(paths) + ("" if not problems else " (" + "; ".join(problems) + ")"))
    return out, problems + warnings


def _stat(p: Path) -> tuple[os.stat_result | None, str | None]:
    """stat() that follows links, or the reason in words (symlink loop, dangling link, …)."""
    try:
        return os.stat(p), None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, "symbolic link loop, skipped"
        if exc.errno == errno.ENOENT and os.path.islink(p):
            return None, "dangling symbolic link, skipped"
        if exc.errno == errno.ENOENT:
            return None, "no such file or folder"
        if isinstance(exc, PermissionError):
            return None, "permission denied, skipped"
        return None, f"cannot read ({exc.strerror or exc}), skipped"
    except ValueError as exc:  # embedded NUL byte in the path
        return None, f"invalid path ({exc})"


def _kind(st: os.stat_result | None) -> str:
    if st is None:
        return "unreadable"
    m = st.st_mode
    return ("a FIFO" if stat.S_ISFIFO(m) else "a character device" if stat.S_ISCHR(m) else "a block device"
            if stat.S_ISBLK(m) else "a socket" if stat.S_ISSOCK(m) else "not a file")


def _walk(top: Path, deadline=None) -> tuple[list[tuple[Path, os.stat_result]], list[str]]:
    """Log files under a folder (links to files followed, links to folders not: no loops), depth
    first in name order, with an explicit stack: any depth, no recursion."""
    found, warnings = [], []
    stack = [top]
    while stack:
        if deadline is not None and deadline.listing_over(len(found)):
            warnings.append(f"{top}: listing stopped by --timeout after {len(found)} files; {len(stack)} folder(s) not listed")
            break
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            reason = "permission denied" if isinstance(exc, PermissionError) else (exc.strerror or str(exc))
            warnings.append(f"{folder}: cannot list this folder ({reason}), skipped")
            continue
        subdirs = []
        for i, e in enumerate(entries):
            if deadline is not None and (i % 1024 == 1023 or len(found) >= deadline.max_files) \
                    and deadline.listing_over(len(found)):
                warnings.append(f"{folder}: listing stopped by --timeout after {i} of {len(entries)} entries")
                stack.clear()
                break
            try:
                is_dir = e.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                subdirs.append(Path(e.path))
                continue
            f = Path(e.path)
            if not _wanted(f):
                continue
            st, why = _stat(f)
            if st is not None and stat.S_ISREG(st.st_mode):
                found.append((f, st))
            else:
                warnings.append(f"{f}: {why or 'not a regular file (' + _kind(st) + '), skipped'}")
        stack.extend(reversed(subdirs))  # the first sub-folder by name is walked next
    return found, warnings


def describe(files: list[Path]) -> list[Source]:
    """What each path says: layout, stream, local rank, attempt, task, node."""
    sources = []
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory was removed
        cwd = None
    for i, f in enumerate(files):
        posix = f.as_posix()
        name = log_name(f.name)
        src = Source(index=i, path=f, display=_display(f, cwd), layout="merged")
        m = _ATTEMPT.search(posix[:-3] if posix.endswith(".gz") else posix)
        if m:
            if m.group(1) is not None:
                src.attempt, src.local_rank, src.stream = _number(m.group(1)), _number(m.group(2)), m.group(3)
                src.layout = "torchrun-logdir"
            else:
                src.attempt, src.local_rank = _number(m.group(4)), _number(m.group(5))
                src.layout = "error-json"
        elif name == "error.json":
            src.layout = "error-json"
        else:
            if name.endswith((".err", ".stderr")):
                src.stream = "stderr"
            elif name.endswith((".out", ".stdout")):
                src.stream = "stdout"
            t = _TASK.search(name)
            if t:
                src.task = _number(t.group(1))
        sources.append(src)
    _confirm_per_rank(sources)
    return sources


def _confirm_per_rank(sources: list[Source]) -> None:
    """A rank number in a file name counts only when sibling files share the name with other numbers
    (job-rank0.err, job-rank1.err, …); one file called `shape-rank2.log` says nothing about ranks."""
    groups: dict[tuple, set[int]] = {}
    for s in sources:
        if s.task is not None:
            groups.setdefault((s.path.parent, _TASK.sub("#", s.path.name)), set()).add(s.task)
    for s in sources:
        if s.task is None:
            continue
        if len(groups[(s.path.parent, _TASK.sub("#", s.path.name))]) > 1:
            s.layout = "per-rank"
        else:
            s.task = None


def _display(f: Path, cwd: str | None = None) -> str:
    """The path as given relative to the working directory (at most one level up), else absolute."""
    text = str(f)
    if cwd is not None and text.startswith("/") and "/." not in text:  # without relpath, for many files
        if text.startswith(cwd + "/"):
            return text[len(cwd) + 1:]
        up = os.path.dirname(cwd)
        if up != "/" and not text.startswith(up + "/"):
            return text  # more than one level up
    try:
        rel = os.path.relpath(f, cwd)
    except (ValueError, OSError):
        return text
    return rel if not rel.startswith("../../") else text
