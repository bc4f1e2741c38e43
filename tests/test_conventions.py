"""grit.conventions: every convention recognised or named, nothing passing
as clean by accident — against checkpoints written by the conventions' own
libraries where they install (compressed-tensors on torch CPU), and by
hand to the documented layout where they do not (gpt-oss, ModelOpt)."""
from __future__ import annotations

import importlib.util
import json
import os
import textwrap

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

import grit
from grit import conventions
from grit.scan import scan

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32)


def codes(rep, code):
    return [f for f in rep.findings if f.code == code]


def write(folder, tensors, config=None, name="model.safetensors", extra=None):
    os.makedirs(folder, exist_ok=True)
    save_file(tensors, os.path.join(folder, name))
    if config is not None:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
    for fn, doc in (extra or {}).items():
        with open(os.path.join(folder, fn), "w") as f:
            json.dump(doc, f)
    return os.path.join(folder, name)


# ---------------------------------------------------------------------------
# compressed-tensors, written by compressed-tensors


#: format -> the convention grit names it by, per module
CT_FORMATS = {
    "int-quantized": "compressed-tensors/int-quantized/channel",
    "int-quantized-asym": "compressed-tensors/int-quantized/channel",
    "float-quantized": "compressed-tensors/float-quantized/channel",
    "mxfp8-quantized": "compressed-tensors/mxfp8-quantized",
    "nvfp4-pack-quantized": "compressed-tensors/nvfp4-pack-quantized",
    "mxfp4-pack-quantized": "compressed-tensors/mxfp4-pack-quantized",
    "pack-quantized": "compressed-tensors/pack-quantized",
}


def _agrees(ct, folder, module, a):
    """grit.decode of ``a`` against compressed-tensors' own decompress of the
    module: the peer works in the scale's dtype (bf16 here), so GRIT's
    binary32 value rounded once to bf16 must equal it bit for bit; returns
    how many binary32 elements the bf16 rounding changed."""
    import torch
    peer = ct.decompress(folder, module)
    x = np.asarray(grit.decode(a))
    assert peer.shape == x.shape
    narrow = {torch.bfloat16: ml_dtypes.bfloat16, torch.float16: np.float16}.get(peer.dtype)
    ours = x.astype(narrow).astype(np.float32) if narrow is not None else x
    p = peer.float().numpy()
    np.testing.assert_array_equal(p.view(np.uint32), ours.view(np.uint32))
    return int((p.view(np.uint32) != x.view(np.uint32)).sum())


@pytest.mark.parametrize("kind", sorted(CT_FORMATS))
def test_compressed_tensors_format_recognised_and_decodes_as_the_library(ct, kind, tmp_path):
    folder = str(tmp_path / kind)
    path = ct.write_checkpoint(folder, {"group_0": (kind, ["Linear"])})
    loaded = grit.load(path)
    rounded = {}
    for module in ct.LAYERS:
        a = loaded[module + ".weight"]
        assert isinstance(a, grit.GritArray), (kind, module, type(a))
        assert loaded.recognised[module + ".weight"].convention == CT_FORMATS[kind]
        rounded[module] = _agrees(ct, folder, module, a)
    # E8M0-scaled FP8/FP4 products are exact in bf16 too; the others round
    if kind.startswith("mx"):
        assert set(rounded.values()) == {0}
    rep = scan([path])
    # per-channel scales make k0 = in_features, so the two layers' grades differ in k0
    # alone: one per-channel scheme, not a mix by role (no S303); the inferred
    # descriptors are notes, which set no exit code
    assert {f.code for f in rep.findings} == {"S601"}, [f.code for f in rep.findings]
    assert rep.exit_code_graded == 0 and rep.files[0].grit_tensors == 2


