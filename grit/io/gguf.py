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
(grit.io.gguf_writer)
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
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .. import descriptor as D
from .._files import MappedTensors
from ..array import GritArray, canonical
from ..dtypes import bf16_widened
from ..check import check as _check
from ..errors import GritError, GritGradeError, GritUsageError
from ..formats import REGISTERED as _FORMATS, fmt_decode
from ..grade import Grade, lookup_grade, register_grade
from ..ggml import (CONVERTED, INEXPRESSIBLE, PLAIN, TYPES, ZERO_COPY, Blocks, unblocked)
from ..placement.expr import (layout_word, parse_layout, register_layout)
from ..placement.words import REGISTERED
from .gguf_file import (GGUF_MAGIC, GGUFField, GGUFFile, TensorInfo, ValueType, _Cursor,
                        header_bytes, problem, read_gguf)
from .gguf_file import read_source as _read_file_source
from .source import ByteSource, Span
from .problems import Problem, ProblemKind as K, Tally, raise_first
from .safetensors import CheckFailed, renamed_error

__all__ = ["load", "read", "read_source", "read_files", "Unread", "Inexpressible",
           "GGUFTensors", "GGUFContents", "GGUFValue", "GGUFMetadata", "metadata_of",
           "GGML_GRADES", "INEXPRESSIBLE", "ggml_placement", "KV_DESC", "KV_SHAPE", "KV_GRADE",
           "KV_LAYOUT", "KV_SCHEMA", "KV_DIGEST", "KV_CONVERT", "GGUF_MAGIC", "Companion",
           "COMPANION_SUFFIX",
           "companion_names", "companion_rounding", "nvfp4_scaled_grade", "converted",
           "nvfp4_scale_disagreements", "leading", "block_span"]

_W = {n: w for n, (w, _) in REGISTERED.items()}


# the ggml block types: one record each in grit.ggml (which registers the
# zero-copy types' layout expressions, so a loaded array's placement words resolve)


def ggml_placement(name: str) -> tuple[int, int, int] | None:
    """(placement_data, placement_scale, placement_meta) of a zero-copy ggml
    type, or None when the type is converted into the canonical placement."""
    t = TYPES.get(name)
    return None if t is None else t.placement


#: ggml type name -> the grade string of its GRIT array (grit.ggml's records)
GGML_GRADES: dict[str, str] = {n: t.grade_text for n, t in TYPES.items()}
#: the numpy type of each unquantised ggml type read as itself (BF16 apart:
#: widened to float32)
_PLAIN = {n: np.dtype(v) for n, v in PLAIN.items() if n != "BF16"}


def converted(name: str, blocks: np.ndarray, shape) -> GritArray:
    """The GRIT array of ``(nb, block_bytes)`` blocks of ggml type ``name``
    holding an array of ``shape`` (ggml's ne[0] the last axis): the blocks
    in place for a zero-copy type, its canonical planes for a converted one
    (grit.ggml's record, ``read``)."""
    t = TYPES[name]
    shape = tuple(shape)
    return GritArray(t.descriptor(group_axis=len(shape) - 1), shape, t.read(blocks))


