"""Crafted hostile inputs, one per class of the hardening issue, each with its expected outcome.

A case builds its input under a folder (big, deep or special files cannot live in git) and says:
the mdiag arguments, the exit codes allowed, the wall-clock bound, and whether it is slow.  The
checks every case gets (tests/hostile/test_cases.py): the exit code, no "internal error" and no
traceback, no secret of SECRETS in any output, no raw control character, and the time bound.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

TB = "Traceback (most recent call last):\n  File \"/job/train.py\", line 3, in <module>\nRuntimeError: boom\n"
# real-format fakes, never real secrets
SECRETS = {
    "openai": "sk-proj-" + "Ab1_Cd2-Ef3" * 7 + "T3BlbkFJ" + "Gh4Ij5" * 12,
    "gitlab": "glpat-" + "xY1_z-" * 4,
    "google": "AIza" + "Sy9_-Bq2" * 4 + "Sy9",
    "azure": "Zm9vYmFy+/" * 8 + "==",
    "wandb": "0a1b2c3d4e" * 4,
    "pem": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" * 2,
}
CONTROL = "\x1b]0;pwned\x07 \x9b31m \u202e \u200b \x85"


@dataclass
class Case:
    name: str
    build: Callable[[Path], list[str]]  # → mdiag arguments (paths and options)
    exits: tuple[int, ...]
    bound_s: float = 60.0
    slow: bool = False
    expect: str = ""  # a substring the combined output must hold
    extra: dict = field(default_factory=dict)


def _log(folder: Path, name: str, text: str | bytes) -> Path:
    p = folder / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def huge_rank_prefix(d: Path) -> list[str]:
    return [str(_log(d, "job.log", f"[rank{2**64}]: {TB}[rank{2**70}]:RuntimeError: x\n{2**63}: RuntimeError: y\n"))]


def huge_rank_file_names(d: Path) -> list[str]:
    _log(d, "logs/job-rank99999999999999999999.log", TB)
    _log(d, f"logs/job-rank{2**63}.log", TB)
    _log(d, "logs/attempt_99999999999999999999/99999999999999999999/error.json", "{}")
    return [str(d / "logs")]


def deep_folders(d: Path) -> list[str]:
    top = d / "deep"
    top.mkdir()
    fd = os.open(".", os.O_RDONLY)
    try:
        os.chdir(top)
        for _ in range(1000):
            os.mkdir("d")
            os.chdir("d")
        with open("rank-0.log", "w") as f:
            f.write(TB)
    finally:
        os.fchdir(fd)
        os.close(fd)
    _log(top, "rank-1.log", TB)
    return [str(top)]


def deep_error_json(d: Path) -> list[str]:
    _log(d, "run/attempt_0/0/error.json", '{"message":' * 200000 + "1" + "}" * 200000)
    _log(d, "run/attempt_0/0/stderr.log", TB)
    return [str(d / "run")]


def big_error_json(d: Path) -> list[str]:
    _log(d, "run/attempt_0/0/error.json", '{"message": {"message": "' + "x" * (100 * 1024 * 1024) + '"}}')
    _log(d, "run/attempt_0/0/stderr.log", TB)
    return ["--timeout", "1", str(d / "run")]


def many_files(d: Path) -> list[str]:
    top = d / "many"
    for i in range(200):
        sub = top / f"s{i:03d}"
        sub.mkdir(parents=True)
        for j in range(1000):
            (sub / f"r{j}.log").write_bytes(b"x\n")
    _log(top, "s000/r0.log", TB)
    return ["--timeout", "1", str(top)]


def wrong_type_pattern(d: Path) -> list[str]:
    _log(d, "pat/p.toml", 'category = "oom"\n[[pattern]]\nid = "mine.x"\nrole = "root"\nregex = 5\ntitle = "t"\n'
                          'why = "w"\nremediation = ["r"]\nexamples = ["e"]\n')
    return ["--patterns", str(d / "pat"), str(_log(d, "a.log", TB))]


def catastrophic_pattern(d: Path) -> list[str]:
    _log(d, "pat/p.toml", 'category = "python"\n[[pattern]]\nid = "mine.slow"\nrole = "root"\nregex = \'(a|aa)+$\'\n'
                          'title = "t"\nwhy = "w"\nremediation = ["r"]\nexamples = ["aa"]\n')
    return ["--patterns", str(d / "pat"), str(_log(d, "a.log", TB + "a" * 5000 + "!\n"))]


def fifo_pattern(d: Path) -> list[str]:
    (d / "pat").mkdir()
    os.mkfifo(d / "pat" / "f.toml")
    return ["--patterns", str(d / "pat"), str(_log(d, "a.log", TB))]


def dev_zero_pattern(d: Path) -> list[str]:
    (d / "pat").mkdir()
    (d / "pat" / "z.toml").symlink_to("/dev/zero")
    return ["--patterns", str(d / "pat"), str(_log(d, "a.log", TB))]


def centuries_timeline(d: Path) -> list[str]:
    _log(d, "a.log", "0001-01-01 00:00:00 [rank0]: start\n0001-01-01 00:00:01 [rank0]: RuntimeError: a\n")
    _log(d, "b.log", "9999-12-31 23:59:59 [rank1]: still here\n")
    return ["--html", str(d / "r.html"), str(d / "a.log"), str(d / "b.log")]


def secrets_everywhere(d: Path) -> list[str]:
    lines = [f"[rank0]: using {SECRETS['openai']} {SECRETS['gitlab']} {SECRETS['google']}",
             f"[rank0]: DefaultEndpointsProtocol=https;AccountName=a;AccountKey={SECRETS['azure']};EndpointSuffix=x",
             f"[rank0]: wandb.login(key=\"{SECRETS['wandb']}\")",
             "[rank0]: -----BEGIN PRIVATE KEY-----", f"[rank0]: {SECRETS['pem']}", "[rank0]: -----END PRIVATE KEY-----",
             f"[rank0]: RuntimeError: 401 for {SECRETS['openai']}"]
    return ["--html", str(d / "r.html"), "--json-out", str(d / "out"), "--jsonl", str(d / "all.jsonl"),
            str(_log(d, "a.log", "\n".join(lines) + "\n"))]


def control_characters(d: Path) -> list[str]:
    return ["--format", "markdown", str(_log(d, f"x{CONTROL[:3]}.log", f"[rank0]: RuntimeError: {CONTROL}\n{TB}"))]


def torn_jsonl(d: Path) -> list[str]:
    _log(d, "all.jsonl", json.dumps({"status": "failed"}) + '\n{"status": "fai')
    return ["--jsonl", str(d / "all.jsonl"), str(_log(d, "a.log", TB))]


def jsonl_symlink(d: Path) -> list[str]:
    _log(d, "victim", "keep\n")
    (d / "all.jsonl").symlink_to(d / "victim")
    return ["--jsonl", str(d / "all.jsonl"), str(_log(d, "a.log", TB))]


CASES = [
    Case("huge rank in a prefix", huge_rank_prefix, (0, 1)),
    Case("huge rank in file names", huge_rank_file_names, (0, 1)),
    Case("1000 nested folders", deep_folders, (1,)),
    Case("deeply nested error.json", deep_error_json, (1,)),
    Case("100 MB error.json with --timeout 1", big_error_json, (1,), bound_s=20, slow=True),
    # exit 2 when the deadline passes before the first line is read (nothing was read to judge)
    Case("200,000 files with --timeout 1", many_files, (0, 1, 2), bound_s=30, slow=True),
    Case("pattern file with a wrong type", wrong_type_pattern, (2,), expect="pattern mine.x: key 'regex'"),
    Case("catastrophic user regex", catastrophic_pattern, (2,), expect="backtracks"),
    Case("pattern file that is a FIFO", fifo_pattern, (2,), bound_s=20, expect="not a regular file"),
    Case("pattern file linked to /dev/zero", dev_zero_pattern, (2,), bound_s=20, expect="not a regular file"),
    Case("timeline spanning 8,000 years", centuries_timeline, (1,), extra={"html_max_bytes": 200_000}),
    Case("secrets in every output", secrets_everywhere, (1,)),
    Case("control characters", control_characters, (1,)),
    Case("torn last JSONL line", torn_jsonl, (1,), extra={"jsonl_records": 2}),
    Case("JSONL path is a symlink", jsonl_symlink, (2,), expect="symbolic link", extra={"victim": "keep\n"}),
]
