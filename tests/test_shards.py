"""Checkpoint-wide checks of sharded safetensors checkpoints (grit.scan.shards):
the index's weight_map against every shard header, metadata.total_size
against the tensors' bytes, short shards counted over the checkpoint,
duplicated tensors, incomplete shard series.  Every checkpoint is written by
the official safetensors library (safetensors.numpy) with an index written
as transformers / huggingface_hub write it, then broken the way published
checkpoints were; the finding code, severity and exit code are asserted."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from grit.cli import main

st = pytest.importorskip("safetensors.numpy")

RNG = np.random.default_rng(11)
N = 3


def _shard_name(i: int, n: int = N) -> str:
    return f"model-{i:05d}-of-{n:05d}.safetensors"


def _tensors() -> list[dict[str, np.ndarray]]:
    """Three shards of a small two-layer model, as save_pretrained splits it."""
    return [
        {"model.embed_tokens.weight": RNG.standard_normal((64, 32)).astype(np.float32),
         "model.layers.0.self_attn.q_proj.weight": RNG.standard_normal((32, 32))
         .astype(np.float16)},
        {"model.layers.0.mlp.up_proj.weight": RNG.standard_normal((64, 32)).astype(np.float16),
         "model.layers.0.mlp.down_proj.weight": RNG.standard_normal((32, 64)).astype(np.float16),
         "model.layers.1.input_layernorm.weight": np.ones(32, np.float32)},
        {"model.layers.1.mlp.up_proj.weight": RNG.standard_normal((64, 32)).astype(np.float16),
         "lm_head.weight": RNG.standard_normal((64, 32)).astype(np.float32)},
    ]


def write_checkpoint(d, shards=None, *, index=True):
    """config.json, the shards and model.safetensors.index.json in ``d``."""
    shards = _tensors() if shards is None else shards
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                   "hidden_size": 32, "num_hidden_layers": 2, "torch_dtype": "float16"}, f)
    weight_map, total = {}, 0
    for i, ts in enumerate(shards, 1):
        st.save_file(ts, os.path.join(d, _shard_name(i, len(shards))),
                     metadata={"format": "pt"})
        for n, a in ts.items():
            weight_map[n] = _shard_name(i, len(shards))
            total += a.nbytes
    if index:
        write_index(d, weight_map, total)
    return weight_map, total


def write_index(d, weight_map, total):
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)


def scan(*paths):
    r = CliRunner().invoke(main, ["scan", "--json", *map(str, paths)])
    assert "Traceback" not in r.output, r.output
    doc = json.loads(r.output)
    return r.exit_code, doc


def codes(doc):
    return sorted((f["code"], f["tensor"]) for f in doc["findings"])


def only(doc, code):
    return [f for f in doc["findings"] if f["code"] == code]


def test_a_clean_checkpoint_scans_clean_however_it_is_named(tmp_path):
    d = tmp_path / "ckpt"
    write_checkpoint(d)
    for arg in (d, d / "model.safetensors.index.json", d / _shard_name(2)):
        rc, doc = scan(arg)
        assert (rc, doc["findings"]) == (0, []), arg
    rc, doc = scan(d / "model.safetensors.index.json")
    assert sorted(os.path.basename(f["path"]) for f in doc["files"]) == \
        [_shard_name(i) for i in (1, 2, 3)]


def test_a_shard_the_index_names_that_is_not_there(tmp_path):
    d = tmp_path / "ckpt"
    write_checkpoint(d)
    os.remove(d / _shard_name(3))
    rc, doc = scan(d)
    (f,) = only(doc, "S151")
    assert f["file"].endswith("model.safetensors.index.json") and f["severity"] == 1
    assert f"maps 2 tensors to '{_shard_name(3)}', which is not there" in f["message"]
    assert not only(doc, "S157")            # named once, not again as a series member
    assert rc == 1


def test_index_entries_missing_from_their_shard_and_shard_tensors_not_in_the_index(tmp_path):
    d = tmp_path / "ckpt"
    wm, total = write_checkpoint(d)
    wm["model.layers.1.self_attn.o_proj.weight"] = _shard_name(2)      # no shard holds it
    wm["lm_head.weight"] = _shard_name(1)                              # shard 3 holds it
    del wm["model.layers.1.input_layernorm.weight"]                    # listed nowhere
    write_index(d, wm, total)
    rc, doc = scan(d)
    s152 = {f["tensor"]: f for f in only(doc, "S152")}
    assert set(s152) == {"model.layers.1.self_attn.o_proj.weight", "lm_head.weight"}
    assert "no shard holds it" in s152["model.layers.1.self_attn.o_proj.weight"]["message"]
    assert f"it is in '{_shard_name(3)}'" in s152["lm_head.weight"]["message"]
    (s153,) = only(doc, "S153")
    assert s153["tensor"] == "model.layers.1.input_layernorm.weight"
    assert s153["file"].endswith(_shard_name(2))
    assert all(f["severity"] == 1 for f in s152.values()) and s153["severity"] == 1
    assert rc == 1


def test_a_tensor_in_two_shards(tmp_path):
    d = tmp_path / "ckpt"
    shards = _tensors()
    shards[2]["model.embed_tokens.weight"] = shards[0]["model.embed_tokens.weight"] * 2
    write_checkpoint(d, shards)
    rc, doc = scan(d)
    (f,) = only(doc, "S154")
    assert f["tensor"] == "model.embed_tokens.weight" and f["severity"] == 1
    assert [os.path.basename(p) for p in f["detail"]["shards"]] == [_shard_name(1),
                                                                   _shard_name(3)]
    assert rc == 1
    # without the index too
    os.remove(d / "model.safetensors.index.json")
    rc, doc = scan(d)
    assert [f["tensor"] for f in only(doc, "S154")] == ["model.embed_tokens.weight"] and rc == 1


def test_total_size_differs_from_the_tensor_bytes(tmp_path):
    d = tmp_path / "ckpt"
    wm, total = write_checkpoint(d)
    write_index(d, wm, total + 4096)
    rc, doc = scan(d)
    (f,) = doc["findings"]
    assert f["code"] == "S155" and f["severity"] == 3
    assert f["detail"]["expected"] == total and f["detail"]["actual"] == total + 4096
    assert rc == 3


def test_short_shards_are_counted_over_the_checkpoint(tmp_path):
    d = tmp_path / "ckpt"
    shards = _tensors()
    write_checkpoint(d, shards)
    # shard 1 loses 100 bytes (its last tensor cut), shard 3 loses 600 (both cut)
    for i, cut in ((1, 100), (3, 600)):
        p = d / _shard_name(i)
        os.truncate(p, os.path.getsize(p) - cut)
    rc, doc = scan(d)
    (f,) = only(doc, "S156")
    assert f["severity"] == 1 and f["tensor"] is None
    # it names a file that exists: the first short shard (not "model.safetensors",
    # the checkpoint's name, which no file has here)
    assert f["file"] == str(d / _shard_name(1)) and os.path.isfile(f["file"])
    assert f["detail"]["checkpoint"] == str(d / "model.safetensors.index.json")
    # without the index the checkpoint is named by a file no one wrote
    os.remove(d / "model.safetensors.index.json")
    (g,) = only(scan(d)[1], "S156")
    assert g["file"] == f["file"] and g["detail"]["checkpoint"] == str(d / "model.safetensors")
    assert not os.path.exists(g["detail"]["checkpoint"])
    assert f["message"].startswith("2 of 3 shards are short: 700 bytes missing in all")
    per = {x["shard"]: (x["missing"], x["tensors"]) for x in f["detail"]["shards"]}
    assert per[_shard_name(1)][0] == 100 and per[_shard_name(3)][0] == 600
    # the tensor cut is the one whose bytes end the file (read from the raw header)
    for i in (1, 3):
        raw = (d / _shard_name(i)).read_bytes()
        hdr = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
        last = max((k for k in hdr if k != "__metadata__"),
                   key=lambda k: hdr[k]["data_offsets"][1])
        assert per[_shard_name(i)][1] == [last]
    # each shard's own per-tensor findings are the S156's consequences: one root
    # cause, one finding (the summary counts it once)
    assert not only(doc, "S127") and doc["summary"]["findings"] == 1
    cons = f["consequences"]
    assert {x["code"] for x in cons} == {"S127"}
    assert {os.path.basename(x["file"]) for x in cons} == {_shard_name(1), _shard_name(3)}
    assert rc == 1


def test_trailing_bytes_and_gaps_stay_per_shard_findings(tmp_path):
    d = tmp_path / "ckpt"
    write_checkpoint(d)
    with open(d / _shard_name(2), "ab") as f:
        f.write(bytes(64))
    rc, doc = scan(d)
    assert codes(doc) == [("S129", None)] and rc == 1
    assert doc["findings"][0]["file"].endswith(_shard_name(2))


def test_a_shard_series_missing_a_member_without_an_index(tmp_path):
    d = tmp_path / "ckpt"
    write_checkpoint(d, index=False)
    os.remove(d / _shard_name(2))
    rc, doc = scan(d)
    (f,) = only(doc, "S157")
    assert f"1 of the 3 shards of the series are not in the folder: '{_shard_name(2)}'" in \
        f["message"]
    assert f["severity"] == 1 and rc == 1


def test_members_disagreeing_on_the_count(tmp_path):
    d = tmp_path / "ckpt"
    write_checkpoint(d, index=False)
    os.rename(d / _shard_name(3), d / "model-00003-of-00004.safetensors")
    rc, doc = scan(d)
    assert any("disagree on how many" in f["message"] for f in only(doc, "S157")) and rc == 1


@pytest.mark.parametrize("text,why", [
    ("{not json", "not a JSON document"),
    ('{"weight_map": [1, 2]}', "weight_map"),
    ('{"weight_map": {"a": "../../etc/passwd"}}', "not a file name"),
    ('{"metadata": {"total_size": "12"}, "weight_map": {}}', "not a byte count"),
    ('{"metadata": {"total_size": -1}, "weight_map": {}}', "not a byte count"),
    ('{"weight_map": {"a": ".."}}', "not a file name"),
    ('{"weight_map": {"a": "x\\u0000.safetensors"}}', "not a file name"),
    ('{"weight_map": {"a": "\\udc80.safetensors"}}', "not a file name"),
    ('[1, 2, 3]', "not a JSON object"),
    ('\xff\xfe', "not a JSON document"),
])
def test_an_index_that_cannot_be_read(tmp_path, text, why):
    d = tmp_path / "ckpt"
    write_checkpoint(d)
    (d / "model.safetensors.index.json").write_text(text)
    for arg in (d, d / "model.safetensors.index.json"):
        rc, doc = scan(arg)
        (f,) = only(doc, "S150")
        assert why in f["message"] and f["severity"] == 1 and rc == 1


def test_an_index_may_name_grit_tensors_or_their_planes(tmp_path):
    import grit
    d = tmp_path / "g"
    d.mkdir()
    x = RNG.standard_normal((8, 64)).astype(np.float32)
    a = grit.encode(x, grit.GRADE_MXFP4)
    grit.save(str(d / _shard_name(1, 2)), {"layers.0.w": a})
    grit.save(str(d / _shard_name(2, 2)), {"layers.1.w": a, "norm": x[0]})
    planes = st.load_file(str(d / _shard_name(1, 2)))
    for wm in ({"layers.0.w": _shard_name(1, 2), "layers.1.w": _shard_name(2, 2),
                "norm": _shard_name(2, 2)},
               {**{n: _shard_name(1, 2) for n in planes}, "layers.1.w": _shard_name(2, 2),
                "norm": _shard_name(2, 2)}):
        write_index(d, wm, 0)
        rc, doc = scan(d)
        assert codes(doc) == [("S155", None)] and rc == 3     # total_size 0: only that
    # a GRIT tensor the index leaves out is named once, by its GRIT name
    write_index(d, {"layers.1.w": _shard_name(2, 2), "norm": _shard_name(2, 2)}, 0)
    rc, doc = scan(d)
    assert [(f["tensor"], os.path.basename(f["file"])) for f in only(doc, "S153")] == \
        [("layers.0.w", _shard_name(1, 2))] and rc == 1
