"""lin(i) order (§3.7 with docs/spec-decisions.md "lin(i) for any group axis").

lin(i) is the position of element i in C order of the array with the group
axis moved last.  Groups are then runs of k0 consecutive lin positions, N:M
quads runs of M, and every element-indexed plane is in lin order under the
canonical placements.  For the last axis this is plain C order.
"""
from __future__ import annotations

import numpy as np

from ..errors import GritLayoutError
from ..facts import CANONICAL, PlaneRole
from ..placement.words import UNSPECIFIED, placement_name

__all__ = ["to_lin", "from_lin", "lin_shape", "require_canonical_placement"]


def lin_shape(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    """The shape of the grouped view: ``shape`` with ``axis`` moved last."""
    return tuple(s for i, s in enumerate(shape) if i != axis) + (shape[axis],)


def to_lin(x: np.ndarray, axis: int) -> np.ndarray:
    """The elements of ``x`` as a flat C-contiguous array in lin order."""
    if axis != x.ndim - 1:
        x = np.moveaxis(x, axis, -1)
    return np.ascontiguousarray(x).reshape(-1)


def from_lin(flat: np.ndarray, shape: tuple[int, ...], axis: int) -> np.ndarray:
    """Inverse of :func:`to_lin`: a C-contiguous array of ``shape``."""
    v = flat.reshape(lin_shape(shape, axis))
    if axis != len(shape) - 1:
        v = np.ascontiguousarray(np.moveaxis(v, -1, axis))
    return v


def require_canonical_placement(placement_data: int, placement_scale: int,
                                placement_meta: int, has_aux: bool, what: str) -> None:
    """Raise GritLayoutError unless every plane is in the canonical order the
    codec reads and writes (L1: any other placement is a relayout away)."""
    # the canonical sets of grit.facts; no meta word at all without an aux plane
    for name, word, ok in (("placement_data", placement_data, CANONICAL[PlaneRole.DATA]),
                           ("placement_scale", placement_scale, CANONICAL[PlaneRole.SCALE]),
                           ("placement_meta", placement_meta,
                            CANONICAL[PlaneRole.META] if has_aux
                            else frozenset({UNSPECIFIED}))):
        if word not in ok:
            want = ("ROW_MAJOR or LINEAR_META" if name == "placement_meta" else "ROW_MAJOR")
            raise GritLayoutError(
                f"{what}: {name} is {placement_name(word)} (0x{word:016x}); the codec "
                f"reads and writes the canonical order ({want}) only.\n"
                f"  Fix:  relayout the planes to {want} first (decode is "
                "placement-invariant, L1).")
