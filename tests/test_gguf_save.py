"""grit.save to GGUF writes what grit.load returns as ggml types llama.cpp
reads: a bfloat16 array (safetensors BF16) as a BF16 tensor, and, with
``relayout=True``, every GritArray a ggml block type can carry as that type
with its logical shape.  The peer is gguf-py: its GGUFReader reads the file
and ``gguf.quants.dequantize`` decodes the tensor, compared with
``grit.decode`` of the array that was saved."""
from __future__ import annotations


import numpy as np
import pytest

import grit

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
