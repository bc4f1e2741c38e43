"""grit.io.location.Location: a local folder, the same files over HTTP
(tests/http_server.py) and in a Hub repository (tests/hub_server.py) answer
alike — a sibling's name, whether a file is there, its first bytes, its
byte source's bytes —, each checked against the bytes put there; a folder
lists where its kind can list, and an https URL says it cannot."""
from __future__ import annotations

import contextlib
import json
import os

import pytest

pytest.importorskip("huggingface_hub")

from grit.errors import GritUsageError  # noqa: E402
from grit.io.location import Location  # noqa: E402

from http_server import Server  # noqa: E402
from test_scan_hub import hub, isolated  # noqa: E402,F401 - the Hub fixtures

REPO = "org/where"
FILES = {
    "config.json": json.dumps({"model_type": "llama", "hidden_size": 64}).encode(),
    "model.safetensors": bytes(range(256)) * 5 + b"tail",
    "empty.json": b"",
}
MODEL = "model.safetensors"


@contextlib.contextmanager
def laid_out(hub, tmp_path, repo: str, files: dict[str, bytes]):  # noqa: F811
    """The files ``files`` (by path relative to the root) three ways: under
    ``tmp_path/ckpt``, over HTTP under ``/ckpt/`` and in the Hub repository
    ``repo``; yields (the folder, the server, the commit)."""
    d = tmp_path / "ckpt"
    for n, b in files.items():
        (d / n).parent.mkdir(parents=True, exist_ok=True)
        (d / n).write_bytes(b)
    s = Server()
    for n, b in files.items():
        s.files[f"/ckpt/{n}"] = b
    try:
        yield d, s, hub.commit(repo, files)
    finally:
        s.close()


@pytest.fixture
def kinds(hub, tmp_path):  # noqa: F811
    """name -> (the model file's path, the folder the names resolve in)."""
    with laid_out(hub, tmp_path, REPO, FILES) as (d, s, sha):
        yield {"local": (os.path.join(d, MODEL), str(d)),
               "http": (s.url(f"/ckpt/{MODEL}"), s.url("/ckpt")),
               "hub": (f"hf://{REPO}@{sha}/{MODEL}", f"hf://{REPO}@{sha}")}


def test_the_three_kinds_agree(kinds):
    for kind, (model, folder) in kinds.items():
        loc = Location.of(model)
        assert loc.kind == kind and loc.remote == (kind != "local")
        assert loc.folder == folder
        sep = os.sep if kind == "local" else "/"
        assert loc.sibling("config.json") == folder + sep + "config.json"
        for n, b in FILES.items():
            assert loc.exists(n), (kind, n)
            assert loc.exists(loc.sibling(n)), (kind, n)
            # limit + 1 bytes at most: a file over the limit shows by its length
            assert loc.read_small(n, 9) == b[:10], (kind, n)
            assert loc.read_small(loc.sibling(n), 1 << 20) == b, (kind, n)
        assert not loc.exists("absent.json"), kind
        with pytest.raises(FileNotFoundError):
            loc.read_small("absent.json", 100)
        src = loc.open(model)
        try:
            assert src.size == len(FILES[MODEL])
            assert src.read(0, src.size) == FILES[MODEL], kind
            assert src.read(1000, 20) == FILES[MODEL][1000:1020], kind
        finally:
            src.close()


def test_a_folder_is_its_own_location(kinds):
    for kind, (model, folder) in kinds.items():
        if kind == "http":
            folder += "/"           # a URL names a folder by its trailing slash
        loc = Location.of(folder)
        assert loc.sibling(MODEL) == Location.of(model).sibling(MODEL), kind
        assert loc.read_small("config.json", 1 << 20) == FILES["config.json"], kind


def test_local_and_hub_folders_list_the_same_names_and_https_cannot(kinds):
    for kind, (model, _) in kinds.items():
        loc = Location.of(model)
        if kind == "http":
            with pytest.raises(GritUsageError, match="cannot be listed"):
                loc.listing()
        else:
            assert loc.listing() == sorted(FILES), kind


def test_a_hub_name_that_does_not_parse_is_absent_not_an_error():
    # as the Hub kind answers it: a name that cannot be asked for is not there
    assert not Location.of("hf://only-one-part").exists("hf://only-one-part")


def test_grit_load_reads_the_same_tensors_through_every_kind(hub, tmp_path):  # noqa: F811
    import numpy as np  # noqa: PLC0415
    from safetensors.numpy import save  # noqa: PLC0415

    import grit  # noqa: PLC0415
    want = {"a": np.arange(12, dtype=np.float32).reshape(3, 4),
            "b": np.array([1, -2, 3], dtype=np.int8)}
    with laid_out(hub, tmp_path, "org/loaded", {MODEL: save(want)}) as (d, s, sha):
        for path in (os.path.join(d, MODEL), s.url(f"/ckpt/{MODEL}"),
                     f"hf://org/loaded@{sha}/{MODEL}", f"hf://org/loaded/{MODEL}"):
            got = grit.load(path, recognise=False)
            assert sorted(got) == sorted(want), path
            for k, v in want.items():
                assert got[k].dtype == v.dtype and np.array_equal(got[k], v), (path, k)
