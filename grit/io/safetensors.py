"""safetensors files: GRIT arrays as byte planes beside ordinary tensors.

``save(path, tensors, metadata=None)`` writes a file that the official
``safetensors`` library loads unchanged: every present plane of a
:class:`~grit.array.GritArray` is a one-dimensional ``U8`` tensor named
``<name>.grit.<role>`` (role ∈ data, scale0, scale1, aux), ordinary numpy
arrays are ordinary tensors, and what makes the planes a GRIT array — the
descriptor, the logical shape, the canonical grade strings and the layout
expressions of class-0x8/0xF placement words — is one JSON document under
the ``__metadata__`` key ``__grit__`` (schema ``grit-safetensors``,
version 1).  The format is specified in docs/file-format.md.

:func:`read` parses the file once — the header, its entries, a read-only
map of the data, and the ``__grit__`` document (which entries are the planes
of which GRIT tensor) — and returns what it parsed plus a list of
:class:`~grit.io.problems.Problem` values instead of raising at the first.
``load(path)`` raises the first problem and returns zero-copy views: a GritArray for every GRIT
tensor, a read-only ndarray for every other tensor.  It reads both this
schema and the *descriptor map* convention, in which ``__grit__`` is a JSON
object ``{tensor name: 128-hex descriptor}`` and the named tensor's bytes are
the concatenated payload data ‖ scale0 ‖ scale1 ‖ aux (§3.6) under its
logical shape.
"""
from __future__ import annotations

import copy
import json
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from .. import descriptor as D
from ..facts import PLANE_NAMES
from .._files import GritFileError, MappedTensors, atomic_write
from ..array import GritArray
from ..errors import GritError, GritUsageError
from ..fingerprint import base32_encode, gid as _gid
from ..grade import lookup_grade, register_grade
from ..placement.expr import layout_word, parse_layout, register_layout, resolve_layout
from ..placement.words import CLASS_HASHED, CLASS_OPAQUE, placement_class
from ..dtypes import LOADABLE, ST_DTYPES, bf16_widened, st_dtype_of
from .problems import Problem, ProblemKind as K, Tally, raise_first
from .source import LIMITS, ByteSource, LimitError, ShortReadError, Span, limit, open_source

__all__ = ["save", "layout", "entries_of", "Layout", "load", "read", "read_source",
           "SafetensorsFile", "StEntry",
           "GritDoc", "GritEntry", "SafetensorsTensors", "CheckFailed", "GritFileError",
           "SCHEMA", "VERSION", "GRIT_KEY", "ROLES", "plane_tensor_name", "is_safetensors"]

SCHEMA = "grit-safetensors"
VERSION = 1
GRIT_KEY = "__grit__"
META_KEY = "__metadata__"
ROLES = PLANE_NAMES          # the plane roles a GRIT tensor entry maps (§3.6 order)
ENTRY_KEYS = frozenset({"dtype", "shape", "data_offsets"})

#: the largest header this reader parses (the official library's own limit)
MAX_HEADER = 100_000_000
#: the deepest rank a header entry may declare
MAX_RANK = 64
#: an element count past this is reported without forming the exact product
NUMEL_CAP = 1 << 64

_WORD_KEY = re.compile(r"0x[0-9a-f]{16}\Z")


def plane_tensor_name(name: str, role: str) -> str:
    """The safetensors tensor name holding plane ``role`` of GRIT tensor ``name``."""
    return f"{name}.grit.{role}"


def is_safetensors(head: bytes, size: int) -> bool:
    """Whether the first 9 bytes of a ``size``-byte file look like safetensors."""
    if len(head) < 9 or head[8:9] != b"{":
        return False
    n = struct.unpack("<Q", head[:8])[0]
    return 2 <= n <= size - 8


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def numel_of(shape) -> int | None:
    """The element count of a shape of non-negative ints, computed with
    Python ints and bounded: None once the product passes 2^64 (a zero
    dimension anywhere still gives 0)."""
    if any(x == 0 for x in shape):
        return 0
    n = 1
    for x in shape:
        n *= x
        if n > NUMEL_CAP:
            return None
    return n


# ---------------------------------------------------------------------------
# the container


@dataclass(frozen=True)
class StEntry:
    """One tensor entry of the header; ``dtype``/``shape``/``span`` are None
    where the entry's field is malformed (a problem says why).  ``span`` is
    [begin, end) in the data buffer as declared (it may run past its end)."""

    name: str
    dtype: str | None
    shape: tuple[int, ...] | None
    span: tuple[int, int] | None


