"""grit.interop.torch: a GritArray's planes as torch tensors without a copy,
decode into torch (float32 bit for bit grit.decode's; bfloat16 / float16 the
one RNE rounding of it, checked against ml_dtypes and numpy), encode from
torch tensors (bfloat16 / float16 exactly as their float32 cast), the
TypeError a GritArray gives where values are expected, GritLinear — and
``import grit`` importing no framework."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import grit

REGISTERED = [grit.GRADE_MXFP4, grit.GRADE_MXFP4_RNE, grit.GRADE_NVF4, grit.GRADE_NVF4_RTZ,
              grit.GRADE_Q4KS, grit.GRADE_I8S24]
NAMES = ["MXFP4", "MXFP4_RNE", "NVF4", "NVF4_RTZ", "Q4KS", "I8S24"]


def test_import_grit_imports_no_framework():
    code = ("import sys, grit, grit.interop, grit.conventions.grit; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'triton', 'transformers', 'torchao')); print(bad); assert not bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# -- a GritArray is not an array of values (no torch needed)

def _array():
    x = np.linspace(-3, 3, 128, dtype=np.float32).reshape(2, 64)
    return grit.encode(x, grit.GRADE_MXFP4)


def test_numpy_conversion_names_the_decode():
    a = _array()
    for f in (np.asarray, np.array):
        with pytest.raises(TypeError, match=r"grit\.decode"):
            f(a)


def test_len_and_iteration_raise_and_truth_stays():
    a = _array()
    with pytest.raises(TypeError, match=r"grit\.decode"):
        len(a)
    with pytest.raises(TypeError, match="not iterable"):
        iter(a)
    with pytest.raises(TypeError):
        list(a)
    assert bool(a) is True
    assert a[0:1].shape == (1, 64)          # slicing is unchanged


torch = pytest.importorskip("torch", reason="torch is not installed (the [torch] extra)")
gt = pytest.importorskip("grit.interop.torch")


def test_torch_as_tensor_names_the_decode():
    with pytest.raises(TypeError, match=r"grit\.decode"):
        torch.as_tensor(_array())
    with pytest.raises(TypeError, match=r"grit\.decode"):
        torch.tensor(_array())


# -- planes without copies

def _addr(p) -> int:
    return np.frombuffer(p, np.uint8).ctypes.data if len(memoryview(p)) else 0


@pytest.mark.parametrize("grade", REGISTERED, ids=NAMES)
def test_planes_share_memory_both_ways(grade):
    x = np.random.default_rng(1).standard_normal((4, 256)).astype(np.float32)
    a = grit.encode(x, grade)
    ts = gt.planes(a)
    for p, t in zip(a.planes, ts):
        assert t.dtype == torch.uint8 and t.numel() == len(memoryview(p))
        if t.numel():
            assert t.data_ptr() == _addr(p)                 # the same bytes, not a copy
            assert bytes(t.numpy()) == bytes(p)
    b = gt.from_planes(a.descriptor, a.shape, ts)
    assert b == a
    for p, t in zip(b.planes, ts):
        if t.numel():
            assert _addr(p) == t.data_ptr()


def test_from_planes_refuses_what_is_not_cpu_uint8_contiguous():
    a = _array()
    d, s0, s1, aux = gt.planes(a)
    with pytest.raises(grit.GritUsageError, match="uint8"):
        gt.from_planes(a.descriptor, a.shape, [d.to(torch.int16), s0, s1, aux])
    with pytest.raises(grit.GritUsageError, match="contiguous"):
        gt.from_planes(a.descriptor, a.shape, [d.clone().reshape(2, -1).t(), s0, s1, aux])
    with pytest.raises(grit.GritUsageError, match="four"):
        gt.from_planes(a.descriptor, a.shape, [d, s0])
    with pytest.raises(grit.GritSizeError):
        gt.from_planes(a.descriptor, a.shape, [d[:-1], s0, s1, aux])


# -- decode into torch

def _specials(shape, rng) -> np.ndarray:
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(4)
    flat = x.reshape(-1)
    flat[5] = -0.0
    flat[200] = np.nan                         # poisons its group
    flat[300:340] = 0.0                        # an all-zero group
    flat[600] = np.float32(1e-40)              # a subnormal
    flat[-1] = np.inf
    return x


@pytest.mark.parametrize("grade", REGISTERED, ids=NAMES)
def test_decode_float32_is_grit_decode_bit_for_bit_without_a_copy(grade, monkeypatch):
    a = grit.encode(_specials((8, 512), np.random.default_rng(2)), grade)
    seen = []
    real = gt._grit_decode

    def spy(arr):
        out = real(arr)
        seen.append(out)
        return out

    monkeypatch.setattr(gt, "_grit_decode", spy)
    t = gt.decode(a)
    ref = grit.decode(a)
    assert t.dtype == torch.float32 and tuple(t.shape) == a.shape
    assert np.array_equal(t.numpy().view(np.uint32), ref.view(np.uint32))
    assert t.data_ptr() == seen[0].ctypes.data            # the native result, wrapped


@pytest.mark.parametrize("grade", REGISTERED, ids=NAMES)
def test_decode_bf16_fp16_is_one_rne_rounding_of_the_binary32(grade):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = grit.encode(_specials((8, 512), np.random.default_rng(3)), grade)
    f32 = grit.decode(a)
    bf = gt.decode(a, torch.bfloat16)
    want_bf = f32.astype(ml_dtypes.bfloat16).view(np.uint16)     # the peer's RNE cast
    got_bf = bf.view(torch.int16).numpy().view(np.uint16)
    nan = np.isnan(f32)
    assert np.array_equal(got_bf[~nan], want_bf[~nan])
    assert (got_bf[nan] == 0x7FC0).all()                         # canonical bfloat16 NaN
    hf = gt.decode(a, torch.float16)
    want_hf = f32.astype(np.float16).view(np.uint16)
    got_hf = hf.view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(got_hf[~nan], want_hf[~nan])
    assert (got_hf[nan] == 0x7E00).all()


def test_decode_refuses_other_dtypes():
    with pytest.raises(grit.GritUsageError, match="dtype"):
        gt.decode(_array(), torch.float64)


# -- encode from torch

def _bits_bf16(rng, n) -> "torch.Tensor":
    """bfloat16 values from random bits (every class: normals, subnormals,
    ±0, ±inf, NaN) — as a tensor."""
    b = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
    b[:6] = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x0001, 0x807F]
    return torch.from_numpy(b.view(np.int16).copy()).view(torch.bfloat16)


@pytest.mark.parametrize("grade", REGISTERED, ids=NAMES)
def test_encode_of_bf16_and_fp16_equals_encode_of_their_float32_cast(grade):
    rng = np.random.default_rng(4)
    n = 4 * 512
    x32 = torch.from_numpy(rng.standard_normal(n).astype(np.float32) * 3).reshape(4, 512)
    bf = _bits_bf16(rng, n).reshape(4, 512)
    # finite, mostly moderate magnitudes too, so that not every group is poisoned
    bf_mod = (x32 * 2).to(torch.bfloat16)
    hf = (x32 * 5).to(torch.float16)
    for t in (x32, bf, bf_mod, hf):
        want = grit.encode(t.to(torch.float32).numpy(), grade)
        assert grit.encode(t, grade) == want
        assert gt.encode(t, grade) == want
    # the widening is torch's own: the reader's bits equal Tensor.float()
    assert np.array_equal(gt.values(bf).view(np.uint32), bf.float().numpy().view(np.uint32))


def test_encode_reads_views_and_parameters():
    rng = np.random.default_rng(5)
    w = torch.nn.Parameter(torch.from_numpy(rng.standard_normal((64, 64)).astype(np.float32)))
    want = grit.encode(w.detach().numpy(), grit.GRADE_MXFP4)
    assert grit.encode(w, grit.GRADE_MXFP4) == want
    big = torch.from_numpy(rng.standard_normal((64, 128)).astype(np.float32))
    view = big[:, ::2].to(torch.bfloat16)        # non-contiguous after slicing
    assert grit.encode(big[:, ::2].to(torch.bfloat16).t().t(), grit.GRADE_MXFP4) == \
        grit.encode(view.float().numpy(), grit.GRADE_MXFP4)


def test_without_the_interop_import_bf16_encode_says_what_to_import():
    code = ("import grit, torch\n"
            "t = torch.ones(4, 32, dtype=torch.bfloat16)\n"
            "assert grit.encode(t.float(), grit.GRADE_MXFP4) is not None   # numpy reads f32\n"
            "try:\n    grit.encode(t, grit.GRADE_MXFP4)\n"
            "except grit.GritUsageError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "import grit.interop.torch" in r.stdout


def test_encode_refuses_complex_and_bool_tensors():
    for t in (torch.zeros(32, dtype=torch.complex64), torch.zeros(32, dtype=torch.bool)):
        with pytest.raises(grit.GritUsageError, match="real numbers"):
            grit.encode(t, grit.GRADE_MXFP4)


# -- GritLinear

def test_grit_linear_is_f_linear_of_the_decoded_weight():
    from grit.interop.nn import GritLinear
    rng = np.random.default_rng(6)
    w = rng.standard_normal((48, 256)).astype(np.float32)
    b = torch.from_numpy(rng.standard_normal(48).astype(np.float32))
    x = torch.from_numpy(rng.standard_normal((5, 256)).astype(np.float32))
    for grade in REGISTERED:
        a = grit.encode(w, grade)
        W = torch.from_numpy(grit.decode(a))
        for cache in (False, True):
            m = GritLinear.from_array(a, b, cache=cache)
            assert torch.equal(m(x), torch.nn.functional.linear(x, W, b))
            assert torch.equal(m(x), torch.nn.functional.linear(x, W, b))   # cached again
            xb = x.to(torch.bfloat16)
            want = torch.nn.functional.linear(xb, W.to(torch.bfloat16), b.to(torch.bfloat16))
            assert m(xb).dtype == torch.bfloat16 and torch.equal(m(xb), want)
        # the state dict holds the present planes; a fresh module loads it
        sd = m.state_dict()
        assert set(sd) == {"bias"} | {f"grit_{r}" for r, p in zip(grit.array.PLANE_NAMES,
                                                                a.planes) if len(p)}
        m2 = GritLinear(256, 48, a.descriptor)
        m2.load_state_dict(sd)
        assert m2.array() == a
        assert torch.equal(m2(x), m(x))


def test_grit_linear_cache_follows_the_buffers():
    from grit.interop.nn import GritLinear
    rng = np.random.default_rng(7)
    a1 = grit.encode(rng.standard_normal((16, 64)).astype(np.float32), grit.GRADE_MXFP4)
    a2 = grit.encode(rng.standard_normal((16, 64)).astype(np.float32), grit.GRADE_MXFP4)
    x = torch.ones(1, 64)
    m = GritLinear.from_array(a1, cache=True)
    y1 = m(x)
    m.load_state_dict(GritLinear.from_array(a2).state_dict())
    assert torch.equal(m(x), x @ torch.from_numpy(grit.decode(a2)).T)
    assert not torch.equal(m(x), y1)


def test_grit_linear_refuses_a_weight_of_other_size():
    from grit.interop.nn import GritLinear
    with pytest.raises(grit.GritError):
        GritLinear(60, 16, _array().descriptor)       # 60 is not whole groups of 32
