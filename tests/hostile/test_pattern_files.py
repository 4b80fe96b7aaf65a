"""User pattern files built to break the loader: each is one clear error naming the file, never an internal
error and never seconds of work before the first line is read."""
from __future__ import annotations

import time

import pytest

from diagnose.patterns.library import PatternError, load_file

BODY = 'role = "root"\ntitle = "t"\nwhy = "w"\nremediation = ["r"]\nexamples = ["RuntimeError: boom"]\n'


@pytest.mark.parametrize("text,message", [
    ("x = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
    ('category = "python"\n[[pattern]]\nid = "mine.x"\nregex = \'\'\'' + "a|" * 100_000 + "boom'''\n" + BODY,
     "over the 4096"),
    ('category = "python"\n[[pattern]]\nid = "mine.\\u001b[2J\\u202e"\nregex = "boom"\n' + BODY, "id must be"),
])
def test_hostile_pattern_file_is_one_clear_error(tmp_path, text, message):
    f = tmp_path / "p.toml"
    f.write_text(text)
    t = time.monotonic()
    with pytest.raises(PatternError) as err:
        load_file(f)
    assert message in str(err.value) and str(f) in str(err.value)
    assert time.monotonic() - t < 2
