"""grit.save to GGUF writes what grit.load returns as ggml types llama.cpp
reads: a bfloat16 array (safetensors BF16) as a BF16 tensor, and, with
``relayout=True``, every GritArray a ggml block type can carry as that type
with its logical shape.  The peer is gguf-py: its GGUFReader reads the file
and ``gguf.quants.dequantize`` decodes the tensor, compared with
``grit.decode`` of the array that was saved."""
from __future__ import annotations


import warnings

import numpy as np
import pytest

import grit
from grit.ggml import CONVERTED, TYPES
from grit.io.gguf import GGML_GRADES

gguf = pytest.importorskip("gguf")
ml_dtypes = pytest.importorskip("ml_dtypes")
st = pytest.importorskip("safetensors.numpy")
T = gguf.GGMLQuantizationType
RNG = np.random.default_rng(20261202)
NAN = 0x7FC00000


def tensors_of(path):
    return {t.name: t for t in gguf.GGUFReader(str(path)).tensors}


def logical_shape(t) -> list[int]:
    """The numpy shape of a GGUFReader tensor (ggml's ne[] reversed)."""
    return [int(x) for x in reversed(t.shape)]


def bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, np.float32).view(np.uint32)


# ---------------------------------------------------------------------------
# BF16


def bf16_patterns(shape) -> np.ndarray:
    """bfloat16 values of every kind: random bit patterns (NaNs with payloads
    and both signs, infinities, subnormals, ±0 among them)."""
    u = RNG.integers(0, 1 << 16, shape, dtype=np.uint16)
    special = [0x7FC0, 0xFF81, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x0001, 0x807F]
    n = min(u.size, len(special))
    u.reshape(-1)[:n] = special[:n]
    return u.view(ml_dtypes.bfloat16)


def test_a_bf16_safetensors_tensor_is_written_as_bf16(tmp_path):
    """grit.save("x.gguf", grit.load(bf16.safetensors)): BF16 tensors whose
    bytes gguf-py reads back are the source's, bit for bit."""
    x = bf16_patterns((3, 64))
    v = bf16_patterns((5,))
    src = tmp_path / "m.safetensors"
    st.save_file({"w": x, "v": v, "f": np.ones((2, 2), np.float32)}, str(src))
    got = grit.load(str(src))
    assert got["w"].dtype == np.dtype(ml_dtypes.bfloat16)
    dst = tmp_path / "m.gguf"
    grit.save(str(dst), got)
    r = tensors_of(dst)
    for name, want in (("w", x), ("v", v)):
        assert r[name].tensor_type == T.BF16
        assert logical_shape(r[name]) == list(want.shape)
        assert np.asarray(r[name].data).tobytes() == want.tobytes()
    assert r["f"].tensor_type == T.F32
    # gguf-py's dequantize of the BF16 bytes is the source widened
    deq = gguf.quants.dequantize(np.asarray(r["w"].data), T.BF16).reshape(x.shape)
    assert (bits(deq) == bits(x.astype(np.float32))).all()
    # and grit reads it back as those values (BF16 widened to float32)
    back = grit.load(str(dst))
    assert back.ggml_types["w"] == "BF16"
    assert (bits(back["w"]) == bits(x.astype(np.float32))).all()


def test_other_ml_dtypes_arrays_are_still_refused(tmp_path):
    x = np.zeros((2, 4), ml_dtypes.float8_e4m3fn)
    with pytest.raises(grit.GritUsageError, match="float8_e4m3fn"):
        grit.save(str(tmp_path / "f8.gguf"), {"x": x})


# ---------------------------------------------------------------------------
# relayout=True: every array a ggml block type carries, as that type


def peer_dequantize(raw: np.ndarray, ggml: str) -> np.ndarray:
    """gguf-py's dequantize of a tensor's bytes; Q8_K, which gguf-py does not
    dequantize, as ggml's dequantize_row_q8_K: y = d·q (bsums unread)."""
    raw = np.asarray(raw)
    if ggml == "Q8_K":
        blk = raw.reshape(-1, 292)
        d = np.ascontiguousarray(blk[:, 0:4]).view("<f4")
        return (d * blk[:, 4:260].view(np.int8).astype(np.float32)).reshape(-1)
    with np.errstate(all="ignore"):
        return gguf.quants.dequantize(raw, T[ggml]).reshape(-1).astype(np.float32)


