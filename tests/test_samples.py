"""The bundled sample logs (real torchrun runs) are diagnosed as labelled in sample_logs/expected.json."""
import json

import pytest

from diagnose import diagnose
from diagnose.render.report import to_dict

from .conftest import SAMPLES

EXPECTED = json.loads((SAMPLES / "expected.json").read_text())


def _norm(s):
    return " ".join((s or "").split())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample(name, validate):
    want = EXPECTED[name]
    d = diagnose([SAMPLES / name])
    validate(to_dict(d))
    if want["category"] is None:
        assert d.status == "no_failure_found"
        return
    r = d.root_cause
    assert r.category == want["category"]
    if want["root_rank"] is not None:
        assert r.rank == want["root_rank"]
    if want.get("root_message"):
        a, b = _norm(want["root_message"]), _norm(r.message)
        assert a in b or b in a, (a, b)
    assert r.evidence and r.evidence.line >= 1


# ---------------------------------------------------------------- the README's examples

README = SAMPLES.parent / "README.md"
README_SAMPLE = "sample_logs/megatron-1234.err"


def readme_sample() -> str:
    """The terminal report the README shows: 100 columns, no colour, the path as a user types it."""
    import io
    import os

    from rich.console import Console

    from diagnose.render.report import render

    here = os.getcwd()
    os.chdir(SAMPLES.parent)  # evidence paths as given on the command line
    try:
        d = diagnose([README_SAMPLE])
    finally:
        os.chdir(here)
    out = Console(file=io.StringIO(), width=100, no_color=True, color_system=None, highlight=False, soft_wrap=False)
    render(d, out)
    return "\n".join(line.rstrip() for line in out.file.getvalue().splitlines())


def check_readme_block(name: str, want: str) -> None:
    """The README's block between <!-- NAME:start --> and <!-- NAME:end --> is `want`
    (MDIAG_UPDATE_README=1 writes it instead)."""
    import os

    text = README.read_text(encoding="utf-8")
    head, rest = text.split(f"<!-- {name}:start -->\n", 1)
    have, tail = rest.split(f"<!-- {name}:end -->", 1)
    if os.environ.get("MDIAG_UPDATE_README"):
        README.write_text(f"{head}<!-- {name}:start -->\n{want}<!-- {name}:end -->{tail}", encoding="utf-8")
        return
    assert have == want, f"README {name} block drifted: MDIAG_UPDATE_README=1 python -m pytest tests/"


def test_readme_sample_output_is_what_the_code_prints():
    check_readme_block("sample", f"```\n$ mdiag {README_SAMPLE}\n{readme_sample()}\n```\n")


def test_readme_commands_are_the_ones_that_work():
    """The set-up lines at the top: a venv (PEP 668), the sample run, and the test command CI runs."""
    top = README.read_text(encoding="utf-8").split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert top[0].startswith("python3 -m venv .venv && . .venv/bin/activate && pip install . && mdiag sample_logs/")
    assert (SAMPLES.parent / top[0].split("mdiag ", 1)[1].split()[0]).is_file()
    ci = (SAMPLES.parent / ".ci" / "run").read_text()
    test_cmd = "pip install -e '.[test]' && python -m pytest"
    assert top[1] == f"python3 -m venv .venv && . .venv/bin/activate && {test_cmd}" and test_cmd in ci


def test_readme_trap_example_uses_the_timeouts_that_fit_killwait(monkeypatch):
    """The README's trap is what `mdiag hook --trap` prints where KillWait is SLURM's default 30 s:
    mdiag reads 25 s and is killed 30 s after the trap starts, never after SLURM's SIGKILL."""
    from click.testing import CliRunner

    from diagnose.cli.main import main

    monkeypatch.setenv("PATH", "/nonexistent")  # no scontrol: KillWait unknown, the defaults
    printed = CliRunner().invoke(main, ["hook", "--trap"]).stdout
    readme = README.read_text(encoding="utf-8").split("_mdiag_on_exit()", 1)[1].split("# --- end mdiag", 1)[0]
    for text in ("--timeout 25 ", "timeout -s KILL 30 bash -c "):
        assert text in printed and text in readme, text
    assert "--timeout 60" not in readme and "KILL 65" not in readme