def test_int_quantized_is_recognised_not_passed_over(ct, tmp_path):
    """W8A8/W8A16 int8 used to scan as '0 GRIT … exit 0 (clean)', its weights
    never read: now both are GRIT arrays, checked, and said to be inferred (a
    note: the checkpoint is clean, exit 0)."""
    path = ct.write_checkpoint(str(tmp_path / "w8"), {"g": ("int-quantized", ["Linear"])})
    rep = scan([path])
    assert rep.exit_code_graded == 0 and rep.files[0].grit_tensors == 2
    fs = codes(rep, "S601")      # one per grade: per-channel k0 is each layer's in_features
    assert sorted(f.detail["grade"] for f in fs) == [
        "grit1(e=s8,k0=128,s0=x350f,esr=ratiomaxabs)", "grit1(e=s8,k0=64,s0=x350f,esr=ratiomaxabs)"]


def test_mxfp8_is_a_plain_grade_not_inexpressible(ct, tmp_path):
    path = ct.write_checkpoint(str(tmp_path / "mx8"), {"g": ("mxfp8-quantized", ["Linear"])})
    rep = scan([path])
    assert not codes(rep, "S701")
    [f] = codes(rep, "S601")
    assert f.detail["grade"] == "grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)"


def test_mixed_precision_groups_resolved_per_module(ct, tmp_path):
    """Several config groups: each module takes the group compressed-tensors
    resolves for it (exact names before class names)."""
    folder = str(tmp_path / "mixed")
    path = ct.write_checkpoint(folder, {
        "g_int8": ("int-quantized", ["model.layers.0.mlp.down_proj"]),
        "g_nvfp4": ("nvfp4-pack-quantized", ["model.layers.0.mlp.up_proj"])})
    with open(os.path.join(folder, "config.json")) as f:
        assert json.load(f)["quantization_config"]["format"] == "mixed-precision"
    loaded = grit.load(path)
    rec = loaded.recognised
    assert rec["model.layers.0.mlp.down_proj.weight"].convention.startswith(
        "compressed-tensors/int-quantized")
    assert rec["model.layers.0.mlp.up_proj.weight"].convention == \
        "compressed-tensors/nvfp4-pack-quantized"
    for module in ct.LAYERS:
        _agrees(ct, folder, module, loaded[module + ".weight"])
    rep = scan([path])
    assert not [f for f in rep.findings if f.code.startswith("S31")], rep.findings


# ---------------------------------------------------------------------------
# gpt-oss MXFP4 (the layout of openai/gpt-oss checkpoints, by hand)


def _gpt_oss(tmp_path, scales=None, config=True):
    rng = np.random.default_rng(3)
    E, OUT, G = 2, 8, 3                            # in_features = G · 32 = 96
    blocks = rng.integers(0, 256, (E, OUT, G, 16), dtype=np.uint8)
    if scales is None:
        scales = rng.integers(110, 135, (E, OUT, G), dtype=np.uint8)
    pre = "model.layers.0.mlp.experts"
    t = {f"{pre}.gate_up_proj_blocks": blocks, f"{pre}.gate_up_proj_scales": scales,
         f"{pre}.gate_up_proj_bias": np.zeros((E, OUT), np.float32),
         "model.layers.0.mlp.router.weight": rng.standard_normal((E, 96)).astype(np.float32)}
    cfg = {"architectures": ["GptOssForCausalLM"],
           "quantization_config": {"quant_method": "mxfp4",
                                   "modules_to_not_convert": ["model.layers.*.mlp.router"]}}
    return write(str(tmp_path / "oss"), t, cfg if config else None), blocks, scales, pre


def _gpt_oss_reference(blocks, scales):
    """gpt-oss's documented dequantisation, by hand: byte j of a block holds
    element 2j in its low nibble and 2j+1 in its high one; value = FP4 table
    · 2^(scale − 127)."""
    lo, hi = E2M1[blocks & 0x0F], E2M1[blocks >> 4]
    vals = np.stack([lo, hi], axis=-1).reshape(*blocks.shape[:-1], 32)
    exp = scales.astype(np.int32) - 127
    out = np.ldexp(vals, exp[..., None]).astype(np.float32)
    return out.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32)


