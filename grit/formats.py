"""§1–§2: the 16-bit format word, the registered-format table, fmt_decode and
fmt_encode (scalar oracles).  The vectorised whole-array forms live in
:mod:`grit.vformats` and are tested equal to these.

Format word bit layout (§2.1)::

    bit 15 bias_ovr | 14 unsigned | 13 szero | 12..11 nan_enc | 10 has_inf
        9..5 p | 4..0 wm1   (w = wm1 + 1)

p = 0 exponent-only, p = 31 integer, otherwise p = mantissa bits + 1.
"""
from __future__ import annotations

import enum
import math
import struct
from dataclasses import dataclass
from functools import lru_cache

from .errors import GritEncodeError, GritFormatError, GritUsageError, pin

__all__ = [
    "ABSENT", "Format", "FormatFields", "fmt_pack", "fmt_width", "fmt_unpack", "fmt_classify",
    "fmt_decode", "fmt_encode", "fmt_encode_rne", "ladder", "f32", "f32_bits",
    "bits_f32", "CANONICAL_NAN", "ROUNDINGS", "SATURATIONS", "Rounding", "Saturation",
    "FormatKind", "as_modes", "REGISTERED",
    "FORMAT_NAMES", "FORMAT_ALIASES", "NOT_ALIASES", "format_by_name",
    "format_token", "E2M1", "E4M3", "E5M2", "E8M0", "BINARY16", "BINARY32",
    "U2", "U4", "U6", "U8", "S4", "S8",
]

ABSENT = 0x0000
CANONICAL_NAN = 0x7FC00000  # §1.2

P_EXPONENT_ONLY = 0
P_INTEGER = 31

NAN_NONE = 0   # no NaN code
NAN_ONES = 1   # the all-ones code at the top exponent (E4M3, E8M0)
NAN_IEEE = 2   # top exponent with a non-zero mantissa (IEEE 754)

class Rounding(str, enum.Enum):
    """The five roundings of a projection (§1.4, docs/spec-decisions.md)."""

    RNE = "rne"     # nearest, ties to even
    RNA = "rna"     # nearest, ties away from zero
    RTZ = "rtz"     # toward zero
    RTP = "rtp"     # toward +inf
    RTN = "rtn"     # toward -inf

    def __str__(self) -> str:
        return self.value


class Saturation(str, enum.Enum):
    """What a projection does past the largest finite value (§1.5)."""

    SATFINITE = "satfinite"
    SATMAX = "satmax"
    OVFINF = "ovfinf"

    def __str__(self) -> str:
        return self.value


class FormatKind(str, enum.Enum):
    """The three element classes the precision code p admits (§2.2)."""

    INT = "int"      # p = 31
    EXP = "exp"      # p = 0, exponent-only
    FLOAT = "float"  # 1 <= p <= 30

    def __str__(self) -> str:
        return self.value


ROUNDINGS = tuple(r.value for r in Rounding)
SATURATIONS = tuple(s.value for s in Saturation)


def as_modes(rounding, sat) -> tuple[Rounding, Saturation]:
    """(rounding, saturation) as their enums; GritUsageError for anything else."""
    try:
        r = Rounding(rounding)
    except ValueError:
        raise GritUsageError(f"unknown rounding {rounding!r}; one of {ROUNDINGS}") from None
    try:
        s = Saturation(sat)
    except ValueError:
        raise GritUsageError(f"unknown saturation {sat!r}; one of {SATURATIONS}") from None
    return r, s

_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")


