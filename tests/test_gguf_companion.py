"""NVFP4 companion scales (llama.cpp's convert_hf_to_gguf writes an NVFP4
tensor's per-tensor scale as an F32 tensor ``<base>.scale``): grit.load makes
the pair one two-level GRIT array whose decode is §8.1's f32(f32(s1·s0)·e),
derived here independently from the bytes with ml_dtypes' E4M3 and E2M1
tables; it equals gguf-py's dequantize × scale except on exactly the
(scale, s0, e) combinations where the two orders round differently, which
``companion_rounding`` counts and scan reports (S604).  A missing or
unattachable companion is S603; under --deep, scale bytes ggml and GRIT read
differently are S505.  Saving writes the blocks as NVFP4 and the companion
beside them."""
from __future__ import annotations


import numpy as np
import pytest

import grit
from grit.io import gguf as G
from _support import write_gguf as write
from grit.scan import scan

gguf = pytest.importorskip("gguf")
ml_dtypes = pytest.importorskip("ml_dtypes")
T = gguf.GGMLQuantizationType
RNG = np.random.default_rng(20261203)
E4M3 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def nvfp4_blocks(shape, scale_max=0x7E):
    """Random NVFP4 blocks whose E4M3 scales are codes both readers agree on."""
    n = int(np.prod(shape)) // 64
    b = RNG.integers(0, 256, (n, 36), dtype=np.uint8)
    b[:, :4] = RNG.integers(0x20, scale_max + 1, (n, 4), dtype=np.uint8)
    return b


def reference(blocks, s1_per_block):
    """§8.1 from the bytes: S = f32(s1·s0), x = f32(S·e); elements of each
    16-run in ggml's halves order (byte l: element l low, l + 8 high)."""
    n = blocks.shape[0]
    s0 = E4M3[blocks[:, :4]]                                    # (n, 4)
    qs = blocks[:, 4:].reshape(n, 4, 8)
    codes = np.concatenate([qs & 15, qs >> 4], axis=2)          # (n, 4, 16)
    S = (s1_per_block.reshape(n, 1) * s0).astype(np.float32)
    return (S[:, :, None] * E2M1[codes]).astype(np.float32).reshape(-1)


def bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


@pytest.mark.parametrize("s1", [1.0, 0.25, 0.1, 3.7e-4, 2688.0])
def test_per_tensor_companion_decodes_as_section_8_1(tmp_path, s1):
    shape = (6, 256)
    b = nvfp4_blocks(shape)
    path = tmp_path / "m.gguf"
    write(path, {"blk.0.ffn_gate.weight": (b.reshape(6, -1), T.NVFP4),
                 "blk.0.ffn_gate.scale": (np.array([s1], np.float32), None)})
    got = grit.load(str(path))
    a = got["blk.0.ffn_gate.weight"]
    c = got.companions["blk.0.ffn_gate.weight"]
    assert c.attached and c.scale == "blk.0.ffn_gate.scale" and c.k1 == 0
    assert a.grade["k1"] == "0" and a.grade["s1"] == "binary32"
    assert "blk.0.ffn_gate.scale" in got                # the file's tensor stays
    x = grit.decode(a).reshape(-1)
    want = reference(b, np.full(b.shape[0], s1, np.float32))
    np.testing.assert_array_equal(bits(x), bits(want))
    # against gguf-py: dequantize × scale, equal except where the orders round apart
    ggml = (gguf.quants.dequantize(b.reshape(6, -1), T.NVFP4).reshape(-1).astype(np.float32)
            * np.float32(s1)).astype(np.float32)
    codes = np.concatenate([b[:, 4:].reshape(-1, 4, 8) & 15, b[:, 4:].reshape(-1, 4, 8) >> 4],
                           axis=2).reshape(-1)
    zero = (codes & 7) == 0                              # ±0: E2M1 code 8 is −0 in GRIT
    apart = ~zero & (bits(x) != bits(ggml))
    assert np.array_equal(x[zero], ggml[zero]) and np.array_equal(x[apart] == 0, ggml[apart] == 0)
    if apart.any():                                      # 1 ulp, never more
        assert np.abs(bits(x[apart]).astype(np.int64) - bits(ggml[apart])).max() == 1
    # companion_rounding counts exactly the combinations where they part
    s0 = E4M3[:0x7F].reshape(-1, 1)
    e = E2M1[[c for c in range(16) if c & 7]].reshape(1, -1)
    grit_order = (np.float32(s1) * s0).astype(np.float32) * e
    ggml_order = (s0 * e).astype(np.float32) * np.float32(s1)
    n_apart = int(np.count_nonzero(bits(grit_order) != bits(ggml_order)))
    assert c.rounding == (n_apart, 127 * 14)
    if s1 in (1.0, 0.25):
        assert n_apart == 0 and not apart.any()          # a power of two: one rounding each
    if s1 == 0.1:
        assert n_apart > 0                               # the orders do part for 0.1
    findings = scan_json(path)
    assert ("S604" in findings) == (n_apart > 0)
    assert "S603" not in findings


