"""grit info against the libraries that own the formats: on a GGUF written by
gguf-py's GGUFWriter with several ggml types (and the real gemma GGUF where
it is cached), every tensor's name, ggml type, shape, element count and byte
count are gguf-py's GGUFReader's; on a sharded compressed-tensors checkpoint
(written by compressed-tensors, split by safetensors into shards with an
index) every file tensor is listed once, in the row of the weight it belongs
to, with safetensors' own dtype, shape and byte count (safe_open and the
header's data_offsets), and the weights' logical shapes and formats are the
ones the model and the config were built with.  Over https:// and hf:// the
rows equal the local ones and only headers (and the small tensors the
recognisers read) move (tests/test_info_remote.py).  The CLI: --json is the record's to_dict, exit 4 for
an unreadable input."""
from __future__ import annotations

import glob
import json
import os
import re
import struct

import numpy as np
import pytest
from click.testing import CliRunner

import grit
from grit.cli import main
from grit.info import SCHEMA, InfoInputError, info

from _support import write_gguf

gguf = pytest.importorskip("gguf")
T = gguf.GGMLQuantizationType
RNG = np.random.default_rng(20261202)
GEMMA = os.path.join(os.environ.get("GRIT_REAL_CHECKPOINT_CACHE", os.path.join(
    os.path.expanduser("~"), ".cache", "grit-real-checkpoint")), "gemma-3-270m-q4_k_m.gguf")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GRIT_CACHE_DIR", str(tmp_path / "grit-cache"))


def blocks(t, shape):
    """Random blocks of ggml type ``t`` for a tensor of numpy ``shape``."""
    bs, ts = gguf.GGML_QUANT_SIZES[t]
    n = int(np.prod(shape)) // bs
    return RNG.integers(0, 256, (n, ts), dtype=np.uint8).reshape(
        *shape[:-1], shape[-1] // bs * ts)


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory):
    x = RNG.standard_normal((4, 512)).astype(np.float32)
    tensors = {
        "f32": (x, None), "f16": (x.astype(np.float16), None),
        "bf16": (gguf.quants.quantize(x, T.BF16), T.BF16),
        "i32": (np.arange(12, dtype=np.int32).reshape(3, 4), None),
        "q8_0": (gguf.quants.quantize(x, T.Q8_0), T.Q8_0),
        "q4_0.3d": (gguf.quants.quantize(RNG.standard_normal((2, 3, 256)).astype(np.float32),
                                         T.Q4_0), T.Q4_0),
        "mxfp4": (gguf.quants.quantize(x, T.MXFP4), T.MXFP4),
    }
    for t in (T.Q4_K, T.Q6_K, T.Q2_K, T.NVFP4, T.IQ4_NL, T.Q3_K):
        tensors[t.name.lower()] = (blocks(t, (8, 256)), t)
    return write_gguf(tmp_path_factory.mktemp("info") / "types.gguf", tensors)


def assert_gguf_agrees(path: str):
    """grit.info of ``path`` against gguf-py's GGUFReader, tensor by tensor."""
    got = info(path)
    ref = gguf.GGUFReader(path).tensors
    assert [r.name for r in got.tensors] == [t.name for t in ref]
    for r, t in zip(got.tensors, ref):
        assert r.ecosystem == t.tensor_type.name, r.name
        assert r.convention == "ggml"
        # GGUFReader's shape is ggml's ne[] (innermost first): numpy's reversed
        assert r.shape == tuple(int(d) for d in reversed(t.shape.tolist())), r.name
        assert r.parameters == int(t.n_elements), r.name
        assert r.bytes == int(t.n_bytes), r.name
        assert r.tensors == (t.name,)
        quantised = t.tensor_type.name not in ("F32", "F16", "BF16", "F64", "I8", "I16",
                                               "I32", "I64")
        assert (r.kind == "plain") == (not quantised), r.name
        assert (r.grade is None) == (r.kind in ("plain", "inexpressible")), r.name
    total_bytes = sum(int(t.n_bytes) for t in ref)
    total_params = sum(int(t.n_elements) for t in ref)
    assert got.totals.bytes == total_bytes and got.totals.parameters == total_params
    assert got.totals.bf16_bytes == 2 * total_params and got.totals.f32_bytes == 4 * total_params
    assert got.totals.bytes_per_parameter == pytest.approx(total_bytes / total_params)
    assert [f.path for f in got.files] == [path] and got.files[0].size == os.path.getsize(path)
    return got


