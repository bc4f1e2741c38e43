"""§9–§10: encode() / quantize(), vectorised, and requantize().

encode projects a binary32 array into a grade.  The scale rules are the five
of §9 under the grade's encode projection (er, es, esr, esn), generalised from
the four reference grades exactly as docs/spec-decisions.md ("§9 Encode")
states; each reference grade is an instance of the general code, not a
separate path:

* exp2floormaxabs / exp2ceilmaxabs / exp2rnemaxabs (one level) — GRADE_MXFP4,
  GRADE_MXFP4_RNE;
* ratiomaxabs, one level — GRADE_I8S24; two levels — GRADE_NVF4, GRADE_NVF4_RTZ;
* affineminmax, one level with zps=shared; two levels with zps=l1 — GRADE_Q4KS.

N:M selection runs first and any non-affine rule then sees the kept values
only (dropped positions read as +0.0, which never changes a max-abs, a
finiteness test or an all-zero test).  Every (rule, structure) pair the
decisions do not define raises GritEncodeError.

All arithmetic is binary32: each named step of §9/§10 is one numpy operation
on float32 operands, rounded to nearest even.  floor(log2 amax) comes from
frexp (exact).  Element projection is fmt_encode with rne and es (§9.1
rule 5); er governs only the projection of a computed scale.

Fast path: the six registered grades encode in the private C extension
``grit._kernels`` when it is built and ``grit.native.NATIVE`` is set;
the kernels are these same rules written per group and give the same bytes
(tests/test_native_codec.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable
import numpy as np

from .. import native
from ..array import GritArray, decode
from ..check import plane_sizes
from ..errors import Detail, GritEncodeError, GritUsageError, error_for
from ..formats import Format, FormatKind
from ..grade import Grade, grade_from, lookup_grade, register_grade
from ..vformats import code_dtype, decode_codes, decode_table, encode_values
from .layout import require_canonical_placement, to_lin
from .packing import pack_elements, write_group_plane, write_meta, write_scale1

__all__ = ["encode", "requantize", "Requantized", "SCALE_RULES", "VALUE_READERS",
           "register_values_reader"]

SCALE_RULES = ("exp2floormaxabs", "exp2ceilmaxabs", "exp2rnemaxabs", "ratiomaxabs",
               "affineminmax")

_F32 = np.float32


# ---------------------------------------------------------------------------
# small format helpers

@lru_cache(maxsize=None)
def _fmt(word: int) -> Format:
    return Format(word)


@lru_cache(maxsize=None)
def _code_of(word: int, value: float) -> int:
    """The code of an exactly representable value (1.0, 2^X)."""
    return int(encode_values(word, np.array([value], dtype=_F32))[0])


@lru_cache(maxsize=None)
def _min_positive_code(word: int) -> int:
    """The code of the smallest positive value of a format."""
    f = _fmt(word)
    if f.width <= 16:
        t = decode_table(word).astype(np.float64)
        t = np.where(np.isfinite(t) & (t > 0), t, np.inf)
        return int(np.argmin(t))
    return 1  # wide float: the least subnormal; wide integer: 1


def _pow2_range(f: Format) -> tuple[int, int]:
    """[lo, hi] such that 2^X is a value of f for every integer X in it."""
    if f.kind is FormatKind.FLOAT:
        return 1 - f.bias - f.m_bits, f.emax
    if f.kind is FormatKind.EXP:
        return -f.bias, f.emax
    return 0, f.emax


def _nan_code_or_none(word: int) -> int | None:
    f = _fmt(word)
    return f.nan_code if f.has_nan else None


def _max_norm(word: int) -> np.float32:
    return _F32(_fmt(word).max_finite)


def _qmax(word: int) -> int:
    return (1 << _fmt(word).width) - 1


def _per_group0(v1: np.ndarray, n_groups0: int, k1: int) -> np.ndarray:
    if k1 == 0:
        return np.broadcast_to(v1[:1], (n_groups0,) + v1.shape[1:]) if n_groups0 else v1[:0]
    return np.repeat(v1, k1, axis=0)


def _reduce_l1(v0: np.ndarray, n_groups1: int, k1: int, how) -> np.ndarray:
    """Per-level-1-group reduction of a per-level-0-group array."""
    if k1 == 0:
        init = {np.maximum: 0, np.logical_or: False}[how]
        return np.array([how.reduce(v0) if v0.size else init], dtype=v0.dtype)
    return how.reduce(v0.reshape(n_groups1, k1), axis=1)


# ---------------------------------------------------------------------------
# the plan: which rule encodes a grade, or why none does

@dataclass(frozen=True, slots=True)
class _Ctx:
    grade: Grade
    elem: int
    s0: int
    s1: int | None
    zp: int | None
    k0: int
    k1: int
    n_levels: int
    er: str
    es: str
    minus1: bool


def _ctx(g: Grade) -> _Ctx:
    return _Ctx(grade=g, elem=g.elem.word, s0=g.s0.word,
                s1=g.s1.word if g.s1 else None, zp=g.zp.word if g.zp else None,
                k0=g.k0, k1=g.k1 or 0, n_levels=g.n_levels, er=g["er"], es=g["es"],
                minus1=g["zpc"] == "minus1")


def _unsupported(g: Grade, why: str) -> GritEncodeError:
    return GritEncodeError(
        f"no encode rule for {g.name or g.canonical}: {why}.\n"
        "  Defined (docs/spec-decisions.md §9): exp2*maxabs with one level and no zero "
        "point; ratiomaxabs with one or two levels and no zero point; affineminmax with "
        "one level and zps=shared, or two levels and zps=l1, over unsigned integer "
        "element, scale0 and zero-point formats. Any of these may be N:M sparse where "
        "the grade allows it.")


def _plan(g: Grade):
    esr = g["esr"]
    c = _ctx(g)
    if esr.startswith("exp2"):
        if c.zp is not None:
            raise _unsupported(g, f"{esr} with a zero point")
        if c.n_levels != 1:
            raise _unsupported(g, f"{esr} with two scale levels")
        return _rule_exp2
    if esr == "ratiomaxabs":
        if c.zp is not None:
            raise _unsupported(g, "ratiomaxabs with a zero point")
        return _rule_ratio1 if c.n_levels == 1 else _rule_ratio2
    if esr == "affineminmax":
        if c.zp is None:
            raise _unsupported(g, "affineminmax without a zero point (zp)")
        e = _fmt(c.elem)
        if not (e.kind is FormatKind.INT and e.unsigned):
            raise _unsupported(g, f"affineminmax needs an unsigned integer element format, "
                                  f"not {e.name}")
        z = _fmt(c.zp)
        if g["zps"] == "shared":
            if c.n_levels != 1:
                raise _unsupported(g, "affineminmax with zps=shared and two scale levels")
            if z.kind is not FormatKind.INT:
                raise _unsupported(g, f"affineminmax needs an integer zero-point format, "
                                      f"not {z.name}")
            return _rule_affine1
        s0 = _fmt(c.s0)
        for name, f in (("scale0", s0), ("zero-point", z)):
            if not (f.kind is FormatKind.INT and f.unsigned):
                raise _unsupported(g, f"affineminmax with zps=l1 needs an unsigned integer "
                                      f"{name} format, not {f.name}")
        return _rule_affine2
    raise _unsupported(g, f"unknown scale rule {esr!r}")  # pragma: no cover


def _poison_unit(c: _Ctx, what: str) -> int:
    """0 when the level-0 group is the poisoned unit, 1 for the level-1 group;
    raises when neither scale format can carry a NaN (decisions, Poison)."""
    if _nan_code_or_none(c.s0) is not None:
        return 0
    if c.s1 is not None and _nan_code_or_none(c.s1) is not None:
        return 1
    raise GritEncodeError(
        f"cannot encode {what} into {c.grade.name or c.grade.canonical}: a group holding "
        f"NaN or ±∞ is poisoned by a NaN scale (§9.1 rule 2), and neither scale format "
        f"({_fmt(c.s0).name}{', ' + _fmt(c.s1).name if c.s1 else ''}) has a NaN code")


# ---------------------------------------------------------------------------
# the rules.  Each takes x as (n_groups0, k0) float32 in lin order and returns
# (element codes (n_groups0, k0), scale0 codes, scale1 codes or None,
#  zero-point codes or None).

def _elem_codes(c: _Ctx, y: np.ndarray) -> np.ndarray:
    return encode_values(c.elem, y, "rne", c.es)


def _poisoned_rows_quiet(y: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """§9.1 rule 2 writes code 0 for every element of a poisoned group, so
    what its scale would have made of the values is never projected: under
    es=ovfinf that scale can be NaN (a finite amax past the scale format's
    range), and v / NaN into an element format without NaN would be §2.5
    step 1's error.  The rows are set to +0 before the element projection."""
    if rows.any():
        y[rows] = _F32(0)
    return y


