"""grit scan's checkpoint-wide contracts: the quantisation config against the
tensors (S310–S319) and the parts runtimes fuse (S320, S321).

Every checkpoint is built here with safetensors.numpy; every config is the
JSON compressed-tensors writes (QuantizationConfig.model_dump: the field
names and values of its schema), ModelOpt's hf_quant_config.json, or a GPTQ
quantize_config as transformers stores it."""
from __future__ import annotations

import ast
import importlib.util
import json
import os

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

from grit.scan import scan
from grit.conventions.base import SERVED_GROUPS
from grit.conventions.compressed_tensors import CT_ENUMS, CT_FIELDS, scheme_for
from grit.scan.config import fused_key
from grit.scan.findings import REGISTRY, Severity

rng = np.random.default_rng(14)
OUT, IN = 8, 256


def args(num_bits=4, type_="int", strategy="group", group_size=128, symmetric=True,
         **extra) -> dict:
    """QuantizationArgs as compressed-tensors serialises it (None-valued
    actorder / block_structure / scale_dtype and an empty observer_kwargs are
    left out by its model_serializer)."""
    d = {"num_bits": num_bits, "type": type_, "symmetric": symmetric,
         "group_size": group_size, "strategy": strategy, "dynamic": False,
         "zp_dtype": None, "observer": "minmax"}
    d.update(extra)
    return d


def ct_config(groups: dict, fmt="pack-quantized", ignore=("lm_head",),
              status="compressed") -> dict:
    return {"architectures": ["LlamaForCausalLM"], "quantization_config": {
        "config_groups": groups, "quant_method": "compressed-tensors",
        "kv_cache_scheme": None, "format": fmt, "quantization_status": status,
        "global_compression_ratio": None, "ignore": list(ignore),
        "sparsity_config": {}, "transform_config": {}, "version": "0.20.0"}}


def group(targets, weights, fmt="pack-quantized") -> dict:
    return {"targets": list(targets), "weights": weights, "input_activations": None,
            "output_activations": None, "format": fmt}


