"""Encode/decode arithmetic read against the spec's text (#12 items 9–12).

Every expected byte here is derived by hand from the GRIT v1 text (the
derivation is written beside it), or, for item 12, from an independent numpy
transcription of GPTQ's own quantizer.  spec/reference.py (stdlib only, no
grit import) is held to the same answers, and both codec paths (native
kernels on and off) give the same bytes.
"""
import math
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from _support import load_reference

import grit
from grit import native
from grit.codec.packing import unpack_stream
from grit.formats import E8M0, FormatFields, fmt_encode, fmt_pack
from grit.grade import Grade

ROOT = Path(__file__).resolve().parents[1]


def _load_reference():
    return load_reference("grit_spec_reference_arith")


REF = _load_reference()


def known(text: str) -> Grade:
    g = Grade.parse(text)
    return grit.lookup_grade(g.id) or grit.register_grade(g)


def hexplanes(a) -> list:
    return [bytes(p).hex() for p in a.planes]


def ref_encode(text: str, values) -> list:
    _, planes = REF.encode(text, [len(values)], [float(v) for v in values])
    return [p.hex() for p in planes]


@pytest.fixture(params=[True, False], ids=["native", "numpy"])
def both_paths(request, monkeypatch):
    monkeypatch.setattr(native, "NATIVE", request.param and native.NATIVE)
    return request.param


def encode_hex(text: str, values) -> list:
    return hexplanes(grit.encode(np.array(values, dtype=np.float32), known(text)))


def decode_bits(text: str, shape, planes) -> list:
    g = known(text)
    a = grit.GritArray(g.descriptor(group_axis=len(shape) - 1), tuple(shape), planes)
    return grit.decode(a).reshape(-1).view(np.uint32).tolist()


def ref_decode_bits(text: str, shape, planes) -> list:
    desc = REF.descriptor_for(text, len(shape) - 1)
    return REF.decode(desc, list(shape), planes, grades=[text])


NAN = math.nan
ES = ("satfinite", "satmax", "ovfinf")
#: arrays per (grade, es) in the grit-vs-reference agreement run; raise for long runs
ROUNDS = int(os.environ.get("GRIT_ARITH_ROUNDS", 150))


# ---------------------------------------------------------------------------
# Item 9 — §9.1 rule 2: a group holding NaN or ±∞ is poisoned under every es

@pytest.mark.parametrize("es", ES)
@pytest.mark.parametrize("er", ("rne", "rtz"))
def test_issue_example_poisoned_group_every_es(es, er, both_paths):
    # [10000, NaN, 1, 1] holds a NaN, so by §9.1 rule 2 the group's scale is
    # the scale format's NaN code and every element code is 0, whatever es
    # says about projecting finite values.  E4M3 (nan_enc = 1): NaN is the
    # all-ones code at the top exponent, sign clear: 0 1111 111 = 0x7F.  Four
    # E2M1 codes 0, two per byte: 00 00.  (Under ovfinf the scale a finite
    # amax 10000 would give, f32(10000 / 6) = 1666.7 > 464, projects to NaN;
    # dividing by it must not reach the E2M1 projection.)
    text = f"grit1(e=e2m1,k0=4,s0=e4m3,er={er},es={es},esr=ratiomaxabs)"
    want = ["0000", "7f", "", ""]
    for v in ([10000, NAN, 1, 1], [10000, math.inf, 1, 1], [-math.inf, 1, 1, 10000]):
        assert encode_hex(text, v) == want
        assert ref_encode(text, v) == want


@pytest.mark.parametrize("es", ES)
def test_poisoned_block_two_levels(es, both_paths):
    # grit1(e=e2m1,k0=4,s0=e4m3,k1=0,s1=e4m3,...) on [A, NaN, 1, 1, 1, 1, 1, 1]
    # with A = f32(2849.28):
    #   §10.3 step 1 (generalised): amax over the finite values = A;
    #     sT = f32(f32(A / 6) / 448) = 1.06 → E4M3 RNE: between 1.0 (0x38) and
    #     1.125 (0x39), nearer 1.0 → s1 = 38; sT re-read = 1.0.
    #   block 0 holds NaN → s0[0] = 0x7F, four codes 0 → 00 00.  (Its finite
    #     part would give f32(A / 6) / 1.0 = 474.9 > 464: NaN under ovfinf.)
    #   block 1: bamax = 1 → f32(f32(1 / 6) / 1.0) = 0.1666667 → E4M3 in
    #     [0.125, 0.25) has step 1/64: 0.171875 (m = 3) is nearest → exponent
    #     -3 + bias 7 = 4: 0 0100 011 = 0x23; S = 0.171875; 1 / S = 5.82 →
    #     E2M1 6.0 (code 7) → bytes 77 77.
    text = f"grit1(e=e2m1,k0=4,s0=e4m3,k1=0,s1=e4m3,es={es},esr=ratiomaxabs)"
    v = [np.float32(2849.28), NAN, 1, 1, 1, 1, 1, 1]
    want = ["00007777", "7f23", "38", ""]
    assert encode_hex(text, v) == want
    assert ref_encode(text, v) == want


