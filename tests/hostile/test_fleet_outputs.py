"""`mdiag fleet` over reports that were not redacted (written with --no-redact, by hand or by an older
mdiag): no secret and no raw control character in any table, file or line it writes."""
from __future__ import annotations

import json
import re
import stat

from click.testing import CliRunner

from diagnose.cli.main import main

# real-format fakes, never real secrets
GHP = "ghp_" + "Zq7Lm2Xw9Kd4Rt6Yp1Vb8Nc3Hs5Jf0Ga2Ue"
HF = "hf_" + "QmWnEbRvTcYxUzIaOsPdLfKgJhGt4321ab"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"
CTRL = "\x1b]52;c;cHduZWQ=\x07\x9b31m\u202egnp.exe\u200b\x85"
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def _reports(path):
    with open(path, "w") as f:
        for i, secret in enumerate((GHP, HF, JWT)):
            f.write(json.dumps({
                "status": "failed", "job_id": f"=HYPERLINK(\"http://x/{secret}\"){CTRL}",
                "root_cause": {"category": f"-2+3{CTRL}", "pattern": f"@{secret}", "title": f"\t=cmd {secret} {CTRL}",
                               "host": f"+node{i}{CTRL}", "time": "2026-12-01T00:00:00Z", "fingerprint": f"={secret}",
                               "message": f"token {secret}"},
                "ranks": [{"host": f"@node{i}{CTRL}"}],
                "slurm": {"JobId": f"={i}+1{CTRL}", "NodeList": f"node{i}", "Elapsed": "01:00:00", "NNodes": "1"}}) + "\n")


def _clean(text: str, where: str):
    for secret in (GHP, HF, JWT):
        assert secret not in text, (where, secret)
    assert not RAW.search(text), (where, RAW.search(text).group(0))


def test_fleet_outputs_are_redacted_and_inert(tmp_path):
    _reports(tmp_path / "all.jsonl")
    for extra in ([], ["--json"], ["--csv", tmp_path / "csv", "--prom", tmp_path / "m.prom"]):
        r = CliRunner().invoke(main, ["fleet", *map(str, extra), str(tmp_path / "all.jsonl")])
        assert r.exit_code == 0, r.output
        _clean(r.output, f"stdout {extra}")
    for f in [*(tmp_path / "csv").iterdir(), tmp_path / "m.prom"]:
        _clean(f.read_text(), f.name)
    for f in (tmp_path / "csv").iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o640, f.name
    fp = (tmp_path / "csv" / "fingerprints.csv").read_text()
    assert "'=ghp_<redacted>" in fp and "'-2+3\\x1b]52" in fp and "\\u202e" in fp


def test_fleet_warnings_are_inert(tmp_path):
    _reports(tmp_path / "all.jsonl")
    bad = tmp_path / f"x{CTRL}.json"
    bad.write_text("{not json")
    r = CliRunner().invoke(main, ["fleet", str(tmp_path)])
    _clean(r.output, "output")


def test_fleet_exports_replace_links_and_never_overwrite_a_device(tmp_path):
    _reports(tmp_path / "all.jsonl")
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "by_category.csv").symlink_to(victim)
    (tmp_path / "m.prom").symlink_to(victim)
    r = CliRunner().invoke(main, ["fleet", "--csv", str(tmp_path / "csv"), "--prom", str(tmp_path / "m.prom"),
                                  str(tmp_path / "all.jsonl")])
    assert r.exit_code == 0, r.output
    assert victim.read_text() == "keep\n"
    assert not (tmp_path / "csv" / "by_category.csv").is_symlink() and not (tmp_path / "m.prom").is_symlink()
    assert stat.S_IMODE((tmp_path / "m.prom").stat().st_mode) == 0o644
