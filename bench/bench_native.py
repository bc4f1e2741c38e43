"""Native codec kernels (grit._kernels) beside their peers, in one run.

    python bench/bench_native.py [--n 16777216] [--repeat 5] [--json out.json]
                                 [--no-rss] [--rss-n 268435456] [--rss-numpy]

Rows (medians of --repeat calls; slow rows of fewer):
  * numpy memcpy (f32): np.copyto of the n binary32 values, the bandwidth yardstick;
  * gguf-py dequantize MXFP4 / Q4_K / NVFP4 / Q8_0 and gguf-py quantize MXFP4;
  * reference scalar C loop (ggml block layout) for MXFP4 and Q4_K, compiled from
    bench/ref_dequant.c by this run (cc -O2) and checked against gguf-py;
  * grit decode / encode of every registered grade: native with 1 and 2 threads,
    and the numpy path (grit.native.NATIVE = False).

Every decode row returns a new float32 array, as grit.decode does.  Ratios are
peer seconds / row seconds; "% memcpy" is the row's binary32 bandwidth over
np.copyto's.  The peak-RSS check decodes a --rss-n element MXFP4 array in a
fresh process and reports resource.getrusage ru_maxrss against the 4-byte
output it must allocate.
"""
from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import grit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_codec import _ggml_blocks, _median_s  # noqa: E402  (same block builders as bench_codec)

HERE = os.path.dirname(os.path.abspath(__file__))
GRADES = ("GRADE_MXFP4", "GRADE_MXFP4_RNE", "GRADE_Q4KS", "GRADE_NVF4", "GRADE_NVF4_RTZ",
          "GRADE_I8S24")
GGUF_PEER = {"GRADE_MXFP4": "MXFP4", "GRADE_MXFP4_RNE": "MXFP4", "GRADE_Q4KS": "Q4_K",
             "GRADE_NVF4": "NVFP4", "GRADE_NVF4_RTZ": "NVFP4", "GRADE_I8S24": "Q8_0"}
C_PEER = {"GRADE_MXFP4": "MXFP4", "GRADE_MXFP4_RNE": "MXFP4", "GRADE_Q4KS": "Q4_K"}
C_LABEL = "reference scalar C loop (ggml block layout)"
# the targets: (row, peer row, minimum ratio)
TARGETS = [
    ("grit decode GRADE_MXFP4 native 1t", "gguf-py dequantize MXFP4", 4.0),
    ("grit decode GRADE_Q4KS native 1t", "gguf-py dequantize Q4_K", 3.75),
    ("grit decode GRADE_NVF4 native 1t", "gguf-py dequantize NVFP4", 6.5),
    ("grit encode GRADE_MXFP4 native 1t", "gguf-py quantize MXFP4", 11.0),
]

dm = importlib.import_module("grit.native")


def _quiet(fn):
    """fn without numpy's floating-point warnings (gguf-py overflows to inf
    on some random blocks; the values are not what is measured)."""
    def run():
        with np.errstate(all="ignore"):
            return fn()
    return run


def _build_c_peer(tmp: str):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        return None, "no C compiler"
    so = os.path.join(tmp, "ref_dequant.so")
    r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", so,
                        os.path.join(HERE, "ref_dequant.c")], capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip()[:80]
    lib = ctypes.CDLL(so)
    for f in (lib.ref_dequant_mxfp4, lib.ref_dequant_q4k):
        f.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
        f.restype = None
    return lib, None


def _c_dequant(fn, raw: np.ndarray, per_block: int):
    def run():
        out = np.empty(raw.shape[0] * per_block, dtype=np.float32)
        fn(raw.ctypes.data, raw.shape[0], out.ctypes.data)
        return out
    return run


