"""The fast scan keeps exactly the lines the plain reference expression keeps."""
import pytest
import polars as pl

from diagnose.patterns import library as patterns
from diagnose.read import collect, scan

from .conftest import CORPUS, SAMPLES


def _logs():
    roots = [SAMPLES] + ([CORPUS] if CORPUS.is_dir() else [])
    files, _ = collect.expand([str(r) for r in roots])
    return [f for f in files if not f.name.endswith(".json")]


@pytest.mark.parametrize("path", _logs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_keep_plan_matches_reference(path):
    regexes = [p.regex for p in patterns.load()]
    plan = scan.KeepPlan(regexes)
    (src,) = collect.describe([path])
    for data in scan.read_chunks(src, []):
        df = scan.split_lines(data).with_row_index("lineno")
        fast = plan.filter(df).get_column("lineno").to_list()
        slow = df.filter(scan.keep_expr(regexes)).get_column("lineno").to_list()
        assert fast == slow


def test_thinning_keeps_what_the_timeline_needs():
    lines = [
        "[rank0]:[W1202 10:00:00.1 x.cpp:1] Warning: noise",
        "[rank0]:[W1202 10:00:01.1 x.cpp:1] Warning: noise",
        "[rank1]:[W1202 10:00:02.1 x.cpp:1] Warning: noise",
        "[rank0]:[W1202 10:00:03.1 x.cpp:1] Warning: noise",
        "[rank0]: RuntimeError: boom",
        "[rank0]: the message goes on",
        "[rank0]: and on",
        "[rank1]:[W1202 10:00:04.1 x.cpp:1] Warning: noise",
    ]
    plan = scan.KeepPlan([p.regex for p in patterns.load()])
    df = pl.DataFrame({"line": lines}).with_row_index("lineno").with_columns(src=pl.lit(0, dtype=pl.Int32))
    kept = scan.thin_timestamps(plan.filter(df)).get_column("lineno").to_list()
    # rank0's last time before its error, the error and the two lines after it, rank1's last time;
    # the earlier timestamp-only noise goes
    assert kept == [3, 4, 5, 6, 7]


def test_keep_plan_keeps_every_pattern_example():
    """Every example line of every pattern reaches its regex through the literal gate."""
    pats = patterns.load()
    regexes = [p.regex for p in pats]
    lines = [ex for p in pats for ex in p.examples] + [nm for p in pats for nm in p.near_misses]
    df = pl.DataFrame({"line": lines}).with_row_index("lineno")
    fast = scan.KeepPlan(regexes).filter(df).get_column("lineno").to_list()
    assert fast == df.filter(scan.keep_expr(regexes)).get_column("lineno").to_list()
    examples = sum(len(p.examples) for p in pats)
    assert set(range(examples)) <= set(fast)


@pytest.mark.parametrize("rx,want", [
    (r"\| grad norm: (?:nan|inf|-inf) \|", {"| grad norm: nan |", "| grad norm: inf |", "| grad norm: -inf |"}),
    (r"number of nan iterations: {1,3}[1-9]", {f"number of nan iterations:{' ' * k}{d}" for k in (1, 2, 3) for d in range(1, 10)}),
    (r"number of nan iterations:\s*[1-9]", {"number of nan iterations:"}),
    (r"(?:a|b)x?yz", {"axyz", "ayz", "bxyz", "byz"}),
    (r"abc[^x]def", {"abc"}),
    (r"CUDA out of memory|CUBLAS_STATUS_ALLOC_FAILED", {"CUDA out of memory", "CUBLAS_STATUS_ALLOC_FAILED"}),
])
def test_required_literals_are_spelled_out_where_finite(rx, want):
    from re import _parser as sre

    assert scan._required(list(sre.parse(rx))) == want


def test_gate_holds_only_the_failure_patterns_literals():
    """Progress lines (the bulk of the literal hits in a long run) never reach the per-literal gate."""
    from re import _parser as sre

    regexes = [p.regex for p in patterns.load()]
    plan = scan.KeepPlan(regexes)
    members = [*scan.grammar.KEEP_LITERAL, *regexes]
    for lit, g in plan.gate.iter_rows():
        group = members[g * plan.GROUP : (g + 1) * plan.GROUP]
        assert any(lit in (scan._required(list(sre.parse(rx))) or ()) for rx in group), (lit, g)
    assert "iteration" not in plan.gate_literals


def test_every_failure_pattern_has_a_literal_to_gate_on():
    """A regex without a literal of three characters or more runs on every line of every log (on the polars
    engine, over every window): only the loss-NaN test, whose words are in healthy runs' progress lines, is
    allowed that.  (One alternative without a literal, `^EI\\d{4}: `, once made a whole pattern run so.)"""
    plan = scan.KeepPlan([p.regex for p in patterns.load()])
    loss_nan = (r"\b[Ll]oss", r"(?:\b|\x1b\[[0-9;]*m)[Ll]oss")  # (as written, and as the scan reads it)
    assert [rx for rx in plan.unanchored if not rx.startswith(loss_nan)] == []


def test_keep_plan_with_a_pattern_that_has_no_literal():
    regexes = [r"(?i)\d+ widgets? lost", *[p.regex for p in patterns.load()]]
    plan = scan.KeepPlan(regexes)
    assert plan.ungated
    lines = [
        " [2026-01-01 10:00:00] iteration      10/     100 | lm loss: 3.0 |",
        "3 widgets lost",
        "[rank1]: iteration 5/10 | 7 widgets lost",
        "nothing here",
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "  next line",
    ]
    df = pl.DataFrame({"line": lines}).with_row_index("lineno")
    fast = plan.filter(df)
    assert fast.get_column("lineno").to_list() == df.filter(scan.keep_expr(regexes)).get_column("lineno").to_list()
    assert fast.get_column("tsonly").to_list() == [True, False, False, False, False]


def test_split_lines_mends_carriage_returns_nuls_and_overlong_lines():
    data = b"a\r\nbar 10%\rbar 50%\rbar 100%\r\n\r\np\x00q\nx\r\ry\r\r\n" + b"z" * (scan.MAX_LINE + 5) + b"\nend"
    lines = scan.split_lines(data).get_column("line").to_list()
    assert lines[:6] == ["a", "bar 100%", "", "pq", "y", "z" * scan.MAX_LINE + scan.LINE_CUT]
    assert lines[6:] == ["end"]


def test_minimal_literals_drop_those_that_hold_another():
    assert scan._minimal({"Error", "ImportError: ", "abc", "xabcx", "Err"}) == {"Err", "abc"}


@pytest.mark.parametrize("data,want", [(b"\x00", [""]), (b"\x00\n\x00", ["", ""]), (b"a\r\nb\r\n", ["a", "b", ""]),
                                       (b"a\r\nb\r\nc\rd\r\n", ["a", "b", "d", ""])])
def test_split_lines_counts_every_line(data, want):
    assert scan.split_lines(data).get_column("line").to_list() == want


def test_small_files_split_together_keep_their_own_line_numbers(tmp_path):
    texts = [b"noise\nRuntimeError: a\n", b"x\x1ey\nnoise\nnoise\nValueError: b", b"\n\nKeyError: c\n"]
    for i, t in enumerate(texts):
        (tmp_path / f"job-rank{i}.err").write_bytes(t)
    files, _ = collect.expand([str(tmp_path)])
    sources = collect.describe(files)
    kept, _ = scan.scan(sources, [p.regex for p in patterns.load()])
    errors = kept.filter(pl.col("line").str.contains("Error")).sort("src").select("src", "lineno", "line").rows()
    assert errors == [(0, 2, "RuntimeError: a"), (1, 4, "ValueError: b"), (2, 3, "KeyError: c")]
    assert [s.lines for s in sources] == [2, 4, 3]  # a final newline ends the last line


def test_a_short_last_chunk_keeps_the_file_line_numbers(tmp_path, monkeypatch):
    """A long file whose last chunk is short: that chunk is not taken for a small file of its own."""
    log = tmp_path / "job.err"
    log.write_bytes(b"".join(b"noise line %d\n" % i for i in range(400)) + b"RuntimeError: late\n")
    real = scan.read_chunks
    monkeypatch.setattr(scan, "read_chunks", lambda src, w, deadline=None: real(src, w, chunk_bytes=1000))
    monkeypatch.setattr(scan, "SMALL_FILE", 950)
    (src,) = collect.describe([log])
    sizes = [len(c) for c in real(src, [], chunk_bytes=1000)]
    assert min(sizes[:-1]) >= 950 > sizes[-1]  # every chunk long but the last
    kept, _ = scan.scan([src], [p.regex for p in patterns.load()])
    assert kept.filter(pl.col("line") == "RuntimeError: late").get_column("lineno").to_list() == [401]
    assert src.lines == 401


def test_trim_keeps_what_the_time_left_allows_of_each_file(monkeypatch):
    from diagnose.read import scan_deadline

    d = scan_deadline.Deadline(60)
    kept = pl.DataFrame({"src": [0] * 30 + [1] * 30, "lineno": list(range(1, 31)) * 2, "line": ["x"] * 60})
    assert scan_deadline.trim(kept, d) == (kept, None) and not d.fired
    monkeypatch.setattr(scan_deadline.Deadline, "rows_left", lambda self: 10)
    out, note = scan_deadline.trim(kept, d)
    assert out.rows() == [(s, n, "x") for s in (0, 1) for n in range(1, 6)]
    assert d.fired and "10 of 60 candidate lines analysed" in note and "not analysed" in note


def test_keep_plan_on_a_flood_of_repeated_lines_matches_reference():
    """Distinct lines tested once and joined back keep the same lines, in order, as the reference."""
    regexes = [p.regex for p in patterns.load()]
    text = (SAMPLES / "megatron-1234.err").read_bytes()
    df = scan.split_lines(text * 8 + b"ok\n" * 500).with_row_index("lineno")
    assert df.get_column("line").n_unique() * 2 < df.height > 1000  # the repeated lines' path
    fast = scan.KeepPlan(regexes).filter(df).get_column("lineno").to_list()
    assert fast == df.filter(scan.keep_expr(regexes)).get_column("lineno").to_list()