def f32(x: float) -> float:
    """Round a Python float to binary32 (RNE) and back: one named step (§1.1)."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def f32_bits(x: float) -> int:
    """binary32 bit pattern of x (x rounded to binary32 first; NaN canonical)."""
    if x != x:
        return CANONICAL_NAN
    try:
        return _U32.unpack(_F32.pack(x))[0]
    except OverflowError:
        return 0xFF800000 if x < 0 else 0x7F800000


def bits_f32(bits: int) -> float:
    return _F32.unpack(_U32.pack(bits & 0xFFFFFFFF))[0]


@dataclass(frozen=True, slots=True)
class FormatFields:
    """The seven fields of a format word, unvalidated."""

    w: int
    p: int
    has_inf: int = 0
    nan_enc: int = 0
    szero: int = 0
    unsigned: int = 0
    bias_ovr: int = 0


def fmt_pack(f: FormatFields) -> int:
    if not 1 <= f.w <= 32 or not 0 <= f.p <= 31:
        raise GritUsageError(f"w must be 1..32 and p 0..31, got w={f.w} p={f.p}")
    return ((f.bias_ovr & 1) << 15 | (f.unsigned & 1) << 14 | (f.szero & 1) << 13
            | (f.nan_enc & 3) << 11 | (f.has_inf & 1) << 10 | (f.p & 31) << 5
            | ((f.w - 1) & 31))


def fmt_width(word: int) -> int:
    """w, the stored width in bits (§2.1: wm1 + 1).  The one place it is read."""
    return (word & 31) + 1


def fmt_unpack(word: int) -> FormatFields:
    word &= 0xFFFF
    return FormatFields(
        w=fmt_width(word), p=(word >> 5) & 31, has_inf=(word >> 10) & 1,
        nan_enc=(word >> 11) & 3, szero=(word >> 13) & 1,
        unsigned=(word >> 14) & 1, bias_ovr=(word >> 15) & 1)


def fmt_classify(word: int) -> str | None:
    """None when ``word`` is a legal v1 format word, else the reason it is not.

    The rules (docs/spec-decisions.md, "format words") make the map from
    formats to words one-to-one: every field that a kind of format does not
    use must be zero, and every value of every legal word is a finite binary32
    or NaN, so fmt_decode is exact.
    """
    if not 0 <= word <= 0xFFFF:
        return f"format word {word!r} is not a 16-bit value"
    if word == ABSENT:
        return "0x0000 is ABSENT, not a format"
    f = fmt_unpack(word)
    if f.bias_ovr:
        return "bias_ovr must be 0 in version 1 (§2.1)"
    if f.nan_enc == 3:
        return "nan_enc = 3 is reserved (§2.3)"
    if f.w == 1:
        return "1-bit formats cannot be encoded in version 1 (§2.1)"
    if f.p == P_INTEGER:
        if f.has_inf or f.nan_enc or f.szero:
            return "integer formats have no Inf, NaN or signed zero"
        if f.w > 24:
            return f"integer width {f.w} > 24 is not exact in binary32"
        return None
    if f.p == P_EXPONENT_ONLY:
        if not f.unsigned:
            return "exponent-only formats are unsigned"
        if f.has_inf or f.szero:
            return "exponent-only formats have no Inf and no zero"
        if f.nan_enc == NAN_IEEE:
            return "exponent-only formats have no mantissa for nan_enc = 2"
        if f.w > 8:
            return f"exponent-only width {f.w} > 8 exceeds the binary32 range"
        top = (1 << f.w) - 1 - (1 if f.nan_enc else 0)
        if top - ((1 << (f.w - 1)) - 1) > 127:
            return "largest value 2^128 overflows binary32 (8-bit exponent-only needs a NaN code)"
        return None
    m_bits = f.p - 1
    e_bits = f.w - (0 if f.unsigned else 1) - m_bits
    if e_bits < 1:
        return f"p = {f.p} leaves no exponent bits in a {f.w}-bit format"
    if m_bits > 23:
        return f"{m_bits} mantissa bits exceed binary32"
    if f.szero != (0 if f.unsigned else 1):
        return ("szero must be 1 for a signed float and 0 for an unsigned one "
                "(sign-magnitude always has -0)")
    if f.has_inf and f.nan_enc != NAN_IEEE:
        return "has_inf requires nan_enc = 2 (IEEE: Inf and NaN share the top exponent)"
    if f.nan_enc == NAN_IEEE and m_bits == 0:
        return "nan_enc = 2 needs at least one mantissa bit"
    bias = (1 << (e_bits - 1)) - 1
    top = (1 << e_bits) - 1
    # Largest finite magnitude: the top exponent is finite unless has_inf.
    if f.has_inf:
        emax, mmax = top - 1 - bias, (1 << m_bits) - 1
    elif f.nan_enc == NAN_IEEE:
        emax, mmax = top - bias, 0
    elif f.nan_enc == NAN_ONES:
        emax, mmax = top - bias, (1 << m_bits) - 2
        if mmax < 0:  # m_bits == 0: the whole top exponent is NaN
            emax, mmax = top - 1 - bias, 0
    else:
        emax, mmax = top - bias, (1 << m_bits) - 1
    if emax > 127 or (emax == 127 and mmax > (1 << m_bits) - 1):
        return "largest finite value overflows binary32"
    if 1 - bias - m_bits < -149:
        return "smallest subnormal underflows binary32"
    return None


# ---------------------------------------------------------------------------
# The Format value: one legal word with its derived constants.

@dataclass(frozen=True, slots=True)
class Format:
    """A legal v1 format word.  Construct with ``Format(word)``; illegal words
    raise :class:`GritFormatError` with the reason."""

    word: int

    def __post_init__(self):
        if not isinstance(self.word, int) or isinstance(self.word, bool):
            raise GritUsageError(f"format word must be an int, got {type(self.word).__name__}")
        why = fmt_classify(self.word)
        if why is not None:
            raise GritFormatError(f"format word 0x{self.word & 0xFFFF:04x}: {why}")

    # -- fields
    @property
    def fields(self) -> FormatFields:
        return fmt_unpack(self.word)

    @property
    def width(self) -> int:
        return fmt_width(self.word)

    @property
    def p(self) -> int:
        return (self.word >> 5) & 31

    @property
    def unsigned(self) -> bool:
        return bool((self.word >> 14) & 1)

    @property
    def signed(self) -> bool:
        return not self.unsigned

    @property
    def has_inf(self) -> bool:
        return bool((self.word >> 10) & 1)

    @property
    def nan_enc(self) -> int:
        return (self.word >> 11) & 3

    @property
    def has_nan(self) -> bool:
        return self.nan_enc != NAN_NONE or self.has_inf

    @property
    def kind(self) -> FormatKind:
        return {P_INTEGER: FormatKind.INT, P_EXPONENT_ONLY: FormatKind.EXP}.get(
            self.p, FormatKind.FLOAT)

    @property
    def m_bits(self) -> int:
        return self.p - 1 if self.kind is FormatKind.FLOAT else 0

    @property
    def e_bits(self) -> int:
        if self.kind is FormatKind.FLOAT:
            return self.width - (0 if self.unsigned else 1) - self.m_bits
        return self.width if self.kind is FormatKind.EXP else 0

    @property
    def bias(self) -> int:
        return (1 << (self.e_bits - 1)) - 1 if self.kind is not FormatKind.INT else 0

    @property
    def name(self) -> str:
        return format_token(self.word)

    @property
    def ncodes(self) -> int:
        return 1 << self.width

    @property
    def nan_code(self) -> int:
        """The canonical NaN code this format's encoder emits (§2.5 step 1)."""
        if self.kind is FormatKind.EXP and self.nan_enc == NAN_ONES:
            return self.ncodes - 1
        if self.kind is FormatKind.FLOAT:
            top = ((1 << self.e_bits) - 1) << self.m_bits
            if self.nan_enc == NAN_ONES:
                return top | ((1 << self.m_bits) - 1)
            if self.nan_enc == NAN_IEEE:  # quiet NaN: mantissa MSB set
                return top | (1 << (self.m_bits - 1))
        raise GritEncodeError(f"format {self.name} has no NaN encoding")

    @property
    def max_finite(self) -> float:
        return ladder(self.word)[-1][0] if self.width <= 16 else _max_finite(self)

    @property
    def emax(self) -> int:
        """Exponent of the largest finite value (2 for E2M1, 8 for E4M3)."""
        m = self.max_finite
        return math.frexp(m)[1] - 1

    def decode(self, code: int) -> float:
        return fmt_decode(self.word, code)

    def encode(self, x: float, rounding: str = "rne", sat: str = "satfinite") -> int:
        return fmt_encode(self.word, x, rounding, sat)

    def __repr__(self) -> str:
        return f"Format({self.name}, 0x{self.word:04x})"


