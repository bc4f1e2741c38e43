"""grit convert / grit verify: checkpoints moved between conventions without
re-quantising, each move proved, every proof re-derived from the two
checkpoints (compressed-tensors checkpoints written by compressed-tensors)."""
from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import grit
from _support import given_back, raw_tensors
from grit.convert import PROOF_FILE, convert, quick_verdict, verdict, verify


def tree_digest(folder):
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(folder)):
        for n in sorted(files):
            with open(os.path.join(root, n), "rb") as f:
                h.update(n.encode() + f.read())
    return h.hexdigest()


@pytest.mark.parametrize("kind", ["int-quantized", "int-quantized-asym", "float-quantized",
                                  "mxfp8-quantized", "mxfp4-pack-quantized",
                                  "nvfp4-pack-quantized", "pack-quantized"])
def test_compressed_tensors_to_grit_and_back_is_the_source_bytes(ct, kind, tmp_path):
    src = tmp_path / "src"
    ct.write_checkpoint(str(src), {"g": (kind, ["Linear"])})
    (src / "tokenizer.json").write_text("{}")
    before = tree_digest(src)
    r1 = convert(str(src), str(tmp_path / "grit"), "grit")
    assert set(r1.counts) == {"bit-exact"}
    entry = json.loads((tmp_path / "grit" / "config.json").read_text())["quantization_config"]
    assert entry == {"quant_method": "grit", "convention": "grit-safetensors", "version": 1,
                     "modules_not_converted": []}
    assert (tmp_path / "grit" / "tokenizer.json").read_text() == "{}"
    r2 = convert(str(tmp_path / "grit"), str(tmp_path / "back"), "compressed-tensors")
    assert set(r2.counts) == {"bit-exact"}
    a, b = raw_tensors(src / "model.safetensors"), raw_tensors(tmp_path / "back" / "model.safetensors")
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []
    assert tree_digest(src) == before                 # the input is only read
    for out in ("grit", "back"):
        rep = verify(str(src) if out == "grit" else str(tmp_path / "grit"),
                     str(tmp_path / out))
        assert rep.ok and rep.checked == 2, rep.problems
    # what compressed-tensors itself reads back equals the source's decompress
    for module in ct.LAYERS:
        np.testing.assert_array_equal(
            ct.decompress(str(tmp_path / "back"), module).float().numpy(),
            ct.decompress(str(src), module).float().numpy())


def test_nvfp4_compressed_tensors_to_modelopt(ct, tmp_path):
    src = tmp_path / "src"
    ct.write_checkpoint(str(src), {"g": ("nvfp4-pack-quantized", ["Linear"])})
    rep = convert(str(src), str(tmp_path / "mo"), "modelopt")
    assert set(rep.counts) == {"bit-exact"}
    hq = json.loads((tmp_path / "mo" / "hf_quant_config.json").read_text())
    assert hq["quantization"]["quant_algo"] == "NVFP4"
    loaded = grit.load(str(tmp_path / "mo" / "model.safetensors"))
    for module in ct.LAYERS:
        assert loaded.recognised[module + ".weight"].convention == "modelopt/nvfp4"
    from grit.scan import scan
    found = {f.code for f in scan([str(tmp_path / "mo")]).findings}
    assert not found & {"S310", "S311", "S312", "S315", "S316", "S322", "S703", "S704"}, found
    assert verify(str(src), str(tmp_path / "mo")).ok


def test_a_refused_conversion_writes_nothing(ct, tmp_path):
    src = tmp_path / "src"
    ct.write_checkpoint(str(src), {"g": ("nvfp4-pack-quantized", ["Linear"])})
    with pytest.raises(grit.GritUsageError) as e:
        convert(str(src), str(tmp_path / "oss"), "gpt-oss")
    assert "2 array(s) cannot be written" in str(e.value) and "MXFP4" in str(e.value)
    assert sorted(os.listdir(tmp_path)) == ["src"]           # no output, no temporary
    with pytest.raises(grit.GritUsageError, match="exists"):
        convert(str(src), str(src), "grit")


