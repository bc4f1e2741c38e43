"""GGUF files: ggml block types as GRIT arrays, by relayout.

``read(path)`` walks the file once (``grit.io.gguf_file``: one read-only
map, every count and length bounds-checked) and returns, with the KV entries
and every problem found, one record per readable tensor; ``load(path)``
raises the first problem and returns the records:

* a :class:`~grit.array.GritArray` for every ggml block type GRIT v1 can
  express.  Q8_0, Q4_K, MXFP4 and NVFP4 blocks *are* a GRIT placement — the
  array's data plane is the file's bytes, zero-copy, placed BLOCK_AOS or
  Interleave(Perm(π), n) (plus PACK_K4_12B for Q4_K's scales), and
  ``grit.decode`` relayouts them.  The other block types split an element's
  bits across fields (Q5_*, Q6_K), keep an offset or a unit scale implicit in
  code (Q4_0, Q4_1, Q5_*, Q6_K, TQ2_0) or pack two planes into one byte
  (Q2_K); they are moved into the canonical placement — bits moved, never
  changed, and ggml's implicit constants written as explicit planes.  That
  move is deferred (``GritArray.deferred``): the planes are built on first
  use, so loading and a level-1 scan read no tensor byte, and
  ``grit.decode`` reads the blocks in place (``.source``) where a fused
  kernel serves the type;
* a read-only numpy array for F32, F16, F64 and the integer types (zero-copy
  views) and BF16 (widened to float32, exactly): they are not quantised;
* an :class:`Inexpressible` record, carrying the reason, for every type v1
  cannot express — never silently skipped (``strict=True`` raises instead).

The returned mapping keeps the file's KV entries (``.metadata``, typed, their
bytes kept) and every tensor's ggml type (``.ggml_types``); ``save_gguf``
writes them back, a GritArray of a ggml block type as that type, so that a
load → save round trip keeps every KV pair and every tensor's type, shape and
bytes (docs/file-format.md, "GGUF").

Shapes: ggml's ne[] is reversed relative to numpy; groups run along ne[0],
the last numpy axis, which is the descriptor's group axis.  Every choice and
every difference from ggml's own dequantisation is in docs/placements.md
("GGUF").
"""
from __future__ import annotations

import dataclasses
import os
import struct
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .. import descriptor as D
from .._files import MappedTensors, atomic_write
from ..array import GritArray, canonical
from ..check import check as _check
from ..codec.packing import pack_stream, unpack_stream
from ..errors import GritError, GritGradeError, GritUsageError
from ..formats import REGISTERED as _FORMATS, fmt_decode
from ..grade import Grade, lookup_grade, register_grade
from ..ggml import CONVERTED, Blocks, MXFP4_DATA, NVFP4_DATA, Q4_K_DATA, ZERO_COPY
from ..placement.expr import (layout_word, parse_layout, register_layout,
                              resolve_layout)
from ..placement.registered import pack_k4_12b, unpack_k4_12b
from ..placement.words import CLASS_HASHED, CLASS_OPAQUE, REGISTERED, placement_class
from .gguf_file import (GGUF_MAGIC, GGUFField, GGUFFile, TensorInfo, ValueType, _Cursor,
                        ggml_types, header_bytes, problem, read_gguf)
from .gguf_file import read_source as _read_file_source
from .source import ByteSource, Span
from .problems import Problem, ProblemKind as K, Tally, raise_first
from .safetensors import CheckFailed, renamed_error

__all__ = ["load", "read", "read_source", "Unread", "save_gguf", "Inexpressible",
           "GGUFTensors", "GGUFContents", "GGUFValue", "GGUFMetadata", "metadata_of", "native_type",
           "GGML_GRADES", "INEXPRESSIBLE", "ggml_placement", "KV_DESC", "KV_SHAPE", "KV_GRADE",
           "KV_LAYOUT", "KV_SCHEMA", "KV_DIGEST", "GGUF_MAGIC", "Companion", "COMPANION_SUFFIX",
           "companion_names", "companion_rounding", "nvfp4_scaled_grade",
           "nvfp4_scale_disagreements", "leading", "block_span"]

_W = {n: w for n, (w, _) in REGISTERED.items()}


def _gguf():
    try:
        import gguf  # noqa: PLC0415 - gguf-py is heavy to import; only writing GGUF needs it
    except ImportError:  # pragma: no cover - exercised only without the package
        raise GritUsageError("reading GGUF files needs the gguf package (gguf-py): "
                             "pip install gguf") from None
    return gguf


# ---------------------------------------------------------------------------
# the zero-copy types (grit.ggml); their expressions are registered in this
# process on import, so a loaded array's placement words resolve


for _e in (Q4_K_DATA, MXFP4_DATA, NVFP4_DATA):
    register_layout(_e)


def ggml_placement(name: str) -> tuple[int, int, int] | None:
    """(placement_data, placement_scale, placement_meta) of a zero-copy ggml
    type, or None when the type is converted into the canonical placement."""
    return _ZERO_COPY.get(name, (None,))[0]  # type: ignore[return-value]


# ---------------------------------------------------------------------------
# the grades


GGML_GRADES: dict[str, str] = {n: c.grade_text for n, c in CONVERTED.items()}
GGML_GRADES.update((n, z.grade_text) for n, z in ZERO_COPY.items())   # Q8_0, MXFP4, NVFP4, Q4_K

INEXPRESSIBLE: dict[str, str] = {
    "Q3_K": ("its 6-bit sub-block scales are offset-binary (value = code − 32); a v1 scale "
             "format is unsigned or two's-complement with no offset, so a bit-exact GRIT form "
             "would rewrite every scale code (XOR 0x20) — a change of bits, not a relayout"),
    "TQ1_0": ("elements are trits packed five to a byte in base 3 (1.6 bits each); a v1 "
              "element plane is a bitstream of w-bit codes"),
    "Q8_1": ("a compute-time activation type, not a storage type: its s = d·Σq field is "
             "derived, and gguf-py's size table (40 bytes per block) disagrees with ggml's "
             "block_q8_1 (36 bytes) — not loaded rather than guessed"),
    "Q1_0": "1-bit elements; v1 formats start at 2 bits",
}
for _n in ("IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"):
    INEXPRESSIBLE[_n] = ("elements index a codebook of vectors (lattice/grid tables with sign "
                         "masks); a v1 element decodes through a §2 format word, never a table")
for _n in ("IQ4_NL", "IQ4_XS"):
    INEXPRESSIBLE[_n] = ("4-bit codes index a non-uniform 16-entry value table (kvalues_iq4nl); "
                         "no §2 format has those values")

_PLAIN = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I8": np.int8,
          "I16": np.int16, "I32": np.int32, "I64": np.int64}


def _grade(name: str) -> Grade:
    g = register_grade(GGML_GRADES[name])
    return lookup_grade(g.id) or g


# ---------------------------------------------------------------------------
# zero-copy types: the block bytes are the GRIT data plane


_ZERO_COPY: dict[str, tuple[tuple[int, int, int]]] = {
    n: (z.placement,) for n, z in ZERO_COPY.items()}


def _zero_copy_descriptor(name: str, shape: tuple[int, ...]) -> D.Descriptor:
    g = _grade(name)
    pd, ps, pm = _ZERO_COPY[name][0]
    d = g.descriptor(group_axis=len(shape) - 1, placement_data=pd, placement_scale=ps,
                     placement_meta=pm)
    return d.replace(flags=d.flags | D.F_INTERLEAVED)


