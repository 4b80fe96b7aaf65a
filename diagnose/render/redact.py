"""Secrets that careless scripts print into logs never reach a report.

`redact(obj)` returns a copy of a report (the JSON dict, or a Diagnosis and the dataclasses in it)
with every string scrubbed; the input is not changed.  What is recognised:

- assignments to secret-looking names, keeping the name: ``WANDB_API_KEY=<redacted>``, ``export
  HF_TOKEN=…``, ``'AWS_SECRET_ACCESS_KEY': '…'``, ``"db_password": "…"``, ``--hf-token …``
  (names ending in TOKEN, SECRET, PASSWORD/PASSWD, KEY/APIKEY, CREDENTIALS; any case);
  in a dict, a value under such a key.  Names that are just as often ordinary (any other ``…_key``
  such as ``store_based_barrier_key`` or ``sort_key``, a tokenizer's ``pad_token``/``eos_token``, a bare
  ``key``/``token``) lose their value only when it looks like a secret (`looks_secret`: 8 or more
  characters mixing letters and digits, or 20 or more, and not a name made of words and small numbers
  such as ``store_based_barrier_key:1`` or ``model.layers.0.weight``);
- the token kinds of ``secrets.toml`` (rules after gitleaks' default set, each with its source):
  OpenAI ``sk-``/``sk-proj-``, GitHub ``ghp_``/``github_pat_``, GitLab ``glpat-``, Hugging Face
  ``hf_``, Google ``AIza``, AWS ``AKIA``, Azure ``AccountKey=``/``SharedAccessSignature=``, Slack
  ``xox?-``, ``wandb.login(key=…)``, JWTs, PEM private keys (the prefix is kept, the rest replaced);
- ``Authorization: Bearer …`` / ``Basic …`` headers and any ``Bearer <token>``;
- passwords in URLs: ``scheme://user:<redacted>@host``.

A bare AWS secret access key (40 base64 characters) can't be told from a git hash or a checksum;
it is caught when it is assigned to a name ending in KEY, as in ``aws_secret_access_key = …``.

`redact` is the one pass at the output boundary: every string of a report at any depth (dicts,
lists, dataclasses), and under a secret-looking key every string below it (``inconsistent_arguments``
lists both nodes' values of ``wandb_api_key``).  `inert_text` (always applied, --no-redact or not)
makes control characters visible: C0/C1 controls, DEL, bidi overrides and zero-width characters
become ``\\xNN`` / ``\\u202e`` text, so no output drives a terminal or reorders what a reader sees.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import re
import sys
from importlib.resources import files

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MARK = "<redacted>"

_NAME = r"[A-Za-z0-9_.-]*?(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_?KEY|SECRET_?KEY|PRIVATE_?KEY|_KEY|CREDENTIALS?)"
# NAME=value, NAME: value, 'NAME': 'value', "NAME" = "value" (env dumps, export, dict and YAML prints)
_ASSIGN = re.compile(
    r"(?P<key>(?P<q>['\"]?)\b(?P<name>" + _NAME + r")(?P=q))"
    r"(?P<sep>\s*(?:=|:)\s*)"
    r"(?P<val>\"[^\"\n]*\"|'[^'\n]*'|[^\s,;'\"()\[\]{}<>]+)",
    re.I,
)
# --hf-token abc, --wandb_api_key=abc
_FLAG = re.compile(r"(?P<key>--" + _NAME + r")(?P<sep>=|\s+)(?P<val>[^\s\"'-][^\s\"']*)", re.I)
_HEADER = re.compile(r"(?P<key>\bauthorization['\"]?\s*[:=]\s*['\"]?(?:(?:bearer|basic|token|digest)\s+)?)(?P<val>[^\s'\",;]+)", re.I)
_BEARER = re.compile(r"(?P<key>\bbearer\s+)(?P<val>[A-Za-z0-9\-._~+/]{8,}=*)", re.I)
_URL = re.compile(r"(?P<key>\b[a-z][a-z0-9+.-]*://[^\s/:@]+:)(?P<val>[^\s/@]+)(?=@)", re.I)
# tab and newline stay; every other C0/C1 control, DEL, bidi controls and zero-width characters are shown as escapes
_UNSAFE_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


@functools.lru_cache(maxsize=1)
def rules() -> tuple[tuple[str, re.Pattern], ...]:
    """(id, compiled regex) of every rule in secrets.toml; each has a named group `secret`."""
    data = tomllib.loads(files("diagnose.render").joinpath("secrets.toml").read_text(encoding="utf-8"))
    out = []
    for r in data["rule"]:
        rx = re.compile(r["regex"])
        assert "secret" in rx.groupindex and r.get("source"), r["id"]
        out.append((r["id"], rx))
    return tuple(out)


def _cut_secret(m: re.Match) -> str:
    start, end = m.start("secret") - m.start(), m.end("secret") - m.start()
    whole = m.group(0)
    if whole[start:end] in ("", MARK) or MARK in whole[start:end]:
        return whole
    if "weak" in m.re.groupindex and m["weak"] and not looks_secret(m["secret"]):
        return whole  # `key: store_based_barrier_key`: a name after an ordinary word, not a secret
    return whole[:start] + MARK + whole[end:]


def inert_text(text: str) -> str:
    """Control, bidi and zero-width characters as visible escapes (tab and newline kept)."""
    if not _UNSAFE_CHARS.search(text):
        return text
    return _UNSAFE_CHARS.sub(lambda m: f"\\x{ord(m.group(0)):02x}" if ord(m.group(0)) < 0x100
                             else f"\\u{ord(m.group(0)):04x}", text)


# Names whose value is as often ordinary as secret: their value must look like a secret to be redacted.
_WEAK_NAME = re.compile(
    r"^(?:key|token|(?:[A-Za-z0-9_.-]*?(?<!api)(?<!api_)(?<!access)(?<!access_)(?<!secret)(?<!secret_)"
    r"(?<!private)(?<!private_)_key)"
    r"|(?:pad|eos|bos|unk|mask|cls|sep|start|end|stop|special|additional_special|image|sos|[a-z]+_special)_?token)$",
    re.I,
)
# A name, not a secret: parts (split at . _ : / -) that are words (lower, Capitalised, UPPER or a
# CamelCase of up to 4 of them, maybe ending in a short number) or numbers of up to 6 digits.
_NAME_PART = re.compile(r"(?:(?:[A-Z]?[a-z]+|[A-Z]+(?![a-z])){1,4}\d{0,4}|\d{1,6})")


def looks_secret(value: str) -> bool:
    """Whether a value assigned to an ordinary-looking name (`key: …`, `sort_key=…`) is a secret rather than
    a name or a number: 8 or more characters mixing letters and digits, or 20 or more, that are not words
    and small numbers joined by . _ : / - (``store_based_barrier_key:1``, ``model.layers.0.weight``)."""
    v = value.strip().strip("'\"").strip()
    if len(v) < 8 or v.lower() in _TRIVIAL or MARK in v:
        return False
    parts = [x for x in re.split(r"[._:/-]+", v) if x]
    if parts and all(_NAME_PART.fullmatch(x) for x in parts):
        return False
    return len(v) >= 20 or bool(re.search(r"[A-Za-z]", v) and re.search(r"\d", v))


_TRIVIAL = {"", "none", "null", "nil", "true", "false", "<redacted>", "'<redacted>'", '"<redacted>"', "''", '""',
            "***", "<unset>", "unset", "not set", "<not set>"}
_KEY_NAME = re.compile(r"^" + _NAME + r"$", re.I)


def _weak(name: str) -> bool:
    return bool(_WEAK_NAME.match(name.lstrip("-")))


def _assign(m: re.Match) -> str:
    val = m["val"]
    if val.strip("'\"").strip().lower() in _TRIVIAL or MARK in val:
        return m.group(0)
    if _weak(m["key"].strip("'\"")) and not looks_secret(val):
        return m.group(0)
    q = val[0] if val[0] in "'\"" and len(val) >= 2 and val[-1] == val[0] else ""
    return f"{m['key']}{m['sep']}{q}{MARK}{q}"


def _keep_key(m: re.Match) -> str:
    return f"{m['key']}{MARK}"


def redact_text(text: str) -> str:
    """One string with its secrets replaced by <redacted> (names and prefixes kept)."""
    if not text or len(text) < 8:
        return text
    text = _ASSIGN.sub(_assign, text)
    text = _FLAG.sub(_assign, text)
    text = _HEADER.sub(lambda m: m.group(0) if m["val"] == MARK else _keep_key(m), text)
    text = _BEARER.sub(_keep_key, text)
    text = _URL.sub(_keep_key, text)
    for _id, rx in rules():
        text = rx.sub(_cut_secret, text)
    return text


def _secret_key(k) -> bool:
    return isinstance(k, str) and bool(_KEY_NAME.match(k))


def _under_key(k: str, value):
    """What a secret-looking key keeps of its value: nothing, or (an ordinary-looking name) what does not
    look like a secret."""
    if not _weak(k):
        return _all_marked(value)
    if isinstance(value, str):
        return MARK if looks_secret(value) else value
    if isinstance(value, dict):
        return {kk: _under_key(k, v) for kk, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_under_key(k, v) for v in value)
    return value


def _all_marked(obj):
    """Everything below a secret-looking key: every string replaced (numbers and trivial values kept)."""
    if isinstance(obj, str):
        return obj if obj.strip().lower() in _TRIVIAL else MARK
    if isinstance(obj, dict):
        return {k: _all_marked(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_all_marked(v) for v in obj)
    return obj


@functools.lru_cache(maxsize=4096)
def _redact_str(text: str, secrets: bool) -> str:
    # a report repeats its strings (1,024 ranks' categories, messages, times): each is redacted once
    return inert_text(redact_text(text) if secrets else text)


def redact(obj, secrets: bool = True):
    """A copy of obj (dicts, lists, tuples, strings, dataclasses; anything else as is) with secrets
    redacted (unless `secrets` is False) and control characters made inert, at any depth."""
    if obj is None or type(obj) in (int, float, bool):  # the bulk of a report's leaves (rank lists)
        return obj
    if isinstance(obj, str):
        return _redact_str(obj, secrets)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            key = redact(k, secrets) if isinstance(k, str) else k
            out[key] = _under_key(k, redact(v, secrets)) if secrets and _secret_key(k) else redact(v, secrets)
        return out
    if isinstance(obj, list):
        return [redact(v, secrets) for v in obj]
    if isinstance(obj, tuple):
        return tuple(redact(v, secrets) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        new = copy.copy(obj)
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            red = redact(value, secrets)
            if red is not value:
                try:
                    setattr(new, f.name, red)
                except (AttributeError, TypeError):  # frozen
                    object.__setattr__(new, f.name, red)
        return new
    return obj
