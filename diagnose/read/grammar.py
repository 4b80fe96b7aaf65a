"""The shapes of log lines that are structure rather than failure patterns: launcher prefixes,
timestamps, traceback layout.  All are Rust-regex compatible (no lookaround) so polars runs them.
Failure messages themselves live in ``patterns/*.toml``."""

# Launcher prefixes, outermost first, each optional; they may stack on one physical line:
#   Ray/vLLM `(WorkerDict pid=1) `, benchmark runners `bench.node [stderr] `, srun --label ` 3: `,
#   mpirun --tag-output `[1,3]<stderr>:`, torchrun --tee `[default3]:`, PyTorch `[rank3]:`.
PREFIX = (
    r"(?P<pfx>"
    r"(?:\((?:\w+) pid=\d+(?:, ip=[\d.]+)?\) )?"
    r"(?:(?P<runner>[\w.-]+) \[(?:stdout|stderr)\] )?"
    r"(?:P\d+ )?(?:[ ]*(?P<task>\d+): )?"
    r"(?:\[\d+,(?P<mpi>\d+)\]<(?:stdout|stderr)>:[ ]?)?"
    r"(?:\[(?P<t1>[A-Za-z_]+)(?P<n1>\d+)\]:[ ]?)?"
    r"(?:\[(?P<t2>[A-Za-z_]+)(?P<n2>\d+)\]:[ ]?)?"
    r")"
)
# The same without names, for the all-lines prefilter.
PREFIX_PLAIN = (
    r"(?:\(\w+ pid=\d+(?:, ip=[\d.]+)?\) )?(?:[\w.-]+ \[(?:stdout|stderr)\] )?(?:P\d+ )?(?:[ ]*\d+: )?"
    r"(?:\[\d+,\d+\]<(?:stdout|stderr)>:[ ]?)?(?:\[[A-Za-z_]+\d+\]:[ ]?){0,2}"
)

# Wrappers a shell tool or log viewer puts before everything else on a line, launcher prefixes included:
# a reply's quote marks, a paste's line numbers (`cat -n`), ANSI colour, `ts`/syslog stamps, container
# runtime and cloud stamps (`2024-05-01T10:00:00.1Z `), pdsh hosts (`node03: `), kubectl's pods (`[pod/w-0/main] `),
# docker compose's containers (`trainer-1  | `).
# Only the scan's anchored shapes allow them (normalize peels them, and more, for everything after); they
# are no part of a stream's key.  The raw-bytes automaton gets the shapes without compose's (both together
# tripled its time on the shapes): a traceback's window is hot by its literals (`Traceback`, `Error`), and
# the line filter then keeps compose-prefixed frames too.  Host names are ASCII (`\w` spelled out keeps
# the automaton's Unicode database small).
WRAP_PLAIN = (
    r"(?:> ?)?(?:[ ]{0,8}[0-9]{1,9}\t)?(?:\x1b\[[0-9;]*m)*"
    r"(?:(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d{1,9})?"
    r"|\[?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)\]?(?: std(?:out|err) [FP])?"
    r"|(?:\d{1,3}\.){3}\d{1,3}:|[A-Za-z][A-Za-z0-9_-]{0,30}[0-9]{1,4}(?:\.[A-Za-z0-9_-]{1,20}){0,3}:"
    r"|\[pod/[a-z0-9][a-z0-9.-]{0,252}/[a-z0-9][a-z0-9-]{0,62}\]"
    r") )?(?:\x1b\[[0-9;]*m)*"
)
WRAP_FULL = r"(?:[a-z][\w.-]{0,40}[-_]\d{1,3} {1,20}\| )?" + WRAP_PLAIN

# Traceback structure, matched on the message (prefix removed).
TB_HEADER = r"^\s*(?:[|+]\s*)*(?:\+ )?(?:Exception Group )?Traceback \(most recent call last\):"
FRAME = r'^\s*(?:\|\s*)*File "(?P<file>[^"]*)", line (?P<line>\d+),? in (?P<func>.*)$'
FAULT_HEADER = r"^(?:Current thread|Thread) 0x[0-9a-f]+ .*\(most recent call first\):"
CHAIN = r"^\s*(?:\|\s*)*(?:The above exception was the direct cause|During handling of the above exception)"
# (`RayTaskError(ModuleNotFoundError): …` names the wrapped type; TF 1.x writes
# `ResourceExhaustedError (see above for traceback): …`)
# The class's name is capitalised (`torch.OutOfMemoryError`, `_queue.Empty`) or an old lowercase error
# (`socket.timeout`, `struct.error`): `self.comm: int = f(` is a source line of a traceback pasted flush left.
EXC_LINE = (r"^(?:[A-Za-z_]\w*\.)*(?:_*[A-Z]\w*|[a-z_]*(?:error|timeout))"
            r"(?:\([A-Z][\w.]*\):|\s\(see above for traceback\):|:(?:\s|$)|$)")
