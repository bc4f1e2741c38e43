"""Decode of ggml blocks: grit's fused kernels (grit/_native/ggml.c) beside the
general path and the peers, per ggml type, in one run.

    python bench/bench_ggml.py [--n 16777216] [--repeat 5] [--types Q4_0,Q6_K]
                               [--gguf PATH | --no-gguf] [--json out.json]

Every ggml type grit decodes natively: the zero-copy ones (Q8_0, MXFP4,
NVFP4, Q4_K) and the converted ones (Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q5_K,
Q6_K, Q8_K, TQ2_0).  Two data sets:

  * synthetic: one tensor of --n elements (default 2^24: a 64 MiB float32
    output) of random blocks with finite scales;
  * the GGUF file (--gguf, default the cached gemma-3-270m Q4_K_M when it is
    there): every tensor of each block type in it, decoded one after the
    other (the seconds are the sum over the tensors).

Rows, medians of --repeat calls of the whole set:
  * grit fused 1t / grit fused: the fused kernel on the raw blocks (grit.decode
    of the zero-copy array; grit.ggml.type_kernel(...).decode for a
    converted type), one thread and the default count;
  * grit general: relayout to the canonical planes (zero-copy) or grit.io.gguf's
    conversion (converted) + decode_canonical, native kernels on;
  * gguf-py: gguf.quants.dequantize of the same blocks (it has no Q8_K);
  * C loop: bench/ref_dequant.c's scalar loop (ggml's dequantize_row_*), one
    thread, compiled by this run (cc -O2 -ffp-contract=off);
  * "·r": the fused kernel (one thread) and the C loop writing into outputs
    allocated once, so without the page faults of a fresh output, which on a
    virtual machine cost about as much as the decode itself (13 ms per 64 MiB).
Every row's output is checked against the fused row's: bits for grit general,
values for the peers (NaN = NaN, and ±0 equal: the documented differences).
Ratios are row seconds / fused seconds (the machine is shared and noisy, so
the ratios are what to read); the targets (issue 13) are gguf-py ≥ 5× and the
C loop ≥ 1× the fused kernel per type (fresh outputs, default threads: the
last column).  Peak RSS is the whole process's.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import grit
from grit import ggml, native
from grit.array import GritArray
from grit.codec.decode import decode_canonical
from grit.io import gguf as _gguf
from grit.io.gguf_file import read_gguf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_codec import _median_s  # noqa: E402

GEMMA = "/root/.cache/grit-real-checkpoint/gemma-3-270m-q4_k_m.gguf"

#: ggml type -> ref_dequant.c's loop
C_PEER = {"Q8_0": "ref_dequant_q8_0", "MXFP4": "ref_dequant_mxfp4",
          "NVFP4": "ref_dequant_nvfp4", "Q4_K": "ref_dequant_q4k",
          "Q4_0": "ref_dequant_q4_0", "Q4_1": "ref_dequant_q4_1", "Q5_0": "ref_dequant_q5_0",
          "Q5_1": "ref_dequant_q5_1", "Q2_K": "ref_dequant_q2_k", "Q5_K": "ref_dequant_q5_k",
          "Q6_K": "ref_dequant_q6_k", "Q8_K": "ref_dequant_q8_k", "TQ2_0": "ref_dequant_tq2_0"}

#: byte offsets of the binary16 scale fields, set to finite values in synthetic data
F16_AT = {"Q8_0": (0,), "Q4_K": (0, 2), "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,),
          "Q5_1": (0, 2), "Q2_K": (80, 82), "Q5_K": (0, 2), "Q6_K": (208,), "TQ2_0": (64,)}


def kernel_of(name: str) -> ggml.BlockType:
    return ggml.TYPES[name]


def synthetic_blocks(name: str, n: int, rng) -> np.ndarray:
    """(n / block_elems, block_bytes) random blocks with finite scales."""
    k = kernel_of(name)
    nb = n // k.block_elems
    raw = rng.integers(0, 256, (nb, k.block_bytes), dtype=np.uint8)
    for off in F16_AT.get(name, ()):
        h = (rng.random(nb) * 0.01 + 0.001).astype(np.float16)
        raw[:, off:off + 2] = h.view(np.uint8).reshape(nb, 2)
    if name == "Q8_K":
        raw[:, 0:4] = (rng.random(nb) * 0.01 + 0.001).astype(np.float32).view(
            np.uint8).reshape(nb, 4)
    if name == "MXFP4":                      # E8M0 exponents away from 0xFF
        raw[:, 0] = rng.integers(100, 140, nb)
    if name == "NVFP4":                      # E4M3 scales ggml and GRIT read alike
        raw[:, :4] = rng.integers(0x20, 0x50, (nb, 4))
    return raw


def build_c_peer(tmp: str):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        return None, "no C compiler"
    so = os.path.join(tmp, "ref_dequant.so")
    r = subprocess.run([cc, "-O2", "-ffp-contract=off", "-shared", "-fPIC", "-o", so,
                        os.path.join(HERE, "ref_dequant.c")], capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip()[:80]
    lib = ctypes.CDLL(so)
    for fn in C_PEER.values():
        f = getattr(lib, fn)
        f.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
        f.restype = None
    return lib, None


class Tensor:
    """One tensor's raw blocks (a 1-D uint8 view) and shape."""

    def __init__(self, name: str, raw: np.ndarray, shape: tuple[int, ...]):
        self.name, self.raw, self.shape = name, raw, shape
        self.numel = int(np.prod(shape))
        k = kernel_of(name)
        self.blocks2d = raw.reshape(-1, k.block_bytes)
        if k.zero_copy:
            grit.register_grade(k.grade.canonical)
            self.array = GritArray(k.descriptor(group_axis=len(shape) - 1), shape,
                                   (raw, b"", b"", b""))


