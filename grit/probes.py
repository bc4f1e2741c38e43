"""§7.6: level-3 decode-sanity probes.  Advisory only: they return warning
strings and never fail a check, because a false positive that blocks a load
is worse than the bug it hunts."""
from __future__ import annotations

import numpy as np

from . import descriptor as D
from .formats import Format, fmt_classify, fmt_width
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
        warnings.append(
            f"probe: all {finite.size} sampled {fmt.name} scales equal {float(finite[0])!r}: "
            "a shared-exponent plane with no dynamic range suggests a mislabelled plane")
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
