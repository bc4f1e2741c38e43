"""The native codec kernels (grit._kernels) against the numpy path.

The kernels are a fast path of grit.decode / grit.encode for the registered
grades: for every input they must give the same plane bytes and the same
decoded bits as the vectorised numpy code, which is itself tested against
the scalar transcriptions of §8–§10 (tests/test_codec.py) and the
conformance vectors.  Both the AVX2 and the portable C loops are compared,
and every thread count must give the result of one thread.
"""
from __future__ import annotations

import importlib
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import grit
from grit.grade import REGISTERED_GRADES

try:
    from grit import _kernels
except ImportError as exc:  # pragma: no cover - only where no compiler exists
    _kernels = None
    _REASON = f"grit._kernels is not built ({exc}); the numpy path is tested elsewhere"
else:
    _REASON = ""

pytestmark = pytest.mark.skipif(_kernels is None, reason=_REASON or "built")

from conftest import SIMD  # noqa: E402

dm = importlib.import_module("grit.native")

SETTINGS = settings(max_examples=int(os.environ.get("GRIT_HYPOTHESIS_EXAMPLES", 150)),
                    deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

GRADES = list(REGISTERED_GRADES)

F32_MAX = float(np.finfo(np.float32).max)
TINY = 2.0 ** -149
# values where a rounding decision sits: E2M1 ladder midpoints (ties), the
# E2M1 / E4M3 / s8 / binary16 tops and just past them, and the ends of binary32
SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, F32_MAX, -F32_MAX, TINY, -TINY,
           2.0 ** -126, 2.0 ** -127, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 6.5, -2.5,
           448.0, 464.0, 127.0, 127.5, 63.5, 65504.0, 65520.0, 65519.0, 1.0, -1.0]
TIES = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 0.5, 3.0], dtype=np.float64)



def _native(fn, threads=None):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dm, "NATIVE", True)
        mp.setattr(dm, "THREADS", threads)
        return fn()


def _numpy(fn):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dm, "NATIVE", False)
        return fn()


def assert_same_array(a: grit.GritArray, b: grit.GritArray) -> None:
    assert a.descriptor == b.descriptor and a.shape == b.shape
    for name, pa, pb in zip(("data", "scale0", "scale1", "aux"), a.planes, b.planes):
        pa, pb = bytes(pa), bytes(pb)
        if pa != pb:
            x, y = np.frombuffer(pa, np.uint8), np.frombuffer(pb, np.uint8)
            assert x.size == y.size, (name, x.size, y.size)
            bad = np.flatnonzero(x != y)
            pytest.fail(f"{name}: {bad.size} bytes differ, first at {bad[:8].tolist()}: "
                        f"native {x[bad[:8]].tolist()} numpy {y[bad[:8]].tolist()}")


def assert_same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
    assert a.flags.c_contiguous and b.flags.c_contiguous
    ua, ub = a.view(np.uint32).reshape(-1), b.view(np.uint32).reshape(-1)
    if not np.array_equal(ua, ub):
        bad = np.flatnonzero(ua != ub)
        pytest.fail(f"{bad.size} elements differ, first at {bad[:8].tolist()}: native "
                    f"{[hex(v) for v in ua[bad[:8]]]} numpy {[hex(v) for v in ub[bad[:8]]]}")


# ---------------------------------------------------------------------------
# generated inputs

def _layout(draw, n: int):
    """(shape, group_axis) of n elements: 1-D, 2-D grouped along the last
    axis, or 2-D grouped along the first."""
    kind = draw(st.sampled_from(["1d", "last", "first"]))
    if kind == "1d":
        return (n,), 0
    rows = draw(st.integers(1, 3))
    return ((rows, n), 1) if kind == "last" else ((n, rows), 0)


