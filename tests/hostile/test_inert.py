"""Every renderer's own escaping shows C1 controls, bidi overrides and zero-width characters as text, even
for a string that did not go through the report's redaction pass."""
from __future__ import annotations

import re

import pytest

from diagnose.render.markdown import code, esc, fenced
from diagnose.render.report import inert

RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
NASTY = "a\x1b]8;;http://x\x07b\x9b2J\u202egnp.exe\u200b\u2066\ufeff\x7f\x00"


@pytest.mark.parametrize("render", [inert, esc, code, lambda s: fenced([s, s])])
def test_renderers_leave_no_raw_control_character(render):
    out = render(NASTY)
    assert not RAW.search(out), repr(out)
    assert "\\u202e" in out and "\\u200b" in out


@pytest.mark.parametrize("text,want", [
    ("host @carol-node#7", "host `@carol-node#7`"),  # one span: `#7` right after a code span would be linked
    ("GH-7#1 and @a#2", "`GH-7#1` and `@a#2`"),
    ("see owner/repo#45", "see `owner/repo#45`"),
])
def test_markdown_issue_references_next_to_other_text_are_code(text, want):
    assert esc(text) == want
