"""Bounded memory in GGUF writing and reading: the blocks of an NVFP4 or
MXFP4 array written a bounded number at a time (grit.io.gguf_writer
``WRITE_BLOCKS``), and unblocked a bounded number at a time (grit.ggml
``UNBLOCK_STEP``), give the bytes the one-step paths give, and every byte of
the planes read is handed to ``release`` once written."""
from __future__ import annotations

import numpy as np
import pytest

import grit
from grit import ggml
from grit.array import GritArray, canonical
from grit.io import gguf_writer
from grit.io.gguf import nvfp4_scaled_grade
from grit.io.gguf_writer import save_gguf

_GRADES = ["grit1(e=e2m1,k0=16,s0=e4m3,esr=ratiomaxabs)", "GRADE_MXFP4", "scaled"]
#: a ggml type whose blocks are read back before written (not invertible)
_Q8_0 = "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)"


def _array(grade: str, shape=(7, 384)) -> GritArray:
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    if grade == "scaled":                      # NVFP4 with a binary32 level-1 scale
        g = grit.register_grade(nvfp4_scaled_grade(0))
    elif grade.startswith("GRADE_"):
        g = getattr(grit, grade)
    else:
        g = grit.register_grade(grade)
    return grit.encode(x, g)


@pytest.mark.parametrize("name, shape", [("NVFP4", (7, 128)), ("MXFP4", (9, 96))])
def test_unblock_in_steps(monkeypatch, name, shape):
    """Unblocked 3 blocks at a time (the last step short), the planes
    written are given back, as the relayout of the blocks gives them."""
    t = ggml.TYPES[name]
    n = int(np.prod(shape))
    k0 = 16 if name == "NVFP4" else 32
    rng = np.random.default_rng(n)
    planes = (rng.integers(0, 256, n // 2, dtype=np.uint8).tobytes(),
              rng.integers(0, 256, n // k0, dtype=np.uint8).tobytes(), b"", b"")
    blocks = t.write(planes, n // t.block_elems)
    monkeypatch.setattr(ggml, "UNBLOCK_STEP", 3)
    got = t.unblock(blocks)
    want = canonical(GritArray(t.descriptor(len(shape) - 1), shape, t.read(blocks))).planes
    assert [bytes(p) for p in got] == [bytes(p) for p in want] == list(planes)


def _spans(bufs) -> list[tuple[int, int]]:
    out = []
    for b in bufs:
        x = np.frombuffer(b, np.uint8)
        a = x.__array_interface__["data"][0]
        out.append((a, a + x.size))
    return sorted(out)


@pytest.mark.parametrize("grade", _GRADES)
def test_blocks_written_in_steps(tmp_path, monkeypatch, grade):
    """The file written 5 blocks at a time is the file written at once, and
    ``release`` is handed every byte of the code and scale planes."""
    a = _array(grade)
    save_gguf(str(tmp_path / "one.gguf"), {"w": a}, relayout=True)
    monkeypatch.setattr(gguf_writer, "WRITE_BLOCKS", 5)
    got: list = []
    save_gguf(str(tmp_path / "steps.gguf"), {"w": a}, relayout=True, release=got.append)
    assert (tmp_path / "one.gguf").read_bytes() == (tmp_path / "steps.gguf").read_bytes()
    spans = _spans(got)
    for p in a.planes[:2]:
        lo, hi = _spans([p])[0]
        covered = lo
        for s, e in spans:
            if s <= covered < e:
                covered = max(covered, e)
        assert covered >= hi


@pytest.mark.parametrize("grade", [*_GRADES, _Q8_0])
def test_deferred_array_is_written_as_built(tmp_path, grade):
    """A deferred array (grit convert --to gguf's moved query/key rows) is
    written as the array it builds, each time it is asked built anew."""
    a = _array(grade)
    calls = []

    def build():
        calls.append(1)
        return a.planes
    d = GritArray.deferred(a.descriptor, a.shape, build)
    save_gguf(str(tmp_path / "a.gguf"), {"w": a}, relayout=True)
    save_gguf(str(tmp_path / "d.gguf"), {"w": d}, relayout=True)
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "d.gguf").read_bytes()
    assert calls


def test_q8_0_is_built_when_written(tmp_path):
    """Q8_0 with relayout: the blocks the file holds are gguf-py's
    quantisation-free reading of the same codes (``gguf.quants``: the file
    dequantises to grit's decode), and the planes read are handed to
    ``release`` (each part as its blocks are written, then each whole)."""
    gguf = pytest.importorskip("gguf")
    a = _array(_Q8_0, (4, 256))
    got: list = []
    save_gguf(str(tmp_path / "q.gguf"), {"w": a}, relayout=True, release=got.append)
    t = gguf.GGUFReader(str(tmp_path / "q.gguf")).tensors[0]
    assert t.tensor_type == gguf.GGMLQuantizationType.Q8_0
    back = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(a.shape)
    assert np.array_equal(back.view(np.uint32), grit.decode(a).view(np.uint32))
    released = [np.frombuffer(b, np.uint8).tobytes() for b in got]
    assert all(bytes(p) in released for p in a.planes if len(memoryview(p)))


@pytest.mark.parametrize("grade", _GRADES[:2])
def test_unblocked_from_a_mapped_file_in_steps(tmp_path, monkeypatch, grade):
    """Blocks read in place from a mapped GGUF, unblocked 2 at a time, each
    step's pages given back (``_let_go``): the planes are the array's, and
    the blocks read the same afterwards (decoded in place)."""
    a = _array(grade)
    save_gguf(str(tmp_path / "m.gguf"), {"w": a}, relayout=True)
    b = grit.load(str(tmp_path / "m.gguf"))["w"]
    monkeypatch.setattr(ggml, "UNBLOCK_STEP", 2)
    got = ggml.unblocked(b)
    assert got is not None
    assert [bytes(p) for p in got] == [bytes(p) for p in canonical(a).planes]
    assert np.array_equal(grit.decode(b).view(np.uint32), grit.decode(a).view(np.uint32))
