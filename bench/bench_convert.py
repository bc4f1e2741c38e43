"""grit convert against copying the same bytes, on a synthetic checkpoint.

A GRIT safetensors checkpoint of MXFP4 weights (random plane bytes: the
conversion moves bytes, so their values do not matter) is written in shards
of about ``--shard-mb``; then, each in a fresh process, median of
``--repeat``:

* ``copy``: ``shutil.copyfile`` of every shard (the peer: what moving the
  bytes costs at least);
* ``convert``: ``grit convert --to compressed-tensors`` (read, emit, write,
  read back for the proof, the proof's decode comparison);
* ``convert, no proof``: the same writes without the read-back and decode
  comparison (``grit.conventions.emit`` + ``grit.save`` per shard), to show
  where the time goes.

Printed: wall time, GB/s over the checkpoint's bytes, the ratio to the copy,
and each process's peak RSS against the largest tensor.

    python bench/bench_convert.py --size-gb 2 --shard-mb 512
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

_CHILD = r"""
import json, os, resource, shutil, sys, time
mode, src, dst = sys.argv[1:4]
t = time.perf_counter()
if mode == "copy":
    os.makedirs(dst)
    for n in sorted(os.listdir(src)):
        shutil.copyfile(os.path.join(src, n), os.path.join(dst, n))
elif mode == "convert":
    from grit.convert import convert
    convert(src, dst, "compressed-tensors")
else:
    import grit
    from grit import conventions
    os.makedirs(dst)
    for n in sorted(os.listdir(src)):
        if n.endswith(".safetensors"):
            em = conventions.emit("compressed-tensors", dict(grit.load(os.path.join(src, n))))
            grit.save(os.path.join(dst, n), em.tensors)
wall = time.perf_counter() - t
print(json.dumps({"wall": wall, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def make(folder: str, size_gb: float, shard_mb: int, rows: int, cols: int) -> tuple[int, int]:
    """Shards of MXFP4 GRIT arrays [rows, cols]; returns (total bytes, the
    largest tensor's bytes)."""
    import grit
    rng = np.random.default_rng(0)
    desc = grit.GRADE_MXFP4.descriptor(group_axis=1)
    per = rows * cols // 2 + rows * cols // 32
    n_tensors = max(1, int(size_gb * 2**30 // per))
    per_shard = max(1, int(shard_mb * 2**20 // per))
    os.makedirs(folder)
    total, i, s = 0, 0, 0
    while i < n_tensors:
        tensors = {}
        for _ in range(min(per_shard, n_tensors - i)):
            data = rng.integers(0, 256, rows * cols // 2, dtype=np.uint8)
            scale = rng.integers(110, 140, rows * cols // 32, dtype=np.uint8)
            tensors[f"model.layers.{i}.mlp.down_proj.weight"] = grit.GritArray(
                desc, (rows, cols), [data, scale, b"", b""])
            i += 1
        s += 1
        grit.save(os.path.join(folder, f"model-{s:05d}.safetensors"), tensors)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"]}, f)
    for n in os.listdir(folder):
        total += os.path.getsize(os.path.join(folder, n))
    return total, per


def run(mode: str, src: str, dst: str) -> dict:
    shutil.rmtree(dst, ignore_errors=True)
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, src, dst], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--shard-mb", type=int, default=512)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        src = os.path.join(tmp, "src")
        total, largest = make(src, args.size_gb, args.shard_mb, args.rows, args.cols)
        print(f"checkpoint: {total / 2**30:.2f} GiB in "
              f"{len([n for n in os.listdir(src) if n.endswith('.safetensors')])} shards, "
              f"largest tensor {largest / 2**20:.1f} MiB; median of {args.repeat}")
        rows = {}
        for mode in ("copy", "convert", "emit+save"):
            runs = [run(mode, src, os.path.join(tmp, "dst")) for _ in range(args.repeat)]
            rows[mode] = (statistics.median(r["wall"] for r in runs),
                          max(r["rss_mb"] for r in runs))
        base = rows["copy"][0]
        print(f"{'':12} {'wall s':>8} {'GB/s':>7} {'÷ copy':>7} {'peak RSS MiB':>13} "
              f"{'RSS ÷ largest':>14}")
        for mode, (wall, rss) in rows.items():
            print(f"{mode:12} {wall:8.2f} {total / wall / 1e9:7.2f} {wall / base:7.2f} "
                  f"{rss:13.0f} {rss * 2**20 / largest:14.1f}")


if __name__ == "__main__":
    main()
