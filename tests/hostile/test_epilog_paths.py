"""The Epilog finds a job's logs whatever characters their paths hold, and runs none of them as code."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from diagnose.slurm import hook as hook_mod


def _run_epilog(tmp_path: Path, jid: str, **env) -> list[str]:
    """The Epilog with a stand-in mdiag that records its arguments; returns them."""
    seen = tmp_path / "seen"
    mdiag = tmp_path / "bin" / "mdiag"
    mdiag.parent.mkdir()
    mdiag.write_text(f'#!/bin/bash\n[ "$1" = hook ] && exit 0\nprintf "%s\\n" "$@" > {seen}\nexit 0\n')
    mdiag.chmod(0o755)
    script = tmp_path / "epilog.sh"
    script.write_text(hook_mod.epilog(timeout=5, out=str(tmp_path / "rep"), mdiag=str(mdiag)))
    full = {"SLURM_JOB_ID": jid, "SLURM_JOB_EXIT_CODE": "256", "PATH": "/usr/bin:/bin", **env}
    import os

    full.update(SLURM_JOB_UID=str(os.getuid()), SLURM_JOB_GID=str(os.getgid()))
    assert subprocess.run(["/bin/bash", str(script)], env=full, timeout=60).returncode == 0
    return seen.read_text().splitlines() if seen.exists() else []


@pytest.mark.parametrize("folder", ["my dir*", "run[1]", "what?", "back\\slash", "$(touch PWNED)", "`id`"])
def test_epilog_reads_a_log_whose_path_has_glob_or_shell_characters_and_no_pattern(tmp_path, folder):
    """A path with no %-pattern left is the file itself, even with `*`, `?`, `[` or `\\` in it."""
    work = tmp_path / folder
    work.mkdir()
    (work / "slurm-4.out").write_text("RuntimeError: x\n")
    args = _run_epilog(tmp_path, "4", SLURM_JOB_WORK_DIR=str(work), SLURM_JOB_STDOUT="slurm-%j.out")
    assert args and args[-1] == str(work / "slurm-4.out")
    assert not list(tmp_path.rglob("PWNED")) and not (Path.cwd() / "PWNED").exists()