def test_gpt_oss_mxfp4_recognised_zero_copy_and_decodes_as_the_reference(tmp_path):
    path, blocks, scales, pre = _gpt_oss(tmp_path)
    loaded = grit.load(path)
    a = loaded[f"{pre}.gate_up_proj"]
    assert isinstance(a, grit.GritArray) and a.shape == (2, 8, 96)
    assert a.gid == grit.encode(np.zeros((2, 8, 96), np.float32), grit.GRADE_MXFP4).gid
    ref = _gpt_oss_reference(blocks, scales)
    np.testing.assert_array_equal(np.asarray(grit.decode(a)).view(np.uint32), ref.view(np.uint32))
    assert f"{pre}.gate_up_proj_blocks" not in loaded and f"{pre}.gate_up_proj_bias" in loaded
    rep = scan([path])
    [f] = codes(rep, "S601")
    assert f.detail["convention"] == "gpt-oss/mxfp4" and rep.files[0].grit_tensors == 1
    assert not codes(rep, "S703") and not codes(rep, "S704")


def test_gpt_oss_agrees_with_transformers_dequantisation(tmp_path):
    torch = pytest.importorskip("torch", reason="torch (CPU) is not installed")
    mx = pytest.importorskip("transformers.integrations.mxfp4",
                             reason="transformers is not installed")
    path, blocks, scales, pre = _gpt_oss(tmp_path)
    peer = mx.convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales),
                                         dtype=torch.float32)
    # transformers hands the experts' weights to its bmm as [E, in, out]
    peer = peer.transpose(1, 2).contiguous().numpy()
    x = np.asarray(grit.decode(grit.load(path)[f"{pre}.gate_up_proj"]))
    np.testing.assert_array_equal(peer.view(np.uint32), x.view(np.uint32))


def test_gpt_oss_scale_ff_is_the_one_named_difference(tmp_path):
    """E8M0's 0xFF is NaN (§8.2); the reference's ldexp(v, 128) is ±inf (or
    0 for a zero code): the recogniser says so."""
    sc = np.full((2, 8, 3), 127, np.uint8)
    sc[0, 0, 0] = 0xFF
    path, blocks, scales, pre = _gpt_oss(tmp_path, scales=sc)
    loaded = grit.load(path)
    x = np.asarray(grit.decode(loaded[f"{pre}.gate_up_proj"]))
    assert np.isnan(x[0, 0, :32]).all() and not np.isnan(x[0, 0, 32:]).any()
    assert any("0xFF" in n for n in loaded.recognised[f"{pre}.gate_up_proj"].notes)


def test_gpt_oss_without_config_is_still_recognised(tmp_path):
    path, *_ = _gpt_oss(tmp_path, config=False)
    r = grit.load(path).recognised["model.layers.0.mlp.experts.gate_up_proj"]
    assert r.kind == "inferred" and any("alone" in n for n in r.notes)


# ---------------------------------------------------------------------------
# ModelOpt NVFP4 (the layout ModelOpt exports, by hand)


