"""Plain data handed from one pipeline stage to the next."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path


@dataclass
class Source:
    """One input file and what its path says about the output it holds."""

    index: int
    path: Path
    display: str  # the path as shown in evidence (relative to what the user named)
    layout: str  # merged | per-rank | torchrun-logdir | error-json
    stream: str | None = None  # stdout | stderr
    local_rank: int | None = None  # from torchrun's attempt_N/<local_rank>/
    attempt: int | None = None
    task: int | None = None  # srun %t
    node: str | None = None  # srun %N
    lines: int = 0


@dataclass
class Evidence:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Frame:
    file: str
    line: int
    func: str
    code: str | None = None


@dataclass
class TracebackBlock:
    """One `Traceback (most recent call last):` block (or its tail, when cut off above)."""

    start: int  # line number of the header or first frame
    frames: list[Frame] = field(default_factory=list)
    exception: str | None = None  # the final `Type: message` line, None when cut off
    exception_line: int | None = None
    continuation: list[tuple[int, str]] = field(default_factory=list)  # further message lines
    text: list[str] = field(default_factory=list)  # the block as printed, prefixes stripped
    truncated: bool = False


@dataclass
class Event:
    """Something that went wrong (or is a symptom of it), at one place in the logs."""

    kind: str  # traceback | line | error_file
    category: str
    pattern: str
    role: str  # root | symptom | context
    message: str
    evidence: Evidence
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    time: datetime | None = None
    order: tuple = ()
    blocks: list[TracebackBlock] = field(default_factory=list)
    details: dict = field(default_factory=dict)

    @property
    def is_comm(self) -> bool:
        return self.category == "nccl"


@dataclass
class RootCause:
    category: str
    pattern: str
    summary: str
    message: str
    evidence: Evidence | None
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    time: datetime | None = None
    traceback: list[str] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    title: str = ""
    why: str = ""
    remediation: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    confidence: str = "high"  # high: a named failure | medium: generic or communication | low: likeliest line only


@dataclass
class Symptom:
    category: str
    pattern: str
    title: str
    message: str
    ranks: list[int]
    count: int
    first_time: datetime | None
    evidence: Evidence


@dataclass
class RankSummary:
    rank: int
    host: str | None = None
    last_time: datetime | None = None
    first_error_time: datetime | None = None
    category: str | None = None


@dataclass
class Diagnosis:
    status: str  # failed | no_failure_found
    root_cause: RootCause | None
    symptoms: list[Symptom]
    ranks: list[RankSummary]
    sources: list[Source]
    job: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    partial: bool = False  # --timeout fired: not everything was read (warnings say what)
    summarised: bool = False  # repeated matching lines were counted, not each analysed (scan's caps)
    summarised_lines: int = 0  # how many
    slurm: dict | None = None  # what SLURM says about the job (mdiag JOBID): state, exit code, elapsed, nodes
