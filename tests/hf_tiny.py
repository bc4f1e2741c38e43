"""Tiny Hugging Face causal LMs built with transformers on CPU, quantised by
compressed-tensors itself, saved with a tokenizer built by ``tokenizers``.

:func:`write_model` makes a folder llama.cpp's converter and grit's both
read: ``config.json`` (transformers' own, with compressed-tensors'
``quantization_config``), ``model.safetensors`` (compressed by the library's
``ModelCompressor``), and ``tokenizer.json`` / ``tokenizer_config.json`` (a
byte-level BPE with Llama 3's or Qwen 2's pre-tokenizer regex).  Importing
this module needs torch, transformers, tokenizers and compressed-tensors
(callers ``pytest.importorskip`` them first).
"""
from __future__ import annotations

import json
import os

import torch
import transformers
from compressed_tensors.compressors import ModelCompressor
from compressed_tensors.quantization import (QuantizationArgs, QuantizationConfig,
                                             QuantizationScheme, apply_quantization_config)
from compressed_tensors.quantization.utils import generate_gparam
from safetensors.torch import save_file

from ct_official import calibrate

#: Llama 3's and Qwen 2's pre-tokenizer regexes, as their tokenizer.json hold them
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?"
             r"[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?"
            r"[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

#: family -> (transformers config class, model class, architectures[0], regex)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", LLAMA3_RE),
    "mistral": ("MistralConfig", "MistralForCausalLM", LLAMA3_RE),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", QWEN2_RE),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", QWEN2_RE),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", LLAMA3_RE),
    "qwen3moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", QWEN2_RE),
    "qwen2moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", QWEN2_RE),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", LLAMA3_RE),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", LLAMA3_RE),
}

#: mixture-of-experts family -> (the MoE block's name in the checkpoint, the
#: expert's gate, up and down projections' names): the per-expert layout of
#: Hugging Face checkpoints (transformers fuses the experts when it loads them)
MOE = {"qwen3moe": ("mlp", ("gate_proj", "up_proj", "down_proj")),
       "qwen2moe": ("mlp", ("gate_proj", "up_proj", "down_proj")),
       "mixtral": ("block_sparse_moe", ("w1", "w3", "w2"))}
#: experts per MoE block, experts per token, and each expert's MLP width
N_EXPERTS, TOP_K, EXPERT_FF = 4, 2, 64

#: NVFP4 weights args (compressed-tensors' nvfp4-pack-quantized)
NVFP4 = dict(num_bits=4, type="float", strategy="tensor_group", group_size=16, symmetric=True)
MXFP4 = dict(num_bits=4, type="float", strategy="group", group_size=32, symmetric=True,
             scale_dtype=torch.uint8)

_CORPUS = ["the quick brown fox jumps over the lazy dog", "hello world, hello grit",
           "llama.cpp loads GGUF files", "0123456789 numbers and words"] * 8


