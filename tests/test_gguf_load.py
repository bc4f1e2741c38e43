"""grit.load on GGUF files written by gguf-py's GGUFWriter: every supported
ggml type decodes bit for bit as ``gguf.quants.dequantize`` does, and where
ggml and GRIT genuinely differ the exact difference is asserted."""
from __future__ import annotations

import numpy as np
import pytest

import grit
from grit import layouts as L

gguf = pytest.importorskip("gguf")
T = gguf.GGMLQuantizationType
NAN = 0x7FC00000
RNG = np.random.default_rng(20260801)


def values(shape):
    x = RNG.standard_normal(shape).astype(np.float32) * 2
    x.reshape(-1)[:64] = 0.0                    # an all-zero block
    x.reshape(-1)[64:96] *= 1e-6
    return x


def random_blocks(t, shape):
    bs, ts = gguf.GGML_QUANT_SIZES[t]
    n = int(np.prod(shape)) // bs
    b = RNG.integers(0, 256, (n, ts), dtype=np.uint8)
    if t == T.MXFP4:
        b[0, 0] = 0xFF                          # the E8M0 NaN code, in every file
    return b.reshape(*shape[:-1], shape[-1] // bs * ts)


QUANTIZED = [T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.MXFP4, T.TQ2_0]   # gguf-py encodes
RANDOM = [T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q2_K, T.Q4_K, T.Q5_K, T.Q6_K, T.TQ2_0]
SHAPES = [(4, 512), (512,), (2, 3, 256)]


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "t.gguf"
    w = gguf.GGUFWriter(str(path), "grit-test")
    expect = {}
    for shape in SHAPES:
        tag = "x".join(map(str, shape))
        x = values(shape)
        for t in QUANTIZED:
            expect[f"q.{t.name}.{tag}"] = (gguf.quants.quantize(x, t), t)
        for t in RANDOM + [T.MXFP4, T.NVFP4, T.Q8_K, T.Q3_K, T.IQ4_NL]:
            expect[f"r.{t.name}.{tag}"] = (random_blocks(t, shape), t)
    x = values((4, 512))
    expect["f32"] = (x, None)
    expect["f16"] = (x.astype(np.float16), None)
    expect["bf16"] = (gguf.quants.quantize(x, T.BF16), T.BF16)
    expect["i32"] = (np.arange(12, dtype=np.int32).reshape(3, 4), None)
    expect["tq1"] = (gguf.quants.quantize(values((1, 256)), T.TQ1_0), T.TQ1_0)
    for name, (data, t) in expect.items():
        if t is None:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    reader = gguf.GGUFReader(str(path))
    return str(path), {t.name: t for t in reader.tensors}, grit.load(str(path))


def check_equal(got, ref):
    """Bit equality, NaN positions equal; GRIT's NaN is the canonical 0x7FC00000 (§1.2)
    while ggml's keeps the payload and sign of whatever NaN it met."""
    g, r = got.view(np.uint32), ref.view(np.uint32)
    gn, rn = np.isnan(got), np.isnan(ref)
    assert (gn == rn).all(), f"{int((gn != rn).sum())} NaN positions differ"
    assert (g[gn] == NAN).all()
    bad = (g != r) & ~gn
    assert not bad.any(), f"{int(bad.sum())} values differ in their bits, first at " \
                          f"{np.flatnonzero(bad.reshape(-1))[:5]}"


def supported(name):
    return name.split(".")[1] in grit.io.gguf.GGML_GRADES if "." in name else False


def test_every_supported_type_decodes_like_gguf(gguf_file):
    _, tensors, loaded = gguf_file
    seen = set()
    for name, t in tensors.items():
        if not supported(name) or t.tensor_type in (T.MXFP4, T.NVFP4, T.Q8_K):
            continue
        a = loaded[name]
        assert isinstance(a, grit.GritArray), name
        assert a.shape == tuple(reversed([int(v) for v in t.shape]))
        assert a.group_axis == a.ndim - 1
        ref = gguf.quants.dequantize(t.data, t.tensor_type).reshape(a.shape)
        check_equal(grit.decode(a), ref)
        seen.add(t.tensor_type.name)
    assert seen == {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q4_K", "Q5_K", "Q6_K",
                    "TQ2_0"}


def test_zero_copy_types_are_placements_of_the_file_bytes(gguf_file):
    _, tensors, loaded = gguf_file
    q4k = loaded["r.Q4_K.4x512"]
    assert q4k.grade == grit.GRADE_Q4KS
    assert q4k.placements[1:] == (L.PACK_K4_12B, L.PACK_K4_12B)
    assert str(grit.placement.expr.resolve_layout(q4k.placements[0])).startswith(
        "Interleave(Perm([0,32,1,33,")
    assert loaded["r.Q8_0.4x512"].placements == (L.BLOCK_AOS, L.ROW_MAJOR, 0)
    for name in ("r.Q4_K.4x512", "r.Q8_0.4x512", "q.MXFP4.4x512", "r.NVFP4.4x512"):
        a = loaded[name]
        assert a.plane_bytes[1:] == (0, 0, 0)
        assert bytes(a.planes[0]) == tensors[name].data.tobytes()
        assert isinstance(memoryview(a.planes[0]).obj, np.ndarray)        # not a copy
        c = a.canonical()                                                 # relayout
        assert c.placements[0] == L.ROW_MAJOR
        assert (grit.decode(c).view(np.uint32) == grit.decode(a).view(np.uint32)).all()
    # the converted types are canonical GRIT arrays, with ggml's constants made explicit
    q40 = loaded["q.Q4_0.4x512"]
    assert q40.placements == (L.ROW_MAJOR, L.ROW_MAJOR, L.ROW_MAJOR)
    assert set(bytes(q40.planes[3])) == {8}


def test_q4_k_is_grade_q4ks_exactly(gguf_file):
    """x = (d·sc)·q − (dmin·m): GRADE_Q4KS's decode, with one binary32 rounding per step."""
    _, tensors, loaded = gguf_file
    for tag in ("4x512", "512", "2x3x256"):
        t = tensors[f"r.Q4_K.{tag}"]
        a = loaded[f"r.Q4_K.{tag}"]
        check_equal(grit.decode(a), gguf.quants.dequantize(t.data, T.Q4_K).reshape(a.shape))
        back = grit.relayout(a.canonical(), data=a.placements[0], scale=L.PACK_K4_12B)
        assert back == a                                        # L2 through canonical


E2M1_DOUBLED = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.float32)