def _rss_child(n: int, native: bool) -> None:
    """Decode an n-element MXFP4 array of random plane bytes; print peak RSS."""
    dm.NATIVE = native
    rng = np.random.default_rng(0)
    data = rng.bytes(n // 2)
    scale = rng.integers(100, 140, n // 32, dtype=np.uint8).tobytes()
    arr = grit.GritArray(grit.GRADE_MXFP4.descriptor(), (n,), [data, scale, b"", b""])
    with open("/proc/self/statm") as f:
        before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    out = grit.decode(arr)
    secs = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert out.shape == (n,)
    print(json.dumps({"n": n, "native": native, "rss_before": before,
                      "maxrss_before": peak_before, "maxrss": peak, "seconds": secs}))


def _rss(n: int, native: bool) -> dict:
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--_rss-child", str(n),
                        "1" if native else "0"], capture_output=True, text=True)
    if r.returncode:
        return {"error": r.stderr.strip()[-200:]}
    d = json.loads(r.stdout.strip().splitlines()[-1])
    d["increment"] = d["maxrss"] - d["rss_before"]
    d["output_bytes"] = 4 * n
    d["increment_over_output"] = d["increment"] / d["output_bytes"]
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--no-rss", action="store_true", help="skip the peak-RSS decode")
    ap.add_argument("--rss-n", type=int, default=1 << 28)
    ap.add_argument("--rss-numpy", action="store_true",
                    help="also measure the numpy path's peak RSS (several GiB)")
    ap.add_argument("--_rss-child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._rss_child:
        _rss_child(int(a._rss_child[0]), a._rss_child[1] == "1")
        return
    if dm._kernels is None:
        sys.exit("grit._kernels is not built: python setup.py build_ext --inplace")

    n = a.n - a.n % 256
    rep, slow = a.repeat, max(1, a.repeat // 2)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    rows: dict[str, dict] = {}

    def row(name, secs, **peers):
        rows[name] = {"seconds": secs, "Mel_per_s": n / secs / 1e6,
                      "GB_per_s": 4 * n / secs / 1e9, "peers": peers}

    dst = np.empty_like(x)
    row("numpy memcpy (f32)", _median_s(lambda: np.copyto(dst, x), rep))
    memcpy_s = rows["numpy memcpy (f32)"]["seconds"]

    # -- gguf-py
    blocks = {}
    try:
        import gguf.quants as gq
        from gguf import GGMLQuantizationType as T
    except ImportError:
        gq = None
        for t in ("MXFP4", "Q4_K", "NVFP4", "Q8_0"):
            rows[f"gguf-py dequantize {t}"] = {"unavailable": "gguf-py not installed"}
    if gq is not None:
        for t in ("MXFP4", "Q4_K", "NVFP4", "Q8_0"):
            try:
                qt, raw = _ggml_blocks(t, n, rng)
                blocks[t] = (qt, raw)
                row(f"gguf-py dequantize {t}",
                    _median_s(_quiet(lambda: gq.dequantize(raw, qt)), rep))
            except Exception as e:  # a type this gguf-py version lacks
                rows[f"gguf-py dequantize {t}"] = {"unavailable": str(e)[:80]}
        try:
            row("gguf-py quantize MXFP4",
                _median_s(_quiet(lambda: gq.quantize(x.reshape(-1, 4096), T.MXFP4)), slow))
        except Exception as e:
            rows["gguf-py quantize MXFP4"] = {"unavailable": str(e)[:80]}

    # -- the plain C peer, built now
    with tempfile.TemporaryDirectory() as tmp:
        lib, why = _build_c_peer(tmp)
        for t, fn_name, per in (("MXFP4", "ref_dequant_mxfp4", 32),
                                ("Q4_K", "ref_dequant_q4k", 256)):
            name = f"{C_LABEL} {t}"
            if lib is None:
                rows[name] = {"unavailable": why}
                continue
            if t in blocks:
                raw = blocks[t][1]
            else:  # no gguf-py: the same block builder needs it; random bytes then
                raw = rng.integers(0, 256, (n // per, 17 if per == 32 else 144), dtype=np.uint8)
            raw = np.ascontiguousarray(raw)
            run = _c_dequant(getattr(lib, fn_name), raw, per)
            if gq is not None and t in blocks:   # the peer must compute what gguf-py does
                ref = _quiet(lambda: gq.dequantize(raw[:64], blocks[t][0]))().reshape(-1)
                got = _c_dequant(getattr(lib, fn_name), raw[:64], per)()
                if not np.allclose(got, ref, rtol=1e-6, atol=0, equal_nan=True):
                    rows[name] = {"unavailable": "disagrees with gguf-py"}
                    continue
            row(name, _median_s(run, rep))

    # -- grit
    for gname in GRADES:
        g = getattr(grit, gname)
        arr = grit.encode(x, g)
        peer_d = {"gguf": f"gguf-py dequantize {GGUF_PEER[gname]}"}
        if gname in C_PEER:
            peer_d["C"] = f"{C_LABEL} {C_PEER[gname]}"
        peer_e = {"gguf": "gguf-py quantize MXFP4"} if gname.startswith("GRADE_MXFP4") else {}
        for label, native, threads in (("native 1t", True, 1), ("native 2t", True, 2),
                                       ("numpy path", False, None)):
            dm.NATIVE, dm.THREADS = native, threads
            grit.decode(grit.encode(x[:4096], g))            # warm
            row(f"grit decode {gname} {label}",
                _median_s(lambda: grit.decode(arr), rep if native else slow), **peer_d)
            row(f"grit encode {gname} {label}",
                _median_s(lambda: grit.encode(x, g), rep if native else slow), **peer_e)
        dm.NATIVE, dm.THREADS = True, None
        arr = None                       # free it before the next grade

    for r in rows.values():
        if "seconds" not in r:
            continue
        r["pct_memcpy"] = 100.0 * memcpy_s / r["seconds"]
        r["ratios"] = {k: rows[p]["seconds"] / r["seconds"]
                       for k, p in r["peers"].items() if "seconds" in rows.get(p, {})}

    targets = []
    for rname, pname, need in TARGETS:
        if "seconds" in rows.get(rname, {}) and "seconds" in rows.get(pname, {}):
            ratio = rows[pname]["seconds"] / rows[rname]["seconds"]
            r2 = rname.replace(" 1t", " 2t")
            ratio2 = rows[pname]["seconds"] / rows[r2]["seconds"]
            targets.append({"row": rname, "peer": pname, "target": need, "ratio_1t": ratio,
                            "ratio_2t": ratio2, "met_1t": ratio >= need, "met_2t": ratio2 >= need})
        else:
            targets.append({"row": rname, "peer": pname, "target": need, "met_1t": None})

    rss = {}
    if not a.no_rss:
        rss["native"] = _rss(a.rss_n, True)
        if a.rss_numpy:
            rss["numpy path"] = _rss(a.rss_n, False)

    print(f"n = {n:,} elements, medians of {rep} (numpy-path and quantize rows: {slow}); "
          f"kernels: {dm._kernels.simd()}, {os.cpu_count()} CPUs")
    print(f"{'row':58} {'M el/s':>9} {'GB/s f32':>9} {'%memcpy':>8}  ratios (peer s / row s)")
    for name, r in rows.items():
        if "unavailable" in r:
            print(f"{name:58} {'-':>9} {'-':>9} {'-':>8}  unavailable: {r['unavailable']}")
            continue
        rat = "  ".join(f"{v:.2f}x vs {r['peers'][k]}" for k, v in r["ratios"].items())
        print(f"{name:58} {r['Mel_per_s']:9.1f} {r['GB_per_s']:9.2f} "
              f"{r['pct_memcpy']:7.0f}%  {rat}")
    print("\ntargets (native 1 thread; 2 threads in brackets):")
    for t in targets:
        if t["met_1t"] is None:
            print(f"  {t['row']} >= {t['target']}x {t['peer']}: not measured")
            continue
        print(f"  {t['row']} >= {t['target']}x {t['peer']}: {t['ratio_1t']:.2f}x "
              f"{'MET' if t['met_1t'] else 'NOT MET'} [{t['ratio_2t']:.2f}x "
              f"{'met' if t['met_2t'] else 'not met'}]")
    dec_rows = [k for k in rows if k.startswith("grit decode") and "native" in k
                and "seconds" in rows[k]]
    below = [k for k in dec_rows if rows[k]["pct_memcpy"] < 40]
    print(f"  native decode >= 40% of memcpy bandwidth: "
          f"{len(dec_rows) - len(below)}/{len(dec_rows)} rows" +
          (f"; below: {', '.join(below)}" if below else ""))
    for label, d in rss.items():
        if "error" in d:
            print(f"\npeak RSS ({label}): failed: {d['error']}")
            continue
        print(f"\npeak RSS, decode of {d['n']:,} MXFP4 elements ({label}, {d['seconds']:.2f} s): "
              f"ru_maxrss {d['maxrss'] / 2**20:.0f} MiB (before decode: "
              f"{d['maxrss_before'] / 2**20:.0f} MiB); RSS before decode "
              f"{d['rss_before'] / 2**20:.0f} MiB; growth {d['increment'] / 2**20:.0f} MiB "
              f"= {d['increment_over_output']:.3f} x the {d['output_bytes'] / 2**20:.0f} MiB "
              f"output")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"n": n, "repeat": rep, "simd": dm._kernels.simd(), "rows": rows,
                       "targets": targets, "peak_rss": rss}, f, indent=2)


if __name__ == "__main__":
    main()
