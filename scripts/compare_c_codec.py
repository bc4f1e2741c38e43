"""libgrit's general codec against grit's Python codec, case by case.

    python scripts/compare_c_codec.py --cases 20000 --seed 1 [--fresh 0.2]

Every grade of spec/conformance/vectors.json (the six of Appendix A and the
X_* grades: every element / scale / zero-point format combination the
vectors use), and variants of each with the encode and decode projections
changed (er, es, esn, dr, ds, dt) and, where the element width allows, the
other bit order or PAD8; with --fresh, that share of the cases is on grades
of random fields instead (tests/fuzz_strategies.py gen_fresh_grade: any
legal formats, group sizes, levels, zero points, sparsity).  For every case:

* encode: grit.encode on the numpy path (grit.native.NATIVE off) against
  grit_encode_general and grit_encode (C): the same planes, or both refuse
  (GritEncodeError / GRIT_GRADE_UNKNOWN);
* decode of those planes, and of random planes of the §7.3 sizes:
  grit.codec.decode.decode_canonical (numpy path) against
  grit_decode_general and grit_decode: the same bits.

Values are drawn to reach every branch: normal values at scales from 2^-149
to 2^127, values on and between a format's grid points (ties), zeros of
both signs, subnormals, ±inf, NaN, all-zero and single-value groups.

Prints the counts per format combination and the first mismatches; exit
status 1 on any mismatch.
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import json
import math
import os
import random
import sys
import time
from types import SimpleNamespace

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

import grit                                    # noqa: E402
from grit import clib, native                  # noqa: E402
from grit.codec.decode import decode_canonical  # noqa: E402
from grit.descriptor import Descriptor         # noqa: E402
from grit.errors import GritEncodeError        # noqa: E402
from grit.grade import Grade                   # noqa: E402
from grit.vformats import decode_table         # noqa: E402

_FP = ctypes.POINTER(ctypes.c_float)
ROUNDINGS = ("rne", "rna", "rtz", "rtp", "rtn")
SATURATIONS = ("satfinite", "satmax", "ovfinf")
DT = ("binary32", "binary16", "e4m3", "e5m2", "e2m1", "e3m2", "e8m0", "u8", "s8", "x2044")


def vector_grades() -> list[Grade]:
    with open(os.path.join(ROOT, "spec", "conformance", "vectors.json")) as f:
        grades = json.load(f)["grades"]
    return [Grade.parse(g["canonical"]) for g in grades.values()]


def variant(rng: random.Random, g: Grade) -> Grade:
    """g with some projection fields changed (never its structure)."""
    ch: dict[str, str] = {}
    if rng.random() < 0.5:
        ch["er"] = rng.choice(ROUNDINGS)
    if rng.random() < 0.5:
        ch["es"] = rng.choice(SATURATIONS)
    if rng.random() < 0.2:
        ch["esn"] = rng.choice(("preserve", "ftz"))
    if rng.random() < 0.4:
        ch["dt"] = rng.choice(DT)
        ch["dr"] = rng.choice(ROUNDINGS)
        ch["ds"] = rng.choice(SATURATIONS)
    if rng.random() < 0.2:
        ch["po"] = rng.choice(("lsb", "msb"))
    if rng.random() < 0.2 and g.elem.width <= 8:
        ch["ct"] = rng.choice(("dense", "pad8"))
    return g.replace(**ch) if ch else g


def shape_for(rng: random.Random, g: Grade) -> tuple[tuple[int, ...], int]:
    m = g.sp.m if g.sp else 1
    unit = g.k0 * m // math.gcd(g.k0, m)
    if g.k1:
        unit *= g.k1 // math.gcd(unit // g.k0, g.k1)
    rank = rng.choice((1, 1, 2, 2, 3))
    axis = rng.randrange(rank)
    budget = max(1, 1536 // unit)
    shape = []
    for i in range(rank):
        shape.append(unit * rng.randint(1, min(budget, 3)) if i == axis else rng.randint(1, 3))
    if rng.random() < 0.03:
        shape[rng.randrange(rank)] = 0 if axis != 0 or rank > 1 else shape[0]
    return tuple(shape), axis


def values(rng: random.Random, g: Grade, n: int) -> np.ndarray:
    nr = np.random.default_rng(rng.getrandbits(64))
    kind = rng.randrange(6)
    scale = math.ldexp(1.0, rng.randint(-140, 120))
    if kind == 0:
        x = nr.standard_normal(n) * scale
    elif kind == 1:          # on the element grid times a power of two: ties
        t = decode_table(g.elem.word) if g.elem.width <= 16 else nr.standard_normal(64)
        t = t[np.isfinite(t)]
        if t.size > 256:
            t = nr.choice(t, 256)
        with np.errstate(over="ignore"):
            mid = (t[:, None] + t[None, :]).reshape(-1) / 2
        pool = np.concatenate([t, mid])
        with np.errstate(over="ignore"):
            x = nr.choice(pool, n) * math.ldexp(1.0, rng.randint(-20, 20))
    elif kind == 2:          # wide dynamic range
        x = nr.standard_normal(n) * np.exp2(nr.integers(-149, 128, n).astype(np.float64))
    elif kind == 3:          # small integers (affine grids)
        x = nr.integers(-20, 20, n).astype(np.float64) * scale
    elif kind == 4:          # uniform positive
        x = nr.random(n) * scale
    else:                    # all zero
        x = np.zeros(n)
    with np.errstate(over="ignore"):
        x = x.astype(np.float32)
    if n and rng.random() < 0.6:
        specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 3.4e38,
                             -3.4e38, 1.0, -1.0], np.float32)
        k = rng.randint(1, max(1, n // 16))
        pick = specials if rng.random() < 0.5 else specials[[0, 1, 5, 6, 7, 8, 9, 10]]
        x[nr.integers(0, n, k)] = nr.choice(pick, k)
    return x


class Lib:
    def __init__(self):
        self.lib = clib.library()
        self.registered: set[str] = set()

    def register(self, g: Grade) -> None:
        if g.canonical not in self.registered:
            s = g.canonical.encode()
            det = clib.Detail()
            st = self.lib.grit_register_grade(s, len(s), None, ctypes.byref(det))
            if st != 0:
                raise RuntimeError(f"C refused {g.canonical}: {det.message!r}")
            self.registered.add(g.canonical)

    def encode(self, d: bytes, shape, sizes, lin: np.ndarray, general: bool):
        bufs = [ctypes.create_string_buffer(max(n, 1)) for n in sizes]
        v, _keep = clib.view(d, shape, sizes)
        for i, n in enumerate(sizes):
            if n:
                ctypes.memset(bufs[i], 0x5A, n)
                v.plane[i] = ctypes.addressof(bufs[i])
        det = clib.Detail()
        p = lin.ctypes.data_as(_FP)
        if general:
            st = self.lib.grit_encode_general(ctypes.byref(v), p, lin.size, ctypes.byref(det))
        else:
            st = self.lib.grit_encode(ctypes.byref(v), p, lin.size, 2, ctypes.byref(det))
        if st != 0:
            return st, det.message.decode(errors="replace")
        return 0, [bufs[i].raw[:n] for i, n in enumerate(sizes)]

    def decode(self, d: bytes, shape, planes, general: bool):
        v, _keep = clib.view(d, shape, [len(p) for p in planes], planes)
        n = int(np.prod(shape))
        out = np.full(n, np.float32(-7.0))
        det = clib.Detail()
        p = out.ctypes.data_as(_FP)
        if general:
            st = self.lib.grit_decode_general(ctypes.byref(v), p, n, ctypes.byref(det))
        else:
            st = self.lib.grit_decode(ctypes.byref(v), p, n, 1, ctypes.byref(det))
        assert st == 0, det.message
        return out


def _lin(a: np.ndarray, axis: int) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(a, axis, -1)).reshape(-1)


def one_case(lib: Lib, rng: random.Random, g: Grade, tally, mismatches, combo: str) -> None:
    lib.register(g)
    shape, axis = shape_for(rng, g)
    x = values(rng, g, int(np.prod(shape)))
    x = x.reshape(shape)
    desc = g.descriptor(group_axis=axis)
    d = desc.to_bytes()
    sizes = grit.plane_sizes(desc, shape).sizes
    lin = _lin(x, axis)
    saved = native.NATIVE
    native.NATIVE = False
    try:
        try:
            a = grit.encode(x, g, group_axis=axis)
            want = [bytes(p) for p in a.planes]
        except GritEncodeError as e:
            want = None
            why = str(e)
    finally:
        native.NATIVE = saved
    tally["cases"] += 1
    tally[f"combo {combo}"] += 1

    def bad(what, detail):
        mismatches.append(f"{g.canonical} shape={shape} axis={axis}: {what}: {detail}")

    for general in (True, False):
        path = "general" if general else "grit_encode"
        st, got = lib.encode(d, shape, sizes, lin, general)
        tally[f"encode compared ({path})"] += 1
        if want is None:
            tally[f"encode refused by both ({path})"] += st == 2
            if st != 2:
                bad(f"encode {path}", f"Python refused ({why.splitlines()[0]}), C gave {st}")
        elif st != 0:
            bad(f"encode {path}", f"C refused ({got}), Python encoded")
        elif got != want:
            i = next(i for i in range(4) if got[i] != want[i])
            bad(f"encode {path}", f"plane {i}: C {got[i][:48].hex()} Python {want[i][:48].hex()}")
    # decode: the encoded planes, and random planes of the same sizes
    plane_sets = []
    if want is not None:
        plane_sets.append(("encoded", want))
    plane_sets.append(("random", [bytes(rng.getrandbits(8) for _ in range(n)) for n in sizes]))
    for label, planes in plane_sets:
        arr = SimpleNamespace(descriptor=Descriptor.from_bytes(d), grade=g, shape=shape,
                              planes=tuple(planes))
        native.NATIVE = False
        try:
            ref = _lin(decode_canonical(arr), axis).view(np.uint32)
        finally:
            native.NATIVE = saved
        for general in (True, False):
            got = lib.decode(d, shape, planes, general).view(np.uint32)
            tally[f"decode compared ({label})"] += general
            tally["elements compared"] += ref.size
            if not np.array_equal(got, ref):
                i = int(np.flatnonzero(got != ref)[0])
                bad(f"decode {label} {'general' if general else 'grit_decode'}",
                    f"element {i}: C {got[i]:08x} Python {ref[i]:08x}")


def fresh_grade(chooser) -> Grade:
    """A grade of random fields (tests/fuzz_strategies.py gen_fresh_grade):
    any legal formats, group sizes, levels, zero points or sparsity."""
    import fuzz_strategies as F
    while True:
        g = F.gen_fresh_grade(chooser)
        if g is not None and g.k0 <= 256 and (g.sp is None or g.k0 % g.sp.m == 0
                                              or g.k0 * g.sp.m <= 512):
            return g


def run(cases: int, seed: int = 1, fresh: float = 0.0):
    rng = random.Random(seed)
    lib = Lib()
    base = vector_grades()
    tally: collections.Counter = collections.Counter()
    mismatches: list[str] = []
    chooser = None
    if fresh:
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        import fuzz_strategies as F
        chooser = F.RandomChooser(random.Random(seed + 1))
    for k in range(cases):
        if chooser is not None and rng.random() < fresh:
            g = fresh_grade(chooser)
            one_case(lib, rng, g, tally, mismatches, "fresh")
            continue
        b = base[k % len(base)]
        g = variant(rng, b) if rng.random() < 0.6 else b
        combo = (f"e={b['e']} s0={b['s0']}" + (f" s1={b['s1']}" if b['s1'] else "")
                 + (f" zp={b['zp']}" if b['zp'] else "") + (f" sp={b['sp']}" if b['sp'] else ""))
        one_case(lib, rng, g, tally, mismatches, combo)
        tally["variants"] += g is not b
    return tally, mismatches


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fresh", type=float, default=0.0,
                    help="share of cases on a grade of random fields instead")
    args = ap.parse_args()
    t = time.perf_counter()
    tally, mismatches = run(args.cases, args.seed, args.fresh)
    for k in sorted(tally):
        print(f"{tally[k]:>10}  {k}")
    print(f"{len(mismatches)} mismatches in {time.perf_counter() - t:.1f} s")
    for m in mismatches[:20]:
        print("MISMATCH", m)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
