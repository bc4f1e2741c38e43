"""grit.decode of ggml blocks loaded zero-copy from GGUF: the fused kernels
(grit/_native/ggml.c) beside the general path and the peers, in one run.

    python bench/bench_ggml.py [--n 16777216] [--repeat 5] [--json out.json]

Per ggml type, on one tensor of --n elements (default 2^24: a 64 MiB float32
output), medians of --repeat calls:
  * grit fused: grit.decode of the zero-copy array (1 thread, and the default count);
  * grit general: relayout to the canonical planes + decode_canonical (native kernels on);
  * gguf-py: gguf.quants.dequantize of the same blocks;
  * C loop: bench/ref_dequant.c's scalar loop (MXFP4 and Q4_K, the types it has),
    compiled by this run (cc -O2).
Every row's output is checked against the fused row's (bits; gguf-py's and the C
loop's apart from NaN and the sign of zero).  Ratios are row seconds / fused seconds:
the machine is shared and noisy, so the ratios are what to read.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np

import grit
from grit import native
from grit.array import GritArray
from grit.codec.decode import decode_canonical
from grit.io import gguf as _gguf  # noqa: F401  (registers the zero-copy layouts)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_codec import _ggml_blocks, _median_s  # noqa: E402
from bench_native import _build_c_peer, _c_dequant, _quiet  # noqa: E402

C_PEER = {"MXFP4": "ref_dequant_mxfp4", "Q4_K": "ref_dequant_q4k"}


def _array(name: str, raw: np.ndarray, n: int) -> GritArray:
    k = native.GGML_KERNELS[name]
    grit.register_grade(k.grade.canonical)
    shape = (n // 4096, 4096)
    return GritArray(k.descriptor(group_axis=1), shape, (raw.reshape(-1), b"", b"", b""))


def _same(a: np.ndarray, b: np.ndarray, loose: bool) -> bool:
    a, b = a.reshape(-1), b.reshape(-1)
    if loose:
        ok = (a == b) | (np.isnan(a) & np.isnan(b))
        return bool(ok.all())
    return bool((a.view(np.uint32) == b.view(np.uint32)).all())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import gguf  # noqa: PLC0415

    rng = np.random.default_rng(0)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        lib, why = _build_c_peer(tmp)
        print(f"n = {args.n} elements per tensor, repeat {args.repeat}, "
              f"{native._CPUS} CPUs; C loop: {why or 'built'}")
        print(f"{'type':6} {'row':30} {'median s':>9} {'x fused-default':>16}")
        for name in native.GGML_KERNELS:
            qt, raw = _ggml_blocks(name, args.n, rng)
            a = _array(name, raw, args.n)
            ref = grit.decode(a)
            rows = {}

            def fused(nt):
                def run():
                    native.THREADS = nt
                    try:
                        return grit.decode(a)
                    finally:
                        native.THREADS = None
                return run

            rows["grit fused 1t"] = (fused(1), False)
            rows["grit fused default threads"] = (fused(None), False)
            rows["grit general (relayout+decode)"] = (
                lambda: decode_canonical(grit.canonical(a)), False)
            rows["gguf-py dequantize"] = (_quiet(lambda: gguf.quants.dequantize(raw, qt)), True)
            if lib is not None and name in C_PEER:
                rows["C loop (ref_dequant.c)"] = (
                    _c_dequant(getattr(lib, C_PEER[name]), raw,
                               native.GGML_KERNELS[name].block_elems), True)
            times = {}
            for label, (fn, loose) in rows.items():
                if not _same(fn(), ref, loose):
                    print(f"{name:6} {label:28} DISAGREES with the fused kernel")
                    return 1
                times[label] = _median_s(fn, args.repeat)
            base = times["grit fused default threads"]
            for label, t in times.items():
                print(f"{name:6} {label:30} {t:9.4f} {t / base:14.2f}x")
                results.append({"type": name, "row": label, "median_s": t,
                                "ratio_to_fused": t / base})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
