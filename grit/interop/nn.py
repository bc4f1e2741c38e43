"""GritLinear: a weight-only quantised linear layer over a GRIT array's planes.

The module holds the weight's four planes as uint8 buffers (``grit_data``,
``grit_scale0``, ``grit_scale1``, ``grit_aux``; an absent plane is an empty
buffer, left out of the state dict) and its descriptor; each forward decodes the weight — on the CPU
with ``grit.decode`` (the native kernels), on a CUDA device with the
Triton kernels (:mod:`grit.interop.triton`) — casts it once to the
activation dtype (RNE) and runs ``torch.nn.functional.linear`` in that
dtype.  ``cache=True`` keeps the decoded weight per (dtype, device) until
the buffers change (``load_state_dict``, ``.to()``).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .. import descriptor as D
from ..array import GritArray
from ..check import plane_sizes
from ..errors import Detail, GritUsageError, error_for
from ..facts import PLANE_NAMES
from ..grade import lookup_grade
from .torch import DECODE_DTYPES, decode, from_planes, narrow, planes

__all__ = ["GritLinear", "BUFFERS"]

#: the buffer holding each plane, in plane order
BUFFERS = tuple(f"grit_{p}" for p in PLANE_NAMES)


class GritLinear(nn.Module):
    """``y = x Wᵀ + b`` with W the decode of a GRIT array of shape
    ``(out_features, in_features)``.

    ``GritLinear(in_features, out_features, descriptor)`` makes zeroed
    buffers of the sizes the descriptor and shape require (§7.3), to be
    filled by ``load_state_dict`` (or by transformers' loader); use
    :meth:`from_array` to build one from a GritArray."""

    def __init__(self, in_features: int, out_features: int, descriptor, bias: bool = True,
                 *, cache: bool = False, device=None, dtype=None):
        super().__init__()
        d = D.Descriptor.coerce(descriptor)
        shape = (int(out_features), int(in_features))
        ps = plane_sizes(d, shape)
        if isinstance(ps, Detail):
            raise error_for(ps)
        self.in_features, self.out_features = shape[1], shape[0]
        self.descriptor = d
        self.cache = bool(cache)
        self._cached: dict = {}
        for name, n in zip(BUFFERS, ps.sizes):
            # an absent plane (0 bytes) is no entry of the state dict: a
            # checkpoint has no tensor for it
            self.register_buffer(name, torch.zeros(n, dtype=torch.uint8, device=device),
                                 persistent=n > 0)
        if bias:
            self.bias = nn.Parameter(torch.zeros(shape[0], device=device, dtype=dtype),
                                     requires_grad=False)
        else:
            self.register_parameter("bias", None)
        self._register_load_state_dict_pre_hook(self._invalidate)

    @classmethod
    def from_array(cls, array: GritArray, bias: torch.Tensor | None = None, *,
                   cache: bool = False) -> "GritLinear":
        """A GritLinear whose weight is ``array`` (shape (out, in)); the
        planes are copied into the module's own buffers (packed bytes)."""
        if not isinstance(array, GritArray) or array.ndim != 2:
            raise GritUsageError("from_array() takes a 2-D GritArray (out_features, "
                                 "in_features)")
        out_f, in_f = array.shape
        m = cls(in_f, out_f, array.descriptor, bias=bias is not None, cache=cache,
                dtype=None if bias is None else bias.dtype)
        with torch.no_grad():
            for name, p in zip(BUFFERS, planes(array)):
                getattr(m, name).copy_(p)
            if bias is not None:
                m.bias.copy_(bias)
        return m

    @property
    def weight_shape(self) -> tuple[int, int]:
        return (self.out_features, self.in_features)

    def array(self) -> GritArray:
        """The weight as a GritArray over the (CPU) buffers' memory."""
        return from_planes(self.descriptor, self.weight_shape,
                           [getattr(self, n) for n in BUFFERS])

    def decoded_weight(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The decoded weight: binary32 (§8), rounded once to ``dtype``."""
        if dtype not in DECODE_DTYPES:
            raise GritUsageError(f"GritLinear: no decode into {dtype}")
        dev = self.grit_data.device
        if dev.type == "cpu":
            return decode(self.array(), dtype)
        from .triton import decode_planes        # the GPU path needs triton
        w = decode_planes(self.descriptor, self.weight_shape,
                          [getattr(self, n) for n in BUFFERS])
        return w if dtype == torch.float32 else narrow(w, dtype)

    def _weight(self, dtype: torch.dtype) -> torch.Tensor:
        if not self.cache:
            return self.decoded_weight(dtype)
        key = (dtype, self.grit_data.device)
        w = self._cached.get(key)
        if w is None:
            w = self._cached[key] = self.decoded_weight(dtype)
        return w

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self._weight(x.dtype)
        b = self.bias
        if b is not None and b.dtype != x.dtype:
            b = b.to(x.dtype)
        return F.linear(x, w, b)

    def _invalidate(self, *args, **kwargs) -> None:
        self._cached.clear()

    def _apply(self, fn, *args, **kwargs):
        self._cached.clear()
        return super()._apply(fn, *args, **kwargs)

    def extra_repr(self) -> str:
        g = lookup_grade(self.descriptor.grade_id)
        name = (g.name or g.canonical) if g is not None else "unknown grade"
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, grade={name}, cache={self.cache}")
