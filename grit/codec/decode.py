"""§8: normative decode(), vectorised.

Every grade the grammar can express decodes through one path: elements are
unpacked into lin order (scattered to their logical positions under N:M
sparsity), each decoded exactly (§2.4), the scale chain is formed outermost
first with one binary32 rounding per product, and the §8.1 step 5 formula is
applied with float32 arithmetic.  numpy's float32 multiply and subtract are
IEEE binary32 operations rounded to nearest even, never fused, so each named
step of §8.1 is exactly one numpy operation on float32 operands.  NaN
propagates through IEEE arithmetic, which reproduces the early returns of
steps 3–5 (poison law); masked positions are written +0.0 last (the sparsity
law wins).  Every NaN leaves as 0x7FC00000 (§1.2).

Fast path: arrays whose frame is that of a registered grade (MXFP4,
MXFP4_RNE, NVF4, NVF4_RTZ, Q4KS, I8S24) with dt = binary32 decode in the
private C extension (through :mod:`grit.native`) when it is built, which
gives the same bits (tests/test_native_codec.py) and allocates nothing but
the output.  ``grit.native.NATIVE = False`` (or ``GRIT_NATIVE=0`` in the
environment at import) keeps everything on the numpy path; without the
extension the numpy path is used and a warning is issued once.
"""
from __future__ import annotations

import numpy as np

from .. import descriptor as D
from .. import native
from ..facts import canonical_sizes, fmt_width, meta_bits
from ..errors import GritUsageError
from ..formats import BINARY32, CANONICAL_NAN, format_by_name
from ..vformats import decode_codes, encode_values
from .layout import from_lin, require_canonical_placement
from .packing import read_group_plane, read_meta, read_scale1, unpack_elements

__all__ = ["decode_canonical"]

_NAN_BITS = np.uint32(CANONICAL_NAN)


def _per_group0(v1: np.ndarray, n_groups0: int, k1: int) -> np.ndarray:
    """Expand a per-level-1-group array to level-0 groups: g1 = g0 / k1, or
    the single per-tensor value when k1 == 0 (§3.7)."""
    if k1 == 0:
        return np.broadcast_to(v1[:1], (n_groups0,)) if n_groups0 else v1[:0]
    return np.repeat(v1, k1)


_MAX_F32_ELEMENTS = ((1 << 63) - 1) // 4


def _require_representable(shape) -> None:
    """numpy refuses an array whose non-zero extents multiply past 2^63
    bytes, even when another extent is 0 (§7.3 accepts such a shape: numel
    is 0).  Say so, rather than let numpy's ValueError out of decode."""
    n = 1
    for x in shape:
        n *= x or 1
    if n > _MAX_F32_ELEMENTS:
        raise GritUsageError(
            f"decode(): shape {list(shape)} holds {0 if 0 in shape else n} elements, but no "
            f"float32 ndarray of that shape exists: numpy needs the non-zero extents "
            f"({n} elements) to fit 2^63 bytes")


