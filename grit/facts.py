"""Descriptor facts: what a descriptor and a shape imply, each derived once.

Every module that needs one of these reads it here; none re-derives it.

* the plane order and the three placement roles (§3.6) with the descriptor
  field each role reads;
* the width of a format word as stored in a plane (cw, §7.3), the bits of one
  sparsity-metadata index, whether an aux plane exists;
* the canonical placement words (the order the codec reads and writes);
* the §7.3 derivation: numel, nnz, group counts, the (count, bits) of each
  plane's units and the plane byte sizes, before any placement's size rule
  (those belong to the placement stages, grit.placement.stages).

Layer 1: imports only the descriptor, the format word and the placement word.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence

from . import descriptor as D
from .errors import Detail, Status
from .formats import fmt_width
from .placement.words import REGISTERED, UNSPECIFIED

__all__ = [
    "PLANE_NAMES", "PlaneRole", "ROLES", "ROLE_NAMES", "ROLE_FIELD", "MAXRANK", "fmt_width",
    "container_width", "META_BITS", "meta_bits", "has_aux", "ROW_MAJOR", "LINEAR_META",
    "CANONICAL", "canonical_words", "is_canonical", "PlaneSizes", "canonical_sizes",
    "numel_of",
]

#: §3.6: the four planes, in serialised payload order.
PLANE_NAMES = ("data", "scale0", "scale1", "aux")

MAXRANK = 8                 # GRIT_MAXRANK: extents carried in grit_view_t
_I64_MAX = (1 << 63) - 1


class PlaneRole(str, enum.Enum):
    """The three placement fields of §3.6: placement_scale covers scale0 and
    scale1, placement_meta covers the aux plane whichever role it plays."""

    DATA = "data"
    SCALE = "scale"
    META = "meta"

    @property
    def field(self) -> str:
        """The descriptor field that carries this role's placement word."""
        return "placement_" + self.value

    @property
    def planes(self) -> tuple[int, ...]:
        """Indices (into PLANE_NAMES) of the planes this role places."""
        return _ROLE_PLANES[self]

    def __str__(self) -> str:
        return self.value


_ROLE_PLANES = {PlaneRole.DATA: (0,), PlaneRole.SCALE: (1, 2), PlaneRole.META: (3,)}
ROLES: tuple[PlaneRole, ...] = tuple(PlaneRole)
#: the roles' names, in role order, for code and messages that key by string
ROLE_NAMES: tuple[str, ...] = tuple(r.value for r in PlaneRole)
#: role name -> descriptor field, for code that keys by the role's string
ROLE_FIELD: dict[str, str] = {r.value: r.field for r in PlaneRole}


def container_width(word: int, pad8: bool) -> int:
    """cw(f, ct) of §7.3: a format of width ≤ 8 takes a whole byte under
    CT_PAD8; otherwise its own width."""
    w = fmt_width(word)
    return 8 if pad8 and w <= 8 else w


#: §3.8: bits of one sparsity-metadata index per sp_meta_fmt
META_BITS: dict[int, int] = {D.SPMETA_U2: 2, D.SPMETA_U4: 4}


def meta_bits(sp_meta_fmt: int) -> int | None:
    """Bits per metadata index, or None when sp_meta_fmt names no index width."""
    return META_BITS.get(sp_meta_fmt)


def has_aux(d: D.Descriptor) -> bool:
    """§3.6: the aux plane exists iff SPARSE (metadata) or HAS_ZP (zero points)."""
    return bool(d.flags & (D.F_SPARSE | D.F_HAS_ZP))


def numel_of(shape: Sequence[int]) -> int:
    n = 1
    for x in shape:
        n *= x
    return n


# ---------------------------------------------------------------------------
# the canonical placement: element- and group-indexed planes in lin / g0 / g1
# order (ROW_MAJOR), sparse metadata in ascending quad order (LINEAR_META).
# UNSPECIFIED asserts no layout; such bytes are read in the canonical order.

ROW_MAJOR = REGISTERED["ROW_MAJOR"][0]
LINEAR_META = REGISTERED["LINEAR_META"][0]

#: role -> the placement words under which that role's planes are canonical
CANONICAL: dict[PlaneRole, frozenset[int]] = {
    PlaneRole.DATA: frozenset({UNSPECIFIED, ROW_MAJOR}),
    PlaneRole.SCALE: frozenset({UNSPECIFIED, ROW_MAJOR}),
    PlaneRole.META: frozenset({UNSPECIFIED, ROW_MAJOR, LINEAR_META}),
}


def canonical_words(d: D.Descriptor) -> tuple[int, int, int]:
    """The (data, scale, meta) words a canonical relayout of ``d`` writes."""
    if not has_aux(d):
        meta = UNSPECIFIED
    else:
        meta = LINEAR_META if d.flags & D.F_SPARSE else ROW_MAJOR
    return ROW_MAJOR, ROW_MAJOR, meta


