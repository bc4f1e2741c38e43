"""grit convert from remote checkpoints: an https:// file and an hf://
repository (real servers on loopback), read by ranged requests — each
tensor's bytes once, never the whole file first — and proved against the
local copy of the same bytes."""
from __future__ import annotations

import json

import numpy as np
import pytest

import grit
from grit.convert import convert, verify
from http_server import Server
from test_scan_hub import REPO, hub, isolated  # noqa: F401  (the Hub on loopback)


def _checkpoint(tmp_path):
    rng = np.random.default_rng(5)
    d = tmp_path / "local"
    d.mkdir()
    a = grit.encode(rng.standard_normal((16, 128)).astype(np.float32), grit.GRADE_MXFP4)
    grit.save(str(d / "model.safetensors"), {"model.layers.0.mlp.down_proj.weight": a,
                                              "model.norm.weight": np.ones(16, np.float32)})
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    return d


def test_an_https_file_converts_as_the_same_local_file(tmp_path):
    d = _checkpoint(tmp_path)
    data = (d / "model.safetensors").read_bytes()
    s = Server()
    try:
        s.files["/m/model.safetensors"] = data
        s.files["/m/config.json"] = (d / "config.json").read_bytes()
        url = s.url("/m/model.safetensors")
        rep = convert(url, str(tmp_path / "ct"), "compressed-tensors")
        assert rep.counts == {"bit-exact": 1}
        # no response was the whole file: the header, then each tensor's bytes
        assert 0 < s.largest < len(data)
    finally:
        s.close()
    cfg = json.loads((tmp_path / "ct" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]          # the remote config.json
    assert cfg["quantization_config"]["format"] == "mxfp4-pack-quantized"
    local = convert(str(d), str(tmp_path / "ct-local"), "compressed-tensors")
    assert local.proof["weights"] == rep.proof["weights"]
    assert verify(str(d), str(tmp_path / "ct")).ok


def test_an_hf_repository_converts_as_its_local_files(hub, tmp_path):  # noqa: F811
    d = _checkpoint(tmp_path)
    hub.commit(REPO, {"model.safetensors": (d / "model.safetensors").read_bytes(),
                      "config.json": (d / "config.json").read_bytes()})
    rep = convert(f"hf://{REPO}", str(tmp_path / "mo"), "grit")
    assert rep.counts == {"bit-exact": 1}
    [w] = rep.proof["weights"]
    assert w["file"] == "model.safetensors"
    assert verify(f"hf://{REPO}", str(tmp_path / "mo")).ok
    assert verify(str(d), str(tmp_path / "mo")).ok
    with pytest.raises(grit.GritUsageError, match="no .safetensors"):
        convert(f"hf://{REPO}/nowhere", str(tmp_path / "x"), "grit")
