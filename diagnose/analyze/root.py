"""The choice of root cause among labelled events.

The root is the earliest traceback that is not a communication error or launcher teardown, across
all ranks and files.  With none, it is the earliest fatal non-traceback event (a SIGKILL, an OOM
kill, a time limit, a CUDA fault); with none of those, the earliest communication failure.
"""
from __future__ import annotations

import regex

from diagnose.analyze.context import JobContext
from diagnose.analyze.kills import KILL_REPORTS, kill_cause
from diagnose.analyze.label import GENERIC, _PEER_GONE, _RELAYS, _TIMEOUTS, _WAITED
from diagnose.analyze.levels import LAST_WORD, WARNED
from diagnose.analyze.loose import loose_rank, loose_roots
from diagnose.analyze.summary_entries import in_summary_entry, killed_after_root_cause, named_by_summary
from diagnose.model import Event, Frame, RootCause
from diagnose.patterns.library import Pattern


_DIGITS = regex.compile(r"\d+")


def _same_failure(a: Event, b: Event) -> bool:
    return a.pattern == b.pattern and _DIGITS.sub("#", a.message) == _DIGITS.sub("#", b.message)


def choose_root(events: list[Event], ctx: JobContext, patterns: dict[str, Pattern],
                starts: list[tuple] = (), failed: bool = False) -> tuple[Event | None, list[Event], dict]:
    """The root event, the events that are the same failure on other ranks, and inference notes.
    `starts`: where the tracebacks begin and whose they are (label.traceback_starts); `failed`: the logs show a
    failure no event is (a traceback cut before its exception)."""
    roots = [e for e in events if e.role == "root"]
    tracebacks = [e for e in roots if e.kind in ("traceback", "error_file") and not e.is_comm]
    lines = [e for e in roots if e.kind == "line" and not e.is_comm]
    comm = [e for e in roots if e.is_comm]
    first_tb = min(tracebacks, key=lambda e: e.order, default=None)
    consequence = None
    if first_tb is not None and first_tb.pattern == GENERIC and any(
            e.order < first_tb.order or e.pattern == _STEP_OOM for e in lines + [e for e in comm if e.pattern in _NCCL_DETAIL]):
        # a generic exception after a named failure is its consequence (a loss scale run down to 0 ends
        # in a ZeroDivisionError; an allocator's error line before a generic re-raise; NCCL's refused
        # connection before mp.spawn's `Exception: -- Process 1 terminated`), and so is one before the step's OOM kill
        tracebacks, consequence = [], first_tb
    for tier in (tracebacks, lines, comm):
        if not tier:
            continue
        primary = any(e.pattern not in _PEER_GONE for e in tier)
        seen_later = in_summary_entry(ctx)
        # torchrun's other failures after its Root Cause entry (it saw that one first, whatever time a
        # wrapper stamped on the lines of its summary)
        # (a relay of another rank's timeout comes after the timeouts themselves)
        tier.sort(key=lambda e: (primary and e.pattern in _PEER_GONE, e.pattern in _RELAYS, seen_later(e), e.order))
        root = named_by_summary(tier[0], tier, ctx)
        crashed_in = None
        if root.pattern in KILL_REPORTS and killed_after_root_cause(root, ctx):
            continue  # torchrun killed a straggler after the worker its Root Cause names had failed
        if root.pattern in KILL_REPORTS:
            root = kill_cause(root, tier, lines)
        if root.pattern == "host_oom.ray_worker_system_error":
            # Ray's driver reports the death first; the worker's own last words printed just under it (a
            # watchdog's timeout, a crash) say why it died; a peer's reaction or another kill report does not
            own = [(e, t) for t in (tracebacks, lines, comm) for e in t if e.evidence.file == root.evidence.file
                   and 0 < e.evidence.line - root.evidence.line <= _RAY_LAST_WORDS
                   and e.pattern not in _PEER_GONE and e.pattern not in KILL_REPORTS]
            if own:  # (the later steps read the new root's own tier)
                root, tier = min(own, key=lambda et: et[0].evidence.line)
        if root.pattern == "nccl.error" and _NCCL_GENERIC.search(root.message):
            # NCCL's exception says only that a call failed ("run with NCCL_DEBUG=INFO for details"); its
            # WARN line names the call that failed and why
            # (a WARN of no named kind just before the exception in its file, where no named one is: `NCCL cannot
            # be captured in a graph …`; only near it, as a WARN at start-up may be routine)
            named = [e for e in tier if e.pattern in _NCCL_DETAIL or (
                e.pattern in _OWN_DETAIL and e.evidence.file == root.evidence.file
                and 0 < e.evidence.line - root.evidence.line <= _OWN_DETAIL_LINES)]
            near = [e for e in events if e.pattern == "fallback.nccl_warn" and e.evidence.file == root.evidence.file
                    and 0 < root.evidence.line - e.evidence.line <= _NEAR_WARN and not _ROUTINE_WARN.search(e.message)]
            if named or near:
                said = [e for e in tier if e.pattern == root.pattern and e.rank is not None]
                exc, root = root, (min(named, key=lambda e: e.order) if named else min(near, key=lambda e: e.evidence.line))
                if (exc.kind == "line" and exc.evidence.file == root.evidence.file
                        and 0 < root.evidence.line - exc.evidence.line <= 3):
                    # the exception's own `Last error:` detail, printed under it: one message, as in a traceback
                    root.message = f"{exc.message} … {root.message}"
                hosts = {e.host for e in said} - {None}
                if root.rank is None and len({e.rank for e in said}) == 1 and (root.host is None or hosts <= {root.host}):
                    # one rank raised it, on the WARN's host as far as the logs say: the WARN is that rank's
                    root.rank, root.local_rank = said[0].rank, said[0].local_rank
        if root.kind == "line" and root.message.endswith(":"):
            # an exception's name alone (`torch.OutOfMemoryError:`), its message on the next line
            # (or a message that ends in its details: `Error(s) in loading state_dict for M:`, then `size mismatch
            # for …`: the more specific detail names the kind)
            nxt = [e for e in tier if e.evidence.file == root.evidence.file and e.evidence.line == root.evidence.line + 1
                   and (e.category == root.category or patterns[e.pattern].priority > patterns[root.pattern].priority)]
            if nxt:
                root.message = f"{root.message} {nxt[0].message}"
                root.pattern, root.category = nxt[0].pattern, nxt[0].category
        if root.pattern in _OUTCOMES and any(e.order < root.order for e in comm):
            continue  # a cancel or abort after a communication failure is its outcome, not its cause
        if root.pattern == "slurm.cancelled":
            # the plain banner after srun reported a task's non-zero exit: srun cancelled the step because
            # of that task (its error, where not in these logs, is unknown)
            exits = [e for e in events if e.pattern == "launcher.srun_task_exit" and e.order < root.order]
            job = _SLURM_JOB.search(root.message)
            # the same job's banner that gives the reason (the step cancelled, then the job "DUE TO PREEMPTION")
            why = [e for e in tier if e.pattern in _SLURM_REASONS and job and (m := _SLURM_JOB.search(e.message))
                   and m[1] == job[1]]
            if exits:
                root = min(exits, key=lambda e: e.order)
            elif why:
                root = min(why, key=lambda e: e.order)
        if root.pattern == "cuda.device_assert":
            # the kernel's own assertion, printed before the traceback in the same file (or by the same
            # host), names the check that failed
            asserts = [e for e in lines if e.pattern in _KERNEL_ASSERTS and e.order < root.order and (
                e.evidence.file == root.evidence.file or (e.host is not None and e.host == root.host))]
            if asserts:
                line = min(asserts, key=lambda e: e.order)
                if line.rank is None:
                    line.rank, line.local_rank, line.host = root.rank, root.local_rank, root.host
                root = line
        generic = root.pattern == GENERIC and root.kind == "traceback"
        if root.pattern in _UNNAMED_ABORTS or generic:
            # an uncaught C++ exception of no named kind, and a named failure printed just under it (two threads
            # of one process dying): the named one says what happened; and a generic exception with the error codes
            # torch_npu prints under it (`EI0002: … Notify register times out`; no other line: a peer's, a launcher's)
            named = [e for e in (lines + comm if generic else lines) if e.category != "unknown"
                     and e.evidence.file == root.evidence.file and 0 < e.evidence.line - root.evidence.line <= _NEIGHBOURS
                     and (not generic or (e.rank == root.rank and _ASCEND_CODE.match(e.message)))]
            if named:
                root = min(named, key=lambda e: e.evidence.line)
        if root.pattern in _NATIVE_CRASHES:
            # the crash handler's backtrace under the signal line names the library the process crashed in
            inside = [e for e in events if e.pattern in _LIBRARY_CRASHES and e.evidence.file == root.evidence.file
                      and 0 < e.evidence.line - root.evidence.line <= _BACKTRACE]
            if inside:
                frame = min(inside, key=lambda e: e.evidence.line)
                root.pattern, root.category = frame.pattern, frame.category
                crashed_in = str(frame.evidence)
        if root.kind != "line" and root.pattern != GENERIC:
            # the same failure printed as a line before its traceback: the earliest report is the evidence;
            # another rank's (its traceback cut off above the line) reports it first
            earlier = [e for e in lines if e.pattern == root.pattern and e.order < root.order and not _inside(e, root)]
            if earlier:
                line = min(earlier, key=lambda e: e.order)
                if line.rank is None:
                    line.rank, line.local_rank, line.host = root.rank, root.local_rank, root.host
                if line.rank == root.rank:
                    line.blocks = root.blocks
                root = line
        same = [e for e in tier if e is not root and _same_failure(root, e)]
        if root.is_comm:
            notes = _lagging_rank(root, tier, ctx)
            if root.rank is None and root.kind == "line" and root.pattern not in _WAITED and "lagging_rank" not in notes:
                # NCCL's WARN on the failed call, then that process's traceback
                notes.update(_traceback_after(root, starts))
            if root.rank is None and consequence is not None and consequence.rank is not None and "rank" not in notes:
                # the generic exception this failure explains was raised by a known rank (mp.spawn's `Process 1`)
                notes.update(rank=consequence.rank, rank_from=str(consequence.evidence))
            if root.rank is None and root.pattern not in _WAITED and "rank" not in notes and "lagging_rank" not in notes:
                # a connection that failed (not a wait that timed out) and a launcher that reports one failed
                # process: the process that raised it is the one that died (mpirun's `rank 1 … exited on signal 6`)
                said = [e for e in events if (e.pattern in _FAILURE_WORDS or e.pattern in _NATIVE_CRASHES) and e.rank is not None]
                if len({e.rank for e in said}) == 1:
                    e = min(said, key=lambda e: e.order)
                    notes.update(rank=e.rank, rank_from=str(e.evidence))
        else:
            notes = _corroborated_rank(root, events, starts)
        if crashed_in:
            notes["crashed_in"] = crashed_in
        return root, same, notes
    # No pattern names a failure, but the logs show an error: the earliest error line (an exception
    # line before a bare error word) is the likeliest root, said with low confidence.
    loose = loose_roots(events, ctx, failed)
    if loose:
        later = in_summary_entry(ctx)  # (torchrun's other failures come after its Root Cause)
        loose.sort(key=lambda e: (loose_rank(e), e.pattern != GENERIC, later(e), e.order))
        root = named_by_summary(loose[0], loose, ctx)
        # (a warning every process prints takes no rank from another line)
        notes = {"confidence": "low", "no_pattern": True, **({} if root.role == WARNED else _corroborated_rank(root, events, starts))}
        return root, [e for e in loose[1:] if _same_failure(root, e)], notes
    # Only the launcher's word that something failed: an honest "unknown", pointing at where to look.
    said = [e for e in events if e.role == "symptom"]
    if said:
        later, named = in_summary_entry(ctx), in_summary_entry(ctx, root_entry=True)
        # the launcher's Root Cause entry first, its other entries last
        said.sort(key=lambda e: (e.pattern not in _FAILURE_WORDS, not named(e), later(e), e.order))
        root = said[0]
        if root.pattern not in _FAILURE_WORDS:
            # a bystander's report (a SIGTERM notice, Lightning's `Child process … terminated`): its rank is
            # the reporter's, not the failed one's
            root.rank = root.local_rank = None
        codes = {c for e in said for c in _RETURN_CODE.findall(e.message)}
        silent = patterns[_SILENT_KILL]
        if silent.search(root.lead + root.message) and codes <= {"-9"}:
            # DeepSpeed's workers print to its console: one that died without a word was SIGKILLed
            root.pattern, root.category = silent.id, silent.category
        return root, [], {"no_root_evidence": "the failing rank's own error is not in these logs", "confidence": "low"}
    # Nothing but a line logged at the error level that ends its log (levels._ERROR_LEAD): the program's last word.
    last = [e for e in events if e.role == LAST_WORD]
    if last:
        root = min(last, key=lambda e: e.order)
        return root, [], {"confidence": "low", "no_pattern": True, **_corroborated_rank(root, events, starts)}
    return None, [], {}


