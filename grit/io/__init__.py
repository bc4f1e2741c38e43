"""Reading and writing checkpoints of GRIT arrays.

``load(path)`` recognises the container by its first bytes: GGUF (magic
``GGUF``) is read by ``grit.io.gguf``, and safetensors (an 8-byte
little-endian header length, then a JSON object) by ``grit.io.safetensors``.
``save(path, tensors)`` writes safetensors, or GRIT-annotated GGUF when the
path ends in ``.gguf`` (or ``format="gguf"``).  The file formats are
specified in docs/file-format.md.

Each container has one reader that returns what it parsed together with a
list of :class:`~grit.io.problems.Problem` values (``grit.io.safetensors.read``,
``grit.io.gguf.read``) and one writer (``grit.io.safetensors.save``,
``grit.io.gguf_writer.save_gguf``);
``load`` raises the first problem, ``grit scan`` reports them all.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._files import check_tensors, open_regular
from ..errors import GritUsageError
from . import gguf_writer as _gguf_writer
from .containers import CONTAINERS, HEAD_BYTES, SAFETENSORS, by_suffix, named, sniffed
from .location import Location
from .safetensors import GritFileError

__all__ = ["load", "save", "save_gguf", "sniff", "GritFileError"]


def _head(path) -> tuple[bytes, int]:
    with open_regular(path) as f:
        return f.read(HEAD_BYTES), os.fstat(f.fileno()).st_size


def sniff(path) -> str | None:
    """The name of the container (``"gguf"``, ``"safetensors"``) the first
    bytes of the file at ``path`` say it is, or None (an OSError
    propagates)."""
    c = sniffed(*_head(path))
    return c.name if c is not None else None


def load(path, **options):
    """``{tensor name: GritArray | ndarray | record}`` for a checkpoint file,
    read by the container its first bytes name (:mod:`grit.io.containers`;
    a file they do not name is read by the container its suffix names, whose
    reader says what is wrong with it).

    GGUF: see :func:`grit.io.gguf.load` (``strict=False`` by default: a ggml
    type v1 cannot express becomes an ``Inexpressible`` record); any shard
    of a model in gguf-split's shards (``split.count`` over 1), or a folder
    holding them, gives every shard's tensors, the shards checked against
    each other first (:func:`grit.io.gguf_split.load`).
    safetensors: see :func:`grit.io.safetensors.load` (``strict=True`` by
    default: a GRIT tensor failing its level-1 check raises; ``strict=False``
    returns a ``CheckFailed`` record in its place).  A safetensors file
    without GRIT metadata whose weights follow a convention grit recognises
    (grit.conventions; docs/scan.md) returns each such weight as a
    GritArray under its logical name, with ``.config`` and ``.recognised``
    on the result (:func:`grit.io.recognise.with_recognised`);
    ``recognise=False`` returns the file's tensors as they are.

    ``path`` may be an ``https://`` URL or an ``hf://ORG/REPO[@REV]/FILE``
    name (with ``grit-tensor[hub]``): the file is read through ranged
    requests, each tensor's bytes once, into memory (never downloaded whole
    first); the containers that can be read so are the ones with a
    ``load_source`` (safetensors)."""
    if isinstance(path, str) and Location.of(path).remote:
        return _load_remote(path, **options)
    if isinstance(path, (str, os.PathLike)) and os.path.isdir(path):
        c = next((c for c in CONTAINERS if c.holds is not None and c.holds(os.fspath(path))),
                 None)
        if c is None:
            raise GritUsageError(f"cannot read {os.fspath(path)!r}: a folder; grit.load reads "
                                 "a model file, or a folder of GGUF files (one model, or the "
                                 "shards of one)")
        return c.load(os.fspath(path), **options)
    try:
        head, size = _head(path)
    except (OSError, TypeError) as e:
        raise GritUsageError(f"cannot read {path!r}: {e}") from None
    c = sniffed(head, size) or by_suffix(path)
    if c is None:
        raise GritFileError(f"{path}: not a GGUF file (magic {head[:4]!r}) and not a "
                            "safetensors file (an 8-byte header length within the file, "
                            "then '{')")
    return c.load(path, **options)


def _load_remote(path: str, **options):
    src: Any = Location.of(path).open(path)
    head = src.read(0, min(HEAD_BYTES, src.size), "header length")
    c = sniffed(head, src.size) or by_suffix(path.split("?")[0])
    if c is None or c.load_source is None:
        what = f"a {c.name} file" if c is not None else "no container grit reads"
        raise GritFileError(f"{path}: grit.load reads safetensors over the network; this is "
                            f"{what}")
    return c.load_source(src, path, **options)


def save(path, tensors, metadata=None, *, format: str | None = None, **options) -> None:
    """Write ``{name: GritArray | ndarray}`` to ``path`` in the container
    ``format`` names, else the one the path's suffix names, else
    safetensors (:func:`grit.io.safetensors.save`; GGUF:
    :func:`grit.io.gguf_writer.save_gguf`).  Without ``metadata``, the
    ``.metadata`` of a mapping that ``grit.load`` returned is written back
    (GGUF KV entries to GGUF, a safetensors ``__metadata__`` to
    safetensors).  Input files are never modified in place: the new file
    replaces ``path`` atomically."""
    if not isinstance(path, (str, os.PathLike)):
        raise GritUsageError(f"save(path, tensors): path must be a str or os.PathLike, got "
                             f"{type(path).__name__} (are the arguments swapped?)")
    if not isinstance(tensors, Mapping):
        raise GritUsageError(f"save(path, tensors): tensors must be a mapping of name to "
                             f"GritArray or ndarray, got {type(tensors).__name__}")
    check_tensors(tensors)        # a mapped file truncated since: GritFileError, not SIGBUS
    if format is not None:
        c = named(format)
    else:
        c = by_suffix(path) or SAFETENSORS
    return c.save(path, tensors, metadata, **options)


def save_gguf(path, tensors, metadata=None, **options) -> None:
    """:func:`grit.io.gguf_writer.save_gguf`."""
    if isinstance(tensors, Mapping):
        check_tensors(tensors)
    return _gguf_writer.save_gguf(path, tensors, metadata, **options)
