"""The format tables and facts compiled into grit._kernels against grit.formats.

The C kernels carry hand-written copies of what grit.formats derives: the
E2M1 values and rounding thresholds, the E4M3 value table and encoder, the
E8M0 scale values, the codes the encoders write (NaN, 1.0, largest finite),
the integer limits and the I8S24 metadata tables.  ``_kernels.tables()``
returns every one of them; :func:`check_native_tables` derives each one
again in Python, from grit.formats (values, ladders, codes) and from
grit._sparse (how a metadata byte names its quads' positions), and lists
every entry that differs.  Changing one entry of one C table fails
``test_every_table_matches``.
"""
from __future__ import annotations

import importlib
import importlib.util

import pytest

# Keys of tables(); AVX2_TABLE_KEYS exist only in builds with the AVX2 loops.
TABLE_KEYS = (
    "canonical_nan",
    "e2m1_values", "e2m1_thresholds", "e2m1_max", "e2m1_emax",
    "e4m3_values", "e4m3_max", "e4m3_max_code", "e4m3_nan_code", "e4m3_one_code",
    "e4m3_rne_thresholds", "e4m3_rtz_thresholds",
    "e8m0_values", "e8m0_bias", "e8m0_nan_code",
    "f16_max_code", "f16_nan_code", "f16_one_code",
    "u4_max", "u6_max", "s8_max",
    "i8s24_kept_per_nibble", "i8s24_slot_of", "i8s24_kept_per_meta_byte",
    "i8s24_pair_of_mask",
)
AVX2_TABLE_KEYS = ("i8s24_shuffle_of_meta",)


