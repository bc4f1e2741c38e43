"""§13 ``grit scan``: check the declared numeric contract of every tensor in
safetensors and GGUF checkpoints against the bytes on disk.

:func:`scan` runs three stages:

* :mod:`~grit.scan.collect` walks its inputs (files, directory trees,
  manifests) and opens each model file once through its container reader
  (``grit.io.safetensors.read``, ``grit.io.gguf.read``), which returns the
  parsed records and every problem it found instead of stopping at the first;
* :mod:`~grit.scan.analyses` turns those into :class:`Finding` values: per
  file the structural, inferred / inexpressible and (``--deep``) deep
  findings, then across files cross-file gid disagreement, grade drift and
  escape-hatch exposure;
* :mod:`~grit.scan.output` is the :class:`ScanReport` and its forms: JSON
  (streamed), JSON Lines, SARIF 2.1.0, the human report (written one finding
  at a time, file text escaped), the graded / simple / ``--fail-on`` exit
  codes, and the byte accounting (each file's coverage, each tensor's byte
  range in its file, put into the findings' detail).

Every finding has a code from one registry (:mod:`~grit.scan.findings`,
``grit explain CODE``); docs/scan.md is the reference.

Input files are opened read-only and never written.  Plane bytes are never
read for the structural checks (headers are parsed, planes measured on
disk); ``--deep`` (:mod:`~grit.scan.deep`) streams every plane through the
file's byte source in fixed-size chunks to hash it, one file at a time, so its
memory is bounded by a constant, not by the file or its largest tensor.
"""
from __future__ import annotations

import contextvars
import os
import struct
import sys
import threading
import types
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

from ..errors import GritError, GritUsageError
from ..grade import grade_scope
from ..placement.expr import layout_scope
from ..io import remote as _remote
from ..io.gguf_split import series, views
from ..io.http import default_cache
from . import analyses as _an
from . import deep as _deep
from . import shards as _shards
from .analyses import role_of
from .collect import MODEL_SUFFIXES, Input, ScannedFile, expand, open_input, why
from .findings import (CATEGORIES, REGISTRY, SEVERITY, Category, Finding, ScanKind,
                       Severity)
from .output import SCHEMA_VERSION, Coverage, Ranges, ScanReport, account, attach_ranges, exit_code
from .output.record import ByteRange, Record

_T = TypeVar("_T")

#: what :func:`scan` returns (its findings typed by ``Report.records()``)
Report = ScanReport

__all__ = ["scan", "Report", "ScanReport", "Record", "ByteRange", "Finding", "CATEGORIES",
           "SEVERITY", "role_of", "MODEL_SUFFIXES", "exit_code", "SCHEMA_VERSION", "Category",
           "Severity", "ScanKind", "REGISTRY"]

#: what a hostile file can make a reader or an analysis raise, reported as the
#: file's unreadable finding rather than a traceback
_BAD_INPUT = (GritError, OSError, ValueError, KeyError, IndexError, TypeError, struct.error,
              ArithmeticError, MemoryError, RecursionError, AttributeError)


