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
