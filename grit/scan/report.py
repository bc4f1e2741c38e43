"""The ``grit scan`` report: :class:`ScanReport`; its forms — JSON (schema
version 1, streamed), JSON Lines, SARIF 2.1.0 and the human report (plain
text, streamed); the §13 exit codes and ``--fail-on``; and the byte
accounting behind them (:func:`account`: which bytes of each file were
checked against a recorded descriptor, checked against an inferred one, or
could not be checked, and where each tensor's bytes lie in its file)."""
from __future__ import annotations

import io
import json
import os
import pathlib
import re
import sys
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

from ..explain import escape_char, printable
from ..io.gguf import Inexpressible
from ..io.hub import is_remote
from .collect import Input, ScannedFile
from .findings import (CATEGORIES, REGISTRY, SECTIONS, SEVERITY, Category, Finding, Severity,
                       status_name)

__all__ = ["ScanReport", "Coverage", "exit_code", "render", "write_json", "write_jsonl",
           "write_sarif", "to_sarif", "account", "attach_ranges", "FORMATS", "FAIL_ON",
           "SCHEMA_VERSION", "SARIF_SCHEMA"]

#: the findings whose tensor field names a role (grade drift), not tensors
_ROLE_CODES = frozenset({"S301", "S302"})

SCHEMA_VERSION = 1
#: the output formats of ``grit scan --format``
FORMATS = ("text", "json", "jsonl", "sarif")
#: ``--fail-on`` thresholds: a finding of this severity or a more severe one fails
FAIL_ON: dict[str, Severity] = {"structural": Severity.STRUCTURAL,
                                "disagreement": Severity.DISAGREEMENT,
                                "warning": Severity.WARNING}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
#: SARIF result level of each severity
SARIF_LEVEL = {Severity.STRUCTURAL: "error", Severity.DISAGREEMENT: "warning",
               Severity.WARNING: "note", Severity.UNPARSED: "error"}

#: the reasons a byte could not be checked, as the report words them
NOT_CHECKABLE = {"plain": "plain tensors", "inexpressible": "types v1 cannot express",
                 "unreadable": "unreadable"}
#: what a GGUF tensor's descriptor is inferred from
GGML = "ggml block types"


# ---------------------------------------------------------------------------
# byte accounting


@dataclass
class Coverage:
    """The tensor bytes of one file (or a whole scan) by what scan could do
    with them: ``checked`` — planes whose descriptor the file records;
    ``inferred`` — bytes checked against a descriptor inferred from the named
    source (ggml block types, a recognised convention); ``not_checkable`` —
    by reason (plain tensors, types v1 cannot express, unreadable input)."""

    checked: int = 0
    inferred: dict[str, int] = field(default_factory=dict)
    not_checkable: dict[str, int] = field(default_factory=dict)

    @property
    def inferred_total(self) -> int:
        return sum(self.inferred.values())

    @property
    def not_checkable_total(self) -> int:
        return sum(self.not_checkable.values())

    @property
    def total(self) -> int:
        return self.checked + self.inferred_total + self.not_checkable_total

    def add(self, other: "Coverage") -> None:
        self.checked += other.checked
        for mine, theirs in ((self.inferred, other.inferred),
                             (self.not_checkable, other.not_checkable)):
            for k, n in theirs.items():
                mine[k] = mine.get(k, 0) + n

    def to_dict(self) -> dict:
        return {"bytes_total": self.total, "bytes_checked": self.checked,
                "bytes_inferred": self.inferred_total,
                "bytes_not_checkable": self.not_checkable_total,
                "inferred_from": dict(sorted(self.inferred.items())),
                "not_checkable_because": dict(sorted(self.not_checkable.items()))}


#: name -> the byte spans (label, offset in the file, length) of its bytes
Ranges = dict[str, list[tuple[str, int, int]]]


def _bump(d: dict[str, int], key: str, n: int) -> None:
    d[key] = d.get(key, 0) + n


