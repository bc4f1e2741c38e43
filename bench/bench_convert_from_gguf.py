"""grit convert with a GGUF file as SRC: time and memory against the largest
tensor.

A synthetic Llama GGUF is written under ``$TMPDIR`` by gguf-py's GGUFWriter,
one tensor at a time (``write_tensor_data``): the token embedding F16 (or
BF16, ``--embd BF16``), the
attention projections and ``ffn_gate`` / ``ffn_up`` / ``output`` Q8_0,
``ffn_down`` MXFP4, the norms F32 — random bytes, with every Q8_0 block
scale a finite binary16 and no MXFP4 scale byte 0xFF (a conversion moves
bytes, so their values do not matter).  With ``--split N`` it is also
written as gguf-split's shards of at most N tensors each (the split KV
entries as gguf-py's writer puts them), and those are converted instead.
Then, each in a fresh process, median of ``--repeat``:

* ``convert``: ``grit.convert.convert(src, dst, --to)`` (check, write, read
  back and prove);
* ``verify`` (with ``--verify``): ``grit.convert.verify(src, dst)`` of that
  output.

Printed per step: wall time, GB/s over the GGUF's bytes, CPU time (user +
system, all threads), peak RSS (``VmHWM``) and peak anonymous RSS
(``RssAnon`` sampled every 5 ms) against the largest tensor, and the load
average before and after (the machine may be shared).

    python bench/bench_convert_from_gguf.py --size-gb 1.5 --repeat 3
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import _measure  # bench/: the child's measurements

_CHILD = _measure.HEAD + r"""
mode, src, dst, to = sys.argv[1:5]
from grit.convert import convert, verify
if mode == "convert":
    convert(src, dst, to)
else:
    assert verify(src, dst).ok
