"""Reading checkpoints into GRIT arrays.

``load(path)`` recognises the container by its magic bytes.  GGUF is read by
``grit.io.gguf`` (gguf-py, imported on first use); safetensors is the next
reader and will sit beside it as ``grit.io.safetensors`` behind the same
``load``.
"""
from __future__ import annotations

import os

from ..errors import GritUsageError

__all__ = ["load"]

_GGUF_MAGIC = b"GGUF"


def load(path, **options):
    """``{tensor name: GritArray | ndarray | record}`` for a checkpoint file.

    GGUF: see :func:`grit.io.gguf.load` (``strict=`` is its one option)."""
    try:
        with open(os.fspath(path), "rb") as f:
            head = f.read(8)
    except (OSError, TypeError) as e:
        raise GritUsageError(f"cannot read {path!r}: {e}") from None
    if head[:4] == _GGUF_MAGIC:
        from .gguf import load as load_gguf
        return load_gguf(path, **options)
    raise GritUsageError(f"{path}: not a GGUF file (magic {head[:4]!r}); safetensors reading "
                         "is not implemented yet")