def inferred_from(convention: str, config: Mapping | None) -> str:
    """What a recognised convention's descriptor is inferred from, in words:
    ``compressed-tensors config (nvfp4-pack-quantized)`` when the file's
    config.json declares a ``quantization_config``, else ``… tensor layout``."""
    family, _, variant = convention.partition("/")
    q = config.get("quantization_config") if isinstance(config, Mapping) else None
    src = "config" if isinstance(q, Mapping) else "tensor layout"
    return f"{family} {src}" + (f" ({variant})" if variant else "")


def account(inp: Input, findings: Iterable[Finding]) -> tuple[Coverage, Ranges]:
    """The coverage of one scanned file and the byte spans of its tensors,
    from what its container reader recorded (``findings`` are the file's:
    the recognised tensors' planes are read from their S601/S701 details).
    Never raises: an unreadable file counts its size as not checkable."""
    cov, ranges = Coverage(), Ranges()
    fs = [f for f in findings if f.file == inp.file.path]
    c = inp.container
    if c is not None:
        ACCOUNTS[c.name](inp, fs, cov, ranges)
    else:
        try:
            size = os.stat(inp.file.path).st_size if os.path.isfile(inp.file.path) else 0
        except (OSError, ValueError):
            size = 0
        if size:
            _bump(cov.not_checkable, "unreadable", size)
    return cov, ranges


def _account_safetensors(inp: Input, fs: list[Finding], cov: Coverage, ranges: Ranges) -> None:
    f = inp.safetensors
    if f is None:
        return
    spans: dict[str, tuple[int, int]] = {}
    for n, e in f.entries.items():
        if e.span is not None:
            spans[n] = (f.start + e.span[0], e.span[1] - e.span[0])
            ranges[n] = [(n, *spans[n])]
    inferred: dict[str, str] = {}              # file tensor -> inferred from
    inexpressible: set[str] = set()
    for x in fs:
        d = x.detail
        if x.code == "S601" and isinstance(d.get("planes"), dict):
            src = inferred_from(str(d.get("convention", "")), inp.config)
            x.detail.setdefault("inferred_from", src)
            for name, planes in d["planes"].items():
                own = []
                for role, p in zip(("data", "scale0", "scale1", "aux"), planes or ()):
                    if isinstance(p, list) and len(p) > 1 and p[0] != "const" \
                            and isinstance(p[1], str):
                        inferred.setdefault(p[1], src)
                        if p[1] in spans:
                            own.append((role, *spans[p[1]]))
                if own:
                    ranges[name] = own
        elif x.code == "S701" and isinstance(d.get("files"), list):
            inexpressible.update(t for t in d["files"] if isinstance(t, str))
    for name, g in f.doc.tensors.items():
        names = [g.payload] if g.payload is not None else list(g.planes)
        own = [(role, *spans[t]) for role, t in zip(("data", "scale0", "scale1", "aux"), names)
               if t is not None and t in spans]
        if g.payload is not None:
            own = [("payload", *spans[g.payload])] if g.payload in spans else []
        if own:
            ranges[name] = own
    avail, claimed = f.avail, f.doc.claimed
    for n, e in f.entries.items():
        # the bytes of the span the file holds (SafetensorsFile.on_disk, inline)
        held = 0 if e.span is None else max(0, min(e.span[1], avail) - min(e.span[0], avail))
        if n in claimed:
            cov.checked += held
        elif n in inferred:
            _bump(cov.inferred, inferred[n], held)
        elif n in inexpressible:
            _bump(cov.not_checkable, "inexpressible", held)
        else:
            _bump(cov.not_checkable, "plain", held)


