"""A seeded fuzz campaign over the fuzz contract (#12), without hypothesis'
per-example overhead: the generators of tests/fuzz_strategies.py on a
``random.Random``, each case run through every entry point by the same
``*_outcome`` functions tests/test_fuzz_contract.py uses.

    python scripts/fuzz_contract.py --descriptors 1000000 --strings 200000 \\
        --layouts 20000 --seed 1

prints the counts per entry point, level and status, and every escape class
(exception type, the grit file that raised it, how many cases, whether it is
one of tests/test_fuzz_contract.py's KNOWN_ESCAPES) with a minimal reproducer
as hex/JSON: the first case of that class, the shortest seen.  The process
runs under an RLIMIT_AS cap (--mem-gb), so an unbounded allocation is a
MemoryError escape, not a machine in trouble.  Exit status 0 when no escape
outside KNOWN_ESCAPES was seen, 1 otherwise.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import resource
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import fuzz_strategies as F          # noqa: E402
import test_fuzz_contract as T       # noqa: E402


def _cap_memory(gb: float) -> None:
    limit = int(gb * (1 << 30))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


class Tally:
    def __init__(self) -> None:
        self.status: collections.Counter = collections.Counter()
        self.escapes: dict[tuple, dict] = {}

    def add(self, out: F.Outcome, case: F.Case | None = None) -> None:
        for k, v in out.statuses.items():
            self.status[(k, v)] += 1
        for e in out.escapes:
            kn = T.known(case, e) if case is not None else None
            key = (e["where"], e["type"], e["raised_in"], kn.item if kn else None)
            have = self.escapes.get(key)
            size = len(json.dumps(e["repro"]))
            if have is None:
                self.escapes[key] = {"count": 1, "message": e["message"], "repro": e["repro"],
                                     "size": size}
            else:
                have["count"] += 1
                if size < have["size"]:
                    have.update(message=e["message"], repro=e["repro"], size=size)

    def report(self, title: str, n: int, seconds: float) -> int:
        print(f"\n== {title}: {n:,} cases in {seconds:.1f} s ({n / max(seconds, 1e-9):,.0f}/s)")
        by_entry: dict[str, list] = collections.defaultdict(list)
        for (entry, status), count in sorted(self.status.items()):
            by_entry[entry].append(f"{status}={count:,}")
        for entry, items in by_entry.items():
            print(f"  {entry:8s} " + "  ".join(items))
        new = 0
        for (where, typ, raised_in, item), info in sorted(self.escapes.items(),
                                                          key=lambda kv: -kv[1]["count"]):
            tag = f"KNOWN ({item})" if item else "NEW"
            new += 0 if item else info["count"]
            print(f"  ESCAPE [{tag}] {where}: {typ} in {raised_in} x{info['count']:,}: "
                  f"{info['message'][:160]}")
            print(f"    reproducer: {json.dumps(info['repro'])}")
        if not self.escapes:
            print("  escapes: 0")
        return new


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--descriptors", type=int, default=10000)
    ap.add_argument("--strings", type=int, default=10000, help="grade strings")
    ap.add_argument("--layouts", type=int, default=None,
                    help="layout expressions (default: strings / 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mem-gb", type=float, default=4.0, help="RLIMIT_AS cap")
    ap.add_argument("--progress", type=int, default=100000)
    a = ap.parse_args(argv)
    layouts = a.strings // 10 if a.layouts is None else a.layouts
    _cap_memory(a.mem_gb)
    print(f"seed {a.seed}; descriptors {a.descriptors:,}; grade strings {a.strings:,}; "
          f"layouts {layouts:,}; RLIMIT_AS {a.mem_gb} GiB")
    new = 0
    with F.fuzz_registry():
        for title, n, gen, run in (
                ("grade strings", a.strings, F.gen_grade_text, F.grade_outcome),
                ("layout expressions", layouts, F.gen_layout_text, F.layout_outcome)):
            c = F.RandomChooser(random.Random(f"{a.seed}/{title}"))
            t, t0 = Tally(), time.perf_counter()
            for _ in range(n):
                t.add(run(gen(c)))
            new += t.report(title, n, time.perf_counter() - t0)
        c = F.RandomChooser(random.Random(f"{a.seed}/descriptors"))
        t, t0 = Tally(), time.perf_counter()
        for i in range(1, a.descriptors + 1):
            case = F.gen_case(c)
            t.add(F.descriptor_outcome(case), case)
            if a.progress and i % a.progress == 0:
                print(f"  ... {i:,} descriptors, {time.perf_counter() - t0:.0f} s, "
                      f"{sum(v['count'] for v in t.escapes.values()):,} escapes", flush=True)
        new += t.report("descriptors x shapes x planes (levels 0-3, decode where level 1 "
                        "passes)", a.descriptors, time.perf_counter() - t0)
    print(f"\nescapes outside KNOWN_ESCAPES: {new:,}")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
