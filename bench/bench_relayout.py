"""Relayout throughput between registered placements on a large array, beside
numpy memcpy of the same bytes in the same run.

    python bench/bench_relayout.py [--rows 4096] [--cols 4096] [--repeat 5] [--json out.json]

Each row relayouts a canonical array to one placement (or from one back to
canonical) and reports the median seconds and GB/s of payload moved (all four
planes), and the ratio to ``np.copyto`` of the same number of bytes.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import grit
from grit import layouts as L


def _median_s(fn, repeat: int) -> float:
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


CASES = [   # (grade, placement keyword(s))
    ("GRADE_MXFP4", {"placement": L.COL_MAJOR}),
    ("GRADE_MXFP4", {"placement": L.TILE_16X16}),
    ("GRADE_MXFP4", {"scale": L.SWIZZLE_128X4B}),
    ("GRADE_MXFP4", {"data": L.BLOCK_AOS}),
    ("GRADE_NVF4", {"scale": L.SWIZZLE_128X4B}),
    ("GRADE_Q4KS", {"scale": L.PACK_K4_12B}),
    ("GRADE_Q4KS", {"data": L.BLOCK_AOS, "scale": L.PACK_K4_12B}),
    ("GRADE_I8S24", {"meta": L.META_M16N8K32}),
    ("GRADE_I8S24", {"placement": L.COL_MAJOR}),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.rows, a.cols)).astype(np.float32)
    rows = []
    arrays = {}
    print(f"{'grade':12s} {'placement':34s} {'MB':>7s} {'to s':>8s} {'to GB/s':>8s} "
          f"{'back GB/s':>9s} {'memcpy GB/s':>11s} {'to/memcpy':>9s}")
    for gname, kw in CASES:
        g = grit.grade.REGISTERED_GRADES[gname]
        if gname not in arrays:
            arrays[gname] = grit.encode(x, g)
        c = arrays[gname]
        p = kw.get("placement")
        rest = {k: v for k, v in kw.items() if k != "placement"}
        y = grit.relayout(c, p, **rest)
        nbytes = c.nbytes
        src = np.frombuffer(c.payload(), np.uint8)
        dst = np.empty_like(src)
        t_copy = _median_s(lambda: np.copyto(dst, src), a.repeat)
        t_to = _median_s(lambda: grit.relayout(c, p, **rest), a.repeat)
        t_back = _median_s(lambda: grit.relayout(y, L.ROW_MAJOR), a.repeat)
        assert (grit.decode(y).view(np.uint32) == grit.decode(c).view(np.uint32)).all()
        label = ",".join(f"{k}={grit.placement.placement_name(v)}" for k, v in kw.items())
        r = {"grade": gname, "placement": label, "bytes": nbytes, "to_s": t_to,
             "to_GB_per_s": nbytes / t_to / 1e9, "back_GB_per_s": nbytes / t_back / 1e9,
             "memcpy_GB_per_s": nbytes / t_copy / 1e9, "to_over_memcpy": t_to / t_copy}
        rows.append(r)
        print(f"{gname:12s} {label:34s} {nbytes / 1e6:7.1f} {t_to:8.4f} "
              f"{r['to_GB_per_s']:8.2f} {r['back_GB_per_s']:9.2f} "
              f"{r['memcpy_GB_per_s']:11.2f} {r['to_over_memcpy']:8.1f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": a.rows, "cols": a.cols, "repeat": a.repeat, "results": rows}, f,
                      indent=2)


if __name__ == "__main__":
    main()
