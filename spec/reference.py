#!/usr/bin/env python3
"""GRIT v1 reference implementation and conformance-vector generator.

A deliberately simple, scalar, standard-library-only transcription of the GRIT v1
specification (GRIT — Grouped Reduced-precision Interchange Type, Normative
Specification, version 1).  It does not import the ``grit`` package: it is
an independent oracle.  Where the specification text is silent it follows
docs/spec-decisions.md; comments cite the section each piece transcribes.

Command line (§15)::

    python3 spec/reference.py gen    [--out PATH]   # regenerate spec/conformance/vectors.json
    python3 spec/reference.py verify [--in PATH]    # re-derive every vector and check it
    python3 spec/reference.py verify --spec-only    # only what the text decides (§15;
                                                    # "decision" keys, docs/spec-decisions.md)

``gen`` is deterministic: the same bytes on every run.

Importable API (load this file with importlib; every name below is public)::

    decode(desc, shape, planes, grades=None) -> list[int]
        binary32 bit patterns of every element, in C order of the logical array.
        desc: 64 bytes or 128 hex digits; planes: four bytes-likes
        (data, scale0, scale1, aux) or the concatenated payload.
    encode(grade_text, shape, values, group_axis=None) -> (desc_bytes, [data, scale0, scale1, aux])
        values in C order (each rounded to binary32 first); group_axis defaults
        to the last axis.
    check(desc, shape, planes_or_sizes, level=1, expected_digest=None, grades=None) -> str
        "Ok", "SizeMismatch", "GradeUnknown", "PlacementUnknown" or "DigestMismatch".
        planes_or_sizes: four bytes-likes or four byte counts (level 1 only).
        The grades the checker knows are GRADES (name -> canonical string) unless
        ``grades`` (an iterable of grade strings) is given.
    grade_canonical(text) -> str      grade_id(text) -> int      decode_projection(text) -> str
    gid(canonical_grade, desc, shape) -> bytes   (16, big-endian)
    digest(planes) -> bytes (16, big-endian)
    base32_encode(value16) -> str     base32_decode(text) -> bytes
    fnv1a64(data) -> int              fnv1a128(data) -> int
    fmt_decode(word, code) -> float   fmt_encode(word, x, rounding="rne", sat="satfinite") -> int
    ladder(word) -> list[(magnitude, code)]
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import struct
import sys
import time

__all__ = [
    "decode", "encode", "check", "grade_canonical", "grade_id", "decode_projection",
    "gid", "digest", "base32_encode", "base32_decode", "fnv1a64", "fnv1a128",
    "fmt_decode", "fmt_encode", "ladder", "GRADES", "STATUSES", "ReferenceError_",
    "GradeError", "EncodeError", "plane_sizes", "pack_desc", "unpack_desc",
    "descriptor_for", "lin_order",
]

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_VECTORS = os.path.join(HERE, "conformance", "vectors.json")


class ReferenceError_(Exception):
    """Base of every error this module raises on bad input."""


class GradeError(ReferenceError_):
    """A grade string that §4.4 rejects, or a descriptor with no knowable grade."""


class EncodeError(ReferenceError_):
    """encode() cannot project these values into this grade."""


# ===========================================================================
# §1 binary32 working precision

_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
CANONICAL_NAN = 0x7FC00000                      # §1.2


def f32(x: float) -> float:
    """Round to binary32 (RNE), returned as a Python float: one named step (§1.1).

    A double product, quotient, sum or difference of two binary32 values rounded
    once to binary32 equals the binary32 operation (53 >= 2*24 + 2), so every
    step below is "compute in double, then f32()"."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:                       # rounds past the largest finite value
        return math.copysign(math.inf, x)


def f32_bits(x: float) -> int:
    """Bit pattern of binary32 x; every NaN is 0x7FC00000 (§1.2)."""
    if x != x:
        return CANONICAL_NAN
    return _U32.unpack(_F32.pack(f32(x)))[0]


def bits_f32(b: int) -> float:
    return _F32.unpack(_U32.pack(b & 0xFFFFFFFF))[0]


def signbit(x: float) -> bool:
    return math.copysign(1.0, x) < 0


def div(a: float, b: float) -> float:
    """IEEE division in double (Python raises on a zero divisor)."""
    if b == 0:
        if a != a or a == 0:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def floor_log2(a: float) -> int:
    """floor(log2(a)) for a > 0, exactly, from the exponent field (§9.1 rule 4)."""
    return math.frexp(a)[1] - 1


def round_int(q: float, rounding: str, neg: bool) -> int:
    """Round the finite magnitude q >= 0 to an integer; ``neg`` is the sign of the
    value being rounded (directed modes see it)."""
    lo = math.floor(q)
    frac = q - lo                               # exact in double
    if frac == 0:
        return lo
    if rounding == "rne":
        return lo + 1 if frac > 0.5 or (frac == 0.5 and lo % 2 == 1) else lo
    if rounding == "rna":
        return lo + 1 if frac >= 0.5 else lo
    if rounding == "rtz":
        return lo
    if rounding == "rtp":
        return lo if neg else lo + 1
    if rounding == "rtn":
        return lo + 1 if neg else lo
    raise ValueError(f"unknown rounding {rounding!r}")


def rne_int_clamp(x: float, lo: int, hi: int) -> int:
    """clamp(rne_int(x), lo, hi) for a binary32 x (±inf clamps; NaN is 0)."""
    if x != x:
        return max(lo, min(hi, 0))
    if math.isinf(x):
        return hi if x > 0 else lo
    n = round_int(abs(x), "rne", x < 0)
    return max(lo, min(hi, -n if x < 0 else n))


def rne_int_plus_clamp(x: float, z: int, lo: int, hi: int) -> int:
    """clamp(rne_int(x) + z, lo, hi) for a binary32 x: round first, then add
    the integer z exactly, then clamp (±inf clamps).  NaN — a scale that
    es=ovfinf carried to NaN — has no integer code (§2.5 step 1)."""
    if x != x:
        raise EncodeError("NaN cannot be encoded in an integer format (§2.5 step 1)")
    if math.isinf(x):
        return rne_int_clamp(x, lo, hi)
    n = round_int(abs(x), "rne", x < 0)
    return max(lo, min(hi, (-n if x < 0 else n) + z))


# ===========================================================================
# §2 grit_fmt_t

ROUNDINGS = ("rne", "rna", "rtz", "rtp", "rtn")
SATURATIONS = ("satfinite", "satmax", "ovfinf")


class Fmt:
    """The seven fields of a format word (§2.1) and the constants they imply."""

    def __init__(self, word: int):
        self.word = word & 0xFFFF
        self.w = (word & 31) + 1
        self.p = (word >> 5) & 31
        self.has_inf = (word >> 10) & 1
        self.nan_enc = (word >> 11) & 3
        self.szero = (word >> 13) & 1
        self.unsigned = (word >> 14) & 1
        self.bias_ovr = (word >> 15) & 1
        if self.p == 31:
            self.kind, self.m_bits, self.e_bits, self.bias = "int", 0, 0, 0
        elif self.p == 0:
            self.kind, self.m_bits, self.e_bits = "exp", 0, self.w
            self.bias = (1 << (self.w - 1)) - 1
        else:
            self.kind, self.m_bits = "float", self.p - 1
            self.e_bits = self.w - (0 if self.unsigned else 1) - self.m_bits
            self.bias = (1 << (self.e_bits - 1)) - 1 if self.e_bits >= 1 else 0

    # -- special codes
    @property
    def has_nan(self) -> bool:
        if self.kind == "int":
            return False
        return self.nan_enc != 0 or bool(self.has_inf)

    @property
    def top_exp(self) -> int:
        return (1 << self.e_bits) - 1

    @property
    def nan_code(self) -> int:
        """The NaN code encode emits (§2.5 step 1)."""
        if self.kind == "exp" and self.nan_enc == 1:
            return (1 << self.w) - 1
        if self.kind == "float":
            m = self.m_bits
            if self.nan_enc == 1:
                return (self.top_exp << m) | ((1 << m) - 1)
            if self.nan_enc == 2:                 # quiet NaN: mantissa MSB set
                return (self.top_exp << m) | (1 << (m - 1))
        raise EncodeError(f"format 0x{self.word:04x} has no NaN encoding")

    @property
    def inf_code(self) -> int:
        return self.top_exp << self.m_bits

    @property
    def top_code(self) -> int:
        """Sign-cleared code of the largest finite value."""
        w, m = self.w, self.m_bits
        if self.kind == "int":
            return (1 << w) - 1 if self.unsigned else (1 << (w - 1)) - 1
        if self.kind == "exp":
            return (1 << w) - (2 if self.nan_enc == 1 else 1)
        t = self.top_exp
        if self.has_inf:
            return ((t - 1) << m) | ((1 << m) - 1)
        if self.nan_enc == 2:
            return t << m
        if self.nan_enc == 1:
            return (t << m) | ((1 << m) - 2) if m > 0 else (t - 1) << m
        return (t << m) | ((1 << m) - 1)

    @property
    def max_finite(self) -> float:
        return fmt_decode(self.word, self.top_code)

    @property
    def smallest_positive_code(self) -> int:
        return 0 if self.kind == "exp" else 1


def fmt_problem(word: int) -> str | None:
    """None if ``word`` is a legal v1 format word, else why not
    (docs/spec-decisions.md, "Legality")."""
    if word == 0:
        return "0x0000 is ABSENT"
    f = Fmt(word)
    if f.bias_ovr:
        return "bias_ovr must be 0 (§2.1)"
    if f.nan_enc == 3:
        return "nan_enc 3 is reserved"
    if f.w < 2:
        return "1-bit formats do not exist in v1"
    if f.kind == "int":
        if f.has_inf or f.nan_enc or f.szero:
            return "integers have no Inf, NaN or signed zero"
        return None if f.w <= 24 else "integer wider than 24 bits"
    if f.kind == "exp":
        if not f.unsigned or f.has_inf or f.szero or f.nan_enc == 2 or f.w > 8:
            return "exponent-only formats are unsigned, zero-less, Inf-less, nan_enc 0/1, w <= 8"
        if floor_log2(f.max_finite) > 127:
            return "largest value overflows binary32"
        return None
    if f.e_bits < 1:
        return "no exponent bits"
    if f.m_bits > 23:
        return "more than 23 mantissa bits"
    if f.szero != (0 if f.unsigned else 1):
        return "szero must be 1 exactly when signed"
    if f.has_inf and f.nan_enc != 2:
        return "has_inf requires nan_enc 2"
    if f.nan_enc == 2 and f.m_bits == 0:
        return "nan_enc 2 needs a mantissa bit"
    # every finite value and the smallest subnormal must be binary32 values
    if 1 - f.bias - f.m_bits < -149:
        return "smallest subnormal underflows binary32"
    t = f.top_exp
    if f.has_inf:
        emax = t - 1 - f.bias
    elif f.nan_enc == 1 and f.m_bits == 0:
        emax = t - 1 - f.bias
    else:
        emax = t - f.bias
    if emax > 127:
        return "largest finite value overflows binary32"
    return None


def fmt_decode(word: int, code: int) -> float:
    """§2.4, transcribed.  Exact: every value is a binary32 value (NaN for NaN codes)."""
    f = Fmt(word)
    w = f.w
    code &= (1 << w) - 1
    if f.p == 31:                                            # integer
        if f.unsigned:
            return float(code)
        if code >= 1 << (w - 1):
            code -= 1 << w
        return float(code)
    if f.p == 0:                                             # exponent-only
        if f.nan_enc != 0 and code == (1 << w) - 1:
            return math.nan
        return math.ldexp(1.0, code - ((1 << (w - 1)) - 1))
    m_bits = f.p - 1                                         # floating point
    e_bits = w - (0 if f.unsigned else 1) - m_bits
    bias = (1 << (e_bits - 1)) - 1
    m = code & ((1 << m_bits) - 1)
    e = (code >> m_bits) & ((1 << e_bits) - 1)
    s = 0 if f.unsigned else (code >> (m_bits + e_bits)) & 1
    if e == (1 << e_bits) - 1:
        if f.has_inf:
            v = math.inf if m == 0 else math.nan
        elif f.nan_enc == 1 and m == (1 << m_bits) - 1:
            v = math.nan
        elif f.nan_enc == 2 and m != 0:
            v = math.nan
        else:
            v = math.ldexp((1 << m_bits) + m, e - bias - m_bits)
    elif e == 0:
        v = math.ldexp(m, 1 - bias - m_bits)                 # subnormal
    else:
        v = math.ldexp((1 << m_bits) + m, e - bias - m_bits)
    return -v if s else v


_LADDERS: dict[int, list[tuple[float, int]]] = {}


def ladder(word: int) -> list[tuple[float, int]]:
    """§2.5: (magnitude, code) of every sign-cleared code that decodes finite,
    by increasing magnitude.  Float and exponent-only formats of width <= 8."""
    if word in _LADDERS:
        return _LADDERS[word]
    f = Fmt(word)
    if f.w > 8 or f.kind == "int":
        raise ValueError("the magnitude ladder is for float/exponent-only formats of width <= 8")
    sign = 0 if f.unsigned else 1 << (f.w - 1)
    lad = []
    for code in range(1 << f.w):
        if code & sign:
            continue
        v = fmt_decode(word, code)
        if math.isfinite(v):
            lad.append((v, code))
    lad.sort()
    _LADDERS[word] = lad
    return lad


def _take_upper(d_lo: float, d_hi: float, c_lo: int, rounding: str, neg: bool) -> bool:
    """Between two neighbours (distances exact), whether to take the larger one."""
    if rounding == "rne":
        return d_hi < d_lo or (d_hi == d_lo and c_lo % 2 == 1)
    if rounding == "rna":
        return d_hi <= d_lo
    if rounding == "rtz":
        return False
    if rounding == "rtp":
        return not neg
    return neg                                              # rtn


def _ladder_round(f: Fmt, a: float, neg: bool, rounding: str) -> int:
    """§2.5 steps 3-4 for 0 <= a <= largest finite (generalised to five modes)."""
    lad = ladder(f.word)
    if a <= lad[0][0]:
        return lad[0][1]           # zero, or the least code of a zero-less format
    lo, hi = 0, len(lad) - 1
    if a >= lad[hi][0]:
        return lad[hi][1]
    while hi - lo > 1:             # lad[lo].mag <= a < lad[hi].mag
        mid = (lo + hi) // 2
        if lad[mid][0] <= a:
            lo = mid
        else:
            hi = mid
    (m0, c0), (m1, c1) = lad[lo], lad[hi]
    if a == m0:
        return c0
    return c1 if _take_upper(a - m0, m1 - a, c0, rounding, neg) else c0


def _arith_round(f: Fmt, a: float, neg: bool, rounding: str) -> int:
    """Floats wider than 8 bits: round the significand at the target quantum
    (the "ordinary IEEE conversion"), for 0 <= a <= largest finite."""
    if a == 0:
        return 0
    m, bias = f.m_bits, f.bias
    e = max(floor_log2(a), 1 - bias)

    def code(n: int, e: int) -> int:
        if n == 1 << (m + 1):
            n, e = n >> 1, e + 1
        if n < 1 << m:
            return n                                         # subnormal (or zero)
        return ((e + bias) << m) | (n - (1 << m))

    q = math.ldexp(a, m - e)                                 # exact scaling
    n = math.floor(q)
    frac = q - n
    if frac == 0:
        return code(n, e)
    # ties go to the even *code* (§2.5), which is the even significand except
    # when m_bits = 0 and neighbouring codes differ only in the exponent
    up = _take_upper(frac, 1 - frac, code(n, e), rounding, neg)
    return code(n + 1 if up else n, e)


def _overflows(f: Fmt, a: float, neg: bool, rounding: str) -> bool:
    """ovfinf: whether a finite a (> largest finite) overflows to infinity.
    Round to nearest: once it rounds past the largest finite value.  The
    directed roundings follow IEEE 754 §7.4: toward zero never; toward +inf
    for positive values only; toward -inf for negative values only (the others
    take the largest finite value of their sign)."""
    if rounding == "rtz":
        return False
    if rounding == "rtp":
        return not neg
    if rounding == "rtn":
        return neg
    top = f.max_finite
    if f.kind == "exp":
        nxt = 2 * top
    else:
        e_top = max(floor_log2(top), 1 - f.bias)
        nxt = top + math.ldexp(1.0, e_top - f.m_bits)
    if a >= nxt:
        return True
    return _take_upper(a - top, nxt - a, f.top_code, rounding, neg)


