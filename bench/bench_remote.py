#!/usr/bin/env python3
"""``grit scan`` of remote checkpoints: bytes moved at level 1, ``--jobs``
against a slow server, and a rescan with a warm header cache.

    python bench/bench_remote.py [--size-mb 1024] [--shards 8] [--model 1b|8b] [--files 64]
                                 [--latency 0.05] [--jobs 1,2,4,8,16] [--repeat 3] [--json]

Everything is served by the loopback test server (tests/http_server.py:
threaded, Range requests, counting requests and body bytes, a fixed latency
per request), from a checkpoint written in a temporary directory:

  level 1            a --size-mb checkpoint of --shards safetensors shards
                     (decoder layers of Llama-3.2-1B's shapes, or --model 8b
                     Llama-3.1-8B's: the projections MXFP4 GRIT arrays by
                     grit.save, the norms F32; then the same layers as F16
                     tensors by safetensors.numpy) with its shard index
                     and config.json, scanned by URL: requests, body bytes, and
                     body bytes / checkpoint bytes (target <= 0.01 %); the
                     peer, huggingface_hub's get_safetensors_metadata (two
                     range requests per shard) against the Hub-shaped
                     endpoint (tests/hub_server.py), when both are there
  --jobs N           --files small safetensors files, every request delayed
                     --latency s (the server in a process of its own),
                     scanned (level 1, then --deep) with jobs =
                     each of --jobs: median
                     wall time over --repeat runs and the speed-up over
                     jobs = 1 (target >= 0.8 N up to N = 16); the reports
                     are checked equal to the jobs = 1 one
  warm cache         the level-1 scan run again on a filled header cache:
                     body bytes past the one-byte size probe of each file
                     asked for (target 0)
  many checkpoints   --entries remote checkpoints, every request delayed
                     --latency s (the server apart, as above), by grit.scan.distributed.scan_many in this
                     process and on a LocalCluster (2 workers x --threads):
                     wall times, and the records checked equal
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))


def _layer(d: int, kv: int, mlp: int) -> dict[str, tuple[int, int]]:
    return {"self_attn.q_proj": (d, d), "self_attn.k_proj": (kv, d),
            "self_attn.v_proj": (kv, d), "self_attn.o_proj": (d, d),
            "mlp.gate_proj": (mlp, d), "mlp.up_proj": (mlp, d), "mlp.down_proj": (d, mlp)}


#: the projections of one decoder layer (their norms are two F32 vectors):
#: Llama-3.2-1B's shapes and Llama-3.1-8B's
LAYERS = {"1b": _layer(2048, 512, 8192), "8b": _layer(4096, 1024, 14336)}
LAYER = LAYERS["1b"]


def _checkpoint(d: str, size: int, shards: int, plain: bool = False,
                layer: dict = LAYER) -> tuple[dict[str, bytes], int]:
    """A synthetic checkpoint of about ``size`` bytes, layers of :data:`LAYER`
    spread over ``shards`` shards (MXFP4 GRIT arrays; F16 tensors written by
    safetensors.numpy when ``plain``): the files' bytes by name, and the
    bytes of its shards."""
    import numpy as np
    from safetensors.numpy import save_file

    import grit

    rng = np.random.default_rng(0)
    enc = {k: (rng.standard_normal(shape).astype(np.float16) if plain else
               grit.encode(rng.standard_normal(shape).astype(np.float32), grit.GRADE_MXFP4))
           for k, shape in layer.items()}
    norm = rng.standard_normal(next(iter(layer.values()))[1]).astype(np.float32)
    per_layer = sum(a.nbytes for a in enc.values()) + 2 * norm.nbytes
    layers = max(1, round(size / per_layer))
    shards = min(shards, layers)                   # a shard holds whole layers
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    wm = {}
    for i, name in enumerate(names):
        ts: dict = {}
        for j in range(i * layers // shards, (i + 1) * layers // shards):
            ts.update((f"model.layers.{j}.{k}.weight", a) for k, a in enc.items())
            ts[f"model.layers.{j}.input_layernorm.weight"] = norm
            ts[f"model.layers.{j}.post_attention_layernorm.weight"] = norm
        if plain:
            save_file(ts, os.path.join(d, name), metadata={"format": "pt"})
        else:
            grit.save(os.path.join(d, name), ts)
        wm.update((t, name) for t in ts)
    files = {n: open(os.path.join(d, n), "rb").read() for n in names}
    total = sum(len(b) for b in files.values())
    tensor_bytes = sum(len(b) - 8 - int.from_bytes(b[:8], "little") for b in files.values())
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": tensor_bytes}, "weight_map": wm}).encode()
    files["config.json"] = json.dumps({"architectures": ["LlamaForCausalLM"],
                                       "model_type": "llama"}).encode()
    return files, total


def _verdicts(rep) -> list:
    return [(f.code, f.file, f.tensor, f.message) for f in rep.findings]


def level_one(args, out: dict) -> None:
    for plain in (False, True):
        key = f"{args.model} {'plain F16 tensors' if plain else 'MXFP4 GRIT arrays'}"
        with tempfile.TemporaryDirectory() as d:
            files, total = _checkpoint(d, args.size_mb << 20, args.shards, plain,
                                       LAYERS[args.model])
        out["level1"][key] = _remote_scan(files, total)
        out["level1"][key]["peer"] = _peer(files, total)
        del files


def _remote_scan(files: dict[str, bytes], total: int) -> dict:
    from http_server import Server

    from grit.scan import scan

    s = Server()
    try:
        for n, b in files.items():
            s.files[f"/ckpt/{n}"] = b
            s.etag(f"/ckpt/{n}")         # the server hashes each file before anything is timed
        urls = [s.url(f"/ckpt/{n}") for n in sorted(files) if n.endswith(".safetensors")]
        with tempfile.TemporaryDirectory() as cache:
            os.environ["GRIT_CACHE_DIR"] = cache
            s.requests = s.body_bytes = 0
            t0 = time.perf_counter()
            rep = scan(urls)
            wall = time.perf_counter() - t0
            row = {"files": len(urls), "checkpoint_bytes": total, "requests": s.requests,
                   "body_bytes": s.body_bytes, "ratio_percent": 100 * s.body_bytes / total,
                   "wall_s": wall, "exit": rep.exit_code_graded,
                   "tensors": sum(f.tensors for f in rep.files)}
            s.requests = s.body_bytes = 0
            s.asked.clear()
            again = scan(urls)
            probes = sum(1 for p in s.asked if p in s.files)    # one 1-byte probe a file
            row["warm_cache"] = {"requests": s.requests, "body_bytes": s.body_bytes,
                                 "files_asked": probes, "payload_bytes": s.body_bytes - probes,
                                 "same_report": _verdicts(again) == _verdicts(rep)}
        return row
    finally:
        s.close()


def _peer(files: dict[str, bytes], total: int) -> dict:
    """huggingface_hub's get_safetensors_metadata (two ranged reads a shard)
    and ``grit scan hf://`` of the same files, on the Hub-shaped loopback
    endpoint (tests/hub_server.py); huggingface_hub's home, endpoint and
    agent registry kept on this machine, as in the tests."""
    try:
        from hub_server import HubServer
    except ImportError as e:
        return {"skipped": f"{type(e).__name__}: {e}"}
    hub = HubServer()
    try:
        home = tempfile.mkdtemp(prefix="grit-bench-hf-")
        os.environ.update(HF_HOME=home, HF_ENDPOINT=hub.endpoint, HF_HUB_DISABLE_TELEMETRY="1")
        try:
            import huggingface_hub
        except ImportError as e:
            return {"skipped": f"{type(e).__name__}: {e}"}
        from grit.io.hub import _hf                 # huggingface_hub as grit sets it up
        from grit.scan import scan
        _hf()
        sha = hub.commit("org/ckpt", files)
        import hub_server
        for b in files.values():      # the server's file hashes, before anything is timed
            hub_server.blob_id(b)
        hub.reset()
        t0 = time.perf_counter()
        meta = huggingface_hub.HfApi(endpoint=hub.endpoint).get_safetensors_metadata(
            "org/ckpt", revision=sha)
        wall = time.perf_counter() - t0
        n = sum(len(m.tensors) for m in meta.files_metadata.values())
        peer = {"tool": f"huggingface_hub {huggingface_hub.__version__} "
                        "get_safetensors_metadata", "requests": len(hub.requests),
                "body_bytes": hub.model_bytes(), "ratio_percent": 100 * hub.model_bytes() / total,
                "wall_s": wall, "tensors": n}
        hub.reset()
        t0 = time.perf_counter()
        rep = scan([f"hf://org/ckpt@{sha}"], cache=False)
        peer["grit_hf"] = {"requests": len(hub.requests), "body_bytes": hub.model_bytes(),
                           "ratio_percent": 100 * hub.model_bytes() / total,
                           "wall_s": time.perf_counter() - t0, "exit": rep.exit_code_graded}
        return peer
    finally:
        hub.close()


def _serve_apart(files: dict[str, bytes], latency: float, conn) -> None:
    """The loopback server in a process of its own (so that its threads do
    not share this process's interpreter lock with the scan being timed):
    sends its port, then answers "requests" with the count and "stop"."""
    from http_server import Server

    s = Server()
    s.files.update(files)
    s.latency = latency
    conn.send(s.httpd.server_port)
    while True:
        cmd = conn.recv()
        if cmd == "requests":
            conn.send(s.requests)
            s.requests = 0
        else:
            s.close()
            return


def jobs(args, out: dict) -> None:
    import multiprocessing

    import numpy as np

    import grit
    from grit.scan import scan

    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    a = grit.encode(x, grit.GRADE_MXFP4)
    files = {}
    with tempfile.TemporaryDirectory() as d:
        for i in range(args.files):
            p = os.path.join(d, f"m{i:03d}.safetensors")
            grit.save(p, {f"layer{i}.weight": a})
            files[f"/many/m{i:03d}.safetensors"] = open(p, "rb").read()
    here, there = multiprocessing.get_context("fork").Pipe()
    server = multiprocessing.get_context("fork").Process(
        target=_serve_apart, args=(files, args.latency, there), daemon=True)
    server.start()
    rows = []
    try:
        port = here.recv()
        urls = [f"http://127.0.0.1:{port}/many/m{i:03d}.safetensors" for i in range(args.files)]
        for deep in (False, True):
            ref = None
            base = None
            for n in args.jobs:
                times = []
                for _ in range(args.repeat):
                    here.send("requests")
                    here.recv()
                    t0 = time.perf_counter()
                    rep = scan(urls, cache=False, jobs=n, deep=deep)
                    times.append(time.perf_counter() - t0)
                    same = json.dumps(rep.to_dict(), default=str)
                    ref = same if ref is None else ref
                    assert same == ref, f"jobs={n}: the report differs from jobs=1's"
                here.send("requests")
                med = statistics.median(times)
                base = med if base is None else base
                rows.append({"deep": deep, "jobs": n, "median_s": med, "speedup": base / med,
                             "requests": here.recv(), "target": 0.8 * n,
                             "met": base / med >= 0.8 * n})
    finally:
        here.send("stop")
        server.join(10)
    out["jobs"] = {"files": args.files, "latency_s": args.latency, "rows": rows}


def many(args, out: dict) -> None:
    """--entries remote checkpoints (one file each, every request delayed
    --latency s, the server in a process of its own): scan_many in this
    process, then on a LocalCluster of two worker processes with --threads
    threads each (its start timed apart)."""
    import multiprocessing

    import numpy as np

    import grit
    from grit.scan.distributed import local_client, scan_many

    x = np.random.default_rng(3).standard_normal((64, 256)).astype(np.float32)
    a = grit.encode(x, grit.GRADE_MXFP4)
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "m.safetensors")
        grit.save(p, {"w": a})
        body = open(p, "rb").read()
    files = {f"/e{i:04d}/model.safetensors": body for i in range(args.entries)}
    here, there = multiprocessing.get_context("fork").Pipe()
    server = multiprocessing.get_context("fork").Process(
        target=_serve_apart, args=(files, args.latency, there), daemon=True)
    server.start()
    try:
        port = here.recv()
        entries = [f"http://127.0.0.1:{port}{k}" for k in files]

        def key(run):
            return sorted(json.dumps(r, sort_keys=True) for r in run.records)
        t0 = time.perf_counter()
        ref = scan_many(entries, cache=False)
        seq = time.perf_counter() - t0
        t0 = time.perf_counter()
        with local_client(n_workers=2, threads_per_worker=args.threads) as client:
            start = time.perf_counter() - t0
            client.run(lambda: __import__("grit.scan.distributed"))   # the imports, once
            t1 = time.perf_counter()
            got = scan_many(entries, client=client, cache=False)
            dask_s = time.perf_counter() - t1
        out["dask"] = {"entries": args.entries, "latency_s": args.latency,
                       "workers": 2, "threads_per_worker": args.threads,
                       "in_process_s": seq, "cluster_start_s": start, "dask_s": dask_s,
                       "speedup": seq / dask_s, "same_records": key(got) == key(ref),
                       "records": len(got.records)}
    finally:
        here.send("stop")
        server.join(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--model", choices=sorted(LAYERS), default="1b",
                    help="the layer shapes: Llama-3.2-1B's or Llama-3.1-8B's")
    ap.add_argument("--files", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--jobs", type=lambda v: [int(x) for x in v.split(",")],
                    default=[1, 2, 4, 8, 16])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--entries", type=int, default=128,
                    help="remote checkpoints of the Dask section")
    ap.add_argument("--threads", type=int, default=8,
                    help="threads per Dask worker (the work is I/O)")
    ap.add_argument("--skip", default="",
                    help="comma-separated sections to skip: level1,jobs,dask")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out: dict = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    skip = set(filter(None, args.skip.split(",")))
    if "level1" not in skip:
        out["level1"] = {}
        level_one(args, out)
    if "jobs" not in skip:
        jobs(args, out)
    if "dask" not in skip:
        many(args, out)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for key, r in out.get("level1", {}).items():
        print(f"level 1, {key}: {r['files']} shards, {r['tensors']} tensors, "
              f"{r['checkpoint_bytes'] / 2**20:.0f} MiB: {r['requests']} requests, "
              f"{r['body_bytes']:,} body bytes = {r['ratio_percent']:.5f} % of the checkpoint "
              f"({r['wall_s']:.2f} s, exit {r['exit']})")
        p = r.get("peer") or {}
        if "skipped" in p:
            print(f"  peer: skipped ({p['skipped']})")
        elif p:
            g = p["grit_hf"]
            print(f"  grit scan hf:// (loopback Hub): {g['requests']} requests, "
                  f"{g['body_bytes']:,} model-file bytes = {g['ratio_percent']:.5f} % "
                  f"({g['wall_s']:.2f} s, exit {g['exit']})")
            print(f"  peer {p['tool']}: {p['requests']} requests, {p['body_bytes']:,} "
                  f"model-file bytes = {p['ratio_percent']:.5f} % ({p['wall_s']:.2f} s, "
                  f"{p['tensors']} entries)")
        w = r["warm_cache"]
        print(f"  warm cache: {w['requests']} requests, {w['body_bytes']} body bytes: one probe "
              f"byte for each of {w['files_asked']} files (shards, config.json, index), "
              f"{w['payload_bytes']} more; same report: {w['same_report']}")
    if "jobs" in out:
        j = out["jobs"]
        print(f"--jobs: {j['files']} files, {j['latency_s'] * 1000:.0f} ms per request")
        for r in j["rows"]:
            print(f"  {'--deep ' if r['deep'] else 'level 1'} jobs {r['jobs']:>2}: "
                  f"{r['median_s']:.3f} s ({r['requests']} requests)  speed-up {r['speedup']:.2f} "
                  f"(target {r['target']:.1f}: {'met' if r['met'] else 'NOT met'})")
    if "dask" in out:
        k = out["dask"]
        print(f"many checkpoints: {k['entries']} remote entries, {k['latency_s'] * 1000:.0f} ms "
              f"per request: in process {k['in_process_s']:.2f} s; LocalCluster "
              f"{k['workers']}x{k['threads_per_worker']} threads {k['dask_s']:.2f} s "
              f"(started in {k['cluster_start_s']:.1f} s), speed-up {k['speedup']:.1f}; "
              f"{k['records']} records, equal: {k['same_records']}")


if __name__ == "__main__":
    main()
