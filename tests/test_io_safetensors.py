"""grit.save / grit.load for safetensors: round trips, the official library
reading our files, the descriptor-map convention, and hostile headers."""
from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

import grit
from _support import assert_same_array
from grit import layouts as L
from grit.io.safetensors import CheckFailed, GritFileError, plane_tensor_name

st_numpy = pytest.importorskip("safetensors.numpy")
RNG = np.random.default_rng(20261129)


def _values(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _random_array(grade, shape=(4, 256)):
    """Any registered grade: encoded when the codec can, else random planes
    of the exact §7.3 sizes (level 1 never reads plane bytes)."""
    try:
        return grit.encode(_values(shape), grade)
    except grit.GritError:
        d = grade.descriptor(group_axis=len(shape) - 1)
        sizes = grit.plane_sizes(d, shape).sizes
        return grit.GritArray(d, shape, [RNG.integers(0, 256, n, dtype=np.uint8).tobytes()
                                         for n in sizes])


def same(a, b):
    assert_same_array(a, b)
    assert a == b


def test_every_registered_grade_round_trips(tmp_path):
    from grit.io.gguf import GGML_GRADES
    # the six registered grades and the grades ggml block types map to (not whatever
    # other tests taught this process: the test must not depend on test order)
    grades = list(grit.grade.REGISTERED_GRADES.values()) + [
        grit.register_grade(text) for text in GGML_GRADES.values()]
    assert len(grades) >= 6
    arrays = {f"t{i}": _random_array(g) for i, g in enumerate(grades)}
    arrays["plain"] = _values((3, 5))
    p = tmp_path / "all.safetensors"
    grit.save(p, arrays)
    got = grit.load(p)
    assert set(got) == set(arrays)
    for k, a in arrays.items():
        if isinstance(a, grit.GritArray):
            same(a, got[k])
        else:
            assert np.array_equal(got[k], a) and got[k].dtype == a.dtype
    assert got.convention == "grit-safetensors/1"


def test_official_library_loads_our_file(tmp_path):
    a = grit.encode(_values((8, 64)), grit.GRADE_Q4KS)
    s = grit.encode(_values((4, 64)), grit.GRADE_I8S24)
    x = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    p = tmp_path / "o.safetensors"
    grit.save(p, {"q": a, "s": s, "x": x}, metadata={"format": "np", "note": "hi"})
    t = st_numpy.load_file(str(p))
    assert np.array_equal(t["x"], x)
    for name, arr in (("q", a), ("s", s)):
        for role, plane, n in zip(grit.array.PLANE_NAMES, arr.planes, arr.plane_bytes):
            tn = plane_tensor_name(name, role)
            if n:
                assert t[tn].dtype == np.uint8 and t[tn].tobytes() == bytes(plane)
            else:
                assert tn not in t
    from safetensors import safe_open
    with safe_open(str(p), "np") as f:
        meta = f.metadata()
    assert meta["format"] == "np" and meta["note"] == "hi"
    doc = json.loads(meta["__grit__"])
    assert doc["schema"] == "grit-safetensors" and doc["version"] == 1
    assert doc["tensors"]["q"]["grade"] == a.grade.canonical
    assert doc["tensors"]["q"]["desc"] == a.descriptor.hex()
    got = grit.load(p)
    assert got.metadata == {"format": "np", "note": "hi"}
    same(a, got["q"])
    same(s, got["s"])


def test_zero_copy_views(tmp_path):
    a = grit.encode(_values((16, 64)), grit.GRADE_MXFP4)
    p = tmp_path / "z.safetensors"
    grit.save(p, {"a": a, "x": _values((2, 2))})
    got = grit.load(p)
    assert isinstance(got["a"].planes[0], memoryview) and got["a"].planes[0].readonly
    assert not got["x"].flags.writeable and not got["x"].flags.owndata


def test_placement_changed_array_round_trips(tmp_path):
    a = grit.encode(_values((32, 64)), grit.GRADE_MXFP4)
    t = grit.relayout(a, L.TILE_16X16)
    assert t.descriptor.placements != a.descriptor.placements
    p = tmp_path / "t.safetensors"
    grit.save(p, {"t": t})
    back = grit.load(p)["t"]
    same(t, back)
    assert np.array_equal(grit.decode(back).view(np.uint32), grit.decode(a).view(np.uint32))


def test_layout_expression_round_trips(tmp_path):
    a = grit.encode(_values((8, 64)), grit.GRADE_MXFP4)
    e = grit.parse_layout("Compose(ColMajor,Perm([1,0]))")
    y = grit.relayout(a, data=e)
    w = grit.layout_word(e)
    assert y.descriptor.placement_data == w
    p = tmp_path / "e.safetensors"
    grit.save(p, {"y": y})
    doc = json.loads(st_meta(p)["__grit__"])
    assert doc["layouts"] == {f"0x{w:016x}": str(e)}
    from grit.placement import expr as E
    E._REGISTRY.pop(w, None)                          # a fresh process would not know it
    back = grit.load(p)["y"]
    same(y, back)
    assert E.resolve_layout(w) is not None
    assert np.array_equal(grit.decode(back).view(np.uint32), grit.decode(a).view(np.uint32))


def st_meta(p):
    from safetensors import safe_open
    with safe_open(str(p), "np") as f:
        return f.metadata()


def test_grade_from_file_is_registered(tmp_path):
    text = "grit1(e=s8,k0=64,s0=binary32,esr=ratiomaxabs)"
    g = grit.register_grade(text)
    a = _random_array(g, (2, 128))
    p = tmp_path / "g.safetensors"
    grit.save(p, {"a": a})
    from grit import grade as G
    G._REGISTRY.pop(g.id)
    try:
        same(a, grit.load(p)["a"])
        assert grit.lookup_grade(g.id) is not None
    finally:
        grit.register_grade(text)


def test_save_refuses_bad_input(tmp_path):
    a = grit.encode(_values((2, 64)), grit.GRADE_MXFP4)
    p = tmp_path / "r.safetensors"
    with pytest.raises(grit.GritUsageError, match="__grit__"):
        grit.save(p, {"a": a}, metadata={"__grit__": "{}"})
    with pytest.raises(grit.GritUsageError, match="taken"):
        grit.save(p, {"a": a, "a.grit.data": np.zeros(3, np.uint8)})
    with pytest.raises(grit.GritUsageError):
        grit.save(p, {"a": [1, 2]})
    with pytest.raises(grit.GritUsageError):
        grit.save(p, {"a": np.array(["x"])})
    with pytest.raises(grit.GritUsageError):
        grit.save(p, {"a": a}, metadata={"k": 3})
    assert not p.exists()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".grit-")]


