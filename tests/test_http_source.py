"""grit.io.http.HTTPSource against a real HTTP server on loopback
(tests/http_server.py): ranged reads give the file's bytes and move only the
bytes asked for; a safetensors header is read remotely in three requests and
equals the local reading; every bad answer — 401/403/404, 416, a server that
ignores Range, a file that changes while read, a body that breaks off, a
timeout, a refused connection — is a typed error, in bounded time."""
from __future__ import annotations

import os
import socket
import time

import numpy as np
import pytest

from grit.errors import GritUsageError
from grit.io import safetensors as st
from grit.io.http import HTTPSource, RemoteError, is_url
from grit.io.source import SourceRangeError, open_source

from http_server import Server

DATA = os.urandom(200_000)


@pytest.fixture
def server():
    s = Server()
    s.files["/a.bin"] = DATA
    yield s
    s.close()


def test_ranged_reads_are_the_files_bytes_and_move_nothing_more(server):
    h = HTTPSource(server.url("/a.bin"))
    assert h.size == len(DATA) and h.etag == f'"{server.etag("/a.bin")}"' and h.view(0, 10) is None
    assert h.requests == 1 and h.bytes_read == 0           # the probe: byte 0, not counted
    for off, n in [(0, 1), (5, 100), (len(DATA) - 7, 7), (12_345, 54_321)]:
        assert h.read(off, n) == DATA[off:off + n]
    assert h.requests == 5 and h.bytes_read == 1 + 100 + 7 + 54_321
    assert b"".join(bytes(c) for c in h.stream(100, 10_000, chunk=3000)) == DATA[100:10_100]
    with pytest.raises(SourceRangeError):
        h.read(len(DATA) - 1, 2)                            # checked before any request
    assert h.requests == 9


def test_a_safetensors_header_is_read_remotely_as_locally(server, tmp_path):
    from safetensors.numpy import save
    blob = save({"a": np.arange(1000, dtype=np.float32), "b": np.ones((30, 40), np.int8),
                 "c": np.zeros(5, np.float16)}, metadata={"k": "v"})
    server.files["/m.safetensors"] = blob
    local = tmp_path / "m.safetensors"
    local.write_bytes(blob)
    src = HTTPSource(server.url("/m.safetensors"))
    server.body_bytes = 0
    remote = st.read_source(src)
    mine = st.read_source(open_source(local))
    assert remote.problems == [] and remote.metadata == {"k": "v"}
    assert {n: (e.dtype, e.shape, e.span) for n, e in remote.entries.items()} == \
        {n: (e.dtype, e.shape, e.span) for n, e in mine.entries.items()}
    from safetensors import safe_open                           # the official reader agrees
    with safe_open(str(local), "np") as f:
        assert set(f.keys()) == set(remote.entries) and f.metadata() == remote.metadata
        for n in f.keys():
            assert tuple(f.get_slice(n).get_shape()) == remote.entries[n].shape
    header = 8 + int.from_bytes(blob[:8], "little")
    assert src.requests == 3 and src.bytes_read == header       # the length, then the header
    # (the probe's one byte may be counted by the server thread after the reset)
    assert header <= server.body_bytes <= header + 1 < len(blob)


@pytest.mark.parametrize("code", [401, 403, 404, 410])
def test_client_errors_are_raised_at_once(server, code):
    server.faults["/a.bin"] = {"status": code}
    with pytest.raises(RemoteError) as e:
        HTTPSource(server.url("/a.bin"), backoff=0.01)
    assert e.value.status == code and str(code) in str(e.value)
    assert server.requests == 1                                  # not retried


def test_a_missing_file(server):
    with pytest.raises(RemoteError) as e:
        HTTPSource(server.url("/nope.bin"))
    assert e.value.status == 404


def test_a_server_that_ignores_range_is_refused_without_reading_the_body(server):
    server.faults["/a.bin"] = {"ignore_range": True}
    with pytest.raises(RemoteError, match="ignores Range") as e:
        HTTPSource(server.url("/a.bin"))
    assert e.value.status == 200


def test_transient_failures_are_retried_with_backoff_then_raised(server):
    server.faults["/a.bin"] = {"fail_first": [503, 2]}
    h = HTTPSource(server.url("/a.bin"), retries=3, backoff=0.01)
    assert h.size == len(DATA) and h.requests == 3
    server.faults["/a.bin"] = {"status": 500}
    t = time.monotonic()
    with pytest.raises(RemoteError, match="after 3 attempts") as e:
        HTTPSource(server.url("/a.bin"), retries=2, backoff=0.01)
    assert e.value.status == 500 and time.monotonic() - t < 2


def test_a_file_that_changes_while_it_is_read(server):
    h = HTTPSource(server.url("/a.bin"))
    server.files["/a.bin"] = DATA + b"more"
    with pytest.raises(RemoteError, match="changed"):
        h.read(0, 10)
    server.files["/a.bin"] = DATA[:1000]
    with pytest.raises(SourceRangeError, match="416"):
        h.read(5000, 10)


def test_a_body_that_breaks_off(server):
    h = HTTPSource(server.url("/a.bin"))
    server.faults["/a.bin"] = {"truncate": 10}
    before = h.requests
    with pytest.raises(RemoteError, match="broke off after 10 of 1000"):
        h.read(0, 1000)
    assert h.requests == before + 1


def test_redirects_are_followed(server):
    server.faults["/old.bin"] = {"redirect": "/a.bin"}
    h = HTTPSource(server.url("/old.bin"))
    assert h.size == len(DATA) and h.read(7, 3) == DATA[7:10]


def test_timeouts_and_refused_connections_end_in_bounded_time(server):
    server.faults["/a.bin"] = {"latency": 1.0}
    t = time.monotonic()
    with pytest.raises(RemoteError) as e:
        HTTPSource(server.url("/a.bin"), timeout=0.2, retries=1, backoff=0.01)
    assert e.value.status is None and time.monotonic() - t < 3
    with socket.socket() as s:                                    # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RemoteError):
        HTTPSource(f"http://127.0.0.1:{port}/x", retries=0)


def test_a_trickling_body_is_abandoned_in_bounded_time(server):
    """Each recv has its timeout, so a server sending a byte every 50 ms
    never trips it; the average-rate deadline does (timeout + n / min_rate)."""
    h = HTTPSource(server.url("/a.bin"), timeout=0.5, retries=0)
    server.faults["/a.bin"] = {"trickle": (4, 0.05)}
    t = time.monotonic()
    with pytest.raises(RemoteError, match="slower than"):
        h.read(0, 400)                                     # 5 s at the server's pace
    assert time.monotonic() - t < 2.5
    server.faults["/a.bin"] = {"trickle": (64, 0.01)}      # slow but within the rate
    assert HTTPSource(server.url("/a.bin"), min_rate=1000).read(0, 256) == DATA[:256]


def test_only_http_urls():
    assert is_url("https://x/y") and is_url("HTTP://x") and not is_url("/tmp/x")
    assert not is_url("hf://org/repo") and not is_url(b"http://x")
    with pytest.raises(GritUsageError):
        HTTPSource("ftp://example.invalid/x")
