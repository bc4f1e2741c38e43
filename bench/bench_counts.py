#!/usr/bin/env python3
"""``grit scan`` cost in the size of a header: GGUF KV entries, GGUF tensor
infos and safetensors tensors, at counts below and past the readers' limits
(GRIT_MAX_GGUF_KV, GRIT_MAX_TENSORS; grit.io.source.LIMITS).

    python bench/bench_counts.py [--counts 16384,65536,1000000] [--json]

Each file is written by hand (the bytes the formats define: GGUF v3 with
uint8 KV values and F32 [1] tensors; a safetensors header of F32 [1]
entries), then scanned in a fresh process (``grit.scan.scan``, level 1, no
cache): wall time, peak RSS (VmHWM of that process) and, below the
limit, the RSS above the same process's baseline per entry.  Past a limit
the scan is one S808 finding.  The peer is the official reader of each
format in the same run: gguf-py's GGUFReader and safetensors' safe_open,
on the same file, timed and measured the same way.
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def gguf_kv(path: str, n: int) -> None:
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, n))
        for i in range(n):
            k = b"k%09d" % i
            f.write(struct.pack("<Q", len(k)) + k + struct.pack("<IB", 0, 1))


def gguf_tensors(path: str, n: int) -> None:
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, n, 0))
        for i in range(n):
            k = b"t%09d" % i
            f.write(struct.pack("<Q", len(k)) + k + struct.pack("<IQIQ", 1, 1, 0, 32 * i))
        f.write(b"\0" * (-f.tell() % 32) + b"\0" * (32 * n))


def st_tensors(path: str, n: int) -> None:
    head = json.dumps({f"t{i:09d}": {"dtype": "F32", "shape": [1],
                                     "data_offsets": [4 * i, 4 * i + 4]} for i in range(n)},
                      separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"\0" * (4 * n))


_PROBE = r"""
import json, sys, time
def hwm():    # VmHWM: this process's peak RSS in KiB (ru_maxrss keeps the pre-exec one)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
which, path = sys.argv[1], sys.argv[2]
base = hwm()
if which == "grit":
    from grit.scan import scan
    import grit.io.gguf, grit.io.safetensors
    base = hwm()
    t = time.perf_counter()
    rep = scan([path], cache=False)
    codes = sorted({f.code for f in rep.findings})
elif path.endswith(".gguf"):
    from gguf import GGUFReader
    base = hwm()
    t = time.perf_counter()
    r = GGUFReader(path)
    codes = [len(r.fields), len(r.tensors)]
else:
    from safetensors import safe_open
    base = hwm()
    t = time.perf_counter()
    with safe_open(path, "np") as f:
        codes = [len(list(f.keys()))]
dt = time.perf_counter() - t
peak = hwm()
print(json.dumps({"seconds": dt, "peak_mib": peak / 1024, "growth_mib": (peak - base) / 1024,
                  "result": codes}))
"""


def measure(which: str, path: str, timeout: float = 600) -> dict:
    env = {**os.environ, "PYTHONPATH": ROOT}
    try:
        r = subprocess.run([sys.executable, "-c", _PROBE, which, path], capture_output=True,
                           text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout} s"}
    if r.returncode:
        return {"error": r.stderr.strip().splitlines()[-1][:200] if r.stderr else r.returncode}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="16384,65536,262144,1000000")
    ap.add_argument("--kinds", default="gguf-kv,gguf-tensors,st-tensors")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    makers = {"gguf-kv": (gguf_kv, ".gguf"), "gguf-tensors": (gguf_tensors, ".gguf"),
              "st-tensors": (st_tensors, ".safetensors")}
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for kind in a.kinds.split(","):
            make, ext = makers[kind]
            for n in map(int, a.counts.split(",")):
                path = os.path.join(d, f"{kind}-{n}{ext}")
                make(path, n)
                row = {"kind": kind, "count": n, "file_mib": os.path.getsize(path) / 2**20,
                       "grit": measure("grit", path), "peer": measure("peer", path)}
                g = row["grit"]
                if "growth_mib" in g:
                    row["grit_bytes_per_entry"] = g["growth_mib"] * 2**20 / n
                os.unlink(path)
                rows.append(row)
                if not a.json:
                    p = row["peer"]
                    print(f"{kind:13} {n:>9} {row['file_mib']:8.1f} MiB  grit "
                          f"{g.get('seconds', float('nan')):7.2f} s {g.get('peak_mib', 0):7.1f} MiB"
                          f" ({row.get('grit_bytes_per_entry', float('nan')):6.0f} B/entry) "
                          f"{g.get('result', g.get('error'))}   peer "
                          f"{p.get('seconds', float('nan')):7.2f} s {p.get('peak_mib', 0):7.1f} "
                          f"MiB {p.get('result', p.get('error'))}", flush=True)
    if a.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
