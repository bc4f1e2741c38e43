"""One reader per container: ``grit.io.safetensors.read`` and
``grit.io.gguf.read`` return what they parsed plus every problem (typed
values), ``grit.load`` raises the first, ``grit scan`` reports them all; the
GGUF walker checks every count and length before using it; one dtype table."""
from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

import grit
from grit.io import gguf as G
from grit.io import safetensors as ST
from grit.dtypes import LOADABLE, ST_DTYPES, st_dtype_of
from grit.io.gguf_file import read_gguf
from grit.io.problems import Problem, ProblemKind as K
from grit.io.recognise import ST_DTYPE_BYTES
from grit.scan import scan

F32, Q8_0, I8, BAD_TYPE = 0, 8, 24, 200
U32, STRING, ARRAY, U64 = 4, 8, 9, 10


# ---------------------------------------------------------------------------
# a byte-level GGUF writer, either byte order


def _gguf(kvs, tensors, *, order="<", n_kv=None, n_tensors=None, align=32) -> bytes:
    """kvs: [(key, value)] with str -> STRING, int -> UINT32, list[int] ->
    ARRAY of UINT64, ("raw", type, bytes) as is; tensors: [(name, ne, type,
    data, offset or None)]."""
    def s(b):
        b = b.encode() if isinstance(b, str) else b
        return struct.pack(order + "Q", len(b)) + b

    kv = b""
    for k, v in kvs:
        if isinstance(v, tuple):
            kv += s(k) + struct.pack(order + "I", v[1]) + v[2]
        elif isinstance(v, str):
            kv += s(k) + struct.pack(order + "I", STRING) + s(v)
        elif isinstance(v, int):
            kv += s(k) + struct.pack(order + "II", U32, v)
        else:
            kv += (s(k) + struct.pack(order + "IIQ", ARRAY, U64, len(v))
                   + b"".join(struct.pack(order + "Q", x) for x in v))
    data, infos = b"", b""
    for name, ne, typ, blob, off in tensors:
        data += b"\0" * (-len(data) % align)
        o = len(data) if off is None else off
        data += blob
        infos += (s(name) + struct.pack(order + "I", len(ne))
                  + b"".join(struct.pack(order + "Q", x) for x in ne)
                  + struct.pack(order + "IQ", typ, o))
    head = b"GGUF" + struct.pack(order + "IQQ", 3, len(tensors) if n_tensors is None
                                 else n_tensors, len(kvs) if n_kv is None else n_kv)
    body = head + kv + infos
    return body + b"\0" * (-len(body) % align) + data


