"""transformers loads GRIT checkpoints: a tiny Llama-shaped model (random
init, no download) has its linear layers encoded into each registered
grade, is written by grit.interop.transformers.save_pretrained, and loads
with AutoModelForCausalLM.from_pretrained into GritLinear modules — nothing
decoded on load — whose logits equal, bit for bit, those of the same model
holding grit.decode'd weights (float32, and bfloat16 against the same model
in bfloat16).  Also the config entry of grit.conventions.grit."""
from __future__ import annotations

import json

import pytest

import grit
from grit.conventions.grit import build_config, parse_config

# -- the config entry (no framework needed)


def test_the_entry_round_trips():
    e = build_config(modules_not_converted=["lm_head"])
    assert e == {"quant_method": "grit", "convention": "grit-safetensors", "version": 1,
                 "modules_not_converted": ["lm_head"]}
    assert parse_config(json.loads(json.dumps(e))).modules_not_converted == ("lm_head",)
    assert parse_config({"quant_method": "grit", "convention": "grit-safetensors",
                         "version": 1}).modules_not_converted == ()


@pytest.mark.parametrize("bad,match", [
    ({"version": True}, "version"), ({"version": 1.0}, "version"), ({"version": 2}, "version"),
    ({"convention": "descriptor-map"}, "convention"), ({"quant_method": "gptq"}, "quant_method"),
    ({"grade": "mxfp4"}, "unknown key"), ({"modules_not_converted": "lm_head"}, "list"),
    ({"modules_not_converted": [""]}, "list"),
])
def test_the_entry_refuses(bad, match):
    e = {**build_config(), **bad}
    with pytest.raises(grit.GritUsageError, match=match):
        parse_config(e)