def nvfp4_fields(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s0 per element, e per element) of NVFP4 blocks, decoded by ml_dtypes
    (E4M3 scales with bit 7 clear; E2M1 codes, four runs of 16 per block,
    byte l of a run holding element l low and l + 8 high)."""
    b = raw.reshape(-1, 36)
    s0 = np.ascontiguousarray(b[:, :4]).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    qs = b[:, 4:].reshape(-1, 4, 8)
    codes = np.concatenate([qs & 15, qs >> 4], axis=2).reshape(-1)        # per run: l, l + 8
    e = codes.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    return np.repeat(s0.reshape(-1), 16), e


# (label, grade, ggml type): each grade a ggml block type carries
CARRIED = [
    ("Q4KS", grit.GRADE_Q4KS, "Q4_K"),
    ("MXFP4", grit.GRADE_MXFP4, "MXFP4"),
    ("MXFP4_RNE", grit.GRADE_MXFP4_RNE, "MXFP4"),
    ("NVFP4", GGML_GRADES["NVFP4"], "NVFP4"),
    ("NVF4", grit.GRADE_NVF4, "NVFP4"),
    ("NVF4_RTZ", grit.GRADE_NVF4_RTZ, "NVFP4"),
    ("s8_k32_binary16", "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)", "Q8_0"),
    ("Q2_K", GGML_GRADES["Q2_K"], "Q2_K"),
    ("Q5_K", GGML_GRADES["Q5_K"], "Q5_K"),
    ("Q8_K", GGML_GRADES["Q8_K"], "Q8_K"),
]
SHAPE = (6, 512)


def values(shape) -> np.ndarray:
    x = RNG.standard_normal(shape).astype(np.float32) * np.float32(3)
    x[1] = 0                                  # an all-zero row
    x[2, ::7] *= 1000                         # outliers
    return x


def saved(tmp_path, a, name="blk.0.w.weight"):
    p = tmp_path / "r.gguf"
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # no fallback warning: a ggml type
        grit.save(str(p), {name: a}, relayout=True)
    return p, tensors_of(p)


def check_against_peer(a, t, ggml: str, companion=None) -> dict:
    """gguf-py's decode of the written tensor against grit.decode(a), bit for
    bit apart from the differences docs/placements.md ("GGUF") documents,
    each counted: E2M1 code 8 (GRIT −0.0, ggml +0.0) and, for NVFP4 with a
    companion scale, the rounding of the scale product — GRIT f32(f32(s1·s0)·e)
    (§8.1), ggml f32(f32(s0·e)·s1), both derived here from the blocks."""
    assert t.tensor_type == T[ggml]
    assert logical_shape(t) == list(a.shape)          # the logical shape, not bytes
    dec = bits(grit.decode(a)).reshape(-1)
    raw = np.asarray(t.data)
    peer = peer_dequantize(raw, ggml)
    if companion is not None:
        s1 = np.float32(companion.reshape(-1)[0]) if companion.size == 1 else None
        assert s1 is not None
        s0, e = nvfp4_fields(raw)
        zero = e == 0
        assert (bits(s0 * e)[~zero] == bits(peer)[~zero]).all()       # the peer reads the blocks so
        grit_way = ((s1 * s0) * e).astype(np.float32)
        ggml_way = (peer * s1).astype(np.float32)
        assert (dec[~zero] == bits(grit_way)[~zero]).all()
        rounding = int(np.count_nonzero(bits(grit_way)[~zero] != bits(ggml_way)[~zero]))
        ulps = np.abs(dec[~zero].astype(np.int64) - bits(ggml_way)[~zero].astype(np.int64))
        assert ulps.max(initial=0) <= 1
        neg_zero = int(np.count_nonzero(dec[zero] == 0x80000000))
        assert (dec[zero] & np.uint32(0x7FFFFFFF) == 0).all()
        assert (bits(ggml_way)[zero] & np.uint32(0x7FFFFFFF) == 0).all()
        return {"rounding": rounding, "neg_zero": neg_zero}
    differ = dec != bits(peer)
    neg_zero = differ & (dec == 0x80000000) & (bits(peer) == 0)
    assert (differ == neg_zero).all(), f"{int((differ & ~neg_zero).sum())} values differ"
    if ggml not in ("MXFP4", "NVFP4"):
        assert not neg_zero.any()
    return {"neg_zero": int(neg_zero.sum())}


@pytest.mark.parametrize("label,grade,ggml", CARRIED, ids=[c[0] for c in CARRIED])
def test_an_encoded_array_is_written_as_its_ggml_type(tmp_path, label, grade, ggml):
    a = grit.encode(values(SHAPE), grade)
    p, r = saved(tmp_path, a)
    companion = None
    if a.descriptor.n_levels == 2 and ggml == "NVFP4":
        assert set(r) == {"blk.0.w.weight", "blk.0.w.scale"}      # llama.cpp's name
        companion = np.asarray(r["blk.0.w.scale"].data)
        assert companion.tobytes() == bytes(a.planes[2])
    else:
        assert set(r) == {"blk.0.w.weight"}
    counts = check_against_peer(a, r["blk.0.w.weight"], ggml, companion)
    if companion is not None:
        # the scale arithmetic differs (counted above, at most 1 ulp each)
        assert counts["rounding"] > 0
    # grit reads it back with the array's grade and the same decode
    back = grit.load(str(p))
    b = back["blk.0.w.weight"]
    assert back.ggml_types["blk.0.w.weight"] == ggml
    assert b.grade.id == a.grade.id
    if grit.native.ggml_kernels_on() and a.descriptor.n_levels == TYPES[ggml].grade.descriptor(
            ).n_levels and TYPES[ggml].zero_copy:
        # a grade the type carries up to its encode rule takes the fused kernel
        assert grit.ggml.kernel_for(b.descriptor, b.shape) is TYPES[ggml]
    assert (bits(grit.decode(b)) == bits(grit.decode(a))).all()


@pytest.mark.parametrize("label,grade,ggml", [c for c in CARRIED if c[0] in
                                              ("Q4KS", "MXFP4", "s8_k32_binary16")],
                         ids=["Q4KS", "MXFP4", "s8_k32_binary16"])
def test_an_array_in_another_placement_is_relayouted_to_its_ggml_type(tmp_path, label, grade,
                                                                       ggml):
    a = grit.relayout(grit.encode(values((32, 256)), grade), grit.layouts.TILE_16X16)
    p, r = saved(tmp_path, a)
    check_against_peer(a, r["blk.0.w.weight"], ggml)
    b = grit.load(str(p))["blk.0.w.weight"]
    assert b.grade.id == a.grade.id
    assert (bits(grit.decode(b)) == bits(grit.decode(a))).all()


@pytest.mark.parametrize("ggml", sorted(CONVERTED))
def test_every_converted_type_is_written_back_from_planes(tmp_path, ggml):
    """An array of a converted type built from its planes (not from blocks
    load read) is written as the type: the record's write, the blocks
    converted back to the same planes; gguf-py decodes them as grit does."""
    src = tmp_path / "src.gguf"
    x = values((4, 512))
    from _support import write_gguf
    from test_gguf_roundtrip import blocks as random_blocks
    if ggml in ("Q4_1", "Q5_1"):               # no encode rule: gguf-py quantizes
        b = gguf.quants.quantize(x, T[ggml])
    else:                                      # random blocks with finite scales
        b = random_blocks(T[ggml], (4, 512))
    write_gguf(src, {"w": (b, T[ggml])})
    loaded = grit.load(str(src))["w"]
    a = grit.GritArray(loaded.descriptor, loaded.shape, tuple(bytes(p) for p in loaded.planes))
    assert a.source is None
    p, r = saved(tmp_path, a, "w")
    assert np.asarray(r["w"].data).tobytes() == np.asarray(b).tobytes()
    check_against_peer(a, r["w"], ggml)
