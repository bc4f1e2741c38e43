"""The array laws on GritArray: slicing (L5), transpose (L4), concat, and the
metadata-order requirement of sparse kernels (L6)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grit
from grit import descriptor as D
from grit import layouts as L

GRADES = [grit.GRADE_MXFP4, grit.GRADE_Q4KS, grit.GRADE_NVF4, grit.GRADE_I8S24]
_CACHE: dict = {}


def arr(grade, shape, seed=0, axis=None):
    key = (grade.id, shape, seed, axis)
    if key not in _CACHE:
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        _CACHE[key] = grit.encode(x, grade, group_axis=axis)
    return _CACHE[key]


def same(a, ref):
    return np.array_equal(grit.decode(a).view(np.uint32), np.ascontiguousarray(ref).view(np.uint32))


def is_view(a, base):
    """Every present plane is a memoryview into base's planes (zero-copy)."""
    out = True
    for p, q in zip(a.planes, base.planes):
        if len(memoryview(p)) == 0:
            continue
        out &= p is q or isinstance(p, memoryview) and np.shares_memory(np.frombuffer(p, np.uint8),
                                                               np.frombuffer(q, np.uint8))
    return out


# --- slicing ---------------------------------------------------------------------------


@pytest.mark.parametrize("g", GRADES, ids=lambda g: g.name)
def test_row_slices_are_views(g):
    a = arr(g, (6, 4, 512))
    ref = grit.decode(a)
    for key in [(slice(1, 3),), (2,), (2, slice(1, 3)), (2, 3), (slice(None, 1),)]:
        b = a[key]
        assert same(b, ref[key]) and is_view(b, a)
        assert b.descriptor.group_axis == b.ndim - 1


@pytest.mark.parametrize("g", GRADES, ids=lambda g: g.name)
def test_non_contiguous_selections_are_copies(g):
    a = arr(g, (6, 4, 512))
    ref = grit.decode(a)
    for key in [(slice(None), slice(1, 3)), (..., slice(256, 512)), (slice(1, 5), 0, slice(0, 256))]:
        b = a[key]
        assert same(b, ref[key]) and not is_view(b, a)


@pytest.mark.parametrize("g,bad,msg", [
    (grit.GRADE_MXFP4, slice(16, 48), "multiple of k0 = 32"),
    (grit.GRADE_MXFP4, slice(0, 48), "end 48"),
    (grit.GRADE_Q4KS, slice(32, 288), "k0·k1"),         # level-0 aligned, level-1 not
    (grit.GRADE_NVF4, slice(8, 24), "k0 = 16"),
    (grit.GRADE_I8S24, slice(2, 34), "k0 = 32"),
])
def test_L5_misaligned_group_axis_slices_raise(g, bad, msg):
    a = arr(g, (2, 512))
    with pytest.raises(grit.GritLayoutError, match=msg) as e:
        a[:, bad]
    assert "L5" in str(e.value)


def test_L5_other_refusals():
    a = arr(grit.GRADE_MXFP4, (2, 64))
    with pytest.raises(grit.GritLayoutError, match="L5"):
        a[:, 3]                                   # one element of a group
    with pytest.raises(grit.GritLayoutError, match="step"):
        a[:, ::2]
    with pytest.raises(grit.GritUsageError):
        a[::2]
    with pytest.raises(grit.GritUsageError):
        a[None]
    with pytest.raises(grit.GritUsageError):
        a[5]
    with pytest.raises(grit.GritUsageError):
        a[0, 0, 0]


def test_aligned_group_axis_slices_keep_values():
    for g, q in ((grit.GRADE_MXFP4, 32), (grit.GRADE_Q4KS, 256), (grit.GRADE_NVF4, 16),
                 (grit.GRADE_I8S24, 32)):
        a = arr(g, (3, 1024))
        ref = grit.decode(a)
        for s, e in ((q, 3 * q), (0, q), (1024 - q, 1024), (q, q)):
            assert same(a[:, s:e], ref[:, s:e])
        assert same(a[1, q:2 * q], ref[1, q:2 * q]) and is_view(a[1, q:2 * q], a)


