#!/usr/bin/env python3
"""Speed of ``grit scan`` on a synthetic multi-GB checkpoint.

    python bench/bench_scan.py [--gb 2] [--shards 4] [--small 4000] [--repeat 5] [--json]

Writes, in a temporary directory deleted afterwards:
  * ``big/model-0000i-of-0000N.safetensors``: --gb GiB of plane bytes (default
    2) across --shards shards, 4096-column MXFP4 / Q4KS / NVF4 tensors written
    with ``grit.save`` (each tensor's planes are one encoded 256-row block
    repeated down the rows, which is itself a valid encoding);
  * ``small.safetensors``: --small tiny GRIT tensors (4 × 64 .. 4 × 256).

Rows:
  level 1, small tensors   ``scan(small)``: wall time / tensors (median over --repeat)
  level 1, big checkpoint  ``scan(big)``: likewise; no plane byte is read
  --deep                    ``scan(big, deep=True)``: plane bytes / wall time (GB/s)
  raw digest                ``grit.fingerprint.digest`` over the same planes,
                            mapped from the same files by ``grit.load`` (only
                            the digest() calls are timed)
The shards record ``grit.digest.<tensor>`` so that --deep has a digest to
verify.  The ratio column puts --deep beside the raw digest: --deep hashes every
plane (the digest) and runs the level-3 probes, so it cannot beat the digest
row; the ratio is the cost of everything else.  The files are written just
before they are read, so both rows run from the page cache (warm).
GB/s is 1e9 bytes per second.

    python bench/bench_scan.py --render 1000,10000,80000 [--repeat 5] [--json]

renders a synthetic report of N findings (S101 / S301 / S501 / S602 findings
with two or three derivation lines each, spread over N / 20 files) instead,
each run in a fresh process: wall time of the rendering alone and the
process's peak RSS (ru_maxrss), medians over --repeat runs, for

  human                     ``grit.scan.output.render`` (what ``grit scan`` prints)
  json                      ``grit.scan.output.write_json`` (what ``grit scan --json`` prints)
  rich table (before)       the renderer this one replaced (a rich Table per
                            category), kept here to measure the two in the same run;
                            --before-max N skips it above N findings (default 80000),
                            --before-repeat its runs (default 1: it is slow)

The output goes to /dev/null (not a terminal, so no colour).  "base RSS" is
the process after building the report, before rendering.
    python bench/bench_scan.py --gguf [--gguf-gb 4] [--repeat 5] [--peer-repeat 1] [--json]

the GGUF level-1 section: in a temporary directory, gguf-py's GGUFWriter
writes

  vocab.gguf                a 262,144-entry string-array vocabulary
                            (tokenizer.ggml.tokens, plus scores and token types)
                            and 200 tensors (Q8_0 / Q4_K 256×1024 weights, F32
                            norms), as a llama.cpp checkpoint's header looks;
  sparse.gguf               the same header with --gguf-gb GiB of tensor data
                            (256 Q8_0 / Q4_K tensors), the data made by
                            truncate(), so it costs no disk and no write;
  lying.gguf                the issue's 49-byte file: one KV entry, an array
                            of 2^62 UINT8 (GGUFReader is not run on it: it
                            does not finish);

and times, each run in a fresh process (imports outside the timing), medians
over --repeat runs (--peer-repeat for GGUFReader), with the process's peak
RSS (VmHWM, Linux) and what the call added to the process after its imports:

  grit scan level 1         ``grit.scan.scan([path])``
  read_gguf                 ``grit.io.gguf_file.read_gguf(path)`` (the walk alone)
  gguf.GGUFReader           ``gguf.GGUFReader(path)`` (the peer)

    python bench/bench_scan.py --deep [--gb 2] [--shards 4] [--repeat 3] [--json]

the --deep section: in a temporary directory, a --gb GiB safetensors
checkpoint (as above, --shards shards, digests recorded) and a --gb GiB GGUF
written by gguf-py's GGUFWriter one tensor at a time (Q8_0 / Q4_K / MXFP4
blocks, 4096 columns, each tensor's ``grit.digest.<name>`` KV entry
recorded), plus the gemma-3-270m Q4_K_M GGUF where it is cached; each run in
a fresh process (imports outside the timing), medians over --repeat runs,
after one warm-up run (page cache warm):

  scan --deep               ``grit.scan.scan([path], deep=True)``: wall time,
                            peak RSS (VmHWM), plane MB/s
  raw digest                ``grit.fingerprint.digest`` over every GRIT array's
                            planes as ``grit.load`` maps them (only the
                            digest() calls are timed): the peer, same bytes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import grit  # noqa: E402
from grit.fingerprint import digest  # noqa: E402
from grit.scan import scan  # noqa: E402
from grit.scan import output as scan_report  # noqa: E402
from grit.scan.collect import ScannedFile  # noqa: E402
from grit.scan.findings import CATEGORIES, SEVERITY, Finding, Severity  # noqa: E402

COLS = 4096
BASE_ROWS = 256


def _base(grade, seed):
    x = np.random.default_rng(seed).standard_normal((BASE_ROWS, COLS)).astype(np.float32)
    return grit.encode(x, grade)


def _tiled(base, k: int):
    """``base`` repeated k times down the rows: row-major groups along the
    last axis make every per-group plane the concatenation of k copies; a
    per-tensor plane (one value for the whole tensor) stays as it is."""
    pl = [bytes(p) for p in base.planes]
    from grit.check import plane_sizes
    s1 = plane_sizes(base.descriptor, (BASE_ROWS, COLS)).sizes
    sk = plane_sizes(base.descriptor, (BASE_ROWS * k, COLS)).sizes
    planes = tuple(p * (b // a if a else 1) for p, a, b in zip(pl, s1, sk))
    return grit.GritArray(base.descriptor, (BASE_ROWS * k, COLS), planes)


def make_checkpoint(root: str, gb: float, shards: int, small: int) -> dict:
    grades = [grit.GRADE_MXFP4, grit.GRADE_Q4KS, grit.GRADE_NVF4]
    bases = [_base(g, i) for i, g in enumerate(grades)]
    per_base = sum(len(bytes(p)) for p in bases[0].planes)
    target = int(gb * (1 << 30))
    k = 64                                       # 16384 × 4096 per tensor (~34 MB)
    per_tensor = per_base * k
    n_tensors = max(shards, round(target / per_tensor))
    big = os.path.join(root, "big")
    os.makedirs(big)
    names, total = [], 0
    per_shard = -(-n_tensors // shards)
    t = 0
    for s in range(shards):
        arrays = {}
        for _ in range(per_shard):
            if t >= n_tensors:
                break
            a = _tiled(bases[t % 3], k)
            arrays[f"model.layers.{t // 3}.mlp.{('up', 'gate', 'down')[t % 3]}_proj.weight"] = a
            total += sum(len(bytes(p)) for p in a.planes)
            t += 1
        p = os.path.join(big, f"model-{s + 1:05d}-of-{shards:05d}.safetensors")
        # the recorded digests --deep verifies (without them it has no digest to compare)
        grit.save(p, arrays, {f"grit.digest.{n}": grit.base32_encode(a.digest)
                              for n, a in arrays.items()})
        names.append(p)
        del arrays
    rng = np.random.default_rng(7)
    arrays = {}
    for i in range(small):
        g = grades[i % 3]
        cols = (64, 128, 256)[i % 3] if g is not grit.GRADE_Q4KS else 256
        arrays[f"model.layers.{i}.small{i % 3}.weight"] = grit.encode(
            rng.standard_normal((4, cols)).astype(np.float32), g)
    sp = os.path.join(root, "small.safetensors")
    grit.save(sp, arrays)
    return {"big": big, "shards": names, "big_tensors": n_tensors, "plane_bytes": total,
            "small": sp, "small_tensors": small}


def _timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def raw_digest(ck: dict) -> tuple[int, float]:
    """digest() over every GRIT tensor's planes as ``grit.load`` maps them
    from the shards: (bytes hashed, seconds spent in digest() alone)."""
    n, spent = 0, 0.0
    for p in ck["shards"]:
        got = grit.load(p)
        for v in got.values():
            if isinstance(v, grit.GritArray):
                planes = list(v.planes)
                t0 = time.perf_counter()
                digest(planes)
                spent += time.perf_counter() - t0
                n += sum(memoryview(x).nbytes for x in planes)
        del got
    return n, spent


def run(args) -> dict:
    root = tempfile.mkdtemp(prefix="grit-bench-scan-")
    try:
        t0 = time.perf_counter()
        ck = make_checkpoint(root, args.gb, args.shards, args.small)
        made = time.perf_counter() - t0
        rep = scan([ck["small"]])
        assert rep.exit_code_graded in (0, 3), rep.summary()
        small_t = _timed(lambda: scan([ck["small"]]), args.repeat)
        big_t = _timed(lambda: scan([ck["big"]]), args.repeat)
        deep_rep = []
        deep_t = _timed(lambda: deep_rep.append(scan([ck["big"]], deep=True)), max(1, args.repeat // 2))
        bad = [f for f in deep_rep[-1].findings if f.category in ("structural", "deep", "unreadable")]
        dig = [raw_digest(ck) for _ in range(max(1, args.repeat // 2))]
        assert all(n == ck["plane_bytes"] for n, _ in dig), (dig, ck["plane_bytes"])
        dig_t = [t for _, t in dig]
        B = ck["plane_bytes"]
        res = {
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus",
            "python": platform.python_version(),
            "gib": args.gb, "shards": args.shards, "big_tensors": ck["big_tensors"],
            "plane_bytes": B, "small_tensors": ck["small_tensors"], "make_s": made,
            "level1_small_us_per_tensor": statistics.median(small_t) / ck["small_tensors"] * 1e6,
            "level1_big_us_per_tensor": statistics.median(big_t) / ck["big_tensors"] * 1e6,
            "level1_big_s": statistics.median(big_t),
            "deep_s": statistics.median(deep_t),
            "deep_gbps": B / statistics.median(deep_t) / 1e9,
            "digest_s": statistics.median(dig_t),
            "digest_gbps": B / statistics.median(dig_t) / 1e9,
            "deep_findings": [f"{f.category}:{f.status}:{f.tensor}" for f in bad][:5],
        }
        res["deep_over_digest"] = res["deep_gbps"] / res["digest_gbps"]
        return res
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------
# rendering: findings count -> seconds and peak RSS


def synthetic_report(n: int) -> scan_report.ScanReport:
    """A report of n findings shaped like real ones (codes of four categories,
    a path, a tensor, a message and two or three lines each)."""
    files = [ScannedFile(f"/models/run-{i // 4}/model-{i % 4 + 1:05d}-of-00004.safetensors",
                         "safetensors", f"/models/run-{i // 4}/model.safetensors", True, 40, 40)
             for i in range(max(1, n // 20))]
    out = []
    for i in range(n):
        path = files[i % len(files)].path
        layer = f"model.layers.{i}.mlp.down_proj.weight"
        kind = i % 4
        if kind == 0:
            out.append(Finding("S101", path, layer,
                               f"SizeMismatch: scale0 plane is {64 + i % 7} bytes; descriptor "
                               "requires 128.",
                               ("numel=4096, k0=32 -> n_groups0=128, cw(e8m0)=8 -> 128 bytes.",
                                "Likeliest cause: the checkpoint was quantised at group_size=64, "
                                "not 32.")))
        elif kind == 1:
            out.append(Finding("S301", path, "mlp.down_proj",
                               "role 'mlp.down_proj' carries 2 grades in one checkpoint "
                               "(half-converted?)",
                               (f"GRADE_NVF4 (0x00FF6F4C2870831E): 2 × {layer}, {layer}.b",
                                f"GRADE_MXFP4 (0x2370EE9EE454A183): 2 × {layer}.c, {layer}.d")))
        elif kind == 2:
            out.append(Finding("S501", path, layer,
                               "DigestMismatch: plane contents do not hash to the expected "
                               "digest.",
                               ("The bytes changed after the digest was taken (corruption, a "
                                "partial write, or a different tensor).",),
                               kind=grit.Status.DIGEST_MISMATCH))
        else:
            out.append(Finding("S602", path, layer,
                               "1 Q8_0 tensor(s): descriptor inferred from the ggml block type "
                               "(no GRIT annotation in the file)",
                               ("grade grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)",
                                "nnz=4096 -> 4352 bytes", "zero-copy")))
    out.sort(key=lambda f: list(CATEGORIES).index(f.category))
    return scan_report.ScanReport(files, out)


_SEVERITY_STYLE = {Severity.STRUCTURAL: "bold red", Severity.DISAGREEMENT: "bold yellow",
                   Severity.WARNING: "cyan", Severity.UNPARSED: "bold red"}
_VERDICT = {0: "clean", 1: "structural violations", 2: "disagreements", 3: "warnings only",
            4: "no input could be parsed"}


def _render_rich_table(report, policy: str, file=None) -> None:
    """The human renderer before this one (a rich Table per category),
    verbatim, kept to measure against."""
    # rich is heavy to import and only the human table needs it
    from rich import box  # noqa: PLC0415
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415
    out = file if file is not None else sys.stdout
    tty = out.isatty()
    con = Console(file=out, width=None if tty else 132, no_color=not tty,
                  highlight=False, soft_wrap=False)
    cwd = os.getcwd()

    def rel(p):
        if not p:
            return "-"
        try:
            r = os.path.relpath(p, cwd)
        except ValueError:
            return p
        return p if r.startswith("..") else r

    for cat, title in CATEGORIES.items():
        fs = [f for f in report.findings if f.category is cat]
        if not fs:
            continue
        sev = min(f.severity for f in fs)  # the most severe of the category
        t = Table(title=Text(f"{title} — {len(fs)} finding{'s' * (len(fs) != 1)}, "
                             f"exit {int(sev)}", style="bold"),
                  title_justify="left", show_lines=True, expand=False, box=box.SIMPLE_HEAD)
        t.add_column("sev", no_wrap=True)
        t.add_column("file / tensor", overflow="fold", max_width=38)
        t.add_column("status", no_wrap=True)
        t.add_column("message", overflow="fold")
        for f in fs:
            msg = Text(f.message)
            for ln in f.lines:
                msg.append("\n  " + ln, style="dim" if tty else None)
            where = Text(rel(f.file))
            if f.tensor:
                where.append("\n" + f.tensor, style="bold" if tty else None)
            status = Text(f.status)
            status.append("\n" + f.code, style="dim" if tty else None)
            t.add_row(Text(f"{int(f.severity)} {SEVERITY[f.severity]}",
                           style=_SEVERITY_STYLE.get(f.severity, "")), where, status, msg)
        con.print(t)
        con.print()
    s = report.summary()
    code = report.exit_code_graded if policy == "graded" else report.exit_code_simple
    parts = [f"{s['parsed']}/{s['files']} files parsed", f"{s['tensors']} tensors "
             f"({s['grit_tensors']} GRIT)", f"{s['findings']} findings"]
    if s["by_severity"]:
        parts.append(", ".join(f"{n} {k}" for k, n in sorted(s["by_severity"].items())))
    tail = (f"exit {code} ({_VERDICT.get(report.exit_code_graded)}; graded "
            f"{report.exit_code_graded}, simple {report.exit_code_simple})")
    con.print("; ".join(parts) + " — " + tail, soft_wrap=True)
    if report.findings:
        con.print("grit explain CODE explains a finding code (the code is under each "
                  "status).", soft_wrap=True, style="dim" if tty else None)


def _render_child(mode: str, n: int) -> None:
    report = synthetic_report(n)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(os.devnull, "w", encoding="utf-8") as out:
        t0 = time.perf_counter()
        if mode == "human":
            scan_report.render(report, "graded", file=out)
        elif mode == "json":
            scan_report.write_json(report, "graded", file=out)
        else:
            _render_rich_table(report, "graded", file=out)
        dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"s": dt, "base_kib": base, "peak_kib": peak}))


def render_bench(counts, repeat: int, before_max: int, before_repeat: int) -> list[dict]:
    rows = []
    for n in counts:
        for mode in ("human", "json", "rich table (before)"):
            reps = repeat
            if mode.startswith("rich"):
                if n > before_max:
                    continue
                reps = before_repeat
            runs = []
            for _ in range(reps):
                r = subprocess.run([sys.executable, os.path.abspath(__file__), "--render-child",
                                    mode.split()[0], str(n)], capture_output=True, text=True,
                                   check=True)
                runs.append(json.loads(r.stdout))
            rows.append({"findings": n, "renderer": mode, "runs": reps,
                         "seconds": statistics.median(x["s"] for x in runs),
                         "peak_rss_mib": statistics.median(x["peak_kib"] for x in runs) / 1024,
                         "base_rss_mib": statistics.median(x["base_kib"] for x in runs) / 1024})
    return rows



def _machine() -> dict:
    """The machine a result was measured on, for the printed header."""
    return {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version()}


# ---------------------------------------------------------------------------
# GGUF level 1 (--gguf)

GGUF_VOCAB = 262_144


def _gguf_writer(path: str):
    import gguf  # noqa: PLC0415 - only the GGUF section needs it
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("bench")
    w.add_file_type(15)
    w.add_token_list([f"\u2581tok{i}" if i % 5 else f"<unused{i}>" for i in range(GGUF_VOCAB)])
    w.add_token_scores([float(-i) for i in range(GGUF_VOCAB)])
    w.add_token_types([1] * GGUF_VOCAB)
    return gguf, w


def make_gguf(root: str, gb: float) -> dict:
    """vocab.gguf, sparse.gguf and lying.gguf under ``root`` (see the docstring)."""
    import struct  # noqa: PLC0415
    gguf, w = _gguf_writer(os.path.join(root, "vocab.gguf"))
    rng = np.random.default_rng(0)
    q = gguf.GGMLQuantizationType
    for i in range(200):
        if i % 4 == 3:
            w.add_tensor(f"blk.{i // 4}.attn_norm.weight", rng.standard_normal(1024, np.float32))
            continue
        typ = q.Q8_0 if i % 2 else q.Q4_K
        block, size = gguf.GGML_QUANT_SIZES[typ]
        raw = rng.integers(0, 256, (256, 1024 // block * size), np.uint8)
        raw[:, :2] = 0                     # scales 0: finite blocks (Q8_0 d, Q4_K d)
        w.add_tensor(f"blk.{i // 4}.w{i % 4}.weight", raw, raw_dtype=typ)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    # the multi-GB file: tensor infos only, then truncate() to the data's size
    sparse = os.path.join(root, "sparse.gguf")
    gguf, w = _gguf_writer(sparse)
    n = 256
    cols = 4096
    # half Q8_0 (34 bytes per 32 elements), half Q4_K (144 per 256)
    rows = max(256, int(gb * 2**30 / n / (cols * (34 / 32 + 144 / 256) / 2)) // 256 * 256)
    total = 0
    for i in range(n):
        typ = q.Q8_0 if i % 2 else q.Q4_K
        block, size = gguf.GGML_QUANT_SIZES[typ]
        nbytes = rows * cols // block * size
        w.add_tensor_info(f"blk.{i}.weight", (rows, cols // block * size), np.dtype(np.uint8),
                          nbytes,
                          raw_dtype=typ)
        total += nbytes + (-nbytes % w.data_alignment)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    head = os.path.getsize(sparse)
    os.truncate(sparse, head + (-head % 32) + total)
    lying = os.path.join(root, "lying.gguf")
    with open(lying, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k"
                + struct.pack("<IIQ", 9, 0, 2**62))
    return {"vocab": os.path.join(root, "vocab.gguf"), "sparse": sparse, "lying": lying}


#: what a --gguf run executes, in a fresh ``python -c`` process that imports
#: only what the tool needs (not this module), so the RSS is the tool's own
_GGUF_CHILD = """
import json, sys, time
tool, path = sys.argv[1], sys.argv[2]


