import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"
CORPUS = ROOT.parent / "shared" / "corpus"


@pytest.fixture
def write(tmp_path):
    """write("name.log", text) → path of a log file under tmp_path (folders created)."""

    def _write(name: str, text: str | bytes) -> Path:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
        return p

    return _write


@pytest.fixture(scope="session")
def schema():
    return json.loads((ROOT / "diagnose" / "render" / "schema.json").read_text())


@pytest.fixture
def validate(schema):
    jsonschema = pytest.importorskip("jsonschema")

    def _validate(doc):
        jsonschema.validate(doc, schema)
        return doc

    return _validate
