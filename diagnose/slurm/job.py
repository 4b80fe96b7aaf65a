"""SLURM: find a job's logs from its id and add what SLURM knows about the job to a diagnosis.

`scontrol show job ID` gives StdOut, StdErr, WorkDir (and, while the job is still in slurmctld's
memory, JobState, ExitCode, RunTime, NodeList); `sacct` gives State, ExitCode, Elapsed, NodeList
when accounting is on.  Without SLURM commands (or when they don't answer) the logs are found
under a folder by the job id in their names (`%j`), including per-task / per-node files.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field, fields
from pathlib import Path

from diagnose.model import Diagnosis, RootCause, SlurmFacts

QUERY_TIMEOUT_S = 15
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=")
_JOBID = re.compile(r"^\d+(?:_\d+)?$")
_LOG_SUFFIXES = (".err", ".out", ".log", ".txt", ".gz", ".json")
# scontrol/sacct State → category when the logs name no root cause
STATE_CATEGORY = {
    "TIMEOUT": "slurm", "DEADLINE": "slurm", "NODE_FAIL": "slurm", "PREEMPTED": "slurm",
    "BOOT_FAIL": "slurm", "CANCELLED": "slurm", "REVOKED": "slurm", "OUT_OF_MEMORY": "host_oom",
}
STATE_WHY = {
    "TIMEOUT": ("The job ran past its --time limit and SLURM ended it.",
                ["Raise --time, or save checkpoints more often and resubmit from the last one "
                 "(Megatron: --exit-duration-in-mins / --exit-signal-handler)."]),
    "DEADLINE": ("The job reached its --deadline and SLURM ended it.", ["Submit with a later --deadline."]),
    "NODE_FAIL": ("A node of the job failed (lost contact with slurmctld, or was drained).",
                  ["Resubmit excluding the node (--exclude) and tell the administrators."]),
    "PREEMPTED": ("A higher-priority job preempted this one.", ["Resubmit, or use --requeue with checkpoints."]),
    "BOOT_FAIL": ("A node of the job failed to boot.", ["Resubmit; tell the administrators."]),
    "CANCELLED": ("The job was cancelled (scancel, or by an administrator) before the logs show a failure.",
                  ["Check who cancelled it (sacct -j ID -o State,User) and why."]),
    "REVOKED": ("A federated sibling job started elsewhere and this one was revoked.", []),
    "OUT_OF_MEMORY": ("SLURM's memory limit (cgroup) killed the job: host RAM, not GPU memory.",
                      ["Ask for more memory (--mem / --mem-per-cpu) or lower data-loader workers / "
                       "prefetching and pinned-memory buffers."]),
}


@dataclass
class JobInfo(SlurmFacts):
    """SlurmFacts (what reports carry as `slurm`) and what the lookup needs besides."""

    name: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(SlurmFacts)}


def is_job_id(arg: str) -> bool:
    """A bare job id (digits, or an array task `1234_5`) that is not an existing path."""
    return bool(_JOBID.match(arg)) and not os.path.exists(arg)


def _run(cmd: list[str]) -> tuple[int, str, str]:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, "", str(exc)
    return r.returncode, r.stdout, r.stderr


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:160] if lines else ""


def parse_scontrol(text: str) -> dict[str, str]:
    """`scontrol show job` output (multi-line or -o one-line) → {key: value}; values may hold spaces."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        keys = list(_KEY.finditer(line))
        for i, m in enumerate(keys):
            end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
            out.setdefault(m.group(1), line[m.end():end].strip())
    return out


def parse_sacct(text: str, job_id: str) -> dict[str, str] | None:
    """`sacct -P -n -o JobID,State,ExitCode,Elapsed,NodeList,JobName` → the job's own (allocation) row."""
    rows = [line.split("|") for line in text.splitlines() if line.strip()]
    for row in rows:
        if len(row) >= 5 and row[0] == job_id:
            keys = ("job_id", "state", "exit_code", "elapsed", "node_list", "name")
            return {k: v for k, v in zip(keys, row)}
    return None


def _state(s: str | None) -> str | None:
    if not s or s in ("None", "(null)"):
        return None
    return s.split()[0].rstrip("+")


def _val(v: str | None) -> str | None:
    return None if v in (None, "", "(null)", "None", "N/A", "Unknown") else v


