"""GRIT-annotated GGUF: grit.save(path.gguf) / grit.save_gguf and grit.load."""
from __future__ import annotations

import numpy as np
import pytest

import grit
from _support import assert_same_array
from grit import layouts as L

gguf = pytest.importorskip("gguf")


def _values(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


same = assert_same_array


def _arrays():
    a = grit.encode(_values((4, 64)), grit.GRADE_MXFP4)
    e = grit.parse_layout("Compose(ColMajor,Perm([1,0]))")
    return {
        "blk.0.mx": a,
        "blk.0.q4": grit.encode(_values((2, 256)), grit.GRADE_Q4KS),
        "blk.0.nv": grit.encode(_values((3, 64)), grit.GRADE_NVF4),
        "blk.0.sp": grit.encode(_values((4, 64)), grit.GRADE_I8S24),
        "blk.0.tile": grit.relayout(grit.encode(_values((32, 64)), grit.GRADE_MXFP4),
                                    L.TILE_16X16),
        "blk.0.expr": grit.relayout(a, data=e),
        "blk.0.assumed": grit.assume_placement(a, L.ROW_MAJOR, "test: canonical bytes",
                                               producer=0x42),
        "norm": _values((64,)),
        "ids": np.arange(10, dtype=np.int32),
    }


def test_gguf_round_trip(tmp_path):
    arrays = _arrays()
    for path, save in ((tmp_path / "a.gguf", grit.save),
                       (tmp_path / "b.bin", lambda p, t: grit.save_gguf(p, t))):
        save(path, arrays)
        got = grit.load(path)
        assert list(got) == list(arrays)
        for k, v in arrays.items():
            if isinstance(v, grit.GritArray):
                same(v, got[k])
            else:
                assert np.array_equal(got[k], v) and got[k].dtype == v.dtype
        assert got["blk.0.assumed"].descriptor.assumed
        assert got["blk.0.assumed"].descriptor.producer == 0x42


def test_gguf_annotations_are_plain_kv(tmp_path):
    arrays = _arrays()
    p = tmp_path / "k.gguf"
    grit.save(p, arrays, {"general.name": "demo"})
    r = gguf.GGUFReader(str(p))
    f = r.fields
    a = arrays["blk.0.mx"]
    assert f["grit.desc.blk.0.mx"].contents() == a.descriptor.hex()
    assert f["grit.shape.blk.0.mx"].contents() == [4, 64]
    assert f["grit.grade.blk.0.mx"].contents() == a.grade.canonical
    assert f["general.name"].contents() == "demo"
    w = arrays["blk.0.expr"].descriptor.placement_data
    assert f[f"grit.layout.0x{w:016x}"].contents() == "Compose(ColMajor,Perm([1,0]))"
    t = {t.name: t for t in r.tensors}["blk.0.mx"]
    assert t.tensor_type == gguf.GGMLQuantizationType.I8
    assert np.asarray(t.data).view(np.uint8).tobytes() == a.payload()


def test_gguf_desc_only_annotation(tmp_path):
    """The minimal annotation: grit.desc.<name> over a native Q8_0 tensor,
    the descriptor claiming BLOCK_AOS, the logical shape from the tensor."""
    x = _values((2, 64))
    blocks = gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)
    p0 = tmp_path / "plain.gguf"
    w = gguf.GGUFWriter(str(p0), "t")
    w.add_tensor("q", blocks, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    inferred = grit.load(p0)["q"]
    p = tmp_path / "ann.gguf"
    w = gguf.GGUFWriter(str(p), "t")
    w.add_string("grit.desc.q", inferred.descriptor.hex())
    w.add_tensor("q", blocks, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    same(inferred, grit.load(p)["q"])


def test_gguf_bad_annotations(tmp_path):
    a = grit.encode(_values((4, 64)), grit.GRADE_MXFP4)
    for key, val in (("grit.desc.q", "zz"), ("grit.desc.missing", a.descriptor.hex()),
                     ("grit.grade.q", "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2rnemaxabs)"),
                     ("grit.layout.0x8000000000000001", "ColMajor")):
        p = tmp_path / "bad.gguf"
        w = gguf.GGUFWriter(str(p), "t")
        if key != "grit.desc.q":
            w.add_string("grit.desc.q", a.descriptor.hex())
        w.add_string(key, val)
        w.add_array("grit.shape.q", [4, 64])
        w.add_tensor("q", np.frombuffer(a.payload(), np.int8))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with pytest.raises(grit.GritError):
            grit.load(p)


def test_gguf_save_refuses(tmp_path):
    with pytest.raises(grit.GritUsageError):
        grit.save(tmp_path / "x.gguf", {"a": np.zeros(3, np.uint32)})
    with pytest.raises(grit.GritUsageError):
        grit.save(tmp_path / "x.gguf", {"a": np.zeros(3, np.float32)}, {"grit.desc.a": "x"})
    assert not (tmp_path / "x.gguf").exists()