def check_native_tables(kernels) -> list[str]:
    """Every entry of ``kernels.tables()`` (``kernels``: the grit._kernels
    module) that differs from the same table derived from grit.formats and
    grit._sparse, one message per entry ("key[index]: got ..., expected
    ..."), plus missing and unknown keys; [] when all agree.  Floats are
    compared by their binary32 bits (NaN must be 0x7FC00000, -0.0 is not
    +0.0).  Imports only grit.formats, grit._sparse and numpy; about 2 ms
    once their caches are warm."""
    import math
    import struct

    import numpy as np

    from grit._sparse import meta_indices
    from grit.formats import (BINARY16, CANONICAL_NAN, E2M1, E4M3, E8M0, S8, U4, U6,
                              f32_bits, fmt_decode, fmt_encode, ladder)

    get = getattr(kernels, "tables", None)
    if get is None:
        return ["tables: the extension has no tables()"]
    got = get()
    out: list[str] = []

    def bits(v) -> int:
        return struct.unpack("<I", struct.pack("<f", v))[0]

    def floats(key, want):
        """want: the binary32 bit patterns of the entries"""
        g = got[key]
        if len(g) != len(want):
            out.append(f"{key}: {len(g)} entries, expected {len(want)}")
            return
        for i, (v, w) in enumerate(zip(g, want)):
            if bits(v) != w:
                out.append(f"{key}[{i}]: got {v!r} (0x{bits(v):08x}), expected "
                           f"{struct.unpack('<f', struct.pack('<I', w))[0]!r} (0x{w:08x})")

    def real(key, want: float):
        v = got[key]
        if not isinstance(v, float) or bits(v) != f32_bits(want):
            out.append(f"{key}: got {v!r}, expected {want!r}")

    def ints(key, want, g=None, where=""):
        """want: an int or nested tuples / lists of ints"""
        g = got[key] if g is None else g
        want = tuple(want) if isinstance(want, list) else want
        if isinstance(want, tuple) and g == want:
            return
        if not isinstance(want, (tuple, list)):
            if g != want or isinstance(g, (tuple, list)):
                out.append(f"{key}{where}: got {g!r}, expected {want!r}")
            return
        if not isinstance(g, tuple) or len(g) != len(want):
            out.append(f"{key}{where}: got {g!r:.60}, expected {len(want)} entries")
            return
        for i, (v, w) in enumerate(zip(g, want)):
            ints(key, w, v, f"{where}[{i}]")

    checks = {}

    # -- small-format values and facts
    checks["canonical_nan"] = lambda k: ints(k, CANONICAL_NAN)
    checks["e2m1_values"] = lambda k: floats(k, [f32_bits(fmt_decode(E2M1.word, c))
                                                 for c in range(16)])
    lad2 = ladder(E2M1.word)
    checks["e2m1_thresholds"] = lambda k: floats(
        k, [f32_bits((lad2[i][0] + lad2[i + 1][0]) / 2) for i in range(len(lad2) - 1)])
    checks["e2m1_max"] = lambda k: real(k, E2M1.max_finite)
    checks["e2m1_emax"] = lambda k: ints(k, E2M1.emax)
    checks["e4m3_values"] = lambda k: floats(k, [f32_bits(fmt_decode(E4M3.word, c))
                                                 for c in range(256)])
    checks["e4m3_max"] = lambda k: real(k, E4M3.max_finite)
    lad4 = ladder(E4M3.word)
    checks["e4m3_max_code"] = lambda k: ints(k, lad4[-1][1])
    checks["e4m3_nan_code"] = lambda k: ints(k, E4M3.nan_code)
    checks["e4m3_one_code"] = lambda k: ints(k, fmt_encode(E4M3.word, 1.0))

    # E4M3 scale encoder: entry k - 1 is the least binary32 v >= 0 that it
    # takes to code k or above.  rtz: magnitude k itself.  rne (§2.5): the
    # midpoint of magnitudes k - 1 and k when the tie goes up, to an even
    # code k, else the binary32 just above the midpoint.
    def e4m3_thresholds(k, rounding):
        if [c for _, c in lad4] != list(range(len(lad4))):
            out.append(f"{k}: the E4M3 ladder is not in code order")
            return
        want = []
        for code in range(1, len(lad4)):
            if rounding == "rtz":
                want.append(f32_bits(lad4[code][0]))
            else:
                mid = f32_bits((lad4[code - 1][0] + lad4[code][0]) / 2)   # exact
                want.append(mid if code % 2 == 0 else mid + 1)
        floats(k, want)
    checks["e4m3_rne_thresholds"] = lambda k: e4m3_thresholds(k, "rne")
    checks["e4m3_rtz_thresholds"] = lambda k: e4m3_thresholds(k, "rtz")

    checks["e8m0_values"] = lambda k: floats(k, [f32_bits(fmt_decode(E8M0.word, c))
                                                 for c in range(256)])
    checks["e8m0_bias"] = lambda k: ints(k, E8M0.bias)
    checks["e8m0_nan_code"] = lambda k: ints(k, E8M0.nan_code)

    # binary16 (the codes only: its ladder has 2^15 rungs, too many to build
    # here): the largest finite code is followed by +inf; 1.0 decodes to 1.0
    def f16_max(k):
        c = got[k]
        if not (isinstance(c, int) and 0 <= c < 0x7FFF
                and math.isfinite(fmt_decode(BINARY16.word, c))
                and math.isinf(fmt_decode(BINARY16.word, c + 1))):
            out.append(f"{k}: got {c!r}, not the largest finite binary16 code")
    checks["f16_max_code"] = f16_max
    checks["f16_nan_code"] = lambda k: ints(k, BINARY16.nan_code)

    def f16_one(k):
        c = got[k]
        if not (isinstance(c, int) and 0 <= c < 0x8000 and fmt_decode(BINARY16.word, c) == 1.0):
            out.append(f"{k}: got {c!r}, not the binary16 code of 1.0")
    checks["f16_one_code"] = f16_one
    checks["u4_max"] = lambda k: ints(k, int(U4.max_finite))
    checks["u6_max"] = lambda k: ints(k, int(U6.max_finite))
    checks["s8_max"] = lambda k: ints(k, int(S8.max_finite))

    # -- I8S24 metadata (§3.8, §10.4): metadata byte b names quads 2b and
    # 2b + 1 (of bytes 0..15, quad 2b is the nibble b alone); a quad keeps
    # the set of positions its two indices name, and the stored values go to
    # its kept positions in ascending order: rank[q, j] is the value position
    # j of quad q gets, counted from 0 within the quad.
    idx = meta_indices(np.arange(256, dtype=np.uint8).tobytes(), 2, 2, 512)
    kept = (idx[:, :, None] == np.arange(4)).any(axis=1)         # (512 quads, 4 positions)
    rank = np.cumsum(kept, axis=1) - kept
    nib = slice(0, 32, 2)
    checks["i8s24_kept_per_nibble"] = lambda k: ints(k, kept[nib].sum(axis=1).tolist())
    checks["i8s24_slot_of"] = lambda k: ints(
        k, [tuple(r) for r in np.where(kept, rank + 1, 0)[nib].tolist()])
    checks["i8s24_kept_per_meta_byte"] = lambda k: ints(
        k, kept.reshape(256, 8).sum(axis=1).tolist())
    pair = [0] * 16           # masks of one, three or four positions: never used, 0
    for n in range(16):
        i0, i1 = idx[2 * n].tolist()
        if i0 < i1:           # two positions, named in ascending order
            pair[(1 << i0) | (1 << i1)] = n
    checks["i8s24_pair_of_mask"] = lambda k: ints(k, pair)

    # AVX2 decode: for metadata byte b as byte kk of a group whose eight
    # quads keep two positions each, the PSHUFB control that puts stored
    # value 4kk + 2h + rank at each kept position of quad h (h = 0, 1) --
    # control byte 4h + j for position j -- and 0x80 (a zero) elsewhere
    def shuffles(k):
        lane = np.where(kept, rank + 2 * (np.arange(512) % 2)[:, None], -1).reshape(256, 8)
        shift = np.arange(0, 64, 8, dtype=np.uint64)
        want = []
        for kk in range(4):
            v = np.where(lane < 0, 0x80, lane + 4 * kk).astype(np.uint64)
            want.append(tuple((v << shift).sum(axis=1, dtype=np.uint64).tolist()))
        ints(k, want)
    checks["i8s24_shuffle_of_meta"] = shuffles

    avx2_only = ("i8s24_shuffle_of_meta",)       # built only with the AVX2 loops
    for key in checks:
        if key not in got and key not in avx2_only:
            out.append(f"{key}: missing from tables()")
    for key in got:
        if key not in checks:
            out.append(f"{key}: no check derives this table")
            continue
        try:
            checks[key](key)
        except Exception as exc:   # a value of the wrong shape or type
            out.append(f"{key}: cannot be compared ({exc!r})")
    return out