def query(job_id: str, use_slurm: bool = True) -> JobInfo:
    """What SLURM says about the job: scontrol for paths (and state), sacct for state when it answers."""
    info = JobInfo(job_id=job_id)
    failures: list[str] = []
    if use_slurm and not (shutil.which("scontrol") or shutil.which("sacct")):
        info.warnings.append("SLURM commands (scontrol, sacct) not found: looking for the job's logs by name only")
        use_slurm = False
    if use_slurm:
        rc, out, err = _run(["scontrol", "show", "job", job_id]) if shutil.which("scontrol") else (127, "", "")
        if rc == 0 and "JobId=" in out:
            kv = parse_scontrol(out)
            info.std_out, info.std_err = _val(kv.get("StdOut")), _val(kv.get("StdErr"))
            info.work_dir, info.name = _val(kv.get("WorkDir")), _val(kv.get("JobName"))
            info.state, info.exit_code = _state(kv.get("JobState")), _val(kv.get("ExitCode"))
            info.elapsed, info.node_list = _val(kv.get("RunTime")), _val(kv.get("NodeList"))
            info.source = "scontrol"
        elif shutil.which("scontrol"):
            failures.append(f"scontrol: {_first_line(err or out) or f'exit {rc}'}")
        if shutil.which("sacct"):
            rc, out, err = _run(["sacct", "-j", job_id, "-X", "-n", "-P",
                                 "-o", "JobID,State,ExitCode,Elapsed,NodeList,JobName"])
            row = parse_sacct(out, job_id) if rc == 0 else None
            if row:
                info.state, info.exit_code = _state(row["state"]), _val(row["exit_code"])
                info.elapsed, info.node_list = _val(row["elapsed"]), _val(row["node_list"])
                info.name = info.name or _val(row.get("name"))
                info.source = "sacct"
            elif rc != 0:
                failures.append(f"sacct: {_first_line(err or out) or f'exit {rc}'}")
        if info.source is None and failures:
            info.warnings.append(f"SLURM did not answer for job {job_id} ({'; '.join(failures)}): "
                                 "looking for the job's logs by name only")
        elif info.source == "scontrol" and failures:
            info.warnings.append(f"sacct did not answer for job {job_id} ({failures[-1]}): state from scontrol")
    if info.source is None:
        env_state = from_environment(job_id)
        if env_state:
            info.exit_code, info.node_list, info.source = env_state
    return info