def test_mxfp4_matches_except_two_documented_differences(gguf_file):
    _, tensors, loaded = gguf_file
    for name in ("q.MXFP4.4x512", "r.MXFP4.4x512", "r.MXFP4.2x3x256"):
        t, a = tensors[name], loaded[name]
        ref = gguf.quants.dequantize(t.data, T.MXFP4).reshape(-1)
        got = grit.decode(a).reshape(-1)
        blocks = t.data.reshape(-1, 17)
        e = np.repeat(blocks[:, 0], 32)
        q = np.concatenate([blocks[:, 1:] & 15, blocks[:, 1:] >> 4], axis=1).reshape(-1)
        nan_scale = e == 0xFF
        neg_zero = (q == 8) & ~nan_scale
        # (1) E8M0 0xFF: GRIT's NaN scale (§8.2 poison); ggml reads it as the power 2^128
        #     (its half-scale 2^127 times the doubled code): ±2^127, ±inf or 0
        assert np.isnan(got[nan_scale]).all()
        with np.errstate(over="ignore"):
            want = np.float32(2.0 ** 127) * E2M1_DOUBLED[q[nan_scale]]
        assert (ref[nan_scale].view(np.uint32) == want.view(np.uint32)).all()
        # (2) E2M1 code 8 is −0.0 in GRIT, +0.0 in ggml's integer table
        assert (got[neg_zero].view(np.uint32) == 0x80000000).all()
        assert (ref[neg_zero].view(np.uint32) == 0).all()
        same = ~nan_scale & ~neg_zero
        check_equal(got[same], ref[same])
        if name.startswith("r."):
            assert nan_scale.any() and neg_zero.any()


