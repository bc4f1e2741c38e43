"""The markdown report (``grit scan --format markdown``): a pull-request
comment or a GitHub job summary ($GITHUB_STEP_SUMMARY).

A heading with the exit code and its verdict, the summary and coverage
lines, then one table row per finding — severity, code and status, file,
tensor (or role, or the tensors' label), message — each finding's
consequences on the rows after it, marked ``↳``.  At most ``max_rows`` rows
are written (a comment has a size limit); the rest are counted.  Every text
from a file passes :func:`grit._text.printable` and then has each character
markdown or HTML would act on escaped, so a file name cannot open a link,
an image or a tag."""
from __future__ import annotations

import os
import re
import sys

from ..._text import printable
from ...io.hub import is_remote
from ..findings import SEVERITY, Finding
from .policy import VERDICT, exit_code
from .record import ROLE_CODES
from .report import ScanReport
from .text import coverage_line

__all__ = ["write_markdown", "md_escape", "MAX_ROWS"]

#: the most finding rows one markdown report lists
MAX_ROWS = 200

#: the punctuation that acts inside a table cell (emphasis, code, links and
#: images, the cell's end, strikethrough), backslash-escaped; < > & become
#: entities.  A cell never begins a line, so the marks that act only there
#: (# - + 1.) need no escape
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md_escape(text: object) -> str:
    """``text`` as literal markdown inline text: printable, every markdown
    punctuation mark backslash-escaped, ``<``, ``>`` and ``&`` as entities,
    line breaks as spaces (a table cell is one line)."""
    s = printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


def _where(path: str | None, cwd: str) -> str:
    if not path:
        return "–"
    if is_remote(path):
        return path
    try:
        r = os.path.relpath(path, cwd)
    except ValueError:
        r = path
    return path if r.startswith("..") else r


def _subject(f: Finding) -> str:
    if not f.tensor:
        return "–"
    return ("role " if f.code in ROLE_CODES else "") + md_escape(f.tensor)


def write_markdown(report: ScanReport, policy: str, file=None, fail_on: str | None = None,
                   max_rows: int = MAX_ROWS) -> None:
    """The markdown report of ``report`` under the exit ``policy`` / ``fail_on``."""
    out = file if file is not None else sys.stdout
    code = exit_code(report, policy, fail_on)
    s = report.summary()
    cwd = os.getcwd()
    w = out.write
    if fail_on is None and policy == "simple":
        verdict = ("clean", "findings", "no input could be parsed")[code]
    elif fail_on is not None and code == 0 and report.findings:
        verdict = f"no finding at or above {fail_on}"
    else:
        verdict = VERDICT.get(code, "")
    w(f"### grit scan — exit {code}: {verdict}\n\n")
    parts = [f"{s['parsed']}/{s['files']} files parsed",
             f"{s['tensors']} tensors ({s['grit_tensors']} GRIT)",
             f"{s['findings']} finding{'s' * (s['findings'] != 1)}"]
    if s["by_severity"]:
        parts.append(", ".join(f"{n} {k}" for k, n in sorted(s["by_severity"].items())))
    policy_note = policy if fail_on is None else f"--fail-on {fail_on}"
    w("; ".join(parts) + f" (exit policy: {policy_note})\n")
    if report.baseline is not None:
        w(f"\nBaseline {md_escape(report.baseline)}: {len(report.known)} known finding"
          f"{'s' * (len(report.known) != 1)} not listed and not counted; every finding "
          "below is new.\n")
    if report.suppressed:
        w(f"\n{report.suppressed} finding{'s' * (report.suppressed != 1)} ignored by the "
          "settings.\n")
    if report.coverage:
        w(f"\n{md_escape(coverage_line(report.total_coverage()))}\n")
    if not report.findings:
        w("\nNo findings.\n")
        out.flush()
        return
    w("\n| severity | code | file | tensor | finding |\n|---|---|---|---|---|\n")
    rows = 0
    left = 0

    def row(f: Finding, depth: int) -> None:
        nonlocal rows, left
        if rows >= max_rows:
            left += 1
        else:
            rows += 1
            mark = "↳ " * depth
            w(f"| {mark}{int(f.severity)} {SEVERITY[f.severity]} | {mark}{f.code} "
              f"{md_escape(f.status)} | {md_escape(_where(f.file, cwd))} | {_subject(f)} | "
              f"{md_escape(f.message)}"
              + (f" (and {f.omitted} more {f.code} in this file)" if f.omitted else "")
              + " |\n")
        for c in f.consequences:
            row(c, depth + 1)

    for f in report.findings:
        row(f, 0)
    if left:
        w(f"\n… and {left} more finding{'s' * (left != 1)} not listed here (the JSON "
          "report has every one).\n")
    w("\n`grit explain CODE` explains a finding code.\n")
    out.flush()
