#!/usr/bin/env python3
"""Make realistic sample logs from REAL torchrun runs of ``tiny_megatron.py`` (CPU, gloo, 4 ranks).

    python tests/e2e/make_samples.py [TARGET_DIR]        # default: sample_logs/

Every sample is one real ``torchrun --standalone --nproc-per-node 4`` run in a neutral working
folder (default ``/tmp/job``), the script copied there as ``Megatron-LM/pretrain_gpt.py`` and the
launcher run from a venv made there (``python -m venv --system-site-packages``, with ``torch``
linked into the venv's site-packages) so the paths in tracebacks read ``/tmp/job/venv/...`` and
name nothing of the machine that made them. The launcher is the ``torchrun`` console script
(pip's entry point for ``torch.distributed.run:main``); ``--launcher module`` runs
``python -m torch.distributed.run`` instead.

Besides the logs it writes ``TARGET_DIR/expected.json``: per sample the category, root rank, the
line that carries the root cause (as found in this run's output), torchrun's exit code and notes.
Each run is checked (exit code, failing rank, ChildFailedError block, size, no leaked paths); the
script exits 1 if any check fails. Needs only the standard library and an installed torch.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCRIPT = HERE / "tiny_megatron.py"
MARKER = ".mdiag-make-samples"
TIMEOUT_S = 60
MAX_BYTES = 200 * 1024

# name, file or folder, torchrun options, script options, labels and checks
SAMPLES = [
    dict(
        name="megatron-1234.err",
        torchrun=[],
        script=["--fail", "oom", "--fail-rank", "3", "--fail-iter", "5", "--record",
                "--tp", "2", "--pp", "1"],
        category="oom", root_rank=3, injected=True,
        root_re=r"^torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate .*$",
        notes="INJECTED torch.OutOfMemoryError (CUDA-style message; the run is on CPU) raised in "
              "backward_step on rank 3 (GPU index = local rank 3) at iteration 5; @record, so the "
              "ChildFailedError Root Cause carries rank 3's traceback; TP 2 PP 1 DP 2; stdout+stderr "
              "merged as sbatch --output gives; the other ranks die in all_reduce (gloo 'Connection "
              "closed by peer') or by torchrun's SIGTERM",
    ),
    dict(
        name="shape-rank2.log",
        torchrun=[],
        script=["--fail", "shape", "--fail-rank", "2", "--fail-iter", "4"],
        category="shape", root_rank=2, injected=False,
        root_re=r"^RuntimeError: Expected size for first two dimensions of batch2 tensor.*$",
        notes="real torch.matmul shape mismatch (key not transposed) in CoreAttention.forward on rank 2 "
              "at iteration 4; no @record (ChildFailedError shows 'To enable traceback see'); merged",
    ),
    dict(
        name="import-rank1-logdir",
        logdir=True,
        torchrun=["--redirects", "3"],
        script=["--fail", "import", "--fail-rank", "1", "--fail-iter", "3", "--record"],
        category="import", root_rank=1, injected=False,
        root_re=r"^ModuleNotFoundError: No module named 'transformer_engine'$",
        notes="real ModuleNotFoundError (import transformer_engine inside a function) on rank 1 at "
              "iteration 3; @record; torchrun --log-dir torchrun_logs --redirects 3: worker output is "
              "ONLY in torchrun_logs/<run id>/attempt_0/<local_rank>/{stdout,stderr}.log (+ error.json "
              "from @record); console.log holds torchrun's own output",
    ),
    dict(
        name="divisibility-tee.log",
        torchrun=["--tee", "3"],
        script=["--fail", "divisibility", "--tp", "3"],
        category="shape", root_rank=None, injected=False, all_ranks=True,
        root_re=r"^RuntimeError: world_size \(4\) is not divisible by tensor_model_parallel_size.*$",
        notes="world size 4 not divisible by TP 3 x PP 1 x CP 1: Megatron-core's RuntimeError raised in "
              "initialize_model_parallel on ALL ranks right after init_process_group; torchrun --tee 3, "
              "so worker lines carry [defaultN]: prefixes; merged",
    ),
    dict(
        name="sigkill-rank2.log",
        torchrun=[],
        script=["--fail", "sigkill", "--fail-rank", "2", "--fail-iter", "4"],
        category="host_oom", root_rank=2, injected=False, signal_rank=True,
        root_re=r"failed \(exitcode: -9\) local_rank: 2 .*$",
        notes="rank 2 kills itself with SIGKILL at iteration 4 (as the kernel OOM killer would): exitcode "
              "-9, no traceback from it; the root line is torchrun's 'failed (exitcode: -9)' line; merged",
    ),
    dict(
        name="hang-rank1.log",
        torchrun=[],
        script=["--fail", "hang", "--fail-rank", "1", "--fail-iter", "3", "--pg-timeout-s", "15"],
        category="nccl", root_rank=1, injected=False, hang=True,
        root_re=r"Timed out waiting 15000ms for",
        notes="rank 1 stops (time.sleep) at iteration 3 before the gradient all_reduce; the other ranks "
              "block in it and hit the real gloo 15 s process-group timeout ('Timed out waiting 15000ms "
              "for recv/send operation to complete'); torchrun then SIGTERMs rank 1, which printed "
              "nothing; torchrun's Root Cause names one of the timed-out ranks, not rank 1; merged",
    ),
    dict(
        name="nan-rank3.log",
        torchrun=[],
        script=["--fail", "nan", "--fail-rank", "3", "--fail-iter", "7"],
        category="nan", root_rank=3, injected=False,
        root_re=r"^RuntimeError: Rank 3, node .*Unexpected result tensor\(nan\).*$",
        notes="real NaN: activations on rank 3 overflow float32 at iteration 7; the last rank logs "
              "iteration 7 without 'lm loss' and with 'number of nan iterations:   1', then rank 3 raises "
              "Megatron's 'Unexpected result tensor(nan)' RuntimeError; merged",
    ),
    dict(
        name="clean-run.log",
        torchrun=[],
        script=[],
        category=None, root_rank=None, injected=False, clean=True,
        root_re=None,
        notes="successful 20-iteration run (exit 0) with a validation loss at the end; no failure",
    ),
]

PREFIX_RE = re.compile(r"^(?:\[default\d+\]:)?(?:\[rank\d+\]: ?)?")
TORCH_LOG_RE = re.compile(r"^[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d+ \d+ \S+:\d+\] ")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_dir() -> Path:
    import importlib.util
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed for this interpreter (pip install torch==2.13.0)")
    return Path(list(spec.submodule_search_locations)[0])


def prepare_workdir(workdir: Path) -> dict:
    """Fresh neutral folder: Megatron-LM/pretrain_gpt.py and a venv that sees this interpreter's torch."""
    if workdir.exists():
        if not (workdir / MARKER).exists():
            sys.exit(f"{workdir} exists and was not made by this script; pick another --workdir")
        shutil.rmtree(workdir)
    (workdir / "Megatron-LM").mkdir(parents=True)
    (workdir / MARKER).write_text("made by tests/e2e/make_samples.py; removed on the next run\n")
    shutil.copy(SCRIPT, workdir / "Megatron-LM" / "pretrain_gpt.py")

    venv = workdir / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True)
    py = venv / "bin" / "python3"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # torch linked into the venv, so traceback paths read <workdir>/venv/lib/pythonX.Y/site-packages/torch
    (site / "torch").symlink_to(torch_dir(), target_is_directory=True)
    # torch's own dependencies come from this interpreter's site-packages (also when it is a venv itself)
    here_sites = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_mdiag_parent_site.pth").write_text("".join(f"{p}\n" for p in sorted(here_sites)))
    # the console script pip writes for torch's 'torchrun' entry point
    torchrun = venv / "bin" / "torchrun"
    torchrun.write_text(
        f"#!{py}\n"
        "# -*- coding: utf-8 -*-\n"
        "import re\n"
        "import sys\n"
        "from torch.distributed.run import main\n"
        "if __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        "    sys.exit(main())\n")
    torchrun.chmod(0o755)
    check = subprocess.run([str(py), "-c", "import torch; print(torch.__version__, torch.__file__)"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        sys.exit(f"the venv in {venv} cannot import torch:\n{check.stderr}")
    return {"venv": venv, "python": py, "torchrun": torchrun, "torch": check.stdout.strip()}


def run_env(venv: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCH", "NCCL_", "GLOO_", "TORCHELASTIC", "OMP_", "MASTER_", "PYTHON"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOGLEVEL", "TMPDIR", "VIRTUAL_ENV",
                         "CUDA_VISIBLE_DEVICES")}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def launch(sample: dict, tools: dict, workdir: Path, launcher: str) -> tuple[int, float, Path]:
    """One real torchrun run; returns (exit code, seconds, path of the console output)."""
    cwd = workdir / "Megatron-LM"
    extra = list(sample["torchrun"])
    if sample.get("logdir"):
        out_dir = workdir / sample["name"]
        out_dir.mkdir()
        console = out_dir / "console.log"
        extra = ["--log-dir", str(out_dir / "torchrun_logs")] + extra
    else:
        console = workdir / sample["name"]
    base = ([str(tools["torchrun"])] if launcher == "torchrun"
            else [str(tools["python"]), "-m", "torch.distributed.run"])
    # --master-port is ignored by --standalone (it picks its own free port); passed as users do.
    cmd = base + ["--standalone", "--nproc-per-node", "4", "--master-port", str(free_port())] + extra \
        + ["pretrain_gpt.py"] + sample["script"]
    start = time.monotonic()
    rc = run_logged(cmd, cwd, console, run_env(tools["venv"]), TIMEOUT_S)
    return rc, time.monotonic() - start, console


def run_logged(cmd: list[str], cwd: Path, console: Path, env: dict, timeout: float) -> int | None:
    """Run cmd with stdout+stderr merged into `console` (as sbatch --output gives); its whole process
    group is killed after `timeout` s (None then), so no worker outlives a hung launcher."""
    with open(console, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None


def strip_prefix(line: str) -> str:
    return PREFIX_RE.sub("", line, count=1)


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def check_and_label(sample: dict, rc, seconds: float, console: Path, workdir: Path) -> tuple:
    """Checks the run did what the sample says; returns (expected.json entry, problems, bytes, seconds)."""
    problems = []
    files = sorted(p for p in (console.parent.rglob("*") if sample.get("logdir") else [console])
                   if p.is_file())
    texts = {p: read(p) for p in files}
    console_text = texts[console]
    total = sum(p.stat().st_size for p in files)
    if rc is None:
        problems.append(f"timed out after {TIMEOUT_S}s")
    if total > MAX_BYTES:
        problems.append(f"{total} bytes > {MAX_BYTES}")
    if sample.get("clean"):
        if rc != 0:
            problems.append(f"exit code {rc}, want 0")
        if "Traceback" in console_text or "ChildFailedError" in console_text:
            problems.append("a traceback in a clean run")
        if "validation loss at iteration 20" not in console_text:
            problems.append("no final validation line")
    else:
        if not rc:
            problems.append(f"exit code {rc}, want non-zero")
        if "ChildFailedError" not in console_text or "Root Cause (first observed failure):" not in console_text:
            problems.append("no ChildFailedError block in torchrun's output")

    root_message = None
    if sample["root_re"]:
        rx = re.compile(sample["root_re"])
        hits = []  # (file, raw line, stripped message)
        for p, text in texts.items():
            for raw in text.splitlines():
                msg = TORCH_LOG_RE.sub("", strip_prefix(raw))
                m = rx.search(msg)
                if m:
                    hits.append((p, raw, msg))
        if not hits:
            problems.append(f"root line /{sample['root_re']}/ not found")
        else:
            if sample.get("hang"):
                root_message = "Timed out waiting 15000ms for"
                if any(raw.startswith(f"[rank{sample['root_rank']}]") for _, raw, _ in hits):
                    problems.append("the hung rank itself reported a timeout")
                if f"[rank{sample['root_rank']}]:" in console_text:
                    problems.append("the hung rank printed a traceback")
                if not re.search(rf"rank      : {sample['root_rank']} \(local_rank: {sample['root_rank']}\)\n"
                                 r"  exitcode  : -15 ", console_text):
                    problems.append("the hung rank was not ended by SIGTERM")
            elif sample.get("signal_rank"):
                root_message = hits[0][2][hits[0][2].index("failed (exitcode"):]
                if re.search(rf"^\[rank{sample['root_rank']}\]:", console_text, re.M):
                    problems.append("the killed rank printed a traceback")
            else:
                root_message = hits[0][2]
                ranks = set()
                for p, raw, _ in hits:
                    m = re.match(r"^(?:\[default\d+\]:)?\[rank(\d+)\]:", raw)
                    if m:
                        ranks.add(int(m.group(1)))
                    elif sample.get("logdir") and p.name == "stderr.log":
                        ranks.add(int(p.parent.name))
                if sample.get("all_ranks"):
                    if ranks != {0, 1, 2, 3}:
                        problems.append(f"root line seen on ranks {sorted(ranks)}, want all four")
                elif ranks != {sample["root_rank"]}:
                    problems.append(f"root line seen on ranks {sorted(ranks)}, want [{sample['root_rank']}]")
    if sample["category"] == "nan":
        if not re.search(r"iteration +7/ .*number of nan iterations: +1 \|", console_text):
            problems.append("no iteration-7 line with 'number of nan iterations:   1'")
        if re.search(r"iteration +7/ .*lm loss:", console_text):
            problems.append("the NaN iteration line still shows 'lm loss'")
    if sample.get("logdir"):
        worker_lines = [l for l in console_text.splitlines()
                        if any(k in l for k in ("using world size", "[rank", "> initializing", "consumed samples"))]
        if worker_lines:
            problems.append(f"worker output leaked into console.log: {worker_lines[:2]}")
        if not list(console.parent.rglob("attempt_0/1/error.json")):
            problems.append("no attempt_0/1/error.json (from @record)")

    entry = {
        "category": sample["category"],
        "root_rank": sample["root_rank"],
        "root_message": root_message,
        "exit_code": rc,
        "status": "ok" if sample.get("clean") else "failed",
        "injected": sample["injected"],
        "notes": sample["notes"],
    }
    if sample.get("logdir"):
        entry["files"] = [str(p.relative_to(console.parent)) for p in files]
    return entry, problems, total, seconds


def leaked_paths(target: Path, workdir: Path) -> list:
    """Paths of this machine (repo, interpreter, home) that must not appear in the samples."""
    needles = {str(REPO), str(Path.home()), os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix),
               os.path.realpath(torch_dir())}
    needles = {n for n in needles if n not in ("/", "") and not n.startswith(str(workdir))
               and not str(workdir).startswith(n + "/")}
    found = []
    for p in sorted(target.rglob("*")):
        if p.is_file() and p.name != "expected.json":
            text = read(p)
            for n in needles:
                if n in text:
                    found.append(f"{p.relative_to(target)} mentions {n}")
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", nargs="?", default="sample_logs", type=Path)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/job"),
                    help="neutral folder the runs happen in (recreated; default /tmp/job)")
    ap.add_argument("--only", nargs="*", help="sample names to (re)make; expected.json is merged")
    ap.add_argument("--launcher", choices=["torchrun", "module"], default="torchrun")
    args = ap.parse_args(argv)

    workdir = args.workdir.resolve()
    target = args.target.resolve()
    tools = prepare_workdir(workdir)
    print(f"workdir {workdir}; torch {tools['torch']}", flush=True)
    target.mkdir(parents=True, exist_ok=True)
    expected_path = target / "expected.json"
    expected = json.loads(expected_path.read_text()) if (args.only and expected_path.exists()) else {}

    all_problems = []
    for sample in SAMPLES:
        name = sample["name"]
        if args.only and name not in args.only:
            continue
        rc, seconds, console = launch(sample, tools, workdir, args.launcher)
        entry, problems, size, seconds = check_and_label(sample, rc, seconds, console, workdir)
        dest = target / name
        if dest.is_dir():
            shutil.rmtree(dest)
        elif dest.exists():
            dest.unlink()
        if sample.get("logdir"):
            shutil.copytree(console.parent, dest)
        else:
            shutil.copy(console, dest)
        expected[name] = entry
        status = "ok" if not problems else "PROBLEM: " + "; ".join(problems)
        print(f"{name:24s} exit {rc!s:4s} {seconds:5.1f}s {size:7d} B  rank {entry['root_rank']!s:4s} "
              f"{(entry['root_message'] or '-')[:90]}  [{status}]", flush=True)
        all_problems += [f"{name}: {p}" for p in problems]

    expected_path.write_text(json.dumps(dict(sorted(expected.items())), indent=2) + "\n")
    leaks = leaked_paths(target, workdir)
    all_problems += leaks
    for p in leaks:
        print(f"LEAK: {p}")
    print(f"wrote {len(expected)} samples and expected.json to {target}"
          + ("" if not all_problems else f"; {len(all_problems)} problem(s)"))
    return 1 if all_problems else 0


if __name__ == "__main__":
    sys.exit(main())
