"""The ``grit scan`` report: :class:`ScanReport`, its JSON form (schema
version 1), the human report (plain text, streamed) and the §13 exit codes."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

from ..explain import printable
from .collect import ScannedFile
from .findings import CATEGORIES, SEVERITY, Category, Finding, Severity

__all__ = ["ScanReport", "exit_code", "render", "write_json", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1


@dataclass
class ScanReport:
    files: list[ScannedFile]
    findings: list[Finding]
    deep: bool = False

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

    def to_dict(self, policy: str = "graded") -> dict:
        return {"version": SCHEMA_VERSION, "exit_policy": policy,
                "exit_code": exit_code(self, policy),
                "exit_code_graded": self.exit_code_graded,
                "exit_code_simple": self.exit_code_simple,
                "files": [f.to_dict() for f in self.files],
                "findings": [f.to_dict() for f in self.findings],
                "summary": self.summary()}


def exit_code(report: ScanReport, policy: str = "graded") -> int:
    """§13: graded 0 clean / 1 structural / 2 disagreement / 3 warnings only /
    4 nothing parsed; simple 0 clean / 1 any finding / 2 nothing parsed."""
    nothing = report.parsed == 0
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


def render(report: ScanReport, policy: str, file=None) -> None:
    """The human report, written as it is formed (one finding at a time, in
    time and memory linear in the findings): per category a title line, then
    each finding — severity, code and status; file; tensor; the message and
    its derivation lines; how many more of its code in its file were not
    listed — then a summary line with both exit codes.

    Every text from a file passes :func:`grit.explain.printable`; the only
    escape sequences written are the colours, and only on a terminal."""
    out = file if file is not None else sys.stdout
    color = _use_color(out)
    P = printable

    def sgr(text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if color and code else text

    cwd = os.getcwd()
    shown: dict[str, str] = {}              # path -> how it is shown (relpath is slow)

    def where(p: str | None) -> str:
        if not p:
            return "-"
        got = shown.get(p)
        if got is None:
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
        sev = min(f.severity for f in fs)  # the most severe of the category
        more = sum(getattr(f, "omitted", 0) for f in fs)
        omitted_total += more
        head = f"{title} — {_count(len(fs), 'finding')}"
        if more:
            head += f" (and {more:,} more not listed)"
        write(sgr(f"{head}, exit {int(sev)}", "1") + "\n\n")
        for f in fs:
            rows = [f"  {sev_label[f.severity]}  {f.code} {P(f.status)}",
                    f"    file    {where(f.file)}"]
            if f.tensor:
                what = "role  " if cat is Category.DRIFT else "tensor"
                rows.append(f"    {what}  {sgr(P(f.tensor), '1')}")
            rows.append(f"    {P(f.message)}")
            rows.extend(sgr(f"      {P(ln)}", "2") for ln in f.lines)
            n = getattr(f, "omitted", 0)
            if n:
                rows.append(f"    … and {n:,} more {f.code} in this file (not listed)")
            write("\n".join(rows) + "\n\n")
    s = report.summary()
    code = report.exit_code_graded if policy == "graded" else report.exit_code_simple
    parts = [f"{s['parsed']}/{s['files']} files parsed", f"{s['tensors']} tensors "
             f"({s['grit_tensors']} GRIT)", _count(s["findings"], "finding")]
    if omitted_total:
        parts[-1] += f" listed (and {omitted_total:,} more)"
    if s["by_severity"]:
        parts.append(", ".join(f"{n} {k}" for k, n in sorted(s["by_severity"].items())))
    tail = (f"exit {code} ({_VERDICT.get(report.exit_code_graded)}; graded "
            f"{report.exit_code_graded}, simple {report.exit_code_simple})")
    write("; ".join(parts) + " — " + tail + "\n")
    if report.findings:
        write(sgr("grit explain CODE explains a finding code (the code is beside each "
                  "severity).", "2") + "\n")
    out.flush()


def write_json(report: ScanReport, policy: str, file=None) -> None:
    """The JSON report (``grit scan --json``): ``json.dumps(report.to_dict(policy),
    indent=2)`` and a newline, byte for byte, but written in pieces of about
    64 KiB as it is encoded instead of formed as one string first.  ASCII
    (``ensure_ascii``), so any output encoding carries it."""
    out = file if file is not None else sys.stdout
    buf: list[str] = []
    size = 0
    for chunk in json.JSONEncoder(indent=2, default=str).iterencode(report.to_dict(policy)):
        buf.append(chunk)
        size += len(chunk)
        if size >= 1 << 16:
            out.write("".join(buf))
            buf.clear()
            size = 0
    buf.append("\n")
    out.write("".join(buf))
    out.flush()


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'s' * (n != 1)}"
