"""The closed set of boundary statuses (§7.1) and the ``GritError`` family.

Every error the package raises on bad input is a :class:`GritError`.  Errors that
come from a boundary check carry ``.status`` (one of the five :class:`Status`
values) and ``.detail`` (a structured :class:`Detail`); the message is rendered
from the detail in one place, in the shape §7.5 shows.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from dataclasses import field as _dc_field
from typing import Any

__all__ = [
    "Status", "Detail", "GritError", "GritSizeError", "GritGradeError",
    "GritLayoutError", "GritDigestError", "GritFormatError", "GritEncodeError",
    "GritUsageError", "error_for",
]


class Status(enum.IntEnum):
    """grit_status_t (§7.1). Exhaustive by design: five values, no more."""

    OK = 0
    SIZE_MISMATCH = 1
    GRADE_UNKNOWN = 2
    PLACEMENT_UNKNOWN = 3
    DIGEST_MISMATCH = 4

    @property
    def spec_name(self) -> str:
        """The CamelCase name §7 and the conformance vectors use."""
        return {
            0: "Ok", 1: "SizeMismatch", 2: "GradeUnknown",
            3: "PlacementUnknown", 4: "DigestMismatch",
        }[int(self)]

    @classmethod
    def from_spec_name(cls, name: str) -> "Status":
        for s in cls:
            if s.spec_name == name:
                return s
        raise GritUsageError(f"unknown status name {name!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Detail:
    """grit_detail_t: what failed, where, and what was expected instead."""

    status: Status
    message: str
    field: str | None = None
    expected: Any = None
    actual: Any = None
    plane: int | None = None
    step: int | None = None
    lines: tuple[str, ...] = _dc_field(default=())  # derivation / cause / fix lines

    def render(self) -> str:
        head = self.message
        if self.lines:
            head += "\n" + "\n".join("  " + ln for ln in self.lines)
        return head

    def to_dict(self) -> dict:
        return {
            "status": self.status.spec_name,
            "code": int(self.status),
            "message": self.message,
            "field": self.field,
            "expected": _jsonable(self.expected),
            "actual": _jsonable(self.actual),
            "plane": self.plane,
            "step": self.step,
            "lines": list(self.lines),
        }


def _jsonable(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    return v


class GritError(Exception):
    """Base of every error the package raises on bad input."""

    status: Status | None = None

    def __init__(self, message: str = "", *, detail: Detail | None = None):
        self.detail = detail
        if detail is not None:
            self.status = detail.status
            message = detail.render()
        super().__init__(message)


class GritSizeError(GritError):
    """A plane's byte count disagrees with the §7.3 size equations."""

    status = Status.SIZE_MISMATCH


class GritGradeError(GritError):
    """The descriptor does not denote a grade this process knows (§7.1)."""

    status = Status.GRADE_UNKNOWN


class GritLayoutError(GritError):
    """A placement word is unknown, unresolvable, or not what a kernel needs."""

    status = Status.PLACEMENT_UNKNOWN


class GritDigestError(GritError):
    """Plane contents disagree with what the descriptor asserts about them."""

    status = Status.DIGEST_MISMATCH


class GritFormatError(GritGradeError):
    """A 16-bit format word is not a legal v1 format (§2)."""


class GritEncodeError(GritError):
    """A value cannot be projected into the requested format or grade."""


class GritUsageError(GritError):
    """An argument to a public function has the wrong type or shape."""


class GritPinError(GritError):
    """The package's own tables disagree with a constant the spec pins
    (Appendix A): an edit or build error, found when the module loads."""


def pin(ok: bool, what: str) -> None:
    """An import-time pin: raise GritPinError unless ``ok``.  Unlike
    ``assert``, it runs under ``python -O`` too."""
    if not ok:
        raise GritPinError(f"pinned constant violated: {what}")


_BY_STATUS = {
    Status.SIZE_MISMATCH: GritSizeError,
    Status.GRADE_UNKNOWN: GritGradeError,
    Status.PLACEMENT_UNKNOWN: GritLayoutError,
    Status.DIGEST_MISMATCH: GritDigestError,
}


def error_for(detail: Detail) -> GritError:
    """The GritError subclass §7.5 names for a failing detail."""
    return _BY_STATUS[detail.status](detail=detail)
