"""Baselines: the findings a project has accepted, so that CI fails only on
new ones (``grit scan --baseline FILE``, ``--write-baseline FILE``).

A baseline is a JSON file listing findings by their identity
(:func:`grit.scan.output.record.identity`: code, file relative to the
working directory, and the tensor — or role, or sorted tensor names — they
name; never the message).  Applied to a report, each finding whose identity
the baseline holds is *known*: it moves to ``report.known``, is not listed
and does not count for the exit status; the others stay as the report's
findings, the new ones.  Identities are counted: a baseline holding one
``S101`` of ``w`` absorbs one such finding, not two."""
from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import Any

from ..._files import atomic_write, loads_json, read_regular
from ...errors import GritUsageError
from .record import identity
from .report import ScanReport

__all__ = ["BASELINE_VERSION", "write_baseline", "read_baseline", "apply_baseline"]

BASELINE_VERSION = 1
#: the most bytes a baseline file may hold (it is read whole)
MAX_BASELINE = 64 << 20


def _key(ident: Any) -> str:
    return json.dumps(ident, sort_keys=True, ensure_ascii=True)


def baseline_doc(report: ScanReport) -> dict:
    """The baseline of ``report``'s findings (those that count), sorted."""
    ids = sorted((identity(f) for f in report.findings), key=_key)
    return {"version": BASELINE_VERSION, "tool": "grit scan", "findings": ids}


def write_baseline(report: ScanReport, path: str) -> None:
    """Write the baseline of ``report``'s findings to ``path`` (atomically)."""
    text = json.dumps(baseline_doc(report), indent=1, ensure_ascii=True) + "\n"
    atomic_write(path, lambda f: f.write(text.encode("ascii")))


def read_baseline(path: str) -> Counter[str]:
    """The identities a baseline file holds (counted); a file that is not a
    baseline is a :class:`GritUsageError` saying why."""
    try:
        doc = loads_json(read_regular(path, MAX_BASELINE), f"the baseline {path}")
    except OSError as e:
        raise GritUsageError(f"cannot read the baseline {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise GritUsageError(str(e)) from None
    if not (isinstance(doc, dict) and doc.get("version") == BASELINE_VERSION
            and isinstance(doc.get("findings"), list)):
        raise GritUsageError(f"{path} is not a grit scan baseline (version "
                             f"{BASELINE_VERSION}, a list of findings)")
    out: Counter[str] = Counter()
    for i, x in enumerate(doc["findings"]):
        if not (isinstance(x, dict) and isinstance(x.get("code"), str)
                and set(x) == {"code", "file", "subject"}):
            raise GritUsageError(f"{path}: finding {i} is not {{code, file, subject}}")
        out[_key(x)] += 1
    return out


def apply_baseline(report: ScanReport, path: str,
                   known: Counter[str] | None = None) -> ScanReport:
    """``report`` with the findings the baseline at ``path`` holds moved to
    ``known`` (``known``: its identities, when already read)."""
    left = Counter(read_baseline(path) if known is None else known)
    new, old = [], []
    for f in report.findings:
        k = _key(identity(f))
        if left[k] > 0:
            left[k] -= 1
            old.append(f)
        else:
            new.append(f)
    return dataclasses.replace(report, findings=new, known=report.known + old, baseline=path)