@st.composite
def values(draw):
    """float32 values in C order with a shape and group axis: a random body
    at a drawn magnitude, plus NaN/±Inf/subnormal/tie/huge/tiny values at
    drawn positions, all-zero groups and blocks far below the tensor amax."""
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    n = 256 * draw(st.integers(1, 5))
    shape, axis = _layout(draw, n)
    total = int(np.prod(shape))
    body = draw(st.sampled_from(["normal", "wide", "ties", "positive", "zeros"]))
    if body == "normal":
        x = rng.standard_normal(total)
    elif body == "wide":
        x = rng.standard_normal(total) * np.exp2(rng.integers(-160, 130, total))
    elif body == "ties":
        x = (rng.choice(TIES, total) * np.exp2(rng.integers(-2, 3, total))
             * rng.choice([-1, 1], total))
    elif body == "positive":
        x = rng.random(total)
    else:
        x = np.where(rng.random(total) < 0.5, 0.0, -0.0)
    with np.errstate(over="ignore"):
        x = np.ldexp(x, draw(st.integers(-150, 127))).astype(np.float32).reshape(shape)
    flat = x.reshape(-1)
    for pos, v in draw(st.lists(st.tuples(st.integers(0, total - 1),
                                          st.sampled_from(SPECIAL) | st.floats(width=32)),
                                max_size=12)):
        flat[pos] = np.float32(v)
    # groups in lin order are easier to address after the layout's moveaxis
    lin = np.moveaxis(x, axis, -1).copy().reshape(-1)
    for blk in draw(st.lists(st.integers(0, total // 16 - 1), max_size=4)):
        lin[16 * blk:16 * blk + 16] = np.float32(0.0)
    for blk, k in draw(st.lists(st.tuples(st.integers(0, total // 16 - 1),
                                          st.integers(8, 60)), max_size=4)):
        lin[16 * blk:16 * blk + 16] *= np.float32(2.0 ** -k)   # far below the tensor amax
    lin_shape = tuple(s for i, s in enumerate(shape) if i != axis) + (shape[axis],)
    x = np.ascontiguousarray(np.moveaxis(lin.reshape(lin_shape), -1, axis))
    return x, axis


def _each_path(fn):
    """fn() under every C path this CPU has (portable, then AVX2)."""
    prev = _kernels.simd()
    try:
        for path in SIMD:
            _kernels.simd(path == "avx2")
            fn()
    finally:
        _kernels.simd(prev == "avx2")


@pytest.mark.parametrize("name", GRADES)
@SETTINGS
@given(case=values())
def test_encode_and_decode_equal_numpy_path(name, case):
    x, axis = case
    g = REGISTERED_GRADES[name]
    want = _numpy(lambda: grit.encode(x, g, group_axis=axis))
    want_out = _numpy(lambda: grit.decode(want))

    def check():
        a = _native(lambda: grit.encode(x, g, group_axis=axis))
        assert_same_array(a, want)
        assert_same_bits(_native(lambda: grit.decode(a)), want_out)
    _each_path(check)


@pytest.mark.parametrize("name", GRADES)
def test_both_vector_paths(name, simd):
    """A fixed mixed input through each C path, 1-D and 2-D, group axis last
    and first."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(256 * 9) * np.exp2(rng.integers(-140, 120, 256 * 9)))
    x = x.astype(np.float32)
    x[rng.integers(0, x.size, 40)] = rng.choice(np.array(SPECIAL, np.float32), 40)
    x[32:64] = 0.0
    x[512:528] *= np.float32(2.0 ** -40)
    g = REGISTERED_GRADES[name]
    for xx, axis in ((x, 0), (x.reshape(3, -1), 1), (x.reshape(-1, 3), 0)):
        a = _native(lambda: grit.encode(xx, g, group_axis=axis))
        b = _numpy(lambda: grit.encode(xx, g, group_axis=axis))
        assert_same_array(a, b)
        assert_same_bits(_native(lambda: grit.decode(a)), _numpy(lambda: grit.decode(a)))


@pytest.mark.parametrize("name, x, plane, want", [
    # I8S24: f32(amax / 127) = 1 + 2^-11 exactly, a binary16 tie -> the even 0x3C00
    ("GRADE_I8S24", [127.0 * (1 + 2.0 ** -11)] + [0.0] * 31, 1, b"\x00\x3c"),
    ("GRADE_I8S24", [127.0 * (1 + 3 * 2.0 ** -11)] + [0.0] * 31, 1, b"\x02\x3c"),
    # Q4KS: f32(f32(hi / 15) / 63) = 1 + 2^-11 -> d = 0x3C00; no negative value -> dmin = -0
    ("GRADE_Q4KS", [945.0 * (1 + 2.0 ** -11)] + [0.5] * 255, 2, b"\x00\x3c\x00\x80"),
    # NVF4: f32(f32(amax / 6) / 448) underflows -> sT = 2^-149 (§10.3 step 1)
    ("GRADE_NVF4", [2.0 ** -149] * 16, 2, b"\x01\x00\x00\x00"),
    ("GRADE_NVF4_RTZ", [0.0] * 15 + [-2.0 ** -149], 2, b"\x01\x00\x00\x00"),
    ("GRADE_NVF4", [0.0] * 16, 2, b"\x00\x00\x80\x3f"),           # all zero: sT = 1.0
])
def test_pinned_scale_codes(name, x, plane, want, simd):
    g = REGISTERED_GRADES[name]
    x = np.array(x, dtype=np.float32)
    x = np.concatenate([x] * (256 // x.size) if x.size < 256 else [x])
    a = _native(lambda: grit.encode(x, g))
    assert_same_array(a, _numpy(lambda: grit.encode(x, g)))
    assert bytes(a.planes[plane])[:len(want)] == want
    assert_same_bits(_native(lambda: grit.decode(a)), _numpy(lambda: grit.decode(a)))


# ---------------------------------------------------------------------------
# random payloads

_H16_SPECIAL = [0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE01, 0x0000, 0x8000, 0x0001, 0x8001,
                0x7BFF, 0xFBFF, 0x3C00, 0x0400]
_F32_SPECIAL = [0x3F800000, 0x7FC00000, 0x7F800001, 0xFFC00001, 0x7F800000, 0xFF800000,
                0x00000000, 0x80000000, 0x00000001, 0x7F7FFFFF, 0x0A000000, 0xBF800000]


@st.composite
def payload(draw, name: str):
    """A GritArray of a registered grade with random plane bytes and the
    scale codes that matter injected: E8M0 0xFF, E4M3 NaN, binary16 NaN/Inf,
    binary32 per-tensor NaN/Inf/0/subnormal, repeated sparse indices."""
    g = REGISTERED_GRADES[name]
    n = 256 * draw(st.integers(1, 5))
    shape, axis = _layout(draw, n)
    desc = g.descriptor(group_axis=axis)
    ps = grit.plane_sizes(desc, shape)
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    planes = [bytearray(rng.integers(0, 256, s, dtype=np.uint8).tobytes())
              for s in ps.sizes]
    s0, s1, aux = planes[1], planes[2], planes[3]
    if name.startswith("GRADE_MXFP4"):
        for i in draw(st.lists(st.integers(0, len(s0) - 1), max_size=6)):
            s0[i] = draw(st.sampled_from([0xFF, 0x00, 0xFE, 0x7F]))
    elif name.startswith("GRADE_NVF4"):
        for i in draw(st.lists(st.integers(0, len(s0) - 1), max_size=6)):
            s0[i] = draw(st.sampled_from([0x7F, 0xFF, 0x00, 0x80, 0x7E, 0x01]))
        bits = draw(st.sampled_from(_F32_SPECIAL) | st.integers(0, 2 ** 32 - 1))
        s1[:] = int(bits).to_bytes(4, "little")
    elif name == "GRADE_Q4KS":
        for i in draw(st.lists(st.integers(0, len(s1) // 2 - 1), max_size=6)):
            h = draw(st.sampled_from(_H16_SPECIAL))
            s1[2 * i:2 * i + 2] = h.to_bytes(2, "little")
    else:  # I8S24
        for i in draw(st.lists(st.integers(0, len(s0) // 2 - 1), max_size=6)):
            h = draw(st.sampled_from(_H16_SPECIAL))
            s0[2 * i:2 * i + 2] = h.to_bytes(2, "little")
        mode = draw(st.sampled_from(["random", "repeated", "ascending"]))
        if mode == "repeated":    # one kept position per quad: the cursor falls behind
            for i in range(len(aux)):
                aux[i] = draw(st.sampled_from([0x00, 0x55, 0xAA, 0xFF, 0x05, 0x50])) \
                    if i % 3 == 0 else aux[i]
        elif mode == "ascending":
            aux[:] = bytes([0x94] * len(aux))         # every quad: positions 0, 1 / 0, 2
    return grit.GritArray(desc, shape, [bytes(p) for p in planes])


@pytest.mark.parametrize("name", GRADES)
@SETTINGS
@given(data=st.data())
def test_decode_random_payload(name, data):
    arr = data.draw(payload(name))
    want = _numpy(lambda: grit.decode(arr))
    _each_path(lambda: assert_same_bits(_native(lambda: grit.decode(arr)), want))


# ---------------------------------------------------------------------------
# threads

@pytest.mark.parametrize("name", GRADES)
@pytest.mark.parametrize("threads", [2, 3, 5, 7, 64, 1000])
def test_threads_give_the_one_thread_result(name, threads):
    """37 super-blocks: no thread count here divides the work evenly, and
    1000 exceeds both the groups and the thread cap."""
    rng = np.random.default_rng(threads)
    n = 256 * 37
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(np.float32)
    x[rng.integers(0, n, 20)] = np.float32(np.nan)
    x[rng.integers(0, n, 20)] = np.float32(-np.inf)
    g = REGISTERED_GRADES[name]
    one = _native(lambda: grit.encode(x, g), threads=1)
    many = _native(lambda: grit.encode(x, g), threads=threads)
    assert_same_array(many, one)
    assert_same_array(one, _numpy(lambda: grit.encode(x, g)))
    # a payload whose sparse metadata repeats indices, so that each thread's
    # starting cursor depends on every quad before it
    planes = [bytearray(rng.integers(0, 256, len(bytes(p)), dtype=np.uint8).tobytes())
              for p in one.planes]
    if name == "GRADE_I8S24":
        aux = planes[3]
        aux[::7] = bytes([0x00] * len(aux[::7]))
    arr = grit.GritArray(one.descriptor, one.shape, [bytes(p) for p in planes])
    d1 = _native(lambda: grit.decode(arr), threads=1)
    assert_same_bits(_native(lambda: grit.decode(arr), threads=threads), d1)
    assert_same_bits(d1, _numpy(lambda: grit.decode(arr)))


def test_default_thread_policy():
    assert dm.threads(10) == 1
    assert dm.threads(1 << 20) == 1
    assert dm.threads(64 << 20) == min(os.cpu_count() or 1, 64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dm, "THREADS", 3)
        assert dm.threads(10) == 3


# ---------------------------------------------------------------------------
# dispatch

class _Spy:
    def __init__(self, k):
        self._k = k
        self.calls: list[str] = []

    def __getattr__(self, name):
        f = getattr(self._k, name)

        def wrapped(*args):
            self.calls.append(name)
            return f(*args)
        return wrapped


def _spied(fn, native=True):
    spy = _Spy(_kernels)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dm, "_kernels", spy)
        mp.setattr(dm, "NATIVE", native)
        out = fn()
    return out, spy.calls


@pytest.mark.parametrize("name", GRADES)
def test_registered_grades_take_the_kernels(name):
    g = REGISTERED_GRADES[name]
    x = np.linspace(-3, 3, 512, dtype=np.float32)
    arr, calls = _spied(lambda: grit.encode(x, g))
    assert calls == [f"encode_{dm.DECODE_KIND[dm.frame_key(arr.descriptor)]}"]
    _, calls = _spied(lambda: grit.decode(arr))
    assert calls == [f"decode_{dm.DECODE_KIND[dm.frame_key(arr.descriptor)]}"]
    _, calls = _spied(lambda: grit.decode(arr), native=False)
    assert calls == []


@pytest.mark.parametrize("text", [
    "grit1(e=e2m1,k0=32,s0=e8m0,po=msb,esr=exp2floormaxabs)",       # MSB-first nibbles
    "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs,dt=binary16)",  # a dt projection
    "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2ceilmaxabs)",               # another scale rule
    "grit1(e=e2m1,k0=16,s0=e4m3,k1=4,s1=binary16,esr=ratiomaxabs)",  # another frame
])
def test_other_grades_stay_on_the_numpy_path(text):
    x = np.linspace(-3, 3, 512, dtype=np.float32)
    arr, calls = _spied(lambda: grit.encode(x, text))
    assert calls == []
    out, calls = _spied(lambda: grit.decode(arr))
    decodes_native = "exp2ceilmaxabs" in text     # same frame and dt as MXFP4
    assert calls == (["decode_mxfp4"] if decodes_native else [])
    assert_same_bits(out, _numpy(lambda: grit.decode(arr)))


def test_same_frame_other_encode_fields_decode_natively():
    """§8.1 reads the frame and dt only: an I8S24 with unordered metadata
    decodes through the same kernel and the same cursor rule."""
    g = "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:unord,esr=ratiomaxabs)"
    x = np.random.default_rng(3).standard_normal(1024).astype(np.float32)
    arr = _numpy(lambda: grit.encode(x, g))
    out, calls = _spied(lambda: grit.decode(arr))
    assert calls == ["decode_i8s24"]
    assert_same_bits(out, _numpy(lambda: grit.decode(arr)))


@pytest.mark.parametrize("name", GRADES)
def test_empty_and_odd_inputs(name):
    g = REGISTERED_GRADES[name]
    for x, axis in ((np.zeros((0, 256), np.float32), 1),
                    (np.arange(512, dtype=np.float64), 0),             # not float32
                    (np.arange(1024, dtype=np.float32)[::2], 0),       # not contiguous
                    (np.frombuffer(np.zeros(513 * 4, np.uint8).tobytes()[1:2049],
                                   np.float32), 0)):                   # not aligned
        a = _native(lambda: grit.encode(x, g, group_axis=axis))
        assert_same_array(a, _numpy(lambda: grit.encode(x, g, group_axis=axis)))
        assert_same_bits(_native(lambda: grit.decode(a)), _numpy(lambda: grit.decode(a)))


def test_planes_are_bytes():
    a = _native(lambda: grit.encode(np.ones(512, np.float32), grit.GRADE_Q4KS))
    assert all(type(p) is bytes for p in a.planes)


# ---------------------------------------------------------------------------
# without the extension, and the kernel entry points themselves

def test_missing_extension_warns_once_and_gives_the_same_bytes():
    x = np.random.default_rng(5).standard_normal(1 << 16).astype(np.float32)
    want = _native(lambda: grit.encode(x, grit.GRADE_MXFP4))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dm, "_kernels", None)
        mp.setattr(dm, "NATIVE", False)
        mp.setattr(dm, "_warned", False)
        with pytest.warns(RuntimeWarning, match="not built"):
            got = grit.encode(x, grit.GRADE_MXFP4)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = grit.decode(got)
    assert_same_array(got, want)
    assert_same_bits(out, _native(lambda: grit.decode(want)))


def test_environment_switch():
    code = "import importlib; print(importlib.import_module('grit.native').NATIVE)"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, GRIT_NATIVE="0",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"


def test_kernel_argument_checks():
    out = np.empty(64, np.float32)
    with pytest.raises(ValueError, match="needed"):
        _kernels.decode_mxfp4(b"\0" * 31, b"\0" * 2, out)
    with pytest.raises(ValueError, match="multiple"):
        _kernels.decode_mxfp4(b"\0" * 32, b"\0" * 2, np.empty(48, np.float32))
    raw = np.zeros(64 * 4 + 1, np.uint8)
    with pytest.raises(ValueError, match="aligned"):
        _kernels.decode_mxfp4(b"\0" * 32, b"\0" * 2, raw[1:])
    with pytest.raises(ValueError, match="multiple"):
        _kernels.encode_q4ks(np.zeros(255, np.float32))
    with pytest.raises(TypeError):
        _kernels.decode_mxfp4(b"\0" * 32, b"\0" * 2, b"\0" * 256)   # read-only output
    assert _kernels.simd() in ("avx2", "portable")
