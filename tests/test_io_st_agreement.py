"""#12 item 6: one reader per safetensors file, so that ``grit scan`` is clean
only where ``grit.load`` succeeds, and both refuse what the official
safetensors library refuses.

Each case is built from a file written by ``grit.save`` (or by hand for a
plain header) with one defect from the issue's list.  The expected refusal
and finding code come from the safetensors format text (its README: "The
header data MUST begin with a { character", "Duplicate keys are disallowed",
"all values must be strings", "The byte buffer needs to be entirely indexed,
and cannot contain holes") and docs/file-format.md for ``__grit__``; where
the official library refuses, the test also asserts that it does.
"""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import grit
from grit.scan import Severity, scan

st_numpy = pytest.importorskip("safetensors.numpy")

F4 = struct.pack("<f", 1.0)
ENT = '"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'


def _raw(path, header_text: str, data: bytes, pad: bool = True) -> str:
    hb = header_text.encode()
    if pad:
        hb += b" " * (-len(hb) % 8)
    path.write_bytes(struct.pack("<Q", len(hb)) + hb + data)
    return str(path)


def _peer_refuses(p: str) -> bool:
    try:
        st_numpy.load_file(p)
    except Exception:          # the peer's own error type (SafetensorError) or any other
        return True
    return False


def _codes(p: str) -> set[str]:
    return {f.code for f in scan([p]).findings if f.severity is not Severity.WARNING}


def _refused(p: str, code: str) -> None:
    with pytest.raises(grit.GritError):
        grit.load(p)
    codes = _codes(p)
    assert code in codes, codes


# ---------------------------------------------------------------------------
# the container: plain headers


@pytest.mark.parametrize("name, header, data, code, peer", [
    # a header starting with a space (or a newline) is not a safetensors header
    ("lead_space", " {" + ENT + "}", F4, "S805", None),
    ("lead_newline", "\n{" + ENT + "}", F4, "S805", None),
    # duplicate JSON keys: at the top level (the peer keeps one silently), in an entry
    ("dup_tensor", "{" + ENT + "," + ENT + "}", F4, "S805", None),
    ("dup_field", '{"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
     F4, "S805", True),
    ("dup_metadata", '{"__metadata__":{"x":"1","x":"2"},' + ENT + "}", F4, "S805", None),
    # __metadata__ a list, values not strings
    ("meta_list", '{"__metadata__":[],' + ENT + "}", F4, "S805", True),
    ("meta_int_value", '{"__metadata__":{"x":1},' + ENT + "}", F4, "S128", True),
    ("meta_null_value", '{"__metadata__":{"x":null},' + ENT + "}", F4, "S128", True),
    ("meta_object_value", '{"__metadata__":{"x":{}},' + ENT + "}", F4, "S128", True),
    # extra keys in a tensor entry
    ("entry_extra_key", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"z":1}}',
     F4, "S121", None),
    # holes in the data buffer: a gap before a tensor, bytes after the last one
    ("gap", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', F4 + F4, "S129", True),
    ("tail", "{" + ENT + "}", F4 + F4, "S129", True),
    ("float_offset", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}}', F4, "S124",
     True),
    ("float_extent", '{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', F4, "S123",
     True),
])
def test_container_defects_are_refused_by_load_and_scan(tmp_path, name, header, data, code,
                                                        peer):
    p = _raw(tmp_path / f"{name}.safetensors", header, data)
    _refused(p, code)
    if peer is not None:
        assert _peer_refuses(p) is peer


@pytest.mark.parametrize("name, header, data", [
    ("plain", "{" + ENT + "}", F4),
    ("meta_null", '{"__metadata__":null,' + ENT + "}", F4),      # the peer's Option: absent
    ("unpadded", "{" + ENT + "}", F4),
    ("empty", "{}", b""),
    ("empty_tensor", '{"a":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},'
                     '"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', F4),
])
def test_what_the_peer_reads_loads_and_scans_clean(tmp_path, name, header, data):
    p = _raw(tmp_path / f"{name}.safetensors", header, data, pad=name != "unpadded")
    assert not _peer_refuses(p)
    got = grit.load(p)
    peer = st_numpy.load_file(p)
    assert set(got) == set(peer)
    for k in peer:
        assert np.array_equal(got[k], peer[k]) and got[k].dtype == peer[k].dtype
    assert _codes(p) == set()


