"""gpt-oss MXFP4 (OpenAI's gpt-oss checkpoints; ``quant_method: mxfp4`` in
``config.json``): each expert weight ``<module>.<w>`` is two tensors,
``<w>_blocks`` uint8 [..., G, 16] and ``<w>_scales`` uint8 [..., G].

A block holds 32 E2M1 codes, element 2j in the low nibble of byte j (the
reference dequantisation reads ``blk & 0x0F`` into the even positions and
``blk >> 4`` into the odd ones), and its scale byte is an E8M0 exponent
``2^(s − 127)`` (``ldexp(value, s − 127)``).  The logical weight is
``[..., G·32]`` with the groups along its last axis: GRADE_MXFP4, both
planes zero-copy.  One difference is named: the reference maps scale byte
0xFF to 2^128 (an infinity, or 0 for a zero code), where E8M0's 0xFF is NaN
(§8.2, the poison law).
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from .base import (Convention, Emitted, Header, Reader, Recognised, decodes_as,
                   descriptor_for, emit_planes, grade_of, refuse)

__all__ = ["CONVENTION"]

_BLOCKS, _SCALES = "_blocks", "_scales"
#: bytes per block: 32 four-bit codes
_BLOCK_BYTES = 16


def _pairs(h: Header) -> list[tuple[str, str, str]]:
    """(logical name, blocks tensor, scales tensor) of every ``*_blocks`` tensor
    with its ``*_scales`` beside it."""
    out = []
    for n in sorted(h):
        if n.endswith(_BLOCKS) and n[:-len(_BLOCKS)] + _SCALES in h:
            stem = n[:-len(_BLOCKS)]
            out.append((stem, n, stem + _SCALES))
    return out


def recognise_header(h: Header, metadata: Mapping | None, q: dict,
                     read: Reader | None) -> list[Recognised]:
    declared = str(q.get("quant_method", "")).lower() == "mxfp4"
    out = []
    for name, bn, sn in _pairs(h):
        (bdt, bshape, _), (sdt, sshape, _) = h[bn], h[sn]
        bshape, sshape = tuple(int(x) for x in bshape), tuple(int(x) for x in sshape)
        files = (bn, sn)
        lines = (f"{bn}: {bdt} {list(bshape)}", f"{sn}: {sdt} {list(sshape)}")
        conv = "gpt-oss/mxfp4"
        if bdt != "U8" or sdt != "U8" or len(bshape) < 2 or bshape[-1] != _BLOCK_BYTES \
                or sshape != bshape[:-1]:
            if not declared:
                continue            # a *_blocks name alone is not gpt-oss's
            out.append(Recognised(
                name, conv, "inexpressible", files, section="§7.3",
                reason=(f"quant_method mxfp4 declares gpt-oss blocks, but {bn} / {sn} are not "
                        f"U8 [..., G, {_BLOCK_BYTES}] / U8 [..., G]"), lines=lines))
            continue
        shape = bshape[:-2] + (bshape[-2] * 2 * _BLOCK_BYTES,)
        g = grade_of("grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)")
        notes = ["decode is f32(2^(s−127) · e2m1[code]), as the reference's "
                 "ldexp(lut[code], s − 127); scale byte 0xFF is NaN here (E8M0, §8.2), "
                 "2^128 there"]
        if not declared:
            notes.append("no quant_method mxfp4 in config.json: recognised by the "
                         "*_blocks / *_scales tensors alone")
        out.append(Recognised(
            name, conv, "inferred", files, shape, g.canonical, descriptor_for(g, shape, False),
            (("file", bn), ("file", sn), None, None),
            lines=lines + (f"{bn} -> shape {list(shape)}: {math.prod(bshape[:-2])} rows of "
                           f"{bshape[-2]} blocks of 32 e2m1 codes, element 2j in the low "
                           "nibble, ROW_MAJOR (zero-copy)",
                           f"{sn} -> E8M0 exponents (bias 127), one per block (zero-copy)"),
            notes=tuple(notes)))
    return out


def emit(name: str, array) -> Emitted:
    """An MXFP4 GRIT array ``[..., G·32]`` as gpt-oss's ``<name>_blocks``
    [..., G, 16] and ``<name>_scales`` [..., G]: the two planes as they are
    (exact; a 0xFF scale byte, NaN here, is the one value gpt-oss reads
    otherwise)."""
    conv = "gpt-oss"
    grade, (data, s0, _s1, _aux) = emit_planes(name, array, conv)
    if not decodes_as(grade, "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"):
        raise refuse(name, conv, grade, "gpt-oss writes MXFP4 (E2M1 codes, one E8M0 scale "
                     "per 32) here")
    shape = tuple(array.shape)
    g = shape[-1] // 32
    stem = name[:-len(".weight")] if name.endswith(".weight") else name
    scales = np.frombuffer(s0, np.uint8).reshape(*shape[:-1], g)
    notes = ("scale byte 0xFF: NaN here, 2^128 in gpt-oss's dequantisation",) \
        if (scales == 0xFF).any() else ()
    return Emitted({stem + _BLOCKS: np.frombuffer(data, np.uint8).reshape(
                        *shape[:-1], g, _BLOCK_BYTES),
                    stem + _SCALES: scales},
                   {"quant_method": "mxfp4"}, exact=not notes, notes=notes)


def emit_config(emitted, plain) -> dict:
    return {"config.json": {"quantization_config": {
        "quant_method": "mxfp4",
        "modules_to_not_convert": sorted(n[:-len(".weight")] for n in plain
                                         if n.endswith(".weight"))}}}


CONVENTION = Convention("gpt-oss", methods=("mxfp4",),
                        recognise_header=recognise_header, emit=emit, emit_config=emit_config)
