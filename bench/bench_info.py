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

from bench_gguf_load import GEMMA  # noqa: E402 - the cached gemma (bench/ is on sys.path)

CHILD = r'''
import importlib, json, resource, sys, time
side, path = sys.argv[1], sys.argv[2]
lib = importlib.import_module("grit" if side == "grit" else "gguf")   # (outside the timing)
start = time.perf_counter()
rows = ([(r.name, r.ecosystem, list(r.shape), r.bytes) for r in lib.info(path).tensors]
        if side == "grit" else
        [(t.name, t.tensor_type.name, [int(d) for d in reversed(t.shape.tolist())],
          int(t.n_bytes)) for t in lib.GGUFReader(path).tensors])
print(json.dumps({"seconds": time.perf_counter() - start, "rows": rows,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


def _side(side: str, path: str) -> dict:
    """One side's child process: its JSON line."""
    done = subprocess.run([sys.executable, "-c", CHILD, side, path], check=True,
                          stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=GEMMA, help="a GGUF file (default: gemma)")
    ap.add_argument("--repeat", type=int, default=5, help="processes per side")
    ap.add_argument("--json", help="also write the medians here")
    args = ap.parse_args(argv)
    if not os.path.isfile(args.path):
        print(f"{args.path}: not a file (tests/test_real_checkpoint.py fetches gemma)")
        return 1
    runs: dict[str, list[dict]] = {"grit": [], "gguf-py": []}
    for _ in range(args.repeat):
        for side in runs:
            runs[side].append(_side(side, args.path))
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
