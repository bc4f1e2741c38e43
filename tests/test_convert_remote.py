"""grit convert from remote checkpoints: an https:// file and an hf://
repository (real servers on loopback), read by ranged requests — the
check before writing from the headers and small tensors, then each byte of
a model file once, in bounded ranges — with the files beside it copied, and
proved against the local copy of the same bytes."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import grit
from grit.convert import convert, verify
from grit.io.recognise import SMALL_MAX
from grit.io.hub import PREFIX
from http_server import Server
from test_convert import two_shards
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


def test_an_https_file_converts_as_the_same_local_file(tmp_path, monkeypatch):
    d = _checkpoint(tmp_path)
    data = (d / "model.safetensors").read_bytes()
    monkeypatch.setattr(grit.convert, "SPOOL_CHUNK", 256)
    s = Server()
    try:
        s.files["/m/model.safetensors"] = data
        s.files["/m/config.json"] = (d / "config.json").read_bytes()
        s.files["/m/tokenizer.json"] = b'{"model": {}}'
        url = s.url("/m/model.safetensors")
        rep = convert(url, str(tmp_path / "ct"), "compressed-tensors")
        assert rep.counts == {"bit-exact": 1}
        # no response was the whole file: the header and small tensors, then ranges of
        # at most SPOOL_CHUNK
        assert 0 < s.largest < len(data)
    finally:
        s.close()
    assert (tmp_path / "ct" / "tokenizer.json").read_bytes() == b'{"model": {}}'
    assert not (tmp_path / "ct" / "generation_config.json").exists()
    cfg = json.loads((tmp_path / "ct" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]          # the remote config.json
    assert cfg["quantization_config"]["format"] == "mxfp4-pack-quantized"
    local = convert(str(d), str(tmp_path / "ct-local"), "compressed-tensors")
    assert local.proof["weights"] == rep.proof["weights"]
    # the same file: the data section placed alike (from the image)
    assert (tmp_path / "ct" / "model.safetensors").read_bytes() == \
        (tmp_path / "ct-local" / "model.safetensors").read_bytes()
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
    with pytest.raises(grit.GritUsageError, match="no such file or folder in the repository"):
        convert(f"hf://{REPO}/nowhere", str(tmp_path / "x"), "grit")


def test_a_folder_of_an_hf_repository_converts_alone(hub, tmp_path):  # noqa: F811
    """hf://ORG/REPO/sub: the model files directly in sub/ (not the root's, not
    a deeper folder's), and the files beside them in sub/."""
    d = _checkpoint(tmp_path)
    st = (d / "model.safetensors").read_bytes()
    hub.commit(REPO, {"sub/model.safetensors": st, "sub/config.json": (d / "config.json")
                      .read_bytes(), "sub/tokenizer.json": b'{"v": 1}',
                      "root.safetensors": b"not read", "sub/deeper/x.safetensors": b"nor this",
                      "sub/deeper/notes.txt": b"nor this"})
    rep = convert(f"hf://{REPO}/sub", str(tmp_path / "g"), "grit")
    assert [w["file"] for w in rep.proof["weights"]] == ["model.safetensors"]
    assert sorted(p.name for p in (tmp_path / "g").iterdir()) == [
        "config.json", "grit-proof.json", "model.safetensors", "tokenizer.json"]
    assert (tmp_path / "g" / "tokenizer.json").read_bytes() == b'{"v": 1}'


