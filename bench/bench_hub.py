#!/usr/bin/env python3
"""A level-1 audit of N Hub repositories: ``grit scan`` against
huggingface_hub's ``get_safetensors_metadata``, on the same server in the
same run.

    python bench/bench_hub.py [--repos 100] [--latency 0.05] [--repeat 1]
                              [--peer-threads 32] [--jobs 32] [--no-resume] [--json OUT]

The server (tests/hub_server.py, in a process of its own) is Hub-shaped:
the API's repository answer and ranged reads of each file at a commit,
every request answered after ``--latency`` seconds.  It holds ``--repos``
repositories (tests/hub_repos.py), a third of each kind — plain bf16,
compressed-tensors NVFP4, GRIT MXFP4 — each three shards, an index and a
config.json; one repository in five of each kind has a planted defect a
level-1 scan must find (a truncated shard: S127; an NVFP4 global scale in
the other direction: S322; a GRIT data plane shorter than its
descriptor: S101).  Every contender starts on a cold cache:

  dask      ``grit scan --engine dask --output OUT MANIFEST``, the CLI as
            documented (a LocalCluster started for the run, its default size)
  jobs      ``grit scan --jobs J --output OUT.json MANIFEST``, one report of
            every repository, in one process
  peer      ``HfApi.get_safetensors_metadata(repo)`` for every repository on
            a thread pool of --peer-threads threads, in this process

and for each: the wall time (median over --repeat runs), requests and body
bytes per repository (by kind; the API's JSON answers included), and the
planted defects found (and the findings on clean repositories).  Then, once,
the dask run is killed half-way and resumed with ``--resume OUT``: every
entry must have exactly one complete record and every file record once.
The load average of the machine is printed before and after.
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

KINDS = ("bf16", "nvfp4", "mxfp4")
_REPO = re.compile(r"^/(?:api/models/)?org/(?P<name>[^/]+)")


def kind_of(i: int) -> str:
    return KINDS[i % 3]


def defect_of(i: int) -> bool:
    return (i // 3) % 5 == 0


def repo_of(i: int) -> str:
    return f"org/{kind_of(i)}-{i:05d}"


# ---------------------------------------------------------------------------
# the server, in a process of its own


def _serve(n: int, latency: float, conn) -> None:
    from hub_repos import kind_files  # noqa: PLC0415
    from hub_server import HubServer  # noqa: PLC0415

    s = HubServer()
    s.latency = {"api": latency, "resolve": latency}
    for i in range(n):
        s.commit(repo_of(i), kind_files(kind_of(i), defect_of(i)))
    conn.send(s.endpoint)
    while True:
        cmd = conn.recv()
        if cmd == "reset":
            s.reset()
            conn.send(None)
        elif cmd == "stats":
            with s._lock:
                by_repo: dict[str, int] = collections.Counter()
                for _, path in s.requests:
                    m = _REPO.match(path)
                    by_repo[m["name"] if m else "?"] += 1
                conn.send({"requests": len(s.requests), "by_repo": dict(by_repo),
                           "body_bytes": s.body_bytes, "api_bytes": s.api_bytes})
        else:
            break
    s.close()


class Served:
    def __init__(self, n: int, latency: float):
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(n, latency, child), daemon=True)
        self.proc.start()
        self.endpoint = self.conn.recv()

    def ask(self, cmd: str):
        self.conn.send(cmd)
        return self.conn.recv()

    def close(self) -> None:
        self.conn.send("stop")
        self.proc.join(10)


# ---------------------------------------------------------------------------
# the contenders


def _env(endpoint: str, home: str) -> dict:
    env = dict(os.environ)
    env.update(HF_ENDPOINT=endpoint, GRIT_CACHE_DIR=os.path.join(home, "grit"),
               HF_HOME=os.path.join(home, "hf"), HF_HUB_DISABLE_TELEMETRY="1",
               PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    env.pop("HF_TOKEN", None)
    return env


def _per_repo(stats: dict, n: int) -> dict:
    """Requests per repository (all, and by kind) and body bytes per repository."""
    by_kind: dict[str, list[int]] = {k: [] for k in KINDS}
    for i in range(n):
        by_kind[kind_of(i)].append(stats["by_repo"].get(repo_of(i).split("/")[1], 0))
    return {"requests": stats["requests"] / n,
            "requests_by_kind": {k: statistics.mean(v) for k, v in by_kind.items() if v},
            "bytes": (stats["body_bytes"] + stats["api_bytes"]) / n,
            "unattributed": stats["by_repo"].get("?", 0)}


def _key(f: dict) -> str:
    """A finding's code, else (records without one) its status name."""
    return f.get("code") or str(f.get("status"))