def _max_finite(f: Format) -> float:
    if f.kind is FormatKind.INT:
        return float((1 << f.width) - 1 if f.unsigned else (1 << (f.width - 1)) - 1)
    # wide floats: search from the top code downwards for the first finite
    # one, skipping the Inf/NaN codes of an IEEE top exponent (2^m_bits codes)
    top = ((1 << (f.e_bits + f.m_bits)) - 1)
    top_exp = ((1 << f.e_bits) - 1) << f.m_bits
    start = top_exp - 1 if f.has_inf else top_exp if f.nan_enc == NAN_IEEE else top
    for code in range(start, -1, -1):
        v = fmt_decode(f.word, code)
        if math.isfinite(v):
            return v
    raise AssertionError("unreachable")  # pragma: no cover


# ---------------------------------------------------------------------------
# §2.4 fmt_decode — exact

def fmt_decode(word: int, code: int) -> float:
    """The value of ``code`` in format ``word``, exactly, as a binary32-exact
    Python float (NaN for every NaN code; callers canonicalise bits)."""
    f = fmt_unpack(word)
    w = f.w
    code &= (1 << w) - 1
    if f.p == P_INTEGER:
        if not f.unsigned and code >= 1 << (w - 1):
            code -= 1 << w
        return float(code)
    if f.p == P_EXPONENT_ONLY:
        if f.nan_enc != 0 and code == (1 << w) - 1:
            return math.nan
        return math.ldexp(1.0, code - ((1 << (w - 1)) - 1))
    m_bits = f.p - 1
    e_bits = w - (0 if f.unsigned else 1) - m_bits
    bias = (1 << (e_bits - 1)) - 1
    m = code & ((1 << m_bits) - 1)
    e = (code >> m_bits) & ((1 << e_bits) - 1)
    s = 0 if f.unsigned else (code >> (m_bits + e_bits)) & 1
    if e == (1 << e_bits) - 1 and f.has_inf:
        v = math.inf if m == 0 else math.nan
    elif e == (1 << e_bits) - 1 and f.nan_enc == NAN_ONES and m == (1 << m_bits) - 1:
        v = math.nan
    elif e == (1 << e_bits) - 1 and f.nan_enc == NAN_IEEE and m != 0:
        v = math.nan
    elif e == 0:
        v = math.ldexp(m, 1 - bias - m_bits)
    else:
        v = math.ldexp((1 << m_bits) + m, e - bias - m_bits)
    return -v if s else v


