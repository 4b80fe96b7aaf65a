"""render/schema.json, generated from the model: the dataclasses of diagnose/model.py as the JSON
document shows them (report.VIEWS: which attribute each key holds), the keys of `job` and
`root_cause.details` (model.JobFacts, model.RootDetails and the training arguments of
analyze/context.py's ARG_KEYS) and of `slurm` (model.SlurmFacts).

    python -m diagnose.render.schema            rewrite diagnose/render/schema.json
    python -m diagnose.render.schema --check    exit 1 when the committed file differs

tests/test_schema.py checks the committed file equals `build()` and that real reports validate.
"""
from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from datetime import datetime
from pathlib import Path

from diagnose import model
from diagnose.analyze.context import ARG_KEYS
from diagnose.patterns.library import CATEGORIES
from diagnose.render.report import SCHEMA_VERSION, VIEWS

PATH = Path(__file__).with_name("schema.json")
TIME = (r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:\d\d)$")

# What the model's annotations do not say: the closed sets and bounds of some attributes, and the
# classes the plain dicts `job`, `details` and `slurm` hold.
REFINE: dict[tuple[type, str], dict] = {
    (model.Diagnosis, "status"): {"enum": ["failed", "no_failure_found"]},
    (model.Diagnosis, "partial"): {"description": "--timeout fired: not everything was read (warnings say what)"},
    (model.Diagnosis, "summarised"): {"description": "matching lines that repeated what their rank had already "
                                      "printed (same text but for numbers) were counted, not analysed one by one"},
    (model.Diagnosis, "summarised_lines"): {"minimum": 0,
                                            "description": "how many matching lines were counted without being analysed"},
    (model.Diagnosis, "job"): {"$ref": "#/$defs/JobFacts"},
    (model.Diagnosis, "slurm"): {"$ref": "#/$defs/SlurmFacts"},
    (model.RootCause, "category"): {"$ref": "#/$defs/category"},
    (model.RootCause, "confidence"): {
        "enum": ["high", "medium", "low"],
        "description": "high: a named failure; medium: a generic exception or a communication error; low: only the "
                       "likeliest error line (no pattern names it, or only a launcher said a worker failed)"},
    (model.RootCause, "details"): {"$ref": "#/$defs/RootDetails"},
    (model.RootCause, "message"): {"description": "the root-cause line as the log prints it, a launcher's rank label "
                                   "(`[rank3]:`, srun's `3: `) left out; a host, a logger's columns kept"},
    (model.RootCause, "text"): {"description": "the same line's message alone, every prefix peeled"},
    (model.RootCause, "rank"): {"minimum": 0},
    (model.RootCause, "local_rank"): {"minimum": 0},
    (model.Symptom, "category"): {"$ref": "#/$defs/category"},
    (model.Symptom, "count"): {"minimum": 1},
    (model.Symptom, "ranks"): {"items": {"type": "integer", "minimum": 0}},
    (model.RankSummary, "rank"): {"minimum": 0},
    (model.RankSummary, "category"): {"$ref": "#/$defs/category"},
    (model.Source, "layout"): {"enum": ["merged", "per-rank", "torchrun-logdir", "error-json"]},
    (model.Source, "lines"): {"minimum": 0},
    (model.Evidence, "line"): {"minimum": 1},
    (model.Frame, "line"): {"minimum": 0},
}
# Keys the document adds to what the model holds.
EXTRA: dict[type, dict[str, tuple[dict, bool]]] = {  # class → key → (schema, required)
    model.Diagnosis: {
        "schema_version": ({"const": SCHEMA_VERSION}, True),
        "job_id": ({"type": ["string", "null"], "description": "the job's id (SLURM job id) when known"}, False),
        "times_assumed_utc": ({"type": "boolean", "description": (
            "true when a time in this report came from a log line without a UTC offset and is written as if "
            "it were UTC (+00:00); false when every time carried its offset or there is none")}, True),
    },
    model.RootCause: {
        "fingerprint": ({"type": "string", "pattern": "^[0-9a-f]{12}$", "description": (
            "sha1 of pattern, exception type and the top job frame (basename:function)")}, False),
    },
}
SPARSE = {model.Diagnosis: {"slurm"}}  # keys written only when known


def _json_key(f: dataclasses.Field) -> str:
    return f.metadata.get("json", f.name)


def _ref(cls: type, defs: dict) -> dict:
    if cls.__name__ not in defs:
        defs[cls.__name__] = {}  # reserve the name (classes may refer to each other)
        defs[cls.__name__] = _object(cls, defs)
    return {"$ref": f"#/$defs/{cls.__name__}"}


