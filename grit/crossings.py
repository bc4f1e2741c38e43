"""§12.4's denominator: the boundary crossings of this process.

A crossing is a passed check at level ≥ 1 (``grit.check``, and the level-1
check every ``GritArray`` construction runs), an ``assume_placement`` (an
assumed crossing), a ``verify_placement``, or one a caller reports
(``grit.audit.crossing``).  The counters live here, at the bottom of the
package, so that the array and the public check can count without importing
the audit module that reads them; :mod:`grit.audit` exposes ``counts()`` and
``rate()``.  Checks the package runs inside one audited call are inside
:func:`quiet` and are not counted again.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator

__all__ = ["LOCK", "count", "record", "counts", "quiet", "reset"]

#: one lock over the counters (grit.audit holds it over its ledger and ceiling too)
LOCK = threading.RLock()
_assumed = 0
_total = 0
_local = threading.local()


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Checks run inside this block are part of one audited call, not
    crossings of their own."""
    _local.quiet = getattr(_local, "quiet", 0) + 1
    try:
        yield
    finally:
        _local.quiet -= 1


def count(n: int = 1) -> None:
    """Count ``n`` ordinary crossings, unless inside :func:`quiet`."""
    if getattr(_local, "quiet", 0):
        return
    global _total
    with LOCK:
        _total += n


def record(assumed: bool) -> None:
    """Count the one crossing of an audited call (never silenced)."""
    global _assumed, _total
    with LOCK:
        _total += 1
        _assumed += bool(assumed)


def counts() -> tuple[int, int]:
    """(assumed crossings, total crossings)."""
    with LOCK:
        return _assumed, _total


def reset() -> None:
    global _assumed, _total
    with LOCK:
        _assumed = _total = 0
