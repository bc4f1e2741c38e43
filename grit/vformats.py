"""Whole-array forms of :func:`grit.formats.fmt_decode` and
:func:`grit.formats.fmt_encode`, bit-exact to those scalar oracles.

* :func:`decode_table` — the 2^w-entry binary32 table of a word with w ≤ 16.
* :func:`decode_codes` — decode an array of codes of any legal word.
* :func:`encode_values` — project a binary32 array into any legal word under
  any rounding × saturation mode.

How each kind is encoded:

* integers: round the signed value (``rint`` for rne, floor/frac arithmetic for
  the other modes — all exact in binary32), then clamp per §1.5;
* exponent-only, and floats of width ≤ 8: §2.5's magnitude ladder, with the
  rounding rule turned into one threshold per ladder gap so that a single
  ``searchsorted`` picks the code (two for the sign-dependent directed modes).
  Since those thresholds have few significant bits, the result depends only
  on the top 16 bits of the input and on whether the low 16 are zero: the
  ladder pick is tabulated once per (word, mode) over 2^17 entries and the
  encode is a shift, a mask and a gather;
* binary32: the identity on the bits, NaN canonical;
* binary16 under rne: IEEE binary32→binary16 conversion (``astype``), then the
  saturation rule;
* every other float: integer rounding of the binary32 significand at the
  target quantum.

Every NaN these functions produce is the canonical quiet NaN (§1.2).
"""
from __future__ import annotations

import enum
import math
import operator
from functools import lru_cache

import numpy as np

from .errors import GritEncodeError, GritUsageError
from .formats import (
    BINARY16, BINARY32, CANONICAL_NAN, Format, FormatKind, Rounding, Saturation, as_modes,
    ladder,
)

__all__ = ["decode_table", "decode_codes", "encode_values", "code_dtype"]

_F32_NAN = np.uint32(CANONICAL_NAN)


def _format(word: int) -> Format:
    try:
        w = operator.index(word)
    except TypeError:
        raise GritUsageError(f"a format word is an integer, got {type(word).__name__}") from None
    return _format_of(w)


@lru_cache(maxsize=None)
def _format_of(word: int) -> Format:
    return Format(word)


def code_dtype(word: int) -> np.dtype:
    """The smallest unsigned dtype that holds one code of ``word``."""
    w = _format(word).width
    return np.dtype(np.uint8 if w <= 8 else np.uint16 if w <= 16 else np.uint32)


def _canonical_nan(v: np.ndarray) -> np.ndarray:
    """Set every NaN of the float32 array ``v`` (in place) to 0x7FC00000."""
    nan = np.isnan(v)
    if nan.any():
        v.view(np.uint32)[nan] = _F32_NAN
    return v


# ---------------------------------------------------------------------------
# decode

def _decode_compute(f: Format, c: np.ndarray) -> np.ndarray:
    """Decode int64 codes ``c`` (already masked to w bits), §2.4."""
    w = f.width
    if f.kind is FormatKind.INT:
        if not f.unsigned:
            c = c - ((c >> (w - 1)) << w)   # two's complement
        return c.astype(np.float32)          # |value| < 2^24: exact
    if f.kind is FormatKind.EXP:
        with np.errstate(over="ignore"):   # the NaN code of an 8-bit word: 2^128
            v = np.ldexp(1.0, (c - ((1 << (w - 1)) - 1)).astype(np.int32)).astype(np.float32)
        if f.nan_enc:
            v[c == (1 << w) - 1] = np.nan
        return _canonical_nan(v)
    m_bits, e_bits, bias = f.m_bits, f.e_bits, f.bias
    m = c & ((1 << m_bits) - 1)
    e = (c >> m_bits) & ((1 << e_bits) - 1)
    sub = e == 0
    sig = np.where(sub, m, m + (1 << m_bits)).astype(np.float64)
    ex = (np.where(sub, 1, e) - bias - m_bits).astype(np.int32)
    v = np.ldexp(sig, ex)                    # exact in binary64
    top = e == (1 << e_bits) - 1
    if f.has_inf:
        v[top & (m == 0)] = np.inf
        v[top & (m != 0)] = np.nan
    elif f.nan_enc == 1:
        v[top & (m == (1 << m_bits) - 1)] = np.nan
    elif f.nan_enc == 2:
        v[top & (m != 0)] = np.nan
    if not f.unsigned:
        v = np.where((c >> (w - 1)) & 1, -v, v)
    return _canonical_nan(v.astype(np.float32))   # legal words: exact