# ---------------------------------------------------------------------------
# §2.5 the magnitude ladder

@lru_cache(maxsize=None)
def ladder(word: int) -> tuple[tuple[float, int], ...]:
    """(magnitude, code) for every sign-cleared code that decodes finite,
    sorted by magnitude (ties — only +0/-0, which sign-clearing removes — by
    code).  Defined for widths ≤ 16 (the spec needs it for ≤ 8)."""
    f = Format(word)
    if f.width > 16:
        raise GritUsageError("the magnitude ladder is defined for widths <= 16")
    sign_bit = 0 if (f.unsigned or f.kind is FormatKind.INT) else 1 << (f.width - 1)
    out = []
    for code in range(f.ncodes):
        if code & sign_bit:
            continue
        v = fmt_decode(word, code)
        if math.isfinite(v) and not (f.kind is FormatKind.INT and v < 0):
            out.append((v, code))
    out.sort()
    return tuple(out)


# ---------------------------------------------------------------------------
# fmt_encode: the projection of one binary32 value into a format

def _round_int(q: float, rounding: str, neg: bool) -> int:
    """Round a non-negative exact magnitude q to an integer under ``rounding``
    applied to the signed value (neg tells the sign)."""
    lo = math.floor(q)
    frac = q - lo  # exact: q has far fewer than 53 significant bits
    if frac == 0:
        return lo
    if rounding == Rounding.RNE:
        if frac > 0.5 or (frac == 0.5 and lo % 2 == 1):
            return lo + 1
        return lo
    if rounding == Rounding.RNA:
        return lo + 1 if frac >= 0.5 else lo
    if rounding == Rounding.RTZ:
        return lo
    if rounding == Rounding.RTP:
        return lo if neg else lo + 1
    if rounding == Rounding.RTN:
        return lo + 1 if neg else lo
    raise GritUsageError(f"unknown rounding {rounding!r}; one of {ROUNDINGS}")


