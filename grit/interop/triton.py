"""Decode on a GPU: Triton kernels, bit-exact to ``grit.decode``.

``import grit.interop.triton as gtr`` (it imports torch and triton).  Two
families of kernels, each element computed on its own (a gather: element
i reads the bytes its value depends on):

* the registered frames, from the canonical planes (:func:`decode_planes`,
  :func:`decode`): MXFP4 / MXFP4_RNE, NVF4 / NVF4_RTZ and NVFP4 with a
  binary32 level-1 scale over k1 groups (a GGUF NVFP4 tensor with its
  companion scale, once relayouted), Q4KS and I8S24 (the stored cursor is
  an exclusive prefix sum of the survivors per quad, computed by torch on
  the device);
* the ggml block structs read in place (:func:`decode_blocks`, and
  :func:`decode` of an array over them): the zero-copy types Q8_0, MXFP4,
  NVFP4 (with an optional companion scale), Q4_K, and the converted types
  Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q5_K, Q6_K, Q8_K, TQ2_0 — the formulas of
  grit/_native/ggml.c, one binary32 operation per named step of §8.1.

Bit-exactness: every product and difference is one binary32 operation with
round-to-nearest-even; the kernels are launched with
``enable_fp_fusion=False`` so that no ``S · q − Z`` is contracted into an
FMA (§1.1); scale values are built from their bits (E8M0, E4M3, E2M1) or
by exact conversions (binary16 → binary32, integer → binary32); every NaN
leaves as 0x7FC00000; signed zero is kept.  Under ``TRITON_INTERPRET=1``
the same kernels run on the CPU over numpy (how the tests check them
against ``grit.decode`` where no GPU is present).
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import torch
import triton
import triton.language as tl

from .. import descriptor as D
from ..array import GritArray, canonical
from ..check import plane_sizes
from ..errors import Detail, GritUsageError, error_for
from ..facts import numel_of
from ..ggml import CONVERTED, ZERO_COPY, Blocks
from ..codec.layout import require_canonical_placement
from ..grade import REGISTERED_GRADES, lookup_grade
from ..native import frame_key
from .torch import _u8_view
from .torch import planes as _torch_planes

__all__ = ["decode", "decode_planes", "decode_blocks", "FRAMES", "BLOCK_TYPES",
           "supports", "INTERPRETED"]

#: whether the kernels run under Triton's interpreter (CPU, numpy)
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

_NAN = tl.constexpr(0x7FC00000)

# kernel kinds: the registered frames (canonical planes)
_MX, _NV, _Q4KS, _I8S24 = 0, 1, 2, 3
# the ggml block types, in grit.native's order (zero-copy, then converted)
BLOCK_TYPES: tuple[str, ...] = ("Q8_0", "MXFP4", "NVFP4", "Q4_K") + tuple(CONVERTED)
_BLOCK_KIND = {name: i for i, name in enumerate(BLOCK_TYPES)}


def _block_size(name: str) -> tuple[int, int]:
    t = ZERO_COPY.get(name) or CONVERTED[name]
    return t.block_bytes, t.block_elems


# ---------------------------------------------------------------------------
# element helpers: exact values from bits


@triton.jit
def _canon(x):
    nan = tl.full(x.shape, _NAN, tl.int32).to(tl.float32, bitcast=True)
    return tl.where(x != x, nan, x)


@triton.jit
def _u8(ptr, off, mask):
    return tl.load(ptr + off, mask=mask, other=0).to(tl.int32)


@triton.jit
def _f16(lo, hi):
    """binary16 bytes (little-endian, as int32 0..255) -> binary32, exact"""
    return ((hi << 8) | lo).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def _f32le(b0, b1, b2, b3):
    return (b0 | (b1 << 8) | (b2 << 16) | (b3 << 24)).to(tl.float32, bitcast=True)


@triton.jit
def _e2m1(code):
    """E2M1 code (int32 0..15) -> binary32 from its bits; code 8 is -0.0"""
    mag = code & 7
    e = mag >> 1
    m = mag & 1
    bits = tl.where(e == 0, m * 0x3F000000, ((e + 126) << 23) | (m << 22))
    bits = bits | ((code >> 3) << 31)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _e8m0(code):
    """E8M0 code -> 2^(code - 127); code 0 is the subnormal 2^-127; 0xFF is NaN"""
    bits = tl.where(code == 0, 0x00400000, code << 23)
    bits = tl.where(code == 255, _NAN, bits)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _e4m3(code):
    """E4M3 (OCP e4m3fn) code -> binary32; 0x7F and 0xFF are NaN"""
    e = (code >> 3) & 15
    m = code & 7
    sub = m.to(tl.float32) * 0.001953125            # m · 2^-9, exact
    bits = tl.where(e == 0, sub.to(tl.int32, bitcast=True), ((e + 120) << 23) | (m << 20))
    bits = bits | ((code >> 7) << 31)
    bits = tl.where((code & 127) == 127, _NAN, bits)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _k4_scale_min(sc12, t, mask):
    """ggml's get_scale_min_k4 for sub-block t (0..7) of the 12 packed bytes"""
    lo = t < 4
    qa = _u8(sc12, t, mask)
    qb = _u8(sc12, t + 4, mask)
    qc = _u8(sc12, tl.where(lo, t, t - 4), mask)
    sc = tl.where(lo, qa & 63, (qb & 15) | ((qc >> 6) << 4))
    m = tl.where(lo, qb & 63, (qb >> 4) | ((qa >> 6) << 4))
    return sc, m


