"""The other direction of each convention: GRIT arrays written as the
convention's own tensors and config (``grit.conventions.emit``), read back
by the convention's own library where it installs, and by grit's
recogniser; a checkpoint written by compressed-tensors, recognised and
emitted again, is its own bytes."""
from __future__ import annotations

import json
import os

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

import grit
from grit import conventions
from _support import raw_tensors

RNG = np.random.default_rng(2026)


def save(folder, em, extra_config=None):
    os.makedirs(folder, exist_ok=True)
    save_file({k: np.ascontiguousarray(v) for k, v in em.tensors.items()},
              os.path.join(folder, "model.safetensors"))
    for fn, doc in em.configs.items():
        if fn == "config.json":
            doc = {"architectures": ["LlamaForCausalLM"], **doc}
        with open(os.path.join(folder, fn), "w") as f:
            json.dump(doc, f)
    return os.path.join(folder, "model.safetensors")


def bits(x):
    return np.ascontiguousarray(x, np.float32).view(np.uint32)


@pytest.mark.parametrize("kind", ["int-quantized", "int-quantized-asym", "float-quantized",
                                  "mxfp8-quantized", "mxfp4-pack-quantized",
                                  "nvfp4-pack-quantized", "pack-quantized"])
def test_a_compressed_tensors_checkpoint_read_and_written_again_is_its_own_bytes(
        ct, kind, tmp_path):
    src = ct.write_checkpoint(str(tmp_path / "src"), {"group_0": (kind, ["Linear"])})
    loaded = grit.load(src)
    em = conventions.emit("compressed-tensors", dict(loaded))
    before = raw_tensors(src)
    assert set(em.tensors) == set(before)
    for tn, (_dtype, shape, raw) in before.items():
        got = np.ascontiguousarray(em.tensors[tn])
        assert got.shape == shape, tn
        if tn.endswith("weight_global_scale"):
            # stored back as f32(1/f32(1/g)): g itself wherever that round trip is exact
            assert got.tobytes() == raw or em.weights[tn[:-len("_global_scale")]].notes
            continue
        assert got.tobytes() == raw, tn


@pytest.mark.parametrize("grade", [
    "GRADE_NVF4", "GRADE_MXFP4", "grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)",
    "grit1(e=e4m3,k0=64,s0=binary32,esr=ratiomaxabs)",
    "grit1(e=s8,k0=64,s0=binary16,esr=ratiomaxabs)"])
def test_grit_arrays_written_as_compressed_tensors_decompress_as_grit_decodes(
        ct, grade, tmp_path):
    """compressed-tensors reads the config grit writes (its own pydantic
    models) and its decompress equals grit.decode of the source, rounded once
    to the peer's output dtype; where the emitter says the move is not
    exact (NVFP4's divisor), equal up to the codes it counts."""
    import torch
    from compressed_tensors.quantization import QuantizationConfig
    x = RNG.standard_normal((32, 128)).astype(np.float32)
    a = grit.encode(x, grade)
    arrays = {"model.layers.0.mlp.down_proj.weight": a,
              "lm_head.weight": RNG.standard_normal((4, 128)).astype(np.float32)}
    em = conventions.emit("compressed-tensors", arrays)
    folder = str(tmp_path / "ct")
    save(folder, em)
    q = em.configs["config.json"]["quantization_config"]
    QuantizationConfig.model_validate(q)                    # the library's own schema
    assert q["ignore"] == ["lm_head"]
    peer = ct.decompress(folder, "model.layers.0.mlp.down_proj")
    ref = np.asarray(grit.decode(a))
    # the library works in the scale's dtype: GRIT's binary32 value rounded once to it
    narrow = {torch.bfloat16: ml_dtypes.bfloat16, torch.float16: np.float16}.get(peer.dtype)
    if narrow is not None:
        ref = ref.astype(narrow).astype(np.float32)
    got = peer.float().numpy()
    w = em.weights["model.layers.0.mlp.down_proj.weight"]
    if w.exact:
        np.testing.assert_array_equal(bits(got), bits(ref))
    else:
        assert (bits(got) != bits(ref)).mean() < 0.5 and w.notes
    # and grit reads its own output back as the same contract
    back = grit.load(os.path.join(folder, "model.safetensors"))
    assert back["model.layers.0.mlp.down_proj.weight"].gid == a.gid


