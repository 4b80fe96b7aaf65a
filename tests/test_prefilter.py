"""The raw-bytes prefilter keeps every line the line-by-line scan keeps for its own sake (with either engine), and
the caps bound what a flood of errors keeps while the report says it summarised."""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import polars as pl
import pytest

from diagnose.patterns import library
from diagnose.pipeline import diagnose
from diagnose.read import collect, prefilter, scan
from diagnose.render.report import to_dict

CORPUS = Path(__file__).parent / "corpus"
FILL = [b"gpu-0001:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n", b"ok\n", b"step done\n", b"\n",
        b"loading shard 3 of 20\n"]


def _engines():
    out = ["polars"]
    try:
        import hyperscan  # noqa: F401

        out.append("hyperscan")
    except ImportError:
        pass
    return out


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    """Corpus logs between long quiet stretches: a few MB, several chunks with small ones."""
    rng = random.Random(7)
    logs = [p for p in sorted(CORPUS.rglob("logs/*")) if p.is_file()][:60]
    out = tmp_path_factory.mktemp("mix") / "mixed.log"
    with open(out, "wb") as fh:
        for p in logs:
            fh.write(b"".join(rng.choice(FILL) for _ in range(rng.randrange(200, 6000))))
            fh.write(p.read_bytes())
        fh.write(b"KeyboardInterrupt\nnext\nafter\n" + b"ok\n" * 50_000 + b"done")
    return out


def _scan(path: Path, blocks: bool, monkeypatch):
    if not blocks:
        monkeypatch.setattr(scan.KeepPlan, "block_filter", lambda self: None)
    srcs = collect.describe([path])
    frame, _ = scan.scan(srcs, [p.regex for p in library.load(())])
    monkeypatch.undo()
    return frame, [s.lines for s in srcs]


@pytest.mark.parametrize("engine", _engines())
def test_prefilter_keeps_the_same_lines(mixed, engine, monkeypatch):
    monkeypatch.setattr(scan, "CHUNK_BYTES", 256 * 1024)
    monkeypatch.setattr(scan.read_chunks, "__defaults__", (256 * 1024, None))
    monkeypatch.setattr(prefilter, "WINDOW", 4096)
    monkeypatch.setenv("MDIAG_ENGINE", engine)
    plain, n_plain = _scan(mixed, False, monkeypatch)
    monkeypatch.setattr(scan, "CHUNK_BYTES", 256 * 1024)
    monkeypatch.setattr(scan.read_chunks, "__defaults__", (256 * 1024, None))
    monkeypatch.setattr(prefilter, "WINDOW", 4096)
    monkeypatch.setenv("MDIAG_ENGINE", engine)
    assert scan.KeepPlan([]).block_filter().engine.name == engine
    fast, n_fast = _scan(mixed, True, monkeypatch)
    assert n_fast == n_plain
    # every line kept for its own sake is kept, and only lines the plain filter keeps; which of the lines
    # kept only for their timestamp stay depends on what is near them (the window before each hot one)
    lines = scan.split_lines(mixed.read_bytes()).with_row_index("lineno", offset=1)
    full = scan.KeepPlan([p.regex for p in library.load(())]).filter(lines)
    own = full.filter(~pl.col("tsonly")).get_column("lineno")
    assert fast.get_column("lineno").is_in(full.get_column("lineno").implode()).all()
    assert own.is_in(fast.get_column("lineno").implode()).all()
    assert own.is_in(plain.get_column("lineno").implode()).all()
    assert plain.height > 100 and len(own) > 100


def test_quiet_chunk_is_not_split():
    bf = scan.KeepPlan([p.regex for p in library.load(())]).block_filter()
    assert bf.spans(b"ok\n" * 100_000) == []
    busy = b"ok\n" * 50_000 + b"[rank3]: RuntimeError: CUDA error: an illegal memory access\nsrc line\nmore\nok\n" * 1
    spans = bf.spans(busy + b"ok\n" * 50_000)
    assert spans and all(b"RuntimeError" not in busy[:s] or e > busy.index(b"more") for s, e in spans)