# communication failures of the process itself (not a wait on another rank): torchrun's summary names its rank
_OWN_FAILURE = ("nccl.store_bind",)

# slurmstepd's banners: the job id they name, and those that say why
_SLURM_JOB = regex.compile(r"\*\*\* (?:STEP|JOB) (\d+)")
_SLURM_REASONS = ("slurm.time_limit", "slurm.preemption", "slurm.node_failure", "slurm.requeue")

# DeepSpeed's launcher tearing the job down (the pattern's regex says how it looks), and the return codes it reports
_SILENT_KILL = "host_oom.launcher_killed_silently"
_RETURN_CODE = regex.compile(r"exits with return code = (-?\d+)")

_STEP_OOM = "host_oom.slurm_cgroup_oom"  # (slurmstepd reports it as the step ends, after the processes' errors)
# CANN's error codes (`EI0002: `, `EJ0003: `), which torch_npu prints under the exception they explain
_ASCEND_CODE = regex.compile(r"E[A-Z]\d{4}: ")
# C++ exceptions that name no kind of failure, and how far below one a named failure is the same crash's
_UNNAMED_ABORTS = ("unknown.cpp_exception",)
_NEIGHBOURS = 6

# a crash handler's report of a signal, and how far below it its backtrace's frames may be
_NATIVE_CRASHES = ("unknown.native_crash", "unknown.fatal_signal")
_LIBRARY_CRASHES = ("cuda.library_crash", "nccl.library_crash")  # a backtrace frame in a named library
_BACKTRACE = 40