def test_gguf_rows_are_gguf_readers(gguf_path):
    got = assert_gguf_agrees(gguf_path)
    by = {r.name: r for r in got.tensors}
    # the grades Appendix A.1 pins, by the ggml types that are them
    assert by["q4_k"].grade == "GRADE_Q4KS" and by["mxfp4"].grade == "GRADE_MXFP4"
    assert by["iq4_nl"].kind == "inexpressible" and "value table" in by["iq4_nl"].reason
    assert by["q3_k"].kind == "inexpressible"
    # docs/placements.md ("GGUF"): Q8_0, Q4_K, MXFP4 and NVFP4 blocks are a GRIT
    # placement; Q4_0, Q2_K and Q6_K move their bits into the canonical one
    assert {n for n, r in by.items() if r.kind == "inferred"} == {"q8_0", "q4_k", "mxfp4",
                                                                  "nvfp4"}
    assert {n for n, r in by.items() if r.kind == "converted"} == {"q4_0.3d", "q2_k", "q6_k"}
    # by type: the rows of each ggml type together, every row once
    assert sum(t.tensors for t in got.by_type) == len(got.tensors)
    assert {t.ecosystem for t in got.by_type} == {r.ecosystem for r in got.tensors}


def test_a_grit_annotated_gguf_tensor_is_its_logical_array(tmp_path):
    """A GritArray that is no ggml type is stored as an I8 payload with its
    descriptor and shape in grit.* KV entries: GGUFReader's bytes, grit's
    logical shape and grade."""
    x = RNG.standard_normal((16, 256)).astype(np.float32)
    path = str(tmp_path / "annotated.gguf")
    with pytest.warns(UserWarning):
        grit.save_gguf(path, {"w": grit.encode(x, grit.GRADE_MXFP4_RNE), "n": x[0]})
    [w, n] = info(path).tensors
    ref = {t.name: t for t in gguf.GGUFReader(path).tensors}
    assert ref["w"].tensor_type.name == "I8" and len(ref["w"].shape) == 1
    assert (w.kind, w.convention, w.grade, w.shape, w.parameters) == (
        "grit", "grit", "GRADE_MXFP4_RNE", (16, 256), 16 * 256)
    assert w.bytes == int(ref["w"].n_bytes) and n.bytes == int(ref["n"].n_bytes)
    assert w.ecosystem == "-" and w.known_as == ()       # no ecosystem name: RNE shared scales


@pytest.mark.skipif(not os.path.exists(GEMMA), reason="the gemma GGUF is not cached "
                    "(tests/test_real_checkpoint.py fetches it with GRIT_REAL_CHECKPOINT=1)")
def test_gemma_rows_are_gguf_readers():
    got = assert_gguf_agrees(GEMMA)
    assert {t.ecosystem for t in got.by_type} == {"F32", "Q4_K", "Q5_0", "Q6_K", "Q8_0"}


# ---------------------------------------------------------------------------
# a sharded compressed-tensors checkpoint


#: the weight format of each module, as the compressed-tensors config groups say
FORMATS = {"model.layers.0.mlp.down_proj": "nvfp4-pack-quantized",
           "model.layers.0.mlp.up_proj": "pack-quantized"}