torch = pytest.importorskip("torch", reason="torch is not installed (the [torch] extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
gtf = pytest.importorskip("grit.interop.transformers")

from grit.interop.nn import GritLinear  # noqa: E402

GRADES = {"MXFP4": grit.GRADE_MXFP4, "MXFP4_RNE": grit.GRADE_MXFP4_RNE,
          "NVF4": grit.GRADE_NVF4, "NVF4_RTZ": grit.GRADE_NVF4_RTZ,
          "Q4KS": grit.GRADE_Q4KS, "I8S24": grit.GRADE_I8S24}
LAYERS = 2


@pytest.fixture(scope="module")
def model():
    """A tiny Llama: every linear layer's in_features (256, 512) is whole
    groups of every registered grade (Q4KS's super-block is 256)."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=256, intermediate_size=512,
                                   num_hidden_layers=LAYERS, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg).eval()


def reference(model, grade, dtype):
    """The same model with every converted weight replaced by grit.decode of
    its encoding (then cast to ``dtype`` as the whole model is)."""
    ref = transformers.LlamaForCausalLM(model.config).eval()
    ref.load_state_dict(model.state_dict())
    with torch.no_grad():
        for name, m in ref.named_modules():
            if isinstance(m, torch.nn.Linear) and name != "lm_head":
                w = model.get_submodule(name).weight.detach().numpy()
                m.weight.copy_(torch.from_numpy(grit.decode(grit.encode(w, grade))))
    return ref.to(dtype)


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 96, (2, 12), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("name", list(GRADES))
def test_from_pretrained_loads_grit_linears_with_the_decoded_logits(model, ids, name,
                                                                    tmp_path, monkeypatch):
    grade = GRADES[name]
    converted = gtf.save_pretrained(model, tmp_path, grade)
    assert len(converted) == 7 * LAYERS and "lm_head" not in converted
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert parse_config(cfg["quantization_config"]).modules_not_converted == ("lm_head",)

    # nothing is decoded while loading
    calls = []
    monkeypatch.setattr(grit.interop.torch, "_grit_decode",
                        lambda a, real=grit.interop.torch._grit_decode: calls.append(a) or real(a))
    q = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert calls == []
    files = grit.load(tmp_path / gtf.WEIGHTS_NAME)
    for n in converted:
        m = q.get_submodule(n)
        assert isinstance(m, GritLinear) and not hasattr(m, "weight")
        assert m.array() == files[f"{n}.weight"]           # the file's planes, as written
    assert type(q.lm_head) is torch.nn.Linear

    with torch.no_grad():
        got = q(ids).logits
        want = reference(model, grade, torch.float32)(ids).logits
    assert got.dtype == torch.float32
    assert torch.equal(got, want)                 # same matmuls, same order: the same bits
    assert len(calls) == len(converted)           # one decode per layer per forward


def test_bfloat16_path(model, ids, tmp_path):
    """bfloat16: bit for bit the same model in bfloat16 holding the decoded
    weights rounded once to bfloat16 — and close to the float32 logits.

    The tolerance: each bfloat16 rounding has relative error at most
    u = 2^-8; a forward pass rounds at about 12 stages per layer (norm,
    four projections, attention, residual, norm, three MLP projections,
    activation, residual) plus embedding, final norm and head, and the
    errors of the stages add at most linearly, so |Δlogit| ≤
    (12·L + 3) · u · (1 + max|logit|)."""
    grade = grit.GRADE_MXFP4
    gtf.save_pretrained(model, tmp_path / "grit", grade)
    q = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "grit", dtype=torch.bfloat16)
    assert q.model.embed_tokens.weight.dtype == torch.bfloat16
    # the reference goes through the same loader (which keeps e.g. RoPE's
    # inv_freq in float32, as ``.to(bfloat16)`` would not)
    reference(model, grade, torch.float32).save_pretrained(tmp_path / "ref")
    ref = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ref", dtype=torch.bfloat16)
    with torch.no_grad():
        got = q(ids).logits
        want = ref(ids).logits
        f32 = reference(model, grade, torch.float32)(ids).logits
    assert got.dtype == torch.bfloat16 and torch.equal(got, want)
    tol = (12 * LAYERS + 3) * 2.0 ** -8 * (1 + f32.abs().max().item())
    err = (got.float() - f32).abs().max().item()
    print(f"bfloat16 vs float32 logits: max |Δ| = {err:.4g}, tolerance {tol:.4g}")
    assert err <= tol, (err, tol)
    assert err > 0                                 # it did run in bfloat16


def test_a_checkpoint_whose_weight_shape_differs_is_refused(model, tmp_path):
    gtf.save_pretrained(model, tmp_path, grit.GRADE_MXFP4)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["intermediate_size"] = 256                 # the MLP projections no longer match
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(grit.GritUsageError, match="shape"):
        transformers.AutoModelForCausalLM.from_pretrained(tmp_path)


def test_a_grade_that_does_not_fit_leaves_the_layer_in_floating_point(tmp_path):
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=96, intermediate_size=256,
                                   num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=2, max_position_embeddings=32)
    m = transformers.LlamaForCausalLM(cfg).eval()
    converted = gtf.save_pretrained(m, tmp_path, grit.GRADE_Q4KS)
    # only down_proj has in_features = 256, a whole super-block
    assert converted == ["model.layers.0.mlp.down_proj"]
    q = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert isinstance(q.model.layers[0].mlp.down_proj, GritLinear)
    assert type(q.model.layers[0].mlp.up_proj) is torch.nn.Linear
    assert torch.equal(q.model.layers[0].mlp.up_proj.weight, m.model.layers[0].mlp.up_proj.weight)


def test_a_bfloat16_model_is_written_and_read_back(model, tmp_path):
    pytest.importorskip("ml_dtypes")
    mb = transformers.LlamaForCausalLM(model.config).eval()
    mb.load_state_dict(model.state_dict())
    mb = mb.to(torch.bfloat16)
    converted = gtf.save_pretrained(mb, tmp_path, grit.GRADE_NVF4)
    files = grit.load(tmp_path / gtf.WEIGHTS_NAME)
    emb = files["model.embed_tokens.weight"]
    assert str(emb.dtype) == "bfloat16"                       # written as BF16, not widened
    q = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16)
    assert torch.equal(q.model.embed_tokens.weight.view(torch.int16),
                       mb.model.embed_tokens.weight.view(torch.int16))
    for n in converted:                                       # bf16 weights encoded exactly
        w = mb.get_submodule(n).weight
        assert q.get_submodule(n).array() == grit.encode(w.detach().float().numpy(),
                                                         grit.GRADE_NVF4)


def test_a_compressed_tensors_checkpoint_converted_to_grit_loads_with_from_pretrained(
        model, ids, tmp_path):
    """A compressed-tensors NVFP4 checkpoint written by compressed-tensors
    itself, moved with ``grit convert --to grit``, loads into GritLinear
    modules; its logits are the model holding grit.decode of the source's
    weights, bit for bit in float32."""
    pytest.importorskip("compressed_tensors", reason="compressed-tensors is not installed")
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (QuantizationArgs, QuantizationConfig,
                                                 QuantizationScheme, apply_quantization_config)
    from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam
    from safetensors.torch import save_file

    from grit.convert import convert

    ct_model = transformers.LlamaForCausalLM(model.config).eval()
    ct_model.load_state_dict(model.state_dict())
    args = QuantizationArgs(num_bits=4, type="float", strategy="tensor_group", group_size=16,
                            symmetric=True)
    apply_quantization_config(ct_model, QuantizationConfig(
        config_groups={"g": QuantizationScheme(targets=["Linear"], weights=args)},
        ignore=["lm_head"], format="nvfp4-pack-quantized"))
    with torch.no_grad():
        for m in ct_model.modules():
            if getattr(m, "quantization_scheme", None) is None:
                continue
            w = m.weight.float()
            g = w.reshape(w.shape[0], -1, 16)
            gs = generate_gparam(w.amin(), w.amax())
            m.weight_global_scale.data.copy_(gs.reshape(m.weight_global_scale.shape))
            s, _ = calculate_qparams(g.amin(dim=2), g.amax(dim=2), args, global_scale=gs)
            m.weight_scale.data = s.to(m.weight_scale.dtype).reshape(m.weight_scale.shape)
    src = tmp_path / "ct"
    src.mkdir()
    model.config.to_json_file(str(src / "config.json"))
    comp = ModelCompressor.from_pretrained_model(ct_model, quantization_format="nvfp4-pack-quantized")
    comp.compress_model(ct_model)
    save_file({k: v.contiguous() for k, v in ct_model.state_dict().items()},
              str(src / "model.safetensors"))
    comp.update_config(str(src))

    rep = convert(str(src), str(tmp_path / "grit"), "grit")
    assert rep.counts == {"bit-exact": 7 * LAYERS}
    q = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "grit")
    source = grit.load(str(src / "model.safetensors"))
    ref = transformers.LlamaForCausalLM(model.config).eval()
    ref.load_state_dict(model.state_dict())
    with torch.no_grad():
        for name, m in ref.named_modules():
            if isinstance(m, torch.nn.Linear) and name != "lm_head":
                assert isinstance(q.get_submodule(name), GritLinear)
                m.weight.copy_(torch.from_numpy(grit.decode(source[name + ".weight"])))
        assert torch.equal(q(ids).logits, ref(ids).logits)
