"""Benchmark: mdiag against `grep -c -E` and `cat` on generated failed-job logs (not part of pytest).

    python tests/bench/run.py                       # 100M, 1G, 4G, rank and per-rank-file scaling
    python tests/bench/run.py --quick               # 100M only
    python tests/bench/run.py --sizes 1G --repeat 3 --dir /tmp/mdiag-bench

Each case runs, alternately and --repeat times each: `mdiag --json FILE`, `grep -c -E ANCHORS FILE`
(ANCHORS: the literal alternation mdiag's scan prefilters on, scan.KeepPlan) and `cat FILE >
/dev/null`; prints medians of wall time, ratios, mdiag's peak RSS (getrusage of each child), MB/s,
lines/s, and checks mdiag named the planted rank and category every time.  Markdown on stdout.
Generated logs go to --dir and are deleted at the end unless --keep.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate  # noqa: E402


def grep_anchors() -> str:
    from diagnose.patterns import library as patterns
    from diagnose.read import scan

    plan = scan.KeepPlan([p.regex for p in patterns.load(())])
    return plan.anchors


def timed(cmd: list[str] | str, shell: bool = False) -> tuple[float, int, str]:
    """(wall s, exit code, stdout)."""
    t = time.perf_counter()
    p = subprocess.run(cmd, shell=shell, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return time.perf_counter() - t, p.returncode, p.stdout


def rss_of(cmd: list[str]) -> tuple[float, int, str]:
    """Run cmd in a fresh Python helper whose only child is cmd: its RUSAGE_CHILDREN peak is cmd's."""
    helper = (
        "import resource,subprocess,sys,time,json;t=time.perf_counter();"
        "p=subprocess.run(sys.argv[1:],stdout=subprocess.PIPE,stderr=subprocess.DEVNULL,text=True);"
        "w=time.perf_counter()-t;"
        "print(json.dumps([w,resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss//1024,p.stdout]))"
    )
    out = subprocess.run([sys.executable, "-c", helper, *cmd], stdout=subprocess.PIPE, text=True).stdout
    w, rss, stdout = json.loads(out)
    return w, rss, stdout


def bench_case(name: str, target: Path, answer: dict, anchors: str, repeat: int) -> dict:
    files = [target] if target.is_file() else sorted(target.rglob("*.err"))
    nbytes = sum(f.stat().st_size for f in files)
    files_arg = str(target) if target.is_file() else str(target) + "/*.err"
    nlines = int(subprocess.run(f"cat {files_arg} | wc -l", shell=True, stdout=subprocess.PIPE, text=True).stdout)
    m, g, c, rss, ok = [], [], [], [], 0
    for _ in range(repeat):
        w, r, out = rss_of(["mdiag", "--json", str(target)])
        m.append(w)
        rss.append(r)
        try:
            rc = json.loads(out)["root_cause"]
            ok += rc["rank"] == answer["rank"] and rc["category"] == answer["category"]
        except (ValueError, KeyError, TypeError):
            pass
        g.append(timed(f"cat {files_arg} | grep -c -E {shlex.quote(anchors)}" if not target.is_file()
                       else ["grep", "-c", "-E", anchors, str(target)], shell=not target.is_file())[0])
        c.append(timed(f"cat {files_arg} > /dev/null", shell=True)[0])
    mm, gm, cm = statistics.median(m), statistics.median(g), statistics.median(c)
    return {
        "case": name, "MB": nbytes / 1e6, "lines": nlines, "mdiag_s": mm, "grep_s": gm, "cat_s": cm,
        "mdiag/grep": mm / gm, "mdiag/cat": mm / cm, "rss_MB": max(rss), "MB/s": nbytes / 1e6 / mm,
        "lines/s": nlines / mm, "found": f"{ok}/{repeat}",
    }


def table(rows: list[dict]) -> str:
    head = ["case", "MB", "lines", "mdiag_s", "grep_s", "cat_s", "mdiag/grep", "mdiag/cat", "rss_MB", "MB/s", "lines/s", "found"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = []
        for h in head:
            v = r[h]
            cells.append(f"{v:,.0f}" if h in ("MB", "lines", "rss_MB", "MB/s", "lines/s") else f"{v:.2f}" if isinstance(v, float) else str(v))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/mdiag-bench"))
    ap.add_argument("--sizes", default="100M,1G,4G")
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="100M only, no scaling cases")
    ap.add_argument("--no-scaling", action="store_true", help="skip the rank-count and per-rank-file cases")
    ap.add_argument("--keep", action="store_true", help="keep the generated logs")
    a = ap.parse_args(argv)
    a.dir.mkdir(parents=True, exist_ok=True)
    anchors = grep_anchors()
    sizes = ["100M"] if a.quick else a.sizes.split(",")
    cases = [(f"{s} merged, {a.ranks} ranks", s, a.ranks, False) for s in sizes]
    if not (a.quick or a.no_scaling):
        cases += [("1G merged, 8 ranks", "1G", 8, False), ("1G merged, 4096 ranks", "1G", 4096, False),
                  ("1G in 4096 per-rank files", "1G", 4096, True)]
    rows = []
    for name, size, ranks, split in cases:
        target = a.dir / (f"split-{size}-{ranks}" if split else f"job-{size}-{ranks}.err")
        answer = generate.generate(target, generate.parse_size(size), ranks, seed=1, split=split)
        rows.append(bench_case(name, target, answer, anchors, a.repeat))
        print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
        if not a.keep:
            shutil.rmtree(target) if target.is_dir() else target.unlink()
    print(f"machine: {os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM, "
          f"medians of {a.repeat} alternated runs\n")
    print(table(rows))


if __name__ == "__main__":
    main()
