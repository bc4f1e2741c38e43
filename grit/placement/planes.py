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

import functools
from dataclasses import dataclass

import numpy as np

from .. import descriptor as D
from .. import native
from ..codec.packing import pack_stream, unpack_stream
from ..errors import Detail, GritLayoutError, GritUsageError
from ..facts import canonical_sizes
from .expr import ColMajor, Tile, apply

__all__ = ["Units", "Geometry", "geometry", "to_units", "from_units", "native_permute"]


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
    """Unit layout of every plane of (d, shape) in canonical sizes: the §7.3
    derivation of grit.facts (before any PACK_K4_12B or INTERLEAVED size
    rule) with each plane's units placed on its grid.  (d, shape) must have
    passed check steps 1–4."""
    ps = canonical_sizes(d, shape)
    if isinstance(ps, Detail):
        raise GritUsageError(f"geometry() of an unchecked array: {ps.message}")
    (nd, bd), (n0, b0), (n1, b1), (na, ba) = ps.units
    numel = ps.numel
    C = shape[d.group_axis]
    R = numel // C if C else 0
    k0 = d.k0
    msb = bool(d.flags & D.F_MSB_FIRST)
    data = Units(nd, bd, R, C // d.sp_m * d.sp_n if d.flags & D.F_SPARSE else C, msb)
    s0 = Units(n0, b0, R, C // k0)
    if d.n_levels != 2:
        s1 = Units(0, b1, R, 0)
    elif d.k1 == 0:
        s1 = Units(n1, b1, 1, 1)
    elif (C // k0) % d.k1 == 0:
        s1 = Units(n1, b1, R, C // k0 // d.k1)
    else:
        s1 = Units(n1, b1, None, None, why_no_grid=(
            f"level-1 groups of k1 = {d.k1} level-0 groups straddle rows of "
            f"{C // k0} level-0 groups"))
    if d.flags & D.F_SPARSE:
        aux = Units(na, ba, R, C // d.sp_m)
    elif d.flags & D.F_HAS_ZP:
        aux = Units(na, ba, R, C // k0)
    else:
        aux = Units(0, ba, R, 0)
    return Geometry(numel, R, C, ps.n_groups0, ps.n_groups1, data, s0, s1, aux)


def to_units(buf, u: Units) -> np.ndarray:
    """The plane's units as an array of shape (1, count[, bytes]).  A plane
    shorter than its units is a GritLayoutError: the placement was asked to
    read bytes that are not there (a checked array never does)."""
    have = len(memoryview(buf).cast("B")) if u.count else 0
    if have < u.nbytes:
        raise GritLayoutError(f"a plane of {have} bytes cannot hold its {u.count} units of "
                              f"{u.bits} bits ({u.nbytes} bytes)")
    if u.bits % 8 == 0:
        ub = u.bits // 8
        raw = np.frombuffer(buf, dtype=np.uint8, count=u.count * ub) if u.count else \
            np.zeros(0, np.uint8)
        return raw.reshape(1, u.count, ub)
    if u.count == 0:
        return np.zeros((1, 0), dtype=np.uint8)
    if u.bits > 32:
        # wider than a code (ZP_L1SCALED [S1, Z1] pairs, sparse quads of many
        # indices) and not whole bytes: each unit is its row of stream bits
        bits = np.unpackbits(np.frombuffer(buf, dtype=np.uint8, count=u.nbytes),
                             bitorder="big" if u.msb else "little")
        return bits[:u.count * u.bits].reshape(1, u.count, u.bits)
    return unpack_stream(buf, u.count, u.bits, u.msb).reshape(1, u.count)


def from_units(x: np.ndarray, u: Units) -> bytes:
    """Inverse of :func:`to_units`."""
    if u.bits % 8 == 0:
        return np.ascontiguousarray(x, dtype=np.uint8).tobytes()
    if u.count == 0:
        return b""
    if u.bits > 32:
        return np.packbits(np.ascontiguousarray(x, dtype=np.uint8).reshape(-1),
                           bitorder="big" if u.msb else "little").tobytes()
    return pack_stream(np.ascontiguousarray(x).reshape(-1), u.bits, u.msb)


# ---------------------------------------------------------------------------
# native fast paths (grit._kernels): the same index maps as expr.apply on
# to_units/from_units, executed as byte moves; None when a case is not covered


def native_kernels():
    """grit._kernels when it is built, has the relayout entry points, and
    grit.native.NATIVE is set (GRIT_NATIVE=0 clears it); else None."""
    return native.relayout_kernels()


def native_threads(nbytes: int) -> int:
    return native.threads(nbytes)


@functools.lru_cache(maxsize=64)
def _tile_chunks(inner, tr: int, tc: int, bits: int):
    """Tile(inner, [tr, tc]) over ``bits``-bit units as a permutation of
    byte chunks inside each tile: (chunk bytes, int64 table of the logical
    chunk stored at each chunk slot), or None when the inner map splits
    every byte-aligned run of units."""
    idx = apply(inner, np.arange(tr * tc, dtype=np.int64).reshape(1, -1), tr, tc)
    idx = np.asarray(idx).reshape(-1)
    for q in range(tc, 0, -1):
        if tc % q or (q * bits) % 8:
            continue
        blk = idx.reshape(-1, q)
        if (blk[:, 0] % q == 0).all() and (blk == blk[:, :1] + np.arange(q)).all():
            return q * bits // 8, np.ascontiguousarray(blk[:, 0] // q, dtype=np.int64)
    return None


def native_permute(buf, u: Units, e, inverse: bool):
    """``from_units(apply(e, to_units(buf, u), u.R, u.C, inverse), u)`` by
    grit._kernels for ColMajor and Tile(P,[tr,tc]) whose P moves byte-aligned
    runs of units (TILE_16X16, SWIZZLE_128X4B, META_M16N8K32), on units of 4
    bits or whole bytes; None when not covered (the caller goes to numpy)."""
    k = native_kernels()
    if k is None or u.R is None or u.count <= 1 or u.R * u.C != u.count:
        return None
    bits = u.bits
    if not (bits == 4 or bits % 8 == 0):
        return None
    nbytes = u.nbytes
    if len(memoryview(buf).cast("B")) < nbytes:
        return None
    if isinstance(e, ColMajor):
        R, C = (u.C, u.R) if inverse else (u.R, u.C)
        return k.transpose(buf, R, C, bits, u.msb, native_threads(nbytes))
    if isinstance(e, Tile):
        tr, tc = e.dims
        if u.R % tr or u.C % tc:
            return None                  # numpy raises the geometry error
        ch = _tile_chunks(e.inner, tr, tc, bits)
        if ch is None:
            return None
        w, tab = ch
        return k.tile(buf, u.R, u.C * bits // 8, tr, tc * bits // 8, w, tab, inverse,
                      native_threads(nbytes))
    return None
