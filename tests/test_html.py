"""--html: one self-contained file with the root-cause panel and a per-rank timeline, checked in Chromium."""
from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from diagnose import diagnose
from diagnose.cli.main import main
from diagnose.render.html import MAX_RANK_LANES, lanes, render_html
from diagnose.render.report import to_dict

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"
ARTIFACTS = ROOT / "test-artifacts"  # git-ignored; CI can upload it


@pytest.fixture(scope="module")
def doc():
    return to_dict(diagnose([SAMPLES / "megatron-1234.err"]))


def _root_lanes(html: str) -> list[str]:
    return re.findall(r'<g class="lane root" data-(?:rank|node)="([^"]*)" data-root="true"', html)


def test_html_is_self_contained_and_marks_the_root_rank(tmp_path, doc):
    out = tmp_path / "report.html"
    r = CliRunner().invoke(main, ["--html", str(out), str(SAMPLES / "megatron-1234.err")])
    assert r.exit_code == 1, r.output
    assert "CUDA out of memory" in r.output  # the terminal report still prints
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "<style>" in html
    assert not re.search(r"<(script|link|iframe|img)\b", html, re.I)
    assert not re.search(r"""(src|href)\s*=|url\(|@import""", html, re.I)
    assert "default-src 'none'" in html  # the CSP forbids any fetch
    assert _root_lanes(html) == ["3"]
    assert html.count('data-root="true"') == 1
    assert 'class="symptom"' in html  # the cascade is drawn
    assert "Cascade" in html and "A peer closed the connection" in html


def test_log_text_is_escaped(doc):
    d = copy.deepcopy(doc)
    d["root_cause"]["message"] = '<script>alert(1)</script> "quoted" & <img src=x onerror=y>'
    d["symptoms"][0]["title"] = "</svg><b>x</b>"
    d["ranks"][0]["host"] = '"><script>'
    html = render_html(d)
    assert "<script>" not in html and "<img" not in html and "</svg><b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &quot;quoted&quot; &amp;" in html


def test_node_lanes_when_there_are_many_ranks(doc):
    d = copy.deepcopy(doc)
    d["root_cause"]["rank"], d["root_cause"]["host"] = 77, "node09"
    d["job"]["world_size"] = 128
    d["ranks"] = [{"rank": i, "host": f"node{i // 8:02d}", "last_time": "2026-12-02T14:27:30",
                   "first_error_time": "2026-12-02T14:27:40" if i == 77 else "2026-12-02T14:27:45",
                   "category": "cuda" if i == 77 else "nccl"} for i in range(128)]
    kind, ls = lanes(d)
    assert kind == "node" and len(ls) == 16 and len(d["ranks"]) > MAX_RANK_LANES
    html = render_html(d)
    assert _root_lanes(html) == ["node09"]
    assert "node09 · ranks 72–79" in html


def test_no_failure_html():
    html = render_html(to_dict(diagnose([SAMPLES / "clean-run.log"])))
    assert "No failure found" in html and 'data-root="true"' not in html


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium not installed (CI: apt-get install -y chromium)")
def test_rendered_in_headless_chromium(tmp_path, doc):
    page = tmp_path / "report.html"
    page.write_text(render_html(doc))
    base = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}"]
    env = dict(os.environ, HOME=str(tmp_path))
    dom = subprocess.run(base + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=90, env=env)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert _root_lanes(dom.stdout) == ["3"], dom.stdout[:2000]
    assert "rank 3 · localhost ◀ root cause" in dom.stdout
    shot = tmp_path / "timeline.png"
    run = subprocess.run(base + [f"--screenshot={shot}", "--window-size=1200,800", page.as_uri()],
                         capture_output=True, text=True, timeout=90, env=env)
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a real picture, not a blank page
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "timeline-megatron-1234.png")