def _expected(kind: str) -> set[str]:
    """The planted defect's code and its status name (the records name one)."""
    from hub_repos import DEFECT_CODE  # noqa: PLC0415

    from grit.scan.findings import Finding  # noqa: PLC0415
    code = DEFECT_CODE[kind]
    return {code, Finding(code, "f", None, "").status}


def _codes_by_repo(records: list[dict]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = collections.defaultdict(set)
    for r in records:
        name = r.get("entry") or r.get("path") or ""
        m = re.match(r"^hf://org/([^/@]+)", name)
        if m is None:
            continue
        out[m[1]].update(_key(f) for f in _with_consequences(r.get("findings", [])))
    return out


def _with_consequences(findings: list[dict]):
    """Each finding and, under it, those it caused (a short shard's S156
    holds the tensors it cuts: their S127)."""
    for f in findings:
        yield f
        yield from _with_consequences(f.get("consequences", []))


def _defects(codes: dict[str, set[str]], n: int) -> dict:
    planted = [i for i in range(n) if defect_of(i)]
    found = [i for i in planted if _expected(kind_of(i)) & codes.get(repo_of(i)[4:], set())]
    clean: collections.Counter = collections.Counter()
    for i in range(n):
        if not defect_of(i):
            clean.update(codes.get(repo_of(i)[4:], set()))
    return {"planted": len(planted), "found": len(found), "clean_repo_codes": dict(clean)}


def run_dask(srv: Served, manifest: str, n: int, work: str) -> dict:
    out = os.path.join(work, "dask.jsonl")
    env = _env(srv.endpoint, os.path.join(work, "home-dask"))
    srv.ask("reset")
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "grit.cli", "scan", "--engine", "dask",
                        "--output", out, manifest], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    stats = srv.ask("stats")
    recs = [json.loads(x) for x in open(out)]
    entries = [x for x in recs if x["type"] == "entry"]
    return {"wall": wall, "exit": r.returncode, "entries": len(entries),
            "complete": sum(x["complete"] for x in entries), **_per_repo(stats, n),
            "defects": _defects(_codes_by_repo(recs), n),
            "stderr": r.stderr[-400:] if r.returncode not in (0, 1, 2, 3) else ""}


def run_jobs(srv: Served, manifest: str, n: int, work: str, jobs: int) -> dict:
    out = os.path.join(work, "jobs.json")
    env = _env(srv.endpoint, os.path.join(work, "home-jobs"))
    srv.ask("reset")
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "grit.cli", "scan", "--jobs", str(jobs),
                        "--output", out, manifest], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    stats = srv.ask("stats")
    doc = json.load(open(out))
    codes: dict[str, set[str]] = collections.defaultdict(set)
    for f in _with_consequences(doc.get("findings", [])):
        m = re.match(r"^hf://org/([^/@]+)", f.get("file") or "")
        if m:
            codes[m[1]].add(_key(f))
    return {"wall": wall, "exit": r.returncode, "files": len(doc.get("files", [])),
            **_per_repo(stats, n), "defects": _defects(codes, n),
            "stderr": r.stderr[-400:] if r.returncode not in (0, 1, 2, 3) else ""}