def fmt_encode(word: int, x: float, rounding: str = "rne", sat: str = "satfinite") -> int:
    """Project the binary32 value ``x`` into format ``word``.

    ``rounding`` ∈ ROUNDINGS, ``sat`` ∈ SATURATIONS.  For widths ≤ 8 with
    rne/satfinite this is exactly §2.5's ladder algorithm (tests prove the two
    agree on every code boundary); other modes follow docs/spec-decisions.md.
    """
    rounding, sat = as_modes(rounding, sat)
    f = Format(word)
    x = f32(float(x))
    if x != x:
        return f.nan_code
    neg = math.copysign(1.0, x) < 0
    a = abs(x)
    if f.kind is FormatKind.INT:
        return _encode_int(f, x, rounding)
    if f.kind is FormatKind.EXP:
        return _encode_exp(f, a, neg, rounding, sat)
    return _encode_float(f, a, neg, rounding, sat)


def fmt_encode_rne(word: int, x: float, sat: str = "satfinite") -> int:
    """§2.5 fmt_encode_rne."""
    return fmt_encode(word, x, "rne", sat)


def _encode_int(f: Format, x: float, rounding: str) -> int:
    if f.unsigned:
        lo, hi = 0, (1 << f.width) - 1
    else:
        lo, hi = -((1 << (f.width - 1)) - 1), (1 << (f.width - 1)) - 1  # §1.5
    if math.isinf(x):
        v = hi if x > 0 else lo
    else:
        neg = x < 0
        v = _round_int(abs(x), rounding, neg)
        v = -v if neg else v
        v = min(max(v, lo), hi)
    return v & ((1 << f.width) - 1)


def _encode_exp(f: Format, a: float, neg: bool, rounding: str, sat: str) -> int:
    # Exponent-only formats are unsigned: §2.5 encodes a = |x| (step 2) and
    # ORs in no sign (step 5), so a negative x takes the code of |x|, and a
    # directed rounding sees the magnitude it encodes.
    lad = ladder(f.word)
    if math.isinf(a):
        return lad[-1][1] if sat != Saturation.OVFINF or not f.has_nan else f.nan_code
    return _ladder_pick(lad, a, neg=False, rounding=rounding, sat=sat, f=f)


def _ladder_pick(lad, a: float, *, neg: bool, rounding: str, sat: str, f: Format) -> int:
    """Pick a code off a ladder for magnitude a (finite, ≥ 0)."""
    top_mag, top_code = lad[-1]
    if a >= top_mag:
        if a == top_mag or sat != Saturation.OVFINF:
            return top_code
        return _overflow_code(f, a, neg, rounding, lad)
    if a <= lad[0][0]:
        return lad[0][1]
    # binary search for i with lad[i].mag <= a < lad[i+1].mag
    lo, hi = 0, len(lad) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if lad[mid][0] <= a:
            lo = mid
        else:
            hi = mid
    (m0, c0), (m1, c1) = lad[lo], lad[hi]
    if a == m0:
        return c0
    away = _round_up(a - m0, m1 - a, c0, rounding, neg)
    return c1 if away else c0