@pytest.mark.parametrize("es", ES)
def test_poisoned_level1_group_when_s0_has_no_nan(es):
    # s0 = u8 has no NaN code, s1 = binary16 has one: the poisoned unit is the
    # level-1 group (docs/spec-decisions.md §9 Poison).  [1e6, NaN, 1, 1 | 1, 1,
    # 1, 1] with k0 = 4, k1 = 2: the one level-1 group holds NaN → s1 =
    # binary16 quiet NaN 0x7E00 (bytes 00 7e), both s0 codes 0, eight s8 codes 0.
    text = f"grit1(e=s8,k0=4,s0=u8,k1=2,s1=binary16,es={es},esr=ratiomaxabs)"
    v = [1e6, NAN, 1, 1, 1, 1, 1, 1]
    want = ["00" * 8, "0000", "007e", ""]
    assert encode_hex(text, v) == want
    assert ref_encode(text, v) == want


@pytest.mark.parametrize("es", ES)
def test_poisoned_sparse_group(es):
    # 2:4 selection first: the two largest magnitudes, NaN maximal — of
    # [1, NaN, 10000, 1] indices 1 (NaN) and 2 (10000), metadata u2 LSB-first
    # 1 | 2 << 2 = 0x09.  The group holds NaN → s0 = 0x7F, the two stored E2M1
    # codes 0 → one byte 00.
    text = f"grit1(e=e2m1,k0=4,s0=e4m3,sp=2:4:u2:asclsb,es={es},esr=ratiomaxabs)"
    v = [1, NAN, 10000, 1]
    assert encode_hex(text, v) == ["00", "7f", "", "09"]
    assert ref_encode(text, v) == ["00", "7f", "", "09"]


@pytest.mark.parametrize("es", ES)
def test_poisoned_affine_group(es):
    # One-level affine: the group holds NaN → s0 = E4M3 NaN 0x7F, the zero
    # point 0 and the four u4 codes 0 (00 00).
    text = f"grit1(e=u4,k0=4,s0=e4m3,zp=u4,es={es},esr=affineminmax)"
    v = [10000, NAN, 1, 1]
    assert encode_hex(text, v) == ["0000", "7f", "", "00"]
    assert ref_encode(text, v) == ["0000", "7f", "", "00"]


@pytest.mark.parametrize("es", ES)
def test_no_scale_format_with_nan_keeps_the_typed_error(es):
    # §9.1 rule 2 needs "its format's NaN code"; u8 has none and there is no
    # level 1, so the group cannot be represented: GritEncodeError (decisions §9).
    with pytest.raises(grit.GritEncodeError, match="NaN code"):
        grit.encode([NAN] + [0.0] * 31, f"grit1(e=s8,k0=32,s0=u8,es={es},esr=ratiomaxabs)")
    with pytest.raises(REF.EncodeError):
        REF.encode(f"grit1(e=s8,k0=32,s0=u8,es={es},esr=ratiomaxabs)", [32], [NAN] + [0.0] * 31)


