"""Failure patterns: plain data in ``patterns/*.toml``, loaded, validated and compiled here.

A pattern file names one category and holds ``[[pattern]]`` tables::

    category = "oom"

    [[pattern]]
    id = "oom.cuda_allocator"
    role = "root"                # root | symptom | context
    priority = 80                # higher wins when several patterns match one line
    regex = '''CUDA out of memory\\. Tried to allocate'''
    title = "CUDA out of memory"
    why = "..."
    remediation = ["...", "..."]
    examples = ["<a real line that must match>"]
    near_misses = ["<a line that must not match>"]

Every regex must compile in polars' (Rust, linear-time) engine: that is what runs over the
logs.  The Python ``regex`` module is only used for named groups on the few matched lines.
"""
from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import regex

from diagnose.cache import cache_file, write_atomic

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CATEGORIES = (
    "oom", "shape", "import", "nccl", "cuda", "host_oom", "slurm",
    "config", "data", "nan", "python", "unknown",
)
ROLES = ("root", "symptom", "context", "fallback")  # fallback: a root only when nothing else is
PREFIX_FILE = "prefixes.toml"
HINTS_FILE = "hints.toml"  # words that give an unnamed failure its kind (see Hint)
REQUIRED = ("id", "role", "regex", "title", "why", "remediation", "examples")


class PatternError(ValueError):
    """A pattern file is broken; the message names the file, the pattern and the reason."""


@dataclass(frozen=True)
class Pattern:
    id: str
    category: str
    role: str
    regex: str
    title: str
    why: str
    remediation: tuple[str, ...]
    examples: tuple[str, ...]
    near_misses: tuple[str, ...] = ()
    priority: int = 50
    source: str = ""
    # a regex on the innermost frames of a traceback (file and function): such a pattern labels a traceback
    # whose exception `regex` matches only when the failure happened there, never a line alone
    frames: str = ""
    @property
    def compiled(self) -> "regex.Pattern":
        return _compile(self.regex)  # compiled on first use: most runs never search in Python

    def search(self, text: str):
        return _search(self.regex, text)


@lru_cache(maxsize=None)
def _compile(rx: str) -> "regex.Pattern":
    return regex.compile(rx)


def _search(rx: str, text: str):
    """Search with a time limit: a line that takes over a second counts as not matching."""
    try:
        return _compile(rx).search(text, timeout=1.0)
    except TimeoutError:
        return None


def builtin_dir() -> Path:
    """The bundled pattern folder: ``patterns/`` in a checkout, ``diagnose/patterns/builtin`` when installed."""
    here = Path(__file__).resolve().parent
    for cand in (here.parents[1] / "patterns", here / "builtin"):
        if cand.is_dir() and any(cand.glob("*.toml")):
            return cand
    from importlib.resources import files

    return Path(str(files("diagnose.patterns.builtin")))


def _check_rust_regex(rx: str) -> str | None:
    """Return None if polars (Rust regex) accepts rx, else the engine's complaint."""
    import polars as pl

    try:
        pl.Series([""], dtype=pl.String).str.contains(rx)
    except Exception as exc:  # polars raises ComputeError with the regex crate's message
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        said = [ln.removeprefix("error: ") for ln in lines if ln.startswith("error:")]
        said = said or [ln.removeprefix("regex error: ") for ln in lines if ln.startswith("regex error:")]
        return (said or lines or [type(exc).__name__])[-1]
    return None