def _finite_parts(x: np.ndarray):
    fin = np.isfinite(x)
    poison = ~fin.all(axis=1)
    xs = np.where(fin, x, _F32(0)) if poison.any() else x
    return xs, poison


def _rule_exp2(c: _Ctx, x: np.ndarray, n_groups1: int):
    xs, poison = _finite_parts(x)
    amax = np.abs(xs).max(axis=1) if x.shape[1] else np.zeros(x.shape[0], _F32)
    mant, ex = np.frexp(amax)                      # amax = mant · 2^ex, mant in [0.5, 1)
    e_floor = ex.astype(np.int64) - 1
    rule = c.grade["esr"]
    if rule == "exp2ceilmaxabs":
        e = e_floor + (mant != _F32(0.5))          # f = 1 exactly ⇒ a power of two
    elif rule == "exp2rnemaxabs":
        m64 = mant.astype(np.float64)
        e = e_floor + (m64 * m64 > 0.5)            # f² > 2 with f = 2·mant; exact
    else:
        e = e_floor
    lo, hi = _pow2_range(_fmt(c.s0))
    X = np.clip(e - _fmt(c.elem).emax, lo, hi)
    X = np.where(amax == 0, 0, X)                  # all-zero group: scale 1.0
    scale = np.ldexp(_F32(1), X.astype(np.int32)).astype(_F32)   # exact power of two
    s0c = encode_values(c.s0, scale)
    with np.errstate(under="ignore"):
        q = _elem_codes(c, _poisoned_rows_quiet(xs / scale[:, None], poison))
    _poison_groups(c, poison, s0c, q)
    return q, s0c, None, None