@dataclass
class SafetensorsFile:
    """A parsed safetensors file: header entries, ``__metadata__``, the
    ``__grit__`` document, a read-only map of the data and the problems."""

    path: str
    size: int
    start: int = 0                       # 8 + header length: where the data buffer begins
    metadata: dict = field(default_factory=dict)
    entries: dict[str, StEntry] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    doc: "GritDoc" = field(default_factory=lambda: GritDoc())
    buffer: Any = field(default=None, repr=False)   # the data buffer (a memoryview)
    source: ByteSource | None = field(default=None, repr=False, compare=False)
    #: the small tensors' bytes read in runs from a source without views, by name
    _small: dict[str, bytes] = field(default_factory=dict, repr=False, compare=False)
    #: the runs of small tensors (first offset, end, names), made when first needed
    _runs: dict[str, tuple[int, int, tuple[str, ...]]] | None = field(
        default=None, repr=False, compare=False)

    @property
    def parsed(self) -> bool:
        """Whether the header could be parsed (no UNREADABLE problem)."""
        return not any(p.kind is K.UNREADABLE for p in self.problems)

    @property
    def avail(self) -> int:
        """Bytes in the data buffer."""
        return max(0, self.size - self.start)

    def _held(self, name) -> tuple[int, int]:
        """The part of ``name``'s span the file holds ((0, 0) for no entry)."""
        e = self.entries.get(name) if isinstance(name, str) else None
        if e is None or e.span is None:
            return 0, 0
        return min(e.span[0], self.avail), min(e.span[1], self.avail)

    def on_disk(self, name) -> int:
        """The bytes of ``name``'s span that the file holds (0 for no entry)."""
        b, end = self._held(name)
        return end - b

    def span(self, name) -> tuple[int, int]:
        """(offset in the source, length) of the bytes of ``name``'s span that
        the file holds: what :meth:`view` shows, for reading them through
        ``source`` instead ((0, 0) for no entry)."""
        b, end = self._held(name)
        return self.start + b, end - b

    def view(self, name):
        """A read-only view of the bytes of ``name``'s span that the file
        holds (cut short at the end of the file; b"" for no entry).  A source
        without views (a remote file) reads them instead: a copy."""
        b, end = self._held(name)
        if end <= b:
            return b""
        if self.buffer is not None:
            return self.buffer[b:end]
        if self.source is not None and self.source.view(0, 0) is None:
            return self.source.read(self.start + b, end - b, f"tensor {name!r}")
        return b""

    def plane(self, name):
        """``name``'s held bytes as a plane for a consumer that streams them:
        :meth:`view` where the source has views, else a
        :class:`~grit.io.source.Span` of the source (nothing is read yet)."""
        if self.buffer is None and self.source is not None and self.source.view(0, 0) is None:
            off, n = self.span(name)
            return Span(self.source, off, n) if n > 0 else b""
        return self.view(name)

    def tensor_values(self, name: str, max_bytes: int):
        """A small tensor's values (a copy), or None: unknown entry, a dtype
        without a numpy type, bytes missing, or more than ``max_bytes``."""
        e = self.entries.get(name)
        d = ST_DTYPES.get(e.dtype) if e is not None and e.dtype is not None else None
        if e is None or e.span is None or d is None or d.numpy is None:
            return None
        b, end = e.span
        if end > self.avail or end - b > max_bytes or (end - b) % d.itemsize:
            return None
        if self.buffer is None and self.source is not None and end - b <= SMALL_TENSOR \
                and self.source.view(0, 0) is None:
            return np.frombuffer(self._small_bytes(name), d.numpy)
        return np.frombuffer(bytes(self.view(name)), d.numpy)

    def _small_bytes(self, name: str) -> bytes:
        """A small tensor's bytes from a source without views, read with its
        run: the first time any tensor of a run is asked for, one ranged
        read covers the whole run and every tensor of it is kept."""
        hit = self._small.get(name)
        if hit is not None:
            return hit
        if self._runs is None:
            self._runs = small_runs(self.entries, self.avail)
        first, end, names = self._runs[name]
        blob = self.source.read(self.start + first, end - first,   # type: ignore[union-attr]
                                f"tensor {names[0]!r} and {len(names) - 1} small tensors "
                                "beside it" if len(names) > 1 else f"tensor {name!r}")
        for n in names:
            b, e = self.entries[n].span  # type: ignore[misc]
            self._small[n] = bytes(blob[b - first:e - first])
        return self._small[name]

    def truncation(self) -> tuple[str, ...]:
        """The derivation line for a header placing tensors past the end of
        the file (empty when none does)."""
        ends = [e.span[1] for e in self.entries.values()
                if e.span is not None and e.span[1] > self.avail]
        if not ends:
            return ()
        end = max(ends)
        return (f"The file holds {self.avail} data bytes; its header places tensors up to "
                f"byte {end}: the shard is truncated ({end - self.avail} bytes missing).",)


#: the largest tensor read together with its neighbours: at most two numbers
#: (a per-tensor scale, a global scale, a packed weight's logical shape),
#: what the recognisers and the config checks read at level 1
SMALL_TENSOR = 16
#: the widest stretch of other bytes a run reads over between two members
RUN_GAP = 4096
#: the longest run (one ranged read; a header cache keeps reads this long:
#: grit.io.http.SMALL_READ)
RUN_MAX = 1 << 20


def small_runs(entries: Mapping[str, StEntry],
               avail: int) -> dict[str, tuple[int, int, tuple[str, ...]]]:
    """The small tensors of a header grouped into runs, by member: each run
    is (first offset, end, member names) in the data buffer, its members
    the tensors of at most :data:`SMALL_TENSOR` bytes the file holds whole,
    taken in offset order while the next begins at most :data:`RUN_GAP`
    bytes after the run's end and the run stays within :data:`RUN_MAX`
    bytes.  Reading a run once serves all its members: in a checkpoint as
    the safetensors library writes it, the float32 scales of a quantised
    layer stack sit side by side after the header."""
    small = sorted((e.span[0], e.span[1], n) for n, e in entries.items()
                   if e.span is not None and e.span[1] <= avail
                   and 0 < e.span[1] - e.span[0] <= SMALL_TENSOR)
    out: dict[str, tuple[int, int, tuple[str, ...]]] = {}
    run: list[tuple[int, int, str]] = []

    def close() -> None:
        if run:
            first, end = run[0][0], max(e for _, e, _ in run)
            names = tuple(n for _, _, n in run)
            for n in names:
                out[n] = (first, end, names)
            run.clear()
    for b, e, n in small:
        if run and (b - max(x for _, x, _ in run) > RUN_GAP or e - run[0][0] > RUN_MAX):
            close()
        run.append((b, e, n))
    close()
    return out


