"""Benchmark: mdiag against `grep -c -E` (six alternatives, output to a file) on the inputs that stress it.

    python bench/run.py                                 # 1G merged log, 75M clean lines, 50M error flood
    python bench/run.py --cases 1G,clean,errors --repeat 3
    python bench/run.py --cases scale --scale 100M,1G,10G   # linear time, flat memory
    python bench/run.py --baseline DIR                  # also time the mdiag checked out in DIR

Cases (generated into --dir, kept there for the next run unless --clean):
  1G       a 1 GB merged log of a 1,024-rank job (tests/bench/generate.py: NCCL INFO, c10 warnings,
           Megatron iterations, tqdm bars; one planted OOM, watchdog timeouts on every other rank)
  clean    75 MB of short clean lines (`ok` × 25 M): nothing to keep
  errors   50 MB where every line is an error (tracebacks, OOMs, NCCL errors from 512 ranks)
  scale    the generated job log at each --scale size

For each case, alternately and --repeat times: `mdiag --json FILE`, `grep -c -E RX FILE > out`
(RX: six alternatives), `mdiag --json --timeout 1 FILE`; and once per run mdiag's start-up
(`mdiag --json` on a one-line log).  Prints medians, the ratio to grep (raw, and after subtracting
mdiag's start-up), mdiag's peak RSS (getrusage of each child), whether the planted rank was named
and whether the report says it summarised.  Markdown on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "bench"))
import generate  # noqa: E402

GREP_RX = "Traceback|Error|NCCL WARN|out of memory|Killed|exitcode"  # six alternatives


# inputs ---------------------------------------------------------------------------------------------
def make_clean(out: Path, lines: int = 25_000_000) -> dict:
    with open(out, "wb") as fh:
        block = b"ok\n" * 1_000_000
        for _ in range(lines // 1_000_000):
            fh.write(block)
    return {"rank": None, "category": None}


def make_errors(out: Path, size: int = 50 * 1024 * 1024, ranks: int = 512, seed: int = 1) -> dict:
    """Every line an error: Python tracebacks (OOM, RuntimeError), NCCL WARN and watchdog lines, from
    `ranks` ranks, interleaved in blocks as a merged log shows them."""
    rng = random.Random(seed)
    pool: list[str] = []
    for r in range(ranks):
        h, d = f"gpu-{r // 8:04d}", r % 8
        pool += [
            f"[rank{r}]: Traceback (most recent call last):\n"
            f'[rank{r}]:   File "/workspace/train.py", line {100 + r % 50}, in <module>\n'
            f'[rank{r}]:   File "/opt/venv/lib/python3.11/site-packages/torch/autograd/__init__.py", line 347, in backward\n'
            f"[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {d} has a total "
            f"capacity of 79.10 GiB of which 1.12 GiB is free.\n",
            f"{h}:{20000 + r}:{20100 + r} [{d}] NCCL WARN NET/IB : Got completion from peer 10.0.{r // 8}.{d} with "
            f"status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.1 error 12\n",
            f"[rank{r}]:[E1202 10:00:{r % 60:02d}.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
            f"collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            f"Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n",
            f"[rank{r}]: RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
            f"unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n",
        ]
    done = 0
    with open(out, "w") as fh:
        while done < size:
            chunk = "".join(rng.choice(pool) for _ in range(2000))
            fh.write(chunk)
            done += len(chunk.encode())
    return {"rank": None, "category": None}


def make_input(case: str, d: Path, seed: int = 1) -> tuple[Path, dict]:
    if case == "clean":
        p = d / "clean-75M.log"
        if not p.exists():
            make_clean(p)
        return p, {}
    if case == "errors":
        p = d / "errors-50M.log"
        if not p.exists():
            make_errors(p)
        return p, {}
    size = case  # 100M, 1G, 10G …
    p, ans = d / f"job-{size}-1024.err", d / f"job-{size}-1024.json"
    if not (p.exists() and ans.exists()):
        ans.write_text(json.dumps(generate.generate(p, generate.parse_size(size), 1024, seed=seed)))
    return p, json.loads(ans.read_text())


# measuring ------------------------------------------------------------------------------------------
def measured(cmd: list[str], env: dict, stdout_file: str | None = None) -> tuple[float, int, str]:
    # (run from the checkout itself: `python -m` puts the working folder first on the path)
    """(wall s, peak RSS MB, stdout) of cmd, run from a fresh Python helper whose only child is cmd."""
    helper = (
        "import resource,subprocess,sys,time,json;o=sys.argv[1];t=time.perf_counter();"
        "f=open(o,'w') if o else subprocess.PIPE;"
        "p=subprocess.run(sys.argv[2:],stdout=f,stderr=subprocess.DEVNULL,text=True);"
        "w=time.perf_counter()-t;"
        "print(json.dumps([w,resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss//1024,p.stdout or '']))"
    )
    out = subprocess.run([sys.executable, "-c", helper, stdout_file or "", *cmd], stdout=subprocess.PIPE,
                         text=True, env=env, cwd=env.get("PYTHONPATH")).stdout
    return tuple(json.loads(out))


def mdiag_cmd(code: Path) -> tuple[list[str], dict]:
    env = dict(os.environ, PYTHONPATH=str(code))
    return [sys.executable, "-m", "diagnose.cli.main"], env


def run_case(name: str, target: Path, answer: dict, code: Path, repeat: int, grep_out: str) -> dict:
    cmd, env = mdiag_cmd(code)
    nbytes = target.stat().st_size
    m, g, t1, rss, found, summ = [], [], [], [], 0, 0
    for _ in range(repeat):
        w, r, out = measured([*cmd, "--json", str(target)], env)
        m.append(w)
        rss.append(r)
        try:
            doc = json.loads(out)
            rc = doc.get("root_cause") or {}
            found += bool(answer.get("rank") is not None and rc.get("rank") == answer["rank"]
                          and rc.get("category") == answer["category"])
            summ += bool(doc.get("summarised"))
        except ValueError:
            pass
        g.append(measured(["grep", "-c", "-E", GREP_RX, str(target)], env, stdout_file=grep_out)[0])
        t1.append(measured([*cmd, "--json", "--timeout", "1", str(target)], env)[0])
    return {"case": name, "MB": nbytes / 1e6, "mdiag_s": statistics.median(m), "grep_s": statistics.median(g),
            "rss_MB": max(rss), "timeout1_s": max(t1), "found": f"{found}/{repeat}" if answer.get("rank") is not None else "-",
            "summarised": f"{summ}/{repeat}"}


def startup(code: Path, tmp: Path, repeat: int) -> float:
    cmd, env = mdiag_cmd(code)
    one = tmp / "one-line.log"
    one.write_text("hello\n")
    return statistics.median(measured([*cmd, "--json", str(one)], env)[0] for _ in range(max(3, repeat)))


def table(rows: list[dict]) -> str:
    head = ["case", "code", "MB", "mdiag_s", "grep_s", "ratio", "ratio-startup", "rss_MB", "timeout1_s", "found", "summarised"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = []
        for h in head:
            v = r[h]
            cells.append(f"{v:,.0f}" if h in ("MB", "rss_MB") else f"{v:.2f}" if isinstance(v, float) else str(v))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "mdiag-bench")
    ap.add_argument("--cases", default="1G,clean,errors")
    ap.add_argument("--scale", default="100M,1G,10G", help="sizes of the `scale` case")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout of mdiag to time alongside")
    ap.add_argument("--baseline-repeat", type=int, default=None, help="runs of the baseline (default: --repeat)")
    ap.add_argument("--clean", action="store_true", help="delete the generated inputs at the end")
    a = ap.parse_args(argv)
    a.dir.mkdir(parents=True, exist_ok=True)
    codes = [("this", ROOT)] + ([("baseline", a.baseline.resolve())] if a.baseline else [])
    cases: list[str] = []
    for c in a.cases.split(","):
        cases += a.scale.split(",") if c == "scale" else [c]
    grep_out = str(a.dir / "grep.out")
    starts = {label: startup(code, a.dir, 3) for label, code in codes}
    rows, made = [], []
    for case in cases:
        target, answer = make_input(case, a.dir)
        made.append(target)
        name = {"clean": "75M clean short lines", "errors": "50M every line an error, 512 ranks"}.get(
            case, f"{case} merged, 1024 ranks")
        for label, code in codes:
            reps = a.baseline_repeat if label == "baseline" and a.baseline_repeat else a.repeat
            row = run_case(name, target, answer, code, reps, grep_out)
            row["code"] = label
            row["ratio"] = row["mdiag_s"] / row["grep_s"]
            row["ratio-startup"] = max(row["mdiag_s"] - starts[label], 0.0) / row["grep_s"]
            rows.append(row)
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    if a.clean:
        for p in made:
            p.unlink(missing_ok=True)
    print(f"machine: {os.cpu_count()} cores, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM; medians of "
          f"{a.repeat} alternated runs; grep -c -E '{GREP_RX}' > file; start-up (mdiag on a one-line log): "
          + ", ".join(f"{k} {v:.2f} s" for k, v in starts.items()) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
