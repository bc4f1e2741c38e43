"""grit scan of http(s) URLs (safetensors; a real server on loopback): a
level-1 scan reads the header alone and reports what the local scan of the
same bytes reports; --deep reads each tensor's planes once and verifies
recorded digests; an unreachable file is an S805 finding; a remote
checkpoint's config.json and shard index are read beside its shards, so its
checkpoint-wide findings are the local scan's."""
from __future__ import annotations

import numpy as np
import pytest

import grit
from grit.scan import scan

from http_server import Server


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("GRIT_CACHE_DIR", str(d))
    return d


@pytest.fixture
def served(tmp_path):
    s = Server()
    x = np.random.default_rng(1).standard_normal((8, 256)).astype(np.float32)
    a = grit.encode(x, grit.GRADE_MXFP4)
    stale = grit.encode(x * 2, grit.GRADE_MXFP4)
    files = {}
    grit.save(str(tmp_path / "clean.safetensors"), {"w": a})
    grit.save(str(tmp_path / "digest.safetensors"), {"w": a},
              {"grit.digest.w": grit.base32_encode(stale.digest)})
    files["clean"] = (tmp_path / "clean.safetensors").read_bytes()
    files["digest"] = (tmp_path / "digest.safetensors").read_bytes()
    files["cut"] = files["clean"][:-300]
    (tmp_path / "cut.safetensors").write_bytes(files["cut"])
    for k, b in files.items():
        s.files[f"/{k}.safetensors"] = b
    yield s, tmp_path, files
    s.close()


def verdicts(rep):
    return sorted((f.code, f.status, f.tensor or "", f.message) for f in rep.findings)


@pytest.mark.parametrize("name", ["clean", "cut", "digest"])
@pytest.mark.parametrize("deep", [False, True])
def test_a_remote_scan_reports_what_the_local_scan_reports(served, name, deep):
    s, tmp, files = served
    url = s.url(f"/{name}.safetensors")
    remote = scan([url], deep=deep)
    local = scan([str(tmp / f"{name}.safetensors")], deep=deep)
    assert verdicts(remote) == verdicts(local)
    assert remote.exit_code_graded == local.exit_code_graded
    assert [f.tensors for f in remote.files] == [f.tensors for f in local.files] == [1]
    if name == "digest" and deep:
        assert any(f.code == "S501" for f in remote.findings)


def test_level_one_reads_the_header_alone(served):
    s, _, files = served
    s.body_bytes = 0
    rep = scan([s.url("/clean.safetensors")])
    header = 8 + int.from_bytes(files["clean"][:8], "little")
    assert rep.exit_code_graded == 0
    assert header <= s.body_bytes <= header + 1 < len(files["clean"])
    # without the cache: the size, the 8-byte length (sniffed once, not asked again by
    # the safetensors reader), the header
    s.asked.clear()
    scan([s.url("/clean.safetensors")], cache=False)
    assert s.asked["/clean.safetensors"] == 3


def test_unreachable_files_are_findings(served):
    s, _, _ = served
    rep = scan([s.url("/missing.safetensors")])
    [f] = rep.findings
    assert f.code == "S805" and "404" in f.message and rep.exit_code_graded == 4
    # (a remote GGUF is read: tests/test_scan_remote_gguf.py)
    s.files["/m.gguf"] = b"GGUF" + bytes(100)
    [f] = scan([s.url("/m.gguf")]).findings
    assert f.code == "S805" and "could not read as gguf" in f.message and "version 0" in f.message


def test_a_header_length_past_the_end_is_the_local_finding_and_reads_nothing_more(
        served, tmp_path):
    """An 8-byte length that claims more than the file holds: the local
    scan's finding, and no byte past the length is asked for."""
    s, _, files = served
    bad = (10 ** 12).to_bytes(8, "little") + files["clean"][8:]
    (tmp_path / "long.safetensors").write_bytes(bad)
    s.files["/long.safetensors"] = bad
    s.body_bytes = 0
    remote = scan([s.url("/long.safetensors")], cache=False)
    local = scan([str(tmp_path / "long.safetensors")])
    assert verdicts(remote) == verdicts(local) and remote.exit_code_graded == 4
    assert [f.code for f in remote.findings] == ["S805"]
    assert s.body_bytes <= 1 + 8                    # the size probe and the length alone


