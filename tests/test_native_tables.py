"""The format tables and facts compiled into grit._kernels against grit.formats.

The C kernels carry hand-written copies of what grit.formats derives: the
E2M1 values and rounding thresholds, the E4M3 value table and encoder, the
E8M0 scale values, the codes the encoders write (NaN, 1.0, largest finite),
the integer limits and the I8S24 metadata tables.  ``_kernels.tables()``
returns every one of them; ``grit.native.table_mismatches`` (run when the
package loads; a build that disagrees is not used) derives each one
again in Python, from grit.formats (values, ladders, codes) and from
grit._sparse (how a metadata byte names its quads' positions), and lists
every entry that differs.  Changing one entry of one C table fails
``test_every_table_matches``.
"""
from __future__ import annotations

import importlib
import importlib.util

import pytest

from grit.native import table_mismatches as check_native_tables

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


def test_a_build_whose_tables_disagree_is_not_used(monkeypatch):
    import grit.native as N
    tables = dict(_kernels.tables())
    tables["e2m1_values"] = _alter(tables["e2m1_values"])
    monkeypatch.setattr(N, "_kernels", _Altered(tables))
    monkeypatch.setattr(N, "NATIVE", True)
    with pytest.warns(RuntimeWarning, match="e2m1_values"):
        N._check_build()
    assert N._kernels is None and N.NATIVE is False and N.kernels() is None