def test_verify_finds_a_changed_output_and_a_changed_proof(ct, tmp_path):
    src = tmp_path / "src"
    ct.write_checkpoint(str(src), {"g": ("mxfp4-pack-quantized", ["Linear"])})
    dst = tmp_path / "out"
    convert(str(src), str(dst), "grit")
    # one scale byte of one weight changed in the output
    f = dst / "model.safetensors"
    data = bytearray(f.read_bytes())
    n = struct.unpack("<Q", bytes(data[:8]))[0]
    header = json.loads(bytes(data[8:8 + n]))
    [scale] = [k for k in header if k.endswith("up_proj.weight.grit.scale0")]
    data[8 + n + header[scale]["data_offsets"][0]] ^= 0x01
    f.write_bytes(bytes(data))
    rep = verify(str(src), str(dst))
    assert not rep.ok and any("up_proj" in p and "digest" in p for p in rep.problems)
    # a proof edited to agree with the changed output: its recorded SHA-256 no longer matches
    p = dst / PROOF_FILE
    doc = json.loads(p.read_text())
    p.write_text(json.dumps(doc).replace('"bit-exact"', '"bit-exact" '))
    assert any("SHA-256" in x for x in verify(str(src), str(dst)).problems)


def two_shards(folder, shape, seed):
    """Two shards of one MXFP4 weight (``shape``) and one norm each, in
    ``folder``; returns {file name: the weight's name}."""
    rng = np.random.default_rng(seed)
    folder.mkdir()
    wmap = {}
    for i in range(2):
        name = f"model-0000{i + 1}-of-00002.safetensors"
        a = grit.encode(rng.standard_normal(shape).astype(np.float32), grit.GRADE_MXFP4)
        grit.save(str(folder / name), {f"model.layers.{i}.mlp.down_proj.weight": a,
                                        f"model.layers.{i}.input_layernorm.weight":
                                            np.ones(shape[0], np.float32)})
        wmap[name] = f"model.layers.{i}.mlp.down_proj.weight"
    return wmap


def test_sharded_source_keeps_its_shards_and_writes_an_index(tmp_path):
    src = tmp_path / "src"
    wmap = {w: n for n, w in two_shards(src, (8, 64), 1).items()}
    (src / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wmap}))
    dst = tmp_path / "ct"
    rep = convert(str(src), str(dst), "compressed-tensors")
    assert rep.counts == {"bit-exact": 2}
    idx = json.loads((dst / "model.safetensors.index.json").read_text())["weight_map"]
    assert idx["model.layers.1.mlp.down_proj.weight_packed"] == "model-00002-of-00002.safetensors"
    q = json.loads((dst / "config.json").read_text())["quantization_config"]
    assert q["format"] == "mxfp4-pack-quantized"
    assert sorted(q["config_groups"]["group_0"]["targets"]) == [
        "model.layers.0.mlp.down_proj", "model.layers.1.mlp.down_proj"]
    assert verify(str(src), str(dst)).ok