def _pathological(rx: str) -> str | None:
    """Refuse nested unbounded quantifiers such as `(a+)+` or `(?:\\w+\\s?)*`: the Rust engine runs them in
    linear time, but the Python engine (named groups, on matched lines) can backtrack exponentially.
    Overlapping alternatives like `(a|ab)*` are not detected; the 1 s search timeout bounds them."""
    try:
        import re._constants as C
        import re._parser as P

        tree = P.parse(rx)
    except Exception:  # `regex`-only syntax: nothing to say
        return None
    repeats = (C.MAX_REPEAT, C.MIN_REPEAT) + ((C.POSSESSIVE_REPEAT,) if hasattr(C, "POSSESSIVE_REPEAT") else ())

    def children(op, av):
        if op in repeats:
            return [av[2]]
        if op == C.SUBPATTERN:
            return [av[-1]]
        if op == C.BRANCH:
            return list(av[1])
        if op in (C.ASSERT, C.ASSERT_NOT):
            return [av[1]]
        return []

    def variable(items) -> bool:  # contains an unbounded repeat
        return any((op in repeats and av[1] == C.MAXREPEAT) or any(variable(c) for c in children(op, av)) for op, av in items)

    def nested(items) -> bool:
        for op, av in items:
            if op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[1] == C.MAXREPEAT and variable(av[2]):
                return True
            if any(nested(c) for c in children(op, av)):
                return True
        return False

    return "nested quantifiers (like `(a+)+`) can take exponential time; rewrite without the outer repeat" if nested(tree) else None


PATTERN_FILE_MAX_BYTES = 1024 * 1024
REGEX_MAX_CHARS = 4096  # the longest built-in regex has under 600; a huge one takes seconds to compile and check
_ID = regex.compile(r"[A-Za-z0-9_.-]{1,100}")
# key → (types, words): what each key of a [[pattern]] table must hold
_KEY_TYPES = {
    "id": (str, "text"), "role": (str, "text"), "regex": (str, "text"), "title": (str, "text"), "why": (str, "text"),
    "category": (str, "text"), "frames": (str, "text"), "priority": (int, "a whole number"),
    "remediation": (list, "a list of strings"), "examples": (list, "a list of strings"),
    "near_misses": (list, "a list of strings"),
}
_PROBES = ("a" * 4000 + "!", " " * 4000 + "!", "0" * 4000 + "!", "a " * 2000 + "!", "x=" * 2000 + "\x00",
           "a," * 2000 + "!", "a" * 40 + "!")


