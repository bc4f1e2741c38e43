"""``grit convert`` / ``grit verify`` with a GGUF model in llama.cpp's
gguf-split shards as SRC (grit.io.gguf_split, docs/convert.md "GGUF").

The unsplit GGUFs are written as the other GGUF-source tests write them: by
gguf-py's GGUFWriter (a one-block Llama of Q8_0 weights, values quantised by
``gguf.quants.quantize``) and by ``grit convert --to gguf`` of a tiny Llama
that compressed-tensors quantised to NVFP4 (its tokenizer and the NVFP4
companion scales in the GGUF).  Each is split by gguf-py's own writer
(``GGUFWriter(split_max_tensors=N)``: the ``split.no`` / ``split.count`` /
``split.tensors.count`` entries, their types and the shard names as
llama.cpp's gguf-split writes them), and the conversion of the shards —
named by any shard or by their folder — must be the
conversion of the unsplit file, byte for byte, proof included.  Shards that
lie (one missing, a tensor in two, a count that disagrees, a shard number
that is not its name's) are refused with a GritUsageError naming the shard.
"""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf-py is not installed")

from grit import convert as C  # noqa: E402
from grit import convert_gguf as CG  # noqa: E402
from grit.errors import GritUsageError  # noqa: E402
from grit.io import gguf_split as GS  # noqa: E402
from grit.io.gguf_file import read_gguf  # noqa: E402
from _support import given_back  # noqa: E402