def _round_up(d_lo: float, d_hi: float, c_lo: int, rounding: str, neg: bool) -> bool:
    """Whether to take the larger-magnitude neighbour.  d_lo, d_hi are exact
    distances (float64 differences of binary32 values are exact)."""
    if rounding == Rounding.RNE:
        return d_hi < d_lo or (d_hi == d_lo and c_lo % 2 == 1)
    if rounding == Rounding.RNA:
        return d_hi <= d_lo
    if rounding == Rounding.RTZ:
        return False
    if rounding == Rounding.RTP:
        return not neg
    return neg  # rtn


def _overflow_to_inf(rounding: str, neg: bool) -> bool:
    """IEEE 754 §7.4 for the directed roundings: whether an overflow (a finite
    value whose rounding lies past the largest finite one) is carried to ∞
    (True) or to the largest finite value of its sign (False).  rtz never
    goes to ∞; rtp only for positive values; rtn only for negative ones."""
    if rounding == Rounding.RTZ:
        return False
    if rounding == Rounding.RTP:
        return not neg
    if rounding == Rounding.RTN:
        return neg
    return True  # rne, rna


def _ovf_result(f: Format, top_code: int) -> int:
    """Sign-cleared code ovfinf gives where IEEE would give ∞: ∞ if the
    format has one, else NaN if it has one, else the largest finite."""
    if f.has_inf:
        return ((1 << f.e_bits) - 1) << f.m_bits
    if f.has_nan:
        return f.nan_code
    return top_code


def _overflow_code(f: Format, a: float, neg: bool, rounding: str, lad) -> int:
    """ovfinf for a finite a > largest finite: round to nearest (rne/rna) goes
    to ∞ once a passes the rounding boundary an IEEE format would use; the
    directed roundings follow IEEE 754 §7.4 (see _overflow_to_inf)."""
    top_mag, top_code = lad[-1]
    if rounding in (Rounding.RTZ, Rounding.RTP, Rounding.RTN):
        over = _overflow_to_inf(rounding, neg)
    else:
        if f.kind is FormatKind.FLOAT:
            # next (virtual) ladder step above the top: one ulp of the top
            # binade (the subnormal quantum when the top value is subnormal)
            e_top = max(math.frexp(top_mag)[1] - 1, 1 - f.bias)
            ulp = math.ldexp(1.0, e_top - f.m_bits)
        else:
            ulp = top_mag  # exp-only: next power of two is 2·top
        nxt = top_mag + ulp
        # a virtual code above the top one is "odd" iff top_code is even
        over = a >= nxt or _round_up(a - top_mag, nxt - a, top_code, rounding, neg)
    return _ovf_result(f, top_code) if over else top_code


def _encode_float(f: Format, a: float, neg: bool, rounding: str, sat: str) -> int:
    if f.unsigned:
        # §2.5 steps 2 and 5: encode a = |x|; an unsigned format has no sign
        # to OR in, so a negative x takes the code of |x| (and a directed
        # rounding sees the magnitude it encodes)
        neg = False
    sign = (1 << (f.width - 1)) if neg else 0
    if math.isinf(a):
        if sat == Saturation.SATFINITE or not f.has_inf:
            if sat == Saturation.OVFINF and f.has_nan and not f.has_inf:
                return f.nan_code | sign
            return _top_finite_code(f) | sign
        return (((1 << f.e_bits) - 1) << f.m_bits) | sign
    if f.width <= 16:
        lad = ladder(f.word)
        # directed roundings see the signed value
        return _ladder_pick(lad, a, neg=neg, rounding=rounding, sat=sat, f=f) | sign
    # binary32-wide formats: exact arithmetic on the binade
    return _encode_wide_float(f, a, neg, rounding, sat) | sign


def _top_finite_code(f: Format) -> int:
    if f.width <= 16:
        return ladder(f.word)[-1][1]
    return _encode_wide_float(f, f.max_finite, False, Rounding.RTZ, Saturation.SATFINITE)


