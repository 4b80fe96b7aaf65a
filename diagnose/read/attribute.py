"""Rank attribution: normalize each kept line (normalize.peel strips any stack of launcher, wrapper
and logger prefixes) and keep what the prefixes said as fields.

Which number is which (see the reference on prefixes): `[rankN]:` and mpirun's tag are global ranks;
`[defaultN]:` (torchrun --tee) is a local rank; srun's `N: ` label is the task id, which is the global
rank only when srun starts the ranks itself (no torchrun prefix on the same line).  A local rank
becomes a global rank only where the logs establish the mapping; otherwise it stays null.  A traceback
logged as one record carries its prefix on the first line only, and mp.spawn names a worker once above its
traceback: those lines take the facts of the line above them.
"""
from __future__ import annotations

import re

import polars as pl

from diagnose.read import grammar, learned_prefix, normalize
from diagnose.model import Source


def attribute(frame: pl.DataFrame, sources: list[Source]) -> pl.DataFrame:
    """Adds msg, lead (the prefixes before msg but a launcher's rank label, see normalize.Normalized), rank,
    local_rank, task, host, tstext (a peeled timestamp's text), record (the line
    starts a logger's record), stamp (its file's every line carries a wrapper's timestamp) and stream
    (the key of one process's output: its file and the identity part of its prefix)."""
    kinds = normalize.load()
    timed = {k.id for k in kinds if "(?P<time>" in k.regex}
    cols: dict[str, list] = {c: [] for c in ("msg", "lead", "_rank", "_local", "_task", "_host", "_pid", "tstext", "_key", "_tee", "record", "stamp")}
    peeled = _peel_all(frame.get_column("line").to_list(), kinds)
    srcs = frame.get_column("src").to_list()
    _peel_learned(srcs, peeled, kinds)
    stamped = _stamped_sources(srcs, peeled, timed)
    for src, n in zip(srcs, peeled):
        cols["msg"].append(n.message)
        cols["lead"].append(n.lead)
        cols["_rank"].append(n.rank)
        cols["_local"].append(n.local_rank)
        cols["_task"].append(n.task)
        cols["_host"].append(n.host)
        cols["_pid"].append(n.pid)
        cols["tstext"].append(n.time)
        cols["_key"].append(n.key)
        cols["_tee"].append("tee_local" in n.kinds or "torch_rank" in n.kinds)
        # a logger's time or level column starts a new record (never the continuation of a message); a
        # time that a wrapper stamps on every line of the file (`ts`, a container runtime) does not
        own = n.kinds[1:] if src in stamped else n.kinds
        cols["record"].append(any(k in timed for k in own) or "log_level" in n.kinds)
        cols["stamp"].append(src in stamped)
    _record_tails(srcs, frame.get_column("lineno").to_list(), cols)
    ints = ("_rank", "_local", "_task", "_pid")
    df = frame.with_columns(
        pl.Series(c, v, dtype=pl.Int64 if c in ints else (pl.Boolean if c in ("_tee", "record", "stamp") else pl.String))
        for c, v in cols.items()
    )
    src_local = pl.col("src").replace_strict({s.index: s.local_rank for s in sources}, default=None, return_dtype=pl.Int64)
    src_task = pl.col("src").replace_strict({s.index: s.task for s in sources}, default=None, return_dtype=pl.Int64)
    df = df.with_columns(
        local_rank=pl.coalesce(pl.col("_local"), src_local),
        task=pl.coalesce(pl.col("_task"), src_task),
    )
    # the one rank that a process's lines (a Ray worker's `(Name pid=N) `) state, and the first line that states it: a
    # rank for a line of that process that names none (analyze/label.py; a relay's own reports name theirs)
    proc = ["src", "_host", "_pid"]
    told = pl.col("_rank").drop_nulls()
    one = pl.col("_pid").is_not_null() & (told.n_unique().over(proc) == 1)
    df = df.with_columns(proc_rank=pl.when(one).then(told.max().over(proc)),
                         proc_rank_line=pl.when(one).then(pl.col("lineno").filter(pl.col("_rank").is_not_null()).min().over(proc)))
    # srun's task label is the rank when nothing finer is on the line (srun launched the ranks itself).
    df = df.with_columns(
        rank=pl.coalesce(pl.col("_rank"), pl.when(pl.col("local_rank").is_null() & ~pl.col("_tee")).then(pl.col("task")))
    )
    origin = pl.col("msg").str.extract_groups(grammar.NCCL_ORIGIN)
    df = df.with_columns(origin.alias("_o")).unnest("_o")
    df = df.with_columns(
        host=pl.coalesce(pl.col("host"), pl.col("_host")),
        stream=pl.concat_str([pl.col("src").cast(pl.String), pl.col("_key")], separator="|"),
    )
    return df.drop("_rank", "_local", "_task", "_host", "_pid", "_key", "_tee", "pid", "tid", "dev")


