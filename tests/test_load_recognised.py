"""grit.load returns the weights grit recognises in a safetensors file without
GRIT metadata (compressed-tensors, torchao) as GritArrays under their logical
names, with the config they came from (#13 item 5); grit explain FILE:NAME
resolves every name grit scan reports.  Expected values are dequantised here
independently, the way compressed-tensors does (e2m1 · (s / g))."""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner
from safetensors.numpy import save_file

import grit
from grit.cli import main as cli
from grit.explain import VERDICT_PLACEMENT, resolve
from grit.layouts import COL_MAJOR
from grit.io.safetensors import CheckFailed
from grit.scan import scan

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32)
W = "model.layers.0.mlp.down_proj"
OUT, IN = 4, 64
CFG = {"architectures": ["X"], "quantization_config": {
    "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
    "config_groups": {"group_0": {"targets": ["Linear"], "format": "nvfp4-pack-quantized",
                                  "weights": {"num_bits": 4, "type": "float",
                                              "strategy": "tensor_group", "group_size": 16,
                                              "symmetric": True}}}}}


def e4m3(code: int) -> np.float32:
    return np.array([code], np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)[0]


def checkpoint(tmp_path, scale_cols=IN // 16, g=0.25, config=CFG):
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 16, (OUT, IN), dtype=np.uint8)
    sc = rng.integers(0x28, 0x58, (OUT, scale_cols), dtype=np.uint8)
    norm = rng.standard_normal(IN).astype(np.float32)
    d = tmp_path / "ckpt"
    d.mkdir(exist_ok=True)
    path = d / "model.safetensors"
    save_file({"model.embed.weight": np.arange(8, dtype=np.float32),
               f"{W}.weight_packed": (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8),
               f"{W}.weight_scale": sc.view(ml_dtypes.float8_e4m3fn),
               f"{W}.weight_global_scale": np.array([g], np.float32),
               "model.norm.weight": norm}, str(path))
    if config is not None:
        (d / "config.json").write_text(json.dumps(config))
    return str(path), codes, sc, norm


def test_a_compressed_tensors_weight_loads_as_one_grit_array(tmp_path):
    path, codes, sc, norm = checkpoint(tmp_path)
    t = grit.load(path)
    plain = grit.load(path, recognise=False)
    first = min(list(plain).index(n) for n in plain if n.startswith(W))
    # the weight stands where its first file tensor stood; the others keep their order
    want = [n for n in plain if not n.startswith(W)]
    want.insert(first, f"{W}.weight")
    assert list(t) == want
    a = t[f"{W}.weight"]
    assert isinstance(a, grit.GritArray) and tuple(a.shape) == (OUT, IN)
    assert a.grade.canonical == "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)"
    s = np.array([[e4m3(int(c)) for c in row] for row in sc], np.float32)
    ref = (E2M1[codes] * np.repeat((s / np.float32(0.25)).astype(np.float32), 16, axis=1))
    np.testing.assert_array_equal(np.asarray(grit.decode(a)), ref.astype(np.float32))
    np.testing.assert_array_equal(t["model.norm.weight"], norm)
    assert t.config == CFG
    r = t.recognised[f"{W}.weight"]
    assert (r.kind, r.convention) == ("inferred", "compressed-tensors/nvfp4-pack-quantized")
    assert set(r.tensors) >= {f"{W}.weight_packed", f"{W}.weight_scale"}


def test_recognise_false_returns_the_file_tensors(tmp_path):
    path, *_ = checkpoint(tmp_path)
    t = grit.load(path, recognise=False)
    assert f"{W}.weight" not in t and f"{W}.weight_packed" in t
    assert not any(isinstance(v, grit.GritArray) for v in t.values())


def test_a_recognised_weight_whose_bytes_disagree_raises_or_stands_as_a_record(tmp_path):
    # the config says groups of 16; the file's scales are per 32 elements
    path, *_ = checkpoint(tmp_path, scale_cols=IN // 32)
    with pytest.raises(grit.GritSizeError, match=W):
        grit.load(path)
    t = grit.load(path, strict=False)
    assert isinstance(t[f"{W}.weight"], CheckFailed)
    assert t[f"{W}.weight"].status == grit.Status.SIZE_MISMATCH
    # scan says the same: a SizeMismatch for the same name, nested under the config's
    # group size it follows from (one root cause, one finding)
    [f] = [c for x in scan([path]).findings for c in (x, *x.consequences)
           if c.status == "SizeMismatch"]
    assert f.tensor == f"{W}.weight"


def test_inexpressible_weights_stay_as_they_are_and_are_recorded(tmp_path):
    p = "model.layers.0.self_attn.q_proj"
    d = tmp_path / "gptq"
    d.mkdir()
    t = {f"{p}.qweight": np.zeros((256 // 8, 64), np.int32),
         f"{p}.qzeros": np.zeros((2, 8), np.int32),
         f"{p}.scales": np.ones((2, 64), np.float16)}
    save_file(t, str(d / "model.safetensors"))
    # act-order: the config says the columns were quantised out of order
    (d / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True}}))
    got = grit.load(str(d / "model.safetensors"))
    assert sorted(got) == sorted(t)
    [r] = got.recognised.values()
    assert (r.kind, r.section) == ("inexpressible", "§0.3c")


def test_a_grit_file_is_its_own_description(tmp_path):
    a = grit.encode(np.linspace(-1, 1, 64, dtype=np.float32), grit.GRADE_MXFP4)
    p = str(tmp_path / "g.safetensors")
    grit.save(p, {"w": a})
    t = grit.load(p)
    assert t.recognised == {} and t.config is None and list(t) == ["w"]


def test_explain_resolves_every_name_scan_reports(tmp_path):
    path, *_ = checkpoint(tmp_path)
    names = {f.tensor for f in scan([path]).findings if f.tensor}
    assert f"{W}.weight" in names
    for n in names:
        d, g, shape, label = resolve(f"{path}:{n}")
        assert label == f"{path}:{n}" and shape == (OUT, IN)
    ref = f"{path}:{W}.weight"
    out = CliRunner().invoke(cli, ["explain", ref, ref, "--json"])
    assert out.exit_code == 0 and json.loads(out.output)["verdict"] == "same contract"
    # the same weight relayouted and saved by grit: only the placement differs
    moved = grit.relayout(grit.load(path)[f"{W}.weight"], data=COL_MAJOR)
    other = str(tmp_path / "moved.safetensors")
    grit.save(other, {"w": moved})
    out = CliRunner().invoke(cli, ["explain", ref, f"{other}:w", "--json"])
    assert out.exit_code == 1
    assert json.loads(out.output)["verdict"] == VERDICT_PLACEMENT
