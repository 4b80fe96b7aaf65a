"""Secrets printed into logs are redacted in every report (terminal, JSON, files); --no-redact keeps them."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from diagnose.cli.main import main
from diagnose.pipeline import diagnose
from diagnose.render.redact import MARK, redact, redact_text

HF = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"
GHP = "ghp_" + "0123456789abcdefghijABCDEFGHIJ012345"
PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCD"
AKIA = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
WANDB = "0123456789abcdef0123456789abcdef01234567"

CASES = [
    (f"export WANDB_API_KEY={WANDB}", f"export WANDB_API_KEY={MARK}", WANDB),
    (f"WANDB_API_KEY={WANDB}", f"WANDB_API_KEY={MARK}", WANDB),
    (f"environ({{'HF_TOKEN': '{HF}', 'PATH': '/usr/bin'}})", f"environ({{'HF_TOKEN': '{MARK}', 'PATH': '/usr/bin'}})", HF),
    (f"loading with token {HF} from hub", f"loading with token hf_{MARK} from hub", HF),
    (f"AWS_ACCESS_KEY_ID={AKIA}", f"AWS_ACCESS_KEY_ID=AKIA{MARK}", AKIA),
    (f"aws_secret_access_key = {AWS_SECRET}", f"aws_secret_access_key = {MARK}", AWS_SECRET),
    (f'"AWS_SECRET_ACCESS_KEY": "{AWS_SECRET}"', f'"AWS_SECRET_ACCESS_KEY": "{MARK}"', AWS_SECRET),
    (f"git clone with {GHP}", f"git clone with ghp_{MARK}", GHP),
    (f"GITHUB_TOKEN={PAT}", f"GITHUB_TOKEN={MARK}", PAT),
    (f"token {PAT} used", f"token github_pat_{MARK} used", PAT),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
     f"Authorization: Bearer {MARK}", "eyJhbGciOiJIUzI1NiJ9"),
    ("headers={'Authorization': 'Basic dXNlcjpwYXNzd29yZA=='}", f"headers={{'Authorization': 'Basic {MARK}'}}", "dXNlcjpwYXNzd29yZA"),
    ("connecting to postgres://admin:s3cr3tP4ss@db.example.com:5432/runs",
     f"connecting to postgres://admin:{MARK}@db.example.com:5432/runs", "s3cr3tP4ss"),
    ("MASTER_ADDR=https://bot:hunter2hunter2@registry.internal/v2", f"MASTER_ADDR=https://bot:{MARK}@registry.internal/v2", "hunter2hunter2"),
    ('DB_PASSWORD="correct horse battery" MY_SECRET=abc123xyz', f'DB_PASSWORD="{MARK}" MY_SECRET={MARK}', "correct horse"),
    (f"python train.py --hf-token {HF} --lr 1e-4", f"python train.py --hf-token {MARK} --lr 1e-4", HF),
    ("SLACK_BOT_TOKEN=xoxb-1234567890-abcdefghij", f"SLACK_BOT_TOKEN={MARK}", "xoxb-1234567890"),
]


@pytest.mark.parametrize("line,want,secret", CASES, ids=[c[0][:30] for c in CASES])
def test_each_kind(line, want, secret):
    assert redact_text(line) == want
    assert secret not in redact_text(line)


@pytest.mark.parametrize("line", [
    "num_tokens=4096 max_tokens: 5 sort_key=None",
    "  tokenizer_type .................................. GPT2BPETokenizer",
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "NCCL_IB_HCA=mlx5 HF_HUB_ENABLE_HF_TRANSFER=1 hf_transfer_enabled",
    "torch.distributed.DistStoreError: connecting to tcp://10.0.0.1:29500 timed out",
    "password: None",
    "HF_TOKEN=<redacted>",
    'File "/job/train.py", line 10, in <module>',
    "commit 3f2a1c9e8b7d6f5e4a3b2c1d0e9f8a7b6c5d4e3f",
])
def test_leaves_ordinary_text_alone(line):
    assert redact_text(line) == line


def test_dict_values_under_secret_keys_and_purity():
    doc = {"job": {"arguments": {"wandb_api_key": "abcdef", "hf_token": None, "lr": "1e-4"}},
           "warnings": [f"x HF_TOKEN={HF}"], "n": 3, "t": (f"{GHP}",)}
    out = redact(doc)
    assert out["job"]["arguments"] == {"wandb_api_key": MARK, "hf_token": None, "lr": "1e-4"}
    assert out["warnings"] == [f"x HF_TOKEN={MARK}"] and out["n"] == 3 and out["t"] == (f"ghp_{MARK}",)
    assert doc["warnings"] == [f"x HF_TOKEN={HF}"]  # the input is unchanged


LOG = (
    f"[rank0]: env: WANDB_API_KEY={WANDB} HF_TOKEN={HF}\n"
    "[rank1]: Traceback (most recent call last):\n"
    '[rank1]:   File "/job/train.py", line 10, in <module>\n'
    "[rank1]:     main()\n"
    f"[rank1]: RuntimeError: could not push to https://user:pa55word@hub.example.com with Authorization: Bearer {GHP} and key {AKIA}\n"
)
SECRETS = (WANDB, HF, "pa55word", GHP, AKIA)


def test_terminal_json_and_files_are_redacted(tmp_path):
    log = tmp_path / "job.log"
    log.write_text(LOG)
    r = CliRunner()
    term = r.invoke(main, [str(log)])
    js = r.invoke(main, ["--json", str(log)])
    md = r.invoke(main, ["--format", "markdown", str(log)])
    out_dir = tmp_path / "reports"
    files = r.invoke(main, ["--json-out", str(out_dir), "--jsonl", str(tmp_path / "all.jsonl"),
                            "--html", str(tmp_path / "r.html"), str(log)])
    assert {term.exit_code, js.exit_code, md.exit_code, files.exit_code} == {1}, (term.output, files.output)
    written = "".join(p.read_text() for p in out_dir.iterdir()) + (tmp_path / "all.jsonl").read_text() + (tmp_path / "r.html").read_text()
    for text in (term.output, js.stdout, md.stdout, written):
        for s in SECRETS:
            assert s not in text
    doc = json.loads(js.stdout)
    assert "https://user:<redacted>@hub.example.com" in doc["root_cause"]["message"]
    plain = r.invoke(main, ["--json", "--no-redact", str(log)])
    assert "pa55word" in plain.stdout and GHP in plain.stdout


def test_library_redacts_a_diagnosis(tmp_path):
    (tmp_path / "job.log").write_text(LOG)
    d = diagnose([tmp_path / "job.log"])
    red = redact(d)
    assert "pa55word" in d.root_cause.message and "pa55word" not in red.root_cause.message
    assert red.root_cause.evidence == d.root_cause.evidence and red.sources[0].path == d.sources[0].path