# NCCL's exceptions that name no cause, and the WARN lines that do
_NCCL_GENERIC = regex.compile(r"unhandled system error|unhandled cuda error|internal error|invalid usage|NCCL Error \d+:|"
                              r"ncclSystemError|ncclInternalError|ncclInvalidUsage|ncclUnhandledCudaError|"
                              r"HCCL function error: \w+\(.*\), error code is \d+")
_NCCL_DETAIL = ("nccl.net_warn", "nccl.no_interface", "nccl.cuda_failure_in_setup", "nccl.topology_sysfs", "nccl.ucx_connect",
                "nccl.p2p_unsupported", "nccl.topology_path", "nccl.ofi_error", "nccl.ucx_error")
# a port already in use names the cause only as the exception's own detail, printed just under it (Ascend's EJ0003 under
# `HCCL function error`); later, it is a restart meeting the dead workers' port
_OWN_DETAIL, _OWN_DETAIL_LINES = ("nccl.store_bind",), 3


def _inside(e: Event, tb: Event) -> bool:
    """Is e a line of tb's own traceback (a frame's source line such as `raise ValueError(`)?"""
    return e.evidence.file == tb.evidence.file and any(
        b.start <= e.evidence.line <= (b.exception_line or b.start) for b in tb.blocks)


def _corroborated_rank(root: Event, events: list[Event], starts: list[tuple] = ()) -> dict:
    """A root line that names no rank (`slurmstepd: … oom-kill event`) takes the one rank that the other
    reports of the same failure, or the launcher's failure reports, name (`srun: error: n1: task 0: Out
    Of Memory`; a kernel's assertion: the traceback reporting the device-side assert); with none, or
    several, the rank stays unknown.  A process's own error line printed just before its traceback
    takes that traceback's rank."""
    if root.rank is not None:
        return {}
    said = [e for e in events if e is not root and e.rank is not None and not e.is_comm and (
        (e.role == "root" and e.category == root.category) or e.pattern in _FAILURE_WORDS
        or (root.pattern in _KERNEL_ASSERTS and e.pattern == "cuda.device_assert"))]
    ranks = {e.rank for e in said}
    if len(ranks) == 1:
        e = min(said, key=lambda e: e.order)
        return {"rank": e.rank, "rank_from": str(e.evidence)}
    if not said and root.kind == "line" and root.category not in _NOT_THE_PROCESS and not root.pattern.startswith("launcher."):
        return _traceback_after(root, starts)
    return {}


