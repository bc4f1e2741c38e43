"""Random-access byte sources: what the container readers read files through.

A :class:`ByteSource` has a ``size`` and answers bounded reads of
``(offset, length)``: every range is checked against the size before a byte
is allocated, so a length read from a hostile header costs nothing until it
is known to fit.  Where the source can hand out its bytes without a copy (a
local file, through one read-only map) ``view`` does; elsewhere it returns
None and callers read.  The GGUF header walk and the safetensors header read
go through this interface, and ``grit scan --deep`` streams planes through
``readinto`` into one reused buffer, so the bytes it hashes never stay
resident in the process (the page cache holds them, not the process).

:class:`LocalFile` is the local implementation: the file is opened with
:func:`grit._files.open_regular` (a FIFO, a device or a directory is
refused, without blocking), read with ``pread`` and mapped read-only once,
on the first ``view``.
"""
from __future__ import annotations

import mmap
import operator
import os
from typing import Any

import numpy as np

from .._files import open_regular, register_map
from ..errors import GritUsageError

__all__ = ["ByteSource", "LocalFile", "Span", "SourceRangeError", "ShortReadError",
           "open_source", "address_of", "LimitError", "limit", "LIMITS"]


class SourceRangeError(GritUsageError):
    """A read of bytes the source does not hold: (offset, length) outside
    [0, size), or a negative or non-integer offset or length."""


class ShortReadError(GritUsageError):
    """The source held fewer bytes than its size promised when they were
    read (a local file truncated while it was open)."""


class LimitError(GritUsageError):
    """A count or a budget past its configured limit: more KV entries or
    tensors than a reader walks (:func:`limit`), or more remote requests or
    bytes than the network policy allows (``grit scan`` reports it as
    S808)."""


#: the count limits of the container readers, by name: their defaults and
#: the environment variable that overrides each (read at each use)
LIMITS: dict[str, tuple[int, str]] = {
    "gguf_kv": (1 << 16, "GRIT_MAX_GGUF_KV"),
    "tensors": (1 << 17, "GRIT_MAX_TENSORS"),
}


def limit(name: str) -> int:
    """The limit ``name`` of :data:`LIMITS`: its environment variable when
    set (a non-negative integer, else GritUsageError), else its default."""
    default, var = LIMITS[name]
    text = os.environ.get(var, "").strip()
    if not text:
        return default
    try:
        v = int(text, 0)
    except ValueError:
        v = -1
    if v < 0:
        raise GritUsageError(f"{var}={text[:40]!r}: not a non-negative integer")
    return v


def _index(x, what: str) -> int:
    try:
        v = operator.index(x)
    except TypeError:
        raise SourceRangeError(f"{what} must be an integer, got {type(x).__name__}") from None
    if v < 0:
        raise SourceRangeError(f"{what} must be non-negative, got {v}")
    return v


def address_of(buf) -> int | None:
    """The address of a contiguous buffer's first byte (None for an empty or
    non-contiguous one): how :meth:`ByteSource.locate` finds a view."""
    try:
        mv = memoryview(buf)
    except TypeError:
        return None
    if not mv.nbytes or not mv.c_contiguous:
        return None
    return int(np.frombuffer(mv.cast("B"), np.uint8).ctypes.data)


class Span:
    """``nbytes`` bytes of ``source`` from ``offset``, not read yet: what a
    plane of a source without views (a remote file) is until a consumer
    streams it (``grit scan --deep`` hashes it chunk by chunk) or reads a
    bounded prefix of it.  The range was checked against the source when
    the span was made."""

    __slots__ = ("source", "offset", "nbytes")

    def __init__(self, source: "ByteSource", offset: int, nbytes: int):
        self.offset, self.nbytes = source.check_range(offset, nbytes, "span")
        self.source = source

    def read(self, n: int | None = None, what: str = "plane") -> bytes:
        """The span's first ``n`` bytes (all of them when None), a copy."""
        k = self.nbytes if n is None else min(self.nbytes, _index(n, "span read length"))
        return self.source.read(self.offset, k, what)

    def stream(self, chunk: int = 1 << 22):
        """The span's bytes in consecutive buffers of at most ``chunk`` bytes
        (:meth:`ByteSource.stream`)."""
        return self.source.stream(self.offset, self.nbytes, chunk)

    def __len__(self) -> int:
        return self.nbytes

    def __repr__(self) -> str:
        return f"Span({self.source.name!r}, {self.offset}, {self.nbytes})"


