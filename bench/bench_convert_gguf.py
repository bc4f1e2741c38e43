"""grit convert --to gguf against llama.cpp's own converter, on the same
synthetic checkpoint, in the same run.

A Llama checkpoint in compressed-tensors NVFP4 (``nvfp4-pack-quantized``:
random packed codes, random positive E4M3 block scales, a global scale per
weight — conversion moves bytes, so their values do not matter), in shards
with an index, beside a config.json and a small byte-level BPE tokenizer
(``tokenizers``), is written under ``$TMPDIR``; then, each in a fresh
process, interleaved, median of ``--repeat``:

* ``grit``: ``grit.convert.convert(src, dst, "gguf")`` (check, write, read
  back and prove);
* ``llama.cpp``: convert_hf_to_gguf.py of the llama.cpp tree named by
  ``--llama-cpp`` (or ``GRIT_LLAMA_CPP``), with that tree's gguf-py, the
  pre-tokenizer name set as tests/llama_cpp_convert.py sets it (the tiny
  vocabulary matches none of its hashes).

Printed per converter: wall time, GB/s over the checkpoint's bytes, CPU time
(user + system, all threads), peak RSS (``VmHWM``) and peak anonymous RSS
(``RssAnon`` sampled every 5 ms) against the largest tensor, and whether the
two GGUFs hold the same tensors — name, ggml type, shape and bytes — as the
tests require; grit's imports' CPU time (the modules its conversion imports,
imported first in the same process) and the GB/s a core of the conversion
without them; and the load average before and after (the machine may be
shared).

    python bench/bench_convert_gguf.py --layers 16 --llama-cpp /path/to/llama.cpp
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from typing import Callable

import numpy as np

import _measure  # bench/: the child's measurements

_CHILD = _measure.HEAD + r"""
mode, src, dst, llama = sys.argv[1:5]
if mode == "grit":
    # the modules the conversion imports, first: their CPU time apart (import_cpu)
    import gguf  # noqa: F401  (gguf-py: with it sentencepiece, yaml)
    from grit.convert import convert
    import grit.convert_gguf  # noqa: F401
    extra["import_cpu"] = cpu() - cpu0
    convert(src, dst, "gguf")
    extra["ml_dtypes"] = int("ml_dtypes" in sys.modules)    # a conversion needs none
else:
    sys.path.insert(0, llama)
    import convert_hf_to_gguf
    from conversion import base
    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "llama-bpe"
    os.makedirs(dst)
    sys.argv = ["convert_hf_to_gguf.py", src, "--outfile", os.path.join(dst, "model.gguf")]
    convert_hf_to_gguf.main()
""" + _measure.TAIL

#: the quantization_config compressed-tensors writes for NVFP4 weights
_QCONFIG = {
    "config_groups": {"group_0": {
        "format": "nvfp4-pack-quantized", "input_activations": None, "output_activations": None,
        "targets": ["Linear"],
        "weights": {"dynamic": False, "group_size": 16, "num_bits": 4,
                    "strategy": "tensor_group", "symmetric": True, "type": "float"}}},
    "format": "nvfp4-pack-quantized", "ignore": ["lm_head"], "kv_cache_scheme": None,
    "quant_method": "compressed-tensors", "quantization_status": "compressed",
    "sparsity_config": {}, "transform_config": {}, "version": "0.20.1"}

_CORPUS = ["the quick brown fox jumps over the lazy dog", "hello world, hello grit",
           "llama.cpp loads GGUF files", "0123456789 numbers and words"] * 8
_LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?"
              r"[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def tokenizer(folder: str) -> int:
    """A byte-level BPE with Llama 3's split regex (``tokenizers``), trained
    on a tiny corpus, as tokenizer.json and tokenizer_config.json; returns
    its vocabulary size."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_LLAMA3_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(_CORPUS, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<s>", "</s>", "<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>",
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f)
    return tok.get_vocab_size()


