"""Recognising quantised safetensors checkpoints without GRIT metadata
(grit.io.recognise, and its findings in grit scan)."""
from __future__ import annotations

import json
import os

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

from grit.conventions import recognise
from grit.conventions.compressed_tensors import nvfp4_global_exact
from grit.io.safetensors import read as st_read
from grit.scan import scan

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32)


def e4m3_value(code: int) -> np.float32:
    """float8_e4m3fn by hand: bias 7, subnormals, S.1111.111 is NaN, no inf."""
    s = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 7
    if e == 15 and m == 7:
        return np.float32(np.nan)
    if e == 0:
        return np.float32(s * m / 8 * 2.0 ** -6)
    return np.float32(s * (1 + m / 8) * 2.0 ** (e - 7))


def pack_nibbles_lsb(codes: np.ndarray) -> np.ndarray:
    """compressed-tensors FP4 packing: element 2j low nibble, 2j+1 high."""
    c = codes.astype(np.uint8)
    return (c[:, 0::2] | (c[:, 1::2] << 4)).astype(np.uint8)


def pack_int32(u: np.ndarray, bits: int) -> np.ndarray:
    """compressed-tensors pack_to_int32 along dim 1: element per·j+i at bits·i."""
    per = 32 // bits
    r, c = u.shape
    w = np.zeros((r, c // per), np.uint64)
    for i in range(per):
        w |= u[:, i::per].astype(np.uint64) << np.uint64(bits * i)
    return w.astype(np.uint32).view(np.int32)


def ct_config(fmt: str, weights: dict) -> dict:
    return {"architectures": ["X"], "quantization_config": {
        "quant_method": "compressed-tensors", "format": fmt,
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                      "format": fmt}}}}


def write(tmp_path, tensors: dict, config: dict | None = None, name="model.safetensors"):
    d = tmp_path / "ckpt"
    d.mkdir(exist_ok=True)
    save_file(tensors, str(d / name))
    if config is not None:
        (d / "config.json").write_text(json.dumps(config))
    return str(d / name)


def header_of(path):
    import struct
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    return {k: (v["dtype"], tuple(v["shape"]), v["data_offsets"][1] - v["data_offsets"][0])
            for k, v in h.items() if k != "__metadata__"}


def by_cat(rep, cat):
    return [f for f in rep.findings if f.category == cat]


W = "model.layers.0.mlp.down_proj"
OUT, IN = 4, 64
rng = np.random.default_rng(7)


