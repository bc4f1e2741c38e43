"""The codec rows of bench_codec.py and bench_native.py for this tree and for
the tree as it was before the native code was split into a C core and its
CPython binding, in one run.

    python bench/bench_split.py [--before 3ac6946] [--rounds 7] [--n 4194304]
                                [--repeat 3] [--json out.json]

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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="3ac6946",
                    help="the commit before the split (f2be1ba's parent)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        before = build_before(a.before, tmp)
        sides = {"before": before, "now": ROOT}
        runs: dict[str, dict[str, list[float]]] = {"before": {}, "now": {}}
        for r in range(a.rounds):
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
    ratios = [v["ratio"] for v in table.values()]
    print(f"\n{len(ratios)} rows, {a.rounds} rounds, n = {a.n}: median ratio "
          f"{statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"before": a.before, "rounds": a.rounds, "n": a.n,
                                            "rows": table}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
