"""The ggml block types GRIT reads in place (no copy): each one's block size,
grade and placement words, defined once for the GGUF reader and writer
(grit.io.gguf) and the fused decode kernels (grit.native).

A zero-copy ggml type is a GRIT array whose data placement interleaves the
block's fields (F_INTERLEAVED); docs/placements.md ("GGUF") derives each
row.  A converted ggml type (Q4_0, Q5_K, …, :data:`CONVERTED`) splits an
element's bits across fields, keeps a constant implicit or packs two planes
into one byte: grit.io.gguf moves its bits into the canonical placement."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import descriptor as D
from .ggml_types import GGML_TYPES
from .grade import Grade
from .placement.expr import Interleave, Perm
from .placement.words import REGISTERED as _PLACEMENTS

__all__ = ["halves", "ZeroCopyType", "ZERO_COPY", "ConvertedType", "CONVERTED", "Blocks",
           "Q4_K_DATA", "MXFP4_DATA", "NVFP4_DATA"]

_P = {n: w for n, (w, _) in _PLACEMENTS.items()}
#: every ggml type by name: the one table of block sizes (grit.ggml_types)
_TYPES = {t.name: t for t in GGML_TYPES}


def halves(n: int) -> tuple[int, ...]:
    """ggml's nibble order over a run of n elements as a permutation
    (physical -> logical): byte l holds element l in its low nibble and
    element l + n/2 in its high nibble, so in GRIT's LSB-first stream the
    nibble at physical position 2l + h holds logical element h·n/2 + l."""
    h = n // 2
    return tuple(hh * h + ll for ll in range(h) for hh in (0, 1))


#: the data placements of the nibble types: ggml's halves order inside each
#: block, the block's fields interleaved (k0·k1 elements for Q4_K's
#: super-block, k0 for MXFP4, 4 k0-groups of 16 for NVFP4's 64-element block)
Q4_K_DATA = Interleave(Perm(halves(64)), 8)
MXFP4_DATA = Interleave(Perm(halves(32)), 1)
NVFP4_DATA = Interleave(Perm(halves(16)), 4)


@dataclass(frozen=True)
class ZeroCopyType:
    """One ggml block type read in place: the grade and the (data, scale,
    meta) placement words; block bytes and elements from grit.ggml_types."""

    name: str
    grade_text: str
    placement: tuple[int, int, int]

    block_bytes = property(lambda self: _TYPES[self.name].block_bytes)
    block_elems = property(lambda self: _TYPES[self.name].block_elems)

    @property
    def grade(self) -> Grade:
        return Grade.parse(self.grade_text)

    def descriptor(self, group_axis: int = 0) -> D.Descriptor:
        pd, ps, pm = self.placement
        d = self.grade.descriptor(group_axis=group_axis, placement_data=pd,
                                  placement_scale=ps, placement_meta=pm)
        return d.replace(flags=d.flags | D.F_INTERLEAVED)


ZERO_COPY: dict[str, ZeroCopyType] = {z.name: z for z in (
    # d·q, q int8: 2-byte d then 32 codes
    ZeroCopyType("Q8_0", "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)",
                 (_P["BLOCK_AOS"], _P["ROW_MAJOR"], 0)),
    # one E8M0 byte then 16 bytes of nibbles in halves order
    ZeroCopyType("MXFP4", "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)",
                 (MXFP4_DATA.word, _P["ROW_MAJOR"], 0)),
    # four E4M3 block scales then 32 bytes of nibbles, halves order per 16
    ZeroCopyType("NVFP4", "grit1(e=e2m1,k0=16,s0=e4m3,esr=ratiomaxabs)",
                 (NVFP4_DATA.word, _P["ROW_MAJOR"], 0)),
    # d, dmin, 12 bytes of packed 6-bit scales/mins, 128 bytes of nibbles
    ZeroCopyType("Q4_K", "grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)",
                 (Q4_K_DATA.word, _P["PACK_K4_12B"], _P["PACK_K4_12B"])),
)}


@dataclass(frozen=True)
class ConvertedType:
    """One ggml block type moved into the canonical placement: the grade;
    block bytes and elements from grit.ggml_types."""

    name: str
    grade_text: str

    block_bytes = property(lambda self: _TYPES[self.name].block_bytes)
    block_elems = property(lambda self: _TYPES[self.name].block_elems)

    @property
    def grade(self) -> Grade:
        return Grade.parse(self.grade_text)


CONVERTED: dict[str, ConvertedType] = {c.name: c for c in (
    # d·(q − 8): u4 with the constant zero point 8
    ConvertedType("Q4_0", "grit1(e=u4,k0=32,s0=binary16,zp=u4,esr=affineminmax)"),
    # d·q + m: two levels per 32-element block, s0 = 1 and zp = −1 constant
    ConvertedType("Q4_1", "grit1(e=u4,k0=32,s0=u8,k1=1,s1=binary16,zp=s8,zps=l1,esr=affineminmax)"),
    ConvertedType("Q5_0", "grit1(e=x43e4,k0=32,s0=binary16,zp=x43e4,esr=affineminmax)"),
    ConvertedType("Q5_1",
                  "grit1(e=x43e4,k0=32,s0=u8,k1=1,s1=binary16,zp=s8,zps=l1,esr=affineminmax)"),
    # (d·sc)·q − (dmin·m)
    ConvertedType("Q2_K",
                  "grit1(e=u2,k0=16,s0=u4,k1=16,s1=binary16,zp=u4,zps=l1,esr=affineminmax)"),
    ConvertedType("Q5_K",
                  "grit1(e=x43e4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)"),
    # (d·sc)·(q − 32), sc int8
    ConvertedType("Q6_K", "grit1(e=u6,k0=16,s0=s8,k1=16,s1=binary16,zp=u6,esr=affineminmax)"),
    # d·q, q int8 (the 16 int16 bsums are sums of the codes: derived, not values)
    ConvertedType("Q8_K", "grit1(e=s8,k0=256,s0=binary32,esr=ratiomaxabs)"),
    # d·(q − 1)
    ConvertedType("TQ2_0", "grit1(e=u2,k0=256,s0=binary16,zp=u2,esr=affineminmax)"),
)}


@dataclass(frozen=True)
class Blocks:
    """The ggml blocks of one tensor, read in place: what a converted type's
    canonical planes are built from (``GritArray.deferred``), and what a fused
    kernel decodes without building them.  ``data`` is a read-only byte
    buffer of whole blocks of ``type_name``."""

    type_name: str
    data: Any = field(repr=False)
