"""``grit info``: what a checkpoint holds, tensor by tensor, and what it takes
to hold it.

:func:`info` reads the headers of model files — a local file, a folder (its
shards and their ``*.safetensors.index.json``), a shard index, an
``https://`` URL or an ``hf://ORG/REPO[@REV][/PATH]`` name — through the
readers ``grit scan`` and ``grit.load`` use (:func:`grit.scan.collect.expand`
and :func:`~grit.scan.collect.open_input`, the container records of
:mod:`grit.io.containers`, the conventions through
:func:`grit.io.recognise.recognise_file`), and returns an :class:`Info`: one
:class:`TensorRow` per tensor — a recognised quantised weight is one row
under its logical name, holding the file tensors of its planes — with its
convention, the name the ecosystem knows its format by (the ggml type, the
compressed-tensors format, the safetensors dtype), its GRIT grade, shape,
parameter count and bytes at rest; and the totals a machine is sized by:
bytes at rest, bytes decoded to bf16 and to f32, parameters and bytes per
parameter.  No tensor byte is read beyond the small ones the conventions'
recognisers read (an NVFP4 global scale, a packed weight's shape).

docs/info.md is the reference (the table, the JSON shape, the exit codes).
"""
from __future__ import annotations

import functools
import os
import sys
import types
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from .array import GritArray
from .descriptor import Descriptor
from .ecosystem import names_of
from .ggml import ZERO_COPY
from .errors import GritError
from ._files import GritFileError
from .grade import Grade, grade_scope, lookup_grade
from .io import remote as _remote
from .io.gguf import GGUFContents, Inexpressible, read_files
from .io.gguf_file import GGUFFile
from .io.gguf_split import SPLIT_COUNT, facts, series, series_faults
from .io.http import default_cache
from .io.recognise import recognise_file
from .io.safetensors import CheckFailed, SafetensorsFile
from .placement.expr import layout_scope
from .scan.collect import Input, ScannedFile, expand, open_input, read_index

__all__ = ["info", "Info", "TensorRow", "FileRow", "IndexRow", "SplitRow", "Totals", "TypeRow",
           "InfoInputError", "SCHEMA", "render", "size_text", "EXIT_OK", "EXIT_UNREADABLE"]

#: the ``schema`` of :meth:`Info.to_dict` (docs/info.md, "JSON")
SCHEMA = "grit-info/1"
#: exit statuses of ``grit info`` (a usage error is click's 2)
EXIT_OK = 0
EXIT_UNREADABLE = 4