def _account_gguf(inp: Input, fs: list[Finding], cov: Coverage, ranges: Ranges) -> None:
    got = inp.gguf
    if got is None:
        return
    from_grit = got.annotated
    companions = {c.scale for c in getattr(got.tensors, "companions", {}).values()
                  if c.attached and c.scale is not None}
    for x in fs:
        if x.category is Category.INFERRED:
            x.detail.setdefault("inferred_from", GGML)
    size = got.file.size
    for t in got.file.tensors:
        start = got.file.data_start + t.offset
        n = t.nbytes
        held = max(0, min(start + n, size) - start)
        ranges[t.name] = [(t.name, start, n)]
        v = got.tensors.get(t.name)
        if t.name in from_grit:
            cov.checked += held
        elif t.name in companions:
            _bump(cov.inferred, GGML, held)
        elif v is None:
            _bump(cov.not_checkable, "unreadable", held)
        elif isinstance(v, Inexpressible):
            _bump(cov.not_checkable, "inexpressible", held)
        elif hasattr(v, "descriptor") or hasattr(v, "error"):   # GritArray / CheckFailed
            _bump(cov.inferred, GGML, held)
        else:
            _bump(cov.not_checkable, "plain", held)


#: each container's byte accounting
ACCOUNTS = {"safetensors": _account_safetensors, "gguf": _account_gguf}


def _where(spans: list[tuple[str, int, int]]) -> tuple[int, int]:
    """A tensor's byte range: all its planes when they lie back to back in
    the file, else its first (data) plane — never a range that takes in
    another tensor's bytes."""
    order = sorted(spans, key=lambda s: s[1])
    if all(a[1] + a[2] == b[1] for a, b in zip(order, order[1:])):
        return order[0][1], sum(s[2] for s in order)
    return spans[0][1], spans[0][2]


def _range(spans: list[tuple[str, int, int]]) -> dict[str, Any]:
    off, n = _where(spans)
    br: dict[str, Any] = {"offset": off, "length": n}
    if len(spans) > 1:
        br["planes"] = {s[0]: {"offset": s[1], "length": s[2]} for s in spans}
    return br


def attach_ranges(findings: Iterable[Finding], ranges: Mapping[str, Ranges]) -> None:
    """Put the byte range of each finding's tensor into its detail:
    ``byte_range`` {offset, length[, planes]} for a finding naming one
    tensor, ``byte_ranges`` {tensor: {offset, length[, planes]}} for one
    listing several (``detail.tensors``).  A range is the tensor's bytes
    when its planes lie back to back, else its data plane's; ``planes`` (a
    tensor of several planes) gives each plane's range.  Offsets are from the
    start of the file."""
    for f in findings:
        rs = ranges.get(f.file or "")
        if not rs:
            continue
        spans = rs.get(f.tensor or "")
        if spans:
            f.detail.setdefault("byte_range", _range(spans))
            continue
        names = f.detail.get("tensors")
        if isinstance(names, list):
            got = {name: _range(rs[name]) for name in names
                   if isinstance(name, str) and rs.get(name)}
            if got:
                f.detail.setdefault("byte_ranges", got)