def _llama_q8(path: str, embd: np.ndarray | None = None) -> None:
    """A two-block Llama GGUF written by gguf-py: its projections quantised
    to Q8_0 by ``gguf.quants.quantize``, the rest F32 (as
    tests/test_convert_gguf.py's gguf-py file); ``embd``: the token
    embedding's BF16 bits instead."""
    rng = np.random.default_rng(3)
    w = gguf.GGUFWriter(path, "llama")
    for add, v in ((w.add_block_count, 2), (w.add_context_length, 64),
                   (w.add_embedding_length, 64), (w.add_feed_forward_length, 128),
                   (w.add_head_count, 2), (w.add_head_count_kv, 2)):
        add(v)
    w.add_layer_norm_rms_eps(1e-5)
    shapes = {"token_embd.weight": (32, 64)}
    for i in range(2):
        b = f"blk.{i}."
        shapes.update({b + "attn_norm.weight": (64,), b + "attn_q.weight": (64, 64),
                       b + "attn_k.weight": (64, 64), b + "attn_v.weight": (64, 64),
                       b + "attn_output.weight": (64, 64), b + "ffn_gate.weight": (128, 64),
                       b + "ffn_up.weight": (128, 64), b + "ffn_down.weight": (64, 128),
                       b + "ffn_norm.weight": (64,)})
    shapes["output_norm.weight"] = (64,)
    q8 = gguf.GGMLQuantizationType.Q8_0
    for name, shape in shapes.items():
        x = rng.standard_normal(shape).astype(np.float32)
        if name == "token_embd.weight" and embd is not None:
            w.add_tensor(name, embd, raw_dtype=gguf.GGMLQuantizationType.BF16)
        elif len(shape) == 2 and name != "token_embd.weight":
            w.add_tensor(name, gguf.quants.quantize(x, q8), raw_dtype=q8)
        else:
            w.add_tensor(name, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def split(src: str, folder, max_tensors: int, prefix: str = "model") -> list[str]:
    """``src`` rewritten by gguf-py's GGUFWriter as shards of at most
    ``max_tensors`` tensors (``FOLDER/PREFIX-0000i-of-0000N.gguf``): every
    KV entry copied in order into the first shard, each tensor's bytes as
    they are; returns the shards' paths in order."""
    r = gguf.GGUFReader(src)
    os.makedirs(folder, exist_ok=True)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(os.path.join(folder, f"{prefix}.gguf"), arch,
                        split_max_tensors=max_tensors)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, f.contents(), f.types[0], sub_type=sub)
    for t in r.tensors:
        w.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for t in r.tensors:
        w.write_tensor_data(t.data)
    w.close()
    n = -(-len(r.tensors) // max_tensors)
    paths = [os.path.join(folder, GS.shard_name(prefix, i, n)) for i in range(n)]
    assert sorted(os.listdir(folder)) == sorted(map(os.path.basename, paths))
    return paths


def shard(path: str, tensors: list, *, no: int, count: int, total: int, kv_from: str | None = None,
          kv: dict | None = None) -> None:
    """One shard written by hand (for the refusals): the tensors
    ``[(name, data, ggml type)]``, the split entries given (u16, u16, i32,
    as gguf-split writes them; ``kv``: key -> (gguf-py's add_<type>, value)
    instead) and, for a first shard, ``kv_from``'s other KV entries."""
    w = gguf.GGUFWriter(path, "llama")
    if kv_from is None:
        w.kv_data[0].clear()                  # a later shard: the split entries alone
    else:
        for key, f in gguf.GGUFReader(kv_from).fields.items():
            if not key.startswith(("GGUF.", "split.", "general.architecture")):
                sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
                w.add_key_value(key, f.contents(), f.types[0], sub_type=sub)
    split = {GS.SPLIT_NO: ("uint16", no), GS.SPLIT_COUNT: ("uint16", count),
             GS.SPLIT_TENSORS: ("int32", total), **(kv or {})}
    for k, (ty, v) in split.items():
        getattr(w, f"add_{ty}")(k, v)
    for name, data, ty in tensors:
        w.add_tensor_info(name, data.shape, data.dtype, data.nbytes, ty)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _, data, _ in tensors:
        w.write_tensor_data(data)
    w.close()


def _same_output(got, want) -> None:
    names = sorted(os.listdir(want))
    assert sorted(os.listdir(got)) == names
    for n in names:
        assert (got / n).read_bytes() == (want / n).read_bytes(), n


@pytest.fixture(scope="module")
def q8(tmp_path_factory):
    """(the unsplit gguf-py GGUF, its compressed-tensors conversion, its
    three shards of at most 8 tensors)."""
    root = tmp_path_factory.mktemp("q8")
    src = str(root / "one.gguf")
    _llama_q8(src)
    out = root / "one-ct"
    assert C.convert(src, str(out), "compressed-tensors").counts == {"bit-exact": 14}
    return src, out, split(src, root / "sh", 8)


def test_gguf_py_writes_the_split_entries_as_gguf_split_does(q8):
    """What the tests split with is what llama.cpp's gguf-split writes:
    the model's KV entries in the first shard only, then split.no (u16,
    from 0), split.count (u16) and split.tensors.count (i32) in every
    shard, named PREFIX-%05d-of-%05d.gguf from 1."""
    src, _, paths = q8
    n_kv = len(gguf.GGUFReader(src).fields)
    total = len(gguf.GGUFReader(src).tensors)
    assert [os.path.basename(p) for p in paths] == [
        "model-00001-of-00003.gguf", "model-00002-of-00003.gguf", "model-00003-of-00003.gguf"]
    vt = gguf.GGUFValueType
    for i, p in enumerate(paths):
        f = gguf.GGUFReader(p).fields
        keys = [k for k in f if not k.startswith("GGUF.")]
        assert keys[-3:] == ["split.no", "split.count", "split.tensors.count"]
        assert len(keys) == (n_kv - 3 + 3 if i == 0 else 3)
        assert [f[k].types[0] for k in keys[-3:]] == [vt.UINT16, vt.UINT16, vt.INT32]
        assert [f[k].contents() for k in keys[-3:]] == [i, 3, total]


@pytest.mark.parametrize("which", ("first", "last", "folder"))
def test_split_converts_as_the_unsplit_file(q8, which, tmp_path):
    """Named by its first shard, another shard or the folder, the split
    model converts to the unsplit file's output byte for byte (the proof
    included), and grit verify holds it."""
    src, want, paths = q8
    arg = {"first": paths[0], "last": paths[-1], "folder": os.path.dirname(paths[0])}[which]
    assert CG.is_gguf_source(arg)
    rep = C.convert(arg, str(tmp_path / "out"), "compressed-tensors")
    assert rep.counts == {"bit-exact": 14}
    _same_output(tmp_path / "out", want)
    assert C.verify(arg, str(tmp_path / "out")).ok
    assert C.verify(arg, str(want)).ok          # the unsplit file's output, from the shards


def test_split_verify_finds_a_changed_output(q8, tmp_path):
    _, want, paths = q8
    out = tmp_path / "out"
    shutil.copytree(want, out)
    st = out / "model.safetensors"
    b = bytearray(st.read_bytes())
    b[-100] ^= 0x01
    st.write_bytes(bytes(b))
    assert not C.verify(paths[1], str(out)).ok


def test_split_source_gives_back_every_tensors_pages(q8, tmp_path, monkeypatch):
    """Converting from the shards, and verifying that conversion, hand every
    byte of every shard's tensors (their spans as gguf-py reads them) to the
    shard's map to be given back (MADV_DONTNEED) once handled: memory stays
    at the tensor being handled."""
    _, _, paths = q8
    back = given_back(monkeypatch)
    C.convert(paths[0], str(tmp_path / "out"), "compressed-tensors")
    after_verify = given_back(monkeypatch)
    assert C.verify(paths[0], str(tmp_path / "out")).ok
    for p in paths:
        tensors = gguf.GGUFReader(p).tensors
        assert tensors
        for b in (back(p), after_verify(p)):
            for t in tensors:
                assert b[t.data_offset:t.data_offset + t.n_bytes].all(), (p, t.name)


def _names(paths: list[str]) -> list[list[str]]:
    return [[t.name for t in gguf.GGUFReader(p).tensors] for p in paths]


def _tensors_of(p: str) -> list:
    return [(t.name, np.array(t.data), t.tensor_type) for t in gguf.GGUFReader(p).tensors]


def _refused(arg: str, tmp_path, *words: str) -> None:
    with pytest.raises(GritUsageError) as e:
        C.convert(arg, str(tmp_path / "out"), "compressed-tensors")
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert not os.path.exists(tmp_path / "out")
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]