def _peel_all(lines: list, kinds) -> list[normalize.Normalized]:
    """Each line peeled; a line repeated word for word (a flood from many ranks, the same frames in every
    traceback) is peeled once and copied (each line's copy is its own: later steps change them one by one)."""
    done: dict[str, normalize.Normalized] = {}
    out = []
    for line in lines:
        line = line or ""
        if (n := done.get(line)) is None:
            n = done[line] = normalize.peel(line, kinds)
            out.append(n)
        else:
            # (a shallow copy by its fields, three times faster than copy.copy; its own list of kinds: nothing
            # may change one line's through another's)
            c = object.__new__(normalize.Normalized)
            c.__dict__.update(n.__dict__)
            c.kinds = list(n.kinds)
            out.append(c)
    return out


def _peel_learned(srcs: list, peeled: list, kinds) -> None:
    """Each file's prefix that no kind knows (a viewer's or platform's columns, see learned_prefix), where it
    has one, peeled from its lines, with the known prefixes behind it."""
    rows: dict = {}
    for i, src in enumerate(srcs):
        rows.setdefault(src, []).append(i)

    def peel(text: str) -> normalize.Normalized:
        return normalize.peel(text, kinds)

    for idx in rows.values():
        rx = learned_prefix.learn([peeled[i].message for i in idx[:learned_prefix.SAMPLE]], peel)
        if rx is None:
            continue
        for i in idx:
            if m := rx.match(peeled[i].message):
                peeled[i] = normalize.peel_behind(peeled[i], m.end(), kinds)


def _stamped_sources(srcs: list, peeled: list, timed: set[str]) -> set:
    """The files whose lines (nine in ten of those kept, traceback frames included) all start with a
    timestamp: a wrapper's stamp, not a logger's record."""
    total: dict = {}
    outer: dict = {}
    for src, n in zip(srcs, peeled):
        total[src] = total.get(src, 0) + 1
        if n.kinds and n.kinds[0] in timed:
            outer[src] = outer.get(src, 0) + 1
    return {s for s, k in outer.items() if total[s] >= 5 and k >= 0.9 * total[s]}


_TB_HEADER = re.compile(grammar.TB_HEADER)
_FRAME = re.compile(grammar.FRAME)
_CHAIN = re.compile(grammar.CHAIN)
_EXC = re.compile(grammar.EXC_LINE)


def _record_tails(srcs: list, linenos: list, cols: dict) -> None:
    """Tracebacks whose owner is named once, on the line above them.

    A logger prints its prefix once per record: a traceback logged as one record (`rank:  3 | <time>
    CRITICAL | Traceback (most recent call last):`, then bare frames) continues on the lines right below
    it that carry no prefix, time or level; those lines take the record's stream and facts.
    torch.multiprocessing.spawn re-raises a worker's error as `-- Process 1 terminated with the following
    error:` and the worker's traceback: that traceback is local rank 1's.  Either holds as far as the
    lines read as that traceback (frames, source lines, its exception, chained tracebacks)."""
    keys, records, msgs = cols["_key"], cols["record"], cols["msg"]
    logged = [i for i, (k, r, m) in enumerate(zip(keys, records, msgs)) if k and r and "Traceback" in m]
    for owner in logged:
        if _TB_HEADER.match(msgs[owner]):
            # the lines below keep only the prefixes outside the logger's (pdsh's `node03: `, or none)
            outer = keys[owner]
            for i in _traceback_below(owner, "frames", srcs, linenos, cols, key=outer.startswith):
                for c in ("_rank", "_local", "_task", "_host", "_pid", "_key", "_tee"):
                    cols[c][i] = cols[c][owner]
    spawned = [i for i, m in enumerate(msgs) if m.startswith("-- Process ")]
    for owner in spawned:
        local = normalize.rank_in_text(msgs[owner]).get("local_rank")
        if local is None or cols["_rank"][owner] is not None or cols["_local"][owner] is not None:
            continue
        for i in _traceback_below(owner, "chain", srcs, linenos, cols, key=keys[owner].__eq__):
            if cols["_rank"][i] is None and cols["_local"][i] is None:
                cols["_local"][i] = local


def _traceback_below(owner: int, state: str, srcs: list, linenos: list, cols: dict, key):
    """The rows right below `owner` (in its file, whose prefix key passes the test `key`, with no logger
    record) that read as one traceback chain; `state` is where the walk starts: in a traceback's frames,
    or after a chain marker (a traceback header comes next)."""
    keys, records, msgs = cols["_key"], cols["record"], cols["msg"]
    i = owner + 1
    while i < len(msgs) and key(keys[i]) and not records[i] and srcs[i] == srcs[owner]:
        # (the blank line between a chain marker and the next header may be one the scan did not keep, and so
        # may a frame's source line behind columns the scan's shapes do not know)
        gap = linenos[i] - linenos[i - 1]
        if not (gap == 1 or (gap == 2 and state in ("chain", "frames"))):
            return
        msg = msgs[i]
        if not msg.strip():
            pass
        elif _CHAIN.match(msg) and state in ("exc", "chain"):
            state = "chain"
        elif _TB_HEADER.match(msg) and state == "chain":
            state = "frames"
        elif state == "frames" and (_FRAME.match(msg) or msg.startswith("    ")):
            pass
        elif state == "frames" and _EXC.match(msg):
            state = "exc"  # the exception ends the traceback unless a chained one follows
        else:
            return
        yield i
        i += 1