@dataclass
class ScanReport:
    files: list[ScannedFile]
    findings: list[Finding]
    deep: bool = False
    #: path -> the coverage of that file (:func:`account`)
    coverage: dict[str, Coverage] = field(default_factory=dict)

    def total_coverage(self) -> Coverage:
        out = Coverage()
        for c in self.coverage.values():
            out.add(c)
        return out

    def coverage_dict(self) -> dict:
        """The ``coverage`` object of the JSON / JSONL / SARIF reports: the
        scan's totals and each file's."""
        return {**self.total_coverage().to_dict(),
                "files": {p: c.to_dict() for p, c in sorted(self.coverage.items())}}

    @property
    def parsed(self) -> int:
        return sum(f.parsed for f in self.files)

    @property
    def exit_code_graded(self) -> int:
        return exit_code(self, "graded")

    @property
    def exit_code_simple(self) -> int:
        return exit_code(self, "simple")

    def summary(self) -> dict:
        by_cat: dict[str, int] = {}
        by_sev: dict[str, int] = {}
        for f in self.findings:
            by_cat[f.category.value] = by_cat.get(f.category.value, 0) + 1
            s = SEVERITY[f.severity]
            by_sev[s] = by_sev.get(s, 0) + 1
        return {"files": len(self.files), "parsed": self.parsed,
                "tensors": sum(f.tensors for f in self.files),
                "grit_tensors": sum(f.grit_tensors for f in self.files),
                "findings": len(self.findings), "by_category": by_cat, "by_severity": by_sev,
                "deep": self.deep}

    def _head(self, policy: str, fail_on: str | None) -> dict:
        return {"version": SCHEMA_VERSION, "exit_policy": _policy_name(policy, fail_on),
                "exit_code": exit_code(self, policy, fail_on),
                "exit_code_graded": self.exit_code_graded,
                "exit_code_simple": self.exit_code_simple}

    def to_dict(self, policy: str = "graded", fail_on: str | None = None) -> dict:
        return {**self._head(policy, fail_on),
                "files": [f.to_dict() for f in self.files],
                "findings": [f.to_dict() for f in self.findings],
                "summary": self.summary(), "coverage": self.coverage_dict()}


def _policy_name(policy: str, fail_on: str | None) -> str:
    return policy if fail_on is None else f"fail-on {fail_on}"


def exit_code(report: ScanReport, policy: str = "graded", fail_on: str | None = None) -> int:
    """§13: graded 0 clean / 1 structural / 2 disagreement / 3 warnings only /
    4 nothing parsed; simple 0 clean / 1 any finding / 2 nothing parsed.

    ``fail_on`` (structural / disagreement / warning) replaces the policy:
    0 when no finding is at or above that severity, otherwise the graded code
    (1, 2 or 3: the most severe finding); 4 when nothing could be parsed."""
    nothing = report.parsed == 0
    if fail_on is not None:
        if nothing:
            return int(Severity.UNPARSED)
        worst = min((f.severity for f in report.findings), default=None)
        return int(worst) if worst is not None and worst <= FAIL_ON[fail_on] else 0
    if policy == "simple":
        return 2 if nothing else (1 if report.findings else 0)
    if nothing:
        return int(Severity.UNPARSED)
    # the most severe finding wins: 1 (structural) over 2 (disagreement) over 3
    return int(min((f.severity for f in report.findings), default=0))


#: SGR colours of the severity labels (on a terminal only)
_SEVERITY_STYLE = {Severity.STRUCTURAL: "1;31", Severity.DISAGREEMENT: "1;33",
                   Severity.WARNING: "36", Severity.UNPARSED: "1;31"}
_VERDICT = {0: "clean", 1: "structural violations", 2: "disagreements", 3: "warnings only",
            4: "no input could be parsed"}


def _use_color(out) -> bool:
    """Colour on a terminal, unless NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _width(out) -> int:
    """The terminal's width (80 when it cannot be told)."""
    try:
        return max(40, os.get_terminal_size(out.fileno()).columns)
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        try:
            return max(40, int(os.environ.get("COLUMNS", "80")))
        except ValueError:
            return 80


_IN_WORD = re.compile(r"[^ ][(\[{]")


