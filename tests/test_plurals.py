"""Counts read right in every output: 1 report, 1 failure, 1 line, 1 file, 1 occurrence."""
import json

from click.testing import CliRunner

from diagnose import diagnose
from diagnose.cli.main import main
from diagnose.render.html import render_html
from diagnose.render.report import detail_lines, to_dict

from .conftest import SAMPLES


def test_one_report_is_one_report_and_one_failure(tmp_path):
    doc = to_dict(diagnose([str(SAMPLES / "megatron-1234.err")]), job_id="1234")
    (tmp_path / "1234.json").write_text(json.dumps(doc))
    res = CliRunner().invoke(main, ["fleet", str(tmp_path)], env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert res.exit_code == 0, res.output
    head = res.stdout.splitlines()[0]
    assert "· 1 report · 1 failure" in head and "reports" not in head and "failures" not in head


def test_one_line_one_file_and_one_occurrence():
    assert "same error on rank 3 (1 occurrence)" in detail_lines({"also_on_ranks": [3], "occurrences": 1})
    doc = {"root_cause": None, "sources": [{"file": "a.log", "lines": 1}], "ranks": [], "symptoms": []}
    html = render_html(doc)
    assert "read 1 line from 1 file" in html and "file(s)" not in html and "1 lines" not in html