def hwm():
    # VmHWM: this process's own peak (ru_maxrss keeps the forking parent's
    # peak across exec on Linux)
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("VmHWM:"))


if tool == "scan":
    from grit.scan import scan
    fn = lambda: scan([path])
elif tool == "read_gguf":
    from grit.io.gguf_file import read_gguf
    fn = lambda: read_gguf(path)
else:
    import gguf
    fn = lambda: gguf.GGUFReader(path)
base = hwm()
t0 = time.perf_counter()
out = fn()
dt = time.perf_counter() - t0
peak = hwm()
extra = {"findings": sorted({f.code for f in out.findings})} if tool == "scan" else {}
print(json.dumps({"s": dt, "base_kib": base, "peak_kib": peak, **extra}))
"""


GGUF_TOOLS = (("grit scan level 1", "scan"), ("read_gguf", "read_gguf"),
              ("gguf.GGUFReader", "gguf-py"))


def gguf_bench(gb: float, repeat: int, peer_repeat: int) -> dict:
    root = tempfile.mkdtemp(prefix="grit-bench-gguf-")
    try:
        files = make_gguf(root, gb)
        rows = []
        for label, path in files.items():
            for name, tool in GGUF_TOOLS:
                if label == "lying" and tool == "gguf-py":
                    continue              # it loops and allocates without bound
                runs = []
                reps = peer_repeat if tool == "gguf-py" else repeat
                for _ in range(reps):
                    r = subprocess.run([sys.executable, "-c", _GGUF_CHILD, tool, path],
                                       capture_output=True, text=True, check=True,
                                       env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                           [ROOT, os.environ.get("PYTHONPATH", "")])})
                    runs.append(json.loads(r.stdout))
                rows.append({"file": label, "bytes": os.path.getsize(path), "tool": name,
                             "runs": reps,
                             "seconds": statistics.median(x["s"] for x in runs),
                             "peak_rss_mib": statistics.median(x["peak_kib"] for x in runs)
                             / 1024,
                             "base_rss_mib": statistics.median(x["base_kib"] for x in runs)
                             / 1024,
                             "added_rss_mib": statistics.median(x["peak_kib"] - x["base_kib"]
                                                                for x in runs) / 1024,
                             "findings": runs[0].get("findings")})
        for r in rows:
            peer = next((x for x in rows if x["file"] == r["file"]
                         and x["tool"] == "gguf.GGUFReader"), None)
            r["speedup_vs_gguf_py"] = peer["seconds"] / r["seconds"] if peer else None
        return {**_machine(), "rows": rows}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def print_gguf(r: dict) -> None:
    print(f"GGUF level 1: a 262,144-token vocabulary header; {r['machine']}, {r['cpus']} "
          f"cpus, Python {r['python']}; fresh process per run, medians")
    print("peak RSS: the process's VmHWM (imports included); added: peak minus the "
          "process after its imports")
    print(f"{'file':8s} {'size':>10s}  {'tool':20s} {'runs':>4s} {'seconds':>9s} "
          f"{'vs gguf-py':>10s} {'peak RSS':>10s} {'added':>10s}  findings")
    for x in r["rows"]:
        sp = f"{x['speedup_vs_gguf_py']:.1f}×" if x["speedup_vs_gguf_py"] else ""
        size = f"{x['bytes'] / 1e6:.1f} MB" if x["bytes"] > 1e5 else f"{x['bytes']} B"
        print(f"{x['file']:8s} {size:>10s}  {x['tool']:20s} {x['runs']:>4d} "
              f"{x['seconds']:>9.4f} {sp:>10s} "
              f"{x['peak_rss_mib']:>6.0f} MiB {x['added_rss_mib']:>6.0f} MiB  "
              f"{','.join(x['findings'] or [])}")


# ---------------------------------------------------------------------------
# --deep: streamed planes, bounded memory

GEMMA = os.path.expanduser("~/.cache/grit-real-checkpoint/gemma-3-270m-q4_k_m.gguf")


def make_deep_gguf(path: str, gb: float) -> int:
    """A GGUF of ``gb`` GiB of Q8_0 / Q4_K / MXFP4 tensors (4096 columns), each
    with its ``grit.digest.<name>`` KV entry, written one tensor at a time;
    the plane bytes."""
    import gguf  # noqa: PLC0415 - only the GGUF sections need it
    q = gguf.GGMLQuantizationType
    rng = np.random.default_rng(0)
    cols, rows = 4096, 4096
    bases = []
    for typ in (q.Q8_0, q.Q4_K, q.MXFP4):
        block, size = gguf.GGML_QUANT_SIZES[typ]
        b = rng.integers(0, 256, (rows * cols // block, size), np.uint8)
        if typ == q.Q8_0:
            b[:, 0], b[:, 1] = 0, 0x3C                 # d = 1.0
        elif typ == q.Q4_K:
            b[:, 0:4] = (0, 0x3C, 0, 0x38)             # d = 1.0, dmin = 0.5
        else:
            b[:, 0] = rng.integers(120, 135, len(b))  # E8M0 2^-7 .. 2^7
        raw = b.reshape(-1)
        bases.append((typ, raw, digest([raw, b"", b"", b""])))
    per = sum(r.nbytes for _, r, _ in bases) / 3
    n = max(3, round(gb * 2**30 / per))
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("bench-deep")
    names = []
    for i in range(n):
        typ, raw, dg = bases[i % 3]
        name = f"blk.{i // 3}.ffn_{('up', 'gate', 'down')[i % 3]}.weight"
        w.add_string(f"grit.digest.{name}", grit.base32_encode(dg))
        block, size = gguf.GGML_QUANT_SIZES[typ]
        w.add_tensor_info(name, (rows, cols // block * size), np.dtype(np.uint8), raw.nbytes,
                          raw_dtype=typ)
        names.append(i % 3)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    total = 0
    for k in names:
        typ, raw, _ = bases[k]
        block, size = gguf.GGML_QUANT_SIZES[typ]
        w.write_tensor_data(raw.reshape(rows, cols // block * size))
        total += raw.nbytes
    w.close()
    return total


_DEEP_CHILD = """
import json, sys, time
tool, path = sys.argv[1], sys.argv[2]


