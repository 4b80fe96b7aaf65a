"""Secrets that careless scripts print into logs never reach a report.

`redact(obj)` returns a copy of a report (the JSON dict, or a Diagnosis and the dataclasses in it)
with every string scrubbed; the input is not changed.  What is recognised:

- assignments to secret-looking names, keeping the name: ``WANDB_API_KEY=<redacted>``, ``export
  HF_TOKEN=…``, ``'AWS_SECRET_ACCESS_KEY': '…'``, ``"db_password": "…"``, ``--hf-token …``
  (names ending in TOKEN, SECRET, PASSWORD/PASSWD, KEY/APIKEY, CREDENTIALS; any case);
  in a dict, a value under such a key;
- Hugging Face tokens ``hf_…``, GitHub tokens ``ghp_…``/``gho_…``/``ghs_…``/``ghu_…``/``ghr_…``/
  ``github_pat_…``, Slack tokens ``xox?-…``, AWS access key ids ``AKIA…``/``ASIA…`` (the prefix
  is kept, the rest replaced);
- ``Authorization: Bearer …`` / ``Basic …`` headers and any ``Bearer <token>``;
- passwords in URLs: ``scheme://user:<redacted>@host``.

A bare AWS secret access key (40 base64 characters) can't be told from a git hash or a checksum;
it is caught when it is assigned to a name ending in KEY, as in ``aws_secret_access_key = …``.
"""
from __future__ import annotations

import copy
import dataclasses
import re

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
_TOKENS = re.compile(
    r"\b(?:(?P<key>hf_|api_org_)(?P<val>[A-Za-z0-9]{30,})"
    r"|(?P<key2>gh[opusr]_)(?P<val2>[A-Za-z0-9]{30,})"
    r"|(?P<key3>github_pat_)(?P<val3>[A-Za-z0-9_]{22,})"
    r"|(?P<key4>xox[abposr]-)(?P<val4>[A-Za-z0-9-]{10,})"
    r"|(?P<key5>AKIA|ASIA)(?P<val5>[A-Z0-9]{16}))\b"
)
_TRIVIAL = {"", "none", "null", "nil", "true", "false", "<redacted>", "'<redacted>'", '"<redacted>"', "''", '""',
            "***", "<unset>", "unset", "not set", "<not set>"}
_KEY_NAME = re.compile(r"^" + _NAME + r"$", re.I)


def _assign(m: re.Match) -> str:
    val = m["val"]
    if val.strip("'\"").strip().lower() in _TRIVIAL or MARK in val:
        return m.group(0)
    q = val[0] if val[0] in "'\"" and len(val) >= 2 and val[-1] == val[0] else ""
    return f"{m['key']}{m['sep']}{q}{MARK}{q}"


def _keep_key(m: re.Match) -> str:
    return f"{m['key']}{MARK}"


def _token(m: re.Match) -> str:
    return next(m[k] for k in ("key", "key2", "key3", "key4", "key5") if m[k]) + MARK


def redact_text(text: str) -> str:
    """One string with its secrets replaced by <redacted> (names and prefixes kept)."""
    if not text or len(text) < 8:
        return text
    text = _ASSIGN.sub(_assign, text)
    text = _FLAG.sub(_assign, text)
    text = _HEADER.sub(lambda m: m.group(0) if m["val"] == MARK else _keep_key(m), text)
    text = _BEARER.sub(_keep_key, text)
    text = _URL.sub(_keep_key, text)
    text = _TOKENS.sub(_token, text)
    return text


def _secret_key(k) -> bool:
    return isinstance(k, str) and bool(_KEY_NAME.match(k))


def redact(obj):
    """A copy of obj (dicts, lists, tuples, strings, dataclasses; anything else as is) with secrets redacted."""
    if obj is None or type(obj) in (int, float, bool):  # the bulk of a report's leaves (rank lists)
        return obj
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if _secret_key(k) and isinstance(v, str) and v.strip().lower() not in _TRIVIAL:
                out[k] = MARK
            else:
                out[k] = redact(v)
        return out
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(redact(v) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        new = copy.copy(obj)
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            red = redact(value)
            if red is not value:
                setattr(new, f.name, red)
        return new
    return obj
