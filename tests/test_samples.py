"""The bundled sample logs (real torchrun runs) are diagnosed as labelled in sample_logs/expected.json."""
import json

import pytest

from diagnose import diagnose
from diagnose.render.report import to_dict

from .conftest import SAMPLES

EXPECTED = json.loads((SAMPLES / "expected.json").read_text())


def _norm(s):
    return " ".join((s or "").split())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample(name, validate):
    want = EXPECTED[name]
    d = diagnose([SAMPLES / name])
    validate(to_dict(d))
    if want["category"] is None:
        assert d.status == "no_failure_found"
        return
    r = d.root_cause
    assert r.category == want["category"]
    if want["root_rank"] is not None:
        assert r.rank == want["root_rank"]
    if want.get("root_message"):
        a, b = _norm(want["root_message"]), _norm(r.message)
        assert a in b or b in a, (a, b)
    assert r.evidence and r.evidence.line >= 1
