"""Bounded state for the scan: however many lines match, what is kept for analysis stays small.

Until FULL_ROWS matching lines (not counting lines kept only for their timestamp) have been kept, all
are kept, as always.  After that a line is kept only while its stream (file and launcher prefix) has
kept fewer than PER_SIGNATURE lines of the same signature (its text with every number masked), and
never beyond MAX_ROWS lines or MAX_SIGNATURES signatures in all; the others are counted.  A log in
which every line is an error then costs O(ranks × kinds of message) rows, and the report says it
summarised and how many lines it counted without analysing them one by one.
"""
from __future__ import annotations

import polars as pl

FULL_ROWS = 20_000
PER_SIGNATURE = 3
MAX_ROWS = 150_000
MAX_SIGNATURES = 200_000
_KEYS = ["src", "_pfx", "_sig"]


class Summariser:
    def __init__(self, full_rows: int = FULL_ROWS, per_signature: int = PER_SIGNATURE,
                 max_rows: int = MAX_ROWS, max_signatures: int = MAX_SIGNATURES):
        self.full_rows, self.per_signature = full_rows, per_signature
        self.max_rows, self.max_signatures = max_rows, max_signatures
        self.rows = 0  # matching lines kept so far
        self.dropped = 0  # matching lines counted, not kept
        self.seen: pl.DataFrame | None = None  # (src, _pfx, _sig, n): lines of each signature seen

    @property
    def summarised(self) -> bool:
        return self.dropped > 0

    def warning(self) -> str | None:
        if not self.dropped:
            return None
        return (f"summarised: {self.dropped:,} matching lines repeated what their rank had already printed "
                f"(same text but for numbers) and were counted, not analysed one by one")

    def cap(self, kept: pl.DataFrame) -> pl.DataFrame:
        """kept (scan's rows: src, _pfx, line, tsonly, …) less the repeats over the caps, in order."""
        core = ~pl.col("tsonly")
        n = kept.select(core.sum()).item()
        if self.seen is None and self.rows + n <= self.full_rows:
            self.rows += n
            return kept
        k = kept.with_row_index("_r").with_columns(_sig=_signatures(kept.get_column("line")))
        rows = k.filter(core).select("_r", *_KEYS)
        prior = self.seen if self.seen is not None else pl.DataFrame(
            schema={"src": pl.Int32, "_pfx": pl.String, "_sig": pl.String, "n": pl.UInt32})
        rows = rows.join(prior, on=_KEYS, how="left", nulls_equal=True).with_columns(
            _n=pl.col("n").fill_null(0) + pl.int_range(pl.len(), dtype=pl.UInt32).over(_KEYS))
        if self.rows < self.full_rows:  # the first FULL_ROWS lines are all kept
            free = self.full_rows - self.rows
            rows = rows.with_columns(_n=pl.when(pl.int_range(pl.len()) < free).then(0).otherwise("_n"))
        over_sigs = prior.height >= self.max_signatures
        fresh = pl.col("n").is_null() & pl.int_range(pl.len()).over(_KEYS).eq(0)
        ok = (pl.col("_n") < self.per_signature) & ~(fresh & pl.lit(over_sigs))
        keep_ids = rows.filter(ok).get_column("_r").head(max(self.max_rows - self.rows, 0))
        self.dropped += rows.height - len(keep_ids)
        self.rows += len(keep_ids)
        counts = rows.group_by(_KEYS).agg(n=pl.len().cast(pl.UInt32))
        if over_sigs:
            counts = counts.join(prior.select(_KEYS), on=_KEYS, how="semi", nulls_equal=True)
        self.seen = pl.concat([prior, counts]).group_by(_KEYS).agg(pl.col("n").sum())
        drop = rows.filter(~pl.col("_r").is_in(keep_ids.implode())).get_column("_r")
        return k.filter(~pl.col("_r").is_in(drop.implode())).drop("_r", "_sig")


def _signatures(lines: pl.Series) -> pl.Series:
    """Each line's text with every number masked, cut at 200 characters; a flood that repeats the same
    lines has each one masked once."""
    sig = pl.col("line").str.replace_all(r"[0-9]+", "#").str.slice(0, 200)
    uniq = lines.unique()
    if len(uniq) * 2 >= len(lines):
        return lines.to_frame("line").select(sig).to_series().rename("_sig")
    table = uniq.to_frame("line").with_columns(_sig=sig)
    return lines.to_frame("line").join(table, on="line", how="left", maintain_order="left").get_column("_sig")
