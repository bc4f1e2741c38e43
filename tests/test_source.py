"""grit.io.source: the byte-source interface the container readers read through.

Expected bytes come from the file written by the test itself (os.urandom),
never from the source under test."""
from __future__ import annotations

import os
import struct

import pytest

from grit._files import NotRegularFileError
from grit.errors import GritUsageError
from grit.io import safetensors as st
from grit.io.gguf_file import read_gguf
from grit.io.problems import ProblemKind as K
from grit.io.source import (ByteSource, LocalFile, ShortReadError, SourceRangeError,
                            address_of, open_source)


@pytest.fixture
def blob(tmp_path):
    data = os.urandom(10_000)
    p = tmp_path / "blob.bin"
    p.write_bytes(data)
    return p, data


def test_size_and_reads_are_the_file_bytes(blob):
    p, data = blob
    with open_source(p) as s:
        assert isinstance(s, ByteSource) and s.size == len(data) and s.name == str(p)
        for off, n in [(0, 0), (0, 1), (0, len(data)), (1234, 5678), (len(data) - 1, 1),
                       (len(data), 0)]:
            assert s.read(off, n) == data[off:off + n]
        buf = bytearray(4096)
        for off in (0, 4096, len(data) - 4096):
            assert s.readinto(off, buf) == 4096 and bytes(buf) == data[off:off + 4096]


def test_view_is_zero_copy_and_located(blob):
    p, data = blob
    s = LocalFile(p)
    v = s.view(100, 50)
    assert bytes(v) == data[100:150] and v.readonly
    assert s.locate(v) == 100
    assert s.locate(s.view(0)) == 0 and bytes(s.view(0)) == data
    assert s.locate(bytes(v)) is None          # a copy is not in the source
    assert s.locate(b"") is None
    assert address_of(b"") is None
    s.close()
    assert bytes(v) == data[100:150]           # live views survive the close


@pytest.mark.parametrize("off,n", [(0, 10_001), (10_000, 1), (10_001, 0), (5000, 5001),
                                   (2**63, 1), (1, 2**64), (2**62, 2**62)])
def test_out_of_range_is_refused_before_allocating(blob, off, n):
    p, _ = blob
    with open_source(p) as s:
        with pytest.raises(SourceRangeError) as e:
            s.read(off, n)
        assert "holds 10000 bytes" in str(e.value)
        with pytest.raises(SourceRangeError):
            s.view(off, n)
        assert isinstance(e.value, GritUsageError)


@pytest.mark.parametrize("off,n", [(-1, 1), (0, -1), (1.5, 1), (0, "3"), (None, 1)])
def test_bad_offsets_and_lengths_are_typed_errors(blob, off, n):
    p, _ = blob
    with open_source(p) as s, pytest.raises(SourceRangeError):
        s.read(off, n)


def test_readinto_needs_a_writable_buffer_that_fits(blob):
    p, _ = blob
    with open_source(p) as s:
        with pytest.raises(GritUsageError):
            s.readinto(0, b"\0" * 10)
        with pytest.raises(SourceRangeError):
            s.readinto(9_999, bytearray(2))


def test_a_file_cut_while_open_is_a_short_read(blob):
    p, data = blob
    with open_source(p) as s:
        os.truncate(p, 6000)
        assert s.read(0, 6000) == data[:6000]
        with pytest.raises(ShortReadError) as e:
            s.read(5000, 2000)
        assert "1000 bytes short at offset 6000" in str(e.value)


def test_closed_source_refuses_reads(blob):
    p, _ = blob
    s = open_source(p)
    s.close()
    assert s.closed
    with pytest.raises(GritUsageError):
        s.read(0, 1)


def test_empty_file(tmp_path):
    p = tmp_path / "empty"
    p.write_bytes(b"")
    with open_source(p) as s:
        assert s.size == 0 and s.read(0, 0) == b"" and bytes(s.view(0)) == b""
        with pytest.raises(SourceRangeError):
            s.read(0, 1)


def test_fifos_and_directories_are_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFileError):
        open_source(fifo)                      # and it does not block
    with pytest.raises(NotRegularFileError):
        open_source(tmp_path)


def test_a_source_without_views():
    class Bytes(ByteSource):
        def __init__(self, b):
            self.name, self.size, self.b = "mem", len(b), b

        def _readinto(self, offset, mv):
            n = min(len(mv), 3)                # short chunks: the caller loops
            mv[:n] = self.b[offset:offset + n]
            return n

    s = Bytes(b"0123456789")
    assert s.read(2, 7) == b"2345678" and s.view(0, 3) is None and s.locate(b"x") is None
    with pytest.raises(SourceRangeError):
        s.read(8, 3)


# -- the readers over the interface: a hostile length costs nothing ------------

def test_safetensors_header_length_is_checked_against_the_size(tmp_path):
    p = tmp_path / "huge.safetensors"
    p.write_bytes(struct.pack("<Q", 2**60) + b"{}")
    f = st.read(p)
    assert not f.parsed and f.problems[0].kind is K.UNREADABLE
    assert "header length 1152921504606846976 is outside" in f.problems[0].message


def test_safetensors_keeps_its_source_and_spans(tmp_path):
    import numpy as np
    import grit
    a = grit.encode(np.arange(64, dtype=np.float32).reshape(2, 32), grit.GRADE_MXFP4)
    p = tmp_path / "one.safetensors"
    grit.save(p, {"w": a})
    f = st.read(p)
    assert f.source is not None and f.source.size == os.path.getsize(p)
    raw = p.read_bytes()
    for name in f.entries:
        off, n = f.span(name)
        assert f.source.read(off, n) == raw[off:off + n] == bytes(f.view(name))
        assert n == 0 or f.source.locate(f.view(name)) == off


def test_gguf_reads_through_a_source(tmp_path):
    p = tmp_path / "lying.gguf"
    p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k"
                  + struct.pack("<IIQ", 9, 0, 2**62))
    f = read_gguf(p)
    assert f.source is not None and f.source.size == 49
    assert [x.kind for x in f.problems] == [K.UNREADABLE]


@pytest.mark.parametrize("off,n,chunk", [(0, 10_000, 4096), (1, 9_999, 4096), (123, 0, 4096),
                                         (4095, 4098, 4096), (0, 10_000, 1 << 22),
                                         (5, 9_000, 1), (9_999, 1, 4096)])
def test_stream_yields_the_range_in_order(blob, off, n, chunk):
    p, data = blob
    with open_source(p) as s:
        got = list(bytes(c) for c in s.stream(off, n, chunk))
        assert b"".join(got) == data[off:off + n]
        assert all(len(c) <= max(chunk, 4096) for c in got)
        # the generic path (readinto one reused buffer) yields the same bytes
        assert b"".join(bytes(c) for c in ByteSource.stream(s, off, n, chunk)) \
            == data[off:off + n]
        with pytest.raises(SourceRangeError):
            list(s.stream(off, len(data) - off + 1, chunk))


def test_release_keeps_the_bytes_and_ignores_what_is_not_a_view(blob):
    p, data = blob
    with LocalFile(p) as s:
        v = s.view(5000, 3000)
        assert bytes(v) == data[5000:8000]
        s.release(v)                               # pages dropped; the view reads the same
        assert bytes(v) == data[5000:8000] and bytes(s.view(0)) == data
        s.release(bytes(v))                        # a copy: nothing to release
        s.release(b"")
        ByteSource.release(s, v)                   # the base: a no-op
