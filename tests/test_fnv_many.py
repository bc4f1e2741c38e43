"""Several FNV-1a-128 messages at once (grit.fingerprint.fnv1a128_many and
digests, the native interleaved loop of grit/_native/core/fnv_multi.c)
against one message at a time and an FNV-1a-128 written here from §6.1's
constants alone."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grit.fingerprint as fp
from grit.errors import GritUsageError

# §6.1: 128-bit offset basis and prime, arithmetic mod 2^128
OFFSET = 0x6C62272E07BB014262B821756295C58D
PRIME = 0x0000000001000000000000000000013B
M128 = (1 << 128) - 1


def ref_fnv128(data: bytes, h: int = OFFSET) -> int:
    for b in data:
        h = ((h ^ b) * PRIME) & M128
    return h


def ref_digest(planes) -> bytes:
    """§6.5 with SPEC-FACTS: u64le(len) ‖ bytes of each of the four planes."""
    h = OFFSET
    for p in planes:
        h = ref_fnv128(struct.pack("<Q", len(p)) + bytes(p), h)
    return h.to_bytes(16, "big")


def test_reference_is_spec():
    # §6.1 self-check; Appendix B.1's digest (mxfp4/tie_to_even)
    assert ref_fnv128(b"a").to_bytes(16, "big").hex() == "d228cb696f1a8caf78912b704e4a8964"
    data = bytes.fromhex("204264 76a8caecfe0000000000000000".replace(" ", ""))
    assert ref_digest([data, b"\x7f", b"", b""]).hex() == "9452a02851ba1a1d793b97df51266001"


# plane lengths of unequal sizes: empty planes, odd lengths, a few long ones
_plane = st.one_of(st.binary(max_size=40), st.binary(min_size=200, max_size=700))
_planes = st.lists(_plane, min_size=4, max_size=4)


@settings(max_examples=150, deadline=None)
@given(st.lists(_planes, max_size=9), st.integers(1, 300))
def test_digests_equal_one_at_a_time(arrays, step):
    want = [ref_digest(a) for a in arrays]
    assert [fp.digest(a) for a in arrays] == want
    assert fp.digests(arrays, step=step) == want


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, M128), st.lists(st.binary(max_size=90), max_size=5)),
                max_size=9),
       st.integers(1, fp.LANES))
def test_many_equals_each(items, lanes):
    states = [h for h, _ in items]
    streams = [segs for _, segs in items]
    want = [ref_fnv128(b"".join(segs), h) for h, segs in items]
    assert fp.fnv1a128_many(states, streams, lanes) == want


def test_many_long_streams_of_unequal_lengths():
    """Streams long enough for the native loop to release the GIL, of unequal
    lengths (the lanes finish at different bytes and are refilled)."""
    rng = np.random.default_rng(7)
    streams = [[rng.integers(0, 256, n, dtype=np.uint8) for n in ns]
               for ns in ([70_001, 3], [0], [131_071], [5, 0, 99_999], [65_537, 65_537], [1])]
    want = [fp.fnv1a128(np.concatenate(s)) if s else fp.FNV128_OFFSET for s in streams]
    for lanes in range(1, fp.LANES + 1):
        assert fp.fnv1a128_many([fp.FNV128_OFFSET] * len(streams), streams, lanes) == want


def test_digests_give_back_every_chunk_once():
    rng = np.random.default_rng(3)
    arrays = [[rng.integers(0, 256, n, dtype=np.uint8) for n in ns]
              for ns in ([1000, 31, 0, 5], [0, 0, 0, 0], [4096, 0, 7, 0])]
    got: list[bytes] = []
    assert fp.digests(arrays, step=300, done=lambda c: got.append(bytes(c))) == \
        [fp.digest(a) for a in arrays]
    assert sum(len(c) for c in got) == sum(p.nbytes for a in arrays for p in a)
    assert all(0 < len(c) <= 300 for c in got)


def test_pure_python_fallback(monkeypatch):
    monkeypatch.setattr(fp, "_native", None)
    streams = [[b"ab", b""], [b"x" * 10], []]
    assert fp.fnv1a128_many([OFFSET, 5, OFFSET], streams) == \
        [ref_fnv128(b"ab"), ref_fnv128(b"x" * 10, 5), OFFSET]


def test_bad_arguments():
    with pytest.raises(GritUsageError):
        fp.fnv1a128_many([OFFSET], [[b"a"], [b"b"]])
    with pytest.raises(GritUsageError):
        fp.fnv1a128_many([1 << 128], [[b"a"]])
    with pytest.raises(GritUsageError):
        fp.fnv1a128_many([OFFSET], [[b"a"]], lanes=fp.LANES + 1)
    with pytest.raises(GritUsageError):
        fp.fnv1a128_many([OFFSET], [[1]])
    with pytest.raises(GritUsageError):
        fp.digests([[b"", b"", b""]])
    with pytest.raises(GritUsageError):
        fp.digests([[b""] * 4], step=0)
