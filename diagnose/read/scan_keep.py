"""Which lines the scan keeps: keep_expr says it plainly (the reference), KeepPlan finds the same lines
cheaply, and thin_timestamps drops the timestamp-only lines the timeline will not need.

All per-line work is polars expressions (Rust regex, no Python loop over lines): one unanchored
alternation of the failure patterns' literals, one anchored regex for structure (tracebacks,
timestamps, launcher summaries), and the two lines after each traceback-shaped line.
"""
from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import polars as pl

from diagnose.read import grammar
from diagnose.cache import cache_file, write_atomic
from diagnose.read.prefilter import BlockFilter
from diagnose.read.scan_literals import (
    _alternation, _minimal, _required, gate_rank, loosen_anchors, loosen_colours, loosen_repeats, needed_literals,
)


def keep_expr(pattern_regexes: list[str]) -> pl.Expr:
    """What the scan keeps, as one plain (slow) expression: the reference KeepPlan is tested against."""
    line = pl.col("line")
    pattern_regexes = [_loosened(r) for r in pattern_regexes]
    # one contains per regex: a single alternation of them all outgrows Rust regex's size limit
    literal = pl.any_horizontal([line.str.contains(r) for r in [*grammar.KEEP_LITERAL, *grammar.KEEP_THIN, *pattern_regexes]])
    struct = line.str.contains(grammar.KEEP_STRUCT)
    near = struct.shift(1, fill_value=False) | struct.shift(2, fill_value=False)
    return literal | line.str.contains(grammar.KEEP_ANCHORED) | near


def _loosened(rx: str) -> str:
    """A pattern's regex as the scan tests it on raw lines: a superset (see loosen_anchors, loosen_colours,
    loosen_repeats)."""
    return loosen_repeats(loosen_colours(loosen_anchors(rx)))


@functools.lru_cache(maxsize=8)
def keep_plan(pattern_regexes: tuple[str, ...]) -> "KeepPlan":
    """The plan for these patterns, made once a process: finding the regexes' literals costs more than
    scanning a small log (a plan holds only strings and expressions, safe to share)."""
    return KeepPlan(list(pattern_regexes))


