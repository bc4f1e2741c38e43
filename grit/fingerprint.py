"""§6: FNV-1a-64/128, grade_id, gid, digest and the Crockford base32 form.

The byte loops run in the private C extension when it was built; otherwise a
pure-Python fallback gives the same values (slowly) and warns once.
"""
from __future__ import annotations

import operator
import struct
import warnings
from typing import Callable, Iterable, Sequence

from .errors import GritGradeError, GritUsageError

__all__ = [
    "fnv1a64", "fnv1a128", "gid", "digest", "base32_encode", "base32_decode",
    "display_prefix", "DigestStream", "NATIVE", "FNV64_OFFSET", "fnv1a128_many", "digests",
    "digests_compared",
    "LANES", "FNV64_PRIME", "FNV128_OFFSET",
    "FNV128_PRIME",
]

FNV64_OFFSET = 0xCBF29CE484222325
FNV64_PRIME = 0x100000001B3
FNV128_OFFSET = 0x6C62272E07BB014262B821756295C58D
FNV128_PRIME = 0x0000000001000000000000000000013B
_M64 = (1 << 64) - 1
_M128 = (1 << 128) - 1

try:
    from . import _ext as _native
    NATIVE = True
except ImportError:  # pragma: no cover - exercised where no compiler exists
    _native = None  # type: ignore[assignment]  # the pure-Python FNV-1a below serves
    NATIVE = False


def _warn_slow() -> None:
    warnings.warn("grit: native extension not built; hashing in pure Python "
                  "(correct, ~100x slower)", RuntimeWarning, stacklevel=3)


_warned = False


def _py_fnv64(data, h: int = FNV64_OFFSET) -> int:
    for byte in bytes(data):
        h = ((h ^ byte) * FNV64_PRIME) & _M64
    return h


def _py_fnv128(data, h: int = FNV128_OFFSET) -> int:
    for byte in bytes(data):
        h = ((h ^ byte) * FNV128_PRIME) & _M128
    return h


def _buf(b):
    try:
        return memoryview(b).cast("B")
    except TypeError:
        raise GritUsageError(f"expected a bytes-like object, got {type(b).__name__}") from None


def _state(h, bits: int) -> int:
    """A running hash value: an integer in [0, 2^bits)."""
    try:
        v = operator.index(h)
    except TypeError:
        raise GritUsageError(f"a running FNV-1a state is an integer, got "
                             f"{type(h).__name__}") from None
    if v < 0 or v >> bits:
        raise GritUsageError(f"a running FNV-1a-{bits} state is in [0, 2^{bits}), got {v}")
    return v


def fnv1a64(data, h: int = FNV64_OFFSET) -> int:
    """FNV-1a-64 of a bytes-like object (``h`` continues a running hash)."""
    mv = _buf(data)
    h = _state(h, 64)
    if _native is not None:
        return _native.fnv1a64(mv, h)
    return _py_fnv64(mv, h)


def fnv1a128(data, h: int = FNV128_OFFSET) -> int:
    """FNV-1a-128 of a bytes-like object, as an int (serialise big-endian)."""
    global _warned
    mv = _buf(data)
    h = _state(h, 128)
    if _native is not None:
        return _native.fnv1a128(mv, h)
    if mv.nbytes > 4096 and not _warned:
        _warned = True
        _warn_slow()
    return _py_fnv128(mv, h)


#: the most messages :func:`fnv1a128_many` advances together (1: no native loop)
LANES = int(getattr(_native, "FNV_MULTI_LANES", 1))


def fnv1a128_many(states: Sequence[int], streams: Sequence[Sequence], lanes: int | None = None
                  ) -> list[int]:
    """FNV-1a-128 of several messages at once: ``states[i]`` continued over
    the segments of ``streams[i]`` in turn, for every ``i`` — the values of
    :func:`fnv1a128` over each segment.  The native loop advances up to
    ``lanes`` (1 to :data:`LANES`, default all) messages together,
    interleaved: one message's FNV-1a is a chain of dependent multiplies,
    and independent chains overlap on one core."""
    sts = [_state(h, 128) for h in states]
    try:
        segs = [[_buf(b) for b in stream] for stream in streams]
    except TypeError:
        raise GritUsageError("fnv1a128_many needs a sequence of segment sequences") from None
    if len(sts) != len(segs):
        raise GritUsageError(f"{len(sts)} states for {len(segs)} messages")
    k = LANES if lanes is None else operator.index(lanes)
    if not 1 <= k <= LANES:
        raise GritUsageError(f"lanes must be from 1 to {LANES}, got {k}")
    if _native is not None:
        return _native.fnv1a128_many(sts, segs, k)
    out = []
    for h, stream in zip(sts, segs):
        for b in stream:
            h = fnv1a128(b, h)
        out.append(h)
    return out


