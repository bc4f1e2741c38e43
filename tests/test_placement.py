"""§5.2–§5.5: the registered placements byte for byte, their size rules in
grit_check, and the laws L1–L3 over every registered grade they apply to."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import grit
from grit import descriptor as D
from grit import layouts as L
from grit import diagnose, plane_sizes
from grit.errors import Status
from grit import parse_layout
from grit.placement.registered import pack_k4_12b, unpack_k4_12b

Q8 = grit.register_grade("grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)")
GRADES = [grit.GRADE_MXFP4, grit.GRADE_MXFP4_RNE, grit.GRADE_Q4KS, grit.GRADE_NVF4,
          grit.GRADE_NVF4_RTZ, grit.GRADE_I8S24]
REGISTERED = [L.ROW_MAJOR, L.COL_MAJOR, L.TILE_16X16, L.SWIZZLE_128X4B, L.BLOCK_AOS,
              L.LINEAR_META, L.META_M16N8K32, L.PACK_K4_12B]
EXPRS = [parse_layout(t) for t in ("Compose(Tile(ColMajor,[2,4]),Perm([1,0]))",
                                   "Swizzle(2,0,3)", "Interleave(Perm([1,0,3,2]),1)",
                                   "Tile(ColMajor,[16,8])")]
POOL = REGISTERED + EXPRS
_CACHE: dict = {}


def arr(grade, shape, seed=0):
    key = (grade.id, shape, seed)
    if key not in _CACHE:
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 3
        _CACHE[key] = grit.encode(x, grade)
    return _CACHE[key]


def bits(a):
    return grit.decode(a).view(np.uint32)


def try_relayout(x, p):
    try:
        return grit.relayout(x, p)
    except grit.GritLayoutError:
        return None


def nibbles(buf):
    b = np.frombuffer(bytes(buf), np.uint8)
    return np.stack([b & 15, b >> 4], axis=1).reshape(-1)


# --- which placement applies where (the docs/placements.md table) ------------------------

APPLIES = {   # shape (128, 512), group axis last
    "GRADE_MXFP4": {"ROW_MAJOR", "COL_MAJOR", "TILE_16X16", "SWIZZLE_128X4B", "BLOCK_AOS"},
    "GRADE_Q4KS": {"ROW_MAJOR", "COL_MAJOR", "TILE_16X16", "BLOCK_AOS", "PACK_K4_12B"},
    "GRADE_NVF4": {"ROW_MAJOR", "COL_MAJOR", "TILE_16X16", "SWIZZLE_128X4B"},
    "GRADE_I8S24": {"ROW_MAJOR", "COL_MAJOR", "TILE_16X16", "BLOCK_AOS", "LINEAR_META",
                    "META_M16N8K32"},
}


@pytest.mark.parametrize("name", sorted(APPLIES))
def test_applicability_table_and_L1(name):
    g = grit.grade.REGISTERED_GRADES[name]
    x = arr(g, (128, 512))
    ref = bits(x)
    got = set()
    for w in REGISTERED:
        y = try_relayout(x, w)
        if y is None:
            continue
        got.add(grit.placement.words.placement_name(w))
        assert (bits(y) == ref).all()                                      # L1
        assert grit.relayout(y, grit.layouts.ROW_MAJOR) == grit.relayout(x, L.ROW_MAJOR)
    assert got == APPLIES[name]


@pytest.mark.parametrize("g", GRADES, ids=lambda g: g.name)
def test_L2_every_pair_of_registered_placements(g):
    """Every ordered pair (p1, p2) of registered placements that apply:
    p1 then p2 equals p2 directly, and p then p is the identity."""
    x = arr(g, (128, 512))
    placed = {w: y for w in REGISTERED if (y := try_relayout(x, w)) is not None}
    assert len(placed) >= 4
    for w1, y1 in placed.items():
        assert grit.relayout(y1, w1) is y1 or w1 == L.ROW_MAJOR
        for w2, y2 in placed.items():
            d = y2.descriptor
            z = grit.relayout(y1, data=d.placement_data, scale=d.placement_scale,
                              meta=d.placement_meta or None)
            assert z == y2, (w1, w2)


@st.composite
def cases(draw):
    g = draw(st.sampled_from(GRADES))
    shape = draw(st.sampled_from([(128, 512), (16, 256), (256, 128), (4, 8, 64)]))
    x = arr(g, shape, draw(st.integers(0, 2)))
    ok = [p for p in POOL if try_relayout(x, p) is not None]
    return x, draw(st.sampled_from(ok)), draw(st.sampled_from(ok)), draw(st.sampled_from(ok))


@given(cases())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_L1_L2_over_registered_grades(c):
    x, p0, p1, p2 = c
    ref = bits(x)
    y0 = grit.relayout(x, p0)
    y1 = grit.relayout(y0, p1)
    assert (bits(y0) == ref).all() and (bits(y1) == ref).all()              # L1
    assert grit.relayout(y1, data=y1.placements[0], scale=y1.placements[1],
                         meta=y1.placements[2] or None) is y1               # L2: p ← p = id
    for y in (y0, y1):
        d = y.descriptor
        direct = grit.relayout(x, data=d.placement_data, scale=d.placement_scale,
                               meta=d.placement_meta or None)
        via = grit.relayout(y0, data=d.placement_data, scale=d.placement_scale,
                            meta=d.placement_meta or None)
        assert direct == via == y                                           # L2: composition
    back = grit.relayout(grit.relayout(y1, p2), L.ROW_MAJOR)
    assert back == grit.relayout(x, L.ROW_MAJOR)


def test_relayout_keeps_note_and_sets_interleaved():
    x = arr(grit.GRADE_MXFP4, (16, 256))
    x = grit.GritArray(x.descriptor.with_note(D.NOTE_ASSUMED | 0x0700), x.shape, x.planes)
    y = grit.relayout(x, L.BLOCK_AOS)
    assert y.descriptor.note == D.NOTE_ASSUMED | 0x0700                    # §12: sticky
    assert y.descriptor.flags & D.F_INTERLEAVED and y.plane_bytes[1:] == (0, 0, 0)
    z = grit.relayout(y, L.COL_MAJOR)
    assert z.descriptor.note & D.NOTE_ASSUMED and not z.descriptor.flags & D.F_INTERLEAVED
    assert z.gid != x.gid and x.canonical() is x                           # placements are framed


# --- byte-level definitions ---------------------------------------------------------------


def test_col_major_moves_elements_not_bytes():
    x = arr(grit.GRADE_MXFP4, (3, 64))
    y = grit.relayout(x, L.COL_MAJOR)
    e, f = nibbles(x.planes[0]), nibbles(y.planes[0])
    R, C = 3, 64
    for r in range(R):
        for c in range(C):
            assert f[c * R + r] == e[r * C + c]
    s, t = np.frombuffer(x.planes[1], np.uint8), np.frombuffer(y.planes[1], np.uint8)
    assert all(t[c * R + r] == s[r * 2 + c] for r in range(R) for c in range(2))


def test_tile_16x16_bytes_and_nibbles():
    x = arr(Q8, (32, 512))
    y = grit.relayout(x, data=L.TILE_16X16)
    a, b = np.frombuffer(x.planes[0], np.int8), np.frombuffer(y.planes[0], np.int8)
    C = 512
    for r in (0, 5, 16, 31):
        for c in (0, 15, 16, 200, 511):
            t = (r // 16) * (C // 16) + c // 16
            assert b[t * 256 + (r % 16) * 16 + c % 16] == a[r * C + c]
    m = arr(grit.GRADE_MXFP4, (16, 32))
    n = grit.relayout(m, data=L.TILE_16X16)
    e, f = nibbles(m.planes[0]), nibbles(n.planes[0])
    assert all(f[(c // 16) * 256 + r * 16 + c % 16] == e[r * 32 + c]
               for r in range(16) for c in range(32))


def test_swizzle_128x4b_is_the_32x4x4_tile_layout():
    x = arr(grit.GRADE_MXFP4, (256, 256))          # scale grid 256 x 8: 2 x 2 tiles
    y = grit.relayout(x, L.SWIZZLE_128X4B)
    assert y.placements == (L.ROW_MAJOR, L.SWIZZLE_128X4B, 0) and y.planes[0] == x.planes[0]
    s, t = np.frombuffer(x.planes[1], np.uint8), np.frombuffer(y.planes[1], np.uint8)
    for r in range(256):
        for c in range(8):
            off = ((r // 128) * 2 + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4
            assert t[off] == s[r * 8 + c]


def test_swizzle_applies_to_8bit_level0_scales_only():
    for g in (grit.GRADE_Q4KS, grit.GRADE_I8S24):
        with pytest.raises(grit.GritLayoutError, match="SWIZZLE_128X4B"):
            grit.relayout(arr(g, (128, 512)), scale=L.SWIZZLE_128X4B)
    with pytest.raises(grit.GritLayoutError, match="128x4"):
        grit.relayout(arr(grit.GRADE_MXFP4, (64, 128)), L.SWIZZLE_128X4B)
    nv = grit.relayout(arr(grit.GRADE_NVF4, (128, 64)), L.SWIZZLE_128X4B)
    assert nv.planes[2] == arr(grit.GRADE_NVF4, (128, 64)).planes[2]   # per-tensor s1 fixed


def test_meta_m16n8k32_register_order():
    x = arr(grit.GRADE_I8S24, (32, 64))            # quad grid 32 x 16: 2 x 2 tiles
    y = grit.relayout(x, meta=L.META_M16N8K32)
    a, b = nibbles(x.planes[3]), nibbles(y.planes[3])
    words = np.frombuffer(y.planes[3], "<u4")
    for r in range(32):
        for j in range(16):
            tile = (r // 16) * 2 + j // 8
            rr, jj = r % 16, j % 8
            g, half, h, k = rr % 8, rr // 8, jj // 4, jj % 4
            p = tile * 128 + (2 * g + h) * 8 + half * 4 + k
            assert b[p] == a[r * 16 + j]
            w = words[tile * 16 + 2 * g + h]
            assert (w >> (16 * half + 4 * k)) & 15 == a[r * 16 + j]
    assert y.planes[0] == x.planes[0] and y.planes[1] == x.planes[1]
    grit.check(y.descriptor, y.shape, y.planes, level=2)    # the ASC_LSB check is per quad


def test_meta_m16n8k32_applies_to_2of4_u2_8bit_only():
    g = grit.register_grade("grit1(e=s8,k0=32,s0=binary16,sp=2:4:u4:asclsb,esr=ratiomaxabs)")
    with pytest.raises(grit.GritLayoutError, match="m16n8k32"):
        grit.relayout(arr(g, (16, 64)), meta=L.META_M16N8K32)
    with pytest.raises(grit.GritLayoutError):
        grit.relayout(arr(grit.GRADE_I8S24, (8, 64)), meta=L.META_M16N8K32)
    with pytest.raises(grit.GritLayoutError, match="meta"):
        grit.relayout(arr(grit.GRADE_Q4KS, (1, 256)), meta=L.META_M16N8K32)


def test_pack_k4_12b_equals_ggml_get_scale_min():
    gguf = pytest.importorskip("gguf")
    b = np.random.default_rng(3).integers(0, 256, (4096, 12), dtype=np.uint8)
    sc, m = unpack_k4_12b(b)
    rs, rm = gguf.quants.Q4_K.get_scale_min(b)
    assert (sc == rs).all() and (m == rm).all()
    assert (pack_k4_12b(sc, m) == b).all()         # a bijection on the 96 bits


def test_pack_k4_12b_relayout_and_sizes():
    x = arr(grit.GRADE_Q4KS, (2, 512))
    y = grit.relayout(x, L.PACK_K4_12B)
    assert y.placements == (L.ROW_MAJOR, L.PACK_K4_12B, L.PACK_K4_12B)
    assert y.plane_bytes == (512, 4 * 12, 16, 0)
    sc = np.frombuffer(x.planes[1], np.uint8).reshape(4, 8)
    m = np.frombuffer(x.planes[3], np.uint8).reshape(4, 8)
    assert y.planes[1] == pack_k4_12b(sc, m).tobytes()
    # scales and mins travel together, either way round
    assert grit.relayout(x, meta=L.PACK_K4_12B) == y
    assert grit.relayout(y, scale=L.ROW_MAJOR) == grit.relayout(x, L.ROW_MAJOR)
    with pytest.raises(grit.GritLayoutError, match="together"):
        grit.relayout(x, scale=L.PACK_K4_12B, meta=L.ROW_MAJOR)
    for g in (grit.GRADE_MXFP4, grit.GRADE_NVF4, grit.GRADE_I8S24):
        with pytest.raises(grit.GritLayoutError, match="PACK_K4_12B"):
            grit.relayout(arr(g, (2, 256)), L.PACK_K4_12B)


def test_block_aos_field_order_and_sizes():
    x = arr(grit.GRADE_MXFP4, (1, 64))
    y = grit.relayout(x, L.BLOCK_AOS)
    d, s = bytes(x.planes[0]), bytes(x.planes[1])
    assert bytes(y.planes[0]) == s[0:1] + d[0:16] + s[1:2] + d[16:32]
    q = arr(grit.GRADE_Q4KS, (256,))
    z = grit.relayout(q, L.BLOCK_AOS)             # block = the 256-element super-block
    assert bytes(z.planes[0]) == b"".join(bytes(p) for p in (q.planes[2], q.planes[1],
                                                             q.planes[3], q.planes[0]))
    assert z.plane_bytes == (148, 0, 0, 0)
    zp = grit.relayout(q, data=L.BLOCK_AOS, scale=L.PACK_K4_12B)
    assert zp.plane_bytes == (144, 0, 0, 0)        # ggml's block_q4_K
    sp = arr(grit.GRADE_I8S24, (32,))
    w = grit.relayout(sp, L.BLOCK_AOS)
    assert bytes(w.planes[0]) == bytes(sp.planes[1]) + bytes(sp.planes[3]) + bytes(sp.planes[0])
    with pytest.raises(grit.GritLayoutError, match="per-tensor"):
        grit.relayout(arr(grit.GRADE_NVF4, (1, 64)), L.BLOCK_AOS)


def test_interleave_expression_orders_elements_inside_blocks():
    x = arr(grit.GRADE_MXFP4, (1, 64))
    e = parse_layout("Interleave(Perm(" + str(list(range(31, -1, -1))).replace(" ", "") + "),1)")
    y = grit.relayout(x, data=e)
    n = nibbles(bytes(y.planes[0])[1:17])
    assert (n == nibbles(bytes(x.planes[0])[:16])[::-1]).all()
    assert y.descriptor.flags & D.F_INTERLEAVED and y.placements[0] >> 60 == 0x8
    assert (bits(y) == bits(x)).all()


# --- grit_check: the size rules and step-3 pairings ---------------------------------------


def test_plane_sizes_follow_pack_and_interleave():
    d = grit.GRADE_Q4KS.descriptor()
    assert plane_sizes(d, [512]).sizes == (256, 16, 8, 16)
    dp = d.replace(placement_scale=L.PACK_K4_12B, placement_meta=L.PACK_K4_12B)
    assert plane_sizes(dp, [512]).sizes == (256, 24, 8, 0)
    di = dp.replace(placement_data=L.BLOCK_AOS, flags=d.flags | D.F_INTERLEAVED)
    assert plane_sizes(di, [512]).sizes == (288, 0, 0, 0)
    det = diagnose(di, [512], [288, 1, 0, 0])
    assert det.status == Status.SIZE_MISMATCH and "INTERLEAVED" in det.render()


def test_half_a_pack_passes_step3_and_keeps_the_written_sizes():
    # §7.3 step 3 admits the word; the 12-byte size rule needs both roles packed, so the
    # planes keep the sizes step 4 writes, and the reader refuses the half pack
    d = grit.GRADE_Q4KS.descriptor().replace(placement_scale=L.PACK_K4_12B)   # meta not packed
    assert diagnose(d, [256], [128, 8, 4, 8]).status == Status.OK
    assert diagnose(d, [256], [128, 12, 4, 0]).status == Status.SIZE_MISMATCH
    x = grit.GritArray(d, (256,), [bytes(128), bytes(8), bytes(4), bytes(8)])
    with pytest.raises(grit.GritLayoutError, match="both be PACK_K4_12B"):
        grit.decode(x)


@pytest.mark.parametrize("change", [
    dict(flags=0x21 | D.F_INTERLEAVED),                                  # ROW_MAJOR data
    dict(placement_data=L.COL_MAJOR, flags=0x21 | D.F_INTERLEAVED),
])
def test_interleaved_flag_against_its_data_placement_is_step2(change):
    # docs/spec-decisions.md "interleaved-flag": a flag contradicting the data word is an
    # inconsistent frame (§7.1), step 2 -- before step 3 and step 4 look at anything
    det = diagnose(grit.GRADE_Q4KS.descriptor().replace(**change), [256], [128, 8, 4, 8])
    assert (det.status, det.step, det.field) == (Status.GRADE_UNKNOWN, 2, "flags")


def test_block_aos_without_the_flag_passes_step3_as_written():
    # §7.3 step 3 admits every registered class-0x1 word; without the flag the planes are
    # separate and step 4's equations size them as written
    d = grit.GRADE_Q4KS.descriptor().replace(placement_data=L.BLOCK_AOS)
    assert diagnose(d, [256], [128, 8, 4, 8]).status == Status.OK


def test_pack_on_a_grade_it_does_not_fit_is_refused_by_the_reader():
    d = grit.GRADE_MXFP4.descriptor().replace(placement_scale=L.PACK_K4_12B)
    assert diagnose(d, [32], [16, 1, 0, 0]).status == Status.OK      # step 3 as written
    with pytest.raises(grit.GritLayoutError, match="k1 = 8"):
        grit.decode(grit.GritArray(d, (32,), [bytes(16), b"\x7f", b"", b""]))


def test_hashed_data_placement_may_interleave():
    d = grit.GRADE_MXFP4.descriptor().replace(placement_data=0x8123456789ABCDEF,
                                              flags=D.F_INTERLEAVED)
    assert diagnose(d, [32], [17, 0, 0, 0]).status == Status.OK


# --- L3, unresolvable words, targets ------------------------------------------------------


def test_opaque_is_never_relayouted():
    x = arr(grit.GRADE_MXFP4, (16, 64))
    o = grit.GritArray(x.descriptor.replace(placement_scale=L.OPAQUE), x.shape, x.planes)
    for f in (grit.decode, grit.canonical, lambda a: grit.relayout(a, L.COL_MAJOR)):
        with pytest.raises(grit.GritLayoutError, match="L3"):
            f(o)
    with pytest.raises(grit.GritLayoutError, match="L3"):
        grit.relayout(x, data=parse_layout("Opaque(nv,00)"))


def test_unresolvable_hashed_placement_is_refused():
    x = arr(grit.GRADE_MXFP4, (16, 64))
    h = grit.GritArray(x.descriptor.replace(placement_data=0x8ABCDEF012345678), x.shape,
                       x.planes)
    with pytest.raises(grit.GritLayoutError, match="resolves to no layout"):
        grit.decode(h)


def test_bad_targets():
    x = arr(grit.GRADE_MXFP4, (16, 64))
    with pytest.raises(grit.GritLayoutError, match="UNSPECIFIED"):
        grit.relayout(x, data=0)
    with pytest.raises(grit.GritLayoutError, match="aux plane"):
        grit.relayout(x, meta=L.LINEAR_META)
    with pytest.raises(grit.GritLayoutError):
        grit.relayout(x, 0x1000000000000099)
    with pytest.raises(grit.GritUsageError):
        grit.relayout(x, 1.5)
    with pytest.raises(grit.GritUsageError):
        grit.relayout(np.zeros(4), L.ROW_MAJOR)
    with pytest.raises(grit.GritLayoutError, match="zero points"):
        grit.relayout(arr(grit.GRADE_Q4KS, (256,)), meta=L.LINEAR_META)


def test_decode_reads_every_placement_and_unspecified():
    x = arr(grit.GRADE_I8S24, (16, 64))
    y = grit.relayout(x, data=L.COL_MAJOR, scale=L.COL_MAJOR,
                      meta=L.META_M16N8K32)
    assert (grit.decode(y) == grit.decode(x)).all() and (y.decode() == x.decode()).all()
    u = grit.GritArray(x.descriptor.replace(placement_data=0, placement_scale=0), x.shape,
                       x.planes)
    assert u.canonical() is u and (bits(u) == bits(x)).all()


def test_check_levels_2_and_3_read_any_placement():
    sp = arr(grit.GRADE_I8S24, (128, 512))
    for y in (grit.relayout(sp, L.BLOCK_AOS), grit.relayout(sp, meta=L.META_M16N8K32),
              grit.relayout(sp, L.COL_MAJOR)):
        assert grit.check(y.descriptor, y.shape, y.planes, level=3).status == Status.OK
    bad = bytearray(sp.planes[3])
    bad[0] = 0x03                                    # quad 0 names {3, 0}: not ascending
    b = grit.GritArray(sp.descriptor, sp.shape, [sp.planes[0], sp.planes[1], b"", bytes(bad)])
    y = grit.relayout(b, L.BLOCK_AOS)
    with pytest.raises(grit.GritDigestError):
        grit.check(y.descriptor, y.shape, y.planes, level=2)
    q = arr(grit.GRADE_Q4KS, (64, 512))
    for y in (grit.relayout(q, L.BLOCK_AOS), grit.relayout(q, L.PACK_K4_12B)):
        assert grit.check(y.descriptor, y.shape, y.planes, level=3).status == Status.OK
    o = q.descriptor.replace(placement_data=L.OPAQUE)
    assert "skipped" in grit.check(o, q.shape, q.planes, level=3).warnings[0]
