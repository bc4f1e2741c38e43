"""Reading and writing checkpoints of GRIT arrays.

``load(path)`` recognises the container by its first bytes: GGUF (magic
``GGUF``) is read by ``grit.io.gguf`` (gguf-py, imported on first use), and
safetensors (an 8-byte little-endian header length, then a JSON object) by
``grit.io.safetensors``.  ``save(path, tensors)`` writes safetensors, or
GRIT-annotated GGUF when the path ends in ``.gguf`` (or ``format="gguf"``).
The file formats are specified in docs/file-format.md.
"""
from __future__ import annotations

import os

from ..errors import GritUsageError

__all__ = ["load", "save", "save_gguf", "GritFileError"]

_GGUF_MAGIC = b"GGUF"


def __getattr__(name):
    if name == "GritFileError":
        from .safetensors import GritFileError
        return GritFileError
    raise AttributeError(f"module 'grit.io' has no attribute {name!r}")


def load(path, **options):
    """``{tensor name: GritArray | ndarray | record}`` for a checkpoint file.

    GGUF: see :func:`grit.io.gguf.load` (``strict=False`` by default: a ggml
    type v1 cannot express becomes an ``Inexpressible`` record).
    safetensors: see :func:`grit.io.safetensors.load` (``strict=True`` by
    default: a GRIT tensor failing its level-1 check raises; ``strict=False``
    returns a ``CheckFailed`` record in its place)."""
    try:
        with open(os.fspath(path), "rb") as f:
            head = f.read(9)
            size = os.fstat(f.fileno()).st_size
    except (OSError, TypeError) as e:
        raise GritUsageError(f"cannot read {path!r}: {e}") from None
    if head[:4] == _GGUF_MAGIC:
        from .gguf import load as load_gguf
        return load_gguf(path, **options)
    from .safetensors import is_safetensors
    from .safetensors import load as load_st
    if is_safetensors(head, size):
        return load_st(path, **options)
    from .safetensors import GritFileError
    raise GritFileError(f"{path}: not a GGUF file (magic {head[:4]!r}) and not a safetensors "
                        "file (an 8-byte header length within the file, then '{')")


def save(path, tensors, metadata=None, *, format: str | None = None, **options) -> None:
    """Write ``{name: GritArray | ndarray}`` to ``path``: safetensors
    (:func:`grit.io.safetensors.save`), or GRIT-annotated GGUF
    (:func:`grit.io.gguf.save_gguf`) when ``format="gguf"`` or the path ends
    in ``.gguf``.  Input files are never modified in place: the new file
    replaces ``path`` atomically."""
    fmt = format
    if fmt is None:
        fmt = "gguf" if os.fspath(path).lower().endswith(".gguf") else "safetensors"
    if fmt == "gguf":
        from .gguf import save_gguf as _save
        return _save(path, tensors, metadata, **options)
    if fmt == "safetensors":
        from .safetensors import save as _save_st
        if options:
            raise GritUsageError(f"save(): unknown options {sorted(options)} for safetensors")
        return _save_st(path, tensors, metadata)
    raise GritUsageError(f"save(): format must be 'safetensors' or 'gguf', got {format!r}")


def save_gguf(path, tensors, metadata=None, **options) -> None:
    """:func:`grit.io.gguf.save_gguf`."""
    from .gguf import save_gguf as _save
    return _save(path, tensors, metadata, **options)