def test_a_missing_shard_is_refused(q8, tmp_path):
    _, _, paths = q8
    d = tmp_path / "sh"
    shutil.copytree(os.path.dirname(paths[0]), d)
    os.unlink(d / "model-00002-of-00003.gguf")
    _refused(str(d / "model-00001-of-00003.gguf"), tmp_path, "missing (1 of 3)",
             "model-00002-of-00003.gguf")
    _refused(str(d / "model-00003-of-00003.gguf"), tmp_path, "model-00002-of-00003.gguf")
    with pytest.raises(GritUsageError, match="model-00002-of-00003.gguf"):
        C.verify(str(d / "model-00001-of-00003.gguf"), str(q8[1]))


def _rewritten(paths: list[str], d, i: int, **kw) -> str:
    """The shards copied into ``d``, shard ``i`` written again by hand
    (:func:`shard`) with the counts changed by ``kw``; returns the first
    shard's path."""
    shutil.copytree(os.path.dirname(paths[0]), d)
    total = sum(len(n) for n in _names(paths))
    p = os.path.join(d, os.path.basename(paths[i]))
    tensors = kw.pop("tensors", None) or _tensors_of(paths[i])
    args = {"no": i, "count": len(paths), "total": total, **kw}
    os.unlink(p)
    shard(p, tensors, kv_from=paths[0] if i == 0 else None, **args)
    return os.path.join(d, os.path.basename(paths[0]))


