"""§13 ``grit scan``: check the declared numeric contract of every tensor in
safetensors and GGUF checkpoints against the bytes on disk.

:func:`scan` walks its inputs (files, directory trees, manifests), recovers or
infers a descriptor for every tensor it can, and returns a :class:`ScanReport`
of :class:`Finding` values in the five §13 categories, plus the three kinds of
input trouble §13 says must never be silent (inferred descriptors, tensors v1
cannot express, inputs that cannot be read).  Every finding carries a
severity that maps onto the graded exit codes; docs/scan.md is the reference.

Input files are opened read-only and never written.  Plane bytes are never
read for the structural checks: safetensors headers are parsed here (so a
truncated shard is measured, not rejected), GGUF files go through
``grit.load`` (a read-only memory map).  ``--deep`` maps the planes
read-only and hashes them; nothing is copied into memory as a whole.
"""
from __future__ import annotations

import json
import mmap
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from . import descriptor as D
from .boundary import check, diagnose
from .check import plane_sizes
from .errors import Detail, GritError, Status
from .fingerprint import base32_decode, base32_encode, gid as _gid
from .grade import lookup_grade, register_grade

__all__ = ["scan", "ScanReport", "Finding", "CATEGORIES", "SEVERITY", "role_of",
           "MODEL_SUFFIXES", "exit_code", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1
MODEL_SUFFIXES = (".safetensors", ".gguf")
#: manifests are recognised by suffix; any other non-model file named on the
#: command line is tried as a manifest too (docs/scan.md, "Manifests")
MANIFEST_SUFFIXES = (".json", ".txt", ".lst", ".manifest")
#: header bytes a safetensors reader accepts (the official library's limit)
MAX_ST_HEADER = 100_000_000
#: shown per finding in the human table; JSON carries every tensor
_SHOW_NAMES = 3

# category -> (title, the §13 item it implements)
CATEGORIES: dict[str, str] = {
    "structural": "1. Descriptor-vs-bytes violations (§7.3, on-disk plane lengths)",
    "cross-file": "2. Cross-file gid disagreement (same tensor name, different gid)",
    "drift": "3. Grade-drift clusters (one checkpoint, one role, several grades)",
    "escape-hatch": "4. Escape-hatch exposure (NOTE_ASSUMED, by producer tag)",
    "deep": "5. Deep checks (level-2 digest / metadata order, level-3 probes)",
    "inferred": "Inferred descriptors (ggml block types without GRIT annotations)",
    "inexpressible": "Tensors GRIT v1 cannot express",
    "unreadable": "Inputs that could not be read",
}

# the graded exit code a finding raises the report to (§13)
STRUCTURAL, DISAGREEMENT, WARNING, UNPARSED = 1, 2, 3, 4
SEVERITY = {STRUCTURAL: "structural", DISAGREEMENT: "disagreement", WARNING: "warning",
            UNPARSED: "unparsed"}


@dataclass
class Finding:
    category: str
    severity: int
    file: str | None
    tensor: str | None
    status: str
    message: str
    lines: tuple[str, ...] = ()
    detail: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = dict(self.detail)
        if self.lines:
            d.setdefault("lines", list(self.lines))
        return {"category": self.category, "severity": self.severity, "file": self.file,
                "tensor": self.tensor, "status": self.status, "message": self.message,
                "detail": d}


@dataclass
class _Tensor:
    """One GRIT tensor as scan sees it (descriptor, shape, where, how)."""

    file: str
    checkpoint: str
    name: str
    desc: D.Descriptor
    shape: tuple[int, ...]
    inferred: bool = False
    ok: bool = False                       # level 1 passed on the on-disk lengths
    planes: Any = None                     # four buffers, for --deep (lazily mapped)
    expected_digest: bytes | None = None
    gid: str | None = None
    ggml_type: str | None = None           # GGUF: the tensor's ggml block type
    file_type: int | None = None           # GGUF: the file's general.file_type


@dataclass
class _File:
    path: str
    format: str | None = None
    checkpoint: str | None = None
    parsed: bool = False
    tensors: int = 0
    grit_tensors: int = 0
    error: str | None = None

    def to_dict(self) -> dict:
        return {"path": self.path, "format": self.format, "checkpoint": self.checkpoint,
                "parsed": self.parsed, "tensors": self.tensors,
                "grit_tensors": self.grit_tensors, "error": self.error}


@dataclass
class ScanReport:
    files: list[_File]
    findings: list[Finding]
    deep: bool = False

    @property
    def parsed(self) -> int:
        return sum(f.parsed for f in self.files)

    @property
    def exit_code_graded(self) -> int:
        return exit_code(self, "graded")

    @property
    def exit_code_simple(self) -> int:
        return exit_code(self, "simple")

    def summary(self) -> dict:
        by_cat: dict[str, int] = {}
        by_sev: dict[str, int] = {}
        for f in self.findings:
            by_cat[f.category] = by_cat.get(f.category, 0) + 1
            s = SEVERITY[f.severity]
            by_sev[s] = by_sev.get(s, 0) + 1
        return {"files": len(self.files), "parsed": self.parsed,
                "tensors": sum(f.tensors for f in self.files),
                "grit_tensors": sum(f.grit_tensors for f in self.files),
                "findings": len(self.findings), "by_category": by_cat, "by_severity": by_sev,
                "deep": self.deep}

    def to_dict(self, policy: str = "graded") -> dict:
        return {"version": SCHEMA_VERSION, "exit_policy": policy,
                "exit_code": exit_code(self, policy),
                "exit_code_graded": self.exit_code_graded,
                "exit_code_simple": self.exit_code_simple,
                "files": [f.to_dict() for f in self.files],
                "findings": [f.to_dict() for f in self.findings],
                "summary": self.summary()}


def exit_code(report: ScanReport, policy: str = "graded") -> int:
    """§13: graded 0 clean / 1 structural / 2 disagreement / 3 warnings only /
    4 nothing parsed; simple 0 clean / 1 any finding / 2 nothing parsed."""
    nothing = report.parsed == 0
    if policy == "simple":
        return 2 if nothing else (1 if report.findings else 0)
    if nothing:
        return UNPARSED
    # the most severe finding wins: 1 (structural) over 2 (disagreement) over 3
    return min((f.severity for f in report.findings), default=0)


# ---------------------------------------------------------------------------
# logical roles


_SHARD = re.compile(r"^(?P<stem>.+)-\d{3,6}-of-\d{3,6}(?P<ext>\.[A-Za-z]+)$")
_INDEX = re.compile(r"^\d+$")
_SUFFIX = ("weight", "qweight", "bias")


def role_of(name: str) -> str:
    """The logical role of a tensor name: its layer indices removed.

    ``blk.3.attn_q.weight`` → ``attn_q``; ``model.layers.3.self_attn.q_proj.weight``
    → ``self_attn.q_proj``; ``blk.3.ffn_down_exps.7.weight`` → ``ffn_down_exps``.
    A name without a numeric component is its own role (``lm_head.weight`` →
    ``lm_head``)."""
    parts = name.split(".")
    idx = [i for i, p in enumerate(parts) if _INDEX.match(p)]
    rest = [p for p in (parts[idx[0] + 1:] if idx else parts) if not _INDEX.match(p)]
    if len(rest) > 1 and rest[-1] in _SUFFIX:
        rest = rest[:-1]
    return ".".join(rest) or name


def _checkpoint_of(path: str) -> str:
    """Shards ``model-00001-of-00004.safetensors`` … form one checkpoint."""
    folder, base = os.path.split(path)
    m = _SHARD.match(base)
    return os.path.join(folder, m["stem"] + m["ext"]) if m else path


# ---------------------------------------------------------------------------
# inputs


def _collect(paths: Sequence[str], findings: list[Finding], files: list[_File]) -> list[str]:
    """Model files to scan, in a stable order: each PATH as given, directory
    trees walked sorted, manifests expanded (one level)."""
    out: list[str] = []
    seen: set[str] = set()

    def add(p: str) -> None:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            out.append(p)

    def bad(p: str, why: str) -> None:
        files.append(_File(p, error=why))
        findings.append(Finding("unreadable", STRUCTURAL, p, None, "Unreadable", why))

    def walk(root: str) -> None:
        n0 = len(out)

        def onerror(e: OSError) -> None:
            bad(getattr(e, "filename", None) or root, f"cannot list directory: {e.strerror or e}")

        for folder, dirs, names in os.walk(root, onerror=onerror):
            dirs.sort()
            for n in sorted(names):
                if n.lower().endswith(MODEL_SUFFIXES):
                    add(os.path.join(folder, n))
        if len(out) == n0:
            bad(root, "no .safetensors or .gguf files under this directory")

    def one(p: str, from_manifest: str | None) -> None:
        if os.path.isdir(p):
            walk(p)
        elif not os.path.exists(p):
            bad(p, "no such file or directory" + (f" (listed in {from_manifest})"
                                                 if from_manifest else ""))
        elif p.lower().endswith(MODEL_SUFFIXES) or _sniff(p) is not None:
            add(p)
        elif from_manifest is not None:
            bad(p, f"listed in {from_manifest} but neither a model file nor a directory "
                   "(manifests do not nest)")
        else:
            try:
                listed = _read_manifest(p)
            except (OSError, ValueError) as e:
                bad(p, f"not a model file, a directory or a manifest: {e}")
                return
            if not listed:
                bad(p, "manifest lists no paths")
            for q in listed:
                one(q, p)

    for p in paths:
        one(os.fspath(p), None)
    return out


def _sniff(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            head = f.read(9)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return None
    if head[:4] == b"GGUF":
        return "gguf"
    if len(head) == 9 and head[8:9] == b"{" and 2 <= struct.unpack("<Q", head[:8])[0] <= size:
        return "safetensors"
    return None


def _read_manifest(path: str) -> list[str]:
    """A JSON list of paths, ``{"paths": [...]}``, or a text file with one path
    per line (``#`` comments, blank lines ignored).  Relative paths are
    relative to the manifest's folder."""
    with open(path, "rb") as f:
        raw = f.read(16 * 1024 * 1024 + 1)
    if len(raw) > 16 * 1024 * 1024:
        raise ValueError("manifest larger than 16 MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    if "\x00" in text:
        raise ValueError("binary content")
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise ValueError(f"invalid JSON manifest ({e})") from None
        items = doc.get("paths") if isinstance(doc, dict) else doc
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise ValueError('a JSON manifest is a list of path strings or {"paths": [...]}')
    else:
        items = [ln.strip() for ln in text.splitlines()]
        items = [ln for ln in items if ln and not ln.startswith("#")]
    base = os.path.dirname(path)
    return [x if os.path.isabs(x) else os.path.join(base, x) for x in items]


# ---------------------------------------------------------------------------
# safetensors: the header parsed here, planes measured on disk


class _Unreadable(Exception):
    pass


def _st_header(f, size: int) -> tuple[int, dict]:
    if size < 10:
        raise _Unreadable(f"safetensors: the file is {size} bytes; a header needs at least 10")
    n = struct.unpack("<Q", f.read(8))[0]
    if n < 2 or n > MAX_ST_HEADER or n > size - 8:
        raise _Unreadable(f"safetensors: header length {n} is outside [2, min({MAX_ST_HEADER}, "
                          f"file size − 8 = {size - 8})]")
    hb = f.read(n)
    try:
        h = json.loads(hb.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _Unreadable(f"safetensors: the header is not UTF-8 JSON ({e})"[:300]) from None
    if not isinstance(h, dict):
        raise _Unreadable("safetensors: the header is not a JSON object")
    return 8 + n, h


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _span(e) -> tuple[int, int] | None:
    offs = e.get("data_offsets") if isinstance(e, dict) else None
    if (isinstance(offs, list) and len(offs) == 2 and all(_is_int(x) for x in offs)
            and 0 <= offs[0] <= offs[1]):
        return offs[0], offs[1]
    return None


def _parse_digest(text) -> bytes | None:
    if not isinstance(text, str):
        return None
    t = text.strip()
    if re.fullmatch(r"[0-9a-fA-F]{32}", t):
        return bytes.fromhex(t)
    try:
        b = base32_decode(t)
    except (GritError, ValueError):
        return None
    return b if len(b) == 16 else None


def _shape_ok(shape) -> bool:
    return (isinstance(shape, list) and len(shape) <= 64
            and all(_is_int(x) and 0 <= x < 2**63 for x in shape))


#: safetensors dtype names and their element widths in bits: the names grit.load
#: reads, plus the other names the safetensors format and its writers use (FNUZ
#: eight-bit floats, E8M0, four- and six-bit floats, complex64), which the
#: recogniser reports as inexpressible rather than as a bad header
_ST_BITS = {"F64": 64, "F32": 32, "F16": 16, "BF16": 16, "I64": 64, "I32": 32, "I16": 16,
            "I8": 8, "U64": 64, "U32": 32, "U16": 16, "U8": 8, "BOOL": 8,
            "F8_E4M3": 8, "F8_E5M2": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "F8_E8M0": 8,
            "F6_E2M3": 6, "F6_E3M2": 6, "F4": 4, "C64": 64}
#: the most entries of one kind (overlaps) reported one by one per file
_MAX_OVERLAPS = 50
#: a shape whose element count exceeds this is reported without the exact product
_NUMEL_CAP = 1 << 64


def _numel(shape: Sequence[int]) -> int | None:
    """The element count of a validated shape (non-negative ints), computed with
    Python ints and bounded: None once the product passes 2^64 (a zero
    dimension anywhere still gives 0)."""
    if any(x == 0 for x in shape):
        return 0
    n = 1
    for x in shape:
        n *= x
        if n > _NUMEL_CAP:
            return None
    return n


def _entry_findings(ctx: "_Ctx", path: str, entries: dict, avail: int) -> None:
    """Validate every safetensors header entry the way grit.load does — a known
    dtype, a shape of at most 64 non-negative integers whose byte count equals
    the data_offsets span, no two entries sharing a byte — and report each
    violation as a structural finding (offsets past the file are reported by
    the caller, per tensor kind)."""
    spans: list[tuple[int, int, str]] = []
    for n, e in entries.items():
        sp = _span(e)
        if sp is None:
            continue                       # BadHeader, reported by the caller
        if sp[1] > sp[0]:
            spans.append((sp[0], sp[1], n))
        st, shape = e.get("dtype"), e.get("shape")
        bits = _ST_BITS.get(st) if isinstance(st, str) else None
        if bits is None:
            ctx.add("structural", STRUCTURAL, path, n, "BadHeader",
                    f"tensor {n!r}: unknown dtype {str(st)[:40]!r}",
                    (f"safetensors dtypes: {', '.join(_ST_BITS)}.",),
                    {"field": "dtype", "actual": str(st)[:80]})
        if not isinstance(shape, list) or len(shape) > 64 or not all(_is_int(x)
                                                                     for x in shape):
            ctx.add("structural", STRUCTURAL, path, n, "BadHeader",
                    f"tensor {n!r}: shape must be a list of at most 64 integers, got "
                    f"{str(shape)[:60]}", (), {"field": "shape"})
            continue
        neg = [i for i, x in enumerate(shape) if x < 0]
        if neg:
            ctx.add("structural", STRUCTURAL, path, n, "BadHeader",
                    f"tensor {n!r}: shape {str(shape)[:60]} has a negative dimension "
                    f"(dim {neg[0]} = {shape[neg[0]]})",
                    ("A dimension is a count of elements: it cannot be negative.",),
                    {"field": "shape", "actual": str(shape)[:80]})
            continue
        if bits is None:
            continue
        numel = _numel(shape)
        have = sp[1] - sp[0]
        dims = " × ".join(str(x) for x in shape[:8]) + (" × …" if len(shape) > 8 else "")
        if numel is None:
            ctx.add("structural", STRUCTURAL, path, n, "SizeMismatch",
                    f"tensor {n!r}: {st}{str(shape)[:60]} needs more than 2^64 elements "
                    f"of {bits} bits; data_offsets span {have} bytes",
                    (f"numel = {dims or '1'} > 2^64: no file can hold it.",),
                    {"field": "shape", "expected": None, "actual": have})
            continue
        want = (numel * bits + 7) // 8
        if want != have:
            per = (f"{bits // 8} bytes ({st})" if bits % 8 == 0
                   else f"{bits} bits ({st}), rounded up to whole bytes")
            ctx.add("structural", STRUCTURAL, path, n, "SizeMismatch",
                    f"tensor {n!r}: {st}{str(shape)[:60]} needs {want} bytes; data_offsets "
                    f"[{sp[0]}, {sp[1]}) span {have}",
                    (f"numel = {dims or '1'}" + (f" = {numel}" if len(shape) > 1 else "")
                     + f", × {per} = {want} bytes ≠ {have}.",),
                    {"field": "data_offsets", "expected": want, "actual": have})
    spans.sort()
    reported = 0
    hold: tuple[int, int, str] | None = None   # the span reaching furthest so far
    for b, e, n in spans:
        if hold is not None and b < hold[1]:
            reported += 1
            if reported <= _MAX_OVERLAPS:
                hb, he, hn = hold
                ctx.add("structural", STRUCTURAL, path, n, "Overlap",
                        f"tensors {hn!r} [{hb}, {he}) and {n!r} [{b}, {e}) overlap "
                        f"({min(he, e) - b} shared bytes)",
                        ("Every byte of the data buffer belongs to at most one tensor.",),
                        {"field": "data_offsets", "tensors": [hn, n]})
        if hold is None or e > hold[1]:
            hold = (b, e, n)
    if reported > _MAX_OVERLAPS:
        ctx.add("structural", STRUCTURAL, path, None, "Overlap",
                f"{reported - _MAX_OVERLAPS} more overlapping data_offsets not listed",
                (), {"field": "data_offsets", "count": reported})


class _Ctx:
    """Per-scan accumulators shared by the readers."""

    def __init__(self, deep: bool):
        self.deep = deep
        self.tensors: list[_Tensor] = []
        self.findings: list[Finding] = []

    def add(self, *a, **kw) -> None:
        self.findings.append(Finding(*a, **kw))


def _structural(ctx: _Ctx, path: str, name: str, det: Detail, extra: Sequence[str] = ()) -> None:
    lines = tuple(det.lines) + tuple(extra)
    ctx.add("structural", STRUCTURAL, path, name, det.status.spec_name, det.message, lines,
            {k: v for k, v in det.to_dict().items() if k not in ("message", "lines")})


def _register_carried(ctx: _Ctx, path: str, doc: dict) -> None:
    from .placement.expr import register_layout
    for g in doc.get("grades", []) if isinstance(doc.get("grades"), list) else []:
        try:
            register_grade(g)
        except (GritError, TypeError, ValueError) as e:
            ctx.add("structural", STRUCTURAL, path, None, "GradeUnknown",
                    f"the file carries a grade string that does not parse: {g!r:.80}",
                    (str(e).splitlines()[0],))
    lay = doc.get("layouts")
    for v in lay.values() if isinstance(lay, dict) else []:
        try:
            register_layout(v)
        except (GritError, TypeError, ValueError):
            pass                      # an unknown word is step 3's to report


def _scan_safetensors(ctx: _Ctx, rec: _File) -> None:
    path = rec.path
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        start, h = _st_header(f, size)
        avail = size - start
        meta = h.get("__metadata__") or {}
        if not isinstance(meta, dict):
            raise _Unreadable("safetensors: __metadata__ is not an object")
        entries = {k: v for k, v in h.items() if k != "__metadata__"}
        rec.parsed = True
        rec.format = "safetensors"
        mm = None
        if ctx.deep and size > start:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    buf = memoryview(mm)[start:] if mm is not None else None
    truncated = [(n, s) for n, s in ((n, _span(e)) for n, e in entries.items())
                 if s is not None and s[1] > avail]
    trunc_line = ()
    if truncated:
        end = max(s[1] for _, s in truncated)
        trunc_line = (f"The file holds {avail} data bytes; its header places tensors up to byte "
                      f"{end}: the shard is truncated ({end - avail} bytes missing).",)

    def on_disk(tn) -> tuple[int, Any]:
        s = _span(entries.get(tn)) if isinstance(tn, str) else None
        if s is None:
            return 0, b""
        b, e = min(s[0], avail), min(s[1], avail)
        return e - b, (buf[b:e] if buf is not None else None)

    digests = {k[len("grit.digest."):]: v for k, v in meta.items()
               if isinstance(k, str) and k.startswith("grit.digest.")}
    doc = None
    if "__grit__" in meta:
        try:
            doc = json.loads(meta["__grit__"])
        except (TypeError, ValueError, RecursionError) as e:
            ctx.add("structural", STRUCTURAL, path, None, "Unreadable",
                    f"the __grit__ metadata is not JSON ({e})"[:300])
    claimed: set[str] = set()
    grit_names: list[tuple[str, Any, Any, list[tuple[int, Any]] | None,
                           tuple[int, Any] | None]] = []
    if isinstance(doc, dict) and doc.get("schema") == "grit-safetensors":
        _register_carried(ctx, path, doc)
        tensors = doc.get("tensors") if isinstance(doc.get("tensors"), dict) else {}
        for name, t in tensors.items():
            if not isinstance(t, dict):
                continue
            g = t.get("grade")
            if isinstance(g, str):
                try:
                    register_grade(g)
                except (GritError, ValueError):
                    pass
            planes = t.get("planes") if isinstance(t.get("planes"), dict) else {}
            sizes = []
            for role in ("data", "scale0", "scale1", "aux"):
                tn = planes.get(role)
                if isinstance(tn, str):
                    claimed.add(tn)
                sizes.append(on_disk(tn) if tn is not None else (0, b""))
            grit_names.append((name, t.get("desc"), t.get("shape"), sizes, None))
    elif isinstance(doc, dict):          # descriptor map: {tensor: desc hex}
        for name, desc in doc.items():
            if name == "schema":
                continue
            claimed.add(name)
            e = entries.get(name)
            shape = e.get("shape") if isinstance(e, dict) else None
            if e is None:
                ctx.add("structural", STRUCTURAL, path, name, "SizeMismatch",
                        f"__grit__ gives a descriptor for tensor {name!r}, which the file lacks")
                continue
            grit_names.append((name, desc, shape, None, on_disk(name)))
    recognised: list = []
    if doc is None:                    # no GRIT metadata: recognise the wild (grit.io.recognise)
        recognised = _recognise(path, entries, meta, start, avail, on_disk)
        for r in recognised:
            if r.kind == "inferred":
                claimed.update(p[1] for p in r.planes if p is not None and p[0] != "const")
    _entry_findings(ctx, path, entries, avail)
    for n, e in entries.items():
        if n in claimed:
            continue                   # GRIT planes: measured by the size equations below
        sp = _span(e)
        if sp is None:
            ctx.add("structural", STRUCTURAL, path, n, "BadHeader",
                    f"tensor {n!r}: the header entry has no valid data_offsets "
                    f"({str(e)[:80]})")
        elif sp[1] > avail:
            ctx.add("structural", STRUCTURAL, path, n, "Truncated",
                    f"tensor {n!r}: data_offsets [{sp[0]}, {sp[1]}) run past the {avail}-byte "
                    "data buffer", trunc_line)
    n_inf = sum(r.kind == "inferred" for r in recognised)
    rec.tensors = len([n for n in entries if n not in claimed]) + len(grit_names) + n_inf
    rec.grit_tensors = len(grit_names) + n_inf
    ckpt = rec.checkpoint
    for name, desc, shape, sizes, payload in grit_names:
        try:
            d = D.Descriptor.from_hex(desc) if isinstance(desc, str) else None
        except GritError:
            d = None
        if d is None or not _shape_ok(shape):
            ctx.add("structural", STRUCTURAL, path, name, "GradeUnknown",
                    f"tensor {name!r}: the recorded descriptor or shape cannot be read "
                    f"(desc {str(desc)[:24]!r}…, shape {str(shape)[:40]})")
            continue
        shape = tuple(shape)
        t = _Tensor(path, ckpt, name, d, shape)
        if payload is not None:
            det, planes = _payload_check(d, shape, *payload)
        else:
            det = diagnose(d, shape, [n for n, _ in sizes], level=1)
            planes = [v for _, v in sizes]
        if det.status != Status.OK:
            _structural(ctx, path, name, det, trunc_line if det.status == Status.SIZE_MISMATCH
                        else ())
        else:
            t.ok = True
            t.planes = planes if buf is not None else None
        if name in digests:
            t.expected_digest = _parse_digest(digests[name])
            if t.expected_digest is None:
                ctx.add("structural", STRUCTURAL, path, name, "DigestMismatch",
                        f"metadata grit.digest.{name} is not a 16-byte digest "
                        "(26 base32 or 32 hex digits)")
        _finish(ctx, t)
    _recognised_findings(ctx, path, ckpt, recognised, on_disk, trunc_line)


# numpy dtypes of the small tensors a recogniser may read (g_idx, global scales)
_SMALL_DTYPES = {"F32": "<f4", "F16": "<f2", "I32": "<i4", "I64": "<i8", "U8": "u1",
                 "I8": "i1"}
_SMALL_MAX = 1 << 20


def _load_config(path: str) -> dict | None:
    cfg = os.path.join(os.path.dirname(path), "config.json")
    try:
        if not os.path.isfile(cfg) or os.path.getsize(cfg) > 16 * 1024 * 1024:
            return None
        with open(cfg, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _recognise(path: str, entries: dict, meta: dict, start: int, avail: int, on_disk) -> list:
    """Run grit.io.recognise over a safetensors header without GRIT metadata."""
    from .io.recognise import recognise
    header = {}
    for n, e in entries.items():
        if (isinstance(e, dict) and isinstance(e.get("dtype"), str)
                and _shape_ok(e.get("shape")) and _span(e) is not None):
            header[n] = (e["dtype"], tuple(e["shape"]), on_disk(n)[0])

    def read(tn: str):
        import numpy as np
        e = entries.get(tn)
        sp = _span(e)
        dt = _SMALL_DTYPES.get(e.get("dtype")) if isinstance(e, dict) else None
        if sp is None or dt is None or sp[1] > avail or sp[1] - sp[0] > _SMALL_MAX:
            return None
        with open(path, "rb") as f:
            f.seek(start + sp[0])
            b = f.read(sp[1] - sp[0])
        if len(b) % np.dtype(dt).itemsize:
            return None
        return np.frombuffer(b, dt)

    try:
        return recognise(header, meta, _load_config(path), read)
    except (GritError, ValueError, KeyError, IndexError, TypeError, OverflowError) as e:
        from .io.recognise import Recognised
        return [Recognised(os.path.basename(path), "unrecognised", "inexpressible",
                           section="§13", reason=f"the recogniser failed: {_why(e)}")]


def _recognised_findings(ctx: _Ctx, path: str, ckpt, recognised: list, on_disk,
                         trunc_line) -> None:
    inferred: dict[tuple[str, str], list] = {}
    inexpr: dict[tuple, list] = {}
    for r in recognised:
        if r.kind == "inferred":
            sizes = r.plane_lengths(lambda tn: on_disk(tn)[0])
            det = diagnose(r.descriptor, r.shape, sizes, level=1)
            t = _Tensor(path, ckpt, r.name, r.descriptor, tuple(r.shape), inferred=True)
            if det.status != Status.OK:
                _structural(ctx, path, r.name, det,
                            (f"descriptor inferred from {r.convention}: grade {r.grade}",)
                            + (trunc_line if det.status == Status.SIZE_MISMATCH else ()))
            else:
                t.ok = True
                if ctx.deep:
                    t.planes = _inferred_planes(ctx, path, r, on_disk)
            _finish(ctx, t)
            inferred.setdefault((r.convention, r.grade), []).append(r)
        else:
            inexpr.setdefault((r.convention, r.section, r.reason, r.lines), []).append(r)
    for (conv, grade), rs in sorted(inferred.items()):
        names = [r.name for r in rs]
        notes: list[str] = []
        for r in rs:
            for n in r.notes:
                if n not in notes:
                    notes.append(n)
        lines = (f"grade {grade}",) + rs[0].lines + tuple(notes[:4]) + (
            (f"… {len(notes) - 4} more notes in detail.notes",) if len(notes) > 4 else ())
        ctx.add("inferred", WARNING, path, _names(names), "Inferred",
                f"{len(names)} {conv} tensor(s): descriptor inferred from the tensor layout "
                "(no GRIT metadata in the file)", lines,
                {"convention": conv, "grade": grade, "tensors": names,
                 "planes": {r.name: [None if p is None else list(p) for p in r.planes]
                            for r in rs},
                 "notes": {r.name: list(r.notes) for r in rs if r.notes}})
    for (conv, section, reason, lines), rs in sorted(inexpr.items(),
                                                     key=lambda kv: (kv[0][0], kv[0][1] or "",
                                                                     kv[0][2] or "")):
        names = [r.name for r in rs]
        ctx.add("inexpressible", WARNING, path, _names(names), "Inexpressible",
                f"{len(names)} {conv} tensor(s) are not GRIT v1 arrays and were not checked",
                (f"Reason ({section}): {reason}",) + tuple(lines),
                {"convention": conv, "section": section, "reason": reason,
                 "arithmetic": list(lines), "tensors": names,
                 "files": sorted({t for r in rs for t in r.tensors})})


def _inferred_planes(ctx: _Ctx, path: str, r, on_disk) -> list | None:
    """--deep: the planes of an inferred tensor, through ``r.array`` on views
    of the file's read-only map (converted and synthesised planes are built,
    file-backed ones are not copied); None, with a finding, where it fails."""
    def view(tn: str):
        v = on_disk(tn)[1]
        return v if v is not None else b""
    try:
        return list(r.array(path, view).planes)
    except GritError as e:
        det = e.detail
        if det is None:
            ctx.add("deep", WARNING, path, r.name, "ProbeSkipped", str(e).splitlines()[0])
        else:
            ctx.add("deep", STRUCTURAL, path, r.name, det.status.spec_name, det.message,
                    tuple(det.lines),
                    {k: v for k, v in det.to_dict().items() if k not in ("message", "lines")})
    except (ValueError, TypeError, IndexError, KeyError, MemoryError, OverflowError) as e:
        ctx.add("deep", WARNING, path, r.name, "ProbeSkipped",
                f"level-3 probes could not run: {type(e).__name__}: {e}"[:300])
    return None


def _payload_check(d, shape, n: int, view) -> tuple[Detail, list | None]:
    ps = plane_sizes(d, shape)
    if isinstance(ps, Detail):
        det = diagnose(d, shape, [0, 0, 0, 0], level=1)
        return (det if det.status != Status.OK else ps), None
    det = diagnose(d, shape, list(ps.sizes), level=1)
    if det.status != Status.OK:
        return det, None
    total = sum(ps.sizes)
    if n != total:
        return Detail(
            status=Status.SIZE_MISMATCH, step=4, field="payload", expected=total, actual=n,
            message=(f"SizeMismatch: payload is {n} bytes; descriptor and shape require "
                     f"{total} (= {' + '.join(map(str, ps.sizes))}, data ‖ scale0 ‖ scale1 ‖ "
                     "aux)."),
            lines=("A concatenated payload is split by the §7.3 size equations; every plane "
                   "length must match exactly.",)), None
    planes, off = [], 0
    for k in ps.sizes:
        planes.append(view[off:off + k] if (view is not None and k) else b"")
        off += k
    return det, planes


def _finish(ctx: _Ctx, t: _Tensor) -> None:
    g = lookup_grade(t.desc.grade_id)
    if g is not None:
        try:
            t.gid = base32_encode(_gid(g.canonical, t.desc.to_bytes(), t.shape))
        except GritError:
            t.gid = None
    ctx.tensors.append(t)


# ---------------------------------------------------------------------------
# GGUF: through grit.load (gguf-py's read-only memmap)


def _scan_gguf(ctx: _Ctx, rec: _File) -> None:
    from .array import GritArray
    from .io import load
    path = rec.path
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise _Unreadable("GGUF: bad magic")
    try:
        tensors = load(path)
    except GritError as e:
        det = getattr(e, "detail", None)
        if det is not None and det.status != Status.OK:
            # the container parsed; one annotated tensor failed its level-1 check
            rec.parsed, rec.format = True, "gguf"
            m = re.match(r"tensor '([^']*)'", str(e))
            _structural(ctx, path, m[1] if m else None, det)
            return
        raise _Unreadable(str(e).splitlines()[0]) from None
    rec.parsed, rec.format = True, "gguf"
    types = getattr(tensors, "ggml_types", {}) or {}
    file_type, digests = _gguf_fields(path, ctx.deep)
    rec.tensors = len(tensors)
    inferred: dict[str, list[str]] = {}
    inexpr: dict[tuple[str, str], list[str]] = {}
    for name, v in tensors.items():
        if isinstance(v, GritArray):
            rec.grit_tensors += 1
            gt = types.get(name, "")
            t = _Tensor(path, rec.checkpoint, name, v.descriptor, tuple(v.shape),
                        inferred=gt not in ("I8", "U8", ""), ok=True,
                        planes=v.planes if ctx.deep else None,
                        ggml_type=gt or None, file_type=file_type)
            if t.inferred:
                inferred.setdefault(gt, []).append(name)
            if name in digests:
                t.expected_digest = _parse_digest(digests[name])
            _finish(ctx, t)
        elif isinstance(getattr(v, "error", None), GritError):
            # a GRIT-annotated tensor that failed its level-1 check (CheckFailed)
            det = v.error.detail
            if det is not None:
                _structural(ctx, path, name, det)
            else:
                ctx.add("structural", STRUCTURAL, path, name, "Unreadable",
                        str(v.error).splitlines()[0])
        elif hasattr(v, "reason"):
            inexpr.setdefault((getattr(v, "ggml_type", "?"), v.reason), []).append(name)
    for gt, names in sorted(inferred.items()):
        g = lookup_grade(tensors[names[0]].descriptor.grade_id)
        ctx.add("inferred", WARNING, path, _names(names), "Inferred",
                f"{len(names)} {gt} tensor(s): descriptor inferred from the ggml block type "
                "(no GRIT annotation in the file)",
                (f"grade {g.canonical if g else '?'}",),
                {"ggml_type": gt, "tensors": names,
                 "grade": g.canonical if g else None})
    for (gt, reason), names in sorted(inexpr.items()):
        ctx.add("inexpressible", WARNING, path, _names(names), "Inexpressible",
                f"{len(names)} {gt} tensor(s) are not GRIT v1 arrays and were not checked",
                (f"Reason: {reason}",), {"ggml_type": gt, "reason": reason, "tensors": names})


def _gguf_fields(path: str, digests: bool) -> tuple[int | None, dict[str, str]]:
    """``general.file_type`` (a llama_ftype, or None) and, when ``digests``, the
    ``grit.digest.<tensor>`` entries."""
    try:
        import gguf
        r = gguf.GGUFReader(path, "r")
    except Exception:  # noqa: BLE001 - the file already parsed once; both are optional
        return None, {}
    ft = None
    try:
        f = r.fields.get("general.file_type")
        v = f.contents() if f is not None else None
        ft = int(v) if hasattr(v, "__index__") and not isinstance(v, bool) else None
    except Exception:  # noqa: BLE001 - a malformed KV entry: no recipe
        ft = None
    out: dict[str, str] = {}
    if digests:
        try:
            for k, f in r.fields.items():
                if k.startswith("grit.digest."):
                    out[k[len("grit.digest."):]] = f.contents()
        except Exception:  # noqa: BLE001
            out = {}
    return ft, out


def _why(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}"[:300]


def _names(names: Sequence[str]) -> str:
    if len(names) == 1:
        return names[0]
    shown = ", ".join(names[:_SHOW_NAMES])
    return f"{len(names)} tensors: {shown}" + (", …" if len(names) > _SHOW_NAMES else "")


# ---------------------------------------------------------------------------
# the cross-tensor analyses


def _cross_file(ctx: _Ctx) -> None:
    from .explain import diff, render, to_dict
    by_name: dict[str, list[_Tensor]] = {}
    for t in ctx.tensors:
        if t.gid is not None:
            by_name.setdefault(t.name, []).append(t)
    for name in sorted(by_name):
        ts = by_name[name]
        if len({t.file for t in ts}) < 2 or len({t.gid for t in ts}) < 2:
            continue
        ref = ts[0]
        done: set[str] = {ref.gid}
        for t in ts[1:]:
            if t.gid in done:
                continue
            done.add(t.gid)
            ga, gb = lookup_grade(ref.desc.grade_id), lookup_grade(t.desc.grade_id)
            try:
                ex = diff((ref.desc, ga, ref.shape, f"{ref.file}:{name}"),
                          (t.desc, gb, t.shape, f"{t.file}:{name}"))
            except GritError as e:
                ctx.add("cross-file", DISAGREEMENT, t.file, name, "GidMismatch",
                        f"tensor {name!r} has gid {t.gid} here and {ref.gid} in {ref.file}",
                        (f"(no field diff: {str(e).splitlines()[0]})",),
                        {"a": {"file": ref.file, "gid": ref.gid},
                         "b": {"file": t.file, "gid": t.gid}})
                continue
            lines = [f"A {ref.file}  gid {ref.gid}", f"B {t.file}  gid {t.gid}"]
            # the gids are on the A/B lines; the canonical strings repeat the grade keys
            lines += [fd.line() for fd in ex.differences if fd.field not in ("gid", "canonical")]
            verdict = getattr(ex, "verdict", None)
            if verdict:
                lines.append(f"verdict: {verdict}")
            ctx.add("cross-file", DISAGREEMENT, t.file, name, "GidMismatch",
                    f"tensor {name!r} has gid {t.gid} here and {ref.gid} in {ref.file}",
                    tuple(lines),
                    {"a": {"file": ref.file, "gid": ref.gid},
                     "b": {"file": t.file, "gid": t.gid},
                     "explain": to_dict(ex), "explain_text": render(ex, color=False)})


def _grade_label(gid_: int) -> str:
    g = lookup_grade(gid_)
    if g is None:
        return f"0x{gid_:016X}"
    return g.name or g.canonical


#: llama.cpp's mixed quantisation recipes (llama_ftype, the GGUF general.file_type;
#: gguf.LlamaFileType): name, the ggml types the recipe assigns, and what it mixes.
#: Every K-quant falls back to a legacy type of the same width when a row is not a
#: multiple of 256 (Q2_K/Q3_K → IQ4_NL, Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0), so
#: the fallbacks belong to the recipe too.
_FALLBACK = {"Q2_K": "IQ4_NL", "Q3_K": "IQ4_NL", "Q4_K": "Q5_0", "Q5_K": "Q5_1",
             "Q6_K": "Q8_0"}


def _recipe(name: str, ktypes: Sequence[str], mix: str) -> tuple[str, frozenset, str]:
    return name, frozenset(ktypes) | {_FALLBACK[k] for k in ktypes}, mix


_RECIPES: dict[int, tuple[str, frozenset, str]] = {
    10: _recipe("Q2_K", ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"),
                "Q2_K with Q3_K/Q4_K/Q5_K for attn_v/ffn_down/attn_output and Q6_K for output"),
    11: _recipe("Q3_K_S", ("Q3_K", "Q4_K", "Q5_K", "Q6_K"),
                "Q3_K with Q4_K/Q5_K for some layers and Q6_K for output"),
    12: _recipe("Q3_K_M", ("Q3_K", "Q4_K", "Q5_K", "Q6_K"),
                "Q3_K with Q4_K/Q5_K for attn_v/ffn_down/attn_output and Q6_K for output"),
    13: _recipe("Q3_K_L", ("Q3_K", "Q4_K", "Q5_K", "Q6_K"),
                "Q3_K with Q5_K for attn_v/ffn_down/attn_output and Q6_K for output"),
    14: _recipe("Q4_K_S", ("Q4_K", "Q5_K", "Q6_K"),
                "Q4_K with Q5_K for the first attn_v/ffn_down layers and Q6_K for output"),
    15: _recipe("Q4_K_M", ("Q4_K", "Q5_K", "Q6_K"),
                "Q4_K with Q6_K for half of the attn_v/ffn_down layers (Q5_0/Q8_0 where a row "
                "is not a multiple of 256)"),
    16: _recipe("Q5_K_S", ("Q5_K", "Q6_K"), "Q5_K with Q6_K for output"),
    17: _recipe("Q5_K_M", ("Q5_K", "Q6_K"),
                "Q5_K with Q6_K for half of the attn_v/ffn_down layers"),
    18: _recipe("Q6_K", ("Q6_K",), "Q6_K (Q8_0 where a row is not a multiple of 256)"),
}


def _by_design(ts: Sequence[_Tensor]) -> tuple[str, frozenset, str] | None:
    """The llama.cpp recipe that explains a role's grade mix: every tensor comes
    from a GGUF declaring the same known mixed file_type, and every ggml type
    is one that recipe assigns.  None otherwise."""
    fts = {t.file_type for t in ts}
    if len(fts) != 1:
        return None
    r = _RECIPES.get(next(iter(fts)))      # type: ignore[arg-type]
    if r is None or not all(t.ggml_type in r[1] for t in ts):
        return None
    return r


def _drift(ctx: _Ctx) -> None:
    by_ckpt: dict[str, list[_Tensor]] = {}
    for t in ctx.tensors:
        by_ckpt.setdefault(t.checkpoint, []).append(t)
    for ckpt in sorted(by_ckpt):
        roles: dict[str, dict[int, list[_Tensor]]] = {}
        for t in by_ckpt[ckpt]:
            roles.setdefault(role_of(t.name), {}).setdefault(t.desc.grade_id, []).append(t)
        single: dict[int, list[str]] = {}
        for role in sorted(roles):
            grades = roles[role]
            if len(grades) == 1:
                single.setdefault(next(iter(grades)), []).append(role)
                continue
            parts = sorted(grades.items(), key=lambda kv: (-len(kv[1]), kv[0]))
            lines = tuple(f"{_grade_label(g)} (0x{g:016X}): {len(ts)} × "
                          + _names([t.name for t in ts]).split(": ", 1)[-1]
                          for g, ts in parts)
            files = sorted({t.file for ts in grades.values() for t in ts})
            recipe = _by_design([t for ts in grades.values() for t in ts])
            detail = {"scope": "role", "checkpoint": ckpt, "role": role,
                      "grades": {f"0x{g:016X}": {"grade": _grade_label(g),
                                                  "tensors": [t.name for t in ts]}
                                 for g, ts in parts}}
            if recipe is None:
                ctx.add("drift", DISAGREEMENT, files[0] if len(files) == 1 else ckpt, role,
                        "RoleDrift",
                        f"role {role!r} carries {len(grades)} grades in one checkpoint "
                        "(half-converted?)", lines, detail)
                continue
            name, _, mix = recipe
            used = sorted({t.ggml_type for ts in grades.values() for t in ts})
            detail["recipe"] = {"file_type": next(iter({t.file_type for ts in grades.values()
                                                        for t in ts})),
                                "name": name, "ggml_types": used}
            ctx.add("drift", WARNING, files[0] if len(files) == 1 else ckpt, role,
                    "RoleDrift",
                    f"role {role!r} carries {len(grades)} grades ({'/'.join(used)}): mixed by "
                    f"design: llama.cpp {name} mixes {mix}",
                    lines + (f"general.file_type = {detail['recipe']['file_type']} "
                             f"(MOSTLY_{name}); every ggml type here is one the recipe "
                             "assigns.",), detail)
        if len(single) > 1:
            lines = tuple(f"{_grade_label(g)}: " + ", ".join(rs[:6]) + (", …" if len(rs) > 6
                                                                        else "")
                          for g, rs in sorted(single.items(), key=lambda kv: -len(kv[1])))
            files = sorted({t.file for t in by_ckpt[ckpt]})
            ctx.add("drift", WARNING, files[0] if len(files) == 1 else ckpt, None,
                    "ArtifactDrift",
                    f"{len(single)} grades across roles in one checkpoint (mixed precision "
                    "by role)", lines,
                    {"scope": "artifact", "checkpoint": ckpt,
                     "grades": {f"0x{g:016X}": {"grade": _grade_label(g), "roles": rs}
                                for g, rs in single.items()}})


def _escape_hatch(ctx: _Ctx) -> None:
    groups: dict[tuple[int, str], list[_Tensor]] = {}
    for t in ctx.tensors:
        if t.desc.note & D.NOTE_ASSUMED:
            groups.setdefault((t.desc.producer, t.file), []).append(t)
    for (prod, path), ts in sorted(groups.items()):
        names = [t.name for t in ts]
        ctx.add("escape-hatch", WARNING, path, _names(names), "Assumed",
                f"producer tag {prod} (0x{prod:02X}): {len(ts)} tensor(s) carry NOTE_ASSUMED — "
                "a placement was asserted with assume_placement, not verified",
                ("Fix: grit.verify_placement(x, p) reads the bytes, proves the claim and clears "
                 "the flag.",),
                {"producer": prod, "tensors": names})


def _deep(ctx: _Ctx, tensors: Sequence[_Tensor]) -> None:
    for t in tensors:
        planes, t.planes = t.planes, None      # release the file's map once checked
        if not t.ok or planes is None:
            continue
        try:
            rep = check(t.desc, t.shape, list(planes), level=3,
                        expected_digest=t.expected_digest)
        except GritError as e:
            det = e.detail
            if det is None:
                ctx.add("deep", WARNING, t.file, t.name, "ProbeSkipped", str(e).splitlines()[0])
                continue
            ctx.add("deep", STRUCTURAL, t.file, t.name, det.status.spec_name, det.message,
                    tuple(det.lines),
                    {k: v for k, v in det.to_dict().items() if k not in ("message", "lines")})
            continue
        except (ValueError, TypeError, IndexError, MemoryError, OverflowError) as e:
            ctx.add("deep", WARNING, t.file, t.name, "ProbeSkipped",
                    f"level-3 probes could not run: {type(e).__name__}: {e}"[:300])
            continue
        for w in rep.warnings:
            ctx.add("deep", WARNING, t.file, t.name, "Probe", w)


# ---------------------------------------------------------------------------


def scan(paths: Iterable[str], *, deep: bool = False,
         progress: Callable[[int, int, str], None] | None = None) -> ScanReport:
    """Scan ``paths`` (files, directories, manifests); never raises for bad
    input — every problem is a finding."""
    ctx = _Ctx(deep)
    files: list[_File] = []
    model_files = _collect(list(paths), ctx.findings, files)
    for i, p in enumerate(model_files):
        if progress is not None:
            progress(i, len(model_files), p)
        rec = _File(p, checkpoint=_checkpoint_of(p))
        files.append(rec)
        sniffed = _sniff(p)
        by_suffix = ("gguf" if p.lower().endswith(".gguf") else
                     "safetensors" if p.lower().endswith(".safetensors") else None)
        kind = sniffed or by_suffix or "safetensors"
        rec.format = kind
        if sniffed is not None and by_suffix is not None and sniffed != by_suffix:
            ctx.add("structural", WARNING, p, None, "SuffixMismatch",
                    f"the file is named .{by_suffix} but its content is {sniffed}; "
                    f"it was scanned as {sniffed}",
                    ("GGUF files begin with the magic 'GGUF'; safetensors files with an "
                     "8-byte header length followed by '{'. A reader that trusts the suffix "
                     "will reject this file.",),
                    {"suffix": by_suffix, "content": sniffed})
        first = len(ctx.tensors)
        try:
            (_scan_gguf if kind == "gguf" else _scan_safetensors)(ctx, rec)
            if deep:      # file by file, so that one file's planes are mapped at a time
                _deep(ctx, ctx.tensors[first:])
        except _Unreadable as e:
            rec.error = str(e)
        except (GritError, OSError, ValueError, KeyError, IndexError, TypeError, struct.error,
                OverflowError, MemoryError, RecursionError, AttributeError) as e:
            rec.error = _why(e)
        except Exception as e:  # noqa: BLE001 - a third-party reader on a hostile file
            # (gguf-py raises whatever numpy raises); a finding, never a traceback
            rec.error = _why(e)
        if rec.error:
            ctx.add("unreadable", STRUCTURAL, p, None, "Unreadable",
                    f"could not read as {kind}: {rec.error}")
    if progress is not None:
        progress(len(model_files), len(model_files), "")
    _cross_file(ctx)
    _drift(ctx)
    _escape_hatch(ctx)
    findings = ctx.findings
    if not any(f.parsed for f in files):
        for f in findings:
            if f.category == "unreadable":
                f.severity = UNPARSED
    order = list(CATEGORIES)
    findings.sort(key=lambda f: (order.index(f.category), f.severity, f.file or "",
                                 f.tensor or ""))
    files.sort(key=lambda f: f.path)
    return ScanReport(files, findings, deep)
