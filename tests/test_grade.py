"""§4: grammar, canonicalisation, rejection rules, projection, ⊑ / ⊔, registry."""
import pytest
from hypothesis import given, strategies as st

import grit
from grit import grade as G
from grit.grade import Grade

# Appendix A.1 ids and the canonical strings SPEC-FACTS recovered from them.
PINNED = {
    "GRADE_MXFP4": (0x2370EE9EE454A183, "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"),
    "GRADE_MXFP4_RNE": (0x254285E10D6068C8, "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2rnemaxabs)"),
    "GRADE_Q4KS": (0x1C600DE02594FB55,
                   "grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)"),
    "GRADE_NVF4": (0x00FF6F4C2870831E,
                   "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)"),
    "GRADE_NVF4_RTZ": (0x006C3850A3F42DEA,
                       "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,er=rtz,esr=ratiomaxabs)"),
    "GRADE_I8S24": (0xBBBB283A2539EBE8,
                    "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:asclsb,esr=ratiomaxabs)"),
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_registered_grade_ids_match_appendix_a1(name):
    gid, canon = PINNED[name]
    g = getattr(grit, name)
    assert g.id == gid and g.canonical == canon
    assert Grade.parse(canon).id == gid
    assert grit.fnv1a64(canon.encode()) == gid
    assert grit.lookup_grade(gid) is g


def test_canonicalisation_whitespace_case_order_aliases_defaults():
    messy = """GRIT1( esr = OCPMX , s0=UE8M0,
               k0 = 0032, e = FP4, ct=dense, po=LSBFIRST, ao=unspecified, dt=float32 )"""
    assert Grade.parse(messy) == grit.GRADE_MXFP4
    assert Grade.parse(messy).canonical == PINNED["GRADE_MXFP4"][1]


def test_field_order_is_spec_order_not_alphabetical():
    g = Grade.parse("grit1(esr=ratiomaxabs,s1=f32,k1=0,s0=e4m3fn,k0=16,e=e2m1)")
    assert g == grit.GRADE_NVF4
    keys = [f.split("=")[0] for f in g.canonical[6:-1].split(",")]
    assert keys == ["e", "k0", "s0", "k1", "s1", "esr"]


def test_structural_keys_kept_at_default_looking_values():
    # k1=0 means per-tensor and is emitted (SPEC-FACTS)
    assert "k1=0" in grit.GRADE_NVF4.canonical


def test_non_default_values_emitted():
    g = Grade.parse("grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs,ao=seq,ct=pad8,po=msb)")
    assert g.canonical == "grit1(e=e2m1,k0=32,s0=e8m0,ct=pad8,po=msb,esr=exp2floormaxabs,ao=seq)"


@pytest.mark.parametrize("text,needle", [
    ("grit1(e=e2m1,k0=32,s0=e8m0,esr=floor,swizzled=1)", "unknown grade key"),   # rule 6
    ("grit1(e=e2m1,k0=32,k0=32,s0=e8m0,esr=floor)", "duplicate"),
    ("grit1(e=e2m1,s0=e8m0,esr=floor)", "missing required key"),
    ("grit1(e=e2m1,k0=32,s0=e8m0)", "missing required key"),
    ("grit1(e=u4,k0=32,s0=u6,k1=8,esr=affine)", "k1 without s1"),
    ("grit1(e=u4,k0=32,s0=u6,s1=f16,esr=affine)", "s1 without k1"),
    ("grit1(e=u4,k0=32,s0=u6,zpc=minus1,esr=affine)", "zpc without zp"),
    ("grit1(e=u4,k0=32,s0=u6,zps=shared,esr=affine)", "zps without zp"),
    ("grit1(e=u4,k0=32,s0=u6,zp=u4,zps=l1,esr=affine)", "zps=l1 without a level-1"),
    ("grit1(e=e4m3fnuz,k0=32,s0=e8m0,esr=floor)", "FNUZ"),                      # rule 4
    ("grit1(e=bfloat16,k0=32,s0=e8m0,esr=floor)", "bfloat16"),
    ("grit1(e=e2m1,k0=32,s0=e8m0,esr=sometimes)", "expected one of"),
    ("grit1(e=e2m1,k0=+32,s0=e8m0,esr=floor)", "decimal"),
    ("grit1(e=e2m1,k0=0,s0=e8m0,esr=floor)", "k0=0"),
    ("grit1(e=s8,k0=32,s0=f16,sp=4:4:u2:asclsb,esr=ratio)", "1 <= N < M"),
    ("grit1(e=s8,k0=32,s0=f16,sp=2:8:u2:asclsb,esr=ratio)", "cannot address"),
    ("grit1(e=s8,k0=32,s0=f16,sp=2:4:u2:asclsb,zp=u8,esr=ratio)", "one aux plane"),
    ("grit(e=e2m1)", "not a grade string"),
    ("grit1(e=e2m1,k0=32,s0=e8m0,esr=floor,ao=)", "empty value"),
    ("grit1(e=e2m1,k0=32,s0=x0000,esr=floor)", "ABSENT"),
])
def test_rejections(text, needle):
    with pytest.raises(grit.GritGradeError, match=needle):
        Grade.parse(text)


def test_int4_alias_is_s4_not_u4():
    g = Grade.parse("grit1(e=int4,k0=32,s0=f16,esr=ratio)")
    assert "e=s4" in g.canonical
    assert g.elem.word == 0x03E3


def test_generic_format_token_for_unregistered_words():
    # bfloat16 has no token, but its word (8 exp, 7 mantissa bits, IEEE) is legal
    bf16 = grit.formats.fmt_pack(grit.formats.FormatFields(w=16, p=8, has_inf=1, nan_enc=2, szero=1))
    g = Grade.parse(f"grit1(e=x{bf16:04x},k0=32,s0=f16,esr=ratio)")
    assert f"e=x{bf16:04x}" in g.canonical and g.elem.word == bf16
    # a registered word spelled in hex canonicalises to its name
    assert Grade.parse("grit1(e=x2043,k0=32,s0=e8m0,esr=floor)") == grit.GRADE_MXFP4


def test_decode_projection_spec_example():
    # §11.2 prints this projection for the MXFP4 pair
    want = "gritdec1(e=e2m1,k0=32,s0=e8m0,ct=dense,po=lsb,dr=rne,ds=satfinite,dt=binary32)"
    assert grit.GRADE_MXFP4.decode_projection == want
    assert grit.GRADE_MXFP4_RNE.decode_projection == want
    assert grit.GRADE_NVF4.decode_equivalent(grit.GRADE_NVF4_RTZ)
    assert not grit.GRADE_MXFP4.decode_equivalent(grit.GRADE_NVF4)
    assert "zpc=asis" in grit.GRADE_Q4KS.decode_projection


def test_refinement_order_on_ao():
    base = "grit1(e=e2m1,k0=32,s0=e8m0,esr=floor,ao={})"
    seq, pw8, pw4, tree, uns = (Grade.parse(base.format(a))
                                for a in ("seq", "pairwise8", "pairwise4", "tree", "unspec"))
    chain = [seq, pw8, tree, uns]
    for i, a in enumerate(chain):
        for j, b in enumerate(chain):
            assert a.refines(b) == (i <= j), (a, b)
    assert not pw4.refines(pw8) and not pw8.refines(pw4)
    assert (pw4 | pw8) == tree
    assert (seq | uns) == uns
    assert uns == grit.GRADE_MXFP4  # unspec is the default


def test_subnormal_axis_join_is_any():
    p = Grade.parse("grit1(e=e2m1,k0=32,s0=e8m0,esr=floor,an=preserve)")
    f = Grade.parse("grit1(e=e2m1,k0=32,s0=e8m0,esr=floor,an=ftz)")
    assert not p.refines(f) and not f.refines(p)
    assert (p | f)["an"] == "any"
    assert p.refines(p | f) and f.refines(p | f)


def test_join_of_different_representations_fails():
    with pytest.raises(grit.GritGradeError, match="no common grade"):
        grit.GRADE_MXFP4.join(grit.GRADE_NVF4)


def test_relax_weakens_only():
    seq = Grade.parse("grit1(e=e2m1,k0=32,s0=e8m0,esr=floor,ao=seq)")
    assert seq.relax(ao="unspec") == grit.GRADE_MXFP4
    with pytest.raises(grit.GritGradeError, match="strengthen"):
        grit.GRADE_MXFP4.relax(ao="seq")
    with pytest.raises(grit.GritGradeError):
        grit.GRADE_MXFP4.relax(k0=16)


def test_frame_fields_match_a4():
    ff = grit.GRADE_Q4KS.frame_fields()
    assert ff["flags"] == 0x21 and ff["n_levels"] == 2 and ff["zp_fmt"] == 0x43E5
    ff = grit.GRADE_I8S24.frame_fields()
    assert (ff["sp_n"], ff["sp_m"], ff["sp_meta_fmt"], ff["sp_order"]) == (2, 4, 1, 1)


def test_registry_learns_and_refuses_collisions_cleanly():
    g = grit.register_grade("grit1(e=e2m1,k0=64,s0=e8m0,esr=floor)")
    assert grit.lookup_grade(g.id) is g
    assert grit.register_grade(g.canonical) == g  # idempotent


def test_grade_from_names():
    assert G.grade_from("GRADE_NVF4") is grit.GRADE_NVF4
    assert G.grade_from("mxfp4_rne") is grit.GRADE_MXFP4_RNE
    assert grit.GRADE_I8S24.name == "GRADE_I8S24"


def test_key_table_shape():
    assert len(G.KEYS) == 23
    assert G.KEYS[:11] == ("e", "k0", "s0", "k1", "s1", "zp", "zpc", "zps", "sp", "ct", "po")
    assert G.KEYS.index("er") < G.KEYS.index("esr")


_tokens = st.sampled_from(["e=e2m1", "k0=32", "s0=e8m0", "esr=exp2floormaxabs", "ct=dense",
                           "po=lsb", "er=rne", "ao=unspec", "dt=binary32", "an=any"])


@given(st.permutations(["e=e2m1", "k0=32", "s0=e8m0", "esr=exp2floormaxabs", "ct=dense",
                        "po=lsb", "er=rne", "ao=unspec", "dt=binary32", "an=any"]),
       st.sampled_from(["", " ", "\n", "\t "]))
def test_any_order_any_whitespace_same_id(fields, ws):
    text = "grit1(" + ws + ("," + ws).join(fields) + ")"
    assert Grade.parse(text).id == grit.GRADE_MXFP4.id


@given(st.text(max_size=80))
def test_parse_never_raises_anything_but_grit_error(text):
    try:
        Grade.parse(text)
    except grit.GritError:
        pass


@given(st.lists(st.tuples(st.sampled_from(G.KEYS + ("zz",)),
                          st.sampled_from(["e2m1", "32", "0", "u4", "rne", "seq", "2:4:u2:asclsb",
                                           "l1", "minus1", "binary16", "ratio", "x", "pad8"])),
                max_size=10))
def test_random_field_soup_is_grit_error_or_canonical_fixpoint(items):
    text = "grit1(" + ",".join(f"{k}={v}" for k, v in items) + ")"
    try:
        g = Grade.parse(text)
    except grit.GritError:
        return
    assert Grade.parse(g.canonical).canonical == g.canonical
