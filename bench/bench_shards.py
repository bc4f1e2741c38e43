#!/usr/bin/env python3
"""Cost of the checkpoint-wide checks of ``grit scan`` on a sharded checkpoint.

    python bench/bench_shards.py [--shards 100] [--tensors 100] [--repeat 5] [--json]

Writes, in a temporary directory deleted afterwards, a checkpoint of --shards
shards of --tensors small F16 tensors each (``safetensors.numpy.save_file``)
and its ``model.safetensors.index.json`` as transformers writes it.  Each row
runs in a fresh process (wall time inside it, and its peak RSS, ru_maxrss),
medians over --repeat runs:

  peer: safe_open every shard   what a loader does to open the checkpoint:
                                 the index read, ``safetensors.safe_open`` on each
                                 shard listing its keys, each weight_map entry
                                 looked up in its shard
  grit scan (directory)          ``grit.scan.scan([dir])``: every shard's header
                                 checks and the checkpoint-wide checks
  checkpoint checks alone        ``grit.scan.shards.Checkpoints.check`` over the
                                 shards the scan read (the new part)

The ratio column is each row over the peer row.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def write(d: str, shards: int, tensors: int) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    wm, total = {}, 0
    for i in range(1, shards + 1):
        name = f"model-{i:05d}-of-{shards:05d}.safetensors"
        ts = {f"model.layers.{i}.t{j}.weight": rng.standard_normal((16, 64)).astype(np.float16)
              for j in range(tensors)}
        save_file(ts, os.path.join(d, name), metadata={"format": "pt"})
        for n, a in ts.items():
            wm[n] = name
            total += a.nbytes
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f)


def one(mode: str, d: str) -> float:
    if mode == "peer":
        from safetensors import safe_open
        t0 = time.perf_counter()
        with open(os.path.join(d, "model.safetensors.index.json")) as f:
            wm = json.load(f)["weight_map"]
        keys = {}
        for name in sorted(set(wm.values())):
            with safe_open(os.path.join(d, name), "np") as h:
                keys[name] = set(h.keys())
        missing = [t for t, s in wm.items() if t not in keys[s]]
        assert not missing
        return time.perf_counter() - t0
    from grit.scan import scan
    if mode == "grit":
        t0 = time.perf_counter()
        rep = scan([d])
        dt = time.perf_counter() - t0
        assert not rep.findings, [f.code for f in rep.findings[:5]]
        return dt
    # the checkpoint checks alone, over the shards a scan read
    from grit.scan import analyses as an
    from grit.scan.collect import expand, open_input
    from grit.scan.shards import Checkpoints
    ctx = an.Context(False)
    ck = Checkpoints()
    for p in expand([d], ctx.findings, [], ck.indexes):
        ck.note(open_input(p))
    t0 = time.perf_counter()
    ck.check(ctx)
    dt = time.perf_counter() - t0
    assert not ctx.findings
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=100)
    ap.add_argument("--tensors", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        dt = one(a.one[0], a.one[1])
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # KiB on Linux
        print(json.dumps({"s": dt, "rss_kib": rss}))
        return
    rows = [("peer: safe_open every shard", "peer"), ("grit scan (directory)", "grit"),
            ("checkpoint checks alone", "check")]
    out = []
    with tempfile.TemporaryDirectory() as d:
        write(d, a.shards, a.tensors)
        for label, mode in rows:
            runs = [json.loads(subprocess.run([sys.executable, __file__, "--one", mode, d],
                                              check=True, capture_output=True,
                                              text=True).stdout) for _ in range(a.repeat)]
            out.append({"row": label, "median_s": statistics.median(r["s"] for r in runs),
                        "peak_rss_mib": statistics.median(r["rss_kib"] for r in runs) / 1024})
    peer = out[0]["median_s"]
    for r in out:
        r["ratio_to_peer"] = r["median_s"] / peer
    if a.json:
        print(json.dumps({"shards": a.shards, "tensors_per_shard": a.tensors, "rows": out},
                         indent=2))
        return
    print(f"{a.shards} shards × {a.tensors} tensors, median of {a.repeat} fresh processes")
    print(f"{'row':34} {'median':>10} {'ratio':>7} {'peak RSS':>10}")
    for r in out:
        print(f"{r['row']:34} {r['median_s'] * 1e3:8.1f}ms {r['ratio_to_peer']:6.2f}× "
              f"{r['peak_rss_mib']:7.1f}MiB")


if __name__ == "__main__":
    main()