def test_save_is_atomic_and_leaves_inputs_alone(tmp_path):
    a = grit.encode(_values((4, 64)), grit.GRADE_MXFP4)
    p = tmp_path / "in.safetensors"
    grit.save(p, {"a": a})
    before = p.read_bytes()
    loaded = grit.load(p)
    b = grit.encode(_values((4, 64), seed=9), grit.GRADE_MXFP4)
    grit.save(p, {"a": b, "old": loaded["a"]})    # overwrite while the old file is mapped
    same(a, loaded["a"])                           # the old mapping still reads the old bytes
    got = grit.load(p)
    same(b, got["a"])
    same(a, got["old"])
    q = tmp_path / "copy.safetensors"
    grit.save(q, dict(got))
    assert grit.load(q)["a"] == b
    assert before != p.read_bytes()


def test_big_endian_and_bf16_plain(tmp_path):
    ml = pytest.importorskip("ml_dtypes")
    x = np.arange(6, dtype=">f4").reshape(2, 3)
    y = np.arange(4, dtype=np.float32).astype(ml.bfloat16)
    p = tmp_path / "b.safetensors"
    grit.save(p, {"x": x, "y": y})
    got = grit.load(p)
    assert np.array_equal(got["x"], x) and got["x"].dtype == np.dtype("<f4")
    assert got["y"].dtype == y.dtype and np.array_equal(got["y"], y)


# --- the descriptor-map convention -------------------------------------------------------

def _raw_file(path, header: dict, data: bytes, *, hlen=None, pad=True):
    hb = json.dumps(header).encode()
    if pad:
        hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb) if hlen is None else hlen) + hb + data)