def _zero_copy(name: str, raw: np.ndarray, shape: tuple[int, ...]):
    return GritArray(_zero_copy_descriptor(name, shape), shape, (raw, b"", b"", b""))


# ---------------------------------------------------------------------------
# converted types: fields moved into the canonical planes


def _canonical(name: str, shape, data, s0, s1=b"", aux=b""):
    g = _grade(name)
    return GritArray(g.descriptor(group_axis=len(shape) - 1), shape, (data, s0, s1, aux))


def _nibbles_halves(qs: np.ndarray) -> np.ndarray:
    """(nb, n/2) bytes in ggml's halves order -> (nb, n) codes in order."""
    return np.concatenate([qs & np.uint8(15), qs >> np.uint8(4)], axis=1)


def _bit_planes(qh: np.ndarray, n: int) -> np.ndarray:
    """(nb, 4) bytes = one little-endian uint32 per block, bit j for element j."""
    bits = np.unpackbits(qh, axis=1, bitorder="little")
    return bits[:, :n]


def _conv_q4_0(b, shape):
    nb = b.shape[0]
    codes = _nibbles_halves(b[:, 2:18])
    return _canonical("Q4_0", shape, pack_stream(codes, 4), b[:, 0:2].tobytes(), b"",
                      np.full(nb, 8, np.uint8).tobytes())


def _conv_q4_1(b, shape):
    nb = b.shape[0]
    codes = _nibbles_halves(b[:, 4:20])
    return _canonical("Q4_1", shape, pack_stream(codes, 4), np.ones(nb, np.uint8).tobytes(),
                      b[:, 0:4].tobytes(), np.full(nb, 0xFF, np.uint8).tobytes())


def _conv_q5_0(b, shape):
    nb = b.shape[0]
    codes = _nibbles_halves(b[:, 6:22]) | (_bit_planes(b[:, 2:6], 32) << np.uint8(4))
    return _canonical("Q5_0", shape, pack_stream(codes, 5), b[:, 0:2].tobytes(), b"",
                      np.full(nb, 16, np.uint8).tobytes())


def _conv_q5_1(b, shape):
    nb = b.shape[0]
    codes = _nibbles_halves(b[:, 8:24]) | (_bit_planes(b[:, 4:8], 32) << np.uint8(4))
    return _canonical("Q5_1", shape, pack_stream(codes, 5), np.ones(nb, np.uint8).tobytes(),
                      b[:, 0:4].tobytes(), np.full(nb, 0xFF, np.uint8).tobytes())


def _crumbs(qs: np.ndarray) -> np.ndarray:
    """K-quant 2-bit order: per 128-element half, 32 bytes; bits 2s..2s+1 of
    byte l hold element 32s + l of that half."""
    nb = qs.shape[0]
    sh = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    return ((qs.reshape(nb, -1, 1, 32) >> sh) & np.uint8(3)).reshape(nb, -1)


def _conv_q2_k(b, shape):
    sc = b[:, 0:16]
    codes = _crumbs(b[:, 16:80])
    return _canonical("Q2_K", shape, pack_stream(codes, 2), (sc & np.uint8(15)).tobytes(),
                      b[:, 80:84].tobytes(), (sc >> np.uint8(4)).tobytes())


def _k_nibbles(qs: np.ndarray) -> np.ndarray:
    """Q4_K/Q5_K order: per 64-element chunk, 32 bytes; low nibbles are
    elements 0..31 of the chunk, high nibbles 32..63."""
    nb = qs.shape[0]
    sh = np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    return ((qs.reshape(nb, -1, 1, 32) >> sh) & np.uint8(15)).reshape(nb, -1)


