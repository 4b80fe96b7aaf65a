"""The files kept between runs: the scan plan's literals come back the same from the cache, a damaged cache
file is computed afresh, and old files of a kind are pruned."""
import os
import time

from diagnose.patterns import library
from diagnose import cache
from diagnose.read import scan_keep


def _plan():
    return scan_keep.KeepPlan([p.regex for p in library.load()])


def test_the_plan_from_the_cache_is_the_plan_computed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = _plan()
    files = list((tmp_path / "mdiag").glob("plan-*.json"))
    assert len(files) == 1
    again = _plan()
    for attr in ("literals", "hit_literals", "unanchored", "anchors", "hit_anchors", "groups", "ungated"):
        assert getattr(first, attr) == getattr(again, attr), attr
    files[0].write_text("{not json")
    assert _plan().hit_literals == first.hit_literals


def test_only_the_newest_files_of_a_kind_are_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for i in range(cache.KEEP + 3):
        path = cache.cache_file("plan", i, suffix=".json")
        cache.write_atomic(path, b"{}")
        os.utime(path, (time.time() - 1000 + i, time.time() - 1000 + i))
    other = cache.cache_file("hs", 0, suffix=".db")
    cache.write_atomic(other, b"x")
    assert len(list((tmp_path / "mdiag").glob("plan-*.json"))) == cache.KEEP
    assert other.exists()
