"""``grit convert`` with GGUF on either side: a safetensors checkpoint written
as the GGUF llama.cpp loads (``--to gguf``), and a GGUF file moved into a
safetensors convention (a ``.gguf`` SRC).

To GGUF, per weight: its llama.cpp name (gguf-py's tensor-name map of the
architecture), the ggml block type its GRIT array *is* (NVFP4, MXFP4, Q8_0 …:
``grit.io.gguf_writer.native_type``, the element codes and block-scale bytes
moved into ggml's blocks, never re-derived; an NVFP4 array's level-1 scale as
the F32 companion ``<base>.scale`` llama.cpp multiplies by), and the rows of
the query and key projections put in the order llama.cpp's rotary embedding
reads them (convert_hf_to_gguf's ``LlamaModel.permute``: rows are moved whole,
each with its block scales).  A plain tensor keeps its dtype (BF16, F16,
F32); a 1-D one and a norm are widened to F32 (exact), as llama.cpp needs
them; Gemma 3's RMS norms are stored as 1 + w (llama.cpp's convention, one
binary32 addition).  A mixture-of-experts model's per-expert projections
are stacked into llama.cpp's 3-D ``ffn_*_exps`` tensors (:class:`_Experts`:
the experts' blocks one after another, an NVFP4 companion of one scale per
expert); gpt-oss's stacked ``gate_up_proj`` is split into its gate and up
rows (:class:`_GateUp`).  The architecture's KV entries come from config.json
through gguf-py's GGUFWriter helpers, the tokenizer from tokenizer.model
(SentencePiece) or tokenizer.json (byte-level BPE) as llama.cpp's converter
reads them, through gguf-py's vocab classes.  What llama.cpp cannot load — an
architecture, a rope scaling, a tokenizer grit does not translate, a weight no
ggml type holds — refuses the conversion, naming what is missing, before
anything is written.

From GGUF: every tensor is read as grit.load reads a GGUF file (ggml block
types as GRIT arrays, an NVFP4 tensor with its companion scale as one
two-level array), named back into the architecture's Hugging Face names with
the query/key rows put back, and written through the target convention's
emitter, as ``grit.convert.convert`` does for safetensors.

Both directions write ``grit-proof.json`` (schema ``grit-convert-proof/1``)
and record its SHA-256 in the output's ``config.json``; ``grit verify``
re-derives every verdict (``verify``).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import posixpath
import re
import shutil
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Container, Iterator, Mapping

import numpy as np

from . import conventions
from . import convert as _convert
from .array import GritArray, canonical, concat
from .conventions.grit import CONVENTION as _GRIT
from ._files import loads_json
from .errors import GritError, GritUsageError
from .facts import is_canonical
from .fingerprint import LANES, digests, digests_compared
from .ggml import TYPES, blocks_of, unblocked, unblocks_to
from .io import safetensors as _st
from .dtypes import ST_DTYPES, as_float32, bf16_narrowed, st_dtype_of
from .io.gguf import KV_CONVERT, GGUFValue, Unread, companion_names, read_files
from .io.gguf_file import ValueType, read_gguf
from .io.gguf_split import (SHARD_NAME, SPLIT_COUNT, SPLIT_NO, Split, choose, remote_folder,
                            shard_counts, shard_name, shards, write_outline)
from .io.gguf_writer import gguf_py as _gguf
from .io.gguf_writer import LazyPlain, native_kind, save_gguf
from .io.hub import HubPath, is_hub, is_remote
from .io.location import Location
from .io.source import LocalFile
from .io.problems import raise_first
from .io.recognise import MAX_CONFIG, with_recognised
from .placement.planes import geometry
from .placement.relayout import canonical_descriptor

__all__ = ["FAMILIES", "Family", "to_gguf", "from_gguf", "verify", "GGUF_FILE",
           "is_gguf_source", "qk_rows"]

#: the model file in a ``--to gguf`` output folder
GGUF_FILE = "model.gguf"
#: the ``--to`` name of GGUF
TARGET = "gguf"


# ---------------------------------------------------------------------------
# the architectures llama.cpp loads that grit writes


@dataclass(frozen=True)
class Family:
    """One Hugging Face architecture as llama.cpp's converter writes it:
    gguf-py's ``MODEL_ARCH`` name, whether the query/key rows are permuted
    (LlamaModel.permute), whether the RMS norms are stored as 1 + w, and the
    config defaults llama.cpp's converter assumes."""

    hf: str
    arch: str
    permute_qk: bool = False
    norm_plus_one: bool = False
    defaults: tuple[tuple[str, Any], ...] = ()
    #: transformers' ``model_type`` of ``hf`` (its config class)
    model_type: str = ""
    #: a mixture-of-experts model: each MoE block's per-expert projections
    #: stacked into one 3-D tensor each (:func:`_expert_stacks`)
    moe: bool = False
    #: gpt-oss: the experts stacked already, gate and up interleaved in one
    #: ``gate_up_proj`` (:class:`_GateUp`)
    gpt_oss: bool = False


#: Hugging Face ``architectures[0]`` -> how llama.cpp writes it
#: (convert_hf_to_gguf: LlamaModel for Llama, Mistral and Mixtral, Qwen2Model,
#: Qwen3Model, Qwen2MoeModel, Qwen3MoeModel, GptOssModel, Gemma3Model)
FAMILIES: dict[str, Family] = {f.hf: f for f in (
    Family("LlamaForCausalLM", "LLAMA", permute_qk=True),
    Family("MistralForCausalLM", "LLAMA", permute_qk=True),
    Family("MixtralForCausalLM", "LLAMA", permute_qk=True, moe=True),
    Family("Qwen2ForCausalLM", "QWEN2"),
    Family("Qwen3ForCausalLM", "QWEN3"),
    Family("Qwen2MoeForCausalLM", "QWEN2MOE", moe=True),
    Family("Qwen3MoeForCausalLM", "QWEN3MOE", moe=True),
    Family("GptOssForCausalLM", "GPT_OSS", moe=True, gpt_oss=True),
    Family("Gemma3ForCausalLM", "GEMMA3", norm_plus_one=True, model_type="gemma3_text",
           defaults=(("max_position_embeddings", 131072), ("num_attention_heads", 8),
                     ("rms_norm_eps", 1e-6), ("head_dim", 256), ("num_key_value_heads", 4),
                     ("rope_theta", 1_000_000.0))),
)}

#: the Hugging Face module names llama.cpp's tensor map knows, preferred when a
#: GGUF name is mapped back (the map holds many spellings of one tensor)
_HF_NAME = re.compile(r"^(model\.(layers\.\d+\.(self_attn\.(?!([qk]|query|key)_layernorm)|mlp|"
                      r"input_layernorm|post_attention_layernorm|pre_feedforward_layernorm|"
                      r"post_feedforward_layernorm)|embed_tokens|norm)|lm_head)")


def _family(cfg: dict) -> Family:
    archs = cfg.get("architectures") or []
    name = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if name is None:
        raise GritUsageError("--to gguf: config.json names no architecture (architectures[0]); "
                             "llama.cpp needs one of " + ", ".join(sorted(FAMILIES)))
    fam = FAMILIES.get(name)
    if fam is None:
        raise GritUsageError(f"--to gguf: architecture {name!r} is not one grit writes for "
                             "llama.cpp (its tensor names, KV entries and tensor transforms); "
                             "supported: " + ", ".join(sorted(FAMILIES)))
    return fam


#: the most transformer blocks a model may name (gguf-py's tensor-name map
#: holds every block's names)
MAX_BLOCKS = 1 << 14
#: the config.json entries read as counts, and as reals
_INT_KEYS = ("num_hidden_layers", "max_position_embeddings", "hidden_size", "intermediate_size",
             "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
             "sliding_window", "num_local_experts", "num_experts", "n_routed_experts",
             "num_experts_per_tok", "num_experts_per_token", "top_k_experts",
             "moe_intermediate_size", "shared_expert_intermediate_size")
#: the config.json entries of the expert count and of the experts used per
#: token, in the order llama.cpp's converter looks for them (find_hparam)
_EXPERT_COUNT = ("num_local_experts", "num_experts", "n_routed_experts")
_EXPERTS_USED = ("num_experts_per_tok", "num_experts_per_token", "top_k_experts")
_REAL_KEYS = ("rope_theta", "rope_local_base_freq", "rms_norm_eps", "final_logit_softcapping")


def _hparams(cfg: dict, fam: Family) -> dict:
    """The model's hyper-parameters: config.json (its ``text_config`` too)
    over the family's defaults, each count a positive int below 2^31 (the
    expert counts: zero too) and each real a finite number, or a
    GritUsageError naming the entry.  A ``sliding_window`` of 0 or one that
    ``use_sliding_window: false`` turns off (Qwen2-MoE's config writes both)
    is no window."""
    h = dict(fam.defaults)
    text = cfg.get("text_config")
    h.update(text if isinstance(text, dict) else {})
    h.update({k: v for k, v in cfg.items() if k != "text_config"})
    if h.get("sliding_window") == 0 or h.get("use_sliding_window") is False:
        h.pop("sliding_window", None)
    for k in _INT_KEYS:
        v = h.get(k)
        top = MAX_BLOCKS if k == "num_hidden_layers" else 2**31 - 1
        low = 0 if k in _EXPERT_COUNT + _EXPERTS_USED else 1    # (a dense model's 0 experts)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or
                              not low <= v <= top):
            raise GritUsageError(f"--to gguf: config.json's {k} is {v!r}, not a count "
                                 f"in {low}..{top}")
    for k in _REAL_KEYS:
        v = h.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or
                              not math.isfinite(v)):
            raise GritUsageError(f"--to gguf: config.json's {k} is {v!r}, not a number")
    return h


def _first(h: dict, keys: tuple[str, ...]) -> int | None:
    """The value of the first of ``keys`` config.json sets (not null)."""
    return next((h[k] for k in keys if h.get(k) is not None), None)


def _need(h: dict, key: str, fam: Family) -> Any:
    v = h.get(key)
    if v is None:
        raise GritUsageError(f"--to gguf: config.json has no {key!r}, which llama.cpp's "
                             f"{fam.arch.lower()} architecture needs")
    return v


def qk_rows(rows: int, n_head: int) -> np.ndarray:
    """The source row each output row of a query/key projection takes in
    llama.cpp's order (convert_hf_to_gguf ``LlamaModel.permute``: within each
    head, the two halves of the rotary dimensions interleaved)."""
    if n_head <= 0 or rows % (2 * n_head):
        raise GritUsageError(f"a query/key projection of {rows} rows does not split into "
                             f"{n_head} heads of two rotary halves")
    return np.arange(rows).reshape(n_head, 2, rows // n_head // 2).swapaxes(1, 2).reshape(-1)


def _qk_heads(hf_name: str, fam: Family, h: dict) -> int | None:
    """The head count a tensor's rows are permuted over (None: not permuted)."""
    if not fam.permute_qk:
        return None
    n_head = int(_need(h, "num_attention_heads", fam))
    if re.search(r"q_proj\.(weight|bias)$", hf_name):
        return n_head
    if re.search(r"k_proj\.(weight|bias)$", hf_name):
        return int(h.get("num_key_value_heads") or n_head)
    return None


# ---------------------------------------------------------------------------
# KV entries (ported from convert_hf_to_gguf's TextModel / LlamaModel /
# Gemma3Model set_gguf_parameters) and the tokenizer


def _rope(h: dict) -> tuple[dict, dict | None]:
    """(the full-attention rope parameters, the sliding-window ones or None)."""
    rp = h.get("rope_parameters") or h.get("rope_scaling") or {}
    rp = dict(rp) if isinstance(rp, dict) else {}
    full = dict(rp.get("full_attention") or rp)
    swa = rp.get("sliding_attention")
    if "rope_theta" not in full and h.get("rope_theta") is not None:
        full["rope_theta"] = h["rope_theta"]
    if swa is None and h.get("rope_local_base_freq") is not None:
        swa = {"rope_theta": h["rope_local_base_freq"]}
    if "rope_type" not in full and full.get("type") is not None:
        full["rope_type"] = full["type"]
    return full, swa


def _llama3_factors(h: dict, rp: dict) -> np.ndarray:
    """LlamaModel.generate_extra_tensors: the rope_freqs tensor of a Llama 3
    rope scaling."""
    base = rp.get("rope_theta", 10000.0)
    dim = h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor = rp.get("factor", 8.0)
    lo, hi = rp.get("low_freq_factor", 1.0), rp.get("high_freq_factor", 4.0)
    old = rp.get("original_max_position_embeddings", 8192)
    lo_w, hi_w = old / lo, old / hi
    out = []
    for f in freqs:
        wl = 2 * math.pi / float(f)
        if wl < hi_w:
            out.append(1.0)
        elif wl > lo_w:
            out.append(factor)
        else:
            s = (old / wl - lo) / (hi - lo)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out, np.float32)


def _yarn(w, rp: dict) -> None:
    """The KV entries of a YaRN rope scaling, as convert_hf_to_gguf's
    TextModel.set_gguf_parameters writes them: type, factor, the original
    context length, and the extrapolation and attention factors and the
    two betas where the config has them."""
    gguf = _gguf()
    orig = rp.get("original_max_position_embeddings")
    if isinstance(orig, bool) or not isinstance(orig, int) or not 0 < orig < 2**31:
        raise GritUsageError("--to gguf: a yarn rope scaling needs "
                             f"original_max_position_embeddings, a count; got {orig!r}")
    reals = {"factor": rp.get("factor"), "extrapolation_factor": rp.get("extrapolation_factor"),
             "attention_factor": rp.get("attention_factor", rp.get("attn_factor")),
             "beta_fast": rp.get("beta_fast"), "beta_slow": rp.get("beta_slow")}
    for k, v in reals.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or
                              not math.isfinite(v)):
            raise GritUsageError(f"--to gguf: the yarn rope scaling's {k} is {v!r}, "
                                 "not a number")
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(reals["factor"])
    w.add_rope_scaling_orig_ctx_len(orig)
    for k, add in (("extrapolation_factor", w.add_rope_scaling_yarn_ext_factor),
                   ("attention_factor", w.add_rope_scaling_yarn_attn_factor),
                   ("beta_fast", w.add_rope_scaling_yarn_beta_fast),
                   ("beta_slow", w.add_rope_scaling_yarn_beta_slow)):
        if reals[k] is not None:
            add(reals[k])


