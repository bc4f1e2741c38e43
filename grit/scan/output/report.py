"""The result of a scan, :class:`ScanReport` (``grit.scan.Report``): the
files, the findings, the coverage of each file, and the summary and exit
codes every form of the report carries."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..collect import ScannedFile
from ..findings import SEVERITY, Finding
from .accounting import Coverage
from .policy import exit_code, policy_name
from .record import Record

__all__ = ["ScanReport", "SCHEMA_VERSION"]

#: the version of the JSON / JSON Lines report (grit/scan/output/schema.json):
#: 2 gave each finding its top-level ``code``, ``fingerprint`` and
#: ``consequences``, and made ``tensor`` a tensor's name or null
SCHEMA_VERSION = 2


@dataclass
class ScanReport:
    """What :func:`grit.scan` returns.  ``files``: each input (a model file,
    or a path that failed), sorted by path; ``findings``: what was found,
    in report order (category, severity, file, tensor) — the ones that
    count, when a baseline or the settings set some aside; ``records()``:
    the same findings as typed :class:`~grit.scan.output.record.Record`
    values; ``coverage``: per file, which tensor bytes could be checked.

    ``known``: the findings a baseline (:mod:`grit.scan.output.baseline`)
    already holds, reported apart and not counted by the exit codes;
    ``baseline``: the baseline's file; ``suppressed``: how many findings
    the settings' select / ignore rules dropped."""

    files: list[ScannedFile]
    findings: list[Finding]
    deep: bool = False
    #: path -> the coverage of that file (:func:`account`)
    coverage: dict[str, Coverage] = field(default_factory=dict)
    known: list[Finding] = field(default_factory=list)
    baseline: str | None = None
    suppressed: int = 0

    def records(self) -> list[Record]:
        """The findings, typed (file paths in their identities relative to
        the working directory)."""
        cwd = os.getcwd()
        return [Record.of(f, cwd) for f in self.findings]

    def exit_code(self, policy: str = "graded", fail_on: str | None = None) -> int:
        """The §13 exit code under ``policy`` (graded / simple) or ``fail_on``."""
        return exit_code(self, policy, fail_on)

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
                "deep": self.deep, "known": len(self.known), "suppressed": self.suppressed}

    def _head(self, policy: str, fail_on: str | None) -> dict:
        return {"version": SCHEMA_VERSION, "exit_policy": policy_name(policy, fail_on),
                "exit_code": exit_code(self, policy, fail_on),
                "exit_code_graded": self.exit_code_graded,
                "exit_code_simple": self.exit_code_simple,
                "baseline": self.baseline_dict()}

    def baseline_dict(self) -> dict | None:
        """The ``baseline`` object of the reports: the baseline's file, how
        many findings it held (``known``) and how many are new; None without
        a baseline."""
        if self.baseline is None:
            return None
        return {"file": self.baseline, "known": len(self.known), "new": len(self.findings)}

    def to_dict(self, policy: str = "graded", fail_on: str | None = None) -> dict:
        return {**self._head(policy, fail_on),
                "files": [f.to_dict() for f in self.files],
                "findings": [r.to_dict() for r in self.records()],
                "summary": self.summary(), "coverage": self.coverage_dict()}