@lru_cache(maxsize=256)
def _decode_table(word: int) -> np.ndarray:
    f = _format(word)
    if f.width > 16:
        raise GritUsageError(f"decode_table needs a width <= 16, {f.name} is {f.width} bits")
    t = _decode_compute(f, np.arange(1 << f.width, dtype=np.int64))
    t.flags.writeable = False
    return t


def decode_table(word: int) -> np.ndarray:
    """Read-only float32 array of length 2^w: entry c is fmt_decode(word, c).
    NaN entries have bits 0x7FC00000; -0.0 stays -0.0."""
    return _decode_table(_format(word).word)


def _as_codes(codes) -> np.ndarray:
    c = np.asarray(codes)
    if c.dtype.kind == "b" or (c.size == 0 and c.dtype.kind not in "ui"):
        return c.astype(np.uint8)
    if c.dtype.kind == "i":   # two's complement bits, modular
        return c.astype(np.dtype(f"u{c.dtype.itemsize}"))
    if c.dtype.kind != "u":
        raise GritUsageError(f"codes must be an integer array, got dtype {c.dtype}")
    return c


def decode_codes(word: int, codes) -> np.ndarray:
    """fmt_decode of every element of ``codes`` (any integer dtype; each code
    is masked to w bits) as a new float32 array of the same shape."""
    f = _format(word)
    c = _as_codes(codes)
    w = f.width
    if w <= 16:
        if c.dtype.itemsize * 8 > w:
            c = c & c.dtype.type((1 << w) - 1)
        return np.asarray(decode_table(f.word)[c])
    c32 = np.array(c, dtype=np.uint32)      # a copy; modular: the low 32 bits
    if w < 32:
        c32 &= np.uint32((1 << w) - 1)
    if f.word == BINARY32.word:
        return _canonical_nan(c32.view(np.float32))
    return _decode_compute(f, c32.astype(np.int64))


# ---------------------------------------------------------------------------
# encode: shared pieces

class _Pick(enum.Enum):
    """How a magnitude between two ladder entries picks one: the nearest (ties
    to the even code or away from zero), or the entry of smaller or larger
    magnitude.  A directed rounding (rtz, rtp, rtn) is SMALLER or LARGER by
    the sign of the input (:func:`_directed`); the words are not the
    roundings' (rtp is "up" toward +inf, which is SMALLER for a negative)."""

    RNE = "rne"
    RNA = "rna"
    SMALLER = "smaller magnitude"
    LARGER = "larger magnitude"


def _inf_code(f: Format) -> int:
    return ((1 << f.e_bits) - 1) << f.m_bits


def _overflow_code(f: Format, top_code: int) -> int:
    """The code ovfinf gives a magnitude that rounds past the largest finite."""
    if f.has_inf:
        return _inf_code(f)
    if f.has_nan:
        return f.nan_code
    return top_code


def _f32_threshold(t: float, strict: bool) -> np.float32:
    """The least binary32 ``thr`` with (a >= thr) == (a > t if strict else
    a >= t) for every binary32 a >= 0 (t exact, as a binary64)."""
    with np.errstate(over="ignore"):
        r = np.float32(t)
    if float(r) < t:
        r = np.nextafter(r, np.float32(np.inf))
    elif float(r) == t and strict:
        r = np.nextafter(r, np.float32(np.inf))
    return r


@lru_cache(maxsize=1024)
def _ladder_tables(word: int, mode: _Pick, ovf: bool):
    """Thresholds T (float32, ascending) and codes C (len(T) + 1) such that
    C[searchsorted(T, a, 'right')] is the ladder pick for magnitude a under
    ``mode`` (a :class:`_Pick`); with ``ovf`` a last entry for magnitudes that
    round past the largest finite value (ovfinf).  Rounding to the smaller
    magnitude carries an overflow to the largest finite value (IEEE 754 §7.4),
    so SMALLER gets no such entry whatever ``ovf`` says; under LARGER every
    a > largest finite takes it."""
    f = _format(word)
    lad = ladder(word)
    mags = [m for m, _ in lad]
    codes = [c for _, c in lad]
    if ovf and mode is not _Pick.SMALLER:
        top = mags[-1]
        if f.kind is FormatKind.FLOAT:   # one ulp of the top binade (subnormal quantum at least)
            e_top = max(math.frexp(top)[1] - 1, 1 - f.bias)
            nxt = top + math.ldexp(1.0, e_top - f.m_bits)
        else:
            nxt = 2.0 * top
        mags = mags + [nxt]
        codes = codes + [_overflow_code(f, codes[-1])]
    thr = []
    for i in range(len(mags) - 1):
        lo, hi, c_lo = mags[i], mags[i + 1], codes[i]
        if mode is _Pick.RNE:
            thr.append(_f32_threshold((lo + hi) / 2, strict=(c_lo % 2 == 0)))
        elif mode is _Pick.RNA:
            thr.append(_f32_threshold((lo + hi) / 2, strict=False))
        elif mode is _Pick.SMALLER:
            thr.append(_f32_threshold(hi, strict=False))
        else:  # LARGER
            thr.append(_f32_threshold(lo, strict=True))
    T = np.array(thr, dtype=np.float32)
    C = np.array(codes, dtype=np.int64)
    T.flags.writeable = False
    C.flags.writeable = False
    return T, C