def test_what_src_names_is_told_for_every_kind_of_location(hub, tmp_path):  # noqa: F811
    """A path naming nothing, a file that is not safetensors, a folder with no
    model file: one usage error each, saying which, locally, by URL and on
    the Hub."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    hub.commit(REPO, {"docs/readme.md": b"x", "config.json": b"{}"})
    s = Server()
    try:
        s.files["/m/model.bin"] = b"x"
        cases = [(str(tmp_path / "nothing"), "no such file or directory"),
                 (str(tmp_path / "notes.txt"), r"reads safetensors checkpoints \(a "
                  r"\.safetensors file or a folder of them\)$"),
                 (str(tmp_path / "empty"), "no .safetensors files under this directory"),
                 (s.url("/m/model.bin"), "by URL one file: name each shard, or use hf://"),
                 (f"hf://{REPO}/nowhere", "no such file or folder in the repository"),
                 (f"hf://{REPO}/docs", "no .safetensors files in this repository folder"),
                 (f"hf://{REPO}/config.json", r"a folder of them\)$")]
        for src, why in cases:
            with pytest.raises(grit.GritUsageError, match=why):
                convert(src, str(tmp_path / "out"), "grit")
            assert not (tmp_path / "out").exists()
    finally:
        s.close()


def test_a_sharded_hf_repository_is_read_once_and_its_files_beside_are_copied(
        hub, tmp_path):  # noqa: F811
    """Each model file's bytes are sent once (the check before writing reads
    headers and small tensors only), and the tokenizer and generation
    config beside the shards are in the output as they were."""
    d = tmp_path / "local"
    names = two_shards(d, (64, 2 ** 16), 6)            # 2 MiB of codes: not a small tensor
    files = {n: (d / n).read_bytes() for n in names}
    beside = {"config.json": json.dumps({"architectures": ["LlamaForCausalLM"]}).encode(),
              "tokenizer.json": b'{"version": "1.0"}', "tokenizer_config.json": b"{}",
              "special_tokens_map.json": b'{"bos_token": "<s>"}',
              "generation_config.json": b'{"do_sample": true}',
              "chat_template.jinja": b"{{ messages }}"}
    hub.commit(REPO, {**files, **beside})
    hub.reset()
    rep = convert(f"hf://{REPO}", str(tmp_path / "ct"), "compressed-tensors")
    assert rep.counts == {"bit-exact": 2}
    for name, data in files.items():
        sent = [(a, b + 1) for p, a, b in hub.ranges if p.endswith(name)]
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
        covered = np.zeros(len(data), np.int64)
        for a, b in sent:
            covered[a:b] += 1
        assert covered.min() == 1                       # every byte sent
        large = [(8 + n + e["data_offsets"][0], 8 + n + e["data_offsets"][1])
                 for k, e in header.items() if k != "__metadata__"
                 and e["data_offsets"][1] - e["data_offsets"][0] > SMALL_MAX]
        assert large
        for a, b in large:      # a large tensor's bytes: once, but for the header's
            a = max(a, PREFIX)  # request (the file's first PREFIX bytes), read again
            assert covered[a:b].max() == 1, (name, a, b)
    for n, data in beside.items():
        if n != "config.json":
            assert (tmp_path / "ct" / n).read_bytes() == data, n
    local = convert(str(d), str(tmp_path / "ct-local"), "compressed-tensors")
    assert local.proof["weights"] == rep.proof["weights"]
    for n in names:     # the same files: the data section placed alike (from the image)
        assert (tmp_path / "ct" / n).read_bytes() == (tmp_path / "ct-local" / n).read_bytes()
    assert verify(str(d), str(tmp_path / "ct")).ok


def test_verify_reads_a_remote_source_once_through_a_spool(hub, tmp_path):  # noqa: F811
    """grit verify of an hf:// source: each model file's bytes sent once (but
    for the first PREFIX bytes, which opening the file reads), one file at
    a time into a spool beside the output, none left after; a changed
    output still fails."""
    d = tmp_path / "local"
    names = two_shards(d, (64, 2 ** 14), 8)
    files = {n: (d / n).read_bytes() for n in names}
    hub.commit(REPO, {**files, "config.json": b'{"architectures": ["LlamaForCausalLM"]}'})
    out = tmp_path / "out"
    convert(str(d), str(out), "compressed-tensors")
    hub.reset()
    assert verify(f"hf://{REPO}", str(out)).ok
    for name, data in files.items():
        covered = np.zeros(len(data), np.int64)
        for p, a, b in hub.ranges:
            if p.endswith(name):
                covered[a:b + 1] += 1
        assert covered.min() == 1 and covered[PREFIX:].max() == 1, name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local", "out"]   # no spool left
    f = out / sorted(names)[0]
    data = bytearray(f.read_bytes())
    data[-1] ^= 0x01
    f.write_bytes(bytes(data))
    assert not verify(f"hf://{REPO}", str(out)).ok
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local", "out"]


def test_verify_of_a_remote_output_spools_beside_the_proof(hub, tmp_path,  # noqa: F811
                                                         monkeypatch):
    """grit verify of an output on a server (an hf:// repository; an https
    file), named with --proof: its files read into a spool beside the proof
    (not beside the output, which is no local folder), one at a time, each
    deleted once its tensors are checked, none left after; a changed output
    byte still fails."""
    d = tmp_path / "local"
    names = two_shards(d, (64, 2 ** 12), 8)
    out = tmp_path / "out"
    convert(str(d), str(out), "compressed-tensors")
    proof = tmp_path / "keep" / "grit-proof.json"
    proof.parent.mkdir()
    proof.write_bytes((out / "grit-proof.json").read_bytes())
    files = {p.name: p.read_bytes() for p in out.iterdir()}
    hub.commit(REPO, files)
    held = []                  # the output's files on disk as each is read into the spool
    real = grit.convert.spooled

    def spooled(f, folder):
        path = real(f, folder)
        if folder.endswith("dst"):
            held.append(sorted(n for n in os.listdir(folder) if n.endswith(".safetensors")))
        return path
    monkeypatch.setattr(grit.convert, "spooled", spooled)
    rep = verify(str(d), f"hf://{REPO}", proof=str(proof))
    assert rep.ok and rep.checked == 2, rep.problems
    assert held == [[n] for n in sorted(names)]           # one at a time, each once
    with pytest.raises(grit.GritUsageError, match="name it with --proof"):
        verify(str(d), f"hf://{REPO}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep", "local", "out"]
    assert sorted(p.name for p in proof.parent.iterdir()) == ["grit-proof.json"]
    first = sorted(names)[0]
    bad = bytearray(files[first])
    bad[-1] ^= 0x01
    hub.commit(REPO, {first: bytes(bad)})
    assert not verify(str(d), f"hf://{REPO}", proof=str(proof)).ok
    # one file by URL (a server lists no folder): the weights of that file
    one = tmp_path / "one"
    one.mkdir()
    w = np.linspace(-1, 1, 4096, dtype=np.float32).reshape(16, 256)
    grit.save(str(one / "model.safetensors"),
              {"model.layers.0.mlp.down_proj.weight": grit.encode(w, grit.GRADE_MXFP4)})
    out1 = tmp_path / "out1"
    convert(str(one), str(out1), "compressed-tensors")
    s = Server()
    try:
        s.files["/o/model.safetensors"] = (out1 / "model.safetensors").read_bytes()
        rep = verify(str(one), s.url("/o/model.safetensors"), proof=str(out1 / "grit-proof.json"))
        assert rep.ok and rep.checked == 1, rep.problems
    finally:
        s.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep", "local", "one", "out", "out1"]


def test_a_remote_compressed_tensors_file_converts_and_verifies(ct, tmp_path):
    """A model file without GRIT metadata by URL: recognised from the
    config.json beside it, in the check before writing and in the spool
    (which holds a copy of that config.json), so the output is the local
    conversion's and grit verify of the URL reads it once more."""
    d = tmp_path / "local"
    ct.write_checkpoint(str(d), {"g": ("nvfp4-pack-quantized", ["Linear"])})
    s = Server()
    try:
        for p in d.iterdir():
            s.files[f"/m/{p.name}"] = p.read_bytes()
        url = s.url("/m/model.safetensors")
        rep = convert(url, str(tmp_path / "mo"), "modelopt")
        assert verify(url, str(tmp_path / "mo")).ok
    finally:
        s.close()
    local = convert(str(d), str(tmp_path / "mo-local"), "modelopt")
    assert rep.counts == local.counts and set(rep.counts) == {"bit-exact"}
    assert rep.proof["weights"] == local.proof["weights"]
    for n in ("model.safetensors", "hf_quant_config.json", "grit-proof.json"):
        assert (tmp_path / "mo" / n).read_bytes() == (tmp_path / "mo-local" / n).read_bytes()
    assert sorted(p.name for p in (tmp_path / "mo").iterdir()) == \
        sorted(p.name for p in (tmp_path / "mo-local").iterdir())


