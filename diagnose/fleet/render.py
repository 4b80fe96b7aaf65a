"""The fleet tables in the terminal (rich)."""
from __future__ import annotations

from datetime import datetime


def _fmt(v, col: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d")
    if isinstance(v, float):
        return f"{v:,.1f}"
    return str(v)


def render(tables: dict, console) -> None:
    from rich.table import Table
    from rich.text import Text

    from diagnose.render.report import inert

    s = tables["summary"]
    head = Text()
    head.append("mdiag fleet", style="bold")
    head.append(f" · {s['reports']:,} reports · {s['failures']:,} failures")
    if s["first"]:
        head.append(f" · {s['first'][:10]} … {s['last'][:10]}")
    if s["failures_with_gpu_hours"]:
        head.append(f" · {s['gpu_hours_lost']:,.1f} GPU-hours lost ({s['failures_with_gpu_hours']:,} jobs with SLURM accounting)")
    console.print(head)

    def table(title, df, cols, right=(), wrap=()):
        t = Table(title=Text(title, style="bold"), title_justify="left", expand=False)
        for c, label in cols:
            t.add_column(label, justify="right" if c in right else "left", overflow="fold", no_wrap=c not in wrap)
        for row in df.iter_rows(named=True):
            t.add_row(*[Text(inert(_fmt(row[c], c))) for c, _ in cols])
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
          wrap=("title", "category"))
    table("Suspect nodes", tables["suspect_nodes"],
          [("host", "host"), ("failures", "n"), ("categories", "categories"), ("jobs", "jobs"), ("reason", "why")],
          right=("failures",), wrap=("categories", "jobs", "reason"))
    console.print(Text(f"suspect rule: {s['suspect_rule']}", style="dim"))