""" + _measure.TAIL


def _q8_0(rng, rows: int, cols: int) -> np.ndarray:
    """Random Q8_0 blocks (34 bytes: a binary16 scale, 32 int8 codes), the
    scale finite and non-negative."""
    b = rng.integers(0, 256, (rows * cols // 32, 34), np.uint8)
    d = b[:, :2].copy().view("<u2") & np.uint16(0x7BFF)
    b[:, :2] = d.view(np.uint8).reshape(-1, 2)
    return b.reshape(rows, -1)


def _mxfp4(rng, rows: int, cols: int) -> np.ndarray:
    """Random MXFP4 blocks (17 bytes: an E8M0 scale other than 0xFF, 16
    bytes of E2M1 codes)."""
    b = rng.integers(0, 256, (rows * cols // 32, 17), np.uint8)
    b[:, 0] = rng.integers(0, 255, b.shape[0], np.uint8)
    return b.reshape(rows, -1)


def tensors(layers: int, hidden: int, ffn: int, vocab: int, embd: str = "F16"):
    """(name, ggml type, numpy shape) of the synthetic Llama, in file order."""
    out = [("token_embd.weight", embd, (vocab, hidden))]
    for i in range(layers):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", "F32", (hidden,))]
        out += [(b + f"attn_{p}.weight", "Q8_0", (hidden, hidden))
                for p in ("q", "k", "v", "output")]
        out += [(b + "ffn_norm.weight", "F32", (hidden,)),
                (b + "ffn_gate.weight", "Q8_0", (ffn, hidden)),
                (b + "ffn_up.weight", "Q8_0", (ffn, hidden)),
                (b + "ffn_down.weight", "MXFP4", (hidden, ffn))]
    out += [("output_norm.weight", "F32", (hidden,)), ("output.weight", "Q8_0", (vocab, hidden))]
    return out


def nbytes(ty: str, shape) -> int:
    n = int(np.prod(shape))
    return {"F16": 2 * n, "BF16": 2 * n, "F32": 4 * n, "Q8_0": n // 32 * 34,
            "MXFP4": n // 32 * 17}[ty]


def write_gguf(path: str, layers: int, hidden: int, ffn: int, vocab: int,
               split_max_tensors: int = 0, embd: str = "F16") -> None:
    """The synthetic GGUF (or its shards: ``path``'s name with gguf-split's
    ``-0000i-of-0000n`` before ``.gguf``), one tensor in memory at a time."""
    import gguf
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(path, "llama", split_max_tensors=split_max_tensors)
    for add, v in ((w.add_block_count, layers), (w.add_context_length, 4096),
                   (w.add_embedding_length, hidden), (w.add_feed_forward_length, ffn),
                   (w.add_head_count, 32), (w.add_head_count_kv, 8)):
        add(v)
    w.add_layer_norm_rms_eps(1e-5)
    spec = tensors(layers, hidden, ffn, vocab, embd)
    for name, ty, shape in spec:
        q = gguf.GGMLQuantizationType[ty]
        if ty == "BF16":
            w.add_tensor_info(name, shape, np.dtype(np.uint16), nbytes(ty, shape), raw_dtype=q)
        elif ty in ("Q8_0", "MXFP4"):
            w.add_tensor_info(name, (shape[0], nbytes(ty, shape) // shape[0]), np.dtype(np.uint8),
                              nbytes(ty, shape), raw_dtype=q)
        else:
            dt = np.dtype(np.float16 if ty == "F16" else np.float32)
            w.add_tensor_info(name, shape, dt, nbytes(ty, shape))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, ty, shape in spec:
        if ty == "Q8_0":
            x = _q8_0(rng, *shape)
        elif ty == "MXFP4":
            x = _mxfp4(rng, *shape)
        elif ty == "BF16":      # (the high halves of binary32 values: no NaN)
            x = (rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16
                 ).astype(np.uint16)
        else:
            x = rng.standard_normal(shape).astype(np.float16 if ty == "F16" else np.float32)
        w.write_tensor_data(x)
        del x
    w.close()


def _child(args: list[str]) -> dict:
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, here]))
    p = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True,
                       env=env, cwd=root)
    if p.returncode != 0:
        raise SystemExit(f"child {args[0]} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=1.5,
                    help="the GGUF's size: layers are added until it is reached")
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=14336)
    ap.add_argument("--vocab", type=int, default=16384)
    ap.add_argument("--to", default="compressed-tensors")
    ap.add_argument("--embd", default="F16", choices=("F16", "BF16"),
                    help="the token embedding's type")
    ap.add_argument("--split", type=int, default=0, metavar="N",
                    help="convert gguf-split shards of at most N tensors each")
    ap.add_argument("--verify", action="store_true", help="also time grit verify")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    h, f, v = a.hidden, a.ffn, a.vocab
    fixed = sum(nbytes(t, s) for _, t, s in tensors(0, h, f, v, a.embd))
    per = sum(nbytes(t, s) for _, t, s in tensors(1, h, f, v, a.embd)) - fixed
    layers = max(1, round((a.size_gb * 1e9 - fixed) / per))
    spec = tensors(layers, h, f, v, a.embd)
    total = sum(nbytes(t, s) for _, t, s in spec)
    largest = max(nbytes(t, s) for _, t, s in spec)
    tmp = tempfile.mkdtemp(prefix="bench-from-gguf-")
    try:
        path = os.path.join(tmp, "model.gguf")
        write_gguf(path, layers, h, f, v, a.split, a.embd)
        src = path if not a.split else sorted(
            os.path.join(tmp, n) for n in os.listdir(tmp) if n.endswith(".gguf"))[0]
        print(f"{layers} layers, {len(spec)} tensors, {total / 1e9:.2f} GB"
              f"{f' in {len(os.listdir(tmp))} shards' if a.split else ''}, largest tensor "
              f"{largest / 2**20:.0f} MiB; --to {a.to}; load average {os.getloadavg()[0]:.2f}")
        steps = ["convert"] + (["verify"] if a.verify else [])
        runs: dict[str, list[dict]] = {s: [] for s in steps}
        for _ in range(a.repeat):
            dst = os.path.join(tmp, "out")
            shutil.rmtree(dst, ignore_errors=True)
            for s in steps:
                runs[s].append(_child([s, src, dst, a.to]))
        for s in steps:
            m = _measure.medians(runs[s])
            print(f"{s:8s} {m['wall']:6.2f} s  {total / 1e9 / m['wall']:5.2f} GB/s  "
                  f"{m['cpu']:6.2f} CPU s  peak RSS {m['rss'] / 2**20:6.0f} MiB "
                  f"({m['rss'] / largest:4.2f}x largest)  anon {m['anon'] / 2**20:6.0f} MiB "
                  f"({m['anon'] / largest:4.2f}x)")
        print(f"load average after {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
