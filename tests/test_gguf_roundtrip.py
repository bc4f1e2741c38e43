"""A load -> save round trip keeps a GGUF file: every KV pair (key, type,
value, as gguf-py's GGUFReader reads them), every tensor's ggml type, shape
and bytes — ggml block types written as themselves, so that
``gguf.quants.dequantize`` and ggml runtimes read them, and types GRIT v1
cannot express carried verbatim.  A safetensors ``__metadata__`` likewise,
through the official ``safetensors.safe_open``."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import grit
from grit.io.gguf import GGML_GRADES, GGUFValue, Inexpressible
from _support import write_gguf

gguf = pytest.importorskip("gguf")
T = gguf.GGMLQuantizationType
V = gguf.GGUFValueType
RNG = np.random.default_rng(20261201)

# the f16/f32 scale fields of each block, set finite so that dequantize is defined
_SCALES = {"Q4_0": [(0, 2)], "Q4_1": [(0, 4)], "Q5_0": [(0, 2)], "Q5_1": [(0, 4)],
           "Q8_0": [(0, 2)], "Q2_K": [(80, 84)], "Q4_K": [(0, 4)], "Q5_K": [(0, 4)],
           "Q6_K": [(208, 210)], "TQ2_0": [(64, 66)], "Q3_K": [(108, 110)],
           "IQ4_NL": [(0, 2)]}


def blocks(t, shape):
    """Random block bytes of ggml type ``t`` with finite scales (and, for
    Q8_K, the bsums ggml derives from the codes)."""
    bs, ts = gguf.GGML_QUANT_SIZES[t]
    n = int(np.prod(shape)) // bs
    b = RNG.integers(0, 256, (n, ts), dtype=np.uint8)
    for lo, hi in _SCALES.get(t.name, []):
        b[:, lo:hi] = RNG.uniform(0.01, 1, (n, (hi - lo) // 2)).astype("<f2").view(np.uint8)
    if t == T.Q8_K:
        b[:, 0:4] = RNG.uniform(0.01, 1, (n, 1)).astype("<f4").view(np.uint8)
        q = b[:, 4:260].view(np.int8).reshape(n, 16, 16).astype(np.int16).sum(axis=2)
        b[:, 260:292] = q.astype("<i2").view(np.uint8)
    return b.reshape(*shape[:-1], shape[-1] // bs * ts)


def write(path, tensors, kv=(), alignment=None):
    write_gguf(path, tensors, kv=kv, alignment=alignment)


def fields(path):
    r = gguf.GGUFReader(str(path))
    out = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        out[k] = ([int(t) for t in f.types], f.contents())
    return out, {t.name: t for t in r.tensors}


def round_trip(src, dst, **kw):
    got = grit.load(str(src))
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        grit.save(str(dst), got, **kw)
    return got, [str(w.message) for w in ws]


KV = [
    ("t.u8", 200, V.UINT8, None), ("t.i8", -100, V.INT8, None),
    ("t.u16", 65535, V.UINT16, None), ("t.i16", -32768, V.INT16, None),
    ("t.u32", 2**32 - 1, V.UINT32, None), ("t.i32", -2**31, V.INT32, None),
    ("t.f32", 0.1, V.FLOAT32, None), ("t.u64", 2**64 - 1, V.UINT64, None),
    ("t.i64", -2**63, V.INT64, None), ("t.f64", 1e-300, V.FLOAT64, None),
    ("t.bool", True, V.BOOL, None), ("t.bool0", False, V.BOOL, None),
    ("t.str", "naïve ✓ text", V.STRING, None), ("t.empty", "", V.STRING, None),
    ("general.file_type", 15, V.UINT32, None), ("general.name", "model", V.STRING, None),
    ("tokenizer.ggml.tokens", ["<s>", "</s>", "", "▁the"] + [f"t{i}" for i in range(2000)],
     V.ARRAY, V.STRING),
    ("tokenizer.ggml.scores", [float(i) / 3 for i in range(2004)], V.ARRAY, V.FLOAT32),
    ("tokenizer.ggml.token_type", [1, 3] * 1002, V.ARRAY, V.INT32),
    ("t.arr.u8", [0, 255, 7], V.ARRAY, V.UINT8), ("t.arr.i64", [-2**63, 5], V.ARRAY, V.INT64),
    ("t.arr.f64", [0.5, -0.0], V.ARRAY, V.FLOAT64), ("t.arr.bool", [True, False], V.ARRAY, V.BOOL),
]


def test_every_kv_pair_survives_load_save(tmp_path):
    src, dst = tmp_path / "a.gguf", tmp_path / "b.gguf"
    write(src, {"w": (np.arange(64, dtype=np.float32).reshape(2, 32), None)}, KV, alignment=64)
    got, _ = round_trip(src, dst)
    assert got.metadata["t.u64"] == GGUFValue(int(V.UINT64), None, 2**64 - 1)
    assert got.metadata["tokenizer.ggml.tokens"].value[:4] == ["<s>", "</s>", "", "▁the"]
    a, ta = fields(src)
    b, tb = fields(dst)
    assert len(a) == len(KV) + 2           # the KV list, general.architecture and alignment
    for k, v in a.items():
        assert b.get(k) == v, k
    assert all(k.startswith("grit.") for k in set(b) - set(a))
    assert b["general.architecture"] == ([int(V.STRING)], "llama")
    assert b["general.alignment"][1] == 64
    assert np.array_equal(tb["w"].data, ta["w"].data)


def test_explicit_metadata_argument_and_typed_values(tmp_path):
    p = tmp_path / "m.gguf"
    grit.save(p, {"x": np.zeros(4, np.float32)},
              {"general.name": "demo", "c.n": GGUFValue(int(V.UINT16), None, 9),
               "c.l": GGUFValue(int(V.ARRAY), int(V.INT64), [1, -2])})
    f, _ = fields(p)
    assert f["general.name"] == ([int(V.STRING)], "demo")
    assert f["c.n"] == ([int(V.UINT16)], 9)
    assert f["c.l"] == ([int(V.ARRAY), int(V.INT64)], [1, -2])
    with pytest.raises(grit.GritUsageError):
        grit.save(tmp_path / "bad.gguf", {"x": np.zeros(4, np.float32)}, {"grit.desc.x": "00"})
    with pytest.raises(grit.GritUsageError):
        grit.save(tmp_path / "bad.gguf", {"x": np.zeros(4, np.float32)}, {"k": 3})


def test_safetensors_metadata_survives_load_save(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    from safetensors import safe_open
    src, dst = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    meta = {"format": "pt", "note": "ünïcode", "empty": ""}
    st.save_file({"w": np.ones((2, 3), np.float32)}, str(src), metadata=meta)
    got = grit.load(src)
    got["q"] = grit.encode(np.ones((2, 32), np.float32), grit.GRADE_MXFP4)
    grit.save(dst, got)
    with safe_open(str(dst), "np") as f:
        m = f.metadata()
    assert {k: v for k, v in m.items() if k != "__grit__"} == meta
    assert "__grit__" in m
    assert grit.load(dst).metadata == meta


NATIVE_QUANTIZED = [T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.MXFP4, T.TQ2_0]
NATIVE_RANDOM = [T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q2_K, T.Q4_K, T.Q5_K, T.Q6_K,
                 T.Q8_K, T.TQ2_0, T.MXFP4, T.NVFP4]


def _same_values(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(np.isnan(a), np.isnan(b)) and \
        np.array_equal(a.view(np.uint32)[~np.isnan(a)], b.view(np.uint32)[~np.isnan(b)])


@pytest.mark.parametrize("how,t", [("q", t) for t in NATIVE_QUANTIZED] +
                         [("r", t) for t in NATIVE_RANDOM], ids=lambda x: getattr(x, "name", x))
def test_ggml_block_types_are_written_as_themselves(tmp_path, how, t):
    shape = (3, 512)
    data = (gguf.quants.quantize(RNG.standard_normal(shape).astype(np.float32), t)
            if how == "q" else blocks(t, shape))
    src, dst = tmp_path / "a.gguf", tmp_path / "b.gguf"
    write(src, {"w": (data, t)})
    got, warned = round_trip(src, dst)
    assert isinstance(got["w"], grit.GritArray)
    assert not warned
    _, ta = fields(src)
    _, tb = fields(dst)
    assert tb["w"].tensor_type == t
    assert list(tb["w"].shape) == list(ta["w"].shape)
    assert bytes(tb["w"].data) == bytes(ta["w"].data)
    if t != T.Q8_K:       # gguf-py has no Q8_K dequantize; the bytes are asserted above
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ref = gguf.quants.dequantize(ta["w"].data, t)
            new = gguf.quants.dequantize(tb["w"].data, t)
        assert _same_values(new, ref)
    again = grit.load(dst)
    assert again.ggml_types["w"] == t.name
    assert _same_values(grit.decode(again["w"]), grit.decode(got["w"]))


@pytest.mark.parametrize("t", ["Q8_0", "MXFP4"])
def test_encoded_array_of_a_ggml_grade_becomes_that_type(tmp_path, t):
    """An array grit.encode made (canonical placement) is, with relayout=True,
    a ggml tensor in the file, and gguf-py's dequantize of it equals grit.decode."""
    x = RNG.standard_normal((4, 128)).astype(np.float32)
    a = grit.encode(x, GGML_GRADES[t])
    p = tmp_path / "e.gguf"
    with pytest.warns(UserWarning, match="'w'"):     # by default: the exact descriptor kept
        grit.save(p, {"w": a})
    assert fields(p)[1]["w"].tensor_type == T.I8
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grit.save(p, {"w": a}, relayout=True)
    _, tf = fields(p)
    assert tf["w"].tensor_type == T[t]
    got = gguf.quants.dequantize(tf["w"].data, T[t]).reshape(4, 128)
    dec = grit.decode(a)
    # equal values; bits too, except E2M1 code 8, which GRIT reads as −0.0 and
    # ggml as +0.0 (docs/placements.md, "GGUF")
    assert np.array_equal(got, dec)
    if t == "MXFP4":
        assert _same_values(np.where(dec == 0, np.float32(0), dec), got)
    else:
        assert _same_values(got, dec)
    assert _same_values(grit.decode(grit.load(p)["w"]), grit.decode(a))