def _write_shard(path: str, tensors: list[tuple[str, str, list[int]]],
                 rng: np.random.Generator) -> None:
    """A safetensors file of ``(name, dtype, shape)`` entries, each filled
    with random bytes as it is written (never the shard in memory)."""
    size = {"U8": 1, "F8_E4M3": 1, "BF16": 2, "F32": 4}
    hdr, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dt, shape in tensors:
        n = int(np.prod(shape)) * size[dt]
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    hj = json.dumps(hdr).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj)
        for name, dt, shape in tensors:
            n = int(np.prod(shape))
            if dt == "U8" and name.endswith("_scales"):   # E8M0 exponents near 2^0
                x = rng.integers(0x70, 0x88, n, dtype=np.uint8)
            elif dt == "U8":                     # packed E2M1 codes
                x = rng.integers(0, 256, n, dtype=np.uint8)
            elif dt == "F8_E4M3":                # positive, finite, not 0x7F
                x = rng.integers(0x30, 0x48, n, dtype=np.uint8)
            elif dt == "F32":                    # a global scale: 448 * 6 / amax
                x = np.full(n, 448 * 6 / 2.0, np.float32)
            else:                                # bf16 values near 1 (norms, embeddings)
                x = (np.float32(1) + rng.standard_normal(n, np.float32) * np.float32(.01)
                     ).view(np.uint32) >> np.uint32(16)
                x = x.astype("<u2")
            f.write(x.tobytes())


Entry = tuple[str, str, list[int]]


