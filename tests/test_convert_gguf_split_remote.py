"""A GGUF model in gguf-split's shards named by an https URL or an hf://
path of one shard (real servers on loopback): the named shard and its
siblings read once each into a spool beside the output, then converted as
the local shards are — byte for byte the unsplit file's conversion — and
grit verify reads them the same way; no spool is left.  The shards are
written as tests/test_convert_gguf_split.py writes them."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("gguf", reason="gguf-py is not installed")

from grit import convert as C  # noqa: E402
from grit.errors import GritUsageError  # noqa: E402
from http_server import Server  # noqa: E402
from test_convert_gguf_split import _llama_q8, _same_output, split  # noqa: E402
from test_scan_hub import REPO, hub, isolated  # noqa: E402,F401  (the Hub on loopback)


@pytest.fixture
def shards(tmp_path):
    src = str(tmp_path / "one.gguf")
    _llama_q8(src)
    C.convert(src, str(tmp_path / "want"), "compressed-tensors")
    return tmp_path / "want", split(src, tmp_path / "sh", 8)


def _files(paths: list[str]) -> dict[str, bytes]:
    out = {}
    for p in paths:
        with open(p, "rb") as f:
            out[os.path.basename(p)] = f.read()
    return out


def test_an_https_shard_converts_as_the_local_shards(shards, tmp_path, monkeypatch):
    want, paths = shards
    monkeypatch.setattr(C, "SPOOL_CHUNK", 1 << 12)
    s = Server()
    try:
        for n, data in _files(paths).items():
            s.files["/r/" + n] = data
        url = s.url("/r/" + os.path.basename(paths[1]))
        C.convert(url, str(tmp_path / "out"), "compressed-tensors")
        assert s.largest <= 1 << 12
        assert C.verify(url, str(tmp_path / "out")).ok
        del s.files["/r/" + os.path.basename(paths[2])]
        with pytest.raises(GritUsageError, match=os.path.basename(paths[2])):
            C.convert(url, str(tmp_path / "out2"), "compressed-tensors")
    finally:
        s.close()
    _same_output(tmp_path / "out", want)
    assert not os.path.exists(tmp_path / "out2")
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]


def test_an_hf_shard_converts_as_the_local_shards(shards, hub, tmp_path):  # noqa: F811
    want, paths = shards
    hub.commit(REPO, {f"sub/{n}": d for n, d in _files(paths).items()})
    src = f"hf://{REPO}/sub/{os.path.basename(paths[0])}"
    C.convert(src, str(tmp_path / "out"), "compressed-tensors")
    _same_output(tmp_path / "out", want)
    assert C.verify(src, str(tmp_path / "out")).ok
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]


def test_a_sibling_shard_that_stalls_is_a_remote_error_leaving_nothing(shards, tmp_path):
    """The named shard comes at once; a sibling shard's body trickles a byte
    every 0.2 s.  The read's deadline (the network policy's) ends it: a
    RemoteError, and no output, staging folder or spool left beside DST."""
    from grit.io.http import RemoteError, use_policy
    _, paths = shards
    s = Server()
    out = tmp_path / "out"
    out.mkdir()
    try:
        for n, data in _files(paths).items():
            s.files["/r/" + n] = data
        s.faults["/r/" + os.path.basename(paths[2])] = {"trickle": (1, 0.2)}
        with use_policy(timeout=0.5, retries=0), pytest.raises(RemoteError):
            C.convert(s.url("/r/" + os.path.basename(paths[0])), str(out / "ct"),
                      "compressed-tensors")
    finally:
        s.close()
    assert list(out.iterdir()) == []
