"""SIGKILL reports and the records of the kills they speak of: a report (`Killed`, exit code -9, mp.spawn's
SIGKILL) says only that a process was killed; the kernel's, a cgroup's or SLURM's record of an OOM kill says why."""
from __future__ import annotations

import regex

from diagnose.model import Event

# reports that a process died of SIGKILL, which say nothing of who sent it
KILL_REPORTS = ("host_oom.torchrun_sigkill", "host_oom.childfailed_sigkill", "host_oom.shell_killed",
                "host_oom.killed_line", "host_oom.srun_task_killed", "host_oom.mpi_sigkill",
                # Ray's driver reports a worker's death before the worker's own last words reach the log
                "host_oom.ray_worker_system_error")
# the records of an OOM kill itself (the kernel's, a cgroup's, SLURM's, a container runtime's)
KILL_RECORDS = ("host_oom.kernel_oom_killer", "host_oom.slurm_cgroup_oom", "host_oom.srun_out_of_memory",
                "host_oom.container_oom_killed", "host_oom.ray_memory_monitor")
_KILLED_PID = regex.compile(r"\bKilled process (\d+)")
_REPORTED_PID = regex.compile(r"\b(?:pid|PID)[:=]?\s*(\d+)")
# a process the job runs (the kernel's record names the process it killed, which may be another's)
_JOB_PROCESS = regex.compile(r"\bKilled process \d+ \((?:python[\w.]*|pt_\w+|torchrun|deepspeed|accelerate|ray::[^)]*)\)")
_RECORD_BEFORE = 3600  # seconds: a kill recorded longer before the report is another's


def explains(record: Event, report: Event) -> bool:
    """Can this OOM-kill record be the kill the SIGKILL report speaks of: the same pid where both name one, a
    process of the job's kind where the kernel names it, a time just before the report where both have one."""
    killed, reported = _KILLED_PID.search(record.message), _REPORTED_PID.search(report.message)
    if killed and reported:
        return killed[1] == reported[1]
    if record.pattern == "host_oom.kernel_oom_killer" and killed and not _JOB_PROCESS.search(record.message):
        return False
    if record.time is not None and report.time is not None:
        return 0 <= (report.time - record.time).total_seconds() <= _RECORD_BEFORE
    return True


def kill_cause(report: Event, tier: list[Event], lines: list[Event]) -> Event:
    """The event that names why the reported process was killed: another of the report's kind in its tier
    (an OOM-kill event), else an OOM-kill record among the lines (dmesg beside the job's log); else the report."""
    cause = [e for e in tier if e.category == report.category and e.pattern not in KILL_REPORTS
             and (e.pattern not in KILL_RECORDS or explains(e, report))]
    cause = cause or sorted((e for e in lines if e.pattern in KILL_RECORDS and explains(e, report)), key=lambda e: e.order)
    return cause[0] if cause else report
