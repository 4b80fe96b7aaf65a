"""Real torchrun failures (torch CPU build, gloo, 4 ranks) diagnosed by mdiag.

Every scenario is one real `python -m torch.distributed.run --standalone --nproc-per-node 4` run of
tests/e2e/tiny_megatron.py with one failure planted in one rank, in the log layouts users have:
stdout+stderr merged into one file (as sbatch --output gives), `--tee 3` ([defaultN]: prefixes)
and a `--log-dir` tree with `--redirects 3` (worker output only in per-rank files + error.json).
The runs happen in parallel (a few at a time) once per session; each test checks one of them.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from diagnose import diagnose
from diagnose.render.report import to_dict

pytestmark = pytest.mark.e2e
torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0, CPU build)")

sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))
from make_samples import run_logged  # noqa: E402

SCRIPT = Path(__file__).resolve().parent / "e2e" / "tiny_megatron.py"
RUN_TIMEOUT_S = 90
FAST = ["--iter-sleep", "0", "--train-iters", "4", "--eval-iters", "1"]

# name: (torchrun options, layout, script options, category, root rank, text in the root message)
SCENARIOS = {
    "shape-merged": ([], "merged", ["--fail", "shape", "--fail-rank", "2", "--fail-iter", "2"],
                     "shape", 2, "Expected size for first two dimensions of batch2 tensor"),
    "shape-tee-record": (["--tee", "3"], "merged", ["--fail", "shape", "--fail-rank", "1", "--fail-iter", "2",
                                                     "--record"],
                         "shape", 1, "Expected size for first two dimensions of batch2 tensor"),
    "import-logdir-record": (["--redirects", "3"], "logdir",
                             ["--fail", "import", "--fail-rank", "1", "--fail-iter", "2", "--record"],
                             "import", 1, r"ModuleNotFoundError: No module named 'transformer_engine'"),
    "divisibility-tee": (["--tee", "3"], "merged", ["--fail", "divisibility", "--tp", "3"],
                         "shape", None, "is not divisible by"),
    "sigkill-merged-record": ([], "merged", ["--fail", "sigkill", "--fail-rank", "2", "--fail-iter", "2", "--record"],
                              # the agent's `failed (exitcode: -9)` or its summary's record of the same kill, whichever
                              # the run's timing printed first
                              "host_oom", 2, r"exitcode\s*:\s*-9|Signal 9 \(SIGKILL\) received by PID"),
    "hang-merged": ([], "merged", ["--fail", "hang", "--fail-rank", "1", "--fail-iter", "2", "--pg-timeout-s", "10"],
                    "nccl", 1, "Timed out"),
}


def _env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCHELASTIC", "MASTER_", "SLURM_", "OMP_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    env.update(OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def launch(name: str, folder: Path) -> dict:
    torchrun_opts, layout, script_opts, *_ = SCENARIOS[name]
    out = folder / name
    out.mkdir(parents=True)
    extra = list(torchrun_opts)
    if layout == "logdir":
        extra = ["--log-dir", str(out / "torchrun_logs")] + extra
    console = out / ("console.log" if layout == "logdir" else f"{name}.log")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4", *extra,
           str(SCRIPT), *script_opts, *FAST]
    start = time.monotonic()
    rc = run_logged(cmd, out, console, _env(), RUN_TIMEOUT_S)
    return {"rc": rc, "seconds": time.monotonic() - start, "path": out if layout == "logdir" else console}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("torchrun")
    # 3 at a time: a run is ~10 CPU-seconds, the hang waits on its 10 s process-group timeout
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {n: pool.submit(launch, n, folder) for n in sorted(SCENARIOS, key=lambda n: not n.startswith("hang"))}
        return {n: f.result() for n, f in futures.items()}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_real_torchrun_failure(runs, name, validate):
    _, _, _, category, rank, text = SCENARIOS[name]
    run = runs[name]
    assert run["rc"] not in (0, None), f"{name}: torchrun exit {run['rc']} after {run['seconds']:.0f} s"
    d = diagnose([str(run["path"])])
    doc = validate(to_dict(d))
    root = d.root_cause
    assert root is not None, f"{name}: no root cause; warnings {d.warnings}"
    if rank is None:  # raised on every rank: no single failing rank; the report must say all four
        assert root.category == category, (name, root.category, root.message)
        assert {root.rank, *root.details.get("also_on_ranks", [])} == {0, 1, 2, 3}, (name, root.rank, root.details)
    else:
        assert (root.category, root.rank) == (category, rank), (name, root.category, root.rank, root.message)
    assert re.search(text, root.message) or any(re.search(text, line) for line in root.traceback), (name, root.message)
    assert root.evidence is not None
    # the evidence points at a real line of a real file that holds the text
    ev_file = Path(root.evidence.file)
    if not ev_file.is_absolute():
        ev_file = Path.cwd() / ev_file
    line = ev_file.read_text(errors="replace").splitlines()[root.evidence.line - 1]
    assert line.strip(), (name, root.evidence)
    assert doc["root_cause"]["category"] == category


def test_cli_on_real_run(runs, tmp_path):
    """The console script on a real merged log: exit 1, JSON on stdout, --json-out and --jsonl written."""
    log = runs["shape-merged"]["path"]
    r = subprocess.run([sys.executable, "-m", "diagnose.cli.main", "--json", "--json-out", str(tmp_path / "out"),
                        "--jsonl", str(tmp_path / "all.jsonl"), str(log)], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["root_cause"]["rank"] == 2
    assert json.loads((tmp_path / "out" / "shape-merged.json").read_text())["root_cause"]["category"] == "shape"
    lines = (tmp_path / "all.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["root_cause"]["category"] == "shape"