def _type(tp, defs: dict) -> dict:
    """The schema of one annotation."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        inner = _type(rest[0], defs) if len(rest) == 1 else {"anyOf": [_type(a, defs) for a in rest]}
        if len(rest) < len(args):
            return _nullable(inner)
        return inner
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is list:
        return {"type": "array", "items": _type(args[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _type(args[1], defs)}
    if tp is dict:
        return {"type": "object"}
    if tp is datetime:
        return {"$ref": "#/$defs/time"}
    if dataclasses.is_dataclass(tp):
        return _ref(tp, defs)
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if tp in simple:
        return {"type": simple[tp]}
    raise TypeError(f"no JSON schema for {tp!r}")


def _nullable(s: dict) -> dict:
    if "enum" in s:
        return {**s, "enum": [*s["enum"], None]}
    if isinstance(s.get("type"), str) and "$ref" not in s:
        return {**s, "type": [s["type"], "null"]}
    return {"anyOf": [s, {"type": "null"}]}


def _accepts_null(s: dict) -> bool:
    types_ = s.get("type")
    return ({"type": "null"} in s.get("anyOf", []) or types_ == "null"
            or (isinstance(types_, list) and "null" in types_) or None in s.get("enum", []))


def _merge(base: dict, extra: dict) -> dict:
    """A field's schema with the keywords REFINE or its metadata add (on the non-null branch)."""
    if not extra:
        return base
    if "description" in extra:  # beside the type, not inside one branch of it
        extra = dict(extra)
        text = extra.pop("description")
        return {**_merge(base, extra), "description": text}
    if "$ref" in extra or "enum" in extra:  # replaces the type, and keeps it nullable if it was
        return _nullable(dict(extra)) if _accepts_null(base) and None not in extra.get("enum", []) else dict(extra)
    if "anyOf" in base:
        return {"anyOf": [{**base["anyOf"][0], **extra}, *base["anyOf"][1:]]}
    return {**base, **extra}


def _object(cls: type, defs: dict) -> dict:
    """A dataclass as an object: as the document shows it (VIEWS) or, for the dict classes, every field."""
    hints = typing.get_type_hints(cls)
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    view = VIEWS.get(cls)
    props, required = {}, []
    keys = view.items() if view else [(_json_key(f), f.name) for f in dataclasses.fields(cls)]
    for key, attr in keys:
        f = by_name[attr]
        meta = {k: v for k, v in f.metadata.items() if k != "json"}
        s = _merge(_type(hints[attr], defs), {**REFINE.get((cls, attr), {}), **meta})
        props[key] = s
        optional_type = typing.get_origin(hints[attr]) in (typing.Union, types.UnionType) and \
            type(None) in typing.get_args(hints[attr])
        if view and key not in SPARSE.get(cls, ()):
            required.append(key)  # the document always writes it
        elif not view and not optional_type:
            required.append(key)
    for key, (s, req) in EXTRA.get(cls, {}).items():
        props[key] = s
        if req:
            required.append(key)
    out = {"type": "object"}
    if cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "("):
        out["description"] = " ".join(cls.__doc__.split())
    out |= {"required": required, "properties": props, "additionalProperties": False}
    return out


def _job(defs: dict) -> None:
    """JobFacts plus the training arguments (ARG_KEYS), each with the type it is parsed to (or null: None)."""
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    job = defs["JobFacts"]
    for key, conv in sorted(ARG_KEYS.items()):
        job["properties"].setdefault(key, {"type": [simple[conv], "null"],
                                           "description": "training argument, as Megatron printed it"})


def build() -> dict:
    defs: dict = {
        "category": {"enum": list(CATEGORIES)},
        "time": {"type": "string", "format": "date-time", "pattern": TIME,
                 "description": "RFC 3339 with a UTC offset; see times_assumed_utc"},
    }
    top = _object(model.Diagnosis, defs)
    for cls in (model.JobFacts, model.RootDetails, model.SlurmFacts):  # the dicts' keys (REFINE names them)
        _ref(cls, defs)
    _job(defs)
    order = {k: i for i, k in enumerate(("schema_version", "job_id", "status", "partial", "times_assumed_utc",
                                          "summarised", "summarised_lines", "root_cause", "symptoms", "ranks",
                                          "job", "sources", "warnings", "slurm"))}
    top["properties"] = dict(sorted(top["properties"].items(), key=lambda kv: order.get(kv[0], len(order))))
    top["required"] = sorted(top["required"], key=lambda k: order.get(k, len(order)))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://mdiag.dev/schema/diagnosis-{SCHEMA_VERSION}.json",
        "title": "mdiag diagnosis",
        "description": "Generated from diagnose/model.py by python -m diagnose.render.schema; do not edit.",
        **{k: v for k, v in top.items() if k != "description"},
        "$defs": dict(sorted(defs.items())),
    }


def text() -> str:
    return json.dumps(build(), indent=1, ensure_ascii=True) + "\n"


def main(argv: list[str]) -> int:
    new = text()
    if "--check" in argv:
        same = PATH.exists() and PATH.read_text(encoding="utf-8") == new
        if not same:
            print(f"{PATH.name} differs from the model: python -m diagnose.render.schema", file=sys.stderr)
        return 0 if same else 1
    PATH.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