# lines that a scheduler, a launcher or a kernel prints about a process, not the process itself
_NOT_THE_PROCESS = ("host_oom", "slurm")
_ADJACENT = 20  # an error line and its traceback: the lines between are the same process's (NCCL's call trail)


def _traceback_after(root: Event, starts: list[tuple]) -> dict:
    """The rank of the traceback that begins within a few lines after the root line, in the same file: a
    process prints its error (a CUDA kernel's assertion, NCCL's WARN, the error text) and then its traceback,
    often cut off in a paste before it reaches the exception."""
    line = root.evidence.line
    after = [s for s in starts if s[0] == root.evidence.file and line < s[1] <= line + _ADJACENT]
    if not after:
        return {}
    file, start, rank, _local, _host = min(after, key=lambda s: s[1])
    return {"rank": rank, "rank_from": f"{file}:{start}"}


# a GPU kernel's own assertion line (no rank on it): the rank whose traceback reports the device-side
# assert is the one that hit it
_KERNEL_ASSERTS = ("cuda.kernel_assertion_failed", "nan.probabilities_nan")
# what ends a job that a hang or a communication failure already doomed
_OUTCOMES = ("slurm.time_limit", "slurm.cancelled", "slurm.cancelled_by_signal", "unknown.fatal_signal",
             "unknown.native_crash")
