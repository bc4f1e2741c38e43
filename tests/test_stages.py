"""The placements as typed stages: every registered word resolves to the stage
class docs/placements.md names for it, opaque and unresolvable words to none,
and the stages' size rules are the ones grit.check applies (the spec's §7.3
equations, then PACK_K4_12B's 12 bytes per super-block, then INTERLEAVED's
single data plane — sizes derived here by hand from the grade)."""
import pytest

import grit
from grit.errors import GritLayoutError
from grit.facts import canonical_sizes
from grit.placement import stages as S
from grit.placement.words import REGISTERED

W = {n: w for n, (w, _) in REGISTERED.items()}
EXPECTED = {
    ("ROW_MAJOR", "GRADE_MXFP4", "data"): S.Canonical,
    ("LINEAR_META", "GRADE_I8S24", "meta"): S.Canonical,
    ("COL_MAJOR", "GRADE_MXFP4", "data"): S.Permutation,
    ("TILE_16X16", "GRADE_NVF4", "scale"): S.Permutation,
    ("SWIZZLE_128X4B", "GRADE_MXFP4", "scale"): S.Permutation,
    ("META_M16N8K32", "GRADE_I8S24", "meta"): S.Permutation,
    ("BLOCK_AOS", "GRADE_Q4KS", "data"): S.Interleaved,
    ("PACK_K4_12B", "GRADE_Q4KS", "scale"): S.PackK4,
    ("PACK_K4_12B", "GRADE_Q4KS", "meta"): S.PackK4,
}


@pytest.mark.parametrize("word,grade,role", sorted(EXPECTED))
def test_registered_words_resolve_to_their_stage(word, grade, role):
    d = getattr(grit, grade).descriptor()
    st = S.resolve(d, role, W[word], target=True)
    assert type(st) is EXPECTED[(word, grade, role)] and st.word == W[word]


def test_every_registered_word_is_covered():
    assert {w for w, _, _ in EXPECTED} == set(W)


@pytest.mark.parametrize("word", [0xF000000000000001, 0x8000000000000BAD])
def test_opaque_and_unresolvable_words_are_no_stage(word):
    d = grit.GRADE_MXFP4.descriptor()
    with pytest.raises(GritLayoutError):
        S.resolve(d, "data", word, target=False)


def test_stage_size_rules():
    q = grit.GRADE_Q4KS.descriptor()          # 256 elements: 128 data, 8+8 u6, 2 binary16
    ps = canonical_sizes(q, [512])
    assert ps.sizes == (256, 16, 8, 16)
    packed = q.replace(placement_scale=W["PACK_K4_12B"], placement_meta=W["PACK_K4_12B"])
    assert S.plane_sizes(packed, ps) == (256, 2 * 12, 8, 0)
    both = packed.replace(placement_data=W["BLOCK_AOS"], flags=q.flags | 0x10)
    assert S.plane_sizes(both, ps) == (256 + 24 + 8, 0, 0, 0)
    assert grit.plane_sizes(both, [512]).sizes == S.plane_sizes(both, ps)


def test_half_a_pack_keeps_the_written_sizes():
    q = grit.GRADE_Q4KS.descriptor()
    ps = canonical_sizes(q, [512])
    half = q.replace(placement_scale=W["PACK_K4_12B"])
    assert S.plane_sizes(half, ps) == ps.sizes
    det = grit.diagnose(half, [512], list(ps.sizes))
    assert det.status == grit.Status.OK                  # step 3 admits every word


def test_the_interleaved_flag_is_a_step2_rule():
    q = grit.GRADE_Q4KS.descriptor()
    flag_only = q.replace(flags=q.flags | 0x10)
    assert S.interleave_problem(flag_only)[0] == "flags"
    assert S.interleave_problem(q.replace(placement_data=W["BLOCK_AOS"])) is None
    assert S.interleave_problem(flag_only.replace(placement_data=W["BLOCK_AOS"])) is None