def scan_json(path, deep=False):
    rep = scan([str(path)], deep=deep)
    return {f.code: f for f in rep.findings}


def test_per_row_and_per_expert_companions(tmp_path):
    rows = (4, 128)
    b = nvfp4_blocks(rows)
    s_row = RNG.uniform(0.01, 2, 4).astype(np.float32)
    experts = (3, 2, 128)
    be = nvfp4_blocks(experts)
    s_exp = RNG.uniform(0.01, 2, 3).astype(np.float32)
    path = tmp_path / "m.gguf"
    write(path, {"r.weight": (b.reshape(4, -1), T.NVFP4), "r.scale": (s_row, None),
                 "e.weight": (be.reshape(3, 2, -1), T.NVFP4), "e.scale": (s_exp, None)})
    got = grit.load(str(path))
    assert got.companions["r.weight"].k1 == 128 // 16
    assert got.companions["e.weight"].k1 == 2 * 128 // 16
    np.testing.assert_array_equal(
        bits(grit.decode(got["r.weight"]).reshape(-1)), bits(reference(b, np.repeat(s_row, 2))))
    np.testing.assert_array_equal(
        bits(grit.decode(got["e.weight"]).reshape(-1)), bits(reference(be, np.repeat(s_exp, 4))))


def test_weight_dot_scale_naming_and_what_is_not_attached(tmp_path):
    b = nvfp4_blocks((2, 128))
    path = tmp_path / "m.gguf"
    write(path, {"a.weight": (b.reshape(2, -1), T.NVFP4),
                 "a.weight.scale": (np.array([0.5], np.float32), None),
                 "m.weight": (b.reshape(2, -1), T.NVFP4),
                 "h.weight": (b.reshape(2, -1), T.NVFP4),
                 "h.scale": (np.array([0.5], np.float16), None),
                 "s.weight": (b.reshape(2, -1), T.NVFP4),
                 "s.scale": (np.ones((2, 2), np.float32), None)})
    got = grit.load(str(path))
    cs = got.companions
    assert cs["a.weight"].attached and cs["a.weight"].scale == "a.weight.scale"
    assert not cs["m.weight"].attached and cs["m.weight"].scale is None
    assert not cs["h.weight"].attached and "F16" in cs["h.weight"].reason
    assert not cs["s.weight"].attached and "shape" in cs["s.weight"].reason
    plain = gguf.quants.dequantize(b.reshape(2, -1), T.NVFP4)
    for n in ("m.weight", "h.weight", "s.weight"):            # the blocks alone
        x = grit.decode(got[n])
        nz = x != 0
        np.testing.assert_array_equal(x[nz], plain[nz])
    codes = [x.code for x in scan([str(path)]).findings]
    assert codes.count("S603") == 3                            # one per reason


def test_a_companion_under_the_name_llama_cpp_does_not_load_is_named(tmp_path):
    """llama.cpp's loader creates the companion as tn(…, "scale", i) =
    blk.N.ffn_gate.scale (optional): under blk.N.ffn_gate.weight.scale it is
    not found and the tensor runs without its scale.  grit attaches either
    name, and scan says which one llama.cpp will miss (S605)."""
    b = nvfp4_blocks((2, 128))
    path = tmp_path / "m.gguf"
    write(path, {"blk.0.ffn_gate.weight": (b.reshape(2, -1), T.NVFP4),
                 "blk.0.ffn_gate.weight.scale": (np.array([0.5], np.float32), None),
                 "blk.0.ffn_up.weight": (b.reshape(2, -1), T.NVFP4),
                 "blk.0.ffn_up.scale": (np.array([0.5], np.float32), None)})
    f = scan_json(path)
    assert f["S605"].detail["tensors"] == ["blk.0.ffn_gate.weight"]
    assert f["S605"].detail["expected"] == {"blk.0.ffn_gate.weight": "blk.0.ffn_gate.scale"}
    assert f["S605"].severity == 2


