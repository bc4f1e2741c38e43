"""libgrit, the C library of grit.h, against the Python implementation.

Every comparison here has an independent side: the spec's vectors (run in C
by spec/conformance/run.c), or grit's Python modules, which are themselves
tested against the spec (tests/test_formats.py, test_grade.py, test_check.py,
test_codec.py).  The library is loaded through ctypes (grit.clib).  Tests
that need a compiler, pkg-config, CMake or clang's libFuzzer skip, saying
which is missing.
"""
from __future__ import annotations

import ctypes
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import grit
from grit import clib
from grit import grade as G
from grit.descriptor import Descriptor
from grit.formats import (
    REGISTERED as FORMATS, Format, fmt_classify, fmt_decode, fmt_encode, fmt_encode_rne,
)
from grit.grade import REGISTERED_GRADES

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

pytestmark = pytest.mark.skipif(not clib.available(),
                                reason="libgrit was not built (no C compiler at install)")


def _lib():
    return clib.library()


def _cc(*names):
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    return None


def _bits(f: float) -> int:
    return struct.unpack("<I", struct.pack("<f", f))[0]


# ---------------------------------------------------------------------------
# the header: C99 and C++17, -Wall -Wextra -Werror -pedantic, gcc and clang

_TU = """#include "grit.h"
#include <string.h>
int main(void) {
    grit_view_t v; grit_detail_t d;
    memset(&v, 0, sizeof v);
    if (grit_check(&v, 1, &d) != GRIT_OK) return 1;
    return (int)sizeof(grit_desc_t) - 64;
}
"""
_COMPILERS = [("gcc", "-std=c99", "c"), ("clang", "-std=c99", "c"),
              ("g++", "-std=c++17", "cpp"), ("clang++", "-std=c++17", "cpp")]


