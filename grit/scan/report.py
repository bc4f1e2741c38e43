"""The ``grit scan`` report: :class:`ScanReport`, its JSON form (schema
version 1), the human table and the §13 exit codes."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from .collect import ScannedFile
from .findings import CATEGORIES, SEVERITY, Finding, Severity

__all__ = ["ScanReport", "exit_code", "render", "SCHEMA_VERSION"]

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


_SEVERITY_STYLE = {Severity.STRUCTURAL: "bold red", Severity.DISAGREEMENT: "bold yellow",
                   Severity.WARNING: "cyan", Severity.UNPARSED: "bold red"}
_VERDICT = {0: "clean", 1: "structural violations", 2: "disagreements", 3: "warnings only",
            4: "no input could be parsed"}


def render(report: ScanReport, policy: str, file=None) -> None:
    """The human report: one table per category (each finding's message, its
    derivation lines and its code), then a summary line with both exit
    codes.  Colour only on a terminal."""
    # rich is heavy to import and only the human table needs it
    from rich import box  # noqa: PLC0415
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415
    out = file if file is not None else sys.stdout
    tty = out.isatty()
    con = Console(file=out, width=None if tty else 132, no_color=not tty,
                  highlight=False, soft_wrap=False)
    cwd = os.getcwd()

    def rel(p):
        if not p:
            return "-"
        try:
            r = os.path.relpath(p, cwd)
        except ValueError:
            return p
        return p if r.startswith("..") else r

    for cat, title in CATEGORIES.items():
        fs = [f for f in report.findings if f.category is cat]
        if not fs:
            continue
        sev = min(f.severity for f in fs)  # the most severe of the category
        t = Table(title=Text(f"{title} — {len(fs)} finding{'s' * (len(fs) != 1)}, "
                             f"exit {int(sev)}", style="bold"),
                  title_justify="left", show_lines=True, expand=False, box=box.SIMPLE_HEAD)
        t.add_column("sev", no_wrap=True)
        t.add_column("file / tensor", overflow="fold", max_width=38)
        t.add_column("status", no_wrap=True)
        t.add_column("message", overflow="fold")
        for f in fs:
            msg = Text(f.message)
            for ln in f.lines:
                msg.append("\n  " + ln, style="dim" if tty else None)
            where = Text(rel(f.file))
            if f.tensor:
                where.append("\n" + f.tensor, style="bold" if tty else None)
            status = Text(f.status)
            status.append("\n" + f.code, style="dim" if tty else None)
            t.add_row(Text(f"{int(f.severity)} {SEVERITY[f.severity]}",
                           style=_SEVERITY_STYLE.get(f.severity, "")), where, status, msg)
        con.print(t)
        con.print()
    s = report.summary()
    code = report.exit_code_graded if policy == "graded" else report.exit_code_simple
    parts = [f"{s['parsed']}/{s['files']} files parsed", f"{s['tensors']} tensors "
             f"({s['grit_tensors']} GRIT)", f"{s['findings']} findings"]
    if s["by_severity"]:
        parts.append(", ".join(f"{n} {k}" for k, n in sorted(s["by_severity"].items())))
    tail = (f"exit {code} ({_VERDICT.get(report.exit_code_graded)}; graded "
            f"{report.exit_code_graded}, simple {report.exit_code_simple})")
    con.print("; ".join(parts) + " — " + tail, soft_wrap=True)
    if report.findings:
        con.print("grit explain CODE explains a finding code (the code is under each "
                  "status).", soft_wrap=True, style="dim" if tty else None)
