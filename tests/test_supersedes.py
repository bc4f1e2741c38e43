"""§11.2 supersedes edges: mechanical preconditions, reasons, closure."""
import pytest

import grit
from grit.supersedes import V1_EDGES, edges, equivalent, register_edge


def test_v1_edges_registered_with_decode_scope():
    pairs = {(e.from_.name, e.to.name, e.scope) for e in V1_EDGES}
    assert pairs == {("GRADE_MXFP4_RNE", "GRADE_MXFP4", "decode"),
                     ("GRADE_NVF4_RTZ", "GRADE_NVF4", "decode")}
    assert all(e.reason for e in edges())


def test_equivalence_closure_is_symmetric_and_scoped():
    assert equivalent(grit.GRADE_MXFP4, grit.GRADE_MXFP4_RNE)
    assert equivalent(grit.GRADE_MXFP4_RNE, grit.GRADE_MXFP4)
    assert not equivalent(grit.GRADE_MXFP4, grit.GRADE_MXFP4_RNE, "full")
    assert not equivalent(grit.GRADE_MXFP4, grit.GRADE_NVF4)
    assert equivalent(grit.GRADE_Q4KS, grit.GRADE_Q4KS.canonical, "full")  # identity


def test_transitive_closure():
    a = grit.Grade.parse("grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2ceilmaxabs)")
    register_edge(a, grit.GRADE_MXFP4_RNE, "decode", "ceil rule, same decode")
    assert equivalent(a, grit.GRADE_MXFP4)


def test_reason_is_mandatory():
    for reason in ("", "   ", None):
        with pytest.raises(grit.GritError):
            register_edge(grit.GRADE_MXFP4_RNE, grit.GRADE_MXFP4, "decode", reason)


def test_decode_projection_must_match():
    with pytest.raises(grit.GritGradeError, match="decode projections differ"):
        register_edge(grit.GRADE_MXFP4, grit.GRADE_NVF4, "decode", "wishful")


def test_full_scope_needs_a_suite():
    with pytest.raises(grit.GritGradeError, match="suite"):
        register_edge(grit.GRADE_MXFP4_RNE, grit.GRADE_MXFP4, "full", "no evidence")


def test_full_scope_refused_when_encode_differs_on_the_suite():
    import numpy as np
    # 5.5 has f = 1.375 < sqrt(2): floor and rne exponents agree; 7.0 (f = 1.75) does not
    suite = [np.full(32, 5.5, np.float32), np.full(32, 7.0, np.float32)]
    with pytest.raises(grit.GritGradeError, match="suite input 1"):
        register_edge(grit.GRADE_MXFP4_RNE, grit.GRADE_MXFP4, "full", "claimed", suite=suite)
    assert not equivalent(grit.GRADE_MXFP4_RNE, grit.GRADE_MXFP4, "full")
