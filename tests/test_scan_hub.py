"""grit scan of hf:// repositories against a Hub-shaped endpoint on loopback
(tests/hub_server.py) through huggingface_hub: a repository's scan reports
what the local scan of the same files reports — the checkpoint-wide checks
from config.json and the shard index included —, the revision is resolved
once and pinned, a private repository needs its token, a missing repository
or file is a finding, a level-1 scan moves the headers alone, a warm cache
moves no payload byte, and nothing is written under HF_HOME."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")
pytest.importorskip("safetensors")

from grit.io import hub as _hub  # noqa: E402
from grit.scan import scan  # noqa: E402
from grit.scan.collect import expand  # noqa: E402

from _support import write_gguf  # noqa: E402
from hub_server import HubServer  # noqa: E402
from test_scan_config import INT4_CFG, fp8, model, write  # noqa: E402

REPO = "org/ckpt"


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """grit's cache in a tmp dir; huggingface_hub's home (and every path it
    derives from it) in another, with no token and no offline mode."""
    import huggingface_hub.constants as C  # noqa: PLC0415
    home = tmp_path / "hf_home"
    monkeypatch.setenv("GRIT_CACHE_DIR", str(tmp_path / "grit_cache"))
    monkeypatch.setenv("HF_HOME", str(home))
    for v in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(v, raising=False)
    old = C.HF_HOME
    for k in dir(C):
        v = getattr(C, k)
        if k.isupper() and isinstance(v, str) and v.startswith(old):
            monkeypatch.setattr(C, k, str(home) + v[len(old):])
    monkeypatch.setattr(C, "HF_HUB_OFFLINE", False, raising=False)
    # huggingface_hub's import-time endpoint, where nothing may be asked: a
    # loopback port that refuses connections, so no test reaches another host
    monkeypatch.setattr(C, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(C, "HUGGINGFACE_CO_URL_TEMPLATE",
                        "http://127.0.0.1:9/{repo_id}/resolve/{revision}/{filename}")
    import huggingface_hub.utils._detect_agent as A  # noqa: PLC0415
    monkeypatch.setattr(A, "_registry", None)
    _hub._OPEN.clear()
    yield home
    _hub._OPEN.clear()


@pytest.fixture
def hub(monkeypatch):
    s = HubServer()
    monkeypatch.setenv("HF_ENDPOINT", s.endpoint)
    yield s
    s.close()


def files_of(d) -> dict[str, bytes]:
    out = {}
    for folder, _, names in os.walk(d):
        for n in names:
            p = os.path.join(folder, n)
            out[os.path.relpath(p, d).replace(os.sep, "/")] = open(p, "rb").read()
    return out


def rows(rep, prefix: str, local: str):
    """The findings with the remote prefix written as the local folder."""
    def norm(x):
        return x.replace(prefix, local) if isinstance(x, str) else x
    return sorted((f.code, int(f.severity), f.status, norm(f.file) or "", f.tensor or "",
                   norm(f.message), json.dumps(f.detail, sort_keys=True, default=str)
                   .replace(prefix, local)) for f in rep.findings)


def assert_same(remote, local, prefix: str, folder: str):
    assert rows(remote, prefix, folder) == rows(local, folder, folder)
    assert remote.exit_code_graded == local.exit_code_graded
    assert [f.path.replace(prefix, folder) for f in remote.files] == \
        [f.path for f in local.files]
    assert [(f.tensors, f.parsed) for f in remote.files] == \
        [(f.tensors, f.parsed) for f in local.files]


def header_bytes(data: bytes) -> int:
    return 8 + int.from_bytes(data[:8], "little")


# ---------------------------------------------------------------------------
# a repository scans as its files do locally


def _clean(tmp_path):
    tmp_path.mkdir(parents=True, exist_ok=True)
    return write(tmp_path, model(), INT4_CFG, shards=3)


def _stale_index(tmp_path):
    d = write(tmp_path, model(), INT4_CFG, shards=3)
    p = os.path.join(d, "model.safetensors.index.json")
    doc = json.load(open(p))
    name = sorted(doc["weight_map"])[0]
    shard = doc["weight_map"][name]
    other = sorted(set(doc["weight_map"].values()) - {shard})[0]
    doc["weight_map"][name] = other                      # a tensor moved since
    doc["weight_map"]["model.layers.9.gone.weight"] = shard   # a tensor deleted since
    doc["metadata"]["total_size"] += 4096
    json.dump(doc, open(p, "w"))
    return d


def _config_contradicts(tmp_path):
    return write(tmp_path, model(quant=fp8), INT4_CFG, shards=3)


def _truncated(tmp_path):
    tmp_path.mkdir(parents=True, exist_ok=True)
    d = write(tmp_path, model(), INT4_CFG, shards=3)
    p = os.path.join(d, "model-00002-of-00003.safetensors")
    data = open(p, "rb").read()
    open(p, "wb").write(data[:header_bytes(data) + 100])
    return d


def _shard_missing(tmp_path):
    d = write(tmp_path, model(), INT4_CFG, shards=3)
    os.remove(os.path.join(d, "model-00003-of-00003.safetensors"))
    return d


CASES = {"clean": (_clean, {"S601"}),
         "stale_index": (_stale_index, {"S152", "S155"}),
         "config_contradicts": (_config_contradicts, {"S310"}),      # S312 nested in it
         "truncated": (_truncated, {"S156"}),
         "shard_missing": (_shard_missing, {"S151"})}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_repository_scans_as_its_files_do_locally(hub, tmp_path, case):
    make, expected = CASES[case]
    d = make(tmp_path)
    sha = hub.commit(REPO, files_of(d))
    local = scan([d])
    remote = scan([f"hf://{REPO}"])
    assert expected <= {f.code for f in local.findings}
    if case == "clean":
        assert {f.code for f in local.findings} == {"S601"}
    assert_same(remote, local, f"hf://{REPO}@{sha}", d)
    # a folder path and a file path of the same repository
    shard = "model-00001-of-00003.safetensors"
    assert_same(scan([f"hf://{REPO}/{shard}"]), scan([os.path.join(d, shard)]),
                f"hf://{REPO}@{sha}", d)
    idx = "model.safetensors.index.json"
    assert_same(scan([f"hf://{REPO}/{idx}"]), scan([os.path.join(d, idx)]),
                f"hf://{REPO}@{sha}", d)


def test_expansion_lists_model_files_and_indexes_in_walk_order(hub, tmp_path):
    gguf = tmp_path / "g.gguf"
    write_gguf(str(gguf), {"t": (np.zeros((4, 32), np.float32), None)})
    files = {"b/model.safetensors": b"x", "a.safetensors": b"y", "README.md": b"",
             "b/c/z.gguf": gguf.read_bytes(), "b/model.safetensors.index.json": b"{}"}
    sha = hub.commit(REPO, files)
    findings, scanned, indexes = [], [], []
    out = expand([f"hf://{REPO}"], findings, scanned, indexes)
    pre = f"hf://{REPO}@{sha}/"
    assert out == [pre + "a.safetensors", pre + "b/model.safetensors", pre + "b/c/z.gguf"]
    assert indexes == [pre + "b/model.safetensors.index.json"] and not findings
    out = expand([f"hf://{REPO}/b/c"], findings, scanned, [])
    assert out == [pre + "b/c/z.gguf"]
    # a GGUF of a repository is read through the same header walk: what the local
    # scan of the file reports
    rep = scan([f"hf://{REPO}/b/c"])
    local = scan([str(gguf)])
    assert [(f.code, f.tensor, f.message) for f in rep.findings] == \
        [(f.code, f.tensor, f.message) for f in local.findings]
    assert [(f.format, f.parsed, f.tensors) for f in rep.files] == \
        [(f.format, f.parsed, f.tensors) for f in local.files] == [("gguf", True, 1)]


def test_a_dataset_repository_scans_as_a_model_repository_does(hub, tmp_path):
    d = _clean(tmp_path)
    sha = hub.commit(REPO, files_of(d), kind="dataset")
    rep = scan([f"hf://datasets/{REPO}"])
    assert_same(rep, scan([d]), f"hf://datasets/{REPO}@{sha}", d)
    [f] = scan([f"hf://{REPO}"]).findings            # no model repository of that name
    assert f.code == "S805" and "404" in f.message


def test_a_manifest_may_list_hf_entries(hub, tmp_path):
    d = _clean(tmp_path)
    sha = hub.commit(REPO, files_of(d))
    m = tmp_path / "list.txt"
    m.write_text(f"hf://{REPO}\n")
    assert_same(scan([str(m)]), scan([d]), f"hf://{REPO}@{sha}", d)


# ---------------------------------------------------------------------------
# revisions, tokens, missing things


def test_the_revision_is_resolved_once_and_pinned(hub, tmp_path):
    good = _clean(tmp_path / "a")
    bad = _truncated(tmp_path / "b")
    sha_a = hub.commit(REPO, files_of(good), ref="v1")
    sha_b = hub.commit(REPO, files_of(bad), ref="main")
    assert sha_a != sha_b
    for rev, sha, folder, short in (("v1", sha_a, good, False), (sha_a, sha_a, good, False),
                                    (None, sha_b, bad, True), ("main", sha_b, bad, True)):
        url = f"hf://{REPO}" + (f"@{rev}" if rev else "")
        rep = scan([url])
        assert {f.path for f in rep.files} == {
            f"hf://{REPO}@{sha}/model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)}
        assert any(f.code == "S156" for f in rep.findings) is short
        assert_same(rep, scan([folder]), f"hf://{REPO}@{sha}", folder)
    # "main" is asked for once per scan: every other request names the commit
    hub.reset()
    scan([f"hf://{REPO}"])
    named = [p for _, p in hub.requests if "/main" in p or p == f"/api/models/{REPO}"]
    assert len(named) == 1, hub.requests


def test_a_private_repository_needs_its_token(hub, tmp_path, monkeypatch):
    d = _clean(tmp_path)
    sha = hub.commit(REPO, files_of(d), private=True, token="hf_test_token")
    [f] = scan([f"hf://{REPO}"]).findings
    assert f.code == "S805" and "401" in f.message
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    [f] = scan([f"hf://{REPO}"]).findings
    assert f.code == "S805" and "401" in f.message
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    assert_same(scan([f"hf://{REPO}"]), scan([d]), f"hf://{REPO}@{sha}", d)


def test_missing_repositories_revisions_and_files_are_findings(hub, tmp_path):
    hub.commit(REPO, files_of(_clean(tmp_path)))
    for url, code, text in (("hf://org/nothing", "S805", "404"),
                            (f"hf://{REPO}@v9", "S805", "404"),
                            (f"hf://{REPO}/nothing.safetensors", "S801", "no such file"),
                            ("hf://justone", "S809", "ORG/REPO")):
        rep = scan([url])
        [f] = rep.findings
        assert (f.code, f.file) == (code, url) and text in f.message, f.message
        assert rep.exit_code_graded == 4


def test_without_huggingface_hub_an_hf_input_names_the_extra(monkeypatch):
    import builtins  # noqa: PLC0415
    real = builtins.__import__

    def no_hub(name, *a, **k):
        if name.startswith("huggingface_hub"):
            raise ImportError(name)
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_hub)
    [f] = scan([f"hf://{REPO}"]).findings
    assert f.code == "S805" and "grit-tensor[hub]" in f.message


# ---------------------------------------------------------------------------
# bytes moved, the cache, nothing written


def test_level_one_reads_headers_and_a_warm_cache_moves_no_payload_byte(
        hub, tmp_path, isolated):
    d = _clean(tmp_path)
    files = files_of(d)
    hub.commit(REPO, files)
    shards = {p: b for p, b in files.items() if p.endswith(".safetensors")}
    first = scan([f"hf://{REPO}"])
    # every byte read is a header's, or a small tensor's the recogniser reads
    # (the weight_shape tensors of the int4 modules, 16 bytes each), each once
    small = {}
    for p, b in shards.items():
        h = header_bytes(b)
        for name, e in json.loads(b[8:h]).items():
            if name != "__metadata__" and name.endswith("weight_shape"):
                small[p, h + e["data_offsets"][0]] = e["data_offsets"][1] - e["data_offsets"][0]
    want = sorted([(p, 0, 7) for p in shards] + [(p, 8, header_bytes(b) - 1)
                                                  for p, b in shards.items()]
                  + [(p, a, a + n - 1) for (p, a), n in small.items()])
    assert sorted(r for r in hub.ranges if r[0] in shards) == want
    assert hub.model_bytes() == sum(header_bytes(b) for b in shards.values()) + \
        sum(small.values()) < sum(map(len, shards.values())) // 10
    hub.reset()
    again = scan([f"hf://{REPO}"])
    assert hub.model_bytes() == 0
    assert rows(again, "", "") == rows(first, "", "")
    # --no-cache reads the headers afresh (a small tensor as often as it is asked for)
    hub.reset()
    scan([f"hf://{REPO}"], cache=False)
    assert sorted({r for r in hub.ranges if r[0] in shards}) == want
    # nothing under huggingface_hub's home, the cache under GRIT_CACHE_DIR
    assert not [p for p in isolated.rglob("*") if p.is_file()] if isolated.exists() else True
    assert any((tmp_path / "grit_cache").rglob("*"))


def test_nothing_is_asked_of_another_host_nor_written_under_hf_home(
        hub, tmp_path, isolated, monkeypatch):
    import huggingface_hub.constants as C  # noqa: PLC0415
    decoy = HubServer()          # huggingface_hub's own endpoint: asked nothing
    try:
        monkeypatch.setattr(C, "ENDPOINT", decoy.endpoint)
        monkeypatch.setattr(C, "HUGGINGFACE_CO_URL_TEMPLATE",
                            decoy.endpoint + "/{repo_id}/resolve/{revision}/{filename}")
        d = _clean(tmp_path)
        hub.commit(REPO, files_of(d))
        decoy.commit(REPO, files_of(d))
        scan([f"hf://{REPO}"], deep=True)
        assert decoy.requests == []
    finally:
        decoy.close()
    assert not [p for _, p in hub.requests if "agent" in p], hub.requests
    assert not any(p.is_file() for p in isolated.rglob("*"))
    # every request: the revision once, and the files at its commit
    api = [p for _, p in hub.requests if p.startswith("/api/")]
    assert api[0] == f"/api/models/{REPO}" and len(api) <= 2, api


def test_deep_reads_every_plane_once(hub, tmp_path):
    d = _clean(tmp_path)
    files = files_of(d)
    sha = hub.commit(REPO, files)
    remote = scan([f"hf://{REPO}"], deep=True)
    assert_same(remote, scan([d], deep=True), f"hf://{REPO}@{sha}", d)
    shards = {p: b for p, b in files.items() if p.endswith(".safetensors")}
    assert hub.model_bytes() <= sum(map(len, shards.values()))


def test_a_slow_hub_is_a_finding_in_bounded_time(hub, tmp_path, monkeypatch):
    import time  # noqa: PLC0415
    hub.commit(REPO, files_of(_clean(tmp_path)))
    from grit.io.http import use_policy  # noqa: PLC0415
    hub.latency["api"] = 2.0
    t = time.monotonic()
    with use_policy(timeout=0.3):
        [f] = scan([f"hf://{REPO}"]).findings
    assert f.code == "S805" and "Timeout" in f.message, f.message
    assert time.monotonic() - t < 2.0


def test_a_file_shorter_than_its_listing_is_a_typed_error(hub, tmp_path):
    d = _clean(tmp_path)
    files = files_of(d)
    shard = "model-00002-of-00003.safetensors"
    sha = hub.commit(REPO, files)
    hub.listed_size[shard] = len(files[shard]) + 64     # the listing promises 64 more bytes
    src = _hub.repo(f"hf://{REPO}@{sha}").open(shard)
    assert src.size == len(files[shard]) + 64
    assert src.read(0, 8) == files[shard][:8]
    with pytest.raises(_hub.RemoteError):
        src.read(len(files[shard]) - 8, 72)
    # in a scan the listing's size is the file's: 64 bytes no tensor indexes
    rep = scan([f"hf://{REPO}/{shard}"], deep=True)
    [f129] = [f for f in rep.findings if f.code == "S129"]
    assert "64 bytes" in f129.message


@pytest.mark.parametrize("text,kind,repo_id,rev,path", [
    ("hf://o/r", "model", "o/r", None, ""),
    ("hf://o/r/a/b.safetensors", "model", "o/r", None, "a/b.safetensors"),
    ("hf://o/r@v1.0/x.gguf", "model", "o/r", "v1.0", "x.gguf"),
    ("hf://o/r@refs/pr/3/x.gguf", "model", "o/r", "refs/pr/3", "x.gguf"),
    ("hf://o/r@feature%2Fy", "model", "o/r", "feature/y", ""),
    ("hf://datasets/o/r@" + "a" * 40 + "/d/", "dataset", "o/r", "a" * 40, "d"),
])
def test_hf_paths_parse_as_huggingface_hub_names_them(text, kind, repo_id, rev, path):
    p = _hub.HubPath.parse(text)
    assert (p.kind, p.repo_id, p.revision, p.path) == (kind, repo_id, rev, path)
    assert _hub.HubPath.parse(str(p)) == p
    # huggingface_hub's own parser reads the same repository, revision and path
    from huggingface_hub.hf_file_system import HfFileSystem  # noqa: PLC0415
    from huggingface_hub.utils import parse_hf_uri  # noqa: PLC0415
    del HfFileSystem
    theirs = parse_hf_uri(text.rstrip("/"))
    assert (theirs.type, theirs.id, theirs.path_in_repo.strip("/")) == (kind, repo_id, path)
    assert (theirs.revision and theirs.revision.replace("%2F", "/")) == rev


@pytest.mark.parametrize("text", ["hf://", "hf://justone", "hf://o/@v", "hf://o/r/../x",
                                  "hf://datasets/o", "https://o/r"])
def test_bad_hf_paths_are_usage_errors(text):
    with pytest.raises(_hub.GritUsageError):
        _hub.HubPath.parse(text)