def test_nvfp4_matches_for_ue4m3_scales_except_documented_differences(tmp_path):
    b = random_blocks(T.NVFP4, (8, 256))
    b.reshape(-1, 36)[:, :4] &= 0x7F                # ggml's producer never sets bit 7
    b.reshape(-1, 36)[0, 0] = 0x7F
    path = str(tmp_path / "nv.gguf")
    w = gguf.GGUFWriter(path, "grit-test")
    w.add_tensor("nv", b, raw_dtype=T.NVFP4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    a = grit.load(path)["nv"]
    ref = gguf.quants.dequantize(b, T.NVFP4).reshape(-1)
    got = grit.decode(a).reshape(-1)
    blk = b.reshape(-1, 36)
    s = np.repeat(blk[:, :4].reshape(-1), 16)
    q = np.stack([blk[:, 4:].reshape(-1, 4, 8) & 15, blk[:, 4:].reshape(-1, 4, 8) >> 4],
                 axis=2).reshape(-1)
    nan_scale = s == 0x7F                            # GRIT: E4M3 NaN; ggml: scale 0
    assert np.isnan(got[nan_scale]).all() and (ref[nan_scale] == 0).all()
    neg_zero = (q == 8) & ~nan_scale
    assert (got[neg_zero].view(np.uint32) == 0x80000000).all()
    assert (ref[neg_zero].view(np.uint32) == 0).all()
    rest = ~nan_scale & ~neg_zero
    check_equal(got[rest], ref[rest])


def test_q8_k_decodes_as_d_times_q(gguf_file):
    """gguf-py has no Q8_K dequantiser; ggml's is y = d·q (bsums are derived sums)."""
    _, tensors, loaded = gguf_file
    t, a = tensors["r.Q8_K.4x512"], loaded["r.Q8_K.4x512"]
    blk = t.data.reshape(-1, 292)
    d = np.ascontiguousarray(blk[:, 0:4]).view("<f4")
    q = blk[:, 4:260].view(np.int8).astype(np.float32)
    check_equal(grit.decode(a).reshape(-1, 256), d * q)


def test_plain_tensors(gguf_file):
    _, tensors, loaded = gguf_file
    x = np.asarray(tensors["f32"].data)
    assert isinstance(loaded["f32"], np.ndarray) and not loaded["f32"].flags.writeable
    assert np.array_equal(loaded["f32"], x)
    assert loaded["f16"].dtype == np.float16
    ref = gguf.quants.dequantize(tensors["bf16"].data, T.BF16)
    assert loaded["bf16"].dtype == np.float32
    assert (loaded["bf16"].view(np.uint32) == ref.view(np.uint32).reshape(loaded["bf16"].shape)).all()
    assert loaded["i32"].tolist() == np.arange(12).reshape(3, 4).tolist()


def test_inexpressible_types_are_reported_not_skipped(gguf_file):
    path, tensors, loaded = gguf_file
    assert set(loaded) == set(tensors)
    bad = {r.ggml_type for r in loaded.inexpressible}
    assert bad == {"Q3_K", "IQ4_NL", "TQ1_0"}
    r = loaded["r.Q3_K.4x512"]
    assert "offset-binary" in r.reason and r.shape == (4, 512)
    with pytest.raises(grit.GritGradeError, match="Q3_K"):
        r.decode()
    with pytest.raises(grit.GritGradeError, match="Q3_K|IQ4_NL|TQ1_0"):
        grit.load(path, strict=True)
    assert loaded.ggml_types["r.Q6_K.512"] == "Q6_K"


def test_not_a_gguf_file(tmp_path):
    p = tmp_path / "x.bin"
    p.write_bytes(b"\x00" * 16)
    with pytest.raises(grit.GritUsageError, match="not a GGUF"):
        grit.load(str(p))
    with pytest.raises(grit.GritUsageError):
        grit.load(str(tmp_path / "missing.gguf"))


def test_block_sizes_of_every_expressed_type_are_gguf_pys():
    """grit.ggml's block bytes and elements, for the zero-copy and the
    converted types alike, are gguf-py's GGML_QUANT_SIZES."""
    from grit.ggml import CONVERTED, ZERO_COPY
    assert not set(CONVERTED) & set(ZERO_COPY)
    assert set(CONVERTED) | set(ZERO_COPY) == set(grit.io.gguf.GGML_GRADES)
    for name, t in {**CONVERTED, **ZERO_COPY}.items():
        assert gguf.GGML_QUANT_SIZES[T[name]] == (t.block_elems, t.block_bytes), name
        assert t.grade.canonical == grit.Grade.parse(grit.io.gguf.GGML_GRADES[name]).canonical