def _tokens(text: str) -> list[str]:
    """``text`` split at its spaces, except those inside a bracket opened
    within a word: a word is never split, and a grade string
    ``GRIT1(esr=ocpmx, s0=ue8m0, k0=32, e=fp4)`` or an indexed name stays
    whole."""
    if _IN_WORD.search(text) is None:        # no bracket opened inside a word
        return [t for t in text.split(" ") if t]
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        # a bracket opened inside a word (grit1(…), x[…]) holds its group
        # together; a parenthesis that starts a word is prose and may break
        if ch in "([{" and (depth or cur):
            depth += 1
        elif ch in ")]}" and depth:
            depth -= 1
        if ch == " " and depth == 0:
            if cur:
                out.append("".join(cur))
                cur = []
            continue
        cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def fill(tokens: Iterable[str], width: int, indent: str, first: str | None = None) -> list[str]:
    """``tokens`` joined by spaces and filled to ``width`` columns, breaking
    only between tokens (one longer than the line stands alone on its line,
    whole); the first line begins with ``first`` (default ``indent``), the
    others with ``indent``."""
    lines: list[str] = []
    cur = ""
    lead = indent if first is None else first
    for tok in tokens:
        if cur and len(lead) + len(cur) + 1 + len(tok) > width:
            lines.append(lead + cur)
            lead, cur = indent, tok
        else:
            cur = f"{cur} {tok}" if cur else tok
    lines.append(lead + cur)
    return lines


def wrap(text: str, width: int, indent: str) -> list[str]:
    """``text`` filled to ``width`` columns after ``indent`` (continuation
    lines two columns further in), breaking only between :func:`_tokens`."""
    return fill(_tokens(text), width, indent + "  ", indent)


_GROUP = re.compile(r"^(\d+ tensors:) (.+)$", re.S)


def _name_tokens(text: str) -> list[str]:
    """A finding's tensor field as tokens: one name is one token (a name is
    never broken, spaces and all); ``N tensors: a, b, c`` breaks only after
    the commas between names."""
    m = _GROUP.match(text)
    if m is None:
        return [text]
    names = m[2].split(", ")
    return m[1].split(" ") + [n + "," for n in names[:-1]] + names[-1:]


def _inferred_title(fs: list[Finding]) -> str:
    srcs: list[str] = []
    for f in fs:
        src = f.detail.get("inferred_from")
        if not isinstance(src, str):
            src = GGML if f.code in ("S602", "S603", "S604") else "a recognised convention"
        if src not in srcs:
            srcs.append(src)
    return ("Inferred descriptors (no GRIT metadata in the file; inferred from "
            + "; ".join(printable(s) for s in sorted(srcs)) + ")")


def coverage_line(c: Coverage) -> str:
    """The coverage line of the human report."""
    def why(d: dict[str, int], words: Mapping[str, str]) -> str:
        if not d:
            return ""
        return " (" + ", ".join(f"{printable(words.get(k, k))} {n:,}"
                                for k, n in sorted(d.items())) + ")"

    return (f"coverage: {c.total:,} tensor bytes — {c.checked:,} checked (descriptor "
            f"recorded), {c.inferred_total:,} checked against an inferred descriptor"
            f"{why(c.inferred, {})}, {c.not_checkable_total:,} not checkable"
            f"{why(c.not_checkable, NOT_CHECKABLE)}")


