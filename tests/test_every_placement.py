"""requantize, matmul and verify_placement on arrays in every registered
placement: each must give what it gives on the same array in the canonical
placement (L1: decode ∘ relayout = decode, so every operation defined through
decode is placement-invariant).  The expectation is the canonical array's own
result, computed by the same public call; what is under test is that a
non-canonical operand reaches it (the codec reads the canonical order only)."""
from __future__ import annotations

import numpy as np
import pytest

import grit
from grit.grade import REGISTERED_GRADES
from grit.kernels import register_kernel, unregister_kernel
from grit.placement.relayout import applies
from grit.placement.words import REGISTERED

from _support import assert_same_array, assert_same_bits

SHAPE = (128, 512)        # rows and K divisible by every registered tile and block
GRADES = ["GRADE_MXFP4", "GRADE_MXFP4_RNE", "GRADE_NVF4", "GRADE_NVF4_RTZ", "GRADE_Q4KS",
          "GRADE_I8S24"]
WORDS = [name for name in REGISTERED if name not in ("ROW_MAJOR", "LINEAR_META")]
ROLES = ("data", "scale", "meta")


def _array(name: str) -> grit.GritArray:
    x = np.random.default_rng(sum(map(ord, name))).standard_normal(SHAPE).astype(np.float32)
    return grit.encode(x, REGISTERED_GRADES[name])


def _placed(name: str, placement: str):
    """The array relayouted to ``placement`` on every role it applies to, or
    None when it applies to none of them."""
    a = _array(name)
    word = REGISTERED[placement][0]
    roles = [r for r in ROLES if applies(a, word, r)]
    if not roles:
        return a, None
    return a, grit.relayout(a, word)


def _applies_somewhere(name: str, placement: str) -> bool:
    a = _array(name)
    return any(applies(a, REGISTERED[placement][0], r) for r in ROLES)


CASES = [(g, p) for g in GRADES for p in WORDS if _applies_somewhere(g, p)]


def test_every_registered_placement_applies_somewhere():
    """The grid below is not vacuous: each non-canonical registered placement
    is reachable from at least one registered grade."""
    assert {p for _, p in CASES} == set(WORDS)
    assert len(CASES) >= 20


@pytest.mark.parametrize("name,placement", CASES)
def test_requantize_reads_any_placement(name, placement):
    a, b = _placed(name, placement)
    assert grit.canonical(b) is not b          # a genuinely non-canonical operand
    target = grit.GRADE_NVF4 if name != "GRADE_NVF4" else grit.GRADE_MXFP4
    got = grit.requantize(b, target)
    want = grit.requantize(a, target)
    assert got.source_grade == want.source_grade == a.grade
    assert_same_array(got.array, want.array)
    assert_same_bits(grit.decode(b), grit.decode(a))


@pytest.mark.parametrize("name,placement", CASES)
def test_matmul_kernel_reading_the_placement(name, placement):
    """A kernel that declares it reads ``placement`` is served the operand as
    it is, and computes what the reference kernel computes on the canonical
    operand (the software kernel reads its operands through grit.decode)."""
    a, b = _placed(name, placement)
    from grit.kernels import _reference_seq
    d = b.descriptor
    requires = {"data": d.placement_data, "scale": d.placement_scale}
    if d.placement_meta:
        requires["meta"] = d.placement_meta
    kname = f"test_reads_{placement.lower()}"
    register_kernel(kname, "ao=seq,ap=binary32,ab=binary32,ai=binary32,an=preserve",
                    requires, _reference_seq, cost=1e9, description="test")
    try:
        x = np.random.default_rng(1).standard_normal((2, SHAPE[1])).astype(np.float32)
        got = grit.matmul(x, b, kernel=kname)
        want = grit.matmul(x, a, kernel="reference_seq")
    finally:
        unregister_kernel(kname)
    assert got.kernel == kname
    assert_same_bits(got.values, want.values)


@pytest.mark.parametrize("name,placement", CASES)
def test_verify_placement_proves_any_placement(name, placement):
    a, b = _placed(name, placement)
    claimed = grit.assume_placement(b, REGISTERED[placement][0], "bytes moved by relayout")
    assert claimed.descriptor.assumed
    proved = grit.verify_placement(claimed, reference=grit.decode(a))
    assert not proved.descriptor.assumed
    assert proved.planes == b.planes
