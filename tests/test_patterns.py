"""Every pattern proves itself: examples match, near-misses don't, in both regex engines."""
import pytest

from diagnose.patterns import library as patterns
from diagnose.patterns.library import CATEGORIES, PatternError, check_examples, load, load_file


def test_builtin_patterns_load_and_prove_their_examples():
    pats = load()
    assert len(pats) >= 40
    assert check_examples(pats) == []


def test_every_pattern_has_examples_and_near_misses_and_advice():
    for p in load():
        assert p.examples, p.id
        assert p.remediation and p.why and p.title, p.id
        assert p.id.split(".")[0] in (p.category, "launcher", "fallback"), p.id
        assert (p.role == "fallback") == p.id.startswith("fallback."), p.id


def test_core_categories_present():
    cats = {p.category for p in load()}
    for c in ("oom", "shape", "import", "nccl", "cuda", "host_oom", "slurm", "config", "data", "nan", "python"):
        assert c in cats
    assert cats <= set(CATEGORIES)


@pytest.mark.parametrize(
    "body, reason",
    [
        ('id = "x.a"\nrole = "root"\nregex = "(?<=a)b"\ntitle = "t"\nwhy = "w"\nremediation = ["r"]\nexamples = ["ab"]', "Rust engine"),
        ('id = "x.a"\nrole = "cause"\nregex = "a"\ntitle = "t"\nwhy = "w"\nremediation = ["r"]\nexamples = ["a"]', "role"),
        ('id = "x.a"\nrole = "root"\nregex = "a"\ntitle = "t"\nwhy = "w"\nremediation = ["r"]', "missing examples"),
        ('id = "x.a"\nrole = "root"\nregex = "^a"\ntitle = "t"\nwhy = "w"\nremediation = ["r"]\nexamples = ["a"]', "anchored"),
    ],
)
def test_broken_pattern_file_names_file_pattern_and_reason(tmp_path, body, reason):
    f = tmp_path / "bad.toml"
    f.write_text('category = "python"\n[[pattern]]\n' + body + "\n")
    with pytest.raises(PatternError) as err:
        load_file(f)
    msg = str(err.value)
    assert "bad.toml" in msg and "x.a" in msg and reason.split()[0] in msg


def test_failing_example_is_reported(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text(
        'category = "python"\n[[pattern]]\nid = "python.x"\nrole = "root"\nregex = "needle"\ntitle = "t"\n'
        'why = "w"\nremediation = ["r"]\nexamples = ["hay"]\nnear_misses = ["needle here"]\n'
    )
    problems = check_examples(load_file(f))
    assert len(problems) == 2 and "python.x" in problems[0]


def test_user_pattern_replaces_builtin_by_id(tmp_path):
    (tmp_path / "mine.toml").write_text(
        'category = "oom"\n[[pattern]]\nid = "oom.cuda_allocator"\nrole = "root"\npriority = 90\n'
        'regex = "CUDA out of memory"\ntitle = "Our OOM"\nwhy = "w"\nremediation = ["call the on-call"]\n'
        'examples = ["CUDA out of memory"]\n'
    )
    pats = {p.id: p for p in load((tmp_path,))}
    assert pats["oom.cuda_allocator"].title == "Our OOM"
    assert patterns.builtin_dir().is_dir()


def test_a_regex_the_scan_cannot_run_is_named_not_raised(tmp_path):
    """Look-around compiles in Python's `regex` but not in the scan's engines: `patterns test` says so."""
    (tmp_path / "x.toml").write_text(
        'category = "python"\n[[pattern]]\nid = "python.look"\nrole = "root"\nregex = \'\'\'FooError(?!bar): boom\'\'\'\n'
        'title = "t"\nwhy = "w"\nremediation = ["r"]\nexamples = ["FooError: boom"]\n')
    with pytest.raises(PatternError, match="look-around"):
        load_file(tmp_path / "x.toml")
    pats = load_file(tmp_path / "x.toml", check_engine=False)
    assert any("look-around" in p for p in check_examples(pats))


def test_remedies_are_advice_not_log_lines():
    """A log line put in `remediation` by mistake (instead of `examples`) would be shown to users as advice and
    prove nothing: every remedy is a sentence."""
    from diagnose.patterns.library import load

    odd = [(p.id, r) for p in load(()) for r in p.remediation if not r.rstrip().endswith((".", ")", "`", "!", "?", ":"))]
    assert odd == []


def test_hints_match_their_examples_and_not_their_near_misses():
    import polars as pl

    from diagnose.patterns.library import hinted, hints

    assert {h.category for h in hints()} <= set(CATEGORIES)
    for h in hints():
        rust = pl.Series([*h.examples, *h.near_misses], dtype=pl.String).str.contains(h.regex).to_list()
        assert h.examples and all(rust[: len(h.examples)]) and not any(rust[len(h.examples):]), h.id
        assert all(hinted(e) is h for e in h.examples), h.id
        assert not any(h.search(n) for n in h.near_misses), h.id