def test_the_rewritten_shard_alone_changes_nothing(q8, tmp_path):
    """(The hand-written shard, with the counts left as they are, converts
    as gguf-py's: what the refusals below change is the counts alone.)"""
    src, want, paths = q8
    first = _rewritten(paths, tmp_path / "sh", 1)
    C.convert(first, str(tmp_path / "out"), "compressed-tensors")
    _same_output(tmp_path / "out", want)


def test_a_tensor_in_two_shards_is_refused(q8, tmp_path):
    _, _, paths = q8
    t2 = _tensors_of(paths[1])
    dup = _tensors_of(paths[0])[1]             # a tensor of the first shard, once more
    total = sum(len(n) for n in _names(paths)) + 1
    d = tmp_path / "sh"
    first = _rewritten(paths, d, 1, tensors=[*t2, dup], total=total)
    for i in (0, 2):
        p = os.path.join(d, os.path.basename(paths[i]))
        os.unlink(p)
        shard(p, _tensors_of(paths[i]), no=i, count=3, total=total,
              kv_from=paths[0] if i == 0 else None)
    _refused(first, tmp_path, f"tensor {dup[0]!r} is also in the shard",
             "model-00002-of-00003.gguf", "model-00001-of-00003.gguf")


@pytest.mark.parametrize("count", (2, 4, 60000))
def test_a_lying_split_count_is_refused(q8, tmp_path, count):
    """split.count of the second shard other than the first's (and than its
    name's), or past what the model's tensors allow."""
    _, _, paths = q8
    first = _rewritten(paths, tmp_path / "sh", 1, count=count)
    if count == 60000:
        _refused(first, tmp_path, "model-00002-of-00003.gguf", "split.count = 60000",
                 "outside 1..")
    else:
        _refused(first, tmp_path, "model-00002-of-00003.gguf", f"split.count = {count}",
                 "model-00001-of-00003.gguf says 3")


def test_a_first_shard_lying_about_the_count_is_refused(q8, tmp_path):
    """The first shard's split.count disagreeing with its name."""
    _, _, paths = q8
    first = _rewritten(paths, tmp_path / "sh", 0, count=2)
    _refused(first, tmp_path, "model-00001-of-00003.gguf", "split.count = 2",
             "-00001-of-00002.gguf")


def test_a_split_no_other_than_the_name_is_refused(q8, tmp_path):
    _, _, paths = q8
    first = _rewritten(paths, tmp_path / "sh", 2, no=1)
    _refused(first, tmp_path, "model-00003-of-00003.gguf", "split.no = 1",
             "shard 3 of 3")


@pytest.mark.parametrize("delta", (-1, 1))
def test_a_tensor_count_other_than_the_shards_hold_is_refused(q8, tmp_path, delta):
    _, _, paths = q8
    total = sum(len(n) for n in _names(paths))
    d = tmp_path / "sh"
    shutil.copytree(os.path.dirname(paths[0]), d)
    for i, p in enumerate(paths):
        q = os.path.join(d, os.path.basename(p))
        os.unlink(q)
        shard(q, _tensors_of(p), no=i, count=3, total=total + delta,
              kv_from=paths[0] if i == 0 else None)
    _refused(os.path.join(d, os.path.basename(paths[0])), tmp_path,
             f"split.tensors.count says {total + delta}", f"hold {total}")