@pytest.mark.parametrize("engine", _engines())
def test_a_healthy_busy_log_with_progress_bars_stays_quiet(engine, monkeypatch):
    """Megatron's iteration lines (`lm loss:`, `number of nan iterations:`), tqdm bars drawn in block
    characters, NCCL INFO and c10 warnings: no window is hot (a gate on `loss` or `nan`, or Unicode line
    shapes approximated, once made every window of such a log hot)."""
    monkeypatch.setenv("MDIAG_ENGINE", engine)
    bf = scan.KeepPlan([p.regex for p in library.load(())]).block_filter()
    lines = []
    for i in range(4000):
        lines += [
            f" [2024-05-01 10:00:{i % 60:02d}] iteration {i:8d}/  500000 | elapsed time per iteration (ms): 1029.2 | "
            f"learning rate: 2.8E-04 | lm loss: 3.976053E+00 | loss scale: 1.0 | grad norm: 1.015 | "
            f"number of skipped iterations:   0 | number of nan iterations:   0 |",
            f"Epoch 1:  {i % 100:2d}%|\u2588\u2588\u2588\u258f      | {i}/4000 [00:10<00:40, 3.2it/s, loss=0.41]",
            f"gpu-{i % 128:04d}:4242:4300 [{i % 8}] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
            f"[rank{i % 1024}]:[W501 10:00:00.000000000 ProcessGroupNCCL.cpp:1168] Warning: a c10 warning",
        ]
    chunk = ("\n".join(lines) + "\n").encode()
    assert not chunk.isascii()
    spans = bf.spans(chunk)
    assert spans is not None and sum(e - s for s, e in spans) < len(chunk) // 10


@pytest.mark.skipif("hyperscan" not in _engines(), reason="Hyperscan's UTF-8 database")
@pytest.mark.parametrize("rx,text", [
    (r"Error:[^\S\n]+boom", "Error:\xa0boom"), (r"x[^\W]y", "xéy"), (r"n=[^\D]", "n=٣"),
    (r"\b\w+ failed", "(ñ failed"), (r"\w\B\w", "éa"), (r"[A-Za-z_][\w.]*(?::\s|:$)", "Fehlerü: x"),
    (r"x\sy", "x\u2003y"),
])
def test_the_utf8_automaton_matches_what_the_unicode_regex_matches(rx, text):
    import regex

    assert regex.search(rx, text)
    assert prefilter._Hyperscan([(rx, False)]).hot([text.encode()], unicode=True) == [True]


def test_error_flood_is_summarised(tmp_path, monkeypatch):
    from diagnose.read import caps

    monkeypatch.setattr(caps, "FULL_ROWS", 200)
    monkeypatch.setattr(caps.Summariser.__init__, "__defaults__", (200, 3, 150_000, 200_000))
    p = tmp_path / "flood.log"
    lines = []
    for i in range(3000):
        r = i % 8
        lines.append(f"[rank{r}]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:{1000 + i}, unhandled system error\n")
    p.write_text("".join(lines))
    d = diagnose([p])
    doc = to_dict(d)
    assert doc["summarised"] is True and doc["summarised_lines"] > 2000
    assert any(w.startswith("summarised:") for w in doc["warnings"])
    assert doc["root_cause"]["category"] == "nccl"
    json.dumps(doc)


def test_small_log_is_not_summarised(tmp_path):
    p = tmp_path / "a.log"
    p.write_text("[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n" * 20)
    doc = to_dict(diagnose([p]))
    assert doc["summarised"] is False and doc["summarised_lines"] == 0


@pytest.mark.parametrize("engine", _engines())
@pytest.mark.parametrize("line", ["bar 10%\rbar 90%\rTraceback (most recent call last):",  # a redrawn bar
                                  "\u2003rank\u00a0: 3", "██ 50%\n  File \"/x/ünï.py\", line 3, in f",
                                  "Trace\x00back (most recent call last):"])  # the splitter drops the NUL
