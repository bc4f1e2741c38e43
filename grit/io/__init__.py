"""Reading and writing checkpoints of GRIT arrays.

``load(path)`` recognises the container by its first bytes: GGUF (magic
``GGUF``) is read by ``grit.io.gguf``, and safetensors (an 8-byte
little-endian header length, then a JSON object) by ``grit.io.safetensors``.
``save(path, tensors)`` writes safetensors, or GRIT-annotated GGUF when the
path ends in ``.gguf`` (or ``format="gguf"``).  The file formats are
specified in docs/file-format.md.

Each container has one reader that returns what it parsed together with a
list of :class:`~grit.io.problems.Problem` values (``grit.io.safetensors.read``,
``grit.io.gguf.read``);
``load`` raises the first problem, ``grit scan`` reports them all.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from .._files import check_tensors, open_regular
from ..errors import GritUsageError
from . import gguf as _gguf
from . import safetensors as _st
from .gguf import GGUF_MAGIC
from .recognise import with_recognised
from .safetensors import GritFileError

__all__ = ["load", "save", "save_gguf", "sniff", "GritFileError"]


def _head(path) -> tuple[bytes, int]:
    with open_regular(path) as f:
        return f.read(9), os.fstat(f.fileno()).st_size


def _kind(head: bytes, size: int) -> str | None:
    if head[:4] == GGUF_MAGIC:
        return "gguf"
    if _st.is_safetensors(head, size):
        return "safetensors"
    return None


def sniff(path) -> str | None:
    """"gguf", "safetensors" or None, from the first bytes of the file at
    ``path`` (an OSError propagates)."""
    return _kind(*_head(path))


def load(path, **options):
    """``{tensor name: GritArray | ndarray | record}`` for a checkpoint file.

    GGUF: see :func:`grit.io.gguf.load` (``strict=False`` by default: a ggml
    type v1 cannot express becomes an ``Inexpressible`` record).
    safetensors: see :func:`grit.io.safetensors.load` (``strict=True`` by
    default: a GRIT tensor failing its level-1 check raises; ``strict=False``
    returns a ``CheckFailed`` record in its place).  A safetensors file
    without GRIT metadata whose weights follow a convention grit recognises
    (compressed-tensors, torchao; docs/scan.md) returns each such weight as a
    GritArray under its logical name, with ``.config`` and ``.recognised``
    on the result (:func:`grit.io.recognise.with_recognised`);
    ``recognise=False`` returns the file's tensors as they are."""
    try:
        head, size = _head(path)
    except (OSError, TypeError) as e:
        raise GritUsageError(f"cannot read {path!r}: {e}") from None
    kind = _kind(head, size)
    if kind == "gguf":
        return _gguf.load(path, **options)
    if kind == "safetensors" or (kind is None and os.fspath(path).lower().endswith(
            ".safetensors")):     # the reader names what is wrong with the header
        recognised = options.pop("recognise", True)
        tensors = _st.load(path, **options)
        return with_recognised(path, tensors, strict=options.get("strict", True)) \
            if recognised else tensors
    raise GritFileError(f"{path}: not a GGUF file (magic {head[:4]!r}) and not a safetensors "
                        "file (an 8-byte header length within the file, then '{')")


def save(path, tensors, metadata=None, *, format: str | None = None, **options) -> None:
    """Write ``{name: GritArray | ndarray}`` to ``path``: safetensors
    (:func:`grit.io.safetensors.save`), or GRIT-annotated GGUF
    (:func:`grit.io.gguf.save_gguf`) when ``format="gguf"`` or the path ends
    in ``.gguf``.  Without ``metadata``, the ``.metadata`` of a mapping that
    ``grit.load`` returned is written back (GGUF KV entries to GGUF, a
    safetensors ``__metadata__`` to safetensors).  Input files are never
    modified in place: the new file replaces ``path`` atomically."""
    if not isinstance(path, (str, os.PathLike)):
        raise GritUsageError(f"save(path, tensors): path must be a str or os.PathLike, got "
                             f"{type(path).__name__} (are the arguments swapped?)")
    if not isinstance(tensors, Mapping):
        raise GritUsageError(f"save(path, tensors): tensors must be a mapping of name to "
                             f"GritArray or ndarray, got {type(tensors).__name__}")
    check_tensors(tensors)        # a mapped file truncated since: GritFileError, not SIGBUS
    fmt = format
    if fmt is None:
        fmt = "gguf" if os.fspath(path).lower().endswith(".gguf") else "safetensors"
    if fmt == "gguf":
        return _gguf.save_gguf(path, tensors, metadata, **options)
    if fmt == "safetensors":
        if metadata is None and isinstance(getattr(tensors, "metadata", None), dict) \
                and not isinstance(tensors.metadata, _gguf.GGUFMetadata):
            metadata = tensors.metadata      # what grit.load read: written back
        if options:
            raise GritUsageError(f"save(): unknown options {sorted(options)} for safetensors")
        return _st.save(path, tensors, metadata)
    raise GritUsageError(f"save(): format must be 'safetensors' or 'gguf', got {format!r}")


def save_gguf(path, tensors, metadata=None, **options) -> None:
    """:func:`grit.io.gguf.save_gguf`."""
    if isinstance(tensors, Mapping):
        check_tensors(tensors)
    return _gguf.save_gguf(path, tensors, metadata, **options)
