"""GRIT arrays and torch tensors: planes without copies, decode into a torch
tensor, encode from one.

``import grit.interop.torch as gt`` (it imports torch; ``import grit`` never
does).  Importing it also registers torch tensors with ``grit.encode``, so
``grit.encode(t, grade)`` accepts a torch tensor of any real dtype —
bfloat16 and float16 included, which are exact in binary32, so encoding one
is encoding its float32 cast.

* :func:`planes` — a GritArray's planes as 1-D uint8 tensors over the same
  memory (no copy); :func:`from_planes` — a GritArray over uint8 tensors'
  memory (no copy).
* :func:`decode` — the §8 binary32 values as a torch tensor: ``grit.decode``
  (the native kernels) writes a numpy array that the tensor then wraps
  (``torch.from_numpy``, no copy); for ``dtype=torch.bfloat16`` or
  ``torch.float16`` that binary32 result is rounded once, to nearest even,
  by torch's own cast (``Tensor.to``), every NaN then canonical (bfloat16
  0x7FC0, float16 0x7E00).
* :func:`values` — the reader ``grit.encode`` uses for tensors.

A GritArray is not an array of values: ``torch.as_tensor(a)`` and
``np.asarray(a)`` raise TypeError naming ``grit.decode``.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np
import torch

from ..array import GritArray
from ..array import decode as _grit_decode
from ..dtypes import bf16_widened
from ..codec.encode import encode, register_values_reader
from ..errors import GritUsageError

__all__ = ["planes", "from_planes", "decode", "encode", "values", "narrow", "DECODE_DTYPES"]

#: the dtypes :func:`decode` gives: binary32, or binary32 rounded once (RNE)
DECODE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _u8_view(p) -> torch.Tensor:
    """A uint8 tensor over the bytes of one plane, sharing its memory."""
    mv = memoryview(p)
    if mv.nbytes == 0:
        return torch.empty(0, dtype=torch.uint8)
    with warnings.catch_warnings():
        # a plane is read-only (bytes, a read-only map of a file): the tensor
        # shares it and must not be written (documented in docs/torch.md)
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        return torch.frombuffer(mv, dtype=torch.uint8)


def planes(a: GritArray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(data, scale0, scale1, aux) of ``a`` as 1-D CPU uint8 tensors sharing
    the planes' memory (an absent plane: an empty tensor).  The tensors are
    views of read-only memory: do not write to them (clone first)."""
    if not isinstance(a, GritArray):
        raise GritUsageError(f"planes() takes a GritArray, got {type(a).__name__}")
    d, s0, s1, aux = (_u8_view(p) for p in a.planes)
    return d, s0, s1, aux


def _plane_of(i: int, t) -> np.ndarray | bytes:
    if t is None:
        return b""
    if not isinstance(t, torch.Tensor):
        return t                              # bytes-like: GritArray checks it
    if t.device.type != "cpu":
        raise GritUsageError(f"plane {i}: a GritArray reads CPU memory; the tensor is on "
                             f"{t.device} (grit.interop.triton decodes planes on a GPU)")
    if t.dtype != torch.uint8:
        raise GritUsageError(f"plane {i}: expected a uint8 tensor, got {t.dtype}")
    if not t.is_contiguous():
        raise GritUsageError(f"plane {i}: the tensor is not contiguous")
    return t.detach().reshape(-1).numpy()      # shares the tensor's memory


def from_planes(desc, shape: Sequence[int], tensors: Sequence) -> GritArray:
    """A GritArray (checked at level 1) over four contiguous CPU uint8
    tensors' memory (``None`` or an empty tensor for an absent plane): no
    byte is copied.  The tensors must not change while the array is used."""
    items = list(tensors)
    if len(items) != 4:
        raise GritUsageError(f"from_planes() takes four planes (data, scale0, scale1, aux), "
                             f"got {len(items)}")
    return GritArray(desc, shape, [_plane_of(i, t) for i, t in enumerate(items)])


def decode(a: GritArray, dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """§8 decode() of ``a`` as a torch tensor of ``a.shape``.

    The binary32 values come from ``grit.decode`` (the native kernels where
    built) into a new numpy array, which the returned float32 tensor wraps
    without a copy.  ``dtype=torch.bfloat16`` / ``torch.float16`` rounds
    that binary32 result once, to nearest even (torch's cast), and makes
    every NaN the dtype's canonical one (0x7FC0, 0x7E00).  ``device``: the
    CPU result is then moved there (for decode on a GPU from planes already
    there, see :mod:`grit.interop.triton`)."""
    if dtype not in DECODE_DTYPES:
        raise GritUsageError(f"decode(): dtype must be one of {DECODE_DTYPES}, got {dtype!r}")
    t = torch.from_numpy(_grit_decode(a))
    if dtype != torch.float32:
        t = narrow(t, dtype)
    if device is not None:
        t = t.to(device)
    return t


#: the canonical NaN of each narrow dtype: binary32's 0x7FC00000 cut to its top
#: 16 bits for bfloat16, the binary16 quiet NaN 0x7E00 for float16 (§1.2)
_NARROW_NAN = {torch.bfloat16: 0x7FC0, torch.float16: 0x7E00}


def narrow(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The one RNE rounding of binary32 ``t`` to ``dtype`` (torch's cast),
    with every NaN made that dtype's canonical NaN (torch's vectorised cast
    gives 0xFFFF for a bfloat16 NaN)."""
    out = t.to(dtype)
    nan = torch.isnan(out)                  # the narrow result: half the bytes to read
    if bool(nan.any()):
        out.view(torch.int16).masked_fill_(nan, _NARROW_NAN[dtype])
    return out


def values(t: torch.Tensor) -> np.ndarray:
    """The values of tensor ``t`` as a numpy array, exactly: float32,
    float64 and integer tensors on the CPU are shared (no copy); bfloat16 is
    widened to float32 by moving its 16 bits to the top of a binary32
    (exact: bfloat16 is binary32 with the low 16 bits cut); float16 is
    read as numpy float16; the 8-bit float types are widened by torch's
    cast (exact).  A tensor on another device is copied to the CPU first."""
    t = t.detach()
    if t.is_complex() or t.dtype == torch.bool:
        raise GritUsageError(f"encode() needs real numbers, got a {t.dtype} tensor")
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        bits = t.contiguous().view(torch.int16).numpy().view(np.uint16)
        return bf16_widened(bits)
    if t.is_floating_point() and t.dtype not in (torch.float32, torch.float64, torch.float16):
        t = t.to(torch.float32)               # the float8 types: exact in binary32
    return t.numpy()


register_values_reader("torch.Tensor", values)

# ``encode`` is grit.encode (re-exported so that ``gt.encode(t, grade)`` reads)
encode = encode
