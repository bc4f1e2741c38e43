"""The native relayout fast paths (grit._kernels) against the numpy path.

Every fast path is the numpy relayout's index map executed as byte moves, so
for every registered placement, grade and shape it must give the same plane
bytes as the numpy path (grit.native.NATIVE = False), in both
directions, and round trips must give back the source bytes.  The kernels are
also compared one by one with the numpy functions they replace, on shapes the
registered grades never produce (odd grids, MSB-first nibbles, wide units),
and every thread count must give the result of one thread.
"""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import grit
from grit import layouts as L
from grit.errors import GritLayoutError
from grit.grade import REGISTERED_GRADES
from grit.placement import planes as P
from grit.placement.expr import ColMajor, Perm, RowMajor, Tile, apply
from grit.placement.registered import (meta_m16n8k32_perm, pack_k4_12b, swizzle_128x4_perm,
                                       unpack_k4_12b)

try:
    from grit import _kernels
except ImportError as exc:  # pragma: no cover - only where no compiler exists
    _kernels = None
    _REASON = f"grit._kernels is not built ({exc}); the numpy path is tested elsewhere"
else:
    _REASON = "grit._kernels has no relayout entry points" if not hasattr(
        _kernels, "transpose") else ""

pytestmark = pytest.mark.skipif(_kernels is None or bool(_REASON), reason=_REASON or "built")

dm = importlib.import_module("grit.native")

PLACEMENTS = {
    "COL_MAJOR": {"placement": L.COL_MAJOR},
    "TILE_16X16": {"placement": L.TILE_16X16},
    "SWIZZLE_128X4B": {"scale": L.SWIZZLE_128X4B},
    "BLOCK_AOS": {"data": L.BLOCK_AOS},
    "BLOCK_AOS+PACK_K4_12B": {"data": L.BLOCK_AOS, "scale": L.PACK_K4_12B},
    "PACK_K4_12B": {"scale": L.PACK_K4_12B},
    "META_M16N8K32": {"meta": L.META_M16N8K32},
    "COL_MAJOR_data+SWIZZLE_scale": {"data": L.COL_MAJOR, "scale": L.SWIZZLE_128X4B},
    "TILE_16X16_data+COL_MAJOR_meta": {"data": L.TILE_16X16, "meta": L.COL_MAJOR},
}

# rows x columns: one tile, odd and non-square row counts, 3-D, wide
SHAPES = [(1, 256), (3, 256), (16, 256), (17, 512), (128, 256), (48, 768), (2, 5, 256),
          (256, 512), (144, 1024)]

# (grade, placement) pairs the registered table allows on some shape above
EXPECTED = {
    (g, p) for g in REGISTERED_GRADES for p in ("COL_MAJOR", "TILE_16X16")
} | {(g, "SWIZZLE_128X4B") for g in ("GRADE_MXFP4", "GRADE_MXFP4_RNE", "GRADE_NVF4",
                                     "GRADE_NVF4_RTZ")} \
  | {(g, "BLOCK_AOS") for g in ("GRADE_MXFP4", "GRADE_MXFP4_RNE", "GRADE_Q4KS",
                                "GRADE_I8S24")} \
  | {("GRADE_Q4KS", "PACK_K4_12B"), ("GRADE_Q4KS", "BLOCK_AOS+PACK_K4_12B"),
     ("GRADE_I8S24", "META_M16N8K32")}

_ARRAYS: dict = {}


def arr(gname, shape):
    key = (gname, shape)
    if key not in _ARRAYS:
        rng = np.random.default_rng(hash(key) & 0xFFFF)
        x = (rng.standard_normal(shape) * rng.uniform(0.1, 10, shape[:-1] + (1,))
             ).astype(np.float32)
        _ARRAYS[key] = grit.encode(x, REGISTERED_GRADES[gname])
    return _ARRAYS[key]


def planes_of(a):
    return [bytes(p) for p in a.planes]


def relayout_with(native: bool, x, kw, threads=None):
    old, old_t = dm.NATIVE, dm.THREADS
    dm.NATIVE, dm.THREADS = native, threads
    try:
        return grit.relayout(x, kw.get("placement"),
                             **{k: v for k, v in kw.items() if k != "placement"})
    finally:
        dm.NATIVE, dm.THREADS = old, old_t


