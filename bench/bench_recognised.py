"""grit.load + decode of GPTQ and AWQ checkpoints (converted into one GRIT array
per weight), beside a numpy peer of the same dequantisation, and ``grit
explain FILE:NAME`` on a real GGUF beside opening it with gguf-py, in one run.

    python bench/bench_recognised.py [--out 4096] [--in 4096] [--layers 4] [--repeat 5]

A synthetic checkpoint of --layers q_proj-shaped weights (4-bit, group 128) is
written per convention with safetensors.numpy, packed the way AutoGPTQ and
AutoAWQ pack.  Each row runs in a fresh ``python -c`` child (so its peak RSS,
VmHWM, is its own) and reports the median of --repeat calls:

  * grit: ``grit.load(path)`` then ``grit.decode`` of every weight;
  * peer: ``safetensors.numpy.load_file`` then the peer's dequant formula
    (shift-and-mask unpack, (q − z)·s in float32) in numpy, vectorised.

Every grit output is checked against the peer's, bit for bit.  With the gemma
GGUF cached (tests/test_real_checkpoint.py's path), ``grit explain A B`` of two
of its tensors is timed beside ``gguf.GGUFReader(path)`` alone.  The machine is
shared and noisy: read the ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GEMMA = "/root/.cache/grit-real-checkpoint/gemma-3-270m-q4_k_m.gguf"
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
GROUP = 128


def _pack_rows(m: np.ndarray) -> np.ndarray:
    """8 nibbles per int32 down axis 0 (GPTQ qweight)."""
    m = m.astype(np.uint32).reshape(m.shape[0] // 8, 8, m.shape[1])
    return np.bitwise_or.reduce(m << (np.arange(8, dtype=np.uint32) * 4)[None, :, None],
                                axis=1).view(np.int32)


def _pack_cols(m: np.ndarray, order=tuple(range(8))) -> np.ndarray:
    """8 nibbles per int32 along axis 1, nibble i = column 8c + order[i]."""
    m = m.astype(np.uint32).reshape(m.shape[0], m.shape[1] // 8, 8)[:, :, list(order)]
    return np.bitwise_or.reduce(m << (np.arange(8, dtype=np.uint32) * 4), axis=2).view(np.int32)


def make(root: str, kind: str, out_f: int, in_f: int, layers: int) -> str:
    from safetensors.numpy import save_file
    rng = np.random.default_rng(1)
    t, n_g = {}, in_f // GROUP
    for i in range(layers):
        p = f"model.layers.{i}.self_attn.q_proj"
        q = rng.integers(0, 16, (in_f, out_f))
        z = rng.integers(1, 16, (n_g, out_f))
        t[f"{p}.scales"] = rng.uniform(0.001, 0.05, (n_g, out_f)).astype(np.float16)
        if kind == "gptq":
            t[f"{p}.qweight"] = _pack_rows(q)
            t[f"{p}.qzeros"] = _pack_cols(z - 1)
            t[f"{p}.g_idx"] = (np.arange(in_f) // GROUP).astype(np.int32)
            cfg = {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": False}
        else:
            t[f"{p}.qweight"] = _pack_cols(q, AWQ_ORDER)
            t[f"{p}.qzeros"] = _pack_cols(z, AWQ_ORDER)
            cfg = {"quant_method": "awq", "bits": 4, "group_size": GROUP, "version": "gemm"}
    d = os.path.join(root, kind)
    os.makedirs(d, exist_ok=True)
    save_file(t, os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"quantization_config": cfg}, f)
    return os.path.join(d, "model.safetensors")


def peer(path: str, kind: str) -> dict:
    """The peers' dequantisation in numpy: unpack nibbles, w = (q − z)·s."""
    from safetensors.numpy import load_file
    t = load_file(path)
    out = {}
    shifts = np.arange(8, dtype=np.uint32) * 4
    for p in sorted({k.rsplit(".", 1)[0] for k in t}):
        qw, qz, s = (t[f"{p}.{x}"].view(np.uint32) if x != "scales" else t[f"{p}.{x}"]
                     for x in ("qweight", "qzeros", "scales"))
        z = ((qz[:, :, None] >> shifts) & 15).reshape(qz.shape[0], -1)
        if kind == "gptq":
            q = ((qw[:, None, :] >> shifts[None, :, None]) & 15).reshape(-1, qw.shape[1])
            z = z + 1
        else:
            rev = np.argsort(AWQ_ORDER)
            q = ((qw[:, :, None] >> shifts) & 15)[:, :, rev].reshape(qw.shape[0], -1)
            z = z.reshape(z.shape[0], -1, 8)[:, :, rev].reshape(z.shape[0], -1)
        g = np.arange(q.shape[0]) // GROUP
        w = s.astype(np.float32)[g] * (q.astype(np.float32) - z[g].astype(np.float32))
        out[f"{p}.weight"] = w.T
    return out


