#!/usr/bin/env python3
"""Write the small checkpoints under examples/ that ``grit scan examples/`` reports on.

Deterministic: fixed seeds, no timestamps; running it twice writes the same bytes.
Every file is a few KiB (the whole set stays well under 1 MB).

    python scripts/make_examples.py [OUTDIR]        (default: examples/)

What each file demonstrates (docs/scan.md has the expected findings):

  clean/model.safetensors            MXFP4 attention weights with recorded digests: no findings
  sharded/model-0000{1,2}-of-00002   a two-shard checkpoint whose second shard was cut short
  wrong-group-size.safetensors       descriptor says k0=32, bytes were quantised at k0=64
  half-converted.safetensors         q_proj is MXFP4 in layers 0-1 and NVF4 in layers 2-3
  escape-hatch.safetensors           planes placed with assume_placement, producer tag 7
  revisions/rev-{a,b}/model.safetensors   two revisions; lm_head.weight changed its grade
  revisions.txt                      a manifest naming the two revisions
  llama-ggml.gguf                    plain ggml Q8_0 / Q4_K / IQ4_NL blocks, no GRIT annotation
  corrupted-bytes.safetensors        a recorded digest the bytes no longer match, and one E8M0
                                     scale for groups whose elements span binades (both
                                     reported by --deep)
"""
from __future__ import annotations

import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import grit  # noqa: E402
from grit.io.safetensors import plane_tensor_name  # noqa: E402

ROLES = ("data", "scale0", "scale1", "aux")
SHAPE = (16, 256)             # 4096 elements: 2 KiB of fp4 codes per tensor


def values(seed: int, shape=SHAPE) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def digest_meta(arrays: dict) -> dict:
    """``grit.digest.<tensor>`` metadata: the §6.5 digest scan --deep verifies."""
    return {f"grit.digest.{n}": grit.base32_encode(a.digest) for n, a in arrays.items()}


def save(path: str, arrays: dict, metadata: dict | None = None) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if hasattr(grit, "save"):
        grit.save(path, arrays, metadata)
    else:                                   # the same bytes grit.save writes
        write_raw(path, {n: (a.descriptor.hex(), a.shape, a.grade.canonical, a.planes)
                         for n, a in arrays.items()}, metadata)


def write_raw(path: str, tensors: dict, metadata: dict | None = None) -> None:
    """A grit-safetensors/1 file written byte by byte, for descriptors that
    disagree with their planes (grit.save refuses to write those)."""
    doc = {"schema": "grit-safetensors", "version": 1, "tensors": {}, "grades": []}
    blobs = []
    for name, (desc, shape, grade, planes) in tensors.items():
        names = {}
        for role, p in zip(ROLES, planes):
            b = bytes(p)
            if b:
                names[role] = plane_tensor_name(name, role)
                blobs.append((names[role], b))
        doc["tensors"][name] = {"desc": desc, "shape": list(shape), "grade": grade,
                                "planes": names}
        if grade not in doc["grades"]:
            doc["grades"].append(grade)
    meta = dict(metadata or {})
    meta["__grit__"] = json.dumps(doc, separators=(",", ":"))
    header, off = {"__metadata__": meta}, 0
    for n, b in sorted(blobs):
        header[n] = {"dtype": "U8", "shape": [len(b)], "data_offsets": [off, off + len(b)]}
        off += len(b)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for _, b in sorted(blobs):
            f.write(b)


def clean(out: str) -> None:
    arrays = {f"blk.{i}.attn_{r}.weight": grit.encode(values(10 * i + k), grit.GRADE_MXFP4)
              for i in range(4) for k, r in enumerate("qk")}
    save(os.path.join(out, "clean", "model.safetensors"), arrays, digest_meta(arrays))


def sharded(out: str) -> None:
    names = [f"model.layers.{i}.mlp.gate_proj.weight" for i in range(4)]
    arrays = [grit.encode(values(100 + i), grit.GRADE_MXFP4) for i in range(4)]
    d = os.path.join(out, "sharded")
    save(os.path.join(d, "model-00001-of-00002.safetensors"), dict(zip(names[:2], arrays[:2])))
    p2 = os.path.join(d, "model-00002-of-00002.safetensors")
    save(p2, dict(zip(names[2:], arrays[2:])))
    with open(p2, "rb") as f:
        b = f.read()
    with open(p2, "wb") as f:            # an interrupted download: the last 1500 bytes lost
        f.write(b[:-1500])


def wrong_group_size(out: str) -> None:
    g64 = grit.register_grade("grit1(e=e2m1,k0=64,s0=e8m0,esr=exp2floormaxabs)")
    x = values(200)
    at64 = grit.encode(x, g64)
    declared = grit.encode(x, grit.GRADE_MXFP4).descriptor      # k0=32
    write_raw(os.path.join(out, "wrong-group-size.safetensors"),
              {"encoder.layers.0.fc1.weight": (declared.hex(), x.shape,
                                               grit.GRADE_MXFP4.canonical, at64.planes)})


