"""The meaning of every registered placement (Appendix A.1), by plane role.

One table, ``MEANING``, says for each registered word which plane roles it may
be the placement of, and what it means there: a layout expression over that
role's unit grid (``planes.py``), or one of the two plane-level placements
that are not unit permutations — BLOCK_AOS (planes interleaved per block) and
PACK_K4_12B (bit-packing of Q4_K-shaped 6-bit scales and mins).  Applying a
placement where the table does not list it is a GritLayoutError.  The
byte-level definitions, with index maps, are in docs/placements.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import descriptor as D
from ..facts import ROLE_NAMES
from ..errors import GritLayoutError
from ..formats import U6
from .expr import ColMajor, Expr, Interleave, Perm, RowMajor, Tile
from .words import REGISTERED

__all__ = ["MEANING", "Meaning", "ROLES", "swizzle_128x4_perm", "meta_m16n8k32_perm",
           "pack_k4_12b", "unpack_k4_12b", "pack_k4_applies", "block_aos_unit",
           "PACK_BYTES"]

ROLES = ROLE_NAMES

# ---------------------------------------------------------------------------
# the two permutations that registered tiles carry


def swizzle_128x4_perm() -> tuple[int, ...]:
    """SWIZZLE_128X4B inside one 128×4 tile of scale bytes: the byte of
    (row r, column c) sits at offset (r % 32)·16 + (r // 32)·4 + c — the tile
    read as [4][32][4] stored as [32][4][4].  Entry j is the row-major index
    r·4 + c of the byte stored at offset j."""
    out = []
    for j in range(512):
        r32, rest = divmod(j, 16)
        rb, c = divmod(rest, 4)
        out.append((rb * 32 + r32) * 4 + c)
    return tuple(out)


def meta_m16n8k32_perm() -> tuple[int, ...]:
    """META_M16N8K32 inside one 16-row × 8-quad tile (a 16×32 logical A
    tile): 16 little-endian 32-bit words; word w = 2g + h (g = 0..7, h = 0..1)
    holds row g, quads 4h..4h+3 in bits 0..15 and row g + 8, the same quads,
    in bits 16..31, quad k at bits 4k..4k+3 of its half.  Entry p (the p-th
    nibble of the tile, LSB-first) is the row-major index row·8 + quad."""
    out = []
    for p in range(128):
        w, k = divmod(p, 8)
        g, h = divmod(w, 2)
        row = g + 8 * (k // 4)
        out.append(row * 8 + 4 * h + (k % 4))
    return tuple(out)


# ---------------------------------------------------------------------------
# PACK_K4_12B: 8 six-bit scales and 8 six-bit mins per super-block in 12 bytes

PACK_BYTES = 12


def pack_k4_applies(d: D.Descriptor) -> str | None:
    """None when PACK_K4_12B applies to this descriptor's grade, else why not."""
    u6 = U6.word
    if not (d.n_levels == 2 and d.k1 == 8):
        return "it packs exactly 8 sub-block values per super-block (two levels, k1 = 8)"
    if not (d.flags & D.F_HAS_ZP and d.flags & D.F_ZP_L1SCALED):
        return "it packs scales together with zero points (HAS_ZP, zps=l1)"
    if d.scale0 != u6 or d.zp_fmt != u6:
        return "it packs u6 scales and u6 mins (s0 = zp = u6)"
    return None


def pack_k4_12b(sc: np.ndarray, m: np.ndarray) -> np.ndarray:
    """(G, 8) six-bit scale and min codes -> (G, 12) bytes:
    byte j     = sc[j] | (sc[j+4] >> 4) << 6          j = 0..3
    byte j + 4 = m[j]  | (m[j+4]  >> 4) << 6
    byte j + 8 = (sc[j+4] & 15) | (m[j+4] & 15) << 4"""
    sc = sc.astype(np.uint8) & np.uint8(63)
    m = m.astype(np.uint8) & np.uint8(63)
    lo_s, hi_s, lo_m, hi_m = sc[:, :4], sc[:, 4:], m[:, :4], m[:, 4:]
    out = np.empty((sc.shape[0], PACK_BYTES), dtype=np.uint8)
    out[:, 0:4] = lo_s | ((hi_s >> 4) << 6)
    out[:, 4:8] = lo_m | ((hi_m >> 4) << 6)
    out[:, 8:12] = (hi_s & 15) | ((hi_m & 15) << 4)
    return out


def unpack_k4_12b(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(G, 12) bytes -> ((G, 8) scale codes, (G, 8) min codes)."""
    b = b.astype(np.uint8)
    sc = np.empty((b.shape[0], 8), dtype=np.uint8)
    m = np.empty_like(sc)
    sc[:, :4] = b[:, 0:4] & 63
    m[:, :4] = b[:, 4:8] & 63
    sc[:, 4:] = (b[:, 8:12] & 15) | ((b[:, 0:4] >> 6) << 4)
    m[:, 4:] = (b[:, 8:12] >> 4) | ((b[:, 4:8] >> 6) << 4)
    return sc, m


def block_aos_unit(d: D.Descriptor) -> int:
    """BLOCK_AOS's block, in level-0 groups: the level-1 group for two
    levels, the level-0 group for one.  Per-tensor level-1 (k1 = 0) has no
    block and BLOCK_AOS does not apply."""
    if d.n_levels == 2:
        if d.k1 == 0:
            raise GritLayoutError(
                "BLOCK_AOS does not apply to a per-tensor level-1 scale (k1 = 0): its block "
                "is the level-1 group, and here that is the whole tensor")
        return d.k1
    return 1


# ---------------------------------------------------------------------------
# the table


@dataclass(frozen=True, slots=True)
class Meaning:
    name: str
    roles: frozenset          # subset of ROLES
    expr: Expr | None         # unit-grid index map, when it is one
    kind: str = "grid"        # "grid" | "block_aos" | "pack_k4"
    note: str = ""


_W = {n: w for n, (w, _) in REGISTERED.items()}

MEANING: dict[int, Meaning] = {
    _W["ROW_MAJOR"]: Meaning("ROW_MAJOR", frozenset(ROLES), RowMajor(),
                             note="canonical: units in lin / g0 / g1 / quad order"),
    _W["COL_MAJOR"]: Meaning("COL_MAJOR", frozenset(ROLES), ColMajor(),
                             note="each plane's (R, C) unit grid stored column-major"),
    _W["TILE_16X16"]: Meaning("TILE_16X16", frozenset(ROLES), Tile(RowMajor(), (16, 16)),
                              note="16x16 unit tiles, row-major tiles of row-major units"),
    _W["SWIZZLE_128X4B"]: Meaning(
        "SWIZZLE_128X4B", frozenset({"scale"}), Tile(Perm(swizzle_128x4_perm()), (128, 4)),
        note="8-bit level-0 scales in 128x4 tiles interleaved 32x4x4"),
    _W["BLOCK_AOS"]: Meaning("BLOCK_AOS", frozenset({"data"}), None, kind="block_aos",
                             note="all planes interleaved per block"),
    _W["LINEAR_META"]: Meaning("LINEAR_META", frozenset({"meta"}), RowMajor(),
                               note="sparse metadata in ascending quad order (canonical)"),
    _W["META_M16N8K32"]: Meaning(
        "META_M16N8K32", frozenset({"meta"}), Tile(Perm(meta_m16n8k32_perm()), (16, 8)),
        note="2:4 metadata nibbles in mma.sp m16n8k32 register order"),
    _W["PACK_K4_12B"]: Meaning("PACK_K4_12B", frozenset({"scale", "meta"}), None,
                               kind="pack_k4", note="Q4_K 12-byte scale/min packing"),
}

ROW_MAJOR = _W["ROW_MAJOR"]
LINEAR_META = _W["LINEAR_META"]
BLOCK_AOS = _W["BLOCK_AOS"]
PACK_K4_12B = _W["PACK_K4_12B"]
SWIZZLE_128X4B = _W["SWIZZLE_128X4B"]
META_M16N8K32 = _W["META_M16N8K32"]


def block_aos_expr(d: D.Descriptor) -> Interleave:
    return Interleave(RowMajor(), block_aos_unit(d))