def tokenizer(regex: str):
    """A byte-level BPE tokenizer (tokenizers) with ``regex`` as its split
    pre-tokenizer, trained on a tiny corpus, as transformers' fast tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>", "<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_CORPUS, trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>",
                                                eos_token="</s>")


def build(family: str, *, seed: int = 0, layers: int = 2):
    """(model, tokenizer) of ``family``: hidden 128, 4 heads of 32 (2 KV
    heads), MLP 256, bfloat16."""
    cfg_name, model_name, regex = FAMILIES[family]
    tok = tokenizer(regex)
    kw = dict(vocab_size=len(tok), hidden_size=128, intermediate_size=256,
              num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
              head_dim=32, max_position_embeddings=256, bos_token_id=tok.bos_token_id,
              eos_token_id=tok.eos_token_id, tie_word_embeddings=False,
              initializer_range=0.25)
    if family == "gemma3":
        kw.update(sliding_window=64, query_pre_attn_scalar=32)
    if family in ("qwen3moe", "qwen2moe"):
        kw.update(num_experts=N_EXPERTS, num_experts_per_tok=TOP_K,
                  moe_intermediate_size=EXPERT_FF)
    if family == "qwen2moe":        # every layer an MoE block, with a shared expert
        kw.update(shared_expert_intermediate_size=2 * EXPERT_FF, decoder_sparse_step=1,
                  mlp_only_layers=[])
    if family in ("mixtral", "gpt_oss"):
        kw.update(num_local_experts=N_EXPERTS, num_experts_per_tok=TOP_K,
                  intermediate_size=EXPERT_FF)
    if family == "gpt_oss":
        kw.update(sliding_window=64)
    cfg = getattr(transformers, cfg_name)(**kw)
    cfg.architectures = [model_name]
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(cfg).to(torch.bfloat16).eval()
    with torch.no_grad():           # norms away from 1 (and from 0 for Gemma's 1 + w)
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.copy_(torch.rand_like(p.float()).to(p.dtype) * 0.5 + 0.5)
    if family in MOE:
        _per_expert(model, MOE[family][1])
    return model, tok


def _per_expert(model, names: tuple[str, str, str]) -> None:
    """Each MoE block's fused experts (transformers' 3-D ``gate_up_proj`` and
    ``down_proj``) as one module per expert holding three Linear layers
    named ``names`` (gate, up, down), the layout Hugging Face checkpoints
    store and compressed-tensors quantises (its targets are Linear layers).
    The model is for saving only: its MoE blocks no longer run."""
    for layer in model.model.layers:
        fused = layer.mlp.experts
        n_ff = fused.down_proj.shape[-1]
        experts = torch.nn.ModuleList()
        for e in range(fused.gate_up_proj.shape[0]):
            m = torch.nn.Module()
            for name, w in zip(names, (fused.gate_up_proj[e, :n_ff], fused.gate_up_proj[e, n_ff:],
                                       fused.down_proj[e])):
                lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype)
                with torch.no_grad():
                    lin.weight.copy_(w)
                setattr(m, name, lin)
            experts.append(m)
        layer.mlp.experts = experts


def quantise(model, args: dict, fmt: str, *, activations: dict | None = None) -> None:
    """Quantise every Linear but the LM head (and a shared-expert gate) with
    compressed-tensors (qparams by min/max per group, as ct_official.py),
    compressing in place;
    ``activations``: the input activations' args too (their global scale set
    as a calibration would, from a made-up range per module)."""
    scheme = QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(**args), format=fmt,
                                input_activations=None if activations is None
                                else QuantizationArgs(**activations))
    # (a Qwen2-MoE block's one-row shared-expert gate stays unquantised, as
    # llm-compressor's recipes for those models leave it)
    apply_quantization_config(model, QuantizationConfig(
        config_groups={"group_0": scheme}, format=fmt,
        ignore=["lm_head", "re:.*shared_expert_gate$"]))
    def input_scale(mod) -> None:
        if hasattr(mod, "input_global_scale"):
            amax = torch.tensor(3.0 + mod.weight.shape[0] / 100.0)
            mod.input_global_scale.data.copy_(
                generate_gparam(-amax, amax).reshape(mod.input_global_scale.shape))

    calibrate(model, input_scale)
    comp = ModelCompressor.from_pretrained_model(model, quantization_format=fmt)
    comp.compress_model(model)
    model._ct_compressor = comp


def write_model(path: str, family: str, *, fmt: str | None = "nvfp4-pack-quantized",
                seed: int = 0, w4a4: bool = False) -> str:
    """The folder ``path`` holding a tiny ``family`` model, quantised in
    compressed-tensors format ``fmt`` (None: the bfloat16 model as it is;
    ``w4a4``: NVFP4 activations too, with their global scales).
    Returns ``path``."""
    model, tok = build(family, seed=seed)
    os.makedirs(path, exist_ok=True)
    model.config.save_pretrained(path)
    tok.save_pretrained(path)
    if fmt is not None:
        quantise(model, NVFP4 if fmt.startswith("nvfp4") else MXFP4, fmt,
                 activations=dict(NVFP4, dynamic="local") if w4a4 else None)
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    if family in MOE:            # the checkpoint's name of the MoE block (transformers': mlp)
        sd = {k.replace(".mlp.", f".{MOE[family][0]}."): v for k, v in sd.items()}
    save_file(sd, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    if fmt is not None:
        model._ct_compressor.update_config(path)
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    cfg["architectures"] = [FAMILIES[family][1]]
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return path


def sentencepiece_model(path: str) -> int:
    """A SentencePiece BPE ``tokenizer.model`` trained on the same tiny
    corpus, written into folder ``path``; returns its vocabulary size."""
    import io
    import sentencepiece as spm
    m = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_CORPUS), model_writer=m,
                                   vocab_size=120, model_type="bpe", hard_vocab_limit=False,
                                   minloglevel=2)
    with open(os.path.join(path, "tokenizer.model"), "wb") as f:
        f.write(m.getvalue())
    return spm.SentencePieceProcessor(model_proto=m.getvalue()).vocab_size()


def write_gpt_oss(path: str, *, seed: int = 0) -> str:
    """The folder ``path`` holding a tiny gpt-oss model in gpt-oss's own MXFP4
    layout (``quant_method: mxfp4``): each expert weight, transposed to
    [expert, out, in] as gpt-oss checkpoints store it, encoded to MXFP4
    (``grit.encode``) and written as ``<w>_blocks`` / ``<w>_scales`` by
    grit's gpt-oss emitter; every other tensor bfloat16.  Returns ``path``."""
    import numpy as np
    import grit
    from grit.conventions.gpt_oss import CONVENTION as GPT_OSS
    model, tok = build("gpt_oss", seed=seed)
    os.makedirs(path, exist_ok=True)
    model.config.save_pretrained(path)
    tok.save_pretrained(path)
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    for k in [k for k in sd if k.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
        w = sd.pop(k).float().transpose(1, 2).contiguous().numpy()
        for n, x in GPT_OSS.emit(k, grit.encode(w, grit.GRADE_MXFP4)).tensors.items():
            sd[n] = torch.from_numpy(np.array(x))
    save_file(sd, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    cfg["architectures"] = [FAMILIES["gpt_oss"][1]]
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
        "lm_head"]}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return path
