"""Hostile servers and hostile addresses (tests/hostile_server.py): every
remote read ends, within a stated bound, in the file's bytes, a typed
RemoteError / GritUsageError, or a scan finding — never a hang, an
unbounded allocation or a traceback.  The policy's timeout is short here
(T seconds); every bound is a small multiple of it."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner

from grit.cli import main
from grit.errors import GritUsageError
from grit.io.http import (HeaderCache, HTTPSource, NetPolicy, RemoteError, RemoteLimitError,
                          parse_url, use_policy)
from grit.scan import scan

from hostile_server import HostileServer, endless_gguf

T = 0.5
FAST = NetPolicy(timeout=T, retries=1, backoff=0.01, retry_time=2 * T, min_rate=1 << 12)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _blob() -> bytes:
    from safetensors.numpy import save  # noqa: PLC0415
    return save({"a": np.arange(256, dtype=np.float32)})


@pytest.fixture
def hostile():
    s = HostileServer(_blob(), linger=10 * T)
    yield s
    s.close()


def _fails_in_time(url: str, bound: float, match: str | None = None, p: NetPolicy = FAST):
    t = time.monotonic()
    with pytest.raises(RemoteError) as e:
        h = HTTPSource(url, policy=p)
        h.read(0, h.size)
    took = time.monotonic() - t
    assert took < bound, f"{url}: {took:.2f} s ({e.value})"
    if match is not None:
        assert match in str(e.value), str(e.value)
    return e.value


def test_an_honest_answer_reads(hostile):
    h = HTTPSource(hostile.url("ok"), policy=FAST)
    assert h.read(0, h.size) == _blob()


# (behaviour, params, bound in units of T: deadlines of one attempt, two with the retry)
@pytest.mark.parametrize("behaviour,params,bound,match", [
    ("silent", {}, 2 * 2 + 1, "Timeout"),
    ("continue", {"pause": 0}, 2 * 2 + 1, "interim"),
    ("continue", {"pause": 0.1}, 2 * 2 + 1, None),
    ("trickle_head", {"pause": 0.2}, 2 * 2 + 1, "Timeout"),
    ("many_headers", {"n": 500}, 4, None),
    ("long_header", {"n": 200_000}, 4, None),
    ("interim", {"n": 50}, 4, "interim"),
    ("garbage", {}, 4, None),
    ("no_status", {}, 4, None),
    ("redirect_loop", {}, 4, "redirects"),
    ("redirect", {"to": "ftp://127.0.0.1/x"}, 2, "only http and https"),
    ("redirect", {"to": "file:///etc/passwd"}, 2, "only http and https"),
    ("redirect", {"to": "http://[::1/x"}, 2, "a redirect"),
    ("ignore_range", {}, 2, "ignores Range"),
    ("wrong_range", {}, 2, "asked for byte"),
    ("gzip", {"bomb": 1}, 2, "encoded"),
    ("status", {"n": 503}, 2 * 2 + 1, "after 2 attempts"),
    ("status", {"n": 403}, 2, "403"),
])
def test_a_hostile_server_is_a_typed_error_in_bounded_time(hostile, behaviour, params,
                                                           bound, match):
    _fails_in_time(hostile.url(behaviour, **params), bound * T + 1.0, match)


@pytest.mark.parametrize("behaviour,params", [
    ("trickle_body", {"pause": 0.2}), ("short_body", {}), ("reset", {}),
    ("bad_chunked", {}), ("endless_chunks", {"n": 1}), ("lie_size", {"n": 10}),
])
def test_a_body_that_misbehaves_after_honest_headers(hostile, behaviour, params):
    h = HTTPSource(hostile.url("ok"), policy=FAST)
    h._target = parse_url(hostile.url(behaviour, **params)).url
    t = time.monotonic()
    with pytest.raises(RemoteError):
        h.read(0, h.size)
    # the body deadline: T + size / min_rate
    assert time.monotonic() - t < 2 * (T + h.size / FAST.min_rate) + 1


def test_an_endless_body_moves_only_the_bytes_asked_for(hostile):
    h = HTTPSource(hostile.url("endless_body"), policy=FAST)
    assert h.read(0, 100) == _blob()[:100] and h.bytes_read == 100


def test_retries_are_bounded_in_total_time(hostile):
    p = NetPolicy(timeout=T, retries=100, backoff=0.05, retry_time=1.0)
    e = _fails_in_time(hostile.url("status", n=503), 1.0 + T + 1.0, p=p)
    assert e.status == 503


def test_requests_and_bytes_are_capped_per_file(hostile):
    p = NetPolicy(timeout=T, file_requests=3)
    h = HTTPSource(hostile.url("ok"), policy=p)
    h.read(10, 1), h.read(20, 1)
    with pytest.raises(RemoteLimitError, match="GRIT_NET_FILE_REQUESTS"):
        h.read(30, 1)
    h = HTTPSource(hostile.url("ok"), policy=NetPolicy(timeout=T, file_bytes=100))
    with pytest.raises(RemoteLimitError, match="GRIT_NET_FILE_BYTES"):
        h.read(0, 200)


def test_an_invented_gguf_of_2_32_entries_is_a_finding_in_bounded_time_and_memory():
    with HostileServer(endless_gguf()) as s, use_policy(FAST):
        t = time.monotonic()
        rep = scan([s.url("ok", "model.gguf")], cache=False)
        took = time.monotonic() - t
        codes = {f.code for f in rep.findings}
        assert codes & {"S808", "S805"}, [f.message for f in rep.findings]
        assert took < 10 and s.requests < 10, (took, s.requests)


def test_the_scan_budget_is_a_finding(hostile):
    with use_policy(FAST, scan_requests=2):
        rep = scan([hostile.url("ok"), hostile.url("ok", "b.safetensors")], cache=False)
    assert "S808" in {f.code for f in rep.findings}, [f.message for f in rep.findings]


@pytest.mark.parametrize("url", [
    "http://", "http://a..b/x.safetensors", "http://[::1/x.safetensors",
    "http://host:99999/x.safetensors", "http://user:pw@host/x.safetensors",
    "http://ho st/x.safetensors", "http://host/x\x00.safetensors", "http://-bad-/x",
    "http://host/" + "a" * 10_000, "http://host/\udcff.safetensors",
])
def test_bad_urls_are_refused_before_anything_is_sent(url):
    with pytest.raises(GritUsageError):
        parse_url(url)


def test_a_non_ascii_path_is_sent_percent_encoded(hostile):
    u = hostile.url("ok", "é.safetensors")
    assert parse_url(u).target.endswith("/%C3%A9.safetensors")
    assert HTTPSource(u, policy=FAST).size == len(_blob())


@pytest.mark.parametrize("arg", [
    "http://", "http://a..b/x.safetensors", "http://[::1/x.safetensors",
    "hf://org/repo@\udcff", "hf://org/repo@" + "r" * 100_000, "hf://o/r@a~b",
    "hf://o/r\x01x",
])
def test_bad_remote_arguments_are_usage_errors_not_tracebacks(arg):
    env = {**os.environ, "PYTHONPATH": ROOT}
    r = subprocess.run([sys.executable, "-m", "grit.cli", "scan", "--no-cache", arg],
                       capture_output=True, env=env, timeout=60)
    assert b"Traceback" not in r.stderr, r.stderr.decode(errors="replace")[-2000:]
    assert r.returncode == 2 and b"Error" in r.stderr, (r.returncode, r.stderr[-500:])


def test_a_presigned_url_looks_for_no_signed_sibling(tmp_path):
    """A pre-signed URL's query is never carried to a sibling's name, and
    the names beside it are not asked for (its signature covers its own
    object: the server refuses the rest with 403)."""
    from http_server import Server  # noqa: PLC0415
    s = Server()
    try:
        s.files["/model.safetensors"] = _blob()
        url = s.url("/model.safetensors") + "?X-Amz-Signature=abc&X-Amz-Expires=60"
        s.faults["/model.safetensors.index.json"] = {"status": 403}
        s.faults["/config.json"] = {"status": 403}
        with use_policy(FAST):
            rep = scan([url], cache=False)
        assert rep.findings == [], [(f.code, f.message) for f in rep.findings]
        assert set(s.asked) == {"/model.safetensors"}, s.asked
    finally:
        s.close()


def test_a_damaged_or_foreign_cache_entry_is_a_miss(tmp_path):
    c = HeaderCache(tmp_path)
    key = ("http://h/x", '"e"', 100, 0, 8)
    c.put(*key, b"12345678")
    assert c.get(*key) == b"12345678"
    [entry] = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs]
    blob = open(entry, "rb").read()
    open(entry, "wb").write(blob[:-1] + b"9")                      # one byte changed
    assert c.get(*key) is None
    open(entry, "wb").write(b"12345678")                            # a foreign file
    assert c.get(*key) is None
    os.unlink(entry)
    os.mkfifo(entry)                                                # not a regular file
    t = time.monotonic()
    assert c.get(*key) is None and time.monotonic() - t < 1
    os.unlink(entry)
    os.symlink(tmp_path / "elsewhere", entry)                       # a link
    (tmp_path / "elsewhere").write_bytes(blob)
    assert c.get(*key) is None
    # another key's valid entry, copied under this key's name, is refused by its digest
    other = ("http://h/y", '"e"', 100, 0, 8)
    c.put(*other, b"ABCDEFGH")
    os.unlink(entry)
    [o] = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs
           if f != "elsewhere" and os.path.join(d, f) != entry]
    os.link(o, entry)
    assert c.get(*key) is None and c.get(*other) == b"ABCDEFGH"


def test_a_bad_policy_in_the_environment_is_a_usage_error():
    r = CliRunner().invoke(main, ["scan", "x.safetensors"], env={"GRIT_NET_TIMEOUT": "soon"})
    assert r.exit_code == 2 and "GRIT_NET_TIMEOUT" in r.output


def test_the_remote_campaign_at_a_ci_budget():
    """scripts/fuzz_remote.py's engine, a few hundred cases: no escape, no
    case past its bound (the full campaign: docs/scan.md, "Network policy")."""
    import runpy  # noqa: PLC0415
    campaign = runpy.run_path(os.path.join(ROOT, "scripts", "fuzz_remote.py"))["campaign"]
    out = campaign(300, seed=11, workers=4, log=lambda *a: None)
    assert out["escapes"] == [] and out["hangs"] == [], (out["escapes"][:3], out["hangs"][:3])
    assert out["exchanges"] >= 300


@pytest.mark.parametrize("behaviour", ["trickle_head", "silent", "continue"])
def test_a_hostile_hub_endpoint_is_a_finding_in_bounded_time(monkeypatch, behaviour):
    """The Hub API call runs under grit's own client and policy (the
    headers within ``timeout``; no retries here): a Hub that trickles its
    headers, never answers or sends 100 Continue without end is an S805
    finding in time."""
    pytest.importorskip("huggingface_hub")
    from grit.io import hub as _hub  # noqa: PLC0415
    with HostileServer(b"", linger=20) as s:
        ep = s.url(behaviour, "x").rsplit("/", 1)[0]
        monkeypatch.setenv("HF_ENDPOINT", ep)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        _hub._OPEN.clear()
        p = NetPolicy(timeout=T, min_rate=1 << 20, retries=0)
        t = time.monotonic()
        with use_policy(p):
            rep = scan(["hf://org/repo"], cache=False)
        took = time.monotonic() - t
        assert {f.code for f in rep.findings} == {"S805"}, [f.message for f in rep.findings]
        assert took < 2 * T + 1 + 1.5, took
