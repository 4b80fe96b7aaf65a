"""render/schema.json is generated from the model and real reports validate against it; times are RFC 3339
with an offset and say when the log gave none."""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from diagnose.model import Diagnosis, Evidence, RankSummary, RootCause, Source, Symptom
from diagnose.pipeline import diagnose
from diagnose.render import schema as schema_mod
from diagnose.render.report import to_dict

from .corpus_score import diagnose_all, diagnosis

from .conftest import ROOT, SAMPLES

jsonschema = pytest.importorskip("jsonschema")
CORPUS = ROOT / "tests" / "corpus"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)$")


def _validator():
    return jsonschema.Draft202012Validator(schema_mod.build())


def _times(doc: dict) -> list[str]:
    r = doc["root_cause"] or {}
    out = [r.get("time")] + [s["first_time"] for s in doc["symptoms"]]
    out += [t for k in doc["ranks"] for t in (k["last_time"], k["first_error_time"])]
    out.append((doc["job"].get("last_iteration") or {}).get("time"))
    return [t for t in out if t is not None]


def test_committed_schema_is_the_generated_one():
    committed = json.loads(schema_mod.PATH.read_text())
    assert committed == schema_mod.build(), "run: python -m diagnose.render.schema"
    assert schema_mod.main(["--check"]) == 0
    jsonschema.Draft202012Validator.check_schema(committed)


def test_job_and_details_have_real_properties():
    s = schema_mod.build()
    assert s["properties"]["job"] == {"$ref": "#/$defs/JobFacts"}
    job, details = s["$defs"]["JobFacts"], s["$defs"]["RootDetails"]
    for obj in (job, details):
        assert obj["additionalProperties"] is False and len(obj["properties"]) > 15
    assert job["properties"]["world_size"]["type"] == ["integer", "null"]
    assert job["properties"]["checks"]["items"] == {"$ref": "#/$defs/Check"}
    assert details["properties"]["lagging_rank"]["minimum"] == 0
    assert details["properties"]["progress"]["anyOf"][0] == {"$ref": "#/$defs/Progress"}
    assert "from" in details["properties"] and "from_" not in details["properties"]
    # every object in the schema lists its keys: none is free-form
    def walk(x):
        if isinstance(x, dict):
            if x.get("type") == "object" and "additionalProperties" not in x:
                raise AssertionError(f"free-form object: {x}")
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(s)


def _cases(step: int) -> list[Path]:
    return sorted(CORPUS.glob("*/logs"))[::step]


@pytest.mark.parametrize("path", [p for p in sorted(SAMPLES.iterdir()) if p.name != "expected.json"] + _cases(25),
                         ids=lambda p: p.parent.name if p.name == "logs" else p.name)
def test_real_reports_validate(path):
    doc = json.loads(json.dumps(to_dict(diagnose([path]))))
    errors = sorted(_validator().iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    assert all(RFC3339.match(t) for t in _times(doc)), _times(doc)
    assert doc["times_assumed_utc"] is bool(_times(doc))  # these logs carry no UTC offset


@pytest.mark.slow
def test_every_corpus_report_validates():
    v = _validator()
    bad = {}
    diagnose_all([p.parent for p in _cases(1)])
    for path in _cases(1):
        doc = json.loads(json.dumps(to_dict(diagnosis(path.parent))))  # (the accuracy test's reports, when it ran)
        errors = list(v.iter_errors(doc))
        if errors:
            bad[path.parent.name] = [f"{list(e.path)}: {e.message}" for e in errors[:3]]
    assert not bad


def test_a_report_with_slurm_facts_validates():
    from diagnose.slurm import job as slurm

    d = diagnose([SAMPLES / "megatron-1234.err"])
    slurm.apply(d, slurm.JobInfo(job_id="1234", state="FAILED", exit_code="1:0", elapsed="00:10:00", node_list="vm",
                                 source="sacct"))
    doc = json.loads(json.dumps(to_dict(d)))
    assert doc["job_id"] == "1234" and doc["slurm"]["source"] == "sacct"
    jsonschema.validate(doc, schema_mod.build())
    empty = Diagnosis(status="no_failure_found", root_cause=None, symptoms=[], ranks=[], sources=[])
    slurm.apply(empty, slurm.JobInfo(job_id="9", state="TIMEOUT", source="environment"))
    doc = json.loads(json.dumps(to_dict(empty)))
    assert doc["root_cause"]["details"] == {"slurm_state": "TIMEOUT", "from": "environment"}
    jsonschema.validate(doc, schema_mod.build())


def test_an_undeclared_key_is_refused():
    d = diagnose([SAMPLES / "megatron-1234.err"])
    d.root_cause.details["not_in_the_model"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(json.dumps(to_dict(d))), schema_mod.build())


# ---------------------------------------------------------------- times

def _diagnosis(t: datetime) -> Diagnosis:
    ev = Evidence("a.log", 3)
    root = RootCause(category="python", pattern="p", summary="s", message="m", evidence=ev, time=t)
    return Diagnosis(status="failed", root_cause=root, ranks=[RankSummary(rank=0, last_time=t)],
                     symptoms=[Symptom("nccl", "q", "t", "m", [1], 1, t + timedelta(seconds=5), ev)],
                     sources=[Source(0, Path("a.log"), "a.log", "merged", lines=3)],
                     job={"last_iteration": {"iteration": 3, "of": 10, "time": t.isoformat()}})


def test_times_without_an_offset_are_written_as_utc_and_flagged():
    doc = to_dict(_diagnosis(datetime(2026, 12, 2, 14, 28, 21, 659000)))
    assert doc["root_cause"]["time"] == "2026-12-02T14:28:21.659000+00:00"
    assert doc["symptoms"][0]["first_time"] == "2026-12-02T14:28:26.659000+00:00"
    assert doc["ranks"][0]["last_time"] == doc["job"]["last_iteration"]["time"] == doc["root_cause"]["time"]
    assert doc["times_assumed_utc"] is True
    jsonschema.validate(json.loads(json.dumps(doc)), schema_mod.build())


def test_times_with_an_offset_keep_it_and_are_not_flagged():
    cet = timezone(timedelta(hours=1))
    doc = to_dict(_diagnosis(datetime(2026, 12, 2, 14, 28, 21, tzinfo=cet)))
    assert doc["root_cause"]["time"] == "2026-12-02T14:28:21+01:00"
    assert doc["job"]["last_iteration"]["time"] == "2026-12-02T14:28:21+01:00"
    assert doc["times_assumed_utc"] is False
    jsonschema.validate(json.loads(json.dumps(doc)), schema_mod.build())
    none = to_dict(Diagnosis(status="no_failure_found", root_cause=None, symptoms=[], ranks=[], sources=[]))
    assert none["times_assumed_utc"] is False  # no time, nothing assumed