def half_converted(out: str) -> None:
    arrays = {}
    for i in range(4):
        g = grit.GRADE_MXFP4 if i < 2 else grit.GRADE_NVF4
        arrays[f"model.layers.{i}.self_attn.q_proj.weight"] = grit.encode(values(300 + i), g)
        arrays[f"model.layers.{i}.self_attn.o_proj.weight"] = grit.encode(
            values(310 + i), grit.GRADE_MXFP4)
    save(os.path.join(out, "half-converted.safetensors"), arrays)


def escape_hatch(out: str) -> None:
    arrays = {}
    for i in range(2):
        a = grit.encode(values(400 + i), grit.GRADE_MXFP4)
        arrays[f"vision.blocks.{i}.proj.weight"] = grit.assume_placement(
            a, "ROW_MAJOR", "example converter: planes copied from a row-major export",
            producer=7)
    save(os.path.join(out, "escape-hatch.safetensors"), arrays)


def revisions(out: str) -> None:
    for rev, head in (("rev-a", grit.GRADE_MXFP4), ("rev-b", grit.GRADE_MXFP4_RNE)):
        arrays = {f"model.layers.{i}.mlp.down_proj.weight": grit.encode(values(500 + i),
                                                                         grit.GRADE_MXFP4)
                  for i in range(2)}
        arrays["lm_head.weight"] = grit.encode(values(510), head)
        save(os.path.join(out, "revisions", rev, "model.safetensors"), arrays)
    with open(os.path.join(out, "revisions.txt"), "w") as f:
        f.write("# two revisions of one checkpoint (a grit scan manifest)\n"
                "revisions/rev-a/model.safetensors\nrevisions/rev-b/model.safetensors\n")


def ggml(out: str) -> None:
    import gguf
    rng = np.random.default_rng(600)
    Q = gguf.GGMLQuantizationType
    half = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)

    def blocks(qt, rows, cols, d_at):
        blk, tsz = gguf.GGML_QUANT_SIZES[qt]
        b = rng.integers(0, 256, (rows * cols // blk, tsz), dtype=np.uint8)
        for off in d_at:                  # finite f16 block scales
            b[:, off:off + 2] = half
        return b.reshape(rows, cols // blk * tsz)

    path = os.path.join(out, "llama-ggml.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_tensor("blk.0.attn_v.weight", blocks(Q.Q8_0, 8, 256, (0,)), raw_dtype=Q.Q8_0)
    w.add_tensor("blk.0.ffn_up.weight", blocks(Q.Q4_K, 8, 256, (0, 2)), raw_dtype=Q.Q4_K)
    w.add_tensor("blk.0.ffn_down.weight", blocks(Q.IQ4_NL, 8, 256, (0,)), raw_dtype=Q.IQ4_NL)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(256, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tensor_scaled_as_mx(x: np.ndarray) -> "grit.GritArray":
    """``x`` quantised to E2M1 under one power-of-two scale for the whole
    tensor (2^e with e = floor(log2(amax)) − 2, MX's rule applied once), and
    labelled GRADE_MXFP4: every E8M0 code is 127 + e, while a group's largest
    element shows how far below the tensor maximum that group is."""
    from grit.codec.packing import pack_stream
    from grit.formats import REGISTERED, fmt_encode
    e = int(np.floor(np.log2(np.abs(x).max()))) - 2
    q = (x.reshape(-1) / np.float32(2.0 ** e)).astype(np.float32)
    codes = np.array([fmt_encode(REGISTERED["e2m1"], float(v)) for v in q], np.uint8)
    d = grit.GRADE_MXFP4.descriptor(group_axis=x.ndim - 1)
    scales = bytes([127 + e]) * (x.size // 32)
    return grit.GritArray(d, x.shape, (pack_stream(codes, 4), scales, b"", b""))


def corrupted(out: str) -> None:
    name = "decoder.layers.0.ffn.weight"
    a = grit.encode(values(700), grit.GRADE_MXFP4)
    stale = grit.encode(values(701), grit.GRADE_MXFP4)   # what the recorded digest was taken of
    # per-tensor-scaled FP4 labelled MXFP4: one E8M0 value for every group while
    # the groups' largest elements span several binades (a level-3 probe)
    spread = np.exp2(np.random.default_rng(703).integers(-4, 1, (SHAPE[0] * SHAPE[1] // 32, 1)))
    flat = tensor_scaled_as_mx((values(702).reshape(-1, 32) * spread.astype(np.float32))
                               .reshape(SHAPE))
    save(os.path.join(out, "corrupted-bytes.safetensors"),
         {name: a, "decoder.layers.0.attn.weight": flat},
         {f"grit.digest.{name}": grit.base32_encode(stale.digest)})


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    for make in (clean, sharded, wrong_group_size, half_converted, escape_hatch, revisions,
                 ggml, corrupted):
        make(out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(HERE), "examples"))