def _poison_groups(c: _Ctx, poison: np.ndarray, s0c: np.ndarray, *zeroed: np.ndarray) -> None:
    """Groups holding NaN or ±∞: the NaN scale code, and zero codes in every
    other array given (``_poison_unit`` raises where no scale has a NaN)."""
    if poison.any():
        _poison_unit(c, "NaN or ±∞")
        s0c[poison] = _fmt(c.s0).nan_code
        for a in zeroed:
            a[poison] = 0


def _project_scale(c: _Ctx, word: int, ratio: np.ndarray, positive: np.ndarray):
    """Project computed scales under (er, es); a positive scale that projects
    to zero takes the smallest positive value of the format."""
    code = encode_values(word, ratio, c.er, c.es)
    val = decode_codes(word, code)
    tiny = (val == 0) & positive
    if tiny.any():
        code[tiny] = _min_positive_code(word)
        val = decode_codes(word, code)
    return code, val


def _rule_ratio1(c: _Ctx, x: np.ndarray, n_groups1: int):
    xs, poison = _finite_parts(x)
    amax = np.abs(xs).max(axis=1) if x.shape[1] else np.zeros(x.shape[0], _F32)
    zero = amax == 0
    s0c, sv = _project_scale(c, c.s0, amax / _max_norm(c.elem), ~zero)
    if zero.any():
        s0c[zero] = _code_of(c.s0, 1.0)
        sv = decode_codes(c.s0, s0c)
    with np.errstate(invalid="ignore", divide="ignore", under="ignore", over="ignore"):
        q = _elem_codes(c, _poisoned_rows_quiet(xs / sv[:, None], poison))
    _poison_groups(c, poison, s0c, q)
    return q, s0c, None, None


