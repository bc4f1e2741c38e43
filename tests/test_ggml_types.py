"""grit's table of ggml types (grit.ggml_types) against gguf-py's
GGML_QUANT_SIZES, and the byte accounting of GGUF files that uses it: every
tensor's span (from its type's block size) against the next tensor's offset
and the end of the file, for types GRIT v1 cannot express and types the
installed gguf-py does not know.  The files are written by gguf-py's
GGUFWriter; a type id gguf-py cannot write is set in the tensor info after
writing."""
from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
from click.testing import CliRunner

from grit.cli import main
from grit import ggml_types as GT
from grit.io.gguf_file import read_gguf
from grit.io.problems import ProblemKind as K
from grit.scan import scan

gguf = pytest.importorskip("gguf")
Q = gguf.GGMLQuantizationType

#: ggml's block_q8_1 is two halves and 32 codes (ggml-common.h static_assert
#: 2*sizeof(ggml_half) + QK8_1); gguf-py still lists the older two floats
DRIFT = {"Q8_1": ((32, 36), (32, 40))}


def test_every_type_gguf_py_knows_agrees_with_grits_table():
    for t, (block, size) in gguf.GGML_QUANT_SIZES.items():
        ours = GT.BY_ID.get(int(t))
        assert ours is not None, t.name
        assert ours.name == t.name
        if t.name in DRIFT:
            assert (ours.block_elems, ours.block_bytes) == DRIFT[t.name][0]
            # when gguf-py catches up this fails: drop the entry
            assert (block, size) == DRIFT[t.name][1]
            continue
        assert (ours.block_elems, ours.block_bytes) == (block, size), t.name


def test_the_table_covers_every_id_ggml_defines():
    # ggml.h: 0..42, less Q4_2 / Q4_3 (4, 5), removed before GGUF existed
    assert sorted(GT.BY_ID) == [i for i in range(43) if i not in (4, 5)]
    known = {int(t) for t in gguf.GGML_QUANT_SIZES}
    for t in GT.GGML_TYPES:
        # a row gguf-py lacks says where it comes from
        assert (t.id in known) or t.note, t.name
        assert t.block_bytes > 0 and t.block_elems > 0


def test_the_repacked_ids_are_their_base_types_blocks():
    base = {t.name: t for t in GT.GGML_TYPES}
    for n in ("Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8"):
        assert (base[n].block_elems, base[n].block_bytes) == gguf.GGML_QUANT_SIZES[Q.Q4_0]
    for n in ("IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8"):
        assert (base[n].block_elems, base[n].block_bytes) == gguf.GGML_QUANT_SIZES[Q.IQ4_NL]


# ---------------------------------------------------------------------------
# files


def _cli(path):
    r = CliRunner().invoke(main, ["scan", "--json", str(path)])
    assert "Traceback" not in r.output
    return r.exit_code, json.loads(r.output)


def _header(path, infos, *, data_bytes: int | None = None, fill=b"") -> int:
    """Write a GGUF header with gguf-py; ``infos`` are (name, numpy shape,
    ggml type, the nbytes gguf-py is told, which spaces the offsets).  The
    data section is ``fill``, then zeros up to ``data_bytes`` (a sparse
    extension).  Returns where the data section starts."""
    w = gguf.GGUFWriter(str(path), "llama")
    for name, shape, qt, nbytes in infos:
        w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    start = os.path.getsize(path)
    start += -start % 32           # the data section begins aligned (32 by default)
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(fill)
        if data_bytes is not None:
            f.truncate(start + data_bytes)
    return start


def _set_type(path, name: str, type_id: int, ne0: int | None = None) -> None:
    """Rewrite tensor ``name``'s ggml type (and its innermost dim) in place."""
    raw = bytearray(open(path, "rb").read(1 << 20))
    key = struct.pack("<Q", len(name)) + name.encode()
    p = raw.index(key) + len(key)
    (n_dims,) = struct.unpack_from("<I", raw, p)
    if ne0 is not None:
        struct.pack_into("<Q", raw, p + 4, ne0)
    struct.pack_into("<I", raw, p + 4 + 8 * n_dims, type_id)
    with open(path, "r+b") as f:
        f.write(raw)