def test_other_arrays_fall_back_with_a_warning_naming_them(tmp_path):
    x = RNG.standard_normal((32, 64)).astype(np.float32)
    a = grit.relayout(grit.encode(x, grit.GRADE_MXFP4), grit.layouts.TILE_16X16)
    b = grit.encode(x, GGML_GRADES["Q4_0"])      # its zero points are not ggml's constant 8
    p = tmp_path / "f.gguf"
    with pytest.warns(UserWarning, match="'blk.tile'") as rec:
        grit.save(p, {"blk.tile": a, "blk.q4": b})
    assert any("'blk.q4'" in str(w.message) for w in rec)
    _, tf = fields(p)
    assert tf["blk.tile"].tensor_type == T.I8 and tf["blk.q4"].tensor_type == T.I8
    got = grit.load(p)
    assert got["blk.tile"].payload() == a.payload() and got["blk.q4"].payload() == b.payload()


def test_inexpressible_and_plain_tensors_are_carried_verbatim(tmp_path):
    x = RNG.standard_normal((2, 256)).astype(np.float32)
    tensors = {
        "q3k": (blocks(T.Q3_K, (2, 512)), T.Q3_K),
        "iq4": (blocks(T.IQ4_NL, (3, 64)), T.IQ4_NL),
        "tq1": (gguf.quants.quantize(x, T.TQ1_0), T.TQ1_0),
        "bf16": (gguf.quants.quantize(x, T.BF16), T.BF16),
        "f16": (x.astype(np.float16), None),
        "i16": (np.arange(6, dtype=np.int16).reshape(2, 3), None),
        "q6": (blocks(T.Q6_K, (2, 256)), T.Q6_K),
    }
    src, dst = tmp_path / "a.gguf", tmp_path / "b.gguf"
    write(src, tensors)
    got, warned = round_trip(src, dst)
    assert not warned
    assert {k for k, v in got.items() if isinstance(v, Inexpressible)} == {"q3k", "iq4", "tq1"}
    _, ta = fields(src)
    _, tb = fields(dst)
    assert list(tb) == list(ta)
    for k in ta:
        assert tb[k].tensor_type == ta[k].tensor_type, k
        assert list(tb[k].shape) == list(ta[k].shape), k
        assert bytes(tb[k].data) == bytes(ta[k].data), k
    again = grit.load(dst)
    assert again.ggml_types == got.ggml_types


