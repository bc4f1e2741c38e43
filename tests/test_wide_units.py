"""Placements over units wider than 32 bits that are not whole bytes
(ZP_L1SCALED [S1, Z1] pairs of a 17-bit scale1 format: 34 bits; a 15:16
quad's fifteen 4-bit indices: 60 bits).  The fuzz harness found that check
levels 2-3, decode and relayout raised a raw ValueError on them; the
expected bytes here are the COL_MAJOR rule of docs/placements.md applied
with Python integers to the plane as one LSB-first bitstream."""
from __future__ import annotations

import numpy as np

import grit
from grit.layouts import COL_MAJOR, ROW_MAJOR

U17_PAIRS = "grit1(e=u4,k0=8,s0=u6,k1=1,s1=x43f0,zp=u6,zps=l1,esr=affineminmax)"


def _units(plane: bytes, bits: int, count: int) -> list[int]:
    stream = int.from_bytes(plane, "little")
    return [(stream >> (bits * j)) & ((1 << bits) - 1) for j in range(count)]


def _plane(units: list[int], bits: int, nbytes: int) -> bytes:
    stream = 0
    for j, u in enumerate(units):
        stream |= u << (bits * j)
    return stream.to_bytes(nbytes, "little")


def _canonical_array(rng):
    grit.register_grade(U17_PAIRS)
    desc = grit.Descriptor.from_hex(      # group_axis 1, ZP_L1SCALED, scale1 = u17
        "4752543140010221e343e543f043e54301000800010000000000000000000000"
        "01000000000000100200000000000010010000000000001032c9a5051af92b9b"
    ).replace(placement_scale=ROW_MAJOR)
    shape = [2, 32]                      # 2 rows x 4 level-0 groups; k1 = 1: s1 grid 2 x 4
    sizes = grit.plane_sizes(desc, shape).sizes
    assert sizes[2] == 34                # 8 pairs x 34 bits = 272 bits
    planes = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes]
    return grit.GritArray(desc, shape, planes)


def test_pairs_of_34_bits_move_as_units_under_col_major():
    rng = np.random.default_rng(12)
    for _ in range(20):
        a = _canonical_array(rng)
        moved = grit.relayout(a, scale=COL_MAJOR)
        log = _units(bytes(a.planes[2]), 34, 8)
        want = [log[r * 4 + c] for c in range(4) for r in range(2)]    # phys[c*R + r]
        assert bytes(moved.planes[2]) == _plane(want, 34, len(a.planes[2]))
        assert np.array_equal(grit.decode(moved).view(np.uint32), grit.decode(a).view(np.uint32))
        back = grit.relayout(moved, scale=ROW_MAJOR)
        assert [bytes(p) for p in back.planes] == [bytes(p) for p in a.planes]
        for level in (1, 2, 3):
            assert grit.diagnose(moved.descriptor, moved.shape, moved.planes,
                                 level=level).status == 0


SP_15_16 = "grit1(e=s8,k0=16,s0=binary16,sp=15:16:u4:unord,esr=ratiomaxabs)"


def test_quads_of_60_bits_move_as_units_under_col_major():
    grit.register_grade(SP_15_16)
    desc = grit.Descriptor.from_hex(      # group_axis 1, 15:16 sparsity, u4 indices
        "4752543140010104e7036f35000000000100100000000f100200000000000000"
        "010000000000001001000000000000105779f7a0e3b53f8da9cd4688f896d8d1"
    ).replace(placement_meta=ROW_MAJOR)
    shape = [2, 64]                      # 2 rows x 4 quads of 16: aux grid 2 x 4
    sizes = grit.plane_sizes(desc, shape).sizes
    assert sizes[3] == 60                # 8 quads x 15 indices x 4 bits = 480 bits
    rng = np.random.default_rng(13)
    for _ in range(20):
        planes = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes]
        a = grit.GritArray(desc, shape, planes)
        moved = grit.relayout(a, meta=COL_MAJOR)
        log = _units(planes[3], 60, 8)
        want = [log[r * 4 + c] for c in range(4) for r in range(2)]
        assert bytes(moved.planes[3]) == _plane(want, 60, 60)
        assert np.array_equal(grit.decode(moved).view(np.uint32), grit.decode(a).view(np.uint32))
        assert [bytes(p) for p in grit.relayout(moved, meta=ROW_MAJOR).planes] == planes