def is_canonical(d: D.Descriptor) -> bool:
    """Whether every plane is in the order the codec reads (not interleaved;
    each role's word in CANONICAL; no meta word without an aux plane)."""
    if d.flags & D.F_INTERLEAVED:
        return False
    meta_ok = CANONICAL[PlaneRole.META] if has_aux(d) else frozenset({UNSPECIFIED})
    return (d.placement_data in CANONICAL[PlaneRole.DATA]
            and d.placement_scale in CANONICAL[PlaneRole.SCALE]
            and d.placement_meta in meta_ok)


# ---------------------------------------------------------------------------
# §7.3 step 4: the size equations

@dataclass(frozen=True, slots=True)
class PlaneSizes:
    """The §7.3 derivation for one (descriptor, shape), kept for diagnostics.

    ``units`` is (count, bits) of each plane's units in the canonical
    placement: elements (survivors when SPARSE), level-0 scales, level-1
    entries ([S₁, Z₁] as one unit under ZP_L1SCALED), and zero points or one
    quad's metadata indices; ``sizes`` the plane byte counts, after any
    placement size rule when the derivation came through grit.check."""

    numel: int
    nnz: int
    n_groups0: int
    n_groups1: int
    sizes: tuple[int, int, int, int]
    units: tuple[tuple[int, int], ...] = ()


def _ceil_div8(bits: int) -> int:
    return (bits + 7) // 8


def canonical_sizes(d: D.Descriptor, shape: Sequence[int]) -> PlaneSizes | Detail:
    """§7.3 step 4 in the canonical placement: the exact byte count of each
    plane, or the SizeMismatch Detail explaining why the shape cannot carry
    this descriptor.  Every divisor is tested before dividing (§14)."""

    def bad(msg: str, **kw) -> Detail:
        return Detail(status=Status.SIZE_MISMATCH, step=4, message=f"SizeMismatch: {msg}",
                      **kw)

    rank = len(shape)
    if rank > MAXRANK:
        return bad(f"rank {rank} exceeds GRIT_MAXRANK = {MAXRANK}.", field="rank",
                   expected=f"<= {MAXRANK}", actual=rank)
    for i, x in enumerate(shape):
        if not 0 <= x <= _I64_MAX:
            return bad(f"shape[{i}] = {x} is not an extent in [0, 2^63).", field="shape",
                       actual=x)
    if not 0 <= d.group_axis < rank:
        return bad(f"group_axis {d.group_axis} is outside [0, rank={rank}).",
                   field="group_axis", expected=f"0..{rank - 1}" if rank else "rank >= 1",
                   actual=d.group_axis)
    numel = numel_of(shape)
    if numel > _I64_MAX:
        return bad(f"numel = {numel} overflows int64.", field="shape", actual=numel)
    k0 = d.k0
    ga = shape[d.group_axis]
    if k0 == 0:
        return bad("k0 = 0: a group must hold at least one element.", field="k0", actual=0)
    if ga % k0:
        return bad(f"shape[{d.group_axis}] = {ga} is not a multiple of k0 = {k0}.",
                   field="shape", expected=f"multiple of {k0}", actual=ga,
                   lines=("Likeliest cause: the group axis or the group size is wrong.",))
    sparse = bool(d.flags & D.F_SPARSE)
    if sparse:
        m, n = d.sp_m, d.sp_n
        if m == 0:
            return bad("SPARSE with sp_m = 0.", field="sp_m", actual=0)
        if ga % m:
            return bad(f"shape[{d.group_axis}] = {ga} is not a multiple of sp_m = {m}.",
                       field="shape", expected=f"multiple of {m}", actual=ga)
        nnz = numel // m * n
    else:
        nnz = numel
    n_groups0 = numel // k0
    if d.n_levels == 2:
        if d.k1 == 0:
            n_groups1 = 1
        elif n_groups0 % d.k1:
            return bad(f"n_groups0 = {n_groups0} is not a multiple of k1 = {d.k1}.",
                       field="k1", expected=f"divides {n_groups0}", actual=d.k1,
                       lines=(f"numel={numel}, k0={k0} -> n_groups0={n_groups0}.",))
        else:
            n_groups1 = n_groups0 // d.k1
    else:
        n_groups1 = 0
    pad8 = d.container == D.CT_PAD8
    data = (nnz, container_width(d.elem, pad8))
    scale0 = (n_groups0, container_width(d.scale0, True))
    if d.n_levels == 2:
        per = 2 if d.flags & D.F_ZP_L1SCALED else 1
        scale1 = (n_groups1, per * fmt_width(d.scale1))
    else:
        scale1 = (0, 8)
    if sparse:
        mb = meta_bits(d.sp_meta_fmt)
        if mb is None:
            return bad(f"SPARSE with sp_meta_fmt = {d.sp_meta_fmt} (not U2 or U4).",
                       field="sp_meta_fmt", actual=d.sp_meta_fmt)
        aux = (numel // d.sp_m, d.sp_n * mb)
    elif d.flags & D.F_HAS_ZP:
        aux = (n_groups0, container_width(d.zp_fmt, True))
    else:
        aux = (0, 8)
    units = (data, scale0, scale1, aux)
    sizes = tuple(_ceil_div8(c * b) for c, b in units)
    return PlaneSizes(numel, nnz, n_groups0, n_groups1, sizes, units)  # type: ignore[arg-type]