def _q8_0(n_blocks: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    return b"".join(np.float16(0.01).tobytes() + rng.integers(-127, 128, 32, np.int8).tobytes()
                    for _ in range(n_blocks))


def _f32(values, order="<") -> bytes:
    return np.asarray(values, np.dtype(np.float32).newbyteorder(order)).tobytes()


# ---------------------------------------------------------------------------
# the dtype table


def test_one_dtype_table():
    assert ST_DTYPE_BYTES == {n: d.itemsize for n, d in ST_DTYPES.items()
                              if d.itemsize is not None}
    assert ST_DTYPES["F4"].itemsize is None and ST_DTYPES["F4"].nbytes(3) == 2
    assert ST_DTYPES["F6_E2M3"].nbytes(4) == 3
    assert set(LOADABLE) == {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U64",
                             "U32", "U16", "U8", "BOOL", "F8_E4M3", "F8_E5M2"}
    for name in LOADABLE:
        d = ST_DTYPES[name]
        dt = d.np_dtype()
        if dt is not None:
            assert dt.itemsize == d.itemsize and st_dtype_of(dt) == name
    assert st_dtype_of(np.dtype(">f4")) == "F32" and st_dtype_of(np.dtype("U3")) is None


def test_every_loadable_dtype_round_trips(tmp_path):
    pytest.importorskip("ml_dtypes")
    arrays = {n: np.arange(6, dtype=np.float64).astype(ST_DTYPES[n].np_dtype()).reshape(2, 3)
              for n in LOADABLE}
    p = tmp_path / "all.safetensors"
    grit.save(p, arrays)
    got = grit.load(p)
    for n, x in arrays.items():
        assert got[n].dtype == x.dtype and np.array_equal(got[n], x), n


# ---------------------------------------------------------------------------
# safetensors: every problem, the first raised


def _st(path, header: dict, data: bytes) -> None:
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


def test_safetensors_reader_reports_every_problem(tmp_path):
    p = tmp_path / "m.safetensors"
    _st(p, {"__metadata__": {"k": 3},
            "a": {"dtype": "FLOAT99", "shape": [4], "data_offsets": [0, 16]},
            "b": {"dtype": "F32", "shape": [-1], "data_offsets": [16, 20]},
            "c": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]},
            "d": {"dtype": "F32", "shape": [4], "data_offsets": [24, 64], "x": 1},
            "e": [1]}, bytes(40))
    f = ST.read(p)
    assert f.parsed and f.buffer is not None
    kinds = [(q.kind, q.tensor) for q in f.problems]
    assert kinds == [(K.BAD_METADATA, None), (K.BAD_DTYPE, "a"), (K.BAD_SHAPE, "b"),
                     (K.BAD_ENTRY, "d"), (K.BAD_ENTRY, "e"), (K.SIZE, "d"),
                     (K.OVERLAP, "c"), (K.OVERLAP, "b"), (K.PAST_END, "d")]
    past = f.problems[-1]
    assert (past.field, past.expected, past.actual) == ("data_offsets", 64, 40)
    assert past.facts() == {"field": "data_offsets", "expected": 64, "actual": 40}
    assert f.entries["a"].dtype is None and f.entries["b"].shape is None
    assert f.on_disk("d") == 16 and len(f.view("d")) == 16 and f.view("nope") == b""
    with pytest.raises(ST.GritFileError) as e:
        grit.load(p)
    assert str(e.value) == f"{p}: not a valid safetensors file: {f.problems[0].message}"
    code = {x.code for x in scan([str(p)]).findings}
    assert code == {"S128", "S122", "S123", "S121", "S125", "S126", "S127"}


def test_safetensors_unreadable_header_is_one_problem(tmp_path):
    p = tmp_path / "m.safetensors"
    p.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    f = ST.read(p)
    assert not f.parsed and [q.kind for q in f.problems] == [K.UNREADABLE]
    assert f.entries == {} and f.buffer is None
    assert isinstance(f.problems[0], Problem) and "header length" in f.problems[0].message


def test_grit_doc_problems_are_typed(tmp_path):
    a = grit.encode(np.ones((2, 32), np.float32), grit.GRADE_MXFP4)
    p = tmp_path / "g.safetensors"
    grit.save(p, {"w": a})
    raw = p.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    doc = json.loads(h["__metadata__"]["__grit__"])
    doc["tensors"]["w"]["planes"]["aux"] = "missing"
    doc["tensors"]["v"] = {"desc": "zz", "shape": [2], "planes": {}}
    doc["grades"].append("grit1(nope)")
    h["__metadata__"]["__grit__"] = json.dumps(doc)
    _st(p, h, raw[8 + n:])
    f = ST.read(p)
    kinds = [(q.kind, q.tensor) for q in f.problems]
    assert (K.BAD_GRADE, None) in kinds and (K.BAD_DESCRIPTOR, "v") in kinds
    assert (K.BAD_ANNOTATION, "w") in kinds
    assert f.doc.convention == "grit-safetensors/1" and f.doc.declared == ["w", "v"]
    assert list(f.doc.tensors) == ["w"] and f.doc.claimed["w.grit.data"] == "w"
    with pytest.raises(ST.GritFileError):
        grit.load(p)


# ---------------------------------------------------------------------------
# GGUF: the walker


