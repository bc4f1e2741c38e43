#!/usr/bin/env python3
"""Cost of ``grit scan``'s report formats and of its byte accounting.

    python bench/bench_scan_formats.py [--findings 1000,20000,80000] [--repeat 5] [--json]

Formats: a synthetic report of N findings (bench_scan.synthetic_report: four
codes, two or three derivation lines each) written, each run in a fresh
process, by

  text (piped)       grit.scan.output.render to /dev/null (not a terminal)
  text (terminal)    render to /dev/null behind isatty() = True, COLUMNS=100:
                     aligned labels and filling to the width
  json               write_json (the format the others are put beside: ratio 1)
  jsonl              write_jsonl
  sarif              write_sarif (rules, results, artifacts built as a dict, then
                     streamed)
  markdown           write_markdown, every finding a row (no 200-row cap)

wall time of the writing alone and the process's peak RSS (ru_maxrss), medians
over --repeat runs; "ratio" is the time over json's in the same run.

Accounting: on the real GGUF (gemma-3-270m Q4_K_M, when cached) and on a
safetensors file of 4,000 small GRIT tensors (grit.save), the whole
``scan()`` beside ``output.account`` + ``attach_ranges`` for the same file
(what the coverage and the byte ranges add), medians over --repeat.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

REAL = os.path.expanduser("~/.cache/grit-real-checkpoint/gemma-3-270m-q4_k_m.gguf")
MODES = ("text (piped)", "text (terminal)", "json", "jsonl", "sarif", "markdown")


class _Tty(io.TextIOWrapper):
    def isatty(self) -> bool:
        return True


def _child(mode: str, n: int) -> None:
    from bench_scan import synthetic_report  # noqa: PLC0415

    from grit.scan import output as R  # noqa: PLC0415
    rep = synthetic_report(n)
    os.environ["COLUMNS"] = "100"
    raw = open(os.devnull, "wb")
    out = (_Tty if mode == "text (terminal)" else io.TextIOWrapper)(raw, encoding="utf-8")
    t0 = time.perf_counter()
    if mode.startswith("text"):
        R.render(rep, "graded", file=out)
    elif mode == "json":
        R.write_json(rep, "graded", file=out)
    elif mode == "jsonl":
        R.write_jsonl(rep, "graded", file=out)
    elif mode == "markdown":
        R.write_markdown(rep, "graded", file=out, max_rows=n)
    else:
        R.write_sarif(rep, "graded", file=out, version="bench")
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"s": dt, "peak_kib": peak}))


def formats(counts, repeat: int) -> list[dict]:
    rows = []
    for n in counts:
        got = {}
        for mode in MODES:
            runs = []
            for _ in range(repeat):
                r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode,
                                    str(n)], capture_output=True, text=True, check=True)
                runs.append(json.loads(r.stdout))
            got[mode] = {"seconds": statistics.median(x["s"] for x in runs),
                         "peak_rss_mib": statistics.median(x["peak_kib"] for x in runs) / 1024}
        for mode in MODES:
            rows.append({"findings": n, "format": mode, **got[mode],
                         "ratio": got[mode]["seconds"] / got["json"]["seconds"]})
    return rows


def _accounting(path: str, repeat: int) -> dict:
    from grit.grade import grade_scope  # noqa: PLC0415
    from grit.placement.expr import layout_scope  # noqa: PLC0415
    from grit.scan import analyses, output, scan  # noqa: PLC0415
    from grit.scan.collect import open_input  # noqa: PLC0415
    whole, acc = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        scan([path])
        whole.append(time.perf_counter() - t0)
        with grade_scope(), layout_scope():
            ctx = analyses.Context(False)
            inp = open_input(path)
            analyses.file_analyses(ctx, inp)
            t0 = time.perf_counter()
            _, rs = output.account(inp, ctx.findings)
            output.attach_ranges(ctx.findings, {path: rs})
            acc.append(time.perf_counter() - t0)
    w, a = statistics.median(whole), statistics.median(acc)
    return {"file": os.path.basename(path), "scan_s": w, "accounting_s": a, "share": a / w}


def accounting(repeat: int) -> list[dict]:
    import numpy as np  # noqa: PLC0415

    import grit  # noqa: PLC0415
    rows = []
    if os.path.exists(REAL):
        rows.append(_accounting(REAL, repeat))
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "small.safetensors")
        rng = np.random.default_rng(0)
        base = grit.encode(rng.standard_normal((4, 64)).astype(np.float32), grit.GRADE_MXFP4)
        grit.save(p, {f"model.layers.{i}.w.weight": base for i in range(4000)})
        rows.append(_accounting(p, repeat))
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--findings", default="1000,20000,80000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        _child(a.child[0], int(a.child[1]))
        return
    fr = formats([int(x) for x in a.findings.split(",")], a.repeat)
    ar = accounting(a.repeat)
    if a.json:
        print(json.dumps({"formats": fr, "accounting": ar}, indent=2))
        return
    print(f"{'findings':>9}  {'format':<16} {'seconds':>9} {'ratio':>6} {'peak RSS MiB':>13}")
    for r in fr:
        print(f"{r['findings']:>9,}  {r['format']:<16} {r['seconds']:>9.4f} {r['ratio']:>6.2f} "
              f"{r['peak_rss_mib']:>13.1f}")
    print()
    print(f"{'file':<32} {'scan s':>9} {'accounting s':>13} {'share':>7}")
    for r in ar:
        print(f"{r['file']:<32} {r['scan_s']:>9.4f} {r['accounting_s']:>13.5f} "
              f"{r['share']:>7.1%}")


if __name__ == "__main__":
    main()
