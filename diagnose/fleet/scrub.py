"""The fleet tables cleaned once, before any output: reports read by `mdiag fleet` may have been written
with --no-redact, by an older mdiag or by hand, so every text cell (and every item of a list cell) and the
summary go through the same redaction and control-character pass as a single report
(`diagnose.render.redact`)."""
from __future__ import annotations


def clean_text(value):
    """One cell: secrets redacted, control / bidi / zero-width characters shown as escapes."""
    from diagnose.render.redact import inert_text, redact_text

    return value if value is None else inert_text(redact_text(value))


def scrub(tables: dict) -> dict:
    """A copy of `tables` (summarize's dict of polars frames and its summary) with every string cleaned."""
    import polars as pl

    from diagnose.render.redact import redact

    out = {}
    for name, table in tables.items():
        if not isinstance(table, pl.DataFrame):
            out[name] = redact(table)
            continue
        cols = []
        for col, dtype in table.schema.items():
            if dtype == pl.String:
                cols.append(pl.Series(col, [clean_text(v) for v in table[col].to_list()], dtype=dtype))
            elif dtype == pl.List(pl.String):
                cols.append(pl.Series(col, [None if v is None else [clean_text(x) for x in v]
                                            for v in table[col].to_list()], dtype=dtype))
        out[name] = table.with_columns(cols) if cols else table
    return out