def leading(a: GritArray, rows: int) -> GritArray | None:
    """The first ``rows`` (at least one) along axis 0 of a converted tensor
    :func:`read` loaded (its ``.source`` blocks), converting only their
    blocks — the leading rows are a prefix of the blocks; None for any other
    array."""
    src = a.source
    if not isinstance(src, Blocks) or src.type_name not in CONVERTED or len(a.shape) < 2:
        return None
    ct = CONVERTED[src.type_name]
    sub = (max(1, min(int(rows), a.shape[0])), *a.shape[1:])
    nb = int(np.prod(sub, dtype=np.int64)) // ct.block_elems
    raw = _u8(src.data)[:nb * ct.block_bytes]
    return converted(src.type_name, raw.reshape(nb, ct.block_bytes), sub)


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
    if got.tensors.ggml_types.get(name) not in ZERO_COPY or \
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
        return converted(name, raw.reshape(-1, type_size), shape).planes
    return GritArray.deferred(TYPES[name].descriptor(group_axis=len(shape) - 1), shape,
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
    #: one shard's tensors of a split model (grit.io.gguf_split.views): the
    #: whole model's, where a companion scale in another shard is found
    model: "GGUFTensors | None" = None

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
    (``raw``), so that ``grit.io.gguf_writer.save_gguf`` writes them back unchanged — nested
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
    #: one shard of a split model (grit.io.gguf_split.views): the first
    #: shard, whose KV entries are the model's (None: ``file`` is the model)
    model: GGUFFile | None = None

    @property
    def kv(self) -> GGUFFile:
        """The file whose KV entries are the model's."""
        return self.model if self.model is not None else self.file

    @property
    def parsed(self) -> bool:
        return self.file.parsed


def _tensor(f: GGUFFile, t: TensorInfo, lazy: bool = False):
    name = t.ggml_type
    shape = t.shape
    if f.buf is None:
        return _unread_tensor(f, t)
    if name in _PLAIN:
        return f.data(t, _PLAIN[name]).reshape(shape)
    if name == "BF16" and lazy:
        return Unread(t.name, name, shape, lambda: _tensor(f, t))
    if name == "BF16":
        out = bf16_widened(f.data(t, np.uint16)).reshape(shape)
        out.flags.writeable = False
        return out
    raw = f.data(t)
    if name in ZERO_COPY:
        return converted(name, raw, shape)
    if name in CONVERTED:
        return _deferred(name, raw, t.type_size, shape)
    reason = INEXPRESSIBLE.get(name, f"ggml type {name} has no GRIT v1 mapping in this version")
    return Inexpressible(t.name, name, shape, reason, raw)



@dataclass(frozen=True)
class Unread:
    """A plain tensor (F32, F16, BF16, F64, the integer types) of a file
    read through a source without a zero-copy view (a remote file), not
    read by :func:`read_source`, or a BF16 tensor :func:`read_files` leaves
    to be widened (``lazy``): ``read()`` reads it, giving the array
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
    if name in ZERO_COPY:
        d = ZERO_COPY[name].descriptor(group_axis=len(shape) - 1)
        _check(d, shape, (t.nbytes, 0, 0, 0), level=1)
        return GritArray.deferred(d, shape, lambda: (f.data(t), b"", b"", b""))
    if name in CONVERTED:
        ts = t.type_size

        def build():
            return converted(name, f.data(t).reshape(-1, ts), shape).planes
        return GritArray.deferred(CONVERTED[name].descriptor(group_axis=len(shape) - 1), shape,
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
    (differ, pairs) of :func:`companion_rounding` for its values.  An
    attached array's planes are built from ``blocks`` (the tensor as it
    lies: an NVFP4 array whose one plane is its blocks, read on first use)
    and ``scale1`` (the companion's values as the level-1 scale plane): its
    codes and scales are the blocks' direct inverse (``grit.ggml.unblocked``),
    then ``scale1``, then no meta."""

    tensor: str
    scale: str | None
    attached: bool
    k1: int | None = None
    reason: str = ""
    rounding: tuple[int, int] = (0, 0)
    blocks: Any = field(default=None, repr=False, compare=False)
    scale1: Any = field(default=None, repr=False, compare=False)


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


def _attach(out: "GGUFTensors", annotated, grades) -> None:
    """Pair every NVFP4 tensor with its companion scale (see above); the
    pair takes the tensor's annotated grade where it is one with the same
    decode (:func:`_regraded`)."""
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

        def build(a=a, s1=s1):  # (Companion.blocks and scale1 say what this reads)
            # the blocks' codes and E4M3 scales, moved (by NVFP4's direct inverse)
            one = unblocked(a) or canonical(a).planes
            return one[0], one[1], s1, b""
        out[name] = _regraded(GritArray.deferred(d, a.shape, build), grades.get(name))
        out.companions[name] = Companion(name, cname, True, k1,
                                         rounding=companion_rounding(c),
                                         blocks=a, scale1=s1)


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


def read_files(files: Sequence[GGUFFile], *, lazy: bool = False) -> GGUFContents:
    """The tensors of several walked GGUF files read as one file's: the KV
    entries and the ``grit.*`` annotations of the first, the tensors of
    each in turn (an NVFP4 tensor paired with its companion in any of
    them), every file's problems (a model in gguf-split's shards:
    ``grit.io.gguf_split``, which checks the files are the shards of one
    model).  ``file`` is the first.  ``lazy``: a BF16 tensor, which is
    widened into new memory, is an :class:`Unread` record widened when
    read (a reader holding one tensor at a time)."""
    if not files:
        raise GritUsageError("no GGUF file to read")
    return _contents(files[0], tuple(files[1:]), lazy)


def _contents(f: GGUFFile, more: tuple[GGUFFile, ...] = (), lazy: bool = False
              ) -> GGUFContents:
    path = f.path
    problems = [*f.problems, *(p for g in more for p in g.problems)]
    out = GGUFTensors()
    out.ggml_types = {}
    out.metadata = GGUFMetadata()
    out.companions = {}
    if not all(g.parsed for g in (f, *more)):
        return GGUFContents(f, out, problems)
    out.metadata = metadata_of(f)
    tally = Tally(problems)
    notes = _annotations(f, tally)
    for g, t in ((g, t) for g in (f, *more) for t in g.tensors):
        path = g.path
        try:
            v = _annotated(g, t, notes) if t.name in notes["desc"] else _tensor(g, t, lazy)
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
        if t.name not in notes["desc"]:
            v = _regraded(v, notes["grade"].get(t.name))
        out[t.name] = v
        out.ggml_types[t.name] = t.ggml_type
    path = f.path
    _attach(out, notes["desc"], notes["grade"])
    for name in sorted(set(notes["desc"]) - f.names.union(*(g.names for g in more))):
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
    return loaded(read(path), strict=strict)


def loaded(got: GGUFContents, *, strict: bool = False) -> GGUFTensors:
    """What :func:`load` returns of contents read: the first problem
    raised, and under ``strict`` an Inexpressible or CheckFailed record."""
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
#: the records ``grit convert --to gguf`` keeps of its source, which the way
#: back (a GGUF source) reads: ``grit.convert.dtype.<tensor>`` the source's
#: dtype of a plain tensor written wider, ``grit.convert.divisor.<tensor>`` the
#: bits (8 hex digits) of the per-tensor divisor an NVFP4 companion is the
#: reciprocal of (docs/convert.md, "GGUF")
KV_CONVERT = "grit.convert."
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
    grades: dict[str, Grade] = {}
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
            continue
        grades[name] = g
    for v in layouts.values():
        register_layout(v)
    return {"desc": descs, "shape": notes["shape"], "grade": grades}


def _regraded(a, g: Grade | None):
    """A ggml-typed array as grade ``g`` (its ``grit.grade.`` annotation)
    when ``g`` differs from the type's grade only in the encode fields (the
    same descriptor but for the grade id: the same decode of the same
    bytes), as grit.io.gguf_writer writes an array of such a grade;
    otherwise ``a`` itself.  The planes are ``a``'s, built on first use."""
    if not isinstance(a, GritArray) or g is None:
        return a
    d = a.descriptor
    if g.id == d.grade_id:
        return a
    try:
        want = g.descriptor(group_axis=d.group_axis, placement_data=d.placement_data,
                            placement_scale=d.placement_scale,
                            placement_meta=d.placement_meta)
    except GritError:
        return a
    if want.replace(flags=want.flags | (d.flags & D.F_INTERLEAVED)) != d.replace(grade_id=g.id):
        return a
    return GritArray.deferred(want.replace(flags=d.flags), a.shape, a.transient_planes,
                              source=a.source)


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


def _u8(p) -> np.ndarray:
    return np.frombuffer(p, np.uint8) if len(memoryview(p)) else np.zeros(0, np.uint8)
