"""The units of each plane and their grids (docs/placements.md "Unit grids").

A placement permutes *units*, never raw bytes of a sub-byte stream:

=========  ======================================  ==========================
role       unit                                    grid (R rows × cols)
=========  ======================================  ==========================
data       one element (a survivor when SPARSE),   (R, C) dense; (R, C·N/M)
           cw(elem, container) bits                sparse
scale0     one level-0 scale, PAD8 or its width    (R, C/k0)
scale1     one level-1 entry ([S₁, Z₁] as one      (R, C/(k0·k1)) when level-1
           unit under ZP_L1SCALED)                 groups stay inside rows;
                                                   (1, 1) for k1 = 0
aux        zero point (as scale0) or one quad's    (R, C/k0) zero points;
           N metadata indices (N·metabits bits)    (R, C/M) quads
=========  ======================================  ==========================

C is the extent of the group axis and R = numel / C: the grouped view of
docs/spec-decisions.md ("lin(i)") as a matrix whose rows are everything else.
Units whose width is a multiple of 8 are (count, bytes) uint8 arrays; narrower
or odd widths are code arrays unpacked from the plane's bitstream (LSB-first;
the element plane follows F_MSB_FIRST), permuted, and packed again.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import descriptor as D
from ..codec.packing import pack_stream, unpack_stream

__all__ = ["Units", "Geometry", "geometry", "to_units", "from_units"]


def _width(word: int) -> int:
    return (word & 31) + 1


@dataclass(frozen=True, slots=True)
class Units:
    """One plane's unit layout: ``count`` units of ``bits`` each on an
    (R, C) grid (R, C None when the units have no grid)."""

    count: int
    bits: int
    R: int | None
    C: int | None
    msb: bool = False
    why_no_grid: str = ""

    @property
    def nbytes(self) -> int:
        return (self.count * self.bits + 7) // 8


@dataclass(frozen=True, slots=True)
class Geometry:
    numel: int
    rows: int            # R
    cols: int            # C, the group-axis extent
    n_groups0: int
    n_groups1: int
    data: Units
    scale0: Units
    scale1: Units
    aux: Units


def geometry(d: D.Descriptor, shape: tuple[int, ...]) -> Geometry:
    """Unit layout of every plane of (d, shape) in canonical sizes (§7.3,
    before any PACK_K4_12B or INTERLEAVED size rule)."""
    numel = 1
    for x in shape:
        numel *= x
    C = shape[d.group_axis]
    R = numel // C if C else 0
    k0 = d.k0
    sparse = bool(d.flags & D.F_SPARSE)
    pad8 = d.container == D.CT_PAD8
    ew = _width(d.elem)
    ecw = 8 if pad8 and ew <= 8 else ew
    msb = bool(d.flags & D.F_MSB_FIRST)
    if sparse:
        m, n = d.sp_m, d.sp_n
        data = Units(numel // m * n, ecw, R, C // m * n, msb)
    else:
        data = Units(numel, ecw, R, C, msb)
    g0 = numel // k0
    s0w = _width(d.scale0)
    s0 = Units(g0, 8 if s0w <= 8 else s0w, R, C // k0)
    if d.n_levels == 2:
        per = 2 if d.flags & D.F_ZP_L1SCALED else 1
        if d.k1 == 0:
            g1 = 1
            s1 = Units(1, per * _width(d.scale1), 1, 1)
        else:
            g1 = g0 // d.k1
            cs = C // k0
            if cs % d.k1 == 0:
                s1 = Units(g1, per * _width(d.scale1), R, cs // d.k1)
            else:
                s1 = Units(g1, per * _width(d.scale1), None, None, why_no_grid=(
                    f"level-1 groups of k1 = {d.k1} level-0 groups straddle rows of "
                    f"{cs} level-0 groups"))
    else:
        g1 = 0
        s1 = Units(0, 8, R, 0)
    if sparse:
        mb = {D.SPMETA_U2: 2, D.SPMETA_U4: 4}.get(d.sp_meta_fmt, 2)
        aux = Units(numel // d.sp_m, d.sp_n * mb, R, C // d.sp_m)
    elif d.flags & D.F_HAS_ZP:
        zw = _width(d.zp_fmt)
        aux = Units(g0, 8 if zw <= 8 else zw, R, C // k0)
    else:
        aux = Units(0, 8, R, 0)
    return Geometry(numel, R, C, g0, g1, data, s0, s1, aux)


def to_units(buf, u: Units) -> np.ndarray:
    """The plane's units as an array of shape (1, count[, bytes])."""
    if u.bits % 8 == 0:
        ub = u.bits // 8
        raw = np.frombuffer(buf, dtype=np.uint8, count=u.count * ub) if u.count else \
            np.zeros(0, np.uint8)
        return raw.reshape(1, u.count, ub)
    if u.count == 0:
        return np.zeros((1, 0), dtype=np.uint8)
    return unpack_stream(buf, u.count, u.bits, u.msb).reshape(1, u.count)


def from_units(x: np.ndarray, u: Units) -> bytes:
    """Inverse of :func:`to_units`."""
    if u.bits % 8 == 0:
        return np.ascontiguousarray(x, dtype=np.uint8).tobytes()
    if u.count == 0:
        return b""
    return pack_stream(np.ascontiguousarray(x).reshape(-1), u.bits, u.msb)