def _modelopt(tmp_path, ws2=np.float32(3.5 / 2688)):
    rng = np.random.default_rng(11)
    OUT, IN = 16, 64
    q = rng.integers(0, 16, (OUT, IN), dtype=np.uint8)
    sc = rng.integers(0x30, 0x50, (OUT, IN // 16), dtype=np.uint8)
    pre = "model.layers.0.self_attn.o_proj"
    t = {f"{pre}.weight": (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8),
         f"{pre}.weight_scale": sc.view(ml_dtypes.float8_e4m3fn),
         f"{pre}.weight_scale_2": np.array(ws2, np.float32),
         f"{pre}.input_scale": np.array(1.0, np.float32)}
    hq = {"producer": {"name": "modelopt"},
          "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": []}}
    path = write(str(tmp_path / "mo"), t, {"architectures": ["LlamaForCausalLM"]},
                 extra={"hf_quant_config.json": hq})
    return path, q, sc, pre


def test_modelopt_nvfp4_recognised_and_decodes_as_modelopt(tmp_path):
    path, q, sc, pre = _modelopt(tmp_path)
    a = grit.load(path)[f"{pre}.weight"]
    assert isinstance(a, grit.GritArray)
    assert a.grade.canonical == "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)"
    # ModelOpt: e2m1 · (float(weight_scale) · weight_scale_2), each product in float32
    s = sc.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    per_block = (s * np.float32(3.5 / 2688)).astype(np.float32)
    ref = (E2M1[q] * np.repeat(per_block, 16, axis=1)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(grit.decode(a)).view(np.uint32), ref.view(np.uint32))
    rep = scan([path])
    [f] = codes(rep, "S601")
    assert f.detail["convention"] == "modelopt/nvfp4"
    assert not codes(rep, "S322") and not codes(rep, "S704")


# ---------------------------------------------------------------------------
# the bug classes other tools have: a per-tensor scale in the other direction


def test_modelopt_multiplier_above_one_is_a_divisor_not_inverted(tmp_path):
    g = np.float32(2688 / 3.5)               # compressed-tensors' divisor, copied as is
    path, *_ = _modelopt(tmp_path, ws2=g)
    rep = scan([path])
    [f] = codes(rep, "S322")
    assert f.severity == 2 and f.detail["applied_as"] == "multiplier"
    assert f.detail["amax_other_direction"] == pytest.approx(3.5, rel=1e-6)
    assert rep.exit_code_graded == 2


def test_compressed_tensors_divisor_below_one_is_a_multiplier_not_inverted(tmp_path):
    rng = np.random.default_rng(5)
    pre = "model.layers.0.mlp.down_proj"
    q = rng.integers(0, 16, (4, 32), dtype=np.uint8)
    g = np.float32(3.5 / 2688)               # ModelOpt's multiplier, copied as is
    t = {f"{pre}.weight_packed": (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8),
         f"{pre}.weight_scale": rng.integers(0x30, 0x50, (4, 2), dtype=np.uint8).view(
             ml_dtypes.float8_e4m3fn),
         f"{pre}.weight_global_scale": np.array([g], np.float32)}
    path = write(str(tmp_path / "ct"), t)
    rep = scan([path])
    [f] = codes(rep, "S322")
    assert f.detail["applied_as"] == "divisor"
    assert f.detail["amax_as_stored"] == pytest.approx(2688 / g, rel=1e-6)
    assert f.detail["factor"] == pytest.approx(1 / (float(g) ** 2), rel=1e-6)


# ---------------------------------------------------------------------------
# nothing passes as clean by accident


def test_an_unknown_quant_method_is_named(tmp_path):
    t = {"model.layers.0.mlp.down_proj.weight": np.ones((4, 4), np.float16)}
    path = write(str(tmp_path / "u"), t, {"quantization_config": {"quant_method": "hqq",
                                                                 "nbits": 4}})
    rep = scan([path])
    [f] = codes(rep, "S703")
    assert f.detail["quant_method"] == "hqq" and "compressed-tensors" in f.detail["known"]
    assert rep.exit_code_graded == 3


def test_every_known_method_is_not_reported(tmp_path):
    for m in ("gptq", "awq", "compressed-tensors", "modelopt", "mxfp4", "torchao", "grit",
              "bitsandbytes"):
        t = {"model.layers.0.mlp.down_proj.weight": np.ones((4, 4), np.float16)}
        path = write(str(tmp_path / m), t, {"quantization_config": {"quant_method": m}})
        assert not codes(scan([path]), "S703"), m


@pytest.mark.parametrize("tensors", [
    # Hugging Face's fine-grained FP8: codes beside a weight_scale_inv
    {"model.layers.0.mlp.down_proj.weight": np.zeros((8, 8), ml_dtypes.float8_e4m3fn),
     "model.layers.0.mlp.down_proj.weight_scale_inv": np.ones((1, 1), np.float32)},
    # a packed-codes name and no scale at all
    {"model.layers.0.mlp.down_proj.weight_packed": np.zeros((8, 4), np.uint8)},
    {"model.layers.0.mlp.experts.down_proj_blocks": np.zeros((2, 8, 1, 16), np.uint8)},
], ids=["fp8-scale-inv", "packed-alone", "blocks-alone"])
def test_tensors_that_look_quantised_and_no_convention_claims_are_named(tmp_path, tensors):
    path = write(str(tmp_path / "x"), tensors)
    rep = scan([path])
    [f] = codes(rep, "S704")
    assert set(f.detail["files"]) == set(tensors)
    assert rep.exit_code_graded != 0


def test_plain_tensors_beside_scales_are_not_flagged(tmp_path):
    t = {"model.layers.0.self_attn.k_proj.weight": np.ones((4, 4), np.float16),
         "model.layers.0.self_attn.k_scale": np.ones((), np.float32),
         "model.embed_tokens.weight": np.ones((4, 4), np.float16)}
    rep = scan([write(str(tmp_path / "p"), t)])
    assert not rep.findings


# ---------------------------------------------------------------------------
# a convention added by another package, through the entry point


def test_a_third_party_convention_registers_through_the_entry_point(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "myconv").mkdir(parents=True)
    (site / "myconv" / "__init__.py").write_text(textwrap.dedent('''
        from grit.conventions.base import Convention, Recognised

        def claims(leaves, t, h):
            return "weight_codes" in leaves

        def recognise(pre, t, h, q, read):
            return [Recognised(pre + ".weight", "myconv", "inexpressible",
                               tuple(sorted(t.values())), section="§0.3b",
                               reason="a codebook of my own")]

        CONVENTION = Convention("myconv", methods=("myquant",), claims_module=claims,
                                recognise_module=recognise)
    '''))
    dist = site / "myconv-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myconv\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[grit.conventions]\nmyconv = myconv:CONVENTION\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(conventions, "_loaded", None)
    try:
        assert conventions.conventions()[-1].name == "myconv"
        t = {"model.layers.0.mlp.down_proj.weight_codes": np.zeros((4, 4), np.uint8),
             "model.layers.0.mlp.down_proj.weight_scale": np.ones((4, 1), np.float16)}
        path = write(str(tmp_path / "ck"), t, {"quantization_config": {"quant_method":
                                                                      "myquant"}})
        rep = scan([path])
        [f] = codes(rep, "S701")
        assert f.detail["convention"] == "myconv"
        assert not codes(rep, "S703") and not codes(rep, "S704")
    finally:
        monkeypatch.setattr(conventions, "_loaded", None)


def test_an_entry_point_that_is_not_a_convention_is_a_clear_error(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "bad").mkdir(parents=True)
    (site / "bad" / "__init__.py").write_text("CONVENTION = 42\n")
    dist = site / "bad-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bad\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[grit.conventions]\nbad = bad:CONVENTION\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(conventions, "_loaded", None)
    try:
        with pytest.raises(grit.GritUsageError, match="not a Convention"):
            conventions.conventions()
    finally:
        monkeypatch.setattr(conventions, "_loaded", None)


def test_no_convention_branch_outside_the_package():
    """The conventions' names appear in no dispatch outside grit/conventions:
    io and scan ask the registry."""
    root = os.path.join(os.path.dirname(__file__), "..", "grit")
    for rel in ("io/recognise.py", "scan/config.py", "scan/analyses.py", "io/__init__.py",
                "explain.py"):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            src = f.read()
        for needle in ("weight_packed", "weight_global_scale", "quant_algo", "_blocks",
                       "tensor_names", "desc_act", "config_groups", "hf_quant_config"):
            assert needle not in src, (rel, needle)


def test_compressed_tensors_is_importable_here_or_the_library_tests_skip():
    """Say which of the library-backed tests ran (a skip is visible in -ra)."""
    if importlib.util.find_spec("compressed_tensors") is None:
        pytest.skip("compressed-tensors is not installed: its checkpoints were not built")