def test_a_rescan_of_an_unchanged_file_moves_no_payload_byte(served, cache_dir):
    s, _, files = served
    url = s.url("/digest.safetensors")
    first = scan([url])
    header = 8 + int.from_bytes(files["digest"][:8], "little")
    s.body_bytes = 0
    again = scan([url])
    assert verdicts(again) == verdicts(first)
    assert s.body_bytes <= 1                       # the size probe's one byte, nothing else
    assert any(cache_dir.rglob("*")) and all(p.is_relative_to(cache_dir)
                                             for p in cache_dir.rglob("*"))
    # the file changes (a new ETag): its header is read afresh
    s.files["/digest.safetensors"] = files["cut"]
    s.body_bytes = 0
    changed = scan([url])
    assert any(f.code == "S101" for f in changed.findings)
    assert s.body_bytes >= 8 + int.from_bytes(files["cut"][:8], "little")
    # cache=False (grit scan --no-cache): read afresh, nothing written
    s.files["/digest.safetensors"] = files["digest"]
    for p in sorted(cache_dir.rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    s.body_bytes = 0
    assert verdicts(scan([url], cache=False)) == verdicts(first)
    assert s.body_bytes >= header and not any(cache_dir.rglob("*.*")) \
        and not [p for p in cache_dir.rglob("*") if p.is_file()]


def test_a_damaged_cache_entry_is_a_miss(served, cache_dir):
    s, _, files = served
    url = s.url("/clean.safetensors")
    first = scan([url])
    for p in cache_dir.rglob("*"):
        if p.is_file():
            p.write_bytes(p.read_bytes()[:-1])
    s.body_bytes = 0
    assert verdicts(scan([url])) == verdicts(first)
    assert s.body_bytes > 1


def test_deep_streams_remote_planes_in_chunks(tmp_path, monkeypatch):
    """--deep over HTTP hashes each plane in CHUNK-byte ranged reads and the
    probes read a bounded prefix: no response is longer than the larger of
    the two bounds, however large the tensor, and the digest verdicts are
    the local scan's."""
    import grit.scan.deep as deep_mod
    monkeypatch.setattr(deep_mod, "CHUNK", 4096)
    monkeypatch.setattr(deep_mod, "PROBE", 8192)
    monkeypatch.setattr(deep_mod, "WHOLE", 8192)
    x = np.random.default_rng(2).standard_normal((256, 1024)).astype(np.float32)
    a = grit.encode(x, grit.GRADE_MXFP4)                     # 128 KiB of elements
    stale = grit.encode(x * 2, grit.GRADE_MXFP4)
    s = Server()
    try:
        for name, meta in (("clean", None),
                           ("digest", {"grit.digest.w": grit.base32_encode(stale.digest)})):
            path = tmp_path / f"{name}.safetensors"
            grit.save(str(path), {"w": a}, meta)
            s.files[f"/{name}.safetensors"] = path.read_bytes()
            s.largest = 0
            remote = scan([s.url(f"/{name}.safetensors")], deep=True, cache=False)
            local = scan([str(path)], deep=True)
            assert verdicts(remote) == verdicts(local)
            assert 0 < s.largest <= 8192 < a.nbytes
            assert any(f.code == "S501" for f in remote.findings) == (name == "digest")
    finally:
        s.close()


# ---------------------------------------------------------------------------
# checkpoint-wide checks of http(s) checkpoints: config.json and the shard
# index read beside the shards, by URL, as a local scan reads them

pytest.importorskip("safetensors")
import json  # noqa: E402
import os  # noqa: E402

from test_scan_config import INT4_CFG, fp8, model, write  # noqa: E402

SHARDS = [f"model-{i:05d}-of-00003.safetensors" for i in (1, 2, 3)]
INDEX = "model.safetensors.index.json"


def _checkpoint(tmp_path, case):
    tmp_path.mkdir(parents=True, exist_ok=True)
    d = write(tmp_path, model(quant=fp8) if case == "config_contradicts" else model(),
              INT4_CFG, shards=3)
    if case == "stale_index":
        p = os.path.join(d, INDEX)
        doc = json.load(open(p))
        doc["weight_map"]["model.layers.9.gone.weight"] = SHARDS[0]
        doc["metadata"]["total_size"] += 4096
        json.dump(doc, open(p, "w"))
    elif case == "truncated":
        p = os.path.join(d, SHARDS[1])
        data = open(p, "rb").read()
        open(p, "wb").write(data[:8 + int.from_bytes(data[:8], "little") + 100])
    elif case == "shard_missing":
        os.remove(os.path.join(d, SHARDS[2]))
    return d


def _serve(s, d):
    for n in os.listdir(d):
        s.files[f"/ckpt/{n}"] = open(os.path.join(d, n), "rb").read()
    return s.url("/ckpt")


def _rows(rep, prefix, folder):
    def norm(x):
        return x.replace(prefix, folder) if isinstance(x, str) else x
    return sorted((f.code, int(f.severity), norm(f.file) or "", f.tensor or "", norm(f.message),
                   json.dumps(f.detail, sort_keys=True, default=str).replace(prefix, folder))
                  for f in rep.findings)


EXPECT = {"clean": {"S601"}, "stale_index": {"S152", "S155"},
          "config_contradicts": {"S310"}, "truncated": {"S156"},   # S312: nested in S310
          "shard_missing": {"S151"}}


@pytest.mark.parametrize("case", sorted(EXPECT))
def test_a_remote_checkpoint_gets_the_checkpoint_wide_checks(tmp_path, case):
    d = _checkpoint(tmp_path / "c", case)
    s = Server()
    try:
        base = _serve(s, d)
        there = [n for n in SHARDS if os.path.exists(os.path.join(d, n))]
        for names in (there, there[:1]):          # every shard; a lone shard
            local = scan([os.path.join(d, n) for n in names])
            remote = scan([f"{base}/{n}" for n in names])
            assert _rows(remote, base, d) == _rows(local, d, d)
            assert remote.exit_code_graded == local.exit_code_graded
        assert EXPECT[case] <= {f.code for f in scan([d]).findings}
        # a named index URL works as a named local index: its shards are scanned
        local = scan([os.path.join(d, INDEX)])
        remote = scan([f"{base}/{INDEX}"])
        assert _rows(remote, base, d) == _rows(local, d, d)
        assert sorted(f.path for f in remote.files) == [f"{base}/{n}" for n in there]
        assert EXPECT[case] <= {f.code for f in remote.findings}
        # a manifest of URLs
        m = tmp_path / "urls.txt"
        m.write_text("".join(f"{base}/{n}\n" for n in there))
        assert _rows(scan([str(m)]), base, d) == _rows(
            scan([os.path.join(d, n) for n in there]), d, d)
    finally:
        s.close()


def test_remote_siblings_that_fail_are_findings_and_a_404_is_absent(tmp_path):
    d = _checkpoint(tmp_path / "c", "config_contradicts")
    s = Server()
    try:
        base = _serve(s, d)
        urls = [f"{base}/{n}" for n in SHARDS]
        # no index and no config on the server: what a local folder without them gives
        del s.files[f"/ckpt/{INDEX}"], s.files["/ckpt/config.json"]
        local_d = tmp_path / "bare"
        local_d.mkdir()
        for n in SHARDS:
            (local_d / n).write_bytes(open(os.path.join(d, n), "rb").read())
        assert _rows(scan(urls), base, str(local_d)) == _rows(
            scan([str(local_d / n) for n in SHARDS]), str(local_d), str(local_d))
        assert not {"S150", "S310"} & {f.code for f in scan(urls).findings}
        # an index and a config the server refuses (403): findings, the shards still scanned
        _serve(s, d)
        s.faults[f"/ckpt/{INDEX}"] = {"status": 403}
        s.faults["/ckpt/config.json"] = {"status": 403}
        rep = scan(urls)
        [f150] = [f for f in rep.findings if f.code == "S150"]
        assert f150.file == f"{base}/{INDEX}" and "403" in f150.message
        bad_cfg = [f for f in rep.findings if f.code == "S805"]
        assert bad_cfg and {f.file for f in bad_cfg} == {f"{base}/config.json"}
        assert all("403" in f.message for f in bad_cfg)
        assert all(f.parsed for f in rep.files) and len(rep.files) == 3
        assert "S310" not in {f.code for f in rep.findings}
    finally:
        s.close()


def test_the_files_beside_remote_shards_are_asked_once_and_cached(tmp_path, cache_dir):
    """A 3-shard checkpoint by URL: config.json and the index are asked of
    the server once per scan (a probe and a read), not once per shard; a
    rescan on a warm cache moves one probe byte per file and nothing else,
    sibling files included; a changed config (a new ETag) is read afresh,
    the rest still from the cache."""
    d = _checkpoint(tmp_path / "c", "clean")
    s = Server()
    try:
        base = _serve(s, d)
        urls = [f"{base}/{n}" for n in SHARDS]
        for jobs in (3, 1):              # shards on three threads ask as one thread does
            s.asked.clear()
            first = scan(urls, jobs=jobs, cache=jobs == 1)
            assert s.asked["/ckpt/config.json"] == 2 and s.asked[f"/ckpt/{INDEX}"] == 2
            assert s.asked.get("/ckpt/hf_quant_config.json", 0) <= 1  # a 404: asked once
        s.asked.clear()
        s.body_bytes = 0
        again = scan(urls)
        assert _rows(again, base, d) == _rows(first, base, d)
        assert s.body_bytes == sum(1 for p, n in s.asked.items() if s.files.get(p)) \
            and all(n == 1 for n in s.asked.values())
        cfg = json.loads(s.files["/ckpt/config.json"])
        cfg["torch_dtype"] = "float16"
        s.files["/ckpt/config.json"] = new = json.dumps(cfg).encode()   # a new ETag
        s.asked.clear()
        s.body_bytes = 0
        scan(urls)
        assert s.asked["/ckpt/config.json"] == 2 and s.body_bytes == 5 + len(new)
    finally:
        s.close()