def _ladder_lookup(word: int, mode: _Pick, ovf: bool, a: np.ndarray) -> np.ndarray:
    T, C = _ladder_tables(word, mode, ovf)
    return C[np.searchsorted(T, a, side="right")]


def _directed(rounding: Rounding, neg_input: bool) -> _Pick:
    """rtz/rtp/rtn as a magnitude direction for one sign."""
    if rounding == Rounding.RTZ:
        return _Pick.SMALLER
    if rounding == Rounding.RTP:
        return _Pick.SMALLER if neg_input else _Pick.LARGER
    return _Pick.LARGER if neg_input else _Pick.SMALLER  # rtn


def _ladder_magnitude(f: Format, a: np.ndarray, neg: np.ndarray | None,
                      rounding: str, sat: str) -> np.ndarray:
    """Ladder code of each magnitude a (float32, ≥ 0, may be +inf or NaN —
    NaN lanes are overwritten by the caller).  ``neg`` (or None: all
    positive) selects the direction of rtp/rtn.  Under ovfinf an infinite
    input is exact: it takes the overflow code in every mode."""
    ovf = sat == Saturation.OVFINF
    if rounding in (Rounding.RNE, Rounding.RNA):
        return _ladder_lookup(f.word, _Pick(Rounding(rounding).value), ovf, a)
    pos_mode, neg_mode = _directed(rounding, False), _directed(rounding, True)
    out = _ladder_lookup(f.word, pos_mode, ovf, a)
    if neg is not None and neg_mode != pos_mode and neg.any():
        out = np.where(neg, _ladder_lookup(f.word, neg_mode, ovf, a), out)
    if ovf:   # the SMALLER tables stop at the largest finite value
        out = np.where(np.isinf(a), _overflow_code(f, ladder(f.word)[-1][1]), out)
    return out


# ---------------------------------------------------------------------------
# encode: by kind

def _encode_int(f: Format, x: np.ndarray, rounding: str) -> np.ndarray:
    if rounding == Rounding.RNE:
        r = np.rint(x)
    elif rounding == Rounding.RTZ:
        r = np.trunc(x)
    elif rounding == Rounding.RTP:
        r = np.ceil(x)
    elif rounding == Rounding.RTN:
        r = np.floor(x)
    else:  # rna: floor of the magnitude, up when the fraction is >= 1/2
        a = np.abs(x)
        lo = np.floor(a)
        with np.errstate(invalid="ignore"):
            mag = lo + ((a - lo) >= np.float32(0.5))   # a - lo exact; inf - inf unused
        r = np.copysign(np.where(np.isinf(a), a, mag), x)
    w = f.width
    if f.unsigned:
        lo_v, hi_v = 0, (1 << w) - 1
    else:
        lo_v, hi_v = -((1 << (w - 1)) - 1), (1 << (w - 1)) - 1   # §1.5
    r = np.clip(r, np.float32(lo_v), np.float32(hi_v))          # ±inf clamp too
    return r.astype(np.int64) & ((1 << w) - 1)


def _encode_exp(f: Format, x: np.ndarray, rounding: str, sat: str) -> np.ndarray:
    # unsigned: §2.5 encodes |x| and ORs in no sign (steps 2 and 5)
    return _ladder_magnitude(f, np.abs(x), None, rounding, sat)


def _float_sign_fixup(f: Format, x: np.ndarray, mag_code: np.ndarray,
                      sat: str) -> np.ndarray:
    """Shared tail of the float encoders: ±inf under satmax, sign handling."""
    neg = np.signbit(x)
    if sat == Saturation.SATMAX and f.has_inf:
        mag_code = np.where(np.isinf(x), _inf_code(f), mag_code)
    if f.unsigned:
        return mag_code         # §2.5 step 5: no sign bit to OR in
    return mag_code | (neg.astype(np.int64) << (f.width - 1))


