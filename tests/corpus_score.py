"""Score mdiag's diagnosis against labelled corpora of real failure logs, in process.

A case is a folder with `case.json` (category, root_rank, root_message, source, notes, batch) and
`logs/` (the input as a user has it).  The rules are those of the shared scorer: category equal;
rank equal where the label has one; the labelled root line and the reported message contain one
another once launcher prefixes and blanks are removed.

    python -m tests.corpus_score tests/corpus [../shared/corpus] [--by batch] [-v]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import sys
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from diagnose import diagnose
from diagnose.model import Diagnosis

_PREFIX = re.compile(r"^(?:\s*(?:\[(?:rank|default|Rank )?\d+\]:|\d+:\s|\[\d+,\d+\]<std(?:out|err)>:)\s?)+")


def _norm(text: str | None) -> str:
    return re.sub(r"\s+", " ", _PREFIX.sub("", text or "").strip())


@dataclass
class Result:
    case: str
    batch: str
    category: bool
    rank: bool | None  # None: the label has no rank
    message: bool
    named: bool  # a root cause was named at all
    got: tuple
    want: tuple = ()


def cases(*folders: Path) -> list[Path]:
    return sorted(p for f in folders if f.is_dir() for p in f.iterdir() if (p / "case.json").is_file())


_DONE: dict[Path, Diagnosis] = {}


def diagnosis(case: Path) -> Diagnosis:
    """A case's diagnosis, made once per process (the accuracy and schema tests read the same reports)."""
    if case not in _DONE:
        _DONE[case] = _diagnose_case(case)
    return _DONE[case]


def _diagnose_case(case: Path) -> Diagnosis:
    return diagnose([case / "logs"])


_POOL: list[ProcessPoolExecutor] = []


def pool_map(fn, items: list, chunksize: int = 8) -> list | None:
    """fn over items on every core this process may use (up to 8: each worker holds polars and the pattern
    library), in processes started afresh (polars' threads do not survive a fork) with one polars thread each;
    None with fewer than 2 cores.  One pool serves the whole test run: starting the workers and loading the
    pattern library in each costs more than an all-cases wrapper test's own work."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if min(cores, 8) < 2:
        return None
    if not _POOL:
        _POOL.append(ProcessPoolExecutor(min(cores, 8), mp_context=multiprocessing.get_context("spawn")))
    with mock.patch.dict(os.environ, POLARS_MAX_THREADS="1"):  # (the workers start on the first map)
        return list(_POOL[0].map(fn, items, chunksize=chunksize))


def diagnose_all(cases: list[Path]) -> None:
    """Diagnose the cases not done yet in worker processes (pool_map), for diagnosis() to return."""
    todo = [c for c in cases if c not in _DONE]
    if len(todo) >= 50 and (done := pool_map(_diagnose_case, todo)) is not None:
        _DONE.update(zip(todo, done))


def score_case(case: Path) -> Result:
    label = json.loads((case / "case.json").read_text())
    root = diagnosis(case).root_cause
    cat, rank, msg = (root.category, root.rank, root.message) if root else (None, None, "")
    a, b = _norm(label.get("root_message")), _norm(msg)
    return Result(
        case=case.name, batch=label.get("batch") or case.name[:1],
        category=cat == label["category"],
        rank=None if label.get("root_rank") is None else rank == label["root_rank"],
        message=bool(a and b) and (a in b or b in a), named=root is not None, got=(cat, rank, msg[:120]),
        want=(label["category"], label.get("root_rank")),
    )


def summary(results: list[Result]) -> dict:
    n = len(results)
    ranked = [r for r in results if r.rank is not None]
    return {
        "cases": n,
        "category": sum(r.category for r in results) / n if n else 0.0,
        "rank": sum(r.rank for r in ranked) / len(ranked) if ranked else 1.0,
        "ranked_cases": len(ranked),
        "message": sum(r.message for r in results) / n if n else 0.0,
        "unnamed": sum(not r.named for r in results),
    }


def _line(name: str, s: dict) -> str:
    return (f"{name:<12} cases {s['cases']:>4}  category {s['category']:6.1%}  rank {s['rank']:6.1%} "
            f"(of {s['ranked_cases']})  root line {s['message']:6.1%}  no root named {s['unnamed']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", nargs="+", type=Path)
    ap.add_argument("--by", choices=["batch", "corpus"], default="corpus")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    groups: dict[str, list[Result]] = defaultdict(list)
    every: list[Result] = []
    diagnose_all(cases(*args.corpus))
    for folder in args.corpus:
        for case in cases(folder):
            r = score_case(case)
            every.append(r)
            groups[r.batch if args.by == "batch" else str(folder)].append(r)
            if args.verbose and not (r.category and r.message and r.rank is not False):
                print(f"  {r.case}: want {r.want} got {r.got}", file=sys.stderr)
    for name in sorted(groups):
        print(_line(name, summary(groups[name])))
    print(_line("all", summary(every)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
