"""A GGUF model in gguf-split's shards on a server (real servers on
loopback: the Hub-shaped endpoint of tests/test_scan_hub.py, the Range
server of tests/http_server.py): an ``hf://`` folder of shards converts as
the local shards do and scans as one checkpoint, a missing or lying shard
is a finding (scan) or a GritUsageError (convert), and an https shard
brings its siblings into the scan.  The shards are gguf-py's, written as
tests/test_convert_gguf_split.py writes them."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("gguf", reason="gguf-py is not installed")

from grit import convert as C  # noqa: E402
from grit import convert_gguf as CG  # noqa: E402
from grit.errors import GritUsageError  # noqa: E402
from grit.scan import scan  # noqa: E402
from http_server import Server  # noqa: E402
from test_convert_gguf_split import _names, _same_output, _tensors_of, shard  # noqa: E402
from test_convert_gguf_split_remote import _files, shards  # noqa: E402,F401
from test_scan_hub import REPO, hub, isolated  # noqa: E402,F401  (the Hub on loopback)

SPLIT_CODES = {"S160", "S161", "S162", "S163", "S164", "S165"}


def _codes(rep) -> list[str]:
    return sorted(f.code for f in rep.findings if f.code in SPLIT_CODES)


def test_an_hf_folder_of_shards_converts_as_the_local_shards(shards, hub, tmp_path):  # noqa: F811
    want, paths = shards
    hub.commit(REPO, {**{f"sub/{n}": d for n, d in _files(paths).items()},
                      "sub/README.md": b"# a split model\n"})
    for src in (f"hf://{REPO}/sub", f"hf://{REPO}/sub/"):
        assert CG.is_gguf_source(src)
        out = tmp_path / ("out" + str(src.endswith("/")))
        C.convert(src, str(out), "compressed-tensors")
        _same_output(out, want)
        assert C.verify(src, str(out)).ok
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]


def test_an_hf_repository_root_of_shards_converts(shards, hub, tmp_path):  # noqa: F811
    want, paths = shards
    hub.commit(REPO, _files(paths))
    C.convert(f"hf://{REPO}", str(tmp_path / "out"), "compressed-tensors")
    _same_output(tmp_path / "out", want)


def test_an_hf_folder_missing_a_shard_is_refused(shards, hub, tmp_path):  # noqa: F811
    _, paths = shards
    files = _files(paths)
    del files[os.path.basename(paths[1])]
    hub.commit(REPO, {f"sub/{n}": d for n, d in files.items()})
    with pytest.raises(GritUsageError, match="model-00002-of-00003.gguf"):
        C.convert(f"hf://{REPO}/sub", str(tmp_path / "out"), "compressed-tensors")
    assert not os.path.exists(tmp_path / "out")
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]


def test_an_hf_folder_of_two_models_is_refused(shards, hub, tmp_path):  # noqa: F811
    _, paths = shards
    files = _files(paths)
    hub.commit(REPO, {**{f"sub/{n}": d for n, d in files.items()},
                      "sub/other.gguf": files[os.path.basename(paths[0])]})
    with pytest.raises(GritUsageError, match="not the shards of one model"):
        C.convert(f"hf://{REPO}/sub", str(tmp_path / "out"), "compressed-tensors")


def test_an_hf_folder_with_safetensors_is_not_a_gguf_source(shards, hub):  # noqa: F811
    _, paths = shards
    hub.commit(REPO, {**{f"sub/{n}": d for n, d in _files(paths).items()},
                      "sub/model.safetensors": b"\x02\x00\x00\x00\x00\x00\x00\x00{}"})
    assert not CG.is_gguf_source(f"hf://{REPO}/sub")
    assert not CG.is_gguf_source(f"hf://{REPO}/nothing-here")


def test_an_hf_folder_of_shards_scans_as_the_local_folder(shards, hub, tmp_path):  # noqa: F811
    _, paths = shards
    hub.commit(REPO, {f"sub/{n}": d for n, d in _files(paths).items()})
    rep, local = scan([f"hf://{REPO}/sub"]), scan([os.path.dirname(paths[0])])
    assert len(rep.files) == 3 and all(f.parsed for f in rep.files)
    assert sorted(f.code for f in rep.findings) == sorted(f.code for f in local.findings)
    assert _codes(rep) == []
    # one shard named: its siblings come with it
    one = scan([f"hf://{REPO}/sub/{os.path.basename(paths[2])}"])
    assert len(one.files) == 3 and _codes(one) == []


def test_a_broken_hf_split_is_a_finding(shards, hub, tmp_path):  # noqa: F811
    _, paths = shards
    files = _files(paths)
    total = sum(len(n) for n in _names(paths))
    bad = str(tmp_path / "bad.gguf")
    shard(bad, _tensors_of(paths[1]), no=1, count=3, total=total + 2)
    files[os.path.basename(paths[1])] = open(bad, "rb").read()
    del files[os.path.basename(paths[2])]
    hub.commit(REPO, {f"sub/{n}": d for n, d in files.items()})
    rep = scan([f"hf://{REPO}/sub"])
    assert _codes(rep) == ["S161", "S162"]
    (m,) = [f for f in rep.findings if f.code == "S161"]
    assert m.detail["numbers"] == [3]
    assert rep.exit_code() == 1


def test_an_https_shard_brings_its_siblings_into_the_scan(shards):  # noqa: F811
    _, paths = shards
    s = Server()
    try:
        for n, data in _files(paths).items():
            s.files["/r/" + n] = data
        rep = scan([s.url("/r/" + os.path.basename(paths[1]))])
        assert len(rep.files) == 3 and all(f.parsed for f in rep.files)
        assert _codes(rep) == []
        del s.files["/r/" + os.path.basename(paths[0])]
        rep = scan([s.url("/r/" + os.path.basename(paths[1]))], cache=False)
        assert len(rep.files) == 2 and _codes(rep) == ["S161"]
        # a pre-signed URL names one object: no sibling is asked for
        signed = scan([s.url("/r/" + os.path.basename(paths[1])) + "?X-Amz-Signature=ab"],
                      cache=False)
        assert len(signed.files) == 1
        assert _codes(signed) == []        # shards not asked for are not claimed missing
    finally:
        s.close()


def test_an_https_folder_url_names_one_file(shards):  # noqa: F811
    """https names one file: a folder URL is not a GGUF source (its server
    lists nothing)."""
    s = Server()
    try:
        assert not CG.is_gguf_source(s.url("/r/"))
    finally:
        s.close()


def test_an_https_shard_claiming_a_long_series_asks_for_none_of_it(shards, tmp_path):  # noqa: F811
    """split.count 60000 (within what split.tensors.count allows) in a shard
    named as the first of 60000 on a server that lists no folder: its
    siblings are not asked for one by one (grit.io.gguf_split.MAX_PROBED),
    none is claimed missing, and the scan is a few requests."""
    _, paths = shards
    p = str(tmp_path / "model-00001-of-60000.gguf")
    shard(p, _tensors_of(paths[2]), no=0, count=60000, total=60000, kv_from=paths[0])
    s = Server()
    try:
        s.files["/r/" + os.path.basename(p)] = open(p, "rb").read()
        rep = scan([s.url("/r/" + os.path.basename(p))], cache=False)
        assert len(rep.files) == 1 and rep.files[0].parsed
        assert _codes(rep) == []
        assert s.requests < 20
    finally:
        s.close()


def test_info_of_remote_shards_describes_the_model(shards, hub, tmp_path):  # noqa: F811
    """grit info of an hf:// folder of shards, and of one https shard: the
    model, as the local folder's info gives it."""
    import grit
    _, paths = shards
    local = grit.info(os.path.dirname(paths[0]))
    want = [(r.name, r.kind, r.grade, r.shape, r.bytes) for r in local.tensors]
    hub.commit(REPO, {f"sub/{n}": d for n, d in _files(paths).items()})
    got = grit.info(f"hf://{REPO}/sub")
    assert [(r.name, r.kind, r.grade, r.shape, r.bytes) for r in got.tensors] == want
    assert got.totals == local.totals
    (sp,) = got.splits
    assert sp.shards == 3 and len(sp.files) == 3 and sp.path.endswith(os.path.basename(paths[0]))
    s = Server()
    try:
        for n, data in _files(paths).items():
            s.files["/r/" + n] = data
        got = grit.info(s.url("/r/" + os.path.basename(paths[2])))
        assert [(r.name, r.kind, r.grade, r.shape, r.bytes) for r in got.tensors] == want
        assert got.splits[0].files == tuple(s.url("/r/" + os.path.basename(p)) for p in paths)
    finally:
        s.close()


@pytest.mark.parametrize("fault", [{"trickle": (1, 0.2)}, {"latency": 3.0}])
def test_a_stalling_sibling_shard_ends_the_scan_in_time(shards, fault):  # noqa: F811
    """An https shard's sibling that trickles its body, or answers only
    after the deadline: the scan of the named shard ends within the network
    policy's deadline with a result (findings), not a hang or a traceback."""
    import time

    from grit.io.http import use_policy
    _, paths = shards
    s = Server()
    try:
        for n, data in _files(paths).items():
            s.files["/r/" + n] = data
        s.faults["/r/" + os.path.basename(paths[2])] = fault
        t = time.monotonic()
        with use_policy(timeout=0.5, retries=0):
            rep = scan([s.url("/r/" + os.path.basename(paths[1]))], cache=False)
        assert time.monotonic() - t < 10
    finally:
        s.close()
    assert rep.findings and rep.exit_code() != 0
    assert len(rep.files) >= 2
