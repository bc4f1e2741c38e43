"""grit convert against copying the same bytes, on a synthetic checkpoint.

A GRIT safetensors checkpoint of MXFP4 weights (random plane bytes: the
conversion moves bytes, so their values do not matter) is written in shards
of about ``--shard-mb``; then, each in a fresh process, median of
``--repeat``, after one untimed copy (the source is then in the page cache),
each round in a rotated order, each after ``sync`` (untimed: no run pays
for the previous one's write-back):

* ``copy``: ``shutil.copyfile`` of every shard (the peer: what moving the
  bytes costs at least);
* ``copy+fsync``: the same, each copy then flushed to disk (``fsync``), as
  ``grit convert --fsync`` and ``grit.save`` leave their output;
* ``convert -j N``: ``grit convert --to compressed-tensors`` with N jobs
  (check, write at the planned offsets, read back, prove: plane digests
  and the comparison of the planes), and ``convert-j1+fsync`` with
  ``--fsync`` (the output flushed to disk before it is moved into place);
* ``emit+save``: the same writes without the check and the proof
  (``grit.conventions.emit`` + ``grit.save`` per shard), to show what the
  proof costs;
* ``verify`` (with ``--verify``): ``grit verify`` of the checkpoint and its
  ``compressed-tensors`` conversion (made once, untimed): both
  checkpoints read again, every digest and verdict re-derived.

Printed: wall time, GB/s over the checkpoint's bytes, the ratio to the
copy's throughput, the CPU time of the process (user + system, all its
threads: ``getrusage``) per GB and the GB/s per core that makes (bytes over
CPU seconds; the kernel's write-back of dirty pages, done by its own
threads, is not in it), each process's peak RSS (``VmHWM``) and peak
anonymous RSS (``RssAnon`` of /proc/self/status, sampled every 5 ms: the
memory that is not pages of mapped files), both against the largest
tensor; the time to import grit, apart (paid once per run, not per GB:
it is not in the times above); and the load average before and after
(the machine may be shared).

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

import _measure  # bench/: the child's measurements

_CHILD = _measure.HEAD + r"""
import shutil
mode, src, dst = sys.argv[1:4]
if not mode.startswith("copy"):         # the import is timed apart: a cost per run, not per GB
    import grit, grit.convert
extra["import"] = time.perf_counter() - t
cpu0 = cpu()
t = time.perf_counter()
if mode.startswith("copy"):
    os.makedirs(dst)
    for n in sorted(os.listdir(src)):
        shutil.copyfile(os.path.join(src, n), os.path.join(dst, n))
        if mode == "copy+fsync":            # on disk, as grit convert leaves its output
            fd = os.open(os.path.join(dst, n), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
elif mode.startswith("convert"):
    from grit.convert import convert
    convert(src, dst, "compressed-tensors", jobs=int(mode.split("-j")[1].split("+")[0]),
            fsync=mode.endswith("+fsync"))
elif mode == "verify":
    from grit.convert import verify
    if not verify(src, dst).ok:
        raise SystemExit("verify: the proof does not hold")
else:
    import grit
    from grit import conventions
    os.makedirs(dst)
    for n in sorted(os.listdir(src)):
        if n.endswith(".safetensors"):
            em = conventions.emit("compressed-tensors", dict(grit.load(os.path.join(src, n))))
            grit.save(os.path.join(dst, n), em.tensors)
""" + _measure.TAIL


def make(folder: str, size_gb: float, shard_mb: int, rows: int, cols: int) -> tuple[int, int]:
    """Shards of MXFP4 GRIT arrays [rows, cols]; returns (total bytes, the
    largest tensor's bytes)."""
    import grit
    rng = np.random.default_rng(0)
    desc = grit.GRADE_MXFP4.descriptor(group_axis=1)
    per = rows * cols // 2 + rows * cols // 32
    n_tensors = max(1, int(size_gb * 1e9 // per))
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
        del tensors
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"]}, f)
    for n in os.listdir(folder):
        total += os.path.getsize(os.path.join(folder, n))
    return total, per


def run(mode: str, src: str, dst: str) -> dict:
    """One child's measurement of ``mode`` from ``src`` into ``dst``
    (removed before and after; ``verify`` reads ``dst``, left as it is)."""
    if mode != "verify":
        shutil.rmtree(dst, ignore_errors=True)
    os.sync()               # each run starts with nothing left to write back (untimed)
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, src, dst], capture_output=True,
                         text=True, check=True)
    if mode != "verify":
        shutil.rmtree(dst, ignore_errors=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--shard-mb", type=int, default=512)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=16384)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--verify", action="store_true",
                    help="add a row: grit verify of the checkpoint and its conversion")
    ap.add_argument("--only-verify", action="store_true",
                    help="the copy and verify rows alone")
    args = ap.parse_args()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        src = os.path.join(tmp, "src")
        total, largest = make(src, args.size_gb, args.shard_mb, args.rows, args.cols)
        print(f"checkpoint: {total / 1e9:.2f} GB in "
              f"{len([n for n in os.listdir(src) if n.endswith('.safetensors')])} shards, "
              f"largest tensor {largest / 2**20:.1f} MiB; median of {args.repeat}; "
              f"{os.cpu_count()} CPUs")
        rows = {}
        modes = ["copy", "copy+fsync", *(f"convert-j{j}" for j in args.jobs),
                 f"convert-j{args.jobs[0]}+fsync", "emit+save"]
        if args.only_verify:
            modes = ["copy", "verify"]
        elif args.verify:
            modes.append("verify")
        run("copy", src, os.path.join(tmp, "dst"))    # warm-up: the source in the page cache
        conv = os.path.join(tmp, "conv")               # what verify reads: converted once
        if "verify" in modes:
            from grit.convert import convert
            convert(src, conv, "compressed-tensors")
        for r in range(args.repeat):
            # interleaved, and each round in a rotated order: load drifts alike, and no
            # mode is always the one after the previous round's deletions
            for mode in modes[r % len(modes):] + modes[:r % len(modes)]:
                rows.setdefault(mode, []).append(
                    run(mode, src, conv if mode == "verify" else os.path.join(tmp, "dst")))
        load1 = os.getloadavg()
        base = statistics.median(r["wall"] for r in rows["copy"])
        print(f"{'':16} {'wall s':>7} {'GB/s':>6} {'÷ copy':>7} {'CPU s/GB':>8} "
              f"{'GB/s/core':>9} {'RSS MiB':>8} {'÷ largest':>9} {'anon MiB':>9} "
              f"{'÷ largest':>9}")
        for mode, runs in rows.items():
            m = _measure.medians(runs)
            wall, cpu, rss, anon = m["wall"], m["cpu"], m["rss"], m["anon"]
            print(f"{mode:16} {wall:7.2f} {total / wall / 1e9:6.2f} {base / wall:7.2f} "
                  f"{cpu / (total / 1e9):8.2f} {total / 1e9 / cpu:9.2f} "
                  f"{rss / 2**20:8.0f} {rss / largest:9.2f} {anon / 2**20:9.0f} "
                  f"{anon / largest:9.2f}")
        imp = statistics.median(r["import"] for r in rows[
            "verify" if args.only_verify else f"convert-j{args.jobs[0]}"])
        print(f"import grit (not in the times above): {imp:.2f} s")
        print(f"load average (1 min) before {load0[0]:.2f}, after {load1[0]:.2f}")


if __name__ == "__main__":
    main()
