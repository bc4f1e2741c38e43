"""grit info against gguf-py's reading of the same GGUF: the tensor table
(name, type, shape, bytes) of a real file, each side in a fresh process.

    python bench/bench_info.py [PATH] [--repeat 5] [--json out.json]

PATH defaults to the cached gemma-3-270m Q4_K_M (tests/test_real_checkpoint.py
fetches it).  Sides (imports outside the timing):

  * grit: ``grit.info(PATH)`` — the rows and totals;
  * gguf-py: ``gguf.GGUFReader(PATH)`` and each tensor's name, type, shape
    and n_bytes (what ``gguf-dump`` prints).

Reported: medians of --repeat processes, the ratio gguf-py / grit, and
each process's peak RSS.  The two tables are compared (names, types,
shapes, bytes) and the run fails if they differ.
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
import json, resource, sys, time
side, path = sys.argv[1], sys.argv[2]
if side == "grit":
    import grit
else:
    import gguf
t0 = time.perf_counter()
if side == "grit":
    got = grit.info(path)
    rows = [(r.name, r.ecosystem, list(r.shape), r.bytes) for r in got.tensors]
else:
    rd = gguf.GGUFReader(path)
    rows = [(t.name, t.tensor_type.name, [int(d) for d in reversed(t.shape.tolist())],
             int(t.n_bytes)) for t in rd.tensors]
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "rows": rows,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


def run(side: str, path: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, side, path], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=GEMMA)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if not os.path.exists(args.path):
        print(f"no such file: {args.path}")
        return 1
    runs: dict[str, list[dict]] = {"grit": [], "gguf-py": []}
    for _ in range(args.repeat):
        for side in runs:
            runs[side].append(run(side, args.path))
    if runs["grit"][0]["rows"] != runs["gguf-py"][0]["rows"]:
        print("the tables differ")
        return 1
    out = {"path": args.path, "tensors": len(runs["grit"][0]["rows"])}
    for side, rs in runs.items():
        out[side] = {"seconds": statistics.median(r["seconds"] for r in rs),
                     "rss_mib": statistics.median(r["rss_mib"] for r in rs)}
    out["ratio"] = out["gguf-py"]["seconds"] / out["grit"]["seconds"]
    print(f"{out['tensors']} tensors, the same table on both sides")
    for side in runs:
        print(f"  {side:8} {out[side]['seconds'] * 1e3:9.1f} ms   peak RSS "
              f"{out[side]['rss_mib']:7.1f} MiB")
    print(f"  gguf-py / grit: {out['ratio']:.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
