"""A terminal's hard wraps are rejoined and a double-spaced paste is closed up, and only those: evidence
still points at the line in the file."""
from __future__ import annotations

from pathlib import Path

from diagnose.pipeline import diagnose
from diagnose.read.rejoin import _close_up, _double_spaced, _wrap_width

# a CUDA OOM under torchrun, its long lines as one long line each (the shape of the corpus's OOM logs)
LOG = [
    "[rank0]:[W501 10:00:00.000000 ProcessGroupNCCL.cpp:1168] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL.",
    "[rank3]: Traceback (most recent call last):",
    '[rank3]:   File "/workspace/Megatron-LM/megatron/core/transformer/mlp.py", line 121, in forward',
    "[rank3]:     intermediate_parallel = self.activation_func(intermediate_parallel)",
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.10 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.06 GiB memory in use.",
    "W0501 10:00:05.000000 140 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 41 closing signal SIGTERM",
    "E0501 10:00:06.000000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 3 (pid: 44) of binary: /usr/bin/python",
]


def _wrap(lines: list[str], width: int) -> list[str]:
    return [ln[k:k + width] for ln in lines for k in range(0, max(len(ln), 1), width)]


def _root(tmp_path: Path, lines: list[str]):
    p = tmp_path / "job.err"
    p.write_text("\n".join(lines) + "\n")
    return diagnose([p]).root_cause


def test_a_log_wrapped_at_80_columns_reads_as_it_was_written(tmp_path):
    wrapped = _wrap(LOG, 80)
    root = _root(tmp_path, wrapped)
    assert root.category == "oom" and root.rank == 3
    assert "this process has 78.06 GiB memory in use" in root.message
    # the evidence is the physical line where the error line starts
    assert wrapped[root.evidence.line - 1].startswith("[rank3]: torch.OutOfMemoryError")


def test_a_double_spaced_paste_reads_as_it_was_written(tmp_path):
    spaced = [x for ln in LOG for x in (ln, "")]
    root = _root(tmp_path, spaced)
    assert root.category == "oom" and root.rank == 3
    assert spaced[root.evidence.line - 1].startswith("[rank3]: torch.OutOfMemoryError")


def test_fixed_width_lines_are_not_wraps():
    table = ["+" + "-" * 78 + "+", *[f"| {name:<76} |" for name in ("alpha", "beta", "gamma")]]
    assert _wrap_width(table) is None
    bars = [f"Loading shards: {i:3d}%|{'#' * 40}| {i}/100 [00:0{i % 10}<00:00]".ljust(80, " ") for i in range(5)]
    assert _wrap_width(bars) is None


def test_the_same_line_repeated_at_the_longest_width_is_not_a_wrap():
    line = "x" * 60 + " some message that is long"
    assert _wrap_width([line, "next", line, "next"]) is None


def test_numbered_records_of_one_length_are_not_wraps():
    # https://github.com/hiyouga/LlamaFactory/issues/7396's layout: a pid (or line number) tag, then records
    # that happen to be equally long; the next record starts as this one did, numbers aside
    rec = ("[{n}] [rank{r}]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective "
           "operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE) ran for 600060 milliseconds before timing out.")
    lines = [rec.format(n=80746 + k, r=r) for k, r in enumerate((0, 4, 1, 5))] + ["short"]
    assert _wrap_width(lines) is None


def test_lines_that_are_simply_long_are_not_wraps():
    assert _wrap_width(LOG) is None


def test_closing_up_keeps_the_logs_own_blank_lines():
    lines = ["a", "", "b", "", "", "", "c", "", "d", "", "e", ""]
    assert _double_spaced(lines)
    assert [t for _, t in _close_up(lines)] == ["a", "b", "", "c", "d", "e"]
    assert not _double_spaced(["a", "b", "", "c", "d", "", "e", "f"])
