"""What a container reader found wrong with a file, as values.

A reader (``grit.io.safetensors.read``, ``grit.io.gguf.read``) does
not stop at the first defect: it returns what it could parse together with
a list of :class:`Problem` values.  ``grit.load`` raises the first one (its
``error``, the GritError it stands for); ``grit scan`` reports every one.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from dataclasses import field as _field
from typing import Any

from ..errors import GritError

__all__ = ["ProblemKind", "Problem", "raise_first", "MAX_PER_KIND", "Tally"]

#: the most problems of one kind a reader keeps per file; the rest are counted
#: in the last kept one's ``omitted`` (as grit scan caps its findings)
MAX_PER_KIND = 20


class ProblemKind(str, enum.Enum):
    """The closed set of container defects the readers report."""

    #: the container cannot be parsed at all (header, magic, counts); nothing else is read
    UNREADABLE = "unreadable"
    #: a header entry is not an object of the expected keys
    BAD_ENTRY = "bad-entry"
    #: a header entry names a dtype the format does not have
    BAD_DTYPE = "bad-dtype"
    #: a header entry's shape is not a list of non-negative integers (or too deep)
    BAD_SHAPE = "bad-shape"
    #: a header entry's data_offsets are not two ordered non-negative integers
    BAD_OFFSETS = "bad-offsets"
    #: an entry's byte span differs from its element count times its item size
    SIZE = "size"
    #: two entries share bytes
    OVERLAP = "overlap"
    #: a GGUF tensor's data offset is not a multiple of the file's alignment
    MISALIGNED = "misaligned"
    #: a GGUF tensor is not at the data offset ggml requires (the padded sizes of
    #: the tensors before it, in tensor-info order): offsets out of order, or a gap
    OFFSET = "offset"
    #: an entry's bytes run past the end of the file
    PAST_END = "past-end"
    #: bytes of the data buffer that no entry covers (a gap between tensors, or
    #: bytes after the last one)
    COVERAGE = "coverage"
    #: ``__metadata__`` values are not all strings
    BAD_METADATA = "bad-metadata"
    #: a GGUF tensor info cannot be read as its ggml type (unknown type, odd row,
    #: duplicate name) or its bytes cannot be converted
    BAD_TENSOR = "bad-tensor"
    #: the GRIT annotation (``__grit__`` document, ``grit.*`` KV entries) is not JSON
    ANNOTATION_NOT_JSON = "annotation-not-json"
    #: the GRIT annotation is malformed or contradicts the file
    BAD_ANNOTATION = "bad-annotation"
    #: a grade string the annotation carries does not parse
    BAD_GRADE = "bad-grade"
    #: a GRIT tensor's recorded descriptor or shape cannot be read
    BAD_DESCRIPTOR = "bad-descriptor"
    #: a descriptor-map entry names a tensor the file lacks
    MISSING_TENSOR = "missing-tensor"
    #: a tensor's planes, as converted from the file, fail the level-1 check
    #: (``error.detail`` holds the §7.5 detail)
    CHECK_FAILED = "check-failed"


@dataclass(frozen=True)
class Problem:
    """One defect.  ``message`` names the tensor where there is one; ``lines``
    are derivation lines; ``field``/``expected``/``actual`` the structured
    facts; ``extra`` further (key, value) facts; ``error`` the GritError that
    ``grit.load`` raises for it."""

    kind: ProblemKind
    message: str
    tensor: str | None = None
    field: str | None = None
    expected: Any = None
    actual: Any = None
    lines: tuple[str, ...] = ()
    extra: tuple[tuple[str, Any], ...] = ()
    error: GritError | None = _field(default=None, compare=False, repr=False)
    #: this many more problems of the same kind were found after this one and
    #: not kept (a reader keeps at most MAX_PER_KIND of each kind per file)
    omitted: int = 0

    def facts(self) -> dict:
        """The structured facts as a dict (absent ones left out)."""
        out: dict[str, Any] = {}
        for k in ("field", "expected", "actual"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        out.update(self.extra)
        return out


def raise_first(problems, kinds=None) -> None:
    """Raise the error of the first problem (of ``kinds``, when given)."""
    for p in problems:
        if kinds is None or p.kind in kinds:
            raise p.error if p.error is not None else GritError(p.message)


class Tally:
    """The per-kind cap of a reader's problem list: at most MAX_PER_KIND
    problems of each kind are kept; a reader asks :meth:`full` before it
    builds a problem and :meth:`count` s the ones it does not build, and
    :meth:`finish` writes each count into the last kept problem's
    ``omitted``.  Problems already in the list count as kept."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        self._kept: dict[ProblemKind, int] = {}
        self._last: dict[ProblemKind, int] = {}
        self._more: dict[ProblemKind, int] = {}
        for i, p in enumerate(problems):
            self._kept[p.kind] = self._kept.get(p.kind, 0) + 1
            self._last[p.kind] = i

    def full(self, kind: ProblemKind) -> bool:
        """Whether a further problem of ``kind`` would only be counted."""
        return self._kept.get(kind, 0) >= MAX_PER_KIND

    def count(self, kind: ProblemKind) -> None:
        self._more[kind] = self._more.get(kind, 0) + 1

    def add(self, p: Problem) -> None:
        """Keep ``p``, or count it when its kind is full."""
        if self.full(p.kind):
            self.count(p.kind)
            return
        self._kept[p.kind] = self._kept.get(p.kind, 0) + 1
        self._last[p.kind] = len(self.problems)
        self.problems.append(p)

    def finish(self) -> None:
        for kind, n in self._more.items():
            i = self._last[kind]
            self.problems[i] = replace(self.problems[i], omitted=self.problems[i].omitted + n)
        self._more.clear()
