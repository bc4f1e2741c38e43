"""§5.3: layout expressions — grammar, canonical text, words, registry, the
collision rule, and every index map against its docs/placements.md formula."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grit
from grit.fingerprint import fnv1a64
from grit.placement import expr as E
from grit.placement.expr import (ColMajor, Compose, Interleave, Opaque, Pad, Perm, RowMajor,
                                 Swizzle, Tile, index_map, layout_word, parse_layout,
                                 register_layout, resolve_layout, same_layout)

# --- grammar and canonical text -------------------------------------------------------


def _perm(n):
    return st.permutations(list(range(n))).map(lambda p: Perm(tuple(p)))


leaf = st.one_of(st.just(RowMajor()), st.just(ColMajor()),
                 st.integers(1, 6).flatmap(_perm),
                 st.builds(lambda b, m, k: Swizzle(b, m, b + k), st.integers(0, 3),
                           st.integers(0, 4), st.integers(0, 3)),
                 st.integers(1, 64).map(Pad),
                 st.builds(lambda v, b: Opaque(v, b), st.from_regex(r"[a-z0-9_.\-]{1,8}",
                                                                     fullmatch=True),
                           st.binary(max_size=6)))


def _extend(children):
    return st.one_of(
        st.builds(lambda p, a, b: Tile(p, (a, b)), children, st.integers(1, 32),
                  st.integers(1, 32)),
        st.builds(Compose, children, children))


exprs = st.recursive(leaf, _extend, max_leaves=6)


@given(exprs)
@settings(max_examples=150, deadline=None)
def test_parse_str_round_trip(e):
    text = str(e)
    assert parse_layout(text) == e
    assert str(parse_layout(text)) == text
    # whitespace and constructor case are spelling, not meaning
    spaced = " ".join(text.replace("(", " ( ").replace(",", " , ").split())
    assert str(parse_layout(spaced.replace("RowMajor", "rowmajor"))) == text


@given(exprs)
@settings(max_examples=100, deadline=None)
def test_word_is_fnv_of_canonical_text(e):
    cls = 0xF if e.opaque else 0x8
    assert layout_word(e) == (cls << 60) | (fnv1a64(str(e).encode()) & ((1 << 60) - 1))


def test_pinned_texts_and_words():
    assert str(Tile(RowMajor(), (16, 16))) == "Tile(RowMajor,[16,16])"
    assert str(Interleave(Perm((1, 0)), 8)) == "Interleave(Perm([1,0]),8)"
    assert str(Opaque("nv.tma", b"\x01\xab")) == "Opaque(nv.tma,01ab)"
    assert layout_word("RowMajor") == 0x8 << 60 | (fnv1a64(b"RowMajor") & ((1 << 60) - 1))
    assert layout_word("Opaque(x,)") >> 60 == 0xF


def test_compose_is_right_nested():
    a, b, c = ColMajor(), Perm((1, 0)), Swizzle(1, 0, 1)
    assert Compose(Compose(a, b), c) == Compose(a, Compose(b, c))
    assert str(parse_layout("Compose(Compose(ColMajor,Perm([1,0])),Swizzle(1,0,1))")) == \
        "Compose(ColMajor,Compose(Perm([1,0]),Swizzle(1,0,1)))"


@pytest.mark.parametrize("bad", [
    "", "RowMajor(", "Tile(RowMajor,[16])", "Tile(RowMajor,[0,4])", "Perm([0,0])", "Perm([])",
    "Swizzle(3,0,1)", "Pad(0)", "Interleave(RowMajor,0)", "Interleave(Interleave(RowMajor,1),1)",
    "Compose(Interleave(RowMajor,1),RowMajor)", "Tile(Interleave(RowMajor,1),[1,1])",
    "Opaque(a,abc)", "Opaque(,00)", "Banana", "RowMajor RowMajor", "Perm([1,-0])"])
def test_malformed_expressions_are_layout_errors(bad):
    with pytest.raises(grit.GritLayoutError):
        parse_layout(bad)


# --- the registry and §5.3's collision rule -------------------------------------------


def test_registry_resolves_and_compares_full_expressions():
    w = register_layout("Tile(ColMajor,[4,4])")
    assert resolve_layout(w) == Tile(ColMajor(), (4, 4))
    assert same_layout(w, "Tile(ColMajor,[4,4])")
    assert not same_layout(w, "Tile(ColMajor,[4,8])")
    assert same_layout(grit.layouts.ROW_MAJOR, grit.layouts.ROW_MAJOR)
    assert not same_layout(grit.layouts.ROW_MAJOR, w)


def test_unresolvable_hashed_words_never_compare_equal():
    w = 0x8123456789ABCDEF
    assert resolve_layout(w) is None
    with pytest.raises(grit.GritLayoutError, match="never suffice"):
        same_layout(w, w)


def test_collision_is_refused(monkeypatch):
    a, b = parse_layout("Perm([2,0,1])"), parse_layout("Perm([1,2,0])")
    register_layout(a)
    # simulate two expressions hashing alike (FNV-1a is not collision resistant)
    monkeypatch.setattr(E, "layout_word", lambda e: layout_word(a))
    with pytest.raises(grit.GritLayoutError, match="collision"):
        E.register_layout(b)
    assert resolve_layout(layout_word(a)) == a      # the first stays


def test_equal_words_with_different_expressions_refuse_relayout(monkeypatch):
    x = grit.encode(np.ones((16, 64), np.float32), grit.GRADE_MXFP4)
    p = parse_layout("Compose(ColMajor,Perm([1,0]))")
    y = grit.relayout(x, data=p)
    other = parse_layout("Compose(ColMajor,Perm([0,1]))")
    monkeypatch.setattr(E, "_REGISTRY", dict(E._REGISTRY))
    monkeypatch.setitem(E._REGISTRY, layout_word(other), p)   # same word, other text
    with pytest.raises(grit.GritLayoutError, match="collision|different"):
        grit.relayout(y, data=other)


# --- index maps: the docs/placements.md formulas, written out --------------------------


def test_colmajor_index_map():
    R, C = 3, 5
    idx = index_map(ColMajor(), R, C)
    for r in range(R):
        for c in range(C):
            assert idx[c * R + r] == r * C + c


@pytest.mark.parametrize("tr,tc", [(2, 3), (16, 16), (1, 4)])
def test_tile_index_map(tr, tc):
    R, C = 4 * tr, 2 * tc
    idx = index_map(Tile(RowMajor(), (tr, tc)), R, C)
    for r in range(R):
        for c in range(C):
            tile = (r // tr) * (C // tc) + c // tc
            assert idx[tile * tr * tc + (r % tr) * tc + c % tc] == r * C + c


def test_tile_of_colmajor_is_colmajor_inside_tiles():
    idx = index_map(Tile(ColMajor(), (2, 2)), 2, 4)
    assert idx.tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def test_perm_is_periodic_gather():
    idx = index_map(Perm((2, 0, 1)), 2, 3)
    assert idx.tolist() == [2, 0, 1, 5, 3, 4]


@pytest.mark.parametrize("bits,base,shift", [(1, 0, 1), (2, 1, 3), (3, 4, 3)])
def test_swizzle_index_map_and_involution(bits, base, shift):
    N = 1 << (base + bits + shift + 1)
    idx = index_map(Swizzle(bits, base, shift), 1, N)
    mask = ((1 << bits) - 1) << base
    assert idx.tolist() == [j ^ ((j >> shift) & mask) for j in range(N)]
    assert sorted(idx.tolist()) == list(range(N))
    assert (idx[idx] == np.arange(N)).all()


def test_compose_applies_first_then_second():
    a, b = ColMajor(), Perm((1, 0))
    R, C = 2, 3
    x = np.arange(R * C)
    first = x[index_map(a, R, C)]
    assert (x[index_map(Compose(a, b), R, C)] == first[index_map(b, R, C)]).all()


@given(exprs.filter(lambda e: not e.opaque), st.integers(0, 3), st.integers(0, 3))
@settings(max_examples=100, deadline=None)
def test_apply_then_inverse_is_identity(e, a, b):
    R, C = 8 << a, 8 << b
    x = np.random.default_rng(a * 7 + b).integers(0, 255, (1, R * C, 3), dtype=np.uint8)
    try:
        y = E.apply(e, x, R, C)
    except grit.GritLayoutError:
        return                                   # the grid does not fit this expression
    assert (E.apply(e, y, R, C, inverse=True) == x).all()
    assert sorted(index_map(e, R, C).tolist()) == list(range(R * C))


def test_pad_is_an_alignment_precondition():
    assert index_map(Pad(4), 2, 8).tolist() == list(range(16))
    with pytest.raises(grit.GritLayoutError, match="exact plane sizes"):
        index_map(Pad(3), 2, 8)


def test_opaque_has_no_index_map():
    with pytest.raises(grit.GritLayoutError, match="L3"):
        index_map(Compose(RowMajor(), Opaque("v", b"")), 1, 4)


# --- the πn shorthand of docs/placements.md, and short refusals ---------------------


def _pi_by_formula(n):
    # docs/placements.md: πn[2l + h] = h·n/2 + l (byte l holds element l low,
    # element l + n/2 high)
    out = [None] * n
    for l_ in range(n // 2):
        for h in (0, 1):
            out[2 * l_ + h] = h * n // 2 + l_
    return tuple(out)


@pytest.mark.parametrize("n", [2, 16, 32, 64])
def test_pi_n_is_the_documented_permutation(n):
    for text in (f"Perm(π{n})", f"Perm(pi{n})", f"perm( PI{n} )"):
        e = parse_layout(text)
        assert e == Perm(_pi_by_formula(n))
        # the canonical text (and so the word) is the permutation written out
        assert str(e) == "Perm([" + ",".join(map(str, _pi_by_formula(n))) + "])"


def test_the_documented_ggml_expressions_parse():
    import pathlib
    import re
    from grit import ggml
    doc = (pathlib.Path(__file__).parent.parent / "docs" / "placements.md").read_text("utf-8")
    table = {"Q4_K": ggml.Q4_K_DATA, "MXFP4": ggml.MXFP4_DATA, "NVFP4": ggml.NVFP4_DATA}
    for name, want in table.items():
        [text] = re.findall(rf"^\| {name} \|[^|]*\| `([^`]*)`", doc, re.M)
        e = parse_layout(text)
        assert e == want and layout_word(e) == layout_word(want), name


@pytest.mark.parametrize("text, why", [
    ("Perm(π63)", "even n"), ("Perm(π0)", "even n"), ("Perm(π99999999999)", "even n"),
    ("Perm(π)", "expected '['"), ("Perm(pix)", "expected '['"), ("Perm(p4)", "expected '['"),
])
def test_pi_n_refusals(text, why):
    with pytest.raises(grit.GritLayoutError, match=re.escape(why)):
        parse_layout(text)


@pytest.mark.parametrize("how", ["placement", "scale"])
def test_a_refused_relayout_names_the_placement_in_a_short_line(how):
    # SWIZZLE_128X4B tiles 128 rows of scales; a 64-row tensor has 64
    a = grit.encode(np.ones((64, 128), np.float32), grit.GRADE_MXFP4)
    with pytest.raises(grit.GritLayoutError) as info:
        grit.relayout(a, **{how: grit.layouts.SWIZZLE_128X4B})
    first = str(info.value).splitlines()[0]
    assert first == ("placement SWIZZLE_128X4B does not apply here: grid 64x4 is not a "
                     "multiple of the 128x4 tile")
    # an unregistered expression with a long Perm is shortened, its length said
    long = Tile(Perm(tuple(range(511, -1, -1))), (128, 4))
    with pytest.raises(grit.GritLayoutError) as info:
        grit.relayout(a, scale=long)
    first = str(info.value).splitlines()[0]
    assert len(first) < 160 and "512 entries" in first and "128x4 tile" in first
