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
        # through the header cache, a second look moves each file's probe byte alone
        index = s.url("/ckpt/model.safetensors.index.json")
        assert info(index).tensors == remote.tensors
        s.body_bytes = 0
        assert info(index).tensors == remote.tensors
        assert s.body_bytes <= len(files)
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




def test_https_gguf_equals_local_and_reads_the_header(tmp_path):
    """A GGUF larger than the reader's first header window: the header's
    window moves, no tensor block past it."""
    import numpy as np  # noqa: PLC0415
    import gguf  # noqa: PLC0415

    from _support import write_gguf  # noqa: PLC0415
    from grit.io.gguf_file import FIRST_WINDOW, read_gguf  # noqa: PLC0415
    T = gguf.GGMLQuantizationType
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 4096)).astype(np.float32)
    path = write_gguf(tmp_path / "big.gguf", {
        "norm": (x[0], None), "q8": (gguf.quants.quantize(x, T.Q8_0), T.Q8_0),
        "q4k": (rng.integers(0, 256, (64, 4096 // 256 * 144), dtype=np.uint8), T.Q4_K)})
    data = open(path, "rb").read()
    assert len(data) > 4 * FIRST_WINDOW
    s = Server()
    try:
        s.files["/big.gguf"] = data
        s.body_bytes = 0
        remote = info(s.url("/big.gguf"), cache=False)
        _same_rows(remote, info(path), s.url("/big.gguf"), path)
        # the size probe, the 8 bytes the container is sniffed by, the header's first
        # window (the reader's unit: the header ends inside it here)
        assert s.body_bytes <= 1 + 8 + max(read_gguf(path).data_start, FIRST_WINDOW) \
            < len(data) // 4
    finally:
        s.close()


GEMMA = os.path.join(os.environ.get("GRIT_REAL_CHECKPOINT_CACHE", os.path.join(
    os.path.expanduser("~"), ".cache", "grit-real-checkpoint")), "gemma-3-270m-q4_k_m.gguf")


@pytest.mark.skipif(not os.path.exists(GEMMA), reason="the gemma GGUF is not cached")
def test_gemma_over_https_equals_local_and_reads_its_header():
    from grit.io import gguf_file as GF  # noqa: PLC0415
    s = Server()
    try:
        with open(GEMMA, "rb") as fh:
            s.files["/gemma.gguf"] = fh.read()
        s.body_bytes = 0
        remote = info(s.url("/gemma.gguf"), cache=False)
        _same_rows(remote, info(GEMMA), s.url("/gemma.gguf"), GEMMA)
        data_start = GF.read_gguf(GEMMA).data_start
        assert s.body_bytes <= 9 + data_start + GF.MAX_WINDOW < os.path.getsize(GEMMA) / 10
    finally:
        s.close()


def test_hf_gguf_equals_local(tmp_path, hub):  # noqa: F811
    import numpy as np  # noqa: PLC0415
    import gguf  # noqa: PLC0415

    from _support import write_gguf  # noqa: PLC0415
    T = gguf.GGMLQuantizationType
    x = np.random.default_rng(3).standard_normal((8, 512)).astype(np.float32)
    path = write_gguf(tmp_path / "m.gguf", {"n": (x[0], None),
                                            "q": (gguf.quants.quantize(x, T.Q8_0), T.Q8_0)})
    hub.commit("org/gg", {"m.gguf": open(path, "rb").read()})
    remote = info("hf://org/gg/m.gguf")
    _same_rows(remote, info(path), remote.files[0].path, path)
    assert [r.ecosystem for r in remote.tensors] == ["F32", "Q8_0"]