def test_tail_refusal_names_the_bytes(tmp_path):
    p = _raw(tmp_path / "t.safetensors", "{" + ENT + "}", F4 + bytes(12))
    [f] = [f for f in scan([p]).findings if f.code == "S129"]
    assert "12 bytes after the last tensor (from byte 4)" in f.message
    with pytest.raises(grit.GritError, match="not entirely indexed"):
        grit.load(p)


# ---------------------------------------------------------------------------
# the __grit__ document


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    p = tmp_path_factory.mktemp("base") / "base.safetensors"
    grit.save(p, {"w": grit.encode(x, grit.GRADE_MXFP4)})
    raw = p.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    return header, raw[8 + n:], json.loads(header["__metadata__"]["__grit__"])


def _with(tmp_path, base, name, *, doc=None, doc_text=None, header=None):
    h, body, g = base
    h = json.loads(json.dumps(h))
    if header is not None:
        h = header(h)
    if doc is not None or doc_text is not None:
        h["__metadata__"]["__grit__"] = doc_text if doc_text is not None else json.dumps(doc)
    p = tmp_path / f"{name}.safetensors"
    return _raw(p, json.dumps(h), body)


def _t(base, **kw):
    g = json.loads(json.dumps(base[2]))
    t = g["tensors"]["w"]
    for k, v in kw.items():
        if v is _DROP:
            t.pop(k)
        else:
            t[k] = v
    return g


_DROP = object()


def test_the_base_file_is_clean(tmp_path, base):
    p = _with(tmp_path, base, "ok", doc=base[2])
    assert not _peer_refuses(p) and _codes(p) == set()
    grit.load(p)


@pytest.mark.parametrize("name, make, code", [
    ("doc_list", lambda g: {"doc_text": "[1]"}, "S116"),
    ("doc_null", lambda g: {"doc_text": "null"}, "S116"),
    ("doc_not_json", lambda g: {"doc_text": "{"}, "S115"),
    ("doc_dup_keys", lambda g: {"doc_text": '{"schema":"grit-safetensors","schema":"x"}'},
     "S115"),
    ("doc_unknown_key", lambda g: {"doc": {**g, "zz": 1}}, "S116"),
    ("doc_version_2", lambda g: {"doc": {**g, "version": 2}}, "S116"),
    ("doc_version_str", lambda g: {"doc": {**g, "version": "1"}}, "S116"),
    ("doc_version_true", lambda g: {"doc": {**g, "version": True}}, "S116"),
    ("doc_version_float", lambda g: {"doc": {**g, "version": 1.0}}, "S116"),
    ("doc_tensors_list", lambda g: {"doc": {**g, "tensors": []}}, "S116"),
    ("doc_grades_str", lambda g: {"doc": {**g, "grades": "x"}}, "S116"),
    ("doc_layouts_list", lambda g: {"doc": {**g, "layouts": []}}, "S116"),
    ("doc_schema_int", lambda g: {"doc": {**g, "schema": 5}}, "S116"),
    ("grades_int", lambda g: {"doc": {**g, "grades": [1]}}, "S112"),
    ("grades_unparsable", lambda g: {"doc": {**g, "grades": ["grit1(zz)"]}}, "S112"),
    ("entry_not_object", lambda g: {"doc": {**g, "tensors": {**g["tensors"], "v": 3}}},
     "S116"),
    ("entry_list", lambda g: {"doc": {**g, "tensors": {**g["tensors"], "v": []}}}, "S116"),
])
def test_malformed_grit_documents(tmp_path, base, name, make, code):
    p = _with(tmp_path, base, name, **make(base[2]))
    assert not _peer_refuses(p)          # the container is fine: only __grit__ is wrong
    _refused(p, code)


