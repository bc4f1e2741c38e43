"""grit.load of GPTQ, AWQ and torchao checkpoints (#13 item 5): each weight v1
expresses comes back as one GritArray with the config it came from, each one
it cannot express as the file's raw tensors with the recogniser's record and
reason.  The tensors are packed here the way the peers pack them (AutoGPTQ's
``QuantLinear.pack``, AutoAWQ's ``WQLinear_GEMM.from_linear``, torchao's
flattened tensor subclasses) and the expected values come from the peers'
documented dequantize formulas, written out in numpy — not from grit."""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

import grit
from grit.io.safetensors import CheckFailed
from grit.scan import scan

rng = np.random.default_rng(2026)
P = "model.layers.0.self_attn.q_proj"
OUT, IN = 64, 256


def autogptq_pack(intweight, zeros, bits, v1=True):
    """AutoGPTQ QuantLinear.pack (2/4/8 bits): intweight [in, out] packed
    32/bits to an int32 down the input rows; zeros [n_groups, out] (minus one
    in the v1 checkpoint format) packed along the output columns."""
    per = 32 // bits
    iw = intweight.astype(np.uint32)
    qweight = np.zeros((iw.shape[0] // 32 * bits, iw.shape[1]), np.uint32)
    i = row = 0
    while row < qweight.shape[0]:
        for j in range(i, i + per):
            qweight[row] |= iw[j] << np.uint32(bits * (j - i))
        i += per
        row += 1
    z = (zeros - 1 if v1 else zeros).astype(np.uint32)
    qzeros = np.zeros((z.shape[0], z.shape[1] // 32 * bits), np.uint32)
    i = col = 0
    while col < qzeros.shape[1]:
        for j in range(i, i + per):
            qzeros[:, col] |= z[:, j] << np.uint32(bits * (j - i))
        i += per
        col += 1
    return qweight.view(np.int32), qzeros.view(np.int32)


AWQ_ORDER_MAP = [0, 2, 4, 6, 1, 3, 5, 7]


def autoawq_pack(intweight, zeros):
    """AutoAWQ WQLinear_GEMM.from_linear (4 bits): intweight [in, out] and
    zeros [n_groups, out], each packed 8 to an int32 along the output columns,
    nibble i holding column 8·col + order_map[i]."""
    def pack(m):
        m = m.astype(np.uint32)
        out = np.zeros((m.shape[0], m.shape[1] // 8), np.uint32)
        for col in range(m.shape[1] // 8):
            for i in range(8):
                out[:, col] |= m[:, col * 8 + AWQ_ORDER_MAP[i]] << np.uint32(i * 4)
        return out.view(np.int32)
    return pack(intweight), pack(zeros)


def dequant(intweight, zeros, scales, group):
    """w[i, j] = scales[i // g, j] · (q[i, j] − z[i // g, j]) in float32
    (AutoGPTQ and AutoAWQ alike), returned as the nn.Linear weight [out, in]."""
    g = np.arange(intweight.shape[0]) // group
    w = scales.astype(np.float32)[g] * (intweight.astype(np.float32) - zeros[g].astype(np.float32))
    return w.T.astype(np.float32)


def write(tmp_path, tensors, config):
    d = tmp_path / "ckpt"
    d.mkdir(exist_ok=True)
    path = str(d / "model.safetensors")
    save_file(tensors, path)
    (d / "config.json").write_text(json.dumps(config))
    return path


def gptq_case(bits, group, v1=True, scale_dtype=np.float16):
    n_g = IN // group
    q = rng.integers(0, 1 << bits, (IN, OUT))
    z = rng.integers(1 if v1 else 0, 1 << bits, (n_g, OUT))  # v1 cannot store z = 0 (−1)
    s = rng.uniform(0.001, 0.05, (n_g, OUT)).astype(scale_dtype)
    qw, qz = autogptq_pack(q, z, bits, v1)
    return q, z, s, {f"{P}.qweight": qw, f"{P}.qzeros": qz, f"{P}.scales": s,
                     f"{P}.g_idx": (np.arange(IN) // group).astype(np.int32),
                     "model.norm.weight": np.ones(8, np.float32)}


def gptq_cfg(bits, group, fmt="gptq", **extra):
    return {"quantization_config": {"quant_method": "gptq", "bits": bits,
                                    "group_size": group, "desc_act": False, "sym": False,
                                    "checkpoint_format": fmt, **extra}}


@pytest.mark.parametrize("bits,group,v1", [(4, 32, True), (4, 128, False), (2, 64, True),
                                           (8, 32, True), (4, IN, True)])
def test_gptq_loads_as_one_array_that_decodes_like_autogptq(tmp_path, bits, group, v1):
    q, z, s, tensors = gptq_case(bits, group, v1)
    cfg = gptq_cfg(bits, -1 if group == IN else group, "gptq" if v1 else "gptq_v2")
    path = write(tmp_path, tensors, cfg)
    t = grit.load(path)
    assert sorted(t) == [f"{P}.weight", "model.norm.weight"]
    a = t[f"{P}.weight"]
    assert isinstance(a, grit.GritArray) and tuple(a.shape) == (OUT, IN)
    want = (f"grit1(e=u{bits},k0={group},s0=binary16,zp=u{bits}"
            f"{',zpc=minus1' if v1 else ''},esr=affineminmax)")
    assert a.grade.canonical == want
    assert bool(a.descriptor.flags & grit.descriptor.F_ZP_MINUS1) == v1
    np.testing.assert_array_equal(np.asarray(grit.decode(a)), dequant(q, z, s, group))
    assert t.config == cfg
    r = t.recognised[f"{P}.weight"]
    assert (r.kind, r.convention, r.section) == (
        "converted", "gptq", "§0.3d" if bits < 8 else "not inferred")


def test_gptq_float32_scales(tmp_path):
    q, z, s, tensors = gptq_case(4, 64, scale_dtype=np.float32)
    a = grit.load(write(tmp_path, tensors, gptq_cfg(4, 64)))[f"{P}.weight"]
    assert a.grade["s0"] == "binary32"
    np.testing.assert_array_equal(np.asarray(grit.decode(a)), dequant(q, z, s, 64))


def test_scan_still_says_the_file_bytes_are_not_v1_planes(tmp_path):
    """§0.3d is about the bytes on disk: scan reports it, and the reason says
    grit.load converts the weight."""
    *_, tensors = gptq_case(4, 32)
    path = write(tmp_path, tensors, gptq_cfg(4, 32))
    [x] = [f for f in scan([path]).findings if f.category == "inexpressible"]
    assert x.detail["section"] == "§0.3d" and x.tensor == f"{P}.weight"
    assert "grit.load converts it into a v1 array" in x.detail["reason"]
    assert x.detail["arithmetic"][0] == (
        f"aux: predicted {OUT * IN // 32} bytes (n_groups0 × 1 byte, PAD8), present "
        f"{OUT * IN // 32 // 2} (dense nibbles) — §0.3d")


def test_awq_gemm_loads_and_decodes_like_autoawq(tmp_path):
    group = 64
    n_g = IN // group
    q = rng.integers(0, 16, (IN, OUT))
    z = rng.integers(0, 16, (n_g, OUT))
    s = rng.uniform(0.001, 0.05, (n_g, OUT)).astype(np.float16)
    qw, qz = autoawq_pack(q, z)
    cfg = {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": group,
                                   "zero_point": True, "version": "gemm"}}
    path = write(tmp_path, {f"{P}.qweight": qw, f"{P}.qzeros": qz, f"{P}.scales": s}, cfg)
    t = grit.load(path)
    a = t[f"{P}.weight"]
    assert a.grade.canonical == "grit1(e=u4,k0=64,s0=binary16,zp=u4,esr=affineminmax)"
    np.testing.assert_array_equal(np.asarray(grit.decode(a)), dequant(q, z, s, group))
    assert t.recognised[f"{P}.weight"].kind == "converted" and t.config == cfg
    # the interleaved order matters: read in plain order the values differ
    plain = (qw.view(np.uint32)[:, :, None] >> (np.arange(8, dtype=np.uint32) * 4)) & 15
    assert not np.array_equal(plain.reshape(IN, OUT), q)


def test_act_order_gptq_stays_raw_with_the_reason(tmp_path):
    q, z, s, tensors = gptq_case(4, 32)
    tensors[f"{P}.g_idx"] = (np.arange(IN) % (IN // 32)).astype(np.int32)
    path = write(tmp_path, tensors, gptq_cfg(4, 32))
    t = grit.load(path)
    assert f"{P}.weight" not in t and f"{P}.qweight" in t
    assert not any(isinstance(v, grit.GritArray) for v in t.values())
    r = t.recognised[f"{P}.weight"]
    assert (r.kind, r.section) == ("inexpressible", "§0.3c") and "act-order" in r.reason


@pytest.mark.parametrize("change,why", [
    ({"bits": 3}, "straddle int32 words"),
    ({"version": "gemv"}, "only the 4-bit GEMM packing"),
    ({"checkpoint_format": "marlin"}, "neither gptq nor gptq_v2"),
])
def test_layouts_not_converted_say_why(tmp_path, change, why):
    if "bits" in change:
        tensors = {f"{P}.qweight": np.zeros((IN * 3 // 32, OUT), np.int32),
                   f"{P}.qzeros": np.zeros((IN // 32, OUT * 3 // 32), np.int32),
                   f"{P}.scales": np.ones((IN // 32, OUT), np.float16)}
        cfg = gptq_cfg(3, 32)
    elif "checkpoint_format" in change:
        *_, tensors = gptq_case(4, 32)
        del tensors["model.norm.weight"], tensors[f"{P}.g_idx"]
        cfg = gptq_cfg(4, 32, "marlin")
    else:
        tensors = {f"{P}.qweight": np.zeros((IN, OUT // 8), np.int32),
                   f"{P}.qzeros": np.zeros((IN // 32, OUT // 8), np.int32),
                   f"{P}.scales": np.ones((IN // 32, OUT), np.float16)}
        cfg = {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 32,
                                       **change}}
    path = write(tmp_path, tensors, cfg)
    t = grit.load(path)
    assert sorted(t) == sorted(tensors)
    [r] = t.recognised.values()
    assert r.kind == "inexpressible" and why in r.reason


def test_a_cut_gptq_file_is_a_typed_error(tmp_path):
    *_, tensors = gptq_case(4, 32)
    path = write(tmp_path, tensors, gptq_cfg(4, 32))
    raw = open(path, "rb").read()
    open(path, "wb").write(raw[:len(raw) - 100])
    with pytest.raises(grit.GritError):
        grit.load(path)


def test_converted_planes_agree_with_the_size_equations_when_the_bytes_are_short(tmp_path):
    """A conversion that receives fewer bytes than the tensor's shape needs
    raises GritSizeError (strict) or stands as a CheckFailed record."""
    *_, tensors = gptq_case(4, 32)
    path = write(tmp_path, tensors, gptq_cfg(4, 32))
    f = grit.io.safetensors.read(path)
    [r] = grit.io.recognise.recognise_file(f, gptq_cfg(4, 32))
    with pytest.raises(grit.GritSizeError, match="qweight"):
        r.array(lambda tn: f.view(tn)[:-4] if tn.endswith("qweight") else f.view(tn))


# ---------------------------------------------------------------------------
# torchao (torchao.prototype.safetensors: flattened tensor subclasses)

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32)
TA = "layers.0.ff"


def e4m3(codes):
    return codes.astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)


def ta_file(tmp_path, typ, comps, attrs):
    meta = {"tensor_names": json.dumps([f"{TA}.weight"]),
            f"{TA}.weight": json.dumps({"_type": typ, "_data": attrs,
                                        "_tensor_data_names": list(comps)})}
    path = str(tmp_path / "ta.safetensors")
    save_file({f"{TA}._weight_{k}": v for k, v in comps.items()}, path, metadata=meta)
    return path


def pack_lsb(codes):
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def ta_cases():
    o, i = 8, 64
    codes = rng.integers(0, 16, (o, i), dtype=np.uint8)
    sc = rng.integers(0x28, 0x58, (o, i // 16), dtype=np.uint8)
    p = np.float32(0.375)
    # NVFP4Tensor.dequantize: e2m1 · (per_tensor_scale · block scale)
    yield ("NVFP4Tensor", {"qdata": pack_lsb(codes), "_scale_e4m3": sc.view(ml_dtypes.float8_e4m3fn),
                           "_per_tensor_scale": np.array(p, np.float32)},
           {"_block_size": 16, "_is_swizzled_scales": False},
           E2M1[codes] * np.repeat((p * e4m3(sc)).astype(np.float32), 16, axis=1))
    ex = rng.integers(118, 136, (o, i // 32), dtype=np.uint8)
    # MXTensor (fp4): e2m1 · 2^(scale − 127)
    yield ("MXTensor", {"qdata": pack_lsb(codes), "scale": ex},
           {"_elem_dtype": {"_type": "torch.dtype", "_data": "float4_e2m1fn_x2"},
            "block_size": 32, "_is_swizzled_scales": False},
           E2M1[codes] * np.repeat(np.ldexp(np.float32(1), ex.astype(np.int32) - 127), 32, axis=1))
    f8 = rng.integers(0, 0x7E, (o, i), dtype=np.uint8) | (rng.integers(0, 2, (o, i)) << 7).astype(np.uint8)
    rs = rng.uniform(0.01, 2, (o, 1)).astype(np.float32)
    # Float8Tensor: qdata.to(float32) · scale (per row)
    yield ("Float8Tensor", {"qdata": f8.view(ml_dtypes.float8_e4m3fn), "scale": rs},
           {"block_size": [1, i]}, e4m3(f8) * rs)
    gs = rng.uniform(0.01, 2, (o, i // 32)).astype(np.float32)
    q8 = rng.integers(-127, 128, (o, i), dtype=np.int8)
    # Int8Tensor: qdata · scale per block of 32
    yield ("Int8Tensor", {"qdata": q8, "scale": gs}, {"block_size": [1, 32]},
           q8.astype(np.float32) * np.repeat(gs, 32, axis=1))


@pytest.mark.parametrize("typ,comps,attrs,want", list(ta_cases()), ids=lambda v: str(v)[:14])
def test_torchao_weights_load_as_arrays(tmp_path, typ, comps, attrs, want):
    path = ta_file(tmp_path, typ, comps, attrs)
    t = grit.load(path)
    assert list(t) == [f"{TA}.weight"]
    a = t[f"{TA}.weight"]
    assert isinstance(a, grit.GritArray)
    np.testing.assert_array_equal(np.asarray(grit.decode(a)), want.astype(np.float32))
    assert t.recognised[f"{TA}.weight"].convention == f"torchao/{typ}"
    assert t.config is None                       # no config.json beside the file


def test_torchao_layout_v1_cannot_express_stays_raw(tmp_path):
    comps = {"qdata": np.zeros((2, 4, 32, 4), np.int32),
             "scale_and_zero": np.zeros((2, 8, 2), np.float32)}
    path = ta_file(tmp_path, "Int4TilePackedTo4dTensor", comps, {"block_size": [1, 32]})
    t = grit.load(path)
    assert sorted(t) == sorted(f"{TA}._weight_{k}" for k in comps)
    r = t.recognised[f"{TA}.weight"]
    assert r.kind == "inexpressible" and "tiled" in r.reason
    assert not isinstance(t[f"{TA}._weight_qdata"], (grit.GritArray, CheckFailed))


def test_gptq_bfloat16_scales(tmp_path):
    q, z, s, tensors = gptq_case(4, 64, scale_dtype=ml_dtypes.bfloat16)
    a = grit.load(write(tmp_path, tensors, gptq_cfg(4, 64)))[f"{P}.weight"]
    np.testing.assert_array_equal(np.asarray(grit.decode(a)), dequant(q, z, s, 64))


def test_gptq_v1_top_code_reads_as_stored_plus_one(tmp_path):
    """§8.1 with ZP_MINUS1: z = stored + 1, so a stored 15 is z = 16."""
    q, _, s, tensors = gptq_case(4, 32)
    stored = np.full((IN // 32, OUT), 15)
    _, qz = autogptq_pack(q, stored, 4, v1=False)          # the stored codes as they are
    tensors[f"{P}.qzeros"] = qz
    a = grit.load(write(tmp_path, tensors, gptq_cfg(4, 32)))[f"{P}.weight"]
    np.testing.assert_array_equal(np.asarray(grit.decode(a)), dequant(q, stored + 1, s, 32))
