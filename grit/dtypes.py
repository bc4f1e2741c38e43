"""The safetensors dtype names: one table, used by every reader and writer.

Each name has its element width in bits and, where ``grit.load`` reads it
and ``grit.save`` writes it, its numpy type (``numpy``) or the name of its
``ml_dtypes`` type (``ml_dtypes``).  The other names — FNUZ eight-bit floats,
E8M0, six- and four-bit floats, complex64 — are the ones the safetensors
format and its writers use beyond those: a header naming them is well formed
(the recogniser reports such tensors as inexpressible), but ``grit.load``
cannot return them as arrays.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .formats import fmt_decode, format_by_name

__all__ = ["StDtype", "ST_DTYPES", "LOADABLE", "st_dtype_of", "bits_dtype", "with_ml_dtypes",
           "bf16_widened", "bf16_narrowed", "as_float32"]


@dataclass(frozen=True)
class StDtype:
    name: str
    bits: int                       # element width; sub-byte tensors round up to whole bytes
    numpy: str | None = None        # numpy dtype string (no extra dependency)
    ml_dtypes: str | None = None    # ml_dtypes attribute (bfloat16, float8_*)

    @property
    def itemsize(self) -> int | None:
        """Bytes per element, or None for a sub-byte type."""
        return self.bits // 8 if self.bits % 8 == 0 else None

    @property
    def loadable(self) -> bool:
        return self.numpy is not None or self.ml_dtypes is not None

    def nbytes(self, numel: int) -> int:
        """The bytes ``numel`` elements occupy (sub-byte types rounded up)."""
        return (numel * self.bits + 7) // 8

    def np_dtype(self) -> np.dtype | None:
        """The numpy dtype of an element, or None (not loadable, or ml_dtypes
        missing)."""
        if self.numpy is not None:
            return np.dtype(self.numpy)
        if self.ml_dtypes is None:
            return None
        try:
            import ml_dtypes  # noqa: PLC0415 - optional: only bfloat16/float8 arrays need it
        except ImportError:
            return None
        return np.dtype(getattr(ml_dtypes, self.ml_dtypes))

    def bits_dtype(self) -> np.dtype | None:
        """The numpy dtype a conversion carries an element in, never
        importing ml_dtypes: the numpy type, or for an ml_dtypes type a
        one-field structured type named by it (``[("bfloat16", "<u2")]``)
        over the unsigned integer of its width — the element's bits as they
        are, which no arithmetic takes by mistake.  None: neither."""
        if self.numpy is not None:
            return np.dtype(self.numpy)
        if self.ml_dtypes is None:
            return None
        return np.dtype([(self.ml_dtypes, f"<u{self.bits // 8}")])


def _table(*rows: StDtype) -> dict[str, StDtype]:
    return {r.name: r for r in rows}


#: every safetensors dtype name, in the order error messages list them
ST_DTYPES: dict[str, StDtype] = _table(
    StDtype("F64", 64, "<f8"), StDtype("F32", 32, "<f4"), StDtype("F16", 16, "<f2"),
    StDtype("BF16", 16, ml_dtypes="bfloat16"),
    StDtype("I64", 64, "<i8"), StDtype("I32", 32, "<i4"), StDtype("I16", 16, "<i2"),
    StDtype("I8", 8, "i1"), StDtype("U64", 64, "<u8"), StDtype("U32", 32, "<u4"),
    StDtype("U16", 16, "<u2"), StDtype("U8", 8, "u1"), StDtype("BOOL", 8, "?"),
    StDtype("F8_E4M3", 8, ml_dtypes="float8_e4m3fn"),
    StDtype("F8_E5M2", 8, ml_dtypes="float8_e5m2"),
    StDtype("F8_E4M3FNUZ", 8), StDtype("F8_E5M2FNUZ", 8), StDtype("F8_E8M0", 8),
    StDtype("F6_E2M3", 6), StDtype("F6_E3M2", 6), StDtype("F4", 4), StDtype("C64", 64),
)

#: the names grit.load reads and grit.save writes: numpy types first, then ml_dtypes ones
LOADABLE: tuple[str, ...] = tuple(
    [n for n, d in ST_DTYPES.items() if d.numpy is not None]
    + [n for n, d in ST_DTYPES.items() if d.ml_dtypes is not None])


def st_dtype_of(dt: np.dtype) -> str | None:
    """The safetensors name of a numpy dtype (either byte order; an
    ml_dtypes type or its :meth:`StDtype.bits_dtype`), or None."""
    for name in LOADABLE:
        d = ST_DTYPES[name]
        if d.numpy is not None:
            want = np.dtype(d.numpy)
            if dt.kind == want.kind and dt.itemsize == want.itemsize and dt.kind in "fiub":
                return name
        elif dt.name == d.ml_dtypes or dt.names == (d.ml_dtypes,):
            return name
    return None


#: ml_dtypes' name of a type -> its row of the table
_BY_ML = {d.ml_dtypes: d for d in ST_DTYPES.values() if d.ml_dtypes is not None}


def bits_dtype(ml_name: str) -> np.dtype:
    """:meth:`StDtype.bits_dtype` of the type ml_dtypes names ``ml_name``
    (``"bfloat16"``, ``"float8_e4m3fn"``)."""
    return _BY_ML[ml_name].bits_dtype()  # type: ignore[return-value]


def with_ml_dtypes(x):
    """``x`` itself, or where it is an array of a :meth:`StDtype.bits_dtype`,
    the same bytes viewed as the ml_dtypes type (where ml_dtypes is
    installed; else as it is): what a public function hands out."""
    if not isinstance(x, np.ndarray) or x.dtype.names is None or len(x.dtype.names) != 1:
        return x
    spec = _BY_ML.get(x.dtype.names[0])
    if spec is None or x.dtype != spec.bits_dtype():
        return x
    dt = spec.np_dtype()
    return x if dt is None else x.view(dt)


def bf16_widened(u: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns ``u`` (uint16) as float32, exactly: each the
    high half of a binary32."""
    return (np.asarray(u, "<u2").astype(np.uint32) << np.uint32(16)).view(np.float32)