@pytest.fixture
def calls(monkeypatch):
    """Count the calls into each relayout kernel (to show the fast path ran)."""
    seen: dict[str, int] = {}
    for name in ("transpose", "tile", "interleave", "deinterleave", "pack_k4_12b",
                 "unpack_k4_12b", "interleave_k4", "deinterleave_k4"):
        fn = getattr(_kernels, name)

        def wrap(*a, _fn=fn, _name=name, **k):
            seen[_name] = seen.get(_name, 0) + 1
            return _fn(*a, **k)
        monkeypatch.setattr(_kernels, name, wrap)
    return seen


@pytest.mark.parametrize("pname", sorted(PLACEMENTS))
@pytest.mark.parametrize("gname", sorted(REGISTERED_GRADES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_native_equals_numpy_both_directions(gname, pname, shape, calls):
    a = arr(gname, shape)
    kw = PLACEMENTS[pname]
    try:
        want = relayout_with(False, a, kw)
    except GritLayoutError as e:
        with pytest.raises(GritLayoutError) as got:
            relayout_with(True, a, kw)
        assert str(got.value) == str(e)
        return
    got = relayout_with(True, a, kw)
    assert got.descriptor == want.descriptor
    assert planes_of(got) == planes_of(want)
    assert sum(calls.values()) >= 1, "the native path did not run"
    # back to canonical: native from the native result == numpy from the numpy result
    back_n = relayout_with(True, got, {"placement": L.ROW_MAJOR})
    back_p = relayout_with(False, want, {"placement": L.ROW_MAJOR})
    assert planes_of(back_n) == planes_of(back_p) == planes_of(a)
    assert back_n.descriptor == a.descriptor
    # several threads give the bytes of one
    assert planes_of(relayout_with(True, a, kw, threads=3)) == planes_of(want)
    assert planes_of(relayout_with(True, want, {"placement": L.ROW_MAJOR}, threads=5)) \
        == planes_of(a)


def test_every_expected_pair_is_covered():
    """Every expected (grade, placement) pair is one the parametrized test
    above compares (numpy lays it out, for some shape: not the refusal
    branch), derived here, whichever worker process ran which case."""
    covered = set()
    for g, p in sorted(EXPECTED):
        for shape in SHAPES:
            try:
                relayout_with(False, arr(g, shape), PLACEMENTS[p])
            except GritLayoutError:
                continue
            covered.add((g, p))
            break
    assert covered == EXPECTED, sorted(EXPECTED - covered)


@pytest.mark.parametrize("gname", ["GRADE_MXFP4", "GRADE_Q4KS", "GRADE_I8S24"])
def test_between_two_non_canonical_placements(gname):
    a = arr(gname, (128, 512))
    pairs = [(L.COL_MAJOR, L.TILE_16X16), (L.TILE_16X16, L.COL_MAJOR),
             (L.TILE_16X16, L.BLOCK_AOS), (L.BLOCK_AOS, L.COL_MAJOR)]
    for p, q in pairs:
        try:
            x = relayout_with(False, a, {"placement": p})
            want = relayout_with(False, x, {"data": q})
        except GritLayoutError:
            continue
        got = relayout_with(True, relayout_with(True, a, {"placement": p}), {"data": q})
        assert planes_of(got) == planes_of(want)


def test_grit_native_0_turns_the_fast_paths_off(calls):
    a = arr("GRADE_MXFP4", (128, 256))
    relayout_with(False, a, {"placement": L.COL_MAJOR})
    assert calls == {}
    assert P.native_kernels() is (_kernels if dm.NATIVE else None)


# ---------------------------------------------------------------------------
# the kernels one by one against the numpy functions they replace


def numpy_permute(buf, u, e, inverse):
    return P.from_units(apply(e, P.to_units(buf, u), u.R, u.C, inverse=inverse), u)


def native_on(fn):
    old = dm.NATIVE
    dm.NATIVE = True
    try:
        return fn()
    finally:
        dm.NATIVE = old


@pytest.mark.parametrize("bits,msb", [(4, False), (4, True), (8, False), (16, False),
                                      (32, False), (48, False)])
@pytest.mark.parametrize("R,C", [(1, 1), (1, 7), (7, 1), (2, 2), (3, 5), (5, 3), (16, 16),
                                 (31, 33), (32, 32), (64, 96), (66, 130), (130, 66),
                                 (200, 64), (33, 512)])
def test_transpose_kernel(bits, msb, R, C):
    rng = np.random.default_rng(R * 1000 + C)
    u = P.Units(R * C, bits, R, C, msb)
    buf = rng.integers(0, 256, u.nbytes, dtype=np.uint8).tobytes()
    if bits == 4 and (R * C) % 2:       # a canonical stream pads with a zero nibble
        b = bytearray(buf)
        b[-1] &= 0x0F if not msb else 0xF0
        buf = bytes(b)
    for inverse in (False, True):
        want = numpy_permute(buf, u, ColMajor(), inverse)
        if R * C <= 1:
            continue
        got = native_on(lambda: P.native_permute(buf, u, ColMajor(), inverse))
        assert got == want
        for t in (1, 2, 7):
            RR, CC = (C, R) if inverse else (R, C)
            assert _kernels.transpose(buf, RR, CC, bits, msb, t) == want


TILES = [Tile(RowMajor(), (16, 16)), Tile(Perm(swizzle_128x4_perm()), (128, 4)),
         Tile(Perm(meta_m16n8k32_perm()), (16, 8)), Tile(ColMajor(), (4, 4)),
         Tile(Perm((1, 0, 3, 2)), (2, 2))]


@pytest.mark.parametrize("e", TILES, ids=str)
@pytest.mark.parametrize("bits", [4, 8, 16, 32])
@pytest.mark.parametrize("nr,nc", [(1, 1), (1, 3), (3, 1), (2, 5)])
def test_tile_kernel(e, bits, nr, nc):
    tr, tc = e.dims
    R, C = nr * tr, nc * tc
    if (tc * bits) % 8:
        pytest.skip("tile rows are not whole bytes")
    rng = np.random.default_rng(nr * 31 + nc + bits)
    u = P.Units(R * C, bits, R, C)
    buf = rng.integers(0, 256, u.nbytes, dtype=np.uint8).tobytes()
    ch = P._tile_chunks(e.inner, tr, tc, bits)
    for inverse in (False, True):
        want = numpy_permute(buf, u, e, inverse)
        got = native_on(lambda: P.native_permute(buf, u, e, inverse))
        if ch is None:
            assert got is None           # not covered: the numpy path runs
            continue
        assert got == want
        w, tab = ch
        for t in (2, 5):
            assert _kernels.tile(buf, R, C * bits // 8, tr, tc * bits // 8, w, tab, inverse,
                                 t) == want


@pytest.mark.parametrize("tr,tc,bits", [(16, 16, 4), (16, 16, 8), (4, 16, 4), (2, 32, 4),
                                         (2, 16, 8), (6, 16, 8), (3, 16, 4)])
@pytest.mark.parametrize("nc", [1, 3, 4, 5, 9, 13])
def test_tile_kernel_whole_row_groups(tr, tc, bits, nc):
    # tiles stored row by row with 8- or 16-byte rows go four or two at a
    # time through register transposes; leftover tiles of a band or of a
    # thread's range (every split) take the chunk loop.  Checked against the
    # tiles cut by numpy reshapes.
    nr = 3
    R, C = nr * tr, nc * tc
    rng = np.random.default_rng(tr * 1000 + tc * 10 + bits + nc)
    rowbytes, tcb = C * bits // 8, tc * bits // 8
    buf = rng.integers(0, 256, R * rowbytes, dtype=np.uint8)
    want = np.ascontiguousarray(
        buf.reshape(nr, tr, nc, tcb).transpose(0, 2, 1, 3)).tobytes()
    tab = np.arange(tr, dtype=np.int64)
    for t in (1, 2, 3, 7):
        got = _kernels.tile(buf, R, rowbytes, tr, tcb, tcb, tab, False, t)
        assert got == want
        assert _kernels.tile(got, R, rowbytes, tr, tcb, tcb, tab, True, t) == buf.tobytes()


def test_tile_chunks_of_the_registered_tiles():
    assert P._tile_chunks(RowMajor(), 16, 16, 4)[0] == 8           # TILE_16X16 nibbles
    assert P._tile_chunks(RowMajor(), 16, 16, 8)[0] == 16
    assert P._tile_chunks(Perm(swizzle_128x4_perm()), 128, 4, 8)[0] == 4
    assert P._tile_chunks(Perm(meta_m16n8k32_perm()), 16, 8, 4)[0] == 2
    assert P._tile_chunks(ColMajor(), 4, 4, 8)[0] == 1
    assert P._tile_chunks(ColMajor(), 4, 4, 4) is None             # splits bytes


@pytest.mark.parametrize("widths", [(0, 1, 0, 16), (4, 12, 0, 128), (2, 16, 0, 96),
                                    (0, 0, 0, 5), (3, 0, 7, 1), (0, 0, 0, 0)])
@pytest.mark.parametrize("blocks", [0, 1, 7, 1000])
def test_interleave_kernel(widths, blocks):
    rng = np.random.default_rng(sum(widths) + blocks)
    fields = tuple(rng.integers(0, 256, w * blocks, dtype=np.uint8).tobytes() for w in widths)
    cols = [np.frombuffer(f, np.uint8).reshape(blocks, w) for f, w in zip(fields, widths) if w]
    want = np.concatenate(cols, axis=1).tobytes() if cols else b""
    for t in (1, 3):
        got = _kernels.interleave(fields, widths, blocks, t)
        assert got == want
        back = _kernels.deinterleave(got, widths, blocks, t)
        assert back == tuple(f if w else b"" for f, w in zip(fields, widths))


@pytest.mark.parametrize("groups", [0, 1, 3, 1001])
def test_pack_k4_12b_kernel(groups):
    rng = np.random.default_rng(groups)
    sc = rng.integers(0, 256, (groups, 8), dtype=np.uint8)    # high bits are ignored
    m = rng.integers(0, 256, (groups, 8), dtype=np.uint8)
    want = pack_k4_12b(sc, m).tobytes()
    packed = rng.integers(0, 256, (groups, 12), dtype=np.uint8)
    wsc, wm = unpack_k4_12b(packed)
    for t in (1, 4):
        assert _kernels.pack_k4_12b(sc.tobytes(), m.tobytes(), groups, t) == want
        assert _kernels.unpack_k4_12b(packed.tobytes(), groups, t) == (wsc.tobytes(),
                                                                         wm.tobytes())


@pytest.mark.parametrize("w1,wd", [(4, 128), (2, 64), (0, 16), (4, 0)])
@pytest.mark.parametrize("blocks", [0, 1, 5, 777])
def test_interleave_k4_kernel(w1, wd, blocks):
    # the one-pass kernel = the numpy pack_k4_12b, then the block concatenation
    rng = np.random.default_rng(w1 * 1000 + wd + blocks)
    s1 = rng.integers(0, 256, (blocks, w1), dtype=np.uint8)
    sc = rng.integers(0, 64, (blocks, 8), dtype=np.uint8)     # 6-bit values round-trip
    m = rng.integers(0, 64, (blocks, 8), dtype=np.uint8)
    data = rng.integers(0, 256, (blocks, wd), dtype=np.uint8)
    want = np.concatenate([s1, pack_k4_12b(sc, m), data], axis=1).tobytes()
    for t in (1, 3):
        got = _kernels.interleave_k4((s1.tobytes(), sc.tobytes(), m.tobytes(), data.tobytes()),
                                     w1, wd, blocks, t)
        assert got == want
        assert _kernels.deinterleave_k4(got, w1, wd, blocks, t) == (
            s1.tobytes(), sc.tobytes(), m.tobytes(), data.tobytes())
    with pytest.raises(ValueError):
        _kernels.deinterleave_k4(b"\0" * 10, 4, 0, 1)
    with pytest.raises(ValueError):
        _kernels.interleave_k4((b"", b"\0" * 7, b"\0" * 8, b""), 0, 0, 1)


def test_large_planes_are_numpy_backed_buffers():
    # outputs of a MiB or more come from numpy.empty (huge-page backed where
    # the kernel allows); they compare, hash-free, like bytes
    n = 1 << 21
    src = np.arange(n, dtype=np.uint32).view(np.uint8)
    got = _kernels.transpose(src, 2048, 4096, 8, False, 2)
    assert isinstance(got, memoryview) and got.nbytes == 4 * n
    # cache-line aligned, whatever numpy's allocator returned: the
    # streaming-store path writes whole 64-byte lines; from 4 MiB on, on a
    # 2 MiB (huge page) boundary
    assert np.frombuffer(got, np.uint8).ctypes.data % (2 << 20) == 0
    for k in range(1, 9):
        enc = _kernels.transpose(src[: (1 << 20) + 64 * k], 64 * k + (1 << 20), 1, 8)
        assert np.frombuffer(enc, np.uint8).ctypes.data % 64 == 0
    assert got == np.ascontiguousarray(src.reshape(2048, 4096).T).tobytes()
    small = _kernels.transpose(src[:64], 8, 8, 8)
    assert isinstance(small, bytes)


@pytest.mark.parametrize("R,C,bits", [(4096, 2048, 8), (4128, 2050, 8), (4160, 2017, 8),
                                      (4096, 4096, 4), (4160, 4102, 4), (4224, 4096, 4),
                                      (4096, 1024, 16), (4128, 1030, 16), (4112, 1024, 16)])
def test_transpose_kernel_streaming_bands(R, C, bits):
    # outputs of 4 MiB or more whose destination rows are whole cache lines
    # (R bytes, R/2 bytes for nibbles, 2R bytes for two-byte units: a
    # multiple of 64) take the banded streaming-store path, with partial
    # column tiles; the others (4128, 4160 nibbles, 4112 two-byte) the tiled one
    rng = np.random.default_rng(R + C + bits)
    buf = rng.integers(0, 256, R * C * bits // 8, dtype=np.uint8)
    if bits >= 8:
        u = buf.view(np.uint8 if bits == 8 else np.uint16)
        want = np.ascontiguousarray(u.reshape(R, C).T).tobytes()
    else:
        u = np.empty(R * C, np.uint8)
        u[0::2], u[1::2] = buf & 15, buf >> 4
        t = np.ascontiguousarray(u.reshape(R, C).T).reshape(-1)
        want = (t[0::2] | (t[1::2] << 4)).astype(np.uint8).tobytes()
    for th in (1, 2, 3, 7):         # threads own column groups, then take each other's
        assert _kernels.transpose(buf, R, C, bits, False, th) == want


def test_kernels_refuse_short_buffers():
    with pytest.raises(ValueError):
        _kernels.transpose(b"\0" * 5, 2, 3, 8)
    with pytest.raises(ValueError):
        _kernels.tile(b"\0" * 255, 16, 16, 16, 16, 16, np.arange(16, dtype=np.int64))
    with pytest.raises(ValueError):
        _kernels.tile(b"\0" * 256, 16, 16, 16, 16, 16, np.full(16, 16, dtype=np.int64))
    with pytest.raises(ValueError):
        _kernels.interleave((b"", b"\0", b"", b"\0"), (0, 1, 0, 2), 1)
    with pytest.raises(ValueError):
        _kernels.deinterleave(b"\0" * 5, (0, 1, 0, 5), 1)
    with pytest.raises(ValueError):
        _kernels.unpack_k4_12b(b"\0" * 11, 1)


@pytest.mark.parametrize("bits,msb", [(4, False), (8, False), (16, False)])
@pytest.mark.parametrize("R,C", [(64, 64), (128, 128), (256, 320), (130, 258), (258, 130),
                                 (384, 194), (200, 1024)])
def test_transpose_kernel_staged_tiles(bits, msb, R, C):
    # grids holding whole 64 x 64 (bytes) / 128 x 128 (nibbles) staged tiles
    # beside partial edges, at every thread split
    rng = np.random.default_rng(R * 7 + C)
    u = P.Units(R * C, bits, R, C, msb)
    buf = rng.integers(0, 256, u.nbytes, dtype=np.uint8).tobytes()
    for inverse in (False, True):
        want = numpy_permute(buf, u, ColMajor(), inverse)
        RR, CC = (C, R) if inverse else (R, C)
        for t in (1, 2, 3, 7):
            assert _kernels.transpose(buf, RR, CC, bits, msb, t) == want


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("R,C", [(64, 64), (96, 160), (512, 512), (576, 640), (130, 1090),
                                 (1030, 66)])
def test_transpose_kernel_simd_paths_agree(bits, R, C):
    # the AVX2 tiles (where the CPU has them) against the SSE2 / portable ones
    rng = np.random.default_rng(R * 13 + C + bits)
    u = P.Units(R * C, bits, R, C)
    buf = rng.integers(0, 256, u.nbytes, dtype=np.uint8).tobytes()
    want = numpy_permute(buf, u, ColMajor(), False)
    was = _kernels.simd()
    try:
        for on in (False, True):
            _kernels.simd(on)
            for t in (1, 3):
                assert _kernels.transpose(buf, R, C, bits, False, t) == want
    finally:
        _kernels.simd(was == "avx2")
