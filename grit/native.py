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

import math
import os
import struct
import warnings

import numpy as np

from ._sparse import meta_indices
from .formats import (BINARY16, CANONICAL_NAN, E2M1, E4M3, E8M0, S8, U4, U6, f32_bits,
                      fmt_decode, fmt_encode, ladder)
from .ggml_types import BY_NAME
from .grade import REGISTERED_GRADES

__all__ = ["NATIVE", "THREADS", "kernels", "threads", "warn_missing", "frame_key",
           "DECODE_KIND", "ENCODE_KIND", "decode", "encode", "relayout_kernels",
           "table_mismatches", "GGML_KINDS", "ggml_kind", "ggml_kernels_on",
           "ggml_kind_mismatches", "decode_ggml"]

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


# ---------------------------------------------------------------------------
# the fused ggml kernels (grit/_native/ggml.c): decode read in place from the
# block structs of the GGUF types; grit.ggml's records (one per ggml type)
# look their kernel id up here, by the type's name

#: ggml type name -> the id of its decode kernel in grit._kernels (ggml.c's
#: enum, ``GGML_<name> = id``).  The extension exposes ids only; when it
#: loads, each id's block bytes and elements are probed and compared with the
#: type's in grit.ggml_types (:func:`ggml_kind_mismatches`; the thirteen
#: sizes differ pairwise, so a shifted id cannot pass), and a build that
#: disagrees serves no ggml type.
GGML_KINDS: dict[str, int] = {
    "Q8_0": 0, "MXFP4": 1, "NVFP4": 2, "Q4_K": 3, "Q4_0": 4, "Q4_1": 5, "Q5_0": 6, "Q5_1": 7,
    "Q2_K": 8, "Q5_K": 9, "Q6_K": 10, "Q8_K": 11, "TQ2_0": 12}
_ggml_ok = True     # the probe's verdict (_check_build)


def ggml_kernels_on() -> bool:
    """Whether the fused ggml kernels are built, on, and agree with GGML_KINDS."""
    return _kernels is not None and NATIVE and _ggml_ok and hasattr(_kernels, "decode_ggml")


#: the ggml types whose blocks split into a code plane and a scale plane by C
#: block kernels (their block sizes: grit.ggml_types)
SPLIT_BLOCKS = ("NVFP4", "MXFP4", "Q8_0")


def split_blocks_on() -> bool:
    """Whether the C block kernels of :data:`SPLIT_BLOCKS` (planes <-> ggml
    blocks) are built and on."""
    return ggml_kernels_on() and hasattr(_kernels, "q8_0_block")


def split_block(name: str, codes, scales, nb: int) -> np.ndarray:
    """``nb`` ggml blocks of type ``name`` (:data:`SPLIT_BLOCKS`) from the
    canonical planes: ``codes`` (sub-byte ones LSB-first) and ``scales``, of
    exactly the blocks' sizes."""
    out = np.empty((nb, BY_NAME[name].block_bytes), np.uint8)
    getattr(_kernels, f"{name.lower()}_block")(codes, scales, out)
    return out


def split_unblock_eq(name: str, blocks, codes, scales) -> bool:
    """Whether (nb, block bytes) ggml blocks of type ``name`` unblock to
    exactly the planes ``codes`` and ``scales`` (of exactly their sizes),
    none written."""
    return bool(getattr(_kernels, f"{name.lower()}_unblock_eq")(
        np.ascontiguousarray(blocks), codes, scales))


def split_unblock_into(name: str, blocks, codes: np.ndarray, scales: np.ndarray) -> None:
    """The canonical planes of (nb, block bytes) ggml blocks of type ``name``
    written into ``codes`` and ``scales``."""
    getattr(_kernels, f"{name.lower()}_unblock")(np.ascontiguousarray(blocks), codes, scales)


def ggml_kind(name: str) -> int | None:
    """The kernel id of ggml type ``name``, or None when there is none."""
    return GGML_KINDS.get(name)


