"""What a level-1 scan of an hf:// repository asks of the Hub, counted at
the loopback hub (tests/hub_server.py), per kind of checkpoint
(tests/hub_repos.py): one API call, config.json, the index, and per shard
one read of its first 64 KiB, which holds the header and — for a
compressed-tensors NVFP4 shard — its global scales, read as one run.  A
warm rescan asks for the revision alone.
A 5xx burst is retried within the policy; a hanging read costs at most the
policy's bound and is a finding."""
from __future__ import annotations

import collections
import contextlib
import time

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")

from grit.io import hub as _hub  # noqa: E402
from grit.io.http import NetPolicy, use_policy  # noqa: E402
from grit.io.safetensors import read as st_read, read_source  # noqa: E402
from grit.scan import scan  # noqa: E402

from hub_repos import DEFECT_CODE, KINDS, kind_files  # noqa: E402
from hub_server import HubServer  # noqa: E402
from test_scan_hub import isolated  # noqa: E402, F401 - the fixture: caches in tmp dirs

#: requests per shard a level-1 scan makes, by kind: one, its first 64 KiB
#: (grit.io.hub.PREFIX), which hold the header and, in an NVFP4 shard, the
#: global scales written side by side right after it
PER_SHARD = {"bf16": 1, "nvfp4": 1, "mxfp4": 1}
SHARDS = 3


@pytest.fixture(name="served")
def _served(monkeypatch):
    """The Hub on loopback, HF_ENDPOINT naming it."""
    with contextlib.closing(HubServer()) as s:
        monkeypatch.setenv("HF_ENDPOINT", s.endpoint)
        yield s


def routes(served) -> collections.Counter:
    """The requests made, by route: "api", or the file's name."""
    return collections.Counter("api" if p.startswith("/api/") else p.rsplit("/", 1)[1]
                               for _, p in served.requests)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("defect", [False, True])
def test_the_requests_of_a_level_one_scan_by_kind(served, kind, defect):
    files = kind_files(kind, defect)
    served.commit("org/r", files)
    rep = scan(["hf://org/r"])
    shards = sorted(p for p in files if p.endswith(".safetensors"))
    assert len(shards) == SHARDS
    want = {"api": 1, "config.json": 1, "model.safetensors.index.json": 1,
            **{s: PER_SHARD[kind] for s in shards}}
    assert dict(routes(served)) == want
    # the planted defect, or a root cause holding it (a short shard's S156
    # holds the S127 of the tensor it cuts)
    codes = {c.code for f in rep.findings for c in (f, *f.consequences)}
    assert (DEFECT_CODE[kind] in codes) is defect, sorted(codes)
    # a rescan in a fresh process (nothing kept in memory) with the header cache
    # warm: the revision is asked for, nothing else
    _hub._OPEN.clear()
    served.reset()
    again = scan(["hf://org/r"])
    assert dict(routes(served)) == {"api": 1} and served.body_bytes == 0
    assert sorted((f.code, f.file, f.tensor) for f in again.findings) == \
        sorted((f.code, f.file, f.tensor) for f in rep.findings)


@pytest.mark.parametrize("kind", KINDS)
def test_small_tensors_read_in_runs_equal_their_own_reads(served, tmp_path, kind):
    """The coalesced read (a remote file's small tensors) gives each tensor
    the bytes a local read of the same file gives; an NVFP4 shard's global
    scales are one run."""
    files = kind_files(kind, True)
    sha = served.commit("org/r", files)
    r = _hub.repo(f"hf://org/r@{sha}")
    for name in sorted(p for p in files if p.endswith(".safetensors")):
        (tmp_path / name).write_bytes(files[name])
        local = st_read(str(tmp_path / name))
        served.reset()
        remote = read_source(r.open(name), name)
        small = [n for n, e in local.entries.items()
                 if e.span is not None and 0 < e.span[1] - e.span[0] <= 16]
        big = 0
        for n in sorted(local.entries):
            a, b = local.tensor_values(n, 1 << 20), remote.tensor_values(n, 1 << 20)
            assert (a is None) == (b is None), n
            if a is not None:
                assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), n
                # a larger tensor is read on its own, past the prefix
                big += n not in small and local.start + local.entries[n].span[1] > _hub.PREFIX
        reads = [x for x in served.ranges if x[0] == name]
        if kind == "nvfp4":
            assert len(small) > 50
            assert all(local.start + local.entries[n].span[1] <= _hub.PREFIX for n in small)
            # the prefix (the header, every small tensor), then each larger
            # tensor past it on its own
            assert len(reads) == 1 + big
        # without the prefix: the header's two reads, one run of the small tensors
        hub_src = r.open(name)
        hub_src.prefix_bytes = 0
        served.reset()
        bare = read_source(hub_src, name)
        for n in small:
            assert np.array_equal(bare.tensor_values(n, 16).view(np.uint8),
                                  local.tensor_values(n, 16).view(np.uint8))
        runs = 1 if kind == "nvfp4" else 0
        assert len([x for x in served.ranges if x[0] == name]) == 2 + runs