def nvfp4_entries(name: str, rows: int, cols: int) -> list[Entry]:
    """The file tensors of a compressed-tensors NVFP4 weight ``name``
    [rows, cols] (``nvfp4-pack-quantized``)."""
    return [(name + ".weight_packed", "U8", [rows, cols // 2]),
            (name + ".weight_scale", "F8_E4M3", [rows, cols // 16]),
            (name + ".weight_global_scale", "F32", [1])]


def write_sharded(folder: str, layers: int, per_shard: int, vocab: int, hidden: int,
                  layer: Callable[[str], list[Entry]], cfg: dict) -> int:
    """A checkpoint in ``folder`` (made, the tokenizer there): shards of
    ``per_shard`` layers (the token embedding in the first, the final norm
    and lm_head in the last, ``layer(prefix)`` each layer's other tensors;
    random bytes), their index and ``cfg`` as config.json; returns its
    model bytes."""
    rng = np.random.default_rng(0)
    groups = [list(range(i, min(i + per_shard, layers))) for i in range(0, layers, per_shard)]
    wmap: dict[str, str] = {}
    for s, group in enumerate(groups):
        fn = f"model-{s + 1:05d}-of-{len(groups):05d}.safetensors"
        ts: list[Entry] = []
        if s == 0:
            ts.append(("model.embed_tokens.weight", "BF16", [vocab, hidden]))
        for i in group:
            ts += layer(f"model.layers.{i}.")
        if s == len(groups) - 1:
            ts += [("model.norm.weight", "BF16", [hidden]),
                   ("lm_head.weight", "BF16", [vocab, hidden])]
        _write_shard(os.path.join(folder, fn), ts, rng)
        wmap.update({n: fn for n, _, _ in ts})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder)
               if n.endswith(".safetensors"))


def make(folder: str, layers: int, hidden: int, inter: int, heads: int, kv: int,
         per_shard: int) -> tuple[int, int]:
    """The checkpoint (shards of ``per_shard`` layers and their index);
    returns (its model bytes, the largest tensor's bytes)."""
    os.makedirs(folder)
    vocab = tokenizer(folder)
    hd = hidden // heads
    shapes = {"self_attn.q_proj": (heads * hd, hidden), "self_attn.k_proj": (kv * hd, hidden),
              "self_attn.v_proj": (kv * hd, hidden), "self_attn.o_proj": (hidden, heads * hd),
              "mlp.gate_proj": (inter, hidden), "mlp.up_proj": (inter, hidden),
              "mlp.down_proj": (hidden, inter)}

    def layer(p: str) -> list[Entry]:
        return [(p + "input_layernorm.weight", "BF16", [hidden]),
                (p + "post_attention_layernorm.weight", "BF16", [hidden]),
                *(e for m, (r, c) in shapes.items() for e in nvfp4_entries(p + m, r, c))]
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd,
           "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
           "vocab_size": vocab, "bos_token_id": 0, "eos_token_id": 1,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16",
           "quantization_config": _QCONFIG}
    total = write_sharded(folder, layers, per_shard, vocab, hidden, layer, cfg)
    return total, max(r * c // 2 for r, c in shapes.values())


def run(mode: str, src: str, dst: str, llama: str) -> dict:
    shutil.rmtree(dst, ignore_errors=True)
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, src, dst, llama],
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{mode} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def same_tensors(a: str, b: str) -> tuple[bool, int]:
    """Whether GGUF files ``a`` and ``b`` hold the same tensors (name, ggml
    type, shape, bytes; read by gguf-py), and how many."""
    import gguf
    ra, rb = gguf.GGUFReader(a), gguf.GGUFReader(b)
    ta = {t.name: t for t in ra.tensors}
    tb = {t.name: t for t in rb.tensors}
    if set(ta) != set(tb):
        return False, len(ta)
    for n, t in ta.items():
        u = tb[n]
        if t.tensor_type != u.tensor_type or list(t.shape) != list(u.shape) or \
                not np.array_equal(np.asarray(t.data).view(np.uint8).reshape(-1),
                                   np.asarray(u.data).view(np.uint8).reshape(-1)):
            return False, len(ta)
    return True, len(ta)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--intermediate", type=int, default=14336)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--layers-per-shard", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--llama-cpp", default=os.environ.get("GRIT_LLAMA_CPP", ""))
    args = ap.parse_args()

    def build(src: str) -> tuple[int, int, str]:
        total, largest = make(src, args.layers, args.hidden, args.intermediate, args.heads,
                              args.kv_heads, args.layers_per_shard)
        n = len([n for n in os.listdir(src) if n.endswith(".safetensors")])
        return total, largest, (f"{total / 1e9:.2f} GB compressed-tensors NVFP4 in {n} shards, "
                                f"largest tensor {largest / 2**20:.1f} MiB")
    bench(build, args.repeat, args.llama_cpp)


def bench(build, repeat: int, llama_cpp: str) -> None:
    """The checkpoint ``build(src)`` writes (returning its model bytes, its
    largest tensor's bytes and a line saying what it is) in a temporary
    folder, converted by both converters (:func:`compare`)."""
    if not os.path.isfile(os.path.join(llama_cpp, "convert_hf_to_gguf.py")):
        raise SystemExit("--llama-cpp (or GRIT_LLAMA_CPP) names no llama.cpp tree with "
                         "convert_hf_to_gguf.py")
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        src = os.path.join(tmp, "src")
        total, largest, what = build(src)
        print(f"checkpoint: {what}; median of {repeat}; {os.cpu_count()} CPUs")
        compare(tmp, src, total, largest, repeat, llama_cpp, load0)


def compare(tmp: str, src: str, total: int, largest: int, repeat: int, llama_cpp: str,
            load0: tuple) -> None:
    """Both converters on checkpoint ``src`` (``total`` model bytes, the
    largest tensor ``largest`` bytes), interleaved, ``repeat`` times each,
    their outputs in ``tmp``: the table of medians, whether the two GGUFs
    hold the same tensors, and the load average since ``load0``."""
    rows: dict[str, list[dict]] = {}
    outs = {m: os.path.join(tmp, m) for m in ("grit", "llama.cpp")}
    for k in range(repeat):                      # interleaved: load drifts alike
        for mode, dst in outs.items():
            if k:
                shutil.rmtree(dst, ignore_errors=True)
            rows.setdefault(mode, []).append(run(mode, src, dst, llama_cpp))
    load1 = os.getloadavg()
    same, n = same_tensors(os.path.join(outs["grit"], "model.gguf"),
                           os.path.join(outs["llama.cpp"], "model.gguf"))
    print(f"{'':10} {'wall s':>7} {'GB/s':>6} {'CPU s':>7} {'RSS MiB':>8} "
          f"{'÷ largest':>9} {'anon MiB':>9} {'÷ largest':>9}")
    for mode, runs in rows.items():
        m = _measure.medians(runs)
        wall, cpu, rss, anon = m["wall"], m["cpu"], m["rss"], m["anon"]
        print(f"{mode:10} {wall:7.2f} {total / wall / 1e9:6.2f} {cpu:7.2f} "
              f"{rss / 2**20:8.0f} {rss / largest:9.2f} {anon / 2**20:9.0f} "
              f"{anon / largest:9.2f}")
    g = _measure.medians(rows["grit"])
    print(f"grit's imports (numpy, gguf-py, grit …): {g['import_cpu']:.2f} CPU s"
          f"{' (and ml_dtypes was imported)' if g['ml_dtypes'] else ''}; "
          f"{total / g['cpu'] / 1e9:.2f} GB/s a core with them, "
          f"{total / (g['cpu'] - g['import_cpu']) / 1e9:.2f} without")
    print(f"the two GGUFs' {n} tensors (name, ggml type, shape, bytes): "
          f"{'identical' if same else 'DIFFER'}")
    print(f"load average (1 min) before {load0[0]:.2f}, after {load1[0]:.2f}")


if __name__ == "__main__":
    main()
