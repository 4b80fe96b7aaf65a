"""`mdiag fleet`: a fleet of reports built by running mdiag on the sample logs, re-dated and re-hosted."""
from __future__ import annotations

import copy
import json
import random
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from diagnose import diagnose
from diagnose.cli.main import main
from diagnose.fleet import hostlist_count, load, parse_elapsed, prepare, prometheus, summarize, to_json
from diagnose.render.report import to_dict

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
EXPECTED = json.loads((SAMPLES / "expected.json").read_text())
T0 = datetime(2026, 11, 16, 8, 0, 0)  # a Monday: ISO week 2026-W47


@pytest.fixture(scope="session")
def base() -> dict[str, dict]:
    """One real report per sample log (mdiag's library API)."""
    return {name: to_dict(diagnose([SAMPLES / name])) for name in sorted(EXPECTED)}


def synth(doc: dict, job: str, host: str, when: datetime, rank_hosts: list[str], slurm: dict | None = None) -> dict:
    """The same failure as another job: other host, other time, other rank hosts."""
    d = copy.deepcopy(doc)
    if d["root_cause"]:
        d["root_cause"]["host"] = host
        d["root_cause"]["time"] = when.isoformat()
    for i, r in enumerate(d["ranks"]):
        r["host"] = rank_hosts[i % len(rank_hosts)]
    if slurm is not None:
        d["slurm"] = slurm
    d["job_id"] = None
    return d, job