def rows_for(name: str, tensors: list[Tensor], lib):
    """label -> (callable returning the outputs, 'bits' | 'values')"""
    import gguf  # noqa: PLC0415
    k = kernel_of(name)
    qt = gguf.GGMLQuantizationType[name]

    def fused(nt):
        def run():
            native.THREADS = nt
            try:
                if k.zero_copy:
                    return [grit.decode(t.array) for t in tensors]
                return [ggml.type_kernel(name, t.shape).decode(t.raw, t.numel)
                        for t in tensors]
            finally:
                native.THREADS = None
        return run

    def general():
        if k.zero_copy:
            return [decode_canonical(grit.canonical(t.array)) for t in tensors]
        return [decode_canonical(_gguf.converted(name, t.blocks2d, t.shape)) for t in tensors]

    def gguf_py():
        with np.errstate(all="ignore"):
            return [gguf.quants.dequantize(t.blocks2d, qt) for t in tensors]

    def c_loop():
        fn = getattr(lib, C_PEER[name])
        outs = []
        for t in tensors:
            out = np.empty(t.numel, dtype=np.float32)
            fn(t.blocks2d.ctypes.data, t.blocks2d.shape[0], out.ctypes.data)
            outs.append(out)
        return outs

    # the kernels alone: into outputs allocated once (no page faults)
    reused = [np.empty(t.numel, dtype=np.float32) for t in tensors]

    def fused_reused():
        for t, out in zip(tensors, reused):
            native.kernels().decode_ggml(k.kernel, t.raw, out, 1)
        return reused

    def c_reused():
        fn = getattr(lib, C_PEER[name])
        for t, out in zip(tensors, reused):
            fn(t.blocks2d.ctypes.data, t.blocks2d.shape[0], out.ctypes.data)
        return reused

    rows = {"grit fused 1t": (fused(1), "bits"), "grit fused": (fused(None), "bits"),
            "grit general": (general, "bits")}
    if name != "Q8_K":                         # gguf-py has no Q8_K dequantiser
        rows["gguf-py"] = (gguf_py, "values")
    if lib is not None:
        rows["C loop"] = (c_loop, "values")
    rows["grit fused 1t, reused out"] = (fused_reused, "bits")
    if lib is not None:
        rows["C loop, reused out"] = (c_reused, "values")
    return rows


def agrees(got, ref, how: str) -> bool:
    for a, b in zip(got, ref):
        a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
        if a.size != b.size:
            return False
        if how == "bits":
            if not (a.view(np.uint32) == b.view(np.uint32)).all():
                return False
        elif not ((a == b) | (np.isnan(a) & np.isnan(b))).all():
            return False
    return True