class _Lane:
    """One array's §6.5 digest in progress: its state, the plane and the
    offset in it where the next round starts, the plane bytes left; with a
    comparison, the other array's planes (None: their lengths differ, so
    the two are not equal) and whether the bytes so far are equal."""

    __slots__ = ("index", "planes", "h", "plane", "off", "left", "other", "same")

    def __init__(self, index: int, planes: list[memoryview],
                 other: list[memoryview] | None = None) -> None:
        self.index, self.planes = index, planes
        self.h, self.plane, self.off = FNV128_OFFSET, 0, 0
        self.left = sum(mv.nbytes for mv in planes)
        self.same = other is None or [mv.nbytes for mv in other] == [mv.nbytes for mv in planes]
        self.other = other if self.same else None

    def take(self, budget: int, chunks: list[memoryview], mirror: list | None = None,
             others: list[memoryview] | None = None) -> list:
        """The next segments of this array's message, at most ``budget``
        plane bytes (each plane's u64le length where the plane begins); the
        plane parts are added to ``chunks`` too.  ``mirror``: the other
        array's segments at the same offsets of its message are added to it
        as one list (its plane parts to ``others`` too); where its planes'
        lengths differ, these segments instead (compared with themselves:
        the verdict is known already)."""
        segs: list = []
        o = self.other if mirror is not None else None
        osegs: list = []
        while self.plane < 4:
            mv = self.planes[self.plane]
            if budget == 0 and self.off < mv.nbytes:
                break
            if self.off == 0:
                segs.append(struct.pack("<Q", mv.nbytes))
                osegs.append(segs[-1])
            n = min(budget, mv.nbytes - self.off)
            if n:
                part = mv[self.off:self.off + n]
                segs.append(part)
                chunks.append(part)
                if o is not None:
                    osegs.append(o[self.plane][self.off:self.off + n])
                self.off += n
                self.left -= n
                budget -= n
            if self.off < mv.nbytes:
                break
            self.plane, self.off = self.plane + 1, 0
        if mirror is not None:
            mirror.append(segs if o is None else osegs)
            if o is not None and others is not None:
                others.extend(b for b in osegs if not isinstance(b, bytes))
        return segs


def _planes_of(planes, what: str) -> list[memoryview]:
    """An array's four planes as buffers (None: an absent plane, empty)."""
    try:
        planes = list(planes)
    except TypeError:
        raise GritUsageError(f"{what} needs four planes, got {type(planes).__name__}") from None
    if len(planes) != 4:
        raise GritUsageError(f"{what} needs exactly four planes, got {len(planes)}")
    return [_buf(p if p is not None else b"") for p in planes]


def digests(arrays: Iterable[Sequence], *, step: int = 1 << 23,
            done: Callable[[memoryview], None] | None = None) -> list[bytes]:
    """``[digest(planes) for planes in arrays]``, several arrays' digests
    advanced together (:func:`fnv1a128_many`) in rounds: each array in
    progress hashes at most ``step`` plane bytes a round, and a round
    holds at most :data:`LANES` × ``step`` plane bytes.  ``done(chunk)`` is
    called with each part of a plane once it is hashed (a mapped file's
    pages can be given back as the rounds go)."""
    waiting = [_planes_of(planes, "digests") for planes in arrays]
    return [d for d, _ in _rounds(waiting, None, step, done, None)]


def digests_compared(arrays: Iterable[Sequence], others: Iterable[Sequence], *,
                     step: int = 1 << 23, done: Callable[[memoryview], None] | None = None,
                     done_other: Callable[[memoryview], None] | None = None
                     ) -> list[tuple[bytes, bool]]:
    """``[(digest(a), whether b's four planes are a's bytes) for a, b in
    zip(arrays, others)]``: :func:`digests`, each array compared with its
    other in the same pass (the native loop reads the other's bytes beside
    the ones it hashes: one pass over both, each part of ``a`` compared
    while it is in the cache).  ``done_other(chunk)``: as ``done``, for the
    other arrays' plane parts once compared."""
    waiting = [_planes_of(planes, "digests_compared") for planes in arrays]
    against = [_planes_of(planes, "digests_compared") for planes in others]
    if len(against) != len(waiting):
        raise GritUsageError(f"{len(waiting)} arrays to compare with {len(against)}")
    return _rounds(waiting, against, step, done, done_other)


