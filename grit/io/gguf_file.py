"""The GGUF container: header, KV entries and tensor infos, bounds-checked.

:func:`read_gguf` maps the file read-only once and walks it with a cursor
that checks every count and length against the bytes that remain in the
file before using it (a string length, an array count, ``n_kv``, ``n_tensors``,
``n_dims``), so a lying header costs neither memory nor time; ``n_kv`` and
``n_tensors`` the bytes could hold but past their limits
(:func:`grit.io.source.limit`: ``GRIT_MAX_GGUF_KV``, default 65536;
``GRIT_MAX_TENSORS``, default 131072) are a
:class:`~grit.io.source.LimitError` before those entries are walked, so a
header costs at most the limits' entries.  It returns a
:class:`GGUFFile`: the KV entries (decoded on demand), the tensor infos and
the problems — UNREADABLE, and nothing else, when the header cannot be
walked (a cut inside the tensor infos says which info, of how many, and the
last one read); otherwise one per tensor that cannot be read (BAD_TENSOR:
unknown ggml type, a row that is not whole blocks, too many dimensions, a
duplicate name; PAST_END: bytes past the end of the file, with how many are
missing) and one per tensor whose placement ggml refuses (OVERLAP: bytes
shared with another tensor; MISALIGNED: an offset that is not a multiple of
the alignment; OFFSET: not at the running sum of the padded sizes of the
tensors before it, which is where ggml's loader requires it).  A tensor of
an unknown type is reported alone: its size is unknown, so the offset rule
restarts after it and every other tensor is still checked.

The ggml block sizes come from grit's own table of every type ggml defines
(:mod:`grit.ggml_types`, checked against gguf-py's in the tests), so a
tensor of a type newer than the installed gguf-py, or one GRIT v1 cannot
express (IQ*, Q3_K, TQ1_0), is still accounted for byte by byte.  Versions 2
and 3 are read, in either byte order, as gguf-py reads them.

:func:`read_source` walks any byte source the same way: the cursor reads
the header through a :class:`ViewBytes` (a source's zero-copy view, as
above) or, for a source without a view (a remote file), a
:class:`WindowedBytes`, which reads bounded windows through ``src.read`` as
the walk reaches them — one walk, whose fields, tensor infos and problems do
not depend on which (tests/test_scan_remote_gguf.py).
"""
from __future__ import annotations

import bisect
import enum
import functools
import math
import os
import struct
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GritUsageError
from ..ggml_types import GGML_TYPES
from .problems import Problem, ProblemKind as K, Tally
from .source import LIMITS, ByteSource, LimitError, limit, open_source

__all__ = ["read_gguf", "read_source", "GGUFFile", "GGUFField", "TensorInfo", "ValueType",
           "GGUF_MAGIC", "ggml_types", "problem", "Cursor", "HeaderError", "ViewBytes",
           "WindowedBytes", "header_bytes", "FIRST_WINDOW", "MAX_WINDOW", "WINDOW_READ"]

GGUF_MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
#: the most dimensions a tensor info may declare (ggml itself uses 4)
MAX_RANK = 64
#: arrays of arrays nest at most this deep
MAX_DEPTH = 8
#: the most tensor infos walked, to find where a header is cut, when n_tensors
#: is more than the bytes left can hold
MAX_CUT_WALK = 1 << 14
#: the smallest KV entry (key length, value type, a one-byte value) and tensor
#: info (name length, n_dims, type, offset): the bounds on n_kv and n_tensors
MIN_KV, MIN_INFO = 8 + 4 + 1, 8 + 4 + 4 + 8


