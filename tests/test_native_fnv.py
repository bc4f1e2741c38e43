"""The native FNV-1a extension (grit._ext) against the pure-Python reference.

The extension is a fast path: it must give byte-identical results to the
scalar loops in grit.fingerprint for every input and continuation state.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import mmap
import os
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grit.fingerprint as fp
from grit.errors import GritUsageError

try:
    from grit import _ext
except ImportError as exc:  # pragma: no cover - only where no compiler exists
    _ext = None
    _EXT_REASON = f"grit._ext is not built ({exc}); the pure-Python path is tested below"
else:
    _EXT_REASON = ""

needs_ext = pytest.mark.skipif(_ext is None, reason=_EXT_REASON or "grit._ext is built")

M64 = (1 << 64) - 1
M128 = (1 << 128) - 1

# Appendix B.1 (mxfp4/tie_to_even): plane_bytes [16, 1, 0, 0].
B1_DATA = bytes.fromhex("2042 6476 a8ca ecfe 0000 0000 0000 0000".replace(" ", ""))
B1_SCALE0 = b"\x7f"
B1_DIGEST = "9452a02851ba1a1d793b97df51266001"

states64 = st.integers(min_value=0, max_value=M64)
states128 = st.integers(min_value=0, max_value=M128)
payloads = st.binary(max_size=512)


def py_digest(planes) -> int:
    """§6.5 with SPEC-FACTS, written out independently of grit.fingerprint."""
    h = fp.FNV128_OFFSET
    for p in planes:
        b = bytes(p)
        h = fp._py_fnv128(struct.pack("<Q", len(b)), h)
        h = fp._py_fnv128(b, h)
    return h


@pytest.fixture
def pure_python(monkeypatch):
    """Run grit.fingerprint on its fallback path, with the warn-once latch reset."""
    monkeypatch.setattr(fp, "_native", None)
    monkeypatch.setattr(fp, "_warned", False)
    return fp


# ---------------------------------------------------------------------------
# §6.1 self-checks


@needs_ext
def test_self_check_64():
    assert _ext.fnv1a64(b"a", fp.FNV64_OFFSET) == 0xAF63DC4C8601EC8C
    assert _ext.fnv1a64(b"a") == 0xAF63DC4C8601EC8C


@needs_ext
def test_self_check_128():
    assert _ext.fnv1a128(b"a", fp.FNV128_OFFSET) == 0xD228CB696F1A8CAF78912B704E4A8964
    assert _ext.fnv1a128(b"a") == 0xD228CB696F1A8CAF78912B704E4A8964


def test_self_checks_through_wrapper():
    assert fp.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fp.fnv1a128(b"a") == 0xD228CB696F1A8CAF78912B704E4A8964


def test_reference_self_checks():
    assert fp._py_fnv64(b"a") == 0xAF63DC4C8601EC8C
    assert fp._py_fnv128(b"a") == 0xD228CB696F1A8CAF78912B704E4A8964


# ---------------------------------------------------------------------------
# native == pure Python


@needs_ext
@given(data=payloads, h=states64)
def test_fnv64_matches_reference(data, h):
    assert _ext.fnv1a64(data, h) == fp._py_fnv64(data, h)


@needs_ext
@given(data=payloads, h=states128)
def test_fnv128_matches_reference(data, h):
    assert _ext.fnv1a128(data, h) == fp._py_fnv128(data, h)


@needs_ext
@given(data=payloads, cut=st.integers(min_value=0, max_value=512))
def test_fnv128_continuation_equals_one_pass(data, cut):
    cut = min(cut, len(data))
    mv = memoryview(data)
    assert _ext.fnv1a128(mv[cut:], _ext.fnv1a128(mv[:cut])) == _ext.fnv1a128(data)
    assert _ext.fnv1a64(mv[cut:], _ext.fnv1a64(mv[:cut])) == _ext.fnv1a64(data)


@needs_ext
@pytest.mark.parametrize("h", [0, 1, M64, 1 << 64, M128, fp.FNV128_OFFSET])
def test_fnv128_state_edges(h):
    # Exercises the int <-> two-halves conversion at both word boundaries.
    for data in (b"", b"\x00", b"\xff" * 17):
        assert _ext.fnv1a128(data, h) == fp._py_fnv128(data, h)


@needs_ext
@pytest.mark.parametrize("h", [0, 1, M64, fp.FNV64_OFFSET])
def test_fnv64_state_edges(h):
    for data in (b"", b"\x00", b"\xff" * 17):
        assert _ext.fnv1a64(data, h) == fp._py_fnv64(data, h)


@needs_ext
def test_empty_buffers_return_state_unchanged():
    for empty in (b"", bytearray(), memoryview(b"abc")[3:], np.zeros(0, np.uint8)):
        assert _ext.fnv1a64(empty, 12345) == 12345
        assert _ext.fnv1a128(empty, 1 << 100) == 1 << 100
        assert _ext.fnv1a128(empty) == fp.FNV128_OFFSET


@needs_ext
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.float64, np.uint64])
def test_numpy_arrays_hash_their_raw_bytes(dtype):
    rng = np.random.default_rng(7)
    a = rng.integers(0, 256, size=96, dtype=np.uint8).view(dtype).reshape(-1, 2)
    raw = a.tobytes()
    assert _ext.fnv1a128(a, fp.FNV128_OFFSET) == fp._py_fnv128(raw)
    assert _ext.fnv1a64(a, fp.FNV64_OFFSET) == fp._py_fnv64(raw)
    assert fp.fnv1a128(a) == fp._py_fnv128(raw)


@needs_ext
@given(data=st.binary(min_size=1, max_size=256), a=st.integers(0, 256), b=st.integers(0, 256))
def test_memoryview_slices(data, a, b):
    lo, hi = sorted((min(a, len(data)), min(b, len(data))))
    mv = memoryview(data)[lo:hi]
    assert _ext.fnv1a128(mv, fp.FNV128_OFFSET) == fp._py_fnv128(data[lo:hi])
    assert _ext.fnv1a64(mv, fp.FNV64_OFFSET) == fp._py_fnv64(data[lo:hi])


@needs_ext
def test_other_buffer_exporters():
    payload = bytes(range(256)) * 3
    with mmap.mmap(-1, len(payload)) as m:
        m[:] = payload
        assert _ext.fnv1a128(m) == fp._py_fnv128(payload)
    assert _ext.fnv1a128(bytearray(payload)) == fp._py_fnv128(payload)
    assert _ext.fnv1a64(memoryview(payload).cast("I")) == fp._py_fnv64(payload)


@needs_ext
def test_large_buffer_without_gil_matches():
    # Above NOGIL_BYTES the loop runs with the GIL released: same values.
    n = _ext.NOGIL_BYTES + 4097
    data = np.random.default_rng(1).integers(0, 256, size=n, dtype=np.uint8)
    head, tail = data[:4096], data[4096:]
    h128 = fp._py_fnv128(tail.tobytes(), fp._py_fnv128(head.tobytes()))
    assert _ext.fnv1a128(data) == h128
    h64 = fp._py_fnv64(tail.tobytes(), fp._py_fnv64(head.tobytes()))
    assert _ext.fnv1a64(data) == h64


# ---------------------------------------------------------------------------
# bad input


@needs_ext
@pytest.mark.parametrize("fn", ["fnv1a64", "fnv1a128"])
def test_non_buffer_is_type_error(fn):
    with pytest.raises(TypeError):
        getattr(_ext, fn)("a string", 0)
    with pytest.raises(TypeError):
        getattr(_ext, fn)(b"a", "not an int")


@needs_ext
def test_non_contiguous_is_value_error():
    a = np.arange(16, dtype=np.uint8).reshape(4, 4)[:, ::2]
    with pytest.raises(ValueError):
        _ext.fnv1a128(a)
    with pytest.raises(ValueError):
        _ext.fnv1a64(memoryview(bytes(16))[::2])
    with pytest.raises(ValueError):
        _ext.digest([b"", a, b"", b""])


@needs_ext
@pytest.mark.parametrize("h", [-1, 1 << 64])
def test_fnv64_state_out_of_range(h):
    with pytest.raises(ValueError):
        _ext.fnv1a64(b"a", h)


@needs_ext
@pytest.mark.parametrize("h", [-1, -(1 << 100), 1 << 128])
def test_fnv128_state_out_of_range(h):
    with pytest.raises(ValueError):
        _ext.fnv1a128(b"a", h)


@needs_ext
def test_digest_needs_four_planes():
    with pytest.raises(ValueError):
        _ext.digest([b"", b"", b""])
    with pytest.raises(TypeError):
        _ext.digest(42)
    with pytest.raises(TypeError):
        _ext.digest([b"", b"", b"", None])


# ---------------------------------------------------------------------------
# §6.5 digest


def test_b1_digest():
    planes = [B1_DATA, B1_SCALE0, b"", b""]
    assert fp.digest(planes).hex() == B1_DIGEST
    assert f"{py_digest(planes):032x}" == B1_DIGEST


@needs_ext
def test_b1_digest_native():
    assert f"{_ext.digest([B1_DATA, B1_SCALE0, b'', b'']):032x}" == B1_DIGEST


def test_b1_digest_fallback(pure_python):
    assert pure_python.digest([B1_DATA, B1_SCALE0, b"", None]).hex() == B1_DIGEST


@needs_ext
@settings(max_examples=60)
@given(planes=st.lists(st.binary(max_size=200), min_size=4, max_size=4))
def test_digest_native_equals_fallback(planes):
    native = fp.digest(planes)
    saved = fp._native
    fp._native = None
    try:
        fallback = fp.digest(planes)
    finally:
        fp._native = saved
    assert native == fallback
    assert _ext.digest([memoryview(p) for p in planes]) == py_digest(planes)


@needs_ext
def test_digest_empty_planes_contribute_length_only():
    assert _ext.digest([b"", b"", b"", b""]) == fp._py_fnv128(bytes(32))
    # Moving a byte across a plane boundary changes the digest (§6.5 length prefix).
    assert _ext.digest([b"ab", b"", b"", b""]) != _ext.digest([b"a", b"b", b"", b""])


@needs_ext
def test_digest_accepts_numpy_planes():
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, size=(8, 16), dtype=np.uint8)
    scale = rng.integers(0, 256, size=8, dtype=np.uint8)
    planes = [data, scale, np.zeros(0, np.uint8), b""]
    assert _ext.digest(planes) == py_digest([p.tobytes() if hasattr(p, "tobytes") else p
                                             for p in planes])


# ---------------------------------------------------------------------------
# the pure-Python fallback path


def test_fallback_values(pure_python):
    assert pure_python.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert pure_python.fnv1a128(b"a") == 0xD228CB696F1A8CAF78912B704E4A8964
    assert pure_python.fnv1a128(np.arange(10, dtype=np.uint16)) == fp._py_fnv128(
        np.arange(10, dtype=np.uint16).tobytes())


def test_fallback_warns_once_for_large_input(pure_python):
    big = bytes(8192)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pure_python.fnv1a128(b"small")
        assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
        first = pure_python.fnv1a128(big)
        second = pure_python.fnv1a128(big)
        pure_python.digest([big, b"", b"", b""])
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(runtime) == 1
    assert "pure Python" in str(runtime[0].message)
    assert first == second == fp._py_fnv128(big)


def test_fallback_rejects_non_buffers(pure_python):
    with pytest.raises(GritUsageError):
        pure_python.fnv1a128("not bytes")


# ---------------------------------------------------------------------------
# the portable (two-uint64) 128-bit loop, built here with GRIT_FNV_PORTABLE


@pytest.fixture(scope="module")
def portable_ext(tmp_path_factory):
    mod = _build_variant(tmp_path_factory, "GRIT_FNV_PORTABLE")
    assert mod.FNV128_IMPL == "portable"
    return mod


@pytest.fixture(scope="module")
def no_asm_ext(tmp_path_factory):
    """The interleaved loops with their 128-bit products as unsigned __int128
    (what Clang and targets other than x86-64 build), where GCC on x86-64
    would write the multiply out."""
    mod = _build_variant(tmp_path_factory, "GRIT_FNV_NO_ASM", "GRIT_FNV_NO_WIDE")
    assert mod.FNV_MULTI_IMPL in ("int128", "portable")
    assert mod.fnv_wide(True) is False           # built without the chain-and-sums loop
    return mod


def _build_variant(tmp_path_factory, macro, *more):
    native = Path(__file__).resolve().parents[1] / "grit" / "_native"
    src = [native / "py" / "fnv.c", *(native / "core" / f"{n}.c"
                                      for n in ("fnv", "fnv_multi", "fnv_wide"))]
    if not all(s.exists() for s in src):
        pytest.skip("grit/_native/{py,core}/fnv.c or core/fnv_{multi,wide}.c are not in "
                    "this tree")
    try:
        from setuptools import Distribution, Extension
        from setuptools.command.build_ext import build_ext
    except ImportError:
        pytest.skip("setuptools is needed to build the portable variant")
    out = tmp_path_factory.mktemp(macro.lower())
    ext = Extension("_ext", [str(s) for s in src],
                    define_macros=[(m, "1") for m in (macro, *more)],
                    extra_compile_args=[] if os.name == "nt"
                    else ["-O2", "-ffp-contract=off", "-std=c99"])
    cmd = build_ext(Distribution({"ext_modules": [ext]}))
    cmd.build_lib = str(out)
    cmd.build_temp = str(out / "tmp")
    cmd.ensure_finalized()
    try:
        cmd.run()
    except Exception as exc:  # pragma: no cover - no compiler
        pytest.skip(f"could not compile the portable variant: {exc}")
    path = cmd.get_ext_fullpath("_ext")
    loader = importlib.machinery.ExtensionFileLoader("_ext", path)
    spec = importlib.util.spec_from_file_location("_ext", path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


@given(data=payloads, h=states128)
def test_portable_fnv128_matches_reference(portable_ext, data, h):
    assert portable_ext.fnv1a128(data, h) == fp._py_fnv128(data, h)


def test_portable_self_check_and_b1(portable_ext):
    assert portable_ext.fnv1a128(b"a") == 0xD228CB696F1A8CAF78912B704E4A8964
    assert f"{portable_ext.digest([B1_DATA, B1_SCALE0, b'', b'']):032x}" == B1_DIGEST
    # Carries out of the low word: all-ones state and bytes.
    for h in (M64, M128, (1 << 64) | M64):
        assert portable_ext.fnv1a128(b"\xff" * 33, h) == fp._py_fnv128(b"\xff" * 33, h)


@pytest.mark.parametrize("variant", ["portable_ext", "no_asm_ext"])
def test_variant_many_matches_reference(request, variant):
    ext = request.getfixturevalue(variant)
    if variant == "portable_ext":
        assert ext.FNV_MULTI_IMPL == "portable"
    streams = [[b"\xff" * 33, b""], [b"abc"], [], [bytes(range(256))] * 3, [b"\x00" * 70]]
    states = [M128, fp.FNV128_OFFSET, 5, M64, (1 << 64) | M64]
    want = [fp._py_fnv128(b"".join(s), h) for h, s in zip(states, streams)]
    for lanes in range(1, 5):
        assert ext.fnv1a128_many(states, streams, lanes) == want
    # and with the comparison: the same bytes cut otherwise, a changed last byte, a longer
    # message, past a word and a 4 KiB block
    streams = [*streams, [bytes(range(256)) * 20]]
    states = [*states, 0]
    want = [fp._py_fnv128(b"".join(s), h) for h, s in zip(states, streams)]
    whole = [b"".join(s) for s in streams]
    others = [[w[:1], w[1:]] for w in whole]
    others[0] = [whole[0][:-1] + b"\xfe"]
    others[2] = [b"\x00"]
    others[5] = [whole[5][:4096], whole[5][4096:-1], b"\x01"]
    for lanes in range(1, 5):
        assert ext.fnv1a128_many_cmp(states, streams, others, lanes) == \
            (want, [False, True, False, True, True, False])
