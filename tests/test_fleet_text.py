"""`mdiag fleet` in a narrow terminal: one line per row, no column shrunk to nothing."""
import json

from click.testing import CliRunner

from diagnose import diagnose
from diagnose.cli.main import main
from diagnose.render.report import to_dict

from .conftest import SAMPLES


def test_narrow_terminal_keeps_every_column_and_one_line_per_row(tmp_path):
    doc = to_dict(diagnose([str(SAMPLES / "megatron-1234.err")]), job_id="1234")
    for job in ("1234", "1235", "1236"):
        (tmp_path / f"{job}.json").write_text(json.dumps({**doc, "job_id": job}))
    for cols in (60, 80):
        res = CliRunner().invoke(main, ["fleet", str(tmp_path)], env={"COLUMNS": str(cols), "NO_COLOR": "1"})
        assert res.exit_code == 0, res.output
        table = res.stdout.split("Top fingerprints")[1].split("└")[0].splitlines()[1:]
        assert all(len(ln) <= cols for ln in table), (cols, table)
        assert not any("┳┳" in ln or "││" in ln for ln in table), (cols, table)  # no column of width 0
        (row,) = [ln for ln in table if ln.startswith("│")]
        assert row.split("│")[2].strip() == "3", row  # the count, whole
