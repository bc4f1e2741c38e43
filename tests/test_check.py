"""§7 / §14: grit_check — statuses, step order, size equations, degenerate and
hostile inputs."""
import os
import random

import numpy as np

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import grit
from grit import Status
from grit import descriptor as D
from grit import diagnose, plane_sizes

MX = grit.GRADE_MXFP4.descriptor()
Q4 = grit.GRADE_Q4KS.descriptor()
NV = grit.GRADE_NVF4.descriptor()
SP = grit.GRADE_I8S24.descriptor()


# --- size equations, derived by hand from §10's plane tables --------------------------

@pytest.mark.parametrize("desc,shape,sizes", [
    # MXFP4: data numel/2, scale0 numel/32
    (MX, [32], (16, 1, 0, 0)), (MX, [4096], (2048, 128, 0, 0)), (MX.replace(group_axis=1), [8, 64], (256, 16, 0, 0)),
    # Q4KS per 256-element super-block: 128 data + 8 sc + 2x binary16 + 8 m = 148
    (Q4, [256], (128, 8, 4, 8)), (Q4.replace(group_axis=1), [4, 512], (1024, 64, 32, 64)),
    # NVF4: data numel/2, scale0 numel/16, scale1 one binary32
    (NV, [16], (8, 1, 4, 0)), (NV, [1024], (512, 64, 4, 0)),
    # I8S24: data numel/2 (survivors, s8), scale0 numel/16 (binary16 per 32), aux numel/8
    (SP, [32], (16, 2, 0, 4)), (SP.replace(group_axis=1), [128, 64], (4096, 512, 0, 1024)),
    (SP, [128, 64], (4096, 512, 0, 1024)),
    (MX, [0], (0, 0, 0, 0)),
])
def test_size_equations(desc, shape, sizes):
    assert plane_sizes(desc, shape).sizes == sizes
    assert grit.check(desc, shape, list(sizes)).status == Status.OK


def test_q4ks_superblock_is_148_bytes():
    assert sum(plane_sizes(Q4, [256]).sizes) == 148


@pytest.mark.parametrize("plane", range(4))
@pytest.mark.parametrize("delta", [-1, 1])
def test_every_plane_exact_not_at_least(plane, delta):
    sizes = list(plane_sizes(Q4, [512]).sizes)
    sizes[plane] += delta
    with pytest.raises(grit.GritSizeError) as ei:
        grit.check(Q4, [512], sizes)
    assert ei.value.status == Status.SIZE_MISMATCH and ei.value.detail.plane == plane


def test_spec_diagnostic_example_group_size():
    # §7.5: "scale0 plane is 128 bytes; descriptor requires 256. numel=8192, k0=32 ->
    # n_groups0=256 ... Likeliest cause: the checkpoint was quantised at group_size=64"
    with pytest.raises(grit.GritSizeError) as ei:
        grit.check(MX, [8192], [4096, 128, 0, 0])
    msg = str(ei.value)
    assert "scale0 plane is 128 bytes; descriptor requires 256" in msg
    assert "numel=8192, k0=32 -> n_groups0=256" in msg and "group_size=64" in msg
    det = ei.value.detail
    assert (det.field, det.expected, det.actual, det.plane) == ("scale0", 256, 128, 1)


@pytest.mark.parametrize("shape,needle", [
    ([33], "multiple of k0"), ([], "group_axis 0 is outside"), ([-32], "not an extent"),
    ([1 << 63], "not an extent"), ([1 << 40, 1 << 40], "overflows"), ([32] * 9, "rank 9"),
])
def test_shape_failures_are_size_mismatch(shape, needle):
    det = diagnose(MX, shape, [0, 0, 0, 0])
    assert det.status == Status.SIZE_MISMATCH and needle in det.message


def test_k1_must_divide_groups():
    det = diagnose(Q4, [32 * 12], [0, 0, 0, 0])  # 12 groups, k1 = 8
    assert det.status == Status.SIZE_MISMATCH and "k1 = 8" in det.message


