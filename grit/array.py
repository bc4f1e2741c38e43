"""The GRIT array value: (descriptor, shape, planes), checked on construction.

A :class:`GritArray` is the quadruple of §0 with the grade resolved from the
descriptor's grade_id.  Construction runs ``grit.check`` at level 1 (§7.3
steps 1–4, O(1), no plane byte is read), so an array that exists has planes
of exactly the sizes its descriptor and shape require.  The planes are kept as
given — ``bytes`` stay ``bytes``; any other buffer (numpy array, ``mmap``,
``memoryview`` slice) is wrapped in a read-only byte view, never copied — or,
for :meth:`GritArray.deferred`, built on first use.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from . import crossings, ggml
from ._files import check_mapped
from . import descriptor as D
from .check import as_shape, check, diagnose, plane_sizes
from .codec.decode import decode_canonical
from .errors import Detail, GritSizeError, GritUsageError, Status, error_for
from .facts import PLANE_NAMES, numel_of
from .fingerprint import base32_encode, display_prefix
from .fingerprint import digest as _digest
from .fingerprint import gid as _gid
from .grade import Grade
from .placement import laws
from .placement import relayout as _relayout

__all__ = ["GritArray", "PLANE_NAMES", "concat", "require_metadata_order", "decode",
           "canonical", "relayout"]



_as_descriptor = D.Descriptor.coerce


def _as_plane(i: int, p):
    """A zero-copy, read-only byte view of one plane (``bytes`` kept as is)."""
    if p is None:
        return b""
    if isinstance(p, bytes):
        return p
    try:
        mv = memoryview(p)
    except TypeError:
        raise GritUsageError(
            f"plane {i} ({PLANE_NAMES[i]}): expected a bytes-like object, "
            f"got {type(p).__name__}") from None
    if not mv.c_contiguous:
        raise GritUsageError(f"plane {i} ({PLANE_NAMES[i]}): buffer is not C-contiguous")
    if mv.ndim != 1 or mv.format != "B":
        mv = mv.cast("B") if mv.ndim <= 1 else mv.cast("B", (mv.nbytes,))
    return mv.toreadonly()


class GritArray:
    """A checked GRIT array: ``GritArray(desc, shape, planes)``.

    ``desc`` is a :class:`~grit.descriptor.Descriptor`, 64 bytes, or their
    hex; ``planes`` is four bytes-like objects in the order data, scale0,
    scale1, aux (``None`` or ``b""`` for an absent plane).  Raises the
    ``GritError`` subclass of the first failing §7.3 step.  Immutable.
    """

    __slots__ = ("_desc", "_shape", "_planes", "_grade", "_gid", "_build", "_sizes", "_source")

    def __init__(self, desc, shape: Sequence[int], planes: Sequence):
        d = _as_descriptor(desc)
        shp = as_shape(shape)
        if isinstance(planes, (bytes, bytearray, memoryview)):
            raise GritUsageError("planes must be four bytes-like objects, not one buffer "
                                 "(use GritArray.from_payload for a concatenated payload)")
        try:
            items = list(planes)
        except TypeError:
            raise GritUsageError("planes must be four bytes-like objects") from None
        if len(items) != 4:
            raise GritUsageError(f"planes must be exactly four items "
                                 f"(data, scale0, scale1, aux), got {len(items)}")
        pl = tuple(_as_plane(i, p) for i, p in enumerate(items))
        report = check(d, shp, pl, level=1)
        crossings.count()                  # §12.4: a construction is a boundary crossing
        sset = object.__setattr__
        sset(self, "_desc", d)
        sset(self, "_shape", shp)
        sset(self, "_planes", pl)
        sset(self, "_grade", report.grade)
        sset(self, "_gid", None)
        sset(self, "_build", None)
        sset(self, "_sizes", None)
        sset(self, "_source", None)

    @classmethod
    def deferred(cls, desc, shape: Sequence[int], build, *, source=None) -> "GritArray":
        """An array whose planes are built on first use: ``build()`` returns
        the four planes.  The level-1 check runs now, on the plane sizes the
        descriptor and shape require, and again on what ``build`` returns (a
        plane of another size raises GritSizeError then), so an array that
        exists still has planes of exactly those sizes; ``plane_bytes``,
        ``nbytes``, ``gid`` and ``repr`` never build them.  ``source`` is
        the storage they are built from (a :class:`grit.ggml.Blocks`):
        ``decode`` reads it in place when a fused kernel serves it."""
        d = _as_descriptor(desc)
        shp = as_shape(shape)
        if not callable(build):
            raise GritUsageError("deferred() takes a callable returning the four planes")
        sizes = _sizes_or_raise(d, shp)
        report = check(d, shp, sizes, level=1)
        crossings.count()
        self = cls.__new__(cls)
        sset = object.__setattr__
        sset(self, "_desc", d)
        sset(self, "_shape", shp)
        sset(self, "_planes", None)
        sset(self, "_grade", report.grade)
        sset(self, "_gid", None)
        sset(self, "_build", build)
        sset(self, "_sizes", sizes)
        sset(self, "_source", source)
        return self

    def _make(self, build) -> tuple:
        items = build()
        if isinstance(items, (bytes, bytearray, memoryview)) or len(items) != 4:
            raise GritUsageError("a deferred array's build() must return four planes")
        pl = tuple(_as_plane(i, p) for i, p in enumerate(items))
        check(self._desc, self._shape, pl, level=1)
        return pl

    def _built(self) -> tuple:
        """The planes of a deferred array, built once (checked at level 1)."""
        build = self._build
        if build is None:                  # built by another thread meanwhile
            return self._planes
        pl = self._make(build)
        object.__setattr__(self, "_planes", pl)
        object.__setattr__(self, "_build", None)
        return pl

    def transient_planes(self) -> tuple:
        """The planes, as :attr:`planes`, except that a deferred array which
        has not built them builds them for this call only and keeps nothing
        (a reader that visits each array once, like ``grit scan --deep``,
        then holds one array's planes at a time)."""
        p = self._planes
        if p is not None:
            return p
        build = self._build
        return self._planes if build is None else self._make(build)

    @property
    def source(self):
        """The storage a deferred array's planes are built from (a
        :class:`grit.ggml.Blocks`), or None."""
        return self._source

    def __setattr__(self, name, value):
        raise AttributeError("GritArray is immutable")

    def __delattr__(self, name):
        raise AttributeError("GritArray is immutable")

    # -- construction from one concatenated payload (§3.6)
    @classmethod
    def from_payload(cls, desc, shape: Sequence[int], payload) -> "GritArray":
        """Split ``data ‖ scale0 ‖ scale1 ‖ aux`` by the §7.3 size equations
        (zero-copy slices of ``payload``) and construct the array."""
        d = _as_descriptor(desc)
        shp = as_shape(shape)
        try:
            mv = memoryview(payload)
        except TypeError:
            raise GritUsageError(
                f"payload must be bytes-like, got {type(payload).__name__}") from None
        if not mv.c_contiguous:
            raise GritUsageError("payload buffer is not C-contiguous")
        mv = mv.cast("B") if (mv.ndim != 1 or mv.format != "B") else mv
        # Steps 1-3 first, so a broken frame reports GradeUnknown, not a size.
        sizes = _sizes_or_raise(d, shp)
        total = sum(sizes)
        if mv.nbytes != total:
            raise GritSizeError(detail=Detail(
                status=Status.SIZE_MISMATCH, step=4, field="payload",
                expected=total, actual=mv.nbytes,
                message=(f"SizeMismatch: payload is {mv.nbytes} bytes; descriptor and shape "
                         f"require {total} (= {' + '.join(map(str, sizes))}, data ‖ scale0 ‖ "
                         "scale1 ‖ aux)."),
                lines=("A concatenated payload is split by the §7.3 size equations; every "
                       "plane length must match exactly.",)))
        planes, off = [], 0
        for n in sizes:
            planes.append(mv[off:off + n] if n else b"")
            off += n
        return cls(d, shp, planes)

    # -- the quadruple
    @property
    def descriptor(self) -> D.Descriptor:
        return self._desc

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return numel_of(self._shape)

    @property
    def planes(self) -> tuple:
        """(data, scale0, scale1, aux) as bytes-like objects; b"" when absent."""
        p = self._planes
        return p if p is not None else self._built()

    @property
    def grade(self) -> Grade:
        return self._grade

    @property
    def group_axis(self) -> int:
        return self._desc.group_axis

    @property
    def placements(self) -> tuple[int, int, int]:
        return self._desc.placements

    # -- fingerprints (§6)
    @property
    def gid(self) -> bytes:
        """§6.3: 16 bytes identifying the contract (grade, frame, shape)."""
        g = self._gid
        if g is None:
            g = _gid(self._grade.canonical, self._desc.to_bytes(), self._shape)
            object.__setattr__(self, "_gid", g)
        return g

    @property
    def gid_base32(self) -> str:
        return base32_encode(self.gid)

    @property
    def digest(self) -> bytes:
        """§6.5: 16 bytes identifying the plane bytes (computed on each call;
        a mapped file truncated since is a GritFileError, not a SIGBUS)."""
        planes = self.planes
        check_mapped(planes)
        return _digest(planes)

    # -- bytes
    @property
    def plane_bytes(self) -> tuple[int, int, int, int]:
        if self._planes is None:
            return self._sizes
        return tuple(len(memoryview(p)) for p in self._planes)  # type: ignore[return-value]

    @property
    def nbytes(self) -> int:
        return sum(self.plane_bytes)

    def payload(self) -> bytes:
        """The serialised payload data ‖ scale0 ‖ scale1 ‖ aux (§3.6)."""
        return b"".join(bytes(p) if not isinstance(p, bytes) else p for p in self.planes)

    def decode(self):
        """§8 decode(): a float32 ndarray of this array's shape (any
        non-opaque placement: the planes are relayouted to canonical first)."""
        return decode(self)

    # -- placements (§5)
    def canonical(self) -> "GritArray":
        """This array with its planes in the canonical order (itself when
        they already are)."""
        return canonical(self)

    def relayout(self, placement=None, *, data=None, scale=None, meta=None) -> "GritArray":
        """``grit.relayout(self, ...)``."""
        return relayout(self, placement, data=data, scale=scale, meta=meta)

    # -- the array laws (L4, L5): slicing, transpose
    def __getitem__(self, key) -> "GritArray":
        """Slices with step 1 (and integers on non-group axes).

        L5: a group-axis slice must start and end on group boundaries — k0,
        and k0·k1 for two-level grades, and the sparsity quad — or it raises
        GritLayoutError; never a silent view.  A selection that is contiguous
        in lin order is a zero-copy view (memoryview slices of the planes);
        any other aligned selection is a copy.  Canonical placements only."""
        return laws.getitem(self, key)

    def transpose(self, *axes) -> "GritArray":
        """Permute axes.  The group axis must stay where it is (L4: a
        transpose that moves it does not exist — requantize); permuting the
        other axes moves whole rows of every plane into the canonical order of
        the new shape (a copy; itself for the identity)."""
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = tuple(axes[0]) if axes[0] is not None else ()
        return laws.transpose(self, axes or None)

    @property
    def T(self) -> "GritArray":
        return self.transpose()

    # -- not a container of values: conversions name the decode
    def __array__(self, dtype=None, copy=None):
        """``np.asarray(a)`` raises TypeError: a GritArray holds codes and
        scales, not values; ``grit.decode(a)`` is the one conversion (never
        a 0-d object array)."""
        raise TypeError(f"a GritArray is not an array of values; grit.decode(a) gives its "
                        f"float32 values (shape {list(self._shape)})")

    def __len__(self) -> int:
        """Raises TypeError: a GritArray is not a sequence of values (its
        extents are ``shape``; ``grit.decode(a)`` gives the values), so that
        ``torch.as_tensor(a)`` and ``list(a)`` fail saying so."""
        raise TypeError(f"a GritArray has no len(): its extents are a.shape = "
                        f"{self._shape}; grit.decode(a) gives its values")

    def __bool__(self) -> bool:
        return True           # truthy, as before __len__ existed

    def __iter__(self):
        raise TypeError("a GritArray is not iterable; slice it (a[i:j]) or iterate over "
                        "grit.decode(a)")

    # -- value semantics: equal descriptor bytes, shape and plane bytes
    def __eq__(self, other) -> bool:
        if not isinstance(other, GritArray):
            return NotImplemented
        return (self._desc.to_bytes() == other._desc.to_bytes()
                and self._shape == other._shape
                and all(memoryview(a) == memoryview(b)
                        for a, b in zip(self.planes, other.planes)))

    def __hash__(self) -> int:
        return hash((self._desc.to_bytes(), self._shape, self.digest))

    def __repr__(self) -> str:
        g = self._grade
        name = g.name or g.canonical
        return (f"<GritArray {name} shape={self._shape} gid={display_prefix(self.gid)}… "
                f"{self.nbytes} bytes>")

    def __reduce__(self):
        return (_rebuild, (self._desc.to_bytes(), self._shape, self.payload()))


def _rebuild(desc: bytes, shape, payload: bytes) -> GritArray:
    return GritArray.from_payload(desc, shape, payload)


def _sizes_or_raise(d: D.Descriptor, shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The §7.3 plane sizes of (d, shape), or the first failing check step
    raised (frame, grade and placement failures come before size ones)."""
    ps = plane_sizes(d, shape)
    sizes = (0, 0, 0, 0) if isinstance(ps, Detail) else ps.sizes
    det = diagnose(d, shape, sizes, level=1)
    if det.status != Status.OK:
        raise error_for(det)
    return sizes


def concat(arrays, axis: int = 0) -> GritArray:
    """Concatenate GritArrays along ``axis`` without decoding: same grade,
    descriptor frame (group axis, placements) and rank; NOTE_ASSUMED is set on
    the result if any input carries it (§12: sticky)."""
    try:
        arrs = list(arrays)
    except TypeError:
        raise GritUsageError("concat() takes a sequence of GritArrays") from None
    if not arrs or not all(isinstance(x, GritArray) for x in arrs):
        raise GritUsageError("concat() takes a non-empty sequence of GritArrays")
    return laws.concat(arrs, axis)


def require_metadata_order(array: GritArray, *, verify: bool = False) -> GritArray:
    """L6, the check a kernel declaring ``requires SPORDER_ASC_LSB`` runs on
    an operand: a sparse array whose metadata order is UNORDERED is refused
    (GritLayoutError, as grit.matmul's L6 refusal); with ``verify=True`` the
    ASC_LSB promise is also checked against the bytes (§7.4, GritDigestError).
    Dense arrays pass.  Returns the array."""
    _require_array(array, "require_metadata_order")
    return laws.require_metadata_order(array, verify=verify)


def _require_array(x, what: str) -> GritArray:
    if not isinstance(x, GritArray):
        raise GritUsageError(f"{what}() takes a GritArray, got {type(x).__name__}")
    return x


# ---------------------------------------------------------------------------
# placements and decode on arrays (§5.5, §8)

def canonical(array: GritArray) -> GritArray:
    """``array`` with its planes in the canonical order (itself when they
    already are; UNSPECIFIED counts as canonical)."""
    return _relayout.canonical(_require_array(array, "canonical"))


def relayout(array: GritArray, placement=None, *, data=None, scale=None,
             meta=None) -> GritArray:
    """Move the planes of ``array`` into another placement (§5.5 way 2); see
    :func:`grit.placement.relayout.relayout` for how the roles are chosen."""
    return _relayout.relayout(_require_array(array, "relayout"), placement, data=data,
                              scale=scale, meta=meta)


relayout.__doc__ = _relayout.relayout.__doc__


def decode(array: GritArray) -> np.ndarray:
    """§8 decode(): a new C-contiguous float32 array of ``array.shape``, for
    an array in any non-opaque placement (the planes are relayouted to the
    canonical order first; L1: placement never changes the values)."""
    a = _require_array(array, "decode")
    # a plane in a map of a file truncated since: GritFileError, not SIGBUS
    check_mapped(a.planes if a.source is None else (a.source.data,))
    k = ggml.kernel_for(a.descriptor, a.shape)
    if k is not None:
        # a zero-copy ggml block type: the fused kernel reads the blocks in
        # place (the same bits as relayout + decode_canonical, tests/test_native_ggml.py)
        return k.decode(a.planes[0], numel_of(a.shape)).reshape(a.shape)
    src = a.source
    if src is not None:
        k = ggml.type_kernel(src.type_name, a.shape)
        if k is not None and not k.zero_copy and \
                a.descriptor.group_axis == len(a.shape) - 1 and k.carries(a.descriptor):
            # a converted ggml type loaded from its blocks: decode them in place,
            # building no plane (the same bits, tests/test_native_ggml_converted.py)
            return k.decode(src.data, numel_of(a.shape)).reshape(a.shape)
    return decode_canonical(canonical(a))