def test_one_dimensional_slices():
    a = arr(grit.GRADE_Q4KS, (1024,))
    b = a[256:768]
    assert same(b, grit.decode(a)[256:768]) and is_view(b, a) and b.shape == (512,)
    with pytest.raises(grit.GritLayoutError, match="L5"):
        a[32:288]


def test_slices_along_a_non_last_group_axis():
    a = arr(grit.GRADE_MXFP4, (64, 3, 5), axis=0)
    ref = grit.decode(a)
    for key in [(slice(32, 64),), (slice(None), 1), (slice(None), slice(1, 3), 4), (..., 2)]:
        b = a[key]
        assert same(b, ref[key])
    assert a[:, 1].descriptor.group_axis == 0
    with pytest.raises(grit.GritLayoutError, match="L5"):
        a[16:48]


def test_level1_groups_that_straddle_rows():
    g = grit.register_grade("grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,"
                            "esr=affineminmax)")
    a = arr(g, (8, 128))              # 4 groups per row, level-1 groups span 2 rows
    ref = grit.decode(a)
    assert same(a[2:6], ref[2:6])     # whole level-1 groups: fine
    with pytest.raises(grit.GritLayoutError, match="level-1"):
        a[1:3]
    with pytest.raises(grit.GritLayoutError, match="straddle"):
        a[:, 0:64]


def test_per_tensor_scale_survives_slicing():
    a = arr(grit.GRADE_NVF4, (4, 64))
    b = a[1:3, 16:48]
    assert b.planes[2] == a.planes[2] and same(b, grit.decode(a)[1:3, 16:48])


def test_slice_keeps_note_and_needs_canonical_placement():
    a = arr(grit.GRADE_MXFP4, (4, 64))
    n = grit.GritArray(a.descriptor.with_note(D.NOTE_ASSUMED), a.shape, a.planes)
    assert n[1:2].descriptor.note & D.NOTE_ASSUMED
    assert n[:, 32:64].descriptor.note & D.NOTE_ASSUMED
    with pytest.raises(grit.GritLayoutError, match="ROW_MAJOR"):
        grit.relayout(a, L.COL_MAJOR)[1:2]


def test_sparse_irregular_metadata_is_refused():
    g = grit.register_grade("grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:unord,esr=ratiomaxabs)")
    u = grit.GritArray(g.descriptor(group_axis=1), (2, 32), [bytes(32), bytes(4), b"",
                                                bytes([0x55] * 8)])   # every quad {1, 1}
    with pytest.raises(grit.GritLayoutError, match="distinct"):
        u[1:2]


@given(st.sampled_from(GRADES), st.integers(0, 5), st.integers(0, 6), st.integers(0, 3),
       st.integers(0, 4))
@settings(max_examples=60, deadline=None)
def test_slicing_equals_decode_then_slice(g, r0, r1, c0, c1):
    a = arr(g, (6, 1024))
    q = 256 if g.n_levels == 2 and g.k1 else g.k0
    r0, r1 = min(r0, r1), max(r0, r1)
    c0, c1 = min(c0, c1) * q, max(c0, c1) * q
    assert same(a[r0:r1, c0:c1], grit.decode(a)[r0:r1, c0:c1])


# --- transpose (L4) ----------------------------------------------------------------------


@pytest.mark.parametrize("g", GRADES, ids=lambda g: g.name)
def test_transpose_of_non_group_axes(g):
    a = arr(g, (3, 5, 256))
    ref = grit.decode(a)
    t = a.transpose(1, 0, 2)
    assert t.shape == (5, 3, 256) and same(t, ref.transpose(1, 0, 2))
    assert t.descriptor.group_axis == 2
    assert a.transpose(0, 1, 2) is a
    b = arr(g, (3, 256, 5), axis=1)
    assert same(b.T, grit.decode(b).T) and b.T.descriptor.group_axis == 1


@pytest.mark.parametrize("axes", [(1, 0), None])
def test_L4_group_axis_transpose_does_not_exist(axes):
    a = arr(grit.GRADE_MXFP4, (4, 64))
    with pytest.raises(grit.GritLayoutError, match="requantize") as e:
        a.transpose(axes) if axes else a.T
    assert "L4" in str(e.value)
    r = grit.requantize(grit.decode(a).T, grit.GRADE_MXFP4, group_axis=0)
    assert r.array.shape == (64, 4) and r.requantized


