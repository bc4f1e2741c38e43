"""A seeded mutation fuzzer over safetensors and GGUF files (#12).

The seeds are written by the official libraries: ``safetensors.numpy.save_file``
(plain tensors, with and without ``__metadata__``), ``grit.save`` (GRIT arrays
with their ``__grit__`` document, beside plain tensors) and gguf-py's
``GGUFWriter`` (float and block-quantised tensors, KV entries), plus
``grit.save_gguf`` (GRIT-annotated GGUF).  Each case mutates one seed —
byte flips, truncations, extensions, header-length edits, and JSON-level
edits of the safetensors header and of the ``__grit__`` document (keys,
types, numbers, duplicates, deletions) — writes it, and feeds it to
``grit.load`` and to ``grit.scan.scan`` (the Python API the CLI uses).

A case *escapes* when ``grit.load`` raises something other than a GritError,
when scan raises at all, when either runs past the per-case time limit, or
when the process's peak RSS grows past the memory bound.  It *disagrees* when
scan is clean (no finding of an error severity: 1, 2 or 4) but load fails,
or when load fails and scan has no error-severity finding.

    python scripts/fuzz_files.py --cases 20000 --seed 1

prints the counts: cases, load ok, load GritError, scan findings by code,
escapes and disagreements (both must be 0).  tests/test_fuzz_files.py and
tests/test_scan_load_agree.py run the same engine at a CI budget.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import resource
import signal
import struct
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

#: seconds one case (load and scan together) may take
CASE_SECONDS = 10.0
#: how far the peak RSS may grow during a campaign (bytes)
RSS_GROWTH = 1 << 30


# ---------------------------------------------------------------------------
# seeds


def _values(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def seeds(folder: str) -> list[tuple[str, str, bytes]]:
    """(name, kind, bytes) of every seed file, written into ``folder`` by the
    official writers."""
    import grit
    from safetensors.numpy import save_file
    out: list[tuple[str, str, bytes]] = []

    def keep(name: str, kind: str) -> None:
        with open(os.path.join(folder, name), "rb") as f:
            out.append((name, kind, f.read()))

    save_file({"a": _values((4, 8), 1), "b": np.arange(6, dtype=np.int8).reshape(2, 3),
               "c": np.zeros((0, 3), np.float16)}, os.path.join(folder, "st_plain.safetensors"))
    keep("st_plain.safetensors", "safetensors")
    save_file({"w": _values((2, 16), 2), "u": np.arange(5, dtype=np.uint8)},
              os.path.join(folder, "st_meta.safetensors"),
              metadata={"format": "np", "grit.digest.w": "0" * 26})
    keep("st_meta.safetensors", "safetensors")
    arrays = {
        "l0.q.weight": grit.encode(_values((4, 64), 3), grit.GRADE_MXFP4),
        "l1.q.weight": grit.encode(_values((4, 64), 4), grit.GRADE_NVF4),
        "l0.k.weight": grit.encode(_values((2, 64), 5), grit.GRADE_I8S24),
        "norm": _values((8,), 6),
    }
    grit.save(os.path.join(folder, "grit.safetensors"), arrays, metadata={"note": "seed"})
    keep("grit.safetensors", "safetensors")
    grit.save(os.path.join(folder, "grit_one.safetensors"),
              {"w": grit.encode(_values((2, 32), 7), grit.GRADE_MXFP4_RNE)})
    keep("grit_one.safetensors", "safetensors")
    # the descriptor-map convention: data ‖ scales as one tensor under the logical
    # shape (no library writes it: its span is not numel × itemsize)
    a = grit.encode(_values((2, 32), 8), grit.GRADE_MXFP4)
    payload = b"".join(bytes(p) for p in a.planes)
    with open(os.path.join(folder, "map.safetensors"), "wb") as f:
        f.write(_st_join({"__metadata__": {"__grit__": json.dumps({"w": a.descriptor.hex()})},
                          "w": {"dtype": "U8", "shape": [2, 32],
                                "data_offsets": [0, len(payload)]}}, payload))
    keep("map.safetensors", "safetensors")
    try:
        import gguf
    except ImportError:           # pragma: no cover - gguf-py is a test dependency
        return out
    T = gguf.GGMLQuantizationType
    p = os.path.join(folder, "plain.gguf")
    w = gguf.GGUFWriter(p, "fuzz")
    w.add_uint32("fuzz.n", 7)
    w.add_string("fuzz.s", "seed")
    w.add_array("fuzz.a", [1, 2, 3])
    w.add_tensor("f32", _values((4, 8), 9))
    w.add_tensor("f16", _values((2, 8), 10).astype(np.float16))
    for name, t, shape in (("q8", T.Q8_0, (2, 64)), ("q4", T.Q4_0, (2, 32))):
        w.add_tensor(name, gguf.quants.quantize(_values(shape, 11), t), raw_dtype=t)
    # K-quants gguf-py cannot quantise: blocks of seeded bytes (144 / 210 per 256)
    for name, t, nbytes in (("q4k", T.Q4_K, 144), ("q6k", T.Q6_K, 210)):
        w.add_tensor(name, np.random.default_rng(nbytes).integers(0, 256, (1, nbytes),
                                                                  dtype=np.uint8), raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    keep("plain.gguf", "gguf")
    grit.save(os.path.join(folder, "grit.gguf"),
              {"blk.0.w": grit.encode(_values((2, 64), 12), grit.GRADE_MXFP4),
               "blk.0.n": _values((4,), 13)})
    keep("grit.gguf", "gguf")
    return out


# ---------------------------------------------------------------------------
# mutations


_NASTY_JSON = [None, True, False, 0, -1, 1, 2**31, 2**63, 2**64, -(2**63) - 1, 10**400, 1.5,
               -0.0, 1e308, "", "x", "U8", "F32", "0" * 128, "grit1()", [], [0], [0, 0],
               [1, 2, 3], [[[]]], {}, {"a": 1}, "\u0000", "\udcff"[:0] + "\u202e", [None]]


def _rand_json(rng: random.Random, depth: int = 0):
    r = rng.random()
    if r < 0.6 or depth > 2:
        v = rng.choice(_NASTY_JSON)
        return json.loads(json.dumps(v)) if not isinstance(v, int) or abs(v) < 10**30 else v
    if r < 0.8:
        return [_rand_json(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(["dtype", "shape", "data_offsets", "desc", "planes", "grade", "gid",
                        "schema", "version", "tensors", "grades", "layouts", "k"]):
            _rand_json(rng, depth + 1) for _ in range(rng.randrange(3))}


def _number(rng: random.Random, v):
    as_float = float(v) if abs(v) < 1e300 else 1e300
    return rng.choice([v + 1, v - 1, -v, v * 2, v // 2 if isinstance(v, int) else v, 0,
                       2**64 + v if isinstance(v, int) else v, as_float, str(v)[:64], None])


def _nodes(obj, path=()):
    """Every (path, value) inside a JSON value."""
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _nodes(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _nodes(v, path + (i,))


def _set(obj, path, value):
    if not path:
        return value
    parent = obj
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return obj


def _mutate_json(rng: random.Random, obj):
    """One structural edit of a JSON value; returns the new value, or a text
    (when the edit is a duplicate key, which a dict cannot hold)."""
    nodes = list(_nodes(obj))
    path, v = rng.choice(nodes)
    op = rng.randrange(7)
    if op == 0:                                           # replace by another type
        return _set(obj, path, _rand_json(rng))
    if op == 1 and isinstance(v, (int, float)) and not isinstance(v, bool):
        return _set(obj, path, _number(rng, v))
    if op == 2 and isinstance(v, dict) and v:             # rename a key
        k = rng.choice(list(v))
        v[rng.choice([k + "x", k.upper(), "", " " + k, k[:-1]]) if isinstance(k, str)
          else "k"] = v.pop(k)
        return obj
    if op == 3 and isinstance(v, dict) and v:             # delete a key
        v.pop(rng.choice(list(v)))
        return obj
    if op == 4 and isinstance(v, dict):                   # add a key
        v[rng.choice(["zz", "dtype", "__metadata__", "gid", "version", "a"])] = _rand_json(rng)
        return obj
    if op == 5 and isinstance(v, list):                   # grow / shrink a list
        if v and rng.random() < 0.5:
            v.pop(rng.randrange(len(v)))
        else:
            v.append(_rand_json(rng) if not v or rng.random() < 0.5 else v[0])
        return obj
    if op == 6 and isinstance(v, dict) and v:             # duplicate a key (as text)
        k = rng.choice(list(v))
        marker = "\u0001dup\u0001"
        v[marker] = 0
        text = json.dumps(obj)
        return text.replace(json.dumps(marker) + ": 0",
                            json.dumps(k) + ": " + json.dumps(_rand_json(rng)), 1)
    return _set(obj, path, _rand_json(rng))


def _st_split(data: bytes):
    if len(data) < 8:
        return None
    n = struct.unpack("<Q", data[:8])[0]
    if n > len(data) - 8:
        return None
    try:
        return n, json.loads(data[8:8 + n]), data[8 + n:]
    except ValueError:
        return None


def _st_join(header, body: bytes, pad: bool = True) -> bytes:
    hb = (header if isinstance(header, str) else json.dumps(header)).encode("utf-8",
                                                                          "surrogatepass")
    if pad:
        hb += b" " * (-len(hb) % 8)
    return struct.pack("<Q", len(hb)) + hb + body


def _mutate_st_json(rng: random.Random, data: bytes) -> bytes | None:
    got = _st_split(data)
    if got is None:
        return None
    _, header, body = got
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    if isinstance(meta, dict) and isinstance(meta.get("__grit__"), str) and rng.random() < 0.6:
        try:
            doc = json.loads(meta["__grit__"])
        except ValueError:
            doc = None
        if doc is not None:
            new = _mutate_json(rng, doc)
            meta["__grit__"] = new if isinstance(new, str) else json.dumps(new)
            return _st_join(header, body)
    new = _mutate_json(rng, header)
    return _st_join(new, body)


def _flip(rng: random.Random, data: bytes, hot: int) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randrange(1, 9)):
        # mostly inside the header, where the structure is
        i = rng.randrange(min(len(b), hot) if rng.random() < 0.8 else len(b))
        b[i] = rng.randrange(256) if rng.random() < 0.5 else b[i] ^ (1 << rng.randrange(8))
    return bytes(b)


def _gguf_counts(rng: random.Random, data: bytes) -> bytes:
    """Edit one of the GGUF header's counts (version, n_tensors, n_kv) or a
    little-endian integer somewhere in the header."""
    b = bytearray(data)
    off = rng.choice([4, 8, 16, rng.randrange(24, max(25, min(len(b) - 8, 2048)))])
    if off + 8 > len(b):
        return bytes(b)
    width = rng.choice([4, 8])
    v = rng.choice([0, 1, 2, 3, 0xFFFFFFFF, 2**63, 2**64 - 1, len(b), 10**6,
                    int.from_bytes(b[off:off + width], "little") + rng.choice([-1, 1])])
    b[off:off + width] = (v % (1 << (8 * width))).to_bytes(width, "little")
    return bytes(b)


def _gguf_kv(rng: random.Random, data: bytes) -> bytes:
    """Edit the bytes just after a ``grit.``/``general.`` key: the value's type
    tag, its length, or a character of a string value (the GRIT annotation's
    descriptors, shapes, grade strings and layouts)."""
    at = [i for key in (b"grit.", b"general.") for i in _find_all(data, key)]
    if not at:
        return _gguf_counts(rng, data)
    b = bytearray(data)
    i = rng.choice(at) + rng.randrange(4, 160)
    if i >= len(b):
        return bytes(b)
    b[i] = rng.choice(b'0123456789abcdefABCDEF[](),=:" \x00\xff') if rng.random() < 0.7 \
        else rng.randrange(256)
    return bytes(b)


def _find_all(data: bytes, key: bytes) -> list[int]:
    out, i = [], data.find(key)
    while i >= 0 and len(out) < 64:
        out.append(i)
        i = data.find(key, i + 1)
    return out


def mutate(rng: random.Random, kind: str, data: bytes) -> tuple[str, bytes]:
    """(operation, mutant) of one seed."""
    ops = ["flip", "truncate", "extend", "length"]
    if kind == "safetensors":
        ops += ["json"] * 5 + ["pad"]
    else:
        ops += ["counts"] * 2 + ["kv"] * 2
    op = rng.choice(ops)
    # the structured part: the safetensors header; GGUF's header, KV section and
    # tensor infos (the seeds' are well under 4 KiB)
    hot = 8 + struct.unpack("<Q", data[:8])[0] if kind == "safetensors" else 4096
    if op == "flip":
        return op, _flip(rng, data, min(hot, len(data)))
    if op == "truncate":
        return op, data[:rng.randrange(len(data))]
    if op == "extend":
        extra = rng.choice([b"\0", b" ", b"\0" * rng.randrange(1, 64),
                            bytes(rng.randrange(256) for _ in range(rng.randrange(1, 32)))])
        return op, data + extra
    if op == "length":
        n = struct.unpack("<Q", data[:8])[0]
        v = rng.choice([0, 1, 2, n - 1, n + 1, n + 8, len(data), len(data) - 8, 2**63,
                        2**64 - 1, 100_000_001])
        return op, struct.pack("<Q", v % 2**64) + data[8:]
    if op == "counts":
        return op, _gguf_counts(rng, data)
    if op == "kv":
        return op, _gguf_kv(rng, data)
    if op == "pad":
        got = _st_split(data)
        if got is None:
            return op, data
        n, h, body = got
        hb = data[8:8 + n].rstrip(b" ")
        hb = rng.choice([b" " + hb, b"\n" + hb, hb + b"\n", hb + b"\0", hb + b"   "])
        return op, struct.pack("<Q", len(hb)) + hb + body
    out = _mutate_st_json(rng, data)
    return op, out if out is not None else _flip(rng, data, hot)


# ---------------------------------------------------------------------------
# one case


class _Timeout(BaseException):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float):
    if not hasattr(signal, "setitimer"):       # pragma: no cover - not POSIX
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout()
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Outcome:
    load: str                          # "ok", "GritError:<class>" or "escape:<class>"
    codes: list[str] = field(default_factory=list)
    errors: bool = False               # scan has a finding of severity 1, 2 or 4
    escape: str | None = None          # why the case escaped (None: it did not)
    disagree: str | None = None        # why scan and load disagree (None: they agree)


def run_case(path: str) -> Outcome:
    """Feed one file to grit.load and to grit.scan."""
    import grit
    from grit.scan import Severity, scan
    escape = None
    try:
        with _time_limit(CASE_SECONDS):
            try:
                grit.load(path)
                load = "ok"
            except grit.GritError as e:
                load = f"GritError:{type(e).__name__}"
            except _Timeout:
                raise
            except BaseException as e:     # noqa: BLE001 - this is what is counted
                load = f"escape:{type(e).__name__}"
                escape = f"grit.load raised {type(e).__name__}: {str(e)[:200]}\n" + \
                    "".join(traceback.format_exc(limit=-4))
            try:
                rep = scan([path])
            except _Timeout:
                raise
            except BaseException as e:     # noqa: BLE001
                return Outcome(load, escape=f"scan raised {type(e).__name__}: {str(e)[:200]}\n"
                               + "".join(traceback.format_exc(limit=-4)))
    except _Timeout:
        return Outcome("timeout", escape=f"over {CASE_SECONDS} s")
    codes = [f.code for f in rep.findings]
    errors = any(f.severity is not Severity.WARNING for f in rep.findings)
    out = Outcome(load, codes, errors, escape)
    if load == "ok" and errors and not out.escape:
        pass                                # load may accept what scan flags (CheckFailed…)
    if not errors and load != "ok":
        out.disagree = f"scan clean, load {load} ({sorted(set(codes))})"
    return out


# ---------------------------------------------------------------------------
# a campaign


@dataclass
class Counts:
    cases: int = 0
    load_ok: int = 0
    load_grit_error: int = 0
    by_op: collections.Counter = field(default_factory=collections.Counter)
    by_code: collections.Counter = field(default_factory=collections.Counter)
    by_load: collections.Counter = field(default_factory=collections.Counter)
    escapes: list[tuple[str, str, str]] = field(default_factory=list)   # (seed, op, why)
    disagreements: list[tuple[str, str, str]] = field(default_factory=list)
    seconds: float = 0.0
    rss_growth: int = 0

    def summary(self) -> str:
        lines = [f"cases            {self.cases}",
                 f"load ok          {self.load_ok}",
                 f"load GritError   {self.load_grit_error}",
                 f"escapes          {len(self.escapes)}",
                 f"disagreements    {len(self.disagreements)}",
                 f"seconds          {self.seconds:.1f}",
                 f"peak RSS growth  {self.rss_growth >> 20} MiB",
                 "operations       " + ", ".join(f"{k} {v}" for k, v in
                                                  sorted(self.by_op.items())),
                 "load errors      " + ", ".join(f"{k} {v}" for k, v in
                                                  sorted(self.by_load.items())),
                 "scan findings by code (files with at least one):"]
        lines += [f"  {k} {v}" for k, v in sorted(self.by_code.items())]
        for what, items in (("ESCAPE", self.escapes), ("DISAGREE", self.disagreements)):
            for seed, op, why in items[:20]:
                lines.append(f"{what} seed={seed} op={op}: {why}")
        return "\n".join(lines)


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def campaign(cases: int, seed: int, folder: str | None = None, keep: str | None = None,
             progress: bool = False) -> Counts:
    """Run ``cases`` mutants (seeded); ``keep`` saves escaping and disagreeing
    mutants into that folder."""
    counts = Counts()
    rng = random.Random(seed)
    t0, rss0 = time.monotonic(), _rss()
    with tempfile.TemporaryDirectory() as tmp:
        base = folder or tmp
        pool = seeds(base)
        path = {k: os.path.join(tmp, "case" + (".gguf" if k == "gguf" else ".safetensors"))
                for k in ("gguf", "safetensors")}
        for i in range(cases):
            name, kind, data = pool[rng.randrange(len(pool))]
            op, mutant = mutate(rng, kind, data)
            if rng.random() < 0.3:            # a second mutation on top, sometimes
                op2, mutant = mutate(rng, kind, mutant) if len(mutant) > 8 else (op, mutant)
                op = f"{op}+{op2}"
            # an unmatched suffix now and then: the content decides the reader
            p = path[kind] if rng.random() < 0.95 else path["gguf" if kind != "gguf"
                                                               else "safetensors"]
            with open(p, "wb") as f:
                f.write(mutant)
            out = run_case(p)
            counts.cases += 1
            counts.by_op[op.split("+")[0]] += 1
            if out.load == "ok":
                counts.load_ok += 1
            elif out.load.startswith("GritError"):
                counts.load_grit_error += 1
                counts.by_load[out.load.split(":")[1]] += 1
            for c in sorted(set(out.codes)):
                counts.by_code[c] += 1
            for bad, lst in ((out.escape, counts.escapes), (out.disagree, counts.disagreements)):
                if bad is not None:
                    lst.append((name, op, bad))
                    if keep:
                        os.makedirs(keep, exist_ok=True)
                        with open(os.path.join(keep, f"{len(lst):04d}-{name}"), "wb") as f:
                            f.write(mutant)
            os.unlink(p)
            if _rss() - rss0 > RSS_GROWTH:
                counts.escapes.append((name, op, f"peak RSS grew past {RSS_GROWTH >> 20} MiB"))
                break
            if progress and (i + 1) % 1000 == 0:
                print(f"  {i + 1} cases, {time.monotonic() - t0:.0f} s", file=sys.stderr,
                      flush=True)
    counts.seconds = time.monotonic() - t0
    counts.rss_growth = _rss() - rss0
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="save escaping / disagreeing mutants into this folder")
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    a = ap.parse_args(argv)
    counts = campaign(a.cases, a.seed, keep=a.keep, progress=True)
    if a.json:
        print(json.dumps({"cases": counts.cases, "load_ok": counts.load_ok,
                          "load_grit_error": counts.load_grit_error,
                          "escapes": len(counts.escapes),
                          "disagreements": len(counts.disagreements),
                          "by_code": dict(counts.by_code), "by_op": dict(counts.by_op),
                          "seconds": round(counts.seconds, 1)}, indent=1))
    else:
        print(counts.summary())
    return 1 if counts.escapes or counts.disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
