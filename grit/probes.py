"""§7.6: level-3 decode-sanity probes.  Advisory only: they return warning
strings and never fail a check, because a false positive that blocks a load
is worse than the bug it hunts."""
from __future__ import annotations

import numpy as np

from . import descriptor as D
from .formats import Format, fmt_classify, fmt_width
from .codec.packing import unpack_stream
from .vformats import decode_codes

__all__ = ["probe", "SAMPLE_GROUPS"]

SAMPLE_GROUPS = 64


def _values(buf, word: int, count: int) -> np.ndarray | None:
    """Decode the first ``count`` values of a scale-like plane (PAD8 for
    ≤ 8 bits, little-endian 16/32-bit words); None where the width is odd."""
    w = fmt_width(word)
    raw = np.frombuffer(buf, dtype=np.uint8)
    if w <= 8:
        codes = raw[:count]
    elif w == 16:
        codes = raw[: 2 * count].view("<u2")
    elif w == 32:
        codes = raw[: 4 * count].view("<u4")
    else:
        return None
    return decode_codes(word, codes)


def _element_binades(d: D.Descriptor, data, groups: np.ndarray) -> int | None:
    """How many binades apart the largest |element| of the sampled level-0
    ``groups`` are (max − min of floor(log2)), over the groups that are not
    all zero; None where the elements cannot be read here (sparse, a code
    width that does not pack a group into whole bytes, fewer than 16 live
    groups).  What a shared-exponent scale plane should be read against:
    one scale for every group is what an encoder gives when the groups'
    maxima share a binade, and a mislabelled plane when they do not."""
    if fmt_classify(d.elem) is not None or d.flags & D.F_SPARSE:
        return None
    w = fmt_width(d.elem)
    if (d.k0 * w) % 8:
        return None
    gbytes = d.k0 * w // 8
    raw = np.frombuffer(data, dtype=np.uint8)
    if raw.size < gbytes * (int(groups.max()) + 1 if groups.size else 0):
        return None
    peaks = []
    for g in groups.tolist():
        codes = unpack_stream(raw[g * gbytes:(g + 1) * gbytes], d.k0, w)
        v = np.abs(decode_codes(d.elem, codes))
        v = v[np.isfinite(v)]
        if v.size and v.max() > 0:
            peaks.append(float(v.max()))
    if len(peaks) < 16:
        return None
    b = np.floor(np.log2(np.asarray(peaks)))
    return int(b.max() - b.min())


#: the window around a signed exponent of 0, and around the bias, that the
#: unbiased-exponent probe compares: a weight's block scales lie within 2^±32
UNBIASED_WINDOW = 32


def _unbiased_exponents(codes: np.ndarray) -> str | None:
    """The warning for an 8-bit exponent-only (E8M0) scale plane whose bytes
    read as two's-complement exponents near 0 (a writer that stored log2 of
    the scale, not log2 + 127), or None.  Read as the format says, those
    bytes are scales of 2^-127 … 2^-95 or 2^97 … 2^128 (0xFF: NaN); read as
    signed exponents they are ordinary scales.  A plane of scales written
    as the format says sits around the bias instead, where the signed
    reading is far from 0: the two readings do not overlap."""
    if codes.size < 16:
        return None
    signed = codes.astype(np.int16)
    signed[signed >= 128] -= 256
    near0 = np.abs(signed) <= UNBIASED_WINDOW
    near_bias = np.abs(codes.astype(np.int16) - 127) <= UNBIASED_WINDOW
    if near0.mean() < 0.9 or near_bias.mean() > 0.1:
        return None
    med = int(np.median(signed[near0]))
    lo, hi = int(codes.min()), int(codes.max())
    return (f"probe: {int(near0.sum())} of {codes.size} sampled E8M0 scale codes read as "
            f"signed exponents near 0 (median {med:+d}, i.e. 2^{med}); as E8M0 codes (bias "
            f"127) they are 2^(c − 127) = 2^{lo - 127} … "
            f"{'NaN (0xFF)' if hi == 255 else f'2^{hi - 127}'}: the scale bytes look like "
            "unbiased exponents (the +127 bias not added)")


#: the cuBLAS block-scale tile: 128 rows × 4 scale columns, stored as 32 × 16
#: bytes (row r of the tile at byte (r % 32)·16 + (r // 32)·4)
SWIZZLE_ROWS, SWIZZLE_COLS = 128, 4


def _row_share(v: np.ndarray) -> float:
    """The share of the variance of ``v`` (rows × columns) that lies between
    its rows' means (η²; 0 where there is no variance)."""
    total = float(v.var())
    return float(v.mean(axis=1).var()) / total if total > 0 else 0.0