def fmt_encode(word: int, x: float, rounding: str = "rne", sat: str = "satfinite") -> int:
    """Project binary32 x into format ``word`` (§2.5; other modes per
    docs/spec-decisions.md "Encoding beyond §2.5")."""
    if rounding not in ROUNDINGS or sat not in SATURATIONS:
        raise ValueError(f"bad rounding/saturation {rounding!r}/{sat!r}")
    f = Fmt(word)
    x = f32(float(x))
    if x != x:                                               # step 1
        if not f.has_nan:
            raise EncodeError(f"NaN cannot be encoded in format 0x{word:04x}")
        return f.nan_code
    if f.kind == "int":                                      # round, then clamp (§1.5)
        if f.unsigned:
            lo, hi = 0, (1 << f.w) - 1
        else:
            lo, hi = -((1 << (f.w - 1)) - 1), (1 << (f.w - 1)) - 1
        if math.isinf(x):
            v = hi if x > 0 else lo
        else:
            n = round_int(abs(x), rounding, x < 0)
            v = max(lo, min(hi, -n if x < 0 else n))
        return v & ((1 << f.w) - 1)
    neg, a = signbit(x), abs(x)                              # step 2
    if f.unsigned:
        neg = False                        # step 5 ORs a sign into signed formats only
    if math.isinf(a):
        if sat == "satfinite" or (sat == "satmax" and not f.has_inf):
            code = f.top_code
        elif f.has_inf:
            code = f.inf_code
        elif sat == "ovfinf" and f.has_nan:
            code = f.nan_code
        else:
            code = f.top_code
    elif a > f.max_finite:                                   # step 3
        if sat == "ovfinf" and _overflows(f, a, neg, rounding):
            code = f.inf_code if f.has_inf else f.nan_code if f.has_nan else f.top_code
        else:
            code = f.top_code
    elif f.w <= 8:                                           # step 4
        code = _ladder_round(f, a, neg, rounding)
    else:
        code = _arith_round(f, a, neg, rounding)
    if neg and not f.unsigned:                               # step 5
        code |= 1 << (f.w - 1)
    return code


def _fmt_word(w, p, has_inf=0, nan_enc=0, szero=0, unsigned=0):
    return unsigned << 14 | szero << 13 | nan_enc << 11 | has_inf << 10 | p << 5 | (w - 1)


# Registered format tokens (docs/spec-decisions.md): the eleven of Appendix A.1
# plus e2m3, e3m2, e5m2 and s2.
FORMATS = {
    "e2m1": _fmt_word(4, 2, szero=1),
    "e2m3": _fmt_word(6, 4, szero=1),
    "e3m2": _fmt_word(6, 3, szero=1),
    "e4m3": _fmt_word(8, 4, nan_enc=1, szero=1),
    "e5m2": _fmt_word(8, 3, has_inf=1, nan_enc=2, szero=1),
    "e8m0": _fmt_word(8, 0, nan_enc=1, unsigned=1),
    "binary16": _fmt_word(16, 11, has_inf=1, nan_enc=2, szero=1),
    "binary32": _fmt_word(32, 24, has_inf=1, nan_enc=2, szero=1),
    "u2": _fmt_word(2, 31, unsigned=1), "u4": _fmt_word(4, 31, unsigned=1),
    "u6": _fmt_word(6, 31, unsigned=1), "u8": _fmt_word(8, 31, unsigned=1),
    "s2": _fmt_word(2, 31), "s4": _fmt_word(4, 31), "s8": _fmt_word(8, 31),
}
FORMAT_TOKENS = {w: n for n, w in FORMATS.items()}
assert [FORMATS[n] for n in ("e2m1", "e4m3", "e8m0", "binary16", "binary32")] == [
    0x2043, 0x2887, 0x4807, 0x356F, 0x371F]
assert [FORMATS[n] for n in ("u2", "u4", "u6", "u8", "s4", "s8")] == [
    0x43E1, 0x43E3, 0x43E5, 0x43E7, 0x03E3, 0x03E7]

# A small alias table (§4.4 rule 4); every entry agrees with the package's table.
FORMAT_ALIASES = {
    "fp4": "e2m1", "float4_e2m1fn": "e2m1", "e4m3fn": "e4m3", "float8_e4m3fn": "e4m3",
    "fp8e4m3": "e4m3", "fp8e5m2": "e5m2", "float8_e5m2": "e5m2", "ue8m0": "e8m0",
    "e8m0fnu": "e8m0", "fp16": "binary16", "f16": "binary16", "half": "binary16",
    "float16": "binary16", "fp32": "binary32", "f32": "binary32", "float32": "binary32",
    "float": "binary32", "int2": "s2", "int4": "s4", "int8": "s8", "uint2": "u2",
    "uint4": "u4", "uint6": "u6", "uint8": "u8",
}
# Names of different formats: rejected, never mapped (§0.3a, §2.6, §4.4).
FORMAT_REJECTED = ("e4m3fnuz", "float8_e4m3fnuz", "e5m2fnuz", "float8_e5m2fnuz",
                   "bfloat16", "bf16", "nf4")


def format_word(token: str) -> int:
    t = token.lower()
    if t in FORMATS:
        return FORMATS[t]
    if t in FORMAT_ALIASES:
        return FORMATS[FORMAT_ALIASES[t]]
    if t in FORMAT_REJECTED:
        raise GradeError(f"format {token!r} is a different format and is rejected")
    if len(t) == 5 and t[0] == "x" and all(c in "0123456789abcdef" for c in t[1:]):
        word = int(t[1:], 16)
        why = fmt_problem(word)
        if why:
            raise GradeError(f"format {token!r}: {why}")
        return word
    raise GradeError(f"unknown format {token!r}")


def format_token(word: int) -> str:
    return FORMAT_TOKENS.get(word, f"x{word:04x}")


# ===========================================================================
# §4 the Grade

KEY_TABLE = (                 # (key, domain, default); canonical order, §4.2
    ("e", "fmt", None), ("k0", "int", None), ("s0", "fmt", None),
    ("k1", "int", None), ("s1", "fmt", None), ("zp", "fmt", None),
    ("zpc", "zpc", "asis"), ("zps", "zps", "shared"), ("sp", "sp", None),
    ("ct", "ct", "dense"), ("po", "po", "lsb"),
    ("er", "rnd", "rne"), ("es", "sat", "satfinite"), ("esr", "esr", None),
    ("esn", "subn", "preserve"),
    ("dr", "rnd", "rne"), ("ds", "sat", "satfinite"), ("dt", "fmt", "binary32"),
    ("ao", "order", "unspec"), ("ap", "fmt", "binary32"), ("ab", "fmt", "binary32"),
    ("ai", "fmt", "binary32"), ("an", "subn", "any"),
)
KEYS = tuple(k for k, _, _ in KEY_TABLE)
DOMAIN = {k: d for k, d, _ in KEY_TABLE}
DEFAULT = {k: v for k, _, v in KEY_TABLE if v is not None}
REQUIRED = ("e", "k0", "s0", "esr")
STRUCTURAL = ("k1", "s1", "zp", "sp")
DECODE_KEYS = ("e", "k0", "s0", "k1", "s1", "zp", "zpc", "zps", "sp", "ct", "po",
               "dr", "ds", "dt")
assert len(KEYS) == 23

VALUE_ALIASES = {
    "rnd": {"rne": "rne", "rn": "rne", "rna": "rna", "rtz": "rtz", "trunc": "rtz",
            "rtp": "rtp", "rtn": "rtn"},
    "sat": {"satfinite": "satfinite", "finite": "satfinite", "satmax": "satmax",
            "ovfinf": "ovfinf"},
    "esr": {"exp2floormaxabs": "exp2floormaxabs", "exp2floor": "exp2floormaxabs",
            "exp2ceilmaxabs": "exp2ceilmaxabs", "exp2ceil": "exp2ceilmaxabs",
            "exp2rnemaxabs": "exp2rnemaxabs", "exp2rne": "exp2rnemaxabs",
            "ratiomaxabs": "ratiomaxabs", "ratio": "ratiomaxabs",
            "affineminmax": "affineminmax", "affine": "affineminmax"},
    "subn": {"preserve": "preserve", "ftz": "ftz", "flushtozero": "ftz", "any": "any"},
    "order": {"seq": "seq", "sequential": "seq", "tree": "tree", "unspec": "unspec",
              "unspecified": "unspec"},
    "zpc": {"asis": "asis", "minus1": "minus1", "gptq": "minus1"},
    "zps": {"shared": "shared", "l1": "l1"},
    "ct": {"dense": "dense", "packed": "dense", "pad8": "pad8"},
    "po": {"lsb": "lsb", "lsbfirst": "lsb", "msb": "msb", "msbfirst": "msb"},
    "spo": {"asclsb": "asclsb", "ordered": "asclsb", "unord": "unord",
            "unordered": "unord"},
}
META_BITS = {"u2": 2, "u4": 4}


def _digits(s: str) -> bool:
    return s != "" and all(c in "0123456789" for c in s)


def _norm_value(key: str, raw: str) -> str:
    if raw == "":
        raise GradeError(f"{key}= has an empty value")
    dom = DOMAIN[key]
    if dom == "fmt":
        return format_token(format_word(raw))
    if dom == "int":
        if not _digits(raw):
            raise GradeError(f"{key}={raw}: decimal digits only")
        v = int(raw)
        if key == "k0" and not 1 <= v <= 0xFFFF:
            raise GradeError(f"k0={v}: must be 1..65535")
        if key == "k1" and v > 0xFFFF:
            raise GradeError(f"k1={v}: must be 0..65535")
        return str(v)
    if dom == "sp":
        parts = raw.split(":")
        if len(parts) != 4 or not (_digits(parts[0]) and _digits(parts[1])):
            raise GradeError(f"sp={raw}: expected N:M:<u2|u4>:<asclsb|unord>")
        n, m = int(parts[0]), int(parts[1])
        meta = format_token(format_word(parts[2]))
        if meta not in META_BITS:
            raise GradeError(f"sp={raw}: metadata format must be u2 or u4")
        if not 1 <= n < m or m > 1 << META_BITS[meta]:
            raise GradeError(f"sp={raw}: needs 1 <= N < M <= 2^metabits")
        order = VALUE_ALIASES["spo"].get(parts[3])
        if order is None:
            raise GradeError(f"sp={raw}: order must be asclsb or unord")
        return f"{n}:{m}:{meta}:{order}"
    if dom == "order" and raw.startswith("pairwise") and _digits(raw[8:]):
        k = int(raw[8:])
        if k < 2:
            raise GradeError("pairwise<k> needs k >= 2")
        return f"pairwise{k}"
    table = VALUE_ALIASES[dom]
    if raw not in table:
        raise GradeError(f"{key}={raw}: not one of {sorted(set(table.values()))}")
    return table[raw]


class Grade:
    """A parsed grade: ``values`` holds every present key's canonical token."""

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise GradeError("a grade is a string")
        s = "".join(text.split()).lower()                    # rules 1-2
        if not (s.startswith("grit1(") and s.endswith(")")):
            raise GradeError(f"not a grade string: {text!r}")
        body = s[6:-1]
        v: dict[str, str] = {}
        for item in body.split(",") if body else []:
            if "=" not in item:
                raise GradeError(f"field {item!r} is not key=value")
            key, raw = item.split("=", 1)
            if key not in DOMAIN:                            # rule 6: unknown keys
                raise GradeError(f"unknown key {key!r}")
            if key in v:
                raise GradeError(f"duplicate key {key!r}")
            v[key] = _norm_value(key, raw)                   # rule 4
        for k in REQUIRED:
            if k not in v:
                raise GradeError(f"missing required key {k!r}")
        if ("k1" in v) != ("s1" in v):
            raise GradeError("k1 without s1, or s1 without k1")
        if "zp" not in v and ("zpc" in v or "zps" in v):
            raise GradeError("zpc/zps without zp")
        if v.get("zps") == "l1" and "s1" not in v:
            raise GradeError("zps=l1 without a level-1 scale")
        if "sp" in v and "zp" in v:
            raise GradeError("sp with zp: v1 has one aux plane")
        for k in list(v):                                    # rule 5
            if k in DEFAULT and v[k] == DEFAULT[k]:
                del v[k]
        self.values = v
        self.canonical = "grit1(" + ",".join(f"{k}={v[k]}" for k in KEYS if k in v) + ")"
        self.id = fnv1a64(self.canonical.encode("utf-8"))

    def __getitem__(self, key: str):
        """Token of ``key`` with defaults filled in; None where the key has no slot."""
        if key in self.values:
            return self.values[key]
        if key in ("zpc", "zps"):
            return DEFAULT[key] if "zp" in self.values else None
        return DEFAULT.get(key)

    @property
    def decode_projection(self) -> str:                      # §4.5
        return "gritdec1(" + ",".join(
            f"{k}={self[k]}" for k in DECODE_KEYS if self[k] is not None) + ")"

    def fmt(self, key: str) -> Fmt | None:
        t = self[key]
        return Fmt(format_word(t)) if t is not None else None

    @property
    def n_levels(self) -> int:
        return 2 if "s1" in self.values else 1

    @property
    def sparsity(self):
        if "sp" not in self.values:
            return None
        n, m, meta, order = self.values["sp"].split(":")
        return int(n), int(m), META_BITS[meta], order

    def frame(self) -> dict[str, int]:
        """The descriptor fields this grade fixes (§7.3 step 2)."""
        flags = 0
        if "zp" in self.values:
            flags |= F_HAS_ZP
            if self["zpc"] == "minus1":
                flags |= F_ZP_MINUS1
            if self["zps"] == "l1":
                flags |= F_ZP_L1SCALED
        sp = self.sparsity
        if sp:
            flags |= F_SPARSE
        if self["po"] == "msb":
            flags |= F_MSB_FIRST
        word = lambda k: format_word(self[k]) if self[k] is not None else 0  # noqa: E731
        return {
            "n_levels": self.n_levels, "flags": flags, "elem": word("e"),
            "scale0": word("s0"), "scale1": word("s1"), "zp_fmt": word("zp"),
            "k0": int(self["k0"]), "k1": int(self["k1"] or 0),
            "sp_n": sp[0] if sp else 0, "sp_m": sp[1] if sp else 0,
            "sp_meta_fmt": ({2: SPMETA_U2, 4: SPMETA_U4}[sp[2]] if sp else SPMETA_NONE),
            "sp_order": SPORDER_ASC_LSB if sp and sp[3] == "asclsb" else SPORDER_UNORDERED,
            "container": CT_PAD8 if self["ct"] == "pad8" else CT_DENSE,
        }


def grade_canonical(text: str) -> str:
    return Grade(text).canonical


def grade_id(text: str) -> int:
    return Grade(text).id


def decode_projection(text: str) -> str:
    return Grade(text).decode_projection


# ===========================================================================
# §3 grit_desc and Appendix A.1

MAGIC, HDR_BYTES, VERSION = 0x31545247, 64, 1
F_HAS_ZP, F_ZP_MINUS1, F_SPARSE, F_MSB_FIRST = 0x01, 0x02, 0x04, 0x08
F_INTERLEAVED, F_ZP_L1SCALED, F_RESERVED = 0x10, 0x20, 0xC0
CT_DENSE, CT_PAD8 = 0, 1
SPMETA_NONE, SPMETA_U2, SPMETA_U4 = 0, 1, 2
SPORDER_UNORDERED, SPORDER_ASC_LSB = 0, 1
NOTE_ASSUMED = 0x00000001
PLACEMENTS = {
    "ROW_MAJOR": 0x1000000000000001, "COL_MAJOR": 0x1000000000000002,
    "SWIZZLE_128x4B": 0x1000000000000003, "TILE_16x16": 0x1000000000000004,
    "BLOCK_AOS": 0x1000000000000005, "LINEAR_META": 0x1000000000000011,
    "META_M16N8K32": 0x1000000000000012, "PACK_K4_12B": 0x1000000000000020,
}
MAXRANK = 8

DESC = struct.Struct("<IBBBBHHHHhHHBBBBBBIQQQQ")
DESC_FIELDS = ("magic", "hdr_bytes", "version", "n_levels", "flags", "elem", "scale0",
               "scale1", "zp_fmt", "group_axis", "k0", "k1", "sp_n", "sp_m",
               "sp_meta_fmt", "sp_order", "container", "frame_rsvd", "note",
               "placement_data", "placement_scale", "placement_meta", "grade_id")
assert DESC.size == 64


def _desc_bytes(desc) -> bytes:
    if isinstance(desc, str):
        desc = bytes.fromhex("".join(desc.split()))
    desc = bytes(desc)
    if len(desc) != 64:
        raise GradeError(f"a v1 descriptor is 64 bytes, got {len(desc)}")
    return desc


def unpack_desc(desc) -> dict[str, int]:
    return dict(zip(DESC_FIELDS, DESC.unpack(_desc_bytes(desc))))


def pack_desc(d: dict[str, int]) -> bytes:
    return DESC.pack(*(d[k] for k in DESC_FIELDS))


def descriptor_for(grade: "Grade | str", group_axis: int = 0, note: int = 0) -> bytes:
    """The canonical descriptor of a grade (Appendix A.4 placements: ROW_MAJOR
    data and scales; aux ROW_MAJOR for zero points, LINEAR_META for sparsity
    metadata, UNSPECIFIED when there is no aux plane)."""
    g = grade if isinstance(grade, Grade) else Grade(grade)
    d = dict(magic=MAGIC, hdr_bytes=HDR_BYTES, version=VERSION, group_axis=group_axis,
             frame_rsvd=0, note=note, placement_data=PLACEMENTS["ROW_MAJOR"],
             placement_scale=PLACEMENTS["ROW_MAJOR"], grade_id=g.id)
    d.update(g.frame())
    d["placement_meta"] = (PLACEMENTS["LINEAR_META"] if g.sparsity else
                           PLACEMENTS["ROW_MAJOR"] if "zp" in g.values else 0)
    return pack_desc(d)


# ===========================================================================
# §6 fingerprints

