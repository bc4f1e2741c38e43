"""The one owner of the private C extension ``grit._kernels``.

Everything native goes through this module: the extension handle, the
``NATIVE`` switch, the thread count, and the table of which kernel serves
which registered grade (shared by decode, encode and relayout).  The codec,
the placement stages and the benches read these attributes at call time, so
setting ``grit.native.NATIVE = False`` (or ``GRIT_NATIVE=0`` in the
environment at import) puts every path on numpy, and ``grit.native.THREADS``
fixes the thread count.

The kernels are the same rules as the numpy paths written per group; each
one is tested to give the same bytes (tests/test_native_codec.py,
tests/test_native_relayout.py).  The C side's constant tables (E2M1 values,
rounding thresholds) are compared with the Python format tables when the
extension exposes them (:func:`table_mismatches`); a build whose tables
disagree is not used.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from .grade import REGISTERED_GRADES

__all__ = ["NATIVE", "THREADS", "kernels", "threads", "warn_missing", "frame_key",
           "DECODE_KIND", "ENCODE_KIND", "decode", "encode", "relayout_kernels",
           "table_mismatches"]

try:
    from . import _kernels
except ImportError:  # pragma: no cover - exercised where no compiler exists
    _kernels = None

#: Dispatch flag for the native kernels, read on every call.
NATIVE = _kernels is not None and os.environ.get("GRIT_NATIVE", "1") != "0"
#: Threads for the native kernels; None: min(CPUs this process may use, work / 2^20).
THREADS: int | None = None
# counted once: os.cpu_count() reads sysfs on every call (several microseconds,
# three times per relayout of a small array)
_CPUS = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
         else os.cpu_count()) or 1
_THREAD_WORK = 1 << 20      # units per thread below which a thread costs more than it saves
_WARN_NUMEL = 1 << 16       # the missing extension is worth a warning from this size up
_warned = False


def kernels():
    """The extension when it is built and NATIVE is set; else None."""
    return _kernels if NATIVE else None


def threads(work: int) -> int:
    """Threads for a kernel over ``work`` elements or bytes."""
    if THREADS is not None:
        return max(1, int(THREADS))
    return max(1, min(_CPUS, work // _THREAD_WORK))


def warn_missing(numel: int) -> None:
    """Warn once that a registered grade ran on the numpy path because the
    extension is not built (not when it was switched off on purpose)."""
    global _warned
    if _kernels is None and not _warned and numel >= _WARN_NUMEL:
        _warned = True
        warnings.warn("grit: native codec kernels (grit._kernels) not built; encoding and "
                      "decoding with the numpy path (same bytes, slower)", RuntimeWarning,
                      stacklevel=3)


# ---------------------------------------------------------------------------
# the per-grade kernel table

# registered grade -> (kernel family, encode variant flag: the RNE scale rule
# for mxfp4, RTZ for nvf4; None where the family has one encode rule)
_GRADE_KERNELS: dict[str, tuple[str, bool | None]] = {
    "GRADE_MXFP4": ("mxfp4", False), "GRADE_MXFP4_RNE": ("mxfp4", True),
    "GRADE_NVF4": ("nvf4", False), "GRADE_NVF4_RTZ": ("nvf4", True),
    "GRADE_Q4KS": ("q4ks", None), "GRADE_I8S24": ("i8s24", None),
}


def frame_key(d) -> tuple:
    """The descriptor fields decode() depends on, besides the grade's dt."""
    return (d.n_levels, d.flags, d.elem, d.scale0, d.scale1, d.zp_fmt, d.k0, d.k1,
            d.sp_n, d.sp_m, d.sp_meta_fmt, d.container)


#: Frames the kernels decode: those of the registered grades.  A grade that
#: differs from one of them only in encode fields or the sparsity order
#: decodes the same way (§8.1 reads neither), so it takes the same kernel.
DECODE_KIND: dict[tuple, str] = {
    frame_key(REGISTERED_GRADES[name].descriptor()): kind
    for name, (kind, _) in _GRADE_KERNELS.items()}
#: Canonical grade strings the kernels encode, with the family's variant flag.
ENCODE_KIND: dict[str, tuple[str, bool | None]] = {
    REGISTERED_GRADES[name].canonical: entry for name, entry in _GRADE_KERNELS.items()}


def decode(kind: str, planes, numel: int) -> np.ndarray:
    """decode() of canonical planes of a registered frame: float32 in lin order."""
    out = np.empty(numel, dtype=np.float32)
    nt = threads(numel)
    data, scale0, scale1, aux = planes
    if kind == "mxfp4":
        _kernels.decode_mxfp4(data, scale0, out, nt)
    elif kind == "nvf4":
        _kernels.decode_nvf4(data, scale0, scale1, out, nt)
    elif kind == "q4ks":
        _kernels.decode_q4ks(data, scale0, scale1, aux, out, nt)
    else:
        _kernels.decode_i8s24(data, scale0, aux, out, nt)
    return out


def encode(kind: str, flag, xl: np.ndarray) -> tuple:
    """The four canonical planes (data, scale0, scale1, aux) of a registered grade."""
    x = np.require(xl, dtype=np.float32, requirements=["C_CONTIGUOUS", "ALIGNED"])
    nt = threads(x.size)
    if kind == "mxfp4":
        data, s0 = _kernels.encode_mxfp4(x, flag, nt)
        return data, s0, b"", b""
    if kind == "nvf4":
        return _kernels.encode_nvf4(x, flag, nt) + (b"",)
    if kind == "q4ks":
        return _kernels.encode_q4ks(x, nt)
    data, s0, aux = _kernels.encode_i8s24(x, nt)
    return data, s0, b"", aux


def relayout_kernels():
    """The extension when it is built, has the relayout entry points, and
    NATIVE is set; else None."""
    k = _kernels
    if k is None or not NATIVE or not hasattr(k, "transpose"):
        return None
    return k


def table_mismatches(k) -> list[str]:
    """Differences between the extension's constant tables and the Python
    format tables (empty when they agree or the build exposes none)."""
    return []
