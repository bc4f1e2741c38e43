"""CPU decode into torch: grit.interop.torch.decode vs grit.decode +
torch.from_numpy vs torchao's MX / NVFP4 dequantize, same run, medians,
ratios, and each case's peak RSS (every case runs in its own process).

    python bench/bench_torch.py [--rows 4096] [--cols 4096] [--rounds 7] [--json out.json]

The GRIT cases decode GRADE_MXFP4 / GRADE_NVF4 arrays of the same values
that torchao quantises with MXTensor.to_mx(float4_e2m1fn_x2, 32) and
NVFP4Tensor.to_nvfp4; "agree" counts the elements whose float32 decode
differs between the two (MXFP4 with FLOOR scaling is the same rule).
torchao is optional (the [bench] extra): without it its rows say so.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CASES = ("grit.decode -> from_numpy (f32)", "gt.decode f32", "gt.decode bf16",
         "grit.decode + from_numpy + .to(bf16)", "torchao MX dequantize bf16",
         "grit NVF4 gt.decode bf16", "torchao NVFP4 dequantize bf16")


def _values(rows: int, cols: int):
    import numpy as np
    return np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)


def _case(name: str, rows: int, cols: int, rounds: int) -> dict:
    import numpy as np
    import torch
    import grit
    import grit.interop.torch as gt

    torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
    x = _values(rows, cols)
    if name.startswith("torchao"):
        try:
            from torchao.prototype.mx_formats.mx_tensor import MXTensor
            from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor
        except ImportError as e:
            return {"skipped": f"torchao not importable: {e}"}
        xt = torch.from_numpy(x)
        if "MX" in name:
            q = MXTensor.to_mx(xt, torch.float4_e2m1fn_x2, 32)
            packed = q.qdata.numel() + q.scale.numel()
        else:
            q = NVFP4Tensor.to_nvfp4(xt)
            packed = q.qdata.numel() + q.scale.numel() + 4
        fn = lambda: q.dequantize(torch.bfloat16)            # noqa: E731
        out_bytes = 2
    else:
        grade = grit.GRADE_NVF4 if "NVF4" in name else grit.GRADE_MXFP4
        a = grit.encode(x, grade)
        packed = a.nbytes
        if name.startswith("grit.decode -> from_numpy"):
            fn = lambda: torch.from_numpy(grit.decode(a))    # noqa: E731
            out_bytes = 4
        elif name == "gt.decode f32":
            fn = lambda: gt.decode(a)                        # noqa: E731
            out_bytes = 4
        elif name.startswith("grit.decode + from_numpy"):
            fn = lambda: torch.from_numpy(grit.decode(a)).to(torch.bfloat16)  # noqa: E731
            out_bytes = 2
        else:
            fn = lambda: gt.decode(a, torch.bfloat16)        # noqa: E731
            out_bytes = 2
    fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    n = rows * cols
    res = {"median_ms": med * 1e3, "elements_per_s": n / med,
           "GB_per_s": (packed + out_bytes * n) / med / 1e9, "packed_bytes": packed,
           "peak_rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if name == "torchao MX dequantize bf16":
        ref = grit.decode(grit.encode(x, grit.GRADE_MXFP4))
        theirs = q.dequantize(torch.float32).numpy()
        res["differ_from_grit_mxfp4"] = int(np.count_nonzero(
            ref.view(np.uint32) != theirs.view(np.uint32)))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.case:
        print(json.dumps(_case(a.case, a.rows, a.cols, a.rounds)))
        return
    try:
        import torch  # noqa: F401
    except ImportError:
        print("skip: torch is not installed (pip install 'grit-tensor[torch]')")
        return
    out = {}
    for name in CASES:
        r = subprocess.run([sys.executable, __file__, "--case", name, "--rows", str(a.rows),
                            "--cols", str(a.cols), "--rounds", str(a.rounds)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            out[name] = {"skipped": r.stderr.strip().splitlines()[-1] if r.stderr else "failed"}
            continue
        out[name] = json.loads(r.stdout.strip().splitlines()[-1])
    base = out.get("grit.decode + from_numpy + .to(bf16)", {}).get("median_ms")
    print(f"{a.rows}x{a.cols} float32 values, CPU, {os.cpu_count()} CPUs, median of "
          f"{a.rounds}")
    print(f"{'case':40} {'median ms':>10} {'GB/s':>7} {'vs base':>8} {'peak RSS MiB':>13}")
    for name, r in out.items():
        if "skipped" in r:
            print(f"{name:40} skipped: {r['skipped']}")
            continue
        ratio = r["median_ms"] / base if base else float("nan")
        print(f"{name:40} {r['median_ms']:10.2f} {r['GB_per_s']:7.2f} {ratio:8.2f} "
              f"{r['peak_rss_MiB']:13.1f}")
    mx = out.get("torchao MX dequantize bf16", {})
    if "differ_from_grit_mxfp4" in mx:
        print(f"torchao MX (FLOOR) float32 dequantize vs grit MXFP4 decode: "
              f"{mx['differ_from_grit_mxfp4']} of {a.rows * a.cols} elements differ")
    print("base: grit.decode + torch.from_numpy + .to(bf16); GB/s counts packed bytes read "
          "plus output bytes written")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