# the case of the issue: 129 Q4_K experts of 128 × 7296 × 2048 elements need
# 7,471,104 blocks × 144 = 1,075,838,976 bytes each; a writer that sized 127 of
# them 1 GiB spaced their offsets 2^30 apart, inside a file long enough for all
EXPERT_SHAPE = (128, 7296, 2048)
NEEDS = 128 * 7296 * 2048 // 256 * 144
GIB = 1 << 30


def test_expert_tensors_sized_one_gib_are_named_each_with_the_bytes(tmp_path):
    assert NEEDS == 1_075_838_976
    p = tmp_path / "experts.gguf"
    infos = [(f"blk.{i}.ffn_experts.weight", EXPERT_SHAPE, Q.Q4_K,
              GIB if i < 127 else NEEDS) for i in range(129)]
    try:
        _header(p, infos, data_bytes=127 * GIB + 2 * NEEDS)
    except OSError:
        pytest.skip("the file system holds no sparse 137 GB file")
    f = read_gguf(p)
    over = [q for q in f.problems if q.kind is K.OVERLAP]
    assert not [q for q in f.problems if q.kind is not K.OVERLAP]   # the bounds check passes
    # the first 20 listed, in file order, the other 107 counted
    assert [q.tensor for q in over] == [f"blk.{i}.ffn_experts.weight" for i in range(20)]
    assert over[-1].omitted == 107
    for i, q in enumerate(over):
        assert dict(q.extra) == {"other": f"blk.{i + 1}.ffn_experts.weight",
                                 "needs": NEEDS, "room": GIB, "shared": NEEDS - GIB}
        assert "7471104 blocks of 256 elements × 144 bytes" in q.message
        assert f"needs {NEEDS} bytes from data offset {i * GIB}" in q.message
        assert f"begins {GIB} bytes after it: {NEEDS - GIB} bytes are shared" in q.message
    rc, doc = _cli(p)
    s141 = [x for x in doc["findings"] if x["code"] == "S141"]
    # 20 listed per code and file, the rest counted
    assert len(s141) == 20 and sum(x.get("omitted", 0) for x in s141) == 107
    assert all(x["severity"] == 1 and x["detail"]["needs"] == NEEDS for x in s141)
    assert rc == 1


def _small(tmp_path, types, *, shift=None, cut=0):
    """One tensor per (name, gguf-py type, numpy shape, block bytes) with
    random bytes; ``shift`` = (tensor index, bytes) lies about the nbytes
    gguf-py is told for that tensor; ``cut`` removes bytes at the end."""
    rng = np.random.default_rng(3)
    infos, total = [], 0
    for i, (name, qt, shape, nb) in enumerate(types):
        lie = shift[1] if shift and shift[0] == i else 0
        infos.append((name, shape, qt, nb - lie))
        total += nb - lie + (-(nb - lie) % 32)
    p = tmp_path / "m.gguf"
    start = _header(p, infos, fill=rng.integers(0, 256, total, np.uint8).tobytes())
    if cut:
        os.truncate(p, os.path.getsize(p) - cut)
    return p, start


def _nb(name: str, shape) -> int:
    t = next(t for t in GT.GGML_TYPES if t.name == name)
    return int(np.prod(shape)) // t.block_elems * t.block_bytes