def scan(paths: Iterable[str], *, deep: bool = False,
         progress: Callable[[int, int, str], None] | None = None,
         cache: bool = True, jobs: int = 1,
         advance: Callable[[int], None] | None = None) -> ScanReport:
    """Scan ``paths`` (files, directories, manifests, http(s) URLs, hf://
    names) and return the :class:`Report`; never raises for bad input —
    every problem is a finding.  ``report.records()`` gives each finding
    typed (:class:`Record`: code, severity, file, tensor, byte range,
    message, …); ``report.exit_code()`` the §13 exit code; docs/scan.md,
    "Python API".  ``cache=False``
    bypasses the header cache of remote files (grit.io.http.default_cache).
    ``progress(i, n, path)`` is told each file as it is taken in;
    ``advance(nbytes)``, under ``deep``, the plane bytes hashed as they are
    (from the worker threads when ``jobs`` > 1).

    ``jobs`` > 1 reads and checks up to that many files at once, on threads
    (the work is I/O: remote headers, deep streams).  Each file is checked by
    the same code either way, on an accumulator of its own, and the files'
    results are taken into the scan in input order, so the report is the
    sequential one's, finding for finding; at most ``jobs`` files' results
    are held before they are taken in.  The threads are a pool every scan of
    the process shares, not one made per scan."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise GritUsageError(f"jobs must be a positive integer, not {jobs!r}")
    # the files beside remote model files (config.json, an index) are asked
    # of their servers once per scan, through the header cache
    with _remote.session(default_cache() if cache else None):
        return _scan(paths, deep, progress, cache, jobs, advance)


def _scan(paths: Iterable[str], deep: bool,
          progress: Callable[[int, int, str], None] | None, cache: bool, jobs: int,
          advance: Callable[[int], None] | None) -> ScanReport:
    ctx = _an.Context(deep)
    files: list[ScannedFile] = []
    ckpts = _shards.Checkpoints()
    coverage: dict[str, Coverage] = {}
    ranges: dict[str, Ranges] = {}
    model_files = expand(list(paths), ctx.findings, files, ckpts.indexes, jobs)
    for i, r in enumerate(_checked(model_files, deep, cache, jobs, progress, advance)):
        files.append(r.file)
        ckpts.shards.update(r.shards.shards)
        ckpts.gguf.update(r.shards.gguf)
        ctx.merge(r.ctx)
        coverage[r.file.path] = r.coverage
        ranges[r.file.path] = r.ranges
    if progress is not None:
        progress(len(model_files), len(model_files), "")
    ckpts.check(ctx)          # the index against the shards, the shards against each other
    _an.cross_file(ctx)
    _an.drift(ctx)
    _an.checkpoint_contracts(ctx)
    _an.escape_hatch(ctx)
    findings = ctx.findings
    attach_ranges(findings, ranges)
    if not any(f.parsed for f in files):
        for f in findings:
            if f.category is Category.UNREADABLE:
                f.severity = Severity.UNPARSED
    order = list(CATEGORIES)
    findings.sort(key=lambda f: (order.index(f.category), f.severity, f.file or "",
                                 f.tensor or ""))
    files.sort(key=lambda f: f.path)
    return ScanReport(files, findings, deep, coverage)


@dataclass
class _Checked:
    """One model file, read and checked on its own: its report record, its
    findings and tensors (on a Context of its own), its shard record, its
    coverage and its GRIT tensors' byte ranges."""

    file: ScannedFile
    ctx: _an.Context
    shards: _shards.Checkpoints
    coverage: Coverage
    ranges: Ranges


def _checked(model_files: Sequence[str], deep: bool, cache: bool, jobs: int,
             progress: Callable[[int, int, str], None] | None,
             advance: Callable[[int], None] | None = None) -> Iterator[_Checked]:
    """Each model file's checks, unit by unit in input order (a unit: one
    file, or the GGUF files of one gguf-split series, :func:`_check_unit`):
    one after the other in this thread (``jobs`` 1), or ``jobs`` units at a
    time on the pool the process's scans share (:func:`_pool`), at most
    ``jobs`` units submitted ahead of the one taken next.  Each thread task
    runs in a copy of the caller's context (the grade and layout scopes it
    is inside)."""
    n = len(model_files)
    units = series(model_files)
    i = 0
    if jobs == 1 or len(units) <= 1:
        for u in units:
            if progress is not None:
                progress(i, n, u[0])
            for k, r in enumerate(_check_unit(u, deep, cache, advance, jobs)):
                if progress is not None and k:
                    progress(i, n, u[k])
                i += 1
                yield r
        return
    ahead: deque[tuple[list[str], Future[list[_Checked]]]] = deque()
    pool = _pool()
    try:
        todo = iter(units)
        for _ in units:
            while len(ahead) < jobs:
                q = next(todo, None)
                if q is None:
                    break
                ahead.append((q, pool.submit(contextvars.copy_context().run, _check_unit,
                                             q, deep, cache, advance, jobs)))
            u, fut = ahead.popleft()
            if progress is not None:
                progress(i, n, u[0])
            for k, r in enumerate(fut.result()):
                if progress is not None and k:
                    progress(i, n, u[k])
                i += 1
                yield r
    finally:                 # an error (or a caller that stops): drop what waits
        for _, fut in ahead:
            fut.cancel()


def _check_unit(paths: list[str], deep: bool, cache: bool,
                advance: Callable[[int], None] | None = None, jobs: int = 1
                ) -> list[_Checked]:
    """One file's :func:`_check_file`; or the files of one gguf-split
    series read together, inside one grade and layout scope (the grades
    a split model's first shard carries are its other shards' too), and,
    where they are the sound shards of one model, each shard checked as
    its part of the model read as one file (grit.io.gguf_split.views: the
    first shard's annotations and KV entries, companion scales in other
    shards); otherwise each as the file it is.  With ``jobs`` > 1 the
    series' files are read, and then checked, up to ``jobs`` at a time (on
    threads of their own, each in a copy of this context: the one scope)."""
    if len(paths) == 1:
        return [_check_file(paths[0], deep, cache, advance)]
    with grade_scope(), layout_scope():
        inps = _each(open_input, [(p, cache) for p in paths], jobs)
        got = [i.gguf for i in inps]
        if all(g is not None and i.file.parsed for g, i in zip(got, inps)):
            try:
                joined = views(got)  # type: ignore[arg-type]
            except _BAD_INPUT:              # the files' own checks report it
                joined = None
            for inp, c in zip(inps, joined or ()):
                inp.contents = c
        return _each(_finish, [(inp, deep, advance) for inp in inps], jobs)