# --- step 1: each frame condition, GradeUnknown ---------------------------------------

@pytest.mark.parametrize("change", [
    dict(magic=0x31545248), dict(hdr_bytes=65), dict(version=2), dict(n_levels=0),
    dict(n_levels=3), dict(flags=0x40), dict(flags=0x80), dict(frame_rsvd=1),
    dict(container=2), dict(k1=1), dict(scale1=0x356F), dict(flags=D.F_SPARSE | D.F_HAS_ZP),
    dict(flags=D.F_ZP_L1SCALED), dict(elem=0x2043 | 0x8000), dict(scale0=0x4807 | 0x1800),
    dict(zp_fmt=0x1800),
])
def test_step1_frame_failures(change):
    det = diagnose(MX.replace(**change), [32], [16, 1, 0, 0])
    assert det.status == Status.GRADE_UNKNOWN and det.step == 1


def test_zp_l1scaled_with_zp_and_two_levels_passes_step1():
    assert diagnose(Q4, [256], [128, 8, 4, 8]).status == Status.OK


# --- step 2 -----------------------------------------------------------------------------

def test_unknown_grade_id():
    det = diagnose(MX.replace(grade_id=0x1234), [32], [16, 1, 0, 0])
    assert det.status == Status.GRADE_UNKNOWN and det.step == 2 and "register_grade" in det.render()


@pytest.mark.parametrize("change,field", [
    (dict(k0=64), "k0"), (dict(elem=0x03E3), "elem"), (dict(scale0=0x2887), "scale0"),
    (dict(flags=D.F_MSB_FIRST), "flags"), (dict(container=1), "container"),
])
def test_frame_must_agree_with_grade(change, field):
    det = diagnose(MX.replace(**change), [64], [32, 1, 0, 0])
    assert det.status == Status.GRADE_UNKNOWN and det.step == 2 and det.field == field


def test_q4ks_spelled_int4_is_caught():
    det = diagnose(Q4.replace(elem=0x03E3), [256], [128, 8, 4, 8])
    assert det.field == "elem" and "int4" in det.render()


def test_run_time_registered_grade_is_known():
    g = grit.register_grade("grit1(e=e4m3,k0=128,s0=binary32,esr=ratiomaxabs)")
    d = g.descriptor(group_axis=1)
    assert grit.check(d, [2, 128], [256, 8, 0, 0]).grade == g


def test_interleaved_flag_is_not_a_grade_field():
    d = MX.replace(flags=D.F_INTERLEAVED, placement_data=grit.layouts.BLOCK_AOS)
    assert diagnose(d, [32], [16, 1, 0, 0]).step != 2


# --- step 3 -----------------------------------------------------------------------------

@pytest.mark.parametrize("word", [0x1000000000000099, 0x2000000000000001, 0x7FFFFFFFFFFFFFFF])
def test_unknown_placements(word):
    for f in ("placement_data", "placement_scale"):
        det = diagnose(MX.replace(**{f: word}), [32], [16, 1, 0, 0])
        assert det.status == Status.PLACEMENT_UNKNOWN and det.field == f


@pytest.mark.parametrize("word", [0, 0x8123456789ABCDEF, 0xFFFFFFFFFFFFFFFF,
                                  grit.layouts.TILE_16X16])
def test_legal_placement_classes(word):
    assert diagnose(MX.replace(placement_scale=word), [32], [16, 1, 0, 0]).status == Status.OK


def test_aux_presence_iff_meta_placement():
    det = diagnose(MX.replace(placement_meta=grit.layouts.LINEAR_META), [32], [16, 1, 0, 0])
    assert det.status == Status.PLACEMENT_UNKNOWN and det.field == "placement_meta"
    det = diagnose(SP.replace(placement_meta=0), [32], [16, 2, 0, 4])
    assert det.status == Status.PLACEMENT_UNKNOWN


# --- step order ---------------------------------------------------------------------------