def from_environment(job_id: str) -> tuple[str | None, str | None, str] | None:
    """Inside a SLURM Epilog: SLURM_JOB_EXIT_CODE2 ({exit}:{signal}) and the node list of this job."""
    if os.environ.get("SLURM_JOB_ID") != job_id or "SLURM_JOB_EXIT_CODE2" not in os.environ:
        return None
    return (os.environ.get("SLURM_JOB_EXIT_CODE2"),
            os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST"), "environment")


def _carries(name: str, job_id: str) -> bool:
    return re.search(rf"(?<![0-9]){re.escape(job_id)}(?![0-9])", name) is not None


def find_by_name(job_id: str, folder: Path, max_depth: int = 3) -> list[Path]:
    """Files (and folders, e.g. torchrun --log-dir trees) under `folder` whose names carry the job id."""
    found: list[Path] = []
    folder = Path(folder)
    if not folder.is_dir():
        return found
    base = len(folder.parts)
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        depth = len(Path(root).parts) - base
        hit = [d for d in dirs if _carries(d, job_id)]
        found.extend(Path(root) / d for d in hit)
        dirs[:] = [d for d in dirs if d not in hit and not d.startswith(".")] if depth < max_depth else []
        found.extend(Path(root) / n for n in sorted(names)
                     if _carries(n, job_id) and n.endswith(_LOG_SUFFIXES))
    return found


def _expand_pattern(path: str, info: JobInfo) -> list[Path]:
    """A StdOut/StdErr path; a leftover %-pattern (%t, %N, ...) becomes a glob."""
    if "%" not in path:
        return [Path(path)] if Path(path).exists() else []
    p = path.replace("%%", "\0").replace("%j", info.job_id).replace("%J", info.job_id)
    p = p.replace("%A", info.job_id.split("_")[0]).replace("%x", info.name or "*")
    p = re.sub(r"%\d*[a-zA-Z]", "*", p).replace("\0", "%")
    import glob

    return [Path(m) for m in sorted(glob.glob(p))]


def find_logs(info: JobInfo, folder: str | Path | None = None) -> tuple[list[Path], list[str]]:
    """The job's log files: StdOut/StdErr (and per-task files next to them or in WorkDir), else by name."""
    paths: list[Path] = []
    warnings: list[str] = []
    for p in (info.std_err, info.std_out):
        if p:
            paths += _expand_pattern(p, info)
    places = [Path(folder)] if folder else []
    if info.work_dir:
        places += [Path(info.work_dir), Path(info.work_dir) / "logs"]
    places += [p.parent for p in paths]
    if not places:
        places = [Path("logs")]
    seen_places = set()
    for place in places:
        key = place.resolve() if place.exists() else place
        if key in seen_places:
            continue
        seen_places.add(key)
        paths += find_by_name(info.job_id, place)
    out, seen = [], set()
    for p in paths:
        # a folder found by name that holds an already-listed file is listed once
        key = p.resolve()
        if key in seen or any(parent in seen for parent in key.parents):
            continue
        seen.add(key)
        out.append(p)
    if not out:
        where = ", ".join(str(p) for p in dict.fromkeys(places))
        warnings.append(f"job {info.job_id}: no log files found (looked in {where})")
    return out, warnings


def apply(d: Diagnosis, info: JobInfo) -> Diagnosis:
    """Attach the SLURM facts to the diagnosis; the job State decides the category when the logs are silent."""
    d.slurm = info.to_dict()
    d.warnings.extend(w for w in info.warnings if w not in d.warnings)
    category = STATE_CATEGORY.get(info.state or "")
    weak = d.root_cause is None or d.root_cause.category == "unknown"
    if category and weak:
        why, todo = STATE_WHY.get(info.state, ("", []))
        facts = ", ".join(f"{k} {v}" for k, v in (("ExitCode", info.exit_code), ("Elapsed", info.elapsed),
                                                   ("NodeList", info.node_list)) if v)
        msg = f"SLURM job {info.job_id} ended in state {info.state}" + (f" ({facts})" if facts else "")
        title = {"TIMEOUT": "Time limit", "OUT_OF_MEMORY": "Host out of memory (SLURM cgroup)",
                 "NODE_FAIL": "Node failure"}.get(info.state, f"SLURM {info.state.lower()}")
        host = info.node_list if info.node_list and "," not in info.node_list and "[" not in info.node_list else None
        d.root_cause = RootCause(
            category=category, pattern=f"slurm-state-{info.state.lower().replace('_', '-')}",
            summary=f"{title}: job {info.job_id} (SLURM State {info.state})", message=msg, evidence=None,
            host=host, title=title, why=why, remediation=todo,
            details={"slurm_state": info.state, "from": info.source or "slurm"},
        )
        d.status = "failed"
    return d


def diagnose_job(job_id: str, paths: list[str], pattern_dirs=(), use_slurm: bool = True, timeout: float | None = None) -> Diagnosis:
    """`mdiag JOBID [DIR|FILES]`: find the job's logs, diagnose them, add SLURM's facts.

    Files named explicitly are read as they are; a folder is searched for names carrying the job id
    (default: the job's StdOut/StdErr/WorkDir from scontrol, else ./logs).  Raises collect.InputError
    when neither logs nor a job state can be found.
    """
    from diagnose.read.collect import InputError
    from diagnose.pipeline import diagnose

    info = query(job_id, use_slurm and os.environ.get("MDIAG_SLURM_QUERY", "1") != "0")
    files = [p for p in paths if Path(p).is_file()]
    folders = [p for p in paths if not Path(p).is_file()]
    warnings: list[str] = []
    if paths and not folders:
        logs: list = list(files)
    else:
        logs, warnings = find_logs(info, folders[0] if folders else None)
        logs = [*files, *logs]
    if logs:
        d = diagnose([str(p) for p in logs], pattern_dirs=pattern_dirs, timeout=timeout)
    elif info.state:
        d = Diagnosis(status="no_failure_found", root_cause=None, symptoms=[], ranks=[], sources=[])
    else:
        why = "; ".join([*info.warnings, *warnings]) or "nothing found"
        raise InputError(f"job {job_id}: no logs and no job state found ({why})")
    d.warnings.extend(warnings)
    return apply(d, info)