def bench_set(label: str, name: str, tensors: list[Tensor], lib, repeat: int, results: list):
    rows = rows_for(name, tensors, lib)
    ref = rows["grit fused"][0]()
    times = {}
    for row, (fn, how) in rows.items():
        if not agrees(fn(), ref, how):
            print(f"{label:9} {name:6} {row}: DISAGREES with the fused kernel")
            raise SystemExit(1)
        times[row] = _median_s(fn, repeat)
    del ref
    base = times["grit fused"]
    numel = sum(t.numel for t in tensors)
    rec = {"set": label, "type": name, "tensors": len(tensors), "elements": numel,
           "median_s": times, "ratio_to_fused": {r: t / base for r, t in times.items()}}
    results.append(rec)

    def cell(row):
        return f"{times[row]:8.4f}" if row in times else f"{'n/a':>8}"

    def ratio(row, to="grit fused"):
        return f"{times[row] / times[to]:7.1f}x" if row in times else f"{'n/a':>8}"

    ok_py = "n/a" if "gguf-py" not in times else ("yes" if times["gguf-py"] >= 5 * base else "NO")
    ok_c = "n/a" if "C loop" not in times else ("yes" if times["C loop"] >= base else "NO")
    print(f"{label:9} {name:6} {len(tensors):3} {numel / 1e6:6.1f} "
          f"{cell('grit fused 1t')} {cell('grit fused')} {cell('grit general')} "
          f"{cell('gguf-py')} {cell('C loop')} {cell('grit fused 1t, reused out')} "
          f"{cell('C loop, reused out')} {ratio('gguf-py')} {ratio('C loop')} "
          f"{ratio('C loop', 'grit fused 1t')} "
          f"{ratio('C loop, reused out', 'grit fused 1t, reused out')} "
          f"{ratio('grit general')}  {ok_py:>3}/{ok_c}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--types", help="comma-separated ggml types (default: all)")
    ap.add_argument("--gguf", default=GEMMA if os.path.exists(GEMMA) else None)
    ap.add_argument("--no-gguf", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if native.kernels() is None:
        print("grit._kernels is not built (or GRIT_NATIVE=0): nothing to measure")
        return 1
    names = [n for n, t in ggml.TYPES.items() if t.kernel is not None]
    if args.types:
        names = [n for n in args.types.split(",") if n in names]
    rng = np.random.default_rng(0)
    results: list = []
    with tempfile.TemporaryDirectory() as tmp:
        lib, why = build_c_peer(tmp)
        print(f"{native._CPUS} CPUs, SIMD {native.kernels().simd()}, repeat {args.repeat}; "
              f"C loop: {why or 'built'}")
        print(f"{'set':9} {'type':6} {'#t':>3} {'Mel':>6} {'fused1t':>8} {'fused':>8} "
              f"{'general':>8} {'gguf-py':>8} {'C loop':>8} {'fus1t·r':>8} {'C·r':>8} "
              f"{'py/fus':>8} {'C/fus':>8} {'C/fus1t':>8} {'C·r/f·r':>8} {'gen/fus':>8}"
              f"  ≥5×/≥1×")
        n = args.n
        for name in names:
            m = n - n % 4096                    # every block size divides 4096
            raw = synthetic_blocks(name, m, rng).reshape(-1)
            bench_set("synthetic", name, [Tensor(name, raw, (m // 4096, 4096))], lib,
                      args.repeat, results)
            del raw
        if args.gguf and not args.no_gguf:
            f = read_gguf(args.gguf)
            by_type: dict[str, list[Tensor]] = {}
            for t in f.tensors:
                if t.ggml_type in names:
                    by_type.setdefault(t.ggml_type, []).append(
                        Tensor(t.ggml_type, f.data(t), t.shape))
            print(f"-- {os.path.basename(args.gguf)}: "
                  + ", ".join(f"{k} × {len(v)}" for k, v in by_type.items()))
            for name, ts in by_type.items():
                bench_set("file", name, ts, lib, args.repeat, results)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss:.0f} MiB (the whole run: outputs of every row and gguf-py's "
          f"temporaries)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"results": results, "peak_rss_mib": rss}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