def test_transpose_with_straddling_level1_groups():
    g = grit.register_grade("grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,"
                            "esr=affineminmax)")
    a = arr(g, (2, 4, 128))           # level-1 groups span 2 rows of the 4
    with pytest.raises(grit.GritLayoutError, match="level-1"):
        a.transpose(1, 0, 2)
    b = arr(g, (4, 2, 128))           # rows (i, 0) and (i, 1) share a level-1 group
    assert same(b[:2], grit.decode(b)[:2])


# --- concat ------------------------------------------------------------------------------


@pytest.mark.parametrize("g", [grit.GRADE_MXFP4, grit.GRADE_Q4KS, grit.GRADE_I8S24],
                         ids=lambda g: g.name)
def test_concat_along_every_axis(g):
    a, b = arr(g, (2, 3, 512), 1), arr(g, (2, 3, 512), 2)
    ra, rb = grit.decode(a), grit.decode(b)
    for ax in (0, 1, 2, -1):
        c = grit.concat([a, b, a], axis=ax)
        assert same(c, np.concatenate([ra, rb, ra], axis=ax))


def test_concat_rules():
    a = arr(grit.GRADE_MXFP4, (2, 64))
    n = grit.GritArray(a.descriptor.with_note(D.NOTE_ASSUMED), a.shape, a.planes)
    assert grit.concat([a, n]).descriptor.note & D.NOTE_ASSUMED      # sticky
    assert grit.concat([a]) is a
    with pytest.raises(grit.GritGradeError):
        grit.concat([a, arr(grit.GRADE_MXFP4_RNE, (2, 64))])
    with pytest.raises(grit.GritUsageError):
        grit.concat([a, arr(grit.GRADE_MXFP4, (2, 96))], axis=0)
    with pytest.raises(grit.GritUsageError):
        grit.concat([])
    nv1, nv2 = arr(grit.GRADE_NVF4, (2, 64), 1), arr(grit.GRADE_NVF4, (2, 64), 2)
    with pytest.raises(grit.GritLayoutError, match="per-tensor"):
        grit.concat([nv1, nv2])
    assert same(grit.concat([nv1, nv1[:1]]), grit.decode(grit.concat([nv1, nv1[:1]])))


def test_concat_of_placed_arrays_keeps_their_placement():
    a = grit.relayout(arr(grit.GRADE_Q4KS, (2, 512)), data=L.BLOCK_AOS, scale=L.PACK_K4_12B)
    b = grit.relayout(arr(grit.GRADE_Q4KS, (2, 512), 5), data=L.BLOCK_AOS, scale=L.PACK_K4_12B)
    c = grit.concat([a, b], axis=0)
    assert c.placements == a.placements and c.descriptor.flags & D.F_INTERLEAVED
    assert same(c, np.concatenate([grit.decode(a), grit.decode(b)]))


def test_concat_with_straddling_level1_groups():
    g = grit.register_grade("grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,"
                            "esr=affineminmax)")
    a, b = arr(g, (4, 128), 1), arr(g, (2, 128), 2)
    assert same(grit.concat([a, b]), np.concatenate([grit.decode(a), grit.decode(b)]))
    with pytest.raises(grit.GritLayoutError):
        grit.concat([a, a], axis=1)


# --- L6 ------------------------------------------------------------------------------------


def test_L6_unordered_metadata_is_rejected():
    g = grit.register_grade("grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:unord,esr=ratiomaxabs)")
    u = arr(g, (2, 64))
    with pytest.raises(grit.GritLayoutError, match="L6"):
        grit.require_metadata_order(u)
    s = arr(grit.GRADE_I8S24, (2, 64))
    assert grit.require_metadata_order(s, verify=True) is s
    assert grit.require_metadata_order(arr(grit.GRADE_MXFP4, (2, 64))) is not None
    bad = grit.GritArray(s.descriptor, s.shape, [s.planes[0], s.planes[1], b"",
                                                bytes([0x3] + [0xCC] * 15)])
    assert grit.require_metadata_order(bad) is bad          # the declaration is ASC_LSB ...
    with pytest.raises(grit.GritDigestError):
        grit.require_metadata_order(bad, verify=True)       # ... the bytes are not