@pytest.mark.parametrize("cc,std,ext", _COMPILERS, ids=[f"{c} {s}" for c, s, _ in _COMPILERS])
def test_header_compiles_warning_free(tmp_path, cc, std, ext):
    if not shutil.which(cc):
        pytest.skip(f"{cc} is not installed")
    src = tmp_path / f"tu.{ext}"
    src.write_text(_TU)
    r = subprocess.run([cc, std, "-Wall", "-Wextra", "-Werror", "-pedantic",
                        f"-I{clib.get_include()}", "-c", str(src), "-o", str(tmp_path / "tu.o")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("cc,std,ext", _COMPILERS, ids=[f"{c} {s}" for c, s, _ in _COMPILERS])
def test_a_dropped_check_result_does_not_compile(tmp_path, cc, std, ext):
    """§7.1: the result is must-use (GRIT_NODISCARD)."""
    if not shutil.which(cc):
        pytest.skip(f"{cc} is not installed")
    src = tmp_path / f"tu.{ext}"
    src.write_text(_TU.replace("if (grit_check(&v, 1, &d) != GRIT_OK) return 1;",
                               "grit_check(&v, 1, &d);"))
    r = subprocess.run([cc, std, "-Wall", "-Werror", f"-I{clib.get_include()}", "-c", str(src),
                        "-o", str(tmp_path / "tu.o")], capture_output=True, text=True)
    assert r.returncode != 0 and "grit_check" in r.stderr


def test_view_layout_matches_ctypes():
    # grit_view_t as ctypes lays it out (the C rules): d at 0, rank at 64,
    # shape 8-aligned after it
    assert ctypes.sizeof(clib.View) == 64 + 8 + 8 * 8 + 4 * 8 + 4 * 8 + 16
    assert clib.View.shape.offset == 72


# ---------------------------------------------------------------------------
# §3 descriptor bytes, §6 fingerprints, §6.4 base32

def test_descriptor_bytes_round_trip_as_python_packs_them():
    lib, rng = _lib(), random.Random(1)
    for _ in range(2000):
        raw = rng.randbytes(64)
        d = clib.View().d
        lib.grit_desc_from_bytes(raw, ctypes.byref(d))
        out = ctypes.create_string_buffer(64)
        lib.grit_desc_to_bytes(ctypes.byref(d), out)
        assert out.raw == raw == Descriptor.from_bytes(raw).to_bytes()
    # the fields land where §3.1 puts them: frame readback through the registry
    f = clib.View().d
    assert lib.grit_grade_frame(grit.GRADE_Q4KS.id, ctypes.byref(f)) == 1
    b = ctypes.create_string_buffer(64)
    lib.grit_desc_to_bytes(ctypes.byref(f), b)
    want = {k: v for k, v in grit.GRADE_Q4KS.frame_fields().items()}
    got = Descriptor.from_bytes(b.raw)
    assert {k: getattr(got, k) for k in want} == want


def test_fnv_grade_id_gid_digest_against_python():
    lib, rng = _lib(), random.Random(2)
    for n in (0, 1, 7, 64, 1000):
        data = rng.randbytes(n)
        assert lib.grit_fnv1a64(data, n) == grit.fnv1a64(data)
        out = ctypes.create_string_buffer(16)
        lib.grit_fnv1a128(data, n, out)
        assert int.from_bytes(out.raw, "big") == grit.fnv1a128(data)
    for g in REGISTERED_GRADES.values():
        s = g.canonical.encode()
        assert lib.grit_grade_id(s, len(s)) == g.id
    for name, g in REGISTERED_GRADES.items():
        for shape in ((32,), (4, 64), (2, 3, 256)):
            d = g.descriptor(group_axis=len(shape) - 1).to_bytes()
            v, _ = clib.view(d, shape, [0, 0, 0, 0])
            out = ctypes.create_string_buffer(16)
            assert lib.grit_gid(ctypes.byref(v), out, None) == 0
            assert out.raw == grit.gid(g.canonical, d, shape)
    planes = [rng.randbytes(n) for n in (33, 2, 0, 5)]
    v, _keep = clib.view(bytes(64), [1], [len(p) for p in planes], planes)
    out = ctypes.create_string_buffer(16)
    lib.grit_digest(ctypes.byref(v), out)
    assert out.raw == grit.digest(planes)


def test_base32_against_python():
    lib, rng = _lib(), random.Random(3)
    for _ in range(500):
        gid = rng.randbytes(16)
        enc = ctypes.create_string_buffer(27)
        lib.grit_base32_encode(gid, enc)
        assert enc.value.decode() == grit.base32_encode(gid)
        back = ctypes.create_string_buffer(16)
        s = enc.value.lower().replace(b"1", b"l").replace(b"0", b"o")
        assert lib.grit_base32_parse(s, 26, back) == 0 and back.raw == gid
    back = ctypes.create_string_buffer(16)
    for bad in (b"8" + b"0" * 25, b"U" * 26, b"0" * 25, b"0" * 27):
        assert lib.grit_base32_parse(bad, len(bad), back) == -1


# ---------------------------------------------------------------------------
# §2 the format word

def test_fmt_valid_on_every_word():
    lib = _lib()
    bad = [w for w in range(1 << 16) if bool(lib.grit_fmt_valid(w)) != (fmt_classify(w) is None)]
    assert bad == []


def _legal_small_words():
    return [w for w in range(1, 1 << 16) if fmt_classify(w) is None and (w & 31) + 1 <= 8]


def test_fmt_decode_every_code_of_every_small_format():
    lib = _lib()
    words = _legal_small_words() + [FORMATS["binary16"]]
    for w in words:
        for code in range(1 << ((w & 31) + 1)):
            want = fmt_decode(w, code)
            got = lib.grit_fmt_decode(w, code)
            if math.isnan(want):
                assert _bits(got) == 0x7FC00000, (hex(w), code)
            else:
                assert _bits(got) == _bits(want), (hex(w), code, got, want)


def _ladder_probes(w: int) -> tuple[list[float], list[float]]:
    """For a word of width <= 8: its finite magnitudes, and every rung, its
    midpoints and their binary32 neighbours; ([], []) for wider words."""
    if (w & 31) + 1 > 8:
        return [], []
    mags = sorted({abs(fmt_decode(w, c)) for c in range(1 << ((w & 31) + 1))
                   if math.isfinite(fmt_decode(w, c))})
    vals: list[float] = []
    for a, b in zip(mags, mags[1:]):
        m = np.float32((a + b) / 2)
        vals += [a, float(m), float(np.nextafter(m, np.float32(0))),
                 float(np.nextafter(m, np.float32(np.inf)))]
    return mags, vals


def test_fmt_encode_rne_against_python():
    lib, rng = _lib(), random.Random(4)
    words = list(FORMATS.values())
    words += rng.sample(_legal_small_words(), 60)
    specials = [0.0, -0.0, math.inf, -math.inf, 1e-45, -1e-45, 3.4e38, 0.25, 0.75, 2.5, -5.0]
    for w in words:
        vals = list(specials) + _ladder_probes(w)[1]
        vals += [float(np.float32(rng.uniform(-1, 1) * 2.0 ** rng.randint(-30, 30)))
                 for _ in range(200)]
        for x in vals:
            for sx in (x, -x):
                want = fmt_encode_rne(w, sx)
                assert lib.grit_fmt_encode_rne(w, sx) == want, (hex(w), sx)
        nan = lib.grit_fmt_encode_rne(w, math.nan)
        try:
            assert nan == fmt_encode_rne(w, math.nan)
        except grit.GritError:
            assert nan == -1


def _legal_words_any_width(rng, n):
    """n random legal words of widths 9..32 (floats and integers)."""
    out = []
    while len(out) < n:
        w = rng.randrange(1, 1 << 16)
        if fmt_classify(w) is None and (w & 31) + 1 > 8:
            out.append(w)
    return out


def test_fmt_encode_every_mode_against_python():
    """grit_fmt_encode under every rounding x saturation against
    grit.formats.fmt_encode (the scalar oracle): registered words, 12 legal
    small words, 10 legal wide ones; every rung, midpoint and neighbour of
    the small ladders, and values past the largest finite."""
    lib, rng = _lib(), random.Random(5)
    words = list(FORMATS.values()) + rng.sample(_legal_small_words(), 12)
    words += _legal_words_any_width(rng, 10)
    rnds, sats = ("rne", "rna", "rtz", "rtp", "rtn"), ("satfinite", "satmax", "ovfinf")
    compared = 0
    for w in words:
        top = Format(w).max_finite
        vals = [0.0, math.inf, 1e-45, 3.4e38, 1.0, 2.5] + _ladder_probes(w)[1]
        vals += [top * 1.01, top * 1.0625, top * 1.125, top * 1.5, top * 2, top * 3]
        vals += [float(np.float32(rng.uniform(-1, 1) * 2.0 ** rng.randint(-140, 127)))
                 for _ in range(30)]
        for ri, r in enumerate(rnds):
            for si, sat in enumerate(sats):
                for x in vals:
                    for sx in (x, -x):
                        with np.errstate(over="ignore"):
                            sx = float(np.float32(sx))
                        want = fmt_encode(w, sx, r, sat)
                        got = lib.grit_fmt_encode(w, sx, ri, si)
                        assert got == want, (hex(w), sx, r, sat, got, want)
                        compared += 1
                try:
                    want_nan = fmt_encode(w, math.nan, r, sat)
                except grit.GritError:
                    want_nan = -1
                assert lib.grit_fmt_encode(w, math.nan, ri, si) == want_nan
    assert lib.grit_fmt_encode(0, 1.0, 0, 0) == -1
    assert lib.grit_fmt_encode(FORMATS["e2m1"], 1.0, 5, 0) == -1
    assert lib.grit_fmt_encode(FORMATS["e2m1"], 1.0, 0, 3) == -1
    print(f"{compared} encodes compared over {len(words)} words")


# ---------------------------------------------------------------------------
# the grade registry

def _frame(lib, grade_id):
    f = clib.View().d
    assert lib.grit_grade_frame(grade_id, ctypes.byref(f)) == 1
    b = ctypes.create_string_buffer(64)
    lib.grit_desc_to_bytes(ctypes.byref(f), b)
    return Descriptor.from_bytes(b.raw)


def _register(lib, text: str) -> int:
    s = text.encode()
    det, gid = clib.Detail(), ctypes.c_uint64()
    st = lib.grit_register_grade(s, len(s), ctypes.byref(gid), ctypes.byref(det))
    assert st == 0, det.message
    return gid.value


def test_registered_frames_are_pythons():
    """The frame C derives from a canonical string is grit.grade's
    (Grade._frame_fields), for the built-in grades, the fuzz seed grades and
    random fresh ones."""
    import fuzz_strategies as F
    lib = _lib()
    grades = list(REGISTERED_GRADES.values()) + [grit.Grade.parse(s) for s in F.SEED_GRADES]
    chooser = F.RandomChooser(random.Random(5))
    saved = dict(G._REGISTRY)
    try:
        while len(grades) < 700:
            g = F.gen_fresh_grade(chooser)
            if g is not None:
                grades.append(g)
    finally:
        G._REGISTRY.clear()
        G._REGISTRY.update(saved)
    for g in grades:
        assert _register(lib, g.canonical) == g.id
        got = _frame(lib, g.id)
        want = g.frame_fields()
        assert {k: getattr(got, k) for k in want} == want, g.canonical
        assert lib.grit_grade_canonical(g.id).decode() == g.canonical


def test_registry_takes_canonical_strings_only():
    import json
    lib = _lib()
    doc = json.loads((ROOT / "spec" / "conformance" / "vectors.json").read_text())
    refused = []
    for r in doc["fingerprint"]:
        if r["kind"] == "canonicalization":
            refused += [s for s in r["spellings"] if s != r["canonical"]]
        elif r["kind"] == "reject":
            refused.append(r["input"])
    for s in refused + ["", "grit1()", "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs,)",
                        "grit1(e=e2m1,k0=032,s0=e8m0,esr=exp2floormaxabs)",
                        "grit1(e=x2043,k0=32,s0=e8m0,esr=exp2floormaxabs)"]:
        b = s.encode()
        det = clib.Detail()
        assert lib.grit_register_grade(b, len(b), None, ctypes.byref(det)) == 2, s
        assert det.message


def test_registry_is_thread_safe():
    """Threads registering distinct grades while others look up: every
    grade is found under its id afterwards (ctypes drops the GIL per call)."""
    lib = _lib()
    texts = [f"grit1(e=u8,k0={k},s0=binary16,esr=ratiomaxabs,ao=pairwise{t + 2})"
             for t in range(4) for k in range(1, 400)]
    errors = []

    def reg(chunk):
        for s in chunk:
            b = s.encode()
            if lib.grit_register_grade(b, len(b), None, None) != 0:
                errors.append(s)

    def look():
        for _ in range(3000):
            lib.grit_grade_canonical(grit.GRADE_MXFP4.id)

    threads = [threading.Thread(target=reg, args=(texts[i::4],)) for i in range(4)]
    threads += [threading.Thread(target=look) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for s in texts:
        b = s.encode()
        assert lib.grit_grade_canonical(lib.grit_grade_id(b, len(b))) == b


# ---------------------------------------------------------------------------
# §7 grit_check

def test_layout_registry_takes_python_canonical_texts_only():
    """grit_register_layout accepts exactly the texts Python's parser gives
    back as canonical (str(parse_layout(t)) == t), with Python's word:
    the fuzz generator's texts (seeds, random trees, deep nesting, huge
    numbers, mutations) and the canonical forms of those that parse."""
    import fuzz_strategies as F
    lib, chooser = _lib(), F.RandomChooser(random.Random(8))
    texts = [F.gen_layout_text(chooser) for _ in range(3000)]
    accepted = 0
    for text in texts + [str(grit.parse_layout(t)) for t in F.SEED_LAYOUTS]:
        try:
            e = grit.parse_layout(text)
            extra = [str(e)]
        except grit.GritLayoutError:
            e, extra = None, []
        canonical = e is not None and str(e) == text
        for t, want in [(text, canonical)] + [(x, True) for x in extra]:
            raw = t.encode("utf-8", "surrogatepass")
            got, det = ctypes.c_uint64(), clib.Detail()
            st = lib.grit_register_layout(raw, len(raw), ctypes.byref(got), ctypes.byref(det))
            assert (st == 0) == want, (t[:200], det.message)
            if want:
                accepted += 1
                assert got.value == grit.parse_layout(t).word
                assert lib.grit_layout_expression(got.value) == raw
            else:
                assert st == 3 and det.message
    assert accepted > 1000
    assert lib.grit_layout_expression(0x8123456789ABCDEF) is None


def test_check_resolves_hashed_data_words():
    """Step 2's F_INTERLEAVED rule (docs/spec-decisions.md "interleaved-
    flag") with class-0x8 words: an unresolved word and an Interleave pass,
    another registered expression is GradeUnknown, as in grit.check."""
    from grit.placement.expr import layout_scope
    lib = _lib()
    d0 = grit.GRADE_MXFP4.descriptor()
    unresolved = d0.replace(placement_data=0x8123456789ABCDEF, flags=d0.flags | 0x10)
    sizes = list(grit.plane_sizes(unresolved, (64,)).sizes)
    assert sizes == [34, 0, 0, 0]
    assert clib.check(unresolved.to_bytes(), [64], sizes, 1).status == 0
    for text, want in (("Interleave(Perm([1,0]),3)", 0), ("Compose(ColMajor,Perm([2,0,1]))", 2),
                       ("Swizzle(3,1,7)", 2)):
        d = d0.replace(placement_data=grit.parse_layout(text).word, flags=d0.flags | 0x10)
        with layout_scope():
            grit.register_layout(text)
            py = grit.diagnose(d.to_bytes(), (64,), sizes, 1)
        raw = text.encode()
        assert lib.grit_register_layout(raw, len(raw), None, None) == 0
        det = clib.check(d.to_bytes(), [64], sizes, 1)
        assert det.status == int(py.status) == want, (text, det.message, py.message)
        assert (det.step, det.field) == ((2, b"flags") if want else (0, b""))
        if want:
            assert text.encode() in det.message


def test_level1_never_reads_a_plane():
    """§14: plane pointers that fault if read, any descriptor, level 1."""
    import fuzz_strategies as F
    lib, chooser = _lib(), F.RandomChooser(random.Random(6))
    for _ in range(3000):
        d = F.gen_descriptor(chooser).to_bytes()
        v, _ = clib.view(d, [64, 32], [16, 1, 0, 1024])
        for i in range(4):
            v.plane[i] = 8 + 8 * i
        assert lib.grit_check(ctypes.byref(v), 1, None) in range(5)


def test_level2_says_what_it_could_not_verify():
    """Metadata inside an interleaved data plane is not taken apart by
    libgrit: the check passes and says so (as CheckReport.unverified)."""
    d = grit.GRADE_I8S24.descriptor(placement_data=0x1000000000000005)
    d = d.replace(flags=d.flags | 0x10)
    sizes = grit.plane_sizes(d, (32,)).sizes
    assert sizes[1:] == (0, 0, 0)
    det = clib.check(d.to_bytes(), (32,), sizes, 2, [b"\xff" * sizes[0], None, None, None])
    assert det.status == 0 and b"not verified" in det.message
    det = clib.check(d.to_bytes(), (32,), sizes, 1)
    assert det.status == 0 and det.message == b"Ok"


def test_check_agrees_with_python_on_fuzzed_cases():
    """scripts/compare_c_check.py on a small count: status, step, field and
    plane of every case, and the gid where it is defined."""
    import compare_c_check as C
    n = int(os.environ.get("GRIT_LIBGRIT_CASES", 4000))
    tally, mismatches = C.run(n, seed=11)
    assert tally["cases"] == n and tally["level1 Ok"] > 0 and tally["gid compared"] > 0
    assert mismatches == []


# ---------------------------------------------------------------------------
# §8-§10 decode / encode through the library

def _c_encode(lib, g, x, axis, threads=1):
    d = g.descriptor(group_axis=axis).to_bytes()
    ps = grit.plane_sizes(Descriptor.from_bytes(d), x.shape).sizes
    planes = [ctypes.create_string_buffer(max(n, 1)) for n in ps]
    v, _ = clib.view(d, x.shape, ps)
    for i, n in enumerate(ps):
        if n:
            v.plane[i] = ctypes.addressof(planes[i])
    lin = np.ascontiguousarray(np.moveaxis(x, axis, -1)).reshape(-1)
    det = clib.Detail()
    st = lib.grit_encode(ctypes.byref(v), lin.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                         lin.size, threads, ctypes.byref(det))
    assert st == 0, det.message
    return d, [planes[i].raw[:n] for i, n in enumerate(ps)]


def _c_decode(lib, d, shape, planes, threads=1):
    v, _keep = clib.view(d, shape, [len(p) for p in planes], planes)
    n = int(np.prod(shape))
    lin = np.empty(n, np.float32)
    det = clib.Detail()
    st = lib.grit_decode(ctypes.byref(v), lin.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), n,
                         threads, ctypes.byref(det))
    assert st == 0, det.message
    return lin


@pytest.mark.parametrize("name", sorted(REGISTERED_GRADES))
def test_codec_equals_python(name):
    lib, rng = _lib(), np.random.default_rng(7)
    g = REGISTERED_GRADES[name]
    for shape, axis in (((2, 512), 1), ((512, 3), 0), ((4, 2, 256), 2)):
        x = (rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 1e4])).astype(np.float32)
        x.flat[rng.integers(0, x.size, 3)] = [0.0, -0.0, 1e-40]
        if name != "GRADE_NVF4":          # a poisoned group (§9.1 rule 2)
            x.flat[5] = np.nan
        a = grit.encode(x, g, group_axis=axis)
        d, planes = _c_encode(lib, g, x, axis)
        assert d == a.descriptor.to_bytes()
        assert planes == [bytes(p) for p in a.planes]
        want = np.ascontiguousarray(np.moveaxis(grit.decode(a), axis, -1)).reshape(-1)
        for threads in (1, 3):
            got = _c_decode(lib, d, shape, planes, threads)
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_general_codec_equals_python_on_fuzzed_cases():
    """scripts/compare_c_codec.py on a small count: every grade of the
    conformance vectors (each element / scale / zero-point combination they
    use) and variants of its projections, and a tenth of grades of random
    fields; encode planes, and the decode of encoded and of random planes,
    through the general codec and through grit_decode / grit_encode, against
    the numpy codec."""
    import compare_c_codec as C
    n = int(os.environ.get("GRIT_LIBGRIT_CODEC_CASES", 560))
    tally, mismatches = C.run(n, seed=12, fresh=0.1)
    combos = [k for k in tally if k.startswith("combo ") and k != "combo fresh"]
    print({k: tally[k] for k in sorted(tally)})
    assert len(combos) == 18 and all(tally[k] >= n // 40 for k in combos)
    assert tally["combo fresh"] > n // 20          # grades of random fields besides
    assert tally["variants"] > n // 3 and tally["decode compared (random)"] == n
    assert tally["encode refused by both (general)"] > 0
    assert mismatches == []


def _plain_view(d: bytes, shape, planes):
    return clib.view(d, shape, [len(p) for p in planes], planes)


def test_a_grade_registered_at_run_time_decodes_and_encodes():
    """A grade outside Appendix A, registered by its canonical string:
    grit_decode / grit_encode serve it, equal to Python's codec."""
    lib, rng = _lib(), np.random.default_rng(3)
    g = grit.Grade.parse("grit1(e=e3m2,k0=16,s0=e8m0,po=msb,es=ovfinf,esr=exp2ceilmaxabs,"
                         "dt=binary16)")
    _register(lib, g.canonical)
    x = (rng.standard_normal((3, 64)) * 100).astype(np.float32)
    a = grit.encode(x, g)
    d, planes = _c_encode(lib, g, x, 1)
    assert planes == [bytes(p) for p in a.planes]
    got = _c_decode(lib, d, x.shape, planes)
    assert np.array_equal(got.view(np.uint32), grit.decode(a).reshape(-1).view(np.uint32))


def test_codec_refuses_what_it_cannot_do():
    lib = _lib()
    out = (ctypes.c_float * 32)()
    det = clib.Detail()
    col = grit.GRADE_MXFP4.descriptor(placement_data=0x1000000000000002).to_bytes()
    v, _ = clib.view(col, [32], [16, 1, 0, 0], [bytes(16), bytes(1), None, None])
    assert lib.grit_decode(ctypes.byref(v), out, 32, 1, ctypes.byref(det)) == 3
    assert lib.grit_decode_general(ctypes.byref(v), out, 32, ctypes.byref(det)) == 3
    v, _ = clib.view(grit.GRADE_MXFP4.descriptor().to_bytes(), [32], [16, 1, 0, 0],
                     [bytes(16), bytes(1), None, None])
    assert lib.grit_decode(ctypes.byref(v), out, 31, 1, ctypes.byref(det)) == 1
    assert det.field == b"out"
    # a grade with no encode rule (exp2 with a zero point): decodes, refuses encode
    g = grit.Grade.parse("grit1(e=u4,k0=32,s0=e8m0,zp=u4,esr=exp2floormaxabs)")
    _register(lib, g.canonical)
    with pytest.raises(grit.GritEncodeError):
        grit.encode(np.ones(32, np.float32), g)
    d = g.descriptor().to_bytes()
    planes = [bytes(range(16)), bytes([127]), b"", bytes([3])]
    v, _keep = _plain_view(d, [32], planes)
    assert lib.grit_decode(ctypes.byref(v), out, 32, 1, ctypes.byref(det)) == 0
    want = grit.decode(grit.GritArray(g.descriptor(), (32,), tuple(planes)))
    assert np.array_equal(np.frombuffer(out, np.float32), want)
    x = np.ones(32, np.float32)
    assert lib.grit_encode(ctypes.byref(v), x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                           32, 1, ctypes.byref(det)) == 2
    assert b"no encode rule" in det.message
    # NaN where no scale format has a NaN code (§9.1 rule 2): Python's
    # GritEncodeError is GRIT_GRADE_UNKNOWN, field "x"
    g = grit.Grade.parse("grit1(e=u4,k0=32,s0=u8,zp=u4,esr=affineminmax)")
    _register(lib, g.canonical)
    x[3] = np.nan
    with pytest.raises(grit.GritEncodeError):
        grit.encode(x, g)
    bufs = [ctypes.create_string_buffer(n) for n in (16, 1, 1)]
    v, _ = clib.view(g.descriptor().to_bytes(), [32], [16, 1, 0, 1])
    v.plane[0], v.plane[1], v.plane[3] = (ctypes.addressof(b) for b in bufs)
    assert lib.grit_encode(ctypes.byref(v), x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                           32, 1, ctypes.byref(det)) == 2
    assert det.field == b"x" and b"NaN" in det.message


# ---------------------------------------------------------------------------
# C programs against the library: the conformance runner, the example

def _build(tmp_path, src, out, *extra):
    cc = _cc("cc", "gcc", "clang")
    if cc is None:
        pytest.skip("no C compiler")
    exe = tmp_path / out
    r = subprocess.run([cc, "-std=c99", "-D_POSIX_C_SOURCE=200809L", "-O1", "-Wall", "-Wextra",
                        "-Werror", f"-I{clib.get_include()}", str(src), *extra,
                        f"-L{Path(clib.get_library()).parent}",
                        f"-Wl,-rpath,{Path(clib.get_library()).parent}", "-lgrit", "-o",
                        str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def test_conformance_runner_passes_every_vector(tmp_path):
    exe = _build(tmp_path, ROOT / "spec" / "conformance" / "run.c", "run")
    lines = subprocess.run([sys.executable, str(ROOT / "spec" / "conformance" / "to_lines.py")],
                           capture_output=True, check=True).stdout
    r = subprocess.run([str(exe)], input=lines, capture_output=True)
    out = r.stdout.decode()
    assert r.returncode == 0, out[-3000:]
    assert " 0 differences" in out
    assert "of all 139 vectors" in out
    # and it does notice a difference: one decoded bit flipped, in a vector
    # of Appendix A and in one of a grade registered at run time
    bad = lines.replace(b" 40c00000 ", b" 40c00001 ", 1)
    assert bad != lines
    r = subprocess.run([str(exe)], input=bad, capture_output=True)
    assert r.returncode == 1 and b"decoded bits" in r.stdout
    recs = lines.split(b"\n")
    i = next(i for i, rec in enumerate(recs) if rec.startswith(b"vec x/gptq4/"))
    t = recs[i].split(b" ")
    t[-1] = b"%08x" % (int(t[-1], 16) ^ 1)
    recs[i] = b" ".join(t)
    r = subprocess.run([str(exe)], input=b"\n".join(recs), capture_output=True)
    assert r.returncode == 1 and b"FAIL x/gptq4/" in r.stdout
    assert b"decoded bits (general codec)" in r.stdout


def test_example_builds_with_pkg_config_and_runs(tmp_path):
    pc = shutil.which("pkg-config")
    if pc is None:
        pytest.skip("pkg-config is not installed")
    env = dict(os.environ, PKG_CONFIG_PATH=grit.get_pkgconfig_dir())
    flags = subprocess.run([pc, "--cflags", "--libs", "grit"], env=env, capture_output=True,
                           text=True, check=True).stdout.split()
    cc = _cc("cc", "gcc", "clang")
    if cc is None:
        pytest.skip("no C compiler")
    exe = tmp_path / "check_tensor"
    r = subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror",
                        str(ROOT / "examples" / "c" / "check_tensor.c"), *flags, "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _run_example(exe)


def test_example_builds_with_cmake_and_runs(tmp_path):
    cmake = shutil.which("cmake")
    if cmake is None or _cc("cc", "gcc", "clang") is None:
        pytest.skip("cmake or a C compiler is not installed")
    b = tmp_path / "build"
    for cmd in ([cmake, "-S", str(ROOT / "examples" / "c"), "-B", str(b),
                 f"-Dgrit_DIR={grit.get_cmake_dir()}"], [cmake, "--build", str(b)]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    _run_example(b / "check_tensor")


def _run_example(exe):
    f = ROOT / "examples" / "clean" / "model.safetensors"
    a = grit.load(str(f))["blk.0.attn_q.weight"]
    r = subprocess.run([str(exe), str(f), "blk.0.attn_q.weight"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"Ok (Ok) gid {a.gid_base32}" in r.stdout


def test_get_library_says_when_it_is_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(clib, "_PKG", tmp_path)
    assert not clib.available()
    with pytest.raises(grit.GritUsageError, match="libgrit was not built"):
        clib.get_library()


# ---------------------------------------------------------------------------
# the sanitizer fuzz target, briefly

def test_libfuzzer_campaign_short(tmp_path):
    """scripts/fuzz_c.sh for GRIT_FUZZ_C_RUNS executions (default 10^5)
    under ASan and UBSan: no report."""
    if shutil.which("clang") is None:
        pytest.skip("clang is not installed (apt-get install clang): no libFuzzer target")
    runs = int(os.environ.get("GRIT_FUZZ_C_RUNS", 100000))
    r = subprocess.run([str(ROOT / "scripts" / "fuzz_c.sh"), "600", f"-runs={runs}"],
                       capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, GRIT_FUZZ_C_OUT=str(tmp_path)))
    if r.returncode == 77:
        pytest.skip(f"clang cannot build a libFuzzer target here: {r.stderr.strip()[-200:]}")
    assert r.returncode == 0, r.stderr[-3000:]
    done = [ln for ln in r.stderr.splitlines() if ln.startswith("stat::number_of_executed_units")]
    assert done and int(done[0].split()[-1]) >= runs
    codec = [ln for ln in r.stderr.splitlines() if ln.startswith("fuzz_check codec:")]
    assert codec and int(codec[0].split()[2]) > 0, "no view reached the codec"
    print(done[0], codec[0])
