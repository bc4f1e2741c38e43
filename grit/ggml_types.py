"""Every ggml tensor type a GGUF file can name: type id, name, elements per
block and bytes per block — grit's own table, so a GGUF file's byte
accounting does not depend on which types the installed gguf-py knows.

The source is ggml itself (ggml-org/llama.cpp): the ``enum ggml_type`` ids
of ``ggml/include/ggml.h``, and each type's ``blck_size`` / ``type_size``
from the ``type_traits`` table of ``ggml/src/ggml.c``, the sizes being the
``block_*`` structs of ``ggml/src/ggml-common.h``.  Each block size below is
written as the sum of its struct's fields.  tests/test_ggml_types.py checks
every type gguf-py's ``GGML_QUANT_SIZES`` knows against this table (they
agree except Q8_1, where gguf-py keeps the float fields of an older
``block_q8_1``: 40 bytes where ggml has 36); the rows gguf-py may not know
carry a ``note``: added to ggml after the gguf-py release the tests run
against (Q2_0), or removed (ids ggml once
defined and GGUF files were written with, which current ggml no longer
reads: the Q4_0 / IQ4_NL rows repacked for ARM, whose blocks are Q4_0's and
IQ4_NL's).  Ids 4 and 5 (Q4_2, Q4_3) were removed before GGUF existed and
are not listed: a tensor naming them is of unknown type.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import pin

__all__ = ["GgmlType", "GGML_TYPES", "BY_ID", "BY_NAME", "QK_K"]

#: elements per super-block of the k-quants and the i-quants (ggml-common.h)
QK_K = 256
_HALF = 2        # ggml_half
_F32 = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class GgmlType:
    """One ggml type: ``block_elems`` elements in ``block_bytes`` bytes."""

    id: int
    name: str
    block_elems: int
    block_bytes: int
    #: "" for a type ggml reads today; otherwise why gguf-py may not know it
    note: str = ""

    def nbytes(self, numel: int) -> int:
        """Bytes of ``numel`` elements (a whole number of blocks)."""
        return numel // self.block_elems * self.block_bytes


def _t(id: int, name: str, block_elems: int, block_bytes: int, note: str = "") -> GgmlType:
    return GgmlType(id=id, name=name, block_elems=block_elems, block_bytes=block_bytes,
                    note=note)


_REMOVED = "removed from ggml (runtime repacking replaced it); files written before read it"

GGML_TYPES: tuple[GgmlType, ...] = (
    _t(0, "F32", 1, _F32),
    _t(1, "F16", 1, _HALF),
    # block_q4_0: d, qs[32/2]
    _t(2, "Q4_0", 32, _HALF + 16),
    # block_q4_1: d, m, qs[32/2]
    _t(3, "Q4_1", 32, _HALF + _HALF + 16),
    # block_q5_0: d, qh[4], qs[32/2]
    _t(6, "Q5_0", 32, _HALF + 4 + 16),
    # block_q5_1: d, m, qh[4], qs[32/2]
    _t(7, "Q5_1", 32, _HALF + _HALF + 4 + 16),
    # block_q8_0: d, qs[32]
    _t(8, "Q8_0", 32, _HALF + 32),
    # block_q8_1: d, s, qs[32] (halves since ggml made them so; gguf-py's table
    # still has the two floats of the older struct, 4 + 4 + 32)
    _t(9, "Q8_1", 32, _HALF + _HALF + 32),
    # block_q2_K: scales[QK_K/16], qs[QK_K/4], d, dmin
    _t(10, "Q2_K", QK_K, QK_K // 16 + QK_K // 4 + _HALF + _HALF),
    # block_q3_K: hmask[QK_K/8], qs[QK_K/4], scales[12], d
    _t(11, "Q3_K", QK_K, QK_K // 8 + QK_K // 4 + 12 + _HALF),
    # block_q4_K: d, dmin, scales[12], qs[QK_K/2]
    _t(12, "Q4_K", QK_K, _HALF + _HALF + 12 + QK_K // 2),
    # block_q5_K: d, dmin, scales[12], qh[QK_K/8], qs[QK_K/2]
    _t(13, "Q5_K", QK_K, _HALF + _HALF + 12 + QK_K // 8 + QK_K // 2),
    # block_q6_K: ql[QK_K/2], qh[QK_K/4], scales[QK_K/16], d
    _t(14, "Q6_K", QK_K, QK_K // 2 + QK_K // 4 + QK_K // 16 + _HALF),
    # block_q8_K: float d, qs[QK_K], int16 bsums[QK_K/16]
    _t(15, "Q8_K", QK_K, _F32 + QK_K + 2 * (QK_K // 16)),
    # block_iq2_xxs: d, uint16 qs[QK_K/8]
    _t(16, "IQ2_XXS", QK_K, _HALF + 2 * (QK_K // 8)),
    # block_iq2_xs: d, uint16 qs[QK_K/8], scales[QK_K/32]
    _t(17, "IQ2_XS", QK_K, _HALF + 2 * (QK_K // 8) + QK_K // 32),
    # block_iq3_xxs: d, qs[3*QK_K/8]
    _t(18, "IQ3_XXS", QK_K, _HALF + 3 * QK_K // 8),
    # block_iq1_s: d, qs[QK_K/8], uint16 qh[QK_K/32]
    _t(19, "IQ1_S", QK_K, _HALF + QK_K // 8 + 2 * (QK_K // 32)),
    # block_iq4_nl: d, qs[32/2]
    _t(20, "IQ4_NL", 32, _HALF + 16),
    # block_iq3_s: d, qs[QK_K/4], qh[QK_K/32], signs[QK_K/8], scales[QK_K/64]
    _t(21, "IQ3_S", QK_K, _HALF + QK_K // 4 + QK_K // 32 + QK_K // 8 + QK_K // 64),
    # block_iq2_s: d, qs[QK_K/4], qh[QK_K/32], scales[QK_K/32]
    _t(22, "IQ2_S", QK_K, _HALF + QK_K // 4 + QK_K // 32 + QK_K // 32),
    # block_iq4_xs: d, uint16 scales_h, scales_l[QK_K/64], qs[QK_K/2]
    _t(23, "IQ4_XS", QK_K, _HALF + 2 + QK_K // 64 + QK_K // 2),
    _t(24, "I8", 1, 1),
    _t(25, "I16", 1, 2),
    _t(26, "I32", 1, 4),
    _t(27, "I64", 1, 8),
    _t(28, "F64", 1, 8),
    # block_iq1_m: qs[QK_K/8], qh[QK_K/16], scales[QK_K/32] (the scale lives in them)
    _t(29, "IQ1_M", QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32),
    _t(30, "BF16", 1, 2),
    # Q4_0 interleaved 4 or 8 rows at a time: blck_size QK4_0, type_size sizeof(block_q4_0)
    _t(31, "Q4_0_4_4", 32, _HALF + 16, _REMOVED),
    _t(32, "Q4_0_4_8", 32, _HALF + 16, _REMOVED),
    _t(33, "Q4_0_8_8", 32, _HALF + 16, _REMOVED),
    # block_tq1_0: qs[(QK_K - 4*QK_K/64)/5], qh[QK_K/64], d
    _t(34, "TQ1_0", QK_K, (QK_K - 4 * QK_K // 64) // 5 + QK_K // 64 + _HALF),
    # block_tq2_0: qs[QK_K/4], d
    _t(35, "TQ2_0", QK_K, QK_K // 4 + _HALF),
    # IQ4_NL interleaved: blck_size QK4_NL, type_size sizeof(block_iq4_nl)
    _t(36, "IQ4_NL_4_4", 32, _HALF + 16, _REMOVED),
    _t(37, "IQ4_NL_4_8", 32, _HALF + 16, _REMOVED),
    _t(38, "IQ4_NL_8_8", 32, _HALF + 16, _REMOVED),
    # block_mxfp4: uint8 e (E8M0), qs[32/2]
    _t(39, "MXFP4", 32, 1 + 16),
    # block_nvfp4: uint8 d[64/16] (E4M3), qs[64/2]
    _t(40, "NVFP4", 64, 64 // 16 + 64 // 2),
    # block_q1_0: d, qs[128/8]
    _t(41, "Q1_0", 128, _HALF + 128 // 8),
    # block_q2_0: d, qs[64/4]
    _t(42, "Q2_0", 64, _HALF + 64 // 4, "since ggml's GGML_TYPE_Q2_0 (after gguf-py 0.19)"),
)

#: type id -> the type
BY_ID: dict[int, GgmlType] = {t.id: t for t in GGML_TYPES}
#: type name -> the type
BY_NAME: dict[str, GgmlType] = {t.name: t for t in GGML_TYPES}
pin(len(BY_ID) == len(GGML_TYPES) and len({t.name for t in GGML_TYPES}) == len(GGML_TYPES),
    "a ggml type id or name is listed twice")