def _conv_q5_k(b, shape):
    nb = b.shape[0]
    sc, m = unpack_k4_12b(b[:, 4:16])
    qh = b[:, 16:48]
    hb = (qh.reshape(nb, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & np.uint8(1)
    codes = _k_nibbles(b[:, 48:176]) | (hb.reshape(nb, 256) << np.uint8(4))
    return _canonical("Q5_K", shape, pack_stream(codes, 5), sc.tobytes(), b[:, 0:4].tobytes(),
                      m.tobytes())


def _conv_q6_k(b, shape):
    nb = b.shape[0]
    ql, qh = b[:, 0:128], b[:, 128:192]
    lo = ((ql.reshape(nb, 2, 1, 64) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1))
          & np.uint8(15)).reshape(nb, 256)
    codes = lo | (_crumbs(qh) << np.uint8(4))
    return _canonical("Q6_K", shape, pack_stream(codes, 6), b[:, 192:208].tobytes(),
                      b[:, 208:210].tobytes(), np.full(nb * 16, 32, np.uint8).tobytes())


def _conv_q8_k(b, shape):
    # bsums (16 × int16 per block) are sums of the codes: derived, not values
    return _canonical("Q8_K", shape, b[:, 4:260].tobytes(), b[:, 0:4].tobytes())


def _conv_tq2_0(b, shape):
    nb = b.shape[0]
    return _canonical("TQ2_0", shape, pack_stream(_crumbs(b[:, 0:64]), 2), b[:, 64:66].tobytes(),
                      b"", np.ones(nb, np.uint8).tobytes())


_CONVERT: dict[str, Callable[[np.ndarray, tuple], Any]] = {
    "Q4_0": _conv_q4_0, "Q4_1": _conv_q4_1, "Q5_0": _conv_q5_0, "Q5_1": _conv_q5_1,
    "Q2_K": _conv_q2_k, "Q5_K": _conv_q5_k, "Q6_K": _conv_q6_k, "Q8_K": _conv_q8_k,
    "TQ2_0": _conv_tq2_0,
}


def leading(a: GritArray, rows: int) -> GritArray | None:
    """The first ``rows`` (at least one) along axis 0 of a converted tensor
    :func:`read` loaded (its ``.source`` blocks), converting only their
    blocks — the leading rows are a prefix of the blocks; None for any other
    array."""
    src = a.source
    if not isinstance(src, Blocks) or src.type_name not in _CONVERT or len(a.shape) < 2:
        return None
    ct = CONVERTED[src.type_name]
    sub = (max(1, min(int(rows), a.shape[0])), *a.shape[1:])
    nb = int(np.prod(sub, dtype=np.int64)) // ct.block_elems
    raw = _u8(src.data)[:nb * ct.block_bytes]
    return _CONVERT[src.type_name](raw.reshape(nb, ct.block_bytes), sub)


def block_span(got: "GGUFContents", name: str) -> Span | None:
    """The blocks of a zero-copy ggml tensor (Q8_0, MXFP4, NVFP4, Q4_K: its
    one plane is the blocks as they lie) of a file read through a source
    without views, as a :class:`~grit.io.source.Span` of that source — for
    a consumer that streams them (``grit scan --deep``) instead of holding
    them; None for any other tensor, a GRIT-annotated one, or a file with a
    view."""
    f = got.file
    if f.buf is not None or f.source is None or name in got.annotated:
        return None
    if got.tensors.ggml_types.get(name) not in _ZERO_COPY or \
            not isinstance(got.tensors.get(name), GritArray) or \
            getattr(got.tensors.companions.get(name), "attached", False):
        return None
    t = next((t for t in f.tensors if t.name == name), None)
    return None if t is None else Span(f.source, f.data_start + t.offset, t.nbytes)


def _deferred(name: str, raw, type_size: int, shape: tuple[int, ...]) -> GritArray:
    """A converted tensor as a deferred array: its canonical planes are
    built on first use (loading and a level-1 scan cost nothing per byte),
    and ``grit.decode`` reads the blocks in place where a fused kernel
    serves the type (``.source``)."""
    def build():
        return _CONVERT[name](raw.reshape(-1, type_size), shape).planes
    return GritArray.deferred(_grade(name).descriptor(group_axis=len(shape) - 1), shape,
                              build, source=Blocks(name, raw))


# ---------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class Inexpressible:
    """A tensor GRIT v1 cannot express, with the reason.  ``raw`` is the
    file's bytes (a read-only memmap view)."""

    name: str
    ggml_type: str
    shape: tuple[int, ...]
    reason: str
    raw: Any = field(repr=False, default=None)

    def decode(self):
        raise GritGradeError(f"tensor {self.name!r} ({self.ggml_type}) is not a GRIT array: "
                             f"{self.reason}")


class GGUFTensors(MappedTensors):
    """``{name: GritArray | ndarray | Inexpressible | CheckFailed}`` in file
    order, with ``.inexpressible`` listing the records, ``.ggml_types``
    the type of every tensor, ``.metadata`` the file's KV entries
    (a :class:`GGUFMetadata`; ``grit.save`` writes them back) and
    ``.companions`` what became of each NVFP4 tensor's companion scale
    (:class:`Companion`)."""

    ggml_types: dict[str, str]
    metadata: "GGUFMetadata"
    companions: "dict[str, Companion]"

    @property
    def inexpressible(self) -> list[Inexpressible]:
        return [v for v in self.values() if isinstance(v, Inexpressible)]


# ---------------------------------------------------------------------------
# the file's KV entries, carried through load -> save


@dataclass(frozen=True, eq=False)
class GGUFValue:
    """One GGUF KV value with its type: ``type`` and, for an array,
    ``sub_type`` (the item type) are :class:`~grit.io.gguf_file.ValueType`
    numbers.  ``GGUFValue(type, sub_type, value=...)`` is a value to write;
    one read from a little-endian file keeps where its encoded bytes lie
    (``raw``), so that :func:`save_gguf` writes them back unchanged — nested
    arrays, empty strings and arrays included — without decoding a
    vocabulary; ``value`` decodes on demand.  Equal when type, sub-type and
    decoded value are."""

    type: int
    sub_type: int | None = None
    given: Any = field(default=None, repr=False)
    _buf: Any = field(default=None, repr=False)
    _start: int = field(default=0, repr=False)
    _end: int | None = field(default=None, repr=False)

    @property
    def raw(self):
        """The encoded value (a memoryview of the file), or None for a value
        given by the caller."""
        if self._buf is None:
            return None
        end = self._end
        if end is None:       # the last KV entry: step over it once
            c = _Cursor(self._buf, self._start, "<")
            c.skip_value(self.type, "value")
            end = c.pos
            object.__setattr__(self, "_end", end)
        return header_bytes(self._buf).bytes(self._start, end - self._start)

    @property
    def value(self):
        if self._buf is None:
            return self.given
        try:
            return GGUFField("", self.type, -1, 1, self._start, "<", self._buf).value()
        except ValueError as e:       # a string that is not UTF-8
            raise GritUsageError(f"GGUF KV value: {e}") from None

    def __eq__(self, other):
        if not isinstance(other, GGUFValue):
            return NotImplemented
        return (self.type, self.sub_type, self.value) == (other.type, other.sub_type, other.value)

    __hash__ = None  # type: ignore[assignment]


class GGUFMetadata(dict):
    """``{key: GGUFValue}``: a GGUF file's KV entries in file order, without
    the ``grit.*`` annotations (save_gguf writes those afresh)."""


def metadata_of(f: GGUFFile) -> GGUFMetadata:
    """The KV entries of a parsed GGUF file as a :class:`GGUFMetadata`.  A
    value's encoded bytes end where the next entry's key begins (its u64
    length, its UTF-8 bytes and its u32 type precede its value)."""
    out = GGUFMetadata()
    flds = list(f.fields.values())
    for i, fld in enumerate(flds):
        if fld.key.startswith("grit."):
            continue
        sub = fld.item_type if fld.type == ValueType.ARRAY else None
        if f.order == "<":
            nxt = flds[i + 1] if i + 1 < len(flds) else None
            end = None if nxt is None else nxt.offset - 12 - len(nxt.key.encode("utf-8"))
            out[fld.key] = GGUFValue(fld.type, sub, None, f.header, fld.offset, end)
        else:     # a big-endian file: decoded, re-encoded little-endian on save
            out[fld.key] = GGUFValue(fld.type, sub, fld.value())
    return out


@dataclass
class GGUFContents:
    """What :func:`read` found: the container (``file``: KV entries, tensor
    infos), one record per readable tensor (``tensors``) and every problem,
    in file order (``problems``).  ``annotated`` names the tensors whose
    bytes are a GRIT payload (``grit.desc.<tensor>``)."""

    file: GGUFFile
    tensors: GGUFTensors
    problems: list[Problem]
    annotated: frozenset = frozenset()

    @property
    def parsed(self) -> bool:
        return self.file.parsed


def _tensor(f: GGUFFile, t: TensorInfo):
    name = t.ggml_type
    shape = t.shape
    if f.buf is None:
        return _unread_tensor(f, t)
    if name in _PLAIN:
        return f.data(t, _PLAIN[name]).reshape(shape)
    if name == "BF16":
        u = f.data(t, np.uint16).astype(np.uint32) << np.uint32(16)
        out = u.view(np.float32).reshape(shape)
        out.flags.writeable = False
        return out
    raw = f.data(t)
    if name in _ZERO_COPY:
        return _zero_copy(name, raw, shape)
    if name in _CONVERT:
        return _deferred(name, raw, t.type_size, shape)
    reason = INEXPRESSIBLE.get(name, f"ggml type {name} has no GRIT v1 mapping in this version")
    return Inexpressible(t.name, name, shape, reason, raw)



@dataclass(frozen=True)
class Unread:
    """A plain tensor (F32, F16, BF16, F64, the integer types) of a file
    read through a source without a zero-copy view (a remote file), not
    read by :func:`read_source`: ``read()`` reads it, giving the array
    :func:`read` gives for a local file."""

    name: str
    ggml_type: str
    shape: tuple[int, ...]
    _read: Callable[[], np.ndarray] = field(repr=False, compare=False)

    def read(self) -> np.ndarray:
        return self._read()

    def __array__(self, dtype=None, copy=None):
        a = self._read()
        return a if dtype is None else a.astype(dtype)


def _unread_tensor(f: GGUFFile, t: TensorInfo):
    """:func:`_tensor` for a file without a view, reading none of the
    tensor's bytes: a GritArray whose planes are read on first use, an
    :class:`Unread` plain tensor, or an Inexpressible record without
    ``raw``.  The level-1 check runs now, on the sizes the bytes would have,
    so the array exists, or the error is raised, exactly as from a view."""
    name, shape = t.ggml_type or "", t.shape      # (a readable info's type is known)
    if name in _PLAIN or name == "BF16":
        return Unread(t.name, name, shape, lambda: _read_plain(f, t))
    if name in _ZERO_COPY:
        d = _zero_copy_descriptor(name, shape)
        _check(d, shape, (t.nbytes, 0, 0, 0), level=1)
        return GritArray.deferred(d, shape, lambda: (f.data(t), b"", b"", b""))
    if name in _CONVERT:
        ts = t.type_size

        def build():
            return _CONVERT[name](f.data(t).reshape(-1, ts), shape).planes
        return GritArray.deferred(_grade(name).descriptor(group_axis=len(shape) - 1), shape,
                                  build)
    reason = INEXPRESSIBLE.get(name, f"ggml type {name} has no GRIT v1 mapping in this version")
    return Inexpressible(t.name, name, shape, reason)


def _read_plain(f: GGUFFile, t: TensorInfo):
    """A plain tensor of a file without a view: its bytes read now, then
    made the array :func:`_tensor` makes from a view of them."""
    one = GGUFFile(f.path, t.nbytes, order=f.order, data_start=0)
    one.buf = f.data(t)
    return _tensor(one, dataclasses.replace(t, offset=0))


# ---------------------------------------------------------------------------
# NVFP4 companion scales
#
# llama.cpp's convert_hf_to_gguf keeps an NVFP4 tensor's per-tensor scale
# (ModelOpt's weight_scale_2, compressed-tensors' 1/weight_global_scale) out
# of the blocks, in an F32 tensor named <base>.scale beside <base>.weight
# (some converters write <base>.weight.scale), and leaves it out when it is
# 1.0; llama.cpp multiplies the matmul's result by it.  Loaded together they
# are one two-level GRIT array: scale1 = the companion, k1 = 0 for one value,
# or the level-0 groups under each value when the companion's shape is a
# leading part of the tensor's (per expert, per row).

#: the suffix of an NVFP4 tensor's companion scale
COMPANION_SUFFIX = ".scale"


def companion_names(name: str) -> tuple[str, ...]:
    """The names a companion scale of NVFP4 tensor ``name`` has, in the
    order they are looked for: ``<base>.scale`` for ``<base>.weight``, then
    ``<name>.scale``."""
    if name.endswith(".weight") and len(name) > len(".weight"):
        return name[:-len(".weight")] + COMPANION_SUFFIX, name + COMPANION_SUFFIX
    return (name + COMPANION_SUFFIX,)


def nvfp4_scaled_grade(k1: int) -> Grade:
    """NVFP4 with a binary32 level-1 scale over k1 level-0 groups (0: one
    for the whole tensor)."""
    return _register(f"grit1(e=e2m1,k0=16,s0=e4m3,k1={k1},s1=binary32,esr=ratiomaxabs)")


def _register(text: str) -> Grade:
    g = register_grade(text)
    return lookup_grade(g.id) or g


_E4M3_SHARED = np.array([fmt_decode(_FORMATS["e4m3"], c) for c in range(0x7F)], np.float32)
_E2M1_NONZERO = np.array([fmt_decode(_FORMATS["e2m1"], c) for c in range(16) if c & 7], np.float32)


def companion_rounding(values) -> tuple[int, int]:
    """(differ, pairs): of the (value, s0, e) triples — each distinct finite
    companion value, each E4M3 scale code both readers read alike
    (0x00–0x7E) and each non-zero E2M1 code — how many GRIT's decode
    f32(f32(s1·s0)·e) (§8.1: outermost scale first) gives other bits than
    ggml's dequantize × scale, f32(f32(s0·e)·s1) (s0·e is exact in binary32,
    so ggml's is the correctly rounded product).  Both round once where e is
    a power of two; 1.5, 3 and 6 round GRIT's product twice."""
    v = np.unique(np.asarray(values, np.float32).reshape(-1))
    v = v[np.isfinite(v)]
    differ = 0
    s0 = _E4M3_SHARED.reshape(-1, 1)
    e = _E2M1_NONZERO.reshape(1, -1)
    ggml = s0 * e                                   # exact
    with np.errstate(all="ignore"):
        for s1 in v:
            g = (s1 * s0) * e
            r = ggml * s1
            differ += int(np.count_nonzero(g.view(np.uint32) != r.view(np.uint32)))
    return differ, int(v.size) * _E4M3_SHARED.size * _E2M1_NONZERO.size


@dataclass(frozen=True)
class Companion:
    """What :func:`read` made of NVFP4 tensor ``tensor``'s companion scale:
    ``scale`` the companion's name (None: the file has none), ``attached``
    whether the tensor became one two-level array with it (``k1`` its
    level-1 group; ``reason`` why not, otherwise), and ``rounding``
    (differ, pairs) of :func:`companion_rounding` for its values."""

    tensor: str
    scale: str | None
    attached: bool
    k1: int | None = None
    reason: str = ""
    rounding: tuple[int, int] = (0, 0)


def nvfp4_scale_disagreements(a: GritArray) -> tuple[int, int]:
    """(n, total): of an NVFP4 array's E4M3 block scales (as :func:`read`
    gives it, with or without its companion), how many ggml's UE4M3 reads
    otherwise than GRIT's E4M3 — bit 7 set, or the code 0x7F — and how many
    there are.  Reads the scale bytes."""
    planes = a.transient_planes()                    # a deferred array keeps none
    if len(memoryview(planes[1])):
        sc = _u8(planes[1])                          # canonical: the scale0 plane
    else:
        sc = _u8(planes[0]).reshape(-1, 36)[:, :4]   # the blocks: four scales each
    return int(np.count_nonzero((sc & np.uint8(0x80)) | (sc == np.uint8(0x7F)))), int(sc.size)


def _companion_k1(shape: tuple[int, ...], cshape: tuple[int, ...]) -> int | None:
    """k1 of a companion of shape ``cshape`` over NVFP4 tensor ``shape``: 0
    for one value; the level-0 groups under each value when ``cshape`` is a
    leading part of ``shape``; None when it fits neither."""
    if int(np.prod(cshape, dtype=np.int64)) == 1:
        return 0
    for j in range(1, len(shape)):
        if tuple(cshape) == tuple(shape[:j]):
            return int(np.prod(shape[j:], dtype=np.int64)) // 16
    return None


def _attach(out: "GGUFTensors", annotated) -> None:
    """Pair every NVFP4 tensor with its companion scale (see above)."""
    for name, gt in list(out.ggml_types.items()):
        if gt != "NVFP4" or name in annotated or not isinstance(out.get(name), GritArray):
            continue
        a = out[name]
        cname = next((c for c in companion_names(name) if c in out), None)
        if cname is None:
            out.companions[name] = Companion(name, None, False, reason="no companion tensor")
            continue
        c = out[cname]
        ctype = out.ggml_types.get(cname)
        if ctype == "F32" and isinstance(c, Unread):   # a remote file: read it now
            c = out[cname] = c.read()
        if ctype != "F32" or not isinstance(c, np.ndarray):
            out.companions[name] = Companion(
                name, cname, False, reason=f"the companion is {ctype}, not F32")
            continue
        k1 = _companion_k1(a.shape, c.shape)
        if k1 is None:
            out.companions[name] = Companion(
                name, cname, False, reason=f"a companion of shape {list(c.shape)} is neither "
                f"one value nor a leading part of the shape {list(a.shape)}")
            continue
        try:
            g = nvfp4_scaled_grade(k1)
            d = g.descriptor(group_axis=len(a.shape) - 1)
        except GritError as e:
            out.companions[name] = Companion(name, cname, False, reason=str(e).splitlines()[0])
            continue
        s1 = np.ascontiguousarray(c, dtype="<f4").reshape(-1).view(np.uint8)

        def build(a=a, s1=s1):
            one = canonical(a)            # the blocks' codes and E4M3 scales, moved
            return one.planes[0], one.planes[1], s1, b""
        out[name] = GritArray.deferred(d, a.shape, build)
        out.companions[name] = Companion(name, cname, True, k1,
                                         rounding=companion_rounding(c))


def read(path) -> GGUFContents:
    """Read a GGUF file without stopping at its first defect (see the
    module docstring).  An OSError opening the file propagates."""
    return _contents(read_gguf(os.fspath(path)))


def read_source(src: ByteSource, path: str | None = None) -> GGUFContents:
    """:func:`read` over a byte source (``path`` names it in messages; the
    source's name by default).  A source without a zero-copy view (a remote
    file) has its header read in windows and no tensor byte read here: each
    GritArray's planes are read through the source on first use, a plain
    tensor is an :class:`Unread` record, an Inexpressible one has no
    ``raw``; the bytes that are read now are an NVFP4 tensor's companion
    scale and the payload of a GRIT-annotated tensor that fails its level-1
    check (the CheckFailed record holds it).  The problems are those
    :func:`read` finds in the same bytes."""
    return _contents(_read_file_source(src, path))


def _contents(f: GGUFFile) -> GGUFContents:
    path = f.path
    problems = list(f.problems)
    out = GGUFTensors()
    out.ggml_types = {}
    out.metadata = GGUFMetadata()
    out.companions = {}
    if not f.parsed:
        return GGUFContents(f, out, problems)
    out.metadata = metadata_of(f)
    tally = Tally(problems)
    notes = _annotations(f, tally)
    for t in f.tensors:
        try:
            v = _annotated(f, t, notes) if t.name in notes["desc"] else _tensor(f, t)
        except GritError as e:
            # a converted tensor whose planes fail the check: the check's own error
            kind = K.CHECK_FAILED if e.detail is not None else K.BAD_TENSOR
            if tally.full(kind):
                tally.count(kind)
            else:
                tally.add(problem(path, kind,
                                  str(e).splitlines()[0] if str(e) else type(e).__name__,
                                  t.name, error=e))
            continue
        except (ValueError, TypeError, IndexError, KeyError, ArithmeticError,
                MemoryError) as e:   # bytes that do not fit their ggml type
            msg = f"tensor {t.name!r} ({t.ggml_type}) cannot be read: {type(e).__name__}: " \
                  f"{str(e)[:200]}"
            tally.add(problem(path, K.BAD_TENSOR, msg, t.name))
            continue
        out[t.name] = v
        out.ggml_types[t.name] = t.ggml_type
    _attach(out, notes["desc"])
    for name in sorted(set(notes["desc"]) - f.names):
        msg = f"GRIT annotation {KV_DESC}{name} names no tensor of the file"
        tally.add(problem(path, K.BAD_ANNOTATION, msg, name))
    tally.finish()
    return GGUFContents(f, out, problems, frozenset(notes["desc"]))


def load(path, *, strict: bool = False) -> GGUFTensors:
    """Read a GGUF file: ``{name: GritArray | ndarray | Inexpressible | CheckFailed}``.

    A container that cannot be read — a header that cannot be walked, a
    tensor that cannot be read as its ggml type, a malformed ``grit.*``
    annotation — raises the first problem :func:`read` reports (a
    GritUsageError naming the file, or the grade or check error it stands
    for).  With ``strict=False`` (the default) a tensor GRIT v1 cannot
    express is an :class:`Inexpressible` record, and a GRIT-annotated tensor
    whose bytes fail the level-1 check against its descriptor is a
    :class:`~grit.io.safetensors.CheckFailed` record (``.error`` the
    GritError, ``.status`` its §7.1 status) — the file's other tensors are
    still loaded.  With ``strict=True`` either raises: GritGradeError naming
    the tensor and the reason, or the level-1 check's own GritError."""
    got = read(path)
    raise_first(got.problems)
    if strict:
        for v in got.tensors.values():
            if isinstance(v, (Inexpressible, CheckFailed)):
                v.decode()
    return got.tensors


# ---------------------------------------------------------------------------
# GRIT annotations (docs/file-format.md, "GGUF")
#
#   grit.schema            string  "grit-gguf/1"
#   grit.desc.<tensor>     string  the 64-byte descriptor, 128 hex digits
#   grit.shape.<tensor>    [u64]   the logical shape, numpy order (when absent:
#                                  the tensor's own shape)
#   grit.grade.<tensor>    string  the canonical grade string
#   grit.layout.0x<word>   string  the layout expression of a class-0x8/0xF word
#   grit.digest.<tensor>   string  the §6.5 digest (read by grit scan --deep)
#
# The annotated tensor's bytes are the payload data ‖ scale0 ‖ scale1 ‖ aux
# (§3.6); save_gguf stores it as a one-dimensional I8 tensor.

KV_SCHEMA = "grit.schema"
KV_DESC = "grit.desc."
KV_SHAPE = "grit.shape."
KV_GRADE = "grit.grade."
KV_LAYOUT = "grit.layout."
KV_DIGEST = "grit.digest."
GGUF_SCHEMA = "grit-gguf/1"
#: the longest recorded shape read (a descriptor's rank is far smaller)
_MAX_SHAPE = 64


def _annotations(f: GGUFFile, tally: Tally) -> dict:
    """The valid ``grit.desc.``/``grit.shape.`` annotations by tensor, the
    carried grades and layouts registered; every defect added to ``tally``
    (a tensor with a bad annotation is read as its own type)."""
    def bad(kind: K, msg: str, tensor=None, error=None) -> None:
        if tally.full(kind):
            tally.count(kind)
        else:
            tally.add(problem(f.path, kind, msg, tensor, error=error))

    notes: dict[str, dict] = {"desc": {}, "shape": {}, "grade": {}}
    layouts: dict[int, str] = {}
    for key, fld in f.fields.items():
        if not key.startswith("grit."):
            continue
        for kind, prefix in (("desc", KV_DESC), ("shape", KV_SHAPE), ("grade", KV_GRADE)):
            if key.startswith(prefix) and len(key) > len(prefix):
                if kind == "shape" and fld.count > _MAX_SHAPE:
                    notes[kind][key[len(prefix):]] = None
                else:
                    notes[kind][key[len(prefix):]] = f.value(key)
                break
        else:
            if key.startswith(KV_LAYOUT):
                v, w = f.value(key), key[len(KV_LAYOUT):]
                if not (isinstance(v, str) and len(w) == 18 and w.startswith("0x")):
                    bad(K.BAD_ANNOTATION, f"{key}: expected {KV_LAYOUT}0x<16 hex digits> "
                                          "holding a layout expression")
                    continue
                try:
                    word = int(w, 16)
                    got = layout_word(parse_layout(v))
                except (ValueError, GritGradeError, GritUsageError) as e:
                    bad(K.BAD_ANNOTATION, f"{key}: {e}"[:300])
                    continue
                if got != word:
                    bad(K.BAD_ANNOTATION, f"{key}: expression {v!r} hashes to 0x{got:016x}")
                    continue
                layouts[word] = v
    descs: dict[str, D.Descriptor] = {}
    for name, v in notes["desc"].items():
        if not isinstance(v, str):
            bad(K.BAD_DESCRIPTOR, f"{KV_DESC}{name} is not a string", name)
            continue
        try:
            descs[name] = D.Descriptor.from_hex(v)
        except GritGradeError as e:
            bad(K.BAD_DESCRIPTOR, f"{KV_DESC}{name}: {e}"[:300], name)
    for name, v in notes["shape"].items():
        if (not isinstance(v, list) or len(v) > _MAX_SHAPE
                or not all(isinstance(x, int) and x >= 0 for x in v)):
            bad(K.BAD_DESCRIPTOR, f"{KV_SHAPE}{name} is not a list of extents", name)
            descs.pop(name, None)
    for name, v in notes["grade"].items():
        if not isinstance(v, str):
            bad(K.BAD_ANNOTATION, f"{KV_GRADE}{name} is not a string", name)
            continue
        try:
            g = register_grade(v)
        except GritError as e:
            bad(K.BAD_GRADE, f"{KV_GRADE}{name}: a grade string that does not parse: {v!r:.80}",
                name, error=e)
            continue
        d = descs.get(name)
        if d is not None and d.grade_id != g.id:
            bad(K.BAD_ANNOTATION, f"{KV_GRADE}{name} {v!r} has id 0x{g.id:016x}; the "
                                  f"descriptor says 0x{d.grade_id:016x}"[:300], name)
    for v in layouts.values():
        register_layout(v)
    return {"desc": descs, "shape": notes["shape"]}


def _annotated(f: GGUFFile, t: TensorInfo, notes):
    """An annotated tensor: its bytes are the payload of the descriptor.  A
    payload failing its level-1 check is a CheckFailed record."""
    d = notes["desc"][t.name]
    shape = notes["shape"].get(t.name)
    if shape is None:
        shape = list(t.shape)
    if f.buf is None:      # a file without a view: the payload is read on first use
        try:
            a = GritArray.deferred(
                d, shape, lambda: GritArray.from_payload(d, shape, f.data(t)).planes)
        except GritError:
            a = None
        if a is not None and a.nbytes == t.nbytes:
            return a
        # (a payload that fails its check: read, and failed as from a view)
    raw = f.data(t)
    try:
        return GritArray.from_payload(d, shape, raw)
    except GritError as e:
        return CheckFailed(t.name, renamed_error(t.name, e), d.hex(),
                           tuple(int(x) for x in shape), {"payload": raw})


_INT32_MAX = (1 << 31) - 1


# ---------------------------------------------------------------------------
# native ggml types on save: the inverse of the converters


def _u8(p) -> np.ndarray:
    return np.frombuffer(p, np.uint8) if len(memoryview(p)) else np.zeros(0, np.uint8)


def _codes(a: GritArray, w: int, n: int) -> np.ndarray:
    nb = a.size // n
    return unpack_stream(a.planes[0], nb * n, w).astype(np.uint8).reshape(nb, n)


def _halves_inv(c: np.ndarray) -> np.ndarray:
    """(nb, n) codes -> (nb, n/2) bytes in ggml's halves order."""
    h = c.shape[1] // 2
    return (c[:, :h] & np.uint8(15)) | ((c[:, h:] & np.uint8(15)) << np.uint8(4))


def _crumbs_inv(c: np.ndarray) -> np.ndarray:
    nb = c.shape[0]
    r = c.reshape(nb, -1, 4, 32) & np.uint8(3)
    return (r[:, :, 0] | (r[:, :, 1] << 2) | (r[:, :, 2] << 4) | (r[:, :, 3] << 6)).reshape(nb, -1)


def _qh_inv(c: np.ndarray) -> np.ndarray:
    """bit 4 of 32 codes -> one little-endian uint32 per block."""
    return np.packbits((c >> np.uint8(4)) & np.uint8(1), axis=1, bitorder="little")


def _plane(a: GritArray, i: int, nb: int) -> np.ndarray:
    return _u8(a.planes[i]).reshape(nb, -1)


def _inv_q4_0(a, nb):
    return [_plane(a, 1, nb), _halves_inv(_codes(a, 4, 32))]


def _inv_q4_1(a, nb):
    return [_plane(a, 2, nb), _halves_inv(_codes(a, 4, 32))]


def _inv_q5_0(a, nb):
    c = _codes(a, 5, 32)
    return [_plane(a, 1, nb), _qh_inv(c), _halves_inv(c)]


def _inv_q5_1(a, nb):
    c = _codes(a, 5, 32)
    return [_plane(a, 2, nb), _qh_inv(c), _halves_inv(c)]


def _inv_q2_k(a, nb):
    sc = _plane(a, 1, nb) | (_plane(a, 3, nb) << np.uint8(4))
    return [sc, _crumbs_inv(_codes(a, 2, 256)), _plane(a, 2, nb)]


def _inv_q5_k(a, nb):
    c = _codes(a, 5, 256)
    hb = ((c >> np.uint8(4)) & np.uint8(1)).reshape(nb, 8, 32)
    qh = np.zeros((nb, 32), np.uint8)
    for j in range(8):
        qh |= hb[:, j] << np.uint8(j)
    lo = (c & np.uint8(15)).reshape(nb, 4, 2, 32)
    qs = (lo[:, :, 0] | (lo[:, :, 1] << np.uint8(4))).reshape(nb, 128)
    return [_plane(a, 2, nb), pack_k4_12b(_plane(a, 1, nb), _plane(a, 3, nb)), qh, qs]


def _inv_q6_k(a, nb):
    c = _codes(a, 6, 256)
    lo = (c & np.uint8(15)).reshape(nb, 2, 2, 64)
    ql = (lo[:, :, 0] | (lo[:, :, 1] << np.uint8(4))).reshape(nb, 128)
    return [ql, _crumbs_inv(c >> np.uint8(4)), _plane(a, 1, nb), _plane(a, 2, nb)]


def _inv_q8_k(a, nb):
    q = _plane(a, 0, nb)
    # bsums: ggml's block_q8_k field, the sum of each 16 codes (derived)
    bs = q.view(np.int8).reshape(nb, 16, 16).astype(np.int16).sum(axis=2, dtype=np.int16)
    return [_plane(a, 1, nb), q, bs.astype("<i2").view(np.uint8)]


def _inv_tq2_0(a, nb):
    return [_crumbs_inv(_codes(a, 2, 256)), _plane(a, 1, nb)]


def _inv_q8_0_canonical(a, nb):
    return [_plane(a, 1, nb), _plane(a, 0, nb)]


def _inv_mxfp4_canonical(a, nb):
    return [_plane(a, 1, nb), _halves_inv(_codes(a, 4, 32))]


def _inv_nvfp4_canonical(a, nb):
    # four E4M3 scales, then four runs of 8 bytes (16 codes in halves order)
    qs = _halves_inv(_codes(a, 4, 64).reshape(nb * 4, 16)).reshape(nb, 32)
    return [_plane(a, 1, nb), qs]


#: zero-copy types whose canonical placement is written as ggml blocks too
#: (nothing implicit: the block is the scale then the codes)
_CANONICAL_ZC: dict[str, Callable[[GritArray, int], list]] = {
    "Q8_0": _inv_q8_0_canonical, "MXFP4": _inv_mxfp4_canonical,
}


def _scaled_k1(a: GritArray) -> int | None:
    """k1 when ``a`` is an NVFP4 tensor with its companion scale as scale1
    (:func:`nvfp4_scaled_grade`, canonical placement, group axis last)."""
    g = a.grade
    if g["s1"] != "binary32" or g["e"] != "e2m1" or not a.shape or a.shape[-1] % 64:
        return None
    try:
        k1 = int(g["k1"] or "")
    except ValueError:
        return None
    if a.descriptor != nvfp4_scaled_grade(k1).descriptor(group_axis=len(a.shape) - 1):
        return None
    return k1


def _companion_shape(a: GritArray, k1: int) -> tuple[int, ...]:
    if k1 == 0:
        return (1,)
    for j in range(1, len(a.shape)):
        if int(np.prod(a.shape[j:], dtype=np.int64)) // 16 == k1:
            return tuple(a.shape[:j])
    return (a.size // 16 // k1,)


_INVERT: dict[str, Callable[[GritArray, int], list]] = {
    "Q4_0": _inv_q4_0, "Q4_1": _inv_q4_1, "Q5_0": _inv_q5_0, "Q5_1": _inv_q5_1,
    "Q2_K": _inv_q2_k, "Q5_K": _inv_q5_k, "Q6_K": _inv_q6_k, "Q8_K": _inv_q8_k,
    "TQ2_0": _inv_tq2_0,
}


def _zero_copy_desc(name: str, rank: int) -> D.Descriptor:
    pd, ps, pm = _ZERO_COPY[name][0]
    d = _grade(name).descriptor(group_axis=rank - 1, placement_data=pd, placement_scale=ps,
                                placement_meta=pm)
    return d.replace(flags=d.flags | D.F_INTERLEAVED)


def _same_planes(a: GritArray, b: GritArray) -> bool:
    return all(bytes(x) == bytes(y) for x, y in zip(a.planes, b.planes))


def native_type(a: GritArray, *, relayout: bool = False) -> tuple[str, np.ndarray] | None:
    """(ggml type name, the tensor's block bytes) when ``a``'s descriptor is
    exactly one :func:`load` gives a tensor of that ggml type — its grade,
    the group axis last, and the type's zero-copy placement or (for the
    converted types) the canonical one — and, for a converted type, ggml's
    implicit constants hold (the blocks convert back to ``a``'s own planes);
    None otherwise.  An NVFP4 array with its companion scale as scale1
    (:class:`Companion`) gives its NVFP4 blocks: the scale1 plane is the
    companion tensor, which :func:`save_gguf` writes beside them.  With
    ``relayout=True`` a Q8_0 or MXFP4 array in the canonical placement
    qualifies too (loading the file then gives the same decode in ggml's
    placement)."""
    d = a.descriptor
    if not a.shape or d.group_axis != len(a.shape) - 1:
        return None
    if _scaled_k1(a) is not None:      # NVFP4 + companion: the blocks (scale1 apart)
        nb = a.size // 64
        return "NVFP4", np.concatenate(_inv_nvfp4_canonical(a, nb), axis=1).reshape(-1)
    for name in GGML_GRADES:
        if _grade(name).id == d.grade_id:
            break
    else:
        return None
    _, bsize, tsize = next(v for v in ggml_types().values() if v[0] == name)
    if a.shape[-1] % bsize:
        return None
    nb = a.size // bsize
    if name in _ZERO_COPY and d == _zero_copy_desc(name, len(a.shape)):
        if a.plane_bytes[1:] != (0, 0, 0) or a.plane_bytes[0] != nb * tsize:
            return None
        return name, _u8(a.planes[0])
    if d != _grade(name).descriptor(group_axis=len(a.shape) - 1):
        return None
    src = a.source
    if isinstance(src, Blocks) and src.type_name == name:
        # loaded from blocks of this type: they are the bytes (the general path
        # below rebuilds the same ones, tests/test_gguf_roundtrip.py)
        return name, _u8(src.data)
    inv = _INVERT.get(name) or (_CANONICAL_ZC.get(name) if relayout else None)
    if inv is None:
        return None
    try:
        blocks = np.ascontiguousarray(np.concatenate(inv(a, nb), axis=1), dtype=np.uint8)
    except (ValueError, GritError):
        return None
    if blocks.shape != (nb, tsize):
        return None
    # a converted type: the blocks must convert back to a's own planes (ggml's
    # implicit constants hold); canonical Q8_0/MXFP4 is scale ‖ codes, nothing implicit
    if name in _CONVERT and not _same_planes(_CONVERT[name](blocks, a.shape), a):
        return None
    return name, blocks.reshape(-1)


def _companion_out(tensors, name: str, a: GritArray, k1: int):
    """The companion tensor save_gguf writes for NVFP4 array ``a`` (its
    scale1 plane), or None when ``tensors`` holds it already — with the same
    values, or GritUsageError."""
    s1 = np.frombuffer(a.planes[2], "<f4")
    for cname in companion_names(name):
        if cname in tensors:
            c = tensors[cname]
            if not (isinstance(c, np.ndarray) and c.size == s1.size and
                    np.ascontiguousarray(c, "<f4").reshape(-1).tobytes() == s1.tobytes()):
                raise GritUsageError(
                    f"tensor {name!r}: its level-1 scale is the companion tensor {cname!r}, "
                    "which the mapping holds with other values")
            return None
    return companion_names(name)[0], s1.reshape(_companion_shape(a, k1)).copy(), None


def _byte_shape(shape: tuple[int, ...], bsize: int, tsize: int) -> tuple[int, ...]:
    return (*shape[:-1], shape[-1] // bsize * tsize) if shape else (tsize,)


def _metadata(metadata) -> dict[str, GGUFValue]:
    """The caller's metadata as typed values: a GGUFValue as it is, a str as a
    STRING (and, for compatibility, any other plain value refused)."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise GritUsageError("metadata must be a mapping of str to str or GGUFValue")
    out: dict[str, GGUFValue] = {}
    for k, v in metadata.items():
        if not isinstance(k, str) or not k:
            raise GritUsageError(f"metadata keys are non-empty str, got {k!r}")
        if k.startswith("grit."):
            raise GritUsageError(f"metadata key {k!r} is reserved")
        if isinstance(v, str):
            v = GGUFValue(ValueType.STRING, None, v)
        elif not isinstance(v, GGUFValue):
            raise GritUsageError(f"metadata {k!r}: a value is a str or a GGUFValue, got "
                                 f"{type(v).__name__}")
        if v.type not in ValueType.__members__.values() or (
                v.type == ValueType.ARRAY and v._buf is None and v.sub_type is None):
            raise GritUsageError(f"metadata {k!r}: value type {v.type} (sub-type "
                                 f"{v.sub_type}) is not a GGUF value type")
        out[k] = v
    return out


class _Raw:
    """A KV value's encoded bytes, written as they are."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = bytes(data)


def _writer_class(gguf):
    class Writer(gguf.GGUFWriter):
        def _pack_val(self, val, vtype, add_vtype, sub_type=None):
            if isinstance(val, _Raw):
                return (struct.pack("<I", int(vtype)) if add_vtype else b"") + val.data
            return super()._pack_val(val, vtype, add_vtype, sub_type)
    return Writer


def save_gguf(path, tensors, metadata=None, *, arch: str | None = None,
              relayout: bool = False) -> None:
    """Write ``{name: GritArray | ndarray | Inexpressible}`` as a GGUF file
    with gguf-py's GGUFWriter (docs/file-format.md, "GGUF").

    * A GritArray whose grade and placement are a ggml block type
      (:func:`native_type`) is stored as that ggml type, its block bytes, so
      that ggml runtimes and ``gguf.quants.dequantize`` read it (with
      ``relayout=True`` also a canonical Q8_0 or MXFP4 array, which then
      loads back in ggml's placement: same decode).  An NVFP4 array with a
      binary32 scale1 (:class:`Companion`) is stored as NVFP4 blocks when the
      mapping holds its companion tensor (as a loaded one does), or with
      ``relayout=True``, which adds the companion ``<base>.scale``; any other
      GritArray as a one-dimensional I8 tensor of its payload, with a
      warning naming the tensor, annotated by ``grit.desc.``/``grit.shape.``
      entries (and ``grit.layout.`` for hashed placement words).  Every
      GritArray has its ``grit.grade.`` entry; a tensor written as its ggml
      type needs no more, as it loads back as the same descriptor.
    * An ndarray of a dtype GGUF holds (F16, F32, F64, I8..I64) is stored as
      itself; float32 values that :func:`load` widened from BF16 (per
      ``tensors.ggml_types``) as BF16 again when exact.
    * An :class:`Inexpressible` record is carried through verbatim (type,
      shape, bytes).
    * ``metadata`` (``{key: str | GGUFValue}``; by default ``tensors.metadata``
      when ``tensors`` came from :func:`load`) becomes KV entries with their
      types and, for values read from a file, their exact bytes.  Keys under
      ``grit.`` are refused; ``general.architecture`` in it sets ``arch``
      (default "grit"), ``general.alignment`` the data alignment.

    The file appears atomically."""
    gguf = _gguf()
    path = os.fspath(path)
    if metadata is None:
        metadata = getattr(tensors, "metadata", None)
        if not isinstance(metadata, GGUFMetadata):
            metadata = None
    meta = _metadata(metadata)
    a_kv = meta.pop("general.architecture", None)
    if a_kv is not None:
        if a_kv.type != ValueType.STRING or not isinstance(a_kv.value, str):
            raise GritUsageError("metadata general.architecture must be a string")
        if arch is not None and arch != a_kv.value:
            raise GritUsageError(f"arch={arch!r} but metadata general.architecture is "
                                 f"{a_kv.value!r}")
        arch = a_kv.value
    al_kv = meta.pop("general.alignment", None)
    alignment = None
    if al_kv is not None:
        al = al_kv.value
        if al_kv.type != ValueType.UINT32 or not isinstance(al, int) or al <= 0 or al & (al - 1):
            raise GritUsageError("metadata general.alignment must be a UINT32 power of two")
        alignment = al
    sizes = {n: (b, t) for n, b, t in ggml_types().values()}
    src_types = getattr(tensors, "ggml_types", None) or {}
    plan: list[tuple[str, Any, Any]] = []    # (name, ndarray to write, raw ggml type | None)
    native: dict[str, str] = {}
    for name, v in tensors.items():
        if not isinstance(name, str) or not name:
            raise GritUsageError(f"tensor names are non-empty str, got {name!r}")
        if isinstance(v, GritArray):
            if any(x > _INT32_MAX for x in v.shape):
                raise GritUsageError(
                    f"tensor {name!r}: extent {max(v.shape)} does not fit the INT32 array this "
                    f"writer stores {KV_SHAPE}<name> as (at most {_INT32_MAX}); save it as "
                    "safetensors, whose shapes are 64-bit")
            nt = native_type(v, relayout=relayout)
            if nt is not None and not relayout and _scaled_k1(v) is not None and \
                    not any(c in tensors for c in companion_names(name)):
                nt = None     # NVFP4 + scale1 adds a companion tensor: only with relayout=True
            if nt is not None:
                t, blocks = nt
                b, s = sizes[t]
                native[name] = t
                plan.append((name, blocks.reshape(_byte_shape(v.shape, b, s)),
                             gguf.GGMLQuantizationType[t]))
                k1 = _scaled_k1(v)
                if k1 is not None:
                    extra = _companion_out(tensors, name, v, k1)
                    if extra is not None:
                        plan.append(extra)
            else:
                warnings.warn(f"tensor {name!r}: grade {v.grade.canonical} in this placement "
                              "is no ggml block type; stored as its GRIT payload in a 1-D I8 "
                              "tensor, which ggml runtimes cannot use", stacklevel=2)
                buf = np.frombuffer(v.payload(), np.int8) if v.nbytes else np.zeros(0, np.int8)
                plan.append((name, buf, None))
        elif isinstance(v, Inexpressible):
            if v.raw is None or v.ggml_type not in sizes or not v.shape:
                raise GritUsageError(f"tensor {name!r}: an Inexpressible record without its "
                                     "bytes cannot be written")
            if v.ggml_type not in gguf.GGMLQuantizationType.__members__:
                raise GritUsageError(f"tensor {name!r}: ggml type {v.ggml_type} is unknown to "
                                     "the installed gguf-py, which writes the file")
            b, s = sizes[v.ggml_type]
            shp = _byte_shape(tuple(v.shape), b, s)
            raw = _u8(v.raw)
            if v.shape[-1] % b or raw.size != int(np.prod(shp)):
                raise GritUsageError(f"tensor {name!r}: {raw.size} bytes do not fit "
                                     f"{v.ggml_type} of shape {tuple(v.shape)}")
            plan.append((name, raw.reshape(shp), gguf.GGMLQuantizationType[v.ggml_type]))
        elif isinstance(v, np.ndarray):
            if v.dtype.newbyteorder("<") not in [
                    np.dtype(x) for x in ("<f2", "<f4", "<f8", "i1", "<i2", "<i4", "<i8")]:
                raise GritUsageError(f"tensor {name!r}: GGUF holds F16/F32/F64/I8..I64 arrays, "
                                     f"not {v.dtype}")
            x = np.ascontiguousarray(v.astype(v.dtype.newbyteorder("<")))
            if src_types.get(name) == "BF16" and x.dtype == np.float32 and x.ndim:
                u = x.view(np.uint32)
                if not (u & np.uint32(0xFFFF)).any():
                    bf = (u >> np.uint32(16)).astype("<u2")
                    plan.append((name, bf.view(np.uint8).reshape(*x.shape[:-1], -1),
                                 gguf.GGMLQuantizationType.BF16))
                    continue
            plan.append((name, x, None))
        else:
            raise GritUsageError(f"tensor {name!r}: expected a GritArray, a numpy array or an "
                                 f"Inexpressible record, got {type(v).__name__}")

    def write(tmp):
        w = _writer_class(gguf)(tmp, arch or "grit")
        if alignment is not None:
            w.add_custom_alignment(alignment)
        for k, kv in meta.items():
            val = _Raw(kv.raw) if kv.raw is not None else kv.value
            w.add_key_value(k, val, gguf.GGUFValueType(int(kv.type)),
                            None if kv.sub_type is None else gguf.GGUFValueType(int(kv.sub_type)))
        w.add_string(KV_SCHEMA, GGUF_SCHEMA)
        layouts: dict[int, str] = {}
        for name, v in tensors.items():
            if isinstance(v, GritArray):
                d = v.descriptor
                # a tensor written as its ggml type loads back as this very
                # descriptor unannotated (native_type): only its grade is noted
                if name not in native:
                    w.add_string(KV_DESC + name, d.hex())
                    w.add_array(KV_SHAPE + name, [int(x) for x in v.shape])
                w.add_string(KV_GRADE + name, v.grade.canonical)
                for word in d.placements:
                    if placement_class(word) in (CLASS_HASHED, CLASS_OPAQUE):
                        e = resolve_layout(word)
                        if e is not None:
                            layouts[word] = str(e)
        for word, e in sorted(layouts.items()):
            w.add_string(f"{KV_LAYOUT}0x{word:016x}", e)
        for name, arr, raw_type in plan:
            w.add_tensor(name, arr, raw_dtype=raw_type)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    atomic_write(path, write, by_name=True)
