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
    "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, for key: store_based_barrier_key:1 (world_size=4, worker_count=16, timeout=0:30:00)",
    "cache_key=/data/cache/shard_a sort_key: length",
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


# ---------------------------------------------------------------- every token kind, real-format fakes

def _fill(n: int, alphabet: str = "aB3dE5gH7jK9mN2pQ4sT6vW8yZ") -> str:
    return (alphabet * (n // len(alphabet) + 1))[:n]


FAKES = {
    "openai-legacy": "sk-" + _fill(20) + "T3BlbkFJ" + _fill(20),
    "openai-proj": "sk-proj-" + _fill(74, "Ab1_Cd2-Ef3") + "T3BlbkFJ" + _fill(74, "Gh4Ij5"),
    "anthropic": "sk-ant-api03-" + _fill(93, "Zz9-Yy8_Xx7"),
    "github": "ghp_" + _fill(36),
    "github-pat": "github_pat_11" + _fill(80, "AB12cd_"),
    "gitlab": "glpat-" + _fill(20, "xY1_z-"),
    "huggingface": "hf_" + _fill(34),
    "google": "AIza" + _fill(35, "Sy9_-Bq2"),
    "aws": "AKIA" + "Q3EGRWXNZJ4P7TUV",
    "slack": "xoxb-" + "1234567890-0987654321-" + _fill(24),
    "stripe": "sk_live_" + _fill(24),
    "npm": "npm_" + _fill(36),
    "pypi": "pypi-AgEIcHlwaS5vcmc" + _fill(60, "CJDA1b2_-"),
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
}
SECRET_LINES = {
    "azure-key": ("DefaultEndpointsProtocol=https;AccountName=runs;AccountKey=" + _fill(86, "Zm9vYmFy+/") + "==;EndpointSuffix=core.windows.net",
                  _fill(86, "Zm9vYmFy+/")),
    "azure-sas": ("SharedAccessSignature=sv=2022-11-02&ss=b&sig=" + _fill(43, "AbCd%2B") + "&se=2030",
                  _fill(43, "AbCd%2B")),
    "wandb-login": ('wandb.login(key="' + "0a1b2c3d4e" * 4 + '", relogin=True)', "0a1b2c3d4e" * 4),
    "netrc": ("machine api.wandb.ai login user password " + "9f8e7d6c5b" * 4, "9f8e7d6c5b" * 4),
    "password-assign": ("connecting with password=" + "Tr0ub4dor&3xyz" + " to db", "Tr0ub4dor&3xyz"),
    "token-assign": ("token: " + _fill(30) + " accepted", _fill(30)),
}
PEM_BODY = [_fill(64, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC") for _ in range(3)]
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("kind", sorted(FAKES))
def test_every_token_kind_is_redacted(kind):
    secret = FAKES[kind]
    out = redact_text(f"RuntimeError: request failed with {secret} (401)")
    assert MARK in out and out.endswith(" (401)")
    body = secret[12:]
    assert body not in out, out


@pytest.mark.parametrize("kind", sorted(SECRET_LINES))
def test_every_secret_assignment_is_redacted(kind):
    line, secret = SECRET_LINES[kind]
    out = redact_text(line)
    assert secret not in out and MARK in out, out


def test_pem_blocks_whole_and_line_by_line():
    out = redact_text("key = " + PEM + "\nnext")
    assert all(b not in out for b in PEM_BODY) and "-----BEGIN RSA PRIVATE KEY-----" in out
    assert out.endswith("-----END RSA PRIVATE KEY-----\nnext")
    assert all(redact_text(b) == MARK for b in PEM_BODY)  # a body line printed as a log line of its own
    assert redact_text("-----BEGIN PRIVATE KEY-----" + PEM_BODY[0]).count(MARK) == 1  # cut off: to the end


def test_every_rule_names_its_source():
    from diagnose.render.redact import rules

    assert len(rules()) >= 15
    import tomllib
    from importlib.resources import files

    data = tomllib.loads(files("diagnose.render").joinpath("secrets.toml").read_text())
    assert all(r["source"].startswith("https://") for r in data["rule"])


def test_values_under_secret_keys_at_any_depth_and_in_lists():
    doc = {"job": {"inconsistent_arguments": {"wandb_api_key": ["0a1b2c3d4e" * 4, "9f8e7d6c5b" * 4],
                                              "lr": ["1e-4", "2e-4"]}},
           "warnings": [["nested", {"deeper": [f"HF_TOKEN={FAKES['huggingface']}"]}]], "n": 3}
    out = redact(doc)
    flat = json.dumps(out)
    assert "0a1b2c3d4e" not in flat and "9f8e7d6c5b" not in flat and FAKES["huggingface"] not in flat
    assert out["job"]["inconsistent_arguments"]["lr"] == ["1e-4", "2e-4"] and out["n"] == 3


def test_control_characters_are_made_visible_with_or_without_redaction():
    from diagnose.render.redact import inert_text

    for text in ("a\x1b[2Jb", "a\x07b", "a\x9b31mb", "a\u202eb", "a\u200bb", "a\ufeffb", "a\x85b"):
        for secrets in (True, False):
            out = redact({"w": [text]}, secrets=secrets)["w"][0]
            assert out == inert_text(text) and out != text and out.startswith("a") and out.endswith("b")
            assert all(ch not in out for ch in "\x1b\x07\x9b\u202e\u200b\ufeff\x85")
    assert inert_text("tab\tand\nnewline") == "tab\tand\nnewline"


def test_no_secret_in_any_output(tmp_path):
    """One log with every kind, two nodes' argument dumps disagreeing on wandb_api_key: no secret in the
    terminal, JSON, Markdown, HTML, --json-out or --jsonl."""
    secrets = list(FAKES.values()) + [s for _, s in SECRET_LINES.values()] + PEM_BODY
    lines = ["------------------------ arguments ------------------------",
             "  wandb_api_key ................................... " + "0a1b2c3d4e" * 4,
             "  lr .............................................. 0.0001",
             "-------------------- end of arguments ---------------------"]
    other = [lines[0], "  wandb_api_key ................................... " + "9f8e7d6c5b" * 4, lines[2], lines[3]]
    body = [f"[rank0]: using {s}" for s in FAKES.values()] + [f"[rank0]: {line}" for line, _ in SECRET_LINES.values()]
    body += [f"[rank0]: {line}" for line in PEM.splitlines()]
    body += ["[rank0]: Traceback (most recent call last):", '[rank0]:   File "/job/train.py", line 3, in <module>',
             f"[rank0]: RuntimeError: auth failed for {FAKES['openai-proj']} and {FAKES['github']}"]
    (tmp_path / "node0.log").write_text("\n".join(lines + body) + "\n")
    (tmp_path / "node1.log").write_text("\n".join(other) + "\n")
    outs = []
    for fmt in ("text", "json", "markdown"):
        r = CliRunner().invoke(main, ["--format", fmt, str(tmp_path / "node0.log"), str(tmp_path / "node1.log"),
                                      "--html", str(tmp_path / "r.html"), "--json-out", str(tmp_path / "out"),
                                      "--jsonl", str(tmp_path / "all.jsonl")])
        assert r.exit_code == 1, r.output
        outs.append(r.output)
    outs += [(tmp_path / "r.html").read_text(), (tmp_path / "all.jsonl").read_text()]
    outs += [p.read_text() for p in (tmp_path / "out").iterdir()]
    for out in outs:
        for s in secrets:
            assert s[8:] not in out, (s, out[:2000])


# ---------------------------------------------------------------- ordinary names are not secrets

BARRIER = ("Timed out initializing process group in store based barrier on rank: 0, for key: "
           "store_based_barrier_key:1 (world_size=16, worker_count=8, timeout=0:30:00)")


@pytest.mark.parametrize("line", [
    BARRIER,
    "KeyError: key: model.layers.0.weight",
    "sort_key=length cache_key: decoder.layers.11.self_attention pad_token=0 eos_token: 50256",
    "token: <pad> key=DistStoreError primary_key = 12345678",
    "[rank3]: RuntimeError: Timed out waiting for key: default_pg/0//cuda//12 in the store",
])
def test_names_and_numbers_after_key_or_token_survive(line):
    assert redact_text(line) == line
    assert redact({"w": [line]})["w"][0] == line


@pytest.mark.parametrize("line,secret", [
    ("for key: " + _fill(24), _fill(24)),                      # a key that looks random: still a secret
    ("cache_key=Ab3dE5gH7jK9", "Ab3dE5gH7jK9"),                # letters and digits, 8 or more
    ("token=" + "0a1b2c3d4e" * 3, "0a1b2c3d4e" * 3),
    ("pad_token=" + FAKES["huggingface"], FAKES["huggingface"][3:]),  # a known token shape under any name
    ("api_key: hello-world", "hello-world"),                  # a name that is always a secret: any value
    ("DB_PASSWORD=correcthorse", "correcthorse"),
])
def test_values_that_look_like_secrets_are_still_redacted(line, secret):
    out = redact_text(line)
    assert secret not in out and MARK in out, out


def test_dict_values_under_ordinary_looking_keys():
    doc = {"job": {"store_based_barrier_key": "store_based_barrier_key:1", "sort_key": "length",
                   "cache_key": ["Ab3dE5gH7jK9", "seq_len"], "api_key": "abc"}}
    assert redact(doc)["job"] == {"store_based_barrier_key": "store_based_barrier_key:1", "sort_key": "length",
                                  "cache_key": [MARK, "seq_len"], "api_key": MARK}


def test_barrier_timeout_evidence_survives_in_the_report(tmp_path):
    log = tmp_path / "job.log"
    log.write_text(f"[rank0]: RuntimeError: {BARRIER}\n")
    r = CliRunner().invoke(main, ["--json", str(log)])
    assert "store_based_barrier_key:1" in r.stdout and MARK not in r.stdout, r.stdout