def _encode_wide_float(f: Format, a: float, neg: bool, rounding: str, sat: str) -> int:
    if a == 0:
        return 0
    m_bits, bias = f.m_bits, f.bias
    e = max(math.frexp(a)[1] - 1, 1 - bias)
    q = math.ldexp(a, m_bits - e)  # exact (power-of-two scaling)
    n = _round_int(q, rounding, neg)
    if n >= 1 << (m_bits + 1):
        n >>= 1
        e += 1
    if n < 1 << m_bits:  # subnormal
        code = n
    else:
        code = ((e + bias) << m_bits) | (n - (1 << m_bits))
    maxf = f.max_finite
    v = fmt_decode(f.word, code)
    # a code past the magnitude field would wrap under fmt_decode's mask
    if code >> (f.e_bits + m_bits) or not math.isfinite(v) or v > maxf:
        top_code = _encode_wide_float(f, maxf, False, Rounding.RTZ, Saturation.SATFINITE)
        if sat == Saturation.OVFINF and _overflow_to_inf(rounding, neg):  # as _overflow_code
            return _ovf_result(f, top_code)
        return top_code
    return code


# ---------------------------------------------------------------------------
# The registered formats (one table: word, canonical token, aliases)

# name -> FormatFields; words are derived, then checked against Appendix A.1.
_REG = (
    # token      w  p  inf nan szero unsigned
    ("e2m1",     4, 2, 0, 0, 1, 0),   # 0x2043
    ("e2m3",     6, 4, 0, 0, 1, 0),   # OCP MXFP6
    ("e3m2",     6, 3, 0, 0, 1, 0),   # OCP MXFP6
    ("e4m3",     8, 4, 0, 1, 1, 0),   # 0x2887, OCP/ml_dtypes float8_e4m3fn
    ("e5m2",     8, 3, 1, 2, 1, 0),   # IEEE-like, float8_e5m2
    ("e8m0",     8, 0, 0, 1, 0, 1),   # 0x4807, float8_e8m0fnu
    ("binary16", 16, 11, 1, 2, 1, 0),  # 0x356F
    ("binary32", 32, 24, 1, 2, 1, 0),  # 0x371F
    ("u2",       2, 31, 0, 0, 0, 1),
    ("u4",       4, 31, 0, 0, 0, 1),
    ("u6",       6, 31, 0, 0, 0, 1),
    ("u8",       8, 31, 0, 0, 0, 1),
    ("s2",       2, 31, 0, 0, 0, 0),
    ("s4",       4, 31, 0, 0, 0, 0),
    ("s8",       8, 31, 0, 0, 0, 0),
)

REGISTERED: dict[str, int] = {
    name: fmt_pack(FormatFields(w=w, p=p, has_inf=i, nan_enc=n, szero=z, unsigned=u))
    for name, w, p, i, n, z, u in _REG
}
FORMAT_NAMES: dict[int, str] = {word: name for name, word in REGISTERED.items()}