class InfoInputError(GritFileError):
    """An input ``grit info`` cannot read: a path that is not there, a
    folder without model files, a file no container reads, a remote file
    that cannot be fetched.  ``path`` names it."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path


@dataclass(frozen=True)
class TensorRow:
    """One tensor of a checkpoint.

    ``kind``: ``"grit"`` (its descriptor is recorded in the file),
    ``"inferred"`` / ``"converted"`` (a convention's weight recognised as a
    GRIT array: the file's bytes are its planes, or are moved into them),
    ``"inexpressible"`` (quantised in a way GRIT v1 cannot express:
    ``reason``), ``"plain"`` (an unquantised tensor), ``"unreadable"`` (its
    header entry is there, its bytes cannot be read as its type:
    ``reason``).  ``convention``: ``ggml``, ``grit``, ``compressed-tensors``,
    ``modelopt`` … (None for a plain safetensors tensor); ``ecosystem``: the
    name its format is known by (``Q4_K``, ``nvfp4-pack-quantized``,
    ``BF16``); ``grade`` the registered grade name or else the canonical
    grade string (None: not a GRIT array); ``parameters`` the elements of
    its logical shape (None where the shape is not known: an inexpressible
    weight whose packing hides it); ``bytes`` its bytes at rest, every file
    tensor of ``tensors`` counted once."""

    name: str
    file: str
    kind: str
    convention: str | None
    ecosystem: str
    grade: str | None
    canonical: str | None
    grade_id: str | None
    shape: tuple[int, ...] | None
    parameters: int | None
    bytes: int
    tensors: tuple[str, ...]
    reason: str | None = None

    @property
    def known_as(self) -> tuple[str, ...]:
        """The ecosystem's names of its grade (grit.ecosystem.names_of:
        ``Q8_0``, ``INT8(k0=32,s0=binary16)``); () when none or no grade."""
        return _known_names(self.canonical)

    def to_dict(self) -> dict:
        return {"name": self.name, "file": self.file, "kind": self.kind,
                "convention": self.convention, "ecosystem": self.ecosystem,
                "known_as": list(self.known_as),
                "grade": self.grade, "canonical": self.canonical, "grade_id": self.grade_id,
                "shape": None if self.shape is None else list(self.shape),
                "parameters": self.parameters, "bytes": self.bytes,
                "tensors": list(self.tensors), "reason": self.reason}


@dataclass(frozen=True)
class FileRow:
    """One model file: its container, size in bytes, and tensor rows."""

    path: str
    format: str
    size: int
    tensors: int

    def to_dict(self) -> dict:
        return {"path": self.path, "format": self.format, "size": self.size,
                "tensors": self.tensors}


@dataclass(frozen=True)
class IndexRow:
    """A shard index: the tensors its weight_map lists and its
    ``metadata.total_size`` (None when absent or the index is unreadable:
    ``error``)."""

    path: str
    tensors: int | None
    total_size: int | None
    error: str | None = None

    def to_dict(self) -> dict:
        return {"path": self.path, "tensors": self.tensors, "total_size": self.total_size,
                "error": self.error}


@dataclass(frozen=True)
class SplitRow:
    """A GGUF model in gguf-split's shards (grit.io.gguf_split): its first
    shard, ``split.count`` (``shards``), the shard files read (``files``,
    in order) and ``split.tensors.count``."""

    path: str
    shards: int
    files: tuple[str, ...]
    tensors: int

    def to_dict(self) -> dict:
        return {"path": self.path, "shards": self.shards, "files": list(self.files),
                "tensors": self.tensors}


@dataclass(frozen=True)
class TypeRow:
    """The rows of one (ecosystem name, grade) together."""

    ecosystem: str
    grade: str | None
    tensors: int
    parameters: int
    bytes: int
    known_as: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"ecosystem": self.ecosystem, "grade": self.grade,
                "known_as": list(self.known_as), "tensors": self.tensors,
                "parameters": self.parameters, "bytes": self.bytes}


@dataclass(frozen=True)
class Totals:
    """What a machine is sized by.  ``bytes``: at rest (every tensor's
    bytes; the files' headers aside); ``bf16_bytes`` / ``f32_bytes``:
    every parameter decoded to bfloat16 (2 bytes) / float32 (4 bytes);
    ``bytes_per_parameter`` over the rows whose parameters are known
    (``unsized`` counts the others)."""

    tensors: int
    parameters: int
    bytes: int
    bf16_bytes: int
    f32_bytes: int
    bytes_per_parameter: float | None
    unsized: int = 0

    def to_dict(self) -> dict:
        bpp = self.bytes_per_parameter
        return {"tensors": self.tensors, "parameters": self.parameters, "bytes": self.bytes,
                "bf16_bytes": self.bf16_bytes, "f32_bytes": self.f32_bytes,
                "bytes_per_parameter": bpp,
                "bits_per_parameter": None if bpp is None else bpp * 8,
                "unsized": self.unsized}


@dataclass(frozen=True)
class Info:
    """What :func:`info` found: ``files`` (each model file), ``indexes``
    (the shard indexes among the inputs), ``tensors`` (the rows, file by
    file in file order), ``totals``, ``by_type`` (the rows grouped by
    ecosystem name and grade), ``problems`` (what the readers found
    wrong in files they could still read: one line each) and ``splits``
    (the GGUF models in gguf-split's shards: one row each, its shards'
    files among ``files``)."""

    inputs: tuple[str, ...]
    files: tuple[FileRow, ...]
    indexes: tuple[IndexRow, ...]
    tensors: tuple[TensorRow, ...]
    totals: Totals
    by_type: tuple[TypeRow, ...]
    problems: tuple[str, ...] = ()
    #: the GGUF models in gguf-split's shards among the files
    splits: tuple[SplitRow, ...] = ()

    def to_dict(self) -> dict:
        """The documented JSON shape (docs/info.md, "JSON"), ``schema``
        :data:`SCHEMA`."""
        return {"schema": SCHEMA, "inputs": list(self.inputs),
                "files": [f.to_dict() for f in self.files],
                "indexes": [i.to_dict() for i in self.indexes],
                "tensors": [t.to_dict() for t in self.tensors],
                "by_type": [t.to_dict() for t in self.by_type],
                "totals": self.totals.to_dict(), "problems": list(self.problems),
                "splits": [s.to_dict() for s in self.splits]}


# ---------------------------------------------------------------------------
# one file's rows, by container


def _numel(shape: Sequence[int] | None) -> int | None:
    if shape is None:
        return None
    n = 1
    for x in shape:
        n *= int(x)
    return n


def _grade_of(desc: Descriptor | None) -> tuple[str | None, str | None, str | None]:
    """(name or canonical, canonical, grade id) of a descriptor's grade as
    known in this file's scope."""
    if desc is None:
        return None, None, None
    g: Grade | None = lookup_grade(desc.grade_id)
    gid = f"0x{desc.grade_id:016X}"
    if g is None:
        return None, None, gid
    return g.name or g.canonical, g.canonical, gid


@functools.lru_cache(maxsize=1024)
def _known_names(canonical: str | None) -> tuple[str, ...]:
    return () if canonical is None else tuple(names_of(Grade.parse(canonical)))


def _known_as(desc: Descriptor | None) -> str:
    """The first ecosystem name a descriptor's grade is known by, else "-"."""
    g = lookup_grade(desc.grade_id) if desc is not None else None
    names = _known_names(g.canonical) if g is not None else ()
    return names[0] if names else "-"


def _gguf_rows(inp: Input) -> list[TensorRow]:
    got: GGUFContents = inp.gguf  # type: ignore[assignment]
    return _ggml_rows(got, [(inp.file.path, got.file)])


def _ggml_rows(got: GGUFContents, files: Sequence[tuple[str, GGUFFile]]) -> list[TensorRow]:
    """The rows of GGUF contents read from ``files`` (one file, or the
    shards of a split model read as one), each tensor's row naming the
    file that holds it."""
    rows = []
    for path, f in files:
        for t in f.tensors:
            rows.append(_ggml_row(got, path, t))
    return rows


def _ggml_row(got: GGUFContents, path: str, t) -> TensorRow:
    v = got.tensors.get(t.name)
    shape: tuple[int, ...] = tuple(t.shape)
    ecosystem, conv, kind, reason = t.ggml_type or f"type {t.type_id}", "ggml", "plain", None
    desc = None
    if isinstance(v, GritArray):
        desc, shape = v.descriptor, tuple(v.shape)
        if t.name in got.annotated:
            kind, conv, ecosystem = "grit", "grit", _known_as(desc)
        else:            # the blocks are the planes, or their bits are moved
            kind = "inferred" if t.ggml_type in ZERO_COPY else "converted"
    elif isinstance(v, Inexpressible):
        kind, reason = "inexpressible", v.reason
    elif isinstance(v, CheckFailed):
        kind, conv, reason = "unreadable", "grit", str(v.error).splitlines()[0]
        shape = tuple(v.shape)
    elif v is None:
        kind, reason = "unreadable", "its bytes cannot be read as its ggml type"
    grade, canonical, gid = _grade_of(desc)
    return TensorRow(t.name, path, kind, conv, ecosystem, grade, canonical, gid,
                     shape, _numel(shape), t.nbytes, (t.name,), reason)


def _span_bytes(f: SafetensorsFile, name: str | None) -> int:
    e = f.entries.get(name) if name is not None else None
    return 0 if e is None or e.span is None else max(0, e.span[1] - e.span[0])


def _split(convention: str) -> tuple[str, str]:
    """``compressed-tensors/nvfp4-pack-quantized`` -> its convention and the
    ecosystem name of its format."""
    conv, _, rest = convention.partition("/")
    return conv, rest or conv


def _safetensors_rows(inp: Input) -> list[TensorRow]:
    f: SafetensorsFile = inp.safetensors  # type: ignore[assignment]
    path, doc = inp.file.path, f.doc
    rows: list[TensorRow] = []
    taken: set[str] = set()

    def held(names: Iterable[str | None]) -> tuple[tuple[str, ...], int]:
        mine = tuple(dict.fromkeys(n for n in names if n is not None and n in f.entries
                                   and n not in taken))
        taken.update(mine)
        return mine, sum(_span_bytes(f, n) for n in mine)

    if doc.present:
        for name, g in doc.tensors.items():
            files, nbytes = held((*g.planes, g.payload))
            grade, canonical, gid = _grade_of(g.desc)
            rows.append(TensorRow(name, path, "grit", "grit", _known_as(g.desc), grade,
                                  canonical, gid, g.shape, _numel(g.shape), nbytes, files))
    else:
        for r in recognise_file(f, inp.config):
            if r.kind == "unrecognised":
                continue                  # its tensors are listed as they are, below
            files, nbytes = held(r.tensors)
            conv, eco = _split(r.convention)
            shape = tuple(r.shape) if r.shape is not None else None
            if r.kind in ("inferred", "converted"):
                grade, canonical, gid = _grade_of(r.descriptor)
                rows.append(TensorRow(r.name, path, r.kind, conv, eco, grade, canonical, gid,
                                      shape, _numel(shape), nbytes, files))
            else:
                rows.append(TensorRow(r.name, path, "inexpressible", conv, eco, None, None,
                                      None, shape, _numel(shape), nbytes, files,
                                      f"{r.section}: {r.reason}" if r.section else r.reason))
    for name, e in f.entries.items():
        if name in taken:
            continue
        taken.add(name)
        rows.append(TensorRow(name, path, "plain", None, e.dtype or "?", None, None, None,
                              e.shape, _numel(e.shape), _span_bytes(f, name), (name,)))
    return rows


#: each container's rows, by the container's name (grit.io.containers)
ROWS: dict[str, Callable[[Input], list[TensorRow]]] = {
    "gguf": _gguf_rows, "safetensors": _safetensors_rows}


# ---------------------------------------------------------------------------
# the inputs


def _opened(path: str, cache: bool) -> Input:
    inp = open_input(path, cache)
    if not inp.file.parsed or inp.container is None:
        raise InfoInputError(path, inp.file.error or "not a model file grit reads")
    return inp


def _file_row(inp: Input, rows: Sequence[TensorRow]) -> FileRow:
    src = inp.source
    size = src.size if src is not None else 0
    return FileRow(inp.file.path, inp.file.format or "?", size,
                   sum(r.file == inp.file.path for r in rows))


def _problem_lines(path: str, problems) -> list[str]:
    return [f"{path}: {p.tensor + ': ' if p.tensor else ''}{p.message}" for p in problems]


def _model(paths: Sequence[str], cache: bool
           ) -> tuple[list[FileRow], list[TensorRow], list[str], SplitRow | None]:
    """The files of one model read — one file, or the GGUF files of one
    split series (grit.io.gguf_split.series) — inside one grade and layout
    scope, as grit scan reads them (the grades one model carries name no
    other's).  A split model's shards are read as one file (its KV entries
    and grit.* annotations the first shard's, an NVFP4 tensor paired with
    its companion in any shard), after the checks grit convert makes
    (grit.io.gguf_split.series_faults): a shard missing is an
    InfoInputError, since totals without it would mislead; any other fault
    a problem line."""
    with grade_scope(), layout_scope():
        inps = [_opened(p, cache) for p in paths]
        gg = [i for i in inps if i.gguf is not None]
        if not gg or not any(SPLIT_COUNT in i.gguf.file.fields for i in gg):  # type: ignore
            out_rows: list[TensorRow] = []
            files, problems = [], []
            for inp in inps:
                rows = ROWS[inp.container.name](inp)  # type: ignore[union-attr]
                out_rows += rows
                files.append(_file_row(inp, rows))
                problems += _problem_lines(inp.file.path, inp.contents.problems)
            return files, out_rows, problems, None
        walked = [(i.file.path, i.gguf.file) for i in gg]  # type: ignore[union-attr]
        faults = list(series_faults([(p, facts(f)) for p, f in walked]))
        for fault in faults:
            if fault.kind == "missing":
                raise InfoInputError(fault.path, fault.text)
        got = read_files([f for _, f in walked])
        rows = _ggml_rows(got, walked)
        holder = {t: p for p, f in walked for t in f.names}
        problems = [f"{fault.path}: {fault.text}" for fault in faults]
        for pr in got.problems:
            problems += _problem_lines(holder.get(pr.tensor or "", walked[0][0]), [pr])
        files = [_file_row(i, rows) for i in gg]
        first = gg[0].gguf.file  # type: ignore[union-attr]
        count, total = first.value(SPLIT_COUNT), first.value("split.tensors.count")
        split = SplitRow(walked[0][0], count if isinstance(count, int) else len(gg),
                         tuple(p for p, _ in walked),
                         total if isinstance(total, int) else len(rows))
        return files, rows, problems, split


def _index(path: str) -> IndexRow:
    try:
        ix = read_index(path)
    except (OSError, ValueError, GritError) as e:
        return IndexRow(path, None, None, str(e).splitlines()[0] if str(e) else type(e).__name__)
    return IndexRow(path, len(ix.weight_map), ix.total_size)


def _totals(rows: Sequence[TensorRow]) -> Totals:
    sized = [r for r in rows if r.parameters is not None]
    params = sum(r.parameters or 0 for r in sized)
    nbytes = sum(r.bytes for r in rows)
    sized_bytes = sum(r.bytes for r in sized)
    return Totals(len(rows), params, nbytes, 2 * params, 4 * params,
                  sized_bytes / params if params else None, len(rows) - len(sized))


def _by_type(rows: Sequence[TensorRow]) -> tuple[TypeRow, ...]:
    groups: dict[tuple[str, str | None], list[TensorRow]] = {}
    for r in rows:
        groups.setdefault((r.ecosystem, r.grade), []).append(r)
    out = [TypeRow(eco, grade, len(rs), sum(r.parameters or 0 for r in rs),
                   sum(r.bytes for r in rs), rs[0].known_as)
           for (eco, grade), rs in groups.items()]
    return tuple(sorted(out, key=lambda t: (-t.bytes, t.ecosystem, t.grade or "")))


def info(paths: "str | os.PathLike | Iterable[str | os.PathLike]", *,
         cache: bool = True) -> Info:
    """The :class:`Info` of ``paths`` (one path or several: files, folders,
    shard indexes, manifests, https:// URLs, hf:// names — what ``grit
    scan`` takes), read from headers alone.  ``cache=False`` reads remote
    headers afresh (the header cache: grit.io.http.default_cache).

    Raises :class:`InfoInputError` (a :class:`~grit.errors.GritError`)
    naming the first input that cannot be read — a path that is not there,
    a folder with no model file, a file no container reads, a remote file
    that cannot be fetched — since totals without it would mislead."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    given = [os.fspath(p) for p in paths]
    if not given:
        raise InfoInputError("grit info", "no input given")
    findings: list = []
    failed: list[ScannedFile] = []
    index_paths: list[str] = []
    with _remote.session(default_cache() if cache else None):
        model_files = expand(given, findings, failed, index_paths)
        if failed:
            raise InfoInputError(failed[0].path, failed[0].error or "cannot be read")
        if not model_files:
            why = findings[0].message if findings else "no model file"
            raise InfoInputError(given[0], why)
        files, rows, problems, splits = [], [], [], []
        for group in series(model_files):
            fr, rs, ps, sp = _model(group, cache)
            files.extend(fr)
            rows.extend(rs)
            problems.extend(ps)
            if sp is not None:
                splits.append(sp)
        indexes = tuple(_index(p) for p in index_paths)
    return Info(tuple(given), tuple(files), indexes, tuple(rows), _totals(rows),
                _by_type(rows), tuple(problems), tuple(splits))


# ---------------------------------------------------------------------------
# the table


def size_text(n: int) -> str:
    """A byte count for people: ``253,113,024 B (241.4 MiB)``."""
    if n < 1024:
        return f"{n:,} B"
    x, unit = float(n), "B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        x /= 1024
        if x < 1024:
            break
    return f"{n:,} B ({x:,.1f} {unit})"


def _shape_text(shape: tuple[int, ...] | None) -> str:
    return "?" if shape is None else " x ".join(map(str, shape)) or "()"


def render(got: Info, printable: Callable[[str], str] = str) -> str:
    """The human table (docs/info.md): per file its tensors as gguf-dump
    lists them — index, parameters, shape, ecosystem name, convention,
    bytes at rest, grade, name — then the rows by type and the totals.
    ``printable`` escapes text read from a file (names)."""
    P = printable
    out: list[str] = []
    by_file: dict[str, list[TensorRow]] = {}
    for r in got.tensors:
        by_file.setdefault(r.file, []).append(r)
    for f in got.files:
        rows = by_file.get(f.path, [])
        out.append(f"* {P(f.path)}: {f.format}, {size_text(f.size)}, {len(rows)} tensor(s)")
        shapes = [_shape_text(r.shape) for r in rows]
        ws = max([5] + [len(x) for x in shapes])
        we = max([9] + [len(P(r.ecosystem)) for r in rows])
        wg = max([5] + [len(r.grade or "-") for r in rows])
        wc = max([10] + [len(P(r.convention or "-")) for r in rows])
        out.append(f"  {'#':>5}  {'parameters':>13}  {'shape':<{ws}}  {'ecosystem':<{we}}  "
                   f"{'convention':<{wc}}  {'bytes':>13}  {'grade':<{wg}}  name")
        for i, (r, shape) in enumerate(zip(rows, shapes), 1):
            params = "?" if r.parameters is None else f"{r.parameters:,}"
            out.append(f"  {i:>5}  {params:>13}  {shape:<{ws}}  {P(r.ecosystem):<{we}}  "
                       f"{P(r.convention or '-'):<{wc}}  {r.bytes:>13,}  "
                       f"{r.grade or '-':<{wg}}  {P(r.name)}"
                       + (f"  ({P(r.reason)})" if r.reason else ""))
    for sp in got.splits:
        out.append(f"* {P(sp.path)}: split GGUF model, {sp.shards} shards "
                   f"({len(sp.files)} read), {sp.tensors} tensor(s) in all")
    for ix in got.indexes:
        out.append(f"* {P(ix.path)}: " + (f"unreadable index: {P(ix.error)}" if ix.error else
                   f"shard index, {ix.tensors} tensor(s)"
                   + ("" if ix.total_size is None else f", total_size {ix.total_size:,}")))
    out.append("")
    out.append("by type:")
    wt = max([9] + [len(P(t.ecosystem)) for t in got.by_type])
    for t in got.by_type:
        also = [n for n in t.known_as if n != t.ecosystem]
        out.append(f"  {P(t.ecosystem):<{wt}}  {t.tensors:>6} tensor(s)  {t.parameters:>15,} "
                   f"parameters  {t.bytes:>15,} B  {t.grade or '-'}"
                   + (f"  ({', '.join(also)})" if also else ""))
    tot = got.totals
    bpp = tot.bytes_per_parameter
    out.append("")
    out.append(f"tensors       {tot.tensors:,} in {len(got.files)} file(s)")
    out.append(f"parameters    {tot.parameters:,}"
               + (f" ({tot.unsized} tensor(s) of unknown shape not counted)"
                  if tot.unsized else ""))
    out.append(f"at rest       {size_text(tot.bytes)}"
               + ("" if bpp is None else f", {bpp:.4f} B/parameter ({bpp * 8:.3f} bits)"))
    out.append(f"as bf16       {size_text(tot.bf16_bytes)}")
    out.append(f"as f32        {size_text(tot.f32_bytes)}")
    for p in got.problems:
        out.append(f"problem: {P(p)}")
    return "\n".join(out)


class _InfoModule(types.ModuleType):
    """``grit.info`` is this module and, called, its :func:`info`:
    ``grit.info("model.gguf")`` is ``grit.info.info("model.gguf")``."""

    def __call__(self, paths, **kwargs) -> Info:
        return info(paths, **kwargs)


sys.modules[__name__].__class__ = _InfoModule
