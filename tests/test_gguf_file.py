"""grit.io.gguf_file.read_gguf against gguf-py's GGUFReader (the oracle), on
files gguf-py's own GGUFWriter writes: every KV value type (nested arrays,
a 262,144-entry string vocabulary, boundary values), a tensor of every ggml
type gguf-py knows, versions 2 and 3, both byte orders.  Then hostile files
(a KV array of length 2^62) and files cut or edited after writing: every
defect is a problem naming its tensor, never a traceback, and grit scan /
grit.load report it per tensor."""
from __future__ import annotations

import json
import math
import struct
import time
import tracemalloc

import numpy as np
import pytest
from click.testing import CliRunner

import grit
from grit.cli import main
from grit.io import gguf_file as GF
from grit.io.gguf_file import read_gguf
from grit.io.problems import ProblemKind as K

gguf = pytest.importorskip("gguf")
VT = gguf.GGUFValueType
Q = gguf.GGMLQuantizationType

# ---------------------------------------------------------------------------
# files written by gguf-py

#: (key, value, type, sub type): every value type, with its boundary values
KVS = [
    ("t.u8", 255, VT.UINT8, None), ("t.i8", -128, VT.INT8, None),
    ("t.u16", 65535, VT.UINT16, None), ("t.i16", -32768, VT.INT16, None),
    ("t.u32", 2**32 - 1, VT.UINT32, None), ("t.i32", -2**31, VT.INT32, None),
    ("t.u64", 2**64 - 1, VT.UINT64, None), ("t.i64", -2**63, VT.INT64, None),
    ("t.f32", -0.0, VT.FLOAT32, None), ("t.f32b", 3.4028234663852886e38, VT.FLOAT32, None),
    ("t.f64", 5e-324, VT.FLOAT64, None), ("t.bool0", False, VT.BOOL, None),
    ("t.bool1", True, VT.BOOL, None), ("t.str", "grüße, 世界 \x00 end", VT.STRING, None),
    ("t.empty_str", "", VT.STRING, None),
    ("t.a_u8", [0, 1, 255], VT.ARRAY, VT.UINT8), ("t.a_i64", [-2**63, 0, 2**63 - 1], VT.ARRAY,
                                                  VT.INT64),
    ("t.a_f32", [1.5, -0.0, float("inf")], VT.ARRAY, VT.FLOAT32),
    ("t.a_f64", [math.pi, -1e308], VT.ARRAY, VT.FLOAT64),
    ("t.a_bool", [True, False, True], VT.ARRAY, VT.BOOL),
    ("t.a_str", ["", "a", "ß" * 300], VT.ARRAY, VT.STRING),
    ("t.nested", [[1, 2], [3, 4, 5]], VT.ARRAY, VT.ARRAY),
    ("t.nested_str", [["a", "bc"], ["d"]], VT.ARRAY, VT.ARRAY),
    ("general.alignment", 64, VT.UINT32, None),
]
VOCAB = 262_144
#: ggml types whose block size gguf-py's table gives differently from ggml's
#: (tests/test_ggml_types.py): Q8_1 is 2 halves + 32 codes in ggml, 2 floats
#: + 32 codes in gguf-py; a file of it is read as ggml sizes it
GGUF_PY_DRIFT = {9}


def _vocab(n: int = VOCAB) -> list[str]:
    return [f"▁tok{i}" if i % 7 else f"<unused{i}>" for i in range(n)]


def _every_type() -> list[tuple[str, int, bytes, tuple[int, ...]]]:
    """(name, ggml type, bytes, numpy byte shape) for every type gguf-py knows:
    two rows of two blocks each, random bytes (the walker reads no values)."""
    rng = np.random.default_rng(7)
    out = []
    for t, (block, size) in sorted(gguf.GGML_QUANT_SIZES.items(), key=lambda kv: int(kv[0])):
        if int(t) in GGUF_PY_DRIFT:      # gguf-py and ggml size it differently
            continue
        shape = (2, 2 * size)
        out.append((f"blk.{int(t)}.{t.name.lower()}.weight", int(t),
                    rng.integers(0, 256, shape, np.uint8).tobytes(), shape))
    return out


