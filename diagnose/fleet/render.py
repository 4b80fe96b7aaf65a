"""The fleet tables in the terminal (rich)."""
from __future__ import annotations

from datetime import datetime

from diagnose.fleet.suspects import list_text


def _fmt(v, col: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, list):
        return list_text(v, most=20) or "-"
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d")
    if isinstance(v, float):
        return f"{v:,.1f}"
    return str(v)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def render(tables: dict, console) -> None:
    from rich.table import Table
    from rich.text import Text

    from diagnose.render.report import inert, plural

    s = tables["summary"]
    head = Text()
    head.append("mdiag fleet", style="bold")
    head.append(f" · {plural(s['reports'], 'report')} · {plural(s['failures'], 'failure')}")
    if s["first"]:
        head.append(f" · {s['first'][:10]} … {s['last'][:10]}")
    if s["failures_with_gpu_hours"]:
        head.append(f" · {s['gpu_hours_lost']:,.1f} GPU-hours lost ({plural(s['failures_with_gpu_hours'], 'job')} with SLURM accounting)")
    console.print(head)

    def table(title, df, cols, right=(), prose=()):
        """Cells never wrap: one row per line.  Where the terminal is too narrow the `prose` columns are
        cut with …; the others (ids, counts, dates, hosts) keep their width."""
        cells = [[inert(_fmt(row[c], c)) for c, _ in cols] for row in df.iter_rows(named=True)]
        natural = [max([len(label)] + [len(r[i]) for r in cells]) for i, (_, label) in enumerate(cols)]
        fixed = sum(w for w, (c, _) in zip(natural, cols) if c not in prose)
        room = console.width - 3 * len(cols) - 1 - fixed  # borders and padding: 3 per column, 1 at the end
        want = sum(w for w, (c, _) in zip(natural, cols) if c in prose)
        widths = list(natural)
        if want > room:
            for i, (c, _) in enumerate(cols):
                if c in prose:
                    widths[i] = max(8, natural[i] * max(room, 0) // want)
        # still too wide: narrow the widest text column, one character at a time; counts stay whole
        while sum(widths) + 3 * len(cols) + 1 > console.width:
            i = max((i for i, (c, _) in enumerate(cols) if c not in right), key=lambda i: widths[i])
            if widths[i] <= 4:
                break
            widths[i] -= 1
        t = Table(title=Text(title, style="bold"), title_justify="left", expand=False)
        for i, (c, label) in enumerate(cols):
            t.add_column(label, justify="right" if c in right else "left", overflow="ellipsis", no_wrap=True,
                         max_width=widths[i], min_width=widths[i])
        for r in cells:
            t.add_row(*[Text(_cut(x, w)) for x, w in zip(r, widths)])
        if df.height == 0:
            t.add_row(*([Text("none", style="dim")] + [Text("")] * (len(cols) - 1)))
        console.print(t)

    bc = tables["by_category"].with_columns((tables["by_category"]["share"] * 100).round(1).alias("share"))
    table("Failures by category", bc, [("category", "category"), ("failures", "failures"), ("share", "%"),
                                       ("gpu_hours_lost", "GPU-h lost")], right=("failures", "share", "gpu_hours_lost"))
    table("Failures by ISO week", tables["by_week"], [("week", "week"), ("failures", "failures"),
                                                      ("top_category", "top category"), ("gpu_hours_lost", "GPU-h lost")],
          right=("failures", "gpu_hours_lost"))
    table("Top fingerprints", tables["fingerprints"],
          [("fingerprint", "fingerprint"), ("failures", "n"), ("category", "category"), ("title", "what"),
           ("first_seen", "first seen"), ("last_seen", "last seen"), ("example_job", "example job")], right=("failures",),
          prose=("title",))
    table("Suspect nodes", tables["suspect_nodes"],
          [("host", "host"), ("failures", "n"), ("categories", "categories"), ("jobs", "jobs"), ("reason", "why")],
          right=("failures",), prose=("categories", "jobs", "reason"))
    console.print(Text(f"suspect rule: {s['suspect_rule']}", style="dim"))