def bf16_narrowed(v: np.ndarray) -> np.ndarray | None:
    """float32 ``v`` as bfloat16 bit patterns (uint16) where that is exact —
    every low half zero, NaNs' bits too — else None."""
    u = np.asarray(v, np.float32).view(np.uint32)
    return None if (u & np.uint32(0xFFFF)).any() else (u >> np.uint32(16)).astype("<u2")


def as_float32(x) -> np.ndarray:
    """``x``'s values as float32, exactly: an array of a type carrying an
    ml_dtypes type's bits (:meth:`StDtype.bits_dtype`) widened from them —
    bfloat16's bits the high half of a binary32, an FP8 code through its
    §2 format's value table (every NaN the canonical one) — anything else
    through numpy."""
    name = st_dtype_of(x.dtype) if isinstance(x, np.ndarray) and x.dtype.names else None
    if name == "BF16":
        return bf16_widened(x.view("<u2"))
    if name is not None:
        return _fp8_values(ST_DTYPES[name].ml_dtypes)[x.view(np.uint8)]
    return np.asarray(x, np.float32)


@lru_cache(maxsize=None)
def _fp8_values(ml_name: str) -> np.ndarray:
    """The 256 float32 values of the FP8 codes of the ml_dtypes type named
    ``ml_name`` (its §2 format: grit.formats' spelling of it)."""
    word = format_by_name(ml_name)
    out = np.array([fmt_decode(word, c) for c in range(256)], np.float32)
    out.view(np.uint32)[np.isnan(out)] = 0x7FC00000        # the canonical NaN (§1.2)
    out.flags.writeable = False
    return out