def test_multi_type_file_round_trip_counts(tmp_path):
    """Everything a gguf-py-written file of many types holds survives."""
    tensors = {f"r.{t.name}": (blocks(t, (2, 256)), t) for t in NATIVE_RANDOM}
    tensors.update({"q3k": (blocks(T.Q3_K, (1, 256)), T.Q3_K),
                    "f32": (np.ones(8, np.float32), None)})
    src, dst = tmp_path / "a.gguf", tmp_path / "b.gguf"
    write(src, tensors, KV)
    _, warned = round_trip(src, dst)
    assert not warned
    a, ta = fields(src)
    b, tb = fields(dst)
    kept_kv = sum(b.get(k) == v for k, v in a.items())
    kept_t = sum(tb[k].tensor_type == ta[k].tensor_type and bytes(tb[k].data) == bytes(ta[k].data)
                 for k in ta)
    assert (kept_kv, kept_t) == (len(a), len(ta)) == (len(KV) + 1, len(tensors))


def test_round_tripped_file_scans_the_same(tmp_path):
    from grit.scan import scan
    tensors = {f"r.{t.name}": (blocks(t, (2, 256)), t) for t in NATIVE_RANDOM}
    tensors.update({"iq4": (blocks(T.IQ4_NL, (1, 256)), T.IQ4_NL),
                    "norm": (np.ones(8, np.float32), None)})
    src, dst = tmp_path / "a.gguf", tmp_path / "b.gguf"
    write(src, tensors, KV)
    round_trip(src, dst)
    ra, rb = scan([str(src)]), scan([str(dst)])
    assert ra.findings              # the inferred descriptors, the inexpressible tensor

    def key(rep):
        return sorted((f.code, f.message) for f in rep.findings)
    assert ra.exit_code_graded == rb.exit_code_graded
    assert key(ra) == key(rb)


def test_a_value_that_is_not_utf8_is_carried_and_a_typed_error_when_read(tmp_path):
    src, dst = tmp_path / "a.gguf", tmp_path / "b.gguf"
    write(src, {"x": (np.zeros(4, np.float32), None)}, [("t.s", "zzzz", V.STRING, None),
                                                         ("t.n", 1, V.UINT8, None)])
    raw = src.read_bytes()
    src.write_bytes(raw.replace(b"zzzz", b"z\xffzz"))
    got = grit.load(src)
    with pytest.raises(grit.GritUsageError, match="UTF-8"):
        got.metadata["t.s"].value
    grit.save(dst, got)
    assert b"z\xffzz" in dst.read_bytes()
    assert grit.load(dst).metadata["t.n"].value == 1
