"""§3 / Appendix A.4: the pinned 64-byte descriptor."""
import pytest

import grit
from grit import descriptor as D
from grit.grade import GRADE_I8S24, GRADE_MXFP4, GRADE_NVF4, GRADE_Q4KS

# Appendix A.4, copied from the spec text (32 hex digits per printed line).
A4 = {
    "GRADE_MXFP4": "47525431400101004320074800000000"
                   "00002000000000000000000000000000"
                   "01000000000000100100000000000010"
                   "000000000000000083a154e49eee7023",
    "GRADE_Q4KS": "4752543140010221e343e5436f35e543"
                  "00002000080000000000000000000000"
                  "01000000000000100100000000000010"
                  "010000000000001055fb9425e00d601c",
    "GRADE_NVF4": "4752543140010200432087281f370000"
                  "00001000000000000000000000000000"
                  "01000000000000100100000000000010"
                  "00000000000000001e8370284c6fff00",
    "GRADE_I8S24": "4752543140010104e7036f3500000000"
                   "00002000000002040101000000000000"
                   "01000000000000100100000000000010"
                   "1100000000000010e8eb39253a28bbbb",
}
GRADES = {"GRADE_MXFP4": GRADE_MXFP4, "GRADE_Q4KS": GRADE_Q4KS,
          "GRADE_NVF4": GRADE_NVF4, "GRADE_I8S24": GRADE_I8S24}


def test_struct_is_64_bytes_no_padding():
    assert D.DESC_STRUCT.size == 64
    assert len(grit.Descriptor().to_bytes()) == 64


@pytest.mark.parametrize("name", sorted(A4))
def test_appendix_a4_reference_descriptor_byte_exact(name):
    assert GRADES[name].descriptor().to_bytes().hex() == A4[name]


@pytest.mark.parametrize("name", sorted(A4))
def test_a4_parse_roundtrip_and_fields(name):
    d = grit.Descriptor.from_hex(A4[name])
    assert d.magic == 0x31545247 and d.hdr_bytes == 64 and d.version == 1
    assert d.grade_id == GRADES[name].id
    assert d.to_bytes().hex() == A4[name]


def test_a4_mxfp4_fields_as_the_spec_reads_them():
    # "47525431 = magic 'GRT1'; 40 = hdr_bytes 64; 01 = version; 01 = n_levels;
    #  00 = flags; 4320 = elem 0x2043 LE; 0748 = scale0 0x4807 LE"
    d = grit.Descriptor.from_hex(A4["GRADE_MXFP4"])
    assert bytes.fromhex(A4["GRADE_MXFP4"])[:4] == b"GRT1"
    assert (d.n_levels, d.flags, d.elem, d.scale0, d.scale1, d.zp_fmt) == (
        1, 0, 0x2043, 0x4807, 0, 0)
    assert d.k0 == 32 and d.placement_data == grit.layouts.ROW_MAJOR
    assert d.placement_meta == 0


def test_q4ks_flags_and_i8s24_sparsity_fields():
    q = grit.Descriptor.from_hex(A4["GRADE_Q4KS"])
    assert q.flags == D.F_HAS_ZP | D.F_ZP_L1SCALED == 0x21
    assert (q.k0, q.k1, q.n_levels) == (32, 8, 2)
    s = grit.Descriptor.from_hex(A4["GRADE_I8S24"])
    assert s.flags == D.F_SPARSE
    assert (s.sp_n, s.sp_m, s.sp_meta_fmt, s.sp_order) == (2, 4, D.SPMETA_U2, D.SPORDER_ASC_LSB)
    assert s.placement_meta == grit.layouts.LINEAR_META


def test_frame_note_split():
    d = GRADE_MXFP4.descriptor()
    b = d.to_bytes()
    n = d.with_note(D.NOTE_ASSUMED | (7 << D.NOTE_PRODUCER_SHIFT))
    nb = n.to_bytes()
    assert nb[28:32] == (0x701).to_bytes(4, "little")
    assert nb[:28] == b[:28] and nb[32:] == b[32:]
    assert n.frame_bytes() == d.frame_bytes() and len(d.frame_bytes()) == 60
    assert n.assumed and n.producer == 7 and not d.assumed


@pytest.mark.parametrize("bad", [b"", bytes(63), bytes(65)])
def test_wrong_length_is_a_grit_error(bad):
    with pytest.raises(grit.GritGradeError):
        grit.Descriptor.from_bytes(bad)


def test_non_buffer_and_bad_hex():
    with pytest.raises(grit.GritUsageError):
        grit.Descriptor.from_bytes(12345)
    with pytest.raises(grit.GritGradeError):
        grit.Descriptor.from_hex("zz" * 64)


@pytest.mark.parametrize("fill", [0x00, 0xFF])
def test_degenerate_patterns_parse(fill):
    d = grit.Descriptor.from_bytes(bytes([fill]) * 64)
    assert d.to_bytes() == bytes([fill]) * 64
    assert d.group_axis == (-1 if fill else 0)


def test_out_of_range_field_on_pack():
    with pytest.raises(grit.GritUsageError):
        grit.Descriptor(k0=70000).to_bytes()