@pytest.mark.parametrize("name, fields, code", [
    ("extra_key", {"zz": 1}, "S116"),
    ("grade_unparsable", {"grade": "grit1(zz)"}, "S112"),
    ("grade_int", {"grade": 5}, "S112"),
    ("grade_other", {"grade": grit.GRADE_NVF4.canonical}, "S116"),
    ("gid_wrong", {"gid": "A" * 26}, "S116"),
    ("gid_lowercase", {"gid": None}, "S116"),      # filled in below
    ("gid_int", {"gid": 5}, "S116"),
    ("planes_list", {"planes": ["w.grit.data"]}, "S116"),
    ("planes_int", {"planes": {"data": 3}}, "S116"),
    ("planes_unknown_role", {"planes": {"data": "w.grit.data", "scale0": "w.grit.scale0",
                                        "zz": "w.grit.data"}}, "S116"),
    ("shape_str", {"shape": "x"}, "S111"),
    ("shape_bool", {"shape": [True, 32]}, "S111"),
    ("desc_missing", {"desc": _DROP}, "S111"),
    ("desc_short", {"desc": "4752"}, "S111"),
])
def test_malformed_grit_tensor_entries(tmp_path, base, name, fields, code):
    if name == "gid_lowercase":
        fields = {"gid": base[2]["tensors"]["w"]["gid"].lower()}
    p = _with(tmp_path, base, name, doc=_t(base, **fields))
    assert not _peer_refuses(p)
    _refused(p, code)


def test_the_recorded_gid_is_compared_by_scan_too(tmp_path, base):
    right = base[2]["tensors"]["w"]["gid"]
    p = _with(tmp_path, base, "gid", doc=_t(base, gid="0" * 26))
    [f] = [f for f in scan([p]).findings if f.code == "S116"]
    assert f.tensor == "w" and right in f.message
    assert f.detail["expected"] == right and f.detail["actual"] == "0" * 26


@pytest.mark.parametrize("dtype, shape", [("I8", None), ("F16", "half"), ("U8", "2d"),
                                          ("BOOL", None)])
def test_plane_tensors_must_be_u8_vectors(tmp_path, base, dtype, shape):
    def edit(h):
        e = h["w.grit.data"]
        n = e["data_offsets"][1] - e["data_offsets"][0]
        e["dtype"] = dtype
        e["shape"] = {"half": [n // 2], "2d": [1, n]}.get(shape, [n])
        return h
    p = _with(tmp_path, base, f"plane_{dtype}_{shape}", header=edit)
    _refused(p, "S116")


# ---------------------------------------------------------------------------
# found by the mutation fuzzer (scripts/fuzz_files.py)


def test_an_empty_tensor_with_a_giant_extent_is_refused(tmp_path):
    """numel 0 passes the byte count, but numpy cannot hold the extent: load
    raised numpy's ValueError while scan was clean."""
    p = _raw(tmp_path / "e.safetensors",
             '{"c":{"dtype":"F16","shape":[0,18446744073709551619],"data_offsets":[0,0]},'
             + ENT.replace("[0,4]", "[0,4]") + "}", F4)
    _refused(p, "S123")
    p = _raw(tmp_path / "f.safetensors",
             '{"c":{"dtype":"F16","shape":[0,9223372036854775808],"data_offsets":[0,0]},'
             + ENT + "}", F4)
    _refused(p, "S123")


def test_a_payload_without_offsets_is_a_finding(tmp_path):
    """A descriptor-map payload whose data_offsets are not two integers: load
    refused it (S124), scan skipped it as a GRIT tensor measured elsewhere."""
    a = grit.encode(np.zeros((2, 32), np.float32), grit.GRADE_MXFP4)
    meta = json.dumps({"__grit__": json.dumps({"w": a.descriptor.hex()})})
    p = _raw(tmp_path / "m.safetensors",
             '{"__metadata__":' + meta + ',"w":{"dtype":"U8","shape":[0,0],'
             '"data_offsets":{"a":1}}}', b"")
    _refused(p, "S124")


def test_a_payload_declared_past_the_end_is_a_finding(tmp_path):
    """A descriptor-map payload whose data_offsets run past the end while the
    bytes present are exactly what the size equations need: load refused the
    span, scan measured the bytes present and was clean."""
    a = grit.encode(np.zeros((2, 32), np.float32), grit.GRADE_MXFP4)
    payload = b"".join(bytes(p) for p in a.planes)
    meta = json.dumps({"__grit__": json.dumps({"w": a.descriptor.hex()})})
    p = _raw(tmp_path / "m.safetensors",
             '{"__metadata__":' + meta + ',"w":{"dtype":"U8","shape":[2,32],'
             '"data_offsets":[0,2147483648]}}', payload)
    _refused(p, "S127")
    # a truncated payload is the size equations' finding, not also S127
    p = _raw(tmp_path / "t.safetensors",
             '{"__metadata__":' + meta + ',"w":{"dtype":"U8","shape":[2,32],'
             '"data_offsets":[0,2147483648]}}', payload[:-1])
    _refused(p, "S101")
    assert "S127" not in _codes(p)