_RAY_LAST_WORDS = 8  # lines under Ray's report of a dead worker that are still that worker's
_NEAR_WARN = 30  # lines above an NCCL exception where a WARN of no named kind is its detail
_ROUTINE_WARN = regex.compile(r"\b[Ff]alling back\b")  # a WARN that says NCCL carried on (a slower ring order)
_FAILURE_WORDS = ("launcher.worker_failed", "launcher.child_failed", "launcher.srun_teardown", "launcher.srun_task_exit",
                  "launcher.abort", "launcher.mpi_abort", "launcher.mpi_first_failed", "launcher.elastic_failed",
                  "launcher.launch_command_failed", "launcher.trainer_aborted", "launcher.lightning_child_failed")


def _lagging_rank(root: Event, comm: list[Event], ctx: JobContext) -> dict:
    """All ranks but one report a communication failure (a timeout, or a peer that went away): the silent
    one is the straggler (it hung or died)."""
    if root.pattern not in _WAITED:
        return {}
    notes = {}
    for key, kinds in (("timed_out_ranks", _TIMEOUTS), ("peer_closed_ranks", _PEER_GONE)):
        ranks = sorted({e.rank for e in comm if e.pattern in kinds and e.rank is not None})
        if ranks:
            notes[key] = ranks
    reporters = {e.rank for e in comm if e.rank is not None}
    world = ctx.world_size
    if not world or len(reporters) != world - 1 or not all(0 <= r < world for r in reporters):
        return notes
    (silent,) = set(range(world)) - reporters
    return {"lagging_rank": silent, **notes, "world_size": world}


