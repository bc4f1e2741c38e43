"""Every tensor name ``grit scan --json`` reports resolves through
``grit explain FILE:NAME FILE:NAME`` (#13 item 5): exit 0 for an array, exit
4 with the reason for a name that is not one — never "no tensor".  The files
are written by the official libraries (safetensors.numpy, gguf-py's
GGUFWriter, grit.save) in the layouts the peers use."""
from __future__ import annotations

import json
import os

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner
from safetensors.numpy import save_file

import grit
from grit.cli import main
from _support import write_gguf

gguf = pytest.importorskip("gguf")
T = gguf.GGMLQuantizationType
R = CliRunner()
rng = np.random.default_rng(13)

OUT, IN = 8, 256


def pack_nibbles_lsb(codes):
    c = codes.astype(np.uint8)
    return (c[:, 0::2] | (c[:, 1::2] << 4)).astype(np.uint8)


def pack_int32_rows(u, bits):
    """compressed-tensors pack_to_int32 along dim 1: element per·j+i at bits·i."""
    per = 32 // bits
    w = np.zeros((u.shape[0], u.shape[1] // per), np.uint64)
    for i in range(per):
        w |= u[:, i::per].astype(np.uint64) << np.uint64(bits * i)
    return w.astype(np.uint32).view(np.int32)


def ct_config(fmt, weights):
    return {"quantization_config": {
        "quant_method": "compressed-tensors", "format": fmt,
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                      "format": fmt}}}}


def folder(root, name, tensors, config=None, metadata=None, file="model.safetensors"):
    d = root / name
    d.mkdir(exist_ok=True)
    save_file(tensors, str(d / file), metadata=metadata)
    if config is not None:
        (d / "config.json").write_text(json.dumps(config))
    return str(d / file)


def gguf_file(path, tensors):
    return write_gguf(path, tensors, arch="names")