def decode_canonical(array) -> np.ndarray:
    """§8.1 decode() of a checked array whose planes are in the canonical
    placement (ROW_MAJOR data and scales, ROW_MAJOR or LINEAR_META aux, or
    UNSPECIFIED): a new C-contiguous float32 array of ``array.shape``.  Any
    other placement raises GritLayoutError; ``grit.decode`` is the public
    decode, which reads every non-opaque placement (it canonicalises first).

    ``array`` is read through (descriptor, grade, shape, planes)."""
    if not all(hasattr(array, a) for a in ("descriptor", "grade", "shape", "planes")):
        raise GritUsageError(f"decode() takes a GritArray, got {type(array).__name__}")
    _require_representable(array.shape)
    d = array.descriptor
    grade = array.grade
    shape = array.shape
    planes = array.planes
    sparse = bool(d.flags & D.F_SPARSE)
    has_zp = bool(d.flags & D.F_HAS_ZP)
    require_canonical_placement(d.placement_data, d.placement_scale, d.placement_meta,
                                sparse or has_zp, "decode")
    ps = canonical_sizes(d, shape)      # the array passed check: never a Detail
    numel, nnz, n_groups0, n_groups1 = ps.numel, ps.nnz, ps.n_groups0, ps.n_groups1
    k0, k1 = d.k0, d.k1

    kind = native.DECODE_KIND.get(native.frame_key(d))
    if kind is not None and _dt_word(grade) == BINARY32.word:
        if native.kernels() is not None:
            return from_lin(native.decode(kind, planes, numel), shape, d.group_axis)
        native.warn_missing(numel)

    # -- element codes, in lin order ---------------------------------------
    codes = unpack_elements(planes[0], nnz, fmt_width(d.elem),
                            pad8=d.container == D.CT_PAD8,
                            msb=bool(d.flags & D.F_MSB_FIRST))
    kept = None
    if sparse:
        codes, kept = _scatter_sparse(array, codes, numel)
    e = decode_codes(d.elem, codes)                          # exact, §2.4

    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        # -- the scale chain, outermost first (§8.1 step 2) ------------------
        s0 = decode_codes(d.scale0, read_group_plane(planes[1], n_groups0, fmt_width(d.scale0)))
        zl1 = bool(d.flags & D.F_ZP_L1SCALED)
        if d.n_levels == 2:
            per = 2 if zl1 else 1
            v1 = decode_codes(d.scale1, read_scale1(planes[2], n_groups1 * per,
                                                    fmt_width(d.scale1)))
            s1 = v1[0::per]
            S = np.multiply(_per_group0(s1, n_groups0, k1), s0)     # f32(S1 · s0)
        else:
            S = s0
        E = e.reshape(n_groups0, k0)
        # -- step 5 -----------------------------------------------------------
        if not has_zp:
            out = E * S[:, None]                                    # f32(S · e)
        else:
            zpv = decode_codes(d.zp_fmt, read_group_plane(planes[3], n_groups0,
                                                          fmt_width(d.zp_fmt)))
            if zl1:
                # §8.1 step 5 as written: sval(zp_fmt, zp) — ZP_MINUS1 adds 1
                # only in the zps=shared branch.
                Z = np.multiply(_per_group0(v1[1::2], n_groups0, k1), zpv)   # f32(Z1 · zp)
                out = (E * S[:, None]) - Z[:, None]                 # f32(f32(S·e) − Z)
            else:
                # z := fmt_decode(zp) + (ZP_MINUS1 ? 1 : 0): one binary32
                # addition even when the addend is 0, so a −0 zero point is +0
                zpv = zpv + np.float32(1 if d.flags & D.F_ZP_MINUS1 else 0)
                out = S[:, None] * (E - zpv[:, None])               # f32(S · f32(e − z))
        out = out.reshape(-1)
        if out.dtype != np.float32:  # pragma: no cover - guards the no-float64 rule
            raise AssertionError("decode left binary32")
        # -- step 1: the sparsity law wins over everything ------------------------
        if kept is not None:
            out[~kept] = np.float32(0.0)
        # -- step 6: the dt projection ---------------------------------------
        dt_word = _dt_word(grade)
        if dt_word != BINARY32.word:
            out = _project(out, dt_word, grade["dr"], grade["ds"], kept)
    nan = np.isnan(out)
    if nan.any():
        out.view(np.uint32)[nan] = _NAN_BITS
    return from_lin(out, shape, d.group_axis)


def _dt_word(grade) -> int:
    return format_by_name(grade["dt"])


def _project(out: np.ndarray, dt: int, dr: str, ds: str, kept) -> np.ndarray:
    """§8.1 step 6: every value that reached step 5 is projected into dt
    under (dr, ds) and returned as the binary32 value of its code.  Values
    that returned early — masked +0.0 (step 1) and NaN (steps 3–5) — are
    returned as they are."""
    sel = ~np.isnan(out)
    if kept is not None:
        sel &= kept
    if sel.all():
        return decode_codes(dt, encode_values(dt, out, dr, ds))
    out = out.copy()
    out[sel] = decode_codes(dt, encode_values(dt, out[sel], dr, ds))
    return out


def _scatter_sparse(array, stored: np.ndarray, numel: int):
    """Place the stored codes at the logical positions the metadata names.

    §3.8: "only surviving elements are stored, densely, in ascending logical
    order", whatever the metadata order; §10.4's decode as written: quad q
    keeps the set of positions its N indices name (an index ≥ M names none),
    and one cursor hands out the stored values in ascending logical order
    across the whole array.  The metadata order (ASC_LSB or UNORDERED) only
    changes what level 2 of grit_check verifies (§7.4), never the meaning.
    Unnamed positions are structurally masked."""
    d = array.descriptor
    n, m = d.sp_n, d.sp_m
    bits = meta_bits(d.sp_meta_fmt)
    nquads = numel // m
    idx = read_meta(array.planes[3], n, bits, nquads).astype(np.int64)
    full = np.zeros(numel, dtype=stored.dtype)
    kept = np.zeros(numel, dtype=bool)
    base = np.arange(nquads, dtype=np.int64) * m
    for j in range(n):
        col = idx[:, j]
        pos = base + col
        valid = col < m
        kept[pos[valid] if not valid.all() else pos] = True
    at = np.flatnonzero(kept)          # ascending logical order
    full[at] = stored[:at.size]        # at most N per quad: never past the plane
    return full, kept