def ggml_kind_mismatches(kernels) -> list[str]:
    """For every entry of :data:`GGML_KINDS`, whether ``kernels.decode_ggml``
    with that id takes whole blocks of exactly the type's size (grit.ggml_types):
    one message per disagreement, plus one when the id after the last is
    not refused; [] when all agree."""
    if not hasattr(kernels, "decode_ggml"):
        return []
    out: list[str] = []

    def takes(kind: int, nbytes: int, elems: int) -> bool:
        try:
            kernels.decode_ggml(kind, bytes(nbytes), np.empty(elems, np.float32), 1)
        except ValueError:
            return False
        return True

    for name, kind in GGML_KINDS.items():
        t = BY_NAME[name]
        b, e = t.block_bytes, t.block_elems
        if not takes(kind, b, e) or takes(kind, b - 1, e) or (e > 1 and takes(kind, b, e // 2)):
            out.append(f"decode_ggml kind {kind}: its blocks are not {name}'s "
                       f"({b} bytes, {e} elements)")
    if takes(len(GGML_KINDS), 1 << 12, 256):
        out.append(f"decode_ggml kind {len(GGML_KINDS)}: a kernel GGML_KINDS does not name")
    return out


_HUGE_OUT = 4 << 20          # outputs from this size on start on a 2 MiB boundary
_HUGE_ALIGN = 2 << 20


def _new_f32(numel: int) -> np.ndarray:
    """np.empty(numel, float32); from 4 MiB on, a view that starts on a 2 MiB
    boundary of a slightly larger array (the slack is address space, never
    touched), so that the kernel backs all of it with transparent huge pages
    (numpy asks for them) and not only its aligned middle, as grit_new_plane
    does for relayout planes (common.c): a fresh output's page faults are
    much of a decode's time."""
    nbytes = 4 * numel
    if nbytes < _HUGE_OUT:
        return np.empty(numel, dtype=np.float32)
    buf = np.empty(nbytes + 2 * _HUGE_ALIGN, dtype=np.uint8)
    off = -buf.ctypes.data % _HUGE_ALIGN
    return buf[off:off + nbytes].view(np.float32)


def decode_ggml(kind: int, data, numel: int) -> np.ndarray:
    """decode() of whole ggml blocks read in place: a new C-contiguous
    float32 array of numel values in lin order.  ``data`` must hold at least
    numel / block_elems blocks, and numel must be whole blocks (ValueError)."""
    out = _new_f32(numel)
    _kernels.decode_ggml(kind, data, out, threads(numel))
    return out


def relayout_kernels():
    """The extension when it is built, has the relayout entry points, and
    NATIVE is set; else None."""
    k = _kernels
    if k is None or not NATIVE or not hasattr(k, "transpose"):
        return None
    return k


def table_mismatches(kernels) -> list[str]:
    """Every entry of ``kernels.tables()`` (``kernels``: the grit._kernels
    module) that differs from the same table derived from grit.formats and
    grit._sparse, one message per entry ("key[index]: got ..., expected
    ..."), plus missing and unknown keys; [] when all agree.  Floats are
    compared by their binary32 bits (NaN must be 0x7FC00000, -0.0 is not
    +0.0).  About 2 ms once the format caches are warm."""
    get = getattr(kernels, "tables", None)
    if get is None:
        return ["tables: the extension has no tables()"]
    got = get()
    out: list[str] = []

    def bits(v) -> int:
        return struct.unpack("<I", struct.pack("<f", v))[0]

    def floats(key, want):
        """want: the binary32 bit patterns of the entries"""
        g = got[key]
        if len(g) != len(want):
            out.append(f"{key}: {len(g)} entries, expected {len(want)}")
            return
        for i, (v, w) in enumerate(zip(g, want)):
            if bits(v) != w:
                out.append(f"{key}[{i}]: got {v!r} (0x{bits(v):08x}), expected "
                           f"{struct.unpack('<f', struct.pack('<I', w))[0]!r} (0x{w:08x})")

    def real(key, want: float):
        v = got[key]
        if not isinstance(v, float) or bits(v) != f32_bits(want):
            out.append(f"{key}: got {v!r}, expected {want!r}")

    def ints(key, want, g=None, where=""):
        """want: an int or nested tuples / lists of ints"""
        g = got[key] if g is None else g
        want = tuple(want) if isinstance(want, list) else want
        if isinstance(want, tuple) and g == want:
            return
        if not isinstance(want, (tuple, list)):
            if g != want or isinstance(g, (tuple, list)):
                out.append(f"{key}{where}: got {g!r}, expected {want!r}")
            return
        if not isinstance(g, tuple) or len(g) != len(want):
            out.append(f"{key}{where}: got {g!r:.60}, expected {len(want)} entries")
            return
        for i, (v, w) in enumerate(zip(g, want)):
            ints(key, w, v, f"{where}[{i}]")

    checks = {}

    # -- small-format values and facts
    checks["canonical_nan"] = lambda k: ints(k, CANONICAL_NAN)
    checks["e2m1_values"] = lambda k: floats(k, [f32_bits(fmt_decode(E2M1.word, c))
                                                 for c in range(16)])
    lad2 = ladder(E2M1.word)
    checks["e2m1_thresholds"] = lambda k: floats(
        k, [f32_bits((lad2[i][0] + lad2[i + 1][0]) / 2) for i in range(len(lad2) - 1)])
    checks["e2m1_max"] = lambda k: real(k, E2M1.max_finite)
    checks["e2m1_emax"] = lambda k: ints(k, E2M1.emax)
    checks["e4m3_values"] = lambda k: floats(k, [f32_bits(fmt_decode(E4M3.word, c))
                                                 for c in range(256)])
    checks["e4m3_max"] = lambda k: real(k, E4M3.max_finite)
    lad4 = ladder(E4M3.word)
    checks["e4m3_max_code"] = lambda k: ints(k, lad4[-1][1])
    checks["e4m3_nan_code"] = lambda k: ints(k, E4M3.nan_code)
    checks["e4m3_one_code"] = lambda k: ints(k, fmt_encode(E4M3.word, 1.0))

    # E4M3 scale encoder: entry k - 1 is the least binary32 v >= 0 that it
    # takes to code k or above.  rtz: magnitude k itself.  rne (§2.5): the
    # midpoint of magnitudes k - 1 and k when the tie goes up, to an even
    # code k, else the binary32 just above the midpoint.
    def e4m3_thresholds(k, rounding):
        if [c for _, c in lad4] != list(range(len(lad4))):
            out.append(f"{k}: the E4M3 ladder is not in code order")
            return
        want = []
        for code in range(1, len(lad4)):
            if rounding == "rtz":
                want.append(f32_bits(lad4[code][0]))
            else:
                mid = f32_bits((lad4[code - 1][0] + lad4[code][0]) / 2)   # exact
                want.append(mid if code % 2 == 0 else mid + 1)
        floats(k, want)
    checks["e4m3_rne_thresholds"] = lambda k: e4m3_thresholds(k, "rne")
    checks["e4m3_rtz_thresholds"] = lambda k: e4m3_thresholds(k, "rtz")

    checks["e8m0_values"] = lambda k: floats(k, [f32_bits(fmt_decode(E8M0.word, c))
                                                 for c in range(256)])
    checks["e8m0_bias"] = lambda k: ints(k, E8M0.bias)
    checks["e8m0_nan_code"] = lambda k: ints(k, E8M0.nan_code)

    # binary16 (the codes only: its ladder has 2^15 rungs, too many to build
    # here): the largest finite code is followed by +inf; 1.0 decodes to 1.0
    def f16_max(k):
        c = got[k]
        if not (isinstance(c, int) and 0 <= c < 0x7FFF
                and math.isfinite(fmt_decode(BINARY16.word, c))
                and math.isinf(fmt_decode(BINARY16.word, c + 1))):
            out.append(f"{k}: got {c!r}, not the largest finite binary16 code")
    checks["f16_max_code"] = f16_max
    checks["f16_nan_code"] = lambda k: ints(k, BINARY16.nan_code)

    def f16_one(k):
        c = got[k]
        if not (isinstance(c, int) and 0 <= c < 0x8000 and fmt_decode(BINARY16.word, c) == 1.0):
            out.append(f"{k}: got {c!r}, not the binary16 code of 1.0")
    checks["f16_one_code"] = f16_one
    checks["u4_max"] = lambda k: ints(k, int(U4.max_finite))
    checks["u6_max"] = lambda k: ints(k, int(U6.max_finite))
    checks["s8_max"] = lambda k: ints(k, int(S8.max_finite))

    # -- I8S24 metadata (§3.8, §10.4): metadata byte b names quads 2b and
    # 2b + 1 (of bytes 0..15, quad 2b is the nibble b alone); a quad keeps
    # the set of positions its two indices name, and the stored values go to
    # its kept positions in ascending order: rank[q, j] is the value position
    # j of quad q gets, counted from 0 within the quad.
    idx = meta_indices(np.arange(256, dtype=np.uint8).tobytes(), 2, 2, 512)
    kept = (idx[:, :, None] == np.arange(4)).any(axis=1)         # (512 quads, 4 positions)
    rank = np.cumsum(kept, axis=1) - kept
    nib = slice(0, 32, 2)
    checks["i8s24_kept_per_nibble"] = lambda k: ints(k, kept[nib].sum(axis=1).tolist())
    checks["i8s24_slot_of"] = lambda k: ints(
        k, [tuple(r) for r in np.where(kept, rank + 1, 0)[nib].tolist()])
    checks["i8s24_kept_per_meta_byte"] = lambda k: ints(
        k, kept.reshape(256, 8).sum(axis=1).tolist())
    pair = [0] * 16           # masks of one, three or four positions: never used, 0
    for n in range(16):
        i0, i1 = idx[2 * n].tolist()
        if i0 < i1:           # two positions, named in ascending order
            pair[(1 << i0) | (1 << i1)] = n
    checks["i8s24_pair_of_mask"] = lambda k: ints(k, pair)

    # AVX2 decode: for metadata byte b as byte kk of a group whose eight
    # quads keep two positions each, the PSHUFB control that puts stored
    # value 4kk + 2h + rank at each kept position of quad h (h = 0, 1) --
    # control byte 4h + j for position j -- and 0x80 (a zero) elsewhere
    def shuffles(k):
        lane = np.where(kept, rank + 2 * (np.arange(512) % 2)[:, None], -1).reshape(256, 8)
        shift = np.arange(0, 64, 8, dtype=np.uint64)
        want = []
        for kk in range(4):
            v = np.where(lane < 0, 0x80, lane + 4 * kk).astype(np.uint64)
            want.append(tuple((v << shift).sum(axis=1, dtype=np.uint64).tolist()))
        ints(k, want)
    checks["i8s24_shuffle_of_meta"] = shuffles

    avx2_only = ("i8s24_shuffle_of_meta",)       # built only with the AVX2 loops
    for key in checks:
        if key not in got and key not in avx2_only:
            out.append(f"{key}: missing from tables()")
    for key in got:
        if key not in checks:
            out.append(f"{key}: no check derives this table")
            continue
        try:
            checks[key](key)
        except Exception as exc:   # a value of the wrong shape or type
            out.append(f"{key}: cannot be compared ({exc!r})")
    return out




def _check_build() -> None:
    """A build whose tables disagree with grit.formats is not used: the
    numpy paths (the same bytes, by the spec's own tables) serve instead."""
    global _kernels, NATIVE, _ggml_ok
    if _kernels is None or not NATIVE:
        return
    bad = table_mismatches(_kernels)
    if bad:
        warnings.warn("grit: the native kernels' constant tables disagree with the format "
                      f"tables ({len(bad)} entries, first: {bad[0]}); the numpy paths are "
                      "used instead", RuntimeWarning, stacklevel=2)
        _kernels, NATIVE = None, False
        return
    bad = ggml_kind_mismatches(_kernels)
    if bad:
        warnings.warn("grit: the native ggml kernels' ids disagree with grit.native.GGML_KINDS "
                      f"({len(bad)} entries, first: {bad[0]}); ggml blocks are decoded by the "
                      "general path instead", RuntimeWarning, stacklevel=2)
        _ggml_ok = False


_check_build()