# Spellings accepted on parse (§4.4 rule 4).  NOT_ALIASES are names of real
# formats that v1 cannot express or that differ from the near-miss token: they
# are rejected with the reason, never mapped.
FORMAT_ALIASES: dict[str, str] = {
    "fp4": "e2m1", "fp4e2m1": "e2m1", "float4_e2m1": "e2m1", "float4_e2m1fn": "e2m1",
    "e2m1fn": "e2m1", "mxfp4elem": "e2m1",
    "fp6e2m3": "e2m3", "float6_e2m3fn": "e2m3", "e2m3fn": "e2m3",
    "fp6e3m2": "e3m2", "float6_e3m2fn": "e3m2", "e3m2fn": "e3m2",
    "fp8e4m3": "e4m3", "e4m3fn": "e4m3", "float8_e4m3fn": "e4m3", "f8e4m3fn": "e4m3",
    "fp8e5m2": "e5m2", "float8_e5m2": "e5m2", "f8e5m2": "e5m2",
    "ue8m0": "e8m0", "e8m0fnu": "e8m0", "float8_e8m0fnu": "e8m0",
    "f16": "binary16", "fp16": "binary16", "half": "binary16", "float16": "binary16",
    "f32": "binary32", "fp32": "binary32", "float": "binary32", "float32": "binary32",
    "single": "binary32",
    "int2": "s2", "sint2": "s2", "i2": "s2",
    "int4": "s4", "sint4": "s4", "i4": "s4",
    "int8": "s8", "sint8": "s8", "i8": "s8",
    "uint2": "u2", "uint4": "u4", "nibble": "u4", "uint6": "u6", "uint8": "u8", "byte": "u8",
}
NOT_ALIASES: dict[str, str] = {
    "e4m3fnuz": "FNUZ FP8 (bias 8, NaN at the negative-zero code) is inexpressible in v1 (§0.3a)",
    "float8_e4m3fnuz": "FNUZ FP8 is inexpressible in v1 (§0.3a)",
    "e5m2fnuz": "FNUZ FP8 (bias 16, NaN at the negative-zero code) is inexpressible in v1 (§0.3a)",
    "float8_e5m2fnuz": "FNUZ FP8 is inexpressible in v1 (§0.3a)",
    "e4m3b11fnuz": "bias-11 FNUZ FP8 is inexpressible in v1 (§0.3a)",
    "bfloat16": "bfloat16 is a different format from binary16 and has no v1 token",
    "bf16": "bfloat16 is a different format from binary16 and has no v1 token",
    "b16": "bfloat16 is a different format from binary16 and has no v1 token",
    "nf4": "NF4 is a codebook format, out of scope for v1 (§0.3b)",
    "u4b": "'u4 with a bias' is not plain u4",
}


def format_token(word: int) -> str:
    """Canonical grade token of a legal word: its registered name, else the
    generic spelling ``x`` + 4 lowercase hex digits (e.g. ``x1c6f``)."""
    return FORMAT_NAMES.get(word, f"x{word:04x}")


def format_by_name(token: str) -> int:
    """Parse a format token (registered name, alias or ``xHHHH``) to its word."""
    t = token.strip().lower()
    if t in REGISTERED:
        return REGISTERED[t]
    if t in FORMAT_ALIASES:
        return REGISTERED[FORMAT_ALIASES[t]]
    if t in NOT_ALIASES:
        raise GritFormatError(f"format {token!r} is rejected: {NOT_ALIASES[t]}")
    if len(t) == 5 and t[0] == "x":
        # four ASCII hex digits (int() would also take '_' and non-ASCII digits)
        word = int(t[1:], 16) if all(c in "0123456789abcdef" for c in t[1:]) else -1
        if word >= 0:
            why = fmt_classify(word)
            if why is not None:
                raise GritFormatError(f"format {token!r}: {why}")
            return word
    raise GritFormatError(
        f"unknown format {token!r}; registered: {', '.join(REGISTERED)} "
        "(or xHHHH for any legal word)")


E2M1 = Format(REGISTERED["e2m1"])
E4M3 = Format(REGISTERED["e4m3"])
E5M2 = Format(REGISTERED["e5m2"])
E8M0 = Format(REGISTERED["e8m0"])
BINARY16 = Format(REGISTERED["binary16"])
BINARY32 = Format(REGISTERED["binary32"])
U2, U4, U6, U8 = (Format(REGISTERED[n]) for n in ("u2", "u4", "u6", "u8"))
S4, S8 = Format(REGISTERED["s4"]), Format(REGISTERED["s8"])

# Appendix A.1 pins these words; a wrong table row must fail at import.
pin((E2M1.word, E4M3.word, E8M0.word, BINARY16.word, BINARY32.word) == (
    0x2043, 0x2887, 0x4807, 0x356F, 0x371F), "the float format words of Appendix A.1")
pin((U2.word, U4.word, U6.word, U8.word, S4.word, S8.word) == (
    0x43E1, 0x43E3, 0x43E5, 0x43E7, 0x03E3, 0x03E7), "the integer format words of Appendix A.1")
