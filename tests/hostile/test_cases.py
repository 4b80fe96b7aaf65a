"""Each crafted input of cases.py through the real command: its exit code, never an internal error or
a traceback, no secret and no raw control character in any output, within its time bound."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .cases import CASES, SECRETS

ROOT = Path(__file__).resolve().parents[2]
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200b-\u200f\ufeff]")


def _outputs(folder: Path) -> list[str]:
    out = []
    for p in [*folder.glob("*"), *folder.glob("out/*")]:  # where the cases write (no deep walk)
        if p.is_file() and not p.is_symlink() and p.suffix in (".html", ".json", ".jsonl") and p.stat().st_size < 50e6:
            out.append(p.read_text(errors="replace"))
    return out


@pytest.mark.parametrize("case", [pytest.param(c, marks=[pytest.mark.slow] if c.slow else [], id=c.name) for c in CASES])
def test_hostile_case(case, tmp_path):
    args = case.build(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "diagnose.cli.main", *args], capture_output=True, text=True,
                       errors="replace", env=env, timeout=case.bound_s + 60, cwd=tmp_path, stdin=subprocess.DEVNULL)
    took = time.monotonic() - t0
    if (tmp_path / "deep").exists():  # 1000 levels: more than pytest's recursive clean-up can remove
        subprocess.run(["rm", "-rf", str(tmp_path / "deep")], check=False)
    text = r.stdout + r.stderr
    assert r.returncode in case.exits, (r.returncode, text[-3000:])
    assert "internal error" not in text and "Traceback (most recent call last):\n  File \"/" not in r.stderr, text[-3000:]
    assert took < case.bound_s, f"{case.name}: {took:.1f} s"
    if case.expect:
        assert case.expect in text, text[-3000:]
    if r.returncode == 2:
        assert r.stderr.startswith("mdiag: error: ") and r.stderr.count("\n") == 1, r.stderr
    for out in [text, *_outputs(tmp_path)]:
        for kind, secret in SECRETS.items():
            assert secret[10:] not in out, (kind, out[:2000])
        m = RAW_CONTROL.search(out)
        assert m is None, (hex(ord(m.group(0))), out[max(0, m.start() - 80):m.end() + 80])
    if "html_max_bytes" in case.extra:
        assert (tmp_path / "r.html").stat().st_size < case.extra["html_max_bytes"]
    if "jsonl_records" in case.extra:
        from diagnose.render.outputs import read_jsonl

        docs, bad = read_jsonl(tmp_path / "all.jsonl")
        assert len(docs) == case.extra["jsonl_records"] and bad == 1
    if "victim" in case.extra:
        assert (tmp_path / "victim").read_text() == case.extra["victim"]