def test_first_failure_wins():
    # frame + grade + placement + size all broken: frame reported
    d = MX.replace(version=9, grade_id=1, placement_data=0x2000000000000000)
    assert diagnose(d, [33], [1, 1, 1, 1]).step == 1
    d = MX.replace(grade_id=1, placement_data=0x2000000000000000)
    assert diagnose(d, [33], [1, 1, 1, 1]).step == 2
    d = MX.replace(placement_data=0x2000000000000000)
    assert diagnose(d, [33], [1, 1, 1, 1]).step == 3


# --- level 2 ------------------------------------------------------------------------------

B1 = bytes.fromhex("20426476a8caecfe") + bytes(8)


def test_level2_digest():
    planes = [B1, b"\x7f", b"", b""]
    dg = bytes.fromhex("9452a02851ba1a1d793b97df51266001")
    assert grit.check(MX, [32], planes, level=2, expected_digest=dg)
    bad = [B1[:-1] + b"\x01", b"\x7f", b"", b""]
    with pytest.raises(grit.GritDigestError) as ei:
        grit.check(MX, [32], bad, level=2, expected_digest=dg)
    assert ei.value.status == Status.DIGEST_MISMATCH
    # level 1 never reads the bytes
    assert grit.check(MX, [32], bad, level=1, expected_digest=dg)


def test_level2_sparse_metadata_order():
    data, scale = bytes([0x7F, 0x2A] * 8), bytes.fromhex("0c26")
    good = bytes([0xCC] * 4)           # B.2: indices (0, 3) per quad
    assert grit.check(SP, [32], [data, scale, b"", good], level=2)
    # nibble 0x3 = idx0 3 (bits 0..1), idx1 0 (bits 2..3): descending
    for meta, q in ((bytes([0xCC, 0x3C, 0xCC, 0xCC]), 3), (bytes([0xCC, 0xCC, 0xC3, 0xCC]), 4)):
        det = diagnose(SP, [32], [data, scale, b"", meta], level=2)
        assert det.status == Status.DIGEST_MISMATCH and det.plane == 3
        assert f"quad {q} is [3, 0]" in det.message
    equal = bytes([0xCC, 0xCC, 0xCC, 0x55])  # quad 6 = (1, 1): not strictly increasing
    det = diagnose(SP, [32], [data, scale, b"", equal], level=2)
    assert det.status == Status.DIGEST_MISMATCH and "quad 6" in det.message
    # unordered metadata is legal under SPORDER_UNORDERED (a different grade)
    assert diagnose(SP, [32], [data, scale, b"", equal], level=1).status == Status.OK


def test_level0_is_erased():
    assert grit.check(bytes(64), [3], [1, 2, 3, 4], level=0).status == Status.OK


# --- §14 degenerate patterns ----------------------------------------------------------------

@pytest.mark.parametrize("fill", [0x00, 0xFF])
@pytest.mark.parametrize("level", [1, 2, 3])
def test_degenerate_descriptors_are_grade_unknown_no_exception(fill, level):
    det = diagnose(bytes([fill]) * 64, [32], [b"", b"", b"", b""], level=level)
    assert det.status == Status.GRADE_UNKNOWN
    with pytest.raises(grit.GritGradeError):
        grit.check(bytes([fill]) * 64, [32], [0, 0, 0, 0], level=level)


def test_usage_errors_are_grit_errors():
    for args in (("not hex", [32], [0] * 4), (MX, "ab", [0] * 4), (MX, [32], [0] * 3),
                 (MX, [32], [0, 0, object(), 0]), (MX, [32.5], [0] * 4)):
        with pytest.raises(grit.GritError):
            grit.check(*args)
    with pytest.raises(grit.GritUsageError):
        grit.check(MX, [32], [16, 1, 0, 0], level=7)
    with pytest.raises(grit.GritUsageError):
        grit.check(MX, [32], [16, 1, 0, 0], level=2)  # sizes only at level 2


