"""The codec rows of bench_codec.py and bench_native.py for this tree and for
the tree as it was before the native code was split into a C core and its
CPython binding, in one run.

    python bench/bench_split.py [--before 3ac6946] [--rounds 7] [--n 4194304]
                                [--repeat 3] [--json out.json]

Then, because a shared machine's load can swamp those wall-clock rows, an
in-process A/B of the extension kernels themselves: the before tree's
grit._kernels (loaded from its file) and this tree's, called alternately
--ab-repeat times each on the same input, one thread, timed by the calling
thread's CPU clock (time.thread_time), medians and ratios.

The "before" tree is ``git archive REV`` built in place in a temporary
directory (python setup.py build_ext --inplace).  Each round runs both
benches once per tree, alternating (before, now, before, now, ...), each
bench in a fresh process with PYTHONPATH set to its tree, so that a change
of the machine's load touches both sides alike.  A row's value per round is
the bench's own median of --repeat calls; the table gives the median over
rounds of each side's seconds and the ratio before / now (>= 1: no slower),
for every grit row (decode and encode of the six registered grades: native
1 and 2 threads in bench_native, the public grit.decode / grit.encode in
bench_codec).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHES = ("bench_codec.py", "bench_native.py")


def build_before(rev: str, tmp: Path) -> Path:
    tree = tmp / "before"
    tree.mkdir()
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True,
                          capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=arch, check=True)
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree,
                   check=True, capture_output=True)
    return tree


def run_bench(tree: Path, bench: str, n: int, repeat: int, out: Path) -> dict:
    args = [sys.executable, str(ROOT / "bench" / bench), "--n", str(n), "--repeat", str(repeat),
            "--json", str(out)]
    if bench == "bench_native.py":
        args.append("--no-rss")
    env = dict(os.environ, PYTHONPATH=str(tree))
    subprocess.run(args, env=env, check=True, capture_output=True)
    rows = json.loads(out.read_text())["rows"]
    return {f"{bench[6:-3]}: {k}": v["seconds"] for k, v in rows.items()
            if k.startswith("grit ") and "numpy path" not in k}


KINDS = {"mxfp4": (False,), "mxfp4_rne": (True,), "nvf4": (False,), "nvf4_rtz": (True,),
         "q4ks": (), "i8s24": ()}


def _load_kernels(tree: Path):
    import importlib.util
    so = next((tree / "grit").glob("_kernels*.so"))
    spec = importlib.util.spec_from_file_location("grit._kernels", so)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)              # type: ignore[union-attr]
    return mod


def ab_kernels(before_tree: Path, n: int, repeat: int) -> dict:
    """{row: (before s, now s)}: CPU-time medians of alternating calls."""
    import time

    import numpy as np
    before, now = _load_kernels(before_tree), _load_kernels(ROOT)
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    out = np.empty(n, np.float32)
    rows = {}
    for kind, flag in KINDS.items():
        base = kind.split("_")[0]
        args = (x, *flag, 1)
        calls = {}
        for name, k in (("before", before), ("now", now)):
            enc, dec = getattr(k, f"encode_{base}"), getattr(k, f"decode_{base}")
            planes = enc(*args)
            calls[name] = (lambda enc=enc: enc(*args),
                           lambda dec=dec, planes=planes: dec(*planes, out, 1))
        for op in (0, 1):
            ts: dict[str, list[float]] = {"before": [], "now": []}
            for r in range(repeat):
                for name in ("before", "now") if r % 2 == 0 else ("now", "before"):
                    t0 = time.thread_time()
                    calls[name][op]()
                    ts[name].append(time.thread_time() - t0)
            rows[f"kernels: {('encode', 'decode')[op]} {kind} 1t"] = (
                statistics.median(ts["before"]), statistics.median(ts["now"]))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="3ac6946",
                    help="the commit before the split (f2be1ba's parent)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ab-repeat", type=int, default=31)
    ap.add_argument("--ab-only", action="store_true", help="only the in-process A/B")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        before = build_before(a.before, tmp)
        ab = ab_kernels(before, a.n, a.ab_repeat)
        sides = {"before": before, "now": ROOT}
        runs: dict[str, dict[str, list[float]]] = {"before": {}, "now": {}}
        for r in range(0 if a.ab_only else a.rounds):
            for side in ("before", "now") if r % 2 == 0 else ("now", "before"):
                for bench in BENCHES:
                    got = run_bench(sides[side], bench, a.n, a.repeat, tmp / "out.json")
                    for k, s in got.items():
                        runs[side].setdefault(k, []).append(s)
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    table = {}
    print(f"{'row':60s} {'before ms':>10s} {'now ms':>10s} {'before/now':>10s}")
    for k in runs["now"]:
        if k not in runs["before"]:
            continue
        b, w = statistics.median(runs["before"][k]), statistics.median(runs["now"][k])
        table[k] = {"before_s": b, "now_s": w, "ratio": b / w, "rounds": len(runs["now"][k])}
        print(f"{k:60s} {b * 1e3:10.2f} {w * 1e3:10.2f} {b / w:10.2f}")
    if table:
        ratios = [v["ratio"] for v in table.values()]
        print(f"\n{len(ratios)} rows, {a.rounds} rounds, n = {a.n}: median ratio "
              f"{statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}")
    print(f"\nin-process A/B, CPU time of the calling thread, {a.ab_repeat} alternating calls"
          f" each, n = {a.n}")
    for k, (b, w) in ab.items():
        table[k] = {"before_s": b, "now_s": w, "ratio": b / w, "rounds": a.ab_repeat}
        print(f"{k:60s} {b * 1e3:10.2f} {w * 1e3:10.2f} {b / w:10.2f}")
    ratios = [table[k]["ratio"] for k in ab]
    print(f"A/B: median ratio {statistics.median(ratios):.3f}, min {min(ratios):.3f}, "
          f"max {max(ratios):.3f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"before": a.before, "rounds": a.rounds, "n": a.n,
                                            "rows": table}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