def render(report: ScanReport, policy: str, file=None, fail_on: str | None = None) -> None:
    """The human report, written as it is formed (one finding at a time, in
    time and memory linear in the findings): per category a title line, then
    each finding — severity, code and status; file; tensor; the message and
    its derivation lines; how many more of its code in its file were not
    listed — then the coverage line and a summary line with the exit codes.

    On a terminal the labels are aligned, colour is used (unless NO_COLOR)
    and messages are filled to the terminal's width, breaking only between
    words (never inside a file name, a word or a bracketed grade string);
    written to a pipe or a file nothing is padded or wrapped: each message is
    one line and each label is followed by ``: ``.

    Every text from a file passes :func:`grit.explain.printable`; the only
    escape sequences written are the colours, and only on a terminal."""
    out = file if file is not None else sys.stdout
    color = _use_color(out)
    tty = _is_tty(out)
    width = _width(out) if tty else 0
    P = printable

    def sgr(text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if color and code else text

    def text_rows(text: str, indent: str, style: str = "") -> list[str]:
        if not tty:
            return [sgr(indent + text, style)]
        return [sgr(ln, style) for ln in wrap(text, width, indent)]

    def label(name: str) -> str:
        return f"{name:<6}  " if tty else f"{name}: "

    cwd = os.getcwd()
    shown: dict[str, str] = {}              # path -> how it is shown (relpath is slow)

    def where(p: str | None) -> str:
        if not p:
            return "-"
        got = shown.get(p)
        if got is None:
            if is_remote(p):                # a URL or hf:// name as given (no "https:/")
                got = shown[p] = P(p)
                return got
            try:
                r = os.path.relpath(p, cwd)
            except ValueError:
                r = p
            got = shown[p] = P(p if r.startswith("..") else r)
        return got

    write = out.write
    sev_label = {v: sgr(f"{int(v)} {SEVERITY[v]}", _SEVERITY_STYLE.get(v, "")) for v in Severity}
    by_cat: dict[Category, list[Finding]] = {}
    for f in report.findings:
        by_cat.setdefault(f.category, []).append(f)
    omitted_total = 0
    for cat, title in CATEGORIES.items():
        fs = by_cat.get(cat)
        if not fs:
            continue
        if cat is Category.INFERRED:
            title = _inferred_title(fs)
        sev = min(f.severity for f in fs)  # the most severe of the category
        more = sum(getattr(f, "omitted", 0) for f in fs)
        omitted_total += more
        head = f"{title} — {_count(len(fs), 'finding')}"
        if more:
            head += f" (and {more:,} more not listed)"
        write("\n".join(text_rows(f"{head}, exit {int(sev)}", "", "1")) + "\n\n")
        for f in fs:
            rows = [f"  {sev_label[f.severity]}  {f.code} {P(f.status)}",
                    f"    {label('file')}{where(f.file)}"]
            if f.tensor:
                what = "role" if f.code in _ROLE_CODES else "tensor"
                head = f"    {label(what)}"
                if tty:
                    rows.extend(sgr(ln, "1") if i else head + sgr(ln[len(head):], "1")
                                for i, ln in enumerate(fill(_name_tokens(P(f.tensor)), width,
                                                            " " * len(head), head)))
                else:
                    rows.append(head + P(f.tensor))
            rows.extend(text_rows(P(f.message), "    "))
            for ln in f.lines:
                rows.extend(text_rows(P(ln), "      ", "2"))
            n = getattr(f, "omitted", 0)
            if n:
                rows.extend(text_rows(f"… and {n:,} more {f.code} in this file (not listed)",
                                      "    "))
            write("\n".join(rows) + "\n\n")
    s = report.summary()
    code = exit_code(report, policy, fail_on)
    if report.coverage:
        write("\n".join(text_rows(coverage_line(report.total_coverage()), "")) + "\n")
    parts = [f"{s['parsed']}/{s['files']} files parsed", f"{s['tensors']} tensors "
             f"({s['grit_tensors']} GRIT)", _count(s["findings"], "finding")]
    if omitted_total:
        parts[-1] += f" listed (and {omitted_total:,} more)"
    if s["by_severity"]:
        parts.append(", ".join(f"{n} {k}" for k, n in sorted(s["by_severity"].items())))
    policy_note = "" if fail_on is None else f"; --fail-on {fail_on}"
    tail = (f"exit {code} ({_VERDICT.get(report.exit_code_graded)}{policy_note}; graded "
            f"{report.exit_code_graded}, simple {report.exit_code_simple})")
    write("\n".join(text_rows("; ".join(parts) + " — " + tail, "")) + "\n")
    if report.findings:
        write("\n".join(text_rows("grit explain CODE explains a finding code (the code is "
                                  "beside each severity).", "", "2")) + "\n")
    out.flush()


def _is_tty(out) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError, OSError):
        return False


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
    for f in report.findings:
        out.write(no_lone_surrogates(enc.encode({"type": "finding", **f.to_dict()})) + "\n")
    out.write(no_lone_surrogates(enc.encode({"type": "summary", **report._head(policy, fail_on),
                                             "files": [f.to_dict() for f in report.files],
                                             "summary": report.summary(),
                                             "coverage": report.coverage_dict()})) + "\n")
    out.flush()