def _read_pattern_file(path: Path) -> str:
    """The text of a pattern file: a regular file under PATTERN_FILE_MAX_BYTES (a FIFO would hang the
    read, a link to /dev/zero would fill the memory), opened without blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise PatternError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PatternError(f"{path}: not a regular file, not read")
        if st.st_size > PATTERN_FILE_MAX_BYTES:
            raise PatternError(f"{path}: {st.st_size} bytes, over the {PATTERN_FILE_MAX_BYTES} a pattern file may have")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(PATTERN_FILE_MAX_BYTES + 1)
        if len(data) > PATTERN_FILE_MAX_BYTES:
            raise PatternError(f"{path}: over the {PATTERN_FILE_MAX_BYTES} bytes a pattern file may have")
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PatternError(f"{path}: cannot read: {exc}") from None
    except OSError as exc:
        raise PatternError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _check_types(where: str, raw: dict) -> None:
    for key, value in raw.items():
        if key not in _KEY_TYPES:
            continue
        want, words = _KEY_TYPES[key]
        ok = isinstance(value, want) and not isinstance(value, bool)
        if ok and want is list:
            ok = all(isinstance(x, str) for x in value)
        if ok and want is int:
            ok = -10**6 <= value <= 10**6
        if not ok:
            raise PatternError(f"{where}: key {key!r} must be {words}, not {type(value).__name__} {str(value)[:40]!r}")


def _backtracks(rx: str) -> bool:
    """True when the Python engine takes over 0.1 s on one of a few crafted lines (catastrophic backtracking)."""
    compiled = _compile(rx)
    for probe in _PROBES:
        try:
            compiled.search(probe, timeout=0.1)
        except TimeoutError:
            return True
    return False


def load_file(path: Path, check_engine: bool = True, text: str | None = None) -> list[Pattern]:
    try:
        data = tomllib.loads(_read_pattern_file(path) if text is None else text)
    except tomllib.TOMLDecodeError as exc:
        raise PatternError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise PatternError(f"{path}: not valid TOML: arrays or tables nested too deeply") from None
    category = data.get("category")
    if category not in CATEGORIES:
        raise PatternError(f"{path}: category {str(category)[:40]!r} is not one of {', '.join(CATEGORIES)}")
    tables = data.get("pattern", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise PatternError(f"{path}: key 'pattern' must be a list of [[pattern]] tables")
    out = []
    for i, raw in enumerate(tables):
        pid = raw.get("id") if isinstance(raw.get("id"), str) else f"#{i + 1}"
        where = f"{path}: pattern {pid}"
        _check_types(where, raw)
        missing = [k for k in REQUIRED if not raw.get(k)]
        if missing:
            raise PatternError(f"{where}: missing {', '.join(missing)}")
        unknown = set(raw) - set(REQUIRED) - {"near_misses", "priority", "category", "frames"}
        if unknown:
            raise PatternError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
        if not _ID.fullmatch(pid) and not pid.startswith("#"):
            raise PatternError(f"{path}: pattern {pid[:40]!r}: id must be letters, digits and . _ - (up to 100)")
        for key in ("regex", "frames"):
            if len(raw.get(key) or "") > REGEX_MAX_CHARS:
                raise PatternError(f"{where}: {key} of {len(raw[key])} characters, over the {REGEX_MAX_CHARS} a pattern may have")
        if raw["role"] not in ROLES:
            raise PatternError(f"{where}: role {raw['role']!r} is not one of {', '.join(ROLES)}")
        cat = raw.get("category", category)
        if cat not in CATEGORIES:
            raise PatternError(f"{where}: category {cat!r} is not one of {', '.join(CATEGORIES)}")
        if raw["regex"].lstrip("(?i)").startswith("^"):
            raise PatternError(f"{where}: regex must not be anchored with ^ (it runs on raw lines and on messages)")
        problem = _check_rust_regex(raw["regex"]) if check_engine else None
        if problem:
            raise PatternError(f"{where}: regex does not compile in the Rust engine: {problem}")
        if check_engine:  # the built-in patterns are proven by the test suite
            problem = _pathological(raw["regex"])
            if problem:
                raise PatternError(f"{where}: regex refused: {problem}")
            try:
                _compile(raw["regex"])
            except regex.error as exc:
                raise PatternError(f"{where}: regex does not compile: {exc}") from None
            if _backtracks(raw["regex"]):
                raise PatternError(f"{where}: regex refused: it backtracks catastrophically (over 0.1 s on a "
                                   "crafted line); rewrite it without overlapping repeats")
            if raw.get("frames"):
                try:
                    _compile(raw["frames"])
                except regex.error as exc:
                    raise PatternError(f"{where}: frames regex does not compile: {exc}") from None
        out.append(
            Pattern(
                id=pid, category=cat, role=raw["role"], regex=raw["regex"],
                title=raw["title"], why=" ".join(raw["why"].split()),
                remediation=tuple(raw["remediation"]), examples=tuple(raw["examples"]),
                near_misses=tuple(raw.get("near_misses", ())),
                priority=int(raw.get("priority", 50)), source=str(path), frames=str(raw.get("frames", "")),
            )
        )
    return out


def load(dirs: tuple[Path, ...] = ()) -> tuple[Pattern, ...]:
    """Built-in patterns, then each user folder in order; a later pattern with an id replaces it."""
    folders = [builtin_dir(), *_env_dirs(), *map(Path, dirs)]
    return _load(tuple(str(d) for d in folders))


def _env_dirs() -> list[Path]:
    env = os.environ.get("MDIAG_PATTERNS", "")
    return [Path(p) for p in env.split(os.pathsep) if p]


@lru_cache(maxsize=8)
def _load(folders: tuple[str, ...]) -> tuple[Pattern, ...]:
    by_id: dict[str, Pattern] = {}
    for folder in folders:
        d = Path(folder)
        if not d.is_dir():
            raise PatternError(f"{d}: pattern folder not found")
        # prefixes (normalize reads them) and hints (hints() reads them) are no failure patterns
        paths = [p for p in sorted(d.glob("*.toml")) if p.name not in (PREFIX_FILE, HINTS_FILE)]
        # the built-in patterns are proven by the test suite; a user's are checked as they load
        found = (_load_builtin(d, paths) if d.resolve() == builtin_dir().resolve()
                 else [p for path in paths for p in load_file(path)])
        for p in found:
            by_id[p.id] = p
    return tuple(by_id.values())


_CODE = Path(__file__).read_bytes()  # a change to how files are read makes new cache entries


def _load_builtin(d: Path, paths: list[Path]) -> list[Pattern]:
    """The built-in patterns, parsed once and then read from mdiag's cache (keyed by the files' text):
    parsing the TOML took a third of a short log's diagnosis."""
    texts = [_read_pattern_file(p) for p in paths]
    cache = cache_file("patterns", _CODE, str(d), [(p.name, t) for p, t in zip(paths, texts)], suffix=".json")
    try:
        return [Pattern(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})
                for raw in json.loads(cache.read_bytes())]
    except Exception:  # noqa: BLE001  (absent, stale or damaged: parse the files)
        pass
    out = [p for path, text in zip(paths, texts) for p in load_file(path, check_engine=False, text=text)]
    write_atomic(cache, json.dumps([asdict(p) for p in out]).encode())
    return out


