"""GRIT's own schema: a checkpoint whose tensors carry their descriptors
(the ``__grit__`` safetensors metadata, the ``grit.*`` GGUF KV entries;
docs/file-format.md) needs no recognising.  Its ``config.json`` may say
``"quantization_config": {"quant_method": "grit"}``: this convention names
that method, so a GRIT checkpoint's config is never reported as unknown."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..array import GritArray
from ..errors import GritUsageError
from .base import Convention, Emitted

__all__ = ["CONVENTION", "METHOD"]

#: the ``quant_method`` of a GRIT checkpoint's ``quantization_config``
METHOD = "grit"


def emit(name: str, array: Any) -> Emitted:
    """A GRIT array is written as it is (the container writes its descriptor
    and planes): every array, exact."""
    if not isinstance(array, GritArray):
        raise GritUsageError(f"{name}: grit holds GRIT arrays, not {type(array).__name__}")
    return Emitted({name: array}, {})


def emit_config(emitted: Mapping[str, Emitted], plain: Sequence[str]) -> dict:
    return {"config.json": {"quantization_config": {"quant_method": METHOD}}}


CONVENTION = Convention("grit", methods=(METHOD,), emit=emit, emit_config=emit_config)