def _plain_gguf(order="<", **kw) -> bytes:
    return _gguf([("general.architecture", "llama"), ("general.file_type", 7),
                  ("tok", ("raw", ARRAY, struct.pack(order + "IQ", STRING, 2)
                           + struct.pack(order + "Q", 1) + b"a"
                           + struct.pack(order + "Q", 2) + b"bc"))],
                 [("blk.0.ffn_up.weight", [32, 2], Q8_0, _q8_0(2), None),
                  ("norm", [4], F32, _f32([1, 2, 3, 4], order), None)], order=order, **kw)


@pytest.mark.parametrize("order", ["<", ">"])
def test_gguf_walk_either_byte_order(tmp_path, order):
    p = tmp_path / "m.gguf"
    p.write_bytes(_plain_gguf(order))
    f = read_gguf(p)
    assert f.parsed and f.problems == [] and f.order == order and f.version == 3
    assert f.value("general.file_type") == 7 and f.value("tok") == ["a", "bc"]
    assert f.value("absent", "x") == "x"
    assert [(t.name, t.ggml_type, t.shape) for t in f.tensors] == [
        ("blk.0.ffn_up.weight", "Q8_0", (2, 32)), ("norm", "F32", (4,))]
    got = grit.load(p)
    assert np.array_equal(got["norm"], [1, 2, 3, 4]) and not got["norm"].flags.writeable
    assert isinstance(got["blk.0.ffn_up.weight"], grit.GritArray)


@pytest.mark.parametrize("name, mutate, words", [
    ("huge n_kv", dict(n_kv=1 << 62), ["n_kv", "hold at most"]),
    ("huge n_tensors", dict(n_tensors=1 << 62), ["n_tensors", "hold at most"]),
])
def test_gguf_counts_are_checked_before_use(tmp_path, name, mutate, words):
    p = tmp_path / "m.gguf"
    p.write_bytes(_plain_gguf(**mutate))
    f = read_gguf(p)
    assert [q.kind for q in f.problems] == [K.UNREADABLE], name
    assert all(w in f.problems[0].message for w in words), f.problems[0].message
    with pytest.raises(grit.GritUsageError, match="not a readable GGUF file"):
        grit.load(p)


@pytest.mark.parametrize("value, words", [
    (("raw", STRING, struct.pack("<Q", 1 << 60) + b"x"), ["length", "hold at most"]),
    (("raw", ARRAY, struct.pack("<IQ", STRING, 3) + struct.pack("<Q", 1) + b"a"
      + struct.pack("<Q", 99)), ["item 1 length = 99"]),
    (("raw", ARRAY, struct.pack("<IQ", U64, 1 << 59)), ["count", "hold at most"]),
    (("raw", 77, b"\0" * 8), ["unknown value type 77"]),
    (("raw", ARRAY, struct.pack("<IQ", ARRAY, 1) * 12 + struct.pack("<IQ", U32, 0)),
     ["nest more than"]),
])
def test_gguf_lengths_and_types_are_checked(tmp_path, value, words):
    p = tmp_path / "m.gguf"
    p.write_bytes(_gguf([("k", value)], [("norm", [4], F32, _f32([1, 2, 3, 4]), None)]))
    f = read_gguf(p)
    assert [q.kind for q in f.problems] == [K.UNREADABLE]
    assert all(w in f.problems[0].message for w in words), f.problems[0].message