_AGREE_GRADES = [
    "grit1(e=e2m1,k0=4,s0=e4m3,es={es},esr=ratiomaxabs)",
    "grit1(e=s8,k0=4,s0=binary16,es={es},esr=ratiomaxabs)",
    "grit1(e=e2m1,k0=4,s0=e8m0,es={es},esr=exp2floormaxabs)",
    "grit1(e=e2m1,k0=4,s0=e8m0,es={es},esr=exp2rnemaxabs)",
    "grit1(e=e2m1,k0=4,s0=e4m3,k1=0,s1=binary32,es={es},esr=ratiomaxabs)",
    "grit1(e=e2m1,k0=4,s0=e4m3,k1=2,s1=e4m3,es={es},esr=ratiomaxabs)",
    "grit1(e=s8,k0=4,s0=u8,k1=2,s1=binary16,es={es},esr=ratiomaxabs)",
    "grit1(e=s8,k0=8,s0=binary16,sp=2:4:u2:asclsb,es={es},esr=ratiomaxabs)",
    "grit1(e=e2m1,k0=4,s0=e4m3,sp=2:4:u2:asclsb,es={es},esr=ratiomaxabs)",
    "grit1(e=u4,k0=4,s0=e4m3,zp=u4,es={es},esr=affineminmax)",
    "grit1(e=u4,k0=4,s0=binary16,zp=u4,zpc=minus1,es={es},esr=affineminmax)",
    "grit1(e=u4,k0=4,s0=u6,k1=2,s1=binary16,zp=u6,zps=l1,es={es},esr=affineminmax)",
    "grit1(e=u4,k0=4,s0=u6,k1=2,s1=e4m3,zp=u6,zps=l1,es={es},esr=affineminmax)",
]


@pytest.mark.parametrize("es", ES)
@pytest.mark.parametrize("template", _AGREE_GRADES)
def test_poison_agrees_with_the_reference(template, es):
    # Random groups with NaN / ±∞ injected, over magnitudes wide enough that
    # es matters: grit and spec/reference.py give the same planes, or both
    # refuse with their typed encode error.
    text = template.format(es=es)
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    n = 16
    for _ in range(ROUNDS):
        v = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 9, n)).astype(np.float32)
        for i in rng.choice(n, rng.integers(1, 3), replace=False):
            v[i] = rng.choice([np.nan, np.inf, -np.inf])
        try:
            got = encode_hex(text, v)
        except grit.GritEncodeError:
            got = "refused"
        try:
            want = ref_encode(text, v)
        except REF.EncodeError:
            want = "refused"
        assert got == want, (text, v.tolist())
        if es != "ovfinf":
            # every grade here has a scale format with a NaN code, so a group
            # holding NaN/±∞ never makes encode refuse.  (Under ovfinf a group
            # without NaN/±∞ whose computed scale overflows to NaN still does:
            # v / NaN into an element format without NaN is §2.5 step 1's
            # error, docs/spec-decisions.md §9.)
            assert got != "refused", (text, v.tolist())


# ---------------------------------------------------------------------------
# Item 10 — §2.5 steps 2 and 5: unsigned non-integer formats encode |x|

U_E2M1 = fmt_pack(FormatFields(w=4, p=2, unsigned=1))     # {0, 1/8, ..., 16, 24}: 0x4043


def test_e8m0_of_minus_four():
    # Step 2: a = |-4| = 4, neg = 1.  Step 3/4: 4 = 2^2 is on E8M0's ladder
    # (code c ↦ 2^(c − 127)) at c = 129 = 0x81.  Step 5: E8M0 is unsigned, no
    # sign is ORed in.  0x81, not the least code 0x00 — and not 0xFE, which
    # is 2^127.
    assert fmt_encode(E8M0.word, -4.0) == 0x81
    assert REF.fmt_encode(E8M0.word, -4.0) == 0x81
    assert REF.fmt_decode(E8M0.word, 0x81) == 4.0 and REF.fmt_decode(E8M0.word, 0xFE) == 2.0 ** 127