FNV64_OFFSET, FNV64_PRIME = 0xCBF29CE484222325, 0x100000001B3
FNV128_OFFSET = 0x6C62272E07BB014262B821756295C58D
FNV128_PRIME = 0x0000000001000000000000000000013B
_M64, _M128 = (1 << 64) - 1, (1 << 128) - 1


def fnv1a64(data: bytes, h: int = FNV64_OFFSET) -> int:
    for b in bytes(data):
        h = ((h ^ b) * FNV64_PRIME) & _M64
    return h


def fnv1a128(data: bytes, h: int = FNV128_OFFSET) -> int:
    for b in bytes(data):
        h = ((h ^ b) * FNV128_PRIME) & _M128
    return h


assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C                                 # §6.1
assert fnv1a128(b"a") == 0xD228CB696F1A8CAF78912B704E4A8964


def gid(canonical_grade: str, desc, shape) -> bytes:
    """§6.3; 16 bytes, big-endian.  The note [28,32) is skipped."""
    d = _desc_bytes(desc)
    msg = (canonical_grade.encode("utf-8") + b"\x00" + d[0:28] + d[32:64]
           + struct.pack("<I", len(shape)) + b"".join(struct.pack("<q", x) for x in shape))
    return fnv1a128(msg).to_bytes(16, "big")


def digest(planes) -> bytes:
    """§6.5: all four planes in order, each u64le(length) || bytes (an absent
    plane contributes u64le(0) only); 16 bytes, big-endian."""
    planes = list(planes)
    if len(planes) != 4:
        raise ValueError("digest hashes exactly four planes")
    h = FNV128_OFFSET
    for p in planes:
        p = bytes(p or b"")
        h = fnv1a128(struct.pack("<Q", len(p)) + p, h)
    return h.to_bytes(16, "big")


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def base32_encode(value) -> str:
    """§6.4: 26 symbols, most significant first, 128 bits zero-extended to 130."""
    n = int.from_bytes(bytes(value), "big") if not isinstance(value, int) else value
    if not 0 <= n <= _M128:
        raise ValueError("base32 renders a 128-bit value")
    return "".join(CROCKFORD[(n >> (5 * (25 - i))) & 31] for i in range(26))


def base32_decode(text: str) -> bytes:
    """Case-insensitive; I and L read as 1, O as 0; U (and anything else) rejected."""
    t = text.upper()
    if len(t) != 26:
        raise ValueError("a gid is 26 base32 symbols")
    n = 0
    for ch in t:
        ch = {"I": "1", "L": "1", "O": "0"}.get(ch, ch)
        if ch not in CROCKFORD:
            raise ValueError(f"{ch!r} is not a Crockford base32 symbol")
        n = n * 32 + CROCKFORD.index(ch)
    if n > _M128:
        raise ValueError("more than 128 bits")
    return n.to_bytes(16, "big")


# ===========================================================================
# §7 grit_check

STATUSES = ("Ok", "SizeMismatch", "GradeUnknown", "PlacementUnknown", "DigestMismatch")


def _width(word: int) -> int:
    return (word & 31) + 1


def _cw(word: int, pad8: bool) -> int:
    return 8 if pad8 and _width(word) <= 8 else _width(word)


