"""A compact Markdown summary of one diagnosis, for a GitHub issue or a chat message.

Built from the JSON document (report.to_dict), so any stored report can be rendered.  Log text is
data: outside code it is backslash-escaped so it can't open links, emphasis, tables or HTML; inside
the fenced block the fence is longer than any run of backticks in the text, so it can't close it.
"""
from __future__ import annotations

import re

from diagnose.analyze.fingerprint import is_library
from diagnose.render.report import detail_lines, inert, plural, read_line

MAX_TRACEBACK_LINES = 40
MAX_LINE = 400
# Emphasis, code, links, HTML, tables, strikethrough; `_` only where it could open or close emphasis.
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|~&]|(?<!\w)_|_(?!\w))")


# What GitHub (and chat tools) turn into a notification, a cross-reference or a link: put in a code span.
_ACTIVE = re.compile(r"(?:(?:https?|ftp|file)://|\bwww\.)\S+?(?=[.,;:!?)\]'\"]*(?:\s|$))|(?<![\w/])@[A-Za-z0-9][\w-]*(?:/[\w.-]+)?(?:#\d+\b)?|"
                     r"(?<![\w&/])(?:[\w.-]+/[\w.-]+)?#\d+\b|\bGH-\d+\b(?:#\d+\b)?")  # `@node#7` whole: a `#7` after a code span is linked


def esc(text: object) -> str:
    """Inline Markdown text: special characters escaped, one line, control characters visible; @mentions,
    #123 references and bare URLs become code spans, so pasting a report pings, links and cross-references
    nothing."""
    s = inert(" ".join(str(text).split()))
    spans: list[list[int]] = []  # adjacent matches (`@node#7`) share one code span
    for m in _ACTIVE.finditer(s):
        if spans and spans[-1][1] == m.start():
            spans[-1][1] = m.end()
        else:
            spans.append([m.start(), m.end()])
    out, at = [], 0
    for start, end in spans:
        out += [_MD_SPECIAL.sub(r"\\\1", s[at:start]), code(s[start:end])]
        at = end
    out.append(_MD_SPECIAL.sub(r"\\\1", s[at:]))
    return "".join(out)


def code(text: object) -> str:
    """Inline code span that holds any text (CommonMark: a fence longer than any backtick run)."""
    s = inert(" ".join(str(text).split()))
    n = max((len(m) for m in re.findall(r"`+", s)), default=0) + 1
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    return f"{'`' * n}{pad}{s}{pad}{'`' * n}"


def fenced(lines: list[str], info: str = "text") -> str:
    """A fenced code block whose fence is longer than any backtick run in `lines`."""
    body = "\n".join(inert(x) for x in lines)
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def _clip(s: str, n: int = MAX_LINE) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def trimmed_traceback(root: dict) -> list[str]:
    """The traceback with library frames folded into a count and long lines clipped."""
    tb = root.get("traceback") or []
    out: list[str] = []
    folded = 0
    skip_code = False
    for line in tb:
        m = re.match(r'\s*File "(.*?)", line \d+', line)
        if m:
            if is_library(m.group(1)):
                folded += 1
                skip_code = True
                continue
            if folded:
                out.append(f"  … {folded} library frame{'s' * (folded > 1)}")
                folded = 0
            skip_code = False
            out.append(_clip(line))
            continue
        if line.startswith("    ") and (skip_code or set(line.strip()) <= set("^~ ")):
            continue  # the code line of a folded frame, or a caret marker
        if folded:
            out.append(f"  … {folded} library frame{'s' * (folded > 1)}")
            folded = 0
        skip_code = False
        out.append(_clip(line))
    if folded:
        out.append(f"  … {folded} library frame{'s' * (folded > 1)}")
    if not out and root.get("message"):
        out = [_clip(root["message"])]
    if len(out) > MAX_TRACEBACK_LINES:
        keep = MAX_TRACEBACK_LINES // 2
        out = out[:4] + [f"  … {plural(len(out) - 4 - keep, 'line')}"] + out[-keep:]
    return out


def _where(ev: dict | None) -> str | None:
    return code(f"{ev.get('file')}:{ev.get('line')}") if ev else None


def _last_line(doc: dict, rank) -> str:
    """Where a rank's own output stops: its last line in the logs, or that there is none."""
    k = next((k for k in doc.get("ranks") or [] if k.get("rank") == rank), None)
    if k and k.get("last_line"):
        msg = _clip(k.get("last_message") or "", 200)
        return f"Rank {esc(rank)}'s own last line: {_where(k['last_line'])}" + (f" {code(msg)}" if msg else "")
    return f"Rank {esc(rank)}'s own last line: none in these logs (no line names its rank)."


def render(doc: dict) -> str:
    r = doc.get("root_cause")
    if doc.get("status") != "failed" or not r:
        srcs = [{"lines": s.get("lines", 0)} for s in doc.get("sources", [])]
        return f"**mdiag: no failure found** — {read_line(srcs)}\n"
    out = [f"### mdiag: {esc(r.get('category', '').upper())} — {esc(r.get('summary') or r.get('title') or '')}", ""]
    facts = [f"pattern {code(r.get('pattern'))}"]
    for label, key in (("rank", "rank"), ("host", "host"), ("time", "time")):
        v = r.get(key)
        facts.append(f"{label} {esc(v) if v is not None else 'unknown'}")
    if r.get("fingerprint"):
        facts.append(f"fingerprint {code(r['fingerprint'])}")
    if doc.get("job_id"):
        facts.insert(0, f"job {esc(doc['job_id'])}")
    out.append(" · ".join(facts))
    details = r.get("details") or {}
    straggler = details.get("lagging_rank")
    where = _where(r.get("evidence"))
    if straggler is not None and details.get("reported_by_rank") != straggler:
        # a hang: the cause is the rank that did NOT time out; the evidence line is another rank's report
        out += ["", f"**Straggler: rank {esc(straggler)}** — the other ranks timed out waiting for it "
                    f"in a collective; it hung or died first."]
        out += ["", _last_line(doc, straggler), ""]
        if where:
            out.append(f"Reported by rank {esc(details.get('reported_by_rank', '?'))} at {where}")
        out += [""] + [f"- {esc(x)}" for x in detail_lines(details)] + [""]
        if r.get("why"):
            out += [f"**Why.** {esc(r['why'])}", ""]
        out += [f"<details><summary>rank {esc(details.get('reported_by_rank', '?'))}'s traceback "
                "(the report of the timeout, not its cause)</summary>", "", fenced(trimmed_traceback(r)), "",
                "</details>", ""]
    else:
        if where:
            out += ["", f"Evidence: {where}"]
        out += ["", fenced(trimmed_traceback(r)), ""]
        if r.get("why"):
            out += [f"**Why.** {esc(r['why'])}", ""]
    if r.get("remediation"):
        out.append("**What to do**")
        out += [f"- {esc(x)}" for x in r["remediation"]]
        out.append("")
    syms = doc.get("symptoms") or []
    if syms:
        out += ["<details><summary>Downstream symptoms</summary>", "", "| what | ranks | count | first seen |", "|---|---|---:|---|"]
        for s in syms[:10]:
            ranks = ", ".join(map(str, s.get("ranks", [])[:8])) + (" …" if len(s.get("ranks", [])) > 8 else "")
            out.append(f"| {esc(s.get('title') or s.get('pattern'))} | {ranks or '-'} | {s.get('count', '')} | {esc(s.get('first_time') or '-')} |")
        if len(syms) > 10:
            out.append(f"| and {len(syms) - 10} more | | | |")
        out += ["", "</details>", ""]
    return "\n".join(out).rstrip() + "\n"
