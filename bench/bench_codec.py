"""Encode/decode throughput of every registered grade, beside numpy memcpy and
gguf-py's dequantize/quantize for the GGUF-shaped types, in one run.

    python bench/bench_codec.py [--n 16777216] [--repeat 5] [--json out.json]

Reports medians: elements/s, GB/s of binary32 values (decode writes 4 bytes per
element, encode reads 4), and the ratio to the peer row measured in the same run.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import grit


def _median_s(fn, repeat: int) -> float:
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _ggml_blocks(qtype_name: str, n: int, rng: np.random.Generator):
    """Random but finite ggml blocks of a type (fp16 fields set to sane values)."""
    from gguf import GGMLQuantizationType as T
    from gguf.quants import GGML_QUANT_SIZES
    qt = getattr(T, qtype_name)
    blk, size = GGML_QUANT_SIZES[qt]
    raw = rng.integers(0, 256, (n // blk, size), dtype=np.uint8)
    if qtype_name == "Q4_K":  # d, dmin: binary16 in [2^-10, 2^-6)
        raw[:, 0:4] = np.frombuffer(
            (rng.random((n // blk, 2)) * 0.01 + 0.001).astype(np.float16).tobytes(),
            np.uint8).reshape(-1, 4)
    if qtype_name == "MXFP4":  # E8M0 exponent away from 0xFF
        raw[:, 0] = rng.integers(100, 140, n // blk)
    if qtype_name == "NVFP4":
        raw[:, :4] = rng.integers(0x20, 0x50, (n // blk, 4))
    return qt, raw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    n = a.n - a.n % 256
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    rows: dict[str, dict] = {}

    def row(name, secs, peer=None):
        rows[name] = {"seconds": secs, "Mel_per_s": n / secs / 1e6, "GB_per_s": 4 * n / secs / 1e9,
                      "peer": peer}

    dst = np.empty_like(x)
    row("numpy memcpy (f32)", _median_s(lambda: np.copyto(dst, x), a.repeat))

    try:
        import gguf.quants as gq
        have_gguf = True
    except ImportError:
        have_gguf = False
    peers = {}
    if have_gguf:
        for t in ("MXFP4", "Q4_K", "NVFP4", "Q8_0"):
            try:
                qt, raw = _ggml_blocks(t, n, rng)
                row(f"gguf-py dequantize {t}", _median_s(lambda: gq.dequantize(raw, qt), a.repeat))
                peers[t] = f"gguf-py dequantize {t}"
            except Exception as e:  # a type this gguf-py version lacks
                rows[f"gguf-py dequantize {t}"] = {"unavailable": str(e)[:80]}
        try:
            from gguf import GGMLQuantizationType as T
            row("gguf-py quantize MXFP4", _median_s(lambda: gq.quantize(x.reshape(-1, 4096), T.MXFP4),
                                                    max(1, a.repeat // 2)))
            peers["qMXFP4"] = "gguf-py quantize MXFP4"
        except Exception as e:
            rows["gguf-py quantize MXFP4"] = {"unavailable": str(e)[:80]}

    peer_of = {"GRADE_MXFP4": ("MXFP4", "qMXFP4"), "GRADE_MXFP4_RNE": ("MXFP4", "qMXFP4"),
               "GRADE_Q4KS": ("Q4_K", None), "GRADE_NVF4": ("NVFP4", None),
               "GRADE_NVF4_RTZ": ("NVFP4", None), "GRADE_I8S24": ("Q8_0", None)}
    for name in ("GRADE_MXFP4", "GRADE_MXFP4_RNE", "GRADE_Q4KS", "GRADE_NVF4",
                 "GRADE_NVF4_RTZ", "GRADE_I8S24"):
        g = getattr(grit, name)
        arr = grit.encode(x[:4096], g)  # warm
        row(f"grit encode {name}", _median_s(lambda: grit.encode(x, g), max(1, a.repeat // 2)),
            peers.get(peer_of[name][1]))
        arr = grit.encode(x, g)
        row(f"grit decode {name}", _median_s(lambda: grit.decode(arr), a.repeat),
            peers.get(peer_of[name][0]))

    print(f"n = {n:,} elements, medians of {a.repeat}")
    print(f"{'row':34} {'M el/s':>9} {'GB/s f32':>9} {'x peer':>8}  peer")
    for name, r in rows.items():
        if "unavailable" in r:
            print(f"{name:34} {'-':>9} {'-':>9} {'':>8}  unavailable: {r['unavailable']}")
            continue
        ratio = ""
        if r["peer"] and r["peer"] in rows and "seconds" in rows[r["peer"]]:
            r["ratio_vs_peer"] = rows[r["peer"]]["seconds"] / r["seconds"]
            ratio = f"{r['ratio_vs_peer']:.2f}"
        print(f"{name:34} {r['Mel_per_s']:9.1f} {r['GB_per_s']:9.2f} {ratio:>8}  {r['peer'] or ''}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"n": n, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