@triton.jit
def _runs_of_128(i):
    """Element i of a 256-element block as (h, s, l): 128-element half h,
    32-element run s in it, position l in the run (the crumb layouts of
    Q2_K, Q6_K and TQ2_0: element 128h + 32s + l)"""
    j = (i % 256).to(tl.int32)
    return j // 128, (j % 128) // 32, j % 32


@triton.jit
def _l1(S1, s0, Z1, zp, code):
    """the zps=l1 form (§8.4): f32(f32(f32(S1 · s0) · q) − f32(Z1 · zp))"""
    S = S1 * s0.to(tl.float32)
    Z = Z1 * zp.to(tl.float32)
    return S * code.to(tl.float32) - Z


# ---------------------------------------------------------------------------
# the registered frames, from canonical planes (lin order)


@triton.jit
def _frame_kernel(data, s0, s1, aux, base, out, numel, KIND: tl.constexpr, K1: tl.constexpr,
                  BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < numel
    if KIND == 3:                                  # I8S24: 2:4 sparse s8, binary16 per 32
        q = i // 4
        j = (i % 4).to(tl.int32)
        nib = (_u8(aux, q // 2, mask) >> (4 * (q % 2)).to(tl.int32)) & 15
        i0 = nib & 3
        i1 = nib >> 2
        kept = (j == i0) | (j == i1)
        rank = (i0 < j).to(tl.int32) + ((i1 < j) & (i1 != i0)).to(tl.int32)
        at = tl.load(base + q, mask=mask, other=0) + rank
        g = i // 32
        S = _f16(_u8(s0, 2 * g, mask), _u8(s0, 2 * g + 1, mask))
        v = tl.load(data + at, mask=mask & kept, other=0).to(tl.int8, bitcast=True)
        x = _canon(S * v.to(tl.float32))
        x = tl.where(kept, x, 0.0)                 # the sparsity law wins
    else:
        code = (_u8(data, i // 2, mask) >> (4 * (i % 2)).to(tl.int32)) & 15
        if KIND == 0:                              # MXFP4: E8M0 per 32
            S = _e8m0(_u8(s0, i // 32, mask))
            x = S * _e2m1(code)
        elif KIND == 1:                            # NVF4: binary32 over k1 groups, E4M3 per 16
            g0 = i // 16
            if K1 == 0:
                g1 = g0 * 0
            else:
                g1 = g0 // K1
            S1 = _f32le(_u8(s1, 4 * g1, mask), _u8(s1, 4 * g1 + 1, mask),
                        _u8(s1, 4 * g1 + 2, mask), _u8(s1, 4 * g1 + 3, mask))
            S = S1 * _e4m3(_u8(s0, g0, mask))
            x = S * _e2m1(code)
        else:                                      # Q4KS: u6 sc, m per 32; binary16 d, dmin per 256
            g0 = i // 32
            g1 = g0 // 8
            d = _f16(_u8(s1, 4 * g1, mask), _u8(s1, 4 * g1 + 1, mask))
            dmin = _f16(_u8(s1, 4 * g1 + 2, mask), _u8(s1, 4 * g1 + 3, mask))
            x = _l1(d, _u8(s0, g0, mask) & 63, dmin, _u8(aux, g0, mask) & 63, code)
        x = _canon(x)
    tl.store(out + i, x, mask=mask)


# ---------------------------------------------------------------------------
# the ggml block structs, read in place


@triton.jit
def _blocks_kernel(src, s1, out, numel, KIND: tl.constexpr, BB: tl.constexpr,
                   K1: tl.constexpr, HAS_S1: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < numel
    if KIND == 0:                                  # Q8_0: 34 B / 32
        p = src + (i // 32) * 34
        j = i % 32
        d = _f16(_u8(p, 0, mask), _u8(p, 1, mask))
        q = tl.load(p + 2 + j, mask=mask, other=0).to(tl.int8, bitcast=True)
        x = d * q.to(tl.float32)
    elif KIND == 1:                                # MXFP4: 17 B / 32, halves
        p = src + (i // 32) * 17
        j = i % 32
        code = (_u8(p, 1 + j % 16, mask) >> (4 * (j // 16)).to(tl.int32)) & 15
        x = _e8m0(_u8(p, 0, mask)) * _e2m1(code)
    elif KIND == 2:                                # NVFP4: 36 B / 64, halves per 16
        p = src + (i // 64) * 36
        j = i % 64
        s = j // 16
        jj = j % 16
        code = (_u8(p, 4 + 8 * s + jj % 8, mask) >> (4 * (jj // 8)).to(tl.int32)) & 15
        S = _e4m3(_u8(p, s, mask))
        if HAS_S1:                                 # the companion: outermost first
            g0 = i // 16
            if K1 == 0:
                g1 = g0 * 0
            else:
                g1 = g0 // K1
            S = tl.load(s1 + g1, mask=mask, other=0.0) * S
        x = S * _e2m1(code)
    elif KIND == 3:                                # Q4_K: 144 B / 256
        p = src + (i // 256) * 144
        j = i % 256
        t = (j // 32).to(tl.int32)
        lidx = j % 32
        d = _f16(_u8(p, 0, mask), _u8(p, 1, mask))
        dmin = _f16(_u8(p, 2, mask), _u8(p, 3, mask))
        sc, m = _k4_scale_min(p + 4, t, mask)
        code = (_u8(p, 16 + 32 * (t >> 1) + lidx, mask) >> (4 * (t & 1))) & 15
        x = _l1(d, sc, dmin, m, code)
    elif KIND <= 7:                                # Q4_0, Q4_1, Q5_0, Q5_1: 32 per block
        QS: tl.constexpr = 2 * (KIND - 3)          # the nibbles: after d[, m][, qh]
        p = src + (i // 32) * BB
        j = (i % 32).to(tl.int32)
        code = (_u8(p, QS + j % 16, mask) >> (4 * (j // 16))) & 15
        if KIND >= 6:                              # Q5: bit 4 of element j is bit j of qh
            code = code | (((_u8(p, QS - 4 + j // 8, mask) >> (j % 8)) & 1) << 4)
        d = _f16(_u8(p, 0, mask), _u8(p, 1, mask))
        if KIND == 4:
            x = d * (code.to(tl.float32) - 8.0)
        elif KIND == 6:
            x = d * (code.to(tl.float32) - 16.0)
        else:                                      # l1: S = d · 1, Z = m · −1
            S = d * 1.0
            Z = _f16(_u8(p, 2, mask), _u8(p, 3, mask)) * -1.0
            x = S * code.to(tl.float32) - Z
    elif KIND == 8:                                # Q2_K: 84 B / 256
        p = src + (i // 256) * 84
        h, s, lidx = _runs_of_128(i)
        sc = _u8(p, 8 * h + 2 * s + lidx // 16, mask)
        code = (_u8(p, 16 + 32 * h + lidx, mask) >> (2 * s)) & 3
        d = _f16(_u8(p, 80, mask), _u8(p, 81, mask))
        dmin = _f16(_u8(p, 82, mask), _u8(p, 83, mask))
        x = _l1(d, sc & 15, dmin, sc >> 4, code)
    elif KIND == 9:                                # Q5_K: 176 B / 256
        p = src + (i // 256) * 176
        j = (i % 256).to(tl.int32)
        t = j // 32
        lidx = j % 32
        d = _f16(_u8(p, 0, mask), _u8(p, 1, mask))
        dmin = _f16(_u8(p, 2, mask), _u8(p, 3, mask))
        sc, m = _k4_scale_min(p + 4, t, mask)
        lo4 = (_u8(p, 48 + 32 * (t >> 1) + lidx, mask) >> (4 * (t & 1))) & 15
        code = lo4 | (((_u8(p, 16 + lidx, mask) >> t) & 1) << 4)
        x = _l1(d, sc, dmin, m, code)
    elif KIND == 10:                               # Q6_K: 210 B / 256
        p = src + (i // 256) * 210
        h, t, lidx = _runs_of_128(i)
        g = 8 * h + 2 * t + lidx // 16
        sc = tl.load(p + 192 + g, mask=mask, other=0).to(tl.int8, bitcast=True)
        d = _f16(_u8(p, 208, mask), _u8(p, 209, mask))
        ql = (_u8(p, 64 * h + 32 * (t & 1) + lidx, mask) >> (4 * (t >> 1))) & 15
        qh = (_u8(p, 128 + 32 * h + lidx, mask) >> (2 * t)) & 3
        code = ql | (qh << 4)
        S = d * sc.to(tl.float32)
        x = S * (code.to(tl.float32) - 32.0)
    elif KIND == 11:                               # Q8_K: 292 B / 256, binary32 d
        p = src + (i // 256) * 292
        j = i % 256
        d = _f32le(_u8(p, 0, mask), _u8(p, 1, mask), _u8(p, 2, mask), _u8(p, 3, mask))
        q = tl.load(p + 4 + j, mask=mask, other=0).to(tl.int8, bitcast=True)
        x = d * q.to(tl.float32)
    else:                                          # TQ2_0: 66 B / 256
        p = src + (i // 256) * 66
        h, s, lidx = _runs_of_128(i)
        code = (_u8(p, 32 * h + lidx, mask) >> (2 * s)) & 3
        d = _f16(_u8(p, 64, mask), _u8(p, 65, mask))
        x = d * (code.to(tl.float32) - 1.0)
    tl.store(out + i, _canon(x), mask=mask)


# ---------------------------------------------------------------------------
# dispatch

# registered frame -> kernel kind; NVF4 frames with another k1 (the companion
# scale over k1 level-0 groups) take the NVF4 kernel too (see _frame_kind)
_FRAME_NAMES = {"GRADE_MXFP4": _MX, "GRADE_MXFP4_RNE": _MX, "GRADE_NVF4": _NV,
                "GRADE_NVF4_RTZ": _NV, "GRADE_Q4KS": _Q4KS, "GRADE_I8S24": _I8S24}
#: frame key (grit.native.frame_key, k1 aside) -> kernel kind
FRAMES: dict[tuple, int] = {}
for _name, _kind in _FRAME_NAMES.items():
    _k = frame_key(REGISTERED_GRADES[_name].descriptor())
    FRAMES[_k[:7] + _k[8:]] = _kind
# a zero-copy ggml type's descriptor (group axis 0) -> its block type
_ZERO_COPY_BY_DESC = {z.descriptor().to_bytes(): name for name, z in ZERO_COPY.items()}


def _frame_kind(d: D.Descriptor) -> int | None:
    """The kernel for a descriptor's frame: a registered frame exactly, or
    NVF4's with another k1 (a binary32 level-1 scale over k1 groups)."""
    k = frame_key(d)
    kind = FRAMES.get(k[:7] + k[8:])
    if kind is None or (kind != _NV and k not in _EXACT):
        return None
    return kind


_EXACT = {frame_key(REGISTERED_GRADES[n].descriptor()) for n in _FRAME_NAMES}


def _binary32_out(a_grade) -> bool:
    return a_grade["dt"] == "binary32"


def _grid_block(numel: int) -> int:
    # the interpreter runs each program as numpy operations: few large ones
    return 1 << 20 if INTERPRETED else 1024


def _launch(kernel, numel: int, *args, **const) -> None:
    blk = _grid_block(numel)
    grid = (triton.cdiv(numel, blk),)
    if INTERPRETED:
        # numpy evaluates the kernel: NaN and overflow are values, not warnings
        with np.errstate(all="ignore"):
            kernel[grid](*args, numel, BLOCK=blk, enable_fp_fusion=False, **const)
    else:
        kernel[grid](*args, numel, BLOCK=blk, enable_fp_fusion=False, **const)


def supports(a: GritArray) -> bool:
    """Whether :func:`decode` has a kernel for ``a`` (else it raises)."""
    return _plan(a) is not None


def _plan(a: GritArray):
    d = a.descriptor
    if not _binary32_out(a.grade):
        return None
    src = a.source
    if isinstance(src, Blocks) and src.type_name in _BLOCK_KIND and a.shape \
            and a.group_axis == len(a.shape) - 1 \
            and a.shape[-1] % _block_size(src.type_name)[1] == 0:
        return ("blocks", src.type_name)
    if a.shape and d.group_axis == len(a.shape) - 1:
        name = _ZERO_COPY_BY_DESC.get(d.replace(group_axis=0).to_bytes())
        if name is not None and a.shape[-1] % _block_size(name)[1] == 0:
            return ("zero-copy", name)
    kind = _frame_kind(d)
    if kind is None:
        return None
    return ("frame", kind)


def _to_device(t: torch.Tensor, device) -> torch.Tensor:
    return t if t.device == torch.device(device) else t.to(device)


def decode(a: GritArray, device=None) -> torch.Tensor:
    """§8 decode() of ``a`` on ``device`` (default: the current CUDA
    device; the CPU under the interpreter) as a float32 tensor of
    ``a.shape``: the planes (or the ggml blocks a converted array is built
    from) are copied to the device as they are and decoded there.  An
    array no kernel serves raises GritUsageError (``supports(a)`` says)."""
    if not isinstance(a, GritArray):
        raise GritUsageError(f"decode() takes a GritArray, got {type(a).__name__}")
    plan = _plan(a)
    if plan is None:
        raise GritUsageError(
            f"grit.interop.triton has no kernel for {a.grade.name or a.grade.canonical} with "
            f"this descriptor (kernels: {sorted(_FRAME_NAMES)} in the canonical placement, "
            f"ggml blocks {list(BLOCK_TYPES)}); decode on the CPU with grit.decode")
    dev = device if device is not None else ("cpu" if INTERPRETED else "cuda")
    how, what = plan
    if how == "blocks":
        data = _to_device(_u8_view(a.source.data), dev)
        return decode_blocks(what, data, a.shape)
    if how == "zero-copy":
        data = _to_device(_torch_planes(a)[0], dev)
        return decode_blocks(what, data, a.shape)
    c = canonical(a)
    pl = tuple(_to_device(t, dev) for t in _torch_planes(c))
    return decode_planes(c.descriptor, c.shape, pl)


def decode_planes(desc, shape: Sequence[int], planes: Sequence[torch.Tensor]) -> torch.Tensor:
    """§8 decode() of canonical planes (uint8 tensors on one device) of a
    registered frame: a float32 tensor of ``shape`` on that device.  The
    plane sizes are checked against the descriptor and shape (§7.3)."""
    d = D.Descriptor.coerce(desc)
    shp = tuple(int(x) for x in shape)
    kind = _frame_kind(d)
    g = lookup_grade(d.grade_id)
    if kind is None or g is None or not _binary32_out(g):
        raise GritUsageError("decode_planes(): no kernel for this descriptor (a registered "
                             "frame, its grade known, dt = binary32)")
    require_canonical_placement(d.placement_data, d.placement_scale, d.placement_meta,
                                bool(d.flags & (D.F_SPARSE | D.F_HAS_ZP)), "decode_planes")
    ps = plane_sizes(d, shp)
    if isinstance(ps, Detail):
        raise error_for(ps)
    pl = [p.reshape(-1) for p in planes]
    if len(pl) != 4 or any(p.dtype != torch.uint8 for p in pl):
        raise GritUsageError("decode_planes(): four uint8 tensors (data, scale0, scale1, aux)")
    for role, p, n in zip(("data", "scale0", "scale1", "aux"), pl, ps.sizes):
        if p.numel() != n:
            raise GritUsageError(f"decode_planes(): {role} plane is {p.numel()} bytes; the "
                                 f"descriptor and shape require {n}")
    dev = pl[0].device
    numel = numel_of(shp)
    out = torch.empty(numel, dtype=torch.float32, device=dev)
    if numel:
        data, s0, s1, aux = (p.contiguous() for p in pl)
        base = data                                # unused but for I8S24
        if kind == _I8S24:
            base = _survivor_base(aux, numel // 4)
        dummy = torch.zeros(1, dtype=torch.uint8, device=dev)
        _launch(_frame_kernel, numel, data, s0, s1 if s1.numel() else dummy,
                aux if aux.numel() else dummy, base, out, KIND=kind, K1=d.k1)
    return _from_lin(out, shp, d.group_axis)


def _survivor_base(aux: torch.Tensor, nquads: int) -> torch.Tensor:
    """Per quad, how many values the quads before it store: 2 when its two
    2-bit indices differ, 1 when they name the same position (§3.8: every
    index < 4 names one)."""
    a = aux.to(torch.int32)
    nib = torch.stack((a & 15, a >> 4), dim=1).reshape(-1)[:nquads]
    count = torch.where((nib & 3) == (nib >> 2), 1, 2).to(torch.int64)
    return torch.cumsum(count, 0) - count


def _from_lin(flat: torch.Tensor, shape: tuple[int, ...], axis: int) -> torch.Tensor:
    if not shape:
        return flat.reshape(())
    lin = tuple(s for i, s in enumerate(shape) if i != axis) + (shape[axis],)
    v = flat.reshape(lin)
    if axis != len(shape) - 1:
        v = v.movedim(-1, axis).contiguous()
    return v


def decode_blocks(type_name: str, data: torch.Tensor, shape: Sequence[int],
                  scale1: torch.Tensor | None = None, k1: int = 0) -> torch.Tensor:
    """decode() of whole ggml blocks of ``type_name`` (a uint8 tensor on the
    device, read in place) holding an array of ``shape`` (ggml's ne[0] the
    last axis): a float32 tensor of ``shape``, the bits ``grit.decode`` gives
    for the array grit.io.gguf loads from those blocks.  ``scale1``: an NVFP4
    tensor's companion scale (float32, on the device), one value (``k1=0``)
    or one per k1 level-0 groups of 16."""
    kind = _BLOCK_KIND.get(type_name)
    if kind is None:
        raise GritUsageError(f"decode_blocks(): no kernel for ggml type {type_name!r} "
                             f"(kernels: {list(BLOCK_TYPES)})")
    shp = tuple(int(x) for x in shape)
    bb, be = _block_size(type_name)
    numel = numel_of(shp)
    if not shp or shp[-1] % be:
        raise GritUsageError(f"decode_blocks(): a {type_name} row is whole blocks of {be}; "
                             f"shape {list(shp)}")
    if data.dtype != torch.uint8 or data.numel() < numel // be * bb:
        raise GritUsageError(f"decode_blocks(): need a uint8 tensor of at least "
                             f"{numel // be * bb} bytes")
    if scale1 is not None and type_name != "NVFP4":
        raise GritUsageError("decode_blocks(): a companion scale belongs to NVFP4 only")
    out = torch.empty(numel, dtype=torch.float32, device=data.device)
    if numel:
        s1 = (scale1.reshape(-1).to(torch.float32) if scale1 is not None
              else torch.zeros(1, dtype=torch.float32, device=data.device))
        if scale1 is not None:
            groups = numel // 16
            need = 1 if k1 == 0 else -(-groups // k1)
            if s1.numel() < need:
                raise GritUsageError(f"decode_blocks(): the companion scale has "
                                     f"{s1.numel()} values; {need} needed")
        _launch(_blocks_kernel, numel, data.contiguous().reshape(-1), s1, out, KIND=kind,
                BB=bb, K1=k1, HAS_S1=scale1 is not None)
    return out.reshape(shp)
