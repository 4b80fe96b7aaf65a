"""Plain data handed from one pipeline stage to the next."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal


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
    # logical line i + 1 → its physical line, where read/rejoin.py joined wrapped lines or dropped a
    # double-spaced paste's blanks; None: logical and physical numbers are the same
    line_map: list[int] | None = field(default=None, repr=False)


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
    introduced: bool = False  # printed under the previous block's message, which ends with a colon: its cause


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
    lead: str = ""  # the prefixes printed before the message, a launcher's rank label aside (normalize.Normalized.lead)

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
    text: str = ""  # the message alone, every prefix peeled (`message` is the line as printed, launcher labels aside)


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
    last_line: Evidence | None = None  # the rank's own last line in the logs (a straggler's shows where it stopped)
    last_message: str | None = None  # that line's message


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


# ---------------------------------------------------------------- the keys of Diagnosis.job and RootCause.details
# Both stay plain dicts holding only what the logs established (a key is absent when unknown); the classes
# below name every key, its type and meaning.  render/schema.json is generated from them and from the
# classes above (python -m diagnose.render.schema), so the schema says exactly what reports carry.


def doc(text: str, **schema):
    """A field's description (and extra JSON Schema keywords) for the generated schema."""
    return field(default=None, metadata={"description": text, **schema})


@dataclass
class Check:
    check: str = doc("the check's name")
    status: Literal["pass", "fail", "unknown"] = doc("pass, fail, or unknown when the logs lack a value it needs")
    detail: str = doc("what was compared, in words")


@dataclass
class LastIteration:
    iteration: int = doc("the last training iteration logged", minimum=0)
    of: int = doc("the run's train_iters", minimum=0)
    time: datetime | None = doc("when it was logged")
    nan_iterations: int | None = doc("Megatron's count of NaN iterations on that line", minimum=0)


@dataclass
class JobFacts:
    """What the logs say about the job (Diagnosis.job).  Besides these keys it holds the training arguments
    Megatron printed (analyze/context.py's ARG_KEYS: world_size, tensor_model_parallel_size, micro_batch_size,
    ...), each with the type it is parsed to."""

    cuda_device_max_connections: int | None = doc("CUDA_DEVICE_MAX_CONNECTIONS as the job printed it")
    gpu: str | None = doc("the GPU model named in the logs (H100, A100 ...)")
    launcher: str | None = doc("what started the workers: srun, torchrun or srun+torchrun")
    last_iteration: LastIteration | None = doc("the last `iteration N/ M |` progress line")
    inconsistent_arguments: dict[str, list[str]] | None = doc(
        "arguments that differ between the dumps printed by different nodes: name → the values seen")
    checks: list[Check] | None = doc("configuration checks and their outcome")
    ranks_without_output: str | None = doc("ranks of the world with no log file of their own ('3-5, 9')")


@dataclass
class Parallelism:
    tp: int | None = doc("tensor-parallel size")
    pp: int | None = doc("pipeline-parallel size")
    cp: int | None = doc("context-parallel size")
    dp: int | None = doc("data-parallel size")


@dataclass
class ChecklistItems:
    rank: int | None = doc("the rank that ran out of memory", minimum=0)
    phase: str | None = doc("the training phase it was in")
    micro_batch_size: int | None = doc("micro batch size")
    global_batch_size: int | None = doc("global batch size")
    seq_length: int | None = doc("sequence length")
    parallelism: Parallelism | None = doc("parallel sizes")
    peak_memory_mb: float | None = doc("the highest `max allocated` of Megatron's memory reports (MB)")


@dataclass
class Checklist:
    items: ChecklistItems = doc("the runbook's record of an out-of-memory failure; null where the logs lack it")
    missing: list[str] = doc("the items the logs do not give")


@dataclass
class OomFigures:
    tried_to_allocate: str | None = doc("the allocation that failed, as printed (`2.00 GiB`)")
    gpu: int | None = doc("the device index", minimum=0)
    total_capacity: str | None = doc("the device's memory")
    free: str | None = doc("free memory when it failed")
    in_use_by_process: str | None = doc("memory this process held")
    allocated_by_pytorch: str | None = doc("memory PyTorch had allocated")
    reserved_by_pytorch: str | None = doc("memory PyTorch had reserved")
    reserved_unallocated: str | None = doc("reserved by PyTorch but unallocated (fragmentation)")