def _kv(w, fam: Family, h: dict, ftype: int, name: str) -> np.ndarray | None:
    """Add the architecture's KV entries to gguf-py writer ``w``; returns the
    rope_freqs tensor where the rope scaling has one."""
    gguf = _gguf()
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(name)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_block_count(int(_need(h, "num_hidden_layers", fam)))
    if h.get("max_position_embeddings") is not None:
        w.add_context_length(int(h["max_position_embeddings"]))
    w.add_embedding_length(int(_need(h, "hidden_size", fam)))
    if h.get("intermediate_size") is not None:
        w.add_feed_forward_length(int(h["intermediate_size"]))
    w.add_head_count(int(_need(h, "num_attention_heads", fam)))
    if h.get("num_key_value_heads") is not None:
        w.add_head_count_kv(int(h["num_key_value_heads"]))
    full, swa = _rope(h)
    freqs = None
    rtype = full.get("rope_type")
    if rtype not in (None, "default"):
        if rtype == "linear" and full.get("factor") is not None:
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(full["factor"])
        elif rtype == "yarn" and full.get("factor") is not None:
            _yarn(w, full)
        elif str(rtype).lower() == "llama3" and fam.arch == "LLAMA":
            freqs = _llama3_factors(h, full)
        else:
            raise GritUsageError(f"--to gguf: rope scaling {rtype!r} is not one grit writes "
                                 "for llama.cpp (default, linear, yarn, and llama3 for Llama)")
    if full.get("rope_theta") is not None:
        w.add_rope_freq_base(float(full["rope_theta"]))
    if swa is not None and swa.get("rope_theta") is not None:
        w.add_rope_freq_base_swa(float(swa["rope_theta"]))
    if h.get("rms_norm_eps") is not None:
        w.add_layer_norm_rms_eps(float(h["rms_norm_eps"]))
    n_expert, n_used = _first(h, _EXPERT_COUNT), _first(h, _EXPERTS_USED)
    if n_expert is not None:                        # TextModel.set_gguf_parameters
        w.add_expert_count(int(n_expert))
    if n_used is not None:
        w.add_expert_used_count(int(n_used))
    if fam.arch == "GPT_OSS":                       # GptOssModel.set_gguf_parameters
        w.add_sliding_window(int(_need(h, "sliding_window", fam)))
        w.add_expert_feed_forward_length(int(_need(h, "intermediate_size", fam)))
    if fam.arch in ("QWEN2MOE", "QWEN3MOE"):        # Qwen2MoeModel.set_gguf_parameters
        if h.get("moe_intermediate_size") is not None:
            w.add_expert_feed_forward_length(int(h["moe_intermediate_size"]))
        if h.get("shared_expert_intermediate_size") is not None:
            w.add_expert_shared_feed_forward_length(int(h["shared_expert_intermediate_size"]))
    if h.get("head_dim") is not None:
        w.add_key_length(int(h["head_dim"]))
        w.add_value_length(int(h["head_dim"]))
    w.add_file_type(ftype)
    if fam.arch == "LLAMA":
        w.add_vocab_size(int(_need(h, "vocab_size", fam)))
        w.add_rope_dimension_count(int(h.get("head_dim") or
                                       h["hidden_size"] // h["num_attention_heads"]))
    if fam.arch == "GEMMA3":
        if h.get("attn_logit_softcapping") is not None:
            raise GritUsageError("--to gguf: gemma3 with attn_logit_softcapping is not "
                                 "what llama.cpp's gemma3 architecture computes")
        if h.get("final_logit_softcapping"):
            w.add_final_logit_softcapping(float(h["final_logit_softcapping"]))
        if h.get("sliding_window_pattern") != 1 and h.get("sliding_window") is not None:
            w.add_sliding_window(int(h["sliding_window"]))
    return freqs


#: tokenizer.json pre-tokenizer regexes -> llama.cpp's pre-tokenizer name
#: (llama-vocab.cpp implements each; convert_hf_to_gguf finds them by hashing
#: a tokenised text, which a vocabulary other than the model's own cannot match)
PRE_TOKENIZERS = {
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
    r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "llama-bpe",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
    r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "qwen2",
}


def _pre_tokenizer(tj: dict) -> str:
    """llama.cpp's name for tokenizer.json's pre-tokenizer, or a refusal."""
    pre = tj.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    kinds = [s.get("type") for s in steps if isinstance(s, dict)]
    if kinds == ["ByteLevel"] and steps[0].get("use_regex", True):
        return "gpt-2"
    for s in steps:
        if isinstance(s, dict) and s.get("type") == "Split":
            pat = (s.get("pattern") or {}).get("Regex")
            if pat in PRE_TOKENIZERS and "ByteLevel" in kinds:
                return PRE_TOKENIZERS[pat]
    raise GritUsageError("--to gguf: tokenizer.json's pre-tokenizer is not one grit names for "
                         f"llama.cpp ({', '.join(sorted(set(PRE_TOKENIZERS.values())))}, "
                         "gpt-2)")


def _looks_special(text: str) -> bool:
    """convert_hf_to_gguf's ``does_token_look_special``: added tokens that
    ought to be control tokens though not marked special."""
    return text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or \
        (text.startswith("<|") and text.endswith("|>")) or \
        (text.startswith("<\uff5c") and text.endswith("\uff5c>")) or \
        (text.startswith("<unused") and text.endswith(">"))


def _sentencepiece(folder: str, h: dict):
    """(tokens, scores, token types) of the SentencePiece ``tokenizer.model``
    (convert_hf_to_gguf's ``_create_vocab_sentencepiece``), padded to the
    config's vocabulary size."""
    gguf = _gguf()
    try:
        from sentencepiece import SentencePieceProcessor  # noqa: PLC0415 - optional
    except ImportError:
        raise GritUsageError("--to gguf: tokenizer.model is a SentencePiece model; reading it "
                             "needs the sentencepiece package (pip install sentencepiece)"
                             ) from None
    sp = SentencePieceProcessor()
    sp.LoadFromFile(os.path.join(folder, "tokenizer.model"))
    n = int(h.get("vocab_size") or sp.vocab_size())
    t = gguf.TokenType
    tokens = [f"[PAD{i}]".encode() for i in range(n)]
    scores = [-10000.0] * n
    types = [int(t.UNUSED)] * n
    for i in range(min(sp.vocab_size(), n)):
        tokens[i] = sp.IdToPiece(i).encode("utf-8")
        scores[i] = sp.GetScore(i)
        types[i] = int(t.UNKNOWN if sp.IsUnknown(i) else t.CONTROL if sp.IsControl(i) else
                       t.UNUSED if sp.IsUnused(i) else t.BYTE if sp.IsByte(i) else t.NORMAL)
    for fn, key in (("added_tokens.json", None), ("tokenizer_config.json",
                                                   "added_tokens_decoder")):
        doc: Any = _convert._json(os.path.join(folder, fn))
        doc = doc.get(key) if key and isinstance(doc, dict) else doc
        for k, v in (doc or {}).items() if isinstance(doc, dict) else ():
            if key is None:                       # added_tokens.json: text -> id
                text, i, special = k, v, False
                kind = t.USER_DEFINED
            else:                                 # added_tokens_decoder: id -> record
                if not isinstance(v, dict) or not str(k).isdigit():
                    continue
                text, i, special = v.get("content"), int(k), bool(v.get("special"))
                kind = t.CONTROL if special or _looks_special(str(text)) else t.USER_DEFINED
                if kind == t.USER_DEFINED and isinstance(text, str):
                    text = text.replace("\u2581", " ")
            if not isinstance(i, int) or not isinstance(text, str) or not 0 <= i < n:
                continue                          # llama.cpp ignores these too
            tokens[i], scores[i], types[i] = text.encode("utf-8"), -1000.0, int(kind)
    return tokens, scores, types


def _vocab(w, folder: str, h: dict, fam: Family) -> None:
    """The tokenizer KV entries, read with gguf-py's vocab classes: a
    SentencePiece ``tokenizer.model`` where there is one (convert_hf_to_gguf's
    ``_set_vocab_sentencepiece``), else a byte-level BPE tokenizer.json
    (``_set_vocab_gpt2``); without either, refused."""
    gguf = _gguf()
    from pathlib import Path  # noqa: PLC0415 - gguf-py's vocab classes take a Path
    if os.path.isfile(os.path.join(folder, "tokenizer.model")):
        tokens, scores, types = _sentencepiece(folder, h)
        cfg = _tokenizer_config(folder)
        if fam.arch == "LLAMA" and isinstance(cfg.get("add_prefix_space"), bool):
            w.add_add_space_prefix(cfg["add_prefix_space"])
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
        gguf.SpecialVocab(Path(folder), n_vocab=len(tokens)).add_to_gguf(w)
        if fam.arch == "GEMMA3":
            w.add_add_space_prefix(False)
        return
    tj = _tokenizer_json(folder)
    if tj is None:
        raise GritUsageError("--to gguf: no tokenizer.json or tokenizer.model beside the "
                             "checkpoint: llama.cpp needs the tokenizer in the GGUF")
    cfg = _tokenizer_config(folder)
    if fam.arch == "LLAMA" and isinstance(cfg.get("add_prefix_space"), bool):
        w.add_add_space_prefix(cfg["add_prefix_space"])
    if (tj.get("model") or {}).get("type") != "BPE":
        raise GritUsageError("--to gguf: tokenizer.json is not a BPE tokenizer, the kind grit "
                             "translates for llama.cpp")
    pre = _pre_tokenizer(tj)
    bpe = gguf.vocab.BpeVocab(Path(folder))
    n = int(h.get("vocab_size") or bpe.vocab_size)
    texts: list[str] = [f"[PAD{i}]" for i in range(n)]
    kinds = [int(gguf.TokenType.UNUSED)] * n
    for text, i in bpe.vocab.items():
        if i < n:
            texts[i], kinds[i] = text, int(gguf.TokenType.NORMAL)
    for tok in tj.get("added_tokens") or ():
        i, text = tok.get("id"), tok.get("content")
        if not isinstance(i, int) or not isinstance(text, str) or not 0 <= i < n:
            raise GritUsageError(f"--to gguf: added token {text!r} has id {i!r}, not one of "
                                 f"the vocabulary's {n}")
        texts[i] = text
        kinds[i] = int(gguf.TokenType.CONTROL if tok.get("special") or _looks_special(text)
                       else gguf.TokenType.USER_DEFINED)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(texts)
    w.add_token_types(kinds)
    gguf.SpecialVocab(Path(folder), load_merges=True).add_to_gguf(w)


def _tokenizer_config(folder: str) -> dict:
    return _convert._json(os.path.join(folder, "tokenizer_config.json")) or {}


def _tokenizer_json(folder: str) -> dict | None:
    return _convert._json(os.path.join(folder, "tokenizer.json"))


def _embedding_rows(fam: Family, folder: str, h: dict) -> int | None:
    """Gemma 3: the token-embedding rows llama.cpp keeps (Gemma3Model's
    modify_tensors: the SentencePiece vocabulary padded to the config's
    size, or tokenizer.json's vocabulary and added tokens; the rows beyond
    are out of vocabulary); None elsewhere."""
    if fam.arch != "GEMMA3":
        return None
    if os.path.isfile(os.path.join(folder, "tokenizer.model")):
        return h.get("vocab_size")
    tj = _tokenizer_json(folder) or {}
    vocab = (tj.get("model") or {}).get("vocab")
    added = tj.get("added_tokens")
    if not isinstance(vocab, dict) or not isinstance(added, list):
        return None
    return len(vocab) + len(added)


def _kv_values(w) -> dict[str, GGUFValue]:
    """gguf-py writer ``w``'s KV entries as grit's typed values."""
    gguf = _gguf()
    out: dict[str, GGUFValue] = {}
    for k, v in w.kv_data[0].items():
        if k == "general.architecture":
            continue
        sub = None
        if v.type == gguf.GGUFValueType.ARRAY:
            if not v.value:
                continue
            sub = int(v.sub_type if v.sub_type is not None
                      else gguf.GGUFValueType.get_type(v.value[0]))
        out[k] = GGUFValue(ValueType(int(v.type)), None if sub is None else ValueType(sub),
                           v.value)
    return out


# ---------------------------------------------------------------------------
# SRC -> GGUF


def _permuted(a, rows: np.ndarray):
    """``a`` (a GritArray or ndarray) with its rows in the order ``rows``;
    a GritArray's rows are moved whole, codes and scales together: each
    plane's row bytes where every plane's rows are whole bytes
    (:func:`_rows_moved`), else grit's slicing and concatenation laws, one
    row at a time (tests/test_convert_gguf.py proves the two agree)."""
    if isinstance(a, np.ndarray):
        return a[rows]
    c = canonical(a)
    fast = _rows_moved(c, rows)
    if fast is not None:
        return fast
    return concat([c[int(r):int(r) + 1] for r in rows], axis=0)


def _rows_moved(c: GritArray, rows: np.ndarray) -> GritArray | None:
    """Canonical 2-D array ``c`` (groups along its rows) with its rows in the
    order ``rows``, by moving each plane's rows of bytes; None where a
    plane's units are not on the row grid or a row is not whole bytes."""
    if c.ndim != 2 or c.group_axis != 1:
        return None
    g = geometry(c.descriptor, c.shape)
    R = c.shape[0]
    out: list[Any] = []
    for u, plane in zip((g.data, g.scale0, g.scale1, g.aux), c.planes):
        buf = np.frombuffer(plane, np.uint8)
        if u.count == 0 and buf.size == 0:
            out.append(b"")
        elif u is g.scale1 and u.R == 1 and u.C == 1 and R != 1:
            out.append(bytes(plane))             # one level-1 scale for every row
        elif u.R == R and u.C is not None and (u.C * u.bits) % 8 == 0 and \
                buf.size == R * (u.C * u.bits // 8):
            out.append(buf.reshape(R, -1)[rows].reshape(-1))   # a copy (fancy indexing)
        else:
            return None
    return GritArray(c.descriptor, c.shape, out)


#: the plain dtypes written as they are (llama.cpp's unquantised types)
_PLAIN = ("F32", "F16", "BF16")


def _plain_how(x: np.ndarray, gname: str, fam: Family) -> str:
    """How plain tensor ``x`` is written: 1-D tensors, biases, norms, an MoE
    block's router (``ffn_gate_inp``) and its shared expert's gate
    (``ffn_gate_inp_shexp``) as F32 (``f32``: widened exactly),
    Gemma 3's norms as f32(w + 1) (``f32+1``), any other tensor in its own
    dtype (``copy``)."""
    if st_dtype_of(x.dtype) not in _PLAIN:
        raise GritUsageError(f"{gname}: a {st_dtype_of(x.dtype) or x.dtype} tensor; llama.cpp's "
                             "unquantised tensors are F32, F16 or BF16, and grit does not round "
                             "one into them")
    norm = gname.endswith("_norm.weight")
    if x.ndim <= 1 or norm or gname.endswith((".ffn_gate_inp.weight",
                                              ".ffn_gate_inp_shexp.weight", ".bias")):
        return "f32+1" if fam.norm_plus_one and norm else "f32"
    return "copy"


def _plain_out(x: np.ndarray, how: str, rows) -> np.ndarray:
    """Plain tensor ``x`` as written (:func:`_plain_how`), rows in the order
    ``rows`` (None: as they are)."""
    y = x if rows is None else x[rows]
    if how in ("f32", "f32+1"):
        y = as_float32(y)
        if how == "f32+1":
            y = (y + np.float32(1)).astype(np.float32)
    return y


def _ggml_check(name: str, a: GritArray, release: Callable[[Any], None] | None = None
                ) -> tuple[str | None, str | None]:
    """(the ggml block type GRIT array ``a`` is written as, or None; why it
    cannot be, or None).  The block scales checked are the canonical scale
    plane's bytes, the order the blocks hold them in (handed to ``release``
    once read: :func:`_releaser`)."""
    kind = native_kind(a)
    if kind is None:
        return None, (f"{name}: grade {a.grade.canonical} with groups on axis "
                      f"{a.group_axis} is no ggml block type (ggml holds NVFP4, MXFP4, Q8_0, "
                      "Q4_K … with groups along the rows)")
    if kind in ("NVFP4", "MXFP4"):
        sc = np.frombuffer(canonical(a).planes[1], np.uint8)
        bad = int(np.count_nonzero((sc & 0x80) | (sc == 0x7F))) if kind == "NVFP4" else \
            int(np.count_nonzero(sc == 0xFF))
        if release is not None and sc.size:
            release(sc)
        if bad and kind == "NVFP4":
            return None, (f"{name}: {bad} E4M3 block scale(s) are negative or NaN (0x7F), "
                          "which ggml's UE4M3 reads otherwise")
        if bad:
            return None, (f"{name}: {bad} E8M0 block scale(s) are 0xFF, NaN in GRIT (§8.2) "
                          "and 2^128 in ggml")
    return kind, None


def _plan_gguf(tensors: dict[str, Any], fam: Family, h: dict, nblocks: int,
               emb_rows: int | None = None, release: Callable[[Any], None] | None = None):
    """(gguf name -> (tensor, hf name, transform, the source rows written in
    order or None: all, as they are)), the refusals and the ggml type of
    each quantised tensor by gguf name;
    ``emb_rows``: the token-embedding rows kept (:func:`_embedding_rows`);
    ``release``: handed each source buffer read (:func:`_ggml_check`)."""
    gguf = _gguf()
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH[fam.arch], nblocks)
    plan: dict[str, tuple[Any, str, str, np.ndarray | None]] = {}
    stacks, refused = _expert_stacks(tensors, fam, h)
    first = {ex.names[0]: merged for merged, ex in stacks.items()}
    kinds: dict[str, str] = {}
    for name, v in tensors.items():
        if fam.moe and _EXPERT.match(name):          # stacked (or refused) with its block
            if name in first:
                _plan_experts(plan, refused, kinds, tmap, first[name], stacks[first[name]],
                              fam, release)
            continue
        if fam.gpt_oss and _plan_gate_up(plan, refused, kinds, tmap, name, v, release):
            continue
        if name.endswith(".rotary_emb.inv_freq") or \
                name.endswith((".k_scale", ".v_scale", ".input_scale", ".input_global_scale")):
            continue                # llama.cpp's converter drops these as well
        gname = tmap.get_name(_gpt_oss_name(name) if fam.gpt_oss else name,
                              try_suffixes=(".weight", ".bias"))
        if gname is None:
            refused.append(f"{name}: llama.cpp's {fam.arch.lower()} architecture has no "
                           "tensor of this name (gguf-py's tensor-name map)")
            continue
        heads = _qk_heads(name, fam, h)
        rows = None if heads is None else qk_rows(v.shape[0], heads)
        if name == "model.embed_tokens.weight" and emb_rows is not None and \
                emb_rows < v.shape[0]:
            rows = np.arange(emb_rows)
        if not isinstance(v, (GritArray, np.ndarray)):
            refused.append(f"{name}: {getattr(v, 'reason', None) or type(v).__name__} "
                           "(not a tensor grit can write)")
            continue
        if isinstance(v, GritArray):
            kind, why = _ggml_check(name, v, release)
            if why is not None:
                refused.append(why)
                continue
            kinds[gname] = str(kind)
            plan[gname] = (v, name, "ggml", rows)
        else:
            x = np.asarray(v)
            try:
                how = _plain_how(x, gname, fam)
            except GritUsageError as e:
                refused.append(str(e))
                continue
            plan[gname] = (x, name, how, rows)
    return plan, refused, kinds


def _plan_experts(plan: dict, refused: list[str], kinds: dict[str, str], tmap, merged: str,
                  ex: "_Experts", fam: Family, release: Callable[[Any], None] | None) -> None:
    """Plan the stacked expert tensor ``merged`` (:func:`_plan_gguf`'s
    entry: the :class:`_Experts`, its name, ``ggml`` or the plain
    transform, no rows), or add why it cannot be written to ``refused``."""
    gname = tmap.get_name(merged, try_suffixes=(".weight", ".bias"))
    if gname is None:
        refused.append(f"{merged}: llama.cpp's {fam.arch.lower()} architecture has no "
                       "tensor of this name (gguf-py's tensor-name map)")
        return
    if ex.dtype is not None:
        try:
            how = _plain_how(np.asarray(ex.parts[0]), gname, fam)
        except GritUsageError as e:
            refused.append(str(e))
            return
        if how != "copy":
            refused.append(f"{merged}: experts of {ex.parts[0].ndim} axis are not what "
                           "llama.cpp stacks")
            return
        plan[gname] = (ex, merged, how, None)
        return
    got = [_ggml_check(n, a, release) for n, a in zip(ex.names, ex.parts)]
    whys = [why for _, why in got if why is not None]
    if whys:
        refused.extend(whys)
        return
    kind = got[0][0]
    if native_kind(ex.stacked()) != kind:
        refused.append(f"{merged}: its experts ({kind}) stacked are no ggml {kind} tensor")
        return
    kinds[gname] = str(kind)
    plan[gname] = (ex, merged, "ggml", None)


def _ftype(plan, types: dict[str, str]) -> int:
    """general.file_type: the ggml type of the quantised weights, else the
    dtype of the plain 2-D ones (convert_hf_to_gguf's ftype)."""
    gguf = _gguf()
    kinds = set(types.values())
    if "NVFP4" in kinds:
        return int(gguf.LlamaFileType.MOSTLY_NVFP4)
    if "MXFP4" in kinds:
        return int(gguf.LlamaFileType.MOSTLY_MXFP4_MOE)
    if "Q8_0" in kinds:
        return int(gguf.LlamaFileType.MOSTLY_Q8_0)
    dts = {v.dtype for v, _, how, _ in plan.values() if how == "copy"}
    if any(st_dtype_of(d) == "BF16" for d in dts):
        return int(gguf.LlamaFileType.MOSTLY_BF16)
    if np.dtype(np.float16) in dts:
        return int(gguf.LlamaFileType.MOSTLY_F16)
    return int(gguf.LlamaFileType.ALL_F32)


# ---------------------------------------------------------------------------
# mixture-of-experts: each MoE block's experts stacked into one 3-D tensor


#: a per-expert projection of a Hugging Face MoE checkpoint:
#: ``model.layers.N.mlp.experts.E.gate_proj.weight`` (Qwen3-MoE),
#: ``model.layers.N.block_sparse_moe.experts.E.w1.weight`` (Mixtral)
_EXPERT = re.compile(r"^(model\.layers\.(\d+)\.(?:mlp|block_sparse_moe)\.experts)\.(\d+)\."
                     r"(\w+)\.weight$")


class _Experts:
    """The source weights of one stacked expert tensor (llama.cpp's
    ``blk.N.ffn_{gate,up,down}_exps``), expert 0 first: GRIT arrays of one
    grade and shape, or plain tensors of one dtype and shape.  The stacked
    tensor (:meth:`stacked`) is their planes (or values) one after the
    other along a new leading axis: nothing re-derived.  NVFP4 experts with
    a per-tensor scale (``scaled``) stack as ggml's NVFP4 blocks, their
    level-1 scales the companion ``<base>.scale`` of one value per expert
    (:meth:`companion`), as llama.cpp's ``_flush_nvfp4_experts`` writes
    them."""

    def __init__(self, names: list[str], parts: list[Any]) -> None:
        self.names, self.parts = names, parts
        first = parts[0]
        self.shape = (len(parts), *first.shape)
        self.dtype = None if isinstance(first, GritArray) else np.asarray(first).dtype
        self.ndim = len(self.shape)
        self.scaled = isinstance(first, GritArray) and first.grade["s1"] is not None and \
            str(first.grade["k1"]) == "0" and native_kind(first) == "NVFP4"

    def descriptor(self):
        """The stacked GRIT array's descriptor: the experts' grade (for
        ``scaled`` experts, the NVFP4 blocks' one-level grade), canonical
        placement, groups along the last axis.  (One level-1 group per
        expert is not v1's to say for an expert of over 2^16 groups: k1 is
        a uint16.)"""
        g = TYPES["NVFP4"].grade if self.scaled else self.parts[0].grade
        return g.descriptor(group_axis=len(self.shape) - 1)

    def companion(self) -> np.ndarray | None:
        """The ``scaled`` experts' level-1 scales, one F32 per expert (None
        for other experts)."""
        if not self.scaled:
            return None
        return np.array([np.frombuffer(canonical(a).transient_planes()[2], "<f4")[0]
                         for a in self.parts], np.float32)

    def stacked(self, release: Callable[[Any], None] | None = None):
        """The stacked tensor, deferred: a GRIT array whose planes are built
        where they are read (and not kept), or a plain tensor built when the
        file reaches it; each expert's pages handed to ``release`` once
        copied.  Memory: the stacked tensor and one expert."""
        if self.dtype is not None:
            def values() -> np.ndarray:
                out = np.empty(self.shape, self.dtype)
                for i, x in enumerate(self.parts):
                    out[i] = x
                    if release is not None:
                        _give_back(release, x)
                return out
            return LazyPlain(self.shape, self.dtype, values)
        keep = 2 if self.scaled else 4             # (the level-1 scales: the companion)

        def build() -> tuple:
            outs: list[np.ndarray] = []
            for i, a in enumerate(self.parts):
                planes = canonical(a).transient_planes()[:keep]   # (a source keeps none)
                if not outs:
                    outs = [np.empty(len(self.parts) * len(memoryview(p).cast("B")), np.uint8)
                            for p in planes]
                for out, p in zip(outs, planes):
                    n = out.size // len(self.parts)
                    if n:
                        out[i * n:(i + 1) * n] = np.frombuffer(p, np.uint8)
                if release is not None:
                    _give_back(release, a)
            return (*outs, *(b"",) * (4 - keep))
        return GritArray.deferred(self.descriptor(), self.shape, build)

    def expert_later(self, b, i: int, companion=None) -> GritArray:
        """:meth:`expert`, deferred: built where its planes are read (from
        ``b`` moved into the canonical placement then; a GritError where it
        is not such a stack)."""
        x = self.parts[i]
        d = canonical_descriptor(x.descriptor)

        def build() -> tuple:
            y = self.expert(_canonical_once(b), i, companion)
            if y is None:
                raise GritError(f"the written stack does not hold expert {i}")
            return y.transient_planes()
        return GritArray.deferred(d, x.shape, build)

    def expert(self, b, i: int, companion=None):
        """Expert ``i`` of the stacked tensor ``b`` as read back from the
        GGUF, as its source is: a GRIT array of the source's canonical
        descriptor and shape over the i-th share of each of ``b``'s
        canonical planes (a ``scaled`` expert's level-1 scale the i-th value
        of ``companion``, the written ``<base>.scale``), or the i-th plain
        tensor; None where ``b`` is not such a stack."""
        x = self.parts[i]
        if not isinstance(x, GritArray):
            return b[i] if isinstance(b, np.ndarray) and b.shape == self.shape else None
        if not isinstance(b, GritArray) or tuple(b.shape) != self.shape:
            return None
        n = len(self.parts)
        planes: list[Any] = []
        for p in canonical(b).planes[:2 if self.scaled else 4]:     # (b itself: canonical)
            u = np.frombuffer(p, np.uint8) if len(memoryview(p).cast("B")) else \
                np.zeros(0, np.uint8)
            if u.size % n:
                return None
            k = u.size // n
            planes.append(u[i * k:(i + 1) * k])
        if self.scaled:
            c = np.asarray(companion) if isinstance(companion, np.ndarray) else None
            if c is None or c.dtype != np.float32 or c.size != n:
                return None
            planes += [c.reshape(-1)[i:i + 1].astype("<f4").tobytes(), b""]
        d = canonical_descriptor(x.descriptor)
        try:
            return GritArray(d, x.shape, planes)
        except GritError:
            return None


def _expert_stacks(tensors: Mapping[str, Any], fam: Family, h: dict
                   ) -> tuple[dict[str, _Experts], list[str]]:
    """(the stacked tensor's Hugging Face name -> its experts, the refusals)
    of an MoE family's checkpoint, as llama.cpp's converter stacks them
    (Qwen2MoeModel / LlamaModel ``modify_tensors``: ``torch.stack`` of every
    expert of a block's projection, expert 0 first; ``_flush_nvfp4_experts``
    for NVFP4 blocks, each expert's scale one value of the companion).
    Refused: a block whose experts are not 0 .. n-1 of config.json's
    expert count, or differ in shape or format."""
    if not fam.moe:
        return {}, []
    n = _first(h, _EXPERT_COUNT)
    found: dict[str, dict[int, tuple[str, Any]]] = {}
    for name, v in tensors.items():
        m = _EXPERT.match(name)
        if m is not None:
            found.setdefault(f"{m.group(1)}.{m.group(4)}.weight", {})[int(m.group(3))] = (name, v)
    out: dict[str, _Experts] = {}
    refused: list[str] = []
    for merged, ex in found.items():
        if n is None or sorted(ex) != list(range(n)):
            refused.append(f"{merged}: experts {sorted(ex)[:8]} in the checkpoint, "
                           f"config.json's expert count ({'/'.join(_EXPERT_COUNT)}) is {n}: "
                           "llama.cpp stacks experts 0 .. n-1 into one tensor")
            continue
        names = [ex[i][0] for i in range(n)]
        parts = [ex[i][1] for i in range(n)]
        why = _unstackable(names, parts)
        if why is not None:
            refused.append(f"{merged}: {why}")
            continue
        out[merged] = _Experts(names, parts)
    return out, refused


def _unstackable(names: list[str], parts: list[Any]) -> str | None:
    """Why the experts ``parts`` cannot be stacked into one ggml tensor
    (None: they can): every one a GRIT array of one grade, group axis last
    and one shape, or a plain tensor of one dtype and shape; a GRIT grade
    with a level-1 scale only as NVFP4's per-tensor one (k1=0)."""
    first = parts[0]

    def what(x) -> str:
        if isinstance(x, GritArray):
            return f"{x.grade.canonical} {list(x.shape)} (groups on axis {x.group_axis})"
        if isinstance(x, np.ndarray):
            return f"{x.dtype} {list(x.shape)}"
        return getattr(x, "reason", None) or type(x).__name__

    for name, x in zip(names[1:], parts[1:]):
        same = (isinstance(x, GritArray) and isinstance(first, GritArray)
                and x.grade.canonical == first.grade.canonical
                and x.shape == first.shape and x.group_axis == first.group_axis) or \
            (isinstance(x, np.ndarray) and isinstance(first, np.ndarray)
             and x.dtype == first.dtype and x.shape == first.shape)
        if not same:
            return (f"its experts differ ({names[0]}: {what(first)}; {name}: {what(x)}); "
                    "llama.cpp stacks them into one tensor of one type and shape")
    if isinstance(first, GritArray):
        g = first.grade
        if first.group_axis != first.ndim - 1:
            return f"{names[0]}: groups on axis {first.group_axis}, not along the rows"
        if g["s1"] is not None and not (str(g["k1"]) == "0" and native_kind(first) == "NVFP4"):
            return (f"{names[0]}: grade {g.canonical} has a level-1 scale that no stacked "
                    "ggml tensor holds (llama.cpp holds NVFP4's per-tensor scale, one "
                    "value per expert)")
    elif not isinstance(first, np.ndarray):
        return f"{names[0]}: {what(first)} (not a tensor grit can write)"
    return None


# gpt-oss: its checkpoint's experts are stacked already (``mlp.experts.
# gate_up_proj`` [expert, 2 x ff, hidden] in gpt-oss's own MXFP4 blocks, gate
# and up rows interleaved), as GptOssModel writes them


def _gpt_oss_name(name: str) -> str:
    """The name gpt-oss's tensor ``name`` has in gguf-py's tensor-name map
    (GptOssModel's ``filter_tensors`` / ``modify_tensors``): ``sinks`` a
    ``.weight``, ``down_proj`` (blocks) ``down_proj.weight``,
    ``down_proj_bias`` ``down_proj.bias``."""
    if name.endswith(".self_attn.sinks"):
        return name + ".weight"
    if name.endswith(".experts.down_proj"):
        return name + ".weight"
    if name.endswith(".experts.down_proj_bias"):
        return name.removesuffix("_bias") + ".bias"
    return name


class _GateUp:
    """Half ``part`` (0: gate, the even rows of axis 1; 1: up, the odd
    ones) of gpt-oss's ``gate_up_proj`` (a GRIT array [E, 2F, H], groups
    along the last axis) or of its ``gate_up_proj_bias`` (plain [E, 2F]),
    as GptOssModel splits them (``[:, ::2]`` and ``[:, 1::2]``): each
    plane's rows of bytes moved, nothing re-derived.  ``pair`` is the other
    half's GGUF name."""

    def __init__(self, src: Any, part: int, pair: str) -> None:
        self.src, self.part, self.pair = src, part, pair
        self.shape = (src.shape[0], src.shape[1] // 2, *src.shape[2:])
        self.dtype = None if isinstance(src, GritArray) else np.asarray(src).dtype

    def written(self, release: Callable[[Any], None] | None = None):
        """The half as written: plain, now (F32, a bias); a GRIT array,
        deferred, its planes built where they are read and not kept."""
        if self.dtype is not None:
            return as_float32(self.src[:, self.part::2])
        a, part, rows = self.src, self.part, self.shape[0] * self.shape[1]

        def build() -> tuple:
            out = []
            for p in canonical(a).transient_planes():
                u = _plane_u8(p)
                out.append(np.ascontiguousarray(u.reshape(rows, 2, -1)[:, part]).reshape(-1)
                           if u.size else b"")
            if release is not None:
                _give_back(release, a)
            return tuple(out)
        return GritArray.deferred(a.grade.descriptor(group_axis=a.ndim - 1), self.shape, build)

    @staticmethod
    def joined(x: GritArray, gate, up) -> GritArray | None:
        """Source ``x``'s gate_up_proj as the two halves ``gate`` and ``up``
        read back give it: their rows interleaved again, under ``x``'s
        canonical descriptor (None where they are not such halves).  Memory:
        the result and one half in the canonical placement."""
        if not all(isinstance(b, GritArray) and tuple(b.shape) ==
                   (x.shape[0], x.shape[1] // 2, *x.shape[2:]) for b in (gate, up)):
            return None
        rows = x.shape[0] * x.shape[1] // 2
        out: list[np.ndarray] = []
        for part, half in enumerate((gate, up)):
            for i, p in enumerate(_canonical_once(half).planes):
                u = _plane_u8(p)
                if u.size % rows or (part and out[i].size != 2 * u.size):
                    return None
                if not part:
                    out.append(np.empty(2 * u.size, np.uint8))
                out[i].reshape(rows, 2, -1)[:, part] = u.reshape(rows, -1)
        d = canonical_descriptor(x.descriptor)
        try:
            return GritArray(d, x.shape, [o if o.size else b"" for o in out])
        except GritError:
            return None


    @staticmethod
    def joined_later(x: GritArray, gate, up) -> GritArray:
        """:meth:`joined`, deferred: built where its planes are read (a
        GritError then where the halves are not such halves)."""
        def build() -> tuple:
            y = _GateUp.joined(x, gate, up)
            if y is None:
                raise GritError("the written halves do not interleave into the source's "
                                "gate_up_proj")
            return y.transient_planes()
        d = canonical_descriptor(x.descriptor)
        return GritArray.deferred(d, x.shape, build)

    @staticmethod
    def hold(x: GritArray, gate, up, release: Callable[[Any], None] | None = None,
             release_out: Callable[[Any], None] | None = None) -> bool | None:
        """Whether the halves ``gate`` and ``up`` as read back (MXFP4 blocks
        in place) hold the canonical source ``x``'s rows, without building
        either side: expert by expert, each half's blocks unblocked and
        compared with that expert's gate or up rows of codes and scales
        (``grit.ggml.unblocks_to``), the pages of both files given back
        (``release``, ``release_out``) as it goes.  Memory: one expert's
        rows.  None where the arrays are not such (:meth:`joined` is then
        built and compared).  The same answer as comparing :meth:`joined`'s
        planes (tests/test_convert_gguf_moe.py)."""
        if not (_BLOCKS_HOLD and is_canonical(x.descriptor) and len(x.shape) == 3
                and x.plane_bytes[2:] == (0, 0)):
            return None
        halves = []
        for h in (gate, up):
            got = blocks_of(h) if isinstance(h, GritArray) else None
            if got is None or got[0].name != "MXFP4" or tuple(h.shape) != (
                    x.shape[0], x.shape[1] // 2, x.shape[2]) or \
                    h.grade.decode_projection != x.grade.decode_projection:
                return None
            halves.append(got[1])
        n, rows = x.shape[0], x.shape[1] // 2
        codes, scales = _plane_u8(x.planes[0]), _plane_u8(x.planes[1])
        if codes.size % (2 * n * rows) or scales.size % (2 * n * rows) or \
                any(b.size % n for b in halves):
            return None
        ce, se, be = codes.size // n, scales.size // n, halves[0].size // n
        same = True
        for e in range(n):
            c = codes[e * ce:(e + 1) * ce]
            s = scales[e * se:(e + 1) * se]
            for part, b in enumerate(halves):
                same = same and unblocks_to(
                    "MXFP4", b[e * be:(e + 1) * be],
                    np.ascontiguousarray(c.reshape(rows, 2, -1)[:, part]),
                    np.ascontiguousarray(s.reshape(rows, 2, -1)[:, part]))
                if release_out is not None:
                    release_out(b[e * be:(e + 1) * be])
            if release is not None:
                release(c)
                release(s)
            if not same:
                break
        return same


def _plane_u8(p) -> np.ndarray:
    return np.frombuffer(p, np.uint8) if len(memoryview(p).cast("B")) else np.zeros(0, np.uint8)


def _plan_gate_up(plan: dict, refused: list[str], kinds: dict[str, str], tmap, name: str, v,
                  release: Callable[[Any], None] | None) -> bool:
    """Plan gpt-oss's ``gate_up_proj`` (or its bias) ``name`` as llama.cpp's
    ``ffn_gate_exps`` and ``ffn_up_exps`` (each a :class:`_GateUp`, the
    gate's entry under the source name: the proof's, which joins both), or
    add why not to ``refused`` (also for an unquantised ``down_proj``,
    which llama.cpp transposes); False: ``name`` is none of these."""
    bias = name.endswith(".experts.gate_up_proj_bias")
    if name.endswith(".experts.down_proj") and not isinstance(v, GritArray):
        refused.append(f"{name}: gpt-oss's unquantised experts ([expert, in, out]) are not "
                       "written (grit moves the MXFP4 blocks of gpt-oss checkpoints)")
        return True
    if not (bias or name.endswith(".experts.gate_up_proj")):
        return False
    stem = name.removesuffix("_bias").removesuffix(".gate_up_proj") + "."
    suffix = ".bias" if bias else ".weight"
    gnames = [tmap.get_name(stem + p + suffix, try_suffixes=(".weight", ".bias"))
              for p in ("gate_proj", "up_proj")]
    if None in gnames:
        refused.append(f"{name}: gguf-py's tensor-name map names no gate/up experts for it")
        return True
    if not isinstance(v, (GritArray, np.ndarray)) or len(v.shape) != (2 if bias else 3) or \
            v.shape[1] % 2:
        refused.append(f"{name}: {getattr(v, 'reason', None) or list(getattr(v, 'shape', []))}"
                       " is not gpt-oss's gate_up_proj (gate and up rows interleaved)")
        return True
    if not bias:
        if not isinstance(v, GritArray):
            refused.append(f"{name}: gpt-oss's unquantised experts ([expert, in, out]) are not "
                           "written (grit moves the MXFP4 blocks of gpt-oss checkpoints)")
            return True
        kind, why = _ggml_check(name, v, release)
        if why is not None or kind != "MXFP4":
            refused.append(why or f"{name}: {kind}, not gpt-oss's MXFP4")
            return True
        kinds.update({g: "MXFP4" for g in gnames})
    how = "f32" if bias else "ggml"
    plan[gnames[0]] = (_GateUp(v, 0, gnames[1]), name, how, None)
    plan[gnames[1]] = (_GateUp(v, 1, gnames[0]), name + "#up", how, None)
    return True


# ---------------------------------------------------------------------------
# the source checkpoint: its files, local or remote, read as one


#: the files beside a checkpoint that --to gguf reads: config.json and the
#: tokenizer files llama.cpp's converter and gguf-py's vocab classes read
BESIDE = ("config.json", "tokenizer.json", "tokenizer.model", "tokenizer_config.json",
          "added_tokens.json", "vocab.json", "merges.txt", "chat_template.jinja",
          "chat_template.json")
#: the largest file read from beside a remote checkpoint (a tokenizer)
MAX_BESIDE_FILE = 1 << 28


def _checkpoint_files(src: str) -> tuple[str, list[str]]:
    """(folder, model files) of ``src``: a shard index
    (``*.safetensors.index.json``, local or remote) names the files of its
    ``weight_map``, beside it; anything else is what grit convert reads (a
    file, a folder of shards, an https URL, an hf:// file or folder)."""
    if not src.split("?")[0].lower().endswith(_convert._INDEX):
        return _convert._model_files(src)
    loc = Location.of(src)
    try:
        raw = loc.read_small(src, MAX_CONFIG)
        doc = loads_json(raw, src) if len(raw) <= MAX_CONFIG else None
    except (OSError, ValueError) as e:
        raise GritUsageError(f"{src}: cannot read the shard index: {e}") from None
    wm = doc.get("weight_map") if isinstance(doc, dict) else None
    names = sorted({v for v in wm.values() if isinstance(v, str)}) \
        if isinstance(wm, dict) else []
    if not names or len(names) != len(set(wm.values())) or any(
            "/" in n or "\\" in n or not n.lower().endswith(".safetensors") for n in names):
        raise GritUsageError(f"{src}: not a shard index (a weight_map naming .safetensors "
                             "files beside it)")
    if not loc.remote:
        folder = os.path.abspath(loc.folder or ".")
        missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
        if missing:
            raise GritUsageError(f"{src}: the shard index names {len(missing)} file(s) not "
                                 f"beside it: {', '.join(missing[:3])}")
        return folder, [os.path.join(folder, n) for n in names]
    return loc.folder, [loc.sibling(n) for n in names]


def _model_name(folder: str) -> str:
    """general.name's fallback: the checkpoint folder's name (an hf://
    repository's, without its revision)."""
    if is_hub(folder):
        where = HubPath.parse(folder)
        return (where.path.strip("/") or where.repo_id).rsplit("/", 1)[-1]
    return folder.split("?")[0].rstrip("/").rsplit("/", 1)[-1] if is_remote(folder) \
        else os.path.basename(os.path.abspath(folder).rstrip("/"))


class _Shards:
    """The parsed safetensors files of one checkpoint as the one file the
    recogniser reads: a module's tensors may lie in different shards
    (shards are cut by size, not by module), so recognition sees every
    entry, each name's span, view and small values its own file's."""

    def __init__(self, files: list[_st.SafetensorsFile]) -> None:
        self.path = files[0].path
        self.metadata = files[0].metadata
        self.owner: dict[str, _st.SafetensorsFile] = {}
        for f in files:
            for n in f.entries:
                if n in self.owner:
                    raise GritUsageError(f"tensor {n!r} is in two shards: {self.owner[n].path} "
                                         f"and {f.path}")
                self.owner[n] = f
        self.entries = {n: e for f in files for n, e in f.entries.items()}

    def on_disk(self, name: str) -> int:
        return self.owner[name].on_disk(name)

    def tensor_values(self, name: str, max_bytes: int):
        f = self.owner.get(name)
        return None if f is None else f.tensor_values(name, max_bytes)

    def view(self, name: str):
        f = self.owner.get(name)
        return b"" if f is None else f.view(name)


def _recognised(paths: list[str], hdrs: list[_st.SafetensorsFile]):
    """(the checkpoint's tensors as ``with_recognised`` gives them, the
    shards read as one file: :class:`_Shards`)."""
    parts = [_st.tensors_of(h, bits=True) for h in hdrs]
    shards = _Shards(hdrs)
    kinds = {p.convention for p in parts}
    if len(kinds) > 1:
        raise GritUsageError("the shards mix GRIT files and files without GRIT metadata")
    merged = _st.SafetensorsTensors()
    merged.metadata, merged.convention = parts[0].metadata, parts[0].convention
    for p in parts:
        merged.update(p)
    merged._source = shards  # type: ignore[assignment]  # read as one file
    return with_recognised(paths[0], merged), shards


def _source(paths: list[str], hdrs: list[_st.SafetensorsFile]) -> tuple[dict[str, Any], dict]:
    """The checkpoint's tensors (GRIT arrays and plain), as grit.load reads
    one file but the shards recognised together (:class:`_Shards`;
    config.json beside ``paths[0]``), and the per-tensor scalars of
    :func:`_scalars`."""
    got, shards = _recognised(paths, hdrs)
    return dict(got), _scalars(shards, got)


def _needs(src: "_Local") -> dict[str, frozenset[tuple[int, str]]]:
    """Tensor name (as :func:`_source` names it) -> the (model file index,
    file tensor) pairs its bytes lie in: a recognised weight's file tensors
    (``Recognised.tensors``), any other tensor its own entry, or the
    entries its name prefixes (a GRIT file's planes)."""
    got, _ = _recognised(src.paths, src.headers)
    where = {n: i for i, h in enumerate(src.headers) for n in h.entries}
    out = {r.name: frozenset((where[t], t) for t in r.tensors if t in where)
           for r in (getattr(got, "recognised", None) or {}).values()
           if r.kind in ("inferred", "converted")}
    for n in got:
        if n not in out:
            out[n] = frozenset({(where[n], n)}) if n in where else \
                frozenset((i, e) for e, i in where.items() if e.startswith(n + "."))
    return {n: d for n, d in out.items() if d}


def _local_header(path: str) -> _st.SafetensorsFile:
    try:
        return _st.read(path)
    except OSError as e:
        raise GritUsageError(f"cannot read {path!r}: {e}") from None


def _fetch_beside(src: str, into: str) -> None:
    """The files of :data:`BESIDE` that are beside the remote model file
    ``src``, into the local folder ``into`` (each read once; at most
    :data:`MAX_BESIDE_FILE` bytes)."""
    loc = Location.of(src)
    for n in BESIDE:
        try:
            raw = loc.read_small(n, MAX_BESIDE_FILE)
        except FileNotFoundError:
            continue
        if len(raw) > MAX_BESIDE_FILE:
            raise GritUsageError(f"{loc.sibling(n)}: over {MAX_BESIDE_FILE} bytes")
        with open(os.path.join(into, n), "xb") as f:
            f.write(raw)


@dataclass(frozen=True)
class _Local:
    """A checkpoint as --to gguf reads it: a local folder holding config.json
    and the tokenizer, the model files' local paths and parsed headers, and
    the name general.name falls back to.  A remote checkpoint's model files
    (``remote``, one URL each) are local images at first — the header and
    the small tensors in place, every other byte a hole (:func:`_image_into`)
    — each filled from its URL by :func:`_fill` (and its large tensors
    punched out again by :func:`_drop`)."""

    folder: str
    paths: list[str]
    headers: list[_st.SafetensorsFile]
    name: str
    remote: tuple[str, ...] = ()
    #: per remote file: the SHA-256 of its image's bytes (header, small tensors)
    marks: tuple[str, ...] = ()


@contextmanager
def _local(src: str, work_parent: str, check: Callable[[_Local], Any] | None = None,
           stream: bool = False) -> Iterator[_Local]:
    """The checkpoint ``src`` as local files.  A remote one (https, hf://)
    is spooled into a temporary folder in ``work_parent``, removed after:
    the files of :data:`BESIDE` first, then each model file's image (its
    header and small tensors, the rest a hole: :func:`_image_into`) and
    ``check`` run over them, so a refusal reads nothing more; then, with
    room for the spool and an output of its size, each model file read
    once in bounded ranged reads (:func:`_fill`) — or, with ``stream``, none
    yet: the caller fills them one at a time (:func:`_streamed`)."""
    folder, files = _checkpoint_files(src)
    name = _model_name(folder)
    if not is_remote(folder):
        yield _Local(folder, files, [_local_header(f) for f in files], name)
        return
    os.makedirs(work_parent, exist_ok=True)
    spool = tempfile.mkdtemp(prefix=".grit-gguf-spool-", dir=work_parent)
    try:
        _fetch_beside(files[0], spool)
        paths = [os.path.join(spool, _convert._basename(f)) for f in files]
        marks = tuple(_image_into(p, f) for f, p in zip(files, paths))
        local = _Local(spool, paths, [_local_header(p) for p in paths], name, tuple(files),
                       marks)
        if check is not None:
            check(local)
        if not stream:
            need = 2 * sum(h.size for h in local.headers)
            free = shutil.disk_usage(spool).free
            if free < need:
                raise GritUsageError(f"{work_parent}: {free} bytes free; converting the remote "
                                     f"checkpoint needs {need} (its spool and the GGUF)")
            for i in range(len(files)):
                _fill(local, i)
        yield local
    finally:
        shutil.rmtree(spool, ignore_errors=True)


def _image_into(path: str, f: str) -> str:
    """The new local file ``path`` as an image of the remote safetensors file
    ``f`` (``grit.convert.remote_image``): its header and small tensors in
    place, every other byte a hole (a sparse file of ``f``'s size, which
    takes no disk until filled); returns the SHA-256 of the bytes written."""
    img = _convert.remote_image(f)
    if img.source is None:                   # (remote_image keeps its source)
        raise GritError(f"{f}: no byte source")
    h = hashlib.sha256()
    with open(path, "xb") as out:
        head = img.source.read(0, img.start, "the header")
        out.write(head)
        h.update(head)
        for off, k in _small_spans(img):
            b = off - img.start
            out.seek(off)
            out.write(img.buffer[b:b + k])
            h.update(img.buffer[b:b + k])
        out.truncate(img.size)
    return h.hexdigest()


def _small_spans(h: _st.SafetensorsFile) -> list[tuple[int, int]]:
    """(offset, length) of each tensor of ``h`` a remote file's image holds
    (at most ``grit.convert.SMALL_MAX`` bytes, ``remote_image``'s rule)."""
    return sorted((off, k) for off, k in (h.span(n) for n in h.entries)
                  if 0 < k <= _convert.SMALL_MAX)


def _fill(src: _Local, i: int) -> None:
    """Remote model file ``i`` read once into its image (every byte, in
    bounded ranged reads: ``grit.convert.spool_into``); its header and small
    tensors must be the image's."""
    path, f = src.paths[i], src.remote[i]
    got = Location.of(f).open(f)
    if got.size != src.headers[i].size:
        raise GritError(f"{f}: {got.size} bytes now, {src.headers[i].size} when its header "
                        "was read")
    _convert.spool_into(path, got, over=True)
    h = hashlib.sha256()
    with open(path, "rb") as got:
        h.update(got.read(src.headers[i].start))
        for off, k in _small_spans(src.headers[i]):
            got.seek(off)
            h.update(got.read(k))
    if h.hexdigest() != src.marks[i]:
        raise GritError(f"{f}: its header or small tensors changed while it was read")


#: Linux's fallocate modes FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
_PUNCH = 0x02 | 0x01


def _punch(path: str, spans: list[tuple[int, int]]) -> bool:
    """Give the disk blocks lying wholly inside each (offset, length) of
    ``spans`` back to the file system (a hole: they read as zeros after,
    through a map too); False where the system cannot (no fallocate or no
    hole punching), the bytes then kept."""
    import ctypes  # noqa: PLC0415 - fallocate(2): no os-module binding punches holes
    fn = getattr(ctypes.CDLL(None, use_errno=True), "fallocate", None) \
        if sys.platform == "linux" else None
    if fn is None:
        return False
    fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fd = os.open(path, os.O_WRONLY)
    try:
        blk = os.fstat(fd).st_blksize or 4096
        for off, n in spans:
            a, b = -(-off // blk) * blk, (off + n) // blk * blk
            if b > a and fn(fd, _PUNCH, a, b - a) != 0:
                return False
    finally:
        os.close(fd)
    return True


def _can_punch(folder: str) -> bool:
    """Whether ``folder``'s file system punches holes (:func:`_punch`)."""
    fd, probe = tempfile.mkstemp(prefix=".grit-punch-", dir=folder)
    try:
        os.write(fd, bytes(1 << 16))
        return _punch(probe, [(0, 1 << 16)])
    finally:
        os.close(fd)
        os.unlink(probe)


@dataclass
class _Prepared:
    """What the check before writing found: the source's config, family,
    hyper-parameters, tensors and scalars, the plan (gguf name -> tensor,
    source name, transform, rows), the ggml type of each quantised tensor,
    the KV entries and the tensors as written."""

    cfg: dict
    fam: Family
    tensors: dict[str, Any]
    plan: dict
    inputs: dict
    notes: dict[str, str]
    meta: dict[str, GGUFValue]
    out: dict[str, Any]


def _prepared(src: _Local) -> _Prepared:
    """The checkpoint checked against llama.cpp (every refusal at once) and
    laid out as the GGUF: its KV entries and tensors."""
    cfg = _convert._json(os.path.join(src.folder, "config.json"))
    if cfg is None:
        raise GritUsageError(f"{src.name}: no config.json: --to gguf needs the architecture")
    fam = _family(cfg)
    h = _hparams(cfg, fam)
    tensors, scalars = _source(src.paths, src.headers)
    nblocks = int(_need(h, "num_hidden_layers", fam))
    release = _releaser(src)
    plan, refused, types = _plan_gguf(tensors, fam, h, nblocks,
                                      _embedding_rows(fam, src.folder, h), release)
    if refused:
        raise GritUsageError("--to gguf refused; nothing was written:\n  " + "\n  ".join(refused))
    notes = _source_notes(plan, scalars)
    inputs = _input_scales(plan, types, scalars)
    gguf = _gguf()
    w = gguf.GGUFWriter(path=None, arch=gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH[fam.arch]])
    freqs = _kv(w, fam, h, _ftype(plan, types), str(cfg.get("_name_or_path") or src.name))
    _vocab(w, src.folder, h, fam)
    meta = _kv_values(w)
    meta["general.architecture"] = GGUFValue(ValueType.STRING, None, w.arch)
    out: dict[str, Any] = {}
    if freqs is not None:
        out["rope_freqs.weight"] = freqs
    for gname, (v, _, how, rows) in plan.items():
        if isinstance(v, _Experts):
            out[gname] = v.stacked(release)
            comp = v.companion()
            if comp is not None:
                out[companion_names(gname)[0]] = comp
        elif isinstance(v, _GateUp):
            out[gname] = v.written(release)
        elif how == "ggml":
            out[gname] = v if rows is None else _permuted_later(v, rows, release)
        else:
            out[gname] = _plain_out(v, how, rows)
        if gname.removesuffix(".weight") + ".input_scale" in inputs:
            k = gname.removesuffix(".weight") + ".input_scale"
            out[k] = inputs[k][0]
    for hdr in src.headers:                 # the headers and small values read:
        if isinstance(hdr.source, LocalFile):   # their pages given back too
            hdr.source.release(hdr.source.mapping())
    return _Prepared(cfg, fam, tensors, plan, inputs, notes, meta, out)


#: the bytes either side of a buffer given back with it: a page fault maps
#: the file's pages around the one read (fault-around, large folios), which
#: would otherwise stay with the process when their tensor was done before
_AROUND = 1 << 21


def _give_back_around(source, buf) -> None:
    """The pages of ``buf`` and :data:`_AROUND` bytes either side given back
    when ``buf`` views ``source``'s map (a hint: they read the same after)."""
    off = source.locate(buf)
    if off is None:
        return
    m = source.mapping()
    lo, hi = max(0, off - _AROUND), min(source.size, off + memoryview(buf).nbytes + _AROUND)
    source.release(m[lo:hi])


def _releaser(src: _Local) -> Callable[[Any], None]:
    """A function giving back the pages of a buffer that views one of the
    checkpoint's mapped files (``MADV_DONTNEED`` through the file's byte
    source: the page cache keeps them, the process does not), so that
    memory stays at the tensor being handled however large the checkpoint;
    a no-op for any other buffer."""
    sources = [s for s in (getattr(h, "source", None) for h in src.headers)
               if isinstance(s, LocalFile)]

    def release(buf) -> None:
        for s in sources:
            _give_back_around(s, buf)
    return release


def _give_back(release: Callable[[Any], None], v) -> None:
    """``release`` of the planes of ``v`` (a GritArray built, or an ndarray)."""
    planes = v.transient_planes() if isinstance(v, GritArray) else (v,)
    for p in planes:
        if isinstance(p, np.ndarray):
            if p.flags.c_contiguous and p.nbytes:
                release(p.reshape(-1).view(np.uint8))
        elif isinstance(p, memoryview) and p.nbytes:
            release(p)


def _permuted_later(v: GritArray, rows: np.ndarray,
                    release: Callable[[Any], None] | None = None) -> GritArray:
    """``v`` with its rows in the order ``rows`` (:func:`_permuted`): for a
    canonical ``v``, a deferred array whose planes are built where they are
    read and not kept (``transient_planes``), so no more than the weight
    being written is held, ``v``'s pages handed to ``release`` once moved;
    else built now."""
    if not is_canonical(v.descriptor):
        return _permuted(v, rows)

    def build() -> tuple:
        planes = _permuted(v, rows).planes
        if release is not None:
            _give_back(release, v)
        return planes
    return GritArray.deferred(v.descriptor, v.shape, build)


class _Progress:
    """``progress(file, done, total)`` of a GGUF conversion (None: no bar):
    the bytes of the tensors written (:meth:`wrote`), then of each one
    proved (:meth:`proved`, by the sizes written); ``total`` twice the
    output's tensors' bytes, as estimated before writing (``done`` kept
    within it, and made it at :meth:`end`)."""

    def __init__(self, progress: Callable[..., None] | None, file: str, total: int) -> None:
        self.progress, self.file, self.total = progress, file, max(1, total)
        self.done = 0
        self.sizes: dict[str, int] = {}
        self.add(0)

    def add(self, n: int) -> None:
        """``n`` more bytes done."""
        if self.progress is not None:
            self.done = min(self.total, self.done + n)
            self.progress(self.file, self.done, self.total)

    def wrote(self, name: str, n: int) -> None:
        self.sizes[name] = n
        self.add(n)

    def proved(self, gname: str) -> None:
        self.add(sum(self.sizes.pop(n, 0) for n in (gname, *companion_names(gname))))

    def end(self) -> None:
        self.add(self.total)


def _tensor_bytes(v) -> int:
    """About the bytes tensor ``v`` takes in a GGUF (its planes', or its
    elements'), for a progress bar's total."""
    if isinstance(v, GritArray):
        return int(v.nbytes)
    return int(np.prod(getattr(v, "shape", ()), dtype=np.int64)) * \
        np.dtype(getattr(v, "dtype", np.uint8)).itemsize


def to_gguf(src: str, dst: str, *, overwrite: bool = False,
            progress: Callable[[str], None] | None = None,
            fsync: bool = False) -> _convert.ConvertReport:
    """Write the safetensors checkpoint ``src`` (a file, a folder of shards,
    a shard index, an https URL or an hf:// name, with config.json and the
    tokenizer beside it) as the folder ``dst`` holding ``model.gguf``,
    ``config.json`` and ``grit-proof.json``.  A remote checkpoint is checked
    from its headers and small tensors (:func:`_local`), then streamed: one
    model file at a time read into a spool beside ``dst``, its tensors
    written and proved, its bytes given back (:func:`_streamed`)."""
    dst = os.path.abspath(dst)
    if os.path.exists(dst) and not overwrite:
        raise GritUsageError(f"{dst} exists (overwrite it with --force)")
    with _local(src, os.path.dirname(dst) or ".", stream=True) as local:
        _dst_free(dst, overwrite, [local.folder, *local.paths])
        p = _prepared(local)

        def fill(work: str) -> dict:
            bar = _Progress(progress, GGUF_FILE,
                            2 * sum(_tensor_bytes(v) for v in p.out.values()))
            release = _releaser(local)
            path = os.path.join(work, GGUF_FILE)
            if local.remote:
                proof = _streamed(local, p, path, release, bar)
            else:
                save_gguf(path, p.out, p.meta, relayout=True, notes=p.notes, release=release,
                          written=bar.wrote, fsync=False)      # (staged's fsync)
                proof = _gguf_proof(p.tensors, p.plan, p.inputs, path, p.fam, release,
                                    proved=bar.proved)
            bar.end()
            for k in ("quantization_config", "compression_config"):
                p.cfg.pop(k, None)
            _write_proof(work, proof, p.cfg)
            return proof
        dst, proof = _convert.staged(dst, fill, fsync=fsync)
    return _convert.ConvertReport(dst, proof, _counts(proof))


def _streamed(local: _Local, p: _Prepared, path: str, release: Callable[[Any], None],
              bar: "_Progress | None" = None) -> dict:
    """Write the GGUF ``path`` of the remote checkpoint ``local`` (still
    images: :func:`_local` with ``stream``) planned as ``p``, reading each
    model file once and holding at most one on disk: the header first, with
    every tensor's data a hole (``save_gguf(data=False)``: the layout is
    fixed by ``p``, from the headers and small tensors alone); then per
    model file in order, filled (:func:`_fill`) and the checkpoint prepared
    again over it (the check of its bytes, the tensors as written), the
    tensors whose last model file it is (:func:`_needs`) written at their
    offsets (``save_gguf(at=…)``) and proved (:func:`_gguf_proof`, reading
    them back), and the large tensors no later tensor needs punched out of
    the spool (:func:`_drop`).  Returns the proof, entry for entry the one
    a local conversion of the same files makes."""
    save_gguf(path, p.out, p.meta, relayout=True, notes=p.notes, data=False, fsync=False)
    f = read_gguf(path)
    at = {t.name: (f.data_start + t.offset, t.nbytes) for t in f.tensors}
    del f
    n = len(local.remote)
    st = _stream_order(local, p, os.path.getsize(path), "converting")
    group, last, large, punch = st.group, st.last, st.large, st.punch
    extra = [g for g in p.out if g not in p.plan]        # rope_freqs, activation scales
    parts: list[dict] = []
    covered: list[set[str]] = []                         # the tensors each part proves
    for k in range(n):
        _fill(local, k)
        q = _prepared(local)
        if list(q.out) != list(p.out) or q.plan.keys() != p.plan.keys() or \
                q.meta != p.meta or q.notes != p.notes:
            raise GritError(f"{local.remote[k]}: the checkpoint reads otherwise than its "
                            "headers and small tensors planned")
        mine = [g for g in q.plan if group[g] == k]
        write = {g: q.out[g] for g in q.out if g in mine or (k == 0 and g in extra)}
        if write or not parts:
            save_gguf(path, write, q.meta, relayout=True, notes=q.notes, release=release,
                      at=at, written=None if bar is None else bar.wrote)
            parts.append(_gguf_proof(q.tensors, {g: q.plan[g] for g in mine},
                                     q.inputs if k == 0 else {}, path, q.fam, release,
                                     proved=None if bar is None else bar.proved))
            covered.append({*mine, *(q.inputs if k == 0 else ())})
        del q, write
        if punch:
            _drop(local, [x for x, j in last.items() if j == k], large)
    return _merged(parts, covered, p)


@dataclass(frozen=True)
class _StreamOrder:
    """How a remote checkpoint's GGUF tensors are handled one model file at
    a time (:func:`_stream_order`): ``group``, each GGUF tensor's model file
    (the last one it reads); ``large``, each large file tensor's span
    (model file index, file tensor) -> (offset, length); ``last``, the last
    model file whose group reads it; ``punch``, whether the spool's
    folder gives disk blocks back."""

    group: dict[str, int]
    last: dict[tuple[int, str], int]
    large: dict[tuple[int, str], tuple[int, int]]
    punch: bool


def _stream_order(local: _Local, p: "_Prepared", out_bytes: int, doing: str) -> _StreamOrder:
    """The order of :func:`_streamed` (and of a streamed verify) for the
    remote checkpoint ``local`` planned as ``p``, after checking the disk
    holds ``out_bytes`` (the output) and the most model-file bytes on disk
    at once (GritUsageError, naming what ``doing`` needs)."""
    n = len(local.remote)
    needs = _needs(local)
    every = frozenset((i, e) for i, h in enumerate(local.headers) for e in h.entries)
    # a tensor written from one source tensor reads that tensor's files; any other
    # (built from several, or not named by the source) is taken to read every file
    deps = {g: needs.get(e[1], every) if e[0] is p.tensors.get(e[1]) else every
            for g, e in p.plan.items()}
    group = {g: max((i for i, _ in d), default=0) for g, d in deps.items()}
    # each large file tensor: the last model file whose group reads it
    large = {(i, e): h.span(e) for i, h in enumerate(local.headers) for e in h.entries
             if h.span(e)[1] > _convert.SMALL_MAX}
    last = {k: k[0] for k in large}
    for g, d in deps.items():
        for k in d & large.keys():
            last[k] = max(last[k], group[g])
    punch = _can_punch(local.folder)
    # the spool's large tensors on disk at once: while file k is read, its own and
    # those of earlier files a later weight still reads (or, without holes, all)
    held = [sum(sp[1] for x, sp in large.items()
                if x[0] == k or (x[0] < k and (last[x] >= k or not punch))) for k in range(n)]
    need = out_bytes + max(held, default=0)
    free = shutil.disk_usage(local.folder).free
    if free < need:
        out = "the GGUF and " if out_bytes else ""
        raise GritUsageError(f"{os.path.dirname(local.folder)}: {free} bytes free; {doing} "
                             f"the remote checkpoint needs {need} ({out}at most "
                             f"{max(held, default=0)} bytes of model files at once)")
    return _StreamOrder(group, last, large, punch)


def _drop(local: _Local, done: list[tuple[int, str]], spans: dict) -> None:
    """The large tensors ``done`` ((model file index, file tensor) pairs) no
    longer needed: their disk blocks given back (:func:`_punch`)."""
    by: dict[int, list[tuple[int, int]]] = {}
    for i, e in done:
        by.setdefault(i, []).append(spans[(i, e)])
    for i, sp in by.items():
        _punch(local.paths[i], sp)


def _merged(parts: list[dict], covered: list[set[str]], p: _Prepared) -> dict:
    """The proofs of :func:`_streamed`'s groups (``covered``: the tensors
    each proves) as the one proof :func:`_gguf_proof` makes of the whole
    plan ``p``: weights and plain tensors in its order (by source name; a
    stacked expert tensor's entries, one per expert, all in one group, kept
    in their order by the stable sort), the activation scales last."""
    order = {g: i for i, (g, _) in enumerate(sorted(p.plan.items(), key=lambda kv: kv[1][1]))}
    order.update({g: len(order) + i for i, g in enumerate(sorted(p.inputs))})
    if sum(len(c) for c in covered) != len(order) or set().union(*covered) != set(order):
        raise GritError("the streamed proof does not cover every tensor written")
    weights = [w for part in parts for w in part["weights"]]
    plain = [w for part in parts for w in part["plain"]]
    return {**parts[0], "weights": sorted(weights, key=lambda w: order[w["gguf_name"]]),
            "plain": sorted(plain, key=lambda w: order[w["gguf_name"]])}


def _dst_free(dst: str, overwrite: bool, inputs: list[str]) -> str:
    """``dst`` as an absolute path, refused when it exists (without
    ``overwrite``) or would replace an input."""
    dst = os.path.abspath(dst)
    if os.path.exists(dst) and not overwrite:
        raise GritUsageError(f"{dst} exists (overwrite it with --force)")
    if any(os.path.abspath(p) == dst or os.path.dirname(os.path.abspath(p)) == dst
           for p in inputs):
        raise GritUsageError("the output would replace the input: choose another folder")
    return dst


#: the name of a compressed-tensors NVFP4 weight's per-tensor divisor
_DIVISOR_LEAF = ".weight_global_scale"


#: the leaves of a module's per-tensor scalars a convention's recogniser takes
#: with its weight, which the GGUF needs as they are stored
_SCALAR_LEAVES = (_DIVISOR_LEAF, ".input_global_scale", ".input_scale")


def _scalars(shards: "_Shards", got) -> dict[str, dict[str, np.ndarray]]:
    """weight name -> {leaf: the F32 values the source stores}: the
    per-tensor scalars of :data:`_SCALAR_LEAVES` the convention's recogniser
    took with the weight (compressed-tensors' ``weight_global_scale``, whose
    reciprocal is the array's level-1 scale, and the activation scales), and
    the plain ``input_scale`` beside a weight, read from the files as they
    are (at most 2^16 values each)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    recs = getattr(got, "recognised", None) or {}
    want = [(r.name, tn) for r in recs.values() if r.kind == "inferred"
            for tn in r.tensors if tn.endswith(_SCALAR_LEAVES)]
    want += [(n.removesuffix(".input_scale") + ".weight", n) for n, v in got.items()
             if n.endswith(".input_scale") and isinstance(v, np.ndarray)]
    for name, tn in want:
        e = shards.entries.get(tn)
        x = shards.tensor_values(tn, 4 << 16) if e is not None and e.dtype == "F32" else None
        if x is not None and 0 < x.size:
            leaf = next(lf for lf in _SCALAR_LEAVES if tn.endswith(lf))
            out.setdefault(name, {})[leaf] = np.asarray(x, "<f4").reshape(-1)
    return out


def _input_scales(plan: dict, types: dict[str, str], scalars: dict
                  ) -> dict[str, tuple[np.ndarray, str, str]]:
    """gguf name -> (values, source leaf, transform) of each NVFP4 weight's
    activation scale as llama.cpp's converter writes it: ``<base>.input_scale``,
    ModelOpt's ``input_scale`` as it is, compressed-tensors'
    ``input_global_scale`` g as f32(1/g); left out when it is one value
    within 1e-6 of 1 (``_write_scale_tensor``)."""
    out: dict[str, tuple[np.ndarray, str, str]] = {}
    for gname, (v, name, how, _) in plan.items():
        got = scalars.get(name) or {}
        if how != "ggml" or types.get(gname) != "NVFP4":
            continue
        if isinstance(v, _Experts):
            per = _expert_input_scales(v, scalars)
            if per is not None:
                out[gname.removesuffix(".weight") + ".input_scale"] = per
            continue
        if ".input_scale" in got:
            v, leaf, t = got[".input_scale"], ".input_scale", "f32"
        elif ".input_global_scale" in got:
            with np.errstate(all="ignore"):
                v = (np.float32(1) / got[".input_global_scale"]).astype(np.float32)
            leaf, t = ".input_global_scale", "1/x"
        else:
            continue
        if v.size <= 1 and abs(float(v.sum()) - 1.0) < 1e-6:
            continue
        out[gname.removesuffix(".weight") + ".input_scale"] = (
            v, name.removesuffix(".weight") + leaf, t)
    return out


def _expert_input_scales(ex: "_Experts", scalars: dict
                         ) -> tuple[np.ndarray, str, str] | None:
    """The stacked NVFP4 experts' activation scales as llama.cpp's converter
    writes them (``_flush_nvfp4_experts``): one F32 value per expert, its
    ``input_scale`` or f32(1/g) of its ``input_global_scale`` (1 where it
    has neither), left out where none has one or all are within
    ``np.allclose`` of 1 (``_write_scales_tensor``)."""
    vals, leaves = [], set()
    for n in ex.names:
        got = scalars.get(n) or {}
        if ".input_scale" in got:
            v, leaf = got[".input_scale"], ".input_scale"
        elif ".input_global_scale" in got:
            with np.errstate(all="ignore"):
                v = (np.float32(1) / got[".input_global_scale"]).astype(np.float32)
            leaf = ".input_global_scale"
        else:
            vals.append(np.float32(1))
            continue
        leaves.add(leaf)
        with np.errstate(all="ignore"):
            vals.append(np.float32(as_float32(v).sum(dtype=np.float32)))
    x = np.array(vals, np.float32)
    if not leaves or np.allclose(x, 1.0, atol=1e-6):
        return None
    if len(leaves) > 1:
        raise GritUsageError(f"{ex.names[0]}: the experts' activation scales are of two "
                             "kinds (input_scale and input_global_scale)")
    (leaf,) = leaves
    m = _EXPERT.match(ex.names[0])
    base = f"{m.group(1)}.*.{m.group(4)}" if m else ex.names[0].removesuffix(".weight")
    return x, base + leaf, "1/x" if leaf == ".input_global_scale" else "f32"


def _source_notes(plan: dict, scalars: dict[str, dict[str, np.ndarray]]) -> dict[str, str]:
    """The ``grit.convert.`` records of the source the way back needs: the
    dtype of each plain tensor written as F32, the divisor bits of each
    compressed-tensors NVFP4 weight."""
    notes: dict[str, str] = {}
    for gname, (v, name, how, _) in plan.items():
        if how in ("f32", "f32+1") and v.dtype != np.float32:
            notes[f"{KV_CONVERT}dtype.{gname}"] = _st_dtype(v.dtype)
        div = (scalars.get(name) or {}).get(_DIVISOR_LEAF)
        if how == "ggml" and div is not None and div.size == 1:
            notes[f"{KV_CONVERT}divisor.{gname}"] = f"{int(div.view('<u4')[0]):08x}"
    return notes


def _st_dtype(dt: np.dtype) -> str:
    name = st_dtype_of(dt)
    if name is None:
        raise GritUsageError(f"a plain tensor of dtype {dt} has no safetensors name")
    return name


def _counts(proof: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for w in proof["weights"]:
        counts[w["verdict"]["verdict"]] = counts.get(w["verdict"]["verdict"], 0) + 1
    return counts


def _write_proof(work: str, proof: dict, cfg: dict) -> None:
    text = json.dumps(proof, indent=1, sort_keys=True).encode("utf-8")
    with open(os.path.join(work, _convert.PROOF_FILE), "wb") as f:
        f.write(text)
    cfg[_convert.PROOF_KEY] = {"file": _convert.PROOF_FILE,
                               "sha256": hashlib.sha256(text).hexdigest()}
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def _plain_entry(x: np.ndarray, y: np.ndarray, how: str, rows) -> str | None:
    """Why the written plain tensor ``y`` is not ``x`` moved by ``how`` (None:
    it is)."""
    want = _plain_out(x, how, rows)
    if y.shape != want.shape:
        return f"shape {list(y.shape)}, expected {list(want.shape)}"
    if y.dtype != want.dtype and not (how == "copy" and y.dtype == np.float32
                                      and st_dtype_of(want.dtype) == "BF16"):
        return f"dtype {y.dtype}, expected {want.dtype}"
    a = np.ascontiguousarray(np.asarray(want, y.dtype)).reshape(-1).view(np.uint8)
    if not _convert._same_bytes(a, np.ascontiguousarray(y).reshape(-1).view(np.uint8)):
        return "its values are not the source's"
    return None


def _rows_note(rows) -> str | None:
    """The proof's word for a row order: None (as they are), the leading
    rows kept, or llama.cpp's q/k order."""
    if rows is None:
        return None
    if np.array_equal(rows, np.arange(len(rows))):
        return f"the first {len(rows)} rows"
    return "llama.cpp's q/k order (LlamaModel.permute)"


def _read_back(path: str) -> tuple[Any, Any, Callable[[str], None], Callable[[str], Any]]:
    """(the tensors of the written GGUF ``path``, its byte source, a function
    giving back the file's pages of a tensor and its companions by GGUF
    name, a function giving a tensor by GGUF name as it is compared: a BF16
    one its bytes in the file viewed as bfloat16, not widened into new
    memory); the pages the reader read (the header, the companion scales)
    given back now."""
    got = read_files([read_gguf(path)], lazy=True)     # (BF16: an Unread record)
    raise_first(got.problems)
    back, out_src = got.tensors, got.file.source
    if isinstance(out_src, LocalFile):
        out_src.release(out_src.mapping())
    spans = {t.name: (got.file.data_start + t.offset, t.nbytes) for t in got.file.tensors}

    def written(gname: str) -> None:
        for n in (gname, *companion_names(gname)):
            if n in spans and isinstance(out_src, LocalFile) and spans[n][1]:
                _give_back_around(out_src, out_src.view(*spans[n]))

    def plain(gname: str):
        b = back.get(gname)
        if not isinstance(b, Unread):
            return b
        view = out_src.view(*spans[gname]) if b.ggml_type == "BF16" else None
        if view is None:
            return b.read()
        return np.frombuffer(view, ST_DTYPES["BF16"].bits_dtype()).reshape(b.shape)
    return back, out_src, written, plain


def _gguf_proof(tensors: dict, plan: dict, inputs: dict, path: str, fam: Family,
                release: Callable[[Any], None] | None = None,
                proved: Callable[[str], None] | None = None) -> dict:
    """The proof of a ``--to gguf`` conversion, derived by reading the written
    file back with grit's GGUF reader.  One weight at a time: its planes
    built from the file's blocks and compared with the source's, then let
    go, the pages of the written file given back, and those of the source
    (``release``, :func:`_releaser`): memory stays at the weight being
    proved.  The source digests run a few weights at a time beforehand
    (their pages given back as they go); a weight whose rows move is moved
    and digested with them (as many as fit in half the largest weight's
    planes, else at its turn).  ``proved(gname)`` is called as each GGUF
    tensor is proved (a progress bar's feed).  An NVFP4 weight's written blocks are
    compared with the source (its rows moved) as they are unblocked
    (:func:`_blocks_hold`); any other's planes are built and compared."""
    back, out_src, written, plain_back = _read_back(path)
    weights, plain = [], []
    items = sorted(plan.items(), key=lambda kv: kv[1][1])
    sd = _SourceDigests(items, release)

    for gname, (v, name, how, rows) in items:
        b = plain_back(gname)
        back.pop(gname)         # its planes, once built, go with it: one weight's at a time
        if isinstance(v, _Experts):
            _prove_experts(v, gname, b, back.get(companion_names(gname)[0]),
                           back.companions.get(gname), back.ggml_types.get(gname), how,
                           weights, plain, release)
        elif isinstance(v, _GateUp):
            _prove_gate_up(v, gname, b, back, name, weights, plain, release,
                           out_src.release if out_src is not None else None)
        elif how == "ggml":
            if not isinstance(b, GritArray):
                raise GritError(f"{gname}: the written GGUF does not read back as a GRIT array")
            if rows is None:
                ref, dsrc = v, None
                # the blocks compared with the source as they are unblocked, no plane
                # built; else the planes built from the blocks (the file's pages of them
                # given back before the source's come) and compared
                same = _blocks_hold(v, b, back.companions.get(gname))
                if same is None:
                    b.planes
                    written(gname)
                    same = _convert._same_planes(v.planes, b.planes)
                written(gname)
                dref = sd.source(gname)
            else:
                # the source's digest, then its rows moved; the blocks compared with
                # them as they are unblocked (as above), or the planes built and compared
                dsrc = sd.source(gname)
                ref, dref = sd.moved(gname, v, rows)
                same = _blocks_hold(ref, b, back.companions.get(gname))
                if same is None:
                    b.planes                    # built from the blocks: the file's pages
                    written(gname)              # of them go before the source's come
                    dref, same = _convert._digest_and_compare(
                        ref, b, release, out_src.release if out_src is not None else None)
                else:
                    written(gname)
                    dref = dref or digests([ref.planes])[0].hex()
            weights.append({"name": name, "gguf_name": gname,
                            "ggml_type": back.ggml_types.get(gname),
                            "rows": _rows_note(rows),
                            "source": _convert._side(v, dref if dsrc is None else dsrc),
                            "target": _convert._side(b, dref if same else None),
                            "verdict": _verdict(ref, b, same),
                            "exact_by_construction": True, "notes": []})
            del ref, b
        else:
            why = _plain_entry(v, np.asarray(b), how, rows)
            if why is not None:
                raise GritError(f"{gname}: the written GGUF does not read back as the "
                                f"source's {name}: {why}")
            plain.append({"name": name, "gguf_name": gname, "transform": how,
                          "rows": _rows_note(rows)})
        if release is not None:
            _give_back(release, v)
        written(gname)
        if proved is not None:
            proved(gname)
    for gname, (v, leaf, how) in sorted(inputs.items()):
        why = _plain_entry(v, np.asarray(plain_back(gname)), "f32", None)
        if why is not None:
            raise GritError(f"{gname}: the written GGUF does not read back as {leaf}: {why}")
        plain.append({"name": leaf, "gguf_name": gname, "transform": how, "rows": None})
    return {"schema": _convert.PROOF_SCHEMA, "to": TARGET, "arch": fam.arch.lower(),
            "weights": weights, "plain": plain}


class _SourceDigests:
    """The source digests of a ``--to gguf`` plan's weights (``items``, in
    the order they are handled; stacked experts and gpt-oss's halves apart),
    :data:`LANES` at a time (``grit.fingerprint.digests``: their FNV-1a
    chains interleaved), each group's when its first weight's is asked
    for, the pages given to ``release`` as they go; and the weights of the
    group whose rows move, moved and digested with it (as many as fit in
    half the largest weight's planes), held until their turn."""

    def __init__(self, items: list, release: Callable[[Any], None] | None) -> None:
        self.whole = [(g, e[0], e[3]) for g, e in items
                      if e[2] == "ggml" and not isinstance(e[0], (_Experts, _GateUp))]
        self.at = {g: i for i, (g, _, _) in enumerate(self.whole)}
        self.release = release
        self.budget = max((sum(v.plane_bytes) for _, v, _ in self.whole), default=0) // 2
        self.ahead: dict[str, str] = {}
        self.moved_ahead: dict[str, tuple[GritArray, str]] = {}

    def source(self, gname: str) -> str:
        """Weight ``gname``'s source digest (hex)."""
        if gname not in self.ahead:
            group = self.whole[self.at[gname]:self.at[gname] + LANES]
            moved: list[tuple[str, GritArray]] = []
            room = self.budget
            for g, v, rows in group:
                if rows is not None and _MOVED_AHEAD and sum(v.plane_bytes) <= room:
                    room -= sum(v.plane_bytes)
                    moved.append((g, _permuted(v, rows)))
            ds = digests([v.planes for _, v, _ in group] + [m.planes for _, m in moved],
                         done=self.release)
            self.ahead.update((g, d.hex()) for (g, _, _), d in zip(group, ds))
            self.moved_ahead.update((g, (m, d.hex()))
                                    for (g, m), d in zip(moved, ds[len(group):]))
        return self.ahead.pop(gname)

    def moved(self, gname: str, v: GritArray, rows) -> tuple[GritArray, str | None]:
        """(weight ``gname``'s source ``v`` with its rows moved, its digest
        where it was taken with the group; else None); after :meth:`source`."""
        return self.moved_ahead.pop(gname, None) or (_permuted(v, rows), None)


#: whether :func:`_gguf_proof` moves and digests the rows of a query or key
#: weight with its group's source digests (a switch for the test that
#: compares it with moving them at the weight's turn)
_MOVED_AHEAD = True


def _blocks_hold(v: GritArray, b, comp) -> bool | None:
    """Whether ``b``, an NVFP4 weight read back with its companion scale
    (``comp``: the reader's :class:`~grit.io.gguf.Companion`), holds the
    planes of the canonical source ``v``, without building ``b``'s: its
    blocks unblock to ``v``'s codes and scales (``grit.ggml.unblocks_to``)
    and its level-1 scale plane is ``v``'s.  None where ``b`` is not such
    an array in ``v``'s placement (its planes are then built and compared).
    The same answer as comparing the planes (tests/test_convert_gguf_proof.py)."""
    if not (_BLOCKS_HOLD and isinstance(b, GritArray) and comp is not None
            and comp.attached and comp.blocks is not None
            and is_canonical(v.descriptor)
            and b.descriptor.placements == v.descriptor.placements):
        return None
    p = v.planes
    return bool(unblocks_to("NVFP4", comp.blocks.planes[0], p[0], p[1])
                and _convert._same_bytes(p[2], comp.scale1) and not len(memoryview(p[3])))


#: whether :func:`_gguf_proof` and verify compare FP4 blocks without building
#: the planes (:func:`_blocks_hold`, :func:`_unblocks_hold`,
#: :meth:`_GateUp.hold`; a switch for the tests that compare the two ways)
_BLOCKS_HOLD = True


def _verdict(ref: GritArray, b: GritArray, same: bool) -> dict:
    """``grit.convert.quick_verdict`` of the source as written ``ref`` and
    the array read back ``b``, ``b`` moved into the canonical placement by
    :func:`_canonical_once` where its planes are not ``ref``'s (a ggml
    block type's direct inverse, where a relayout holds several times the
    tensor)."""
    if same:
        return _convert.quick_verdict(ref, b, same)
    if _unblocks_hold(ref, b):
        return {"verdict": "bit-exact", "elements": int(np.prod(ref.shape, dtype=np.int64))}
    return _convert.quick_verdict(ref, _canonical_once(b))


def _unblocks_hold(ref: GritArray, b) -> bool | None:
    """Whether ``b``, read back in a split type's placement (its blocks in
    place: MXFP4, Q8_0), moves into the canonical source ``ref``'s grade
    projection, shape, group axis and planes (what makes
    ``grit.convert.quick_verdict`` bit-exact), without building ``b``'s
    canonical planes: its blocks unblock to ``ref``'s codes and scales
    (``grit.ggml.unblocks_to``).  None where they are not such arrays
    (:func:`_split_held`)."""
    got = _split_held(b, ref)
    if got is None:
        return None
    p = ref.planes
    return unblocks_to(got[0], got[1], p[0], p[1])


def _split_held(a, b) -> tuple[str, Any] | None:
    """(the ggml type, the blocks) of ``a`` where it is a split type's blocks
    read in place (``grit.ggml.blocks_of``: Q8_0, MXFP4, NVFP4) and ``b``
    holds the same array in the canonical placement (its grade's decode
    projection, shape and group axis ``a``'s, its two planes the blocks'
    sizes), so that the two compare without building either (the proof of
    a conversion from GGUF, :func:`_compared`, and the verdict of one to
    GGUF, :func:`_unblocks_hold`); else None."""
    got = blocks_of(a) if _BLOCKS_HOLD and isinstance(a, GritArray) else None
    if got is None or got[0].split is None or not isinstance(b, GritArray):
        return None
    t, blocks = got
    nb = blocks.size // t.block_bytes
    cb, sb = t.split
    if not (is_canonical(b.descriptor) and tuple(b.shape) == tuple(a.shape)
            and b.descriptor.group_axis == a.descriptor.group_axis
            and b.grade.decode_projection == a.grade.decode_projection
            and b.plane_bytes == (nb * cb, nb * sb, 0, 0)):
        return None
    return t.name, blocks


def _canonical_once(b):
    """Stacked tensor ``b`` as read back, in the canonical placement: a
    ggml block type's by its direct inverse (``grit.ggml.unblocked``:
    memory of the tensor's planes, where a relayout takes several times
    that), else ``canonical``; anything but a GRIT array as it is."""
    if not isinstance(b, GritArray) or is_canonical(b.descriptor):
        return b
    one = unblocked(b)
    if one is None:
        return canonical(b)
    return GritArray(b.grade.descriptor(group_axis=b.ndim - 1), b.shape,
                     (*one, *(b"",) * (4 - len(one))))


def _experts_compared(ex: "_Experts", b, comp, att, release: Callable[[Any], None] | None
                      ) -> Iterator[tuple[int, str, Any, Any, str | None, bool]]:
    """(index, name, source expert, its share of the stack ``b`` as read
    back — :meth:`_Experts.expert`'s, None where ``b`` is not such a stack —,
    the source's digest, whether the share's planes are its bytes) of each
    expert of ``ex``.  Where the stack is a split type's blocks
    (:func:`_stack_split`), the experts' digests run four at a time and
    each expert's blocks are compared with its planes as they are
    unblocked, no plane built (its share is then built only where it
    differs); else the stack is moved into the canonical placement once
    and each share digested and compared with its expert in one pass.
    The source's pages are handed to ``release`` as they go."""
    fast = _stack_split(ex, b, comp, att)
    if fast is None:
        b = _canonical_once(b)              # each expert reads a share of it
        for i, (name, x) in enumerate(zip(ex.names, ex.parts)):
            y = ex.expert(b, i, comp)
            d, same = _convert._digest_and_compare(x, y, release) \
                if isinstance(x, GritArray) and isinstance(y, GritArray) else (None, False)
            yield i, name, x, y, d, same
            del y
            if release is not None:
                _give_back(release, x)
        return
    name_t, blocks = fast
    be = blocks.size // len(ex.parts)
    scale1 = np.asarray(comp, "<f4").reshape(-1) if ex.scaled else None
    ds = digests([x.planes for x in ex.parts], done=release)
    for i, (name, x, d) in enumerate(zip(ex.names, ex.parts, ds)):
        p = x.planes
        level1 = scale1 is None or _convert._same_bytes(p[2], scale1[i:i + 1])
        same = level1 and unblocks_to(name_t, blocks[i * be:(i + 1) * be], p[0], p[1])
        yield i, name, x, ex.expert_later(b, i, comp), d.hex(), same
        if release is not None:
            _give_back(release, x)


def _stack_split(ex: "_Experts", b, comp, att) -> tuple[str, np.ndarray] | None:
    """(the ggml type, the blocks) of the stack ``b`` as read back — or of
    the blocks its companion ``att`` (the reader's
    :class:`~grit.io.gguf.Companion`) is attached to — where they are a
    split type's blocks (``grit.ggml.blocks_of``), the experts' own type,
    each a whole share of them, the experts canonical, a scaled stack's
    companion ``comp`` one F32 per expert; else None."""
    if not _BLOCKS_HOLD or ex.dtype is not None:
        return None
    src = att.blocks if att is not None and att.attached and att.blocks is not None else b
    got = blocks_of(src) if isinstance(src, GritArray) else None
    if got is None or got[0].split is None or tuple(src.shape) != ex.shape:
        return None
    t, blocks = got
    n, x = len(ex.parts), ex.parts[0]
    nb = x.size // t.block_elems
    cb, sb = t.split
    if native_kind(x) != t.name or blocks.size != n * nb * t.block_bytes or not all(
            is_canonical(y.descriptor) and y.plane_bytes[:2] == (nb * cb, nb * sb)
            for y in ex.parts):
        return None
    if ex.scaled:
        if not (isinstance(comp, np.ndarray) and comp.dtype == np.float32 and comp.size == n
                and all(y.plane_bytes[2:] == (4, 0) for y in ex.parts)):
            return None
    elif not all(y.plane_bytes[2:] == (0, 0) for y in ex.parts):
        return None
    return t.name, blocks


def _prove_experts(ex: "_Experts", gname: str, b, comp, att, ggml_type, how: str,
                   weights: list, plain: list, release: Callable[[Any], None] | None) -> None:
    """The proof entries of a stacked expert tensor ``b`` (and its companion
    ``comp``) as read back: one per source expert (docs/spec-decisions.md),
    its ``expert`` index in the stack, the source's digest and the digest
    of its share of the stack (:meth:`_Experts.expert`), compared
    (:func:`_experts_compared`), and the verdict."""
    for i, name, x, y, dsrc, same in _experts_compared(ex, b, comp, att, release):
        if isinstance(x, GritArray):
            if not isinstance(y, GritArray):
                raise GritError(f"{gname}: the written GGUF does not read back as the stacked "
                                f"experts (expert {i}, {name})")
            weights.append({"name": name, "gguf_name": gname, "expert": i,
                            "ggml_type": ggml_type, "rows": None,
                            "source": _convert._side(x, dsrc),
                            "target": _convert._side(y, dsrc if same else None),
                            "verdict": _convert.quick_verdict(x, y, same),
                            "exact_by_construction": True, "notes": []})
        else:
            why = "it is not the stacked experts" if y is None else \
                _plain_entry(np.asarray(x), y, how, None)
            if why is not None:
                raise GritError(f"{gname}: the written GGUF does not read back as the "
                                f"source's {name} (expert {i}): {why}")
            plain.append({"name": name, "gguf_name": gname, "expert": i, "transform": how,
                          "rows": None})
        del y


def _prove_gate_up(v: "_GateUp", gname: str, b, back, name: str, weights: list, plain: list,
                   release: Callable[[Any], None] | None,
                   release_out: Callable[[Any], None] | None = None) -> None:
    """The proof of gpt-oss's ``gate_up_proj`` (at its gate half ``gname``;
    nothing at the up half): one entry, its target the two written halves'
    rows interleaved again (:func:`_gate_up_target`); of its bias, one
    ``plain`` entry per half, checked against the source's rows."""
    x = v.src
    if v.dtype is not None:
        why = "it is no plain tensor" if not isinstance(b, np.ndarray) else \
            _plain_entry(np.asarray(x[:, v.part::2]), b, "f32", None)
        if why is not None:
            raise GritError(f"{gname}: the written GGUF does not read back as the source's "
                            f"{name}: {why}")
        plain.append({"name": name.removesuffix("#up"), "gguf_name": gname, "transform": "f32",
                      "rows": f"gpt-oss's {('gate', 'up')[v.part]} rows (axis 1, from "
                              f"{v.part} step 2)"})
        return
    if v.part:
        return
    got = _gate_up_target(x, b, back.get(v.pair), release, release_out)
    if got is None:
        raise GritError(f"{gname}, {v.pair}: the written GGUF does not read back as the "
                        f"halves of {name}")
    y, dsrc, same = got
    weights.append({"name": name, "gguf_name": gname, "gguf_names": [gname, v.pair],
                    "ggml_type": "MXFP4", "rows": "gpt-oss's gate and up rows (axis 1) "
                    "interleaved again", "source": _convert._side(x, dsrc),
                    "target": _convert._side(y, dsrc if same else None),
                    "verdict": _convert.quick_verdict(x, y, same),
                    "exact_by_construction": True, "notes": []})


def _gate_up_target(x: GritArray, gate, up, release: Callable[[Any], None] | None,
                    release_out: Callable[[Any], None] | None
                    ) -> tuple[GritArray, str, bool] | None:
    """(the target of gpt-oss's ``gate_up_proj`` ``x``: the written halves
    ``gate`` and ``up`` interleaved again, ``x``'s plane digest, whether
    the target's planes are ``x``'s bytes), or None where the halves are
    not such halves.  Compared expert by expert without building either
    side (:meth:`_GateUp.hold`; the target is then built only where its
    digest is needed: where it differs), else built and compared
    (:meth:`_GateUp.joined`)."""
    same = _GateUp.hold(x, gate, up, release, release_out)
    if same is not None:
        return (_GateUp.joined_later(x, gate, up), digests([x.planes], done=release)[0].hex(),
                same)
    y = _GateUp.joined(x, gate, up)
    if y is None:
        return None
    dsrc, same = _convert._digest_and_compare(x, y, release)
    return y, dsrc, same


def _verify_gate_up(v: "_GateUp", gname: str, b, back, name: str, claimed: dict,
                    problems: list[str], release: Callable[[Any], None] | None,
                    release_out: Callable[[Any], None] | None = None) -> int:
    """:func:`_verify_local` of a half of gpt-oss's ``gate_up_proj`` (or of
    its bias): as :func:`_prove_gate_up` derives it, against the proof.
    Returns the weights checked."""
    x = v.src
    if v.dtype is not None:
        why = "the GGUF holds no plain tensor under this name" if not isinstance(
            b, np.ndarray) else _plain_entry(np.asarray(x[:, v.part::2]), b, "f32", None)
        if why is not None:
            problems.append(f"{gname} ({name.removesuffix('#up')}): {why}")
        return 0
    if v.part or name not in claimed:
        return 0
    got = _gate_up_target(x, b, back.get(v.pair), release, release_out)
    if got is None:
        problems.append(f"{name}: the output holds no GRIT array under this name")
        return 1
    y, dsrc, same = got
    _check_weight(name, claimed[name], x, x, y, problems, dsrc, same)
    return 1


def _verify_experts(ex: "_Experts", gname: str, b, comp, att, how: str, claimed: dict,
                    problems: list[str], release: Callable[[Any], None] | None) -> int:
    """:func:`_verify_local` of a stacked expert tensor ``b`` and its
    companion ``comp``: each source expert against its share of the written
    stack (:func:`_experts_compared`) and its proof entry
    (:func:`_check_weight`).  Returns the weights checked."""
    checked = 0
    for i, name, x, y, dsrc, same in _experts_compared(ex, b, comp, att, release):
        if isinstance(x, GritArray):
            if name in claimed:
                checked += 1
                if (claimed[name].get("gguf_name"), claimed[name].get("expert")) != (gname, i):
                    problems.append(f"{name}: the proof places it at "
                                    f"{claimed[name].get('gguf_name')} expert "
                                    f"{claimed[name].get('expert')}, not {gname} expert {i}")
                _check_weight(name, claimed[name], x, x, y, problems,
                              dsrc if isinstance(y, GritArray) else None, same)
        else:
            why = "the GGUF holds no stacked experts under this name" if y is None else \
                _plain_entry(np.asarray(x), y, how, None)
            if why is not None:
                problems.append(f"{gname} expert {i} ({name}): {why}")
        del y
    return checked


# ---------------------------------------------------------------------------
# GGUF -> a safetensors convention


def is_gguf_source(src: str) -> bool:
    """Whether ``src`` is a GGUF source: a local ``.gguf`` file (a model of
    one file, or any shard of a split one), a local or ``hf://`` folder
    holding ``.gguf`` files and no ``.safetensors`` file (the shards of one
    model: ``grit.io.gguf_split.remote_folder``), or an ``https://`` URL or
    ``hf://`` file whose name ends in ``.gguf``."""
    if is_remote(src):
        return src.split("?")[0].lower().endswith(".gguf") or remote_folder(src) is not None
    if os.path.isdir(src):
        try:
            names = os.listdir(src)
        except OSError:
            return False
        return any(n.lower().endswith(".gguf") for n in names) and \
            not any(n.endswith(".safetensors") for n in names)
    return os.path.isfile(src) and src.lower().endswith(".gguf")


@contextmanager
def _local_gguf(src: str, work_parent: str) -> Iterator[str]:
    """The GGUF source ``src`` as a local path: a remote file read once, in
    ranged reads of at most ``grit.convert.SPOOL_CHUNK`` bytes
    (``spool_into``), into a spool folder in ``work_parent`` (refused
    without room for it and an output of its size), removed after.  A
    remote shard of a split model (``split.count`` over 1) brings its
    sibling shards, read the same way under their own names, after a check
    that there is room for them all; an ``hf://`` folder of them, the file
    it stands for (``grit.io.gguf_split.choose``) and so every shard."""
    if not is_remote(src):
        yield src
        return
    if (folder := remote_folder(src)) is not None:
        src = Location.of(folder[0]).sibling(choose(src, folder[1]))
    os.makedirs(work_parent, exist_ok=True)
    spool = tempfile.mkdtemp(prefix=".grit-gguf-spool-", dir=work_parent)
    try:
        loc = Location.of(src)
        got = loc.open(src)
        _room_for(spool, work_parent, got.size)
        m = SHARD_NAME.fullmatch(posixpath.basename(loc.bare))
        path = os.path.join(spool, GGUF_FILE if m is None else m.group(0))
        _convert.spool_into(path, got)
        f = read_gguf(path)
        count = f.value(SPLIT_COUNT)
        if m is not None and isinstance(count, int) and not isinstance(count, bool) \
                and count > 1:
            no, count, _ = shard_counts(f)
            want = shard_name(m.group(1), no, count)
            if want != m.group(0):
                raise GritUsageError(f"{src}: {SPLIT_NO} = {no} and {SPLIT_COUNT} = {count}: "
                                     f"the shard's name must be {want}")
            others = [(n, loc.open(loc.sibling(n))) for n in
                      (shard_name(m.group(1), i, count) for i in range(count)) if n != want]
            _room_for(spool, work_parent, got.size + sum(s.size for _, s in others))
            for n, s in others:
                _convert.spool_into(os.path.join(spool, n), s)
        yield path
    finally:
        shutil.rmtree(spool, ignore_errors=True)


def _room_for(spool: str, work_parent: str, size: int) -> None:
    """Refuse when the spool's file system has no room for ``size`` bytes
    of remote GGUF and an output of their size."""
    free = shutil.disk_usage(spool).free + sum(
        e.stat().st_size for e in os.scandir(spool) if e.is_file())
    if free < 2 * size:
        raise GritUsageError(f"{work_parent}: {free} bytes free; converting the remote "
                             f"GGUF needs {2 * size} (its spool and the output)")


def _family_of_arch(arch: str) -> Family:
    """The family a GGUF architecture is named back into (not a
    mixture-of-experts one: its stacked experts are not unstacked)."""
    back = [f for f in FAMILIES.values() if not f.moe]
    for f in back:
        if f.arch.lower() == arch:
            return f
    raise GritUsageError(f"GGUF architecture {arch!r} is not one grit names back into "
                         "Hugging Face tensors (" +
                         ", ".join(sorted({f.arch.lower() for f in back})) + ")")


def _kv_int(meta, key: str, top: int = 2**31 - 1) -> int:
    v = meta.get(key)
    if v is None or isinstance(v.value, bool) or not isinstance(v.value, int) or \
            not 0 < v.value <= top:
        raise GritUsageError(f"the GGUF has no {key} in 1..{top}")
    return int(v.value)


def _hf_names(fam: Family, nblocks: int) -> dict[str, str]:
    """GGUF tensor base name -> the Hugging Face module name (the preferred
    spelling of gguf-py's tensor-name map)."""
    gguf = _gguf()
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH[fam.arch], nblocks)
    back: dict[str, str] = {}
    for hf, (_, gname) in tmap.mapping.items():
        if _HF_NAME.match(hf) and gname not in back:
            back[gname] = hf
    return back


def _canonical_of(a: GritArray) -> GritArray:
    """``grit.array.canonical(a)``, for a tensor of a zero-copy ggml type
    with a direct inverse (NVFP4, MXFP4: ``grit.ggml.unblocked``, one pass
    over the blocks, where the general relayout holds several times the
    tensor) built by it: the same descriptor and planes (tests prove it)."""
    planes = unblocked(a)
    if planes is None:
        return canonical(a)
    return GritArray(canonical_descriptor(a.descriptor), a.shape, planes)


def _for_emitter(conv: str, v: GritArray) -> GritArray:
    """The array the emitter of convention ``conv`` is handed: the GRIT
    convention's stores it as it is (the GGUF's placement kept); any other
    reads its canonical planes, built here by :func:`_canonical_of` (the
    same planes its own ``canonical`` would build)."""
    return v if conv == _GRIT.name else _canonical_of(v)


def _as_held(a: GritArray, b) -> GritArray:
    """Source array ``a`` in the placement output array ``b`` holds it in:
    ``a`` itself where the placements are the same (the GRIT convention's
    output), else its canonical form (:func:`_canonical_of`), so that the
    proof compares planes without the general relayout."""
    return a if _held_as_is(a, b) else _canonical_of(a)


def _held_as_is(a: GritArray, b) -> bool:
    """Whether the output array ``b`` holds source ``a`` in ``a``'s own
    placement (so :func:`_as_held` builds nothing)."""
    return isinstance(b, GritArray) and b.descriptor.placements == a.descriptor.placements


class _FromGGUF:
    """A GGUF source (a file, or the shards of a split model:
    ``grit.io.gguf_split``) as Hugging Face named tensors, read one tensor
    at a time: its family, the config.json built from its KV entries, the
    recorded divisors by weight name, and :meth:`tensors`, each call a new
    pass over the file(s)."""

    def __init__(self, src: "str | Split") -> None:
        self.split = shards(src) if isinstance(src, str) else src
        self.path = self.split.paths[0]       # the KV entries, the tokenizer
        got = read_files(self.split.files, lazy=True)
        raise_first(got.problems)
        meta = got.tensors.metadata
        archv = meta.get("general.architecture")
        if archv is None or not isinstance(archv.value, str):
            raise GritUsageError(f"{src}: no general.architecture")
        arch = self.arch = archv.value
        fam = self.fam = _family_of_arch(arch)
        nb = _kv_int(meta, f"{arch}.block_count", MAX_BLOCKS)
        heads = _kv_int(meta, f"{arch}.attention.head_count")
        kvh = (_kv_int(meta, f"{arch}.attention.head_count_kv")
               if f"{arch}.attention.head_count_kv" in meta else heads)
        self.h = {"num_attention_heads": heads, "num_key_value_heads": kvh}
        self.names = names = _hf_names(fam, nb)
        fields = self.split.files[0]
        self.notes = {k[len(KV_CONVERT):]: fields.value(k) for k in fields.fields
                      if k.startswith(KV_CONVERT)}
        self.cfg = _config_from_kv(meta, arch, fam)
        self.divs = {names.get(g.rpartition(".")[0], "") + "." + g.rpartition(".")[2]: d
                     for g, d in ((k[len("divisor."):], d) for k, d in self.notes.items()
                                  if k.startswith("divisor."))}
        # where each tensor's bytes lie: given back once its weight is handled
        self.spans: dict[str, tuple[Any, int, int]] = {
            t.name: (f.source, f.data_start + t.offset, t.nbytes)
            for f in self.split.files for t in f.tensors}
        self.sources = [f.source for f in self.split.files if isinstance(f.source, LocalFile)]

    def tensors(self) -> Iterator[tuple[str, str, Any]]:
        """(Hugging Face name, GGUF name, tensor) of every tensor in file
        order, each built when it is reached (the query/key rows and
        Gemma 3's norms put back, plain tensors narrowed to their recorded
        dtype) and held by nothing here once yielded: a caller that drops
        it holds one tensor at a time."""
        got = read_files(self.split.files, lazy=True)
        raise_first(got.problems)
        tensors = got.tensors
        companions = {c.scale for c in tensors.companions.values() if c.attached}
        for gname in list(tensors):
            v = tensors.pop(gname)
            if gname in companions or gname == "rope_freqs.weight":
                continue
            base, _, suffix = gname.rpartition(".")
            hf = self.names.get(base)
            if base.endswith("_exps"):
                raise GritUsageError(f"{self.path}: tensor {gname!r} is a mixture-of-experts "
                                     "block's stacked experts, which grit does not write back "
                                     "as Hugging Face's per-expert tensors")
            if hf is None:
                raise GritUsageError(f"{self.path}: tensor {gname!r} has no Hugging Face name "
                                     f"in the {self.arch} architecture")
            name = f"{hf}.{suffix}"
            yield name, gname, self._as_hf(name, gname, v, tensors.ggml_types.get(gname))
            del v

    def _as_hf(self, name: str, gname: str, v, ggml_type: str | None):
        fam = self.fam
        if isinstance(v, Unread):
            keep = ggml_type == "BF16" and \
                (self.notes.get(f"dtype.{gname}") or "BF16") == "BF16" and \
                not (fam.norm_plus_one and gname.endswith("_norm.weight"))
            raw = self._bf16(gname, v.shape) if keep else None
            v = raw if raw is not None else v.read()
        heads_n = _qk_heads(name, fam, self.h)
        if heads_n is not None:
            inv = np.argsort(qk_rows(v.shape[0], heads_n))
            v = _permuted(_canonical_of(v) if isinstance(v, GritArray) else np.asarray(v), inv)
        if not isinstance(v, GritArray):
            v = np.asarray(v)
            if fam.norm_plus_one and gname.endswith("_norm.weight"):
                v = (v.astype(np.float32) - np.float32(1)).astype(np.float32)
            dt = self.notes.get(f"dtype.{gname}") or ("BF16" if ggml_type == "BF16" else None)
            v = _narrowed(v, dt)
        return v

    def stored_digests(self) -> dict[str, str]:
        """The plane digest (§6.5) of every weight held as the GGUF's blocks
        in place and not canonical (a zero-copy ggml type whose rows do not
        move: the proof digests it apart from its comparison, which reads
        the canonical planes), by Hugging Face name: :data:`LANES` weights
        at a time, the next one starting as one ends (``grit.fingerprint.
        digests``: their FNV-1a chains interleaved), each part's pages
        given back once hashed (the arrays are views of the files: holding
        them holds no memory)."""
        got = read_files(self.split.files, lazy=True)
        raise_first(got.problems)
        todo: list[tuple[str, GritArray]] = []
        for gname, v in got.tensors.items():
            base, _, suffix = gname.rpartition(".")
            hf = f"{self.names.get(base)}.{suffix}"
            if isinstance(v, GritArray) and not is_canonical(v.descriptor) and \
                    base in self.names and _qk_heads(hf, self.fam, self.h) is None:
                todo.append((hf, v))
        del got
        ds = digests([v.planes for _, v in todo], done=self.release)
        return {n: d.hex() for (n, _), d in zip(todo, ds)}

    def _bf16(self, gname: str, shape) -> np.ndarray | None:
        """BF16 tensor ``gname``'s bytes as the type carrying bfloat16's bits
        (:meth:`~grit.dtypes.StDtype.bits_dtype`), without a copy: what
        widening it to F32 (as :func:`grit.io.gguf.read` does) and narrowing
        it back to BF16 (:func:`_narrowed`, exact: NaNs' bits too) gives.
        None where the file is not mapped.  Tests compare the two on every
        BF16 value."""
        src, off, n = self.spans[gname]
        view = src.view(off, n)
        if view is None:
            return None
        return np.frombuffer(view, ST_DTYPES["BF16"].bits_dtype()).reshape(shape)

    def release(self, buf) -> None:
        """Give back the pages of ``buf`` where it views one of the files'
        maps (``MADV_DONTNEED``, :func:`_give_back_around`)."""
        for s in self.sources:
            _give_back_around(s, buf)

    def done(self, gname: str) -> None:
        """Give back the pages of GGUF tensor ``gname`` and its companions."""
        for n in (gname, *companion_names(gname)):
            span = self.spans.get(n)
            if span is not None and isinstance(span[0], LocalFile) and span[2]:
                _give_back_around(span[0], span[0].view(span[1], span[2]))


def _narrowed(v: np.ndarray, dt: str | None) -> np.ndarray:
    """Float32 ``v`` as the safetensors dtype ``dt`` it was widened from,
    when that gives the same values (else as it is)."""
    spec = ST_DTYPES.get(dt) if isinstance(dt, str) else None
    if spec is None or v.dtype != np.float32:
        return v
    if dt == "BF16":
        bf = bf16_narrowed(v)
        return v if bf is None else bf.view(spec.bits_dtype())
    npd = spec.np_dtype()
    if npd is None or npd == v.dtype:
        return v
    n = v.astype(npd)
    return n if np.array_equal(n.astype(np.float32).view(np.uint32), v.view(np.uint32)) else v


def _with_divisor(em_tensors: dict, name: str, a: GritArray, divs: dict[str, str]) -> None:
    """Put back the divisor the compressed-tensors NVFP4 weight ``name``'s
    source stored, where the emitter wrote its own (f32(1/s1)) and the
    recorded one gives the same level-1 scale: f32(1/g) = s1."""
    bits = divs.get(name)
    tn = name.removesuffix(".weight") + _DIVISOR_LEAF
    if bits is None or tn not in em_tensors or not re.fullmatch(r"[0-9a-f]{8}", str(bits)):
        return
    g = np.array([int(bits, 16)], "<u4").view(np.float32)
    s1 = np.frombuffer(bytes(a.canonical().planes[2]), "<f4")
    with np.errstate(all="ignore"):
        inv = (np.float32(1) / g).astype(np.float32)
    if s1.size == 1 and inv.view(np.uint32)[0] == s1.view(np.uint32)[0]:
        old = np.asarray(em_tensors[tn])
        em_tensors[tn] = g.reshape(old.shape).astype(old.dtype)


def _config_from_kv(meta, arch: str, fam: Family) -> dict:
    def val(key):
        v = meta.get(key)
        return None if v is None else v.value
    cfg: dict[str, Any] = {"architectures": [fam.hf],
                           "model_type": fam.model_type or
                           fam.hf.removesuffix("ForCausalLM").lower()}
    for hf, key in (("num_hidden_layers", "block_count"),
                    ("max_position_embeddings", "context_length"),
                    ("hidden_size", "embedding_length"),
                    ("intermediate_size", "feed_forward_length"),
                    ("num_attention_heads", "attention.head_count"),
                    ("num_key_value_heads", "attention.head_count_kv"),
                    ("rope_theta", "rope.freq_base"),
                    ("rms_norm_eps", "attention.layer_norm_rms_epsilon"),
                    ("head_dim", "attention.key_length"),
                    ("vocab_size", "vocab_size"),
                    ("sliding_window", "attention.sliding_window")):
        v = val(f"{arch}.{key}")
        if v is not None:
            cfg[hf] = v
    toks = meta.get("tokenizer.ggml.tokens")
    if "vocab_size" not in cfg and toks is not None:
        cfg["vocab_size"] = len(toks.value)
    for hf in ("bos", "eos", "pad"):
        v = val(f"tokenizer.ggml.{hf}_token_id")
        if isinstance(v, int) and not isinstance(v, bool):
            cfg[f"{hf}_token_id"] = v
    return cfg


#: config.json entries of transformers' GGUF reading that are not the model's
_NOT_CONFIG = ("transformers_version", "_name_or_path", "dtype", "torch_dtype", "architectures",
               "model_type")


def _tokenizer_back(split: Split, work: str, cfg: dict) -> dict:
    """The tokenizer of the GGUF source ``split`` (its ``tokenizer.ggml.*``
    entries; the shards of a split model seen as one file, through
    ``grit.io.gguf_split.write_outline``) as the tokenizer files
    transformers loads, written into ``work`` by transformers' own GGUF
    reader (``AutoTokenizer`` with
    ``gguf_file``, then ``save_pretrained``), and the config transformers
    reads from the GGUF under ``cfg``'s entries (where it names the same
    ``model_type``).  What was written, for the proof: ``files``, or
    ``none`` with the reason (transformers absent, or its reader refusing
    the file)."""
    if "tokenizer.ggml.model" not in split.files[0].fields:
        return {"files": [], "none": "the GGUF holds no tokenizer (tokenizer.ggml.model)"}
    try:
        import transformers  # noqa: PLC0415 - optional: the tokenizer files only
    except ImportError:
        return {"files": [], "none": "transformers is not installed"}
    view = tempfile.mkdtemp(prefix=".gguf-", dir=work)   # the GGUF alone: no file beside it
    try:
        try:
            if len(split.paths) == 1:
                os.symlink(os.path.abspath(split.paths[0]), os.path.join(view, GGUF_FILE))
            else:       # (gguf-py's writer refuses a value or type it cannot write)
                write_outline(split, os.path.join(view, GGUF_FILE))
            tok = transformers.AutoTokenizer.from_pretrained(view, gguf_file=GGUF_FILE)
            tcfg = transformers.AutoConfig.from_pretrained(view, gguf_file=GGUF_FILE).to_dict()
        except (ValueError, OSError, NotImplementedError) as e:
            return {"files": [], "none": f"transformers' GGUF reader: {type(e).__name__}: "
                                         f"{str(e)[:300]}"}
    finally:
        shutil.rmtree(view, ignore_errors=True)
    before = set(os.listdir(work))
    tok.save_pretrained(work)
    written = sorted(set(os.listdir(work)) - before)
    why = _reloads(transformers, tok, work)
    if why is not None:
        # the architecture's tokenizer class rebuilds another kind of vocabulary than
        # the GGUF's (a byte-level BPE in a Gemma GGUF): the generic class over
        # tokenizer.json then, or no tokenizer files at all
        tc = os.path.join(work, "tokenizer_config.json")
        doc = _convert._json(tc) or {}
        doc["tokenizer_class"] = "PreTrainedTokenizerFast"
        with open(tc, "w") as f:
            json.dump(doc, f, indent=2)
        why = _reloads(transformers, tok, work)
    if why is not None:
        for n in written:
            os.unlink(os.path.join(work, n))
        return {"files": [], "none": why}
    if tcfg.get("model_type") == cfg.get("model_type"):
        ours = dict(cfg)
        cfg.clear()
        cfg.update({k: v for k, v in tcfg.items() if k not in _NOT_CONFIG})
        cfg.update(ours)
    return {"files": written}


#: texts the written tokenizer must encode as the GGUF's does
_PROBES = ("Hello world, hello GGUF", "  two  spaces\n\n\tand a tab", "0123456789 3.14",
           "caf\u00e9 \u6570\u5b57 \u2713 <s></s><|endoftext|>")


def _reloads(transformers, tok, folder: str) -> str | None:
    """Why the tokenizer files in ``folder`` do not load back as ``tok``
    (transformers' reading of the GGUF) encoding :data:`_PROBES` alike;
    None: they do."""
    try:
        back = transformers.AutoTokenizer.from_pretrained(folder)
        for t in _PROBES:
            if back(t, add_special_tokens=False)["input_ids"] != \
                    tok(t, add_special_tokens=False)["input_ids"]:
                return f"the written tokenizer encodes {t!r} otherwise than the GGUF's"
    except (TypeError, AttributeError, NameError):
        raise                    # a bug (here or in transformers) stays a bug
    except Exception as e:  # noqa: BLE001 - the tokenizers library raises bare Exception
        return f"the written tokenizer does not load: {type(e).__name__}: {str(e)[:200]}"
    return None


@dataclass
class _GGUFPlan:
    """A GGUF source checked against the target before anything is written:
    the output file's layout (every entry's dtype, shape and offset,
    :func:`grit.io.safetensors.layout` of the emitted tensors), each
    weight's emitted tensors' names, and the plain tensors' shapes."""

    layout: Any
    emitted: dict[str, list[str]]
    plain: dict[str, tuple[int, ...]]


def _emitted(conv, name: str, v, divs: dict[str, str]) -> dict[str, Any]:
    """The file tensors of one source tensor: a GRIT array through the
    target convention's emitter (a compressed-tensors NVFP4 weight with its
    recorded divisor), a plain one as it is."""
    if not isinstance(v, GritArray):
        return {name: v}
    c = _for_emitter(conv.name, v)
    em = conv.emit(name, c)
    tensors = dict(em.tensors)
    _with_divisor(tensors, name, c, divs)
    return tensors


@dataclass(frozen=True)
class _Entry:
    """What the layout of an emitted file tensor is decided from: a GRIT
    array's descriptor and plane sizes, or a plain tensor's dtype, and the
    shape; never its bytes."""

    shape: tuple[int, ...]
    nbytes: int
    dtype: Any = None
    desc: Any = None
    sizes: tuple[int, ...] = ()

    @classmethod
    def of(cls, t) -> "_Entry":
        if isinstance(t, GritArray):
            return cls(tuple(t.shape), sum(t.plane_bytes), desc=t.descriptor,
                       sizes=tuple(t.plane_bytes))
        x = np.asarray(t)
        return cls(tuple(x.shape), x.nbytes, dtype=x.dtype)

    def stand_in(self, zeros: memoryview):
        """A tensor like the emitted one over the zero pages ``zeros``
        (never touched: they take no memory)."""
        if self.desc is not None:
            return GritArray(self.desc, self.shape, [zeros[:n] for n in self.sizes])
        return np.frombuffer(zeros, self.dtype, self.nbytes // self.dtype.itemsize
                             ).reshape(self.shape)


def _plan_from_gguf(g: _FromGGUF, to: str) -> _GGUFPlan:
    """Emit every tensor of the GGUF source once, one at a time, each
    weight's pages given back after: every refusal together (nothing is
    written), else the output's layout."""
    conv = conventions.by_name(to)
    if conv.emit is None or conv.emit_config is None:
        raise GritUsageError(f"convention {to!r} does not write tensors")
    entries: dict[str, _Entry] = {}
    emitted: dict[str, list[str]] = {}
    plain: dict[str, tuple[int, ...]] = {}
    refused: list[str] = []
    for name, gname, v in g.tensors():
        try:
            out = _emitted(conv, name, v, g.divs)
        except GritError as e:
            refused.append(str(e).splitlines()[0])
            continue
        finally:
            g.done(gname)
        if isinstance(v, GritArray):
            emitted[name] = list(out)
        else:
            plain[name] = tuple(np.shape(v))
        for tn, t in out.items():
            if tn in entries:
                refused.append(f"{name}: file tensor {tn!r} is written twice")
            entries[tn] = _Entry.of(t)
        del v, out
    if refused:
        raise _convert._refused(to, refused)
    zeros = _convert._zeros(max([e.nbytes for e in entries.values()], default=0))
    lay, _ = _st.layout({tn: e.stand_in(zeros) for tn, e in entries.items()})
    return _GGUFPlan(lay, emitted, plain)


def _write_from_gguf(g: _FromGGUF, to: str, plan: _GGUFPlan, out: str,
                     bar: _Progress | None = None) -> dict:
    """Write the output file ``out`` tensor by tensor at the planned offsets
    (the bytes ``grit.save`` writes for the same tensors): each tensor
    emitted again, written (a buffer that views a GGUF file's map copied by
    the kernel from file to file), its pages given back.
    Returns each weight's :class:`~grit.conventions.Emitted` without its
    tensors (for the config)."""
    conv = conventions.by_name(to)
    emit = conv.emit
    if emit is None:                         # (refused by the plan already)
        raise GritUsageError(f"convention {to!r} does not write tensors")
    fds = [(s, os.open(s.name, os.O_RDONLY)) for s in g.sources]
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    weights: dict[str, Any] = {}
    try:
        os.ftruncate(fd, plan.layout.size)
        _convert._pwrite(fd, plan.layout.head, 0)
        for name, gname, v in g.tensors():
            if isinstance(v, GritArray):
                c = _for_emitter(to, v)
                em = emit(name, c)
                weights[name] = dataclasses.replace(em, tensors={})
                items = dict(em.tensors)
                _with_divisor(items, name, c, g.divs)
                del em, c
            else:
                items = {name: v}
            for tn, (dt, shape, buf) in _st.entries_of(items).items():
                want = plan.layout.entries.get(tn)
                u = np.ascontiguousarray(buf).reshape(-1).view(np.uint8) \
                    if isinstance(buf, np.ndarray) else _convert._u8(buf)
                if want is None or (want[0], tuple(want[1]), want[3]) != \
                        (dt, tuple(shape), u.size):
                    raise GritError(f"{name}: the emitted tensor {tn!r} ({dt} {list(shape)}) "
                                    "is not the one planned before writing")
                at = next(((sfd, off) for s, sfd in fds
                           if u.size >= _convert._COPY_MIN
                           and (off := s.locate(u)) is not None), (-1, None))
                _convert._copy_or_write(at[0], at[1], fd, u, want[2])
                if bar is not None:
                    bar.add(u.size)
            del v, items
            g.done(gname)
    finally:
        os.close(fd)
        for _, sfd in fds:
            os.close(sfd)
    return weights


def _prove_from_gguf(g: _FromGGUF, to: str, out: str, bar: _Progress | None = None
                     ) -> list[dict]:
    """The proof entry of each weight, derived by reading the written file
    back through the target convention's recogniser: the source's planes as
    the output holds them digested and the output's compared with them
    (:func:`_compared`), the verdict derived (``grit.convert.quick_verdict``);
    the source's blocks as stored, where the output holds them otherwise,
    digested beforehand a few weights at a time
    (:meth:`_FromGGUF.stored_digests`)."""
    stored = {} if to == _GRIT.name else g.stored_digests()
    back, back_source = _convert._load_local(out)
    weights: list[dict] = []
    for name, a, ref, b, dref, same in _compared(g, back, back_source):
        if not isinstance(b, GritArray):
            raise GritError(f"{name}: the written file does not read back as a GRIT array")
        weights.append({"name": name, "file": "model.safetensors",
                        "source": _convert._side(a, dref if ref is a else stored.get(name)),
                        "target": _convert._side(b, dref if same else None),
                        "verdict": _convert.quick_verdict(ref, b, same)})
        if bar is not None:
            bar.add(int(sum(b.plane_bytes)))
        del a, ref, b               # not held while the next group's planes are built
    return weights


def _compared(g: _FromGGUF, back, back_source, want: Container[str] | None = None,
              seen: set[str] | None = None
              ) -> Iterator[tuple[str, GritArray, GritArray, Any, str, bool]]:
    """(name, source, the source as the output holds it, the output's array
    or what ``back`` holds under the name, the digest of the third, whether
    the output's planes are its bytes) of each source weight (those in
    ``want``, by default all; ``seen`` gets every source weight's name) in
    file order, a group at a time (:data:`SPLIT_GROUP`).  A
    weight whose blocks split into the output's two planes
    (:func:`_split_held`: Q8_0, MXFP4, NVFP4 blocks read in place) is
    compared as its blocks are unblocked (``grit.ggml.unblocks_to``) and
    the output's planes digested (``grit.fingerprint.digests``: their FNV-1a
    chains interleaved), nothing built (the source as the output holds it
    is built only where they differ); any other has the source's planes
    as the output holds them built and digested and compared with the
    output's in one pass (``grit.fingerprint.digests_compared``), as many
    as the planes built for them fit in :func:`_group_budget` (the group
    handled before the next weight's are built).  The pages of both files
    are given back as they go, and each GGUF tensor's once it is handled."""
    release_b = getattr(back_source, "release", None)
    budget = _group_budget(g)
    group: list[tuple[str, str, GritArray, GritArray, Any, Any]] = []

    def handled() -> Iterator[tuple[str, GritArray, GritArray, Any, str, bool]]:
        pairs = [(ref, b) for _, _, _, ref, b, fast in group
                 if isinstance(b, GritArray) and fast is None]
        ones = [b for *_, b, fast in group if fast is not None]
        step = _convert._RELEASE_STEP // LANES
        got = iter(digests_compared([r.planes for r, _ in pairs], [b.planes for _, b in pairs],
                                    step=step, done=g.release, done_other=release_b))
        alone = iter(digests([b.planes for b in ones], step=step, done=release_b))
        for name, gname, a, ref, b, fast in group:
            if fast is not None:
                d = next(alone)
                same = _unblocks_released(fast, b, g.release, release_b)
                yield name, a, ref, b, (d.hex() if same else _convert._planes_digest(ref)), same
                _convert._release(back_source, (b,))
            elif isinstance(b, GritArray):
                d, same = next(got)
                yield name, a, ref, b, d.hex(), same
                _convert._release(back_source, (b,))
            else:
                yield name, a, ref, b, "", False
            g.done(gname)
        group.clear()

    for name, gname, a in g.tensors():
        if seen is not None and isinstance(a, GritArray):
            seen.add(name)
        if not isinstance(a, GritArray) or (want is not None and name not in want):
            g.done(gname)
            continue
        b = _convert._built(back.pop(name, None))
        fast = _split_held(a, b)
        # the group handled first when this weight's planes, built, would not fit beside
        # it, or it would hold more than LANES weights to build (or SPLIT_GROUP in all)
        if group and (len(group) == SPLIT_GROUP or (fast is None and sum(
                f is None for *_, f in group) == LANES) or _held(a, b, fast) + sum(
                _held(x, y, f) for _, _, x, _, y, f in group) > budget):
            yield from handled()
        # the source as the output holds it (built where it is not the source itself:
        # the source's pages are then given back at once; deferred for a split weight)
        ref = _canonical_later(a) if fast is not None else _as_held(a, b)
        if ref is not a and fast is None:
            g.done(gname)
        group.append((name, gname, a, ref, b, fast))
        del a, b, ref
    yield from handled()


#: the most weights :func:`_compared` handles at once: those whose blocks split
#: (nothing built; their digests run LANES at a time, the next one starting as
#: one ends) and at most LANES others
SPLIT_GROUP = 4 * LANES


#: the bytes of blocks :func:`_unblocks_released` compares at a time
_COMPARE_STEP = 1 << 23


def _unblocks_released(fast: tuple[str, Any], b: GritArray, release_a, release_b) -> bool:
    """``grit.ggml.unblocks_to`` of a split weight's blocks (``fast``:
    :func:`_split_held`'s) and output ``b``'s two planes, a bounded step
    at a time, the pages of both files given back as it goes."""
    name, blocks = fast
    t = TYPES[name]
    cb, sb = t.split
    p = b.planes
    codes, scales = _plane_u8(p[0]), _plane_u8(p[1])
    nb = blocks.size // t.block_bytes
    per = max(1, _COMPARE_STEP // t.block_bytes)
    for i in range(0, nb, per):
        e = min(nb, i + per)
        parts = (blocks[i * t.block_bytes:e * t.block_bytes], codes[i * cb:e * cb],
                 scales[i * sb:e * sb])
        same = unblocks_to(name, *parts)
        for rel, x in zip((release_a, release_b, release_b), parts):
            if rel is not None and x.size:
                rel(x)
        if not same:
            return False
    return True


def _canonical_later(a: GritArray) -> GritArray:
    """:func:`_canonical_of` ``a``, deferred: built where its planes are read."""
    c = canonical_descriptor(a.descriptor)
    return GritArray.deferred(c, a.shape, lambda: _canonical_of(a).transient_planes())


def _held(a: GritArray, b, fast=None) -> int:
    """About the bytes of the planes :func:`_as_held` builds for ``a`` beside
    ``b``: none where it is ``a`` itself (views of its file) or ``fast``
    (:func:`_split_held`: nothing built), else the size of ``a``'s planes."""
    return 0 if fast is not None or _held_as_is(a, b) else int(sum(a.plane_bytes))


def _group_budget(g: _FromGGUF) -> int:
    """The most bytes of built planes the proof holds at once: half the
    largest tensor's (bench/bench_convert_from_gguf.py: peak memory below
    the one-at-a-time proof's, in about the CPU time of the whole
    tensor's budget)."""
    return max((span[2] for span in g.spans.values()), default=0) // 2


def from_gguf(src: str, dst: str, to: str, *, overwrite: bool = False,
              progress: Callable[[str], None] | None = None,
              fsync: bool = False) -> _convert.ConvertReport:
    """Write the GGUF source ``src`` (a file, or the shards of a split model
    named by any one of them or by their folder) as the safetensors
    checkpoint folder ``dst`` in convention ``to`` (``model.safetensors``,
    ``config.json`` built from the GGUF's KV entries, ``grit-proof.json``).
    Three passes over the source, one tensor at a time, each tensor's pages
    given back once it is handled: the check (every refusal before anything
    is written, and the output's layout), the write, and the proof.
    ``fsync``: as :func:`grit.convert.convert`'s."""
    if to not in _convert.TARGETS:
        raise GritUsageError(f"--to must be one of {', '.join(_convert.TARGETS)}, got {to!r}")
    split = shards(src)
    dst = _dst_free(dst, overwrite, list(split.paths))
    g = _FromGGUF(split)
    conv = _convert.TARGETS[to]
    plan = _plan_from_gguf(g, conv)
    cfg = g.cfg

    def fill(work: str) -> dict:
        bar = _Progress(progress, "model.safetensors", 2 * plan.layout.size)
        out = os.path.join(work, "model.safetensors")
        emitted = _write_from_gguf(g, conv, plan, out, bar)
        weights = [{**w, "exact_by_construction": emitted[w["name"]].exact,
                    "notes": list(emitted[w["name"]].notes)}
                   for w in _prove_from_gguf(g, conv, out, bar)]
        bar.end()
        tokenizer = _tokenizer_back(g.split, work, cfg)
        emit_config = conventions.by_name(conv).emit_config
        if emit_config is None:
            raise GritUsageError(f"convention {conv!r} does not write tensors")
        for fn, doc in emit_config(emitted, plan.plain).items():
            if fn == "config.json":
                cfg.update(doc)
            else:
                with open(os.path.join(work, fn), "w") as f:
                    json.dump(doc, f, indent=2)
        proof = {"schema": _convert.PROOF_SCHEMA, "to": conv, "from": "gguf",
                 "arch": g.fam.arch.lower(), "weights": weights, "plain": sorted(plan.plain),
                 "tokenizer": tokenizer}
        _write_proof(work, proof, cfg)
        return proof
    dst, proof = _convert.staged(dst, fill, fsync=fsync)
    return _convert.ConvertReport(dst, proof, _counts(proof))


# ---------------------------------------------------------------------------
# verify


def verify(src: str, dst: str, proof: str | None = None) -> _convert.VerifyReport:
    """Re-derive every verdict of a conversion to or from GGUF from the two
    checkpoints and compare with the proof."""
    folder, doc, problems = _convert.read_proof(dst, proof)
    if doc.get("to") == TARGET:
        return _verify_to_gguf(src, folder, doc, problems)
    with _local_gguf(src, os.path.dirname(os.path.abspath(folder))) as local:
        return _verify_from_gguf(local, folder, doc, problems)


def _verify_from_gguf(src: str, folder: str, doc: Mapping, problems: list[str]
                      ) -> _convert.VerifyReport:
    """The disagreements of a conversion from the GGUF source ``src`` with
    its proof: one pass over the source, each weight the proof names
    digested and compared with the output's a few at a time
    (:func:`_compared`), its claims checked (:func:`_check_weight`), the
    pages of both files given back."""
    g = _FromGGUF(src)
    b, b_source = _convert._load_local(os.path.join(folder, "model.safetensors"))
    claimed = {w.get("name"): w for w in doc["weights"] if isinstance(w, dict)}
    srcw: set[str] = set()
    found: dict[str, list[str]] = {}
    for name, x, ref, y, dref, same in _compared(g, b, b_source, claimed, srcw):
        _check_weight(name, claimed[name], x, ref, y, found.setdefault(name, []), dref, same)
        del x, ref, y               # not held while the next group's planes are built
    _compare_sets(srcw, claimed, problems)
    for name in sorted(found):
        problems.extend(found[name])
    return _convert.VerifyReport(problems, len(srcw & set(claimed)))


def _compare_sets(srcw: set, claimed: dict, problems: list[str]) -> None:
    if srcw != set(claimed):
        problems.append(f"the proof names {len(claimed)} weights, the source has {len(srcw)}: "
                        f"missing {sorted(srcw - set(claimed))[:5]}, extra "
                        f"{sorted(set(claimed) - srcw)[:5]}")


def _check_weight(name: str, w: dict, x, ref, y, problems: list[str],
                  dref: str | None = None, same: bool | None = None,
                  release: Callable[[Any], None] | None = None,
                  release_out: Callable[[Any], None] | None = None,
                  dx: str | None = None) -> None:
    """The disagreements of one weight with its proof entry ``w``: ``x`` the
    source, ``ref`` the source as the output should hold it (``x``, its
    rows moved, or its canonical form), ``y`` the output.  ``dref`` and
    ``same``: ``ref``'s digest and whether ``y``'s planes are its bytes,
    where the caller has them; else ``ref`` is digested and compared with
    ``y`` here in one pass (``grit.convert._digest_and_compare``), the pages
    of ``x``'s file handed to ``release`` and of ``y``'s to ``release_out``
    as it goes.  ``x`` is digested apart where it is not ``ref`` (``dx``:
    its digest, where the caller has it), ``y`` where it is not ``ref``'s
    bytes, and the verdict re-derived (``grit.convert.quick_verdict``)."""
    if not isinstance(y, GritArray):
        problems.append(f"{name}: the output holds no GRIT array under this name")
        return
    dx = None if ref is x else dx or _convert._planes_digest(x)
    if dref is None or same is None:
        dref, same = _convert._digest_and_compare(ref, y, release if ref is x else None,
                                                  release_out)
    for side, got in (("source", _convert._side(x, dref if dx is None else dx)),
                      ("target", _convert._side(y, dref if same else None))):
        for k in ("gid", "grade", "digest", "shape"):
            if (w.get(side) or {}).get(k) != got[k]:
                problems.append(f"{name}: {side} {k} is {got[k]}, the proof says "
                                f"{(w.get(side) or {}).get(k)}")
    v = _verdict(ref, y, same)
    if v != w.get("verdict"):
        problems.append(f"{name}: the decodes give {v}, the proof says {w.get('verdict')}")


def _verify_to_gguf(src: str, folder: str, doc: dict, problems: list[str]
                    ) -> _convert.VerifyReport:
    """:func:`_verify_local` of the checkpoint ``src``; a remote one
    streamed as :func:`_streamed` reads it: one model file at a time read
    into a spool beside the output, the GGUF tensors whose last model file
    it is checked, and the large tensors no later one needs punched out."""
    with _local(src, os.path.dirname(os.path.abspath(folder)), stream=True) as local:
        if not local.remote:
            return _verify_local(local, folder, doc, problems)
        st = _stream_order(local, _prepared(local), 0, "verifying")
        checked = 0
        for k in range(len(local.remote)):
            _fill(local, k)
            found: list[str] = []
            checked += _verify_local(local, folder, doc, found, only={
                g for g, j in st.group.items() if j == k}, first=k == 0).checked
            problems.extend(x for x in found if x not in problems)
            if st.punch:
                _drop(local, [x for x, j in st.last.items() if j == k], st.large)
        return _convert.VerifyReport(problems, checked)


def _verify_local(local: _Local, folder: str, doc: dict, problems: list[str],
                  only: Container[str] | None = None, first: bool = True
                  ) -> _convert.VerifyReport:
    """The disagreements of the conversion of ``local`` into ``folder`` with
    its proof ``doc``, added to ``problems``; ``only``: the GGUF tensors to
    check (by default all), ``first``: whether the checks of the whole
    checkpoint run too (its weights are the proof's, its activation scales
    the GGUF's)."""
    cfg = _convert._json(os.path.join(local.folder, "config.json")) or {}
    fam = _family(cfg)
    h = _hparams(cfg, fam)
    tensors, scalars = _source(local.paths, local.headers)
    release = _releaser(local)
    plan, refused, types = _plan_gguf(tensors, fam, h, int(_need(h, "num_hidden_layers", fam)),
                                      _embedding_rows(fam, local.folder, h), release)
    problems.extend(f"the source is no longer convertible: {r}" for r in refused)
    back, out_src, written, plain_back = _read_back(os.path.join(folder, GGUF_FILE))
    claimed = {w.get("name"): w for w in doc["weights"] if isinstance(w, dict)}
    srcw = {n for n, v in tensors.items() if isinstance(v, GritArray)}
    if first:
        _compare_sets(srcw, claimed, problems)
    checked = 0
    todo = [(g, e) for g, e in plan.items() if (only is None or g in only) and e[1] in claimed]
    sd = _SourceDigests(todo, release)
    for gname, (v, name, how, rows) in plan.items():
        if only is not None and gname not in only:
            continue
        b = plain_back(gname)
        back.pop(gname, None)   # one weight's built planes at a time
        if isinstance(v, _Experts):
            checked += _verify_experts(v, gname, b, back.get(companion_names(gname)[0]),
                                       back.companions.get(gname), how,
                                       claimed, problems, release)
        elif isinstance(v, _GateUp):
            checked += _verify_gate_up(v, gname, b, back, name, claimed, problems, release,
                                       getattr(out_src, "release", None))
        elif how == "ggml":
            if name in claimed:
                checked += 1
                # as the proof derives it: the source digests a few at a time, an NVFP4
                # weight's blocks compared as they are unblocked, nothing built
                dx = sd.source(gname)
                ref, dref = (v, dx) if rows is None else sd.moved(gname, v, rows)
                same = _blocks_hold(ref, b, back.companions.get(gname))
                if same is None:
                    _check_weight(name, claimed[name], v, ref, b, problems, release=release,
                                  release_out=getattr(out_src, "release", None), dx=dx)
                else:
                    _check_weight(name, claimed[name], v, ref, b, problems,
                                  dref or digests([ref.planes])[0].hex(), same, dx=dx)
        elif not isinstance(b, np.ndarray):
            problems.append(f"{gname}: the GGUF holds no plain tensor under this name")
        else:
            why = _plain_entry(v, b, how, rows)
            if why is not None:
                problems.append(f"{gname} ({name}): {why}")
        del b
        _give_back(release, v)      # the pages of both files' tensor, given back
        written(gname)
    for gname, (v, leaf, _) in (_input_scales(plan, types, scalars) if first else {}).items():
        b = plain_back(gname)
        why = (_plain_entry(v, b, "f32", None) if isinstance(b, np.ndarray)
               else "the GGUF holds no plain tensor under this name")
        if why is not None:
            problems.append(f"{gname} ({leaf}): {why}")
    return _convert.VerifyReport(problems, checked)


# ---------------------------------------------------------------------------
# grit convert / grit verify hand GGUF to this module


def convert(src: str, dst: str, to: str, *, overwrite: bool = False,
            progress: Callable[[str], None] | None = None,
            fsync: bool = False) -> _convert.ConvertReport:
    """``grit convert`` with GGUF on one side: a ``.gguf`` SRC into a
    safetensors convention (:func:`from_gguf`), anything else ``--to gguf``
    (:func:`to_gguf`); ``fsync``: as :func:`grit.convert.convert`'s."""
    if is_gguf_source(src):
        if to == TARGET:
            raise GritUsageError("SRC is GGUF already: --to names a safetensors convention "
                                 f"({', '.join(_convert.TARGETS)})")
        if to not in _convert.TARGETS:
            raise GritUsageError(f"--to must be one of {', '.join(_convert.TARGETS)}, "
                                 f"got {to!r}")
        if is_remote(src):                  # refused before a byte is read
            _dst_free(dst, overwrite, [])
        with _local_gguf(src, os.path.dirname(os.path.abspath(dst))) as local:
            return from_gguf(local, dst, to, overwrite=overwrite, progress=progress,
                             fsync=fsync)
    return to_gguf(src, dst, overwrite=overwrite, progress=progress, fsync=fsync)


def _wrote(dst: str) -> bool:
    return os.path.isfile(os.path.join(dst, GGUF_FILE))


_convert.CONTAINERS["gguf"] = _convert.Container(
    "gguf", (TARGET,), is_gguf_source, _wrote, convert, verify)