def _swizzled_scales(d: D.Descriptor, shape, scale0) -> str | None:
    """The warning for a one-byte scale plane declared in row-major order whose
    first 128 rows read as cuBLAS's 128×4-swizzled tiles show the rows'
    magnitudes (each row of a weight has its own scale level) where the
    declared order does not, or None.  Judged on the log2 scales of those
    rows: the share of their variance between rows, in either reading."""
    if len(shape) != 2 or d.group_axis != 1 or fmt_width(d.scale0) != 8:
        return None
    rows, cols = int(shape[0]), int(shape[1]) // d.k0
    if rows < SWIZZLE_ROWS or cols < SWIZZLE_COLS or cols % SWIZZLE_COLS:
        return None
    raw = np.frombuffer(scale0, dtype=np.uint8)
    if raw.size < SWIZZLE_ROWS * cols:
        return None
    tile = raw[:SWIZZLE_ROWS * cols]
    vals = decode_codes(d.scale0, tile)
    if not np.isfinite(vals).all() or (vals <= 0).any():
        return None
    logs = np.log2(np.abs(vals))
    linear = logs.reshape(SWIZZLE_ROWS, cols)
    r = np.arange(SWIZZLE_ROWS)
    within = (r % 32) * 16 + (r // 32) * 4                   # byte of (r, 0) in a tile
    idx = (np.arange(cols // SWIZZLE_COLS)[None, :, None] * (SWIZZLE_ROWS * SWIZZLE_COLS)
           + within[:, None, None] + np.arange(SWIZZLE_COLS)[None, None, :])
    unswizzled = logs[idx.reshape(SWIZZLE_ROWS, cols)]
    lin, swz = _row_share(linear), _row_share(unswizzled)
    if swz < 0.5 or swz < 2 * lin:
        return None
    return (f"probe: the first {SWIZZLE_ROWS} rows' scales read as 128×4-swizzled tiles "
            f"follow the rows (η² = {swz:.2f} of their log2 variance between rows) where "
            f"the declared row-major order does not (η² = {lin:.2f}): the scale plane looks "
            "swizzled (cuBLAS's 32×16-byte tiles), not linear")


def probe(d: D.Descriptor, shape, planes) -> list[str]:
    warnings: list[str] = []
    if fmt_classify(d.scale0) is not None or d.k0 == 0:
        return warnings
    numel = int(np.prod(shape, dtype=object)) if shape else 1
    n_groups0 = numel // d.k0
    if n_groups0 == 0:
        return warnings
    n = min(SAMPLE_GROUPS, n_groups0)
    pick = np.unique(np.linspace(0, n_groups0 - 1, n).astype(np.int64))
    s0 = _values(planes[1], d.scale0, n_groups0)
    if s0 is None:
        return warnings
    sampled = s0[pick]
    nan = int(np.isnan(sampled).sum())
    if nan:
        warnings.append(f"probe: {nan} of {pick.size} sampled groups have a NaN scale "
                        "(poisoned: they decode to NaN, §8.2)")
    fmt = Format(d.scale0)
    finite = sampled[np.isfinite(sampled)]
    if fmt.kind == "exp" and finite.size >= 16 and np.unique(finite).size == 1:
        spread = _element_binades(d, planes[0], pick[np.isfinite(sampled)])
        if spread is not None and spread > 1:
            warnings.append(
                f"probe: all {finite.size} sampled {fmt.name} scales equal "
                f"{float(finite[0])!r}, but the groups' largest elements span {spread + 1} "
                "binades: a shared-exponent encoder would have given them different scales "
                "(a mislabelled plane?)")
    if fmt.kind == "exp" and fmt.width == 8:
        w = _unbiased_exponents(np.frombuffer(planes[1], dtype=np.uint8)[:n_groups0][pick])
        if w is not None:
            warnings.append(w)
    w = _swizzled_scales(d, shape, planes[1])
    if w is not None:
        warnings.append(w)
    elem = Format(d.elem) if fmt_classify(d.elem) is None else None
    if (elem is not None and elem.kind == "int" and elem.width == 8 and not elem.unsigned
            and not d.flags & D.F_HAS_ZP):
        per = d.k0 * (d.sp_n if d.flags & D.F_SPARSE else 1) // (d.sp_m or 1) \
            if d.flags & D.F_SPARSE else d.k0
        data = np.frombuffer(planes[0], dtype=np.int8)
        if data.size >= per * (int(pick[-1]) + 1):
            peaks = np.abs(data[(pick[:, None] * per + np.arange(per)).reshape(-1)]
                           .reshape(pick.size, per).astype(np.int16)).max(axis=1)
            live = peaks[peaks > 0]
            if live.size >= 8 and (live >= 64).mean() < 0.5:
                warnings.append(
                    f"probe: int8 elements never approach ±127 (median group peak "
                    f"{int(np.median(live))}): the scale rule may not be the declared one")
    return warnings