def _descmap_file(path, arrays: dict, plain=None):
    header, data = {}, b""
    for name, a in arrays.items():
        pay = a.payload()
        header[name] = {"dtype": "U8", "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + len(pay)]}
        data += pay
    for name, x in (plain or {}).items():
        b = x.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(x.shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    header["__metadata__"] = {"__grit__": json.dumps(
        {n: a.descriptor.hex() for n, a in arrays.items()}), "other": "kept"}
    _raw_file(path, header, data)


def test_reads_descriptor_map_convention(tmp_path):
    a = grit.encode(_values((4, 64)), grit.GRADE_MXFP4)           # sub-byte: 2 planes
    q = grit.encode(_values((2, 256)), grit.GRADE_Q4KS)           # four planes
    x = _values((3, 3))
    p = tmp_path / "peer.safetensors"
    _descmap_file(p, {"a": a, "q": q}, {"x": x})
    with pytest.raises(Exception):
        st_numpy.load_file(str(p))                               # the official loader refuses
    got = grit.load(p)
    assert got.convention == "descriptor-map"
    assert got.metadata == {"other": "kept"}
    same(a, got["a"])
    same(q, got["q"])
    assert np.array_equal(got["x"], x)


def test_descriptor_map_size_failure_names_tensor(tmp_path):
    a = grit.encode(_values((4, 64)), grit.GRADE_MXFP4)
    p = tmp_path / "bad.safetensors"
    header = {"a": {"dtype": "U8", "shape": [4, 64], "data_offsets": [0, 100]},
              "__metadata__": {"__grit__": json.dumps({"a": a.descriptor.hex()})}}
    _raw_file(p, header, a.payload()[:100])
    with pytest.raises(grit.GritSizeError, match="tensor 'a'") as ei:
        grit.load(p)
    assert ei.value.tensor == "a"
    got = grit.load(p, strict=False)
    assert isinstance(got["a"], CheckFailed) and got.failed == [got["a"]]
    assert got["a"].status == grit.Status.SIZE_MISMATCH
    with pytest.raises(grit.GritSizeError):
        got["a"].decode()


def test_unknown_grade_raises_grade_error_naming_tensor(tmp_path):
    a = grit.encode(_values((4, 64)), grit.GRADE_MXFP4)
    d = a.descriptor.replace(grade_id=0x1234_5678_9ABC_DEF0)
    p = tmp_path / "u.safetensors"
    header = {"a": {"dtype": "U8", "shape": [4, 64], "data_offsets": [0, a.nbytes]},
              "__metadata__": {"__grit__": json.dumps({"a": d.hex()})}}
    _raw_file(p, header, a.payload())
    with pytest.raises(grit.GritGradeError, match="tensor 'a'"):
        grit.load(p)


# --- hostile headers ---------------------------------------------------------------------

def _good(tmp_path):
    a = grit.encode(_values((4, 64)), grit.GRADE_MXFP4)
    p = tmp_path / "good.safetensors"
    grit.save(p, {"a": a, "x": _values((2, 8))})
    return p


def _header(p):
    raw = p.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


HOSTILE = {
    "empty": lambda p, h, d: p.write_bytes(b""),
    "short": lambda p, h, d: p.write_bytes(b"\x05\x00\x00"),
    "truncated": lambda p, h, d: p.write_bytes(p.read_bytes()[:-10]),
    "header_len_beyond_file": lambda p, h, d: _raw_file(p, h, d, hlen=1 << 40),
    "header_len_huge": lambda p, h, d: _raw_file(p, h, d, hlen=(1 << 64) - 1),
    "not_json": lambda p, h, d: p.write_bytes(struct.pack("<Q", 8) + b"{garbage" + d),
    "not_utf8": lambda p, h, d: p.write_bytes(struct.pack("<Q", 8) + b"{\xff\xfe   }" + d),
    "json_array": lambda p, h, d: p.write_bytes(struct.pack("<Q", 8) + b"[1,2,3] " + d),
    "deep_json": lambda p, h, d: (lambda b: p.write_bytes(struct.pack("<Q", len(b)) + b))(
        b"{\"a\":" + b"[" * 100000 + b"]" * 100000 + b"}"),
    "dup_keys": lambda p, h, d: (lambda b: p.write_bytes(struct.pack("<Q", len(b)) + b + d))(
        json.dumps(h).encode()[:-1] + b',"x":' + json.dumps(h["x"]).encode() + b"}"),
}


def _mut(key, fn):
    def m(p, h, d):
        fn(h)
        _raw_file(p, h, d)
    HOSTILE[key] = m


_mut("offsets_beyond_file", lambda h: h["x"].update(data_offsets=[0, 1 << 50]))
_mut("offsets_reversed", lambda h: h["x"].update(data_offsets=[10, 2]))
_mut("offsets_negative", lambda h: h["x"].update(data_offsets=[-8, 56]))
_mut("offsets_lie_about_size", lambda h: h["x"].update(data_offsets=[0, 60]))
_mut("overlap", lambda h: h["a.grit.scale0"].update(
    data_offsets=[h["x"]["data_offsets"][0], h["x"]["data_offsets"][0] + 8]))
_mut("giant_shape", lambda h: h["x"].update(shape=[1 << 62, 1 << 62]))
_mut("negative_shape", lambda h: h["x"].update(shape=[-2, -32]))
_mut("float_shape", lambda h: h["x"].update(shape=[2.0, 8]))
_mut("deep_rank", lambda h: h["x"].update(shape=[1] * 1000))
_mut("unknown_dtype", lambda h: h["x"].update(dtype="F128"))
_mut("dtype_not_str", lambda h: h["x"].update(dtype=7))
_mut("plane_not_u8", lambda h: h["a.grit.data"].update(dtype="I8"))
_mut("plane_wrong_shape", lambda h: h["a.grit.data"].update(shape=[1]))
_mut("extra_entry_key", lambda h: h["x"].update(extra=1))
_mut("metadata_not_strings", lambda h: h["__metadata__"].update(k=3))


def _doc(fn):
    def f(h):
        doc = json.loads(h["__metadata__"]["__grit__"])
        fn(doc)
        h["__metadata__"]["__grit__"] = json.dumps(doc)
    return f


_mut("grit_not_json", lambda h: h["__metadata__"].update(__grit__="{nope"))
_mut("grit_version_2", _doc(lambda d: d.update(version=2)))
_mut("grit_unknown_schema", _doc(lambda d: d.update(schema="other")))
_mut("grit_missing_plane", _doc(lambda d: d["tensors"]["a"]["planes"].update(data="zz")))
_mut("grit_plane_claimed_twice", _doc(lambda d: d["tensors"].update(
    b=dict(d["tensors"]["a"], gid=None))))
_mut("grit_bad_desc", _doc(lambda d: d["tensors"]["a"].update(desc="00" * 10)))
_mut("grit_wrong_grade", _doc(lambda d: d["tensors"]["a"].update(
    grade="grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2rnemaxabs)")))
_mut("grit_bad_grade", _doc(lambda d: d.update(grades=["grit1(nope)"])))
_mut("grit_lying_gid", _doc(lambda d: d["tensors"]["a"].update(gid="0" * 26)))
_mut("grit_layout_lies", _doc(lambda d: d.update(layouts={"0x8000000000000001": "ColMajor"})))
_mut("grit_name_collides", _doc(lambda d: d["tensors"].update(x=d["tensors"].pop("a"))))


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_files_raise_grit_error(tmp_path, case):
    p = _good(tmp_path)
    h, d = _header(p)
    HOSTILE[case](p, h, d)
    with pytest.raises(grit.GritError):
        grit.load(p)


def test_hostile_errors_are_file_errors(tmp_path):
    p = _good(tmp_path)
    h, d = _header(p)
    HOSTILE["overlap"](p, h, d)
    with pytest.raises(GritFileError, match="overlap"):
        grit.load(p)
    assert issubclass(GritFileError, grit.GritUsageError)


def test_random_byte_flips_never_traceback(tmp_path):
    p = _good(tmp_path)
    raw = bytearray(p.read_bytes())
    rng = np.random.default_rng(7)
    n = struct.unpack("<Q", raw[:8])[0]
    for i in range(300):
        b = bytearray(raw)
        for _ in range(rng.integers(1, 4)):
            j = int(rng.integers(0, 8 + n))
            b[j] = int(rng.integers(0, 256))
        q = tmp_path / f"f{i % 4}.safetensors"
        q.write_bytes(bytes(b))
        try:
            grit.load(q, strict=False)
        except grit.GritError:
            pass


def test_saved_file_has_the_mode_open_would_give(tmp_path):
    import os
    import stat
    import numpy as np
    p = tmp_path / "m.safetensors"
    grit.save(str(p), {"w": grit.encode(np.ones(32, np.float32), grit.GRADE_MXFP4)})
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o666 & ~mask


def test_layout_places_the_data_section_where_asked():
    """``layout(data_at=r)`` pads the header with spaces so that the data
    section starts at r modulo DATA_PERIOD, every entry still aligned; a
    file filled at the layout's offsets is read by the official reader as
    the tensors, and a residue that is not a multiple of 8 is refused."""
    from safetensors.numpy import load as st_load

    from grit.io.safetensors import DATA_PERIOD, layout
    x = {"a": np.arange(5, dtype=np.float32), "b": np.arange(7, dtype=np.int16)}
    plain, _ = layout(x)
    for r in (0, 8, 1000, 2232, DATA_PERIOD - 8, len(plain.head) % DATA_PERIOD):
        lay, entries = layout(x, data_at=r)
        start = min(off for _, _, off, _ in lay.entries.values())
        assert start % DATA_PERIOD == r and start == len(lay.head)
        assert 0 <= len(lay.head) - len(plain.head) < DATA_PERIOD
        assert lay.head[len(plain.head):] == b" " * (len(lay.head) - len(plain.head))
        buf = bytearray(lay.size)
        buf[:len(lay.head)] = lay.head
        for n, (_, _, off, nb) in lay.entries.items():
            assert off % entries[n][2].dtype.itemsize == 0     # aligned for its dtype
            buf[off:off + nb] = np.ascontiguousarray(entries[n][2]).tobytes()
        got = st_load(bytes(buf))
        assert all(np.array_equal(got[k], v) and got[k].dtype == v.dtype for k, v in x.items())
    for bad in (4, -8, DATA_PERIOD):
        with pytest.raises(grit.GritUsageError, match="data_at"):
            layout(x, data_at=bad)
