#!/usr/bin/env python3
"""Speed of ``grit scan`` on a synthetic multi-GB checkpoint.

    python bench/bench_scan.py [--gb 2] [--shards 4] [--small 4000] [--repeat 5] [--json]

Writes, in a temporary directory deleted afterwards:
  * ``big/model-0000i-of-0000N.safetensors``: --gb GiB of plane bytes (default
    2) across --shards shards, 4096-column MXFP4 / Q4KS / NVF4 tensors written
    with ``grit.save`` (each tensor's planes are one encoded 256-row block
    repeated down the rows, which is itself a valid encoding);
  * ``small.safetensors``: --small tiny GRIT tensors (4 × 64 .. 4 × 256).

Rows:
  level 1, small tensors   ``scan(small)``: wall time / tensors (median over --repeat)
  level 1, big checkpoint  ``scan(big)``: likewise; no plane byte is read
  --deep                    ``scan(big, deep=True)``: plane bytes / wall time (GB/s)
  raw digest                ``grit.fingerprint.digest`` over the same planes,
                            mapped from the same files by ``grit.load`` (only
                            the digest() calls are timed)
The shards record ``grit.digest.<tensor>`` so that --deep has a digest to
verify.  The ratio column puts --deep beside the raw digest: --deep hashes every
plane (the digest) and runs the level-3 probes, so it cannot beat the digest
row; the ratio is the cost of everything else.  The files are written just
before they are read, so both rows run from the page cache (warm).
GB/s is 1e9 bytes per second.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import grit  # noqa: E402
from grit.fingerprint import digest  # noqa: E402
from grit.scan import scan  # noqa: E402

COLS = 4096
BASE_ROWS = 256


def _base(grade, seed):
    x = np.random.default_rng(seed).standard_normal((BASE_ROWS, COLS)).astype(np.float32)
    return grit.encode(x, grade)


def _tiled(base, k: int):
    """``base`` repeated k times down the rows: row-major groups along the
    last axis make every per-group plane the concatenation of k copies; a
    per-tensor plane (one value for the whole tensor) stays as it is."""
    pl = [bytes(p) for p in base.planes]
    from grit.check import plane_sizes
    s1 = plane_sizes(base.descriptor, (BASE_ROWS, COLS)).sizes
    sk = plane_sizes(base.descriptor, (BASE_ROWS * k, COLS)).sizes
    planes = tuple(p * (b // a if a else 1) for p, a, b in zip(pl, s1, sk))
    return grit.GritArray(base.descriptor, (BASE_ROWS * k, COLS), planes)


def make_checkpoint(root: str, gb: float, shards: int, small: int) -> dict:
    grades = [grit.GRADE_MXFP4, grit.GRADE_Q4KS, grit.GRADE_NVF4]
    bases = [_base(g, i) for i, g in enumerate(grades)]
    per_base = sum(len(bytes(p)) for p in bases[0].planes)
    target = int(gb * (1 << 30))
    k = 64                                       # 16384 × 4096 per tensor (~34 MB)
    per_tensor = per_base * k
    n_tensors = max(shards, round(target / per_tensor))
    big = os.path.join(root, "big")
    os.makedirs(big)
    names, total = [], 0
    per_shard = -(-n_tensors // shards)
    t = 0
    for s in range(shards):
        arrays = {}
        for _ in range(per_shard):
            if t >= n_tensors:
                break
            a = _tiled(bases[t % 3], k)
            arrays[f"model.layers.{t // 3}.mlp.{('up', 'gate', 'down')[t % 3]}_proj.weight"] = a
            total += sum(len(bytes(p)) for p in a.planes)
            t += 1
        p = os.path.join(big, f"model-{s + 1:05d}-of-{shards:05d}.safetensors")
        # the recorded digests --deep verifies (without them it has no digest to compare)
        grit.save(p, arrays, {f"grit.digest.{n}": grit.base32_encode(a.digest)
                              for n, a in arrays.items()})
        names.append(p)
        del arrays
    rng = np.random.default_rng(7)
    arrays = {}
    for i in range(small):
        g = grades[i % 3]
        cols = (64, 128, 256)[i % 3] if g is not grit.GRADE_Q4KS else 256
        arrays[f"model.layers.{i}.small{i % 3}.weight"] = grit.encode(
            rng.standard_normal((4, cols)).astype(np.float32), g)
    sp = os.path.join(root, "small.safetensors")
    grit.save(sp, arrays)
    return {"big": big, "shards": names, "big_tensors": n_tensors, "plane_bytes": total,
            "small": sp, "small_tensors": small}


def _timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def raw_digest(ck: dict) -> tuple[int, float]:
    """digest() over every GRIT tensor's planes as ``grit.load`` maps them
    from the shards: (bytes hashed, seconds spent in digest() alone)."""
    n, spent = 0, 0.0
    for p in ck["shards"]:
        got = grit.load(p)
        for v in got.values():
            if isinstance(v, grit.GritArray):
                planes = list(v.planes)
                t0 = time.perf_counter()
                digest(planes)
                spent += time.perf_counter() - t0
                n += sum(memoryview(x).nbytes for x in planes)
        del got
    return n, spent


def run(args) -> dict:
    root = tempfile.mkdtemp(prefix="grit-bench-scan-")
    try:
        t0 = time.perf_counter()
        ck = make_checkpoint(root, args.gb, args.shards, args.small)
        made = time.perf_counter() - t0
        rep = scan([ck["small"]])
        assert rep.exit_code_graded in (0, 3), rep.summary()
        small_t = _timed(lambda: scan([ck["small"]]), args.repeat)
        big_t = _timed(lambda: scan([ck["big"]]), args.repeat)
        deep_rep = []
        deep_t = _timed(lambda: deep_rep.append(scan([ck["big"]], deep=True)), max(1, args.repeat // 2))
        bad = [f for f in deep_rep[-1].findings if f.category in ("structural", "deep", "unreadable")]
        dig = [raw_digest(ck) for _ in range(max(1, args.repeat // 2))]
        assert all(n == ck["plane_bytes"] for n, _ in dig), (dig, ck["plane_bytes"])
        dig_t = [t for _, t in dig]
        B = ck["plane_bytes"]
        res = {
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus",
            "python": platform.python_version(),
            "gib": args.gb, "shards": args.shards, "big_tensors": ck["big_tensors"],
            "plane_bytes": B, "small_tensors": ck["small_tensors"], "make_s": made,
            "level1_small_us_per_tensor": statistics.median(small_t) / ck["small_tensors"] * 1e6,
            "level1_big_us_per_tensor": statistics.median(big_t) / ck["big_tensors"] * 1e6,
            "level1_big_s": statistics.median(big_t),
            "deep_s": statistics.median(deep_t),
            "deep_gbps": B / statistics.median(deep_t) / 1e9,
            "digest_s": statistics.median(dig_t),
            "digest_gbps": B / statistics.median(dig_t) / 1e9,
            "deep_findings": [f"{f.category}:{f.status}:{f.tensor}" for f in bad][:5],
        }
        res["deep_over_digest"] = res["deep_gbps"] / res["digest_gbps"]
        return res
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=2.0, help="GiB of plane bytes (default 2)")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--small", type=int, default=4000, help="tiny tensors in small.safetensors")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args(argv)
    r = run(args)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    print(f"grit scan on {r['plane_bytes'] / 1e9:.2f} GB of planes "
          f"({r['big_tensors']} tensors of 16384×4096 in {r['shards']} shards) "
          f"+ {r['small_tensors']} small tensors; {r['machine']}, Python {r['python']}")
    print(f"{'row':28s} {'time':>12s} {'per tensor':>14s} {'GB/s':>8s} {'ratio':>8s}")
    print(f"{'level 1, small tensors':28s} {'':>12s} "
          f"{r['level1_small_us_per_tensor']:>11.1f} µs {'':>8s} {'':>8s}")
    print(f"{'level 1, big checkpoint':28s} {r['level1_big_s']:>10.3f} s "
          f"{r['level1_big_us_per_tensor']:>11.1f} µs {'':>8s} {'':>8s}")
    print(f"{'--deep':28s} {r['deep_s']:>10.3f} s {'':>14s} {r['deep_gbps']:>8.2f} "
          f"{r['deep_over_digest']:>8.2f}")
    print(f"{'raw digest (same bytes)':28s} {r['digest_s']:>10.3f} s {'':>14s} "
          f"{r['digest_gbps']:>8.2f} {1.0:>8.2f}")
    if r["deep_findings"]:
        print("unexpected --deep findings:", ", ".join(r["deep_findings"]))


if __name__ == "__main__":
    main()