def pack_int32(u: np.ndarray, bits: int) -> np.ndarray:
    per = 32 // bits
    w = np.zeros((u.shape[0], u.shape[1] // per), np.uint64)
    for i in range(per):
        w |= u[:, i::per].astype(np.uint64) << np.uint64(bits * i)
    return w.astype(np.uint32).view(np.int32)


def int4(pre: str, group_size: int = 128, in_f: int = IN) -> dict:
    q = rng.integers(0, 16, (OUT, in_f))
    return {f"{pre}.weight_packed": pack_int32(q, 4),
            f"{pre}.weight_scale": rng.uniform(0.01, 0.1, (OUT, in_f // group_size))
            .astype(np.float16),
            f"{pre}.weight_shape": np.array([OUT, in_f], np.int64)}


def fp8(pre: str) -> dict:
    codes = rng.integers(0x20, 0x50, (OUT, IN), dtype=np.uint8)
    return {f"{pre}.weight": codes.view(ml_dtypes.float8_e4m3fn),
            f"{pre}.weight_scale": rng.uniform(0.01, 0.1, (OUT, 1)).astype(np.float32)}


def dense(pre: str, shape=(OUT, IN)) -> dict:
    return {f"{pre}.weight": rng.standard_normal(shape).astype(np.float16)}


PROJ = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def model(layers=2, quant=int4) -> dict:
    t = dense("model.embed_tokens", (32, IN))
    t.update(dense("lm_head", (32, IN)))
    t["model.norm.weight"] = np.ones(IN, np.float16)
    for i in range(layers):
        for p in PROJ:
            t.update(quant(f"model.layers.{i}.{p}"))
        t[f"model.layers.{i}.input_layernorm.weight"] = np.ones(IN, np.float16)
    return t


def write(tmp_path, tensors: dict, config: dict | None, shards: int = 1,
          extra_files: dict | None = None) -> str:
    """The checkpoint folder: config.json, and the tensors in ``shards``
    files with model.safetensors.index.json when more than one."""
    d = tmp_path / "ckpt"
    d.mkdir(exist_ok=True)
    names = sorted(tensors)
    if shards == 1:
        save_file(tensors, str(d / "model.safetensors"))
    else:
        weight_map, total = {}, 0
        mods = sorted({n.rsplit(".", 1)[0] for n in names})   # a module stays in one shard
        for k in range(shards):
            part = [n for n in names if n.rsplit(".", 1)[0] in mods[k::shards]]
            fn = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
            save_file({n: tensors[n] for n in part}, str(d / fn))
            weight_map.update({n: fn for n in part})
            total += sum(tensors[n].nbytes for n in part)
        (d / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": total}, "weight_map": weight_map}))
    if config is not None:
        (d / "config.json").write_text(json.dumps(config))
    for fn, doc in (extra_files or {}).items():
        (d / fn).write_text(json.dumps(doc))
    return str(d)


def flat(rep):
    """Every finding, top-level and nested under a root cause."""
    return [x for f in rep.findings for x in (f, *f.consequences)]


def codes(rep, prefix="S3"):
    return sorted(f.code for f in rep.findings if f.code.startswith(prefix))


def one(rep, code):
    fs = [f for f in flat(rep) if f.code == code]
    assert len(fs) == 1, [(f.code, f.message) for f in rep.findings]
    assert fs[0].severity is REGISTRY[code].severity
    return fs[0]


INT4_CFG = ct_config({"group_0": group(["Linear"], args())})


# ---------------------------------------------------------------------------
# clean


def test_clean_config_index_three_shards_scans_clean(tmp_path):
    rep = scan([write(tmp_path, model(), INT4_CFG, shards=3)])
    assert len(rep.files) == 3
    assert {f.code for f in rep.findings} == {"S601"}     # only "descriptor inferred"
    assert rep.exit_code_graded == 0                      # a note: clean


# ---------------------------------------------------------------------------
# 1. config vs tensors


def test_declared_pack_quantized_while_shards_ship_fp8_weight_scale(tmp_path):
    cfg = ct_config({"group_0": group(["Linear"], args())})       # int4 pack-quantized
    rep = scan([write(tmp_path, model(quant=fp8), cfg, shards=3)])
    f310 = one(rep, "S310")
    assert f310.detail["declared"] == "pack-quantized"
    assert f310.detail["on_disk"] == "float-quantized"
    assert len(f310.detail["modules"]) == 14
    f312 = one(rep, "S312")
    assert (f312.detail["declared"], f312.detail["on_disk"]) == ("int4", "fp8")
    # the recogniser read the FP8 scales with the config's group of 128: the one-per-row
    # scale plane is half the size that needs (S101). One root cause: the declared
    # format, with the element, the group size and the 14 inferred S101s under it
    assert [f.code for f in rep.findings if f.code != "S601"] == ["S310"]
    assert sorted({c.code for c in f310.consequences}) == ["S101", "S311", "S312"]
    assert sum(c.code == "S101" for c in f310.consequences) == 14
    assert rep.exit_code_graded == int(Severity.DISAGREEMENT)


def test_declared_fp8_while_tensors_read_as_4bit_affine(tmp_path):
    cfg = ct_config({"group_0": group(["Linear"], args(8, "float", "channel", None),
                                      "float-quantized")}, fmt="float-quantized")
    t = model()
    for n in [n for n in t if n.endswith(".weight_packed")]:  # asymmetric: zero points
        t[n[:-len("weight_packed")] + "weight_zero_point"] = np.zeros((OUT // 8, 2), np.int32)
    rep = scan([write(tmp_path, t, cfg)])
    f312 = one(rep, "S312")
    assert (f312.detail["declared"], f312.detail["on_disk"]) == ("fp8", "int4")
    assert one(rep, "S310").detail["on_disk"] == "pack-quantized"
    assert rep.exit_code_graded == int(Severity.DISAGREEMENT)


def test_group_size_contradicted_by_the_scale_plane(tmp_path):
    t = model()
    t.update(int4("model.layers.1.mlp.down_proj", group_size=64))   # [out, in/64] scales
    rep = scan([write(tmp_path, t, INT4_CFG)])
    f = one(rep, "S311")
    assert f.tensor == "model.layers.1.mlp.down_proj.weight"
    assert f.detail["scale_shape"] == [OUT, IN // 64]
    assert "k0 = 64" in " ".join(f.lines)
    # the recogniser, trusting the config's 128, finds the plane the wrong size: a
    # consequence of the config, nested under the S311 (the bytes are right)
    assert [c.code for c in f.consequences] == ["S101"]
    assert f.consequences[0].tensor == f.tensor
    assert rep.exit_code_graded == int(Severity.DISAGREEMENT)


def test_overlapping_config_groups_say_which_group_wins(tmp_path):
    cfg = ct_config({"group_0": group(["Linear"], args()),
                     "group_1": group(["re:.*mlp\\.down_proj$"], args(group_size=64))})
    t = model()
    for i in range(2):
        t.update(int4(f"model.layers.{i}.mlp.down_proj", group_size=64))
    rep = scan([write(tmp_path, t, cfg)])
    f = one(rep, "S313")
    # compressed-tensors orders the matched targets regex before class name
    assert f.detail["winner"] == "group_1"
    assert f.detail["targets"] == ["re:.*mlp\\.down_proj$", "Linear"]
    assert f.detail["modules"] == [f"model.layers.{i}.mlp.down_proj" for i in range(2)]
    assert "S311" not in codes(rep)            # the winner's group size is the one on disk
    assert rep.exit_code_graded == int(Severity.DISAGREEMENT)


def test_scheme_for_follows_compressed_tensors_precedence():
    groups = {"a": {"targets": ["Linear"]}, "b": {"targets": ["re:.*q_proj"]},
              "c": {"targets": ["model.layers.0.self_attn.q_proj"]},
              "d": {"targets": ["Linear"]}}
    win, matched = scheme_for(groups, "model.layers.0.self_attn.q_proj", True)
    assert win == "c"                          # exact name first
    assert matched == [("model.layers.0.self_attn.q_proj", "c"), ("re:.*q_proj", "b"),
                       ("Linear", "d")]        # "Linear" repeated: the later group has it
    assert scheme_for(groups, "lm_head", False) == (None, [])


def test_unmatched_target_and_ignore_entry(tmp_path):
    cfg = ct_config({"group_0": group(["Linear", "re:.*cross_attn.*"], args())},
                    ignore=("lm_head", "vision_tower"))
    rep = scan([write(tmp_path, model(), cfg)])
    fs = [f for f in rep.findings if f.code == "S314"]
    assert sorted(f.detail.get("target") or f.detail.get("ignore") for f in fs) == \
        ["re:.*cross_attn.*", "vision_tower"]
    assert all(f.severity is Severity.WARNING for f in fs)
    assert rep.exit_code_graded == int(Severity.WARNING)


def test_ignored_layer_shipped_quantised(tmp_path):
    t = model()
    del t["lm_head.weight"]
    t.update(int4("lm_head"))
    rep = scan([write(tmp_path, t, INT4_CFG)])
    assert one(rep, "S315").tensor == "lm_head.weight"
    assert rep.exit_code_graded == int(Severity.DISAGREEMENT)


def test_targeted_layer_shipped_dense(tmp_path):
    t = model()
    for k in [k for k in t if k.startswith("model.layers.1.self_attn.o_proj.")]:
        del t[k]
    t.update(dense("model.layers.1.self_attn.o_proj"))
    rep = scan([write(tmp_path, t, INT4_CFG)])
    assert one(rep, "S316").tensor == "model.layers.1.self_attn.o_proj.weight"
    assert rep.exit_code_graded == int(Severity.DISAGREEMENT)


def test_status_not_compressed_with_packed_tensors(tmp_path):
    cfg = ct_config({"group_0": group(["Linear"], args())}, status="frozen")
    rep = scan([write(tmp_path, model(), cfg)])
    assert one(rep, "S310").detail["status"] == "frozen"


def test_act_order_group_with_g_idx_is_0_3_c(tmp_path):
    cfg = ct_config({"group_0": group(["Linear"], args(actorder="group"))})
    t = model(layers=1)
    t["model.layers.0.mlp.down_proj.weight_g_idx"] = (rng.permutation(IN) // 128).astype(
        np.int32)
    rep = scan([write(tmp_path, t, cfg)])
    f = one(rep, "S317")
    assert "§0.3 (c)" in f.message and len(f.detail["modules"]) == 7


def test_act_order_weight_changes_nothing_on_disk(tmp_path):
    cfg = ct_config({"group_0": group(["Linear"], args(actorder="weight"))})
    assert "S317" not in codes(scan([write(tmp_path, model(layers=1), cfg)]))


def test_gptq_desc_act(tmp_path):
    pre = "model.layers.0.mlp.down_proj"
    t = {f"{pre}.qweight": rng.integers(0, 2**31, (IN // 8, OUT)).astype(np.int32),
         f"{pre}.qzeros": rng.integers(0, 2**31, (IN // 128, OUT // 8)).astype(np.int32),
         f"{pre}.scales": rng.uniform(0.01, 0.1, (IN // 128, OUT)).astype(np.float16),
         f"{pre}.g_idx": (rng.permutation(IN) // 128).astype(np.int32)}
    cfg = {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128,
                                   "desc_act": True, "sym": True, "checkpoint_format": "gptq"}}
    rep = scan([write(tmp_path, t, cfg)])
    f = one(rep, "S317")
    assert f.tensor == f"{pre}.weight" and f.detail["desc_act"] is True
    # a declared group size the scales contradict
    cfg["quantization_config"].update(desc_act=False, group_size=64)
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(cfg))
    assert one(scan([str(tmp_path / "ckpt")]), "S311").detail["declared_group_size"] == 64


def test_group_size_no_kernel_serves(tmp_path):
    cfg = ct_config({"group_0": group(["Linear"], args(group_size=256))})
    t = model(quant=lambda pre: int4(pre, group_size=256))
    rep = scan([write(tmp_path, t, cfg)])
    fs = [f for f in rep.findings if f.code == "S318"]
    assert fs and all(f.detail["group_size"] == 256 for f in fs)
    assert 256 not in SERVED_GROUPS["int4"]
    assert "S311" not in codes(rep)
    assert rep.exit_code_graded == int(Severity.WARNING)


def test_config_outside_the_schema(tmp_path):
    w = args()
    w["group_sise"] = w.pop("group_size")              # a misspelt field
    cfg = ct_config({"group_0": group(["Linear"], w)}, status="packed")
    rep = scan([write(tmp_path, model(layers=1), cfg)])
    f = one(rep, "S319")
    text = " ".join(f.detail["problems"])
    assert "group_sise" in text and "quantization_status = 'packed'" in text


def test_modelopt_nvfp4_excluded_layer_and_group_size(tmp_path):
    t = {}
    for p in ("mlp.gate_proj", "mlp.up_proj"):
        t.update(nvfp4_modelopt(f"model.layers.0.{p}", 1.0))
    t.update(nvfp4_modelopt("lm_head", 1.0))
    hq = {"producer": {"name": "modelopt", "version": "0.29.0"},
          "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None,
                           "group_size": 32, "exclude_modules": ["lm_head"]}}
    rep = scan([write(tmp_path, t, {"architectures": ["X"]},
                      extra_files={"hf_quant_config.json": hq})])
    assert one(rep, "S315").tensor == "lm_head.weight"
    f311 = one(rep, "S311")        # gate_proj and up_proj: one declaration, one finding
    assert sorted(f311.detail["modules"]) == [f"model.layers.0.mlp.{p}.weight"
                                              for p in ("gate_proj", "up_proj")]
    assert f311.detail["scales_k0"] == [16]
    assert [c.code for c in f311.consequences] == ["S318"]


# ---------------------------------------------------------------------------
# 3. fused parts


def nvfp4_modelopt(pre: str, s2: float) -> dict:
    return {f"{pre}.weight": rng.integers(0, 256, (OUT, IN // 2), dtype=np.uint8),
            f"{pre}.weight_scale": rng.integers(0x28, 0x58, (OUT, IN // 16), dtype=np.uint8)
            .view(ml_dtypes.float8_e4m3fn),
            f"{pre}.weight_scale_2": np.array(s2, np.float32),
            f"{pre}.input_scale": np.array(1.0, np.float32)}


def test_nvfp4_gate_up_weight_scale_2_differ(tmp_path):
    t = {}
    for i, (g, u) in enumerate([(2e-4, 2e-3), (3e-4, 3e-4)]):
        t.update(nvfp4_modelopt(f"model.layers.{i}.mlp.gate_proj", g))
        t.update(nvfp4_modelopt(f"model.layers.{i}.mlp.up_proj", u))
    hq = {"producer": {"name": "modelopt"},
          "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": []}}
    rep = scan([write(tmp_path, t, {"architectures": ["X"]}, shards=2,
                      extra_files={"hf_quant_config.json": hq})])
    f = one(rep, "S321")
    assert f.detail["prefix"] == "model.layers.0.mlp." and f.detail["family"] == "gate_up"
    want = float(np.float32(2e-3)) / float(np.float32(2e-4))
    assert f.detail["spread"] == pytest.approx(want) and round(want) == 10
    assert set(f.detail["values"]) == {"model.layers.0.mlp.gate_proj.weight_scale_2",
                                       "model.layers.0.mlp.up_proj.weight_scale_2"}
    assert rep.exit_code_graded == int(Severity.DISAGREEMENT)
    assert codes(rep) == ["S321"]


def test_ct_nvfp4_qkv_global_scales_and_fp8_per_tensor_scales(tmp_path):
    t = {}
    for p, g in (("q_proj", 448.0), ("k_proj", 448.0), ("v_proj", 224.0)):
        pre = f"model.layers.0.self_attn.{p}"
        t[f"{pre}.weight_packed"] = rng.integers(0, 256, (OUT, IN // 2), dtype=np.uint8)
        t[f"{pre}.weight_scale"] = rng.integers(0x28, 0x58, (OUT, IN // 16), dtype=np.uint8) \
            .view(ml_dtypes.float8_e4m3fn)
        t[f"{pre}.weight_global_scale"] = np.array([g], np.float32)
    cfg = ct_config({"group_0": group(["Linear"], args(4, "float", "tensor_group", 16),
                                      "nvfp4-pack-quantized")}, fmt="nvfp4-pack-quantized",
                    ignore=())
    rep = scan([write(tmp_path, t, cfg)])
    f = one(rep, "S321")
    assert f.detail["leaf"] == "weight_global_scale" and f.detail["spread"] == 2.0
    assert codes(rep) == ["S321"]


def test_fused_parts_with_different_grades(tmp_path):
    cfg = ct_config({"group_0": group(["re:.*q_proj$", "re:.*v_proj$", "re:.*o_proj$",
                                       "re:.*mlp.*"], args()),
                     "group_1": group(["re:.*k_proj$"], args(group_size=64))})
    t = model(layers=1)
    t.update(int4("model.layers.0.self_attn.k_proj", group_size=64))
    rep = scan([write(tmp_path, t, cfg)])
    f = one(rep, "S320")
    assert f.detail["tensors"] == [f"model.layers.0.self_attn.{p}.weight"
                                   for p in ("k_proj", "q_proj", "v_proj")]
    assert sorted(len(v["tensors"]) for v in f.detail["grades"].values()) == [1, 2]
    assert codes(rep) == ["S303", "S320"]     # S303: the roles' grades differ, too
    assert rep.exit_code_graded == int(Severity.DISAGREEMENT)


def test_fused_key_families():
    assert fused_key("model.layers.3.self_attn.k_proj") == ("model.layers.3.self_attn.", "qkv")
    assert fused_key("model.layers.3.mlp.experts.7.w3") == ("model.layers.3.mlp.experts.7.",
                                                            "gate_up")
    assert fused_key("blk.2.ffn_up") is None          # llama.cpp: a matmul of its own
    assert fused_key("model.layers.3.self_attn.o_proj") is None


def test_real_gguf_recipe_mix_is_not_a_fused_disagreement():
    path = "/root/.cache/grit-real-checkpoint/gemma-3-270m-q4_k_m.gguf"
    if not os.path.exists(path):
        pytest.skip("real checkpoint not cached")
    rep = scan([path])
    assert not [f for f in rep.findings if f.code in ("S320", "S321")]


# ---------------------------------------------------------------------------
# the schema table against compressed-tensors' own source


def _ct_source(rel: str) -> str | None:
    spec = importlib.util.find_spec("compressed_tensors")     # finds, does not import
    if spec is None or not spec.submodule_search_locations:
        return None
    p = os.path.join(list(spec.submodule_search_locations)[0], rel)
    return open(p, encoding="utf-8").read() if os.path.exists(p) else None


def _classes(src: str) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ClassDef)}


def _enum_values(cls: ast.ClassDef) -> dict[str, str]:
    return {a.targets[0].id: a.value.value for a in cls.body
            if isinstance(a, ast.Assign) and isinstance(a.targets[0], ast.Name)
            and isinstance(a.value, ast.Constant) and isinstance(a.value.value, str)}


def _default(v: ast.expr | None, enums: dict[str, dict[str, str]], consts: dict[str, str]):
    if v is None:
        return "<required>"
    if isinstance(v, ast.Call) and getattr(v.func, "id", None) == "Field":
        for kw in v.keywords:
            if kw.arg == "default":
                return _default(kw.value, enums, consts)
            if kw.arg == "default_factory":
                return {"list": [], "dict": {}}[kw.value.id]
    if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name):
        return enums[v.value.id][v.attr]
    if isinstance(v, ast.Name) and v.id in consts:
        return consts[v.id]
    return ast.literal_eval(v)


@pytest.mark.skipif(importlib.util.find_spec("compressed_tensors") is None,
                    reason="compressed-tensors not installed")
def test_field_table_matches_the_compressed_tensors_source():
    files = {"QuantizationArgs": "quantization/quant_args.py",
             "QuantizationScheme": "quantization/quant_scheme.py",
             "QuantizationConfig": "quantization/quant_config.py"}
    srcs = {k: _ct_source(v) for k, v in files.items()}
    base = _ct_source("config/base.py")
    assert all(srcs.values()) and base
    enums: dict[str, dict[str, str]] = {}
    consts: dict[str, str] = {}
    for s in list(srcs.values()) + [base]:
        for name, cls in _classes(s).items():
            vals = _enum_values(cls)
            if vals:
                enums[name] = vals
        for node in ast.parse(s).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and \
                    isinstance(node.targets[0], ast.Name):
                consts[node.targets[0].id] = node.value.value
    for model, src in srcs.items():
        cls = _classes(src)[model]
        got = {a.target.id: _default(a.value, enums, consts) for a in cls.body
               if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)
               and a.target.id != "model_config"}
        mine = {k: ("<required>" if v is not None and type(v).__name__ == "object" else v)
                for k, v in CT_FIELDS[model].items()}
        assert got == mine, model
    for name, values in CT_ENUMS.items():
        assert tuple(enums[name].values()) == values, name


@pytest.mark.parametrize("q", [
    {"config_groups": {"g": {"targets": "Linear", "weights": {"num_bits": "4",
                                                              "group_size": "x"}}}},
    {"config_groups": {"g": {"targets": ["re:(", None, 3], "weights": [1]}},
     "ignore": "lm_head", "quantization_status": 7, "format": None},
    {"config_groups": [1, 2]}, {"config_groups": None, "quant_method": "compressed-tensors"},
    {"quant_method": "gptq", "bits": "four", "group_size": [1], "desc_act": "yes"},
    {"quant_method": "awq", "bits": 0, "group_size": 0},
    {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 0,
     "exclude_modules": {"a": 1}},
])
def test_odd_configs_never_raise(tmp_path, q):
    rep = scan([write(tmp_path, model(layers=1), {"quantization_config": q})])
    assert all(f.code in REGISTRY for f in rep.findings)
    assert rep.exit_code_graded in (0, 1, 2, 3)


def test_gguf_nvfp4_companion_scales_of_gate_up_are_not_compared(tmp_path):
    """llama.cpp's converter writes an NVFP4 tensor's per-tensor scale as the
    F32 tensor <base>.scale, and llm_build_ffn multiplies it into that tensor's
    own matmul (up_s, gate_s): gate/up of one block may differ (no S321)."""
    gguf = pytest.importorskip("gguf")
    if not hasattr(gguf.GGMLQuantizationType, "NVFP4"):
        pytest.skip("gguf-py without NVFP4")
    nv = gguf.GGMLQuantizationType.NVFP4
    path = tmp_path / "nv.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    for name, s in (("blk.0.ffn_gate", 0.5), ("blk.0.ffn_up", 0.05),
                    ("blk.1.ffn_gate", 0.25), ("blk.1.ffn_up", 0.25)):
        b = rng.integers(0, 256, (4, 36), dtype=np.uint8)
        b[:, :4] = rng.integers(0x20, 0x7F, (4, 4), dtype=np.uint8)    # codes both read alike
        w.add_tensor(f"{name}.weight", b.reshape(2, -1), raw_dtype=nv)
        w.add_tensor(f"{name}.scale", np.array([s], np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    rep = scan([str(path)])
    got = {f.code for f in rep.findings}
    assert "S321" not in got and "S603" not in got      # every companion attached
    assert rep.exit_code_graded > int(Severity.DISAGREEMENT)