def test_dt_projection_into_unsigned_formats(both_paths):
    # §8.1 step 6 projects the step-5 value into dt with fmt_encode.  s8
    # codes FC 03 FF 00 = -4, 3, -1, 0 under a binary16 scale 1.0 (0x3C00)
    # give step-5 values -4, 3, -1, 0.  Into E8M0: |-4| = 4 → 0x81 → 4.0
    # (0x40800000); 3 is the tie between 2 (0x80) and 4 (0x81), even code →
    # 2.0 (0x40000000); |-1| → 0x7F → 1.0 (0x3F800000); 0 lies below the
    # least value 2^-127 → code 0 → 2^-127 (binary32 subnormal 0x00400000).
    planes = [bytes([0xFC, 0x03, 0xFF, 0x00]), struct.pack("<H", 0x3C00), b"", b""]
    text = "grit1(e=s8,k0=4,s0=binary16,dt=e8m0,esr=ratiomaxabs)"
    want = [0x40800000, 0x40000000, 0x3F800000, 0x00400000]
    assert decode_bits(text, [4], planes) == want
    assert ref_decode_bits(text, [4], planes) == want
    # Into the unsigned E2M1-shaped x4043 ({0, .125, .25, .375, .5, .75, 1,
    # 1.5, 2, 3, 4, 6, 8, 12, 16, 24}): |-4| = 4 (code 10) → 4.0; 3 → 3.0;
    # |-1| → 1.0; 0 → 0 (+0.0).
    text = f"grit1(e=s8,k0=4,s0=binary16,dt=x{U_E2M1:04x},esr=ratiomaxabs)"
    want = [0x40800000, 0x40400000, 0x3F800000, 0x00000000]
    assert decode_bits(text, [4], planes) == want
    assert ref_decode_bits(text, [4], planes) == want


def test_negative_into_unsigned_integer_still_clamps():
    # §2.5's last paragraph: integers round, then clamp (§1.5) — -4 into u4 is 0
    assert fmt_encode(grit.formats.U4.word, -4.0) == 0
    assert REF.fmt_encode(grit.formats.U4.word, -4.0) == 0


# ---------------------------------------------------------------------------
# Item 11 — §8.1 step 5: z := fmt_decode(zp) + (ZP_MINUS1 ? 1 : 0) in binary32

def test_minus_zero_zero_point_becomes_plus_zero(both_paths):
    # E4M3 elements and zero points, binary16 scales.  Group 0: S = 1.0
    # (0x3C00), zp = 0x80 (-0).  z = f32(-0 + 0) = +0 (IEEE: the sum of
    # opposite-signed zeros is +0 under RNE).  e = -0 (0x80): e - z = -0 - +0
    # = -0, S · -0 = -0 → 0x80000000.  e = +0 (0x00): +0 - +0 = +0 → 0.
    # Skipping the addition would give -0 - (-0) = +0 for the first.
    # Group 1: S = -1.0 (0xBC00), zp = -0: e - z as above, then S · -0 = +0
    # and S · +0 = -0.
    text = "grit1(e=e4m3,k0=4,s0=binary16,zp=e4m3,esr=affineminmax)"
    planes = [bytes([0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00]),
              struct.pack("<HH", 0x3C00, 0xBC00), b"", bytes([0x80, 0x80])]
    want = [0x80000000, 0, 0x80000000, 0, 0, 0x80000000, 0, 0x80000000]
    assert decode_bits(text, [8], planes) == want
    assert ref_decode_bits(text, [8], planes) == want
    # with ZP_MINUS1: z = f32(-0 + 1) = 1; e - z = -1 (E4M3 0x80 and 0x00 are
    # ±0) → S · -1 = -1 (0xBF800000) in group 0, +1 (0x3F800000) in group 1
    text = "grit1(e=e4m3,k0=4,s0=binary16,zp=e4m3,zpc=minus1,esr=affineminmax)"
    want = [0xBF800000] * 4 + [0x3F800000] * 4
    assert decode_bits(text, [8], planes) == want
    assert ref_decode_bits(text, [8], planes) == want


# ---------------------------------------------------------------------------
# Item 12 — one-level affine is GPTQ's quantizer: clamp(round(v / S) + z)

def gptq_numpy(groups: np.ndarray, maxq: int):
    """GPTQ's per-group asymmetric quantizer transcribed to numpy float32
    (IST-DASLab/gptq quant.py, AutoGPTQ auto_gptq/quantization/quantizer.py:
    xmin = min(min x, 0), xmax = max(max x, 0), scale = (xmax - xmin) / maxq,
    zero = round(-xmin / scale), q = clamp(round(x / scale) + zero, 0, maxq);
    torch.round is round-half-to-even, the tensors are float32).  The all-zero
    group, where GPTQ widens the range to [-1, 1], is left out by the callers."""
    f = np.float32
    xmin = np.minimum(groups.min(axis=1), f(0))
    xmax = np.maximum(groups.max(axis=1), f(0))
    scale = (xmax - xmin) / f(maxq)
    zero = np.rint(-xmin / scale)
    q = np.clip(np.rint(groups / scale[:, None]) + zero[:, None], f(0), f(maxq))
    return scale, zero, q.astype(np.int64)


