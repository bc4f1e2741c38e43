"""grit info over https:// (tests/http_server.py) and hf://
(tests/hub_server.py, through huggingface_hub): the rows and totals of a
sharded compressed-tensors checkpoint served remotely are those of the same
files read locally, and what moves is each shard's header and the small
tensors the conventions' recognisers read (an NVFP4 global scale, a packed
weight's shape), never a weight's planes."""
from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("huggingface_hub")
pytest.importorskip("gguf")

from grit.info import info  # noqa: E402

from http_server import Server  # noqa: E402
from test_info import sharded  # noqa: E402,F401 - the checkpoint fixture
from test_scan_hub import hub, isolated  # noqa: E402,F401 - the Hub fixtures


def _folder_files(d: str) -> dict[str, bytes]:
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}


def _small_reads(files: dict[str, bytes]) -> dict[tuple[str, int], int]:
    """The small tensors the recognisers read (an NVFP4 global scale, a
    packed weight's shape): (file, offset) -> bytes."""
    out = {}
    for n, b in files.items():
        if not n.endswith(".safetensors"):
            continue
        h = 8 + int.from_bytes(b[:8], "little")
        for k, e in json.loads(b[8:h]).items():
            if k.endswith(("weight_global_scale", "weight_shape")):
                a, z = e["data_offsets"]
                out[n, h + a] = z - a
    return out


def _same_rows(remote, local, prefix: str, folder: str):
    def norm(r):
        return {**r.to_dict(), "file": r.file.replace(prefix, folder)}
    assert [norm(r) for r in remote.tensors] == [r.to_dict() for r in local.tensors]
    assert remote.totals == local.totals and remote.by_type == local.by_type


def test_https_equals_local_and_reads_headers(sharded):  # noqa: F811
    files = _folder_files(sharded)
    s = Server()
    try:
        for n, b in files.items():
            s.files[f"/ckpt/{n}"] = b
        s.body_bytes = s.requests = 0
        remote = info(s.url("/ckpt/model.safetensors.index.json"), cache=False)
        _same_rows(remote, info(sharded), s.url("/ckpt"), sharded)
        shards = [n for n in files if n.endswith(".safetensors")]
        headers = sum(8 + int.from_bytes(files[n][:8], "little") for n in shards)
        small = sum(_small_reads(files).values())
        side = len(files["config.json"]) + len(files["model.safetensors.index.json"])
        # each file a size probe (at most one byte); each shard its header and the
        # small tensors; the index and config.json: nothing of any weight's planes
        assert headers + small + side <= s.body_bytes <= headers + small + side + len(files)
        assert all(s.asked[f"/ckpt/{n}"] <= 4 for n in shards)   # probe, length, header, small
        assert s.body_bytes < sum(len(files[n]) for n in shards) // 2
    finally:
        s.close()


def test_hf_equals_local_and_reads_headers(sharded, hub):  # noqa: F811
    files = _folder_files(sharded)
    hub.commit("org/ckpt", files)
    hub.reset()
    remote = info("hf://org/ckpt")
    _same_rows(remote, info(sharded), "hf://org/ckpt@" + _sha(remote), sharded)
    shards = {n: b for n, b in files.items() if n.endswith(".safetensors")}
    # the length and the header of each shard, and the small tensors: each once
    want = sorted([(n, 0, 7) for n in shards]
                  + [(n, 8, 8 + int.from_bytes(b[:8], "little") - 1) for n, b in shards.items()]
                  + [(n, a, a + k - 1) for (n, a), k in _small_reads(files).items()])
    assert sorted(r for r in hub.ranges if r[0] in shards) == want
    assert hub.model_bytes() < sum(map(len, shards.values())) // 2


def _sha(got) -> str:
    """The commit an hf:// info read at (its files are named with it)."""
    return got.files[0].path.split("@", 1)[1].split("/", 1)[0]


