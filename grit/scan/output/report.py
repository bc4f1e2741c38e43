"""The result of a scan, :class:`ScanReport`: the files, the findings, the
coverage of each file, and the summary and exit codes every form of the
report carries."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..collect import ScannedFile
from ..findings import SEVERITY, Finding
from .accounting import Coverage
from .policy import exit_code, policy_name

__all__ = ["ScanReport", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1


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
        return {"version": SCHEMA_VERSION, "exit_policy": policy_name(policy, fail_on),
                "exit_code": exit_code(self, policy, fail_on),
                "exit_code_graded": self.exit_code_graded,
                "exit_code_simple": self.exit_code_simple}

    def to_dict(self, policy: str = "graded", fail_on: str | None = None) -> dict:
        return {**self._head(policy, fail_on),
                "files": [f.to_dict() for f in self.files],
                "findings": [f.to_dict() for f in self.findings],
                "summary": self.summary(), "coverage": self.coverage_dict()}