GROUP_MARGIN = r"^\s*(?:\|\s?|\+[-+]*(?: \d+ |-+| \.\.\. )?[-+]*\s*)+"

# A field of torchrun's failure summary (`  exitcode  : 1 (pid: 42)`), on the message.
SUMMARY_FIELD = r"\s+(?:time|host|rank|exitcode|error_file|traceback)\s+: "

# Lines worth keeping besides pattern hits, anchored after the prefix so non-matching lines fail fast.
KEEP_OTHER_BODY = (
    r"\s*(?:[|+]\s*)*(?:\+ )?(?:Exception Group )?Traceback \(most recent"
    r"|\s*(?:\|\s*)*File \""
    r"|[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Group|Warning)\b"
    r"|Fatal Python error|Current thread 0x|Thread 0x"
    r"|" + SUMMARY_FIELD
    + r"|\s*(?:rank|exitcode): -?\d+ \((?:local_rank|pid): "  # (the same, pasted flush left, or torch 1.9's unpadded keys)
    r"|  \S+ \.{3,} "
)
# Lines that carry a timestamp: kept only as far as the timeline needs them (see scan.thin_timestamps).
KEEP_TS_BODY = r"\s?\[?\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d|\[?[IWEFCV]\d{3,4} \d\d:\d\d:\d\d"
KEEP_ANCHORED_BODY = KEEP_OTHER_BODY + r"|" + KEEP_TS_BODY
KEEP_ANCHORED = r"^" + WRAP_FULL + PREFIX_PLAIN + r"(?:" + KEEP_ANCHORED_BODY + r")"
KEEP_OTHER = r"^" + WRAP_FULL + PREFIX_PLAIN + r"(?:" + KEEP_OTHER_BODY + r")"
KEEP_TS = r"^" + WRAP_FULL + PREFIX_PLAIN + r"(?:" + KEEP_TS_BODY + r")"
PREFIX_ONLY = r"^" + PREFIX_PLAIN
# Lines in a traceback's neighbourhood are kept too (source lines, message continuations).
# (a bare word alone on its line is an exception's name only when its last dotted part is capitalised,
# `KeyboardInterrupt`, `_queue.Empty`: `ok` or `done` printed millions of times is no structure)
KEEP_STRUCT_BODY = (r"\s*(?:\|\s*)*File \"|[A-Za-z_][\w.]*(?::\s|:$)|(?:[A-Za-z_]\w*\.)*_*[A-Z]\w*$"
                    r"|\s*(?:[|+]\s*)*Traceback \(")