@dataclass(frozen=True)
class Hint:
    """A kind's own vocabulary (patterns/hints.toml): the category of a root that no pattern names."""
    id: str
    category: str
    regex: str
    examples: tuple[str, ...]
    near_misses: tuple[str, ...]

    def search(self, text: str):
        return _search(self.regex, text)


@lru_cache(maxsize=1)
def hints() -> tuple[Hint, ...]:
    """The built-in hints, in file order."""
    path = builtin_dir() / HINTS_FILE
    data = tomllib.loads(_read_pattern_file(path))
    out = []
    for raw in data.get("hint", []):
        if raw.get("category") not in CATEGORIES:
            raise PatternError(f"{path}: hint {raw.get('id')!r}: category is not one of {', '.join(CATEGORIES)}")
        out.append(Hint(id=raw["id"], category=raw["category"], regex=raw["regex"],
                        examples=tuple(raw.get("examples", ())), near_misses=tuple(raw.get("near_misses", ()))))
    return tuple(out)


def hinted(message: str) -> Hint | None:
    """The first hint whose vocabulary the message holds, or None."""
    return next((h for h in hints() if h.search(message)), None)


def best(patterns, ids) -> Pattern | None:
    """Of the patterns whose ids are given, the one with the highest priority (then file order)."""
    cands = [p for p in patterns if p.id in ids]
    return max(cands, key=lambda p: p.priority) if cands else None


def check_examples(patterns) -> list[str]:
    """Every example must match its pattern and no near-miss may, in both engines; returns the failures."""
    import polars as pl

    problems = []
    for p in patterns:
        lines = list(p.examples) + list(p.near_misses)
        if problem := _check_rust_regex(p.regex):  # e.g. a look-around, which the scan's engines lack
            problems.append(f"{p.source}: {p.id}: regex does not compile in the Rust engine: {problem}")
            continue
        rust = pl.Series(lines, dtype=pl.String).str.contains(p.regex).to_list()
        for i, ex in enumerate(p.examples):
            if not (rust[i] and p.search(ex)):
                problems.append(f"{p.source}: {p.id}: example does not match: {ex!r}")
        for j, nm in enumerate(p.near_misses):
            if rust[len(p.examples) + j] or p.search(nm):
                problems.append(f"{p.source}: {p.id}: near-miss matches: {nm!r}")
    return problems