def test_gguf_bad_tensors_do_not_hide_the_others(tmp_path):
    p = tmp_path / "m.gguf"
    p.write_bytes(_gguf([("general.architecture", "llama")],
                        [("ok", [32, 2], Q8_0, _q8_0(2), None),
                         ("unknown", [4], BAD_TYPE, b"\0" * 16, None),
                         ("odd", [33], Q8_0, _q8_0(1), None),
                         ("far", [4], F32, b"", 1 << 40)]))
    got = G.read(p)
    assert got.parsed and list(got.tensors) == ["ok"]
    assert [(q.kind, q.tensor) for q in got.problems] == [
        (K.BAD_TENSOR, "unknown"), (K.BAD_TENSOR, "odd"), (K.PAST_END, "far")]
    with pytest.raises(grit.GritUsageError, match="unknown ggml type 200"):
        grit.load(p)
    rep = scan([str(p)])
    codes = sorted((f.code, f.tensor) for f in rep.findings)
    assert codes == [("S602", "ok"), ("S806", "odd"), ("S806", "unknown"), ("S807", "far")]
    assert rep.files[0].parsed and rep.files[0].tensors == 4 and rep.exit_code_graded == 1


def test_gguf_bad_annotation_reads_the_tensor_as_its_type(tmp_path):
    p = tmp_path / "m.gguf"
    p.write_bytes(_gguf([("grit.desc.norm", "zz"), ("grit.desc.ghost", "00" * 64)],
                        [("norm", [4], F32, _f32([1, 2, 3, 4]), None)]))
    got = G.read(p)
    assert [(q.kind, q.tensor) for q in got.problems] == [
        (K.BAD_DESCRIPTOR, "norm"), (K.BAD_ANNOTATION, "ghost")]
    assert isinstance(got.tensors["norm"], np.ndarray) and got.annotated == {"ghost"}
    with pytest.raises(grit.GritUsageError, match="grit.desc.norm"):
        grit.load(p)
    codes = sorted(f.code for f in scan([str(p)]).findings)
    assert codes == ["S111", "S116"]


def test_scan_opens_a_gguf_file_once(tmp_path, monkeypatch):
    p = tmp_path / "m.gguf"
    p.write_bytes(_plain_gguf())
    opened: list[int] = []
    real_open = os.open          # every file grit reads is opened by grit._files.open_regular

    def counting(file, flags, *a, **kw):
        if os.fspath(file) == str(p):
            opened.append(flags)
        return real_open(file, flags, *a, **kw)

    calls = []
    monkeypatch.setattr(os, "open", counting)
    monkeypatch.setattr(G, "read_gguf", lambda path, _r=G.read_gguf: calls.append(path)
                        or _r(path))
    rep = scan([str(p)], deep=True)
    assert rep.files[0].parsed and len(calls) == 1
    assert len(opened) == 2       # the 9-byte sniff, then the reader (one map)
    assert {f.code for f in rep.findings} == {"S602"}


def _gguf_with_unknown_types(path, n: int) -> None:
    """A GGUF v3 file of ``n`` one-element tensor infos of ggml type 9999."""
    import struct as S
    out = [b"GGUF", S.pack("<IQQ", 3, n, 0)]
    for i in range(n):
        name = f"t{i}".encode()
        out.append(S.pack("<Q", len(name)) + name + S.pack("<IQIQ", 1, 1, 9999, 0))
    body = b"".join(out)
    body += b"\0" * (-len(body) % 32)
    path.write_bytes(body)


def test_gguf_problems_are_capped_per_kind(tmp_path):
    from grit.io.gguf import read
    from grit.io.problems import MAX_PER_KIND
    from grit.scan import scan
    p = tmp_path / "u.gguf"
    _gguf_with_unknown_types(p, 150)
    got = read(str(p))
    bad = [q for q in got.problems if q.kind is K.BAD_TENSOR]
    assert len(bad) == MAX_PER_KIND and bad[-1].omitted == 130
    assert "'t0'" in bad[0].message and "9999" in bad[0].message
    with pytest.raises(grit.GritError, match="'t0'"):
        grit.load(str(p))
    rep = scan([str(p)])
    fs = [f for f in rep.findings if f.code == "S806"]
    # the report is sorted by tensor name: the one carrying the count is t19,
    # the last listed in file order
    assert len(fs) == 20 and [(f.tensor, f.omitted) for f in fs if f.omitted] == [("t19", 130)]
    assert rep.files[0].tensors == 150