def test_level3_probe_warns_never_fails():
    # every scale identical across 64 groups while the groups' largest E2M1
    # elements span four binades (codes 1, 2, 4, 7: 0.5, 1, 2, 6): a
    # shared-exponent encoder would not give them one scale — advisory
    # warning, the check still passes
    n = 64 * 32
    data = bytearray(n // 2)
    for g in range(64):
        data[g * 16] = (1, 2, 4, 7)[g % 4]
    rep = grit.check(MX, [n], [bytes(data), bytes([0x7F]) * 64, b"", b""], level=3)
    assert rep.status == Status.OK and any("binades" in w for w in rep.warnings)
    # elements that show nothing (all zero): no evidence either way, no warning
    rep = grit.check(MX, [n], [bytes(n // 2), bytes([0x7F]) * 64, b"", b""], level=3)
    assert rep.status == Status.OK and not rep.warnings


def test_level3_probe_accepts_a_legitimately_narrow_e8m0_plane():
    # every group's maximum in one binade ([1, 2)): MXFP4's exp2floor scale
    # rule gives every group the same E8M0 code, and the elements show why —
    # each group's largest element is in E2M1's top binade (4 or 6)
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (64, 32)).astype(np.float32)
    x *= (rng.uniform(1, 1.99, (64, 1)) / np.abs(x).max(axis=1, keepdims=True)).astype(np.float32)
    a = grit.encode(x.reshape(-1), "GRADE_MXFP4")
    assert len(set(bytes(a.planes[1]))) == 1                  # one scale code for all
    rep = grit.check(a.descriptor, a.shape, list(a.planes), level=3)
    assert rep.status == Status.OK and not rep.warnings


def test_level3_probe_names_e8m0_scales_written_as_unbiased_exponents():
    """A writer that stored log2(scale) (two's complement) instead of
    log2(scale) + 127: read as E8M0, the bytes are 2^-127…2^-124 or 2^124…
    NaN; read as signed exponents they are 2^-4…2^3 (every element decodes
    to ~0 or to NaN/inf instead)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    a = grit.encode(x.reshape(-1), "GRADE_MXFP4")
    biased = np.frombuffer(bytes(a.planes[1]), np.uint8)
    assert np.abs(biased.astype(int) - 127).max() <= 4          # the scales of N(0, 1) groups
    unbiased = ((biased.astype(np.int16) - 127) & 0xFF).astype(np.uint8)
    rep = grit.check(a.descriptor, a.shape, [a.planes[0], unbiased.tobytes(), b"", b""],
                     level=3)
    [w] = [w for w in rep.warnings if "unbiased" in w]
    assert "64 of 64" in w and "bias" in w
    # the same scales, biased as the format says: no such warning
    rep = grit.check(a.descriptor, a.shape, list(a.planes), level=3)
    assert not [w for w in rep.warnings if "unbiased" in w]


def _swizzle_128x4(scales: np.ndarray) -> np.ndarray:
    """cuBLAS's block-scale layout, written from its description: 128×4
    tiles, row-major over the tiles, each tile stored as 32 rows of 16 bytes
    where row r of the tile, column c is byte (r % 32)·16 + (r // 32)·4 + c."""
    rows, cols = scales.shape
    out = np.empty(rows * cols, np.uint8)
    for i in range(rows):
        for j in range(cols):
            tile = (i // 128) * (cols // 4) + j // 4
            out[tile * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + j % 4] = scales[i, j]
    return out


def test_level3_probe_names_scales_stored_swizzled_where_row_major_is_declared():
    """Each row of a weight has its own magnitude, so its block scales follow
    the rows; stored in cuBLAS's 128×4 tile order under a row-major
    descriptor, the row-major reading loses that and the tiled one keeps it."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((256, 256)).astype(np.float32)
    x *= np.exp2(rng.uniform(-8, 8, (256, 1))).astype(np.float32)
    a = grit.encode(x, "GRADE_MXFP4")
    sc = np.frombuffer(bytes(a.planes[1]), np.uint8).reshape(256, 8)
    swz = _swizzle_128x4(sc)
    rep = grit.check(a.descriptor, a.shape, [a.planes[0], swz.tobytes(), b"", b""], level=3)
    [w] = [w for w in rep.warnings if "swizzled" in w]
    assert "η²" in w and rep.status == Status.OK
    # the row-major plane as written: no such warning
    rep = grit.check(a.descriptor, a.shape, list(a.planes), level=3)
    assert not [w for w in rep.warnings if "swizzled" in w]
    # no row structure at all (every row the same magnitude): no evidence, no warning
    b = grit.encode(rng.standard_normal((256, 256)).astype(np.float32), "GRADE_MXFP4")
    sb = _swizzle_128x4(np.frombuffer(bytes(b.planes[1]), np.uint8).reshape(256, 8))
    rep = grit.check(b.descriptor, b.shape, [b.planes[0], sb.tobytes(), b"", b""], level=3)
    assert not [w for w in rep.warnings if "swizzled" in w]


# --- fuzz: any 64 bytes, any shapes, any plane sizes -> one status, only GritError ------------

_FUZZ_ITER = int(os.environ.get("GRIT_FUZZ_ITER", "20000"))


def _one(desc, shape, sizes, level):
    try:
        det = diagnose(desc, shape, sizes, level=level)
    except grit.GritError:
        return None
    assert det.status in Status
    return det.status


def test_bounded_fuzz_random_and_mutated_descriptors():
    rng = random.Random(1234)
    seeds = [MX.to_bytes(), Q4.to_bytes(), NV.to_bytes(), SP.to_bytes()]
    extents = [0, 1, 2, 3, 4, 16, 32, 33, 256, 4096, -1, -(1 << 63), (1 << 63) - 1, 1 << 64]
    seen = set()
    for i in range(_FUZZ_ITER):
        if i % 3 == 0:
            desc = bytes(rng.getrandbits(8) for _ in range(64))
        else:
            b = bytearray(rng.choice(seeds))
            for _ in range(rng.randint(1, 3)):
                b[rng.randrange(64)] = rng.getrandbits(8)
            desc = bytes(b)
        shape = [rng.choice(extents) for _ in range(rng.randint(0, 9))]
        sizes = [rng.choice([0, 1, 4, 8, 16, -5, 1 << 70]) for _ in range(4)]
        seen.add(_one(desc, shape, sizes, rng.choice([1, 3])))
    assert Status.GRADE_UNKNOWN in seen and Status.SIZE_MISMATCH in seen


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=64, max_size=64),
       st.lists(st.integers(min_value=-(1 << 64), max_value=1 << 64), max_size=10),
       st.lists(st.one_of(st.integers(-(1 << 64), 1 << 64), st.binary(max_size=64)),
                min_size=4, max_size=4),
       st.sampled_from([0, 1, 2, 3]),
       st.one_of(st.none(), st.binary(min_size=16, max_size=16)))
def test_property_any_input_one_status(desc, shape, planes, level, dg):
    try:
        det = diagnose(desc, shape, planes, level=level, expected_digest=dg)
    except grit.GritError:
        return
    assert det.status in Status


@settings(max_examples=300)
@given(st.sampled_from([MX, Q4, NV, SP]), st.integers(0, 63), st.integers(0, 255),
       st.integers(1, 8))
def test_property_single_byte_mutation_of_valid_descriptor(base, pos, val, groups):
    b = bytearray(base.to_bytes())
    b[pos] = val
    k = 256 * groups
    sizes = list(plane_sizes(base, [k]).sizes)
    det = diagnose(bytes(b), [k], sizes)
    if 28 <= pos < 32:  # the note is informational: never changes the outcome
        assert det.status == Status.OK
    elif bytes(b) == base.to_bytes():
        assert det.status == Status.OK
    else:
        assert det.status in Status