def write(path, kvs=KVS, tensors=None, *, big=False, version=3, vocab=0):
    """A GGUF written by gguf-py's GGUFWriter; ``version`` 2 rewrites the
    header word (v2 and v3 share the layout)."""
    w = gguf.GGUFWriter(str(path), "llama",
                        endianess=gguf.GGUFEndian.BIG if big else gguf.GGUFEndian.LITTLE)
    for k, v, vt, st in kvs:
        if k == "general.alignment":
            w.add_custom_alignment(v)        # the writer pads to it too
        else:
            w.add_key_value(k, v, vt, sub_type=st)
    if vocab:
        w.add_token_list(_vocab(vocab))
    for name, typ, blob, shape in (_every_type() if tensors is None else tensors):
        w.add_tensor(name, np.frombuffer(blob, np.uint8).reshape(shape), raw_shape=None,
                     raw_dtype=Q(typ))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if version != 3:
        with open(path, "r+b") as f:
            f.seek(4)
            f.write(struct.pack(">I" if big else "<I", version))
    return path


def _flat(v):
    return [y for x in v for y in _flat(x)] if isinstance(v, list) else [v]


def _bits(v):
    """A value with floats as their binary64 bit patterns (so -0.0 != 0.0, nan == nan)."""
    if isinstance(v, list):
        return [_bits(x) for x in v]
    if isinstance(v, float):
        return ("f", struct.pack("<d", v))
    if isinstance(v, (np.floating,)):
        return ("f", struct.pack("<d", float(v)))
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def _agree(path):
    """Every KV entry and tensor info read_gguf returns equals GGUFReader's."""
    f = read_gguf(path)
    r = gguf.GGUFReader(str(path), "r")
    assert f.parsed and not f.problems, f.problems
    assert f.version == r.fields["GGUF.version"].contents()
    assert f.order == ("<" if r.byte_order == "I" else ">")
    theirs = {k: v for k, v in r.fields.items() if not k.startswith("GGUF.")}
    assert list(f.fields) == list(theirs)                     # same keys, same order
    for k, rf in theirs.items():
        ours = f.fields[k]
        assert ours.type == rf.types[0], k
        if ours.type == VT.ARRAY:
            assert ours.item_type == rf.types[1], k
            if ours.item_type != VT.ARRAY:        # gguf-py flattens nested arrays
                assert ours.count == len(rf.data), k
        # the value starts after the key (u64 length, bytes) and the u32 type
        assert ours.offset == rf.offset + 8 + len(k.encode()) + 4, k
        v = ours.value()
        # gguf-py flattens nested arrays in contents(); compare flattened there
        assert _bits(_flat(v) if ours.type == VT.ARRAY else v) == \
            _bits(_flat(rf.contents()) if ours.type == VT.ARRAY else rf.contents()), k
        if ours.type in (VT.FLOAT32, VT.FLOAT64):
            assert type(v) is float
        elif ours.type == VT.BOOL:
            assert type(v) is bool
    assert f.data_start == r.data_offset
    assert f.alignment == r.alignment
    assert [t.name for t in f.tensors] == [t.name for t in r.tensors]
    for ours, rt in zip(f.tensors, r.tensors):
        assert ours.type_id == int(rt.tensor_type), ours.name
        assert ours.ggml_type == rt.tensor_type.name
        assert list(ours.dims) == [int(x) for x in rt.shape], ours.name
        assert ours.numel == rt.n_elements
        assert ours.nbytes == rt.n_bytes
        assert f.data_start + ours.offset == rt.data_offset
        assert f.data(ours).tobytes() == bytes(rt.data.reshape(-1).view(np.uint8))
    return f, r