def _camel(title: str) -> str:
    words = "".join(c if c.isalnum() else " " for c in title).split()
    return "".join(w[:1].upper() + w[1:] for w in words) or "Finding"


def sarif_rules() -> list[dict]:
    """One SARIF reportingDescriptor per finding code of the registry."""
    rules = []
    for code in sorted(REGISTRY):
        spec = REGISTRY[code]
        status = None if spec.status is None else status_name(spec.status)
        rules.append({
            "id": code, "name": _camel(spec.title),
            "shortDescription": {"text": spec.title},
            "fullDescription": {"text": f"{spec.what} {spec.why}"},
            "help": {"text": f"Fix: {spec.fix}  (grit explain {code})"},
            "defaultConfiguration": {"level": SARIF_LEVEL[spec.severity]},
            "properties": {"category": spec.category.value, "severity": int(spec.severity),
                           "severity_name": spec.severity.label, "status": status,
                           "section": SECTIONS.get(spec.category)}})
    return rules


def _uri(path: str) -> dict:
    """An artifactLocation for ``path``: a relative path as a relative URI
    against %SRCROOT% (the working directory), an absolute one as a file URI."""
    raw = os.fsencode(path)
    if os.path.isabs(path):             # (a byte that is not UTF-8 is %-encoded as itself)
        return {"uri": "file://" + urllib.parse.quote(raw)}
    return {"uri": urllib.parse.quote(raw.replace(os.sep.encode(), b"/")),
            "uriBaseId": "SRCROOT"}


def _region(br) -> dict | None:
    if isinstance(br, dict) and isinstance(br.get("offset"), int) \
            and isinstance(br.get("length"), int) and br["offset"] >= 0 and br["length"] >= 0:
        return {"byteOffset": br["offset"], "byteLength": br["length"]}
    return None


def _results(report: ScanReport, artifacts: dict[str, int]) -> Iterator[dict]:
    index = {code: i for i, code in enumerate(sorted(REGISTRY))}
    uris: dict[str, dict] = {}
    for f in report.findings:
        d = f.to_dict()
        text = f.message if not f.lines else f.message + "\n" + "\n".join(f.lines)
        res: dict[str, Any] = {"ruleId": f.code, "ruleIndex": index[f.code],
                               "level": SARIF_LEVEL[f.severity], "message": {"text": text}}
        if f.file:
            u = uris.get(f.file)
            if u is None:
                u = uris[f.file] = _uri(f.file)
            loc: dict[str, Any] = dict(u)
            if f.file in artifacts:
                loc["index"] = artifacts[f.file]
            phys: dict[str, Any] = {"artifactLocation": loc}
            br = f.detail.get("byte_range")
            reg = _region(br)
            if reg is not None:
                phys["region"] = reg
            location: dict[str, Any] = {"physicalLocation": phys}
            group = f.detail.get("tensors")
            if f.tensor and not (isinstance(group, list) and f.tensor not in group):
                location["logicalLocations"] = [{"name": f.tensor, "kind": "member"}]
            res["locations"] = [location]
            related: list[dict] = []

            def relate(text: str, name: str, r) -> None:
                reg = _region(r)
                if reg is not None:
                    related.append({"id": len(related), "message": {"text": text},
                                    "physicalLocation": {"artifactLocation": loc,
                                                         "region": reg},
                                    "logicalLocations": [{"name": name, "kind": "member"}]})

            # a tensor of several planes: each plane but the one the region is
            if isinstance(br, dict) and isinstance(br.get("planes"), dict):
                for role, r in br["planes"].items():
                    if _region(r) != reg:
                        relate(f"{f.tensor}: {role} plane", str(f.tensor), r)
            # several tensors: each tensor, or each plane of a tensor of several
            brs = f.detail.get("byte_ranges")
            if isinstance(brs, dict):
                for name, r in brs.items():
                    planes = r.get("planes") if isinstance(r, dict) else None
                    if isinstance(planes, dict):
                        for role, pr in planes.items():
                            relate(f"{name}: {role} plane", str(name), pr)
                    else:
                        relate(str(name), str(name), r)
            if related:
                res["relatedLocations"] = related
        res["properties"] = {"category": d["category"], "severity": d["severity"],
                             "status": d["status"], "tensor": d["tensor"],
                             "detail": d["detail"],
                             **({"omitted": d["omitted"]} if "omitted" in d else {})}
        yield res


