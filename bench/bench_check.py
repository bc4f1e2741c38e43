"""grit.check level-1 latency (O(1): never touches plane bytes), medians.

    python bench/bench_check.py [--n 20000] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import grit


def _median_us(fn, n: int, rounds: int = 7) -> float:
    per = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(per)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--json")
    a = ap.parse_args()
    mx = grit.GRADE_MXFP4.descriptor(group_axis=1)
    q4 = grit.GRADE_Q4KS.descriptor(group_axis=1)
    raw = mx.to_bytes()
    shape = [4096, 4096]
    rows = {
        "check(Descriptor) MXFP4, ok": lambda: grit.check(mx, shape, [8388608, 524288, 0, 0]),
        "check(64 bytes) MXFP4, ok": lambda: grit.check(raw, shape, [8388608, 524288, 0, 0]),
        "check(Descriptor) Q4KS, ok": lambda: grit.check(q4, shape, [8388608, 524288, 262144, 524288]),
        "diagnose MXFP4, size mismatch": lambda: grit.diagnose(mx, shape, [8388608, 262144, 0, 0]),
        "diagnose all-zeros descriptor": lambda: grit.diagnose(bytes(64), shape, [0, 0, 0, 0]),
    }
    out = {}
    print(f"{'case':36} {'median us':>10}")
    for name, fn in rows.items():
        out[name] = _median_us(fn, a.n)
        print(f"{name:36} {out[name]:10.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"level1_latency_us": out}, f, indent=2)


if __name__ == "__main__":
    main()