@pytest.mark.parametrize("big", [False, True], ids=["le", "be"])
@pytest.mark.parametrize("version", [2, 3])
def test_every_kv_type_and_ggml_type_agrees_with_gguf_py(tmp_path, big, version):
    f, _ = _agree(write(tmp_path / "m.gguf", big=big, version=version))
    # the values as written, independently of either reader
    want = {k: v for k, v, _, _ in KVS}
    for k, v in want.items():
        assert _bits(f.value(k)) == _bits(v), k
    assert f.alignment == 64 and f.data_start % 64 == 0
    assert {t.type_id for t in f.tensors} == {int(t) for t in gguf.GGML_QUANT_SIZES} - \
        GGUF_PY_DRIFT


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    return write(tmp_path_factory.mktemp("vocab") / "v.gguf", tensors=_every_type()[:3],
                 vocab=VOCAB)


def test_a_262k_token_vocabulary_agrees_and_is_not_decoded_at_open(vocab_file, monkeypatch):
    p = vocab_file
    _agree(p)
    # opening decodes no string or array value (general.alignment, a scalar,
    # it must read): the vocabulary is stepped over by its lengths
    real = GF._decode

    def no_arrays(c, vt):
        if vt in (VT.STRING, VT.ARRAY):
            pytest.fail("a KV string or array was decoded at open")
        return real(c, vt)

    monkeypatch.setattr(GF, "_decode", no_arrays)
    f = read_gguf(p)
    tok = f.fields["tokenizer.ggml.tokens"]
    assert (tok.type, tok.item_type, tok.count) == (VT.ARRAY, VT.STRING, VOCAB)
    monkeypatch.undo()
    assert tok.value() == _vocab()


def test_opening_holds_no_copy_of_the_vocabulary(vocab_file):
    p = vocab_file
    size = p.stat().st_size
    tracemalloc.start()
    f = read_gguf(p)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert f.parsed and size > 4_000_000
    assert peak < 200_000, peak     # the file is mapped, not read; a few records are built


# ---------------------------------------------------------------------------
# hostile headers: bounded before anything is allocated

def _head(n_tensors=0, n_kv=1, order="<"):
    return b"GGUF" + struct.pack(order + "IQQ", 3, n_tensors, n_kv)


def _s(b: bytes, order="<") -> bytes:
    return struct.pack(order + "Q", len(b)) + b


