"""``save_gguf``'s positioned writes: the file written with every tensor's
data a hole (``data=False``), then filled a few tensors at a time in any
order (``at``: the offsets the file's own tensor infos give), ends as the
bytes of one ``save_gguf`` call over the same tensors — ggml block types
built as the file is written (NVFP4 with its companion, MXFP4), one built
whole (Q8_0), plain F32, F16 and bfloat16 tensors; a tensor whose size is
not the planned one is refused."""
from __future__ import annotations

import os

import numpy as np
import pytest

import grit
from grit.errors import GritError
from grit.io.gguf_file import read_gguf

pytest.importorskip("gguf")
ml_dtypes = pytest.importorskip("ml_dtypes")
from grit.io.gguf_writer import save_gguf  # noqa: E402

RNG = np.random.default_rng(7)


def _tensors() -> dict:
    def x(*shape):
        return RNG.standard_normal(shape).astype(np.float32)
    return {"a.weight": grit.encode(x(32, 128), grit.GRADE_NVF4),
            "b.weight": grit.encode(x(16, 64), grit.GRADE_MXFP4),
            "c.weight": grit.encode(x(8, 64), "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)"),
            "d.weight": x(7, 5), "e.weight": x(9).astype(np.float16),
            "f.weight": x(4, 6).astype(ml_dtypes.bfloat16)}


def test_holes_then_positioned_writes_are_the_one_calls_bytes(tmp_path):
    t = _tensors()
    meta = {"general.architecture": "llama"}
    whole, part = str(tmp_path / "whole.gguf"), str(tmp_path / "part.gguf")
    save_gguf(whole, t, meta, relayout=True)
    save_gguf(part, t, meta, relayout=True, data=False)
    assert os.path.getsize(part) == os.path.getsize(whole)
    f = read_gguf(part)
    at = {i.name: (f.data_start + i.offset, i.nbytes) for i in f.tensors}
    assert "a.scale" in at                       # the NVFP4 companion, planned
    with open(part, "rb") as g:                  # the data: zeros until written
        g.seek(min(o for o, _ in at.values()))
        assert not any(g.read())
    for names in (["f.weight", "a.weight"], ["c.weight"], ["e.weight", "b.weight", "d.weight"]):
        save_gguf(part, {n: t[n] for n in names}, meta, relayout=True, at=at)
    with open(whole, "rb") as a, open(part, "rb") as b:
        assert a.read() == b.read()


def test_a_tensor_of_another_size_than_planned_is_refused(tmp_path):
    t = _tensors()
    part = str(tmp_path / "part.gguf")
    save_gguf(part, t, None, relayout=True, data=False)
    f = read_gguf(part)
    at = {i.name: (f.data_start + i.offset, i.nbytes) for i in f.tensors}
    with pytest.raises(GritError, match="d.weight"):
        save_gguf(part, {"d.weight": np.zeros((7, 6), np.float32)}, None, at=at)
    with pytest.raises(GritError, match="z.weight"):
        save_gguf(part, {"z.weight": np.zeros(3, np.float32)}, None, at=at)
