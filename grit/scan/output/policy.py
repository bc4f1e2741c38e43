"""The §13 exit codes of a scan: the graded and simple policies and
``--fail-on`` (:func:`exit_code`)."""
from __future__ import annotations

from typing import Protocol, Sequence

from ..findings import Finding, Severity

__all__ = ["FAIL_ON", "VERDICT", "exit_code", "policy_name"]

#: ``--fail-on`` thresholds: a finding of this severity or a more severe one fails
FAIL_ON: dict[str, Severity] = {"structural": Severity.STRUCTURAL,
                                "disagreement": Severity.DISAGREEMENT,
                                "warning": Severity.WARNING}
#: what each graded exit code says of a scan
VERDICT = {0: "clean", 1: "structural violations", 2: "disagreements", 3: "warnings only",
           4: "no input could be parsed"}


class _Scanned(Protocol):
    """What the exit policy reads of a report."""

    @property
    def parsed(self) -> int: ...

    @property
    def findings(self) -> Sequence[Finding]: ...


def policy_name(policy: str, fail_on: str | None) -> str:
    return policy if fail_on is None else f"fail-on {fail_on}"


def exit_code(report: _Scanned, policy: str = "graded", fail_on: str | None = None) -> int:
    """§13: graded 0 clean / 1 structural / 2 disagreement / 3 warnings only /
    4 nothing parsed; simple 0 clean / 1 any finding / 2 nothing parsed.

    ``fail_on`` (structural / disagreement / warning) replaces the policy:
    0 when no finding is at or above that severity, otherwise the graded code
    (1, 2 or 3: the most severe finding); 4 when nothing could be parsed.
    A note (severity 5) never counts, under any policy."""
    nothing = report.parsed == 0
    counted = [f.severity for f in report.findings if f.severity.sets_exit]
    if fail_on is not None:
        if nothing:
            return int(Severity.UNPARSED)
        worst = min(counted, default=None)
        return int(worst) if worst is not None and worst <= FAIL_ON[fail_on] else 0
    if policy == "simple":
        return 2 if nothing else (1 if counted else 0)
    if nothing:
        return int(Severity.UNPARSED)
    # the most severe finding wins: 1 (structural) over 2 (disagreement) over 3
    return int(min(counted, default=0))
