"""A finding as every form of the report gives it: :class:`Record`, the
typed value of the Python API and the object of the JSON report's
``findings`` (:meth:`Record.to_dict`), and its identity across runs
(:func:`identity`, what a baseline holds).

A finding names at most one tensor.  What the analyses put in its tensor
field is one of three things, told apart here once: a tensor's name; a role
(``S301``/``S302``, grade drift across a role such as ``ffn_down``); or a
label for several tensors (``3 tensors: a, b, c``, with every name in
``detail.tensors``).  The record gives them as ``tensor`` (the name, or
None), ``role`` and ``tensors``; ``label`` keeps the text the human report
shows."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from ...io.hub import is_remote
from ..findings import Category, Finding, Severity

__all__ = ["ByteRange", "Record", "ROLE_CODES", "identity", "shown_path"]

#: the findings whose tensor field names a role (grade drift), not a tensor
ROLE_CODES = frozenset({"S301", "S302"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ByteRange:
    """Where a tensor's bytes lie in its file: ``offset`` and ``length`` from
    the start of the file (its planes back to back, else its data plane),
    and each plane's range by role for a tensor of several planes."""

    offset: int
    length: int
    planes: Mapping[str, "ByteRange"] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Any) -> "ByteRange | None":
        if not (isinstance(d, dict) and type(d.get("offset")) is int
                and type(d.get("length")) is int):
            return None
        planes = d.get("planes")
        got = {str(k): ByteRange.from_dict(v) for k, v in planes.items()} \
            if isinstance(planes, dict) else {}
        return cls(offset=d["offset"], length=d["length"],
                   planes={k: v for k, v in got.items() if v is not None})


def _subject(f: Finding) -> tuple[str | None, str | None, tuple[str, ...]]:
    """(tensor, role, tensors) of a finding (see the module's docstring)."""
    group = f.detail.get("tensors")
    names = tuple(n for n in group if isinstance(n, str)) if isinstance(group, list) else ()
    if f.tensor is None:
        return None, None, names
    if f.code in ROLE_CODES:
        return None, f.tensor, names
    if names and f.tensor not in names:           # a label of several tensors
        return None, None, names
    return f.tensor, None, names


def shown_path(path: str | None, cwd: str | None = None) -> str | None:
    """A finding's file as its identity has it: a URL or ``hf://`` name as
    given; a local path relative to ``cwd`` (default: the working directory)
    when it lies under it, with ``/`` between its parts — so a checkout
    scanned from its root gives the same path on every machine."""
    if path is None or is_remote(path):
        return path
    return _relative(path, cwd if cwd is not None else os.getcwd())


@lru_cache(maxsize=4096)
def _relative(path: str, base: str) -> str:
    try:
        rel = os.path.relpath(os.path.abspath(path), base)
    except ValueError:                       # another drive (Windows)
        rel = path
    if rel == ".." or rel.startswith(".." + os.sep):
        rel = os.path.abspath(path)
    return rel.replace(os.sep, "/")


def identity(f: Finding, cwd: str | None = None) -> dict[str, Any]:
    """What makes a finding the same finding in another run: its code, its
    file (:func:`shown_path`) and what it names — the tensor, else the role,
    else the sorted names of the tensors it lists.  Never the message, whose
    numbers (sizes, counts, offsets) may change while the problem stays."""
    return _identity(f, _subject(f), cwd if cwd is not None else os.getcwd())


def _identity(f: Finding, subj: tuple[str | None, str | None, tuple[str, ...]],
              cwd: str) -> dict[str, Any]:
    tensor, role, names = subj
    subject: str | list[str] | None = tensor if tensor is not None else role
    if subject is None and names:
        subject = sorted(names)
    return {"code": f.code, "file": shown_path(f.file, cwd), "subject": subject}


def _part(s: str | None) -> str:
    return "-" if s is None else f"{len(s)}:{s}"


def fingerprint(ident: Mapping[str, Any]) -> str:
    """The 16-hex-digit digest of an identity: the first 8 bytes of the
    SHA-256 of its parts, each written ``LENGTH:TEXT`` (``-`` for none; a
    list of names as ``[`` and its names), so no two identities share the
    text hashed."""
    subject = ident["subject"]
    tail = "[" + "".join(map(_part, subject)) if isinstance(subject, list) else _part(subject)
    text = _part(ident["code"]) + _part(ident["file"]) + tail
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """One finding of a report, typed.

    ``code`` (``S101``; ``grit explain CODE``) fixes ``category``,
    ``severity`` and, but for ``S501``, ``status``.  ``file`` is the file as
    scanned (None for a finding of no file); ``tensor`` the one tensor it
    names, or None; ``role`` the role of a grade-drift finding;
    ``tensors`` every tensor a finding of several lists; ``byte_range``
    where the tensor's bytes lie in the file, when its reader located them.
    ``message`` and ``lines`` are the text; ``detail`` the rest, by code
    (docs/scan.md).  ``consequences`` are the findings this one's root
    cause explains, absorbed into it.  ``fingerprint`` is its identity
    across runs (:func:`identity`)."""

    code: str
    category: Category
    severity: Severity
    status: str
    file: str | None
    tensor: str | None
    role: str | None
    tensors: tuple[str, ...]
    label: str | None
    byte_range: ByteRange | None
    message: str
    lines: tuple[str, ...]
    detail: Mapping[str, Any]
    omitted: int
    consequences: tuple["Record", ...]
    fingerprint: str

    @classmethod
    def of(cls, f: Finding, cwd: str | None = None) -> "Record":
        """The record of ``f`` (``cwd``: the folder its identity's file is
        relative to, default the working directory)."""
        if cwd is None:
            cwd = os.getcwd()
        subj = _subject(f)
        tensor, role, names = subj
        return cls(code=f.code, category=f.category, severity=f.severity, status=f.status,
                   file=f.file, tensor=tensor, role=role, tensors=names, label=f.tensor,
                   byte_range=ByteRange.from_dict(f.detail.get("byte_range")),
                   message=f.message, lines=tuple(f.lines), detail=f.detail,
                   omitted=f.omitted,
                   consequences=tuple(cls.of(c, cwd) for c in f.consequences),
                   fingerprint=fingerprint(_identity(f, subj, cwd)))

    def to_dict(self) -> dict[str, Any]:
        """The finding as the JSON and JSON Lines reports write it."""
        d = dict(self.detail)
        if self.lines:
            d.setdefault("lines", list(self.lines))
        out: dict[str, Any] = {
            "code": self.code, "category": self.category.value, "severity": int(self.severity),
            "file": self.file, "tensor": self.tensor, "status": self.status,
            "message": self.message, "detail": d}
        if self.role is not None:
            out["role"] = self.role
        if self.label is not None and self.label not in (self.tensor, self.role):
            out["label"] = self.label
        if self.omitted > 0:
            out["omitted"] = self.omitted
        out["consequences"] = [c.to_dict() for c in self.consequences]
        out["fingerprint"] = self.fingerprint
        return out
