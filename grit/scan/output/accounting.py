"""Scan's byte accounting: which bytes of each file were checked against a
recorded descriptor, checked against an inferred one, or could not be
checked (:class:`Coverage`, :func:`account`, one function per container in
:data:`ACCOUNTS`), and where each tensor's bytes lie in its file
(:func:`attach_ranges`, put into the findings' detail)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ...io.gguf import Inexpressible
from ..collect import Input
from ..findings import Category, Finding

__all__ = ["Coverage", "Ranges", "account", "attach_ranges", "inferred_from", "ACCOUNTS",
           "NOT_CHECKABLE", "GGML"]

#: the reasons a byte could not be checked, as the report words them
NOT_CHECKABLE = {"plain": "plain tensors", "inexpressible": "types v1 cannot express",
                 "unreadable": "unreadable"}
#: what a GGUF tensor's descriptor is inferred from
GGML = "ggml block types"


# ---------------------------------------------------------------------------
# byte accounting


@dataclass
class Coverage:
    """The tensor bytes of one file (or a whole scan) by what scan could do
    with them: ``checked`` — planes whose descriptor the file records;
    ``inferred`` — bytes checked against a descriptor inferred from the named
    source (ggml block types, a recognised convention); ``not_checkable`` —
    by reason (plain tensors, types v1 cannot express, unreadable input)."""

    checked: int = 0
    inferred: dict[str, int] = field(default_factory=dict)
    not_checkable: dict[str, int] = field(default_factory=dict)

    @property
    def inferred_total(self) -> int:
        return sum(self.inferred.values())

    @property
    def not_checkable_total(self) -> int:
        return sum(self.not_checkable.values())

    @property
    def total(self) -> int:
        return self.checked + self.inferred_total + self.not_checkable_total

    def add(self, other: "Coverage") -> None:
        self.checked += other.checked
        for mine, theirs in ((self.inferred, other.inferred),
                             (self.not_checkable, other.not_checkable)):
            for k, n in theirs.items():
                mine[k] = mine.get(k, 0) + n

    def to_dict(self) -> dict:
        return {"bytes_total": self.total, "bytes_checked": self.checked,
                "bytes_inferred": self.inferred_total,
                "bytes_not_checkable": self.not_checkable_total,
                "inferred_from": dict(sorted(self.inferred.items())),
                "not_checkable_because": dict(sorted(self.not_checkable.items()))}


#: name -> the byte spans (label, offset in the file, length) of its bytes
Ranges = dict[str, list[tuple[str, int, int]]]


def _bump(d: dict[str, int], key: str, n: int) -> None:
    d[key] = d.get(key, 0) + n


def inferred_from(convention: str, config: Mapping | None) -> str:
    """What a recognised convention's descriptor is inferred from, in words:
    ``compressed-tensors config (nvfp4-pack-quantized)`` when the file's
    config.json declares a ``quantization_config``, else ``… tensor layout``."""
    family, _, variant = convention.partition("/")
    q = config.get("quantization_config") if isinstance(config, Mapping) else None
    src = "config" if isinstance(q, Mapping) else "tensor layout"
    return f"{family} {src}" + (f" ({variant})" if variant else "")


def account(inp: Input, findings: Iterable[Finding]) -> tuple[Coverage, Ranges]:
    """The coverage of one scanned file and the byte spans of its tensors,
    from what its container reader recorded (``findings`` are the file's:
    the recognised tensors' planes are read from their S601/S701/S705 details).
    Never raises: an unreadable file counts its size as not checkable."""
    cov, ranges = Coverage(), Ranges()
    fs = [f for f in findings if f.file == inp.file.path]
    c = inp.container
    if c is not None:
        ACCOUNTS[c.name](inp, fs, cov, ranges)
    else:
        try:
            size = os.stat(inp.file.path).st_size if os.path.isfile(inp.file.path) else 0
        except (OSError, ValueError):
            size = 0
        if size:
            _bump(cov.not_checkable, "unreadable", size)
    return cov, ranges


def _account_safetensors(inp: Input, fs: list[Finding], cov: Coverage, ranges: Ranges) -> None:
    f = inp.safetensors
    if f is None:
        return
    spans: dict[str, tuple[int, int]] = {}
    for n, e in f.entries.items():
        if e.span is not None:
            spans[n] = (f.start + e.span[0], e.span[1] - e.span[0])
            ranges[n] = [(n, *spans[n])]
    inferred: dict[str, str] = {}              # file tensor -> inferred from
    inexpressible: set[str] = set()
    for x in fs:
        d = x.detail
        if x.code == "S601" and isinstance(d.get("planes"), dict):
            src = inferred_from(str(d.get("convention", "")), inp.config)
            x.detail.setdefault("inferred_from", src)
            for name, planes in d["planes"].items():
                own = []
                for role, p in zip(("data", "scale0", "scale1", "aux"), planes or ()):
                    if isinstance(p, list) and len(p) > 1 and p[0] != "const" \
                            and isinstance(p[1], str):
                        inferred.setdefault(p[1], src)
                        if p[1] in spans:
                            own.append((role, *spans[p[1]]))
                if own:
                    ranges[name] = own
        elif x.code in ("S701", "S705") and isinstance(d.get("files"), list):
            inexpressible.update(t for t in d["files"] if isinstance(t, str))
    for name, g in f.doc.tensors.items():
        names = [g.payload] if g.payload is not None else list(g.planes)
        own = [(role, *spans[t]) for role, t in zip(("data", "scale0", "scale1", "aux"), names)
               if t is not None and t in spans]
        if g.payload is not None:
            own = [("payload", *spans[g.payload])] if g.payload in spans else []
        if own:
            ranges[name] = own
    avail, claimed = f.avail, f.doc.claimed
    for n, e in f.entries.items():
        # the bytes of the span the file holds (SafetensorsFile.on_disk, inline)
        held = 0 if e.span is None else max(0, min(e.span[1], avail) - min(e.span[0], avail))
        if n in claimed:
            cov.checked += held
        elif n in inferred:
            _bump(cov.inferred, inferred[n], held)
        elif n in inexpressible:
            _bump(cov.not_checkable, "inexpressible", held)
        else:
            _bump(cov.not_checkable, "plain", held)


def _account_gguf(inp: Input, fs: list[Finding], cov: Coverage, ranges: Ranges) -> None:
    got = inp.gguf
    if got is None:
        return
    from_grit = got.annotated
    # (a split model's shard: the companions of the model, wherever their tensor is)
    whole = got.tensors.model if got.tensors.model is not None else got.tensors
    companions = {c.scale for c in getattr(whole, "companions", {}).values()
                  if c.attached and c.scale is not None}
    for x in fs:
        if x.category is Category.INFERRED:
            x.detail.setdefault("inferred_from", GGML)
    size = got.file.size
    for t in got.file.tensors:
        start = got.file.data_start + t.offset
        n = t.nbytes
        held = max(0, min(start + n, size) - start)
        ranges[t.name] = [(t.name, start, n)]
        v = got.tensors.get(t.name)
        if t.name in from_grit:
            cov.checked += held
        elif t.name in companions:
            _bump(cov.inferred, GGML, held)
        elif v is None:
            _bump(cov.not_checkable, "unreadable", held)
        elif isinstance(v, Inexpressible):
            _bump(cov.not_checkable, "inexpressible", held)
        elif hasattr(v, "descriptor") or hasattr(v, "error"):   # GritArray / CheckFailed
            _bump(cov.inferred, GGML, held)
        else:
            _bump(cov.not_checkable, "plain", held)


#: each container's byte accounting
ACCOUNTS = {"safetensors": _account_safetensors, "gguf": _account_gguf}


def _where(spans: list[tuple[str, int, int]]) -> tuple[int, int]:
    """A tensor's byte range: all its planes when they lie back to back in
    the file, else its first (data) plane — never a range that takes in
    another tensor's bytes."""
    order = sorted(spans, key=lambda s: s[1])
    if all(a[1] + a[2] == b[1] for a, b in zip(order, order[1:])):
        return order[0][1], sum(s[2] for s in order)
    return spans[0][1], spans[0][2]


def _range(spans: list[tuple[str, int, int]]) -> dict[str, Any]:
    off, n = _where(spans)
    br: dict[str, Any] = {"offset": off, "length": n}
    if len(spans) > 1:
        br["planes"] = {s[0]: {"offset": s[1], "length": s[2]} for s in spans}
    return br


def attach_ranges(findings: Iterable[Finding], ranges: Mapping[str, Ranges]) -> None:
    """Put the byte range of each finding's tensor into its detail:
    ``byte_range`` {offset, length[, planes]} for a finding naming one
    tensor, ``byte_ranges`` {tensor: {offset, length[, planes]}} for one
    listing several (``detail.tensors``).  A range is the tensor's bytes
    when its planes lie back to back, else its data plane's; ``planes`` (a
    tensor of several planes) gives each plane's range.  Offsets are from the
    start of the file."""
    for f in findings:
        rs = ranges.get(f.file or "")
        if not rs:
            continue
        spans = rs.get(f.tensor or "")
        if spans:
            f.detail.setdefault("byte_range", _range(spans))
            continue
        names = f.detail.get("tensors")
        if isinstance(names, list):
            got = {name: _range(rs[name]) for name in names
                   if isinstance(name, str) and rs.get(name)}
            if got:
                f.detail.setdefault("byte_ranges", got)