def _rounds(waiting: list[list[memoryview]], against: list[list[memoryview]] | None,
            step: int, done, done_other) -> list[tuple[bytes, bool]]:
    step = operator.index(step)
    if step < 1:
        raise GritUsageError(f"step must be positive, got {step}")
    out: list[tuple[bytes, bool]] = [(b"", False)] * len(waiting)
    queue = iter(range(len(waiting)))
    going: list[_Lane] = []
    while True:
        # the arrays in progress, then new ones while the round has room; an
        # array left unfinished by a round took a whole step of it, so no more
        # than LANES are in progress between rounds
        lanes = list(going)
        room = LANES * step - sum(min(step, lane.left) for lane in lanes)
        while room > 0:
            i = next(queue, None)
            if i is None:
                break
            lanes.append(_Lane(i, waiting[i], None if against is None else against[i]))
            room -= min(step, lanes[-1].left)
        if not lanes:
            return out
        chunks: list[memoryview] = []
        others: list[memoryview] = []
        mirror: list | None = None if against is None else []
        segs = [lane.take(step, chunks, mirror, others) for lane in lanes]
        states = [lane.h for lane in lanes]
        if mirror is None:
            hs, same = fnv1a128_many(states, segs), [True] * len(lanes)
        else:
            hs, same = _many_compared(states, segs, mirror)
        for lane, h, eq in zip(lanes, hs, same):
            lane.h, lane.same = h, lane.same and eq
        for c in chunks if done is not None else ():
            done(c)
        for c in others if done_other is not None else ():
            done_other(c)
        going = []
        for lane in lanes:
            if lane.plane == 4:
                out[lane.index] = (lane.h.to_bytes(16, "big"), lane.same)
            else:
                going.append(lane)


def _many_compared(states: list[int], segs: list[list], mirror: list[list]
                   ) -> tuple[list[int], list[bool]]:
    """:func:`fnv1a128_many` of ``segs``, and whether each message is the
    concatenation of its ``mirror`` segments (natively: in the same loop)."""
    if _native is not None:
        hs, same = _native.fnv1a128_many_cmp(states, segs, mirror, LANES)
        return hs, same
    return fnv1a128_many(states, segs), [b"".join(bytes(b) for b in x) ==
                                         b"".join(bytes(b) for b in y)
                                         for x, y in zip(segs, mirror)]


def gid(canonical_grade: str, desc_bytes: bytes, shape: Sequence[int]) -> bytes:
    """§6.3: FNV1a128(grade ‖ 0x00 ‖ desc[0:28] ‖ desc[32:64] ‖ u32le(rank) ‖
    i64le(shape[d])…), 16 bytes big-endian."""
    if not isinstance(canonical_grade, str):
        raise GritUsageError(f"gid needs the canonical grade string, got "
                             f"{type(canonical_grade).__name__}")
    try:
        grade_utf8 = canonical_grade.encode("utf-8")
    except UnicodeEncodeError:
        raise GritUsageError("gid: the grade string is not encodable as UTF-8 (a lone "
                             "surrogate)") from None
    if isinstance(desc_bytes, str):
        raise GritUsageError("gid needs the 64 descriptor bytes, not text")
    desc_bytes = bytes(_buf(desc_bytes))
    if len(desc_bytes) != 64:
        raise GritUsageError("gid needs the 64 descriptor bytes")
    try:
        shape = list(shape)
    except TypeError:
        raise GritUsageError(f"gid needs a shape, a sequence of extents, got "
                             f"{type(shape).__name__}") from None
    try:
        tail = struct.pack(f"<I{len(shape)}q", len(shape), *shape)
    except struct.error:
        raise GritUsageError(f"shape {tuple(shape)!r} does not fit int64 extents") from None
    msg = (grade_utf8 + b"\x00" + bytes(desc_bytes[0:28])
           + bytes(desc_bytes[32:64]) + tail)
    return fnv1a128(msg).to_bytes(16, "big")