HOSTILE = {
    # the 49-byte file of the issue: one KV, an array of 2^62 UINT8
    "array 2^62": _head() + _s(b"k") + struct.pack("<IIQ", VT.ARRAY, VT.UINT8, 2**62),
    "array 2^64-1 of strings": _head() + _s(b"k") + struct.pack("<IIQ", VT.ARRAY, VT.STRING,
                                                                2**64 - 1),
    "nested array 2^62": _head() + _s(b"k") + struct.pack("<IIQIQ", VT.ARRAY, VT.ARRAY, 1,
                                                          VT.UINT64, 2**62),
    "string 2^63": _head() + _s(b"k") + struct.pack("<IQ", VT.STRING, 2**63),
    "key 2^64-1": _head() + struct.pack("<Q", 2**64 - 1) + b"k" * 16,
    "n_kv 2^63": _head(n_kv=2**63) + b"\0" * 32,
    "n_tensors 2^63": _head(n_tensors=2**63, n_kv=0) + b"\0" * 32,
    "n_dims 2^32-1": _head(n_tensors=1, n_kv=0) + _s(b"t") + struct.pack("<I", 2**32 - 1)
    + b"\0" * 24,
    "arrays nest 100 deep": _head() + _s(b"k") + struct.pack("<I", VT.ARRAY)
    + struct.pack("<IQ", VT.ARRAY, 1) * 100 + struct.pack("<IQ", VT.UINT8, 0),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_lying_counts_cost_neither_memory_nor_time(tmp_path, name):
    p = tmp_path / "h.gguf"
    p.write_bytes(HOSTILE[name])
    if name == "array 2^62":
        assert p.stat().st_size == 49
    tracemalloc.start()
    t0 = time.perf_counter()
    f = read_gguf(p)
    dt = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert [q.kind for q in f.problems] == [K.UNREADABLE]
    assert peak < 100_000, peak
    assert dt < 1.0          # generous: a loop over the count would take hours
    with pytest.raises(grit.GritUsageError, match="not a readable GGUF file"):
        grit.load(p)


def scan_json(path):
    r = CliRunner().invoke(main, ["scan", "--json", str(path)])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert "Traceback" not in r.output
    return r.exit_code, json.loads(r.output)


def test_the_2_62_array_is_a_scan_finding(tmp_path):
    p = tmp_path / "h.gguf"
    p.write_bytes(HOSTILE["array 2^62"])
    rc, doc = scan_json(p)
    (f,) = doc["findings"]
    # the file's own finding (severity 4 because no input parsed at all)
    assert f["code"] == "S805" and rc == 4
    assert "count = 4611686018427387904" in f["message"]


# ---------------------------------------------------------------------------
# files cut or edited after gguf-py wrote them: a problem per tensor

def _layout_file(tmp_path):
    """Four tensors: a 12-byte F32 (its 32-byte slot has room), two Q8_0 of
    equal size (136 bytes each), a 16-byte F16."""
    rng = np.random.default_rng(3)

    def q8():
        return b"".join(np.float16(0.5).tobytes() + rng.integers(-127, 128, 32, np.int8).tobytes()
                        for _ in range(4))

    tensors = [("norm", int(Q.F32), np.float32([1, 2, 3]).tobytes(), (1, 12)),
               ("blk.0.w", int(Q.Q8_0), q8(), (2, 68)),
               ("blk.1.w", int(Q.Q8_0), q8(), (2, 68)),
               ("out", int(Q.F16), np.float16(np.arange(8)).tobytes(), (1, 16))]
    return write(tmp_path / "m.gguf", kvs=[], tensors=tensors)


def _where(path):
    """Per tensor, from GGUFReader on the intact file: (name, info start,
    position of its type field, position of its offset field, absolute data
    offset, byte count)."""
    r = gguf.GGUFReader(str(path), "r")
    out = []
    for t in r.tensors:
        f = t.field
        pos = [f.offset]
        for part in f.parts:
            pos.append(pos[-1] + part.nbytes)
        out.append((t.name, f.offset, pos[-3], pos[-2], int(t.data_offset), int(t.n_bytes)))
    return out, r.data_offset


def _poke(path, pos, fmt, value):
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(struct.pack(fmt, value))


def _by_kind(f):
    out: dict = {}
    for q in f.problems:
        out.setdefault(q.kind, []).append(q)
    return out


def _findings(doc):
    return sorted((x["code"], x["tensor"]) for x in doc["findings"])


def _container(doc):
    """The container findings: unreadable (S8xx) and GGUF placement (S14x)."""
    return [x for x in _findings(doc) if x[0][:2] == "S8" or x[0][:3] == "S14"]


def test_the_layout_file_is_clean(tmp_path):
    p = _layout_file(tmp_path)
    f, _ = _agree(p)
    assert len(f.tensors) == 4
    rc, doc = scan_json(p)
    assert not _container(doc)
    grit.load(p)


@pytest.mark.parametrize("cut", ["in the last", "in blk.0.w", "at the data start",
                                 "in the padding"])
def test_a_cut_in_the_data_names_each_tensor_and_its_missing_bytes(tmp_path, cut):
    p = _layout_file(tmp_path)
    where, data = _where(p)
    at = {"in the last": where[3][4] + 5, "in blk.0.w": where[1][4] + 100,
          "at the data start": data, "in the padding": data - 3}[cut]
    with open(p, "r+b") as fh:
        fh.truncate(at)
    avail = max(0, at - data)
    # which tensors, and how many of their bytes, from gguf-py's offsets
    want = {n: min(nb, off + nb - data - avail) for n, _, _, _, off, nb in where
            if off + nb > at}
    f = read_gguf(p)
    got = _by_kind(f)
    assert set(got) == {K.PAST_END}
    assert {q.tensor: dict(q.extra)["missing"] for q in got[K.PAST_END]} == want
    for q in got[K.PAST_END]:
        assert f"({want[q.tensor]} of them missing)" in q.message
    assert [t.name for t in f.tensors] == [n for n, *_ in where if n not in want]
    rc, doc = scan_json(p)
    assert rc != 4
    assert [x for x in _findings(doc) if x[0] == "S807"] == sorted(("S807", n) for n in want)
    first = next(n for n, *_ in where if n in want)
    with pytest.raises(grit.GritError, match=first.replace(".", r"\.")):
        grit.load(p)


@pytest.mark.parametrize("k", [0, 2, 3])
def test_a_cut_in_the_tensor_infos_says_which_info(tmp_path, k):
    p = _layout_file(tmp_path)
    where, _ = _where(p)
    with open(p, "r+b") as fh:
        fh.truncate(where[k][1] + 11)          # inside info k's name
    f = read_gguf(p)
    (q,) = f.problems
    assert q.kind is K.UNREADABLE
    assert f"tensor info {k} of 4: {k} read" in q.message
    assert f"{4 - k} and the data section missing" in q.message
    if k:
        assert f"(the last whole one: {where[k - 1][0]!r})" in q.message
    rc, doc = scan_json(p)
    assert _findings(doc) == [("S805", None)] and f"tensor info {k} of 4" in \
        doc["findings"][0]["message"]
    with pytest.raises(grit.GritUsageError, match=f"tensor info {k} of 4"):
        grit.load(p)


def test_overlapping_tensors_name_both_and_the_shared_bytes(tmp_path):
    p = _layout_file(tmp_path)
    where, data = _where(p)
    # blk.1.w's offset pointed 32 bytes (aligned) into blk.0.w's 136
    rel0 = where[1][4] - data
    _poke(p, where[2][3], "<Q", rel0 + 32)
    f = read_gguf(p)
    got = _by_kind(f)
    # the tensor whose span runs into the other is named, with what it needs
    # and the room it has
    (q,) = got[K.OVERLAP]
    assert q.tensor == "blk.0.w" and dict(q.extra) == {
        "other": "blk.1.w", "shared": where[1][5] - 32, "needs": where[1][5], "room": 32}
    assert f"needs {where[1][5]} bytes from data offset {rel0}, but tensor 'blk.1.w' begins 32 " \
           "bytes after it: 104 bytes are shared" in q.message
    # out stays where it was, 32 bytes past the end of blk.1.w's moved slot:
    # the offset rule names it; nothing else is named
    assert {x.tensor for qs in got.values() for x in qs} == {"blk.0.w", "out"}
    assert [x.tensor for x in got.get(K.OFFSET, [])] == ["out"]
    rc, doc = scan_json(p)
    assert ("S141", "blk.0.w") in _findings(doc) and rc != 4
    with pytest.raises(grit.GritUsageError, match=r"blk\.0\.w.*blk\.1\.w.*104 bytes are shared"):
        grit.load(p)


def test_offsets_out_of_order_are_named_per_tensor(tmp_path):
    p = _layout_file(tmp_path)
    where, data = _where(p)
    a, b = where[1][4] - data, where[2][4] - data
    _poke(p, where[1][3], "<Q", b)
    _poke(p, where[2][3], "<Q", a)             # the two equal-size Q8_0 swapped
    f = read_gguf(p)
    got = _by_kind(f)
    assert set(got) == {K.OFFSET}
    assert [(q.tensor, q.expected, q.actual) for q in got[K.OFFSET]] == \
        [("blk.0.w", a, b), ("blk.1.w", b + 136 + (-136 % 32), a)]
    # gguf-py reads the swapped file without complaint; grit reads the bytes as placed
    r = gguf.GGUFReader(str(p), "r")
    assert {t.name: int(t.data_offset) - data for t in r.tensors}["blk.0.w"] == b
    rc, doc = scan_json(p)
    assert [x for x in _findings(doc) if x[0] == "S143"] == [("S143", "blk.0.w"),
                                                             ("S143", "blk.1.w")]
    with pytest.raises(grit.GritUsageError, match=r"blk\.0\.w.*ggml requires"):
        grit.load(p)


def test_a_gap_names_only_the_tensor_after_it(tmp_path):
    p = _layout_file(tmp_path)
    where, data = _where(p)
    # out moved 32 bytes on, into bytes the file still has (the F16 is 16 of them)
    with open(p, "ab") as fh:
        fh.write(b"\0" * 32)
    _poke(p, where[3][3], "<Q", where[3][4] - data + 32)
    got = _by_kind(read_gguf(p))
    assert [(q.kind, q.tensor) for qs in got.values() for q in qs] == [(K.OFFSET, "out")]


def test_a_misaligned_offset_is_named_alone(tmp_path):
    p = _layout_file(tmp_path)
    where, data = _where(p)
    _poke(p, where[0][3], "<Q", where[0][4] - data + 4)   # 12 bytes in a 32-byte slot
    got = _by_kind(read_gguf(p))
    assert [(q.kind, q.tensor) for qs in got.values() for q in qs] == [(K.MISALIGNED, "norm")]
    (q,) = got[K.MISALIGNED]
    assert "not a multiple of the file's alignment 32" in q.message
    rc, doc = scan_json(p)
    assert _container(doc) == [("S142", "norm")]
    with pytest.raises(grit.GritUsageError, match="'norm'"):
        grit.load(p)


def test_an_unknown_type_is_reported_alone_and_the_rest_is_checked(tmp_path):
    p = _layout_file(tmp_path)
    where, _ = _where(p)
    _poke(p, where[1][2], "<I", 9999)
    f = read_gguf(p)
    assert [(q.kind, q.tensor) for q in f.problems] == [(K.BAD_TENSOR, "blk.0.w")]
    assert "unknown ggml type 9999" in f.problems[0].message
    assert [t.name for t in f.tensors] == ["norm", "blk.1.w", "out"]
    rc, doc = scan_json(p)
    assert _container(doc) == [("S806", "blk.0.w")]
    assert doc["files"][0]["tensors"] == 4 and rc != 4
    with pytest.raises(grit.GritUsageError, match=r"blk\.0\.w.*9999"):
        grit.load(p)
    # and after it a defect of the next tensor is still found
    _poke(p, where[2][3], "<Q", where[2][4] - where[0][4] + 8)
    got = _by_kind(read_gguf(p))
    assert [q.tensor for q in got[K.MISALIGNED]] == ["blk.1.w"]


def test_a_lying_n_tensors_over_gigabytes_of_zeros_is_bounded(tmp_path):
    # zero bytes read as valid empty tensor infos (24 bytes each): a walk that
    # trusted n_tensors would build 44 million of them from this sparse file
    p = tmp_path / "z.gguf"
    with open(p, "wb") as fh:
        fh.write(_head(n_tensors=2**62, n_kv=0))
        fh.truncate(2**30)
    tracemalloc.start()
    f = read_gguf(p)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    (q,) = f.problems
    assert q.kind is K.UNREADABLE and f"n_tensors = {2**62}" in q.message
    assert f"hold at most {(2**30 - 24) // GF.MIN_INFO}" in q.message
    assert peak < 1_000_000, peak     # no info is kept while the walk looks for the cut