def run_peer(srv: Served, n: int, work: str, threads: int) -> dict:
    home = os.path.join(work, "home-peer")
    os.environ.update(HF_ENDPOINT=srv.endpoint, HF_HOME=os.path.join(home, "hf"),
                      HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    import huggingface_hub  # noqa: PLC0415
    api = huggingface_hub.HfApi(endpoint=srv.endpoint, token=False)
    srv.ask("reset")
    failed = []

    def one(i: int) -> int:
        try:
            meta = api.get_safetensors_metadata(repo_of(i))
            return len(meta.files_metadata)
        except Exception as e:  # noqa: BLE001 - counted, the peer's own failures
            failed.append((i, type(e).__name__))
            return 0
    t = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        shards = list(pool.map(one, range(n)))
    wall = time.perf_counter() - t
    stats = srv.ask("stats")
    return {"wall": wall, "shards": sum(shards), "failed": len(failed),
            "tool": f"huggingface_hub {huggingface_hub.__version__} get_safetensors_metadata, "
                    f"{threads} threads", **_per_repo(stats, n)}


def kill_and_resume(srv: Served, manifest: str, n: int, work: str) -> dict:
    """The dask run killed once half the entries are written, then resumed."""
    out = os.path.join(work, "resume.jsonl")
    env = _env(srv.endpoint, os.path.join(work, "home-resume"))
    cmd = [sys.executable, "-m", "grit.cli", "scan", "--engine", "dask", "--output", out,
           manifest]
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    done = 0
    while p.poll() is None and done < n // 2:
        time.sleep(0.2)
        if os.path.exists(out):
            with open(out, "rb") as f:
                done = f.read().count(b'"type": "entry"')
    os.killpg(p.pid, signal.SIGKILL)       # the CLI and the cluster it started
    p.wait()
    at_kill = done
    r = subprocess.run(cmd[:6] + ["--resume", out, manifest], env=env, capture_output=True,
                       text=True)
    wall = time.perf_counter() - t
    recs = [json.loads(x) for x in open(out)]
    entries = collections.Counter(x["entry"] for x in recs if x["type"] == "entry")
    files = collections.Counter((x["entry"], x["path"]) for x in recs if x["type"] == "file")
    return {"killed_after_entries": at_kill, "exit": r.returncode, "wall_total": wall,
            "entries": len(entries), "entries_once": all(v == 1 for v in entries.values()),
            "files_once": all(v == 1 for v in files.values()),
            "complete": sum(x["complete"] for x in recs if x["type"] == "entry"),
            "every_entry": len(entries) == n,
            "stderr": r.stderr[-400:] if r.returncode not in (0, 1, 2, 3) or len(entries) != n
            else ""}


def _median(runs: list[dict]) -> dict:
    """The run of median wall time (its other numbers are that run's)."""
    runs = sorted(runs, key=lambda r: r["wall"])
    out = dict(runs[len(runs) // 2])
    out["walls"] = [round(r["wall"], 2) for r in runs]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repos", type=int, default=100)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--peer-threads", type=int, default=32)
    ap.add_argument("--jobs", type=int, default=32)
    ap.add_argument("--no-resume", action="store_true")
    ap.add_argument("--only", default="dask,jobs,peer")
    ap.add_argument("--json", default=None, help="write the results here too")
    args = ap.parse_args()
    n = args.repos
    work = tempfile.mkdtemp(prefix="grit-bench-hub-")
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    srv = Served(n, args.latency)
    built = time.perf_counter() - t0
    manifest = os.path.join(work, "repos.txt")
    with open(manifest, "w") as f:
        f.write("".join(f"hf://{repo_of(i)}\n" for i in range(n)))
    only = args.only.split(",")
    res: dict = {"repos": n, "latency": args.latency, "cores": os.cpu_count(),
                 "load_before": [round(x, 2) for x in load0], "server_built_s": round(built, 1)}
    try:
        for name in ("peer", "dask", "jobs"):
            if name not in only:
                continue
            runs = []
            for _ in range(args.repeat):
                shutil.rmtree(os.path.join(work, f"home-{name}"), ignore_errors=True)
                if name == "dask":
                    runs.append(run_dask(srv, manifest, n, work))
                elif name == "jobs":
                    runs.append(run_jobs(srv, manifest, n, work, args.jobs))
                else:
                    runs.append(run_peer(srv, n, work, args.peer_threads))
                print(f"  {name}: {runs[-1]['wall']:.1f} s", file=sys.stderr)
            res[name] = _median(runs)
        if "dask" in only and not args.no_resume:
            res["resume"] = kill_and_resume(srv, manifest, n, work)
    finally:
        srv.close()
        shutil.rmtree(work, ignore_errors=True)
    res["load_after"] = [round(x, 2) for x in os.getloadavg()]
    _print(res)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


def _print(res: dict) -> None:
    n = res["repos"]
    print(f"{n} repositories, {res['latency'] * 1000:.0f} ms a request, {res['cores']} cores, "
          f"load {res['load_before']} -> {res['load_after']}")
    peer = res.get("peer")
    print(f"{'':7} {'wall s':>8} {'x peer':>7} {'req/repo':>9} {'bf16':>6} {'nvfp4':>6} "
          f"{'mxfp4':>6} {'KB/repo':>8}  defects")
    for name in ("peer", "dask", "jobs"):
        r = res.get(name)
        if r is None:
            continue
        k = r["requests_by_kind"]
        ratio = f"{r['wall'] / peer['wall']:.2f}" if peer else "-"
        d = r.get("defects")
        dd = f"{d['found']}/{d['planted']}" if d else "n/a"
        print(f"{name:7} {r['wall']:8.1f} {ratio:>7} {r['requests']:9.1f} {k['bf16']:6.1f} "
              f"{k['nvfp4']:6.1f} {k['mxfp4']:6.1f} {r['bytes'] / 1024:8.1f}  {dd}"
              + (f"  walls {r['walls']}" if len(r["walls"]) > 1 else ""))
    if peer:
        print(f"peer: {peer['tool']}; {peer['failed']} failed")
    for name in ("dask", "jobs"):
        r = res.get(name)
        if r is not None:
            print(f"{name}: exit {r['exit']}; codes on clean repositories (S601, S602, "
                  "S701, S702 are notes, which set no exit status) "
                  f"{r['defects']['clean_repo_codes']} {r.get('stderr', '')}")
    if "resume" in res:
        print(f"resume: {res['resume']}")


if __name__ == "__main__":
    main()