def _sarif_run(report: ScanReport, policy: str, fail_on: str | None,
               version: str | None) -> tuple[dict, dict[str, int]]:
    """The run object of the SARIF log, less its results, and the artifact
    index of each file."""
    artifacts: dict[str, int] = {}
    arts: list[dict] = []
    for sf in report.files:
        if sf.path in artifacts:
            continue
        artifacts[sf.path] = len(arts)
        a: dict[str, Any] = {"location": _uri(sf.path)}
        try:
            a["length"] = os.stat(sf.path).st_size
        except (OSError, ValueError):
            pass
        if sf.format:
            a["properties"] = {"format": sf.format, "parsed": sf.parsed}
        arts.append(a)
    driver: dict[str, Any] = {"name": "grit", "rules": sarif_rules()}
    if version:
        driver["version"] = version
    code = exit_code(report, policy, fail_on)
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "originalUriBaseIds": {"SRCROOT": {"uri": pathlib.Path(os.getcwd()).as_uri() + "/"}},
        "invocations": [{"executionSuccessful": True, "exitCode": code}],
        "artifacts": arts,
        "properties": {**report._head(policy, fail_on), "summary": report.summary(),
                       "coverage": report.coverage_dict()}}
    return run, artifacts


def to_sarif(report: ScanReport, policy: str = "graded", fail_on: str | None = None,
             version: str | None = None) -> dict:
    """The SARIF 2.1.0 log of a scan: one run of the ``grit`` tool, one rule
    per finding code (:data:`REGISTRY`: id, name, short / full description,
    help, default level from the severity), one result per finding (the file
    as artifact location; the tensor's byte range in the file, where known,
    as the region's byteOffset / byteLength; other planes and several
    tensors' ranges as related locations), the scanned files as artifacts
    (with their size), and the coverage, summary and exit codes as run
    properties."""
    run, artifacts = _sarif_run(report, policy, fail_on, version)
    run["results"] = list(_results(report, artifacts))
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def write_sarif(report: ScanReport, policy: str, file=None, fail_on: str | None = None,
                version: str | None = None) -> None:
    """The SARIF 2.1.0 log (``--format sarif``): :func:`to_sarif`'s log,
    written result by result as each is formed (the results are never held
    together), one result a line.  ASCII."""
    out = file if file is not None else sys.stdout
    run, artifacts = _sarif_run(report, policy, fail_on, version)
    head = no_lone_surrogates(json.dumps(run, indent=2, default=str))   # the run less results
    pad = " " * 8
    out.write(f'{{\n  "$schema": {json.dumps(SARIF_SCHEMA)},\n  "version": '
              f'{json.dumps(SARIF_VERSION)},\n  "runs": [\n    '
              + head[:-1].rstrip().replace("\n", "\n    ") + ',\n      "results": [')
    enc = json.JSONEncoder(default=str)        # one result a line (the C encoder)
    sep = "\n"
    for res in _results(report, artifacts):
        out.write(sep + pad + no_lone_surrogates(enc.encode(res)))
        sep = ",\n"
    out.write(("\n      ]" if sep != "\n" else "]") + "\n    }\n  ]\n}\n")
    out.flush()


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'s' * (n != 1)}"
