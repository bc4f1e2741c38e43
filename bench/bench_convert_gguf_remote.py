"""grit convert --to gguf of a remote checkpoint (an https URL of its shard
index, served on loopback) against the same checkpoint in a local folder,
in the same run.

The checkpoint is bench_convert_gguf.py's (a compressed-tensors NVFP4 Llama
in shards with an index, config.json and a tokenizer), written under
``$TMPDIR`` and served by tests/http_server.py's server (ranged requests;
the files mapped, in a process of its own).  Each conversion runs in a fresh
process, interleaved, median of ``--repeat``; printed per source: wall time,
GB/s over the checkpoint's bytes, CPU time, peak RSS and peak anonymous RSS
(against the largest tensor), and, sampled every 10 ms from outside, the
peak disk the conversion holds beside DST — the spool's allocated blocks,
and the spool's and the staged output's together — against the largest
shard and the GGUF; and whether the two outputs (model.gguf, config.json,
grit-proof.json) are the same bytes.

    python bench/bench_convert_gguf_remote.py --layers 16
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import _measure  # bench/: the child's measurements
from bench_convert_gguf import make

HERE = os.path.dirname(os.path.abspath(__file__))

_CHILD = _measure.HEAD + r"""
src, dst = sys.argv[1:3]
from grit.convert import convert
convert(src, dst, "gguf")
""" + _measure.TAIL

_SERVER = r"""
import mmap, os, sys, time
sys.path.insert(0, sys.argv[2])
from http_server import Server
s = Server()
for n in os.listdir(sys.argv[1]):
    with open(os.path.join(sys.argv[1], n), "rb") as f:
        s.files["/src/" + n] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    s.etag("/src/" + n)
print(s.url("/src/model.safetensors.index.json"), flush=True)
while True:
    time.sleep(3600)
"""


def _held(parent: str) -> tuple[int, int]:
    """(the disk bytes the spool folders under ``parent`` hold, and those
    with the staging folders' and the output's)."""
    spool = every = 0
    for pat in (".grit-gguf-spool-*", ".grit-convert-*", "out"):
        for d in glob.glob(os.path.join(parent, pat)):
            for root, _, names in os.walk(d):
                for n in names:
                    try:
                        b = os.stat(os.path.join(root, n)).st_blocks * 512
                    except FileNotFoundError:
                        continue
                    every += b
                    spool += b if pat.startswith(".grit-gguf") else 0
    return spool, every


def run(src: str, parent: str) -> dict:
    dst = os.path.join(parent, "out")
    shutil.rmtree(dst, ignore_errors=True)
    peak = [0, 0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            s, e = _held(parent)
            peak[0], peak[1] = max(peak[0], s), max(peak[1], e)
            time.sleep(0.01)
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        out = subprocess.run([sys.executable, "-c", _CHILD, src, dst],
                             capture_output=True, text=True)
    finally:
        stop.set()
        th.join()
    if out.returncode:
        raise SystemExit(f"{src} failed:\n{out.stderr[-3000:]}")
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "spool": peak[0],
            "disk": peak[1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=16, help="of a Llama 3 8B's sizes")
    ap.add_argument("--layers-per-shard", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        src = os.path.join(tmp, "src")
        total, largest = make(src, args.layers, 4096, 14336, 32, 8, args.layers_per_shard)
        shards = [os.path.getsize(os.path.join(src, n)) for n in os.listdir(src)
                  if n.endswith(".safetensors")]
        server = subprocess.Popen([sys.executable, "-c", _SERVER, src,
                                   os.path.join(HERE, "..", "tests")],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            print(f"checkpoint: {total / 1e9:.2f} GB compressed-tensors NVFP4 in "
                  f"{len(shards)} shards (largest {max(shards) / 2**20:.0f} MiB), largest "
                  f"tensor {largest / 2**20:.1f} MiB; median of {args.repeat}; "
                  f"{os.cpu_count()} CPUs")
            rows: dict[str, list[dict]] = {}
            where = {"local": (src, os.path.join(tmp, "a")), "https": (url, os.path.join(tmp, "b"))}
            for d in where.values():
                os.makedirs(d[1])
            for k in range(args.repeat):                 # interleaved: load drifts alike
                for mode, (s, parent) in where.items():
                    rows.setdefault(mode, []).append(run(s, parent))
        finally:
            server.kill()
            server.wait()
        load1 = os.getloadavg()
        outs = {m: os.path.join(p, "out") for m, (_, p) in where.items()}
        gguf = os.path.getsize(os.path.join(outs["local"], "model.gguf"))
        same = all(open(os.path.join(outs["local"], n), "rb").read() ==
                   open(os.path.join(outs["https"], n), "rb").read()
                   for n in ("model.gguf", "config.json", "grit-proof.json"))
        print(f"{'':6} {'wall s':>7} {'GB/s':>6} {'CPU s':>7} {'RSS MiB':>8} {'÷ tensor':>8} "
              f"{'anon MiB':>9} {'÷ tensor':>8} {'spool MiB':>10} {'÷ shard':>8} "
              f"{'disk MiB':>9} {'÷ (GGUF+shard)':>15}")
        for mode, runs in rows.items():
            m = _measure.medians(runs)
            print(f"{mode:6} {m['wall']:7.2f} {total / m['wall'] / 1e9:6.2f} {m['cpu']:7.2f} "
                  f"{m['rss'] / 2**20:8.0f} {m['rss'] / largest:8.2f} "
                  f"{m['anon'] / 2**20:9.0f} {m['anon'] / largest:8.2f} "
                  f"{m['spool'] / 2**20:10.0f} {m['spool'] / max(shards):8.2f} "
                  f"{m['disk'] / 2**20:9.0f} {m['disk'] / (gguf + max(shards)):15.2f}")
        print(f"outputs the same bytes: {same}; GGUF {gguf / 2**20:.0f} MiB; load average "
              f"{load0[0]:.2f} before, {load1[0]:.2f} after")


if __name__ == "__main__":
    main()
