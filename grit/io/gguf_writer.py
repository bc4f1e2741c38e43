"""GGUF files written: GRIT arrays as ggml block types (``save_gguf``).

The writing half of grit.io.gguf: :func:`native_type` finds the ggml block
type an array is (its grade and placement, or the canonical placement of a
converted type whose implicit constants hold) and builds its blocks; every
other GritArray is written as its GRIT payload, annotated by ``grit.*`` KV
entries that grit.io.gguf reads back (docs/file-format.md, "GGUF").
"""
from __future__ import annotations

import os
import struct
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .._files import atomic_write
from ..array import GritArray, canonical
from ..errors import GritError, GritUsageError
from ..facts import is_canonical
from ..ggml import PLAIN, TYPES, Blocks
from ..placement.expr import resolve_layout
from ..placement.words import CLASS_HASHED, CLASS_OPAQUE, placement_class
from .gguf import (KV_CONVERT, KV_DESC, KV_GRADE, KV_LAYOUT, KV_SCHEMA,
                   KV_SHAPE, GGUF_SCHEMA, GGUFMetadata, GGUFValue, Inexpressible, _u8,
                   companion_names, nvfp4_scaled_grade)
from ..dtypes import bf16_narrowed, st_dtype_of
from .gguf_file import ValueType, ggml_types

__all__ = ["native_kind", "save_gguf", "native_type", "gguf_py"]


def gguf_py():
    """The gguf package (gguf-py), imported on first use, or a
    GritUsageError saying how to install it."""
    try:
        import gguf  # noqa: PLC0415 - gguf-py is heavy to import; only writing GGUF needs it
    except ImportError:  # pragma: no cover - exercised only without the package
        raise GritUsageError("writing GGUF files needs the gguf package (gguf-py): "
                             "pip install gguf") from None
    return gguf


_INT32_MAX = (1 << 31) - 1


def _scaled_k1(a: GritArray) -> int | None:
    """k1 when ``a`` is an NVFP4 tensor with its companion scale as scale1
    (:func:`nvfp4_scaled_grade` up to the grade id, canonical placement,
    group axis last)."""
    g = a.grade
    if g["s1"] != "binary32" or g["e"] != "e2m1" or not a.shape or a.shape[-1] % 64:
        return None
    try:
        k1 = int(g["k1"] or "")
    except ValueError:
        return None
    want = nvfp4_scaled_grade(k1).descriptor(group_axis=len(a.shape) - 1)
    if a.descriptor.replace(grade_id=0) != want.replace(grade_id=0):
        return None
    return k1


