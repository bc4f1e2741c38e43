"""§6: FNV-1a, gid, digest, Crockford base32 — against the spec's printed values."""
import pytest
from hypothesis import given, strategies as st

import grit
from grit.fingerprint import base32_decode, base32_encode, display_prefix
from grit.grade import GRADE_I8S24, GRADE_MXFP4

B1_DATA = bytes.fromhex("2042647 6a8caecfe".replace(" ", "")) + bytes(8)


def test_fnv_self_checks_from_spec():
    # §6.1
    assert grit.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert grit.fnv1a128(b"a").to_bytes(16, "big").hex() == "d228cb696f1a8caf78912b704e4a8964"


def test_fnv_known_values():
    # FNV-1a of the empty string is the offset basis by definition.
    assert grit.fnv1a64(b"") == 0xCBF29CE484222325
    assert grit.fnv1a128(b"") == 0x6C62272E07BB014262B821756295C58D


def test_grade_ids_are_fnv64_of_canonical():
    assert GRADE_MXFP4.id == grit.fnv1a64(GRADE_MXFP4.canonical.encode())


def test_b1_gid_digest_base32():
    d = GRADE_MXFP4.descriptor().to_bytes()
    g = grit.gid(GRADE_MXFP4.canonical, d, [32])
    assert g.hex() == "42d145a24c0f96ea7e336d82a2ac740d"
    assert base32_encode(g) == "22T52T4K0FJVN7WCVDGAHARX0D"
    dg = grit.digest([B1_DATA, b"\x7f", b"", b""])
    assert dg.hex() == "9452a02851ba1a1d793b97df51266001"


def test_b1_digest_hashes_all_four_planes():
    # SPEC-FACTS: hashing only present planes does not reproduce B.1.
    h = grit.fnv1a128((16).to_bytes(8, "little") + B1_DATA + (1).to_bytes(8, "little") + b"\x7f")
    assert h.to_bytes(16, "big").hex() != "9452a02851ba1a1d793b97df51266001"


def test_b2_gid_base32():
    d = GRADE_I8S24.descriptor().to_bytes()
    assert base32_encode(grit.gid(GRADE_I8S24.canonical, d, [32])) == "2X7NNMYRJ9K6508JQTR1J37VR9"


def test_note_not_in_gid():
    d = GRADE_MXFP4.descriptor()
    a = grit.gid(GRADE_MXFP4.canonical, d.to_bytes(), [32])
    b = grit.gid(GRADE_MXFP4.canonical, d.with_note(0xFFFFFFFF).to_bytes(), [32])
    assert a == b
    c = grit.gid(GRADE_MXFP4.canonical, d.replace(group_axis=1).to_bytes(), [32])
    assert c != a


def test_shape_in_gid():
    d = GRADE_MXFP4.descriptor().to_bytes()
    assert grit.gid(GRADE_MXFP4.canonical, d, [32]) != grit.gid(GRADE_MXFP4.canonical, d, [64])
    assert grit.gid(GRADE_MXFP4.canonical, d, [32, 1]) != grit.gid(GRADE_MXFP4.canonical, d, [32])


def test_base32_spec_example_and_first_symbol():
    g = bytes.fromhex("42d145a24c0f96ea7e336d82a2ac740d")
    assert base32_encode(g) == "22T52T4K0FJVN7WCVDGAHARX0D"
    assert base32_encode(b"\xff" * 16)[0] == "7"
    assert base32_encode(bytes(16)) == "0" * 26


def test_base32_parse_aliases_and_rejections():
    s = "22T52T4K0FJVN7WCVDGAHARX0D"
    g = bytes.fromhex("42d145a24c0f96ea7e336d82a2ac740d")
    assert base32_decode(s.lower()) == g
    assert base32_decode(s.replace("0", "O").replace("1", "I")) == g
    assert base32_decode("2" + "L" * 25) == base32_decode("2" + "1" * 25)
    with pytest.raises(grit.GritError, match="U"):
        base32_decode("U" * 26)
    with pytest.raises(grit.GritError, match="prefix"):
        base32_decode(display_prefix(g))
    with pytest.raises(grit.GritError, match="0-7"):
        base32_decode("8" + "0" * 25)


@given(st.binary(min_size=16, max_size=16))
def test_base32_roundtrip(b):
    s = base32_encode(b)
    assert len(s) == 26 and s[0] in "01234567"
    assert base32_decode(s) == b


def test_display_prefix_is_seven():
    assert display_prefix(bytes(16)) == "0000000"
