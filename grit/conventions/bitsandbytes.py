"""bitsandbytes 4-bit (NF4 / FP4): each code indexes a value table that
travels with the tensor — a codebook, inexpressible, §0.3b."""
from __future__ import annotations

import re
from typing import Mapping

from .base import Convention, Header, Reader, Recognised

__all__ = ["CONVENTION"]


def recognise_header(h: Header, metadata: Mapping | None, q: dict,
                     read: Reader | None) -> list[Recognised]:
    out = []
    for n in sorted(h):
        m = re.match(r"^(.*)\.quant_state\.bitsandbytes__(nf4|fp4)$", n)
        if not m:
            continue
        base, kind = m[1], m[2]
        parts = [t for t in h if t == base or t.startswith(base + ".")]
        qm = base + ".quant_map"
        lines = [f"{t}: {h[t][0]} {list(h[t][1])}" for t in sorted(parts)]
        out.append(Recognised(
            base, f"bitsandbytes/{kind}", "inexpressible", tuple(sorted(parts)),
            section="§0.3b",
            reason=(f"bitsandbytes {kind.upper()}: each 4-bit code indexes the "
                    f"{h[qm][1][0] if qm in h and h[qm][1] else 16}-entry value table "
                    f"{qm!r} (a codebook), scaled by absmax; v1 has no codebook element class"),
            lines=tuple(lines)))
    return out


CONVENTION = Convention("bitsandbytes", methods=("bitsandbytes",),
                        recognise_header=recognise_header)