def digest(planes: Sequence) -> bytes:
    """§6.5 with SPEC-FACTS: all four planes, each u64le(len) ‖ bytes; an
    absent plane contributes u64le(0).  16 bytes big-endian."""
    bufs = _planes_of(planes, "digest")
    if _native is not None:
        return _native.digest(bufs).to_bytes(16, "big")
    h = FNV128_OFFSET
    for mv in bufs:
        h = fnv1a128(struct.pack("<Q", mv.nbytes), h)
        h = fnv1a128(mv, h)
    return h.to_bytes(16, "big")


class DigestStream:
    """§6.5 computed over the planes in chunks, for bytes that are never
    whole in memory: for each of the four planes in order, ``plane(n)``
    declares its length (it hashes u64le(n)), then ``update(chunk)`` hashes
    its bytes in any number of chunks totalling n; ``digest()`` is then
    :func:`digest` of the same planes.  Out-of-order use is a
    GritUsageError (a length that is not met, a fifth plane, …)."""

    __slots__ = ("_h", "_planes", "_left")

    def __init__(self) -> None:
        self._h = FNV128_OFFSET
        self._planes = 0
        self._left = 0

    def plane(self, length: int) -> None:
        n = operator.index(length)
        if self._left:
            raise GritUsageError(f"plane {self._planes - 1} still needs {self._left} bytes")
        if self._planes == 4:
            raise GritUsageError("a digest covers exactly four planes")
        if n < 0 or n >> 64:
            raise GritUsageError(f"a plane length is a u64, got {n}")
        self._h = fnv1a128(struct.pack("<Q", n), self._h)
        self._planes += 1
        self._left = n

    def update(self, chunk) -> None:
        mv = _buf(chunk)
        if mv.nbytes > self._left:
            raise GritUsageError(f"{mv.nbytes} bytes given where plane {self._planes - 1} has "
                                 f"{self._left} left" if self._planes else
                                 "update() before the first plane()")
        self._h = fnv1a128(mv, self._h)
        self._left -= mv.nbytes

    def digest(self) -> bytes:
        if self._planes != 4 or self._left:
            raise GritUsageError(f"the digest is not complete: {self._planes} of 4 planes "
                                 f"declared, {self._left} bytes missing")
        return self._h.to_bytes(16, "big")


# ---------------------------------------------------------------------------
# §6.4 Crockford base32: 26 symbols, MSB first, 128 bits zero-extended to 130

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DECODE = {c: i for i, c in enumerate(_ALPHABET)}
_DECODE.update({"I": 1, "L": 1, "O": 0})


def base32_encode(value: "bytes | int") -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) != 16:
            raise GritUsageError("base32 renders a 16-byte (128-bit) value")
        n = int.from_bytes(bytes(value), "big")
    else:
        try:
            n = operator.index(value)
        except TypeError:
            raise GritUsageError(f"base32 renders 16 bytes or an integer, got "
                                 f"{type(value).__name__}") from None
        if not 0 <= n <= _M128:
            raise GritUsageError("base32 renders a 128-bit value")
    return "".join(_ALPHABET[(n >> (5 * (25 - i))) & 31] for i in range(26))


def base32_decode(text: str) -> bytes:
    """Parse a 26-symbol gid: case-insensitive, I/L→1, O→0, U rejected."""
    if not isinstance(text, str):
        raise GritUsageError("base32 text must be a str")
    t = text.strip()
    if not t.isascii():
        # str.upper() would turn U+0131 (dotless i) into I and U+017F (long s) into S
        raise GritGradeError(f"a base32 gid is ASCII: {text!r:.60} is not")
    t = t.upper()
    if len(t) != 26:
        raise GritGradeError(f"a base32 gid has 26 symbols, got {len(t)} ({text!r}); "
                             "a 7-symbol prefix is for display, never an identity")
    n = 0
    for ch in t:
        if ch not in _DECODE:
            raise GritGradeError(f"{ch!r} is not a Crockford base32 symbol"
                                 + (" (U is excluded)" if ch == "U" else ""))
        n = (n << 5) | _DECODE[ch]
    if n >> 128:
        raise GritGradeError(f"{text!r} exceeds 128 bits: the first symbol must be 0-7")
    return n.to_bytes(16, "big")


def display_prefix(value: "bytes | int | str", n: int = 7) -> str:
    """A short display form.  Never compare prefixes as identities."""
    s = value if isinstance(value, str) else base32_encode(value)
    return s[:n]
