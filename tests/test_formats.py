"""One job's outputs: --format text|json|markdown, and the root-cause fingerprint."""
from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from diagnose import diagnose
from diagnose.cli.main import main
from diagnose.analyze.fingerprint import components, exception_type, fingerprint, top_job_frame
from diagnose.render.markdown import code, esc, fenced, render
from diagnose.render.report import to_dict

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"


def test_format_json_is_json_and_alias(validate):
    a = CliRunner().invoke(main, ["--format", "json", "--job-id", "4242", str(SAMPLES / "shape-rank2.log")])
    b = CliRunner().invoke(main, ["--json", str(SAMPLES / "shape-rank2.log")])
    assert a.exit_code == b.exit_code == 1
    da, db = json.loads(a.output), json.loads(b.output)
    validate(da)
    assert da["job_id"] == "4242" and db["job_id"] is None
    assert re.fullmatch(r"[0-9a-f]{12}", da["root_cause"]["fingerprint"])
    assert da["root_cause"]["fingerprint"] == db["root_cause"]["fingerprint"]
    bad = CliRunner().invoke(main, ["--json", "--format", "markdown", str(SAMPLES / "shape-rank2.log")])
    assert bad.exit_code == 2


def test_format_markdown():
    r = CliRunner().invoke(main, ["--format", "markdown", str(SAMPLES / "megatron-1234.err")])
    assert r.exit_code == 1, r.output
    md = r.output
    assert md.startswith("### mdiag: OOM")
    assert "rank 3" in md and "fingerprint `" in md and "Evidence: `sample_logs/megatron-1234.err:97`" in md
    block = re.search(r"^(`{3,})text\n(.*?)\n\1$", md, re.S | re.M)
    assert block, md
    body = block.group(2)
    assert body.startswith("Traceback (most recent call last):")
    assert "torch.OutOfMemoryError: CUDA out of memory" in body
    assert "… 1 library frame" in body and "site-packages" not in body  # library frames folded
    assert "**What to do**" in md


def test_markdown_log_text_cannot_break_out():
    nasty = "x ```` y\n```\n# heading [link](http://evil) <img src=x> | a | *b*"
    f = fenced(nasty.splitlines())
    fence = f.split("\n", 1)[0].rstrip("text")
    assert fence == "`" * 5 and f.endswith("\n" + fence)
    assert all(len(run) < 5 for run in re.findall(r"`+", f[len(fence) + 4:-len(fence)]))
    e = esc(nasty)
    assert "\n" not in e and "\\[link\\]" in e and "\\<img" in e and "\\|" in e and "\\*b\\*" in e
    c = code("a `b` c")
    assert c == "``a `b` c``"
    doc = {"status": "failed", "root_cause": {"category": "python", "pattern": "p", "summary": "<b>x</b> | y",
                                              "message": "E: ```` ```", "traceback": [], "rank": None}}
    md = render(doc)
    assert "\\<b\\>x\\</b\\> \\| y" in md
    assert "`````text\nE: ```` ```\n`````" in md


def test_markdown_hang_names_the_straggler_not_the_reporter():
    r = CliRunner().invoke(main, ["--format", "markdown", str(SAMPLES / "hang-rank1.log")])
    assert r.exit_code == 1, r.output
    md = r.output
    top = md.split("<details>")[0]
    assert "**Straggler: rank 1**" in top and "rank 1 did not: it hung or died first" in top
    assert "Reported by rank 0 at `sample_logs/hang-rank1.log:" in top and "Evidence:" not in top
    assert "**Why.**" in top and "```text" not in top  # rank 0's traceback is folded below, labelled
    assert "rank 0's traceback (the report of the timeout, not its cause)" in md


def test_markdown_hang_shows_the_stragglers_own_last_line(tmp_path):
    lines = (SAMPLES / "hang-rank1.log").read_text().splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if "iteration        2/" in line) + 1
    lines.insert(at, "[rank1]: [2026-12-02 14:28:29] entering the data loader for iteration 3\n")
    log = tmp_path / "hang.log"
    log.write_text("".join(lines))
    r = CliRunner().invoke(main, ["--format", "markdown", str(log)])
    top = r.output.split("<details>")[0]
    # the path is shown as given or relative to the working directory (wherever the tests run from)
    m = re.search(r"Rank 1's own last line: `([^`]+):(\d+)` `entering the data loader for iteration 3`", top)
    assert m, top
    assert Path(m[1]).resolve() == log.resolve() and int(m[2]) == at + 1
    doc = json.loads(CliRunner().invoke(main, ["--json", str(log)]).output)
    k1 = next(k for k in doc["ranks"] if k["rank"] == 1)
    assert Path(k1["last_line"]["file"]).resolve() == log.resolve() and k1["last_line"]["line"] == at + 1
    assert k1["last_message"] == "entering the data loader for iteration 3"
    k0 = next(k for k in doc["ranks"] if k["rank"] == 0)
    assert k0["last_line"] == doc["root_cause"]["evidence"]  # rank 0's last word is its timeout