def _rule_ratio2(c: _Ctx, x: np.ndarray, n_groups1: int):
    """The §10.3 recipe: a per-level-1-group scale from the finite amax, then
    level-0 scales relative to its stored value."""
    G0 = x.shape[0]
    xs, poison0 = _finite_parts(x)
    unit = _poison_unit(c, "NaN or ±∞") if poison0.any() else 0
    if unit == 0:
        p1, zeroed = None, poison0
    else:           # the level-1 group is the poisoned unit: everything under it
        p1 = _reduce_l1(poison0, n_groups1, c.k1, np.logical_or)
        zeroed = _per_group0(p1, G0, c.k1)
    bamax = np.abs(xs).max(axis=1) if x.shape[1] else np.zeros(G0, _F32)
    amax1 = _reduce_l1(bamax, n_groups1, c.k1, np.maximum)
    zero1 = amax1 == 0
    sT = (amax1 / _max_norm(c.elem)) / _max_norm(c.s0)           # f32(f32(a/6)/448)
    sT = np.where(zero1, _F32(1), sT).astype(_F32)
    s1c, sTv = _project_scale(c, c.s1, sT, ~zero1)                # store, re-read
    sT0 = _per_group0(sTv, G0, c.k1)
    with np.errstate(invalid="ignore", divide="ignore", under="ignore", over="ignore"):
        ratio = (bamax / _max_norm(c.elem)) / sT0
        s0c = encode_values(c.s0, ratio, c.er, c.es)
        bzero = bamax == 0
        if bzero.any():
            s0c[bzero] = _code_of(c.s0, 1.0)
        S = np.multiply(sT0, decode_codes(c.s0, s0c))              # f32(sT · s0)
        Sz = S == 0
        y = xs / S[:, None]
        if Sz.any():       # level-0 scale underflowed: signed zero codes (§10.3)
            y[Sz] = np.copysign(_F32(0), xs[Sz])
        q = _elem_codes(c, _poisoned_rows_quiet(y, zeroed))
    if poison0.any():
        if p1 is None:
            s0c[poison0] = _fmt(c.s0).nan_code
        else:
            s1c[p1] = _fmt(c.s1).nan_code
            s0c[zeroed] = 0
        q[zeroed] = 0
    return q, s0c, s1c, None


def _int_range(word: int) -> tuple[int, int]:
    f = _fmt(word)
    if f.unsigned:
        return 0, (1 << f.width) - 1
    return -((1 << (f.width - 1)) - 1), (1 << (f.width - 1)) - 1   # §1.5


