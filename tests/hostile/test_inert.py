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
