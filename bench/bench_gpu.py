"""GPU decode throughput of grit.interop.triton as a fraction of the device's
memory bandwidth, against torchao's MX / NVFP4 dequantize in the same run.

    python bench/bench_gpu.py [--rows 8192] [--cols 8192] [--rounds 20] [--peak-gbs N] [--json out.json]
    python bench/bench_gpu.py --interpret --rows 64 --cols 1024 --rounds 1   # smoke run, CPU

For each kernel: the median time of one decode (CUDA events), the bytes it
moves (packed bytes read + 4 bytes per element written; torchao's rows:
packed read + 2 bytes per bfloat16 element written) per second, and that
divided by the peak bandwidth — from --peak-gbs, else from the device
properties (2 × memory clock × bus width).  Every GRIT row is also checked
against grit.decode on the CPU (bit for bit).  Without a CUDA device (or
without triton) it prints why it skips and exits 0.  ``--interpret`` runs
the same code on the CPU under Triton's interpreter (wall-clock timing, no
bandwidth fraction): a check that the bench itself works, not a measurement.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys


def _skip(why: str) -> None:
    print(f"skip: {why} -- GPU decode throughput cannot be measured here")
    sys.exit(0)


def _peak_gbs(torch, given: float | None) -> float | None:
    if given:
        return given
    p = torch.cuda.get_device_properties(0)
    clock_khz = getattr(p, "memory_clock_rate", None)
    bus_bits = getattr(p, "memory_bus_width", None)
    if not clock_khz or not bus_bits:
        return None
    return 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9


def _median_ms(torch, fn, rounds: int, cuda: bool = True) -> float:
    fn()
    if not cuda:
        import time
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--peak-gbs", type=float)
    ap.add_argument("--json")
    ap.add_argument("--interpret", action="store_true")
    a = ap.parse_args()
    if a.interpret:
        import os
        os.environ["TRITON_INTERPRET"] = "1"        # before the kernels are decorated
    try:
        import torch
    except ImportError:
        _skip("torch is not installed")
    if not a.interpret and not torch.cuda.is_available():
        _skip("no CUDA device")
    try:
        import grit.interop.triton as gtr
    except ImportError as e:
        _skip(f"triton is not importable ({e})")
    import numpy as np

    import grit
    from grit.ggml import CONVERTED, ZERO_COPY
    from grit.io import gguf as G

    cuda = not a.interpret
    dev = torch.device("cuda" if cuda else "cpu")
    peak = _peak_gbs(torch, a.peak_gbs) if cuda else None
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.rows, a.cols)).astype(np.float32)
    n = x.size
    rows: dict[str, dict] = {}

    def record(name, fn, moved, check=None):
        ms = _median_ms(torch, fn, a.rounds, cuda)
        gbs = moved / (ms / 1e3) / 1e9
        r = {"median_ms": ms, "GB_per_s": gbs,
             "fraction_of_peak": gbs / peak if peak else None}
        if check is not None:
            r["bit_exact"] = check
        rows[name] = r

    for gname in ("GRADE_MXFP4", "GRADE_NVF4", "GRADE_Q4KS", "GRADE_I8S24"):
        arr = grit.encode(x, getattr(grit, gname))
        pl = [t.to(dev) for t in grit.interop.torch.planes(arr)]
        fn = lambda arr=arr, pl=pl: gtr.decode_planes(arr.descriptor, arr.shape, pl)  # noqa: E731
        ok = bool(np.array_equal(fn().cpu().numpy().view(np.uint32),
                                 grit.decode(arr).view(np.uint32)))
        record(f"grit {gname}", fn, arr.nbytes + 4 * n, ok)

    for name in ("Q8_0", "MXFP4", "NVFP4", "Q4_K", "Q5_K", "Q6_K", "Q2_K"):
        t = ZERO_COPY.get(name) or CONVERTED[name]
        if a.cols % t.block_elems:
            continue
        nb = n // t.block_elems
        b = rng.integers(0, 256, (nb, t.block_bytes), dtype=np.uint8)
        shape = (a.rows, a.cols)
        bd = torch.from_numpy(b.reshape(-1)).to(dev)
        fn = lambda name=name, bd=bd, shape=shape: gtr.decode_blocks(name, bd, shape)  # noqa: E731
        ref = grit.decode(G.converted(name, b.reshape(-1) if name in ZERO_COPY else b, shape))
        ok = bool(np.array_equal(fn().cpu().numpy().view(np.uint32), ref.view(np.uint32)))
        record(f"grit ggml {name}", fn, b.size + 4 * n, ok)

    try:
        from torchao.prototype.mx_formats.mx_tensor import MXTensor
        from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor
        xt = torch.from_numpy(x).to(dev).to(torch.bfloat16)
        mx = MXTensor.to_mx(xt, torch.float4_e2m1fn_x2, 32)
        record("torchao MX dequantize bf16", lambda: mx.dequantize(torch.bfloat16),
               mx.qdata.numel() + mx.scale.numel() + 2 * n)
        nv = NVFP4Tensor.to_nvfp4(xt)
        record("torchao NVFP4 dequantize bf16", lambda: nv.dequantize(torch.bfloat16),
               nv.qdata.numel() + nv.scale.numel() + 2 * n)
    except ImportError as e:
        print(f"torchao rows skipped: {e}")

    where = torch.cuda.get_device_name(0) if cuda else "CPU, Triton interpreter (not a measurement)"
    print(f"{where}, peak {peak or float('nan'):.0f} GB/s, "
          f"{a.rows}x{a.cols}, median of {a.rounds}")
    print(f"{'kernel':32} {'ms':>8} {'GB/s':>8} {'of peak':>8} {'exact':>6}")
    for name, r in rows.items():
        frac = r["fraction_of_peak"]
        print(f"{name:32} {r['median_ms']:8.3f} {r['GB_per_s']:8.1f} "
              f"{(frac if frac is not None else float('nan')):8.1%} "
              f"{str(r.get('bit_exact', '')):>6}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
