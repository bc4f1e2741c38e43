"""FNUZ eight-bit floats (AMD MI300 / CDNA3: ``F8_E4M3FNUZ``,
``F8_E5M2FNUZ``) anywhere in a header: inexpressible, §0.3a."""
from __future__ import annotations

from typing import Mapping

from .base import Convention, Header, Reader, Recognised

__all__ = ["CONVENTION"]

_FNUZ = {"F8_E4M3FNUZ": "e4m3fnuz (bias 8, NaN at the negative-zero code 0x80)",
         "F8_E5M2FNUZ": "e5m2fnuz (bias 16, NaN at the negative-zero code 0x80)"}


def recognise_header(h: Header, metadata: Mapping | None, q: dict,
                     read: Reader | None) -> list[Recognised]:
    out = []
    for n in sorted(h):
        dt = h[n][0]
        if dt in _FNUZ:
            out.append(Recognised(
                n, f"fp8-fnuz/{dt}", "inexpressible", (n,), section="§0.3a",
                reason=(f"dtype {dt}: {_FNUZ[dt]}; v1 fixes every exponent bias at "
                        "2^(e−1) − 1 (bias_ovr = 0) and has no nan_enc for a NaN at the "
                        "negative-zero code, so no grit_fmt_t word denotes it"),
                lines=(f"{n}: {dt} {list(h[n][1])}, {h[n][2]} bytes",)))
    return out


CONVENTION = Convention("fp8-fnuz", recognise_header=recognise_header)
