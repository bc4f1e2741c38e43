"""GRIT's own schema: a checkpoint whose tensors carry their descriptors
(the ``__grit__`` safetensors metadata, the ``grit.*`` GGUF KV entries;
docs/file-format.md) needs no recognising.  Its ``config.json`` may say
``"quantization_config": {"quant_method": "grit"}``: this convention names
that method, so a GRIT checkpoint's config is never reported as unknown."""
from __future__ import annotations

from .base import Convention

__all__ = ["CONVENTION", "METHOD"]

#: the ``quant_method`` of a GRIT checkpoint's ``quantization_config``
METHOD = "grit"

CONVENTION = Convention("grit", methods=(METHOD,))