@dataclass
class MemoryReport:
    after_iterations: int = doc("iterations run when it was printed", minimum=0)
    allocated_mb: float = doc("allocated (MB)")
    max_allocated_mb: float = doc("max allocated (MB)")
    reserved_mb: float = doc("reserved (MB)")
    max_reserved_mb: float = doc("max reserved (MB)")


@dataclass
class Progress:
    last_iteration: int = doc("the last iteration logged", minimum=0)
    train_iters: int = doc("the run's train_iters", minimum=0)
    seconds_after_last_iteration: int | None = doc("how long after that line it failed", minimum=0)
    nan_iterations: int | None = doc("NaN iterations counted by Megatron", minimum=0)


@dataclass
class LauncherSummary:
    exitcode: int | None = doc("the exit code torchrun reported for the rank")
    pid: int | None = doc("its process id")
    host: str | None = doc("its host")


@dataclass
class RootDetails:
    """What explains the root cause beyond its line (RootCause.details); a key is absent when unknown."""

    lagging_rank: int | None = doc("a hang: the one rank that did not report the communication failure", minimum=0)
    world_size: int | None = doc("the world size the straggler was found in", minimum=1)
    timed_out_ranks: list[int] | None = doc("ranks that reported a collective timeout")
    peer_closed_ranks: list[int] | None = doc("ranks that reported a peer going away")
    reported_by_rank: int | None = doc("the rank whose line is the evidence when the cause is another rank's")
    reported_by: str | None = doc("what reported the failure when the failing rank's own error is not in the logs")
    no_root_evidence: str | None = doc("why the evidence is not the failing rank's own error")
    rank_from: str | None = doc("where the rank was learned when the error line does not name it")
    category_from: str | None = doc("no pattern names the failure: the hint (patterns/hints.toml) whose words in "
                                    "the message gave its category")
    time_from: str | None = doc("where the time was learned when the error line has none")
    also_on_ranks: list[int] | None = doc("other ranks that printed the same error")
    occurrences: int | None = doc("how many times the error was printed in all", minimum=1)
    phase: str | None = doc("the training phase of the failing frame (forward, backward, optimizer step ...)")
    crashed_in: str | None = doc("a native crash: the backtrace frame (file:line) that places it inside a library")
    traceback_truncated: bool | None = doc("the traceback is cut off in the log")
    error_file: str | None = doc("the torchrun error.json the failure was read from")
    launcher_summary: LauncherSummary | None = doc("torchrun's failure summary for the rank")
    progress: Progress | None = doc("how far training got")
    oom: OomFigures | None = doc("the figures of a CUDA out-of-memory message")
    checklist: Checklist | None = doc("the out-of-memory runbook's record")
    last_memory_report: MemoryReport | None = doc("the failing rank's last Megatron memory report")
    failed_checks: list[Check] | None = doc("configuration checks that failed")
    slurm_state: str | None = doc("SLURM's State for the job, when it names the cause (mdiag JOBID)")
    from_: str | None = field(default=None, metadata={"description": "where the SLURM state came from (sacct, "
                                                      "scontrol, environment)", "json": "from"})


@dataclass
class SlurmFacts:
    """What SLURM says about the job (Diagnosis.slurm, `mdiag JOBID`): from sacct, else scontrol, else the
    Epilog's environment."""

    job_id: str = doc("the SLURM job id")
    state: str | None = doc("FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL ... (a 'CANCELLED by 0' reads CANCELLED)")
    exit_code: str | None = doc("exit code and signal, `{exit}:{signal}`", pattern=r"^\d+:\d+$")
    elapsed: str | None = doc("run time as SLURM prints it, `[D-]HH:MM:SS`")
    node_list: str | None = doc("the job's nodes as a SLURM hostlist")
    std_out: str | None = doc("the job's StdOut path")
    std_err: str | None = doc("the job's StdErr path")
    work_dir: str | None = doc("the job's WorkDir")
    source: Literal["sacct", "scontrol", "environment"] | None = doc("where these facts came from")