def _encode_float_ladder(f: Format, x: np.ndarray, rounding: str, sat: str) -> np.ndarray:
    """Floats via the §2.5 ladder (valid for any width ≤ 16; used for ≤ 8)."""
    neg = None if f.unsigned else np.signbit(x)     # unsigned: the magnitude is encoded
    mag = _ladder_magnitude(f, np.abs(x), neg, rounding, sat)
    return _float_sign_fixup(f, x, mag, sat)


def _top_finite_code(f: Format) -> int:
    """Sign-cleared code of the largest finite value of a float format: every
    code above it in the magnitude field is Inf or NaN."""
    top = _inf_code(f)          # first code of the top exponent
    if f.has_inf:
        return top - 1
    if f.nan_enc == 2:
        return top
    if f.nan_enc == 1:
        return top + (1 << f.m_bits) - 2 if f.m_bits else top - 1
    return top + (1 << f.m_bits) - 1


def _encode_float_bits(f: Format, x: np.ndarray, rounding: str, sat: str) -> np.ndarray:
    """Floats of any width: round the binary32 significand at the target
    quantum 2^(max(floor(log2 a), 1 - bias) - m_bits).

    int32 suffices: the magnitude code is below (e_t + bias + 1) << m_bits
    ≤ 256 << 23 (bias ≤ 127 and e_t ≤ 128 for every legal word)."""
    m_bits, bias = f.m_bits, f.bias
    if f.unsigned:
        x = np.abs(x)           # §2.5 step 2: the magnitude is encoded, no sign
    i32 = np.int32
    ab = (x.view(np.uint32) & np.uint32(0x7FFFFFFF)).view(np.int32)
    E = ab >> 23
    finite = E != 255
    sig = (ab & i32(0x7FFFFF)) | ((E != 0).astype(np.int32) << 23)
    # binary32 subnormals lie below 2^-126 ≤ 2^(1-bias): max() gives 1-bias
    e_t = np.maximum(E - i32(127), i32(1 - bias))
    shift = np.minimum(e_t - np.maximum(E, i32(1)) + i32(150 - m_bits), i32(25))
    np.maximum(shift, 0, out=shift)      # a guard: legal words never go below 0
    n = sig >> shift
    one_sh = i32(1) << shift
    r = sig & (one_sh - 1)
    half = one_sh >> 1                   # 0 when the shift is 0 (then r == 0)
    if rounding == Rounding.RNE:
        # ties to the even code (§2.5); with m_bits >= 1 that is the even n, with
        # m_bits = 0 (n = 1 on every normal) the even exponent field
        odd = n if m_bits else n + (e_t + i32(bias - 1))
        up = (r > half) | ((r == half) & (r != 0) & ((odd & 1) == 1))
    elif rounding == Rounding.RNA:
        up = (r >= half) & (r != 0)
    elif rounding == Rounding.RTZ:
        up = None
    elif rounding == Rounding.RTP:
        up = (r != 0) & ~np.signbit(x)
    else:  # rtn
        up = (r != 0) & np.signbit(x)
    if up is not None:
        n += up
    carry = n >> (m_bits + 1)            # n == 2^(m+1): next binade
    n >>= carry
    e_t += carry
    # normal: ((e_t + bias) << m) | (n - 2^m); subnormal (e_t = 1 - bias): n
    code = n + ((e_t + i32(bias - 1)) << m_bits)
    top_code = _top_finite_code(f)
    ovf_code = _overflow_code(f, top_code) if sat == Saturation.OVFINF else top_code
    over = code > top_code
    if sat == Saturation.OVFINF and rounding in (Rounding.RTZ, Rounding.RTP, Rounding.RTN):
        # IEEE 754 §7.4: where the rounding points toward zero (rtz; rtp for
        # negatives; rtn for positives) a finite overflow takes the largest
        # finite value of its sign
        to_top = over & finite
        if rounding == Rounding.RTP:
            to_top &= np.signbit(x)
        elif rounding == Rounding.RTN:
            to_top &= ~np.signbit(x)
        code[to_top] = top_code
        over &= ~to_top
    code[over | ~finite] = ovf_code     # ±inf: beyond every finite
    return _float_sign_fixup(f, x, code.astype(np.int64), sat)


def _encode_binary16_rne(x: np.ndarray, sat: str) -> np.ndarray:
    """binary16 under rne: IEEE binary32→binary16 conversion (ties to even,
    overflow to ∞), then the saturation rule."""
    with np.errstate(over="ignore"):
        h = x.astype(np.float16).view(np.uint16)
    if sat != Saturation.OVFINF:
        over = (h & np.uint16(0x7FFF)) == 0x7C00
        if sat == Saturation.SATMAX:
            over &= np.isfinite(x)
        if over.any():
            h = np.where(over, (h & np.uint16(0x8000)) | np.uint16(0x7BFF), h)
    return h


