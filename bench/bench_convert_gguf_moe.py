"""grit convert --to gguf of a mixture-of-experts checkpoint against
llama.cpp's own converter, on the same synthetic checkpoint, in the same run.

A Qwen3-MoE checkpoint in compressed-tensors NVFP4 (random packed codes,
random positive E4M3 block scales, a global scale per weight) in the
per-expert layout of Hugging Face checkpoints
(``model.layers.N.mlp.experts.E.{gate,up,down}_proj``), in shards with an
index, is written under ``$TMPDIR`` as bench_convert_gguf.py writes its
Llama checkpoint; both converters stack each block's experts into one 3-D
tensor.  Measured as there (each converter in a fresh process, interleaved,
median of ``--repeat``): wall time, GB/s, CPU time, peak RSS and peak
anonymous RSS against the largest tensor — a stacked expert tensor, which
grit builds whole (its experts' planes one after another) while it is
written — and whether the two GGUFs hold the same tensors.

    python bench/bench_convert_gguf_moe.py --layers 4 --experts 64 --llama-cpp /path/to/llama.cpp

``--gpt-oss``: a gpt-oss checkpoint in its own MXFP4 layout instead (each
block's experts stacked already, gate and up rows interleaved in
``gate_up_proj``, which both converters split).
"""
from __future__ import annotations

import argparse
import os


from bench_convert_gguf import (_QCONFIG, Entry, bench, nvfp4_entries, tokenizer,
                                write_sharded)


def make(folder: str, layers: int, hidden: int, heads: int, kv: int, experts: int, ff: int,
         per_shard: int) -> tuple[int, int]:
    """The checkpoint (shards of ``per_shard`` layers and their index);
    returns (its model bytes, the largest tensor's bytes as written: a
    stacked expert tensor's blocks)."""
    os.makedirs(folder)
    vocab = tokenizer(folder)
    hd = hidden // heads
    shapes = {"self_attn.q_proj": (heads * hd, hidden), "self_attn.k_proj": (kv * hd, hidden),
              "self_attn.v_proj": (kv * hd, hidden), "self_attn.o_proj": (hidden, heads * hd)}
    for e in range(experts):
        shapes.update({f"mlp.experts.{e}.gate_proj": (ff, hidden),
                       f"mlp.experts.{e}.up_proj": (ff, hidden),
                       f"mlp.experts.{e}.down_proj": (hidden, ff)})

    def layer(p: str) -> list[Entry]:
        return [(p + "input_layernorm.weight", "BF16", [hidden]),
                (p + "post_attention_layernorm.weight", "BF16", [hidden]),
                (p + "self_attn.q_norm.weight", "BF16", [hd]),
                (p + "self_attn.k_norm.weight", "BF16", [hd]),
                (p + "mlp.gate.weight", "BF16", [experts, hidden]),
                *(e for m, (r, c) in shapes.items() for e in nvfp4_entries(p + m, r, c))]
    cfg = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
           "hidden_size": hidden, "intermediate_size": 4 * ff, "moe_intermediate_size": ff,
           "num_experts": experts, "num_experts_per_tok": min(8, experts),
           "num_hidden_layers": layers, "num_attention_heads": heads,
           "num_key_value_heads": kv, "head_dim": hd, "max_position_embeddings": 8192,
           "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "vocab_size": vocab,
           "bos_token_id": 0, "eos_token_id": 1, "tie_word_embeddings": False,
           "torch_dtype": "bfloat16", "quantization_config": _QCONFIG}
    total = write_sharded(folder, layers, per_shard, vocab, hidden, layer, cfg)
    return total, experts * ff * hidden * 9 // 16      # NVFP4: 36 bytes per 64 values


def make_gpt_oss(folder: str, layers: int, hidden: int, heads: int, kv: int, experts: int,
                 ff: int, per_shard: int) -> tuple[int, int]:
    """A gpt-oss checkpoint in its own MXFP4 layout (``quant_method: mxfp4``:
    ``mlp.experts.gate_up_proj_blocks`` / ``_scales`` [expert, 2 x ff,
    hidden / 32, 16], ``down_proj`` likewise, every other tensor bfloat16),
    shards and index as :func:`make`'s; returns (its model bytes, the
    largest tensor's bytes: a gate_up_proj's blocks and scales)."""
    os.makedirs(folder)
    vocab = tokenizer(folder)
    hd = hidden // heads

    def layer(p: str) -> list[Entry]:
        ts = [(p + "input_layernorm.weight", "BF16", [hidden]),
              (p + "post_attention_layernorm.weight", "BF16", [hidden]),
              (p + "self_attn.sinks", "BF16", [heads]),
              (p + "mlp.router.weight", "BF16", [experts, hidden]),
              (p + "mlp.router.bias", "BF16", [experts])]
        for m, (r, c) in {"q_proj": (heads * hd, hidden), "k_proj": (kv * hd, hidden),
                          "v_proj": (kv * hd, hidden), "o_proj": (hidden, heads * hd)}.items():
            ts += [(p + f"self_attn.{m}.weight", "BF16", [r, c]),
                   (p + f"self_attn.{m}.bias", "BF16", [r])]
        for m, (r, c) in {"gate_up_proj": (2 * ff, hidden), "down_proj": (hidden, ff)}.items():
            ts += [(p + f"mlp.experts.{m}_blocks", "U8", [experts, r, c // 32, 16]),
                   (p + f"mlp.experts.{m}_scales", "U8", [experts, r, c // 32]),
                   (p + f"mlp.experts.{m}_bias", "BF16", [experts, r])]
        return ts
    cfg = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
           "hidden_size": hidden, "intermediate_size": ff, "num_local_experts": experts,
           "num_experts_per_tok": min(4, experts), "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd,
           "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "sliding_window": 128,
           "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                            "beta_slow": 1.0, "original_max_position_embeddings": 4096},
           "rope_theta": 150000.0, "vocab_size": vocab, "bos_token_id": 0, "eos_token_id": 1,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16",
           "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
               "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
               "lm_head"]}}
    total = write_sharded(folder, layers, per_shard, vocab, hidden, layer, cfg)
    return total, experts * 2 * ff * hidden * 17 // 32     # MXFP4: 17 bytes per 32 values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--expert-ff", type=int, default=768)
    ap.add_argument("--layers-per-shard", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gpt-oss", action="store_true",
                    help="a gpt-oss checkpoint in its own MXFP4 layout instead")
    ap.add_argument("--llama-cpp", default=os.environ.get("GRIT_LLAMA_CPP", ""))
    args = ap.parse_args()

    def build(src: str) -> tuple[int, int, str]:
        total, largest = (make_gpt_oss if args.gpt_oss else make)(
            src, args.layers, args.hidden, args.heads, args.kv_heads, args.experts,
            args.expert_ff, args.layers_per_shard)
        what = "gpt-oss MXFP4" if args.gpt_oss else "compressed-tensors NVFP4 Qwen3-MoE"
        return total, largest, (f"{total / 1e9:.2f} GB {what}, {args.layers} layers of "
                                f"{args.experts} experts, largest tensor (stacked experts) "
                                f"{largest / 2**20:.1f} MiB")
    bench(build, args.repeat, args.llama_cpp)


if __name__ == "__main__":
    main()
