"""The prefix grammar (patterns/prefixes.toml): every sample peels to its message and facts, no
near-miss is taken for a prefix, and stacks peel in any order."""
import pytest

from diagnose.read import normalize

KINDS = normalize.load()
SAMPLES = [(k.id, s) for k in KINDS for s in k.samples]
NEAR = [(k, nm) for k in KINDS for nm in k.near_misses]


@pytest.mark.parametrize("kind,sample", SAMPLES, ids=[f"{k}:{i}" for i, (k, _) in enumerate(SAMPLES)])
def test_sample_peels_to_its_message_and_facts(kind, sample):
    n = normalize.peel(sample["line"])
    assert kind in n.kinds
    assert n.message == sample["message"]
    for fact in normalize.FACTS:
        assert getattr(n, fact) == sample.get(fact), fact


@pytest.mark.parametrize("kind,line", NEAR, ids=[f"{k.id}:{i}" for i, (k, _) in enumerate(NEAR)])
def test_near_miss_is_not_a_prefix(kind, line):
    assert not kind.compiled.match(line)


def test_every_kind_has_samples():
    assert all(k.samples for k in KINDS)


@pytest.mark.parametrize("line", [
    "10.0.0.7: [2024-05-01 10:00:00,123] [rank5]: RuntimeError: x",
    "[2024-05-01 10:00:00,123] 10.0.0.7: [rank5]: RuntimeError: x",
    "[rank5]: 10.0.0.7: RuntimeError: x",
])
def test_stacks_peel_in_any_order(line):
    n = normalize.peel(line)
    assert (n.message, n.rank, n.host) == ("RuntimeError: x", 5, "10.0.0.7")


def test_stream_key_leaves_out_time_and_level():
    a = normalize.peel("[rank5]:[W1202 10:31:15.931000000 x.cpp:1] a")
    b = normalize.peel("[rank5]:[E1202 10:39:00.000000000 y.cpp:2] b")
    assert a.key == b.key == "[rank5]:"


def test_colours_are_dropped_and_rich_boxes_read_as_python_tracebacks():
    assert normalize.peel("\x1b[31m[rank1]: \x1b[1mValueError\x1b[0m: x").message == "ValueError: x"
    assert normalize.peel("╭──── Traceback (most recent call last) ────╮").message == "Traceback (most recent call last):"
    frame = normalize.peel("[rank0]: │ /w/train.py:12 in main                    │")
    assert (frame.rank, frame.message) == (0, '  File "/w/train.py", line 12, in main')


def test_huge_numbers_are_no_rank():
    assert normalize.peel(f"[rank{'9' * 7}]: x").rank == 9_999_999
    assert normalize.peel("[1,99999999999]<stderr>: x").rank is None


TEXT = [s for k in normalize.load(table="text_rank") for s in k.samples]


@pytest.mark.parametrize("sample", TEXT, ids=[str(i) for i in range(len(TEXT))])
def test_ranks_named_in_text(sample):
    want = {k: v for k, v in sample.items() if k in normalize.FACTS}
    assert normalize.rank_in_text(sample["line"]) == want


TEXT_NEAR = [(k.id, nm) for k in normalize.load(table="text_rank") for nm in k.near_misses]


@pytest.mark.parametrize("kind,line", TEXT_NEAR, ids=[f"{k}:{i}" for i, (k, _) in enumerate(TEXT_NEAR)])
def test_text_near_miss_names_no_rank_of_its_kind(kind, line):
    assert not next(k for k in normalize.load(table="text_rank") if k.id == kind).compiled.search(line)


def test_sub_group_ranks_are_not_in_text_ranks():
    assert normalize.rank_in_text("[PG 3 Rank 1] Watchdog caught collective operation timeout") == {}


def test_lead_is_the_logger_columns_after_the_launcher_labels(write):
    # c10's glog columns after torchrun's rank label, the shape of https://github.com/hiyouga/LlamaFactory/issues/5450
    line = ("[rank1]:[E916 17:44:14.562376704 ProcessGroupNCCL.cpp:1515] [PG 1 Rank 1] Process group watchdog thread "
            "terminated with exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=616, "
            "OpType=ALLREDUCE, NumelIn=17891328, NumelOut=17891328, Timeout(ms)=1800000) ran for 1800048 milliseconds "
            "before timing out.")
    n = normalize.peel(line)
    assert n.lead == "[E916 17:44:14.562376704 ProcessGroupNCCL.cpp:1515] " and n.message.startswith("[PG 1 Rank 1] ")
    assert normalize.peel("[default0]:[rank0]: RuntimeError: x").lead == ""  # labels only: no lead
    from diagnose import diagnose

    r = diagnose([write("a.err", line + "\n")]).root_cause
    # the reported line is the line as printed but for the launcher's label; `text` is its message alone
    assert r.message == line[len("[rank1]:"):] and r.text == n.message