def _each(fn: Callable[..., _T], args: Sequence[tuple], jobs: int) -> list[_T]:
    """``fn(*a)`` for each ``a`` of ``args``, in order: here (``jobs`` 1),
    or up to ``jobs`` at a time on threads of a pool of their own (not the
    shared one, whose threads may be waiting on this call), each in a copy
    of the caller's context."""
    if jobs == 1 or len(args) == 1:
        return [fn(*a) for a in args]
    with ThreadPoolExecutor(max_workers=min(jobs, len(args)),
                            thread_name_prefix="grit-scan-shard") as ex:
        futs = [ex.submit(contextvars.copy_context().run, fn, *a) for a in args]
        return [f.result() for f in futs]


#: the threads of the pool every scan of this process shares (each scan keeps
#: at most its ``jobs`` files in it at once); made when first needed
POOL_THREADS = 256
_POOL: list = []          # [(pid, ThreadPoolExecutor)]
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The thread pool the scans of this process share: one, made once (a
    process forked from this one makes its own), so many scans — one per
    entry of a Dask worker's tasks — start no pool each.  Its threads are
    started as work needs them."""
    with _POOL_LOCK:
        if not _POOL or _POOL[0][0] != os.getpid():
            _POOL[:] = [(os.getpid(), ThreadPoolExecutor(max_workers=POOL_THREADS,
                                                         thread_name_prefix="grit-scan"))]
        return _POOL[0][1]


def _check_file(p: str, deep: bool, cache: bool,
                advance: Callable[[int], None] | None = None) -> _Checked:
    """Read one model file and run its per-file analyses (and, under
    ``deep``, its deep checks) on a fresh Context."""
    # the grades and layouts a file carries are known while that file is
    # read and checked, never for the next one: a verdict does not depend on
    # file order
    with grade_scope(), layout_scope():
        return _finish(open_input(p, cache), deep, advance)


def _finish(inp: Input, deep: bool, advance: Callable[[int], None] | None = None) -> _Checked:
    """The per-file analyses (and deep checks) of a file read, on a fresh
    Context, and its byte accounting."""
    ctx = _an.Context(deep)
    ckpts = _shards.Checkpoints()
    p = inp.file.path
    _one_file(ctx, inp, deep, ckpts, advance)
    try:
        cov, rs = account(inp, ctx.findings)
    except _BAD_INPUT:                   # the readers' records are odd: count
        inp.contents = None              # the file as not checkable
        cov, rs = account(inp, ())
    # the file's own findings get their byte ranges now; only the GRIT
    # tensors' ranges are kept, for the findings made across files
    attach_ranges(ctx.findings, {p: rs})
    kept = {t.name: rs[t.name] for t in ctx.tensors if t.name in rs}
    return _Checked(inp.file, ctx, ckpts, cov, kept)


def _one_file(ctx: _an.Context, inp: Input, deep: bool, ckpts: _shards.Checkpoints,
              advance: Callable[[int], None] | None = None) -> Input:
    p = inp.file.path
    ckpts.note(inp)
    for f in inp.findings:
        ctx.keep(f)
    if not inp.file.parsed:
        return inp
    try:
        tensors = _an.file_analyses(ctx, inp)
        if deep:      # file by file, each plane streamed through the file's byte source
            _deep.deep(ctx, tensors, inp.source, advance)
    except _BAD_INPUT as e:
        inp.file.error = why(e)
        ctx.add("S805", p, None, f"could not read as {inp.file.format}: {inp.file.error}")
    return inp


class _ScanModule(types.ModuleType):
    """``grit.scan`` is this package and, called, its :func:`scan`:
    ``grit.scan(["ckpt/"])`` after ``import grit`` is ``grit.scan.scan(["ckpt/"])``.
    The package stays a package (``import grit.scan.deep`` and
    ``from grit.scan import scan`` are unchanged)."""

    def __call__(self, paths: Iterable[str], **kwargs) -> ScanReport:
        return scan(paths, **kwargs)


sys.modules[__name__].__class__ = _ScanModule