class ByteSource:
    """The interface: ``size``, ``name``, bounded ``read`` / ``readinto``,
    a zero-copy ``view`` where the source can give one (else None), and
    ``close`` (also as a context manager).  Subclasses implement
    :meth:`_readinto` (the range is already checked) and may implement
    :meth:`_view`."""

    name: str = ""
    size: int = 0

    # -- the range check every read goes through -----------------------------
    def check_range(self, offset, length, what: str = "read") -> tuple[int, int]:
        """(offset, length) as ints, checked to lie inside the source."""
        off = _index(offset, f"{what} offset")
        n = _index(length, f"{what} length")
        if off > self.size or n > self.size - off:
            raise SourceRangeError(f"{self.name}: {what} of {n} bytes at offset {off}: the "
                                   f"source holds {self.size} bytes "
                                   f"({max(0, self.size - off)} from that offset)")
        return off, n

    def read(self, offset, length, what: str = "read") -> bytes:
        """``length`` bytes from ``offset``; the range is checked before
        anything is allocated."""
        off, n = self.check_range(offset, length, what)
        if n == 0:
            return b""
        out = bytearray(n)
        self._full(off, memoryview(out), what)
        return bytes(out)

    def readinto(self, offset, buf, what: str = "read") -> int:
        """Fill the writable buffer ``buf`` from ``offset`` (its whole length
        must lie inside the source); the byte count."""
        mv = memoryview(buf).cast("B")
        if mv.readonly:
            raise GritUsageError("readinto needs a writable buffer")
        off, n = self.check_range(offset, mv.nbytes, what)
        if n:
            self._full(off, mv, what)
        return n

    def _full(self, off: int, mv: memoryview, what: str) -> None:
        done = 0
        while done < mv.nbytes:
            got = self._readinto(off + done, mv[done:])
            if got <= 0:
                raise ShortReadError(f"{self.name}: {what}: the source ended {mv.nbytes - done} "
                                     f"bytes short at offset {off + done} (it promised "
                                     f"{self.size} bytes)")
            done += got

    def stream(self, offset, length, chunk: int = 1 << 22):
        """The bytes of (offset, length) as consecutive read-only buffers of
        at most ``chunk`` bytes, for a consumer that handles each one before
        asking for the next (a buffer is reused or released once the next
        one is asked for).  Here: ``readinto`` one reused buffer, so memory
        stays at one chunk whatever the length."""
        off, n = self.check_range(offset, length, "stream")
        buf = bytearray(min(n, max(1, chunk)))
        mv = memoryview(buf)
        end = off + n
        while off < end:
            k = min(len(buf), end - off)
            self._full(off, mv[:k], "stream")
            yield mv[:k].toreadonly()
            off += k

    def view(self, offset=0, length=None):
        """A read-only zero-copy view of ``length`` bytes from ``offset`` (to
        the end when None), or None where this source cannot give one."""
        off = _index(offset, "view offset")
        n = max(0, self.size - off) if length is None else length
        off, n = self.check_range(off, n, "view")
        return self._view(off, n)

    def locate(self, buf) -> int | None:
        """The offset of ``buf`` in this source when it is a view of it
        (None otherwise, and for an empty buffer)."""
        return None

    def release(self, buf) -> None:
        """Drop the process's resident pages of ``buf`` when it is a view of
        this source (a hint: its bytes read the same afterwards); a no-op
        where the source keeps no pages."""

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- what a source implements ------------------------------------------
    def _readinto(self, offset: int, mv: memoryview) -> int:
        raise NotImplementedError

    def _view(self, offset: int, length: int):
        return None


class LocalFile(ByteSource):
    """A local regular file: ``pread`` for reads, one read-only map for
    views (made on the first ``view``; an empty file has no map and views of
    it are empty).  The size is the file's when it was opened."""

    def __init__(self, path) -> None:
        self.name = os.fspath(path)
        self._f = open_regular(self.name)
        try:
            self.size = os.fstat(self._f.fileno()).st_size
        except BaseException:
            self._f.close()
            raise
        self._map: Any = None
        self._mm: Any = None
        self._base: int | None = None

    @property
    def closed(self) -> bool:
        return self._f.closed

    def _readinto(self, offset: int, mv: memoryview) -> int:
        if self._f.closed:
            raise GritUsageError(f"{self.name}: the source is closed")
        return os.preadv(self._f.fileno(), [mv], offset)

    def mapping(self):
        """The whole file as a read-only memoryview (zero-copy), or b"" for
        an empty file."""
        if self._map is None:
            if self.size == 0:
                return b""
            if self._f.closed:
                raise GritUsageError(f"{self.name}: the source is closed")
            mm = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ)
            # (the file may have grown since it was opened: the size stays the first one)
            self._mm = mm
            self._map = memoryview(mm)[:self.size]
            self._base = address_of(self._map)
            # (reads through views are checked against the file's size first:
            # grit._files.check_mapped, so that a truncated file is no SIGBUS)
            register_map(mm, self.size, self._f.fileno(), self.name)
        return self._map

    def _view(self, offset: int, length: int):
        if length == 0:
            return memoryview(b"")
        return self.mapping()[offset:offset + length]

    def stream(self, offset, length, chunk: int = 1 << 22):
        """As :meth:`ByteSource.stream`, through the map without a copy: each
        chunk's pages are released from the process (``MADV_DONTNEED``; the
        page cache keeps them) once the next chunk is asked for, so the
        process never holds more than one chunk of the file resident.  The
        map is shared and read-only: a released page that a live view reads
        again is faulted back in with the same bytes."""
        off, n = self.check_range(offset, length, "stream")
        if n == 0:
            return
        m = self.mapping()
        dontneed = getattr(mmap, "MADV_DONTNEED", None)
        page = mmap.PAGESIZE
        step = max(page, chunk - chunk % page)
        end = off + n
        while off < end:
            k = min(step - off % step, end - off)
            yield m[off:off + k]
            if dontneed is not None:
                a = off - off % page
                self._mm.madvise(dontneed, a, off + k - a)
            off += k

    def release(self, buf) -> None:
        off = self.locate(buf)
        dontneed = getattr(mmap, "MADV_DONTNEED", None)
        if off is None or dontneed is None or self._mm is None:
            return
        page = mmap.PAGESIZE
        a = off - off % page
        self._mm.madvise(dontneed, a, off + memoryview(buf).nbytes - a)

    def locate(self, buf) -> int | None:
        if self._base is None:
            return None
        a = address_of(buf)
        if a is None:
            return None
        off = a - self._base
        n = memoryview(buf).nbytes
        return off if 0 <= off and off + n <= self.size else None

    def __del__(self) -> None:
        f = getattr(self, "_f", None)
        if f is not None:
            f.close()

    def close(self) -> None:
        """Close the file.  The map stays valid for views still alive (the
        kernel keeps it until the last one goes); new reads are refused."""
        self._f.close()


def open_source(path) -> LocalFile:
    """The byte source of a local path (an OSError opening it propagates;
    anything but a regular file is NotRegularFileError)."""
    return LocalFile(path)
