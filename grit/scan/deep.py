"""``grit scan --deep``: the level-2 and level-3 checks of every tensor that
passed level 1, in memory bounded by a constant, not by the file.

* The §6.5 digest is streamed: each plane that lies in the file is hashed in
  :data:`CHUNK`-byte pieces read through the file's byte source
  (:meth:`grit.io.source.ByteSource.stream`: a local file's map, each piece
  released from the process once hashed), so a plane of any size costs one
  chunk of resident memory; planes built in memory (converted ggml types,
  payloads) are hashed where they are.  The result is
  :func:`grit.fingerprint.digest` of the same planes (DigestStream).
* The other content checks read whole planes: the SPORDER_ASC_LSB metadata
  order (§7.4) runs on a copy of a tensor's planes up to :data:`WHOLE`
  bytes, the §7.6 probes (which relayout non-canonical planes to the
  canonical order first) up to :data:`PROBE` bytes.  A larger tensor is
  checked on its leading rows: the prefix sub-tensor within the bound whose
  plane sizes are prefixes of the tensor's (every placement stage works
  inside a block of a row, so the leading rows' bytes are the leading bytes
  of each plane — tests/test_deep_stream.py decodes the sample against the
  whole tensor; a per-tensor plane is taken whole).  The probes sample 64
  groups anyway, here from the leading rows; for the metadata order the
  report says (S504) how many rows it was verified on.  A tensor with no
  such prefix is not probed (S503).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from ..array import GritArray
from ..boundary import check, diagnose
from ..check import plane_sizes
from ..errors import Detail, GritError, Status
from ..fingerprint import DigestStream
from ..descriptor import F_SPARSE, SPORDER_ASC_LSB
from ..io.gguf import leading
from ..io.source import ByteSource, Span
from .analyses import Context, Tensor

__all__ = ["deep", "stream_digest", "CHUNK", "WHOLE", "PROBE"]

#: bytes hashed per read of a file-backed plane
CHUNK = 1 << 22
#: the largest tensor (plane bytes) whose SPORDER_ASC_LSB metadata order is
#: checked on all of its planes; a larger one on its leading rows (S504 says so)
WHOLE = 1 << 24
#: the largest tensor the §7.6 probes read whole; a larger one is probed on
#: its leading rows (the probes sample 64 groups: they need few bytes, but
#: a non-canonical placement is relayouted first, which costs more than the
#: digest of the same bytes)
PROBE = 1 << 18


def _mv(p) -> "memoryview | Span":
    """A plane as a byte view, or the span of a source without views (a
    remote file's plane, read only as it is streamed or copied)."""
    if isinstance(p, Span):
        return p
    return memoryview(p if p is not None else b"").cast("B")


def _pieces(mv: "memoryview | Span", source: ByteSource | None):
    """``mv``'s bytes in chunks: through the source when it is a view of it
    (or a span of one)."""
    if isinstance(mv, Span):
        yield from mv.stream(CHUNK)
        return
    off = source.locate(mv) if source is not None else None
    if source is None or off is None:
        for i in range(0, mv.nbytes, CHUNK):
            yield mv[i:i + CHUNK]
    else:
        yield from source.stream(off, mv.nbytes, CHUNK)


def stream_digest(planes: Sequence, source: ByteSource | None = None,
                  advance: Callable[[int], None] | None = None) -> bytes:
    """§6.5 of four planes, hashed chunk by chunk (planes that are views of
    ``source`` are read through it): equal to grit.fingerprint.digest.
    ``advance(n)`` is told each chunk's size once it is hashed."""
    ds = DigestStream()
    for p in planes:
        mv = _mv(p)
        ds.plane(mv.nbytes)
        for c in _pieces(mv, source):
            ds.update(c)
            if advance is not None:
                advance(c.nbytes)
    return ds.digest()


def _copy(mv: memoryview, n: int, source: ByteSource | None):
    """The first ``n`` bytes of ``mv``, read through the source when ``mv``
    is a view of it (so its pages never become the process's), or from the
    source a span lies in."""
    if isinstance(mv, Span):
        return mv.read(n)
    off = source.locate(mv) if source is not None else None
    if source is None or off is None:
        return mv[:n]
    return source.read(off, n, "plane")


def _outer(t: Tensor) -> int:
    """The outermost axis of the grouped view (lin order): the rows."""
    ga = t.desc.group_axis
    return next((i for i in range(len(t.shape)) if i != ga), ga)


def _prefix(t: Tensor, mvs: list[memoryview],
            bound: int) -> tuple[tuple[int, ...], list[int]] | None:
    """(shape, plane sizes) of the leading-rows sub-tensor of at most
    ``bound`` plane bytes whose planes are prefixes of ``t``'s (a per-tensor
    plane, whose size does not grow with the rows, taken whole); None when
    there is none."""
    shape = t.shape
    if not shape:
        return None
    outer = _outer(t)
    rows = shape[outer]
    full = [m.nbytes for m in mvs]
    total = sum(full)
    r0 = min(rows - 1, max(1, bound * rows // max(1, total)))
    for r in range(r0, max(0, r0 - 512), -1):
        sub = shape[:outer] + (r,) + shape[outer + 1:]
        ps = plane_sizes(t.desc, sub)
        if isinstance(ps, Detail):
            continue
        sizes = list(ps.sizes)
        if all(s == f or s * rows == f * r for s, f in zip(sizes, full)) \
                and sum(sizes) <= bound:
            return sub, sizes
    return None


def _digest_failed(ctx: Context, t: Tensor, got: bytes) -> None:
    """S501 from the digest the stream computed: the Detail grit.check's step
    5 gives for it."""
    exp = bytes(t.expected_digest or b"")
    det = Detail(status=Status.DIGEST_MISMATCH, step=5,
                 message="DigestMismatch: plane contents do not hash to the expected digest.",
                 field="digest", expected=exp.hex(), actual=got.hex(),
                 lines=("The bytes changed after the digest was taken (corruption, "
                        "a partial write, or a different tensor).",))
    ctx.detail("S501", t.file, t.name, det)


def _bounded(t: Tensor, mvs: list[memoryview], source: ByteSource | None, bound: int):
    """(shape, planes, whole) of ``t`` when its planes total at most ``bound``
    bytes (a copy, whole = True), else of its leading-rows prefix of at most
    ``bound`` bytes (whole = False); None when it has no such prefix."""
    if sum(m.nbytes for m in mvs) <= bound:
        return t.shape, [_copy(m, m.nbytes, source) for m in mvs], True
    pre = _prefix(t, mvs, bound)
    if pre is None:
        return None
    shape, sizes = pre
    return shape, [_copy(m, n, source) for m, n in zip(mvs, sizes)], False


def _one(ctx: Context, t: Tensor, planes, source: ByteSource | None,
         advance: Callable[[int], None] | None = None) -> None:
    mvs = [_mv(p) for p in planes]
    if t.expected_digest is not None:
        got = stream_digest(mvs, source, advance)
        if got != bytes(t.expected_digest):
            _digest_failed(ctx, t, got)
            return
    d = t.desc
    total = sum(m.nbytes for m in mvs)
    if d.flags & F_SPARSE and d.sp_order == SPORDER_ASC_LSB:
        b = _bounded(t, mvs, source, WHOLE)
        if b is None:
            ctx.add("S504", t.file, t.name,
                    "level 2: the SPORDER_ASC_LSB metadata order (§7.4) was not verified: "
                    f"the tensor's {total} plane bytes are over the {WHOLE}-byte bound of "
                    "--deep and no leading rows of it are a whole sub-tensor")
        else:
            shape, sub, whole = b
            det = diagnose(d, shape, sub, level=2)
            if det.status != Status.OK:
                ctx.detail("S501", t.file, t.name, det)
                return
            for w in det.lines:
                ctx.add("S504", t.file, t.name, w)
            if not whole:
                outer = _outer(t)
                ctx.add("S504", t.file, t.name,
                        "level 2: the SPORDER_ASC_LSB metadata order (§7.4) was verified on "
                        f"the first {shape[outer]} of {t.shape[outer]} rows only (the tensor's "
                        f"{total} plane bytes are over the {WHOLE}-byte bound of --deep)")
    b = _bounded(t, mvs, source, PROBE)
    if b is None:
        ctx.add("S503", t.file, t.name,
                f"level-3 probes could not run: the tensor's {total} plane bytes are over the "
                f"{PROBE}-byte bound of the probes and no leading rows of it are a whole "
                "sub-tensor")
        return
    shape, sub, _ = b
    for w in check(d, shape, sub, level=3).probes:
        ctx.add("S502", t.file, t.name, w)


def _leading(t: Tensor, a: GritArray) -> GritArray | None:
    """A converted GGUF tensor without a digest to verify and not sparse:
    only the probes read it, on leading rows up to :data:`PROBE` bytes, so
    only those rows' blocks are converted (a bounded build, however large
    the tensor)."""
    if t.expected_digest is not None or t.desc.flags & F_SPARSE or not a.shape:
        return None
    row = max(1, a.nbytes // max(1, a.shape[0]))
    return leading(a, max(1, PROBE // row))


def deep(ctx: Context, tensors: Sequence[Tensor], source: ByteSource | None = None,
         advance: Callable[[int], None] | None = None) -> None:
    """--deep over one file's tensors (``source``: the file they were read
    from); each tensor's planes are released once checked.  ``advance(n)``
    is told the plane bytes hashed, chunk by chunk, as they are (a progress
    bar's feed; it may be called from several threads at once)."""
    for t in tensors:
        planes, t.planes = t.planes, None
        if not t.ok or planes is None:
            continue
        if callable(planes):                      # built now (None: it said why)
            planes = planes()
            if planes is None:
                continue
        try:
            held = ()
            if isinstance(planes, GritArray):     # read through the array, keeping none
                held = (getattr(planes.source, "data", None),)   # a deferred array's blocks
                sub = _leading(t, planes)
                if sub is not None:       # nothing to hash: the probes' rows, converted alone
                    _one(ctx, replace(t, shape=sub.shape), list(sub.planes), None)
                    planes = ()
                else:
                    planes = planes.transient_planes()
                    _one(ctx, t, list(planes), source, advance)
            else:
                _one(ctx, t, list(planes), source, advance)
            if source is not None:                # the file's pages this tensor touched
                for p in (*planes, *held):
                    if p is not None and not isinstance(p, (bytes, Span)):
                        source.release(p)
        except GritError as e:
            det = e.detail
            if det is None:
                ctx.add("S503", t.file, t.name, str(e).splitlines()[0])
            else:
                ctx.detail("S501", t.file, t.name, det)
        except (ValueError, TypeError, IndexError, MemoryError, OverflowError) as e:
            ctx.add("S503", t.file, t.name,
                    f"level-3 probes could not run: {type(e).__name__}: {e}"[:300])