class ValueType(enum.IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


_SCALAR = {ValueType.UINT8: "B", ValueType.INT8: "b", ValueType.UINT16: "H",
           ValueType.INT16: "h", ValueType.UINT32: "I", ValueType.INT32: "i",
           ValueType.FLOAT32: "f", ValueType.BOOL: "?", ValueType.UINT64: "Q",
           ValueType.INT64: "q", ValueType.FLOAT64: "d"}
_MIN_ITEM = {**{t: struct.calcsize(c) for t, c in _SCALAR.items()},
             ValueType.STRING: 8, ValueType.ARRAY: 12}


@functools.lru_cache(maxsize=1)
def ggml_types() -> dict[int, tuple[str, int, int]]:
    """{ggml type number: (name, elements per block, bytes per block)} of
    every type in :data:`grit.ggml_types.GGML_TYPES`."""
    return {t.id: (t.name, t.block_elems, t.block_bytes) for t in GGML_TYPES}


class HeaderError(Exception):
    """The header cannot be walked further (the message says why)."""


_Stop = HeaderError

#: a source without a zero-copy view (a remote file) has its header read in
#: windows: the first of FIRST_WINDOW bytes, each next one the walk runs on
#: into twice the one before, up to MAX_WINDOW; a window after a skip (a KV
#: array of fixed-size items, stepped over by arithmetic) starts again at
#: FIRST_WINDOW, at the multiple of FIRST_WINDOW below where the walk
#: needs it.  The walk is deterministic, so a rescan asks for the same
#: windows and a header cache answers them.
FIRST_WINDOW = 1 << 16
MAX_WINDOW = 1 << 20
#: the most window bytes kept after the walk for decoding KV values (the
#: least recently used are dropped and read again if needed)
KEEP_WINDOWS = 1 << 26
#: the label header windows are read with (grit.io.http.CACHED_READS keeps it)
WINDOW_READ = "header"


class ViewBytes:
    """A header held whole in one buffer (a byte source's zero-copy view):
    every position is in the one window."""

    def __init__(self, buf):
        self.buf = buf
        self.size = memoryview(buf).nbytes

    def window(self, pos: int):
        """(buffer, first offset it holds, offset past its last byte) of a
        window holding byte ``pos``."""
        return self.buf, 0, self.size

    def at(self, pos: int, n: int):
        """(buffer, index): the ``n`` bytes at file offset ``pos`` are
        buffer[index:index + n] (the range lies inside the file)."""
        return self.buf, pos

    def bytes(self, pos: int, n: int):
        """The ``n`` bytes at ``pos``: a view here, without a copy."""
        return memoryview(self.buf)[pos:pos + n]


class WindowedBytes:
    """A header read from a byte source in windows (see FIRST_WINDOW),
    through ``src.read`` with the label WINDOW_READ.  Callers ask only for
    ranges inside the file (the cursor checks them against ``size`` first),
    so a window is never read past the end of the file, and nothing is read
    for a range the walk steps over.  ``windows`` / ``window_bytes`` count
    what was read."""

    def __init__(self, src: ByteSource):
        self.src, self.size = src, src.size
        self._starts: list[int] = []                 # sorted
        self._wins: OrderedDict[int, bytes] = OrderedDict()   # start -> bytes, LRU order
        self._kept = 0
        self._end = -1           # where the last window read ends
        self._last = 0           # its length
        self.windows = self.window_bytes = 0

    def window(self, pos: int):
        i = bisect.bisect_right(self._starts, pos) - 1
        if i >= 0:
            s = self._starts[i]
            b = self._wins[s]
            if pos < s + len(b):
                self._wins.move_to_end(s)
                return b, s, s + len(b)
        return self._read(pos, i + 1)

    def _read(self, pos: int, nxt: int):
        start = pos - pos % FIRST_WINDOW
        n = min(2 * self._last, MAX_WINDOW) if start == self._end else FIRST_WINDOW
        n = min(n, self.size - start)
        if nxt < len(self._starts):               # windows never overlap
            n = min(n, self._starts[nxt] - start)
        b = self.src.read(start, n, WINDOW_READ)
        self.windows += 1
        self.window_bytes += n
        self._end, self._last = start + n, n
        bisect.insort(self._starts, start)
        self._wins[start] = b
        self._kept += n
        while self._kept > KEEP_WINDOWS and len(self._wins) > 1:
            s, old = self._wins.popitem(last=False)
            self._starts.remove(s)
            self._kept -= len(old)
        return b, start, start + n

    def at(self, pos: int, n: int):
        if n <= 0:
            return b"", 0
        b, s, e = self.window(pos)
        if pos + n <= e:
            return b, pos - s
        if n > MAX_WINDOW:        # a long string: read at once, not kept
            return self.src.read(pos, n, WINDOW_READ), 0
        parts = [memoryview(b)[pos - s:]]
        got = e - pos
        while got < n:
            b, s, e = self.window(pos + got)
            k = min(e - pos - got, n - got)
            parts.append(memoryview(b)[pos + got - s:pos + got - s + k])
            got += k
        return b"".join(parts), 0

    def bytes(self, pos: int, n: int):
        b, i = self.at(pos, n)
        return bytes(memoryview(b)[i:i + n])


def header_bytes(buf) -> "ViewBytes | WindowedBytes":
    """``buf`` as what a Cursor reads: a ViewBytes or WindowedBytes as it
    is, any other buffer as a ViewBytes."""
    return buf if isinstance(buf, (ViewBytes, WindowedBytes)) else ViewBytes(buf)


class Cursor:
    """A position in a GGUF header, in byte order ``order``.  ``buf`` is
    the header's bytes: a ViewBytes (a byte source's view), a WindowedBytes
    (a source read in windows) or a plain buffer.  Every step checks its
    length, and every count the bytes it claims, against the bytes that
    remain in the file (HeaderError says what did not fit), before a byte
    of it is read."""

    def __init__(self, buf, pos: int, order: str):
        self.buf = header_bytes(buf)
        self.pos, self.order, self.end = pos, order, self.buf.size

    @property
    def left(self) -> int:
        return self.end - self.pos

    def take(self, n: int, what: str) -> int:
        """Advance past ``n`` bytes; the position they start at."""
        if n > self.left:
            raise _Stop(f"{what} needs {n} bytes at offset {self.pos}; the file has "
                        f"{self.left} left")
        p = self.pos
        self.pos += n
        return p

    def scalar(self, code: str, what: str):
        n = struct.calcsize(code)
        b, i = self.buf.at(self.take(n, what), n)
        return struct.unpack_from(self.order + code, b, i)[0]

    def scalars(self, code: str, k: int, what: str) -> tuple:
        """``k`` scalars of one code in a row."""
        n = k * struct.calcsize(code)
        b, i = self.buf.at(self.take(n, what), n)
        return struct.unpack_from(f"{self.order}{k}{code}", b, i)

    def count(self, what: str, item: int) -> int:
        """A u64 count of items of at least ``item`` bytes each, checked
        against the bytes that remain."""
        n = self.scalar("Q", what)
        if n * item > self.left:
            raise _Stop(f"{what} = {n}: the {self.left} bytes left hold at most "
                        f"{self.left // item}")
        return n

    def string(self, what: str) -> str:
        n = self.count(f"{what} length", 1)
        p = self.take(n, what)
        b, i = self.buf.at(p, n)
        try:
            return bytes(memoryview(b)[i:i + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise _Stop(f"{what} at offset {p} is not UTF-8") from None

    def skip_value(self, vt: int, what: str, depth: int = 0) -> tuple[int, int]:
        """Step over one value of type ``vt``: (item type, count) for an array,
        (-1, 1) otherwise.  An array of fixed-size items is stepped over by
        arithmetic (none of its bytes read); an array of strings by its
        length prefixes."""
        if vt in _SCALAR:
            self.take(_MIN_ITEM[vt], what)
            return -1, 1
        if vt == ValueType.STRING:
            self.take(self.count(f"{what} length", 1), what)
            return -1, 1
        if vt != ValueType.ARRAY:
            raise _Stop(f"{what}: unknown value type {vt}")
        if depth >= MAX_DEPTH:
            raise _Stop(f"{what}: arrays nest more than {MAX_DEPTH} deep")
        it = self.scalar("I", f"{what} item type")
        if it not in _MIN_ITEM:
            raise _Stop(f"{what}: unknown array item type {it}")
        n = self.count(f"{what} count", _MIN_ITEM[it])
        if it in _SCALAR:
            self.take(n * _MIN_ITEM[it], what)
        elif it == ValueType.STRING:          # a tokenizer's vocabulary: the hot loop
            pos, end, fmt, hb = self.pos, self.end, self.order + "Q", self.buf
            buf, base, wend = hb.window(pos) if pos < end else (b"", pos, pos)
            rest = n
            if base == 0 and wend == end:     # the whole file in one buffer (a view)
                rest = 0                      # (the windowed loop below: nothing left)
                for i in range(n):
                    if end - pos < 8:
                        raise _Stop(f"{what}: item {i} length runs past the end of the file")
                    (ln,) = struct.unpack_from(fmt, buf, pos)
                    pos += 8
                    if ln > end - pos:
                        raise _Stop(f"{what}: item {i} length = {ln}: the file has "
                                    f"{end - pos} bytes left")
                    pos += ln
            for i in range(rest):
                if end - pos < 8:
                    raise _Stop(f"{what}: item {i} length runs past the end of the file")
                if pos + 8 > wend:            # (a view holds the whole file: never)
                    buf, base, wend = hb.window(pos)
                if pos + 8 > wend:            # a length prefix across two windows
                    b8, j = hb.at(pos, 8)
                    (ln,) = struct.unpack_from(fmt, b8, j)
                else:
                    (ln,) = struct.unpack_from(fmt, buf, pos - base)
                pos += 8
                if ln > end - pos:
                    raise _Stop(f"{what}: item {i} length = {ln}: the file has {end - pos} "
                                "bytes left")
                pos += ln
            self.pos = pos
        else:
            for _ in range(n):
                self.skip_value(it, what, depth + 1)
        return it, n


@dataclass(frozen=True)
class GGUFField:
    """One KV entry.  ``value()`` decodes it (str, int, float, bool, or a list
    for an array); ``count`` is the array length (1 for a scalar)."""

    key: str
    type: int
    item_type: int
    count: int
    offset: int
    order: str = field(repr=False)
    buf: Any = field(repr=False, compare=False)      # the header's bytes (a Cursor's buf)

    def value(self):
        """The decoded value; raises ValueError for a string that is not UTF-8."""
        return _decode(Cursor(self.buf, self.offset, self.order), self.type)


#: the name grit.io.gguf imports
_Cursor = Cursor


def _decode(c: Cursor, vt: int):
    if vt in _SCALAR:
        return c.scalar(_SCALAR[vt], "value")
    if vt == ValueType.STRING:
        try:
            return c.string("string")
        except _Stop as e:
            raise ValueError(str(e)) from None
    it = c.scalar("I", "item type")
    n = c.scalar("Q", "count")
    return [_decode(c, it) for _ in range(n)]


@dataclass(frozen=True)
class TensorInfo:
    """One tensor info.  ``dims`` is ggml's ne[] (innermost first); ``shape``
    the numpy order; ``offset`` is relative to the data section."""

    name: str
    dims: tuple[int, ...]
    type_id: int
    offset: int
    ggml_type: str | None            # None: a type number no table knows
    block_size: int = 1
    type_size: int = 0

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(reversed(self.dims))

    @property
    def numel(self) -> int:
        return math.prod(self.dims)

    @property
    def nbytes(self) -> int:
        return self.numel * self.type_size // self.block_size


@dataclass
class GGUFFile:
    path: str
    size: int
    version: int = 0
    order: str = "<"
    alignment: int = DEFAULT_ALIGNMENT
    data_start: int = 0
    fields: dict[str, GGUFField] = field(default_factory=dict)
    tensors: list[TensorInfo] = field(default_factory=list)   # the readable ones
    problems: list[Problem] = field(default_factory=list)
    names: set[str] = field(default_factory=set)     # every tensor info's name
    buf: Any = field(default=None, repr=False)       # the source's zero-copy view, or None
    source: ByteSource | None = field(default=None, repr=False, compare=False)
    #: the header's bytes as the walk read them (a ViewBytes over ``buf``, or
    #: a WindowedBytes for a source without a view): what the KV values decode from
    header: Any = field(default=None, repr=False, compare=False)

    @property
    def parsed(self) -> bool:
        return not any(p.kind is K.UNREADABLE for p in self.problems)

    def value(self, key: str, default=None):
        """The decoded value of KV entry ``key`` (``default`` when absent or
        not decodable)."""
        f = self.fields.get(key)
        if f is None:
            return default
        try:
            return f.value()
        except ValueError:
            return default

    def data(self, t: TensorInfo, dtype=np.uint8) -> np.ndarray:
        """A read-only 1-D array of ``t``'s bytes as ``dtype`` (in the file's
        byte order): a zero-copy view of the file, or, for a source without
        a view (a remote file), a copy read through ``source``."""
        dt = np.dtype(dtype).newbyteorder(self.order) if np.dtype(dtype).itemsize > 1 \
            else np.dtype(dtype)
        count = t.nbytes // dt.itemsize
        if self.buf is not None:
            return np.frombuffer(self.buf, dt, count=count, offset=self.data_start + t.offset)
        if self.source is None:
            raise GritUsageError(f"{self.path}: tensor {t.name!r}: the file has no source to "
                                 "read it from")
        raw = self.source.read(self.data_start + t.offset, count * dt.itemsize,
                               f"tensor {t.name!r}")
        return np.frombuffer(raw, dt)


def problem(path: str, kind: K, message: str, tensor: str | None = None, *,
            prefix: str = "", error=None, **facts) -> Problem:
    """A problem of the GGUF file at ``path``: grit.load raises ``error``,
    by default a GritUsageError naming the file."""
    return Problem(kind, message, tensor,
                   error=error or GritUsageError(f"{path}: {prefix}{message}"), **facts)


def read_gguf(path) -> GGUFFile:
    """Walk the GGUF file at ``path`` (see the module docstring).  Never
    raises for the file's content; an OSError opening it propagates."""
    path = os.fspath(path)
    return read_source(open_source(path), path)


def read_source(src: ByteSource, path: str | None = None) -> GGUFFile:
    """:func:`read_gguf` over a byte source (``path`` names it in messages;
    the source's name by default).  The file keeps the source (``source``)
    for plane reads.  The header is walked in the source's zero-copy view
    when it gives one (``buf``), else read in windows through ``src.read``
    (:class:`WindowedBytes`: a remote file), by the same walk: the fields,
    tensor infos and problems are the same either way."""
    path = src.name if path is None else path
    size = src.size
    out = GGUFFile(path, size, source=src)
    if size < 24:
        out.problems.append(problem(path, K.UNREADABLE, f"the file is {size} bytes; a "
                                     "GGUF header needs at least 24",
                                     prefix="not a readable GGUF file: "))
        return out
    buf = src.view(0, size)
    out.buf = buf
    out.header = ViewBytes(buf) if buf is not None else WindowedBytes(src)
    try:
        infos = _walk(out)
    except _Stop as e:
        out.problems.append(problem(path, K.UNREADABLE, str(e)[:300],
                                     prefix="not a readable GGUF file: "))
        return out
    _tensor_infos(out, infos)
    return out


def _within(name: str, n: int, what: str, path: str) -> None:
    """A count past its limit (grit.io.source.limit) is a LimitError: the
    header is not walked (each entry costs memory and, remotely, reads)."""
    most = limit(name)
    if n > most:
        raise LimitError(f"{path}: {what} = {n} is past the limit of {most} "
                         f"({LIMITS[name][1]}); the header was not walked")


def _walk(out: GGUFFile) -> list[tuple[str, tuple[int, ...] | int, int, int]]:
    buf = out.header
    magic = buf.bytes(0, 4)
    if bytes(magic) != GGUF_MAGIC:
        raise _Stop(f"bad magic {bytes(magic)!r}")
    v = Cursor(buf, 4, "<").scalar("I", "version")
    if v & 0xFFFF == 0:                       # written on a big-endian host
        out.order = ">"
        v = Cursor(buf, 4, ">").scalar("I", "version")
    out.version = v
    if v not in VERSIONS:
        raise _Stop(f"version {v}; this reader reads GGUF versions "
                    f"{' and '.join(map(str, VERSIONS))}")
    c = Cursor(buf, 8, out.order)
    n_tensors = c.scalar("Q", "n_tensors")
    n_kv = c.count("n_kv", MIN_KV)
    _within("gguf_kv", n_kv, "n_kv", out.path)
    for i in range(n_kv):
        key = c.string(f"KV entry {i} key")
        vt = c.scalar("I", f"KV entry {key!r} type")
        start = c.pos
        it, n = c.skip_value(vt, f"KV entry {key!r}")
        if key in out.fields:
            raise _Stop(f"KV entry {key!r} appears twice")
        out.fields[key] = GGUFField(key, vt, it, n, start, out.order, buf)
    # a count the bytes left cannot hold is a cut header or a lie: walk at most
    # MAX_CUT_WALK infos, keeping none, to say which (a cut names the info it
    # ends in); the walk is bounded in time and memory whatever n_tensors says
    left = c.left
    fits = n_tensors * MIN_INFO <= left
    if fits:          # (a count the bytes cannot hold is walked as a cut, below)
        _within("tensors", n_tensors, "n_tensors", out.path)
    # (one info more than the bytes hold: the walk ends in a cut by construction)
    limit = n_tensors if fits else min(n_tensors, left // MIN_INFO + 1, MAX_CUT_WALK)
    # (dims: the ne[] tuple, or, past MAX_RANK, only how many: never unpacked)
    infos: list[tuple[str, tuple[int, ...] | int, int, int]] = []
    i, last = 0, None
    try:
        for i in range(limit):
            name = c.string(f"tensor info {i} name")
            n_dims = c.scalar("I", f"tensor {name!r} n_dims")
            dims: tuple[int, ...] | int
            if fits and n_dims <= MAX_RANK:
                dims = c.scalars("Q", n_dims, f"tensor {name!r} dims")
            else:
                c.take(8 * n_dims, f"tensor {name!r} dims")
                dims = n_dims
            ggml = c.scalar("I", f"tensor {name!r} type")
            off = c.scalar("Q", f"tensor {name!r} offset")
            last = name
            if fits:
                infos.append((name, dims, ggml, off))
        i = limit
    except _Stop as e:
        whole = f" (the last whole one: {last!r})" if last is not None else ""
        bound = "" if fits else (f"; n_tensors = {n_tensors}: the {left} bytes left hold at "
                                 f"most {left // MIN_INFO}")
        raise _Stop(f"the header ends in tensor info {i} of {n_tensors}: {i} read{whole}, "
                    f"{n_tensors - i} and the data section missing{bound} ({e})") from None
    if not fits:
        raise _Stop(f"n_tensors = {n_tensors}: the {left} bytes left hold at most "
                    f"{left // MIN_INFO}")
    al = out.fields.get("general.alignment")
    if al is not None:
        if al.type != ValueType.UINT32:
            raise _Stop("general.alignment is not a UINT32")
        out.alignment = al.value()
        if out.alignment == 0 or out.alignment & (out.alignment - 1):
            raise _Stop(f"general.alignment = {out.alignment} is not a power of two")
    out.data_start = c.pos + (-c.pos % out.alignment)
    return infos


def _tensor_infos(out: GGUFFile, infos) -> None:
    types = ggml_types()
    avail = max(0, out.size - out.data_start)
    seen = out.names
    past: list[tuple[TensorInfo, int]] = []
    sized: list[TensorInfo | None] = []      # file order; None: size unknown
    tally = Tally(out.problems)
    for name, dims, ggml, off in infos:
        rank, dims = (dims, ()) if isinstance(dims, int) else (len(dims), dims)
        known = types.get(ggml)
        tname = known[0] if known else None
        why = None
        if name in seen:
            why = f"tensor {name!r} appears twice"
        elif rank > MAX_RANK:
            why = f"tensor {name!r}: {rank} dimensions; this reader reads at most {MAX_RANK}"
        elif known is None:
            why = f"tensor {name!r}: unknown ggml type {ggml}"
        elif dims and dims[0] % known[1]:
            why = (f"tensor {name!r} ({tname}): a row of {dims[0]} elements is not a whole "
                   f"number of {known[1]}-element blocks")
        seen.add(name)
        if why is not None:
            sized.append(None)
            if tally.full(K.BAD_TENSOR):
                tally.count(K.BAD_TENSOR)
            else:
                tally.add(problem(out.path, K.BAD_TENSOR, why[:300], name))
            continue
        t = TensorInfo(name, tuple(dims), ggml, off, tname, known[1], known[2])
        sized.append(t)
        if off + t.nbytes > avail:
            past.append((t, off + t.nbytes))
            continue
        out.tensors.append(t)
    if past:
        end = max(e for _, e in past)
        line = (f"The file holds {avail} data bytes; its tensor infos place tensors up to "
                f"byte {end}: the file is truncated or the offsets lie "
                f"({end - avail} bytes missing).",)
        for t, e in past:
            if tally.full(K.PAST_END):
                tally.count(K.PAST_END)
                continue
            missing = min(t.nbytes, e - avail)
            tally.add(problem(
                out.path, K.PAST_END,
                f"tensor {t.name!r} ({t.ggml_type}): {t.nbytes} bytes at data offset "
                f"{t.offset} run past the {avail}-byte data section ({missing} of them "
                "missing)"[:300], t.name, lines=line,
                field="offset", expected=e, actual=avail, extra=(("missing", missing),)))
    _placement(out, sized, tally)
    tally.finish()


def _pad(n: int, al: int) -> int:
    return n + (-n % al)


def _placement(out: GGUFFile, sized: list[TensorInfo | None], tally: Tally) -> None:
    """OVERLAP, MISALIGNED and OFFSET problems of the tensor infos in file
    order (None: an info whose size is unknown).  ggml requires each offset to
    be the end of the previous tensor's aligned slot; a tensor is named when
    it is not at the end of the furthest slot before it (a swap names both
    tensors, a gap the one after it), and the rule restarts after a tensor of
    unknown size."""
    al = out.alignment
    spans = sorted((t for t in sized if t is not None and t.nbytes),
                   key=lambda t: (t.offset, t.offset + t.nbytes))
    overlapping: set[str] = set()
    widest: TensorInfo | None = None      # the span reaching furthest so far
    for t in spans:
        if widest is not None and t.offset < widest.offset + widest.nbytes:
            overlapping.update((t.name, widest.name))
            _overlap(out, tally, widest, t)
        if widest is None or t.offset + t.nbytes > widest.offset + widest.nbytes:
            widest = t
    expected: int | None = 0
    for t in sized:
        if t is None:                      # unknown size: the rule restarts after it
            expected = None
            continue
        if t.offset % al:
            tally.add(problem(
                out.path, K.MISALIGNED,
                f"tensor {t.name!r} ({t.ggml_type}): data offset {t.offset} is not a "
                f"multiple of the file's alignment {al}"[:300], t.name,
                field="offset", expected=t.offset - t.offset % al + al, actual=t.offset))
        elif expected is not None and t.offset != expected and t.name not in overlapping:
            tally.add(problem(
                out.path, K.OFFSET,
                f"tensor {t.name!r} ({t.ggml_type}): data offset {t.offset}, where ggml "
                f"requires {expected} (the sizes of the tensors before it in tensor-info "
                f"order, each padded to {al} bytes): the offsets are out of order or leave "
                "a gap"[:300], t.name, field="offset", expected=expected, actual=t.offset))
        # the next tensor belongs after the furthest slot so far, so one moved
        # tensor is named alone, not every tensor after it
        end = t.offset - t.offset % al + _pad(t.nbytes, al)
        expected = end if expected is None else max(expected, end)


def _span(t: TensorInfo) -> str:
    blocks = t.numel // t.block_size
    return (f"{t.ggml_type}, {blocks} blocks of {t.block_size} elements × {t.type_size} bytes"
            if t.block_size > 1 else f"{t.ggml_type}, {t.numel} elements × {t.type_size} bytes")


def _overlap(out: GGUFFile, tally: Tally, a: TensorInfo, b: TensorInfo) -> None:
    """``b`` begins inside ``a``'s span (``a`` starts at or before it).  When
    ``a`` starts first, its span — fixed by its type and dims — is what runs
    into ``b``: ``a`` is named, with the bytes it needs and the room before
    ``b``, because a reader of ``a`` takes its tail from ``b`` (a writer that
    sized a tensor wrongly spaces the offsets so).  Two tensors at one offset
    name the later info."""
    a_end, b_end = a.offset + a.nbytes, b.offset + b.nbytes
    shared = min(a_end, b_end) - b.offset
    if a.offset < b.offset:
        room = b.offset - a.offset
        tally.add(problem(
            out.path, K.OVERLAP,
            f"tensor {a.name!r} ({_span(a)}) needs {a.nbytes} bytes from data offset "
            f"{a.offset}, but tensor {b.name!r} begins {room} bytes after it: {shared} bytes "
            "are shared"[:300], a.name,
            lines=(f"[{a.offset}, {a_end}) and [{b.offset}, {b_end}) overlap: a reader of "
                   f"{a.name!r} takes its last {shared} bytes from {b.name!r}; a bounds check "
                   "against the file end cannot see it, only the spans' sizes can.",),
            field="offset", expected=a_end, actual=b.offset,
            extra=(("other", b.name), ("shared", shared), ("needs", a.nbytes),
                   ("room", room))))
        return
    tally.add(problem(
        out.path, K.OVERLAP,
        f"tensor {b.name!r} ({b.ggml_type}) shares {shared} bytes with tensor {a.name!r}: "
        f"both begin at data offset {b.offset}; spans [{b.offset}, {b_end}) and "
        f"[{a.offset}, {a_end})"[:300], b.name,
        field="offset", expected=a_end, actual=b.offset,
        extra=(("other", a.name), ("shared", shared))))
