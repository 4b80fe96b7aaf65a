"""Timeline builder: parse the timestamps logs really carry and put every kept line on one clock.

A line without a timestamp takes the latest earlier timestamp of its own stream (same file, same
prefix) for reporting; for ordering it takes the latest earlier timestamp of its file, and file order
breaks ties.  glog/c10 headers carry no year: it comes from the job's other timestamps, else the
file's modification time.  Their 9-digit fraction is a monotonic clock, so it is dropped.
"""
from __future__ import annotations

from collections import Counter
from datetime import datetime

import polars as pl

from diagnose.read import grammar
from diagnose.model import Source


# the fields each timestamp family gives (coalesced in this order: ISO, glog, labelled, syslog)
_FIELDS = {
    "_iso": {"Y", "M", "D", "h", "m", "s", "f"}, "_glog": {"h", "m", "s"},
    "_lab": {"Y", "M", "D", "h", "m", "s", "f"}, "_sys": {"D", "h", "m", "s", "f"},
}


def add_times(df: pl.DataFrame, sources: list[Source]) -> tuple[pl.DataFrame, int | None]:
    msg = pl.col("msg")
    head = pl.coalesce(pl.col("tstext"), msg)  # a timestamp prefix that normalize peeled off, else the message
    df = df.with_columns(
        _iso=head.str.extract_groups(grammar.TS_ISO), _glog=head.str.extract_groups(grammar.TS_GLOG),
        _lab=msg.str.extract_groups(grammar.TS_LABELLED), _sys=head.str.extract_groups(grammar.TS_SYSLOG),
    )
    i, g, lab, sy = (pl.col(c) for c in ("_iso", "_glog", "_lab", "_sys"))
    md = g.struct.field("MD")
    mon = sy.struct.field("Mon").replace_strict({m: str(n) for n, m in enumerate(grammar.MONTHS, 1)}, default=None)

    def field(name: str, *more: pl.Expr) -> pl.Expr:
        return pl.coalesce(*(x.struct.field(name) for x in (i, g, lab, sy) if name in _FIELDS[x.meta.output_name()]), *more)

    df = df.with_columns(
        _Y=field("Y").cast(pl.Int32, strict=False),
        _M=field("M", md.str.slice(0, md.str.len_chars() - 2), mon).cast(pl.Int32, strict=False),
        _D=field("D", md.str.slice(-2)).cast(pl.Int32, strict=False),
        _h=field("h").cast(pl.Int32, strict=False),
        _mi=field("m").cast(pl.Int32, strict=False),
        _s=field("s").cast(pl.Int32, strict=False),
        _f=field("f").str.pad_end(6, "0").str.slice(0, 6).cast(pl.Int32, strict=False),
    ).drop("_iso", "_glog", "_lab", "_sys")
    year = _infer_year(df, sources)
    valid = (
        pl.col("_M").is_between(1, 12)
        & pl.col("_D").is_between(1, 31)
        & pl.col("_h").is_between(0, 23)
        & pl.col("_mi").is_between(0, 59)
        & pl.col("_s").is_between(0, 60)
    )
    df = df.with_columns(
        ts=pl.when(valid & (pl.col("_Y").is_not_null() | pl.lit(year is not None))).then(
            pl.datetime(
                pl.col("_Y").fill_null(year if year is not None else 1970),
                pl.col("_M"),
                pl.col("_D"),
                pl.col("_h"),
                pl.col("_mi"),
                pl.col("_s").clip(0, 59),
                pl.col("_f").fill_null(0),
            )
        )
    ).drop("_Y", "_M", "_D", "_h", "_mi", "_s", "_f")
    df = df.sort("src", "lineno").with_columns(
        time=pl.col("ts").forward_fill().over("stream"),
        # lines before a file's first timestamp happened no later than it: they take it for ordering
        # (else every untimed line would sort after every timed one, whatever the file order says)
        order_time=pl.col("ts").forward_fill().backward_fill().over("src"),
    )
    return df, year


def _infer_year(df: pl.DataFrame, sources: list[Source]) -> int | None:
    years = df.get_column("_Y").drop_nulls()
    if len(years):
        return Counter(years.to_list()).most_common(1)[0][0]
    for s in sources:
        try:
            return datetime.fromtimestamp(s.path.stat().st_mtime).year
        except OSError:
            continue
    return None
