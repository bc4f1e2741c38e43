"""grit scan of http(s) URLs (safetensors; a real server on loopback): a
level-1 scan reads the header alone and reports what the local scan of the
same bytes reports; --deep reads each tensor's planes once and verifies
recorded digests; an unreachable file is an S805 finding."""
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


def test_unreachable_files_are_findings(served):
    s, _, _ = served
    rep = scan([s.url("/missing.safetensors")])
    [f] = rep.findings
    assert f.code == "S805" and "404" in f.message and rep.exit_code_graded == 4
    # (a remote GGUF is read: tests/test_scan_remote_gguf.py)
    s.files["/m.gguf"] = b"GGUF" + bytes(100)
    [f] = scan([s.url("/m.gguf")]).findings
    assert f.code == "S805" and "could not read as gguf" in f.message and "version 0" in f.message


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
