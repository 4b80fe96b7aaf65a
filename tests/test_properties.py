"""Properties (hypothesis): any input gives a valid report and never raises; the diagnosis does not depend
on unrelated noise or on the order the files are given.  Plus a time-bounded fuzz run (marked slow)."""
from __future__ import annotations

import io
import json
import os
import random
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from diagnose.pipeline import diagnose
from diagnose.render.redact import redact
from diagnose.render.report import render, to_dict

from .conftest import ROOT, SAMPLES

jsonschema = pytest.importorskip("jsonschema")
SCHEMA = json.loads((ROOT / "diagnose" / "render" / "schema.json").read_text())
FAST = settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

LINES = sorted({ln for p in SAMPLES.rglob("*") if p.is_file() and p.suffix in (".log", ".err")
                for ln in p.read_text(errors="replace").splitlines()})
ESCAPES = ["\x1b[31m", "\x1b]8;;http://x\x1b\\", "\x00", "\r", "\x1b[2J", "[bold]", "\udcff"[:0] + "\ufffd", "\t"]


def check(paths: list[Path]):
    """Everything a run does with its input: diagnose, JSON (validated), redaction, terminal report."""
    d = diagnose(paths)
    doc = to_dict(redact(d))
    jsonschema.validate(json.loads(json.dumps(doc, ensure_ascii=True)), SCHEMA)
    render(redact(d), Console(file=io.StringIO(), width=100, no_color=True))
    return d


def write_files(contents: list[bytes]) -> tuple[tempfile.TemporaryDirectory, list[Path]]:
    tmp = tempfile.TemporaryDirectory()
    paths = []
    for i, data in enumerate(contents):
        p = Path(tmp.name) / f"part-{i}.log"
        p.write_bytes(data)
        paths.append(p)
    return tmp, paths


@FAST
@given(st.binary(max_size=4000))
def test_arbitrary_bytes(data):
    tmp, paths = write_files([data])
    with tmp:
        check(paths)


line = st.one_of(st.sampled_from(LINES), st.sampled_from(LINES).map(lambda s: s[: len(s) // 2]),
                 st.tuples(st.sampled_from(LINES), st.sampled_from(ESCAPES)).map("".join))


@FAST
@given(st.lists(st.lists(line, max_size=60), min_size=1, max_size=3),
       st.sampled_from(["\n", "\r\n"]))
def test_mixtures_of_real_log_lines(files, eol):
    tmp, paths = write_files([(eol.join(f) + eol).encode("utf-8", "surrogateescape") for f in files])
    with tmp:
        check(paths)


# ---- invariance: unrelated noise, other ranks' lines, file order

NOISE = st.one_of(
    st.sampled_from([
        "> building train, validation, and test datasets ...",
        "loading data shard 17 of 64",
        "INFO:megatron.core:using fused adam",
        "zeroing grad buffers",
        "",
        "   ",
    ]),
    st.text(alphabet="bcdfghjkmpqvwxz 0123456789:.-|", max_size=40),  # no vowels: no keywords
)


def _identity(d):
    r = d.root_cause
    return r and (r.category, r.pattern, r.rank, r.message, r.evidence.file)


def _baseline(name):
    lines = (SAMPLES / name).read_text().splitlines()
    d = diagnose([SAMPLES / name])
    r = d.root_cause
    start = next((i for i, ln in enumerate(lines) if f"[rank{r.rank}]" in ln and "Traceback" in ln), 0)
    start = min(start, r.evidence.line - 1)
    return lines, _identity(d), r.rank, start


BASE = {n: _baseline(n) for n in ("shape-rank2.log", "nan-rank3.log", "megatron-1234.err")}


@FAST
@given(st.sampled_from(sorted(BASE)), st.data())
def test_noise_before_the_failure_and_between_other_ranks_lines(name, data):
    lines, want, root_rank, start = BASE[name]
    lines = list(lines)
    others = [k for k in range(4) if k != root_rank]
    inserts = data.draw(st.lists(st.tuples(st.booleans(), NOISE, st.sampled_from(others), st.floats(0, 1)), max_size=25))
    # insert from the back so that positions below `start` stay before the failure
    for prefixed, text, k, where in sorted(inserts, key=lambda t: -t[3]):
        if prefixed:
            lines.insert(int(where * len(lines)), f"[rank{k}]: {text}")
        else:
            lines.insert(int(where * start), text)
    tmp = tempfile.TemporaryDirectory()
    with tmp:
        p = Path(tmp.name) / name
        p.write_text("\n".join(lines) + "\n")
        got = _identity(check([p]))
    assert got[:4] == want[:4]


LOGDIR = sorted(p for p in (SAMPLES / "import-rank1-logdir").rglob("*") if p.is_file())


@FAST
@given(st.permutations(LOGDIR))
def test_file_order_does_not_matter(order):
    want = _identity(diagnose(LOGDIR))
    assert _identity(check(list(order))) == want


# ---- fuzz: mutated real logs, for a bounded time


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(7)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(i, len(b) - 1)] = rng.randrange(256)
        elif op == 1:
            b[i:i] = rng.choice([b"\x00", b"\r", b"\x1b[31m", b"\xff\xfe", b"\n", b"Traceback (most recent call last):\n",
                                 b"[rank7]: ", b"\x1b]52;c;AAAA\x07", b"RuntimeError: x\n", b"\r\n"])
        elif op == 2:
            del b[i : i + rng.randint(1, 200)]
        elif op == 3 and b:
            j = rng.randrange(len(b))
            b[i:i] = b[j : j + rng.randint(1, 400)]
        elif op == 4:
            b = b[: i]
        elif op == 5:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        else:
            lines = bytes(b).split(b"\n")
            rng.shuffle(lines)
            b = bytearray(b"\n".join(lines))
    return bytes(b)


@pytest.mark.slow
def test_fuzz_bounded_time(capsys):
    seeds = [p.read_bytes() for p in SAMPLES.rglob("*") if p.is_file() and p.suffix in (".log", ".err")]
    rng = random.Random(int(os.environ.get("MDIAG_FUZZ_SEED", "0")))
    budget = float(os.environ.get("MDIAG_FUZZ_SECONDS", "25"))  # (CI's time; set it higher for a longer hunt)
    most = int(os.environ.get("MDIAG_FUZZ_MAX", "300"))  # deterministic in CI: seed 0, at most 300 inputs
    end, n = time.monotonic() + budget, 0
    with tempfile.TemporaryDirectory() as tmp:
        while time.monotonic() < end and n < most:
            parts = [_mutate(rng, rng.choice(seeds)) for _ in range(rng.randint(1, 3))]
            paths = []
            for i, data in enumerate(parts):
                p = Path(tmp) / f"f{n}-{i}.{rng.choice(['log', 'err', 'out'])}"
                p.write_bytes(data)
                paths.append(p)
            try:
                check(paths)
            except Exception as exc:  # keep the failing input for a reproducer
                keep = Path(tempfile.mkdtemp(prefix="mdiag-fuzz-"))
                for p in paths:
                    (keep / p.name).write_bytes(p.read_bytes())
                raise AssertionError(f"input #{n} (saved in {keep}) raised {exc!r}") from exc
            for p in paths:
                p.unlink()
            n += 1
    with capsys.disabled():
        print(f"\nfuzz: {n} inputs in {budget:g} s, none raised")
    assert n > 0
