"""Property tests (hypothesis) of the reader and of every renderer with arbitrary text: no exception,
no secret, no raw control character, bounded output."""
from __future__ import annotations

import json
import re
from datetime import datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.pipeline import diagnose
from diagnose.render.html import MAX_TICKS, _ticks, render_html
from diagnose.render.markdown import render as render_markdown
from diagnose.render.outputs import append_jsonl, read_jsonl
from diagnose.render.redact import MARK, inert_text, redact, redact_text
from diagnose.render.report import to_dict

from .cases import SECRETS

RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200b-\u200f\ufeff]")
# log-like text: any characters, weighted towards the ones that matter (controls, prefixes, digits)
LOGTEXT = st.text(st.one_of(st.characters(), st.sampled_from(list("\x1b\x07\x9b\u202e\u200b\n\t[]:0123456789 "))),
                  max_size=300)
LINES = st.lists(st.one_of(LOGTEXT, st.sampled_from([
    "Traceback (most recent call last):", '  File "/job/train.py", line 3, in <module>',
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", "[rank3]: RuntimeError: boom",
    f"[rank{2**64}]: ValueError: x", "2024-01-01 00:00:00 [rank0]: start", "0001-01-01 00:00:00 x"])), max_size=30)
# tokens that say what they are by their shape (a bare 40-hex wandb key or base64 blob cannot be told from a hash)
TOKENS = sorted(SECRETS[k] for k in ("openai", "gitlab", "google"))
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                            HealthCheck.too_slow])


@SETTINGS
@given(lines=LINES, secret=st.sampled_from(TOKENS))
def test_reader_and_renderers_on_any_log(tmp_path_factory, lines, secret):
    d = tmp_path_factory.mktemp("p")
    (d / "rank-0.log").write_text("\n".join([*lines, f"[rank0]: token is {secret}"]), encoding="utf-8", errors="surrogatepass")  # any lone surrogate: bytes that are no UTF-8
    diag = redact(diagnose([d]))
    doc = redact(to_dict(diag))
    outs = [json.dumps(doc), render_markdown(doc), render_html(doc)]
    for out in outs:
        assert secret[10:] not in out
        assert RAW.search(out) is None
    assert len(outs[2]) < 2_000_000


@settings(max_examples=200, deadline=None)
@given(text=LOGTEXT, secret=st.sampled_from(TOKENS), at=st.integers(0, 300))
def test_redact_removes_secrets_and_controls_anywhere(text, secret, at):
    mixed = text[:at] + " " + secret + " " + text[at:]
    out = redact({"a": [{"b": mixed}], mixed: 1})
    flat = json.dumps(out, ensure_ascii=False)
    assert secret[10:] not in flat and RAW.search(flat) is None and MARK in flat
    assert redact_text(redact_text(mixed)) == redact_text(mixed)  # idempotent
    assert inert_text(inert_text(text)) == inert_text(text)


@settings(max_examples=100, deadline=None)
@given(a=st.datetimes(), b=st.datetimes())
def test_timeline_ticks_are_bounded_for_any_span(a, b):
    t0, t1 = min(a, b), max(a, b)
    ticks = _ticks(t0, t1)
    assert len(ticks) <= MAX_TICKS and all(t0 <= t <= t1 for t in ticks)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(st.dictionaries(st.text(max_size=10), st.one_of(st.text(max_size=50), st.integers(),
                                                                        st.none()), max_size=5), max_size=5),
       torn=st.text(max_size=20))
def test_jsonl_records_survive_a_torn_line(tmp_path_factory, docs, torn):
    path = tmp_path_factory.mktemp("j") / "all.jsonl"
    for i, doc in enumerate(docs):
        append_jsonl(path, doc)
        if i == 0 and torn:
            with open(path, "a", encoding="utf-8", errors="surrogatepass") as f:
                f.write("{" + torn.replace("\n", " "))
    if docs:
        got, _bad = read_jsonl(path)
        assert got == docs