class KeepPlan:
    """keep_expr, cheaply: the same lines, found without running every regex on every line.

    Over all lines run three checks: a pure literal alternation (a literal every pattern match must
    contain, one DFA pass over the line), the progress-line literal (memmem), and one anchored regex
    for every line shape (it fails within a few bytes of the line start on other lines).  The failure
    patterns' regexes then run only on lines holding one of their literals, in small groups (one
    alternation of all of them defeats the regex engine's DFA and falls back to a slow NFA)."""

    GROUP = 4

    def __init__(self, pattern_regexes: list[str]):
        # Progress lines (the bulk of the literal hits in a long run) are found by their own test,
        # so they stay away from the per-literal gate below.
        self.thin = "|".join(f"(?:{r})" for r in grammar.KEEP_THIN)
        found = _analysis(tuple(pattern_regexes), tuple(grammar.KEEP_LITERAL), tuple(grammar.KEEP_THIN))
        regexes = found["regexes"]  # the structure's literal regexes, then each pattern's, loosened
        required = [set(r) if r is not None else None for r in found["required"]]
        # per pattern regex: the literals one of which a line must hold to match it (None: no such gate)
        self.pattern_gates = dict(zip(pattern_regexes, required[len(grammar.KEEP_LITERAL) : len(regexes)]))
        self.unanchored, self.literals = found["unanchored"], found["literals"]
        hit_lits = set().union(*(r for r in required[: len(regexes)] if r))
        # progress lines are first found by their literal (memmem, cheaper per row than a regex)
        thin_lits = set().union(*(r for r in required[len(regexes) :] if r))
        if len(thin_lits) == 1 and all(required[len(regexes) :]):
            self.thin_first = pl.col("line").str.contains(next(iter(thin_lits)), literal=True)
        else:
            self.thin_first = pl.col("line").str.contains(self.thin)
        self.hit_literals = found["hit_minimal"]
        self.hit_anchors = _alternation(set(self.hit_literals))
        self.anchors = _alternation(set(found["all_minimal"]))  # the thinning literal too: what grep is timed with
        # Groups of regexes, each run only on the lines holding one of its members' literals (a gate
        # found by Aho-Corasick); a member without a literal leaves its group ungated.
        self.groups: list[str] = []
        self.ungated: list[int] = []
        pairs: list[tuple[str, int]] = []
        for g, i in enumerate(range(0, len(regexes), self.GROUP)):
            self.groups.append("|".join(f"(?:{r})" for r in regexes[i : i + self.GROUP]))
            reqs = required[i : min(i + self.GROUP, len(regexes))]  # not the thinning regex after them
            if any(r is None for r in reqs):
                self.ungated.append(g)
            else:
                pairs += [(lit, g) for lit in set().union(*reqs)]
        self.gate = pl.DataFrame(pairs, schema={"lit": pl.String, "g": pl.Int64}, orient="row")
        gate_lits = {lit for lit, _ in pairs}
        self.gate_literals = sorted(gate_lits)
        # only when an ungated group's literals are among the hits: one more pass sets those lines apart
        self.gate_anchors = None if gate_lits == hit_lits else _alternation(gate_lits)

    def block_filter(self) -> BlockFilter:
        """The raw-bytes test that finds the stretches of a chunk where filter can keep a line for its
        own sake (lines kept only for their timestamp, progress lines included, do not count)."""
        return BlockFilter(self.hit_literals, self.unanchored)

    def filter(self, df: pl.DataFrame) -> pl.DataFrame:
        """The rows of df (column `line`) that `df.filter(keep_expr(...))` keeps, in order, with a column
        `tsonly` (kept only for their timestamp: thin_timestamps decides which of those the timeline
        needs) and `_pfx`, the line's launcher prefix (thin_timestamps' stream key).

        One query in polars' streaming engine, which spreads it over all cores, runs the tests over
        every line (a literal hit, a progress line, a shaped line: timestamp or structure) and, on the
        survivors, the tests that sort them: the bulk are timestamp lines (glog warnings from every
        rank), which the structure regex fails within a few bytes.  What is left to do one by one is
        the few rows of their own kind."""
        line, i = pl.col("line"), pl.col("_i")
        maybe = line.str.contains(self.hit_anchors) if self.hit_anchors else pl.lit(False)
        for rx in self.unanchored:
            maybe = maybe | line.str.contains(rx)
        shape = pl.col("_shape")
        rows = df.lazy().with_row_index("_i")
        # a flood that repeats the same lines: the tests run once per distinct line, joined back in order
        repeats = df.height > 1000 and df.get_column("line").n_unique() * 2 < df.height
        tested = (
            (df.lazy().select(line.unique()) if repeats else rows)
            .with_columns(_lit=maybe, _thin=self.thin_first,
                          _shape=line.str.contains(grammar.KEEP_ANCHORED_OR_STRUCT))
            .filter(pl.col("_lit") | pl.col("_thin") | shape)
            .with_columns(_os=shape & line.str.contains(grammar.KEEP_OTHER_OR_STRUCT),
                          # (a null line is skipped: the regex runs on progress-literal rows only)
                          _tr=pl.when("_thin").then(line).str.contains(self.thin).fill_null(False),
                          _pfx=_prefix_key)
        )
        if repeats:
            tested = rows.join(tested, on="line", how="inner", maintain_order="left")
        sub = tested.collect(engine="streaming")
        if not sub.height:
            return df.clear().with_columns(_pfx=pl.lit(""), tsonly=pl.lit(False))  # the columns of a non-empty result
        # shaped lines that are no plain timestamp line: each shape regex on its own
        shaped = sub.filter("_os").select("_i", other=line.str.contains(grammar.KEEP_OTHER),
                                          struct=line.str.contains(grammar.KEEP_STRUCT),
                                          ts=line.str.contains(grammar.KEEP_TS))
        core_ids = [shaped.filter("other").get_column("_i"), *self._pattern_hits(sub.filter("_lit"))]
        st = shaped.filter("struct").get_column("_i")
        near = pl.concat([st + 1, st + 2])
        core = pl.concat([*core_ids, near.filter(near < df.height)]).unique()
        ts = shaped.filter("ts").get_column("_i")
        in_core = i.is_in(core.implode())
        keep = sub.filter((shape & ~pl.col("_os")) | pl.col("_tr") | i.is_in(ts.implode()) | in_core).select(
            *df.columns, "_pfx", tsonly=~in_core, _i=i)
        # the lines after a traceback line that no test kept (source lines, message continuations)
        extra = core.filter(~core.is_in(sub.get_column("_i").implode()))
        if len(extra):
            more = df[extra].with_columns(_pfx=_prefix_key, tsonly=pl.lit(False), _i=extra)
            keep = pl.concat([keep, more.select(keep.columns)]).sort("_i")
        return keep.drop("_i")

    def _pattern_hits(self, lit: pl.DataFrame) -> list[pl.Series]:
        """Row ids (`_i`) of the literal hits that a failure pattern's regex matches: each group of regexes
        runs only on the lines holding one of its literals (one Aho-Corasick pass finds which).  A flood
        that repeats the same lines has them matched once each."""
        if not lit.height:
            return []
        line = pl.col("line")
        uniq = lit.select(line.unique(maintain_order=True))
        if uniq.height * 2 < lit.height:
            hits = self._pattern_hits(uniq.with_row_index("_i"))
            texts = uniq.get_column("line").gather(pl.concat(hits)) if hits else uniq.get_column("line").clear()
            return [lit.filter(line.is_in(texts.implode())).get_column("_i")]
        line = pl.col("line")
        gated = lit if self.gate_anchors is None else lit.filter(line.str.contains(self.gate_anchors))
        found = (
            gated.select("_i", lit=line.str.extract_many(self.gate_literals, overlapping=True))
            .explode("lit").drop_nulls().unique().join(self.gate, on="lit").select("_i", "g").unique()
        )
        todo = {g: ids for (g,), ids in found.group_by(["g"])}
        hits = []
        for g, rx in enumerate(self.groups):
            if g in self.ungated:
                part = lit
            elif g in todo:
                part = gated.filter(pl.col("_i").is_in(todo[g].get_column("_i").implode()))
            else:
                continue
            hits.append(part.filter(line.str.contains(rx)).get_column("_i"))
        return hits


