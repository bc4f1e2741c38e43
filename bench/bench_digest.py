#!/usr/bin/env python3
"""Throughput of the §6.5 digest: grit's native extension against the plain C
FNV-1a-128 loop of §6.1 and against memory bandwidth.

    python bench/bench_digest.py [--mb 256] [--repeat 7] [--json out.json]

Rows:
  ext digest    grit.fingerprint.digest([buf, b"", b"", b""])
  ext fnv1a128  grit.fingerprint.fnv1a128(buf)
  ext digests×K grit.fingerprint.digests of the buffer cut into K arrays (the
                same bytes: K digests advanced together, interleaved, on one
                core), K = 2, 3, 4
  ext dig+cmp×K grit.fingerprint.digests_compared of the same K arrays, each
                compared with a copy in the same loop (grit convert's proof),
                K = 1 to 4
  … avx512 / avx2 / mul
                where the machine has a chain-and-sums loop (fnv_wide.c:
                AVX-512 VNNI, AVX2), the two rows above with each loop it
                has and with the interleaved 128-bit multiplies
                (fnv_multi.c)
  plain C       the §6.1 loop (unsigned __int128, h *= prime), built here with
                `cc -O2 -ffp-contract=off -shared -fPIC` and called via ctypes
  memcpy        np.copyto of the same buffer (an upper bound for any pass)

FNV-1a is a serial chain (each byte's multiply waits on the previous one), so
the hash rows are latency-bound and expected to sit far below memcpy; the
ratio column shows whether the extension matches the textbook loop.
GB/s is 1e9 bytes per second; each figure is the median over --repeat runs.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# The nine-line loop of §6.1, at 128 bits, written the obvious way.
PLAIN_C = r"""
#include <stddef.h>
#include <stdint.h>
void fnv1a128_plain(const unsigned char *p, size_t n, uint64_t out[2]) {
    unsigned __int128 h = ((unsigned __int128)0x6c62272e07bb0142ULL << 64) | 0x62b821756295c58dULL;
    const unsigned __int128 prime = ((unsigned __int128)0x0000000001000000ULL << 64) | 0x000000000000013bULL;
    for (size_t i = 0; i < n; i++) { h ^= p[i]; h *= prime; }
    out[0] = (uint64_t)(h >> 64);
    out[1] = (uint64_t)h;
}
"""

FNV128_OFFSET = 0x6C62272E07BB014262B821756295C58D


def find_cc() -> str | None:
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand.split()[0]):
            return cand
    return None


def build_plain_c(tmp: Path):
    """Return (callable, None) or (None, reason)."""
    cc = find_cc()
    if cc is None:
        return None, "no C compiler found (set CC)"
    src = tmp / "fnv_plain.c"
    lib = tmp / ("fnv_plain" + (".dylib" if sys.platform == "darwin" else ".so"))
    src.write_text(PLAIN_C)
    cmd = cc.split() + ["-O2", "-ffp-contract=off", "-shared", "-fPIC", str(src), "-o", str(lib)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"compile failed: {exc}"
    if proc.returncode != 0:
        return None, "compile failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
    try:
        dll = ctypes.CDLL(str(lib))
    except OSError as exc:
        return None, f"could not load: {exc}"
    fn = dll.fnv1a128_plain
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint64)]
    out = (ctypes.c_uint64 * 2)()

    def plain(buf: np.ndarray) -> int:
        fn(buf.ctypes.data, buf.nbytes, out)
        return (out[0] << 64) | out[1]

    return plain, None


def time_it(fn, repeat: int) -> tuple[float, object]:
    fn()  # warm up: page faults, caches, lazy imports
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=256, help="buffer size in MiB (default 256)")
    ap.add_argument("--repeat", type=int, default=7, help="timed runs per row (default 7)")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    args = ap.parse_args(argv)
    if args.mb <= 0 or args.repeat <= 0:
        ap.error("--mb and --repeat must be positive")

    nbytes = args.mb * 1024 * 1024
    buf = np.random.default_rng(0).integers(0, 256, size=nbytes, dtype=np.uint8)
    dst = np.empty_like(buf)

    rows: dict[str, dict] = {}

    def record(name, seconds=None, reason=None):
        if seconds is None:
            rows[name] = {"gbps": None, "seconds": None, "unavailable": reason}
        else:
            rows[name] = {"gbps": nbytes / seconds / 1e9, "seconds": seconds}

    try:
        import grit.fingerprint as fp
    except ImportError as exc:
        fp, fp_reason = None, f"grit not importable: {exc}"
    else:
        fp_reason = None if fp.NATIVE else "grit._ext not built (pure Python would take hours)"

    ext_value = None
    if fp_reason is None:
        empty = b""
        sec, d = time_it(lambda: fp.digest([buf, empty, empty, empty]), args.repeat)
        record("ext digest", sec)
        sec, ext_value = time_it(lambda: fp.fnv1a128(buf), args.repeat)
        record("ext fnv1a128", sec)
        ext = fp._native
        was = ext.fnv_wide() if hasattr(ext, "fnv_wide") else False
        # each chain-and-sums loop the machine has (AVX-512 VNNI, AVX2), then the
        # interleaved 128-bit multiplies ("mul" rows)
        loops = [(f" {loop}", loop) for loop in getattr(ext, "FNV_WIDE_LOOPS", ())]
        for tag, wide in [*loops, (" mul", False)] if was else [("", False)]:
            if was:
                ext.fnv_wide(wide)
            for k in range(2, fp.LANES + 1):
                parts = [[buf[i * nbytes // k:(i + 1) * nbytes // k], empty, empty, empty]
                         for i in range(k)]
                sec, got = time_it(lambda: fp.digests(parts), args.repeat)
                if got != [fp.digest(q) for q in parts]:
                    print(f"ext digests×{k} differs from one digest at a time")
                    return 1
                record(f"ext digests×{k}{tag}", sec)
            # the same digests, each array compared in the same loop with a copy of it
            # (what grit convert's proof does): GB/s over the hashed bytes, as above
            for k in range(1, fp.LANES + 1):
                parts = [[buf[i * nbytes // k:(i + 1) * nbytes // k], empty, empty, empty]
                         for i in range(k)]
                copies = [[dst[i * nbytes // k:(i + 1) * nbytes // k], empty, empty, empty]
                          for i in range(k)]
                np.copyto(dst, buf)
                sec, got = time_it(lambda: fp.digests_compared(parts, copies), args.repeat)
                if got != [(fp.digest(q), True) for q in parts]:
                    print(f"ext digests+cmp×{k} differs from one digest at a time")
                    return 1
                record(f"ext dig+cmp×{k}{tag}", sec)
        if was:
            ext.fnv_wide(was)
    else:
        record("ext digest", reason=fp_reason)
        record("ext fnv1a128", reason=fp_reason)

    plain_value = None
    with tempfile.TemporaryDirectory(prefix="grit-bench-") as tmp:
        plain, reason = build_plain_c(Path(tmp))
        if plain is None:
            record("plain C", reason=reason)
        else:
            sec, plain_value = time_it(lambda: plain(buf), args.repeat)
            record("plain C", sec)

    sec, _ = time_it(lambda: np.copyto(dst, buf), args.repeat)
    record("memcpy", sec)

    agree = None
    if ext_value is not None and plain_value is not None:
        agree = ext_value == plain_value
    base = rows["plain C"]["gbps"]
    for name in [n for n in rows if n.startswith("ext")]:
        g = rows[name]["gbps"]
        rows[name]["ratio_vs_plain_c"] = (g / base) if (g and base) else None

    print(f"grit digest benchmark: {args.mb} MiB buffer, median of {args.repeat}, "
          f"{platform.machine()} / Python {platform.python_version()}"
          + (f" / ext {getattr(fp._native, 'FNV128_IMPL', '?')}" if fp_reason is None else ""))
    print(f"{'row':<19} {'GB/s':>8} {'ms':>9} {'ext/plain C':>12}")
    for name, r in rows.items():
        if r["gbps"] is None:
            print(f"{name:<19} {'—':>8} {'—':>9} {'':>12}  unavailable: {r['unavailable']}")
            continue
        ratio = r.get("ratio_vs_plain_c")
        rtxt = f"{ratio:.3f}" if ratio is not None else ""
        print(f"{name:<19} {r['gbps']:>8.3f} {r['seconds'] * 1e3:>9.1f} {rtxt:>12}")
    if agree is not None:
        print(f"ext fnv1a128 == plain C: {'yes' if agree else 'NO — MISMATCH'}")

    if args.json:
        report = {
            "mib": args.mb, "bytes": nbytes, "repeat": args.repeat,
            "machine": platform.machine(), "python": platform.python_version(),
            "rows": rows, "ext_equals_plain_c": agree,
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0 if agree is not False else 1


if __name__ == "__main__":
    sys.exit(main())