def _lo_hi(xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """§9.3 per group: lo = min(0, min v), hi = max(0, max v) (zero forced in)."""
    if xs.shape[1] == 0:
        z = np.zeros(xs.shape[0], _F32)
        return z, z
    return np.minimum(xs.min(axis=1), _F32(0)), np.maximum(xs.max(axis=1), _F32(0))


def _rule_affine1(c: _Ctx, x: np.ndarray, n_groups1: int):
    """GPTQ shape: S = proj(f32(f32(hi − lo) / (2^w − 1))), z = clamp(rne(f32(−lo/S)))
    to the zero point's range, q = clamp(rne(f32(v/S)) + z, 0, 2^w − 1) — GPTQ's
    own quantizer: round, then add the zero point, then clamp
    (docs/spec-decisions.md §9, "One-level affine")."""
    xs, poison = _finite_parts(x)
    lo, hi = _lo_hi(xs)
    zero = (lo == 0) & (hi == 0)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        step = (hi - lo) / _F32(_qmax(c.elem))
        s0c, S = _project_scale(c, c.s0, step, ~zero)
        if zero.any():                                  # all-zero group: scale 1.0
            s0c[zero] = _code_of(c.s0, 1.0)
            S = decode_codes(c.s0, s0c)
        m1 = 1 if c.minus1 else 0
        zlo, zhi = _int_range(c.zp)
        z = np.clip(np.rint(_poisoned_rows_quiet(-lo / S, poison)),
                    _F32(zlo + m1), _F32(zhi + m1))
        zpc = encode_values(c.zp, z - _F32(m1))          # exact small integers
        zd = decode_codes(c.zp, zpc)
        if m1:
            zd = zd + _F32(1)
        # rne(f32(v / S)) is an integer (or ±∞); + z is exact below 2^24 and
        # past it only moves a value that the clamp maps to 0 or 2^w − 1 anyway
        r = np.rint(_poisoned_rows_quiet(xs / S[:, None], poison))
        q = _elem_codes(c, r + zd[:, None])              # the clamp (§1.5)
    _poison_groups(c, poison, s0c, q, zpc)
    return q, s0c, None, zpc


def _rule_affine2(c: _Ctx, x: np.ndarray, n_groups1: int):
    """§10.2 generalised: 15 → 2^w(e) − 1, 63 → 2^w(s0) − 1 and 2^w(zp) − 1;
    d and dmin are projected into s1 under (er, es) and re-read."""
    G0 = x.shape[0]
    xs, poison0 = _finite_parts(x)
    lo, hi = _lo_hi(xs)
    Qe, Qs, Qz = _F32(_qmax(c.elem)), _F32(_qmax(c.s0)), _F32(_qmax(c.zp))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        step = (hi - lo) / Qe                                       # f32(f32(hi−lo)/15)
        off = -lo                                                   # f32(−lo), exact
        mstep = _reduce_l1(step, n_groups1, c.k1, np.maximum)
        moff = _reduce_l1(off, n_groups1, c.k1, np.maximum)
        dc = encode_values(c.s1, mstep / Qs, c.er, c.es)          # d = proj(f32(max/63))
        mc = encode_values(c.s1, moff / Qz, c.er, c.es)           # dmin
        d = _per_group0(decode_codes(c.s1, dc), G0, c.k1)           # re-read
        dmin = _per_group0(decode_codes(c.s1, mc), G0, c.k1)
        # a d or dmin that es=ovfinf carried to NaN (s1 without ∞) leaves NaN
        # quotients: their codes are 0, as spec/reference.py's rne_int_clamp
        # writes them (never a float→int cast of NaN)
        sc = np.where(d == 0, _F32(0), np.clip(np.rint(step / d), _F32(0), Qs))
        m = np.where(dmin == 0, _F32(0), np.clip(np.rint(off / dmin), _F32(0), Qz))
        sc, m = np.nan_to_num(sc, nan=0.0), np.nan_to_num(m, nan=0.0)
        S = np.multiply(d, sc)                                      # f32(d · sc)
        Z = np.multiply(dmin, m)                                    # f32(dmin · m)
        qf = np.clip(np.rint((xs + Z[:, None]) / S[:, None]), _F32(0), Qe)
        qf[S == 0] = 0
        qf[np.isnan(qf)] = 0
        q = qf.astype(code_dtype(c.elem))
        s0c = sc.astype(code_dtype(c.s0))
        zpc = m.astype(code_dtype(c.zp))
    s1c = np.stack([dc.astype(np.int64), mc.astype(np.int64)], axis=1)
    if poison0.any():
        _poison_unit(c, "NaN or ±∞")      # s0 is an unsigned integer: level 1
        p1 = _reduce_l1(poison0, n_groups1, c.k1, np.logical_or)
        s1c[p1, 0] = _fmt(c.s1).nan_code
        s1c[p1, 1] = 0
        p0 = _per_group0(p1, G0, c.k1)
        s0c[p0] = 0
        zpc[p0] = 0
        q[p0] = 0
    return q, s0c, s1c.reshape(-1), zpc


# ---------------------------------------------------------------------------
# N:M selection (§10.4 generalised)

def _select(xl: np.ndarray, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(nquads, n) kept indices per quad, ascending — the n largest
    magnitudes, NaN maximal, ties to the lower index — and the (nquads, m)
    kept mask.  Works column by column (m ≤ 16): short-axis reductions are
    slow in numpy, whole-column operations are not."""
    nq = xl.size // m
    mag = xl.view(np.uint32) & np.uint32(0x7FFFFFFF)          # |x| as an ordered key
    key = np.minimum(mag, np.uint32(0x7F800001)).reshape(nq, m)   # every NaN alike, > ∞
    cols = [np.ascontiguousarray(key[:, j]) for j in range(m)]
    # position j is kept iff fewer than n positions beat it: a larger key, or
    # an equal key at a lower index.  Exactly n positions per quad are kept.
    kept = []
    for j in range(m):
        beat = np.zeros(nq, dtype=np.uint8)
        for k in range(m):
            if k != j:
                beat += (cols[k] >= cols[j]) if k < j else (cols[k] > cols[j])
        kept.append(beat < n)
    # the (t+1)-th kept index = the number of positions before which at most
    # t are kept
    cum, running = [], np.zeros(nq, dtype=np.uint8)
    for j in range(m):
        running = running + kept[j]
        cum.append(running)
    idx = np.empty((nq, n), dtype=np.uint8)
    for t in range(n):
        s = np.zeros(nq, dtype=np.uint8)
        for j in range(m):
            s += cum[j] <= t
        idx[:, t] = s
    return idx, np.stack(kept, axis=1)


def _flush_subnormals(xl: np.ndarray) -> np.ndarray:
    b = xl.view(np.uint32)
    sub = (b & np.uint32(0x7F800000)) == 0
    return np.where(sub, b & np.uint32(0x80000000), b).view(np.float32)


# ---------------------------------------------------------------------------
# public API

#: Readers of array types numpy cannot read exactly by itself (a bfloat16
#: tensor has no numpy dtype), by the type's qualified name
#: ("torch.Tensor"): each returns a numpy array of real numbers whose values
#: are the input's, exactly.  A framework's interop module registers its
#: reader (grit.interop.torch registers torch.Tensor), so that the core never
#: imports a framework.
VALUE_READERS: dict[str, Callable[[Any], np.ndarray]] = {}


def register_values_reader(type_name: str, reader: Callable[[Any], np.ndarray]) -> None:
    """Make encode() read instances of the type named ``type_name`` (its
    ``module.qualname``; subclasses included) with ``reader``."""
    if not isinstance(type_name, str) or not callable(reader):
        raise GritUsageError("register_values_reader(type_name: str, reader: callable)")
    VALUE_READERS[type_name] = reader


def _reader_for(values) -> Callable[[Any], np.ndarray] | None:
    if not VALUE_READERS:
        return None
    for c in type(values).__mro__:
        r = VALUE_READERS.get(f"{c.__module__}.{c.__qualname__}")
        if r is not None:
            return r
    return None


def _as_values(values) -> np.ndarray:
    if isinstance(values, GritArray):
        raise GritUsageError("encode() takes binary32 values, not a GritArray: re-rounding "
                             "an array into another grade is grit.requantize(array, grade)")
    if isinstance(values, np.ndarray):
        arr = values
    elif (reader := _reader_for(values)) is not None:
        arr = reader(values)
    else:
        try:
            arr = np.asarray(values)
        except (TypeError, ValueError) as e:
            hint = ""
            if type(values).__module__.split(".")[0] == "torch":
                hint = " (import grit.interop.torch to encode torch tensors of any float dtype)"
            raise GritUsageError(f"encode() needs a numeric array, got {type(values).__name__}: "
                                 f"{e}{hint}") from None
    if arr.dtype.kind not in "fiu":
        raise GritUsageError(
            f"encode() needs real numbers (float or integer dtype), got dtype {arr.dtype}")
    try:
        with np.errstate(over="ignore"):          # beyond binary32: ±inf, as a cast rounds
            return np.asarray(arr, dtype=np.float32)
    except (TypeError, ValueError) as e:  # pragma: no cover - exotic dtypes
        raise GritUsageError(f"cannot convert input to float32: {e}") from None


def _as_grade(grade) -> Grade:
    if isinstance(grade, (str, Grade)):
        g = grade_from(grade)
    else:
        raise GritUsageError(f"grade must be a Grade or a grade string/name, got "
                             f"{type(grade).__name__}")
    if lookup_grade(g.id) is None:
        register_grade(g)   # a grade this process was given is a grade it knows (§7.3)
    return g


def encode(values, grade, *, group_axis: int | None = None,
           placement_data: int | None = None, placement_scale: int | None = None,
           placement_meta: int | None = None, note: int = 0):
    """encode() / quantize() (§9): project ``values`` (converted to float32)
    into ``grade`` and return the :class:`~grit.array.GritArray`.

    ``group_axis`` defaults to the last axis (a negative axis counts from the
    end).  The planes are written in the canonical placement; the placement
    words default to those of Appendix A.4, so a 1-D input of a registered
    grade carries exactly its A.4 descriptor."""
    g = _as_grade(grade)
    plan = _plan(g)
    x = _as_values(values)
    if x.ndim == 0:
        raise GritUsageError("encode() needs an array of rank >= 1 (a group axis)")
    ga = x.ndim - 1 if group_axis is None else group_axis
    if isinstance(ga, bool) or not isinstance(ga, (int, np.integer)):
        raise GritUsageError(f"group_axis must be an int, got {type(group_axis).__name__}")
    ga = int(ga)
    if not -x.ndim <= ga < x.ndim:
        raise GritUsageError(f"group_axis {group_axis} is out of range for rank {x.ndim}")
    ga %= x.ndim
    desc = g.descriptor(group_axis=ga, placement_data=placement_data,
                        placement_scale=placement_scale, placement_meta=placement_meta,
                        note=note)
    sp = g.sp
    require_canonical_placement(desc.placement_data, desc.placement_scale,
                                desc.placement_meta, sp is not None or g.zp is not None,
                                "encode")
    ps = plane_sizes(desc, x.shape)
    if isinstance(ps, Detail):
        raise error_for(ps)
    c = _ctx(g)
    xl = to_lin(x, ga)
    kind = native.ENCODE_KIND.get(g.canonical)
    if kind is not None:
        if native.kernels() is not None:
            return GritArray(desc, x.shape, native.encode(kind[0], kind[1], xl))
        native.warn_missing(xl.size)
    if g["esn"] == "ftz":
        xl = _flush_subnormals(xl)
    idx = None
    if sp is not None:
        idx, kept = _select(xl, sp.n, sp.m)
        xl = np.where(kept.reshape(-1), xl, _F32(0))
    q, s0c, s1c, zpc = plan(c, xl.reshape(ps.n_groups0, c.k0), ps.n_groups1)
    q = q.reshape(-1)
    if idx is not None:
        q = np.take_along_axis(q.reshape(-1, sp.m), idx, axis=1).reshape(-1)
    ew = _fmt(c.elem).width
    data = pack_elements(q, ew, pad8=g["ct"] == "pad8", msb=g["po"] == "msb")
    scale0 = write_group_plane(s0c, _fmt(c.s0).width)
    scale1 = write_scale1(s1c, _fmt(c.s1).width) if c.n_levels == 2 else b""
    if idx is not None:
        aux = write_meta(idx, sp.meta_bits)
    elif zpc is not None:
        aux = write_group_plane(zpc, _fmt(c.zp).width)
    else:
        aux = b""
    return GritArray(desc, x.shape, (data, scale0, scale1, aux))


# ---------------------------------------------------------------------------
# requantize (L4)

@dataclass(frozen=True, slots=True, kw_only=True)
class Requantized:
    """The result of :func:`requantize`: a *new* quantisation, not a view.

    ``array`` was produced by encode() from binary32 values — re-rounded, so
    its decode generally differs from the source's (L4: a group-axis
    transpose or a change of grade changes the k0-neighbourhoods and hence
    the bits).  Keep it distinct from the source; ``requantized`` is always
    True so that code handling either can tell."""

    array: "GritArray"
    source_grade: Grade | None
    reason: str
    requantized: bool = field(default=True, init=False)


_LAYOUT_KEYS = frozenset({"group_axis", "placement_data", "placement_scale", "placement_meta",
                          "note"})


def requantize(values_or_array, grade, *, reason: str | None = None, **layout) -> Requantized:
    """Re-round ``values_or_array`` into ``grade`` (a GritArray is decoded
    first).  ``layout`` takes encode()'s keywords (group_axis, placement_*,
    note).  Returns a :class:`Requantized`, never a bare array."""
    unknown = set(layout) - _LAYOUT_KEYS
    if unknown:
        raise GritUsageError(f"requantize() got unknown keyword(s) {sorted(unknown)}; "
                             f"layout keywords are {sorted(_LAYOUT_KEYS)}")
    src = None
    vals = values_or_array
    if isinstance(values_or_array, GritArray):
        src = values_or_array.grade
        vals = decode(values_or_array)      # the public decode: any placement
    g = _as_grade(grade)
    arr = encode(vals, g, **layout)
    if reason is None:
        to = g.name or g.canonical
        reason = (f"re-rounded from {src.name or src.canonical} into {to}" if src is not None
                  else f"quantised from binary32 values into {to}")
    elif not isinstance(reason, str):
        raise GritUsageError("reason must be a str")
    return Requantized(array=arr, source_grade=src, reason=reason)