# A stream's key: its launcher prefix (the regex's whole match needs no capture groups, so the
# engine's fast path finds it; prefixes contain no other whitespace than spaces, and srun pads them).
_prefix_key = pl.col("line").str.extract(grammar.PREFIX_ONLY, 0).str.replace_all(" ", "", literal=True)


def thin_timestamps(kept: pl.DataFrame) -> pl.DataFrame:
    """Of the lines kept only for their timestamp, keep those the timeline needs: the last one of each
    stream before one of that stream's kept lines, the last one before any kept line of the file, and
    the last one of each stream in the chunk (its latest time).  Bulk timestamped noise (glog warnings
    from every rank) then costs nothing downstream.  `kept` is KeepPlan.filter's output: a stream is a
    file and a launcher prefix (its column `_pfx`)."""
    if not kept.height or not kept.get_column("tsonly").any():
        return kept
    t = pl.col("tsonly")
    return kept.filter(~t | ~t.shift(-1).over("src", "_pfx").fill_null(False) | ~t.shift(-1).fill_null(True))


def _analysis(patterns: tuple[str, ...], literal: tuple[str, ...], thin: tuple[str, ...]) -> dict:
    """The regexes the scan runs (`literal`, then each pattern's loosened), the literals each needs (None: it
    has none to gate on), the regexes with none, and the minimal literal sets: loosening and parsing ~600
    regexes costs a tenth of a second per run, so the result is kept on disk, keyed by the regexes and by
    this code (a change to either computes it afresh)."""
    code = [Path(m.__file__).read_bytes() for m in (sys.modules[__name__], sys.modules[_required.__module__])]
    path = cache_file("plan", patterns, literal, thin, code, suffix=".json")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    regexes = (*literal, *(_loosened(r) for r in patterns))
    found = {"regexes": list(regexes), **_analyse(regexes, thin)}
    write_atomic(path, json.dumps(found).encode())
    return found


def _analyse(regexes: tuple[str, ...], thin: tuple[str, ...]) -> dict:
    lits: set[str] = set()
    unanchored: list[str] = []  # no usable literal: run on every line
    required: list[set[str] | None] = []
    for rx in [*regexes, *thin]:
        # (the progress-line test gates on its own word, `iteration`: those lines are its business)
        avoid = frozenset() if rx in thin else None
        req = needed_literals(rx, avoid)
        # a literal of 3 characters or more that is no word of every progress line: a gate; else
        # the regex itself goes to the automaton (which matches it as cheaply as a literal)
        if req and gate_rank(req, avoid) >= 3:
            lits |= req
        elif rx not in thin:
            unanchored.append(rx)
            req = None
        required.append(req)
    hit_lits = set().union(*(r for r in required[: len(regexes)] if r))
    return {
        "required": [sorted(r) if r is not None else None for r in required],
        "unanchored": unanchored,
        "literals": sorted(lits),
        # a literal that holds another one adds no line to a `contains` (256 of 322 literals are left)
        "hit_minimal": sorted(_minimal(hit_lits)),
        "all_minimal": sorted(_minimal(lits)),
    }