@pytest.mark.parametrize("key,kind,value,words", [
    ("split.count", "string", "3", ("split.count is not an integer",)),
    ("split.tensors.count", "int32", -1, ("split.tensors.count = -1 is outside 0..",)),
    ("split.tensors.count", "uint64", 1 << 40, ("split.tensors.count = 1099511627776",
                                                "outside 0..")),
    ("split.no", "uint16", 3, ("split.no = 3 is outside 0..2",)),
])
def test_a_split_entry_of_another_type_or_range_is_refused(q8, tmp_path, key, kind, value,
                                                           words):
    """Each split entry is checked before it is used: an integer (any
    integer type), within its bounds (split.no below split.count,
    split.tensors.count within GRIT_MAX_TENSORS)."""
    _, _, paths = q8
    d = tmp_path / "sh"
    shutil.copytree(os.path.dirname(paths[0]), d)
    p = os.path.join(d, os.path.basename(paths[1]))
    os.unlink(p)
    shard(p, _tensors_of(paths[1]), no=1, count=3, total=sum(len(n) for n in _names(paths)),
          kv={key: (kind, value)})
    _refused(os.path.join(d, os.path.basename(paths[0])), tmp_path,
             "model-00002-of-00003.gguf", *words)


def test_a_folder_of_other_gguf_files_is_refused(q8, tmp_path):
    src, _, paths = q8
    d = tmp_path / "sh"
    shutil.copytree(os.path.dirname(paths[0]), d)
    shutil.copy(src, d / "other.gguf")
    _refused(str(d), tmp_path, "not the shards of one model", "other.gguf")
    os.unlink(d / "other.gguf")
    shutil.copy(paths[0], d / "model-00001-of-00004.gguf")
    _refused(str(d), tmp_path, "not the shards of one model")


def test_a_split_count_of_one_is_one_file(q8, tmp_path):
    """A file with split.count 1 (gguf-split's output of a model it did not
    need to cut) is read as the model of one file."""
    src, want, _ = q8
    p = str(tmp_path / "m-00001-of-00001.gguf")
    total = len(gguf.GGUFReader(src).tensors)
    shard(p, _tensors_of(src), no=0, count=1, total=total, kv_from=src)
    C.convert(p, str(tmp_path / "out"), "compressed-tensors")
    _same_output(tmp_path / "out", want)
    assert len(GS.shards(p).paths) == 1
    assert "split.count" not in GS.load_split(p).metadata


def test_split_of_shards_is_read_as_one_file(q8):
    """grit.io.gguf_split reads the shards as one file: the unsplit file's
    KV entries (without split.*), tensors and ggml types."""
    from grit.io import load
    src, _, paths = q8
    a, b = load(src), GS.load_split(paths[1])
    assert list(a) == list(b)
    assert a.ggml_types == b.ggml_types
    assert list(a.metadata) == list(b.metadata)
    for k in a.metadata:
        assert a.metadata[k] == b.metadata[k], k
    assert GS.shards(paths[2]).paths == tuple(paths)
    assert read_gguf(paths[0]).value("split.count") == 3


# ---------------------------------------------------------------------------
# a GGUF grit convert --to gguf wrote: NVFP4 with companions, a tokenizer


@pytest.fixture(scope="module")
def nvfp4(tmp_path_factory):
    """(the --to gguf output of a tiny NVFP4 Llama, its compressed-tensors
    conversion back, the GGUF's shards of at most 5 tensors: an NVFP4
    tensor and its companion scale in two shards)."""
    pytest.importorskip("torch", reason="torch (CPU) is not installed")
    pytest.importorskip("transformers", reason="transformers is not installed")
    pytest.importorskip("compressed_tensors", reason="compressed-tensors is not installed")
    import hf_tiny
    root = tmp_path_factory.mktemp("nv")
    model = hf_tiny.write_model(str(root / "hf"), "llama", seed=11)
    C.convert(model, str(root / "g"), "gguf")
    src = str(root / "g" / CG.GGUF_FILE)
    out = root / "ct"
    assert C.convert(src, str(out), "compressed-tensors").counts == {"bit-exact": 14}
    return src, out, split(src, root / "sh", 5)


def test_split_nvfp4_with_tokenizer_converts_as_the_unsplit_file(nvfp4, tmp_path):
    src, want, paths = nvfp4
    names = _names(paths)
    # a weight and its companion scale lie in different shards
    assert any(n.endswith(".weight") and n[:-7] + ".scale" in b
               for a, b in zip(names, names[1:]) for n in a)
    rep = C.convert(paths[-1], str(tmp_path / "out"), "compressed-tensors")
    assert "tokenizer.json" in rep.proof["tokenizer"]["files"]
    _same_output(tmp_path / "out", want)
    assert C.verify(os.path.dirname(paths[0]), str(tmp_path / "out")).ok