def test_a_5xx_burst_is_retried_within_the_policy(served):
    files = kind_files("nvfp4", True)
    served.commit("org/r", files)
    quiet = scan(["hf://org/r"], cache=False)
    _hub._OPEN.clear()
    served.reset()
    served.fail = {"api": [503, 2], "resolve": [500, 3]}
    with use_policy(backoff=0.05):
        noisy = scan(["hf://org/r"], cache=False)
    assert sorted((f.code, f.file, f.tensor, f.message) for f in noisy.findings) == \
        sorted((f.code, f.file, f.tensor, f.message) for f in quiet.findings)
    assert routes(served)["api"] == 3
    assert len(served.requests) == 3 + 2 + 3 * PER_SHARD["nvfp4"] + 3
    # a burst longer than the retries: the repository is a finding, in bounded time
    _hub._OPEN.clear()
    served.reset()
    served.fail = {"api": [500, 10]}
    p = NetPolicy(retries=2, backoff=0.05)
    t = time.monotonic()
    with use_policy(p):
        [f] = scan(["hf://org/r"], cache=False).findings
    took = time.monotonic() - t
    assert f.code == "S805" and "500" in f.message and "3 attempts" in f.message, f.message
    assert routes(served)["api"] == 3
    assert took < 0.05 + 0.1 + 3.0          # (the backoffs; slack for a loaded machine)


def test_a_hanging_read_costs_at_most_the_policy_bound(served):
    files = kind_files("bf16")
    served.commit("org/r", files)
    shard = "model-00002-of-00003.safetensors"
    served.hang[shard] = 30.0
    p = NetPolicy(timeout=0.4, retries=1, backoff=0.1)
    bound = (p.retries + 1) * p.timeout + p.backoff       # 0.9 s
    t = time.monotonic()
    with use_policy(p):
        rep = scan(["hf://org/r"], cache=False)
    took = time.monotonic() - t
    bad = [f for f in rep.findings if f.code == "S805"]
    assert [f.file.rsplit("/", 1)[1] for f in bad] == [shard], [f.message for f in bad]
    assert "Timeout" in bad[0].message and "2 attempts" in bad[0].message
    assert sum(f.parsed for f in rep.files) == 2
    assert routes(served)[shard] == 2
    assert took < bound + 5, took         # (slack for a loaded machine; the hang is 30 s)


def test_the_nvfp4_global_scale_check_equals_its_scalar_derivation():
    """compressed_tensors.nvfp4_global_exact (vectorised) against the
    scalar derivation, code by code in binary32, over 2,000 scales."""
    import warnings  # noqa: PLC0415

    from grit.conventions.compressed_tensors import nvfp4_global_exact  # noqa: PLC0415
    from grit.formats import REGISTERED, fmt_decode  # noqa: PLC0415

    def scalar(g):
        gv = np.float32(g)
        r = np.float32(1.0) / gv
        bad = 0
        for code in range(256):
            s = np.float32(fmt_decode(REGISTERED["e4m3"], code))
            if not np.isnan(s):
                bad += np.float32(s * r).tobytes() != np.float32(s / gv).tobytes()
        return bad == 0, bad
    rng = np.random.default_rng(1)
    gs = list(rng.uniform(0.01, 1e5, 2000).astype(np.float32)) + \
        [np.float32(x) for x in (1, 2, 448 * 6, 3, 1e-30, 1e30, np.inf, 0, -5)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = [(nvfp4_global_exact(g), scalar(g)) for g in gs]
    assert all(a == b for a, b in got)
    assert 0 < sum(a[0] for a, _ in got) < len(gs)        # both verdicts occur


def test_many_repositories_in_one_scan_ask_what_each_alone_asks(served):
    """One scan of several repositories with jobs > 1 (opened that many at a
    time before the walk, the index read on the file's thread) asks each
    repository what a scan of it alone asks: one API call, no repeats."""
    names = [f"org/{k}" for k in KINDS]
    for k, name in zip(KINDS, names):
        served.commit(name, kind_files(k))
    rep = scan([f"hf://{n}" for n in names], jobs=4)
    want = {"api": 3, "config.json": 3, "model.safetensors.index.json": 3}
    got = routes(served)
    assert {k: got[k] for k in want} == want
    assert sum(got.values()) == 3 * 3 + SHARDS * sum(PER_SHARD.values())
    assert sum(f.parsed for f in rep.files) == 3 * SHARDS


def test_an_https_shard_reads_its_global_scales_in_one_range():
    """The runs serve https files as they serve hf:// ones: an NVFP4 shard
    by URL costs its size probe, its header's two reads and one range over
    its global scales (there is no prefix for an https file)."""
    from http_server import Server  # noqa: PLC0415
    files = kind_files("nvfp4", True)
    srv = Server()
    try:
        for name, data in files.items():
            srv.files[f"/ckpt/{name}"] = data
        rep = scan([srv.url("/ckpt/model.safetensors.index.json")], cache=False)
        assert "S322" in {f.code for f in rep.findings}
        shards = sorted(p for p in files if p.endswith(".safetensors"))
        assert [srv.asked[f"/ckpt/{s}"] for s in shards] == [4] * SHARDS
    finally:
        srv.close()
