"""The JSON report (schema version 1, streamed) and JSON Lines:
:func:`write_json`, :func:`write_jsonl`."""
from __future__ import annotations

import importlib.resources
import json
import os
import re
import sys

from ..._text import escape_char
from .record import Record
from .report import ScanReport

__all__ = ["write_json", "write_jsonl", "no_lone_surrogates", "schema"]


def schema(lines: bool = False) -> dict:
    """The JSON Schema (draft 2020-12) of the JSON report, shipped as
    ``grit/scan/output/schema.json``; with ``lines``, the schema of one line
    of the JSON Lines report."""
    doc = json.loads(importlib.resources.files(__package__).joinpath("schema.json")
                     .read_text(encoding="utf-8"))
    if lines:
        doc["$ref"] = "#/$defs/jsonl_line"
    return doc


#: in ASCII JSON text: an escaped backslash, a surrogate pair, or a surrogate
_JSON_ESCAPES = re.compile(r"\\\\|\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})"
                           r"|\\u(d[89a-f][0-9a-f]{2})")


def _fix(m: re.Match) -> str:
    lone = m.group(3)
    if lone is None:
        return m.group(0)
    return json.dumps(escape_char(chr(int(lone, 16))))[1:-1]


def no_lone_surrogates(text: str) -> str:
    """ASCII JSON text (``ensure_ascii``) with each lone surrogate — a byte
    of a name that is not UTF-8, carried by surrogateescape, or an unpaired
    ``\\ud800`` from a file's JSON — replaced by its escape as the text
    report writes it (grit.explain.escape_char): the byte 0xFF of a file
    name is the four characters ``\\xff``, another surrogate ``\\udXXX``
    as text.  The result is valid UTF-8 JSON whatever the names held."""
    return text if "\\ud" not in text else _JSON_ESCAPES.sub(_fix, text)


def _stream(obj, out, indent: int | None = 2) -> None:
    """``json.dumps(obj, indent=indent)`` and a newline, written in pieces of
    about 64 KiB as it is encoded instead of formed as one string first
    (lone surrogates escaped: :func:`no_lone_surrogates`)."""
    buf: list[str] = []
    size = 0
    for chunk in json.JSONEncoder(indent=indent, default=str).iterencode(obj):
        chunk = no_lone_surrogates(chunk)
        buf.append(chunk)
        size += len(chunk)
        if size >= 1 << 16:
            out.write("".join(buf))
            buf.clear()
            size = 0
    buf.append("\n")
    out.write("".join(buf))


def write_json(report: ScanReport, policy: str, file=None, fail_on: str | None = None) -> None:
    """The JSON report (``grit scan --format json``, alias ``--json``):
    ``json.dumps(report.to_dict(policy, fail_on), indent=2)`` and a newline,
    byte for byte, but written in pieces of about 64 KiB as it is encoded.
    ASCII (``ensure_ascii``), so any output encoding carries it."""
    out = file if file is not None else sys.stdout
    _stream(report.to_dict(policy, fail_on), out)
    out.flush()


def write_jsonl(report: ScanReport, policy: str, file=None, fail_on: str | None = None) -> None:
    """JSON Lines (``--format jsonl``): one object per finding per line
    (``{"type": "finding", …}``, the finding as in the JSON report), then one
    summary object (``{"type": "summary", …}``: version, exit policy and
    codes, files, summary, coverage).  Each line is written as it is encoded;
    ASCII."""
    out = file if file is not None else sys.stdout
    enc = json.JSONEncoder(default=str)
    cwd = os.getcwd()
    for f in report.findings:
        rec = Record.of(f, cwd).to_dict()
        out.write(no_lone_surrogates(enc.encode({"type": "finding", **rec})) + "\n")
    out.write(no_lone_surrogates(enc.encode({"type": "summary", **report._head(policy, fail_on),
                                             "files": [f.to_dict() for f in report.files],
                                             "summary": report.summary(),
                                             "coverage": report.coverage_dict()})) + "\n")
    out.flush()