def _encode_binary32(x: np.ndarray, sat: str) -> np.ndarray:
    b = x.view(np.uint32).copy()
    if sat == Saturation.SATFINITE:
        inf = np.isinf(x)
        if inf.any():
            b[inf] = (b[inf] & np.uint32(0x80000000)) | np.uint32(0x7F7FFFFF)
    return b


def _encode_small(f: Format, x: np.ndarray, rounding: str, sat: str) -> np.ndarray:
    """Exponent-only and float words of width ≤ 8, straight off the ladder."""
    if f.kind is FormatKind.EXP:
        return _encode_exp(f, x, rounding, sat)
    return _encode_float_ladder(f, x, rounding, sat)


@lru_cache(maxsize=256)
def _small_lut(word: int, rounding: str, sat: str) -> np.ndarray | None:
    """A 2^17-entry code table indexed by the binary32 bits of the input:
    entry 2k is the code of the value with bits k << 16, entry 2k + 1 the code
    of every value with bits in (k << 16, (k + 1) << 16).  Exact when every
    ladder threshold has bits ending in 0x0000 or 0x0001, which holds for every
    ladder with at most 6 mantissa bits (a midpoint has m_bits + 2 significant
    bits, the index resolves 8); None when it does not.  NaN inputs map to
    nan_code (formats with a NaN)."""
    f = _format(word)
    modes = ((_Pick(Rounding(rounding).value),) if rounding in (Rounding.RNE, Rounding.RNA)
             else (_Pick.SMALLER, _Pick.LARGER))
    for mode in modes:
        T, _ = _ladder_tables(word, mode, sat == Saturation.OVFINF)
        if np.any((T.view(np.uint32) & np.uint32(0xFFFF)) > 1):
            return None
    k = np.arange(1 << 16, dtype=np.uint32) << 16
    reps = np.stack([k, k | np.uint32(1)], axis=1).reshape(-1).view(np.float32)
    nan = np.isnan(reps)
    with np.errstate(invalid="ignore", over="ignore"):
        codes = _encode_small(f, np.where(nan, np.float32(0), reps), rounding, sat)
    if f.has_nan:
        codes[nan] = f.nan_code
    lut = codes.astype(np.uint8)
    lut.flags.writeable = False
    return lut


def _lut_gather(lut: np.ndarray, x: np.ndarray) -> np.ndarray:
    b = x.view(np.uint32)
    idx = b >> np.uint32(15)
    idx &= np.uint32(0x1FFFE)
    idx |= (b & np.uint32(0xFFFF)) != 0
    return lut[idx]


# ---------------------------------------------------------------------------

def encode_values(word: int, x, rounding: str = "rne", sat: str = "satfinite") -> np.ndarray:
    """fmt_encode(word, v, rounding, sat) for every element v of ``x`` (cast
    to float32 first, as fmt_encode rounds its input to binary32).  Returns
    codes as uint8 (w ≤ 8), uint16 (w ≤ 16) or uint32, in ``x``'s shape.
    Raises GritEncodeError when ``x`` holds a NaN and the format has none."""
    rounding, sat = as_modes(rounding, sat)
    f = _format(word)
    with np.errstate(over="ignore"):
        try:
            x = np.asarray(x, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise GritUsageError(f"values must be an array of real numbers: {e}") from None
    shape = x.shape
    x = np.ascontiguousarray(x).reshape(-1)
    out_dtype = code_dtype(f.word)
    if not f.has_nan:
        nan = np.isnan(x)
        if nan.any():
            raise GritEncodeError(
                f"format {f.name} has no NaN encoding; the input holds "
                f"{int(np.count_nonzero(nan))} NaN(s)")
    if f.kind is not FormatKind.INT and f.width <= 8:
        lut = _small_lut(f.word, rounding, sat)
        if lut is not None:
            return _lut_gather(lut, x).reshape(shape)
    with np.errstate(invalid="ignore", over="ignore"):
        if f.kind is FormatKind.INT:
            code = _encode_int(f, x, rounding)
        elif f.width <= 8:
            code = _encode_small(f, x, rounding, sat)
        elif f.word == BINARY32.word:
            code = _encode_binary32(x, sat)
        elif f.word == BINARY16.word and rounding == Rounding.RNE:
            code = _encode_binary16_rne(x, sat)
        else:
            code = _encode_float_bits(f, x, rounding, sat)
        if f.has_nan:
            nan = np.isnan(x)
            if nan.any():
                code = np.where(nan, f.nan_code, code)
    return code.astype(out_dtype, copy=False).reshape(shape)