def test_the_command_line(tmp_path):
    rng = np.random.default_rng(2)
    src = tmp_path / "m.safetensors"
    grit.save(str(src), {"x.weight": grit.encode(rng.standard_normal((4, 64)).astype(np.float32),
                                                  grit.GRADE_NVF4)})

    def run(*args):
        return subprocess.run([sys.executable, "-m", "grit.cli", *args], capture_output=True,
                              text=True, cwd=str(tmp_path), timeout=120)
    r = run("convert", str(src), str(tmp_path / "mo"), "--to", "modelopt", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdicts"] == {"bit-exact": 1}
    r = run("verify", str(src), str(tmp_path / "mo"))
    assert r.returncode == 0 and "the proof holds" in r.stdout
    r = run("convert", str(src), str(tmp_path / "oss"), "--to", "gpt-oss")
    assert r.returncode == 2 and r.stderr.startswith("error: gpt-oss: 1 array(s)")
    assert "\n  x.weight: gpt-oss cannot hold" in r.stderr
    r = run("convert", str(src), str(tmp_path / "mo"), "--to", "modelopt")
    assert r.returncode == 2 and "exists" in r.stderr


def test_the_quick_verdict_is_the_decode_comparison():
    """The fast path skips the decodes only where their result is known;
    wherever it answers, the general path answers the same."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    a = grit.encode(x, grit.GRADE_NVF4)
    same = grit.GritArray(a.descriptor, a.shape, list(a.planes))
    # the per-tensor scale one ulp away: the planes differ, the decodes differ
    s1 = np.frombuffer(bytes(a.planes[2]), "<u4") + np.uint32(1)
    nudged = grit.GritArray(a.descriptor, a.shape, [a.planes[0], a.planes[1], s1.tobytes(),
                                                     b""])
    # the same planes and grade along the other axis: the bytes agree, the decodes do not
    b = grit.encode(x, grit.GRADE_MXFP4)
    other_axis = grit.GritArray(grit.GRADE_MXFP4.descriptor(group_axis=0), b.shape,
                                list(b.planes))
    # a grade with another encode rule but the same decode projection (§4.5)
    rne = grit.GritArray(grit.GRADE_MXFP4_RNE.descriptor(group_axis=1), b.shape, list(b.planes))
    for p, q, want in ((a, same, "bit-exact"), (a, nudged, "scalar-rounded"),
                       (b, other_axis, "scalar-rounded"), (b, rne, "bit-exact")):
        assert quick_verdict(p, q) == verdict(p, q), (p.grade, q.grade)
        assert verdict(p, q)["verdict"] == want


def _spans(path) -> dict[str, tuple[int, int]]:
    """Each tensor's bytes in a safetensors file, (start, end), read from its
    header by hand."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return {k: (8 + n + e["data_offsets"][0], 8 + n + e["data_offsets"][1])
            for k, e in header.items() if k != "__metadata__"}


def test_verify_gives_back_every_tensors_pages(tmp_path, monkeypatch):
    """grit verify hands every byte of every tensor of both checkpoints —
    the weights' planes and the plain tensors, in each shard — to its
    file's map to be given back (MADV_DONTNEED) once it is checked, so its
    memory does not grow with what it has read."""
    src, dst = tmp_path / "src", tmp_path / "ct"
    two_shards(src, (16, 4096), 3)
    convert(str(src), str(dst), "compressed-tensors")
    given = given_back(monkeypatch)
    assert verify(str(src), str(dst)).ok
    files = [f for d in (src, dst) for f in sorted(d.glob("*.safetensors"))]
    assert len(files) == 4
    for f in files:
        back = given(f)
        spans = _spans(f)
        assert len(spans) >= 2
        for k, (a, b) in spans.items():
            assert back[a:b].all(), (f.name, k)


def test_verify_finds_a_changed_plain_tensor_and_a_changed_weight(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "ct"
    two_shards(src, (16, 4096), 4)
    convert(str(src), str(dst), "compressed-tensors")
    f = dst / "model-00002-of-00002.safetensors"
    spans = _spans(f)
    data = bytearray(f.read_bytes())
    data[spans["model.layers.1.input_layernorm.weight"][0]] ^= 0x80
    data[spans["model.layers.1.mlp.down_proj.weight_packed"][1] - 1] ^= 0x10
    f.write_bytes(bytes(data))
    problems = verify(str(src), str(dst)).problems
    assert "model.layers.1.input_layernorm.weight: the plain tensor is not copied as it " \
        "was" in problems
    assert any(p.startswith("model.layers.1.mlp.down_proj.weight: target digest")
               for p in problems)
    assert any(p.startswith("model.layers.1.mlp.down_proj.weight: the decodes give")
               for p in problems)
    assert not any("layers.0" in p for p in problems)
