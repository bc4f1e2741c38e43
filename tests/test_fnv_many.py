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


# ---------------------------------------------------------------------------
# digests and comparisons in one pass (fnv1a128_many_cmp, digests_compared)


def _recut(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at the given offsets (segments of other lengths than the
    message compared with)."""
    at = sorted({c % (len(data) + 1) for c in cuts})
    return [data[i:j] for i, j in zip([0, *at], [*at, len(data)])]


def _other(data: bytes, kind: int, where: int, cuts: list[int]) -> bytes:
    """The message compared with ``data``: the same (kind 0), one byte
    changed (1), one byte shorter (2), one byte longer (3), or empty (4)."""
    if kind == 1 and data:
        i = where % len(data)
        return data[:i] + bytes([data[i] ^ (1 + where % 255)]) + data[i + 1:]
    if kind == 2 and data:
        return data[:-1]
    if kind == 3:
        return data + b"\x00"
    if kind == 4:
        return b""
    return data


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, M128), st.lists(st.binary(max_size=90), max_size=5),
                          st.integers(0, 4), st.integers(0, 10_000),
                          st.lists(st.integers(0, 400), max_size=4)), max_size=9),
       st.integers(1, fp.LANES))
def test_many_cmp_is_many_and_a_comparison(items, lanes):
    """The digests are fnv1a128_many's (§6.1, derived here); each verdict is
    whether the two concatenations are equal, however either is cut."""
    if not fp.NATIVE:
        pytest.skip("the native extension is not built")
    from grit import _ext
    states = [h for h, *_ in items]
    streams = [segs for _, segs, *_ in items]
    others = [_recut(_other(b"".join(segs), kind, where, cuts), cuts)
              for _, segs, kind, where, cuts in items]
    hs, same = _ext.fnv1a128_many_cmp(states, streams, others, lanes)
    assert hs == [ref_fnv128(b"".join(segs), h) for h, segs in zip(states, streams)]
    assert same == [b"".join(s) == b"".join(o) for s, o in zip(streams, others)]


@pytest.mark.parametrize("lanes", range(1, 5))
def test_many_cmp_finds_a_change_anywhere_in_long_messages(lanes):
    """Messages long enough for the word loop, the 4 KiB blocks and the GIL
    released, of unequal lengths (lanes refilled): a change at the first
    byte, inside a word, at a block's edge or at the last byte is found in
    the one message it is in, and only there."""
    if not fp.NATIVE:
        pytest.skip("the native extension is not built")
    if lanes > fp.LANES:
        pytest.skip(f"{fp.LANES} lanes")
    from grit import _ext
    rng = np.random.default_rng(lanes)
    msgs = [rng.integers(0, 256, n, dtype=np.uint8).tobytes()
            for n in (70_001, 4096, 131_071, 9, 65_537, 1, 0, 12_289)]
    want = [ref_fnv128(m[:64]) for m in msgs]               # (a spot check of the ref)
    assert want == [fp.fnv1a128(m[:64]) for m in msgs]
    digests = [fp.fnv1a128(m) for m in msgs]
    hs, same = _ext.fnv1a128_many_cmp([OFFSET] * len(msgs), [[m] for m in msgs],
                                      [[m[:3], m[3:]] for m in msgs], lanes)
    assert hs == digests and all(same)
    for k, m in enumerate(msgs):
        for i in {0, 5, 4095, 4096, len(m) // 2, len(m) - 1}:
            if not 0 <= i < len(m):
                continue
            q = bytearray(m)
            q[i] ^= 0x80
            others = [[x] for x in msgs]
            others[k] = [bytes(q)]
            hs, same = _ext.fnv1a128_many_cmp([OFFSET] * len(msgs), [[x] for x in msgs],
                                              others, lanes)
            assert hs == digests
            assert same == [j != k for j in range(len(msgs))], (k, i)
        if m:
            others = [[x] for x in msgs]
            others[k] = [m[:-1]]
            assert _ext.fnv1a128_many_cmp([OFFSET] * len(msgs), [[x] for x in msgs],
                                          others, lanes)[1][k] is False


def test_many_cmp_bad_arguments():
    if not fp.NATIVE:
        pytest.skip("the native extension is not built")
    from grit import _ext
    with pytest.raises(ValueError):
        _ext.fnv1a128_many_cmp([OFFSET], [[b"a"]], [[b"a"], [b"b"]])
    with pytest.raises(ValueError):
        _ext.fnv1a128_many_cmp([OFFSET], [[b"a"]], [[b"a"]], 0)
    with pytest.raises(TypeError):
        _ext.fnv1a128_many_cmp([OFFSET], [[b"a"]], [[1]])


_arrays = st.lists(st.tuples(_planes, st.integers(0, 3), st.integers(0, 10_000)), max_size=7)


def _changed(planes: list[bytes], kind: int, where: int) -> list[bytes]:
    """The planes as written: the same (0), one byte changed in one plane
    (1), a plane one byte shorter or longer (2, 3)."""
    out = list(planes)
    j = where % 4
    if kind == 1 and any(planes):
        j = [i for i, p in enumerate(planes) if p][where % sum(1 for p in planes if p)]
        out[j] = _other(planes[j], 1, where, [])
    elif kind == 2 and planes[j]:
        out[j] = planes[j][:-1]
    elif kind == 3:
        out[j] = planes[j] + b"\x01"
    return out


@settings(max_examples=150, deadline=None)
@given(_arrays, st.integers(1, 300))
def test_digests_compared_equal_digest_and_a_separate_comparison(items, step):
    arrays = [planes for planes, _, _ in items]
    written = [_changed(planes, kind, where) for planes, kind, where in items]
    got_a: list[bytes] = []
    got_b: list[bytes] = []
    got = fp.digests_compared(arrays, written, step=step, done=lambda c: got_a.append(bytes(c)),
                              done_other=lambda c: got_b.append(bytes(c)))
    assert got == [(ref_digest(a), a == b) for a, b in zip(arrays, written)]
    # every byte of both sides handed back once (the rounds interleave the arrays), the
    # written side's where the lengths agree (where they do not, it is not read)
    assert sorted(b"".join(got_a)) == sorted(b"".join(b"".join(a) for a in arrays))
    assert sorted(b"".join(got_b)) == sorted(b"".join(b"".join(b) for a, b in
                                                      zip(arrays, written)
                                                      if [len(x) for x in a] ==
                                                      [len(x) for x in b]))
    assert all(0 < len(c) <= step for c in got_a + got_b)


def test_digests_compared_pure_python(monkeypatch):
    monkeypatch.setattr(fp, "_native", None)
    a = [[b"abc", b"", b"x" * 9, b"\x00"], [b"", b"", b"", b""]]
    b = [[b"abc", b"", b"x" * 8 + b"y", b"\x00"], [b"", b"", b"", b""]]
    assert fp.digests_compared(a, b, step=4) == [(ref_digest(a[0]), False),
                                                 (ref_digest(a[1]), True)]
    with pytest.raises(GritUsageError):
        fp.digests_compared(a, b[:1])
