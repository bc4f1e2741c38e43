"""Write the hostile-input corpus under tests/corpus/hostile/ (deterministic).

    python scripts/make_hostile.py [OUT]      # default: tests/corpus/hostile

Every file is malformed, lying or mislabelled on purpose: ``grit scan`` must
report each one (a finding, or exit 4 when nothing parses) and ``grit.load``
must raise a GritError — never a traceback, a hang or a huge allocation.
The same bytes come out on every run: tests/test_hostile.py regenerates the
corpus and compares it with the committed files.

GGUF files are written byte by byte here (gguf-py's writer refuses most of
these lies); safetensors files likewise.  The GRIT tensors inside are made
with ``grit.encode`` on seeded values, which is deterministic.
"""
from __future__ import annotations

import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(os.path.dirname(HERE), "tests", "corpus", "hostile")

# ggml type numbers (gguf-py's GGMLQuantizationType)
F32, Q8_0, I8 = 0, 8, 24
GGUF_STRING, GGUF_ARRAY, GGUF_UINT64, GGUF_UINT32 = 8, 9, 10, 4
ALIGN = 32


# ---------------------------------------------------------------------------
# a byte-level GGUF writer


def _gstr(s) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def _kv(key: str, value) -> bytes:
    """A KV pair: str -> STRING, int -> UINT32, list of int -> ARRAY of UINT64."""
    if isinstance(value, str):
        return _gstr(key) + struct.pack("<I", GGUF_STRING) + _gstr(value)
    if isinstance(value, int):
        return _gstr(key) + struct.pack("<II", GGUF_UINT32, value)
    return (_gstr(key) + struct.pack("<IIQ", GGUF_ARRAY, GGUF_UINT64, len(value))
            + b"".join(struct.pack("<Q", x) for x in value))


def gguf_bytes(kvs, tensors, *, magic=b"GGUF", version=3, n_tensors=None, n_kv=None,
               offsets=None, marks=None) -> bytes:
    """A GGUF v3 file.  ``tensors``: [(name, ne (ggml order), type, data bytes)].
    ``offsets`` overrides the recorded data offsets; ``n_tensors``/``n_kv``
    override the counts.  ``marks`` (a dict) receives the byte positions
    where the KV section, the tensor infos and the data start."""
    head = magic + struct.pack("<I", version)
    head += struct.pack("<QQ", len(tensors) if n_tensors is None else n_tensors,
                        len(kvs) if n_kv is None else n_kv)
    kv = b"".join(_kv(k, v) for k, v in kvs)
    infos, data, offs = b"", b"", []
    for name, ne, typ, blob in tensors:
        data += b"\0" * (-len(data) % ALIGN)
        offs.append(len(data))
        data += blob
    for i, (name, ne, typ, blob) in enumerate(tensors):
        off = offs[i] if offsets is None else offsets[i]
        infos += (_gstr(name) + struct.pack("<I", len(ne))
                  + b"".join(struct.pack("<Q", x) for x in ne) + struct.pack("<IQ", typ, off))
    body = head + kv + infos
    pad = b"\0" * (-len(body) % ALIGN)
    if marks is not None:
        marks.update(kv=len(head), info=len(head) + len(kv), data=len(body) + len(pad))
    return body + pad + data