def _companion_shape(a: GritArray, k1: int) -> tuple[int, ...]:
    if k1 == 0:
        return (1,)
    for j in range(1, len(a.shape)):
        if int(np.prod(a.shape[j:], dtype=np.int64)) // 16 == k1:
            return tuple(a.shape[:j])
    return (a.size // 16 // k1,)


def _same_planes(a, b) -> bool:
    return all(bytes(x) == bytes(y) for x, y in zip(a, b))


def native_type(a: GritArray, *, relayout: bool = False) -> tuple[str, np.ndarray] | None:
    """(ggml type name, the tensor's block bytes) when ``a`` is written as a
    ggml block type (grit.ggml's records); None otherwise.

    Without ``relayout``, ``a``'s descriptor must be one :func:`load` gives
    a tensor of that type — up to the grade id (``BlockType.carries``: a
    grade that differs only in its encode rule decodes the same) — with the
    group axis last: the type's zero-copy placement (the data plane is the
    blocks), or for a converted type the canonical one, whose bits the
    record moves back into blocks; and an NVFP4 array with its companion
    scale as scale1 (:class:`Companion`) gives its NVFP4 blocks (the scale1
    plane is the companion tensor, which :func:`save_gguf` writes beside
    them).  With ``relayout=True`` any placement qualifies: the array is
    relayouted to the canonical placement and its planes moved into the
    type's blocks.  Either way the blocks must give back ``a``'s canonical
    planes bit for bit (a converted type's implicit constants hold, no code
    is wider than its field), or the answer is None."""
    got = _native(a, relayout)
    return None if got is None else got[:2]


def native_kind(a: GritArray) -> str | None:
    """The name of the ggml type ``native_type(a, relayout=True)`` gives,
    without building the blocks where :func:`_invertible_kind` knows it
    (tests/test_ggml_unblock.py checks the two answers agree)."""
    t = _invertible_kind(a)
    if t is not None:
        return t
    got = native_type(a, relayout=True)
    return None if got is None else got[0]


def _invertible_kind(a: GritArray) -> str | None:
    """The invertible ggml type (NVFP4, MXFP4, Q8_0: its blocks hold any planes)
    canonical array ``a`` is written as, known from its descriptor and
    shape; None: ``a`` is not canonical, or no such type."""
    d = a.descriptor
    if not a.shape or d.group_axis != len(a.shape) - 1 or not is_canonical(d):
        return None
    t = TYPES["NVFP4"] if _scaled_k1(a) is not None else \
        next((t for t in TYPES.values() if t.carries(d, canonical=True)), None)
    if t is not None and t.invertible and a.shape[-1] % t.block_elems == 0:
        return t.name
    return None


#: the ggml blocks :class:`_LazyBlocks` builds and writes at a time
WRITE_BLOCKS = 1 << 15


class _Lazy:
    """A GritArray's ggml blocks as GGUFWriter takes a tensor (shape, dtype,
    nbytes, ``tofile``), built when the file reaches them (:meth:`write`)
    and the array let go once written; ``release`` is called with the
    planes read (the pages of a mapped source given back)."""

    def __init__(self, a: GritArray, kind: str, shape: tuple[int, ...], release=None) -> None:
        self.a: GritArray | None = a
        self.kind, self.shape, self.release = kind, shape, release
        self.dtype = np.dtype(np.uint8)
        self.nbytes = int(np.prod(shape, dtype=np.int64))

    def tofile(self, f) -> None:
        a, self.a = self.a, None
        if a is None:
            raise GritError(f"the {self.kind} blocks of a tensor are written twice")
        self.write(a, f)

    def changed(self) -> GritError:
        return GritError(f"the {self.kind} blocks of a tensor changed while written")

    def write(self, a: GritArray, f) -> None:
        raise NotImplementedError


class _LazyBlocks(_Lazy):
    """A canonical array of an invertible type (:func:`_invertible_kind`),
    its blocks built and written :data:`WRITE_BLOCKS` at a time: a deferred
    array's planes are built for the write alone (``transient_planes``);
    ``release`` has each part of the planes once its blocks are written."""

    def write(self, a: GritArray, f) -> None:
        t = TYPES[self.kind]
        planes = a.transient_planes()
        if _scaled_k1(a) is not None:       # NVFP4 + companion: the blocks, scale1 apart
            planes = (*planes[:2], b"", b"")
        bufs = [_u8(p) for p in planes]
        nb = a.size // t.block_elems
        if nb * t.block_bytes != self.nbytes or any(b.size % max(nb, 1) for b in bufs):
            raise self.changed()
        per = [b.size // max(nb, 1) for b in bufs]          # each plane's bytes per block
        for s in range(0, nb, WRITE_BLOCKS):
            e = min(nb, s + WRITE_BLOCKS)
            part = [b[s * k:e * k] for b, k in zip(bufs, per)]
            try:
                blocks = t.write(part, e - s)
            except (ValueError, GritError):
                raise self.changed() from None
            blocks.tofile(f)
            if self.release is not None:
                for x in part:
                    if x.size:
                        self.release(x)
        if self.release is not None:        # and the whole planes: a fault maps pages
            for x in bufs:                  # around it, some of a part released before
                if x.size:
                    self.release(x)


def _now(a: GritArray) -> GritArray:
    """``a`` with its planes: a deferred array built for this use alone
    (``transient_planes``, so it keeps none) unless its planes come from
    ggml blocks (``source``), which :func:`_native` reads as they are."""
    if a.source is not None:
        return a
    return GritArray(a.descriptor, a.shape, a.transient_planes())


class _LazyNative(_Lazy):
    """A GritArray of a ggml type that is not invertible (Q4_K …:
    :func:`_native` builds its blocks and reads them back), built whole
    when the file reaches it."""

    def write(self, a: GritArray, f) -> None:
        x = _now(a)
        got = _native(x, True)
        if got is None or got[0] != self.kind or got[1].size != self.nbytes:
            raise self.changed()
        got[1].tofile(f)
        if self.release is not None and x.source is None:
            for p in x.planes:
                if len(memoryview(p)):
                    self.release(p)


class _Written:
    """An ndarray as GGUFWriter takes a tensor, handed to ``release`` once
    written (the pages of a mapped source given back)."""

    def __init__(self, x: np.ndarray, release) -> None:
        self.x: np.ndarray | None = x
        self.shape, self.dtype, self.nbytes = x.shape, x.dtype, x.nbytes
        self.release = release

    def tofile(self, f) -> None:
        x, self.x = self.x, None
        if x is None:
            raise GritError("a tensor is written twice")
        x.tofile(f)
        if x.size and x.flags.c_contiguous:
            self.release(x.reshape(-1).view(np.uint8))


class LazyPlain:
    """A plain tensor :func:`save_gguf` writes as an ndarray of ``dtype`` and
    ``shape``, built by ``build()`` when the file reaches it and let go once
    written (so a writer holds no more than the tensor being written)."""

    def __init__(self, shape: tuple[int, ...], dtype, build: Callable[[], np.ndarray]) -> None:
        self.shape, self.dtype, self.build = tuple(shape), np.dtype(dtype), build


class _WrittenLazy:
    """A :class:`LazyPlain` as GGUFWriter takes a tensor: its bytes (a BF16
    one's as byte rows), built and checked against the planned shape when
    the file reaches it."""

    def __init__(self, v: LazyPlain, bf16: bool) -> None:
        self.v, self.bf16 = v, bf16
        self.shape = _byte_shape(v.shape, 1, 2) if bf16 else v.shape
        self.dtype = np.dtype(np.uint8) if bf16 else v.dtype.newbyteorder("<")
        self.nbytes = int(np.prod(v.shape, dtype=np.int64)) * v.dtype.itemsize

    def tofile(self, f) -> None:
        x = self.v.build()
        if not isinstance(x, np.ndarray) or x.shape != self.v.shape or x.dtype != self.v.dtype:
            raise GritError("a deferred plain tensor was built with another shape or dtype")
        y = np.ascontiguousarray(x)
        if y.dtype.kind in "fiu":
            y = y.astype(y.dtype.newbyteorder("<"), copy=False)
        y.tofile(f)


def _native(a: GritArray, relayout: bool):
    """:func:`native_type`, with the array whose planes gave the blocks
    (``a`` or its canonical form: the companion scale is its scale1)."""
    d = a.descriptor
    if not a.shape or d.group_axis != len(a.shape) - 1:
        return None
    t = next((t for t in TYPES.values() if t.carries(d) or t.carries(d, canonical=True)), None)
    if t is not None and a.shape[-1] % t.block_elems == 0:
        nb = a.size // t.block_elems
        if t.zero_copy and t.carries(d):     # the blocks as they lie
            if a.plane_bytes[1:] != (0, 0, 0) or a.plane_bytes[0] != nb * t.block_bytes:
                return None
            return t.name, _u8(a.planes[0]), a
        src = a.source
        if isinstance(src, Blocks) and src.type_name == t.name:
            # loaded from blocks of this type: they are the bytes (the general path
            # below rebuilds the same ones, tests/test_gguf_roundtrip.py)
            return t.name, _u8(src.data), a
    if not relayout and not (t is not None and not t.zero_copy) and _scaled_k1(a) is None:
        return None
    if is_canonical(d):
        c = a
    elif not relayout:
        return None
    else:
        try:
            c = canonical(a)
        except GritError:                   # an opaque placement: no way back
            return None
    if _scaled_k1(c) is not None:           # NVFP4 + companion: the blocks, scale1 apart
        t, planes = TYPES["NVFP4"], (*c.planes[:2], b"", b"")
    else:
        t = next((t for t in TYPES.values() if t.carries(c.descriptor, canonical=True)), None)
        if t is None or a.shape[-1] % t.block_elems:
            return None
        planes = c.planes
    nb = a.size // t.block_elems
    try:
        blocks = t.write(planes, nb)
    except (ValueError, GritError):
        return None
    if t.invertible:                        # the blocks hold every code: nothing to check
        return t.name, blocks.reshape(-1), c
    # the blocks must give back the planes they came from: a converted type's
    # implicit constants hold (Q4_0's zero point 8, ...), no code was cut
    back = t.read(blocks)
    if t.zero_copy:
        back = canonical(GritArray(t.descriptor(len(a.shape) - 1), a.shape, back)).planes
    if not _same_planes(back, planes):
        return None
    return t.name, blocks.reshape(-1), c


def _companion_out(tensors, name: str, a: GritArray, k1: int):
    """The companion tensor save_gguf writes for NVFP4 array ``a`` (its
    scale1 plane), or None when ``tensors`` holds it already — with the same
    values, or GritUsageError."""
    s1 = np.frombuffer(a.transient_planes()[2], "<f4")   # a deferred array keeps none
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


def _plain_type(dt: np.dtype) -> str | None:
    """The unquantised ggml type of numpy dtype ``dt`` (either byte order;
    ml_dtypes' bfloat16, or the type carrying its bits, as BF16), or None
    (grit.ggml.PLAIN)."""
    if st_dtype_of(dt) == "BF16":
        return "BF16"
    for name, spec in PLAIN.items():
        if name == "BF16":
            continue
        want = np.dtype(spec)
        if dt == want or (dt.kind in "fi" and dt.newbyteorder("<") == want.newbyteorder("<")):
            return name
    return None


def _bf16_bytes(u: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """bfloat16 bit patterns (uint16) of an array of ``shape`` as the byte
    rows GGUFWriter takes for a BF16 tensor (two bytes per element)."""
    shape = tuple(shape) or (1,)
    return np.ascontiguousarray(u, "<u2").view(np.uint8).reshape(*shape[:-1], 2 * shape[-1])


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
              relayout: bool = False, notes: Mapping[str, str] | None = None,
              release: Callable[[Any], None] | None = None, data: bool = True,
              at: Mapping[str, tuple[int, int]] | None = None,
              written: Callable[[str, int], None] | None = None,
              fsync: bool = True) -> None:
    """Write ``{name: GritArray | ndarray | Inexpressible}`` as a GGUF file
    with gguf-py's GGUFWriter (docs/file-format.md, "GGUF").

    * A GritArray whose grade and placement are a ggml block type
      (:func:`native_type`) is stored as that ggml type, its block bytes, so
      that ggml runtimes and ``gguf.quants.dequantize`` read it, with the
      logical shape (with ``relayout=True`` also such an array in any other
      placement, e.g. what ``grit.encode`` makes, which then loads back in
      ggml's placement: same decode).  An NVFP4 array with a
      binary32 scale1 (:class:`Companion`) is stored as NVFP4 blocks when the
      mapping holds its companion tensor (as a loaded one does), or with
      ``relayout=True``, which adds the companion ``<base>.scale``; any other
      GritArray as a one-dimensional I8 tensor of its payload, with a
      warning naming the tensor, annotated by ``grit.desc.``/``grit.shape.``
      entries (and ``grit.layout.`` for hashed placement words).  Every
      GritArray has its ``grit.grade.`` entry; a tensor written as its ggml
      type needs no more: it loads back with that grade.
    * An ndarray of a dtype GGUF holds (F16, F32, F64, I8..I64) is stored as
      itself, a bfloat16 one (ml_dtypes) as BF16; float32 values that
      :func:`load` widened from BF16 (per ``tensors.ggml_types``) as BF16
      again when exact.
    * An :class:`Inexpressible` record is carried through verbatim (type,
      shape, bytes).
    * ``metadata`` (``{key: str | GGUFValue}``; by default ``tensors.metadata``
      when ``tensors`` came from :func:`load`) becomes KV entries with their
      types and, for values read from a file, their exact bytes.  Keys under
      ``grit.`` are refused; ``general.architecture`` in it sets ``arch``
      (default "grit"), ``general.alignment`` the data alignment.
    * ``notes`` (``{key: str}``, every key under ``grit.convert.``): the
      records grit convert keeps of its source, written as STRING entries.
    * ``release`` (``buffer -> None``): called with the bytes read of each
      tensor once they are written (grit convert gives a mapped source's
      pages back with it, so memory stays at a tensor's).

    With ``relayout=True`` an NVFP4 or MXFP4 array's blocks are built as
    the file is written, a bounded number at a time; a deferred array's
    planes are built for that alone (``transient_planes``), never kept.

    Positioned writes (:func:`_positioned`): ``data=False`` writes the file
    with every tensor's data left a hole (a sparse file of the full size,
    its header final); ``at`` (``{name: (offset, nbytes)}``, the file's own
    tensor infos) writes no header but each of ``tensors``' data into the
    existing file ``path`` at its offset, so a file can be filled a few
    tensors at a time, in any order, and end as the one call's bytes.

    The file is written as :func:`grit._files.atomic_write` writes one, and
    flushed to disk before it is moved into place unless ``fsync=False``
    (grit convert, which flushes its output folder itself where asked).

    ``written(name, nbytes)`` is called as each tensor's data are written (a
    progress bar's feed; not for the holes of ``data=False``).

    The file appears atomically (but with ``at``: in place)."""
    gguf = gguf_py()
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
    for k, v in (notes or {}).items():
        if not (isinstance(k, str) and k.startswith(KV_CONVERT) and len(k) > len(KV_CONVERT)
                and isinstance(v, str)):
            raise GritUsageError(f"notes: {k!r}: keys are {KV_CONVERT}<name>, values str")
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
            kind = _invertible_kind(v) if relayout else None
            # (built for the check alone with relayout: written by _LazyNative)
            nt = None if kind is not None else _native(_now(v) if relayout else v, relayout)
            if nt is not None and not relayout and _scaled_k1(nt[2]) is not None and \
                    not any(c in tensors for c in companion_names(name)):
                nt = None     # NVFP4 + scale1 adds a companion tensor: only with relayout=True
            if kind is not None or nt is not None:
                t, c = (kind, v) if kind is not None else (nt[0], nt[2])
                b, s = sizes[t]
                native[name] = t
                shp = _byte_shape(v.shape, b, s)   # blocks built as the file is written, or now
                blocks = _LazyBlocks(v, t, shp, release) if kind is not None else \
                    _LazyNative(v, t, shp, release) if relayout else nt[1].reshape(shp)
                plan.append((name, blocks, gguf.GGMLQuantizationType[t]))
                k1 = _scaled_k1(c)
                if k1 is not None:
                    extra = _companion_out(tensors, name, c, k1)
                    if extra is not None:
                        plan.append(extra)
                nt = c = None                      # (the blocks and planes built: let go)
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
        elif isinstance(v, LazyPlain):
            plain = _plain_type(v.dtype)
            if plain is None or not v.shape:
                raise GritUsageError(f"tensor {name!r}: a deferred tensor is F16/BF16/F32/F64/"
                                     f"I8..I64 of at least one axis, not {v.dtype}")
            plan.append((name, _WrittenLazy(v, plain == "BF16"),
                         gguf.GGMLQuantizationType.BF16 if plain == "BF16" else None))
        elif isinstance(v, np.ndarray):
            plain = _plain_type(v.dtype)
            if plain is None:
                raise GritUsageError(f"tensor {name!r}: GGUF holds F16/BF16/F32/F64/I8..I64 "
                                     f"arrays, not {v.dtype}")
            if plain == "BF16":      # bfloat16 (or its bits): as they are
                u = np.ascontiguousarray(v).reshape(-1).view("<u2")
                plan.append((name, _bf16_bytes(u, v.shape), gguf.GGMLQuantizationType.BF16))
                continue
            x = np.ascontiguousarray(v.astype(v.dtype.newbyteorder("<"), copy=False))
            if src_types.get(name) == "BF16" and x.dtype == np.float32 and x.ndim:
                bf = bf16_narrowed(x)
                if bf is not None:
                    plan.append((name, _bf16_bytes(bf, x.shape), gguf.GGMLQuantizationType.BF16))
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
        for k, v in (notes or {}).items():
            w.add_string(k, v)
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
            if release is not None and isinstance(arr, np.ndarray):
                arr = _Written(arr, release)
            if written is not None and data:
                arr = _Reported(arr, name, written)
            w.add_tensor(name, arr if data else _Hole(arr), raw_dtype=raw_type)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    if at is not None:
        _positioned(path, plan, at, release, written)
        return
    atomic_write(path, write, by_name=True, fsync=fsync)


class _Hole:
    """A tensor as GGUFWriter takes one whose data are not written: the
    file is extended past them (a hole, read as zeros until written)."""

    def __init__(self, x) -> None:
        self.shape, self.dtype, self.nbytes = x.shape, x.dtype, x.nbytes

    def tofile(self, f) -> None:
        f.seek(self.nbytes, os.SEEK_CUR)
        f.truncate()


class _Reported:
    """A tensor as GGUFWriter takes one (``x``'s shape, dtype, bytes), whose
    name and byte count go to ``written`` once its data are written (a
    progress bar's feed)."""

    def __init__(self, x, name: str, written: Callable[[str, int], None]) -> None:
        self.x, self.name, self.written = x, name, written
        self.shape, self.dtype, self.nbytes = x.shape, x.dtype, x.nbytes

    def tofile(self, f) -> None:
        self.x.tofile(f)
        self.written(self.name, int(self.nbytes))


def _positioned(path: str, plan: list, at: Mapping[str, tuple[int, int]], release,
                written: Callable[[str, int], None] | None = None) -> None:
    """Each planned tensor's data written into the existing GGUF ``path`` at
    ``at[name]`` = (offset, nbytes), which must be the bytes it writes."""
    with open(path, "r+b") as f:
        for name, arr, _ in plan:
            off, n = at.get(name, (-1, -1))
            if off < 0 or int(arr.nbytes) != n:
                raise GritError(f"tensor {name!r} ({arr.nbytes} bytes) is not one {path} "
                                "holds in that size")
            if release is not None and isinstance(arr, np.ndarray):
                arr = _Written(arr, release)
            f.seek(off)
            arr.tofile(f)
            f.flush()
            if f.tell() != off + n:
                raise GritError(f"tensor {name!r}: {f.tell() - off} bytes written, not {n}")
            if written is not None:
                written(name, n)
