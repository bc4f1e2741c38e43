"""A real GGUF end to end: open + decode of every tensor, grit against gguf-py,
each in a fresh process, in one run.

    python bench/bench_gguf_load.py [PATH] [--repeat 3] [--json out.json]

PATH defaults to the cached gemma-3-270m Q4_K_M (tests/test_real_checkpoint.py
fetches it).  Sides, each run in its own process (imports outside the timing):

  * grit: ``grit.load(PATH)``, then ``grit.decode`` of every GritArray (a
    zero-copy or converted ggml type decodes from its blocks in place) and a
    float32 copy of every plain tensor;
  * gguf-py: ``gguf.GGUFReader(PATH)``, then ``gguf.quants.dequantize`` of
    every tensor's data.

Reported, medians of --repeat processes: the open, the decode of each ggml
type (the sum over its tensors), the total (open + decodes), the ratio
gguf-py / grit, and each process's peak RSS.  The two sides' outputs are
compared bit for bit on every tensor (a CRC-32 of each, outside the timing;
a real checkpoint has none of the special codes where they differ).  The issue's target: the total ≥ 5×
and every type's row ≥ 5×.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

GEMMA = os.path.join(os.path.expanduser("~"), ".cache", "grit-real-checkpoint",
                     "gemma-3-270m-q4_k_m.gguf")

CHILD = r'''
import json, resource, sys, time, zlib
import numpy as np
side, path = sys.argv[1], sys.argv[2]
if side == "grit":
    import grit
else:
    import gguf
t0 = time.perf_counter()
if side == "grit":
    got = grit.load(path)
    items = [(n, got.ggml_types[n], v) for n, v in got.items()]
else:
    r = gguf.GGUFReader(path)
    items = [(t.name, t.tensor_type.name, t) for t in r.tensors]
opened = time.perf_counter() - t0
per, sums = {}, {}
for name, gt, v in items:
    t = time.perf_counter()
    if side == "grit":
        x = grit.decode(v) if isinstance(v, grit.GritArray) else np.asarray(v, np.float32)
    else:
        x = gguf.quants.dequantize(v.data, v.tensor_type).astype(np.float32, copy=False)
    per[gt] = per.get(gt, 0.0) + time.perf_counter() - t
    sums[name] = zlib.crc32(np.ascontiguousarray(x).view(np.uint8))   # (outside the timing)
    del x
total = opened + sum(per.values())
print(json.dumps({"open": opened, "per_type": per, "total": total, "crc": sums,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


def run(side: str, path: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, side, path], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=GEMMA)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if not os.path.exists(args.path):
        print(f"no such file: {args.path}")
        return 1
    runs: dict[str, list[dict]] = {"grit": [], "gguf-py": []}
    for _ in range(args.repeat):
        for side in runs:
            runs[side].append(run("grit" if side == "grit" else "gguf", args.path))
    g, p = runs["grit"][0]["crc"], runs["gguf-py"][0]["crc"]
    same = sum(g[n] == p[n] for n in g)
    print(f"{os.path.basename(args.path)}: {len(g)} tensors, bit-identical on {same}/{len(g)}")

    def med(side, key, sub=None):
        vals = [r[key][sub] if sub else r[key] for r in runs[side]]
        return statistics.median(vals)

    types = sorted(runs["grit"][0]["per_type"])
    print(f"{'':10} {'grit s':>9} {'gguf-py s':>10} {'ratio':>7}")
    rows = {}
    for label, key, sub in ([("open", "open", None)]
                            + [(t, "per_type", t) for t in types]
                            + [("total", "total", None)]):
        a, b = med("grit", key, sub), med("gguf-py", key, sub)
        rows[label] = {"grit_s": a, "gguf_py_s": b, "ratio": b / a if a else None}
        print(f"{label:10} {a:9.3f} {b:10.3f} {b / a:6.1f}x")
    ra, rb = med("grit", "rss_mib"), med("gguf-py", "rss_mib")
    print(f"peak RSS   {ra:7.0f} MiB {rb:8.0f} MiB")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "rss_mib": {"grit": ra, "gguf-py": rb},
                       "agree": [same, len(g)]}, fh, indent=1)
    return 0 if same == len(g) else 1


if __name__ == "__main__":
    sys.exit(main())
