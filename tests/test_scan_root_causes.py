"""grit scan's findings are right and few: one root cause is one finding
(its consequences nested), a clean recognised checkpoint exits 0, llama.cpp's
separate GGUF tensors are never a fused disagreement, and a remote scan
reports no index the user never named."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save

from grit.scan import scan
from grit.scan.output.record import Record

sys.path.insert(0, str(Path(__file__).parent))
from _support import write_gguf  # noqa: E402
from http_server import Server  # noqa: E402

rng = np.random.default_rng(23)


# ---------------------------------------------------------------------------
# S320 in GGUF: llama.cpp runs attn_q/k/v and ffn_gate/up as separate matmuls


def _blocks(ggml_type, rows: int, cols: int) -> np.ndarray:
    """Random blocks of ``ggml_type`` for a [rows, cols] tensor (level 1 reads
    no value)."""
    import gguf  # noqa: PLC0415
    elems, nbytes = gguf.GGML_QUANT_SIZES[ggml_type]
    return rng.integers(0, 256, (rows, cols // elems * nbytes), dtype=np.uint8)


def test_gguf_q_k_v_and_gate_up_of_different_types_are_no_fused_disagreement(tmp_path):
    """A GGUF by gguf-py's GGUFWriter whose attn_q/attn_k are Q4_K and attn_v Q6_K,
    ffn_gate Q4_K and ffn_up Q6_K: llama.cpp (llm_build_ffn, build_attn) multiplies
    each by its own ggml_mul_mat, so nothing is fused and there is no S320."""
    gguf = pytest.importorskip("gguf")
    Q = gguf.GGMLQuantizationType
    types = {"attn_q": Q.Q4_K, "attn_k": Q.Q4_K, "attn_v": Q.Q6_K,
             "ffn_gate": Q.Q4_K, "ffn_up": Q.Q6_K, "ffn_down": Q.Q4_K}
    tensors = {f"blk.{i}.{n}.weight": (_blocks(t, 8, 256), t)
               for i in range(2) for n, t in types.items()}
    path = write_gguf(tmp_path / "mixed.gguf", tensors)
    rep = scan([path])
    got = {f.code for f in rep.findings}
    assert "S320" not in got, [(f.code, f.message) for f in rep.findings]
    # the mix is still visible where it is: one role per grade (S303)
    assert "S303" in got


# ---------------------------------------------------------------------------
# S150: no finding for an index nobody named


def test_a_lone_https_file_gets_no_finding_for_an_index_beside_it(tmp_path):
    """``https://…/model.safetensors`` is a whole checkpoint: loaders read it
    and never an index (transformers takes model.safetensors before the
    index). A server answering the absent ``model.safetensors.index.json``
    with 403 (as S3 does for a missing key without ListBucket) gave an S150
    for a file the user never named."""
    s = Server()
    try:
        s.files["/m/model.safetensors"] = save({"a.weight": np.zeros((4, 4), np.float32)})
        s.faults["/m/model.safetensors.index.json"] = {"status": 403}
        rep = scan([s.url("/m/model.safetensors")], cache=False)
        assert [(f.code, f.message) for f in rep.findings] == []
        assert rep.exit_code_graded == 0
        assert "/m/model.safetensors.index.json" not in s.asked
    finally:
        s.close()


def test_a_shard_url_still_has_its_index_checked(tmp_path):
    """A shard's checkpoint is indexed: a refused index beside a named shard
    stays S150 (what tests/test_scan_remote.py checks in full)."""
    s = Server()
    try:
        s.files["/m/model-00001-of-00001.safetensors"] = save(
            {"a.weight": np.zeros((4, 4), np.float32)})
        s.faults["/m/model.safetensors.index.json"] = {"status": 403}
        rep = scan([s.url("/m/model-00001-of-00001.safetensors")], cache=False)
        assert [f.code for f in rep.findings] == ["S150"]
    finally:
        s.close()


# ---------------------------------------------------------------------------
# one root cause, one finding


def _config_ckpt(tmp_path, declared: int, on_disk: int, shards: int = 1):
    from test_scan_config import args, ct_config, group, int4, model, write
    cfg = ct_config({"group_0": group(["Linear"], args(group_size=declared))})
    return write(tmp_path, model(quant=lambda pre: int4(pre, group_size=on_disk)), cfg,
                 shards=shards)


@pytest.mark.parametrize("shards", [1, 3])
def test_one_wrong_group_size_is_one_finding(tmp_path, shards):
    """config.json declares group_size 256 for every Linear; the checkpoint was
    quantised at 128. Each of the 14 modules used to give an S311 (the scales
    contradict the config), an S318 (256 is served by no kernel) and an S101
    (the descriptor inferred from the config fails the size equations): 42
    findings of one wrong number. Now one S311 names the 14 modules, with the
    S318 and the 14 S101s nested under it."""
    rep = scan([_config_ckpt(tmp_path, 256, 128, shards)])
    top = [f for f in rep.findings if f.code != "S601"]    # S601: inferred (informational)
    assert [f.code for f in top] == ["S311"], [(f.code, f.message) for f in top]
    (root,) = top
    assert len(root.detail["modules"]) == 14 and root.detail["scales_k0"] == [128]
    assert root.detail["declared_group_size"] == 256
    assert "group_size 256 is declared for 14 modules" in root.message
    assert "k0 = 128" in root.message
    cons = sorted(c.code for c in root.consequences)
    assert cons == ["S101"] * 14 + ["S318"]
    assert {c.tensor for c in root.consequences if c.code == "S101"} == \
        set(root.detail["tensors"])
    # counted once; the JSON nests the consequences under the root
    assert rep.summary()["by_category"].get("drift") == 1
    d = Record.of(root).to_dict()
    assert len(d["consequences"]) == 15 and d["code"] == "S311"
    assert rep.exit_code_graded == 2           # the config disagrees; the bytes are fine


def test_an_unserved_group_size_the_scales_agree_with_is_one_finding(tmp_path):
    rep = scan([_config_ckpt(tmp_path, 256, 256)])
    top = [f for f in rep.findings if f.code != "S601"]
    assert [f.code for f in top] == ["S318"]
    assert len(top[0].detail["tensors"]) == 14 and top[0].consequences == []
    assert "(14 modules)" in top[0].message


def test_a_right_group_size_gives_no_group_finding(tmp_path):
    rep = scan([_config_ckpt(tmp_path, 128, 128)])
    assert [f.code for f in rep.findings if f.code != "S601"] == []


# ---------------------------------------------------------------------------
# a clean checkpoint of every recognised convention exits 0


def _ct(kind):
    def build(tmp_path):
        pytest.importorskip("torch", reason="torch (CPU) is not installed")
        pytest.importorskip("compressed_tensors", reason="compressed-tensors is not installed")
        import ct_official  # noqa: PLC0415
        return ct_official.write_checkpoint(str(tmp_path / kind), {"group_0": (kind, ["Linear"])})
    return build


def _modelopt(tmp_path):
    from test_conventions import _modelopt as build
    return build(tmp_path)[0]


def _gpt_oss(tmp_path):
    from test_conventions import _gpt_oss as build
    return build(tmp_path)[0]


def _gptq(tmp_path):
    from test_load_gptq_awq import gptq_case, gptq_cfg, write
    *_, tensors = gptq_case(4, 32)
    return write(tmp_path, tensors, gptq_cfg(4, 32))


def _torchao(typ):
    def build(tmp_path):
        from test_load_gptq_awq import ta_cases, ta_file
        [(t, comps, attrs, _)] = [c for c in ta_cases() if c[0] == typ]
        return ta_file(tmp_path, t, comps, attrs)
    return build


def _bitsandbytes(tmp_path):
    from test_recognise import write
    b = "model.layers.0.mlp.down_proj.weight"
    return write(tmp_path, {b: np.zeros((32, 1), np.uint8),
                            f"{b}.absmax": np.ones(1, np.float32),
                            f"{b}.quant_map": np.linspace(-1, 1, 16).astype(np.float32),
                            f"{b}.quant_state.bitsandbytes__nf4": np.zeros(40, np.uint8)})


def _fnuz(tmp_path):
    import ml_dtypes  # noqa: PLC0415
    from test_recognise import write
    return write(tmp_path, {"model.layers.0.mlp.gate_proj.weight":
                            np.zeros((8, 8), ml_dtypes.float8_e4m3fnuz),
                            "model.norm.weight": np.ones(8, np.float32)})


def _grit(tmp_path):
    import grit  # noqa: PLC0415
    path = str(tmp_path / "grit.safetensors")
    x = rng.standard_normal((16, 64)).astype(np.float32)
    grit.save(path, {"w": grit.encode(x, grit.GRADE_MXFP4)})
    return path


CT_KINDS = ("int-quantized", "int-quantized-asym", "float-quantized", "mxfp8-quantized",
            "nvfp4-pack-quantized", "mxfp4-pack-quantized", "pack-quantized")
CLEAN = {**{f"compressed-tensors/{k}": _ct(k) for k in CT_KINDS},
         "modelopt/nvfp4": _modelopt, "gpt-oss/mxfp4": _gpt_oss, "gptq": _gptq,
         **{f"torchao/{t}": _torchao(t)
            for t in ("NVFP4Tensor", "MXTensor", "Float8Tensor", "Int8Tensor")},
         "bitsandbytes/nf4": _bitsandbytes, "fp8-fnuz": _fnuz, "grit": _grit}


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_a_clean_checkpoint_of_every_recognised_convention_exits_0(tmp_path, name):
    """Every quantised tensor recognised by a convention (inferred and checked
    clean, or named inexpressible), nothing wrong: what scan says of it are
    notes (S601 inferred, S701 not expressible in v1), which set no exit code —
    under the default graded policy, the simple one, and the documented CI
    recipe (--fail-on disagreement, and the strictest, --fail-on warning)."""
    from grit.scan import exit_code
    from grit.scan.findings import Severity
    path = CLEAN[name](tmp_path)
    rep = scan([path])
    assert all(f.severity is Severity.NOTE for f in rep.findings), \
        [(f.code, f.severity, f.message) for f in rep.findings]
    assert rep.exit_code_graded == 0 and rep.exit_code_simple == 0
    assert exit_code(rep, fail_on="disagreement") == 0
    assert exit_code(rep, fail_on="warning") == 0
    if name != "grit":
        assert {f.code for f in rep.findings} & {"S601", "S701"}   # said, not silent


def test_the_inferred_note_suggests_no_file_other_tools_cannot_load():
    """S601's fix used to say 're-export with grit.save': a file vLLM and
    transformers without grit cannot load."""
    from grit.scan.findings import REGISTRY, explain
    fix = REGISTRY["S601"].fix
    assert "grit.save" not in fix and "None needed" in fix
    assert "--to grit" in fix and "cannot read that copy" in fix
    assert "never sets the exit code" in explain("S601")


@pytest.mark.parametrize("name", ["modelopt/nvfp4", "gptq", "bitsandbytes/nf4"])
def test_the_documented_ci_recipe_passes_a_clean_checkpoint(tmp_path, name):
    """docs/scan.md's CI line, `grit scan --format sarif --fail-on disagreement
    ckpt/`, and the plain `grit scan ckpt/` exit 0; the SARIF log still holds
    the notes, at level none."""
    import json  # noqa: PLC0415

    from click.testing import CliRunner

    from grit.cli import main
    folder = str(Path(CLEAN[name](tmp_path)).parent)
    r = CliRunner().invoke(main, ["scan", "--format", "sarif", "--fail-on", "disagreement",
                                  folder])
    assert r.exit_code == 0, r.output
    results = json.loads(r.stdout)["runs"][0]["results"]
    assert results and {x["level"] for x in results} == {"none"}
    assert CliRunner().invoke(main, ["scan", folder]).exit_code == 0