def test_what_compressed_tensors_cannot_hold_is_refused_with_the_reason():
    x = RNG.standard_normal((8, 256)).astype(np.float32)
    arrays = {"a.weight": grit.encode(x, grit.GRADE_Q4KS),
              "b.weight": grit.encode(x.reshape(-1), grit.GRADE_MXFP4),
              "c.weight": grit.encode(x, grit.GRADE_MXFP4)}
    with pytest.raises(grit.GritUsageError) as e:
        conventions.emit("compressed-tensors", arrays)
    text = str(e.value)
    assert "2 array(s)" in text and "a.weight" in text and "b.weight" in text
    assert "c.weight" not in text.split("\n", 1)[1]
    with pytest.raises(grit.GritUsageError, match="no convention 'nope'"):
        conventions.emit("nope", arrays)


def test_modelopt_nvfp4_written_and_read_back_exactly(tmp_path):
    x = RNG.standard_normal((16, 64)).astype(np.float32)
    a = grit.encode(x, grit.GRADE_NVF4)
    em = conventions.emit("modelopt", {"model.layers.0.self_attn.o_proj.weight": a,
                                       "lm_head.weight": np.ones((2, 64), np.float16)})
    assert set(em.configs) == {"hf_quant_config.json", "config.json"}
    assert em.configs["hf_quant_config.json"]["quantization"]["exclude_modules"] == ["lm_head"]
    path = save(str(tmp_path / "mo"), em)
    back = grit.load(path)["model.layers.0.self_attn.o_proj.weight"]
    assert back.gid == a.gid
    assert [bytes(p) for p in back.planes] == [bytes(p) for p in grit.canonical(a).planes]
    rep = grit.scan.scan([path]) if hasattr(grit, "scan") and callable(grit.scan) else None
    if rep is None:
        from grit.scan import scan
        rep = scan([path])
    assert not [f for f in rep.findings if f.code in ("S310", "S315", "S316", "S322", "S703")]


def test_gpt_oss_written_as_blocks_and_scales_reads_as_transformers_does(tmp_path):
    torch = pytest.importorskip("torch", reason="torch (CPU) is not installed")
    mx = pytest.importorskip("transformers.integrations.mxfp4",
                             reason="transformers is not installed")
    x = RNG.standard_normal((2, 8, 64)).astype(np.float32)
    a = grit.encode(x, grit.GRADE_MXFP4)
    name = "model.layers.0.mlp.experts.down_proj"
    em = conventions.emit("gpt-oss", {name: a})
    assert set(em.tensors) == {name + "_blocks", name + "_scales"}
    peer = mx.convert_moe_packed_tensors(torch.from_numpy(em.tensors[name + "_blocks"].copy()),
                                         torch.from_numpy(em.tensors[name + "_scales"].copy()),
                                         dtype=torch.float32)
    np.testing.assert_array_equal(bits(peer.transpose(1, 2).numpy()), bits(grit.decode(a)))
    path = save(str(tmp_path / "oss"), em)
    assert grit.load(path)[name].gid == a.gid


def test_every_builtin_writer_refuses_a_plain_grade_mismatch():
    a = grit.encode(RNG.standard_normal((4, 64)).astype(np.float32), grit.GRADE_MXFP4)
    for conv in ("modelopt",):
        with pytest.raises(grit.GritUsageError, match="cannot hold"):
            conventions.emit(conv, {"w.weight": a})
    with pytest.raises(grit.GritUsageError, match="does not write"):
        conventions.emit("torchao", {"w.weight": a})