def _no_dupes(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _json(text):
    """Parse JSON rejecting duplicate keys; (value, None) or (None, why)."""
    try:
        return json.loads(text, object_pairs_hook=_no_dupes), None
    except (TypeError, ValueError, RecursionError) as e:
        return None, str(e)


class _Collector:
    """Problems of one file, each with the GritFileError grit.load raises,
    capped per kind (:class:`~grit.io.problems.Tally`: no Problem and no
    error object is built past the cap)."""

    def __init__(self, path: str, problems: list[Problem]):
        self.path = path
        self.tally = Tally(problems)
        self.full, self.count, self.finish = self.tally.full, self.tally.count, self.tally.finish

    def __call__(self, kind: K, message: str, tensor: str | None = None, **facts) -> None:
        if self.full(kind):
            self.count(kind)
            return
        lines = facts.pop("lines", ())
        err = GritFileError(f"{self.path}: not a valid safetensors file: {message}"
                            + "".join("\n  " + ln for ln in lines))
        err.tensor = tensor  # type: ignore[attr-defined]
        self.tally.add(Problem(kind, message, tensor, lines=tuple(lines), error=err, **facts))


def read(path) -> SafetensorsFile:
    """Parse the safetensors file at ``path`` and map it read-only.  Never
    raises for the file's content (an OSError opening it propagates): every
    defect is a problem — UNREADABLE (and nothing else) when the header
    cannot be parsed; otherwise, in this order, BAD_METADATA, one per
    malformed entry (BAD_ENTRY, BAD_DTYPE, BAD_SHAPE), the ``__grit__``
    document's, then SIZE (entries that are not GRIT planes or payloads),
    OVERLAP, BAD_OFFSETS and PAST_END."""
    path = os.fspath(path)
    return read_source(open_source(path), path)


def read_source(src: ByteSource, path: str | None = None) -> SafetensorsFile:
    """:func:`read` over a byte source (``path`` names it in messages; the
    source's name by default).  The file keeps the source (``source``): the
    data buffer is its zero-copy view, and plane bytes can be read from it
    (:meth:`SafetensorsFile.span`)."""
    path = src.name if path is None else path
    size = src.size
    out = SafetensorsFile(path, size, source=src)
    add = _Collector(path, out.problems)
    n, h = _parse(src, size, add)
    if h is None:
        return out
    out.start = 8 + n
    meta = h.get(META_KEY)
    if meta is None:        # absent or null: the official reader's Option, no metadata
        meta = {}
    if not isinstance(meta, dict):
        add(K.UNREADABLE, f"{META_KEY} must be an object of strings")
        return out
    out.metadata = meta
    if size > out.start:
        out.buffer = src.view(out.start, size - out.start)
    bad = [k for k, v in meta.items() if not isinstance(v, str)]
    if bad:
        add(K.BAD_METADATA, f"{META_KEY} must be an object of strings: key {bad[0][:80]!r} "
                            f"holds {type(meta[bad[0]]).__name__}", field=META_KEY)
    raw = {k: v for k, v in h.items() if k != META_KEY}
    for name, e in raw.items():
        out.entries[name] = _entry(name, e, add)
    out.doc = _read_doc(out)
    out.problems.extend(out.doc.problems)
    _spans(out, raw, add)
    add.finish()
    return out


def _parse(src: ByteSource, size: int, add) -> tuple[int, dict | None]:
    """(header length, header object), or (0, None) with an UNREADABLE
    problem.  The length is checked against the source's size before the
    header is read (nothing is allocated for a length that cannot fit)."""
    if size < 10:
        add(K.UNREADABLE, f"the file is {size} bytes; a header needs at least 10")
        return 0, None
    n = struct.unpack("<Q", src.read(0, 8, "header length"))[0]
    if n < 2 or n > MAX_HEADER or n > size - 8:
        add(K.UNREADABLE, f"header length {n} is outside [2, min({MAX_HEADER}, "
                          f"file size − 8 = {size - 8})]")
        return 0, None
    try:
        hb = src.read(8, n, "header")
    except ShortReadError:
        add(K.UNREADABLE, "the file ended inside the header")
        return 0, None
    _within_limit(hb, src.name)
    if hb[:1] != b"{":
        add(K.UNREADABLE, f"the header begins with {hb[:1]!r}, not '{{' (the safetensors "
                          "format: the header data MUST begin with '{')")
        return 0, None
    try:
        text = hb.decode("utf-8")
    except UnicodeDecodeError as e:
        add(K.UNREADABLE, f"the header is not UTF-8 ({e})"[:300])
        return 0, None
    h, why = _json(text)
    if why is not None:
        add(K.UNREADABLE, f"the header is not valid JSON ({why})"[:300])
        return 0, None
    if not isinstance(h, dict):
        add(K.UNREADABLE, "the header is not a JSON object")
        return 0, None
    return n, h


#: JSON members an entry may take, metadata and GRIT document included: a
#: header of more than this many ``:`` per allowed tensor is refused unparsed
_COLONS_PER_TENSOR = 32


def _within_limit(hb: bytes, path: str) -> None:
    """A header naming more tensors than :func:`grit.io.source.limit`
    ``("tensors")`` allows is a LimitError, decided before the JSON is
    parsed (each member of the parse costs memory): by the entries'
    ``"data_offsets"`` keys, and by the ``:`` bytes, at most
    _COLONS_PER_TENSOR per allowed tensor (an upper bound on the members)."""
    most = limit("tensors")
    n = hb.count(b'"data_offsets"')
    if n > most or hb.count(b":") > _COLONS_PER_TENSOR * most + 4096:
        raise LimitError(f"{path}: the header names more than {most} tensors "
                         f"({n} data_offsets), past the limit ({LIMITS['tensors'][1]}); it "
                         "was not parsed")


def _entry(n: str, e, add) -> StEntry:
    """One entry's fields, each malformed one a problem."""
    if not isinstance(e, dict):
        add(K.BAD_ENTRY, f"tensor {n!r}: an entry is an object with exactly dtype, shape "
                         f"and data_offsets, got {type(e).__name__}", n)
        return StEntry(n, None, None, None)
    extra = e.keys() - ENTRY_KEYS
    if extra:
        add(K.BAD_ENTRY, f"tensor {n!r}: an entry is an object with exactly dtype, shape "
                         f"and data_offsets, got also {sorted(map(str, extra))}"[:300], n)
    offs = e.get("data_offsets")
    # type(x) is int: JSON integers, never bools
    span = ((offs[0], offs[1]) if type(offs) is list and len(offs) == 2
            and type(offs[0]) is int and type(offs[1]) is int and 0 <= offs[0] <= offs[1]
            else None)
    st, shape = e.get("dtype"), e.get("shape")
    dt = ST_DTYPES.get(st) if isinstance(st, str) else None
    if dt is None:
        add(K.BAD_DTYPE, f"tensor {n!r}: unknown dtype {str(st)[:40]!r}", n,
            lines=(f"safetensors dtypes: {', '.join(ST_DTYPES)}.",), field="dtype",
            actual=str(st)[:80])
    if type(shape) is not list or len(shape) > MAX_RANK or not all(type(x) is int
                                                                  for x in shape):
        add(K.BAD_SHAPE, f"tensor {n!r}: shape must be a list of at most {MAX_RANK} integers, "
                         f"got {str(shape)[:60]}", n, field="shape")
        shape = None
    elif any(x >= 2**63 for x in shape):
        i = next(i for i, x in enumerate(shape) if x >= 2**63)
        add(K.BAD_SHAPE, f"tensor {n!r}: shape {str(shape)[:60]} has an extent past 2^63 − 1 "
                         f"(dim {i})", n,
            lines=("An extent is an int64 (numpy's limit, and the gid's i64le); the official "
                   "library refuses extents past 2^64 − 1.",),
            field="shape", actual=str(shape)[:80])
        shape = None
    elif any(x < 0 for x in shape):
        i = next(i for i, x in enumerate(shape) if x < 0)
        add(K.BAD_SHAPE, f"tensor {n!r}: shape {str(shape)[:60]} has a negative dimension "
                         f"(dim {i} = {shape[i]})", n,
            lines=("A dimension is a count of elements: it cannot be negative.",),
            field="shape", actual=str(shape)[:80])
        shape = None
    return StEntry(n, st if dt is not None else None,
                   tuple(shape) if shape is not None else None, span)


def _spans(f: SafetensorsFile, raw: dict, add) -> None:
    """Byte counts of the entries that are not GRIT planes or payloads (those
    the size equations measure), overlaps, offsets, the end of the file."""
    spans: list[tuple[int, int, str]] = []
    for n, e in f.entries.items():
        if e.span is None:
            continue
        if e.span[1] > e.span[0]:
            spans.append((e.span[0], e.span[1], n))
        if e.dtype is not None and e.shape is not None and n not in f.doc.claimed:
            _sized(n, ST_DTYPES[e.dtype], e.shape, e.span, add)
    _overlaps(spans, add)
    if all(e.span is not None for e in f.entries.values()):
        _coverage(spans, f.avail, add)
    trunc = f.truncation()
    for n, e in f.entries.items():
        if e.span is None:
            if isinstance(raw[n], dict):
                add(K.BAD_OFFSETS, f"tensor {n!r}: the header entry has no valid data_offsets "
                                   f"({str(raw[n])[:80]})", n)
        elif e.span[1] > f.avail:
            b, end = e.span
            add(K.PAST_END, f"tensor {n!r}: data_offsets [{b}, {end}) run past the "
                            f"{f.avail}-byte data buffer", n, lines=trunc,
                field="data_offsets", expected=end, actual=f.avail)


def _sized(n: str, dt, shape: tuple[int, ...], span: tuple[int, int], add) -> None:
    numel = numel_of(shape)
    have = span[1] - span[0]
    dims = " × ".join(str(x) for x in shape[:8]) + (" × …" if len(shape) > 8 else "")
    if numel is None:
        add(K.SIZE, f"tensor {n!r}: {dt.name}{str(list(shape))[:60]} needs more than 2^64 "
                    f"elements of {dt.bits} bits; data_offsets span {have} bytes", n,
            lines=(f"numel = {dims or '1'} > 2^64: no file can hold it.",), field="shape",
            actual=have)
        return
    want = dt.nbytes(numel)
    if want != have:
        per = (f"{dt.itemsize} bytes ({dt.name})" if dt.itemsize is not None
               else f"{dt.bits} bits ({dt.name}), rounded up to whole bytes")
        add(K.SIZE, f"tensor {n!r}: {dt.name}{str(list(shape))[:60]} needs {want} bytes; "
                    f"data_offsets [{span[0]}, {span[1]}) span {have}", n,
            lines=(f"numel = {dims or '1'}" + (f" = {numel}" if len(shape) > 1 else "")
                   + f", × {per} = {want} bytes ≠ {have}.",),
            field="data_offsets", expected=want, actual=have)


def _overlaps(spans: list[tuple[int, int, str]], add) -> None:
    spans.sort()
    hold: tuple[int, int, str] | None = None   # the span reaching furthest so far
    for b, e, n in spans:
        if hold is not None and b < hold[1]:
            if add.full(K.OVERLAP):
                add.count(K.OVERLAP)
            else:
                hb, he, hn = hold
                add(K.OVERLAP, f"tensors {hn!r} [{hb}, {he}) and {n!r} [{b}, {e}) overlap "
                               f"({min(he, e) - b} shared bytes)", n,
                    lines=("Every byte of the data buffer belongs to at most one tensor.",),
                    field="data_offsets", extra=(("tensors", [hn, n]),))
        if hold is None or e > hold[1]:
            hold = (b, e, n)


def _coverage(spans: list[tuple[int, int, str]], avail: int, add) -> None:
    """The safetensors format's rule that the data buffer is entirely indexed,
    without holes (the official reader refuses a gap and bytes after the last
    tensor).  ``spans`` are the non-empty spans, sorted."""
    pos, gaps, first = 0, 0, None
    for b, e, n in spans:
        if b > pos:
            gaps += b - pos
            first = first or (pos, b, n)
        pos = max(pos, e)
    tail = avail - pos if pos < avail else 0
    if not gaps and not tail:
        return
    where = (f"bytes [{first[0]}, {first[1]}) before tensor {first[2]!r} belong to no tensor"
             if first is not None else
             f"the {tail} bytes after the last tensor (from byte {pos}) belong to no tensor")
    add(K.COVERAGE, f"the data buffer is not entirely indexed: {where}"[:300],
        first[2] if first is not None else None,
        lines=(f"{gaps} bytes in gaps between tensors and {tail} after the last one; the "
               "safetensors format indexes every byte of the buffer, without holes.",),
        field="data_offsets", expected=0, actual=gaps + tail)


# ---------------------------------------------------------------------------
# the __grit__ document


@dataclass(frozen=True)
class GritEntry:
    """One GRIT tensor the ``__grit__`` document declares.  ``desc``/``shape``
    are None where the recorded value cannot be read (a BAD_DESCRIPTOR
    problem says why); ``planes`` names the file tensor of each role (None:
    absent); ``payload`` is the descriptor-map tensor holding data ‖ scale0 ‖
    scale1 ‖ aux."""

    name: str
    desc: D.Descriptor | None
    shape: tuple[int, ...] | None
    planes: tuple[str | None, str | None, str | None, str | None] = (None, None, None, None)
    payload: str | None = None
    desc_text: str | None = None
    gid: Any = None


@dataclass
class GritDoc:
    """What ``__grit__`` says.  ``convention`` is "grit-safetensors/1",
    "descriptor-map" or None (no document, or one that is not JSON: then
    ``present`` tells them apart); ``declared`` names every GRIT tensor it
    declares, ``tensors`` those whose descriptor and shape can be read;
    ``claimed`` maps each file tensor the document uses to the GRIT tensor it
    belongs to."""

    convention: str | None = None
    present: bool = False
    declared: list[str] = field(default_factory=list)   # every GRIT tensor named
    tensors: dict[str, GritEntry] = field(default_factory=dict)
    claimed: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def _shape_ok(shape) -> bool:
    return (isinstance(shape, list) and len(shape) <= MAX_RANK
            and all(_int(x) and 0 <= x < 2**63 for x in shape))


def _desc_of(text) -> D.Descriptor | None:
    if not D.is_descriptor_hex(text):
        return None
    return D.Descriptor.from_hex(text, strict=True)


def _read_doc(hdr: SafetensorsFile) -> GritDoc:
    """Read the ``__grit__`` document: register the grade strings and layout
    expressions it carries (as grit.load always has), and return its GRIT
    tensors with every defect as a problem."""
    doc = GritDoc()
    add = _Collector(hdr.path, doc.problems)
    try:
        _doc_of(hdr, doc, add)
    finally:
        add.finish()
    return doc


def _doc_of(hdr: SafetensorsFile, doc: GritDoc, add) -> None:
    if GRIT_KEY not in hdr.metadata:
        return
    doc.present = True
    raw, why = _json(hdr.metadata[GRIT_KEY])
    if why is not None:
        add(K.ANNOTATION_NOT_JSON, f"the {GRIT_KEY} metadata is not JSON ({why})"[:300])
        doc.present = False
        return
    if not isinstance(raw, dict):
        add(K.BAD_ANNOTATION, f"{GRIT_KEY} is not a JSON object")
        return
    if raw.get("schema") == SCHEMA:
        doc.convention = f"{SCHEMA}/{VERSION}"
        _doc_v1(hdr, raw, doc, add)
        return
    if "schema" in raw and not D.is_descriptor_hex(str(raw.get("schema"))):
        add(K.BAD_ANNOTATION, f"{GRIT_KEY}: unknown schema {raw.get('schema')!r}"[:300])
        raw = {k: v for k, v in raw.items() if k != "schema"}
    doc.convention = "descriptor-map"
    for name, text in raw.items():
        e = hdr.entries.get(name)
        if e is None:
            add(K.MISSING_TENSOR, f"{GRIT_KEY} gives a descriptor for tensor {name!r}, which "
                                  "the file lacks"[:300], name)
            continue
        doc.claimed[name] = name
        doc.declared.append(name)
        d = _desc_of(text)
        shape = list(e.shape) if e.shape is not None else None
        if d is None or not _shape_ok(shape):
            _bad_descriptor(name, text, shape, add)
        else:
            doc.tensors[name] = GritEntry(name, d, e.shape, payload=name, desc_text=text)


def _bad_descriptor(name: str, text, shape, add) -> None:
    add(K.BAD_DESCRIPTOR, f"tensor {name!r}: the recorded descriptor or shape cannot be read "
                          f"(desc {str(text)[:24]!r}…, shape {str(shape)[:40]})", name)


def _doc_v1(hdr: SafetensorsFile, raw: dict, doc: GritDoc, add) -> None:
    if type(raw.get("version")) is not int or raw.get("version") != VERSION:
        add(K.BAD_ANNOTATION, f"{GRIT_KEY} schema {SCHEMA} version {raw.get('version')!r}; "
                              f"this reader knows version {VERSION}"[:300])
    extra = set(raw) - {"schema", "version", "tensors", "grades", "layouts"}
    if extra:
        add(K.BAD_ANNOTATION, f"{GRIT_KEY}: unknown keys {sorted(extra)} in version "
                              f"{VERSION}"[:300])
    tensors, grades, layouts = (raw.get("tensors"), raw.get("grades", []),
                                raw.get("layouts", {}))
    if not isinstance(tensors, dict) or not isinstance(grades, list) \
            or not isinstance(layouts, dict):
        add(K.BAD_ANNOTATION, f"{GRIT_KEY}: tensors and layouts are objects, grades a list")
        tensors = tensors if isinstance(tensors, dict) else {}
        grades = grades if isinstance(grades, list) else []
        layouts = layouts if isinstance(layouts, dict) else {}
    for k, v in layouts.items():
        if not _WORD_KEY.match(k) or not isinstance(v, str):
            add(K.BAD_ANNOTATION, f"{GRIT_KEY}: layouts maps '0x' + 16 lowercase hex digits to "
                                  f"an expression, got {k!r}"[:300])
            continue
        try:
            w = layout_word(parse_layout(v))
        except GritError as e:
            add(K.BAD_ANNOTATION, f"{GRIT_KEY}: layout {k}: {e}"[:300])
            continue
        if w != int(k, 16):
            add(K.BAD_ANNOTATION, f"{GRIT_KEY}: layout {v!r} hashes to 0x{w:016x}, not {k}"[:300])
            continue
        register_layout(v)
    seen: dict = {}
    for g in grades:
        _grade(g, None, add, seen)
    for name, t in tensors.items():
        _tensor_v1(hdr, name, t, doc, add, seen)


_TENSOR_KEYS = frozenset({"desc", "shape", "planes", "grade", "gid"})
_ROLE_SET = frozenset(ROLES)


def _parse_grade(g) -> tuple[Any, str | None]:
    try:
        if not isinstance(g, str):
            raise GritUsageError("a grade is a canonical grade string")
        return register_grade(g), None
    except GritError as e:
        return None, (str(e).splitlines()[0] if str(e) else type(e).__name__)


#: the most outcomes of unparsable grade strings cached per document
_SEEN_FAILURES = 1024


def _grade(g, tensor: str | None, add, seen: dict):
    """Register one carried grade string; None (with a problem) when it does
    not parse.  ``seen`` caches each string's outcome for the document (a
    checkpoint repeats a handful of grades over thousands of tensors)."""
    got = seen.get(g) if isinstance(g, str) else None
    if got is None:
        got = _parse_grade(g)
        # every grade, and the first failures (a file of distinct bad strings
        # must not build a cache as large as itself)
        if isinstance(g, str) and (got[0] is not None or len(seen) < _SEEN_FAILURES):
            seen[g] = got
    grade, why = got
    if grade is None and add.full(K.BAD_GRADE):
        add.count(K.BAD_GRADE)
    elif grade is None:
        where = f"tensor {tensor!r} records" if tensor is not None else "the file carries"
        add(K.BAD_GRADE, f"{where} a grade string that does not parse: {g!r:.80}", tensor,
            lines=(why,))
    return grade


def _tensor_v1(hdr: SafetensorsFile, name: str, t, doc: GritDoc, add, seen: dict) -> None:
    if name in hdr.entries or name == META_KEY:
        add(K.BAD_ANNOTATION, f"GRIT tensor {name!r} collides with a tensor of the file", name)
    if not isinstance(t, dict):
        add(K.BAD_ANNOTATION, f"{GRIT_KEY}: tensor {name!r} needs desc, shape, planes "
                              "(and optionally grade, gid)", name)
        return
    doc.declared.append(name)
    unknown = t.keys() - _TENSOR_KEYS
    if unknown:
        add(K.BAD_ANNOTATION, f"{GRIT_KEY}: tensor {name!r} has unknown keys "
                              f"{sorted(map(str, unknown))}"[:300], name)
    text, shape = t.get("desc"), t.get("shape")
    d = _desc_of(text)
    readable = d is not None and _shape_ok(shape)
    if not readable:
        _bad_descriptor(name, text, shape, add)
    planes = t.get("planes", {})
    if not isinstance(planes, dict) or not planes.keys() <= _ROLE_SET:
        add(K.BAD_ANNOTATION, f"{GRIT_KEY}: tensor {name!r}: planes maps roles {ROLES} to "
                              "tensor names", name)
        planes = planes if isinstance(planes, dict) else {}
    g = t.get("grade")
    if g is not None:
        gr = _grade(g, name, add, seen)
        if gr is not None and d is not None and gr.id != d.grade_id:
            add(K.BAD_ANNOTATION, f"{GRIT_KEY}: tensor {name!r}: grade {g!r} has id "
                                  f"0x{gr.id:016x}, the descriptor says 0x{d.grade_id:016x}"[:300],
                name)
    names: list[str | None] = []
    for role in ROLES:
        tn = planes.get(role)
        names.append(tn if isinstance(tn, str) else None)
        if tn is None:
            continue
        e = hdr.entries.get(tn) if isinstance(tn, str) else None
        if e is None:
            add(K.BAD_ANNOTATION, f"tensor {name!r}: plane {role} names no tensor "
                                  f"({tn!r})"[:300], name)
            continue
        if tn in doc.claimed:
            add(K.BAD_ANNOTATION, f"tensor {tn!r} is a plane of both {doc.claimed[tn]!r} and "
                                  f"{name!r}", name)
        doc.claimed[tn] = name
        if e.span is not None and e.dtype is not None and e.shape is not None and (
                e.dtype != "U8" or e.shape != (e.span[1] - e.span[0],)):
            add(K.BAD_ANNOTATION, f"plane tensor {tn!r} must be U8 with shape "
                                  f"[{e.span[1] - e.span[0]}], got {e.dtype}{list(e.shape)}", name)
    gid = t.get("gid")
    if gid is not None and not isinstance(gid, str):
        add(K.BAD_ANNOTATION, f"{GRIT_KEY}: tensor {name!r}: gid is a 26-digit base32 string, "
                              f"got {type(gid).__name__}", name, field="gid")
    elif gid is not None and readable:
        _gid_agrees(name, gid, d, shape, add)  # type: ignore[arg-type]
    if readable:
        doc.tensors[name] = GritEntry(name, d, tuple(shape), tuple(names),  # type: ignore[arg-type]
                                      desc_text=text, gid=gid)


def _gid_agrees(name: str, gid: str, d: D.Descriptor, shape: list, add) -> None:
    """A recorded gid against the §6.3 gid of the descriptor, its grade and
    the shape.  Skipped when the grade is unknown: the level-1 check then
    fails GradeUnknown for the tensor."""
    g = lookup_grade(d.grade_id)
    if g is None:
        return
    try:
        want = base32_encode(_gid(g.canonical, d.to_bytes(), shape))
    except GritError:
        return
    if gid != want:
        add(K.BAD_ANNOTATION, f"tensor {name!r}: recorded gid {gid!r:.40} is not the gid of "
                              f"its descriptor, grade and shape ({want})", name,
            field="gid", expected=want, actual=gid[:40])


# ---------------------------------------------------------------------------
# load


@dataclass(frozen=True)
class CheckFailed:
    """A GRIT tensor whose level-1 check failed, returned in its place by
    ``load(..., strict=False)``.  ``error`` is the GritError the check raised
    (its ``status`` the §7.1 status); ``raw`` maps each role present in the
    file to a read-only view of its bytes (``payload`` for the descriptor-map
    convention)."""

    name: str
    error: GritError
    desc: str
    shape: tuple
    raw: dict = field(repr=False, default_factory=dict)

    @property
    def status(self):
        return self.error.status

    def decode(self):
        raise self.error


class SafetensorsTensors(MappedTensors):
    """``{name: GritArray | ndarray | CheckFailed}`` in file order, with
    ``.metadata`` (the user's ``__metadata__``, without ``__grit__``),
    ``.convention`` ("grit-safetensors/1", "descriptor-map" or None) and
    ``.failed`` (the CheckFailed records)."""

    metadata: dict
    convention: str | None
    _source: "SafetensorsFile | None" = None

    @property
    def failed(self) -> list[CheckFailed]:
        return [v for v in self.values() if isinstance(v, CheckFailed)]


def renamed_error(name: str, err: GritError) -> GritError:
    """``err`` (same class, same structured detail) with a message naming the
    tensor, and ``.tensor`` set."""
    new = copy.copy(err)
    new.args = (f"tensor {name!r}: {err}",)
    new.tensor = name  # type: ignore[attr-defined]
    return new


def grit_array(hdr: SafetensorsFile, t: GritEntry) -> GritArray:
    """The GRIT tensor ``t`` over views of the file's bytes (a span past the
    end of the file is cut short, so that the size check reports it).
    Raises the level-1 check's GritError."""
    if t.payload is not None:
        return GritArray.from_payload(t.desc, t.shape, hdr.view(t.payload))
    return GritArray(t.desc, t.shape, [hdr.view(tn) if tn is not None else b""
                                       for tn in t.planes])


def _plain(hdr: SafetensorsFile, e: StEntry, bits: bool = False):
    d = ST_DTYPES[e.dtype]
    if not d.loadable:
        raise GritFileError(f"{hdr.path}: not a valid safetensors file: tensor {e.name!r}: "
                            f"unsupported dtype {e.dtype!r} (grit.load reads "
                            f"{', '.join(LOADABLE)})")
    buf = hdr.view(e.name)
    dt = d.bits_dtype() if bits else d.np_dtype()
    if dt is None:
        if e.dtype == "BF16":      # widened exactly to float32 (a copy)
            out = bf16_widened(np.frombuffer(buf, "<u2")).reshape(e.shape)
            out.flags.writeable = False
            return out
        raise GritUsageError(f"reading {e.dtype} tensors needs ml_dtypes: pip install ml_dtypes")
    return np.frombuffer(buf, dt).reshape(e.shape)


def load(path, *, strict: bool = True) -> SafetensorsTensors:
    """Read a safetensors file: ``{name: GritArray | ndarray}`` in file order.

    Every view is zero-copy over a read-only memory map of the file.  A
    malformed container (header, offsets, dtypes, the ``__grit__`` document)
    raises :class:`GritFileError`: the first problem :func:`read` reports.
    A GRIT tensor whose level-1 check fails raises that check's GritError
    with the tensor's name in the message (``.tensor`` holds it); with
    ``strict=False`` a :class:`CheckFailed` record stands in its place
    instead."""
    path = os.fspath(path)
    try:
        hdr = read(path)
    except (OSError, TypeError) as e:
        raise GritUsageError(f"cannot read {path!r}: {e}") from None
    return tensors_of(hdr, strict=strict)


def load_source(src: ByteSource, path: str | None = None, *,
                strict: bool = True) -> SafetensorsTensors:
    """:func:`load` of a file read through any byte source (a remote file:
    every tensor's bytes are read into memory as it is built, one ranged
    read each; nothing is downloaded whole first)."""
    return tensors_of(read_source(src, path), strict=strict)


def tensors_of(hdr: SafetensorsFile, *, strict: bool = True,
               bits: bool = False) -> SafetensorsTensors:
    """The tensors of a parsed file, as :func:`load` returns them; with
    ``bits``, a plain tensor of an ml_dtypes type (BF16, F8) as its bits
    (:meth:`~grit.dtypes.StDtype.bits_dtype`), as a conversion moves it,
    without importing ml_dtypes."""
    raise_first(hdr.problems)
    doc = hdr.doc
    out = SafetensorsTensors()
    out.metadata = {k: v for k, v in hdr.metadata.items() if k != GRIT_KEY}
    out.convention = doc.convention
    out._source = hdr                     # the parsed header, for grit.io.recognise
    grit_out: dict[str, Any] = {}
    for name, t in doc.tensors.items():
        raw = ({"payload": hdr.view(t.payload)} if t.payload is not None else
               {role: hdr.view(tn) for role, tn in zip(ROLES, t.planes) if tn is not None})
        try:
            a = grit_array(hdr, t)
        except GritError as err:
            e = renamed_error(name, err)
            if strict:
                raise e from None
            a = CheckFailed(name, e, t.desc_text, tuple(t.shape), raw)
        grit_out[name] = a
    # file order: plain tensors and GRIT tensors by their first byte
    first: dict[str, int] = {}
    for name, e in hdr.entries.items():
        b = e.span[0]
        if name in doc.claimed:
            owner = doc.claimed[name]
            first[owner] = min(first.get(owner, b), b)
        else:
            first[name] = b
    for name in grit_out:
        first.setdefault(name, -1)
    for name in sorted(first, key=lambda n: (first[n], n)):
        out[name] = grit_out[name] if name in grit_out else \
            _plain(hdr, hdr.entries[name], bits)
    return out


# ---------------------------------------------------------------------------
# save


def _grit_doc(arrays: Mapping[str, GritArray]) -> dict:
    tensors: dict[str, Any] = {}
    grades: list[str] = []
    layouts: dict[str, str] = {}
    for name, a in arrays.items():
        d = a.descriptor
        g = a.grade.canonical
        if g not in grades:
            grades.append(g)
        planes = {role: plane_tensor_name(name, role)
                  for role, n in zip(ROLES, a.plane_bytes) if n}
        tensors[name] = {"desc": d.hex(), "shape": list(a.shape), "grade": g,
                         "gid": a.gid_base32, "planes": planes}
        for w in d.placements:
            if placement_class(w) in (CLASS_HASHED, CLASS_OPAQUE):
                e = resolve_layout(w)
                if e is not None:
                    layouts[f"0x{w:016x}"] = str(e)
    return {"schema": SCHEMA, "version": VERSION, "tensors": tensors, "grades": grades,
            "layouts": dict(sorted(layouts.items()))}


def _check_name(name) -> str:
    if not isinstance(name, str) or not name:
        raise GritUsageError(f"tensor names are non-empty str, got {name!r}")
    if name == META_KEY:
        raise GritUsageError(f"{META_KEY!r} is reserved by safetensors, not a tensor name")
    return name


def _user_metadata(metadata) -> dict[str, str]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise GritUsageError(f"metadata must be a mapping of str to str, got "
                             f"{type(metadata).__name__}")
    out = {}
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise GritUsageError(f"metadata must map str to str (safetensors __metadata__), "
                                 f"got {k!r}: {type(v).__name__}")
        if k == GRIT_KEY:
            raise GritUsageError(f"metadata key {GRIT_KEY!r} is reserved: save() writes the "
                                 "GRIT document there")
        out[k] = v
    return out


@dataclass(frozen=True)
class Layout:
    """Where :func:`save` puts every entry of a file: ``head`` (the 8-byte
    header length and the padded header), ``entries`` (entry name ->
    (dtype, shape, offset in the file, bytes)) in file order, and ``size``
    (the file's bytes).  A writer that fills the entries in any order (by
    ``pwrite`` at their offsets) writes the file :func:`save` writes."""

    head: bytes
    entries: dict[str, tuple[str, tuple[int, ...], int, int]]
    size: int


def entries_of(tensors: Mapping[str, Any]) -> dict[str, tuple[str, list[int], Any]]:
    """The file entries of ``{name: GritArray | ndarray}``: entry name ->
    (safetensors dtype, shape, buffer) — a GRIT array's non-empty planes as
    U8 entries named by :func:`plane_tensor_name`, a plain array as itself
    (little-endian, contiguous).  Bad names and types are GritUsageErrors."""
    if not isinstance(tensors, Mapping):
        raise GritUsageError(f"tensors must be a mapping name -> GritArray | ndarray, got "
                             f"{type(tensors).__name__}")
    entries: dict[str, tuple[str, list[int], Any]] = {}   # name -> (dtype, shape, buffer)
    arrays: dict[str, GritArray] = {}
    plain: dict[str, np.ndarray] = {}
    for name, v in tensors.items():
        _check_name(name)
        if isinstance(v, GritArray):
            arrays[name] = v
        elif isinstance(v, np.ndarray):
            plain[name] = v
        else:
            raise GritUsageError(f"tensor {name!r}: expected a GritArray or a numpy array, got "
                                 f"{type(v).__name__}")
    for name, a in arrays.items():
        for role, p, n in zip(ROLES, a.planes, a.plane_bytes):
            if not n:
                continue
            tn = plane_tensor_name(name, role)
            if tn in tensors or tn in entries:
                raise GritUsageError(f"tensor name {tn!r} is taken: it names plane {role} of "
                                     f"GRIT tensor {name!r}")
            entries[tn] = ("U8", [n], memoryview(p).cast("B") if not isinstance(p, bytes) else p)
    for name, x in plain.items():
        st = st_dtype_of(x.dtype)
        if st is None:
            raise GritUsageError(f"tensor {name!r}: dtype {x.dtype} has no safetensors dtype "
                                 f"(supported: {', '.join(LOADABLE)})")
        if x.dtype.byteorder == ">":
            x = x.astype(x.dtype.newbyteorder("<"))
        x = np.ascontiguousarray(x)
        entries[name] = (st, list(x.shape), x)
    return entries


#: the period of ``layout``'s ``data_at``: a page of the page cache on the
#: machines that run grit (a constant, so that a file's bytes never depend on
#: the machine that wrote it)
DATA_PERIOD = 4096


def layout(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None, *,
           data_at: int | None = None
           ) -> tuple[Layout, dict[str, tuple[str, list[int], Any]]]:
    """(the :class:`Layout` :func:`save` writes ``tensors`` in, their
    :func:`entries_of`).  Only the arrays' descriptors, shapes and plane
    sizes and the plain arrays' dtypes and shapes decide it, never their
    bytes.  ``data_at``: the residue modulo :data:`DATA_PERIOD` the data
    section's start is given, by padding the header with more spaces (a
    multiple of 8, as the padding to 8 keeps every tensor aligned; less
    than :data:`DATA_PERIOD` more bytes): a copy of a file's tensors whose
    offsets keep their place within the page runs faster."""
    meta = _user_metadata(metadata)
    entries = entries_of(tensors)
    arrays = {n: v for n, v in tensors.items() if isinstance(v, GritArray)}
    if arrays:
        meta[GRIT_KEY] = json.dumps(_grit_doc(arrays), separators=(",", ":"),
                                    ensure_ascii=True)
    # widest dtypes first: with an 8-aligned header every tensor starts aligned
    order = sorted(entries, key=lambda n: (-(ST_DTYPES[entries[n][0]].itemsize or 0), n))
    header: dict[str, Any] = {}
    if meta:
        header[META_KEY] = meta
    off = 0
    spans: list[tuple[str, int]] = []
    for n in order:
        st, shape, buf = entries[n]
        nb = buf.nbytes if isinstance(buf, np.ndarray) else len(memoryview(buf))
        header[n] = {"dtype": st, "shape": shape, "data_offsets": [off, off + nb]}
        spans.append((n, nb))
        off += nb
    hb = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    hb += b" " * (-len(hb) % 8)
    if data_at is not None:
        if data_at % 8 or not 0 <= data_at < DATA_PERIOD:
            raise GritUsageError(f"data_at must be a multiple of 8 below {DATA_PERIOD}, "
                                 f"got {data_at}")
        hb += b" " * ((data_at - 8 - len(hb)) % DATA_PERIOD)
    if len(hb) > MAX_HEADER:
        raise GritUsageError(f"header would be {len(hb)} bytes, over the {MAX_HEADER}-byte "
                             "limit readers enforce")
    start = 8 + len(hb)
    out: dict[str, tuple[str, tuple[int, ...], int, int]] = {}
    for n, nb in spans:
        h = header[n]
        out[n] = (h["dtype"], tuple(h["shape"]), start + h["data_offsets"][0], nb)
    return Layout(struct.pack("<Q", len(hb)) + hb, out, start + off), entries


def save(path, tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> None:
    """Write ``{name: GritArray | ndarray}`` as a safetensors file (see the
    module docstring and docs/file-format.md).  ``metadata`` is kept as
    ``__metadata__`` entries (str → str; the key ``__grit__`` is refused).
    Plane bytes are written from their buffers as they are (no decode, no
    copy of memory-mapped planes); the file appears atomically."""
    path = os.fspath(path)
    lay, entries = layout(tensors, metadata)

    def write(f):
        f.write(lay.head)
        for n in lay.entries:
            buf = entries[n][2]
            if isinstance(buf, np.ndarray):
                if buf.size:
                    f.write(memoryview(buf.reshape(-1).view(np.uint8)))
            else:
                f.write(buf)

    atomic_write(path, write)
