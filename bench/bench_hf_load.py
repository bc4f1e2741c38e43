"""Memory of a GRIT checkpoint loaded by transformers: peak RSS of
from_pretrained and of one forward pass, against the checkpoint's packed
size, the float32 model's size, and the bound "packed + one decoded layer".

    python bench/bench_hf_load.py [--hidden 1024] [--inter 4096] [--layers 4] [--grade GRADE_MXFP4]

The model is a random Llama (no download), written once with
grit.interop.transformers.save_pretrained; the load and the forward run in
a fresh process, whose RSS before loading (torch and transformers imported)
is the baseline; the peak (VmHWM) is reset there (/proc/self/clear_refs, Linux)
so that it measures the load and the forward only.  The same is measured for the float32 checkpoint
(transformers' own save_pretrained) as the peer.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile


def _status_mib(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _rss_mib() -> float:
    return _status_mib("VmRSS")


def _reset_peak() -> None:
    """Reset the kernel's peak RSS (VmHWM) to the current RSS (Linux)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak_mib() -> float:
    return _status_mib("VmHWM")


def _child(path: str) -> None:
    import torch
    import transformers

    import grit.interop.transformers  # noqa: F401  (registers quant_method "grit")
    _reset_peak()
    base = _rss_mib()
    m = transformers.AutoModelForCausalLM.from_pretrained(path)
    loaded = _rss_mib()
    peak_load = _peak_mib()
    with torch.no_grad():
        m(torch.zeros(1, 8, dtype=torch.long))
    peak_fwd = _peak_mib()
    print(json.dumps({"base": base, "loaded": loaded, "peak_load": peak_load,
                      "peak_forward": peak_fwd}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--inter", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--grade", default="GRADE_MXFP4")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(a.child)
        return
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"skip: {e}")
        return
    import grit
    import grit.interop.transformers as gtf

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=1024, hidden_size=a.hidden,
                                   intermediate_size=a.inter, num_hidden_layers=a.layers,
                                   num_attention_heads=8, num_key_value_heads=8,
                                   max_position_embeddings=128)
    model = transformers.LlamaForCausalLM(cfg).eval()
    with tempfile.TemporaryDirectory() as d:
        gpath, fpath = os.path.join(d, "grit"), os.path.join(d, "f32")
        converted = gtf.save_pretrained(model, gpath, getattr(grit, a.grade))
        model.save_pretrained(fpath)
        file_mib = os.path.getsize(os.path.join(gpath, gtf.WEIGHTS_NAME)) / 2**20
        f32_mib = os.path.getsize(os.path.join(fpath, "model.safetensors")) / 2**20
        quantised = sum(model.get_submodule(n).weight.numel() for n in converted)
        largest = max(model.get_submodule(n).weight.numel() for n in converted) * 4 / 2**20
        packed = sum(a.nbytes for k, a in grit.load(os.path.join(gpath, gtf.WEIGHTS_NAME)).items()
                     if isinstance(a, grit.GritArray)) / 2**20
        rows = {}
        for name, p in (("GRIT " + a.grade, gpath), ("float32 (transformers)", fpath)):
            r = subprocess.run([sys.executable, __file__, "--child", p], capture_output=True,
                               text=True)
            if r.returncode != 0:
                print(f"{name}: failed: {r.stderr.strip().splitlines()[-1]}")
                continue
            rows[name] = json.loads(r.stdout.strip().splitlines()[-1])
    del model
    print(f"Llama hidden={a.hidden} intermediate={a.inter} layers={a.layers}: "
          f"{quantised / 1e6:.1f} M quantised weights in {len(converted)} linears")
    print(f"GRIT file {file_mib:.1f} MiB (packed planes {packed:.1f} MiB); float32 file "
          f"{f32_mib:.1f} MiB; largest decoded layer {largest:.1f} MiB")
    print(f"{'checkpoint':28} {'base':>8} {'+loaded':>8} {'+peak load':>11} {'+peak fwd':>10}  MiB")
    for name, r in rows.items():
        print(f"{name:28} {r['base']:8.1f} {r['loaded'] - r['base']:8.1f} "
              f"{r['peak_load'] - r['base']:11.1f} {r['peak_forward'] - r['base']:10.1f}")
    print("bound for GRIT: file size (packed + unquantised tensors) + one decoded layer = "
          f"{file_mib + largest:.1f} MiB above base, plus the forward's activations and "
          "from_pretrained's own overhead (the float32 row's +loaded: its weights stay in "
          "the untouched memory map until the forward reads them)")


if __name__ == "__main__":
    main()