def test_round_trip_writes_blocks_and_companion_once(tmp_path):
    b = nvfp4_blocks((2, 128))
    src = tmp_path / "m.gguf"
    write(src, {"x.weight": (b.reshape(2, -1), T.NVFP4),
                "x.scale": (np.array([0.1], np.float32), None)})
    got = grit.load(str(src))
    dst = tmp_path / "copy.gguf"
    grit.save(str(dst), got)
    r = {t.name: t for t in gguf.GGUFReader(str(dst)).tensors}
    assert set(r) == {"x.weight", "x.scale"}
    assert r["x.weight"].tensor_type == T.NVFP4
    assert np.asarray(r["x.weight"].data).tobytes() == b.tobytes()
    assert np.asarray(r["x.scale"].data).tobytes() == np.float32(0.1).tobytes()
    # the array alone: its GRIT payload (a mapping's tensors stay its tensors), or
    # with relayout=True NVFP4 blocks plus the companion save adds
    alone = tmp_path / "alone.gguf"
    with pytest.warns(UserWarning, match="x.weight"):
        grit.save(str(alone), {"x.weight": got["x.weight"]})
    r = {t.name: t for t in gguf.GGUFReader(str(alone)).tensors}
    assert set(r) == {"x.weight"} and r["x.weight"].tensor_type == T.I8
    assert grit.load(str(alone))["x.weight"] == got["x.weight"]
    only = tmp_path / "only.gguf"
    grit.save(str(only), {"x.weight": got["x.weight"]}, relayout=True)
    r = {t.name: t for t in gguf.GGUFReader(str(only)).tensors}
    assert set(r) == {"x.weight", "x.scale"}
    assert np.asarray(r["x.scale"].data).tobytes() == np.float32(0.1).tobytes()
    with pytest.raises(grit.GritUsageError, match="x.scale"):
        grit.save(str(tmp_path / "bad.gguf"),
                  {"x.weight": got["x.weight"], "x.scale": np.array([0.2], np.float32)})
    again = grit.load(str(dst))
    assert again["x.weight"] == got["x.weight"]


def test_deep_scan_reports_scale_bytes_ggml_reads_otherwise(tmp_path):
    b = nvfp4_blocks((2, 128))
    b[0, 0], b[1, 2], b[1, 3] = 0x7F, 0x85, 0xFF
    path = tmp_path / "m.gguf"
    write(path, {"x.weight": (b.reshape(2, -1), T.NVFP4),
                 "x.scale": (np.array([0.5], np.float32), None),
                 "y": (b.reshape(2, -1), T.NVFP4)})
    assert "S505" not in scan_json(path)
    deep = [f for f in scan([str(path)], deep=True).findings if f.code == "S505"]
    assert sorted(f.tensor for f in deep) == ["x.weight", "y"]
    assert all(f.detail["scales"] == 3 and f.detail["of"] == 16 for f in deep)
    # and the values do differ: GRIT reads 0x7F as NaN, ggml as 0
    got = grit.load(str(path))
    x = grit.decode(got["y"]).reshape(-1)
    assert np.isnan(x[:16]).all()
    assert not np.isnan(gguf.quants.dequantize(b.reshape(2, -1), T.NVFP4).reshape(-1)[:16]).any()


def test_the_spec_nvf4_grade_is_written_for_ggml_with_relayout(tmp_path):
    """grit.encode(x, GRADE_NVF4) (the spec's two-level NVFP4, one binary32
    level-1 scale) is NVFP4 blocks plus the companion with relayout=True, and
    loads back as the same array."""
    x = RNG.standard_normal((4, 128)).astype(np.float32)
    a = grit.encode(x, grit.GRADE_NVF4)
    assert G.nvfp4_scaled_grade(0).id == a.grade.id
    path = tmp_path / "nvf4.gguf"
    grit.save(str(path), {"w.weight": a}, relayout=True)
    r = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    assert r["w.weight"].tensor_type == T.NVFP4
    assert np.asarray(r["w.scale"].data).tobytes() == bytes(a.planes[2])
    back = grit.load(str(path))
    assert back["w.weight"] == a and back.companions["w.weight"].attached