def test_a_server_stalling_in_the_spool_is_a_remote_error_leaving_nothing(tmp_path,
                                                                          monkeypatch):
    """The header and small tensors come at once; then the model file's
    ranged reads (the spool) trickle a byte every 0.2 s.  The body's
    deadline (timeout + bytes / min_rate) ends the read: a RemoteError, no
    output folder, nothing staged or spooled left beside it."""
    from grit.io.http import RemoteError, use_policy
    d = _checkpoint(tmp_path)
    monkeypatch.setattr(grit.convert, "SPOOL_CHUNK", 256)
    s = Server()
    real = grit.convert.spool_into

    def stalling(path, src):
        s.faults["/m/model.safetensors"] = {"trickle": (1, 0.2)}
        return real(path, src)
    monkeypatch.setattr(grit.convert, "spool_into", stalling)
    out = tmp_path / "out"
    out.mkdir()
    try:
        s.files["/m/model.safetensors"] = (d / "model.safetensors").read_bytes()
        s.files["/m/config.json"] = (d / "config.json").read_bytes()
        with use_policy(timeout=0.5, retries=0), pytest.raises(RemoteError):
            convert(s.url("/m/model.safetensors"), str(out / "ct"), "compressed-tensors")
    finally:
        s.close()
    assert "trickle" in s.faults["/m/model.safetensors"]      # the spool was reached
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("fault", [{"trickle": (1, 0.2)}, {"truncate": 100}],
                         ids=["stalls", "dies"])
def test_verify_of_an_output_whose_server_fails_in_the_spool(tmp_path, monkeypatch, fault):
    """grit verify of an output by URL: its header and small tensors come
    at once; then the file's spool trickles a byte every 0.2 s (the read's
    deadline ends it) or is cut short: a RemoteError within one request's
    deadline, and no spool left beside the proof."""
    import time
    from grit.io.http import RemoteError, use_policy
    d = _checkpoint(tmp_path)
    out = tmp_path / "out"
    convert(str(d), str(out), "compressed-tensors")
    monkeypatch.setattr(grit.convert, "SPOOL_CHUNK", 256)
    s = Server()
    real = grit.convert.spool_into
    began = []

    def failing(path, src):
        s.faults["/o/model.safetensors"] = dict(fault)
        began.append(time.monotonic())
        return real(path, src)
    monkeypatch.setattr(grit.convert, "spool_into", failing)
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "grit-proof.json").write_bytes((out / "grit-proof.json").read_bytes())
    try:
        s.files["/o/model.safetensors"] = (out / "model.safetensors").read_bytes()
        with use_policy(timeout=0.5, retries=0) as policy, pytest.raises(RemoteError):
            verify(str(d), s.url("/o/model.safetensors"), proof=str(keep / "grit-proof.json"))
        assert time.monotonic() - began[0] < policy.timeout + 256 / policy.min_rate + 3
    finally:
        s.close()
    assert sorted(p.name for p in keep.iterdir()) == ["grit-proof.json"]   # no spool left
