"""GRIT's own schema: a checkpoint whose tensors carry their descriptors
(the ``__grit__`` safetensors metadata, the ``grit.*`` GGUF KV entries;
docs/file-format.md) needs no recognising, and is written as it is.

A GRIT checkpoint (written by ``grit convert --to grit`` or
:func:`grit.interop.transformers.save_pretrained`)
is a ``model.safetensors`` in the grit-safetensors convention
(docs/file-format.md) beside a config.json whose entry is::

    "quantization_config": {
        "quant_method": "grit",
        "convention": "grit-safetensors",
        "version": 1,
        "modules_not_converted": ["lm_head"]
    }

The entry is deliberately small: every GRIT tensor describes itself (its
descriptor, grade and shape are in the file's ``__grit__`` document), so the
entry names only the convention and its version, and the modules the writer
left in floating point.  A loader converts exactly the linear layers whose
``<module>.weight`` the file declares as a GRIT tensor.
This module is the one place the entry is built and parsed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ..array import GritArray
from ..errors import GritUsageError
from .base import Convention, Emitted, unconverted_modules

__all__ = ["CONVENTION", "METHOD", "QUANT_METHOD", "FILE_CONVENTION", "VERSION",
           "GritCheckpointConfig", "build_config", "parse_config"]

#: the ``quant_method`` a GRIT checkpoint names
QUANT_METHOD = METHOD = "grit"
#: the file convention the weights follow (docs/file-format.md)
FILE_CONVENTION = "grit-safetensors"
#: the version of this entry and of the convention it names
VERSION = 1

_KEYS = frozenset({"quant_method", "convention", "version", "modules_not_converted"})


@dataclass(frozen=True)
class GritCheckpointConfig:
    """A parsed entry: the modules left unconverted (dotted module names)."""

    modules_not_converted: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return build_config(modules_not_converted=self.modules_not_converted)


def build_config(*, modules_not_converted: Iterable[str] = ()) -> dict[str, Any]:
    """The entry as a JSON-ready dict."""
    mods = _names(list(modules_not_converted))
    return {"quant_method": QUANT_METHOD, "convention": FILE_CONVENTION, "version": VERSION,
            "modules_not_converted": list(mods)}


def _names(v) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise GritUsageError("quantization_config.modules_not_converted must be a list of "
                             "non-empty module names")
    return tuple(v)


def parse_config(entry: Mapping[str, Any]) -> GritCheckpointConfig:
    """Check an entry (as config.json holds it) and return what it says.

    Raises GritUsageError for another quant_method, convention or version
    (the JSON integer 1, not ``true`` or ``1.0``), or an unknown key."""
    if not isinstance(entry, Mapping):
        raise GritUsageError(f"quantization_config must be a JSON object, got "
                             f"{type(entry).__name__}")
    unknown = set(entry) - _KEYS
    if unknown:
        raise GritUsageError(f"quantization_config: unknown key(s) {sorted(unknown)} (a GRIT "
                             f"entry holds {sorted(_KEYS)})")
    if entry.get("quant_method") != QUANT_METHOD:
        raise GritUsageError(f"quantization_config.quant_method is "
                             f"{entry.get('quant_method')!r}, not {QUANT_METHOD!r}")
    if entry.get("convention") != FILE_CONVENTION:
        raise GritUsageError(f"quantization_config.convention is {entry.get('convention')!r}; "
                             f"this grit reads {FILE_CONVENTION!r}")
    v = entry.get("version")
    if type(v) is not int or v != VERSION:
        raise GritUsageError(f"quantization_config.version is {v!r}; this grit reads version "
                             f"{VERSION} (the JSON integer)")
    return GritCheckpointConfig(_names(entry.get("modules_not_converted", [])))


def emit(name: str, array: Any) -> Emitted:
    """A GRIT array is written as it is (the container writes its descriptor
    and planes): every array, exact."""
    if not isinstance(array, GritArray):
        raise GritUsageError(f"{name}: grit holds GRIT arrays, not {type(array).__name__}")
    return Emitted({name: array}, {})


def emit_config(emitted: Mapping[str, Emitted], plain: Mapping[str, Sequence[int]]) -> dict:
    """config.json's entry; the plain 2-D weights' modules are the modules
    not converted."""
    return {"config.json": {"quantization_config": build_config(
        modules_not_converted=unconverted_modules(plain))}}


CONVENTION = Convention("grit", methods=(METHOD,), emit=emit, emit_config=emit_config)