def build_fleet(base: dict) -> list[tuple[dict, str]]:
    """60 failed jobs over 3 weeks and ~100 hosts, with two planted suspect nodes:
    node013 is the root-cause host of 4 collective (nccl) failures (the hardware rule) and
    node007 of 7 failures of mixed categories (the statistical rule)."""
    rnd = random.Random(7)
    failed = [n for n, e in EXPECTED.items() if e["status"] == "failed" and base[n]["status"] == "failed"]
    non_hw = [n for n in failed if base[n]["root_cause"]["category"] not in ("cuda", "nccl")]
    hang = "hang-rank1.log"
    assert base[hang]["root_cause"]["category"] == "nccl"
    pool = [f"node{i:03d}" for i in range(1, 101)]
    others = [h for h in pool if h not in ("node007", "node013")]
    jobs: list[tuple[str, str]] = [(hang, "node013")] * 4 + [(non_hw[i % len(non_hw)], "node007") for i in range(7)]
    # 49 more failures, no other host more than twice and never twice for a cuda/nccl failure
    for i in range(49):
        jobs.append((failed[i % len(failed)], others[i // 2 + (i % 2) * 30]))
    out = []
    for i, (name, host) in enumerate(jobs):
        when = T0 + timedelta(days=(i * 3) % 21, hours=i % 9, minutes=i)
        slurm = {"JobId": str(5000 + i), "Elapsed": "02:00:00", "NNodes": "1"} if i % 5 == 0 else None
        out.append(synth(base[name], f"job{5000 + i}", host, when, rnd.sample(pool, 4), slurm))
    out.append(synth(base["clean-run.log"], "clean", "node001", T0, pool[:4]))
    return out


@pytest.fixture(scope="session")
def fleet_docs(base):
    return build_fleet(base)


@pytest.fixture
def fleet_dir(tmp_path, fleet_docs):
    d = tmp_path / "reports"
    d.mkdir()
    for doc, job in fleet_docs:
        (d / f"{job}.json").write_text(json.dumps(doc))
    return d


def _tables(paths, **kw):
    return summarize(prepare(load([str(p) for p in paths])), **kw)


def test_tables_from_a_folder_of_reports(fleet_dir, fleet_docs):
    t = _tables([fleet_dir])
    s = t["summary"]
    assert s["reports"] == 61 and s["failures"] == 60 and s["no_failure_found"] == 1
    want: dict[str, int] = {}
    for doc, _ in fleet_docs:
        if doc["status"] == "failed":
            want[doc["root_cause"]["category"]] = want.get(doc["root_cause"]["category"], 0) + 1
    got = dict(t["by_category"].select("category", "failures").iter_rows())
    assert got == want
    assert t["by_category"]["failures"].to_list() == sorted(want.values(), reverse=True)
    # by ISO week: the failures fall in 2026-W47..W49, every one counted once
    weeks = dict(t["by_week"].select("week", "failures").iter_rows())
    assert set(weeks) == {"2026-W47", "2026-W48", "2026-W49"}
    assert sum(weeks.values()) == 60


def test_fingerprints_group_the_same_failure_across_jobs(fleet_dir, fleet_docs):
    t = _tables([fleet_dir], top=20)
    fp = t["fingerprints"]
    # one fingerprint per distinct sample failure, whatever the host and time
    per_sample: dict[str, list] = {}
    for doc, job in fleet_docs:
        if doc["status"] == "failed":
            per_sample.setdefault(doc["root_cause"]["fingerprint"], []).append((doc, job))
    assert fp.height == len(per_sample)
    top = fp.row(0, named=True)
    jobs = per_sample[top["fingerprint"]]
    assert top["failures"] == len(jobs) == max(len(v) for v in per_sample.values())
    times = sorted(datetime.fromisoformat(d["root_cause"]["time"]) for d, _ in jobs)
    assert top["first_seen"] == times[0] and top["last_seen"] == times[-1]
    assert top["example_job"] in {j if d.get("slurm") is None else d["slurm"]["JobId"] for d, j in jobs}
    assert top["hosts"] >= 2


def test_suspect_nodes_finds_the_planted_hosts(fleet_dir):
    sus = _tables([fleet_dir])["suspect_nodes"]
    assert sorted(sus["host"].to_list()) == ["node007", "node013"]
    n13 = sus.filter(pl.col("host") == "node013").row(0, named=True)
    assert n13["failures"] == 4 and n13["hw_failures"] == 4 and "nccl" in n13["reason"]
    assert n13["categories"] == [{"category": "nccl", "failures": 4}]
    assert len(n13["jobs"]) == 4
    n07 = sus.filter(pl.col("host") == "node007").row(0, named=True)
    assert n07["failures"] == 7 and n07["hw_failures"] == 0 and "fleet mean" in n07["reason"]
    assert n07["p_value"] < 0.01 / 100


def test_localhost_is_never_a_suspect(base):
    docs = [synth(base["hang-rank1.log"], f"j{i}", "localhost", T0 + timedelta(hours=i), ["localhost"]) for i in range(5)]
    t = summarize(prepare(_frame(docs)))
    assert t["suspect_nodes"].height == 0


def _frame(docs):
    from diagnose.fleet.load import _frame_of_docs

    return _frame_of_docs([d for d, _ in docs], "x.json")


def test_gpu_hours_and_job_ids(fleet_dir, fleet_docs):
    df = prepare(load([str(fleet_dir)]))
    with_slurm = [(d, j) for d, j in fleet_docs if d.get("slurm")]
    # slurm.JobId wins over the file name; otherwise the file stem
    assert set(df.filter(pl.col("gpu_hours").is_not_null())["job_id"]) == {d["slurm"]["JobId"] for d, _ in with_slurm}
    assert "clean" in df["job_id"].to_list()
    t = summarize(df)
    per_job = 2.0 * 4  # Elapsed 02:00:00 x world_size 4 (job.world_size wins over NNodes x 8)
    failed_with = [d for d, _ in with_slurm if d["status"] == "failed"]
    want = sum(2.0 * (d["job"].get("world_size") or 8) for d in failed_with)
    assert t["summary"]["gpu_hours_lost"] == pytest.approx(want)
    assert per_job in {2.0 * (d["job"].get("world_size") or 8) for d in failed_with}


def test_since_until(fleet_dir):
    t = _tables([fleet_dir], since=datetime(2026, 11, 23), until=datetime(2026, 11, 30))
    weeks = t["by_week"]["week"].to_list()
    assert weeks == ["2026-W48"]
    assert t["summary"]["failures"] == t["by_week"]["failures"].sum()


def test_jsonl_reads_the_same_as_a_folder(tmp_path, fleet_dir, fleet_docs):
    jl = tmp_path / "reports.jsonl"
    jl.write_text("".join(json.dumps(d) + "\n" for d, _ in fleet_docs))
    a, b = to_json(_tables([fleet_dir])), to_json(_tables([jl]))
    for k in ("by_category", "by_week", "suspect_nodes"):
        if k == "suspect_nodes":  # job ids differ (file stem vs file:line) where there is no slurm.JobId
            assert [r["host"] for r in a[k]] == [r["host"] for r in b[k]]
        else:
            assert a[k] == b[k]
    ids = prepare(load([str(jl)]))["job_id"].to_list()
    assert "reports.jsonl:2" in ids and "5000" in ids  # line 1 has a slurm.JobId, line 2 not
    # a corrupt line is skipped with a warning, not fatal
    with jl.open("a") as f:
        f.write("{not json\n")
    warnings: list[str] = []
    df = load([str(jl)], warnings)
    assert df.height == len(fleet_docs) and warnings and "skipped 1 line" in warnings[0]


def test_cli_text_json_exports_and_prometheus(tmp_path, fleet_dir):
    prom = tmp_path / "metrics" / "mdiag.prom"
    prom.parent.mkdir()
    r = CliRunner().invoke(main, ["fleet", str(fleet_dir), "--csv", str(tmp_path / "csv"), "--parquet",
                                  str(tmp_path / "pq"), "--prom", str(prom)])
    assert r.exit_code == 0, r.output
    for title in ("Failures by category", "Failures by ISO week", "Top fingerprints", "Suspect nodes", "node013"):
        assert title in r.output
    for name in ("by_category", "by_week", "fingerprints", "suspect_nodes"):
        assert pl.read_csv(tmp_path / "csv" / f"{name}.csv").height > 0
        assert pl.read_parquet(tmp_path / "pq" / f"{name}.parquet").height > 0
    text = prom.read_text()
    assert list(prom.parent.iterdir()) == [prom]  # atomic: no temp file left behind
    from prometheus_client.parser import text_string_to_metric_families

    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert {f.type for f in fams.values()} == {"gauge"}  # a snapshot of the reports: gauges, not counters
    assert set(fams) == {"mdiag_fleet_reports", "mdiag_fleet_failures", "mdiag_fleet_gpu_time_lost_seconds",
                         "mdiag_fleet_fingerprint_failures", "mdiag_fleet_suspect_nodes",
                         "mdiag_fleet_suspect_node_failures", "mdiag_fleet_last_run_timestamp_seconds"}
    value = {f.name: {tuple(sorted(x.labels.items())): x.value for x in f.samples} for f in fams.values()}
    assert value["mdiag_fleet_suspect_node_failures"][(("host", "node013"),)] == 4
    assert sum(value["mdiag_fleet_failures"].values()) == 60 and value["mdiag_fleet_reports"][()] == 61
    assert sum(value["mdiag_fleet_gpu_time_lost_seconds"].values()) == pytest.approx(96.0 * 3600)  # base unit
    assert abs(value["mdiag_fleet_last_run_timestamp_seconds"][()] - time.time()) < 600
    r = CliRunner().invoke(main, ["fleet", "--json", "--since", "2026-11-23", "--until", "2026-11-29", str(fleet_dir)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert set(doc) == {"summary", "by_category", "by_week", "fingerprints", "suspect_nodes"}
    assert [w["week"] for w in doc["by_week"]] == ["2026-W48"]


def test_prometheus_label_escaping():
    t = {"summary": {"reports": 1}, "by_category": pl.DataFrame({"category": ['a"b\\c\nd'], "failures": [1],
                                                                    "gpu_hours_lost": [None]}),
         "fingerprints": pl.DataFrame(schema={"fingerprint": pl.String, "category": pl.String, "pattern": pl.String,
                                              "failures": pl.Int64}),
         "suspect_nodes": pl.DataFrame(schema={"host": pl.String, "failures": pl.Int64})}
    text = prometheus(t)
    assert 'mdiag_fleet_failures{category="a\\"b\\\\c\\nd"} 1.0' in text


def _hostile_tables():
    return {"summary": {"reports": 3},
            "by_category": pl.DataFrame({"category": ['a"b\\c\nd', None], "failures": [1, 2], "gpu_hours_lost": [None, 1.5]}),
            "fingerprints": pl.DataFrame({"fingerprint": ["abc"], "category": ["x"], "pattern": ['p\\q"\n'],
                                          "failures": [3]}),
            "suspect_nodes": pl.DataFrame({"host": ['node"1\n'], "failures": [4]})}


def test_prometheus_without_prometheus_client_escapes_the_same(tmp_path, monkeypatch):
    """With prometheus_client absent the text format is written by hand: the same bytes as the client
    writes, label values escaped (backslash, double quote, newline), and the client's parser reads it back."""
    from prometheus_client.parser import text_string_to_metric_families

    from diagnose.fleet.export import text_format, write_prometheus

    t = _hostile_tables()
    with_client = prometheus(t, now=1.5)
    assert text_format(t, now=1.5) == with_client
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import prometheus_client now fails
    without = prometheus(t, now=1.5)
    assert without == with_client
    assert 'mdiag_fleet_failures{category="a\\"b\\\\c\\nd"} 1.0' in without
    assert 'pattern="p\\\\q\\"\\n"' in without and 'host="node\\"1\\n"' in without
    out = tmp_path / "mdiag.prom"
    write_prometheus(out, t)
    monkeypatch.undo()
    fams = {f.name: f for f in text_string_to_metric_families(out.read_text())}
    assert {f.type for f in fams.values()} == {"gauge"}
    hosts = [s.labels["host"] for s in fams["mdiag_fleet_suspect_node_failures"].samples]
    cats = {s.labels["category"]: s.value for s in fams["mdiag_fleet_failures"].samples}
    assert hosts == ['node"1\n'] and cats == {'a"b\\c\nd': 1.0, "": 2.0}
    assert list(tmp_path.iterdir()) == [out]


def test_slurm_field_parsing():
    assert parse_elapsed("1-02:03:04") == 86400 + 7384
    assert parse_elapsed("02:00:00") == 7200 and parse_elapsed("05:30") == 330 and parse_elapsed("90") == 90
    assert parse_elapsed("junk") is None
    assert hostlist_count("gpu-[01-04,07],login1") == 6 and hostlist_count("node17") == 1


@pytest.mark.slow
def test_100k_reports_in_seconds(tmp_path, base):
    """100,000 JSONL reports (as the hook appends them) summarize in seconds via the lazy scan."""
    rnd = random.Random(1)
    lines = []
    for name in EXPECTED:
        d = copy.deepcopy(base[name])
        if d["root_cause"]:
            for k in ("traceback", "why", "remediation"):
                d["root_cause"][k] = [] if k != "why" else ""
        d["symptoms"] = d["symptoms"][:2]
        lines.append(d)
    path = tmp_path / "big.jsonl"
    with path.open("w") as f:
        for i in range(100_000):
            d = lines[i % len(lines)]
            if d["root_cause"]:
                d["root_cause"]["host"] = f"n{rnd.randrange(2000):04d}"
                d["root_cause"]["time"] = (T0 + timedelta(minutes=i)).isoformat()
            d["slurm"] = {"JobId": str(i), "Elapsed": "01:00:00", "NNodes": 2}
            f.write(json.dumps(d) + "\n")
    t0 = time.perf_counter()
    t = _tables([path])
    took = time.perf_counter() - t0
    assert t["summary"]["reports"] == 100_000
    assert t["summary"]["failures"] == 100_000 * 7 // 8
    assert took < 25, f"100k reports took {took:.1f} s"  # ~1-3 s on an idle 2-core machine


def test_readme_fleet_sample_is_what_the_code_prints(fleet_dir):
    """The README's `mdiag fleet` sample, and cells that never wrap: one row per line, cut with …."""
    import io

    from rich.console import Console

    from diagnose.fleet import render

    from .test_samples import check_readme_block

    out = Console(file=io.StringIO(), width=100, no_color=True, color_system=None, highlight=False)
    render(_tables([fleet_dir]), out)
    text = "\n".join(line.rstrip() for line in out.file.getvalue().splitlines())
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert rows and all(not line.startswith("│ ") or line.split("│")[1].strip() for line in rows)  # no wrapped rows
    assert any("…" in line for line in rows)
    check_readme_block("fleet", f"```\n$ mdiag fleet reports/\n{text}\n```\n")


def test_failures_without_a_time_are_an_unknown_week(base):
    docs = [synth(base["megatron-1234.err"], f"j{i}", "n1",
                  T0 + timedelta(days=7 * i), ["n1"]) for i in range(2)]
    docs[1][0]["root_cause"]["time"] = None
    t = summarize(prepare(_frame(docs)))
    weeks = dict(t["by_week"].select("week", "failures").iter_rows())
    assert weeks == {"2026-W47": 1, "unknown": 1}
    assert t["summary"]["failures_without_time"] == 1
    doc = to_json(t)
    assert {w["week"]: w["failures"] for w in doc["by_week"]} == weeks  # in every export, not dropped


def test_fleet_times_carry_their_offset_and_say_when_it_was_assumed(tmp_path, base):
    """Reports' times are read with their offset (converted to UTC); exports write RFC 3339 / UTC
    timestamps; times_assumed_utc marks groups whose reports gave no offset."""
    docs = [synth(base["hang-rank1.log"], f"j{i}", "n1", T0, ["n1"]) for i in range(3)]
    docs[0][0]["root_cause"]["time"] = "2026-11-23T01:00:00+02:00"  # Sunday 23:00 UTC: week 47, not 48
    docs[1][0]["root_cause"]["time"] = "2026-11-17T10:00:00+00:00"
    docs[2][0]["root_cause"]["time"] = "2026-11-24T10:00:00"  # no offset: taken as UTC, and said so
    t = summarize(prepare(_frame(docs)))
    weeks = {r["week"]: r for r in t["by_week"].iter_rows(named=True)}
    assert {w: r["failures"] for w, r in weeks.items()} == {"2026-W47": 2, "2026-W48": 1}
    assert weeks["2026-W47"]["times_assumed_utc"] is False and weeks["2026-W48"]["times_assumed_utc"] is True
    doc = to_json(t)
    assert doc["summary"]["first"] == "2026-11-17T10:00:00+00:00" and doc["summary"]["times_assumed_utc"] is True
    fp = doc["fingerprints"][0]
    assert fp["first_seen"] == "2026-11-17T10:00:00+00:00" and fp["times_assumed_utc"] is True
    from diagnose.fleet import export

    export(t, tmp_path / "csv", "csv")
    export(t, tmp_path / "pq", "parquet")
    csv = (tmp_path / "csv" / "fingerprints.csv").read_text()
    assert ",2026-11-17T10:00:00+00:00,2026-11-24T10:00:00+00:00," in csv
    pq = pl.read_parquet(tmp_path / "pq" / "fingerprints.parquet")
    assert pq.schema["first_seen"] == pl.Datetime("us", "UTC")
    assert pq["last_seen"][0] == datetime(2026, 11, 24, 10, 0, tzinfo=timezone.utc)
    r = CliRunner().invoke(main, ["fleet", "--json", "--since", "2026-11-23T00:30:00+02:00", str(_write_docs(tmp_path, docs))])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["summary"]["failures"] == 2  # 23:00 UTC on the 22nd is after 00:30+02:00 on the 23rd


def _write_docs(tmp_path, docs) -> Path:
    d = tmp_path / "reports"
    d.mkdir()
    for doc, job in docs:
        (d / f"{job}.json").write_text(json.dumps(doc))
    return d


def test_list_columns_are_lists_in_parquet_and_json_joined_in_csv(tmp_path, fleet_dir):
    from diagnose.fleet import export

    t = _tables([fleet_dir])
    export(t, tmp_path / "csv", "csv")
    export(t, tmp_path / "pq", "parquet")
    pq = pl.read_parquet(tmp_path / "pq" / "suspect_nodes.parquet")
    assert pq.schema["jobs"] == pl.List(pl.String)
    assert pq.schema["categories"] == pl.List(pl.Struct({"category": pl.String, "failures": pl.Int64}))
    n13 = pq.filter(pl.col("host") == "node013").row(0, named=True)
    assert n13["categories"] == [{"category": "nccl", "failures": 4}] and len(n13["jobs"]) == 4
    csv = pl.read_csv(tmp_path / "csv" / "suspect_nodes.csv")
    c13 = csv.filter(pl.col("host") == "node013").row(0, named=True)
    assert c13["categories"] == "nccl×4" and c13["jobs"] == ", ".join(n13["jobs"])
    j13 = next(r for r in to_json(t)["suspect_nodes"] if r["host"] == "node013")
    assert j13["categories"] == n13["categories"] and j13["jobs"] == n13["jobs"]


def test_csv_and_parquet_cells_cannot_start_a_formula(tmp_path, base):
    """OWASP CSV injection: text from logs (a host name, a title) that starts with = + - @ TAB gets a '; a CR
    is shown escaped (\\x0d) like every control character, so it starts nothing."""
    evil = ["=HYPERLINK(\"http://x\")", "+1", "-2", "@SUM(A1)", "\tx", "\rx"]
    docs = []
    for i, host in enumerate(evil * 3):
        d, job = synth(base["hang-rank1.log"], f"j{i}", host, T0 + timedelta(hours=i), [host])
        d["root_cause"]["title"] = host
        docs.append((d, job))
    t = summarize(prepare(_frame(docs)))
    from diagnose.fleet import export

    export(t, tmp_path / "csv", "csv")
    export(t, tmp_path / "pq", "parquet")
    for df in (pl.read_csv(tmp_path / "csv" / "suspect_nodes.csv"), pl.read_parquet(tmp_path / "pq" / "suspect_nodes.parquet")):
        assert sorted(df["host"].to_list()) == sorted("\\x0dx" if h == "\rx" else "'" + h for h in evil)
    fp = pl.read_parquet(tmp_path / "pq" / "fingerprints.parquet")
    assert (fp["title"].str.starts_with("'") | (fp["title"] == "\\x0dx")).all()
    assert t["suspect_nodes"]["host"].str.starts_with("'").sum() == 0  # only the exports are changed