def make_root(root: Event, same: list[Event], notes: dict, patterns: dict[str, Pattern], ctx: JobContext) -> RootCause:
    p = patterns[root.pattern]
    details = dict(notes)
    rank = root.rank if root.rank is not None else details.pop("rank", None)
    # how sure the choice is: a named failure; a generic exception or a communication error (which names
    # who noticed, not always who failed); or only the likeliest line
    confidence = details.pop("confidence", None) or ("medium" if root.pattern == GENERIC or root.is_comm else "high")
    details.pop("no_pattern", None)
    if "no_root_evidence" in notes:
        p = patterns[root.pattern]
        details["reported_by"] = p.title
    if root.is_comm and root.pattern in _WAITED:
        # a timeout or a lost peer names the rank that waited, not the one that failed
        details["reported_by_rank"] = root.rank
        rank = notes.get("lagging_rank")
    if same:
        details["also_on_ranks"] = sorted({e.rank for e in same if e.rank is not None and e.rank != root.rank})
        details["occurrences"] = 1 + len(same)
    frames = [f for b in root.blocks for f in b.frames]
    text = [ln for b in root.blocks for ln in b.text]
    phase = _phase(frames) if rank == root.rank else None  # a straggler's phase is not the reporter's
    if phase:
        details["phase"] = phase
    if root.blocks and any(b.truncated for b in root.blocks):
        details["traceback_truncated"] = True
    if root.kind == "error_file":
        details["error_file"] = root.evidence.file
    if rank is None and (not root.is_comm or root.pattern in _OWN_FAILURE):
        # torchrun's failure summary names the first rank that failed: the rank of an error that names none
        first = {f.rank for f in ctx.failures if f.root and f.rank is not None and f.rank >= 0
                 and (root.local_rank is None or f.local_rank == root.local_rank)}
        if len(first) == 1:
            rank = first.pop()
            details["rank_from"] = "torchrun failure summary (Root Cause)"
    if rank is None and (ctx.one_process or ctx.world_size == 1 or (ctx.one_per_node and ctx.one_node and ctx.local_is_global())):
        # one process in all (a communication error included: there is no other rank to blame); or one a node, on
        # the one node the logs say the job ran on (one process a pod is the usual multi-node shape)
        rank = 0
        details["rank_from"] = "world size 1" if not ctx.one_per_node else "one process a node, on one node"
    if rank is not None and rank == root.rank and "rank_from" in root.details:
        details.setdefault("rank_from", root.details["rank_from"])
    cf = next((f for f in ctx.failures if f.root and f.rank is not None and f.rank == rank), None)
    if cf:
        details["launcher_summary"] = {"exitcode": cf.exitcode, "pid": cf.pid, "host": cf.host}
    same_rank = rank == root.rank
    # a line that names no rank still says where it was printed
    time, local, host = root.time, root.local_rank if same_rank else None, root.host if same_rank or root.rank is None else None
    if cf:  # torchrun's summary of the same rank: when it was seen failing, where, which local rank
        if time is None and cf.time is not None:
            time = cf.time
            details["time_from"] = "torchrun failure summary"
        local = local if local is not None else cf.local_rank
        host = host or cf.host
    if host is None and rank is not None:
        host = ctx.rank_host.get(rank)
    return RootCause(
        # (a hint's category where no pattern named the failure: see loose.kind_from_words)
        category=root.category if "category_from" in details else p.category, pattern=p.id, summary="",
        message=root.lead + root.message, text=root.message,
        evidence=root.evidence,
        rank=rank, local_rank=local, host=host, time=time, traceback=text, frames=frames,
        title=p.title, why=p.why, remediation=list(p.remediation), details=details, confidence=confidence,
    )


_PHASES = (
    ("optimizer step", regex.compile(r"(?i)optimizer|\bstep\b|adam|_multi_tensor|clip_grad")),
    ("backward", regex.compile(r"(?i)backward")),
    ("checkpoint save", regex.compile(r"(?i)save_checkpoint|checkpoint.*save|torch\.save")),
    ("checkpoint load", regex.compile(r"(?i)load_checkpoint")),
    ("data loading", regex.compile(r"(?i)dataloader|__next__|_next_data|get_batch")),
    ("forward", regex.compile(r"(?i)forward")),
)


def _phase(frames: list[Frame]) -> str | None:
    """The training phase of the innermost frame that names one (backward_step, optimizer.step, ...)."""
    for f in reversed(frames):
        for name, rx in _PHASES:
            if rx.search(f.func) or (name == "optimizer step" and "/optim/" in f.file):
                return name
        for name, rx in _PHASES:
            if f.code and rx.search(f.code):
                return name
    return None