KEEP_STRUCT = r"^" + WRAP_FULL + PREFIX_PLAIN + r"(?:" + KEEP_STRUCT_BODY + r")"
# The scan's pass over every line: any of these shapes; then, on those lines, the other shapes
# (the rest are timestamp lines, the bulk).
KEEP_ANCHORED_OR_STRUCT = r"^" + WRAP_FULL + PREFIX_PLAIN + r"(?:" + KEEP_ANCHORED_BODY + r"|" + KEEP_STRUCT_BODY + r")"
KEEP_OTHER_OR_STRUCT = r"^" + WRAP_FULL + PREFIX_PLAIN + r"(?:" + KEEP_OTHER_BODY + r"|" + KEEP_STRUCT_BODY + r")"
# the same for the raw-bytes automaton (see WRAP_PLAIN)
KEEP_OTHER_OR_STRUCT_BYTES = r"^" + WRAP_PLAIN + PREFIX_PLAIN + r"(?:" + KEEP_OTHER_BODY + r"|" + KEEP_STRUCT_BODY + r")"
# Progress lines: the timeline needs only the last of a run of them (thinned like timestamp-only lines).
KEEP_THIN = [r"iteration\s+\d+/\s*\d+ \|"]
KEEP_LITERAL = [
    r"datetime: \d{4}-",
    r"using world size:",
    r"-- arguments --",
    r"Root Cause \(first observed failure\)",
    r"Root Cause:\s*$",  # (torch 1.9-1.10's summary: `Root Cause:` … `Other Failures:`)
    r"Other Failures:\s*$",
    r"The above exception was the direct cause",
    r"During handling of the above exception",
    r"memory \(MB\) \|",
    r"Rendezvous complete for workers",
    r"group_rank=\d",
    r"group_world_size=\d",
    r"global_ranks=\[",
    r"Init COMPLETE",
    # a process's rank in old NCCL's ring (context.py; newer NCCL states it on its Init COMPLETE line, whose
    # `Channel 00/0 : 0[0] -> 1[1]` lines are not kept: a log of NCCL_DEBUG=INFO holds thousands)
    r"NCCL INFO Ring 00 : \d",
    r"CUDA_DEVICE_MAX_CONNECTIONS",
    r"CANCELLED AT \d{4}-",
    r"global_rank_mapping=",
    r"""\b(?:nnodes|NNODES)['"]?(?:[=: ]+|,\s*)["']?\d""",
    r"""\b(?:node_rank|node-rank|NODE_RANK)['"]?(?:[=: ]+|,\s*)["']?[1-9]""",
    r"\bnum_machines|\bSLURM_(?:JOB_)?NNODES=|\b(?:min|max)_nodes\s*[:=]",
    r"Unable to find hostfile, will proceed",
    r"WORLD INFO DICT: \{",
    r"max_nodes\s*[:=]\s*1\b",
    r"--standalone\b",
    r"(?:world[_ ]size|WORLD_SIZE)(?: is|=|:| =) ?1\b",
    r"--nproc[_-]per[_-]node[= ]1\b",  # one process a node (analyze/context.py)
    r"\(rank 0, world 1\)",  # LAVIS's and BLIP's `| distributed init (rank 0, world 1): env://`
    r"On WorkerInfo\(id=\d",  # torch RPC's header above a remote exception (analyze/ranks.py)
    # traceback structure behind a prefix the anchored shapes above do not know (normalize peels it)
    r"Traceback \(most recent call last\)",
    r'File "[^"]{1,500}", line \d+',
    # and torchrun's failure summary's fields, its keys padded to ten characters (literals rare enough to gate on;
    # `time` is too common a word, and its value too plain, to gate a scan: an entry starts at its host then)
    r"\bhost      : \S",
    r"\brank      : \d+ \(local_rank: \d",
    r"\bexitcode  : -?\d+ \(pid: ",
    r"\berror_file: ",
    r"\btraceback : ",
    # (a rich-boxed traceback's frame, `│ /x.py:12 in fn │`, has no literal rarer than `.py:`, which glog
    # headers hold on every line: keeping those frames cost 15% of the scan, so only its header and
    # exception line are kept)
]

# Timestamps, on the message.  Each family gives year (maybe), month, day, hour, minute, second, fraction.
TS_ISO = r"^\s*\[?(?P<Y>\d{4})-(?P<M>\d\d)-(?P<D>\d\d)[ T_](?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d{1,9}))?"
TS_GLOG = r"^\[?[IWEFCV](?P<MD>\d{3,4}) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
TS_SYSLOG = (r"^(?P<Mon>" + "|".join(MONTHS) + r") [ ]?(?P<D>\d{1,2}) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
             r"(?:\.(?P<f>\d{1,9}))?")
TS_LABELLED = r"(?:datetime: |CANCELLED AT |time\s*: )(?P<Y>\d{4})-(?P<M>\d\d)-(?P<D>\d\d)[ T_](?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d{1,9}))?"

# NCCL debug lines: `[ts]host:pid:tid [dev] ...`
NCCL_ORIGIN = r"^(?:\[[^\]]*\] ?)?(?P<host>[\w.-]*[A-Za-z][\w.-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]"
# `[Rank 3]` / `[PG 0 (default_pg) Rank 3]` / `[PG ID 0 PG GUID 0(default_pg) Rank 3]` inside c10d text
PG_RANK = r"\[(?:PG (?:ID )?(?P<pg>\d+)[^\]]*?)?Rank (?P<rank>\d+)\]"