def _values(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _q8_0(n_blocks: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    out = bytearray()
    for _ in range(n_blocks):
        out += np.float16(0.01).tobytes() + rng.integers(-127, 128, 32, dtype=np.int8).tobytes()
    return bytes(out)


def _grit_tensors():
    import grit
    return {
        "blk.0.attn_q.weight": grit.encode(_values((4, 64), 1), grit.GRADE_MXFP4),
        "blk.0.attn_k.weight": grit.encode(_values((2, 256), 2), grit.GRADE_Q4KS),
        "blk.0.attn_v.weight": grit.encode(_values((3, 64), 3), grit.GRADE_NVF4),
    }


def _annotated_gguf(arrays, *, cut: dict | None = None, shapes: dict | None = None) -> bytes:
    """A GRIT-annotated GGUF; ``cut[name]`` bytes are dropped from that
    tensor's payload (a level-1 SizeMismatch); ``shapes`` overrides the
    recorded logical shapes."""
    kvs = [("general.architecture", "grit"), ("grit.schema", "grit-gguf/1")]
    tensors = []
    for name, a in arrays.items():
        kvs.append(("grit.desc." + name, a.descriptor.hex()))
        kvs.append(("grit.shape." + name, list((shapes or {}).get(name, a.shape))))
        kvs.append(("grit.grade." + name, a.grade.canonical))
        p = bytes(a.payload())
        if cut and name in cut:
            p = p[:len(p) - cut[name]]
        tensors.append((name, [len(p)], I8, p))
    return gguf_bytes(kvs, tensors)


def _plain_gguf(marks=None, **kw) -> bytes:
    kvs = [("general.architecture", "llama"), ("general.name", "hostile")]
    tensors = [("blk.0.ffn_up.weight", [64, 2], Q8_0, _q8_0(4, 7)),
               ("output_norm.weight", [64], F32, _values((64,), 8).tobytes())]
    return gguf_bytes(kvs, tensors, marks=marks, **kw)


# ---------------------------------------------------------------------------
# a byte-level safetensors writer


def st_bytes(header, data: bytes = b"", *, length=None, raw_header: bytes | None = None) -> bytes:
    hb = raw_header if raw_header is not None else json.dumps(
        header, separators=(",", ":")).encode()
    if raw_header is None:
        hb += b" " * (-len(hb) % 8)
    n = len(hb) if length is None else length
    return struct.pack("<Q", n) + hb + data


def _grit_st(mutate=None) -> bytes:
    """A grit-safetensors/1 file of one MXFP4 tensor; ``mutate(doc)`` edits
    the __grit__ document before it is written."""
    import grit
    from grit.io.safetensors import plane_tensor_name
    a = grit.encode(_values((4, 64), 11), grit.GRADE_MXFP4)
    name = "model.layers.0.mlp.up_proj.weight"
    header, data, planes = {}, b"", {}
    for role, p in zip(("data", "scale0", "scale1", "aux"), a.planes):
        b = bytes(p)
        if b:
            tn = plane_tensor_name(name, role)
            planes[role] = tn
            header[tn] = {"dtype": "U8", "shape": [len(b)],
                          "data_offsets": [len(data), len(data) + len(b)]}
            data += b
    doc = {"schema": "grit-safetensors", "version": 1, "grades": [a.grade.canonical],
           "tensors": {name: {"desc": a.descriptor.hex(), "shape": list(a.shape),
                              "grade": a.grade.canonical, "planes": planes}}}
    if mutate is not None:
        mutate(doc["tensors"][name], doc)
    header = {"__metadata__": {"__grit__": json.dumps(doc, separators=(",", ":"))}, **header}
    return st_bytes(header, data)


def _plain_st(entries, data: bytes, **kw) -> bytes:
    return st_bytes(entries, data, **kw)


def _set(key, value):
    def f(t, doc):
        t[key] = value
    return f


# ---------------------------------------------------------------------------


def build() -> dict[str, bytes]:
    """{file name: bytes} — the whole corpus."""
    import grit
    out: dict[str, bytes] = {}
    marks: dict = {}
    good = _plain_gguf(marks)
    n = len(good)

    # --- GGUF: truncations
    out["gguf-trunc-header.gguf"] = good[:14]
    out["gguf-trunc-kv.gguf"] = good[:marks["kv"] + 20]
    out["gguf-trunc-tensor-info.gguf"] = good[:marks["info"] + 10]
    out["gguf-trunc-data.gguf"] = good[:marks["data"] + 40]
    # --- GGUF: lies in the header
    out["gguf-lying-offset.gguf"] = _plain_gguf(offsets=[1 << 40, 0])
    out["gguf-offset-past-end.gguf"] = _plain_gguf(offsets=[0, n])
    out["gguf-giant-n-tensors.gguf"] = _plain_gguf(n_tensors=(1 << 63) - 1)
    out["gguf-giant-n-kv.gguf"] = _plain_gguf(n_kv=(1 << 63) - 1)
    big = bytearray(good)          # the first key's length: 2^62
    big[marks["kv"]:marks["kv"] + 8] = struct.pack("<Q", 1 << 62)
    out["gguf-giant-string.gguf"] = bytes(big)
    out["gguf-giant-dims.gguf"] = gguf_bytes(
        [("general.architecture", "llama")],
        [("w", [1 << 40, 1 << 40], F32, b"\0" * 64)])
    one = gguf_bytes([("general.architecture", "llama")], [("w", [16], F32, b"\0" * 64)])
    out["gguf-giant-n-dims.gguf"] = one.replace(      # n_dims lies: 2^32 − 1
        b"\x01\x00\x00\x00\x00\x00\x00\x00w\x01\x00\x00\x00",
        b"\x01\x00\x00\x00\x00\x00\x00\x00w\xff\xff\xff\xff", 1)
    out["gguf-unknown-type.gguf"] = gguf_bytes(
        [("general.architecture", "llama")], [("w", [32], 200, b"\0" * 64)])
    out["gguf-bad-magic.gguf"] = b"GGUX" + good[4:]
    out["gguf-bad-version.gguf"] = good[:4] + struct.pack("<I", 99) + good[8:]
    out["gguf-version-1.gguf"] = good[:4] + struct.pack("<I", 1) + good[8:]
    # --- GGUF with GRIT annotations
    arrays = _grit_tensors()
    out["gguf-grit-one-bad-tensor.gguf"] = _annotated_gguf(arrays, cut={"blk.0.attn_k.weight": 16})
    out["gguf-grit-bad-hex.gguf"] = (lambda b: b.replace(
        arrays["blk.0.attn_q.weight"].descriptor.hex().encode()[:16], b"zz" * 8, 1))(
        _annotated_gguf(arrays))
    out["gguf-grit-shape-mismatch.gguf"] = _annotated_gguf(
        arrays, shapes={"blk.0.attn_v.weight": (3, 1 << 40)})

    # --- safetensors: the header
    ok_entries = {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}
    ok_data = _values((4,), 12).tobytes()
    out["st-header-len-gt-file.safetensors"] = st_bytes(ok_entries, ok_data, length=4096)
    out["st-header-len-2p63.safetensors"] = st_bytes(ok_entries, ok_data, length=1 << 63)
    out["st-non-json.safetensors"] = st_bytes(None, b"\0" * 16, raw_header=b"{not json at all}   ")
    out["st-not-utf8.safetensors"] = st_bytes(None, b"", raw_header=b"{\xff\xfe\"a\":1}")
    out["st-json-array.safetensors"] = st_bytes(None, b"", raw_header=b"[1,2,3] ")
    out["st-json-nested-deep.safetensors"] = st_bytes(
        None, b"", raw_header=b"{\"a\":" + b"[" * 100000 + b"]" * 100000 + b"}")
    # --- safetensors: offsets and shapes
    out["st-offsets-past-end.safetensors"] = _plain_st(
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1 << 40]}}, ok_data)
    out["st-offsets-lying.safetensors"] = _plain_st(
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}, ok_data)
    out["st-offsets-overlapping.safetensors"] = _plain_st(
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
         "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, ok_data + ok_data)
    out["st-offsets-reversed.safetensors"] = _plain_st(
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]}}, ok_data)
    out["st-offsets-negative.safetensors"] = _plain_st(
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": [-16, 0]}}, ok_data)
    out["st-offsets-not-ints.safetensors"] = _plain_st(
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": ["0", 1.5e300]}}, ok_data)
    out["st-giant-shape.safetensors"] = _plain_st(
        {"w": {"dtype": "F32", "shape": [1 << 40, 1 << 40], "data_offsets": [0, 16]}}, ok_data)
    out["st-huge-int-shape.safetensors"] = _plain_st(
        {"w": {"dtype": "F32", "shape": [10 ** 30], "data_offsets": [0, 16]}}, ok_data)
    out["st-negative-shape.safetensors"] = _plain_st(
        {"w": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}}, ok_data)
    out["st-bad-dtype.safetensors"] = _plain_st(
        {"w": {"dtype": "FLOAT99", "shape": [4], "data_offsets": [0, 16]}}, ok_data)
    out["st-entry-not-object.safetensors"] = _plain_st({"w": [1, 2, 3]}, ok_data)
    out["st-metadata-not-object.safetensors"] = _plain_st(
        {"__metadata__": [1], **ok_entries}, ok_data)
    # --- safetensors: __grit__ lies
    out["st-grit-not-json.safetensors"] = st_bytes(
        {"__metadata__": {"__grit__": "{oops"}, **ok_entries}, ok_data)
    out["st-grit-bad-hex.safetensors"] = _grit_st(_set("desc", "zz" * 64))
    out["st-grit-desc-short.safetensors"] = _grit_st(lambda t, d: t.update(desc=t["desc"][:100]))
    out["st-grit-desc-long.safetensors"] = _grit_st(lambda t, d: t.update(desc=t["desc"] + "00"))
    out["st-grit-unknown-grade.safetensors"] = _grit_st(lambda t, d: (
        t.update(desc=t["desc"][:16] + "f" * 16 + t["desc"][32:],
                 grade="grit1(e=e2m1,k0=32,s0=e8m0,esr=nosuchrule)"),
        d.update(grades=[t["grade"]])))
    out["st-grit-shape-mismatch.safetensors"] = _grit_st(_set("shape", [4, 128]))
    out["st-grit-giant-shape.safetensors"] = _grit_st(_set("shape", [1 << 40, 1 << 40]))
    out["st-grit-shape-not-list.safetensors"] = _grit_st(_set("shape", "4x64"))
    out["st-grit-missing-plane.safetensors"] = _grit_st(
        lambda t, d: t["planes"].update(scale0="nosuch.__scale0"))
    out["st-grit-descmap-bad.safetensors"] = st_bytes(
        {"__metadata__": {"__grit__": json.dumps({"w": "00" * 64})}, **ok_entries}, ok_data)

    # --- neither
    out["empty.safetensors"] = b""
    out["empty.gguf"] = b""
    out["junk.safetensors"] = np.random.default_rng(99).bytes(4096)
    out["junk.gguf"] = b"GGUF" + np.random.default_rng(98).bytes(4092)
    # --- mislabelled
    out["gguf-named.safetensors"] = good
    out["safetensors-named.gguf"] = _grit_st()
    del grit
    return out


def main(out: str = DEFAULT_OUT) -> list[str]:
    files = build()
    os.makedirs(out, exist_ok=True)
    for name, b in sorted(files.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(b)
    return sorted(files)


if __name__ == "__main__":
    names = main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT)
    print(f"{len(names)} files")
