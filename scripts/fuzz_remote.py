"""A seeded campaign of hostile HTTP servers against grit's remote reads.

Each case picks a behaviour of the loopback hostile server
(tests/hostile_server.py: silence, endless 1xx, trickled headers or body,
header floods, redirects to other schemes or in loops, wrong or lying
Content-Range, bodies cut short or reset, endless bodies and chunks,
malformed chunked encoding, gzip bombs, error statuses, garbage, an
invented GGUF of 2^32 KV entries) and a file to serve (a valid safetensors
or GGUF file, the same with bytes flipped, random bytes, a truncated
header), and then either reads a random range through
:class:`grit.io.http.HTTPSource` or scans the URL with ``grit.scan.scan``
— the Python API ``grit scan`` uses — under a short network policy.

A case *escapes* when the read raises anything but a GritError, or scan
raises at all.  It *hangs* when it runs past its bound: the policy's
worst case for the requests it may make (each request at most
``retry_time + timeout + bytes / min_rate``), times two, plus a second.
The campaign fails if the process's peak RSS grows past ``--rss-mb``.

    python scripts/fuzz_remote.py --cases 3000 --seed 1 [--workers 8]

prints the counts: cases, server exchanges (requests answered), outcomes
by kind, escapes, hangs and the RSS growth (all but the counts must be 0,
the growth under the bound).  tests/test_hostile_remote.py runs the same
engine at a CI budget.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import os
import random
import resource
import struct
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from grit.errors import GritError  # noqa: E402
from grit.io.http import HTTPSource, NetPolicy, use_policy  # noqa: E402
from hostile_server import HostileServer, endless_gguf  # noqa: E402

#: the policy every case runs under (short, so that a silent server costs little)
POLICY = NetPolicy(timeout=0.25, retries=1, backoff=0.01, retry_time=0.5, min_rate=1 << 16,
                   max_redirects=3)
#: the most requests one scan of one URL makes (probe, length, header, windows,
#: config.json, the index), for the hang bound
SCAN_REQUESTS = 12

#: behaviours and a generator of their parameters (rng -> dict)
BEHAVIOURS = {
    "ok": lambda r: {},
    "silent": lambda r: {},
    "continue": lambda r: {"pause": r.choice([0, 0.01, 0.1])},
    "interim": lambda r: {"n": r.choice([1, 3, 4, 5, 50])},
    "trickle_head": lambda r: {"pause": r.choice([0.02, 0.1])},
    "trickle_body": lambda r: {"pause": r.choice([0.001, 0.02, 0.1])},
    "many_headers": lambda r: {"n": r.choice([50, 99, 101, 1000])},
    "long_header": lambda r: {"n": r.choice([100, 60_000, 70_000, 1 << 20])},
    "redirect": lambda r: {"to": r.choice(["ftp://127.0.0.1/x", "file:///etc/passwd",
                                           "http://[::1/x", "gopher://h/", "/ok/model.gguf",
                                           "http://", "//127.0.0.1:1/x", "javascript:x"])},
    "redirect_loop": lambda r: {},
    "ignore_range": lambda r: {},
    "wrong_range": lambda r: {},
    "lie_size": lambda r: {"n": r.choice([0, 1, 10, 1 << 40, 2**64 - 1])},
    "short_body": lambda r: {},
    "reset": lambda r: {},
    "endless_body": lambda r: {},
    "bad_chunked": lambda r: {},
    "endless_chunks": lambda r: {"n": r.choice([1, 100, 4096])},
    "gzip": lambda r: {"bomb": r.choice(["", "1"])} if r.random() < 0.5 else {},
    "status": lambda r: {"n": r.choice([301, 304, 400, 401, 403, 404, 408, 416, 429, 500,
                                        503, 599, 999])},
    "garbage": lambda r: {},
    "no_status": lambda r: {},
}
#: the slow behaviours are drawn less often (each costs a timeout)
WEIGHT = {"silent": 1, "trickle_head": 1, "continue": 2, "trickle_body": 2,
          "redirect_loop": 2, "endless_body": 3, "endless_chunks": 3}


def _files(rng: random.Random) -> dict[str, bytes]:
    import numpy as np  # noqa: PLC0415
    from safetensors.numpy import save  # noqa: PLC0415
    st = save({"a": np.arange(64, dtype=np.float32), "b": np.ones((4, 8), np.int8)},
              metadata={"k": "v"})
    kv = b"".join(struct.pack("<Q", 3) + b"k%02d" % i + struct.pack("<IB", 0, i)
                  for i in range(5))
    gguf = b"GGUF" + struct.pack("<IQQ", 3, 0, 5) + kv
    out = {"st": st, "gguf": gguf, "random": rng.randbytes(300), "empty": b"",
           "cut": st[:20]}
    for i in range(8):
        base = bytearray(rng.choice([st, gguf]))
        for _ in range(rng.randint(1, 6)):
            base[rng.randrange(len(base))] = rng.randrange(256)
        out[f"flip{i}"] = bytes(base)
    return out


def run_case(server: HostileServer, rng: random.Random, names: list[str]) -> tuple[str, str]:
    """(kind of outcome, detail) of one case; the kind is ``escape`` for an
    escape."""
    b = rng.choices(list(BEHAVIOURS), [WEIGHT.get(k, 6) for k in BEHAVIOURS])[0]
    params = BEHAVIOURS[b](rng)
    name = rng.choice(names)
    ext = rng.choice([".safetensors", ".gguf", ".bin"])
    url = server.url(b, name + ext, **params)
    with use_policy(POLICY):
        if rng.random() < 0.5:
            try:
                h = HTTPSource(url)
                if h.size:
                    off = rng.randrange(h.size)
                    h.read(off, rng.randint(0, min(h.size - off, 1 << 16)))
                return "read ok", b
            except GritError as e:
                return f"read {type(e).__name__}", b
            except Exception as e:     # noqa: BLE001 - an escape is what is counted
                return "escape", f"{b} {params} {name}: {type(e).__name__}: {e}\n" + \
                    traceback.format_exc()
        from grit.scan import scan  # noqa: PLC0415
        try:
            rep = scan([url], cache=False)
        except Exception as e:         # noqa: BLE001
            return "escape", f"scan {b} {params} {name}: {type(e).__name__}: {e}\n" + \
                traceback.format_exc()
        codes = sorted({f.code for f in rep.findings})
        return "scan " + (",".join(codes) or "clean"), b


def bound(p: NetPolicy) -> float:
    one = p.retry_time + p.timeout + (1 << 16) / p.min_rate
    return 2 * SCAN_REQUESTS * one + 1.0


def campaign(cases: int, seed: int, workers: int = 8, rss_mb: float = 512,
             log=print) -> dict:
    rng = random.Random(seed)
    files = _files(rng)
    server = HostileServer(linger=2.0)
    server.files.update({k + ext: v for k, v in files.items()
                         for ext in (".safetensors", ".gguf", ".bin")})
    big = endless_gguf()
    for ext in (".safetensors", ".gguf", ".bin"):
        server.files["invented" + ext] = big
    names = list(files) + ["invented"]
    from hostile_server import _bomb  # noqa: PLC0415 - made before the baseline
    _bomb()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kinds: collections.Counter = collections.Counter()
    times: list[float] = []
    escapes: list[str] = []
    hangs: list[str] = []
    limit = bound(POLICY)
    t0 = time.perf_counter()

    def one(i: int):
        r = random.Random(f"{seed}/{i}")
        t = time.perf_counter()
        kind, detail = run_case(server, r, names)
        return kind, detail, time.perf_counter() - t

    try:
        with cf.ThreadPoolExecutor(workers) as pool:
            for i, (kind, detail, took) in enumerate(pool.map(one, range(cases)), 1):
                kinds[kind] += 1
                times.append(took)
                if kind == "escape":
                    escapes.append(detail)
                if took > limit:
                    hangs.append(f"{took:.1f} s > {limit:.1f} s: {kind} {detail}")
                if i % 500 == 0:
                    log(f"  ... {i:,} cases, {server.requests:,} exchanges, "
                        f"{time.perf_counter() - t0:.0f} s, {len(escapes)} escapes, "
                        f"{len(hangs)} hangs")
    finally:
        server.close()
    growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    times.sort()
    return {"cases": cases, "exchanges": server.requests, "seconds": time.perf_counter() - t0,
            "case_max_s": times[-1] if times else 0.0,
            "case_p99_s": times[int(0.99 * (len(times) - 1))] if times else 0.0,
            "kinds": dict(kinds), "escapes": escapes, "hangs": hangs, "rss_growth_mb": growth,
            "rss_ok": growth <= rss_mb, "bound_s": limit}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--rss-mb", type=float, default=512)
    a = ap.parse_args(argv)
    print(f"seed {a.seed}; cases {a.cases:,}; workers {a.workers}; policy {POLICY}")
    out = campaign(a.cases, a.seed, a.workers, a.rss_mb)
    print(f"\n{out['cases']:,} cases, {out['exchanges']:,} server exchanges in "
          f"{out['seconds']:.0f} s; a case took at most {out['case_max_s']:.2f} s (p99 "
          f"{out['case_p99_s']:.2f} s; hang bound {out['bound_s']:.1f} s)")
    for k, n in sorted(out["kinds"].items(), key=lambda kv: -kv[1]):
        print(f"  {k:40s} {n:,}")
    for e in out["escapes"][:10]:
        print("ESCAPE", e)
    for h in out["hangs"][:10]:
        print("HANG", h)
    print(f"escapes {len(out['escapes'])}, hangs {len(out['hangs'])}, "
          f"peak RSS growth {out['rss_growth_mb']:.0f} MiB (bound {a.rss_mb:.0f})")
    return 1 if out["escapes"] or out["hangs"] or not out["rss_ok"] else 0


if __name__ == "__main__":
    sys.exit(main())