def nvfp4_tensors(g: float, scale_cols: int = IN // 16):
    codes = rng.integers(0, 16, (OUT, IN), dtype=np.uint8)
    sc = rng.integers(0x28, 0x58, (OUT, scale_cols), dtype=np.uint8)
    return codes, sc, {
        f"{W}.weight_packed": pack_nibbles_lsb(codes),
        f"{W}.weight_scale": sc.view(ml_dtypes.float8_e4m3fn),
        f"{W}.weight_global_scale": np.array([g], np.float32),
    }


NVFP4_CFG = ct_config("nvfp4-pack-quantized", {"num_bits": 4, "type": "float",
                                               "strategy": "tensor_group", "group_size": 16,
                                               "symmetric": True})


# ---------------------------------------------------------------------------
# compressed-tensors NVFP4


def test_nvfp4_inferred_and_decodes_like_compressed_tensors(tmp_path):
    g = 2048.0                     # a power of two: 1/g is exact; ≫ 1, as a divisor is
    codes, sc, t = nvfp4_tensors(g)
    path = write(tmp_path, t, NVFP4_CFG)
    [r] = recognise(header_of(path), {}, NVFP4_CFG)
    assert (r.kind, r.convention, r.name) == (
        "inferred", "compressed-tensors/nvfp4-pack-quantized", f"{W}.weight")
    assert r.grade == "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)"
    assert r.shape == (OUT, IN)
    a = r.array(st_read(path).view)
    # independent dequantisation: e2m1 · (s / g), compressed-tensors' order
    s = np.array([[e4m3_value(int(c)) for c in row] for row in sc], np.float32)
    eff = (s / np.float32(g)).astype(np.float32)
    ref = (E2M1[codes] * np.repeat(eff, 16, axis=1)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(a.decode()), ref)

    rep = scan([path])
    [inf] = by_cat(rep, "inferred")
    assert inf.status == "Inferred" and inf.severity == 5          # a note
    assert inf.detail["convention"] == "compressed-tensors/nvfp4-pack-quantized"
    assert inf.detail["grade"] == r.grade
    assert any("f32(1/g)" in ln for ln in inf.lines)
    assert any("decode is bit-exact" in ln for ln in inf.lines)
    assert not by_cat(rep, "structural") and rep.exit_code_graded == 0
    assert rep.files[0].grit_tensors == 1


def test_nvfp4_reciprocal_global_scale_not_power_of_two():
    g = np.float32(448 * 6 / 3.7)
    # the independent count: codes where multiplying by f32(1/g) ≠ dividing by g
    r = np.float32(1) / g
    bad = sum(1 for c in range(256) if not np.isnan(e4m3_value(c))
              and np.float32(e4m3_value(c) * r).tobytes()
              != np.float32(e4m3_value(c) / g).tobytes())
    assert bad > 0
    assert nvfp4_global_exact(float(g)) == (False, bad)
    assert nvfp4_global_exact(0.5) == (True, 0)


def test_nvfp4_inexact_global_is_reported(tmp_path):
    _, _, t = nvfp4_tensors(448 * 6 / 3.7)
    rep = scan([write(tmp_path, t, NVFP4_CFG)])
    [inf] = by_cat(rep, "inferred")
    assert any("differs from compressed-tensors'" in ln for ln in inf.lines)


def test_nvfp4_wrong_group_size_is_size_mismatch(tmp_path):
    # config says 16, the file's scales are per 32 elements
    _, _, t = nvfp4_tensors(1.0, scale_cols=IN // 32)
    rep = scan([write(tmp_path, t, NVFP4_CFG)])
    # one root cause: the config's group size (S311), the S101 of the descriptor
    # inferred from it nested under it (the bytes are right; the config is not)
    [root] = [f for f in rep.findings if f.code == "S311"]
    [s] = [c for c in root.consequences if c.code == "S101"]
    assert (s.status, s.severity, s.tensor) == ("SizeMismatch", 1, f"{W}.weight")
    assert s.detail["field"] == "scale0"
    assert (s.detail["expected"], s.detail["actual"]) == (OUT * IN // 16, OUT * IN // 32)
    assert not by_cat(rep, "structural") and rep.exit_code_graded == 2


# ---------------------------------------------------------------------------
# compressed-tensors MXFP4


def test_mxfp4_inferred_and_decodes(tmp_path):
    codes = rng.integers(0, 16, (OUT, IN), dtype=np.uint8)
    sc = rng.integers(118, 134, (OUT, IN // 32), dtype=np.uint8)
    cfg = ct_config("mxfp4-pack-quantized", {"num_bits": 4, "type": "float",
                                             "strategy": "group", "group_size": 32})
    path = write(tmp_path, {f"{W}.weight_packed": pack_nibbles_lsb(codes),
                            f"{W}.weight_scale": sc}, cfg)
    [r] = recognise(header_of(path), {}, cfg)
    assert (r.kind, r.convention) == ("inferred", "compressed-tensors/mxfp4-pack-quantized")
    assert r.grade == "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"     # GRADE_MXFP4
    ref = (E2M1[codes] * np.repeat(np.ldexp(np.float32(1), sc.astype(np.int32) - 127),
                                   32, axis=1)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(r.array(st_read(path).view).decode()), ref)
    rep = scan([path])
    [inf] = by_cat(rep, "inferred")
    assert inf.detail["grade"] == r.grade and not by_cat(rep, "structural")


# ---------------------------------------------------------------------------
# compressed-tensors pack-quantized int4


def test_int4_symmetric_group_inferred_and_decodes(tmp_path):
    q = rng.integers(-8, 8, (OUT, IN)).astype(np.int64)
    scale = rng.uniform(0.01, 0.1, (OUT, IN // 32)).astype(np.float16)
    cfg = ct_config("pack-quantized", {"num_bits": 4, "type": "int", "strategy": "group",
                                       "group_size": 32, "symmetric": True})
    path = write(tmp_path, {f"{W}.weight_packed": pack_int32(q + 8, 4),
                            f"{W}.weight_scale": scale,
                            f"{W}.weight_shape": np.array([OUT, IN], np.int64)}, cfg)
    rs = recognise(header_of(path), {}, cfg)
    [r] = rs
    assert r.grade == "grit1(e=u4,k0=32,s0=binary16,zp=u4,esr=ratiomaxabs)"
    assert r.planes[3] == ("const", 8)
    ref = (np.repeat(scale.astype(np.float32), 32, axis=1) * q.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(r.array(st_read(path).view).decode()), ref.astype(np.float32))
    rep = scan([path])
    [inf] = by_cat(rep, "inferred")
    assert any("synthesised" in ln for ln in inf.lines)
    assert not by_cat(rep, "structural")


def test_int4_asymmetric_packed_zero_points_inexpressible(tmp_path):
    cfg = ct_config("pack-quantized", {"num_bits": 4, "type": "int", "strategy": "group",
                                       "group_size": 32, "symmetric": False})
    ng = IN // 32
    path = write(tmp_path, {
        f"{W}.weight_packed": np.zeros((OUT * 2, IN // 8), np.int32),
        f"{W}.weight_scale": np.ones((OUT * 2, ng), np.float16),
        f"{W}.weight_zero_point": np.zeros((OUT * 2 // 8, ng), np.int32)}, cfg)
    rep = scan([path])
    [x] = by_cat(rep, "inexpressible")
    assert x.detail["section"] == "§0.3d"
    assert x.detail["arithmetic"][0] == (
        "aux: predicted 16 bytes (n_groups0 16 × 1 byte, PAD8), present 8 "
        "(I32 [1, 2], 8 codes per int32) — §0.3d")
    assert not by_cat(rep, "inferred")


# ---------------------------------------------------------------------------
# GPTQ / AWQ


IN_G, OUT_G, GS = 512, 1568, 128          # n_groups0 = 4 × 1568 = 6272


def gptq_tensors(prefix, g_idx=None):
    t = {f"{prefix}.qweight": np.zeros((IN_G // 8, OUT_G), np.int32),
         f"{prefix}.qzeros": np.zeros((IN_G // GS, OUT_G // 8), np.int32),
         f"{prefix}.scales": np.ones((IN_G // GS, OUT_G), np.float16)}
    if g_idx is not None:
        t[f"{prefix}.g_idx"] = g_idx.astype(np.int32)
    return t


def test_gptq_inexpressible_dense_nibble_qzeros(tmp_path):
    p = "model.layers.0.self_attn.q_proj"
    g_idx = np.arange(IN_G) // GS             # trivial: no act-order
    path = write(tmp_path, gptq_tensors(p, g_idx),
                 {"quantization_config": {"quant_method": "gptq", "bits": 4,
                                          "group_size": 128, "desc_act": False}})
    rep = scan([path])
    [x] = by_cat(rep, "inexpressible")
    assert (x.tensor, x.severity, x.status) == (f"{p}.weight", 5, "Inexpressible")
    assert x.detail["convention"] == "gptq" and x.detail["section"] == "§0.3d"
    assert x.detail["arithmetic"][0] == (
        "aux: predicted 6272 bytes (n_groups0 × 1 byte, PAD8), present 3136 "
        "(dense nibbles) — §0.3d")
    assert x.detail["arithmetic"][2].startswith(
        f"data: {IN_G * OUT_G // 2} bytes predicted, {IN_G * OUT_G // 2} present")
    assert x.lines[0].startswith("Reason (§0.3d): GPTQ packs qzeros as dense 4-bit codes")
    assert rep.exit_code_graded == 0            # recognised, nothing wrong: a note


def test_gptq_act_order_g_idx(tmp_path):
    p = "model.layers.0.self_attn.k_proj"
    g_idx = np.arange(IN_G) % (IN_G // GS)    # columns scattered over the groups
    path = write(tmp_path, gptq_tensors(p, g_idx))
    xs = by_cat(scan([path]), "inexpressible")
    assert sorted(x.detail["section"] for x in xs) == ["§0.3c", "§0.3d"]
    [act] = [x for x in xs if x.detail["section"] == "§0.3c"]
    assert act.detail["arithmetic"] == [
        f"g_idx[1] = 1, contiguous grouping gives 1 // {GS} = 0 "
        f"({IN_G - IN_G // (IN_G // GS)} of {IN_G} columns differ)"]
    assert "not be a placement (L1)" in act.detail["reason"]


def test_awq_inexpressible(tmp_path):
    p = "model.layers.1.mlp.up_proj"
    path = write(tmp_path, {f"{p}.qweight": np.zeros((IN_G, OUT_G // 8), np.int32),
                            f"{p}.qzeros": np.zeros((IN_G // GS, OUT_G // 8), np.int32),
                            f"{p}.scales": np.ones((IN_G // GS, OUT_G), np.float16)},
                 {"quantization_config": {"quant_method": "awq", "bits": 4,
                                          "group_size": 128}})
    [x] = by_cat(scan([path]), "inexpressible")
    assert x.detail["convention"] == "awq"
    assert x.detail["arithmetic"][0] == (
        "aux: predicted 6272 bytes (n_groups0 × 1 byte, PAD8), present 3136 "
        "(dense nibbles) — §0.3d")
    assert x.detail["files"] == sorted([f"{p}.qweight", f"{p}.qzeros", f"{p}.scales"])


def test_same_shape_layers_group_into_one_finding(tmp_path):
    t = {}
    for i in range(3):
        t.update(gptq_tensors(f"model.layers.{i}.self_attn.o_proj"))
    [x] = by_cat(scan([write(tmp_path, t)]), "inexpressible")
    assert len(x.detail["tensors"]) == 3 and x.message.startswith("3 gptq tensor(s)")


# ---------------------------------------------------------------------------
# FNUZ FP8, NF4


def test_fnuz_header_inexpressible(tmp_path):
    path = write(tmp_path, {"model.layers.0.mlp.gate_proj.weight":
                            np.zeros((8, 8), ml_dtypes.float8_e4m3fnuz),
                            "model.norm.weight": np.ones(8, np.float32)})
    rep = scan([path])
    [x] = by_cat(rep, "inexpressible")
    assert x.tensor == "model.layers.0.mlp.gate_proj.weight"
    assert x.detail["section"] == "§0.3a" and "F8_E4M3FNUZ" in x.detail["reason"]
    assert "bias_ovr = 0" in x.detail["reason"]
    # recognised and named, nothing wrong in the file: a note, no exit code
    assert not by_cat(rep, "structural") and rep.exit_code_graded == 0


def test_nf4_codebook_inexpressible(tmp_path):
    b = "model.layers.0.mlp.down_proj.weight"
    path = write(tmp_path, {b: np.zeros((32, 1), np.uint8),
                            f"{b}.absmax": np.ones(1, np.float32),
                            f"{b}.quant_map": np.linspace(-1, 1, 16).astype(np.float32),
                            f"{b}.quant_state.bitsandbytes__nf4": np.zeros(40, np.uint8)})
    rep = scan([path])
    [x] = by_cat(rep, "inexpressible")
    assert (x.tensor, x.detail["convention"], x.detail["section"]) == (
        b, "bitsandbytes/nf4", "§0.3b")
    assert "16-entry value table" in x.detail["reason"]
    assert len(x.detail["files"]) == 4


def test_plain_checkpoint_has_no_recognised_findings(tmp_path):
    rep = scan([write(tmp_path, {"a.weight": np.ones((4, 4), np.float32)})])
    assert rep.findings == [] and rep.exit_code_graded == 0


def test_odd_shapes_never_crash(tmp_path):
    p = "m.layers.0.q"
    path = write(tmp_path, {f"{p}.qweight": np.zeros((3, 5), np.int32),
                            f"{p}.qzeros": np.zeros((1, 1), np.int32),
                            f"{p}.scales": np.ones((1, 7), np.float16),
                            "m.layers.0.k.weight_packed": np.zeros(6, np.uint8),
                            "m.layers.0.k.weight_scale": np.zeros(2, np.uint8)})
    rep = scan([path])
    assert rep.exit_code_graded == 3            # claimed and not read: S705, a warning
    assert {x.detail["convention"] for x in by_cat(rep, "inexpressible")} == {"unrecognised"}
    assert {x.code for x in rep.findings} == {"S705"}
    assert os.path.exists(path)


def test_nvfp4_without_config_uses_the_fixed_group_of_16(tmp_path):
    _, _, t = nvfp4_tensors(1.0, scale_cols=IN // 32)
    rep = scan([write(tmp_path, t)])                     # no config.json
    [s] = by_cat(rep, "structural")
    assert (s.status, s.detail["field"]) == ("SizeMismatch", "scale0")
    assert any("nvfp4-pack-quantized: grade" in ln for ln in s.lines)


# ---------------------------------------------------------------------------
# compressed-tensors float-quantized FP8


def fp8_codes(shape):
    """Random finite float8_e4m3fn codes (no NaN: S.1111.111)."""
    c = rng.integers(0, 256, shape, dtype=np.uint8)
    c[(c & 0x7F) == 0x7F] = 0x3C
    return c.view(ml_dtypes.float8_e4m3fn)


def fp8_cfg(strategy: str, **extra) -> dict:
    return ct_config("float-quantized", {"num_bits": 8, "type": "float",
                                         "strategy": strategy, "symmetric": True, **extra})


def test_fp8_channel_inferred_and_decodes(tmp_path):
    q = fp8_codes((OUT, IN))
    scale = rng.uniform(1e-4, 1e-2, (OUT, 1)).astype(np.float32)
    cfg = fp8_cfg("channel")
    path = write(tmp_path, {f"{W}.weight": q, f"{W}.weight_scale": scale,
                            f"{W}.input_scale": np.array([0.5], np.float32)}, cfg)
    [r] = recognise(header_of(path), {}, cfg)
    assert (r.kind, r.convention) == ("inferred", "compressed-tensors/float-quantized/channel")
    assert r.grade == f"grit1(e=e4m3,k0={IN},s0=binary32,esr=ratiomaxabs)"
    assert r.planes == (("file", f"{W}.weight"), ("file", f"{W}.weight_scale"), None, None)
    a = r.array(st_read(path).view)
    assert all(isinstance(p, memoryview) for p in a.planes[:2])     # mapped, not read
    ref = q.astype(np.float32) * scale                              # float32 multiply
    np.testing.assert_array_equal(np.asarray(a.decode()), ref)
    # without config the strategy is judged from the shapes: the same record
    [r2] = recognise(header_of(path), {}, None)
    assert (r2.grade, r2.convention) == (r.grade, r.convention)
    rep = scan([path])
    [inf] = by_cat(rep, "inferred")
    assert inf.detail["convention"] == "compressed-tensors/float-quantized/channel"
    assert not by_cat(rep, "structural") and not by_cat(rep, "inexpressible")
    assert rep.files[0].grit_tensors == 1
    deep = scan([path], deep=True)
    assert not by_cat(deep, "deep") and deep.exit_code_graded == 0


def test_fp8_group_bf16_scale_inferred_and_decodes(tmp_path):
    q = fp8_codes((OUT, IN))
    scale = rng.uniform(1e-4, 1e-2, (OUT, IN // 32)).astype(ml_dtypes.bfloat16)
    cfg = fp8_cfg("group", group_size=32)
    path = write(tmp_path, {f"{W}.weight": q, f"{W}.weight_scale": scale}, cfg)
    [r] = recognise(header_of(path), {}, cfg)
    assert r.grade == "grit1(e=e4m3,k0=32,s0=x350f,esr=ratiomaxabs)"
    ref = q.astype(np.float32) * np.repeat(scale.astype(np.float32), 32, axis=1)
    np.testing.assert_array_equal(np.asarray(r.array(st_read(path).view).decode()), ref)
    assert any("BF16" in n for n in r.notes)


def test_fp8_group_size_contradicted_by_scales_is_size_mismatch(tmp_path):
    q = fp8_codes((OUT, IN))
    scale = np.ones((OUT, IN // 16), np.float32)
    rep = scan([write(tmp_path, {f"{W}.weight": q, f"{W}.weight_scale": scale},
                      fp8_cfg("group", group_size=32))])
    [root] = [f for f in rep.findings if f.code == "S311"]       # the config's group size
    [s] = [c for c in root.consequences if c.code == "S101"]
    assert (s.status, s.detail["field"]) == ("SizeMismatch", "scale0")
    assert (s.detail["expected"], s.detail["actual"]) == (OUT * IN // 32 * 4, OUT * IN // 16 * 4)


def test_fp8_tensor_scale(tmp_path):
    cfg = fp8_cfg("tensor")
    one = np.array([0.01], np.float32)
    # several rows: a single group of numel elements would span rows
    path = write(tmp_path, {f"{W}.weight": fp8_codes((OUT, IN)), f"{W}.weight_scale": one},
                 cfg)
    [r] = recognise(header_of(path), {}, cfg)
    assert (r.kind, r.section, r.convention) == (
        "inexpressible", "§3.7", "compressed-tensors/float-quantized/tensor")
    assert any(f"k0 = numel = {OUT} × {IN} = {OUT * IN} does not divide" in ln
               for ln in r.lines)
    [x] = by_cat(scan([path]), "inexpressible")
    assert x.detail["section"] == "§3.7"
    # one row, numel ≤ 65535: exactly one group of k0 = numel
    q = fp8_codes((1, IN))
    path = write(tmp_path, {f"{W}.weight": q, f"{W}.weight_scale": one}, cfg, "row.safetensors")
    [r] = recognise(header_of(path), {}, cfg)
    assert r.grade == f"grit1(e=e4m3,k0={IN},s0=binary32,esr=ratiomaxabs)"
    np.testing.assert_array_equal(np.asarray(r.array(st_read(path).view).decode()),
                                  q.astype(np.float32) * one[0])
    # one row but numel > 65535: k0 is a uint16
    h = {f"{W}.weight": ("F8_E4M3", (1, 70000), 70000), f"{W}.weight_scale": ("F32", (1,), 4)}
    [r] = recognise(h, {}, cfg)
    assert r.kind == "inexpressible" and any("70000 > 65535" in ln for ln in r.lines)


def test_fp8_channel_wider_than_uint16_inexpressible():
    h = {f"{W}.weight": ("F8_E4M3", (2, 65536), 2 * 65536),
         f"{W}.weight_scale": ("F32", (2, 1), 8)}
    [r] = recognise(h, {}, None)
    assert (r.kind, r.section) == ("inexpressible", "§3.7")
    assert "65536 > 65535" in r.reason
    h[f"{W}.weight"] = ("F8_E4M3", (2, 65535), 2 * 65535)
    [r] = recognise(h, {}, None)
    assert r.kind == "inferred" and "k0=65535" in r.grade


def test_fp8_block_inexpressible(tmp_path):
    q = fp8_codes((OUT, IN))
    scale = np.ones((OUT // 2, IN // 32), np.float32)
    cfg = fp8_cfg("block", block_structure=[2, 32])
    path = write(tmp_path, {f"{W}.weight": q, f"{W}.weight_scale": scale}, cfg)
    for c in (cfg, None):                      # declared, or judged from the shapes
        [r] = recognise(header_of(path), {}, c)
        assert (r.kind, r.section, r.convention) == (
            "inexpressible", "§3.7", "compressed-tensors/float-quantized/block")
        assert "2×32" in r.reason and "1-D runs" in r.reason
    rep = scan([path])
    [x] = by_cat(rep, "inexpressible")
    assert x.detail["files"] == sorted([f"{W}.weight", f"{W}.weight_scale"])
    assert not by_cat(rep, "inferred")


# ---------------------------------------------------------------------------
# --deep on inferred tensors


def test_deep_probes_run_on_inferred_tensors(tmp_path):
    _, sc, t = nvfp4_tensors(0.25)
    sc = sc.copy()
    sc[0, 0] = 0x7F                            # an E4M3 NaN scale: a poisoned group
    t[f"{W}.weight_scale"] = sc.view(ml_dtypes.float8_e4m3fn)
    path = write(tmp_path, t, NVFP4_CFG)
    assert not by_cat(scan([path]), "deep")
    rep = scan([path], deep=True)
    [p] = by_cat(rep, "deep")
    assert (p.status, p.severity, p.tensor) == ("Probe", 3, f"{W}.weight")
    assert "NaN scale" in p.message
    # FP8 channel with a NaN float32 scale row
    q = fp8_codes((OUT, IN))
    s = np.full((OUT, 1), 0.01, np.float32)
    s[1, 0] = np.nan
    path = write(tmp_path, {f"{W}.weight": q, f"{W}.weight_scale": s}, fp8_cfg("channel"),
                 "fp8.safetensors")
    [p] = by_cat(scan([path], deep=True), "deep")
    assert p.status == "Probe" and "1 of 4 sampled groups have a NaN scale" in p.message


# ---------------------------------------------------------------------------
# torchao tensor subclasses flattened for safetensors: metadata "tensor_names" plus,
# per weight, {"_type", "_data", "_tensor_data_names"}; components <mod>._<w>_<name>

TA = "layers.0.ff"


def ta_meta(typ: str, comps: list, attrs: dict) -> dict:
    return {"tensor_names": json.dumps([f"{TA}.weight"]),
            f"{TA}.weight": json.dumps({"_type": typ, "_data": attrs,
                                        "_tensor_data_names": comps})}


def ta_write(tmp_path, comps: dict, meta: dict):
    d = tmp_path / "ta"
    d.mkdir(exist_ok=True)
    path = str(d / "model.safetensors")
    save_file({f"{TA}._weight_{k}": v for k, v in comps.items()}, path, metadata=meta)
    return path


def ta_recognise(path, meta):
    [r] = recognise(header_of(path), meta, None)
    return r


def test_torchao_nvfp4_with_per_tensor_scale(tmp_path):
    codes = rng.integers(0, 16, (OUT, IN), dtype=np.uint8)
    sc = rng.integers(0x28, 0x58, (OUT, IN // 16), dtype=np.uint8)
    p = np.float32(0.125)
    comps = {"qdata": pack_nibbles_lsb(codes), "_scale_e4m3": sc.view(ml_dtypes.float8_e4m3fn),
             "_per_tensor_scale": np.array(p, np.float32)}
    meta = ta_meta("NVFP4Tensor", list(comps), {
        "_block_size": 16, "_orig_dtype": {"_type": "torch.dtype", "_data": "bfloat16"},
        "_is_swizzled_scales": False, "use_triton_kernel": False, "act_quant_kwargs": None})
    path = ta_write(tmp_path, comps, meta)
    r = ta_recognise(path, meta)
    assert (r.kind, r.convention, r.name) == ("inferred", "torchao/NVFP4Tensor", f"{TA}.weight")
    assert r.grade == "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)"
    s = np.array([[e4m3_value(int(c)) for c in row] for row in sc], np.float32)
    ref = (E2M1[codes] * np.repeat((s * p).astype(np.float32), 16, axis=1)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(r.array(st_read(path).view).decode()), ref)
    rep = scan([path])
    [inf] = by_cat(rep, "inferred")
    assert inf.detail["convention"] == "torchao/NVFP4Tensor"
    assert not by_cat(rep, "structural")


def test_torchao_nvfp4_swizzled_scales_reported(tmp_path):
    codes = rng.integers(0, 16, (OUT, IN), dtype=np.uint8)
    sc = rng.integers(0x28, 0x58, (OUT * IN // 16,), dtype=np.uint8)
    comps = {"qdata": pack_nibbles_lsb(codes), "_scale_e4m3": sc.view(ml_dtypes.float8_e4m3fn)}
    meta = ta_meta("NVFP4Tensor", list(comps), {"_block_size": 16, "_is_swizzled_scales": True})
    r = ta_recognise(ta_write(tmp_path, comps, meta), meta)
    assert r.kind == "inexpressible" and "swizzled" in r.reason


def test_torchao_mxfp4(tmp_path):
    codes = rng.integers(0, 16, (OUT, IN), dtype=np.uint8)
    ex = rng.integers(120, 134, (OUT, IN // 32), dtype=np.uint8)
    comps = {"qdata": pack_nibbles_lsb(codes), "scale": ex}
    meta = ta_meta("MXTensor", list(comps), {
        "_elem_dtype": {"_type": "torch.dtype", "_data": "float4_e2m1fn_x2"},
        "block_size": 32, "_is_swizzled_scales": False})
    path = ta_write(tmp_path, comps, meta)
    r = ta_recognise(path, meta)
    assert r.kind == "inferred"
    assert r.grade == "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"
    sv = np.ldexp(np.float32(1), ex.astype(np.int32) - 127).astype(np.float32)
    ref = (E2M1[codes] * np.repeat(sv, 32, axis=1)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(r.array(st_read(path).view).decode()), ref)


def test_torchao_float8_per_row(tmp_path):
    q = rng.integers(0, 0x7E, (OUT, IN), dtype=np.uint8)
    q[0, 0] = 0x80 | 0x38                                     # a negative code
    sc = rng.uniform(0.01, 2, (OUT, 1)).astype(np.float32)
    comps = {"qdata": q.view(ml_dtypes.float8_e4m3fn), "scale": sc}
    meta = ta_meta("Float8Tensor", list(comps), {
        "block_size": [1, IN], "dtype": {"_type": "torch.dtype", "_data": "bfloat16"}})
    path = ta_write(tmp_path, comps, meta)
    r = ta_recognise(path, meta)
    assert r.kind == "inferred" and r.grade == f"grit1(e=e4m3,k0={IN},s0=binary32,esr=ratiomaxabs)"
    ev = np.array([[e4m3_value(int(c)) for c in row] for row in q], np.float32)
    np.testing.assert_array_equal(np.asarray(r.array(st_read(path).view).decode()), (ev * sc).astype(np.float32))


def test_torchao_float8_per_tensor_and_2d_block_reported(tmp_path):
    q = rng.integers(0, 0x7E, (OUT, IN), dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    comps = {"qdata": q, "scale": np.ones((1, 1), np.float32)}
    meta = ta_meta("Float8Tensor", list(comps), {"block_size": [OUT, IN]})
    r = ta_recognise(ta_write(tmp_path, comps, meta), meta)
    assert (r.kind, r.section) == ("inexpressible", "§3.7") and "per-tensor" in r.reason
    comps = {"qdata": q, "scale": np.ones((2, 2), np.float32)}
    meta = ta_meta("Float8Tensor", list(comps), {"block_size": [2, 32]})
    r = ta_recognise(ta_write(tmp_path, comps, meta), meta)
    assert (r.kind, r.section) == ("inexpressible", "§3.7") and "2-D block" in r.reason


def test_torchao_int8_per_row(tmp_path):
    q = rng.integers(-127, 128, (OUT, IN), dtype=np.int8)
    sc = rng.uniform(0.01, 2, (OUT, 1)).astype(np.float32)
    comps = {"qdata": q, "scale": sc}
    meta = ta_meta("Int8Tensor", list(comps), {"block_size": [1, IN]})
    path = ta_write(tmp_path, comps, meta)
    r = ta_recognise(path, meta)
    assert r.kind == "inferred" and r.grade == f"grit1(e=s8,k0={IN},s0=binary32,esr=ratiomaxabs)"
    ref = (q.astype(np.float32) * sc).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(r.array(st_read(path).view).decode()), ref)


def test_torchao_int4_layouts_reported(tmp_path):
    comps = {"qdata": np.zeros((2, 4, 32, 4), np.int32),
             "scale_and_zero": np.zeros((2, OUT, 2), np.float32)}
    meta = ta_meta("Int4TilePackedTo4dTensor", list(comps), {"block_size": [1, 32]})
    r = ta_recognise(ta_write(tmp_path, comps, meta), meta)
    assert r.kind == "inexpressible" and "tiled" in r.reason
    comps = {"qdata": np.zeros((OUT, IN // 2), np.uint8),
             "scale": np.zeros((IN // 32, OUT), np.float32),
             "zero_point": np.zeros((IN // 32, OUT), np.float32)}
    meta = ta_meta("Int4Tensor", list(comps), {"block_size": [1, 32]})
    r = ta_recognise(ta_write(tmp_path, comps, meta), meta)
    assert (r.kind, r.section) == ("inexpressible", "§0.3d")