def raw_blocks(ggml_type, rows, cols):
    """Random block bytes of a ggml type (gguf-py's sizes), fp16 fields finite."""
    be, bb = gguf.GGML_QUANT_SIZES[ggml_type]
    b = rng.integers(0, 256, (rows, cols // be * bb), dtype=np.uint8)
    return b


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("names")
    x = rng.standard_normal((OUT, IN)).astype(np.float32)
    files = {}
    # plain safetensors (a plain F32 tensor is not an array)
    files["plain"] = folder(root, "plain", {"embed.weight": x, "norm.weight": x[0]})
    # grit.save: GRIT arrays beside a plain tensor
    grit_dir = root / "grit"
    grit_dir.mkdir()
    files["grit"] = str(grit_dir / "model.safetensors")
    grit.save(files["grit"], {"w.mx": grit.encode(x, grit.GRADE_MXFP4),
                              "w.nv": grit.encode(x, grit.GRADE_NVF4),
                              "bias": x[0]})
    files["grit_gguf"] = str(grit_dir / "model.gguf")
    grit.save(files["grit_gguf"], {"w.mx": grit.encode(x, grit.GRADE_MXFP4)})
    # gguf-py: zero-copy, converted and inexpressible ggml types, a plain F32
    gdir = root / "gguf"
    gdir.mkdir()
    files["gguf"] = gguf_file(gdir / "model.gguf", {
        "blk.0.q8": (gguf.quants.quantize(x, T.Q8_0), T.Q8_0),
        "blk.0.q4_0": (gguf.quants.quantize(x, T.Q4_0), T.Q4_0),
        "blk.0.q5_1": (gguf.quants.quantize(x, T.Q5_1), T.Q5_1),
        "blk.0.q4_k": (raw_blocks(T.Q4_K, OUT, IN), T.Q4_K),
        "blk.0.q6_k": (raw_blocks(T.Q6_K, OUT, IN), T.Q6_K),
        "blk.0.q3_k": (raw_blocks(T.Q3_K, OUT, IN), T.Q3_K),
        "blk.0.iq2": (raw_blocks(T.IQ2_XXS, OUT, IN), T.IQ2_XXS),
        "norm": (x[0], None),
    })
    # grade drift: scan names the role (attn_v) that carries two grades
    files["drift"] = gguf_file(gdir / "drift.gguf", {
        "blk.0.attn_v.weight": (gguf.quants.quantize(x, T.Q8_0), T.Q8_0),
        "blk.1.attn_v.weight": (gguf.quants.quantize(x, T.Q5_0), T.Q5_0),
        "blk.0.ffn_up.weight": (gguf.quants.quantize(x, T.Q8_0), T.Q8_0),
        "blk.1.ffn_up.weight": (gguf.quants.quantize(x, T.Q8_0), T.Q8_0),
    })
    # a GGUF cut short: its last tensors are findings, not a refusal of the file
    whole = open(files["gguf"], "rb").read()
    files["cut"] = str(gdir / "cut.gguf")
    open(files["cut"], "wb").write(whole[:len(whole) - 600])
    # compressed-tensors: nvfp4, mxfp4, int4 symmetric, int4 asymmetric, fp8 channel/block
    codes = rng.integers(0, 16, (OUT, IN), dtype=np.uint8)
    e4 = rng.integers(0x28, 0x58, (OUT, IN // 16), dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    files["nvfp4"] = folder(root, "nvfp4", {
        "l.weight_packed": pack_nibbles_lsb(codes), "l.weight_scale": e4,
        "l.weight_global_scale": np.array([0.5], np.float32), "norm.weight": x[0]},
        ct_config("nvfp4-pack-quantized", {"num_bits": 4, "type": "float",
                                           "strategy": "tensor_group", "group_size": 16}))
    files["mxfp4"] = folder(root, "mxfp4", {
        "l.weight_packed": pack_nibbles_lsb(codes),
        "l.weight_scale": rng.integers(120, 134, (OUT, IN // 32), dtype=np.uint8)},
        ct_config("mxfp4-pack-quantized", {"num_bits": 4, "type": "float",
                                           "strategy": "group", "group_size": 32}))
    q = rng.integers(-8, 8, (OUT, IN))
    files["int4"] = folder(root, "int4", {
        "l.weight_packed": pack_int32_rows(q + 8, 4),
        "l.weight_scale": np.ones((OUT, IN // 32), np.float16),
        "l.weight_shape": np.array([OUT, IN], np.int64),
        "a.weight_packed": pack_int32_rows(q + 8, 4),
        "a.weight_scale": np.ones((OUT, IN // 32), np.float16),
        "a.weight_zero_point": np.zeros((OUT // 8, IN // 32), np.int32)},
        ct_config("pack-quantized", {"num_bits": 4, "type": "int", "strategy": "group",
                                     "group_size": 32, "symmetric": True}))
    f8 = rng.integers(0, 0x7E, (OUT, IN), dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    files["fp8"] = folder(root, "fp8", {
        "c.weight": f8, "c.weight_scale": np.ones((OUT, 1), np.float32),
        "b.weight": f8, "b.weight_scale": np.ones((1, 2), np.float32)},
        {"quantization_config": {"quant_method": "compressed-tensors",
                                 "format": "float-quantized"}})
    # torchao (flattened for safetensors): NVFP4Tensor and a tiled Int4 layout
    meta = {"tensor_names": json.dumps(["t.weight", "u.weight"]),
            "t.weight": json.dumps({"_type": "NVFP4Tensor",
                                    "_data": {"_block_size": 16, "_is_swizzled_scales": False},
                                    "_tensor_data_names": ["qdata", "_scale_e4m3"]}),
            "u.weight": json.dumps({"_type": "Int4TilePackedTo4dTensor", "_data": {},
                                    "_tensor_data_names": ["qdata", "scale_and_zero"]})}
    files["torchao"] = folder(root, "torchao", {
        "t._weight_qdata": pack_nibbles_lsb(codes), "t._weight__scale_e4m3": e4,
        "u._weight_qdata": np.zeros((2, 4, 32, 4), np.int32),
        "u._weight_scale_and_zero": np.zeros((2, OUT, 2), np.float32)}, metadata=meta)
    # GPTQ (also act-order), AWQ, bitsandbytes NF4, FNUZ FP8
    gs = 128
    files["gptq"] = folder(root, "gptq", {
        "p.qweight": np.zeros((IN // 8, OUT * 8), np.int32),
        "p.qzeros": np.zeros((IN // gs, OUT), np.int32),
        "p.scales": np.ones((IN // gs, OUT * 8), np.float16),
        "p.g_idx": (np.arange(IN) // gs).astype(np.int32),
        "k.qweight": np.zeros((IN // 8, OUT * 8), np.int32),
        "k.qzeros": np.zeros((IN // gs, OUT), np.int32),
        "k.scales": np.ones((IN // gs, OUT * 8), np.float16),
        "k.g_idx": (np.arange(IN) % (IN // gs)).astype(np.int32)},
        {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": gs}})
    files["awq"] = folder(root, "awq", {
        "p.qweight": np.zeros((IN, OUT), np.int32),
        "p.qzeros": np.zeros((IN // gs, OUT), np.int32),
        "p.scales": np.ones((IN // gs, OUT * 8), np.float16)},
        {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": gs,
                                 "version": "gemm"}})
    files["nf4"] = folder(root, "nf4", {
        "m.weight": np.zeros((OUT * IN // 2, 1), np.uint8),
        "m.weight.absmax": np.ones(OUT * IN // 64, np.float32),
        "m.weight.quant_map": np.linspace(-1, 1, 16, dtype=np.float32),
        "m.weight.quant_state.bitsandbytes__nf4": np.zeros(8, np.uint8)})
    files["fnuz"] = folder(root, "fnuz", {
        "z.weight": np.zeros((OUT, IN), ml_dtypes.float8_e4m3fnuz)})
    # a sharded checkpoint with its index
    sdir = root / "sharded"
    sdir.mkdir()
    a, b = grit.encode(x, grit.GRADE_MXFP4), grit.encode(x[:4], grit.GRADE_MXFP4)
    grit.save(str(sdir / "model-00001-of-00002.safetensors"), {"layers.0.w": a})
    grit.save(str(sdir / "model-00002-of-00002.safetensors"), {"layers.1.w": b,
                                                               "norm": x[0]})
    (sdir / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {}, "weight_map": {"layers.0.w": "model-00001-of-00002.safetensors",
                                       "layers.1.w": "model-00002-of-00002.safetensors",
                                       "norm": "model-00002-of-00002.safetensors"}}))
    return root, files


def reported(report: dict) -> set[tuple[str, str]]:
    """Every (file, tensor name) a scan report names: a finding's ``tensor``
    (or ``role``, for grade drift), or, for a finding over several tensors,
    its ``detail.tensors`` list."""
    out = set()
    for f in report["findings"]:
        if not f["file"]:
            continue
        names = f["detail"].get("tensors")
        if isinstance(names, list):
            out.update((f["file"], n) for n in names)
        elif f["tensor"] or f.get("role"):
            out.add((f["file"], f["tensor"] or f["role"]))
    return out


#: (file key, name) -> True: resolves (exit 0); a string: exit 4 with it in the message
EXPECT = {
    ("grit", "w.mx"): True, ("grit", "w.nv"): True, ("grit_gguf", "w.mx"): True,
    ("gguf", "blk.0.q8"): True, ("gguf", "blk.0.q4_0"): True, ("gguf", "blk.0.q5_1"): True,
    ("gguf", "blk.0.q4_k"): True, ("gguf", "blk.0.q6_k"): True,
    ("gguf", "blk.0.q3_k"): "not expressible in GRIT v1",
    ("gguf", "blk.0.iq2"): "not expressible in GRIT v1",
    ("gguf", "norm"): "not a GRIT array",
    ("drift", "attn_v"): "is a role", ("drift", "ffn_up"): True,
    ("plain", "embed.weight"): "plain float32 array, not a GRIT array",
    ("grit", "bias"): "plain float32 array, not a GRIT array",
    ("nvfp4", "l.weight"): True, ("nvfp4", "l.weight_packed"): True,
    ("mxfp4", "l.weight"): True, ("int4", "l.weight"): True,
    ("int4", "a.weight"): "§0.3d", ("fp8", "c.weight"): True, ("fp8", "b.weight"): "§3.7",
    ("torchao", "t.weight"): True, ("torchao", "u.weight"): "tiled int4",
    ("gptq", "p.weight"): True, ("gptq", "p.qzeros"): True, ("awq", "p.weight"): True,
    ("gptq", "k.weight"): "§0.3c", ("gptq", "k.qweight"): "§0.3c",
    ("nf4", "m.weight"): "§0.3b",
    ("fnuz", "z.weight"): "§0.3a",
}


def explain(path, name):
    ref = f"{path}:{name}"
    return R.invoke(main, ["explain", ref, ref, "--json"])


def test_every_name_scan_reports_resolves(tree):
    root, files = tree
    r = R.invoke(main, ["scan", str(root), "--json"])
    assert r.exit_code in (1, 2, 3), r.output
    report = json.loads(r.output)
    names = reported(report)
    key = {os.path.realpath(p): k for k, p in files.items()}
    seen = set()
    assert len(names) >= 20
    for path, name in sorted(names):
        out = explain(path, name)
        doc = json.loads(out.output)
        k = key.get(os.path.realpath(path), path)
        seen.add((k, name))
        want = EXPECT.get((k, name))
        if out.exit_code == 0:
            assert doc["verdict"] == "same contract", (k, name)
            assert want in (True, None), (k, name, "resolved, but expected", want)
        else:
            assert out.exit_code == 4, (k, name, out.output)
            msg = doc["message"]
            assert "has no tensor" not in msg, (k, name, msg)
            assert want is not True, (k, name, msg)
            if want is not None:
                assert want in msg, (k, name, msg)
    # scan names what it inferred and what it refused, in every file kind
    for k in ("nvfp4", "mxfp4", "int4", "fp8", "torchao", "gguf", "gptq", "awq", "nf4",
              "fnuz", "cut", "drift"):
        assert any(s[0] == k for s in seen), k


@pytest.mark.parametrize("k,name", sorted(EXPECT))
def test_expected_names(tree, k, name):
    """The arrays resolve, and each non-array says why (exit 4), whether or not
    scan named it."""
    root, files = tree
    out = explain(files[k], name)
    want = EXPECT[(k, name)]
    doc = json.loads(out.output)
    if want is True:
        assert out.exit_code == 0, (k, name, out.output)
        assert doc["verdict_kind"] == "same"
    else:
        assert out.exit_code == 4, (k, name, out.output)
        assert want in doc["message"] and "has no tensor" not in doc["message"]


def test_a_component_tensor_names_its_weight(tree):
    _, files = tree
    d, g, shape, label = grit.explain.resolve(f"{files['nvfp4']}:l.weight_scale")
    assert shape == (OUT, IN) and "l.weight" in label and "l.weight_scale" in label
    assert g.canonical == "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)"


def test_a_cut_gguf_resolves_the_tensors_it_still_holds(tree):
    _, files = tree
    with pytest.raises(grit.GritError):
        grit.load(files["cut"])                 # load refuses the file as a whole
    assert explain(files["cut"], "blk.0.q8").exit_code == 0
    out = explain(files["cut"], "blk.0.iq2")
    assert out.exit_code == 4 and "has no tensor" not in json.loads(out.output)["message"]


def test_shards_resolve_through_their_own_file_and_the_index(tree):
    root, _ = tree
    s = root / "sharded"
    index = s / "model.safetensors.index.json"
    d, g, shape, label = grit.explain.resolve(f"{index}:layers.1.w")
    assert shape == (4, IN) and label.endswith("model-00002-of-00002.safetensors:layers.1.w")
    assert explain(index, "layers.0.w").exit_code == 0
    out = explain(index, "layers.9.w")
    assert out.exit_code == 4 and "maps no tensor" in json.loads(out.output)["message"]
    out = explain(index, "norm")
    assert out.exit_code == 4 and "not a GRIT array" in json.loads(out.output)["message"]
    # an index that points outside its folder, or at itself, is refused, not followed
    bad = s / "bad.index.json"
    bad.write_text(json.dumps({"weight_map": {"a": "../grit/model.safetensors",
                                              "b": "bad.index.json"}}))
    out = explain(bad, "a")
    assert out.exit_code == 4 and "not a file name beside" in json.loads(out.output)["message"]
    assert explain(bad, "b").exit_code == 4
    ex = grit.explain.diff(f"{s}/model-00001-of-00002.safetensors:layers.0.w",
                           f"{s}/model-00002-of-00002.safetensors:layers.1.w")
    assert ex.same and ex.kind == "same"
    assert "shapes differ" in grit.explain.render(ex)


def test_a_role_scan_reports_names_its_tensors_per_grade(tree):
    _, files = tree
    out = explain(files["drift"], "attn_v")
    msg = json.loads(out.output)["message"]
    assert out.exit_code == 4
    assert "2 tensors carry 2 descriptors" in msg
    assert "blk.0.attn_v.weight" in msg and "blk.1.attn_v.weight" in msg
    d, g, shape, label = grit.explain.resolve(f"{files['drift']}:ffn_up")
    assert shape == (OUT, IN) and g["e"] == "s8" and "role of 2 tensors" in label


HOSTILE = os.path.join(os.path.dirname(__file__), "corpus", "hostile")


def test_every_name_scan_reports_in_the_hostile_corpus_resolves_or_says_why():
    r = R.invoke(main, ["scan", HOSTILE, "--json"])
    names = reported(json.loads(r.output))
    assert len(names) >= 20
    for path, name in sorted(names):
        out = explain(path, name)
        doc = json.loads(out.output)
        assert out.exit_code in (0, 4), (path, name, out.output)
        if out.exit_code == 4:
            assert "has no tensor" not in doc["message"], (path, name, doc["message"])
    out = explain(os.path.join(HOSTILE, "gguf-grit-bad-hex.gguf"), "blk.0.attn_q.weight")
    # a tensor kept as plain data beside a GRIT annotation that cannot be read
    msg = json.loads(out.output)["message"]
    assert out.exit_code == 4 and "grit.desc." in msg and "not hexadecimal" in msg


def test_a_converted_weight_says_so_in_its_label(tree):
    _, files = tree
    d, g, shape, label = grit.explain.resolve(f"{files['gptq']}:p.weight")
    assert "converted by grit.load from its gptq tensors" in label
    assert shape == (OUT * 8, IN) and g["zpc"] == "minus1"
