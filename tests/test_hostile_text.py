"""Hostile text and hostile paths get typed answers: integers past every
field's range and deep nesting in grade and layout strings, non-ASCII or
underscored hex in format tokens, and FIFOs named like checkpoints (which
would block open() forever).  The expected outcomes are the spec's: every
rejection a GritError (§7.1: a raised exception in Python), never
ValueError, RecursionError or a hang."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import grit
from grit.formats import format_by_name

GRADE = "grit1(e=e2m1,k0={k0},s0=e8m0,esr=exp2floormaxabs{extra})"


@pytest.mark.parametrize("k0,extra", [
    ("9" * 5000, ""),                        # past CPython's 4,300-digit int() limit
    ("1" + "0" * 40, ""),                    # long, but under the limit
    ("32", ",ao=pairwise" + "7" * 5000),
    ("32", ",sp=" + "1" * 5000 + ":4:u2:asclsb"),
    ("32", ",sp=2:" + "4" * 5000 + ":u2:asclsb"),
])
def test_huge_integers_in_a_grade_are_grade_errors(k0, extra):
    with pytest.raises(grit.GritGradeError, match="digits is out of range"):
        grit.Grade.parse(GRADE.format(k0=k0, extra=extra))


def test_ordinary_integers_still_parse():
    assert grit.Grade.parse(GRADE.format(k0="0032", extra="")).canonical == \
        grit.GRADE_MXFP4.canonical


@pytest.mark.parametrize("token", ["x2_43", "x_204", "x٢٠٤٣", "x２０４３", "x-204"])
def test_hex_format_tokens_are_four_ascii_hex_digits(token):
    with pytest.raises(grit.GritGradeError):
        format_by_name(token)
    with pytest.raises(grit.GritGradeError):
        grit.Grade.parse(f"grit1(e={token},k0=32,s0=e8m0,esr=exp2floormaxabs)")


# Grade text is ASCII.  str.lower() maps the Kelvin sign U+212A to "k", so
# "\u212a0=32" used to parse as k0=32 (found by the fuzz contract); every
# other look-alike was refused only by luck of the key table.

@pytest.mark.parametrize("text", [
    "grit1(e=e2m1,\u212a0=32,s0=e8m0,esr=exp2floormaxabs)",     # KELVIN SIGN
    "grit1(\u0435=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)",     # CYRILLIC SMALL IE
    "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs,ao=\u017feq)",  # LONG S
    "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)\u200b",     # ZERO WIDTH SPACE
    "GR\u0130T1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)",     # DOTTED CAPITAL I
])
def test_non_ascii_grade_text_is_a_grade_error(text):
    with pytest.raises(grit.GritGradeError, match="grade text is ASCII"):
        grit.Grade.parse(text)


def test_non_ascii_field_values_are_grade_errors_everywhere():
    with pytest.raises(grit.GritGradeError, match="ASCII"):
        grit.Grade.from_fields(e="e2m1", k0="32", s0="e8m0", esr="exp2floormaxabs",
                               ao="\u017feq")
    with pytest.raises(grit.GritGradeError, match="ASCII"):
        grit.GRADE_MXFP4.replace(k0="\u0663\u0662")


@pytest.mark.parametrize("ws", [" ", "\t", "\r\n", "\u00a0", "\u3000", "\u2028"])
def test_whitespace_of_any_script_is_still_stripped(ws):
    """§4.4 rule 1: all whitespace, before parsing."""
    text = f"grit1({ws}e=e2m1,{ws}k0=32,s0=e8m0,esr=exp2floormaxabs{ws}){ws}"
    assert grit.Grade.parse(text).id == 0x2370EE9EE454A183     # Appendix A.1 GRADE_MXFP4


def test_a_registered_word_in_hex_is_its_name():
    assert format_by_name("x2043") == format_by_name("e2m1") == 0x2043
    assert format_by_name("X2043") == 0x2043


@pytest.mark.parametrize("depth", [65, 400, 5000])
def test_deep_layout_nesting_is_a_layout_error(depth):
    text = "Tile(" * depth + "RowMajor" + ",[16,16])" * depth
    with pytest.raises(grit.GritLayoutError, match="nested deeper than 64"):
        grit.parse_layout(text)


def test_nesting_to_the_limit_parses():
    text = "Tile(" * 63 + "RowMajor" + ",[1,1])" * 63
    assert str(grit.parse_layout(text)).count("Tile(") == 63


# Compose is canonically nested to the right, so re-nesting can deepen an
# expression: a balanced tree of depth k has 2^k operands and a canonical
# text 2^k deep.  What the parser accepts must parse again from its canonical
# text, so the limit applies to the canonical nesting (found by the fuzz
# contract: a balanced tree 10 deep was a RecursionError; 8 deep parsed, but
# its canonical text did not).

def _balanced(k):
    s = "RowMajor"
    for _ in range(k):
        s = f"Compose({s},{s})"
    return s


@pytest.mark.parametrize("k", [7, 8, 10, 12])
def test_a_balanced_compose_tree_deeper_than_the_limit_once_canonical(k):
    # 2^k operands: canonical depth 2^k - 1 Composes + 1 leaf = 2^k > 64
    with pytest.raises(grit.GritLayoutError, match="canonical form"):
        grit.parse_layout(_balanced(k))


def test_a_balanced_compose_tree_within_the_limit_round_trips():
    e = grit.parse_layout(_balanced(6))          # 64 operands: canonical depth 63 + 1
    text = str(e)
    assert text == "Compose(RowMajor," * 63 + "RowMajor" + ")" * 63
    assert grit.parse_layout(text) == e


def test_re_nesting_one_level_past_the_limit_is_refused():
    tiles = "Tile(" * 62 + "RowMajor" + ",[1,1])" * 62          # 63 deep
    ok = f"Compose(RowMajor,{tiles})"                            # 64 deep, canonical too
    assert str(grit.parse_layout(ok)) == ok
    # 64 deep as written; canonical Compose(RowMajor,Compose(RowMajor,<tiles>)) is 65
    with pytest.raises(grit.GritLayoutError, match="canonical form"):
        grit.parse_layout(f"Compose(Compose(RowMajor,RowMajor),{tiles})")


@pytest.mark.parametrize("text", ["Pad(" + "9" * 5000 + ")", "Perm([0," + "1" * 30 + "])",
                                  "Swizzle(3," + "4" * 20 + ",3)"])
def test_huge_integers_in_a_layout_are_layout_errors(text):
    with pytest.raises(grit.GritLayoutError, match="digits is out of range"):
        grit.parse_layout(text)


# ---------------------------------------------------------------------------
# FIFOs named like checkpoints

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")


def _scan_in_child(args: list[str]) -> dict:
    """``grit scan --json`` in a child process with a time limit: a hang
    fails the test instead of stopping the suite."""
    out = subprocess.run([sys.executable, "-m", "grit.cli", "scan", "--json", *args],
                         capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout)


@needs_fifo
@pytest.mark.parametrize("how", ["direct", "tree", "manifest"])
def test_a_fifo_is_reported_unreadable_not_waited_on(tmp_path, how):
    fifo = tmp_path / "tree" / "x.safetensors"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    if how == "direct":
        args = [str(fifo)]
    elif how == "tree":
        args = [str(fifo.parent)]
    else:
        m = tmp_path / "list.txt"
        m.write_text(f"{fifo}\n")
        args = [str(m)]
    report = _scan_in_child(args)
    bad = [f for f in report["findings"] if f["category"] == "unreadable"]
    assert len(bad) == 1 and "FIFO" in bad[0]["message"], report["findings"]


@needs_fifo
def test_loading_a_fifo_is_a_usage_error(tmp_path):
    fifo = tmp_path / "x.safetensors"
    os.mkfifo(fifo)
    code = ("import grit, sys\n"
            "try:\n    grit.load(sys.argv[1])\n"
            "except grit.GritUsageError as e:\n    print('refused:', e)\n")
    out = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.startswith("refused:") and "not a regular file" in out.stdout


# ---------------------------------------------------------------------------
# shapes §7.3 accepts but numpy cannot hold

@pytest.mark.parametrize("shape", [[0, 2**40, 2**40], [2**62, 0, 32], [0, 2**31, 2**30, 32]])
def test_an_empty_shape_numpy_cannot_hold_is_a_usage_error(shape):
    d = grit.GRADE_MXFP4.descriptor().replace(group_axis=len(shape) - 1)
    a = grit.GritArray(d, shape, [b"", b"", b"", b""])      # numel = 0: every size is 0
    with pytest.raises(grit.GritUsageError, match="no float32 ndarray of that shape"):
        grit.decode(a)


def test_an_empty_shape_numpy_can_hold_decodes():
    d = grit.GRADE_MXFP4.descriptor().replace(group_axis=2)
    out = grit.decode(grit.GritArray(d, [0, 2**20, 2**20], [b"", b"", b"", b""]))
    assert out.shape == (0, 2**20, 2**20) and out.dtype == "float32"


# ---------------------------------------------------------------------------
# saves that cannot happen say why, and leave nothing behind

def _small():
    import numpy as np
    return grit.encode(np.ones((2, 64), np.float32), grit.GRADE_MXFP4)


@pytest.mark.parametrize("suffix", ["safetensors", "gguf"])
def test_saving_onto_a_directory_or_into_a_missing_folder(tmp_path, suffix):
    with pytest.raises(grit.GritUsageError, match="is a directory"):
        grit.save(str(tmp_path), {"w": _small()}, format=suffix)
    with pytest.raises(grit.GritUsageError, match="does not exist"):
        grit.save(str(tmp_path / "missing" / f"x.{suffix}"), {"w": _small()})
    assert list(tmp_path.iterdir()) == []


def test_a_gguf_extent_past_int32_is_refused_before_writing(tmp_path):
    d = grit.GRADE_MXFP4.descriptor().replace(group_axis=1)
    big = grit.GritArray(d, [2**31, 0], [b"", b"", b"", b""])
    with pytest.raises(grit.GritUsageError, match="does not fit the INT32"):
        grit.save(str(tmp_path / "x.gguf"), {"w": big})
    assert list(tmp_path.iterdir()) == []
    grit.save(str(tmp_path / "x.safetensors"), {"w": big})        # 64-bit shapes there
    assert grit.load(str(tmp_path / "x.safetensors"))["w"].shape == (2**31, 0)


# ---------------------------------------------------------------------------
# the fact layer's functions with arguments of the wrong type or range: a
# GritUsageError, never the TypeError/ValueError/UnicodeEncodeError of the
# line that tripped (each found by the fuzz contract)

def _wrong_arguments():
    from grit import vformats as V
    D = grit.Descriptor
    return [
        ("from_hex(int)", lambda: D.from_hex(123)),
        ("from_hex(None)", lambda: D.from_hex(None)),
        ("with_note(str)", lambda: D().with_note("x")),
        ("replace(unknown field)", lambda: D().replace(zz=1)),
        ("fnv1a64(h past 2^64)", lambda: grit.fnv1a64(b"a", 2**64)),
        ("fnv1a64(h negative)", lambda: grit.fnv1a64(b"a", -1)),
        ("fnv1a64(h str)", lambda: grit.fnv1a64(b"a", "x")),
        ("fnv1a128(h past 2^128)", lambda: grit.fnv1a128(b"a", 2**128)),
        ("gid(grade int)", lambda: grit.gid(5, bytes(64), [1])),
        ("gid(lone surrogate)", lambda: grit.gid("\ud800", bytes(64), [1])),
        ("gid(desc str)", lambda: grit.gid("g", "a" * 64, [1])),
        ("gid(desc int)", lambda: grit.gid("g", 5, [1])),
        ("gid(shape int)", lambda: grit.gid("g", bytes(64), 5)),
        ("digest(None)", lambda: grit.digest(None)),
        ("base32_encode(str)", lambda: grit.base32_encode("abc")),
        ("base32_encode(float)", lambda: grit.base32_encode(1.5)),
        ("encode_values(str values)", lambda: V.encode_values(0x2043, "abc")),
        ("encode_values(ragged)", lambda: V.encode_values(0x2043, [[1], [1, 2]])),
        ("encode_values(object)", lambda: V.encode_values(0x2043, [object()])),
        ("encode_values(word str)", lambda: V.encode_values("e2m1", [1.0])),
        ("decode_codes(word None)", lambda: V.decode_codes(None, [1])),
        ("decode_table(word '')", lambda: V.decode_table("")),
    ]


@pytest.mark.parametrize("name,call", _wrong_arguments(), ids=[n for n, _ in _wrong_arguments()])
def test_wrong_arguments_are_usage_errors(name, call):
    with pytest.raises(grit.GritUsageError):
        call()


@pytest.mark.parametrize("text", ["\u0131" * 26,                  # dotless i: upper() is I
                                  "\u017f" + "0" * 25,             # long s: upper() is S
                                  "0" * 24 + "\u00df",             # sharp s: upper() is SS
                                  "22T52T4K0FJVN7WCVDGAHARX0\u0130"])
def test_base32_gid_text_is_ascii(text):
    """§6.4 accepts I, L and O case-insensitively; no other script's letters
    that str.upper() happens to map onto the alphabet."""
    with pytest.raises(grit.GritGradeError, match="ASCII"):
        grit.base32_decode(text)


def test_base32_still_takes_the_spec_aliases():
    # §6.4's example, lowercased, with I/L for 1 and O for 0 substituted
    assert grit.base32_decode("22t52t4k0fjvn7wcvdgaharx0d") == \
        bytes.fromhex("42d145a24c0f96ea7e336d82a2ac740d")
    assert grit.base32_decode("2ZT52T4KOFJVN7WCVDGAHARXOD".replace("Z", "2")) == \
        grit.base32_decode("22T52T4K0FJVN7WCVDGAHARX0D")
    assert grit.base32_decode("0" * 25 + "I") == grit.base32_decode("0" * 25 + "l") == \
        (1).to_bytes(16, "big")