def hwm():
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("VmHWM:"))


import grit
from grit.fingerprint import digest
from grit.scan import scan
import gguf  # noqa: F401 - imported outside the timing by both tools
base = hwm()
if tool in ("deep", "level1"):
    t0 = time.perf_counter()
    rep = scan([path], deep=tool == "deep")
    dt = time.perf_counter() - t0
    extra = {"findings": sorted({f.code for f in rep.findings}), "exit": rep.exit_code_graded}
else:
    import os
    paths = [path] if os.path.isfile(path) else sorted(
        os.path.join(path, n) for n in os.listdir(path) if n.endswith(".safetensors"))
    dt, n = 0.0, 0
    for p in paths:
        got = grit.load(p)
        for v in got.values():
            if isinstance(v, grit.GritArray):
                planes = list(v.planes)
                t0 = time.perf_counter()
                digest(planes)
                dt += time.perf_counter() - t0
                n += sum(memoryview(x).nbytes for x in planes)
        del got
    extra = {"bytes": n}
print(json.dumps({"s": dt, "base_kib": base, "peak_kib": hwm(), **extra}))
"""


def deep_bench(gb: float, shards: int, repeat: int) -> dict:
    root = tempfile.mkdtemp(prefix="grit-bench-deep-")
    try:
        ck = make_checkpoint(root, gb, shards, 0)
        gg = os.path.join(root, "deep.gguf")
        gbytes = make_deep_gguf(gg, gb)
        files = [("safetensors", ck["big"], ck["plane_bytes"]), ("gguf", gg, gbytes)]
        if os.path.exists(GEMMA):
            files.append(("gemma Q4_K_M", GEMMA, None))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT,
                                                            os.environ.get("PYTHONPATH", "")])}

        def child(tool, path):
            r = subprocess.run([sys.executable, "-c", _DEEP_CHILD, tool, path],
                               capture_output=True, text=True, check=True, env=env)
            return json.loads(r.stdout.strip().splitlines()[-1])

        rows = []
        for label, path, nbytes in files:
            child("digest", path)                     # warm the page cache
            dig = [child("digest", path) for _ in range(repeat)]
            dp = [child("deep", path) for _ in range(repeat)]
            l1 = statistics.median(child("level1", path)["s"] for _ in range(repeat))
            B = dig[0]["bytes"]
            ds = statistics.median(x["s"] for x in dig)
            ss = statistics.median(x["s"] for x in dp)
            rows.append({
                "file": label, "file_bytes": sum(os.path.getsize(os.path.join(path, n))
                                                 for n in os.listdir(path))
                if os.path.isdir(path) else os.path.getsize(path),
                "plane_bytes": B, "runs": repeat,
                "deep_s": ss, "deep_mbps": B / ss / 1e6,
                "deep_peak_rss_mib": statistics.median(x["peak_kib"] for x in dp) / 1024,
                "deep_base_rss_mib": statistics.median(x["base_kib"] for x in dp) / 1024,
                "digest_s": ds, "digest_mbps": B / ds / 1e6,
                "digest_peak_rss_mib": statistics.median(x["peak_kib"] for x in dig) / 1024,
                "deep_over_digest": (B / ss) / (B / ds),
                "level1_s": l1,
                # what --deep adds to level 1, per plane byte, against the digest
                # (None where the difference is within the noise of level 1 itself)
                "added_mbps": B / (ss - l1) / 1e6 if ss - l1 > 0.05 * ss else None,
                "added_over_digest": ds / (ss - l1) if ss - l1 > 0.05 * ss else None,
                "findings": dp[0]["findings"], "exit": dp[0]["exit"]})
        return {**_machine(), "rows": rows}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def print_deep(r: dict) -> None:
    print(f"grit scan --deep vs the raw §6.5 digest over the same planes; {r['machine']}, "
          f"{r['cpus']} cpus, Python {r['python']}; fresh process per run, medians, warm cache")
    print("peak RSS: the process's VmHWM (imports included: base); raw digest: digest() "
          "over grit.load's mapped planes, only the digest() calls timed")
    print("ratio: deep MB/s over digest MB/s; added: (deep − level 1) MB/s over digest MB/s")
    print(f"{'file':14s} {'file size':>10s} {'planes':>10s} {'level1 s':>9s} {'deep s':>8s} "
          f"{'deep MB/s':>10s} {'digest MB/s':>12s} {'ratio':>6s} {'added':>6s} "
          f"{'deep RSS':>9s} {'base':>6s} {'digest RSS':>11s}  findings")
    for x in r["rows"]:
        a = x["added_over_digest"]
        added = "n/a" if a is None else f"{a:.2f}"
        print(f"{x['file']:14s} {x['file_bytes'] / 1e6:>7.0f} MB {x['plane_bytes'] / 1e6:>7.0f} MB "
              f"{x['level1_s']:>9.2f} "
              f"{x['deep_s']:>8.2f} {x['deep_mbps']:>10.0f} {x['digest_mbps']:>12.0f} "
              f"{x['deep_over_digest']:>6.2f} {added:>6s} "
              f"{x['deep_peak_rss_mib']:>5.0f} MiB "
              f"{x['deep_base_rss_mib']:>4.0f} M {x['digest_peak_rss_mib']:>7.0f} MiB  "
              f"{','.join(x['findings'])} (exit {x['exit']})")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=2.0, help="GiB of plane bytes (default 2)")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--small", type=int, default=4000, help="tiny tensors in small.safetensors")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--render", help="comma-separated findings counts: the rendering benchmark")
    ap.add_argument("--before-max", type=int, default=80000,
                    help="largest count the old rich renderer is run for")
    ap.add_argument("--before-repeat", type=int, default=1)
    ap.add_argument("--render-child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--gguf", action="store_true", help="the GGUF level-1 section")
    ap.add_argument("--gguf-gb", type=float, default=4.0,
                    help="GiB of (sparse) tensor data in sparse.gguf (default 4)")
    ap.add_argument("--peer-repeat", type=int, default=1,
                    help="runs of gguf.GGUFReader per file (default 1: it is slow)")
    ap.add_argument("--deep", action="store_true",
                    help="the --deep section: streamed planes, peak RSS, vs the raw digest")
    args = ap.parse_args(argv)
    if args.deep:
        d = deep_bench(args.gb, args.shards, args.repeat)
        if args.json:
            print(json.dumps(d, indent=2))
        else:
            print_deep(d)
        return
    if args.render_child:
        _render_child(args.render_child[0], int(args.render_child[1]))
        return
    if args.gguf:
        g = gguf_bench(args.gguf_gb, args.repeat, args.peer_repeat)
        if args.json:
            print(json.dumps(g, indent=2))
        else:
            print_gguf(g)
        return
    if args.render:
        rows = render_bench([int(x) for x in args.render.split(",")], args.repeat,
                            args.before_max, args.before_repeat)
        if args.json:
            print(json.dumps(rows, indent=2))
            return
        cpu = platform.processor() or platform.machine()
        print(f"rendering a synthetic grit scan report; {cpu}, {os.cpu_count()} cpus, "
              f"Python {platform.python_version()}")
        print(f"{'findings':>9s}  {'renderer':22s} {'runs':>4s} {'seconds':>9s} "
              f"{'peak RSS':>10s} {'base RSS':>10s}")
        for r in rows:
            print(f"{r['findings']:>9,d}  {r['renderer']:22s} {r['runs']:>4d} "
                  f"{r['seconds']:>9.3f} {r['peak_rss_mib']:>6.0f} MiB "
                  f"{r['base_rss_mib']:>6.0f} MiB")
        return
    r = run(args)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    print(f"grit scan on {r['plane_bytes'] / 1e9:.2f} GB of planes "
          f"({r['big_tensors']} tensors of 16384×4096 in {r['shards']} shards) "
          f"+ {r['small_tensors']} small tensors; {r['machine']}, Python {r['python']}")
    print(f"{'row':28s} {'time':>12s} {'per tensor':>14s} {'GB/s':>8s} {'ratio':>8s}")
    print(f"{'level 1, small tensors':28s} {'':>12s} "
          f"{r['level1_small_us_per_tensor']:>11.1f} µs {'':>8s} {'':>8s}")
    print(f"{'level 1, big checkpoint':28s} {r['level1_big_s']:>10.3f} s "
          f"{r['level1_big_us_per_tensor']:>11.1f} µs {'':>8s} {'':>8s}")
    print(f"{'--deep':28s} {r['deep_s']:>10.3f} s {'':>14s} {r['deep_gbps']:>8.2f} "
          f"{r['deep_over_digest']:>8.2f}")
    print(f"{'raw digest (same bytes)':28s} {r['digest_s']:>10.3f} s {'':>14s} "
          f"{r['digest_gbps']:>8.2f} {1.0:>8.2f}")
    if r["deep_findings"]:
        print("unexpected --deep findings:", ", ".join(r["deep_findings"]))


if __name__ == "__main__":
    main()