def test_canonical_planes_by_the_inverse_equal_the_relayout(tmp_path):
    """The canonical form the conversion hands the emitter and the proof
    (built by the ggml type's direct inverse where it has one: MXFP4) is
    grit.array.canonical's: the same descriptor and planes, for every type
    of the benchmark's GGUF (Q8_0 by the relayout, F16 plain)."""
    import sys
    from grit.array import canonical
    from grit.io.gguf import load
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "bench"))
    import bench_convert_from_gguf as B
    p = str(tmp_path / "b.gguf")
    B.write_gguf(p, 1, 256, 512, 512)
    got = load(p)
    kinds = set()
    for n, v in got.items():
        if not hasattr(v, "descriptor"):
            continue
        kinds.add(got.ggml_types[n])
        a, b = CG._canonical_of(v), canonical(v)
        assert a.descriptor == b.descriptor, n
        assert [bytes(x) for x in a.planes] == [bytes(x) for x in b.planes], n
    assert kinds == {"Q8_0", "MXFP4"}


@pytest.mark.parametrize("ty", sorted(__import__("grit.ggml", fromlist=["ZERO_COPY"]).ZERO_COPY))
def test_canonical_of_every_zero_copy_type_is_the_relayout(ty):
    """The same for random blocks of every zero-copy ggml type (NVFP4 and
    MXFP4 by their inverse, the others by the relayout)."""
    from grit.array import canonical
    from grit.ggml import ZERO_COPY
    from grit.io.gguf import converted
    t = ZERO_COPY[ty]
    rows, cols = 4, 2 * 256
    nb = rows * cols // t.block_elems
    blocks = np.random.default_rng(1).integers(0, 256, (nb, t.block_bytes), np.uint8)
    v = converted(ty, blocks, (rows, cols))
    a, b = CG._canonical_of(v), canonical(v)
    assert a.descriptor == b.descriptor
    assert [bytes(x) for x in a.planes] == [bytes(x) for x in b.planes]


@pytest.mark.parametrize("nan", (False, True))
def test_bf16_as_its_bytes_equals_widened_and_narrowed(tmp_path, nan):
    """A BF16 tensor is handed on as its bytes (no copy), and that is what
    widening it to F32 and narrowing it back gives: on every BF16 value,
    the NaNs' bits too (or zeros in their place)."""
    from grit.dtypes import st_dtype_of
    from grit.io.gguf import load
    u = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    nans = ((u & 0x7F80) == 0x7F80) & ((u & 0x7F) != 0)
    assert nans.sum() == 254
    if not nan:
        u = np.where(nans, np.uint16(0), u)
    p = str(tmp_path / "bf16.gguf")
    _llama_q8(p, u.reshape(1024, 64))
    fast = {n: v for n, _, v in CG._FromGGUF(p).tensors()}["model.embed_tokens.weight"]
    wide = np.asarray(load(p)["token_embd.weight"])
    assert wide.dtype == np.float32
    general = CG._narrowed(wide, "BF16")
    assert fast.dtype == general.dtype and st_dtype_of(fast.dtype) == "BF16"
    assert fast.tobytes() == general.tobytes()
    assert fast.view(np.uint16).reshape(-1).tobytes() == u.tobytes()
    assert not fast.flags.owndata           # a view of the file
    out = tmp_path / "out"
    C.convert(p, str(out), "compressed-tensors")
    assert C.verify(p, str(out)).ok
    from safetensors.numpy import load_file
    t = load_file(str(out / "model.safetensors"))["model.embed_tokens.weight"]
    assert t.tobytes() == general.tobytes()