def plane_sizes(d: dict[str, int], shape) -> tuple[int, int, int, int] | None:
    """§7.3 step 4: the exact byte count of each plane, or None when the shape
    cannot carry the descriptor.  Every divisor is tested first (§14)."""
    shape = list(shape)
    rank = len(shape)
    if rank > MAXRANK or any(not 0 <= x < 1 << 63 for x in shape):
        return None
    if not 0 <= d["group_axis"] < rank:
        return None
    numel = 1
    for x in shape:
        numel *= x
    if numel >= 1 << 63:
        return None
    k0, ga = d["k0"], shape[d["group_axis"]]
    if k0 == 0 or ga % k0:
        return None
    sparse = bool(d["flags"] & F_SPARSE)
    if sparse:
        if d["sp_m"] == 0 or ga % d["sp_m"]:
            return None
        metabits = {SPMETA_U2: 2, SPMETA_U4: 4}.get(d["sp_meta_fmt"])
        if metabits is None:
            return None
        nnz = numel * d["sp_n"] // d["sp_m"]
    else:
        nnz = numel
    n_groups0 = numel // k0
    if d["n_levels"] == 2:
        if d["k1"] == 0:
            n_groups1 = 1
        elif n_groups0 % d["k1"]:
            return None
        else:
            n_groups1 = n_groups0 // d["k1"]
    else:
        n_groups1 = 0
    ceil8 = lambda bits: (bits + 7) // 8  # noqa: E731
    data = ceil8(nnz * _cw(d["elem"], d["container"] == CT_PAD8))
    scale0 = ceil8(n_groups0 * _cw(d["scale0"], True))
    scale1 = ceil8(n_groups1 * (2 if d["flags"] & F_ZP_L1SCALED else 1) * _width(d["scale1"]))
    if d["n_levels"] != 2:
        scale1 = 0
    if sparse:
        aux = ceil8(numel // d["sp_m"] * d["sp_n"] * metabits)
    elif d["flags"] & F_HAS_ZP:
        aux = ceil8(n_groups0 * _cw(d["zp_fmt"], True))
    else:
        aux = 0
    return data, scale0, scale1, aux


def _known(grades) -> dict[int, Grade]:
    texts = GRADES.values() if grades is None else grades
    return {g.id: g for g in (Grade(t) for t in texts)}


def _placement_ok(word: int) -> bool:
    if word == 0:
        return True
    cls = word >> 60
    if cls == 0x1:
        return word in PLACEMENTS.values()
    return cls in (0x8, 0xF)


def _meta_indices(aux: bytes, count: int, bits: int) -> list[int]:
    return [_get_lsb(aux, i * bits, bits) for i in range(count)]


def check(desc, shape, planes, level: int = 1, expected_digest=None, grades=None) -> str:
    """grit_check (§7.3): the name of the first failing status, or "Ok"."""
    d = unpack_desc(desc)
    shape = list(shape)
    items = list(planes)
    if len(items) != 4:
        raise ValueError("four planes (or four sizes)")
    sizes = [p if isinstance(p, int) else len(bytes(p or b"")) for p in items]
    if level == 0:
        return "Ok"                                          # erased (L9)
    # Step 1 -- frame
    if (d["magic"] != MAGIC or d["hdr_bytes"] != HDR_BYTES or d["version"] != VERSION
            or d["n_levels"] not in (1, 2) or d["flags"] & F_RESERVED
            or d["frame_rsvd"] != 0 or d["container"] not in (CT_DENSE, CT_PAD8)
            or (d["n_levels"] == 1 and (d["k1"] != 0 or d["scale1"] != 0))
            or (d["flags"] & F_SPARSE and d["flags"] & F_HAS_ZP)
            or (d["flags"] & F_ZP_L1SCALED
                and not (d["flags"] & F_HAS_ZP and d["n_levels"] == 2))
            or d["elem"] >> 15
            or any((d[k] >> 11) & 3 == 3 for k in ("elem", "scale0", "scale1", "zp_fmt"))):
        return "GradeUnknown"
    # Step 2 -- grade: known, and the frame agrees with it.  No grade carries
    # F_INTERLEAVED; it is compared with the data placement it describes
    # instead (docs/spec-decisions.md "interleaved-flag"): with the flag the
    # data word must be BLOCK_AOS, hashed (class 0x8: an Interleave(P, n)
    # expression, which this standalone reference cannot resolve) or opaque.
    g = _known(grades).get(d["grade_id"])
    if g is None:
        return "GradeUnknown"
    for k, want in g.frame().items():
        got = d[k] & ~F_INTERLEAVED if k == "flags" else d[k]
        if got != want:
            return "GradeUnknown"
    interleaved = bool(d["flags"] & F_INTERLEAVED)
    if interleaved and not (d["placement_data"] == PLACEMENTS["BLOCK_AOS"]
                            or d["placement_data"] >> 60 in (0x8, 0xF)):
        return "GradeUnknown"
    # Step 3 -- placement, exactly as §7.3 writes it
    if not all(_placement_ok(d[k]) for k in
               ("placement_data", "placement_scale", "placement_meta")):
        return "PlacementUnknown"
    if bool(d["flags"] & (F_SPARSE | F_HAS_ZP)) != (d["placement_meta"] != 0):
        return "PlacementUnknown"
    # Step 4 -- the size equations; with F_INTERLEAVED the data plane carries
    # all four ("interleaved-flag")
    want = plane_sizes(d, shape)
    pack = PLACEMENTS["PACK_K4_12B"]
    if want is not None and d["placement_scale"] == pack == d["placement_meta"] \
            and d["n_levels"] == 2 and d["k1"] == 8 and d["flags"] & F_HAS_ZP \
            and d["flags"] & F_ZP_L1SCALED and d["scale0"] == d["zp_fmt"] == FORMATS["u6"]:
        # ggml's 12-byte scale/min pack ("pack-k4-12b"): 12 scale0 bytes per
        # super-block, the mins inside them, no aux bytes
        want = (want[0], 12 * (want[1] // 8), want[2], 0)
    if want is not None and interleaved:
        want = (sum(want), 0, 0, 0)
    if want is None or list(want) != sizes:
        return "SizeMismatch"
    if level < 2:
        return "Ok"
    # Step 5 -- content
    if any(isinstance(p, int) for p in items):
        raise ValueError("check level >= 2 needs the plane bytes")
    bufs = [bytes(p or b"") for p in items]
    if expected_digest is not None and digest(bufs) != bytes(expected_digest):
        return "DigestMismatch"
    if d["flags"] & F_SPARSE and d["sp_order"] == SPORDER_ASC_LSB:
        n, m = d["sp_n"], d["sp_m"]
        bits = {SPMETA_U2: 2, SPMETA_U4: 4}[d["sp_meta_fmt"]]
        numel = 1
        for x in shape:
            numel *= x
        idx = _meta_indices(bufs[3], numel // m * n, bits)
        for q in range(numel // m):
            sel = idx[q * n:(q + 1) * n]
            if any(i >= m for i in sel) or any(a >= b for a, b in zip(sel, sel[1:])):
                return "DigestMismatch"
    return "Ok"


# ===========================================================================
# §3.5-§3.8 bytes of each plane (docs/spec-decisions.md "Bytes of each plane")

def _get_lsb(buf: bytes, bitpos: int, n: int) -> int:
    """n bits from a LSB-first stream: stream bit k is bit k%8 of byte k//8,
    the value's least significant bit first."""
    v = 0
    for k in range(n):
        b = bitpos + k
        v |= ((buf[b >> 3] >> (b & 7)) & 1) << k
    return v


def _get_msb(buf: bytes, bitpos: int, n: int) -> int:
    """The mirror image: stream bit k is bit 7 - k%8 of byte k//8, MSB first."""
    v = 0
    for k in range(n):
        b = bitpos + k
        v = (v << 1) | ((buf[b >> 3] >> (7 - (b & 7))) & 1)
    return v


def _put_lsb(buf: bytearray, bitpos: int, n: int, v: int) -> None:
    for k in range(n):
        if (v >> k) & 1:
            b = bitpos + k
            buf[b >> 3] |= 1 << (b & 7)


def _put_msb(buf: bytearray, bitpos: int, n: int, v: int) -> None:
    for k in range(n):
        if (v >> (n - 1 - k)) & 1:
            b = bitpos + k
            buf[b >> 3] |= 1 << (7 - (b & 7))


def _elem_get(buf, j: int, w: int, pad8: bool, msb: bool) -> int:
    if pad8 and w <= 8:                          # one per byte, low bits
        return buf[j] & ((1 << w) - 1)
    if w % 8 == 0:                               # whole bytes: little-endian
        return int.from_bytes(buf[j * w // 8:(j + 1) * w // 8], "little")
    return (_get_msb if msb else _get_lsb)(buf, j * w, w)


def _elem_put(buf, j: int, w: int, pad8: bool, msb: bool, code: int) -> None:
    if pad8 and w <= 8:
        buf[j] = code
    elif w % 8 == 0:
        buf[j * w // 8:(j + 1) * w // 8] = code.to_bytes(w // 8, "little")
    else:
        (_put_msb if msb else _put_lsb)(buf, j * w, w, code)


def _group_get(buf, j: int, w: int) -> int:
    """scale0 and zero-point planes: PAD8 for w <= 8 (§3.4), else LSB-first."""
    return buf[j] & ((1 << w) - 1) if w <= 8 else _get_lsb(buf, j * w, w)


def _group_put(buf, j: int, w: int, code: int) -> None:
    if w <= 8:
        buf[j] = code
    else:
        _put_lsb(buf, j * w, w, code)


def lin_order(shape, axis: int) -> list[int]:
    """C-order flat index of each element, listed in lin() order: C order of
    the array with ``axis`` moved last (docs/spec-decisions.md)."""
    rank = len(shape)
    strides = [1] * rank
    for i in range(rank - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    moved = [a for a in range(rank) if a != axis] + [axis]
    return [sum(i * strides[a] for i, a in zip(idx, moved))
            for idx in itertools.product(*(range(shape[a]) for a in moved))]


def _split_payload(d: dict, shape, planes) -> list[bytes]:
    if isinstance(planes, (bytes, bytearray, memoryview)):
        sizes = plane_sizes(d, shape)
        if sizes is None or sum(sizes) != len(planes):
            raise ReferenceError_("payload does not split into the descriptor's planes")
        raw, out, at = bytes(planes), [], 0
        for s in sizes:
            out.append(raw[at:at + s])
            at += s
        return out
    return [bytes(p or b"") for p in planes]


# ===========================================================================
# §8 decode

def decode(desc, shape, planes, grades=None) -> list[int]:
    """§8.1 for any grade the grammar expresses; binary32 bit patterns in C order."""
    shape = list(shape)
    d = unpack_desc(desc)
    bufs = _split_payload(d, shape, planes)
    status = check(desc, shape, bufs, 1, grades=grades)
    if status != "Ok":
        raise ReferenceError_(f"decode refused: grit_check level 1 says {status}")
    g = _known(grades)[d["grade_id"]]
    elem, s0, s1, zpf = Fmt(d["elem"]), Fmt(d["scale0"]), Fmt(d["scale1"]), Fmt(d["zp_fmt"])
    flags, k0, k1, L = d["flags"], d["k0"], d["k1"], d["n_levels"]
    pad8, msb = d["container"] == CT_PAD8, bool(flags & F_MSB_FIRST)
    l1z = bool(flags & F_ZP_L1SCALED)
    order = lin_order(shape, d["group_axis"])
    numel = len(order)
    data, sc0, sc1, aux = bufs

    # where each lin position's stored value lives (None: structurally masked).
    # §10.4 as written, for either metadata order: quad q keeps the *set* of
    # positions its N indices name (an index >= M names none), and one cursor
    # hands out the stored values in ascending logical order across the array.
    if flags & F_SPARSE:
        n, m = d["sp_n"], d["sp_m"]
        bits = {SPMETA_U2: 2, SPMETA_U4: 4}[d["sp_meta_fmt"]]
        stored_at: list[int | None] = [None] * numel
        cursor = 0
        for q in range(numel // m):
            keep = {_get_lsb(aux, (q * n + j) * bits, bits) for j in range(n)}
            for i in range(m):
                if i in keep:
                    stored_at[q * m + i] = cursor
                    cursor += 1
    else:
        stored_at = list(range(numel))

    dt = g["dt"]
    dt_word = format_word(dt)
    out = [0] * numel
    for p in range(numel):
        s = stored_at[p]
        if s is None:
            r = 0.0                                          # 1. sparsity law: +0.0
        else:
            g0 = p // k0
            g1 = 0 if k1 == 0 else g0 // k1
            if L == 2:                                       # 2. outermost first
                S = fmt_decode(s1.word, _get_lsb(sc1, (2 * g1 if l1z else g1) * s1.w, s1.w))
                S = f32(S * fmt_decode(s0.word, _group_get(sc0, g0, s0.w)))
            else:
                S = fmt_decode(s0.word, _group_get(sc0, g0, s0.w))
            e = fmt_decode(elem.word, _elem_get(data, s, elem.w, pad8, msb))
            if S != S or e != e:                             # 3-4. poison law
                r = math.nan
            elif flags & F_HAS_ZP:                           # 5. zero point
                zc = _group_get(aux, g0, zpf.w)
                if l1z:
                    Zs = fmt_decode(s1.word, _get_lsb(sc1, (2 * g1 + 1) * s1.w, s1.w))
                    Z = f32(Zs * fmt_decode(zpf.word, zc))
                    r = math.nan if Z != Z else f32(f32(S * e) - Z)
                else:
                    # z := fmt_decode(zp_fmt, zp) + (ZP_MINUS1 ? 1 : 0), one
                    # binary32 addition even when the addend is 0 (-0 + 0 = +0)
                    z = f32(fmt_decode(zpf.word, zc) + (1.0 if flags & F_ZP_MINUS1 else 0.0))
                    r = f32(S * f32(e - z))
            else:
                r = f32(S * e)
            if dt != "binary32" and r == r:                  # 6. project into dt
                r = fmt_decode(dt_word, fmt_encode(dt_word, r, g["dr"], g["ds"]))
        out[order[p]] = f32_bits(r)
    return out


# ===========================================================================
# §9-§10 encode

def _require(cond: bool, what: str) -> None:
    if not cond:
        raise EncodeError(what)


def _pow2_range(f: Fmt) -> tuple[int, int]:
    """Exponents k for which 2^k is a value of the scale format."""
    hi = floor_log2(f.max_finite)
    if f.kind == "exp":
        return -f.bias, hi
    if f.kind == "int":
        return 0, hi
    return 1 - f.bias - f.m_bits, hi


def _lo_hi(vs: list[float]) -> tuple[float, float]:
    """§9.3: lo = min(0, min v), hi = max(0, max v).  When the extreme is a
    zero of either sign the result is the constant 0 (+0.0); so f32(-lo) is
    -0.0 for a group with no negative value, and an all-non-negative Q4KS
    super-block stores dmin = binary16 -0 (0x8000), as §10.2 reads in IEEE
    arithmetic."""
    lo = min(vs) if vs and min(vs) < 0 else 0.0
    hi = max(vs) if vs and max(vs) > 0 else 0.0
    return lo, hi


def encode(grade_text: str, shape, values, group_axis: int | None = None):
    """§9 / §10: project binary32 ``values`` (C order) into the grade.
    Returns (64-byte descriptor, [data, scale0, scale1, aux])."""
    g = Grade(grade_text)
    shape = list(shape)
    ga = len(shape) - 1 if group_axis is None else group_axis
    desc = descriptor_for(g, ga)
    d = unpack_desc(desc)
    sizes = plane_sizes(d, shape)
    if sizes is None:
        raise EncodeError(f"shape {shape} cannot carry {g.canonical} on axis {ga}")
    vals = [f32(float(v)) for v in values]
    order = lin_order(shape, ga)
    _require(len(vals) == len(order), "one value per element")
    x = [vals[c] for c in order]                          # lin order
    if g["esn"] == "ftz":                                 # flush binary32 subnormals
        x = [math.copysign(0.0, v) if v != 0 and abs(v) < 2.0 ** -126 else v for v in x]

    elem, s0 = g.fmt("e"), g.fmt("s0")
    s1, zpf = g.fmt("s1"), g.fmt("zp")
    k0, L = int(g["k0"]), g.n_levels
    k1 = int(g["k1"]) if L == 2 else 0
    numel = len(x)
    n_groups0 = numel // k0
    n_groups1 = (1 if k1 == 0 else n_groups0 // k1) if L == 2 else 0

    # N:M selection (§10.4, generalised): the N largest magnitudes per run of M,
    # NaN maximal, ties to the lower index, stored ascending.
    sp = g.sparsity
    meta: list[int] = []
    if sp:
        n, m, _, _ = sp
        pos = []
        for q in range(numel // m):
            quad = x[q * m:(q + 1) * m]
            rank = sorted(range(m), key=lambda i: (0, 0.0, i) if quad[i] != quad[i]
                          else (1, -abs(quad[i]), i))
            keep = sorted(rank[:n])
            meta.extend(keep)
            pos.extend(q * m + i for i in keep)
    else:
        pos = list(range(numel))
    sv = [x[p] for p in pos]                              # stored values, stored order
    members0: list[list[int]] = [[] for _ in range(n_groups0)]
    for j, p in enumerate(pos):
        members0[p // k0].append(j)

    codes = [0] * len(sv)
    s0c = [0] * n_groups0
    s1c = [0] * (n_groups1 * (2 if g["zps"] == "l1" else 1))
    zpc = [0] * n_groups0
    rule, es, er = g["esr"], g["es"], g["er"]
    finite = lambda js: all(math.isfinite(sv[j]) for j in js)  # noqa: E731
    amax_of = lambda js: max((abs(sv[j]) for j in js if math.isfinite(sv[j])),  # noqa: E731
                             default=0.0)

    def poison0(gi: int) -> None:                          # §9.1 rule 2, level-0 unit
        _require(s0.has_nan, f"NaN/Inf input but s0 {g['s0']} has no NaN (and no level-1 NaN)")
        s0c[gi] = s0.nan_code
        for j in members0[gi]:
            codes[j] = 0

    if rule.startswith("exp2"):
        _require(L == 1 and zpf is None, f"{rule} is defined for one level without zp")
        emax_elem = floor_log2(elem.max_finite)
        lo, hi = _pow2_range(s0)
        for gi, js in enumerate(members0):
            if not finite(js):
                poison0(gi)
                continue
            amax = amax_of(js)
            if amax == 0:                                  # §9.1 rule 3
                s0c[gi] = fmt_encode(s0.word, 1.0, er, es)
                for j in js:
                    codes[j] = fmt_encode(elem.word, sv[j], "rne", es)
                continue
            ef = floor_log2(amax)                          # §9.2
            frac = math.ldexp(amax, -ef)                   # in [1, 2), exact
            if rule == "exp2floormaxabs":
                e = ef
            elif rule == "exp2ceilmaxabs":
                e = ef if frac == 1.0 else ef + 1
            else:                                          # exp2rnemaxabs
                e = ef + 1 if frac * frac > 2 else ef
            X = max(lo, min(hi, e - emax_elem))
            s0c[gi] = fmt_encode(s0.word, math.ldexp(1.0, X), er, es)
            S = fmt_decode(s0.word, s0c[gi])
            for j in js:
                codes[j] = fmt_encode(elem.word, f32(div(sv[j], S)), "rne", es)

    elif rule == "ratiomaxabs" and L == 1:                  # §9.4, §10.4
        _require(zpf is None, "ratiomaxabs is defined without zp")
        maxnorm = elem.max_finite
        for gi, js in enumerate(members0):
            if not finite(js):
                poison0(gi)
                continue
            amax = amax_of(js)
            if amax == 0:
                c = fmt_encode(s0.word, 1.0, er, es)
            else:
                c = fmt_encode(s0.word, f32(amax / maxnorm), er, es)
                if fmt_decode(s0.word, c) == 0:             # never a zero scale
                    c = s0.smallest_positive_code
            s0c[gi] = c
            S = fmt_decode(s0.word, c)
            for j in js:
                codes[j] = fmt_encode(elem.word, f32(div(sv[j], S)), "rne", es)

    elif rule == "ratiomaxabs":                             # two levels: §10.3 generalised
        _require(zpf is None, "ratiomaxabs is defined without zp")
        mne, mns0 = elem.max_finite, s0.max_finite
        for g1 in range(n_groups1):
            blocks = range(n_groups0) if k1 == 0 else range(g1 * k1, (g1 + 1) * k1)
            js_all = [j for gi in blocks for j in members0[gi]]
            if not s0.has_nan and not finite(js_all):       # level-1 poison unit
                _require(s1.has_nan, "NaN/Inf input but neither scale format has a NaN")
                s1c[g1] = s1.nan_code
                for j in js_all:
                    codes[j] = 0
                continue
            amax = amax_of(js_all)                         # finite values only
            if amax == 0:
                c1 = fmt_encode(s1.word, 1.0, er, es)
            else:
                c1 = fmt_encode(s1.word, f32(f32(amax / mne) / mns0), er, es)
                if fmt_decode(s1.word, c1) == 0:
                    c1 = s1.smallest_positive_code
            s1c[g1] = c1
            sT = fmt_decode(s1.word, c1)                   # re-read the stored value
            for gi in blocks:
                js = members0[gi]
                if not finite(js):
                    poison0(gi)
                    continue
                bamax = amax_of(js)
                if bamax == 0:
                    c0 = fmt_encode(s0.word, 1.0, er, es)
                else:
                    c0 = fmt_encode(s0.word, f32(div(f32(bamax / mne), sT)), er, es)
                s0c[gi] = c0                               # a zero block scale is kept
                S = f32(sT * fmt_decode(s0.word, c0))
                for j in js:
                    if S == 0:
                        codes[j] = fmt_encode(elem.word, math.copysign(0.0, sv[j]), "rne", es)
                    else:
                        codes[j] = fmt_encode(elem.word, f32(div(sv[j], S)), "rne", es)

    elif rule == "affineminmax":
        _require(zpf is not None, "affineminmax needs a zero point")
        _require(elem.kind == "int" and elem.unsigned and zpf.kind == "int" and zpf.unsigned,
                 "affineminmax is defined for unsigned integer elements and zero points")
        qe = (1 << elem.w) - 1
        if L == 1:                                         # §9.3, zps=shared (GPTQ shape)
            m1 = 1 if g["zpc"] == "minus1" else 0
            zlo, zhi = m1, (1 << zpf.w) - 1 + m1           # the zero point's range
            for gi, js in enumerate(members0):
                if not finite(js):
                    poison0(gi)
                    zpc[gi] = 0
                    continue
                lo, hi = _lo_hi([sv[j] for j in js])
                if amax_of(js) == 0:                       # §9.1 rule 3: scale 1.0
                    c = fmt_encode(s0.word, 1.0, er, es)
                else:
                    c = fmt_encode(s0.word, f32(f32(hi - lo) / qe), er, es)
                    if fmt_decode(s0.word, c) == 0:
                        c = s0.smallest_positive_code
                s0c[gi] = c
                S = fmt_decode(s0.word, c)
                z = rne_int_clamp(f32(div(0.0 - lo, S)), zlo, zhi)
                zpc[gi] = z - m1
                for j in js:                               # GPTQ: clamp(round(v/S) + z)
                    codes[j] = rne_int_plus_clamp(f32(div(sv[j], S)), z, 0, qe)
        else:                                              # §10.2 generalised, zps=l1
            _require(g["zps"] == "l1", "two-level affineminmax is defined for zps=l1")
            _require(s0.kind == "int" and s0.unsigned, "zps=l1 sub-scales are unsigned integers")
            qs, qz = (1 << s0.w) - 1, (1 << zpf.w) - 1
            for g1 in range(n_groups1):
                blocks = range(n_groups0) if k1 == 0 else range(g1 * k1, (g1 + 1) * k1)
                js_all = [j for gi in blocks for j in members0[gi]]
                if not finite(js_all):                     # level-1 poison unit
                    _require(s1.has_nan, f"NaN/Inf input but s1 {g['s1']} has no NaN")
                    s1c[2 * g1], s1c[2 * g1 + 1] = s1.nan_code, fmt_encode(s1.word, 0.0)
                    for gi in blocks:
                        s0c[gi] = zpc[gi] = 0
                    for j in js_all:
                        codes[j] = 0
                    continue
                step, off = {}, {}
                for gi in blocks:
                    lo, hi = _lo_hi([sv[j] for j in members0[gi]])
                    step[gi] = f32(f32(hi - lo) / qe)
                    off[gi] = f32(-lo)                     # IEEE: -(+0) is -0
                dc = fmt_encode(s1.word, f32(max(step.values()) / qs), er, es)
                mc = fmt_encode(s1.word, f32(max(off.values()) / qz), er, es)
                s1c[2 * g1], s1c[2 * g1 + 1] = dc, mc
                dv, mv = fmt_decode(s1.word, dc), fmt_decode(s1.word, mc)   # re-read
                for gi in blocks:
                    sc = 0 if dv == 0 else rne_int_clamp(f32(div(step[gi], dv)), 0, qs)
                    mm = 0 if mv == 0 else rne_int_clamp(f32(div(off[gi], mv)), 0, qz)
                    s0c[gi], zpc[gi] = sc, mm
                    S, Z = f32(dv * sc), f32(mv * mm)
                    for j in members0[gi]:
                        codes[j] = 0 if S == 0 else rne_int_clamp(
                            f32(div(f32(sv[j] + Z), S)), 0, qe)
    else:
        raise EncodeError(f"no encoder for esr={rule} with this structure")

    # pack the planes
    data, b0, b1, aux = (bytearray(s) for s in sizes)
    pad8, msb = g["ct"] == "pad8", g["po"] == "msb"
    for j, c in enumerate(codes):
        _elem_put(data, j, elem.w, pad8, msb, c)
    for gi, c in enumerate(s0c):
        _group_put(b0, gi, s0.w, c)
    for i, c in enumerate(s1c):
        _put_lsb(b1, i * s1.w, s1.w, c)
    if sp:
        for i, idx in enumerate(meta):
            _put_lsb(aux, i * sp[2], sp[2], idx)
    elif zpf is not None:
        for gi, c in enumerate(zpc):
            _group_put(aux, gi, zpf.w, c)
    return desc, [bytes(data), bytes(b0), bytes(b1), bytes(aux)]


# ===========================================================================
# Conformance vectors (§15)

GRADES = {
    "GRADE_MXFP4": "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)",
    "GRADE_MXFP4_RNE": "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2rnemaxabs)",
    "GRADE_Q4KS": "grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)",
    "GRADE_NVF4": "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)",
    "GRADE_NVF4_RTZ": "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,er=rtz,esr=ratiomaxabs)",
    "GRADE_I8S24": "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:asclsb,esr=ratiomaxabs)",
    # grades beyond the registered six
    "X_MX2LEVEL": "grit1(e=e2m1,k0=16,s0=e4m3,k1=4,s1=binary16,esr=ratiomaxabs)",
    "X_NVF4_SP24": "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,sp=2:4:u2:asclsb,"
                   "esr=ratiomaxabs)",
    "X_GPTQ4": "grit1(e=u4,k0=32,s0=binary16,zp=u4,esr=affineminmax)",
    "X_GPTQ4_MINUS1": "grit1(e=u4,k0=32,s0=binary16,zp=u4,zpc=minus1,esr=affineminmax)",
    "X_GENERIC_U5": "grit1(e=x43e4,k0=32,s0=binary16,zp=u8,esr=affineminmax)",
    "X_AFFINE_L1_U8": "grit1(e=u4,k0=16,s0=u8,k1=4,s1=binary16,zp=u8,zps=l1,"
                      "esr=affineminmax)",
    "X_MXFP4_MSB": "grit1(e=e2m1,k0=32,s0=e8m0,po=msb,esr=exp2floormaxabs)",
    "X_MXFP4_PAD8": "grit1(e=e2m1,k0=32,s0=e8m0,ct=pad8,esr=exp2floormaxabs)",
    "X_MXFP6_E3M2": "grit1(e=e3m2,k0=32,s0=e8m0,esr=exp2floormaxabs)",
    "X_MXFP6_E2M3_MSB": "grit1(e=e2m3,k0=32,s0=e8m0,po=msb,esr=exp2floormaxabs)",
    "X_MXFP6_E2M3_PAD8": "grit1(e=e2m3,k0=32,s0=e8m0,ct=pad8,esr=exp2floormaxabs)",
    "X_MXFP8_E4M3": "grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)",
    "X_MXFP8_E5M2": "grit1(e=e5m2,k0=32,s0=e8m0,esr=exp2floormaxabs)",
    "X_E5M2_OVFINF": "grit1(e=e5m2,k0=32,s0=e8m0,es=ovfinf,esr=exp2floormaxabs)",
    "X_GENERIC_E3M1": "grit1(e=x2044,k0=32,s0=e8m0,esr=exp2floormaxabs)",
    "X_RATIO_OVFINF": "grit1(e=e2m1,k0=4,s0=e4m3,es=ovfinf,esr=ratiomaxabs)",
    "X_S4_RATIO": "grit1(e=s4,k0=32,s0=binary16,esr=ratiomaxabs)",
    "X_MXFP4_CEIL": "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2ceilmaxabs)",
    "X_MXFP4_FTZ": "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs,esn=ftz)",
    "X_MXFP4_DT16": "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs,dt=binary16)",
    "X_I8S24_UNORD": "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:unord,esr=ratiomaxabs)",
    "X_S8_SP28_U4": "grit1(e=s8,k0=32,s0=binary16,sp=2:8:u4:asclsb,esr=ratiomaxabs)",
}
APPENDIX_A1 = {
    "GRADE_MXFP4": 0x2370EE9EE454A183, "GRADE_Q4KS": 0x1C600DE02594FB55,
    "GRADE_NVF4": 0x00FF6F4C2870831E, "GRADE_I8S24": 0xBBBB283A2539EBE8,
    "GRADE_MXFP4_RNE": 0x254285E10D6068C8, "GRADE_NVF4_RTZ": 0x006C3850A3F42DEA,
}
for _name, _text in GRADES.items():                       # canonical and pinned, at import
    assert Grade(_text).canonical == _text, _name
    assert _name not in APPENDIX_A1 or Grade(_text).id == APPENDIX_A1[_name], _name

FLT_MAX = bits_f32(0x7F7FFFFF)
INF, NAN = math.inf, math.nan
TINY = bits_f32(0x00000001)                               # 2^-149


def _num(v: float):
    """JSON form of a binary32 value: a number (exact decimal of the double),
    or the strings NaN / Infinity / -Infinity."""
    if v != v:
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return float(v)


def _unnum(v) -> float:
    if isinstance(v, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[v]
    return float(v)


def _normal(seed: int, n: int, sigma: float = 1.0, mu: float = 0.0) -> list[float]:
    """Deterministic approximately-normal binary32 samples (Irwin-Hall: the sum
    of twelve uniforms minus six), arithmetic only, so identical everywhere."""
    rng = random.Random(seed)
    return [f32(mu + sigma * (sum(rng.random() for _ in range(12)) - 6.0)) for _ in range(n)]


def _positive(name: str, grade: str, shape, values, group_axis=None) -> dict:
    canonical = GRADES[grade]
    vals = [f32(float(v)) for v in values]
    desc, planes = encode(canonical, shape, vals, group_axis)
    bits = decode(desc, shape, planes)
    return {
        "name": name, "grade": grade, "grade_canonical": canonical,
        "desc_hex": desc.hex(), "shape": list(shape),
        "input_f32": [_num(v) for v in vals],
        "payload_hex": b"".join(planes).hex(),
        "plane_bytes": [len(p) for p in planes],
        "decoded_f32": [_num(bits_f32(b)) for b in bits],
        "decoded_f32_bits": [f"{b:08x}" for b in bits],
        "digest": digest(planes).hex(),
        "gid": gid(canonical, desc, shape).hex(),
        "gid_base32": base32_encode(gid(canonical, desc, shape)),
    }


def _with(desc: bytes, **changes) -> bytes:
    d = unpack_desc(desc)
    d.update(changes)
    return pack_desc(d)


def _block(vals, n):
    """vals padded with +0.0 to n entries."""
    vals = list(vals)
    return vals + [0.0] * (n - len(vals))


B1_INPUTS = ([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.5]
             + [-0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5.0, -6.5] + [0.0] * 16)
B2_INPUTS = [3.0, 0.0, 0.0, 1.0] * 8
SQRT2_BELOW = bits_f32(0x3FB504F3)      # the binary32 neighbours of sqrt(2)
SQRT2_ABOVE = bits_f32(0x3FB504F4)


def _positive_specs():
    """(name, grade, shape, values, group_axis) of every positive vector."""
    V = []
    add = lambda name, grade, shape, vals, axis=None: V.append(  # noqa: E731
        (name, grade, list(shape), list(vals), axis))
    sub = [bits_f32(b) for b in (0x00000001, 0x00000010, 0x00012345, 0x007FFFFF,
                                 0x80000003, 0x80400000, 0x00200000, 0x80000001)]
    mixed = lambda seed, n: [v if i % 5 else -v for i, v in enumerate(_normal(seed, n))]  # noqa

    # ---- GRADE_MXFP4 / GRADE_MXFP4_RNE / X_MXFP4_CEIL (exp2 rules, E2M1/E8M0)
    add("mxfp4/tie_to_even", "GRADE_MXFP4", [32], B1_INPUTS)
    ties5 = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.0]
    ties5 = _block(ties5 + [-v for v in ties5], 32)
    for gr, p in (("GRADE_MXFP4", "mxfp4"), ("GRADE_MXFP4_RNE", "mxfp4_rne"),
                  ("X_MXFP4_CEIL", "x/mxfp4_ceil")):
        if gr != "GRADE_MXFP4":
            add(f"{p}/tie_to_even", gr, [32], B1_INPUTS)
        add(f"{p}/ties_scale_one", gr, [32], ties5)
        add(f"{p}/signed_zero", gr, [64],
            _block([-0.0, 0.0, -0.0, 1.0, -1.0, -0.0, 3.0, -0.1], 32)
            + [-0.0, 0.0] * 8 + [-0.0] * 16)
        add(f"{p}/all_zero_groups", gr, [96], [0.0] * 32 + [-0.0] * 32 + [0.0, -0.0] * 16)
        add(f"{p}/nan_poison", gr, [64], _block([1.0, 2.0, NAN, -3.0], 32)
            + _normal(11, 32))
        add(f"{p}/inf_poison", gr, [96], _block([1.0, INF, 2.0], 32)
            + _block([-INF, 0.5], 32) + _normal(12, 32))
        add(f"{p}/subnormal_inputs", gr, [96], _block(sub + [1.0, -0.75], 32)
            + _block(sub, 32) + _block([bits_f32(0x00600000), -bits_f32(0x00400000),
                                        bits_f32(0x00100000), bits_f32(0x00080000)], 32))
        add(f"{p}/saturation", gr, [96], _block([6.5, 7.9, -7.99, 4.0], 32)
            + _block([FLT_MAX, -FLT_MAX, 1e38, 3.0e37], 32)
            + _block([11.0, 12.0, -13.0, 15.99], 32))
        add(f"{p}/tiny_amax_clamp", gr, [64], _block([1e-40, -5e-41, 2e-41], 32)
            + _block([bits_f32(0x00400000) * 3, -bits_f32(0x00400000), TINY], 32))
        add(f"{p}/exponent_rounding", gr, [128],
            _block([SQRT2_BELOW, 0.3], 32) + _block([SQRT2_ABOVE, -0.3], 32)
            + _block([1.0, 0.6], 32) + _block([bits_f32(0x3FFFFFFF), -0.9], 32))
        add(f"{p}/random_normal_s1_32", gr, [32], _normal(1, 32))
        add(f"{p}/random_normal_s2_256", gr, [256], _normal(2, 256, 3.0))
        add(f"{p}/random_normal_s3_4x64", gr, [4, 64], mixed(3, 256))
    add("mxfp4/random_normal_s4_64x4_axis0", "GRADE_MXFP4", [64, 4], _normal(4, 256, 0.02), 0)
    add("mxfp4/random_normal_s5_2x3x32", "GRADE_MXFP4", [2, 3, 32], _normal(5, 192, 100.0))
    add("mxfp4/random_normal_s6_2x64x3_axis1", "GRADE_MXFP4", [2, 64, 3],
        _normal(6, 384, 1e-3), 1)
    add("mxfp4/e2m1_every_value", "GRADE_MXFP4", [32],
        [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0,
         -6.0] + [0.125, 0.375, 0.625, 0.875, 1.125, 1.375, 1.625, 1.875, 2.25, 2.75,
                  3.25, 3.75, 4.5, 5.5, 5.75, 5.999])
    add("mxfp4_rne/random_normal_s7_32x8_axis0", "GRADE_MXFP4_RNE", [32, 8],
        _normal(7, 256, 0.5), 0)

    # ---- GRADE_NVF4 / GRADE_NVF4_RTZ
    nv_ties = _block([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0], 16)
    nv_ties = nv_ties + [-v for v in nv_ties] + _block([2688.0], 16) + _block([-2688.0], 16)
    wide = _block([1.0e4, -3.0, 2.0], 16) + [1.0e-3 if i % 2 else -1.5e-3 for i in range(16)]
    for gr, p in (("GRADE_NVF4", "nvf4"), ("GRADE_NVF4_RTZ", "nvf4_rtz")):
        add(f"{p}/tie_to_even", gr, [64], nv_ties)
        add(f"{p}/wide_dynamic_range", gr, [32], wide)
        add(f"{p}/signed_zero", gr, [48], _block([-0.0, 0.0, -1.0, 2.0, -0.0], 16)
            + [-0.0] * 16 + [0.0, -0.0] * 8)
        add(f"{p}/all_zero_tensor", gr, [32], [0.0, -0.0, -0.0, 0.0] * 8)
        add(f"{p}/all_zero_block", gr, [48], _normal(21, 16) + [0.0] * 16 + [-0.0] * 16)
        add(f"{p}/nan_poison", gr, [48], _block([1.0, NAN, -2.0], 16) + _normal(22, 32))
        add(f"{p}/inf_poison", gr, [48], _block([INF, 1.0], 16) + _block([-INF, 2.0], 16)
            + _normal(23, 16, 5.0))
        add(f"{p}/subnormal_inputs", gr, [48], _block(sub, 16) + _block(sub + [1e-3], 16)
            + _normal(24, 16, 1e-38))
        add(f"{p}/saturation", gr, [48], _block([FLT_MAX, -1e38, 5e37], 16)
            + [f32(0.97 * FLT_MAX * (i + 1) / 16.0) for i in range(16)]
            + _block([6.5, -7.0, 1.0], 16))
        add(f"{p}/block_scale_rounding", gr, [64],
            _block([2688.0], 16) + [f32(1.0 + i / 16.0) * (-1) ** i for i in range(16)]
            + [f32(1.03125 * (i + 1)) for i in range(16)]
            + [f32(5.9 - i * 0.37) for i in range(16)])
        add(f"{p}/tiny_amax", gr, [32], _block([TINY, -TINY], 16) + _block([-0.0, TINY], 16))
        add(f"{p}/random_normal_s25_64", gr, [64], _normal(25, 64))
        add(f"{p}/random_normal_s26_4x32", gr, [4, 32], mixed(26, 128))
        add(f"{p}/random_normal_s27_32x3_axis0", gr, [32, 3], _normal(27, 96, 40.0), 0)
    add("nvf4/random_normal_s28_2x2x48", "GRADE_NVF4", [2, 2, 48], _normal(28, 192, 1e-4))

    # ---- GRADE_I8S24
    i8_ties = []
    for k in range(8):                        # S = 1/16: v/S = k + 0.5 exactly
        i8_ties += [7.9375 if k == 0 else (k + 0.5) / 16.0, 0.0, -(k + 1.5) / 16.0, 0.01]
    add("i8s24/quad_pattern", "GRADE_I8S24", [32], B2_INPUTS)
    add("i8s24/ties_to_even", "GRADE_I8S24", [32], i8_ties)
    add("i8s24/selection_ties", "GRADE_I8S24", [32],
        [1.0, -1.0, 1.0, -1.0, 0.0, 0.0, 0.0, 0.0, -0.0, 0.0, -0.0, 0.0, 2.0, 1.0, 1.0, 2.0,
         0.5, -2.0, 2.0, 0.5, 3.0, 3.0, 3.0, 3.0, -4.0, 1.0, 4.0, -4.0, 0.1, 0.2, 0.3, 0.4])
    add("i8s24/nan_selection", "GRADE_I8S24", [64],
        [0.5, NAN, 9.0, 1.0] + [1.0] * 28 + [INF, 2.0, NAN, 1.0] + [1.0] * 28)
    add("i8s24/nan_poison", "GRADE_I8S24", [64],
        [NAN, NAN, NAN, 1.0] + _normal(31, 28) + _normal(32, 32))
    add("i8s24/inf_poison", "GRADE_I8S24", [96],
        [1.0, -INF, 0.0, 0.0] + _normal(33, 28) + _normal(34, 32)
        + [0.0, INF, 0.0, 0.0] + _normal(35, 28))
    add("i8s24/signed_zero", "GRADE_I8S24", [64],
        [-0.0, 0.0, -0.0, -0.0] * 4 + [-1.0, -0.0, 2.0, 0.0] * 4 + [-0.0] * 32)
    add("i8s24/all_zero_group", "GRADE_I8S24", [64], [0.0] * 32 + [-0.0, 0.0] * 16)
    add("i8s24/subnormal_inputs", "GRADE_I8S24", [64], sub * 4 + _block(sub + [1e-30], 32))
    add("i8s24/saturation", "GRADE_I8S24", [96],
        [f32(127 * 1.4 * 2.0 ** -24), 1e-7, -f32(127 * 1.4 * 2.0 ** -24), 0.0] * 8
        + [1e8, -1e8, 7e7, 3.0] * 8 + [FLT_MAX, -FLT_MAX, 1.0, 0.0] * 8)
    add("i8s24/tiny_amax", "GRADE_I8S24", [64], [1e-6, -2e-7, 0.0, 3e-7] * 8
        + [TINY, 0.0, -TINY, 0.0] * 8)
    add("i8s24/random_normal_s36_128", "GRADE_I8S24", [128], _normal(36, 128))
    add("i8s24/random_normal_s37_4x64", "GRADE_I8S24", [4, 64], mixed(37, 256))
    add("i8s24/random_normal_s38_32x4_axis0", "GRADE_I8S24", [32, 4], _normal(38, 128, 7.0), 0)
    add("i8s24/random_normal_s39_2x2x32", "GRADE_I8S24", [2, 2, 32], _normal(39, 128, 1e-3))

    # ---- GRADE_Q4KS
    # ties: one super-block whose sub-blocks all span [0, 15]; S = f32(d * 63) and
    # every other value is (k + 0.5) * S, an exact tie in (v + Z) / S
    d16 = fmt_decode(FORMATS["binary16"], fmt_encode(FORMATS["binary16"], f32(1.0 / 63)))
    S = f32(d16 * 63)
    q_ties = []
    for s in range(8):
        blk = [15.0, 0.0] + [f32((k + 0.5) * S) for k in range(15)]
        q_ties += _block(blk, 32)
    add("q4ks/ties_to_even", "GRADE_Q4KS", [256], q_ties)
    add("q4ks/signed_zero", "GRADE_Q4KS", [256], [-0.0, 0.0] * 64 + _normal(41, 128))
    add("q4ks/all_zero_superblock", "GRADE_Q4KS", [512], [0.0, -0.0] * 128 + _normal(42, 256))
    add("q4ks/all_nonnegative", "GRADE_Q4KS", [256], [abs(v) for v in _normal(43, 256)])
    add("q4ks/all_negative", "GRADE_Q4KS", [256], [-abs(v) - 0.5 for v in _normal(44, 256)])
    add("q4ks/constant_subblocks", "GRADE_Q4KS", [256],
        [float(s - 3) for s in range(8) for _ in range(32)])
    add("q4ks/nan_poison", "GRADE_Q4KS", [512], _normal(45, 256)[:100] + [NAN]
        + _normal(45, 256)[101:] + _normal(46, 256))
    add("q4ks/inf_poison", "GRADE_Q4KS", [768], _normal(47, 256) + [INF] + _normal(48, 255)
        + [-INF] * 3 + _normal(49, 253))
    add("q4ks/subnormal_inputs", "GRADE_Q4KS", [512], sub * 32 + _block(sub + [1e-3], 256))
    add("q4ks/saturation_binary16_scale", "GRADE_Q4KS", [256],
        [f32(1e9 * (i % 7 - 3)) for i in range(256)])
    add("q4ks/tiny_amax", "GRADE_Q4KS", [256], [1e-40, -TINY] * 128)
    add("q4ks/random_normal_s50_256", "GRADE_Q4KS", [256], _normal(50, 256))
    add("q4ks/random_normal_s51_512", "GRADE_Q4KS", [512], _normal(51, 512, 0.03, 0.01))
    add("q4ks/random_normal_s52_2x512", "GRADE_Q4KS", [2, 512], mixed(52, 1024))
    add("q4ks/random_normal_s53_256x2_axis0", "GRADE_Q4KS", [256, 2], _normal(53, 512, 4.0), 0)

    # ---- grades beyond the registered six
    add("x/mx2level/random_normal_s60_256", "X_MX2LEVEL", [256],
        [v * (1.0 if i < 128 else 1e-3) for i, v in enumerate(_normal(60, 256))])
    add("x/mx2level/nan_poison_2x128", "X_MX2LEVEL", [2, 128],
        _block([NAN, 1.0], 16) + _normal(61, 240))
    add("x/nvf4_sp24/random_normal_s62_64", "X_NVF4_SP24", [64], _normal(62, 64))
    add("x/nvf4_sp24/random_normal_s63_16x4_axis0", "X_NVF4_SP24", [16, 4],
        _normal(63, 64, 3.0), 0)
    add("x/gptq4/random_normal_s64_64", "X_GPTQ4", [64], _normal(64, 64))
    add("x/gptq4/edge_groups", "X_GPTQ4", [128], [0.0] * 32 + [abs(v) for v in _normal(65, 32)]
        + [-abs(v) for v in _normal(66, 32)] + _block([NAN, 1.0], 32))
    # exact ties under an odd zero point: GPTQ rounds v/S first, then adds z (#12 item 12)
    add("x/gptq4/ties_round_before_zero_point", "X_GPTQ4", [32],
        _block([-1.5, 6.0, 0.25, 1.25, 0.75], 32))
    add("x/gptq4_minus1/random_normal_s67_64", "X_GPTQ4_MINUS1", [64],
        [-0.25] + _normal(67, 63))
    add("x/gptq4_minus1/4x32", "X_GPTQ4_MINUS1", [4, 32],
        [v - 0.5 for v in _normal(68, 128, 0.1)])
    add("x/generic_u5/random_normal_s69_96", "X_GENERIC_U5", [96], _normal(69, 96, 2.0))
    add("x/affine_l1_u8/random_normal_s70_128", "X_AFFINE_L1_U8", [128], _normal(70, 128))
    add("x/affine_l1_u8/2x64", "X_AFFINE_L1_U8", [2, 64],
        [abs(v) for v in _normal(71, 64)] + _normal(72, 64, 0.1, -1.0))
    add("x/mxfp4_msb/random_normal_s73_64", "X_MXFP4_MSB", [64], _normal(73, 64))
    add("x/mxfp4_msb/32x2_axis0", "X_MXFP4_MSB", [32, 2], B1_INPUTS + _normal(74, 32), 0)
    add("x/mxfp4_pad8/tie_to_even", "X_MXFP4_PAD8", [32], B1_INPUTS)
    add("x/mxfp4_pad8/random_normal_s75_2x32", "X_MXFP4_PAD8", [2, 32], _normal(75, 64))
    add("x/mxfp6_e3m2/random_normal_s76_96", "X_MXFP6_E3M2", [96], _normal(76, 96, 10.0))
    add("x/mxfp6_e3m2/nan_and_zero", "X_MXFP6_E3M2", [64], _block([NAN], 32) + [-0.0] * 32)
    add("x/mxfp6_e2m3_msb/random_normal_s77_64", "X_MXFP6_E2M3_MSB", [64], _normal(77, 64))
    add("x/mxfp6_e2m3_msb/4x32_axis0", "X_MXFP6_E2M3_MSB", [32, 4], mixed(78, 128), 0)
    add("x/mxfp6_e2m3_pad8/random_normal_s79_64", "X_MXFP6_E2M3_PAD8", [64], _normal(79, 64))
    add("x/mxfp8_e4m3/random_normal_s80_64", "X_MXFP8_E4M3", [64], _normal(80, 64, 1e3))
    add("x/mxfp8_e4m3/subnormal_elements", "X_MXFP8_E4M3", [32],
        _block([448.0 * 0.99, 1e-3, 2e-3, 3.5e-3, -0.0, -7e-4], 32))
    add("x/mxfp8_e5m2/random_normal_s81_64", "X_MXFP8_E5M2", [64], _normal(81, 64))
    add("x/mxfp8_e5m2/inf_poison", "X_MXFP8_E5M2", [64], _block([INF], 32) + _normal(82, 32))
    add("x/e5m2_ovfinf/overflow_to_inf", "X_E5M2_OVFINF", [64],
        _block([1.99, 1.875, 1.87, 1.75, 1.9, -1.95, 0.5], 32)
        + _block([65504.0, 61440.0, 61439.0, -65000.0, 57344.0], 32))
    # §9.1 rule 2 under es=ovfinf: a poisoned group is the NaN scale and zero codes (#12 item 9)
    add("x/ratio_ovfinf/poison", "X_RATIO_OVFINF", [8], [10000.0, NAN, 1.0, 1.0,
                                                          1.0, 2.0, 3.0, 6.0])
    add("x/generic_e3m1/random_normal_s83_64", "X_GENERIC_E3M1", [64], _normal(83, 64))
    add("x/generic_e3m1/every_value", "X_GENERIC_E3M1", [32],
        [fmt_decode(0x2044, c) for c in range(32)])
    add("x/s4_ratio/random_normal_s84_64", "X_S4_RATIO", [64], _normal(84, 64))
    add("x/s4_ratio/ties_and_tiny", "X_S4_RATIO", [64],
        _block([7.0, 0.5, 1.5, 2.5, -3.5, -0.5, 6.5], 32) + _block([1e-9, -3e-9], 32))
    add("x/mxfp4_ftz/subnormal_flush", "X_MXFP4_FTZ", [64], _block(sub, 32)
        + _block(sub + [bits_f32(0x00800000), 1e-38], 32))
    add("x/mxfp4_dt16/projection", "X_MXFP4_DT16", [96],
        _block([1.0e-7, 3.0e-8, -7.0e-8, 2.0e-8], 32) + _block([1.0e6, -3.0e5, 65504.0], 32)
        + _normal(85, 32))
    add("x/i8s24_unord/random_normal_s86_64", "X_I8S24_UNORD", [64], _normal(86, 64))
    add("x/s8_sp28_u4/random_normal_s87_64", "X_S8_SP28_U4", [64], _normal(87, 64))
    add("x/s8_sp28_u4/8x32_axis0", "X_S8_SP28_U4", [32, 8], _normal(88, 256, 2.0), 0)
    return V


def _negative(name, why, desc: bytes, shape, planes, level, error, expected_digest=None):
    v = {"name": name, "why": why, "desc_hex": bytes(desc).hex(), "shape": list(shape),
         "payload_hex": b"".join(planes).hex(), "plane_bytes": [len(p) for p in planes],
         "check_level": level}
    if expected_digest is not None:
        v["expected_digest"] = bytes(expected_digest).hex()
    v["expected_error"] = error
    return v


def _negative_vectors() -> list[dict]:
    G = GRADES
    mx_d, mx_p = encode(G["GRADE_MXFP4"], [32], B1_INPUTS)
    mx64_d, mx64_p = encode(G["GRADE_MXFP4"], [64], _normal(90, 64))
    i8_d, i8_p = encode(G["GRADE_I8S24"], [32], B2_INPUTS)
    q4_d, q4_p = encode(G["GRADE_Q4KS"], [256], _normal(91, 256))
    nv_d, nv_p = encode(G["GRADE_NVF4"], [32], _normal(92, 32))
    u4_d, u4_p = encode(G["X_S8_SP28_U4"], [64], _normal(93, 64))
    gp_d, gp_p = encode(G["X_GPTQ4"], [64], _normal(94, 64))
    unk_d, unk_p = encode("grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs,ao=seq)", [32],
                          B1_INPUTS)
    mx_dig = digest(mx_p)
    N = []
    add = lambda *a, **k: N.append(_negative(*a, **k))  # noqa: E731
    # -- §14 degenerate patterns
    add("degenerate/all_zeros_descriptor", "00 x 64: magic 0 fails step 1 (§14)",
        bytes(64), [32], [b"", b"", b"", b""], 1, "GradeUnknown")
    add("degenerate/all_ones_descriptor", "FF x 64: magic fails step 1 (§14)",
        b"\xff" * 64, [32], [b"", b"", b"", b""], 1, "GradeUnknown")
    # -- GradeUnknown: step 1 (frame) and step 2 (grade)
    add("grade_unknown/bad_magic", "magic 'GRT2'", _with(mx_d, magic=0x32545247),
        [32], mx_p, 1, "GradeUnknown")
    add("grade_unknown/bad_version", "version 2", _with(mx_d, version=2), [32], mx_p, 1,
        "GradeUnknown")
    add("grade_unknown/hdr_bytes_80", "hdr_bytes must be 64 in v1", _with(mx_d, hdr_bytes=80),
        [32], mx_p, 1, "GradeUnknown")
    add("grade_unknown/reserved_flag_bits", "flags & 0xC0 != 0", _with(mx_d, flags=0x40),
        [32], mx_p, 1, "GradeUnknown")
    add("grade_unknown/frame_rsvd_set", "frame_rsvd != 0", _with(mx_d, frame_rsvd=1),
        [32], mx_p, 1, "GradeUnknown")
    add("grade_unknown/one_level_with_k1", "n_levels 1 requires k1 == 0",
        _with(mx_d, k1=8), [32], mx_p, 1, "GradeUnknown")
    add("grade_unknown/sparse_and_zp", "SPARSE and HAS_ZP together",
        _with(i8_d, flags=F_SPARSE | F_HAS_ZP), [32], i8_p, 1, "GradeUnknown")
    add("grade_unknown/nan_enc_3", "scale0 format with the reserved nan_enc 3",
        _with(mx_d, scale0=0x5807), [32], mx_p, 1, "GradeUnknown")
    add("grade_unknown/unknown_grade_id", "a well-formed frame whose grade_id is not a known "
        "grade (grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs,ao=seq) is not in 'grades')",
        unk_d, [32], unk_p, 1, "GradeUnknown")
    add("grade_unknown/frame_k0_disagrees", "descriptor k0 = 16 under GRADE_MXFP4 (k0 = 32)",
        _with(mx_d, k0=16), [32], [mx_p[0], mx_p[1] * 2, b"", b""], 1, "GradeUnknown")
    add("grade_unknown/q4ks_elem_s4", "GRADE_Q4KS spelled with s4 (int4) elements",
        _with(q4_d, elem=FORMATS["s4"]), [256], q4_p, 1, "GradeUnknown")
    add("grade_unknown/flags_disagree_msb_first", "GRADE_MXFP4 id with the MSB_FIRST flag",
        _with(mx_d, flags=F_MSB_FIRST), [32], mx_p, 1, "GradeUnknown")
    add("grade_unknown/before_placement", "unknown grade and a bad placement: step 2 first",
        _with(unk_d, placement_data=0x2000000000000001), [32], unk_p, 1, "GradeUnknown")
    # -- PlacementUnknown
    add("placement_unknown/class_2_data", "placement_data class 0x2",
        _with(mx_d, placement_data=0x2000000000000001), [32], mx_p, 1, "PlacementUnknown")
    add("placement_unknown/unregistered_class_1", "class 0x1 word not in the registry",
        _with(mx_d, placement_scale=0x1000000000000099), [32], mx_p, 1, "PlacementUnknown")
    add("placement_unknown/aux_placement_without_aux", "placement_meta set, no aux plane",
        _with(mx_d, placement_meta=PLACEMENTS["LINEAR_META"]), [32], mx_p, 1,
        "PlacementUnknown")
    add("placement_unknown/aux_plane_without_placement", "SPARSE with placement_meta 0",
        _with(i8_d, placement_meta=0), [32], i8_p, 1, "PlacementUnknown")
    # -- F_INTERLEAVED (docs/spec-decisions.md "interleaved-flag").  The flag with a data
    # word that does not interleave is GradeUnknown at step 2 both as §7.3 is written (no
    # grade carries the flag) and under the decision (the flag contradicts the placement),
    # so that vector needs no decision; the ones after it pass steps 2-4 only under it.
    add("grade_unknown/interleaved_flag_with_row_major_data", "F_INTERLEAVED with ROW_MAJOR "
        "data: GradeUnknown at step 2", _with(mx_d, flags=F_INTERLEAVED), [32], mx_p, 1,
        "GradeUnknown")
    aos = PLACEMENTS["BLOCK_AOS"]
    add("size_mismatch/block_aos_without_flag_planes_summed", "BLOCK_AOS without F_INTERLEAVED "
        "passes step 3 (a registered word); step 4 then sizes the planes as §7.3 writes",
        _with(mx_d, placement_data=aos), [32], [mx_p[0] + mx_p[1], b"", b"", b""], 1,
        "SizeMismatch")
    add("size_mismatch/interleaved_separate_planes", "F_INTERLEAVED with BLOCK_AOS: the data "
        "plane carries all four planes (17 bytes), the others are empty",
        _with(mx_d, flags=F_INTERLEAVED, placement_data=aos), [32], mx_p, 1, "SizeMismatch")
    pk = PLACEMENTS["PACK_K4_12B"]
    add("size_mismatch/pack_k4_12b_planes_as_written", "PACK_K4_12B on scale and meta: "
        "scale0 is 12 bytes per super-block and the aux plane empty, so the unpacked "
        "sizes are a mismatch", _with(q4_d, placement_scale=pk, placement_meta=pk), [256],
        q4_p, 1, "SizeMismatch")
    add("size_mismatch/half_a_pack_is_sized_as_written", "PACK_K4_12B on the scale plane "
        "only passes step 3 and keeps the sizes §7.3 writes",
        _with(q4_d, placement_scale=pk), [256], [q4_p[0], q4_p[1][:12], q4_p[2], b""], 1,
        "SizeMismatch")
    add("digest_mismatch/interleaved_passes_steps_1_to_4", "F_INTERLEAVED with BLOCK_AOS and "
        "the 17-byte interleaved data plane passes steps 1-4; level 2 then compares the digest",
        _with(mx_d, flags=F_INTERLEAVED, placement_data=aos), [32],
        [mx_p[1] + mx_p[0], b"", b"", b""], 2, "DigestMismatch", expected_digest=bytes(16))
    add("placement_unknown/before_sizes", "bad placement and a truncated plane: step 3 first",
        _with(mx_d, placement_meta=0x3000000000000000), [32], [mx_p[0][:8], mx_p[1], b"", b""],
        1, "PlacementUnknown")
    # -- SizeMismatch
    add("size_mismatch/truncated_data_plane", "data plane one byte short", mx_d, [32],
        [mx_p[0][:15], mx_p[1], b"", b""], 1, "SizeMismatch")
    add("size_mismatch/extra_scale_byte", "scale0 plane one byte long", mx_d, [32],
        [mx_p[0], mx_p[1] + b"\x7f", b"", b""], 1, "SizeMismatch")
    add("size_mismatch/quantised_at_group_16", "scale0 sized for group_size 16", mx64_d, [64],
        [mx64_p[0], mx64_p[1] * 2, b"", b""], 1, "SizeMismatch")
    add("size_mismatch/shape_not_multiple_of_k0", "shape[0] = 48 is not a multiple of 32",
        mx_d, [48], [mx_p[0] + mx_p[0][:8], mx_p[1] + b"\x7f", b"", b""], 1, "SizeMismatch")
    add("size_mismatch/group_axis_out_of_range", "group_axis 1 on a rank-1 shape",
        _with(mx_d, group_axis=1), [32], mx_p, 1, "SizeMismatch")
    add("size_mismatch/rank_9", "rank 9 > GRIT_MAXRANK", mx_d, [32] + [1] * 8, mx_p, 1,
        "SizeMismatch")
    add("size_mismatch/dense_sparse_confusion", "I8S24 data plane stored dense",
        i8_d, [32], [bytes(32), i8_p[1], b"", i8_p[3]], 1, "SizeMismatch")
    add("size_mismatch/q4ks_missing_zero_points", "aux plane absent", q4_d, [256],
        [q4_p[0], q4_p[1], q4_p[2], b""], 1, "SizeMismatch")
    add("size_mismatch/q4ks_groups_not_multiple_of_k1", "n_groups0 = 4 is not a multiple "
        "of k1 = 8", q4_d, [128], [q4_p[0][:64], q4_p[1][:4], q4_p[2], q4_p[3][:4]], 1,
        "SizeMismatch")
    add("size_mismatch/nvf4_binary16_tensor_scale", "scale1 holds 2 bytes, not a binary32",
        nv_d, [32], [nv_p[0], nv_p[1], nv_p[2][:2], b""], 1, "SizeMismatch")
    add("size_mismatch/before_digest", "level 2 with a short plane: step 4 before step 5",
        mx_d, [32], [mx_p[0][:15], mx_p[1], b"", b""], 2, "SizeMismatch",
        expected_digest=mx_dig)
    # -- DigestMismatch (level 2)
    flipped = bytes([mx_p[0][0] ^ 0x01]) + mx_p[0][1:]
    add("digest_mismatch/flipped_data_bit", "one data bit flipped after the digest was taken",
        mx_d, [32], [flipped, mx_p[1], b"", b""], 2, "DigestMismatch", expected_digest=mx_dig)
    add("digest_mismatch/other_tensor", "digest of a different tensor", mx64_d, [64],
        mx64_p, 2, "DigestMismatch", expected_digest=digest(encode(
            G["GRADE_MXFP4"], [64], _normal(95, 64))[1]))
    add("digest_mismatch/scale_changed", "scale0 changed after the digest was taken",
        mx_d, [32], [mx_p[0], b"\x80", b"", b""], 2, "DigestMismatch", expected_digest=mx_dig)
    meta_bad = bytes([0x03]) + i8_p[3][1:]            # quad 0 indices (3, 0)
    add("digest_mismatch/asc_lsb_descending", "ASC_LSB metadata (3, 0) in quad 0",
        i8_d, [32], [i8_p[0], i8_p[1], b"", meta_bad], 2, "DigestMismatch")
    meta_dup = i8_p[3][:1] + bytes([0x55]) + i8_p[3][2:]   # quads 2 and 3 indices (1, 1)
    add("digest_mismatch/asc_lsb_duplicate", "ASC_LSB metadata (1, 1) in quad 2",
        i8_d, [32], [i8_p[0], i8_p[1], b"", meta_dup], 2, "DigestMismatch")
    meta_big = bytes([0x91]) + u4_p[3][1:]              # quad 0 indices (1, 9): 9 >= M = 8
    add("digest_mismatch/u4_index_out_of_range", "2:8 u4 metadata index 9 >= 8",
        u4_d, [64], [u4_p[0], u4_p[1], b"", meta_big], 2, "DigestMismatch")
    add("digest_mismatch/zero_point_changed", "zero-point plane changed after the digest",
        gp_d, [64], [gp_p[0], gp_p[1], b"", bytes([gp_p[3][0] ^ 1]) + gp_p[3][1:]], 2,
        "DigestMismatch", expected_digest=digest(gp_p))
    return N


def _fingerprint_vectors() -> list[dict]:
    G = GRADES
    F = []

    def canon(name, spellings, target):
        g = Grade(target)
        F.append({"kind": "canonicalization", "name": name, "spellings": spellings,
                  "canonical": g.canonical, "grade_id": f"0x{g.id:016x}"})
    canon("fp/canon/mxfp4_messy", [          # §4.4 rules 1-3 and 5 only
        "GRIT1( E = E2M1 , K0 = 32 , S0 = E8M0 , ESR = EXP2FLOORMAXABS )",
        "grit1(esr=exp2floormaxabs,s0=e8m0,k0=32,e=e2m1)",
        "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs,ct=dense,po=lsb,er=rne,"
        "es=satfinite,esn=preserve,dr=rne,ds=satfinite,dt=binary32,ao=unspec,ap=binary32,"
        "ab=binary32,ai=binary32,an=any)",
        "grit1(\n\te=e2m1,\n\tk0=32,\n\ts0=e8m0,\n\tesr=exp2floormaxabs\n)",
    ], G["GRADE_MXFP4"])
    canon("fp/canon/mxfp4_aliases", [        # the alias table, leading zeros, hex words
        "grit1(e=fp4,k0=0032,s0=ue8m0,esr=exp2floor,ct=dense,po=lsb,er=rne,es=satfinite,"
        "esn=preserve,dr=rne,ds=satfinite,dt=binary32,ao=unspec,ap=binary32,ab=binary32,"
        "ai=binary32,an=any)",
        "grit1(\n\te=x2043,\n\tk0=32,\n\ts0=x4807,\n\tesr=exp2floormaxabs\n)",
    ], G["GRADE_MXFP4"])
    canon("fp/canon/nvf4_aliases", [
        "grit1(esr=ratio,s1=fp32,k1=0,s0=float8_e4m3fn,k0=16,e=e2m1)",
        "GRIT1(e=E2M1,k0=16,s0=E4M3FN,k1=00,s1=Float32,esr=RatioMaxAbs,dt=f32)",
    ], G["GRADE_NVF4"])
    canon("fp/canon/nvf4_rtz", ["grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,er=trunc,"
                                "esr=ratiomaxabs)"], G["GRADE_NVF4_RTZ"])
    canon("fp/canon/q4ks_order_and_aliases", [
        "grit1(zps=l1,zp=uint6,s1=half,k1=8,s0=u6,k0=32,e=uint4,esr=affine,zpc=asis)",
        "grit1( e=u4, k0=32, s0=u6, k1=8, s1=fp16, zp=u6, zps=l1, esr=affineminmax )",
    ], G["GRADE_Q4KS"])
    canon("fp/canon/i8s24_aliases", [
        "grit1(e=int8,k0=32,s0=f16,sp=2:4:uint2:ordered,esr=ratiomaxabs)",
        "grit1(sp=02:04:u2:asclsb,esr=ratiomaxabs,s0=binary16,k0=32,e=s8,an=any)",
    ], G["GRADE_I8S24"])
    canon("fp/canon/mxfp4_rne", ["grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2rne)"],
          G["GRADE_MXFP4_RNE"])
    canon("fp/canon/non_defaults_emitted", [
        "grit1(ao=pairwise08,po=msbfirst,ct=pad8,esr=exp2floormaxabs,s0=e8m0,k0=32,e=e2m1)",
    ], "grit1(e=e2m1,k0=32,s0=e8m0,ct=pad8,po=msb,esr=exp2floormaxabs,ao=pairwise8)")
    canon("fp/canon/generic_format_word", [
        "grit1(e=X2044,k0=32,s0=e8m0,esr=exp2floormaxabs)"], G["X_GENERIC_E3M1"])
    canon("fp/canon/gptq_minus1", [
        "grit1(e=u4,k0=32,s0=fp16,zp=u4,zpc=gptq,zps=shared,esr=affineminmax)"],
        G["X_GPTQ4_MINUS1"])

    def distinct(name, a, b):
        ga, gb = Grade(a), Grade(b)
        assert ga.id != gb.id
        F.append({"kind": "distinct", "name": name, "a": ga.canonical, "b": gb.canonical,
                  "grade_id_a": f"0x{ga.id:016x}", "grade_id_b": f"0x{gb.id:016x}"})
    distinct("fp/distinct/mxfp4_vs_mxfp4_rne", G["GRADE_MXFP4"], G["GRADE_MXFP4_RNE"])
    distinct("fp/distinct/nvf4_vs_nvf4_rtz", G["GRADE_NVF4"], G["GRADE_NVF4_RTZ"])
    distinct("fp/distinct/q4ks_u4_vs_s4", G["GRADE_Q4KS"], G["GRADE_Q4KS"].replace("e=u4", "e=s4"))
    distinct("fp/distinct/i8s24_asclsb_vs_unord", G["GRADE_I8S24"], G["X_I8S24_UNORD"])
    distinct("fp/distinct/mxfp4_k0_32_vs_16", G["GRADE_MXFP4"],
             G["GRADE_MXFP4"].replace("k0=32", "k0=16"))
    distinct("fp/distinct/mxfp4_lsb_vs_msb", G["GRADE_MXFP4"], G["X_MXFP4_MSB"])
    distinct("fp/distinct/ao_unspec_vs_seq", G["GRADE_MXFP4"],
             G["GRADE_MXFP4"][:-1] + ",ao=seq)")
    distinct("fp/distinct/nvf4_per_tensor_vs_no_level1",
             G["GRADE_NVF4"], "grit1(e=e2m1,k0=16,s0=e4m3,esr=ratiomaxabs)")

    def reject(name, text, rule):
        try:
            Grade(text)
        except GradeError:
            F.append({"kind": "reject", "name": name, "input": text, "rule": rule})
            return
        raise AssertionError(f"{name}: {text} was accepted")
    mx = "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs"
    reject("fp/reject/unknown_key", mx + ",swizzled=1)", "unknown key (§4.4 rule 6)")
    reject("fp/reject/duplicate_key", mx + ",k0=32)", "duplicate key")
    reject("fp/reject/missing_e", "grit1(k0=32,s0=e8m0,esr=exp2floormaxabs)", "missing e")
    reject("fp/reject/missing_k0", "grit1(e=e2m1,s0=e8m0,esr=exp2floormaxabs)", "missing k0")
    reject("fp/reject/missing_s0", "grit1(e=e2m1,k0=32,esr=exp2floormaxabs)", "missing s0")
    reject("fp/reject/missing_esr", "grit1(e=e2m1,k0=32,s0=e8m0)", "missing esr")
    reject("fp/reject/k1_without_s1", "grit1(e=u4,k0=32,s0=u6,k1=8,esr=affineminmax)",
           "k1 without s1")
    reject("fp/reject/s1_without_k1", "grit1(e=u4,k0=32,s0=u6,s1=binary16,esr=affineminmax)",
           "s1 without k1")
    reject("fp/reject/zpc_without_zp", "grit1(e=u4,k0=32,s0=binary16,zpc=minus1,"
           "esr=affineminmax)", "zpc without zp")
    reject("fp/reject/zps_without_zp", "grit1(e=u4,k0=32,s0=binary16,zps=shared,"
           "esr=affineminmax)", "zps without zp")
    reject("fp/reject/zps_l1_without_level1", "grit1(e=u4,k0=32,s0=u6,zp=u6,zps=l1,"
           "esr=affineminmax)", "zps=l1 without a level-1 scale")
    reject("fp/reject/e4m3fnuz", "grit1(e=e4m3fnuz,k0=32,s0=e8m0,esr=exp2floormaxabs)",
           "e4m3fnuz is not e4m3 (§2.6, §4.4 rule 4)")
    reject("fp/reject/e5m2fnuz", "grit1(e=e5m2fnuz,k0=32,s0=e8m0,esr=exp2floormaxabs)",
           "FNUZ FP8 is inexpressible in v1 (§0.3a)")
    reject("fp/reject/bfloat16", "grit1(e=e2m1,k0=32,s0=bfloat16,esr=ratiomaxabs)",
           "bfloat16 is not binary16")
    reject("fp/reject/nf4", "grit1(e=nf4,k0=64,s0=binary16,esr=ratiomaxabs)",
           "codebook formats are out of scope (§0.3b)")
    reject("fp/reject/sp_with_zp", "grit1(e=s8,k0=32,s0=binary16,zp=u8,sp=2:4:u2:asclsb,"
           "esr=ratiomaxabs)", "one aux plane (§3.3)")
    reject("fp/reject/k0_zero", "grit1(e=e2m1,k0=0,s0=e8m0,esr=exp2floormaxabs)", "k0 = 0")
    reject("fp/reject/k0_plus_sign", "grit1(e=e2m1,k0=+32,s0=e8m0,esr=exp2floormaxabs)",
           "decimal digits only")
    reject("fp/reject/k0_too_large", "grit1(e=e2m1,k0=65536,s0=e8m0,esr=exp2floormaxabs)",
           "k0 is a uint16")
    reject("fp/reject/sp_survivors_not_less_than_m", "grit1(e=s8,k0=32,s0=binary16,"
           "sp=4:4:u2:asclsb,esr=ratiomaxabs)", "N survivors of M needs N < M (§3.8)")
    reject("fp/reject/sp_u2_cannot_address_8", "grit1(e=s8,k0=32,s0=binary16,"
           "sp=2:8:u2:asclsb,esr=ratiomaxabs)", "a u2 index addresses 4 positions")
    reject("fp/reject/unknown_scale_rule", "grit1(e=e2m1,k0=32,s0=e8m0,esr=sometimes)",
           "esr value domain")
    reject("fp/reject/empty_value", mx + ",ao=)", "empty value")
    reject("fp/reject/not_grit1", "grit2(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)",
           "grammar")
    reject("fp/reject/absent_format_word", "grit1(e=e2m1,k0=32,s0=x0000,esr=ratiomaxabs)",
           "0x0000 is ABSENT")
    reject("fp/reject/illegal_format_word", "grit1(e=x8043,k0=32,s0=e8m0,"
           "esr=exp2floormaxabs)", "bias_ovr must be 0")
    reject("fp/reject/pairwise1", mx + ",ao=pairwise1)", "pairwise<k> needs k >= 2")

    # frame/note split (§11.1)
    sh = [32]
    clear = descriptor_for(G["GRADE_MXFP4"], 0)
    noted = _with(clear, note=NOTE_ASSUMED | 0x2A << 8)
    g1 = gid(G["GRADE_MXFP4"], clear, sh)
    assert g1 == gid(G["GRADE_MXFP4"], noted, sh)
    F.append({"kind": "frame_note_split", "name": "fp/frame_note_split",
              "desc_hex_note_clear": clear.hex(), "desc_hex_note_set": noted.hex(),
              "shape": sh, "gid": g1.hex(), "gid_base32": base32_encode(g1)})
    q4 = descriptor_for(G["GRADE_Q4KS"], 0)
    q4n = _with(q4, note=0xFFFFFFFF)
    g2 = gid(G["GRADE_Q4KS"], q4, [256])
    F.append({"kind": "frame_note_split", "name": "fp/frame_note_split/q4ks_all_note_bits",
              "desc_hex_note_clear": q4.hex(), "desc_hex_note_set": q4n.hex(),
              "shape": [256], "gid": g2.hex(), "gid_base32": base32_encode(g2)})

    def distinct_gid(name, ga_text, da, gb_text, db, shape):
        a, b = gid(ga_text, da, shape), gid(gb_text, db, shape)
        assert a != b
        F.append({"kind": "distinct_gid", "name": name, "desc_hex_a": da.hex(),
                  "desc_hex_b": db.hex(), "shape": shape, "gid_a": a.hex(), "gid_b": b.hex(),
                  "gid_a_base32": base32_encode(a), "gid_b_base32": base32_encode(b)})
    distinct_gid("fp/distinct_gid/mxfp4_vs_mxfp4_rne", G["GRADE_MXFP4"], clear,
                 G["GRADE_MXFP4_RNE"], descriptor_for(G["GRADE_MXFP4_RNE"], 0), [32])
    distinct_gid("fp/distinct_gid/group_axis", G["GRADE_MXFP4"],
                 descriptor_for(G["GRADE_MXFP4"], 0), G["GRADE_MXFP4"],
                 descriptor_for(G["GRADE_MXFP4"], 1), [32, 32])
    distinct_gid("fp/distinct_gid/placement_row_vs_col", G["GRADE_MXFP4"],
                 descriptor_for(G["GRADE_MXFP4"], 1), G["GRADE_MXFP4"],
                 _with(descriptor_for(G["GRADE_MXFP4"], 1),
                       placement_data=PLACEMENTS["COL_MAJOR"]), [4, 64])
    distinct_gid("fp/distinct_gid/i8s24_meta_placement", G["GRADE_I8S24"],
                 descriptor_for(G["GRADE_I8S24"], 0), G["GRADE_I8S24"],
                 _with(descriptor_for(G["GRADE_I8S24"], 0),
                       placement_meta=PLACEMENTS["META_M16N8K32"]), [32])
    distinct_gid("fp/distinct_gid/nvf4_vs_nvf4_rtz", G["GRADE_NVF4"],
                 descriptor_for(G["GRADE_NVF4"], 0), G["GRADE_NVF4_RTZ"],
                 descriptor_for(G["GRADE_NVF4_RTZ"], 0), [64])

    def crockford(name, value: bytes):
        text = base32_encode(value)
        aliases = [text.lower()]
        if "0" in text:
            aliases += [text.replace("0", "O"), text.replace("0", "o")]
        if "1" in text:
            aliases += [text.replace("1", "I"), text.replace("1", "L"), text.replace("1", "l")]
        rejected = [text[:7], text + "0"]
        if any(c in text for c in "V"):
            rejected.append(text.replace("V", "U"))
        else:
            rejected.append("U" + text[1:])
        F.append({"kind": "crockford", "name": name, "gid": value.hex(), "gid_base32": text,
                  "aliases_accepted_on_parse": aliases, "rejected_on_parse": rejected})
    crockford("fp/crockford/appendix_b1", bytes.fromhex("42d145a24c0f96ea7e336d82a2ac740d"))
    crockford("fp/crockford/zero", bytes(16))
    crockford("fp/crockford/all_ones", b"\xff" * 16)
    crockford("fp/crockford/q4ks_256", g2)
    crockford("fp/crockford/ones_and_zeros", (0x0108421084210842108421084210).to_bytes(16, "big"))
    return F


def _supersedes() -> list[dict]:
    G = GRADES
    out = []
    for frm, to, reason in (
            ("GRADE_MXFP4_RNE", "GRADE_MXFP4",
             "exp2rnemaxabs and exp2floormaxabs differ only in how encode rounds the shared "
             "exponent; the decode projections are byte-identical, so stored bytes are "
             "interchangeable (re-quantisation is not)"),
            ("GRADE_NVF4_RTZ", "GRADE_NVF4",
             "er=rtz changes only how encode rounds the E4M3 block scale; the decode "
             "projections are byte-identical, so stored bytes are interchangeable "
             "(re-quantisation is not)")):
        pa, pb = decode_projection(G[frm]), decode_projection(G[to])
        assert pa == pb
        out.append({"name": f"supersedes/{frm[6:].lower()}_to_{to[6:].lower()}",
                    "from": frm, "to": to, "scope": "decode",
                    "from_canonical": G[frm], "to_canonical": G[to],
                    "decode_projection": pa, "reason": reason})
    for name, frm, to, shape, vals in (
            ("supersedes/demo/mxfp4_rne_bytes_decode_identically", "GRADE_MXFP4_RNE",
             "GRADE_MXFP4", [64], _normal(96, 64, 2.0)),
            ("supersedes/demo/nvf4_rtz_bytes_decode_identically", "GRADE_NVF4_RTZ",
             "GRADE_NVF4", [64], _normal(97, 64, 2.0))):
        d_from, planes = encode(G[frm], shape, vals)
        d_to = descriptor_for(G[to], 0)
        bits = decode(d_from, shape, planes)
        assert bits == decode(d_to, shape, planes)
        gf, gt = gid(G[frm], d_from, shape), gid(G[to], d_to, shape)
        out.append({"kind": "byte_demo", "name": name, "from": frm, "to": to,
                    "payload_hex": b"".join(planes).hex(),
                    "plane_bytes": [len(p) for p in planes], "shape": shape,
                    "decoded_f32_bits": [f"{b:08x}" for b in bits],
                    "desc_hex_from": d_from.hex(), "desc_hex_to": d_to.hex(),
                    "gid_from": gf.hex(), "gid_to": gt.hex(),
                    "gid_from_base32": base32_encode(gf), "gid_to_base32": base32_encode(gt)})
    return out


# ---------------------------------------------------------------------------
# Which vectors rest on a decision rather than on the text (§15, and
# docs/spec-decisions.md "Decision ids").  A vector that rests on one carries
# "decision": [ids] (the whole vector: its verdict, bytes or gid follow from
# the choice); a positive vector whose decode, digest and gid follow the text
# but whose encode (input_f32 -> payload) does not carries "decision_encode".
# `verify --spec-only` skips the first kind and checks only the decode half of
# the second, so an implementation that follows the text and decides the open
# points otherwise can still run the rest of the suite.

DECISION_IDS = (
    "aliases", "ao-pairwise", "binary16-scale-projection", "dt-projection",
    "element-packing", "encode-generic", "encode-modes", "esn-ftz", "format-legality",
    "gptq-affine", "group-axis-range", "hex-format-token", "integer-spelling",
    "interleaved-flag", "k0-range", "maxrank", "pack-k4-12b", "registered-formats",
    "row-major-lin", "sp-domain", "sp-with-zp",
)

# grade -> (the whole vector rests on these, only its encode rests on these)
GRADE_DECISIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "X_MX2LEVEL": ((), ("encode-generic",)),
    "X_NVF4_SP24": ((), ("encode-generic",)),
    "X_GPTQ4": ((), ("gptq-affine",)),
    "X_GPTQ4_MINUS1": ((), ("gptq-affine",)),
    "X_GENERIC_U5": (("hex-format-token", "format-legality", "element-packing"),
                     ("gptq-affine",)),
    "X_AFFINE_L1_U8": ((), ("encode-generic",)),
    "X_MXFP6_E3M2": (("registered-formats", "element-packing"), ()),
    "X_MXFP6_E2M3_MSB": (("registered-formats", "element-packing"), ()),
    "X_MXFP6_E2M3_PAD8": (("registered-formats",), ()),
    "X_MXFP8_E5M2": (("registered-formats",), ()),
    "X_E5M2_OVFINF": (("registered-formats",), ("encode-modes",)),
    "X_GENERIC_E3M1": (("hex-format-token", "format-legality"), ()),
    "X_S4_RATIO": ((), ("encode-generic",)),
    "X_MXFP4_FTZ": ((), ("esn-ftz",)),
    "X_MXFP4_DT16": (("dt-projection",), ()),
    "X_I8S24_UNORD": ((), ("encode-generic",)),
    "X_S8_SP28_U4": ((), ("encode-generic",)),
}

# vector name -> (whole, encode only), over and above its grade's
VECTOR_DECISIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # a binary16 scale past 65504 saturates under es=satfinite instead of IEEE's inf
    "q4ks/saturation_binary16_scale": ((), ("binary16-scale-projection",)),
    "i8s24/saturation": ((), ("binary16-scale-projection",)),
    "size_mismatch/rank_9": (("maxrank",), ()),
    "size_mismatch/group_axis_out_of_range": (("group-axis-range",), ()),
    "size_mismatch/interleaved_separate_planes": (("interleaved-flag",), ()),
    "digest_mismatch/interleaved_passes_steps_1_to_4": (("interleaved-flag",), ()),
    "size_mismatch/pack_k4_12b_planes_as_written": (("pack-k4-12b",), ()),
    "fp/canon/mxfp4_aliases": (("aliases", "integer-spelling", "hex-format-token"), ()),
    "fp/canon/nvf4_aliases": (("aliases", "integer-spelling"), ()),
    "fp/canon/nvf4_rtz": (("aliases",), ()),
    "fp/canon/q4ks_order_and_aliases": (("aliases",), ()),
    "fp/canon/i8s24_aliases": (("aliases", "integer-spelling"), ()),
    "fp/canon/mxfp4_rne": (("aliases",), ()),
    "fp/canon/non_defaults_emitted": (("aliases", "integer-spelling", "ao-pairwise"), ()),
    "fp/canon/generic_format_word": (("hex-format-token", "format-legality"), ()),
    "fp/canon/gptq_minus1": (("aliases",), ()),
    "fp/reject/sp_with_zp": (("sp-with-zp",), ()),
    "fp/reject/k0_zero": (("k0-range",), ()),
    "fp/reject/k0_too_large": (("k0-range",), ()),
    "fp/reject/k0_plus_sign": (("integer-spelling",), ()),
    "fp/reject/sp_survivors_not_less_than_m": (("sp-domain",), ()),
    "fp/reject/sp_u2_cannot_address_8": (("sp-domain",), ()),
    "fp/reject/pairwise1": (("ao-pairwise",), ()),
    "fp/reject/absent_format_word": (("hex-format-token",), ()),
    "fp/reject/illegal_format_word": (("hex-format-token",), ()),
}


def _decide(v: dict) -> dict:
    """``v`` with its "decision" / "decision_encode" keys, right after "name"."""
    whole, enc = VECTOR_DECISIONS.get(v["name"], ((), ()))
    gw, ge = GRADE_DECISIONS.get(v.get("grade", ""), ((), ()))
    whole, enc = list(whole) + list(gw), list(enc) + list(ge)
    if "desc_hex" in v and "grade" in v:
        shape, ga = v["shape"], unpack_desc(v["desc_hex"])["group_axis"]
        if 0 <= ga < len(shape) - 1:      # lin(i) for a group axis that is not the last
            whole.append("row-major-lin")
    whole = sorted(set(whole))
    enc = sorted(set(enc) - set(whole))
    for d in whole + enc:
        assert d in DECISION_IDS, (v["name"], d)
    out = {"name": v["name"]}
    if whole:
        out["decision"] = whole
    if enc:
        out["decision_encode"] = enc
    out.update((k, x) for k, x in v.items() if k not in ("name", "decision", "decision_encode"))
    return out


def generate() -> dict:
    grades = {}
    for name, text in GRADES.items():
        g = Grade(text)
        grades[name] = {"canonical": g.canonical, "grade_id": f"0x{g.id:016x}",
                        "decode_projection": g.decode_projection}
    vectors = [_positive(*spec) for spec in _positive_specs()]
    names = [v["name"] for v in vectors]
    assert len(names) == len(set(names)), "duplicate vector names"
    pinned = {v["name"]: v for v in vectors}
    b1, b2 = pinned["mxfp4/tie_to_even"], pinned["i8s24/quad_pattern"]
    assert (b1["payload_hex"], b1["digest"], b1["gid"], b1["gid_base32"]) == (   # App. B.1
        "20426476a8caecfe00000000000000007f", "9452a02851ba1a1d793b97df51266001",
        "42d145a24c0f96ea7e336d82a2ac740d", "22T52T4K0FJVN7WCVDGAHARX0D")
    assert (b2["payload_hex"], b2["gid_base32"]) == (                             # App. B.2
        "7f2a" * 8 + "0c26" + "cc" * 4, "2X7NNMYRJ9K6508JQTR1J37VR9")
    return {
        "format": "grit-conformance",
        "version": 1,
        "spec": "GRIT v1",
        "conventions": {
            "payload": "data || scale0 || scale1 || aux; plane_bytes splits it (§3.6)",
            "values": "binary32 values as exact decimal numbers, or NaN / Infinity / "
                      "-Infinity; decoded_f32_bits are the bit patterns (NaN 7fc00000)",
            "fingerprints": "digest and gid are 16 bytes, big-endian hex (§6)",
            "check": "a checker knows exactly the grades listed in 'grades'",
            "group_axis": "carried by desc_hex; encode uses it (lin order, §3.7)",
        },
        "grades": grades,
        "vectors": [_decide(v) for v in vectors],
        "negative": [_decide(v) for v in _negative_vectors()],
        "fingerprint": [_decide(v) for v in _fingerprint_vectors()],
        "supersedes": _supersedes(),
    }


def _dump(obj, indent: int = 0) -> str:
    """Deterministic JSON: objects one key per line, scalar arrays inline
    (16 per line when long)."""
    pad, pad1 = "  " * indent, "  " * (indent + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{pad1}{json.dumps(k)}: {_dump(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        if not obj:
            return "[]"
        if all(not isinstance(v, (dict, list)) for v in obj):
            parts = [json.dumps(v, allow_nan=False) for v in obj]
            if len(parts) <= 16:
                return "[" + ", ".join(parts) + "]"
            rows = [", ".join(parts[i:i + 16]) for i in range(0, len(parts), 16)]
            return "[\n" + ",\n".join(pad1 + r for r in rows) + "\n" + pad + "]"
        return "[\n" + ",\n".join(pad1 + _dump(v, indent + 1) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, allow_nan=False)


def render() -> str:
    return _dump(generate()) + "\n"


# ===========================================================================
# verify: re-derive every vector from its inputs

def _planes_of(payload_hex: str, plane_bytes) -> list[bytes]:
    raw, out, at = bytes.fromhex(payload_hex), [], 0
    for n in plane_bytes:
        out.append(raw[at:at + n])
        at += n
    if at != len(raw):
        raise AssertionError("plane_bytes do not add up to the payload")
    return out


def verify(doc: dict, spec_only: bool = False) -> tuple[dict[str, int], list[str]]:
    """Re-derive every vector.  ``spec_only``: skip the vectors that carry
    "decision" and the encode half of those that carry "decision_encode"
    (counted as "decided" and "decided_encode")."""
    errors: list[str] = []
    decided = {"decided": 0, "decided_encode": 0}

    def skip(v: dict) -> bool:
        unknown = set(v.get("decision", [])) | set(v.get("decision_encode", []))
        expect(unknown <= set(DECISION_IDS), v.get("name", "?"),
               f"unknown decision ids {sorted(unknown - set(DECISION_IDS))}")
        if spec_only and v.get("decision"):
            decided["decided"] += 1
            return True
        return False

    def expect(cond: bool, where: str, what: str) -> None:
        if not cond:
            errors.append(f"{where}: {what}")

    expect(doc.get("format") == "grit-conformance" and doc.get("version") == 1,
           "file", "format/version")
    grades = doc["grades"]
    known = [g["canonical"] for g in grades.values()]
    for name, g in grades.items():
        try:
            G = Grade(g["canonical"])
        except GradeError as e:
            expect(False, f"grades/{name}", f"does not parse: {e}")
            continue
        expect(G.canonical == g["canonical"], f"grades/{name}", "not canonical")
        expect(f"0x{G.id:016x}" == g["grade_id"], f"grades/{name}", "grade_id")
        expect(G.decode_projection == g["decode_projection"], f"grades/{name}",
               "decode_projection")
        if name in APPENDIX_A1:
            expect(G.id == APPENDIX_A1[name], f"grades/{name}", "Appendix A.1 id")

    for v in doc["vectors"]:
        w = v["name"]
        if skip(v):
            continue
        try:
            canonical = grades[v["grade"]]["canonical"]
            expect(canonical == v["grade_canonical"], w, "grade_canonical")
            shape = v["shape"]
            vals = [_unnum(x) for x in v["input_f32"]]
            expect(all(x != x or f32(x) == x for x in vals), w, "input not binary32")
            if spec_only and v.get("decision_encode"):
                decided["decided_encode"] += 1
                expect(descriptor_for(canonical, unpack_desc(v["desc_hex"])["group_axis"])
                       == bytes.fromhex(v["desc_hex"]), w, "desc_hex")
            else:
                ga = unpack_desc(v["desc_hex"])["group_axis"]
                desc, planes = encode(canonical, shape, vals, ga)
                expect(desc.hex() == v["desc_hex"], w, "desc_hex")
                expect(b"".join(planes).hex() == v["payload_hex"], w, "payload_hex")
                expect([len(p) for p in planes] == v["plane_bytes"], w, "plane_bytes")
            given = _planes_of(v["payload_hex"], v["plane_bytes"])
            bits = decode(v["desc_hex"], shape, given, known)
            expect([f"{b:08x}" for b in bits] == v["decoded_f32_bits"], w, "decoded_f32_bits")
            expect([f32_bits(_unnum(x)) for x in v["decoded_f32"]] == bits, w, "decoded_f32")
            expect(digest(given).hex() == v["digest"], w, "digest")
            g = gid(canonical, bytes.fromhex(v["desc_hex"]), shape)
            expect(g.hex() == v["gid"], w, "gid")
            expect(base32_encode(g) == v["gid_base32"], w, "gid_base32")
            expect(base32_decode(v["gid_base32"]) == g, w, "gid_base32 parse")
            expect(check(v["desc_hex"], shape, given, 2, bytes.fromhex(v["digest"]), known)
                   == "Ok", w, "level-2 check of a positive vector")
        except (ReferenceError_, KeyError, ValueError) as e:
            expect(False, w, f"raised {type(e).__name__}: {e}")

    seen_errors = set()
    for v in doc["negative"]:
        w = v["name"]
        if skip(v):
            continue
        try:
            planes = _planes_of(v["payload_hex"], v["plane_bytes"])
            ed = v.get("expected_digest")
            got = check(v["desc_hex"], v["shape"], planes, v["check_level"],
                        bytes.fromhex(ed) if ed else None, known)
            expect(got == v["expected_error"], w, f"check says {got}, "
                   f"expected {v['expected_error']}")
            expect(v["expected_error"] in STATUSES[1:], w, "expected_error")
            seen_errors.add(v["expected_error"])
        except (ReferenceError_, KeyError, ValueError) as e:
            expect(False, w, f"raised {type(e).__name__}: {e}")
    expect(seen_errors == set(STATUSES[1:]), "negative", "every error status is covered")

    for v in doc["fingerprint"]:
        w, kind = v["name"], v["kind"]
        if skip(v):
            continue
        try:
            if kind == "canonicalization":
                for s in v["spellings"]:
                    g = Grade(s)
                    expect(g.canonical == v["canonical"], w, f"{s!r} -> {g.canonical}")
                    expect(f"0x{g.id:016x}" == v["grade_id"], w, "grade_id")
            elif kind == "distinct":
                ga, gb = Grade(v["a"]), Grade(v["b"])
                expect(f"0x{ga.id:016x}" == v["grade_id_a"], w, "grade_id_a")
                expect(f"0x{gb.id:016x}" == v["grade_id_b"], w, "grade_id_b")
                expect(ga.id != gb.id and ga.canonical != gb.canonical, w, "not distinct")
            elif kind == "reject":
                try:
                    Grade(v["input"])
                    expect(False, w, "accepted")
                except GradeError:
                    pass
            elif kind == "frame_note_split":
                dc, dn = bytes.fromhex(v["desc_hex_note_clear"]), bytes.fromhex(
                    v["desc_hex_note_set"])
                expect(dc[:28] == dn[:28] and dc[32:] == dn[32:] and dc[28:32] != dn[28:32],
                       w, "descriptors differ outside the note")
                canonical = _known(known)[unpack_desc(dc)["grade_id"]].canonical
                a, b = gid(canonical, dc, v["shape"]), gid(canonical, dn, v["shape"])
                expect(a == b and a.hex() == v["gid"], w, "gid")
                expect(base32_encode(a) == v["gid_base32"], w, "gid_base32")
            elif kind == "distinct_gid":
                ks = _known(known)
                da, db = bytes.fromhex(v["desc_hex_a"]), bytes.fromhex(v["desc_hex_b"])
                a = gid(ks[unpack_desc(da)["grade_id"]].canonical, da, v["shape"])
                b = gid(ks[unpack_desc(db)["grade_id"]].canonical, db, v["shape"])
                expect(a.hex() == v["gid_a"] and b.hex() == v["gid_b"] and a != b, w, "gid")
                expect(base32_encode(a) == v["gid_a_base32"]
                       and base32_encode(b) == v["gid_b_base32"], w, "gid base32")
            elif kind == "crockford":
                value = bytes.fromhex(v["gid"])
                expect(base32_encode(value) == v["gid_base32"], w, "encode")
                for s in [v["gid_base32"]] + v["aliases_accepted_on_parse"]:
                    expect(base32_decode(s) == value, w, f"parse {s!r}")
                for s in v.get("rejected_on_parse", []):
                    try:
                        base32_decode(s)
                        expect(False, w, f"{s!r} accepted")
                    except ValueError:
                        pass
            else:
                expect(False, w, f"unknown kind {kind!r}")
        except (ReferenceError_, KeyError, ValueError) as e:
            expect(False, w, f"raised {type(e).__name__}: {e}")

    for v in doc["supersedes"]:
        w = v["name"]
        try:
            frm, to = grades[v["from"]]["canonical"], grades[v["to"]]["canonical"]
            if v.get("kind") == "byte_demo":
                planes = _planes_of(v["payload_hex"], v["plane_bytes"])
                df, dt = bytes.fromhex(v["desc_hex_from"]), bytes.fromhex(v["desc_hex_to"])
                expect(unpack_desc(df)["grade_id"] == Grade(frm).id
                       and unpack_desc(dt)["grade_id"] == Grade(to).id, w, "grade ids")
                bf = decode(df, v["shape"], planes, known)
                bt = decode(dt, v["shape"], planes, known)
                expect([f"{b:08x}" for b in bf] == v["decoded_f32_bits"] and bf == bt, w,
                       "decoded bits")
                gf, gt = gid(frm, df, v["shape"]), gid(to, dt, v["shape"])
                expect(gf.hex() == v["gid_from"] and gt.hex() == v["gid_to"] and gf != gt,
                       w, "gids")
                expect(descriptor_for(frm, 0) == df and descriptor_for(to, 0) == dt, w,
                       "canonical descriptors")
            else:
                expect(v["from_canonical"] == frm and v["to_canonical"] == to, w, "canonicals")
                pa, pb = decode_projection(frm), decode_projection(to)
                expect(v["scope"] == "decode" and pa == pb == v["decode_projection"], w,
                       "decode projections differ")
                expect(frm != to and bool(v["reason"].strip()), w, "reason / distinct grades")
        except (ReferenceError_, KeyError, ValueError) as e:
            expect(False, w, f"raised {type(e).__name__}: {e}")

    counts = {"positive": len(doc["vectors"]), "negative": len(doc["negative"]),
              "fingerprint": len(doc["fingerprint"]), "supersedes": len(doc["supersedes"]),
              **decided}
    return counts, errors


# ===========================================================================
# command line

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="reference.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen", help="regenerate the conformance vectors")
    g.add_argument("--out", default=DEFAULT_VECTORS)
    v = sub.add_parser("verify", help="re-derive every vector and check it")
    v.add_argument("--in", dest="path", default=DEFAULT_VECTORS)
    v.add_argument("--spec-only", action="store_true",
                   help="check only what the text decides: skip vectors marked 'decision' "
                        "and the encode half of those marked 'decision_encode' "
                        "(docs/spec-decisions.md lists the ids)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.cmd == "gen":
        text = render()
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        doc = json.loads(text)
        print(f"gen: wrote {args.out}: {len(doc['vectors'])} positive, "
              f"{len(doc['negative'])} negative, {len(doc['fingerprint'])} fingerprint, "
              f"{len(doc['supersedes'])} supersedes ({time.perf_counter() - t0:.1f}s)")
        return 0
    with open(args.path, encoding="utf-8") as fh:
        doc = json.load(fh)
    counts, errors = verify(doc, spec_only=args.spec_only)
    for e in errors:
        print(f"FAIL {e}")
    summary = (f"verify: {counts['positive']} positive, {counts['negative']} negative, "
               f"{counts['fingerprint']} fingerprint, {counts['supersedes']} supersedes")
    if args.spec_only:
        summary += (f" (spec only: {counts['decided']} skipped as decided, "
                    f"{counts['decided_encode']} checked without their decided encode)")
    if errors:
        print(f"{summary}: {len(errors)} mismatches")
        return 1
    print(f"{summary}: all ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