def test_markdown_hang_says_when_the_straggler_printed_nothing_of_its_own():
    md = CliRunner().invoke(main, ["--format", "markdown", str(SAMPLES / "hang-rank1.log")]).output
    assert "Rank 1's own last line: none in these logs" in md.split("<details>")[0]


def test_markdown_pings_links_and_references_nothing():
    e = esc("ping @alice, fixes #123 and org/repo#9; see https://x.io/a?b=1. www.foo.com, GH-7")
    for active in ("@alice", "#123", "org/repo#9", "https://x.io/a?b=1", "www.foo.com", "GH-7"):
        assert f"`{active}`" in e, (active, e)
    assert "`https://x.io/a?b=1`." in e and "`www.foo.com`," in e
    assert esc("mail a@b.com, C# and x#1") == "mail a@b.com, C# and x#1"  # not mentions or references
    md = render({"status": "failed", "root_cause": {"category": "python", "pattern": "p", "rank": 0,
                                                    "summary": "cc @team see #42", "traceback": ["@x #1 http://y"]}})
    assert "cc `@team` see `#42`" in md and "\n@x #1 http://y\n" in md  # code fences are left as they are


def test_no_failure_markdown():
    r = CliRunner().invoke(main, ["--format", "markdown", str(SAMPLES / "clean-run.log")])
    assert r.exit_code == 0 and "no failure found" in r.output


# ---------------------------------------------------------------- fingerprint


def test_exception_type_and_top_frame():
    assert exception_type("torch.OutOfMemoryError: CUDA out of memory") == "torch.OutOfMemoryError"
    assert exception_type("RuntimeError") == "RuntimeError"
    assert exception_type("E1202 14:28:19.111000 8971 api.py:1002] failed") is None
    assert exception_type("Note: something") is None
    frames = [{"file": "/job/train.py", "function": "main"}, {"file": "/job/model.py", "function": "forward"},
              {"file": "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", "function": "_call_impl"},
              {"file": "<frozen importlib._bootstrap>", "function": "_find_and_load"}]
    assert top_job_frame(frames)["function"] == "forward"


def _variant(src: Path, dst: Path, rank_from: int, rank_to: int) -> Path:
    """The same failure in another job: other rank, host, times, numbers and directories."""
    text = src.read_text()
    text = text.replace("/tmp/job/", "/scratch/alice/run-77/")
    text = re.sub(r"\b14:2(\d):", r"09:1\1:", text)  # other times
    text = re.sub(r"2026-12-02", "2027-01-15", text)
    text = re.sub(r"line (\d+)", lambda m: f"line {int(m.group(1)) + 7}", text)  # code moved
    text = text.replace("[16, 8] but got: [16, 32]", "[64, 16] but got: [64, 128]")  # other sizes
    text = re.sub(rf"\[rank{rank_from}\]", f"[rank{rank_to}]", text)
    text = text.replace("localhost", "gpu-node-17")
    dst.write_text(text)
    return dst


def test_same_failure_in_two_jobs_has_the_same_fingerprint(tmp_path):
    a = to_dict(diagnose([SAMPLES / "shape-rank2.log"]))
    b = to_dict(diagnose([_variant(SAMPLES / "shape-rank2.log", tmp_path / "other-job.log", 2, 2)]))
    ra, rb = a["root_cause"], b["root_cause"]
    assert ra["category"] == rb["category"] == "shape"
    assert ra["message"] != rb["message"] and ra["frames"][-1]["file"] != rb["frames"][-1]["file"]
    assert ra["fingerprint"] == rb["fingerprint"]
    assert components(ra) == ("shape.size_mismatch", "RuntimeError", "pretrain_gpt.py:forward")


def test_fingerprint_ignores_rank_host_time_numbers_and_paths():
    base = {"pattern": "oom.cuda_allocator", "rank": 3, "host": "node1", "time": "2026-01-01T00:00:00",
            "message": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3",
            "frames": [{"file": "/a/b/train.py", "line": 10, "function": "step"}]}
    other = dict(base, rank=117, host="node9", time="2027-05-05T12:00:00",
                 message="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.50 GiB. GPU 5",
                 frames=[{"file": "/home/x/y/train.py", "line": 99, "function": "step"}])
    assert fingerprint(base) == fingerprint(other)
    assert fingerprint(base) != fingerprint(dict(base, pattern="oom.other"))
    assert fingerprint(base) != fingerprint(dict(base, frames=[{"file": "/a/b/train.py", "function": "eval_step"}]))
    assert fingerprint(base) != fingerprint(dict(base, message="RuntimeError: CUDA out of memory"))
    assert fingerprint(None) is None


def test_different_failures_have_different_fingerprints():
    fps = {}
    for name in ("megatron-1234.err", "shape-rank2.log", "nan-rank3.log", "sigkill-rank2.log"):
        fps[name] = to_dict(diagnose([SAMPLES / name]))["root_cause"]["fingerprint"]
    assert len(set(fps.values())) == len(fps), fps
