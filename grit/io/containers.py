"""The containers grit reads and writes: one record each, and the only place
that chooses between them.

A :class:`Container` names its suffixes, says from a file's first bytes
whether the file is one of its own (``sniff``), reads a file or any byte
source collecting every problem (``read`` / ``read_source``: what ``grit
scan`` and ``grit explain`` read), loads its tensors for ``grit.load`` and
writes them for ``grit.save``.  Each container's reading and writing live in
its own modules (``grit.io.safetensors``; ``grit.io.gguf`` with
``grit.io.gguf_file``); adding a container is a new reader/writer module and
one record in :data:`CONTAINERS`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import GritUsageError
from . import gguf as _gguf
from . import gguf_split as _gguf_split
from . import gguf_writer as _gguf_writer
from . import safetensors as _st
from .recognise import with_recognised

__all__ = ["Container", "CONTAINERS", "GGUF", "SAFETENSORS", "named", "by_suffix", "sniffed",
           "HEAD_BYTES"]


@dataclass(frozen=True)
class Container:
    """One container format (see the module docstring)."""

    name: str
    suffixes: tuple[str, ...]
    #: ``sniff(head, size)``: whether a file of ``size`` bytes whose first
    #: bytes are ``head`` (at least :data:`HEAD_BYTES` where the file has them)
    #: is of this container
    sniff: Callable[[bytes, int], bool]
    #: how many first bytes ``sniff`` needs to decide (fewer: it says no)
    sniff_bytes: int
    #: the problem-collecting readers: a local path, any byte source
    read: Callable[[str], Any]
    read_source: Callable[..., Any]
    #: ``load(path, **options)`` -> ``{name: GritArray | ndarray | record}``
    load: Callable[..., Any]
    #: ``save(path, tensors, metadata, **options)``
    save: Callable[..., None]
    #: the byte source what ``read`` / ``read_source`` returned reads through
    source_of: Callable[[Any], Any]
    #: ``load_source(src, path, **options)``: ``load`` through any byte source
    #: (a remote file); None where the container has none
    load_source: Callable[..., Any] | None = None
    #: whether the quantisation conventions apply (the config.json beside it)
    conventions: bool = False
    #: ``holds(folder)``: whether a local folder is one model of this
    #: container, which ``load`` then takes (None: a folder is not)
    holds: Callable[[str], bool] | None = None




def _load_safetensors(path, **options):
    """A safetensors file's tensors, each weight a convention recognises as
    one GritArray (``recognise=False``: the file's tensors as they are)."""
    recognised = options.pop("recognise", True)
    tensors = _st.load(path, **options)
    return with_recognised(path, tensors, strict=options.get("strict", True)) \
        if recognised else tensors


def _load_safetensors_source(src, path, **options):
    """:func:`_load_safetensors` of a file read through a byte source."""
    recognised = options.pop("recognise", True)
    tensors = _st.load_source(src, path, **options)
    return with_recognised(path, tensors, strict=options.get("strict", True)) \
        if recognised else tensors


def _save_safetensors(path, tensors, metadata=None, **options) -> None:
    """safetensors; without ``metadata``, the plain-dict ``.metadata`` of a
    mapping ``grit.load`` returned (a safetensors ``__metadata__``; another
    container's metadata is a type of its own and is not written here)."""
    if metadata is None and type(getattr(tensors, "metadata", None)) is dict:
        metadata = tensors.metadata
    if options:
        raise GritUsageError(f"save(): unknown options {sorted(options)} for safetensors")
    _st.save(path, tensors, metadata)


GGUF = Container(
    "gguf", (".gguf",), lambda head, size: head[:4] == _gguf.GGUF_MAGIC, 4, _gguf.read,
    _gguf.read_source, _gguf_split.load, _gguf_writer.save_gguf, lambda got: got.file.source,
    holds=lambda folder: bool(_gguf_split.gguf_files(folder)))
SAFETENSORS = Container(
    "safetensors", (".safetensors",), _st.is_safetensors, 9, _st.read, _st.read_source,
    _load_safetensors, _save_safetensors, lambda f: f.source,
    load_source=_load_safetensors_source, conventions=True)

#: every container, in the order their ``sniff`` is asked (a magic before a
#: length-prefixed header)
CONTAINERS: tuple[Container, ...] = (GGUF, SAFETENSORS)

#: the first bytes every container's ``sniff`` can decide on
HEAD_BYTES = max(c.sniff_bytes for c in CONTAINERS)


def named(name: str) -> Container:
    for c in CONTAINERS:
        if c.name == name:
            return c
    raise GritUsageError(f"format must be one of {', '.join(c.name for c in CONTAINERS)}, "
                         f"got {name!r}")


def by_suffix(path) -> Container | None:
    """The container a file's name ends in, if any."""
    low = os.fspath(path).lower()
    return next((c for c in CONTAINERS if low.endswith(c.suffixes)), None)


def sniffed(head: bytes, size: int) -> Container | None:
    """The container a file's first bytes say it is, if any."""
    return next((c for c in CONTAINERS if c.sniff(head, size)), None)

