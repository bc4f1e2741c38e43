"""Recognising quantised safetensors checkpoints that carry no GRIT metadata:
the file side of :mod:`grit.conventions`.

The conventions themselves (what a compressed-tensors, GPTQ, torchao… header
means) live in :mod:`grit.conventions`, one module each; this module gives
them what only a reader has: the ``config.json`` and the other JSON files
the conventions read (their ``sidecars``) beside a model file, local or
remote; a file's header and its small tensors (:func:`recognise_file`); and
the loaded tensors with each recognised weight in place of its file tensors
(:func:`with_recognised`).
"""
from __future__ import annotations

import json
import os
from typing import Mapping

from ..conventions import Recognised, recognise, sidecars
from ..errors import GritError
from . import safetensors as _st
from ..dtypes import ST_DTYPES
from .http import RemoteError
from .location import Location

__all__ = ["recognise", "Recognised", "Deferred", "ST_DTYPE_BYTES", "read_config", "recognise_file",
           "SMALL_MAX", "MAX_CONFIG", "with_recognised", "read_sidecars",
           "read_remote_config"]

#: the largest small tensor (a GPTQ g_idx, an NVFP4 global scale) the
#: recogniser reads to decide a convention
SMALL_MAX = 1 << 20
#: the largest config.json read beside a model file
MAX_CONFIG = 16 * 1024 * 1024


#: safetensors dtype -> bytes per element (the whole-byte types of grit.dtypes)
ST_DTYPE_BYTES = {n: d.itemsize for n, d in ST_DTYPES.items() if d.itemsize is not None}


def _json_beside(path: str, name: str) -> dict | None:
    """The JSON object in file ``name`` beside a model file (None: absent,
    larger than MAX_CONFIG, not JSON or not an object).  Beside a remote
    model file (http(s), hf://) the sibling is read remotely: absent is a
    404 (a name the repository listing lacks), any other failure a
    RemoteError; a local one that cannot be read is None."""
    try:
        raw = Location.of(path).read_small(name, MAX_CONFIG)
    except OSError:                      # absent, or a local file unreadable
        return None
    if len(raw) > MAX_CONFIG:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def read_config(path: str) -> dict | None:
    """The ``config.json`` beside a model file (None: absent, too large,
    not a JSON object, or unreadable)."""
    try:
        return _json_beside(path, "config.json")
    except RemoteError:
        return None


def read_remote_config(path: str) -> dict | None:
    """As :func:`read_config` beside a remote model file, where a sibling
    that is there but cannot be read (anything but a 404) is the
    :class:`~grit.io.http.RemoteError` saying why, for the caller to
    report."""
    return _json_beside(path, "config.json")


def read_sidecars(path: str) -> dict[str, dict]:
    """The JSON files beside a model file that the conventions read
    (:func:`grit.conventions.sidecars`), by name; absent, too large, unreadable or
    non-object files are left out."""
    out = {}
    for name in sidecars():
        try:
            doc = _json_beside(path, name)
        except RemoteError:
            doc = None
        if doc is not None:
            out[name] = doc
    return out


def recognise_file(f: "_st.SafetensorsFile", config: Mapping | None) -> list[Recognised]:
    """:func:`recognise` over one safetensors file as read by
    :func:`grit.io.safetensors.read` (its entries with a dtype, a shape that
    fits int64 and a located span; small tensors read through the file's
    map, at most :data:`SMALL_MAX` bytes).  Never raises: a failure of the
    recogniser itself is one inexpressible record saying so."""
    header = {n: (e.dtype, e.shape, f.on_disk(n)) for n, e in f.entries.items()
              if e.dtype is not None and e.shape is not None and e.span is not None
              and all(x < 2**63 for x in e.shape)}
    try:
        return recognise(header, f.metadata, config, lambda tn: f.tensor_values(tn, SMALL_MAX))
    except (GritError, ValueError, KeyError, IndexError, TypeError, OverflowError) as e:
        # recognise() is written never to raise; should it, the file is still
        # readable and the failure is reported, never lost
        text = str(e).splitlines()[0] if str(e) else ""
        return [Recognised(os.path.basename(f.path), "unrecognised", "inexpressible",
                           section="§13", reason=f"the recogniser failed: "
                                                 f"{type(e).__name__}: {text}"[:300])]


class Deferred:
    """A converted weight (its planes built by the convention's converter
    from the file's tensors) not built yet: what :func:`with_recognised`
    puts in its place with ``defer_converted=True``, for a reader that
    handles one weight at a time.  :meth:`build` makes the checked
    GritArray (a GritError naming the weight where the bytes fail the
    check); nothing is kept."""

    __slots__ = ("record", "view")

    def __init__(self, record: Recognised, view) -> None:
        self.record, self.view = record, view

    def build(self):
        try:
            return self.record.array(self.view)
        except GritError as err:
            raise _st.renamed_error(self.record.name, err) from None

    def parts(self) -> list:
        """The file tensors the planes are built from, as views of the file
        (a reader gives their pages back once the weight is built and used)."""
        return [self.view(tn) for tn in self.record.tensors]


def with_recognised(path, tensors: "_st.SafetensorsTensors", *,
                    strict: bool = True, defer_converted: bool = False
                    ) -> "_st.SafetensorsTensors":
    """``tensors`` (what :func:`grit.io.safetensors.load` read from the file
    at ``path``) with each weight :func:`recognise` infers as one checked
    GritArray under its logical name, in place of the file tensors that hold
    its planes (at the position of the first of them); every other tensor,
    the inexpressible ones included, as it was.

    The result also carries ``.config`` (the config.json beside the file, or
    None) and ``.recognised`` (``{name: Recognised}``, inferred and
    inexpressible alike, so nothing the recogniser saw is silently dropped).
    A file with GRIT metadata is returned as it is (its descriptors are its
    own).  An inferred weight whose bytes fail the check raises that
    GritError naming the weight, or with ``strict=False`` stands as a
    :class:`~grit.io.safetensors.CheckFailed` record.  ``defer_converted``:
    a weight whose planes a converter builds stands as a :class:`Deferred`
    (built on demand) instead, so that reading a file holds no converted
    planes."""
    tensors.config = None
    tensors.recognised = {}
    if tensors.convention is not None:
        return tensors
    f = getattr(tensors, "_source", None) or _st.read(path)    # the header load parsed
    config = read_config(path)
    recs = recognise_file(f, config)
    out = _st.SafetensorsTensors()
    out.metadata, out.convention = tensors.metadata, tensors.convention
    out.config, out.recognised = config, {r.name: r for r in recs}
    first: dict[str, Recognised] = {}          # first file tensor -> its weight
    taken: set[str] = set()
    for r in recs:
        if r.kind not in ("inferred", "converted"):
            continue
        parts = [tn for tn in tensors if tn in r.tensors]
        if not parts:
            continue
        first[parts[0]] = r
        taken.update(parts)
    for name, value in tensors.items():
        r = first.get(name)
        if r is not None and defer_converted and r.kind == "converted":
            out[r.name] = Deferred(r, f.view)
        elif r is not None:
            try:
                out[r.name] = r.array(f.view)
            except GritError as err:
                e = _st.renamed_error(r.name, err)
                if strict:
                    raise e from None
                raw = {tn: f.view(tn) for tn in r.tensors if tn in f.entries}
                out[r.name] = _st.CheckFailed(r.name, e, r.descriptor.hex()
                                              if r.descriptor is not None else "",
                                              tuple(r.shape or ()), raw)
        elif name not in taken:
            out[name] = value
    return out