def gptq_old_formula(groups: np.ndarray, maxq: int) -> np.ndarray:
    """The arithmetic encode used before: clamp(rne(f32(f32(v / S) + z)))."""
    scale, zero, _ = gptq_numpy(groups, maxq)
    y = (groups / scale[:, None]) + zero[:, None]
    return np.clip(np.rint(y), 0, maxq).astype(np.int64)


def _gptq_groups(seed: int, n_groups: int, k0: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((n_groups, k0)) * 10.0 ** rng.uniform(-4, 4, (n_groups, 1))
    g += rng.uniform(-1, 1, (n_groups, 1)) * np.abs(g).max(axis=1, keepdims=True)
    g = g.astype(np.float32)
    # a quarter of the groups sit on exact half-way points of their own step:
    # lo = -L, hi = 15 - L with S = 1, z = L, values k + 1/2 — the ties the
    # order of round-then-add decides (odd z flips the even neighbour)
    t = n_groups // 4
    L = rng.integers(1, 15, t).astype(np.float32)
    ties = rng.integers(-8, 8, (t, k0)).astype(np.float32) + np.float32(0.5)
    ties[:, 0], ties[:, 1] = -L, 15 - L
    g[:t] = np.clip(ties, -L[:, None], (15 - L)[:, None])
    return g


@pytest.mark.parametrize("e,maxq", [("u4", 15), ("u8", 255), ("u2", 3)])
def test_affine_l1_equals_gptq_quantizer(e, maxq):
    # binary32 scales make the scale projection the identity, so the planes
    # must be exactly GPTQ's scale, zero and codes
    k0, n_groups = 32, 4000
    groups = _gptq_groups(7 + maxq, n_groups, k0)
    if maxq != 15:          # the tie construction above is for 4 bits
        groups = groups[n_groups // 4:]
    text = f"grit1(e={e},k0={k0},s0=binary32,zp={e},esr=affineminmax)"
    a = grit.encode(groups.reshape(-1), known(text))
    scale, zero, q = gptq_numpy(groups, maxq)
    w = {"u2": 2, "u4": 4, "u8": 8}[e]
    codes = unpack_stream(bytes(a.planes[0]), groups.size, w).astype(np.int64)
    assert np.array_equal(np.frombuffer(bytes(a.planes[1]), "<f4"), scale)
    assert np.array_equal(np.frombuffer(bytes(a.planes[3]), np.uint8).astype(np.int64) & maxq,
                          zero.astype(np.int64))
    assert np.array_equal(codes.reshape(groups.shape), q)
    if maxq == 15:          # the tie groups tell the two orders apart
        assert np.count_nonzero(gptq_old_formula(groups, maxq) != q) > 1000


def test_affine_l1_gptq_by_hand():
    # [-5, 10, 2.5, 0.5], u4, binary32 scale: lo = -5, hi = 10,
    # S = f32(15 / 15) = 1.0 (0000803f), z = rne(5 / 1) = 5 (zero-point byte 05).
    # q = clamp(rne(v / S) + z): -5 → 0; 10 → 15; 2.5 → rne(2.5) = 2 → 7;
    # 0.5 → rne(0.5) = 0 → 5.  (rne(v / S + z) would give rne(7.5) = 8 and
    # rne(5.5) = 6.)  Nibbles LSB-first: (0, 15) → f0, (7, 5) → 57.
    text = "grit1(e=u4,k0=4,s0=binary32,zp=u4,esr=affineminmax)"
    want = ["f057", "0000803f", "", "05"]
    assert encode_hex(text, [-5, 10, 2.5, 0.5]) == want
    assert ref_encode(text, [-5, 10, 2.5, 0.5]) == want


def test_affine_l1_reference_agrees_on_random_groups():
    # spec/reference.py is an independent transcription; a few hundred groups
    # (it is scalar Python), binary16 scales and ZP_MINUS1 included
    for text in ("grit1(e=u4,k0=16,s0=binary16,zp=u4,esr=affineminmax)",
                 "grit1(e=u4,k0=16,s0=binary16,zp=u4,zpc=minus1,esr=affineminmax)",
                 "grit1(e=u4,k0=16,s0=binary32,zp=u4,esr=affineminmax)"):
        groups = _gptq_groups(3, 200, 16)
        v = groups.reshape(-1)
        assert encode_hex(text, v) == ref_encode(text, v), text