_spec = importlib.util.find_spec("grit._kernels")
if _spec is None:  # pragma: no cover - only where no compiler exists
    _kernels = None
else:
    # a build that is present but fails to import (its self-check) fails here
    _kernels = importlib.import_module("grit._kernels")

pytestmark = pytest.mark.skipif(_kernels is None, reason="grit._kernels is not built")


def test_tables_agree_with_grit_formats():
    assert check_native_tables(_kernels) == []


def test_the_check_knows_every_table():
    assert set(_kernels.tables()) - set(AVX2_TABLE_KEYS) == set(TABLE_KEYS)
    missing = check_native_tables(_Altered({}))
    assert missing == [f"{key}: missing from tables()" for key in TABLE_KEYS]


@pytest.mark.parametrize("key", TABLE_KEYS + AVX2_TABLE_KEYS)
def test_every_table_matches(key):
    tables = _kernels.tables()
    if key in AVX2_TABLE_KEYS and key not in tables:
        pytest.skip(f"{key}: this build has no AVX2 loops")
    bad = [m for m in check_native_tables(_kernels) if m.split(":")[0].split("[")[0] == key]
    assert bad == []


def test_tables_are_the_same_on_every_simd_path():
    prev = _kernels.simd()
    try:
        _kernels.simd(False)
        portable = _kernels.tables()
        _kernels.simd(True)
        assert _kernels.tables().keys() == portable.keys()
        for key, value in portable.items():
            assert repr(_kernels.tables()[key]) == repr(value), key
    finally:
        _kernels.simd(prev == "avx2")


class _Altered:
    """A stand-in for the extension whose tables() has one entry changed."""

    def __init__(self, tables):
        self._tables = tables

    def tables(self):
        return self._tables


def _alter(value):
    """value with one entry changed (the last leaf of a nested tuple)."""
    if isinstance(value, tuple):
        return value[:-1] + (_alter(value[-1]),)
    if isinstance(value, float):
        return -value if value == value and value != 0.0 else 1.5
    return value ^ 1


@pytest.mark.parametrize("key", TABLE_KEYS + AVX2_TABLE_KEYS)
def test_check_reports_an_altered_entry(key):
    tables = dict(_kernels.tables())
    if key not in tables:
        pytest.skip(f"{key}: this build has no AVX2 loops")
    tables[key] = _alter(tables[key])
    bad = check_native_tables(_Altered(tables))
    assert bad and all(m.startswith(key) for m in bad), bad


def test_check_reports_missing_unknown_and_malformed_tables():
    tables = dict(_kernels.tables())
    del tables["e2m1_values"]
    tables["e9m9_values"] = (0.0,)
    tables["e4m3_values"] = None
    bad = check_native_tables(_Altered(tables))
    assert sorted(m.split(" (")[0] for m in bad) == [
        "e2m1_values: missing from tables()", "e4m3_values: cannot be compared",
        "e9m9_values: no check derives this table"]