def header(path: str) -> dict:
    """A safetensors file's header, by the format's definition."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """compressed-tensors' checkpoint (NVFP4 down_proj, int4 up_proj),
    re-saved by safetensors as two shards — one module each, an unquantised
    embedding beside up_proj — with model.safetensors.index.json."""
    pytest.importorskip("torch")
    pytest.importorskip("compressed_tensors")
    import torch  # noqa: PLC0415
    from safetensors.torch import load_file, save_file  # noqa: PLC0415

    from ct_official import write_checkpoint  # noqa: PLC0415
    d = tmp_path_factory.mktemp("ct") / "ckpt"
    one = write_checkpoint(str(d), {"g0": ("nvfp4-pack-quantized", ["re:.*down_proj"]),
                                    "g1": ("pack-quantized", ["re:.*up_proj"])})
    sd = load_file(one)
    os.remove(one)
    sd["model.embed_tokens.weight"] = torch.randn(100, 64).to(torch.bfloat16)
    shards = {"model-00001-of-00002.safetensors":
              [k for k in sd if k.startswith("model.layers.0.mlp.down_proj.")],
              "model-00002-of-00002.safetensors":
              [k for k in sd if not k.startswith("model.layers.0.mlp.down_proj.")]}
    weight_map, total = {}, 0
    for fn, names in shards.items():
        save_file({k: sd[k].contiguous() for k in names}, str(d / fn))
        weight_map.update({k: fn for k in names})
        total += sum(sd[k].numel() * sd[k].element_size() for k in names)
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}))
    return str(d)


def test_sharded_rows_are_safetensors(sharded):
    from safetensors import safe_open  # noqa: PLC0415
    got = info(sharded)
    shard_paths = sorted(os.path.join(sharded, n) for n in os.listdir(sharded)
                         if n.endswith(".safetensors"))
    assert [f.path for f in got.files] == shard_paths
    assert all(f.format == "safetensors" for f in got.files)
    # safetensors' own reading: every file tensor, its dtype, shape and bytes
    ref: dict[tuple[str, str], tuple[str, tuple, int]] = {}
    for p in shard_paths:
        h = header(p)
        with safe_open(p, "np") as f:
            for k in f.keys():
                sl = f.get_slice(k)
                a, b = h[k]["data_offsets"]
                ref[p, k] = (sl.get_dtype(), tuple(sl.get_shape()), b - a)
    listed = [(r.file, t) for r in got.tensors for t in r.tensors]
    assert sorted(listed) == sorted(ref)                    # each file tensor once
    for r in got.tensors:
        assert r.bytes == sum(ref[r.file, t][2] for t in r.tensors), r.name
    # the model's modules: one row each, their format and logical shape
    config = json.load(open(os.path.join(sharded, "config.json")))["quantization_config"]
    from ct_official import LAYERS  # noqa: PLC0415
    by = {r.name: r for r in got.tensors}
    for module, (in_f, out_f) in LAYERS.items():
        r = by[module + ".weight"]
        assert r.kind == "inferred" and r.convention == "compressed-tensors"
        assert r.ecosystem == FORMATS[module] in {g["format"] for g in
                                                  config["config_groups"].values()}
        assert r.shape == (out_f, in_f) and r.parameters == out_f * in_f
        assert r.tensors and all(t.startswith(module + ".weight") for t in r.tensors)
    assert by["model.layers.0.mlp.down_proj.weight"].grade == "GRADE_NVF4"
    assert by["model.layers.0.mlp.down_proj.weight"].known_as == ("NVFP4",)
    plain = by["model.embed_tokens.weight"]
    dt, shape, nbytes = ref[plain.file, plain.name]
    assert (plain.kind, plain.ecosystem, plain.shape, plain.bytes) == ("plain", dt, shape, nbytes)
    # the totals: bytes at rest are the index's total_size (every tensor's bytes)
    [ix] = got.indexes
    assert ix.total_size == got.totals.bytes == sum(n for _, _, n in ref.values())
    assert ix.tensors == len(ref)
    params = 100 * 64 + sum(i * o for i, o in LAYERS.values())
    assert got.totals.parameters == params and got.totals.bf16_bytes == 2 * params
    # the index named alone: the same rows
    again = info(os.path.join(sharded, "model.safetensors.index.json"))
    assert again.tensors == got.tensors


# ---------------------------------------------------------------------------
# errors and the command line


def test_unreadable_inputs_are_info_input_errors(tmp_path):
    with pytest.raises(InfoInputError, match="no such file"):
        info(str(tmp_path / "absent.gguf"))
    (tmp_path / "junk.gguf").write_bytes(b"GGUF\x07\x00\x00\x00" + b"\x00" * 40)
    with pytest.raises(grit.GritError):
        info(str(tmp_path / "junk.gguf"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InfoInputError, match="no .safetensors or .gguf"):
        info(str(tmp_path / "empty"))
    with pytest.raises(InfoInputError):
        info([])


HOSTILE = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus",
                                        "hostile", "*")))


@pytest.mark.parametrize("path", HOSTILE, ids=os.path.basename)
def test_hostile_files_are_listed_or_a_grit_error(path):
    """Every hostile file is listed (its defects in ``problems``) or is an
    InfoInputError naming it; the command exits 0 or 4, never a traceback."""
    try:
        got = info(path)
    except InfoInputError as e:
        assert e.path == path and str(e).startswith(path)
        code = 4
    else:
        listed = [(r.file, t) for r in got.tensors for t in r.tensors]
        assert len(listed) == len(set(listed))             # each file tensor once
        code = 0
    r = CliRunner().invoke(main, ["info", "--json", path])
    assert r.exit_code == code, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert json.loads(r.output)["schema" if code == 0 else "error"]


def test_cli_json_is_the_record_and_exit_codes(gguf_path, tmp_path):
    r = CliRunner().invoke(main, ["info", "--json", gguf_path])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc == json.loads(json.dumps(info(gguf_path).to_dict()))
    assert doc["schema"] == SCHEMA
    assert set(doc) == {"schema", "inputs", "files", "indexes", "tensors", "by_type", "totals",
                        "problems", "splits"}
    assert set(doc["tensors"][0]) == {"name", "file", "kind", "convention", "ecosystem",
                                      "known_as", "grade", "canonical", "grade_id", "shape",
                                      "parameters", "bytes", "tensors", "reason"}
    assert set(doc["by_type"][0]) == {"ecosystem", "grade", "known_as", "tensors",
                                      "parameters", "bytes"}
    assert set(doc["totals"]) == {"tensors", "parameters", "bytes", "bf16_bytes", "f32_bytes",
                                  "bytes_per_parameter", "bits_per_parameter", "unsized"}
    r = CliRunner().invoke(main, ["info", gguf_path])
    assert r.exit_code == 0 and "Q4_K" in r.output and "GRADE_Q4KS" in r.output
    r = CliRunner().invoke(main, ["info", str(tmp_path / "absent.gguf")])
    assert r.exit_code == 4 and "no such file" in r.output
    r = CliRunner().invoke(main, ["info", "--json", str(tmp_path / "absent.gguf")])
    assert r.exit_code == 4 and json.loads(r.output)["error"] == "InfoInputError"
    r = CliRunner().invoke(main, ["info", "https://"])
    assert r.exit_code == 2                                  # a malformed URL: usage


def test_the_docs_examples_print_what_they_show(monkeypatch):
    """Every ```text block of docs/info.md that begins ``$ grit …`` is that
    command's output, run from the repository root."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    monkeypatch.chdir(root)
    text = open(os.path.join(root, "docs", "info.md"), encoding="utf-8").read()
    blocks = re.findall(r"^```text\n\$ grit ([^\n]*)\n(.*?)^```$", text, re.M | re.S)
    assert len(blocks) >= 2
    for cmd, shown in blocks:
        r = CliRunner().invoke(main, cmd.split())
        assert r.exit_code == 0, r.output
        assert r.output == shown, cmd


def test_every_container_has_its_rows():
    from grit.info import ROWS  # noqa: PLC0415
    from grit.io.containers import CONTAINERS  # noqa: PLC0415
    assert set(ROWS) == {c.name for c in CONTAINERS}


def test_grit_info_is_callable_and_a_module(gguf_path):
    import grit.info as mod  # noqa: PLC0415
    assert grit.info(gguf_path) == mod.info(gguf_path)