def grit_run(path: str) -> dict:
    import grit
    t = grit.load(path)
    return {n: np.asarray(grit.decode(a)) for n, a in t.items() if isinstance(a, grit.GritArray)}


CHILD = r"""
import sys, time, json, statistics
sys.path.insert(0, {here!r}); sys.path.insert(0, {root!r})
import bench_recognised as b
mode, path, kind, repeat = {mode!r}, {path!r}, {kind!r}, {repeat}
def hwm():
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("VmHWM:"))
fn = {{"grit": lambda: b.grit_run(path), "peer": lambda: b.peer(path, kind),
      "explain": lambda: b.explain_run(path), "reader": lambda: b.reader_run(path)}}[mode]
ts = []
for _ in range(repeat):
    t = time.perf_counter(); r = fn(); ts.append(time.perf_counter() - t); del r
print(json.dumps({{"median_s": statistics.median(ts), "hwm_kb": hwm()}}))
"""


def explain_run(path: str):
    from click.testing import CliRunner
    from grit.cli import main
    a, b = f"{path}:blk.0.attn_q.weight", f"{path}:blk.0.ffn_down.weight"
    return CliRunner().invoke(main, ["explain", a, b]).exit_code


def reader_run(path: str):
    import gguf
    return len(gguf.GGUFReader(path).tensors)


def child(mode: str, path: str, kind: str, repeat: int) -> dict:
    code = CHILD.format(here=HERE, root=ROOT, mode=mode, path=path, kind=kind, repeat=repeat)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=int, default=4096)
    ap.add_argument("--in", dest="in_f", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        for kind in ("gptq", "awq"):
            path = make(root, kind, args.out, args.in_f, args.layers)
            got, want = grit_run(path), peer(path, kind)
            assert sorted(got) == sorted(want)
            same = all(np.array_equal(got[n].view(np.uint32), want[n].view(np.uint32))
                       for n in got)
            rows = {m: child(m, path, kind, args.repeat) for m in ("grit", "peer")}
            mb = os.path.getsize(path) / 2**20
            print(f"{kind}: {args.layers} × [{args.out}, {args.in_f}] 4-bit g{GROUP}, "
                  f"{mb:.1f} MiB; grit == peer bit for bit: {same}")
            for m, r in rows.items():
                print(f"  {m:5} load + decode  {r['median_s'] * 1e3:8.1f} ms  "
                      f"peak RSS {r['hwm_kb'] / 1024:7.1f} MiB  "
                      f"ratio {r['median_s'] / rows['peer']['median_s']:.2f}")
    if os.path.exists(GEMMA):
        rows = {m: child(m, GEMMA, "", args.repeat) for m in ("explain", "reader")}
        print("gemma-3-270m Q4_K_M: grit explain A B vs gguf.GGUFReader(path)")
        for m, r in rows.items():
            print(f"  {m:7} {r['median_s']:6.2f} s  peak RSS {r['hwm_kb'] / 1024:7.1f} MiB  "
                  f"ratio {r['median_s'] / rows['reader']['median_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