@pytest.mark.parametrize("tname", ["Q3_K", "TQ1_0", "IQ2_XXS", "IQ1_M", "IQ4_XS"])
def test_inexpressible_types_are_accounted_byte_by_byte(tmp_path, tname):
    shape = (2, 512)
    nb = _nb(tname, shape)
    types = [("a.weight", Q[tname], shape, nb), ("b.weight", Q.Q8_0, (2, 64), _nb("Q8_0", (2, 64)))]
    p, _ = _small(tmp_path, types)
    assert not read_gguf(p).problems                     # clean: its span is exact
    # told 32 bytes fewer, gguf-py places b 32 bytes early: a's span runs into it
    p, _ = _small(tmp_path, types, shift=(0, 32))
    (q,) = [q for q in read_gguf(p).problems if q.kind is K.OVERLAP]
    assert q.tensor == "a.weight" and dict(q.extra)["needs"] == nb
    assert dict(q.extra)["room"] == nb - 32 + (-(nb - 32) % 32)
    rc, doc = _cli(p)
    assert ("S141", "a.weight") in [(x["code"], x["tensor"])
                                    for x in doc["findings"]] and rc == 1
    # the last tensor cut short: past the end, with the bytes missing
    p, _ = _small(tmp_path, list(reversed(types)), cut=40)
    (q,) = read_gguf(p).problems
    assert q.kind is K.PAST_END and q.tensor == "a.weight" and dict(q.extra)["missing"] > 0
    rc, doc = _cli(p)
    assert [(x["code"], x["tensor"]) for x in doc["findings"]
            if x["severity"] == 1] == [("S807", "a.weight")] and rc == 1


@pytest.mark.parametrize("type_id,name,ne0", [(42, "Q2_0", 128), (31, "Q4_0_4_4", 64),
                                             (38, "IQ4_NL_8_8", 64)])
def test_types_gguf_py_does_not_know_are_sized_by_grits_table(tmp_path, type_id, name, ne0):
    assert type_id not in {int(t) for t in gguf.GGML_QUANT_SIZES}
    # written as Q4_0 (32 elements, 18 bytes): 2 rows of 2 blocks, 72 bytes
    types = [("x.weight", Q.Q4_0, (2, 64), 72), ("y.weight", Q.Q8_0, (2, 64), 136)]
    p, _ = _small(tmp_path, types)
    # Q2_0 is 64 elements in 18 bytes: 128 per row keeps the 72-byte span
    _set_type(p, "x.weight", type_id, ne0)
    f = read_gguf(p)
    assert not f.problems
    (x,) = [t for t in f.tensors if t.name == "x.weight"]
    assert (x.ggml_type, x.nbytes) == (name, 72)
    rc, doc = _cli(p)
    assert not [x for x in doc["findings"] if x["severity"] == 1]
    # twice the row with the same offsets: 144 bytes where y begins at 96
    # (72 padded to the 32-byte alignment)
    _set_type(p, "x.weight", type_id, 2 * ne0)
    (q,) = read_gguf(p).problems
    assert q.kind is K.OVERLAP and q.tensor == "x.weight"
    assert dict(q.extra) == {"other": "y.weight", "needs": 144, "room": 96, "shared": 48}
    rc, doc = _cli(p)
    assert rc == 1


def test_a_type_no_table_knows_is_reported_alone(tmp_path):
    types = [("x.weight", Q.Q4_0, (2, 64), 72), ("y.weight", Q.Q8_0, (2, 64), 136)]
    p, _ = _small(tmp_path, types)
    _set_type(p, "x.weight", 99)
    f = read_gguf(p)
    (q,) = f.problems
    assert q.kind is K.BAD_TENSOR and q.tensor == "x.weight" and "unknown ggml type 99" in \
        q.message
    assert [t.name for t in f.tensors] == ["y.weight"]
    rep = scan([str(p)])
    assert [(x.code, x.tensor) for x in rep.findings if x.severity == 1] == \
        [("S806", "x.weight")]


def test_the_block_types_grit_expresses_agree_with_the_table():
    # grit.ggml (layer 3) spells the sizes of the types it reads; they are this
    # table's rows
    from grit.ggml import CONVERTED, ZERO_COPY
    by_name = {t.name: t for t in GT.GGML_TYPES}
    for row in (*ZERO_COPY.values(), *CONVERTED.values()):
        t = by_name[row.name]
        assert (row.block_elems, row.block_bytes) == (t.block_elems, t.block_bytes), row.name
