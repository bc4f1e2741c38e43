"""The chain-and-sums FNV-1a-128 loops (grit/_native/core/fnv_wide.c, used by
fnv1a128_many and fnv1a128_many_cmp for long segments where the machine has
AVX-512 VNNI, or AVX2) against an FNV-1a-128 written here from §6.1's
constants, and against the interleaved multiplies of fnv_multi.c (the
general path) on the same messages: every test runs each loop the machine
has.  Skipped, saying why, where the machine lacks a loop; a loop the
machine has that failed its self-check at import fails."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grit.fingerprint as fp

# §6.1: 128-bit offset basis and prime, arithmetic mod 2^128
OFFSET = 0x6C62272E07BB014262B821756295C58D
PRIME = (1 << 88) + 0x13B
M128 = (1 << 128) - 1
BLOCK, CHUNK = 1024, 32          # fnv_wide.c's block and the sums' step


def ref_fnv128(data: bytes, h: int = OFFSET) -> int:
    for b in data:
        h = ((h ^ b) * PRIME) & M128
    return h


@pytest.fixture(scope="module", params=("avx512", "avx2"))
def ext(request):
    """grit._ext with the loop ``request.param`` switched on."""
    if not fp.NATIVE:
        pytest.skip("the native extension is not built")
    from grit import _ext
    loop = request.param
    if loop not in _ext.FNV_WIDE_CPU:
        pytest.skip(f"this machine (or this build) has no {loop} loop: another loop, or the "
                    "interleaved multiplies, run instead")
    assert loop in _ext.FNV_WIDE_LOOPS, f"the {loop} loop failed its self-check at import"
    was = _ext.fnv_wide()
    _ext.fnv_wide(loop)
    yield _ext
    _ext.fnv_wide(was)


def _both(ext, states, streams, lanes, others=None):
    """(the values with the chain-and-sums loop switched on, with the general one)"""
    loop = ext.fnv_wide()
    got = []
    for on in (loop, False):
        ext.fnv_wide(on)
        got.append(ext.fnv1a128_many(states, streams, lanes) if others is None
                   else ext.fnv1a128_many_cmp(states, streams, others, lanes))
    ext.fnv_wide(loop)
    return got


# states whose low byte starts the chain at its edges, carries through every word
_STATES = [OFFSET, 0, M128, (1 << 64) - 1, 1 << 64, 0xFF, 0x100, 0x80 << 120 | 0x7F]
_LENGTHS = [BLOCK, BLOCK + 1, 2 * BLOCK - 1, 2 * BLOCK, 3 * BLOCK + 77, 5 * BLOCK + 31]


@pytest.mark.parametrize("lanes", range(1, 5))
def test_matches_the_spec_near_block_edges(ext, lanes):
    rng = np.random.default_rng(lanes)
    msgs = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in _LENGTHS]
    msgs += [b"\xff" * (2 * BLOCK + 5), b"\x00" * (2 * BLOCK + 5)]
    for h in _STATES:
        want = [ref_fnv128(m, h) for m in msgs]
        on, off = _both(ext, [h] * len(msgs), [[m] for m in msgs], lanes)
        assert on == want and off == want


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, M128),
                          st.lists(st.integers(0, 4 * BLOCK + 40), min_size=1, max_size=3)),
                min_size=1, max_size=6),
       st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_matches_the_general_path(ext, items, lanes, seed):
    """Messages cut into segments of any lengths (the loop runs on the long
    ones, the general loop on the short ones and on the rest of a block)."""
    rng = np.random.default_rng(seed)
    states = [h for h, _ in items]
    streams = [[rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in cuts]
               for _, cuts in items]
    on, off = _both(ext, states, streams, lanes)
    assert on == off
    assert on[0] == ref_fnv128(b"".join(streams[0]), states[0])


@pytest.mark.parametrize("lanes", range(1, 5))
def test_comparison_finds_a_change_at_every_edge(ext, lanes):
    """A one-bit change at a block's first and last byte, at the sums' steps
    and their lag behind the chain, and in the rest after the last block,
    is found in the one message it is in; the digests stay the source's."""
    rng = np.random.default_rng(10 + lanes)
    msgs = [rng.integers(0, 256, 4 * BLOCK + 300, dtype=np.uint8).tobytes()
            for _ in range(lanes)]
    digests = [ref_fnv128(m) for m in msgs]
    on, off = _both(ext, [OFFSET] * lanes, [[m] for m in msgs], lanes, [[m] for m in msgs])
    assert on == off == (digests, [True] * lanes)
    for k in range(lanes):
        for i in (0, CHUNK - 1, CHUNK, 2 * CHUNK, 3 * CHUNK - 1, BLOCK - 1, BLOCK,
                  3 * BLOCK + 5, 4 * BLOCK - 1, 4 * BLOCK, 4 * BLOCK + 299):
            q = bytearray(msgs[k])
            q[i] ^= 1 << (i % 8)
            others = [[m] for m in msgs]
            others[k] = [bytes(q[:7]), bytes(q[7:])]
            on, off = _both(ext, [OFFSET] * lanes, [[m] for m in msgs], lanes, others)
            assert on == off == (digests, [j != k for j in range(lanes)]), (k, i)


def test_long_messages_equal_the_general_path(ext):
    """Megabytes a message, four lanes and a fifth message refilling one."""
    rng = np.random.default_rng(7)
    msgs = [rng.integers(0, 256, n, dtype=np.uint8) for n in
            (3 << 20, (3 << 20) + 513, 1 << 20, 5 << 20, (2 << 20) - 1)]
    on, off = _both(ext, [OFFSET] * 5, [[m] for m in msgs], 4)
    assert on == off
    assert on == [fp.fnv1a128(m) for m in msgs]         # the one-stream loop (fnv.c)


def test_the_switch_names_the_loops():
    """fnv_wide() names the loop in use; True picks the fastest that passed
    (the first of FNV_WIDE_LOOPS), False none, a name that loop; a loop the
    machine lacks is a ValueError."""
    if not fp.NATIVE:
        pytest.skip("the native extension is not built")
    from grit import _ext
    was = _ext.fnv_wide()
    try:
        assert set(_ext.FNV_WIDE_LOOPS) <= set(_ext.FNV_WIDE_CPU) <= {"avx512", "avx2"}
        assert _ext.fnv_wide(True) == (_ext.FNV_WIDE_LOOPS[0] if _ext.FNV_WIDE_LOOPS
                                       else False)
        assert _ext.fnv_wide(False) is False and _ext.fnv_wide() is False
        for loop in _ext.FNV_WIDE_LOOPS:
            assert _ext.fnv_wide(loop) == loop == _ext.fnv_wide()
        for bad in ({"avx512", "avx2"} - set(_ext.FNV_WIDE_LOOPS)) | {"sse9"}:
            with pytest.raises(ValueError, match="no loop"):
                _ext.fnv_wide(bad)
    finally:
        _ext.fnv_wide(was)
