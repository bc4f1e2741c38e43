"""The public boundary check: ``grit.check`` and ``grit.diagnose``.

:mod:`grit.check` is pure — levels 0–2 read only the descriptor, the shape
and the planes handed to them.  This module composes what sits above it and
passes it in explicitly:

* the placement stages' canonical reader, for the level-2 content check of an
  interleaved data plane (its metadata travels inside the blocks);
* the level-3 probes of §7.6, which read canonical planes, so the planes are
  relayouted first (L1: placement never changes decode) or the probes are
  skipped with a warning saying why;
* the §12.4 crossing counter: every passed check at level ≥ 1 is one boundary
  crossing.
"""
from __future__ import annotations

from . import crossings
from .check import CheckReport
from .check import check as _check
from .check import diagnose as _diagnose
from .errors import Detail, GritLayoutError
from .placement.relayout import canonical_form, canonical_planes
from .probes import probe as _probe

__all__ = ["check", "diagnose", "probe_any_placement"]


def probe_any_placement(d, shape, planes) -> list[str]:
    """§7.6 probes of (d, shape, planes) in any placement: canonical planes
    are probed as they are, others after a relayout to the canonical order."""
    try:
        cd, cplanes = canonical_form(d, shape, planes)
    except GritLayoutError as e:
        return [f"probe: skipped — the planes cannot be read in canonical order "
                f"({str(e).splitlines()[0]})"]
    return list(_probe(cd, shape, list(cplanes)))


def diagnose(desc, shape, planes, level: int = 1, expected_digest=None) -> Detail:
    """Run grit_check and return its Detail (status OK on success).  Raises
    only GritUsageError for arguments of the wrong type."""
    return _diagnose(desc, shape, planes, level, expected_digest, canonical=canonical_planes)


def check(desc, shape, planes, level: int = 1, expected_digest=None) -> CheckReport:
    """grit_check (§7).  Returns a :class:`~grit.check.CheckReport`; raises
    the GritError subclass of the first failing status (§7.3 order).  A
    passed check at level ≥ 1 counts as one boundary crossing (§12.4)."""
    report = _check(desc, shape, planes, level, expected_digest,
                    canonical=canonical_planes, probe=probe_any_placement)
    if level >= 1:
        crossings.count()
    return report
