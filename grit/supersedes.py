"""§11.2: supersedes equivalence edges.

An edge is a claim that stored bytes (scope ``decode``) or stored bytes and
re-quantisation (scope ``full``) are interchangeable between two grades.  A
wrong edge is silent corruption, so registration is mechanical: a mandatory
reason, decode-projection equality for ``decode`` scope, and for ``full`` scope
agreement of encode under both grades on every input of a supplied suite.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from .codec.encode import encode
from .errors import GritGradeError, GritUsageError
from .grade import GRADE_MXFP4, GRADE_MXFP4_RNE, GRADE_NVF4, GRADE_NVF4_RTZ, Grade, grade_from

__all__ = ["Edge", "SCOPES", "register_edge", "edges", "equivalent", "V1_EDGES"]

SCOPES = ("decode", "full")  # full is the stronger scope


@dataclass(frozen=True, slots=True)
class Edge:
    from_: Grade
    to: Grade
    scope: str
    reason: str

    def to_dict(self) -> dict:
        return {"from": self.from_.name or self.from_.canonical,
                "to": self.to.name or self.to.canonical,
                "from_canonical": self.from_.canonical, "to_canonical": self.to.canonical,
                "scope": self.scope, "decode_projection": self.from_.decode_projection,
                "reason": self.reason}


_EDGES: list[Edge] = []


def register_edge(from_, to, scope: str, reason: str, *,
                  suite: Iterable[Sequence[float]] | None = None) -> Edge:
    """Register ``from_ → to`` after checking its mechanical precondition.

    ``suite`` (required for scope ``full``): input arrays on which encode under
    both grades must produce identical payloads."""
    a, b = grade_from(from_), grade_from(to)
    if scope not in SCOPES:
        raise GritUsageError(f"scope must be one of {SCOPES}, got {scope!r}")
    if not isinstance(reason, str) or not reason.strip():
        raise GritGradeError("a supersedes edge needs a non-empty reason (§11.2)")
    if a.decode_projection != b.decode_projection:
        raise GritGradeError(
            f"decode projections differ, so no edge of any scope can hold:\n"
            f"  {a.decode_projection}\n  {b.decode_projection}")
    if scope == "full":
        if suite is None:
            raise GritGradeError("a full-scope edge needs a suite on which encode agrees")
        for i, vals in enumerate(suite):
            pa, pb = encode(vals, a).payload(), encode(vals, b).payload()
            if pa != pb:
                raise GritGradeError(
                    f"encode differs under the two grades on suite input {i}: a full-scope "
                    "edge would be a false claim")
    e = Edge(a, b, scope, reason.strip())
    if e not in _EDGES:
        _EDGES.append(e)
    return e


def edges() -> list[Edge]:
    return list(_EDGES)


def equivalent(a, b, scope: str = "decode") -> bool:
    """Equivalence at or above ``scope``: the reflexive-symmetric-transitive
    closure of the registered edges, plus canonical-string identity."""
    if scope not in SCOPES:
        raise GritUsageError(f"scope must be one of {SCOPES}, got {scope!r}")
    ga, gb = grade_from(a), grade_from(b)
    if ga == gb:
        return True
    need = SCOPES.index(scope)
    adj: dict[Grade, set[Grade]] = {}
    for e in _EDGES:
        if SCOPES.index(e.scope) >= need:
            adj.setdefault(e.from_, set()).add(e.to)
            adj.setdefault(e.to, set()).add(e.from_)
    seen, todo = {ga}, [ga]
    while todo:
        g = todo.pop()
        for n in adj.get(g, ()):
            if n == gb:
                return True
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return False


V1_EDGES = (
    register_edge(GRADE_MXFP4_RNE, GRADE_MXFP4, "decode",
                  "same E2M1/E8M0 decode; only the shared-exponent rounding of encode differs "
                  "(rne vs floor), so stored bytes are interchangeable, re-quantisation is not"),
    register_edge(GRADE_NVF4_RTZ, GRADE_NVF4, "decode",
                  "same E2M1/E4M3/binary32 decode; only the E4M3 block-scale rounding of "
                  "encode differs (rtz vs rne), so stored bytes are interchangeable"),
)