def test_hot_where_the_line_filter_keeps(engine, line, monkeypatch):
    """A line kept only once carriage returns are read as line ends, Unicode classes as Unicode, or
    NULs dropped, still makes its window hot."""
    monkeypatch.setenv("MDIAG_ENGINE", engine)
    plan = scan.KeepPlan([p.regex for p in library.load(())])
    chunk = b"ok\n" * 50_000 + line.encode() + b"\n" + b"ok\n" * 50_000
    kept = plan.filter(scan.split_lines(chunk).with_row_index("lineno")).filter(~pl.col("tsonly"))
    assert kept.height
    spans = plan.block_filter().spans(chunk)
    at = chunk.index(line.encode())
    assert spans is None or any(s <= at < e for s, e in spans)


@pytest.mark.skipif("hyperscan" not in _engines() or len(os.sched_getaffinity(0)) < 2,
                    reason="the helper process prefilters with Hyperscan, on a second core")
def test_two_processes_keep_what_one_keeps(mixed, monkeypatch):
    """A big file read as two halves (a forked helper prefilters the second) keeps the lines one
    process keeps, with the same line numbers, and counts the same lines."""
    from diagnose.read import scan_parallel

    monkeypatch.setenv("MDIAG_ENGINE", "hyperscan")
    monkeypatch.setattr(scan.read_chunks, "__defaults__", (256 * 1024, None))
    monkeypatch.setattr(prefilter, "WINDOW", 4096)
    monkeypatch.setattr(scan_parallel, "PARALLEL_BYTES", 1 << 50)
    one = collect.describe([mixed])
    single, _ = scan.scan(one, [p.regex for p in library.load(())])
    monkeypatch.setattr(scan_parallel, "PARALLEL_BYTES", 1024)
    two = collect.describe([mixed])
    assert scan_parallel.split_point(two[0], scan.KeepPlan([]).block_filter())
    double, warnings = scan.scan(two, [p.regex for p in library.load(())])
    assert warnings == [] and two[0].lines == one[0].lines
    lines = scan.split_lines(mixed.read_bytes()).with_row_index("lineno", offset=1)
    full = scan.KeepPlan([p.regex for p in library.load(())]).filter(lines)
    own = full.filter(~pl.col("tsonly")).select("lineno", "line")
    for frame in (single, double):
        assert own.join(frame, on=["lineno", "line"], how="anti").height == 0
        assert frame.join(full, on=["lineno", "line"], how="anti").height == 0


@pytest.mark.parametrize("rx, loose", [
    (r"Error: .{0,400}\b--x", r"Error: .*\b--x"),
    (r"\[(?:'[^']{0,500}', ){1,60}?'--l", r"\[(?:'[^']*', ){1,}?'--l"),
    (r"\d{1,7} rank", r"\d{1,7} rank"),  # short repeats stay
    (r"[a{0,100}]\{0,100\}", r"[a{0,100}]\{0,100\}"),  # in a class, or escaped: no repeat
])
def test_long_repeats_are_loosened_for_the_scan(rx, loose):
    from diagnose.read.scan_literals import loosen_repeats
    assert loosen_repeats(rx) == loose


def test_every_pattern_loosened_matches_its_own_examples():
    """The scan tests a superset: a pattern's examples match its loosened regex too, in the engine the scan
    runs it with (polars' Rust regex)."""
    from diagnose.read.scan_literals import loosen_repeats
    for p in library.load():
        if p.examples:
            hit = pl.Series(list(p.examples), dtype=pl.String).str.contains(loosen_repeats(p.regex))
            assert hit.all(), p.id


def test_corpus_and_sample_logs_fit_in_one_window():
    """.ci/run reads the corpus, the samples and their wrapped copies (tests/test_wrappers.py) on one engine only:
    a chunk within one window is split whole and never reaches an engine.  A bigger log (half a window leaves room
    for a wrapper's columns) would need the fallback engine's run of the tests that read it again."""
    samples = CORPUS.parent.parent / "sample_logs"
    sizes = [sum(p.stat().st_size for p in case.rglob("logs/*") if p.is_file()) for case in CORPUS.iterdir()]
    sizes += [p.stat().st_size for p in samples.rglob("*") if p.is_file()]
    assert max(sizes) <= prefilter.WINDOW // 2
