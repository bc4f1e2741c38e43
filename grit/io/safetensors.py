"""safetensors files: GRIT arrays as byte planes beside ordinary tensors.

``save(path, tensors, metadata=None)`` writes a file that the official
``safetensors`` library loads unchanged: every present plane of a
:class:`~grit.array.GritArray` is a one-dimensional ``U8`` tensor named
``<name>.grit.<role>`` (role ∈ data, scale0, scale1, aux), ordinary numpy
arrays are ordinary tensors, and what makes the planes a GRIT array — the
descriptor, the logical shape, the canonical grade strings and the layout
expressions of class-0x8/0xF placement words — is one JSON document under
the ``__metadata__`` key ``__grit__`` (schema ``grit-safetensors``,
version 1).  The format is specified in docs/file-format.md.

``load(path)`` parses the header itself (it trusts nothing in it), maps the
file read-only and returns zero-copy views: a GritArray for every GRIT
tensor, a read-only ndarray for every other tensor.  It reads both this
schema and the *descriptor map* convention, in which ``__grit__`` is a JSON
object ``{tensor name: 128-hex descriptor}`` and the named tensor's bytes are
the concatenated payload data ‖ scale0 ‖ scale1 ‖ aux (§3.6) under its
logical shape.
"""
from __future__ import annotations

import json
import mmap
import os
import re
import struct
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np

from .._files import atomic_write
from .. import descriptor as D
from ..errors import GritError, GritUsageError

__all__ = ["save", "load", "SafetensorsTensors", "CheckFailed", "GritFileError",
           "SCHEMA", "VERSION", "GRIT_KEY", "ROLES", "plane_tensor_name", "is_safetensors"]

SCHEMA = "grit-safetensors"
VERSION = 1
GRIT_KEY = "__grit__"
META_KEY = "__metadata__"
ROLES = ("data", "scale0", "scale1", "aux")

#: the largest header this reader parses (the official library's own limit)
MAX_HEADER = 100_000_000
#: the deepest rank a header entry may declare
MAX_RANK = 64

_HEX_DESC = re.compile(r"[0-9a-fA-F]{128}\Z")
_WORD_KEY = re.compile(r"0x[0-9a-f]{16}\Z")


class GritFileError(GritUsageError):
    """A file is not a well-formed container (header, offsets, dtypes, the
    ``__grit__`` document).  A GritUsageError, as for an unreadable GGUF."""


def plane_tensor_name(name: str, role: str) -> str:
    """The safetensors tensor name holding plane ``role`` of GRIT tensor ``name``."""
    return f"{name}.grit.{role}"


# ---------------------------------------------------------------------------
# dtypes

_ST_DTYPES: dict[str, Any] = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"), "U64": np.dtype("<u8"), "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"), "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
# names whose numpy type comes from ml_dtypes (itemsize known without it)
_ML_DTYPES = {"BF16": ("bfloat16", 2), "F8_E4M3": ("float8_e4m3fn", 1),
              "F8_E5M2": ("float8_e5m2", 1)}


def _itemsize(st: str) -> int:
    if st in _ST_DTYPES:
        return _ST_DTYPES[st].itemsize
    return _ML_DTYPES[st][1]


def _ml(name: str):
    try:
        import ml_dtypes  # noqa: PLC0415
    except ImportError:
        return None
    return np.dtype(getattr(ml_dtypes, name))


def _st_dtype_of(arr: np.ndarray, name: str) -> str:
    dt = arr.dtype
    for st, want in _ST_DTYPES.items():
        if dt.kind == want.kind and dt.itemsize == want.itemsize and dt.kind in "fiub":
            return st
    for st, (mlname, _) in _ML_DTYPES.items():
        if dt.name == mlname:
            return st
    raise GritUsageError(f"tensor {name!r}: dtype {dt} has no safetensors dtype "
                         f"(supported: {', '.join(list(_ST_DTYPES) + list(_ML_DTYPES))})")


# ---------------------------------------------------------------------------
# save


def _grit_doc(arrays: Mapping[str, Any]) -> dict:
    from ..placement.expr import resolve_layout
    from ..placement.words import CLASS_HASHED, CLASS_OPAQUE, placement_class
    tensors: dict[str, Any] = {}
    grades: list[str] = []
    layouts: dict[str, str] = {}
    for name, a in arrays.items():
        d = a.descriptor
        g = a.grade.canonical
        if g not in grades:
            grades.append(g)
        planes = {role: plane_tensor_name(name, role)
                  for role, n in zip(ROLES, a.plane_bytes) if n}
        tensors[name] = {"desc": d.hex(), "shape": list(a.shape), "grade": g,
                         "gid": a.gid_base32, "planes": planes}
        for w in d.placements:
            if placement_class(w) in (CLASS_HASHED, CLASS_OPAQUE):
                e = resolve_layout(w)
                if e is not None:
                    layouts[f"0x{w:016x}"] = str(e)
    return {"schema": SCHEMA, "version": VERSION, "tensors": tensors, "grades": grades,
            "layouts": dict(sorted(layouts.items()))}


def _check_name(name) -> str:
    if not isinstance(name, str) or not name:
        raise GritUsageError(f"tensor names are non-empty str, got {name!r}")
    if name == META_KEY:
        raise GritUsageError(f"{META_KEY!r} is reserved by safetensors, not a tensor name")
    return name


def _user_metadata(metadata) -> dict[str, str]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise GritUsageError(f"metadata must be a mapping of str to str, got "
                             f"{type(metadata).__name__}")
    out = {}
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise GritUsageError(f"metadata must map str to str (safetensors __metadata__), "
                                 f"got {k!r}: {type(v).__name__}")
        if k == GRIT_KEY:
            raise GritUsageError(f"metadata key {GRIT_KEY!r} is reserved: save() writes the "
                                 "GRIT document there")
        out[k] = v
    return out


def save(path, tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> None:
    """Write ``{name: GritArray | ndarray}`` as a safetensors file (see the
    module docstring and docs/file-format.md).  ``metadata`` is kept as
    ``__metadata__`` entries (str → str; the key ``__grit__`` is refused).
    Plane bytes are written from their buffers as they are (no decode, no
    copy of memory-mapped planes); the file appears atomically."""
    from ..array import GritArray
    path = os.fspath(path)
    if not isinstance(tensors, Mapping):
        raise GritUsageError(f"tensors must be a mapping name -> GritArray | ndarray, got "
                             f"{type(tensors).__name__}")
    meta = _user_metadata(metadata)
    entries: dict[str, tuple[str, list[int], Any]] = {}   # name -> (dtype, shape, buffer)
    arrays: dict[str, GritArray] = {}
    plain: dict[str, np.ndarray] = {}
    for name, v in tensors.items():
        _check_name(name)
        if isinstance(v, GritArray):
            arrays[name] = v
        elif isinstance(v, np.ndarray):
            plain[name] = v
        else:
            raise GritUsageError(f"tensor {name!r}: expected a GritArray or a numpy array, got "
                                 f"{type(v).__name__}")
    for name, a in arrays.items():
        for role, p, n in zip(ROLES, a.planes, a.plane_bytes):
            if not n:
                continue
            tn = plane_tensor_name(name, role)
            if tn in tensors or tn in entries:
                raise GritUsageError(f"tensor name {tn!r} is taken: it names plane {role} of "
                                     f"GRIT tensor {name!r}")
            entries[tn] = ("U8", [n], memoryview(p).cast("B") if not isinstance(p, bytes) else p)
    for name, x in plain.items():
        st = _st_dtype_of(x, name)
        if x.dtype.byteorder == ">":
            x = x.astype(x.dtype.newbyteorder("<"))
        x = np.ascontiguousarray(x)
        entries[name] = (st, list(x.shape), x)
    if arrays:
        meta[GRIT_KEY] = json.dumps(_grit_doc(arrays), separators=(",", ":"),
                                    ensure_ascii=True)
    # widest dtypes first: with an 8-aligned header every tensor starts aligned
    order = sorted(entries, key=lambda n: (-_itemsize(entries[n][0]), n))
    header: dict[str, Any] = {}
    if meta:
        header[META_KEY] = meta
    off = 0
    for n in order:
        st, shape, buf = entries[n]
        nb = buf.nbytes if isinstance(buf, np.ndarray) else len(memoryview(buf))
        header[n] = {"dtype": st, "shape": shape, "data_offsets": [off, off + nb]}
        off += nb
    hb = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    hb += b" " * (-len(hb) % 8)
    if len(hb) > MAX_HEADER:
        raise GritUsageError(f"header would be {len(hb)} bytes, over the {MAX_HEADER}-byte "
                             "limit readers enforce")

    def write(f):
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for n in order:
            buf = entries[n][2]
            if isinstance(buf, np.ndarray):
                if buf.size:
                    f.write(memoryview(buf.reshape(-1).view(np.uint8)))
            else:
                f.write(buf)

    atomic_write(path, write)


# ---------------------------------------------------------------------------
# load


@dataclass(frozen=True)
class CheckFailed:
    """A GRIT tensor whose level-1 check failed, returned in its place by
    ``load(..., strict=False)``.  ``error`` is the GritError the check raised
    (its ``status`` the §7.1 status); ``raw`` maps each role present in the
    file to a read-only view of its bytes (``payload`` for the descriptor-map
    convention)."""

    name: str
    error: GritError
    desc: str
    shape: tuple
    raw: dict = field(repr=False, default_factory=dict)

    @property
    def status(self):
        return self.error.status

    def decode(self):
        raise self.error


class SafetensorsTensors(dict):
    """``{name: GritArray | ndarray | CheckFailed}`` in file order, with
    ``.metadata`` (the user's ``__metadata__``, without ``__grit__``),
    ``.convention`` ("grit-safetensors/1", "descriptor-map" or None) and
    ``.failed`` (the CheckFailed records)."""

    metadata: dict
    convention: str | None

    @property
    def failed(self) -> list[CheckFailed]:
        return [v for v in self.values() if isinstance(v, CheckFailed)]


def _fail(path: str, why: str) -> GritFileError:
    return GritFileError(f"{path}: not a valid safetensors file: {why}")


def _no_dupes(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _json(text, what: str, path: str):
    try:
        return json.loads(text, object_pairs_hook=_no_dupes)
    except (ValueError, RecursionError) as e:
        raise _fail(path, f"{what} is not valid JSON ({e})") from None


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_safetensors(head: bytes, size: int) -> bool:
    """Whether the first 9 bytes of a ``size``-byte file look like safetensors."""
    if len(head) < 9 or head[8:9] != b"{":
        return False
    n = struct.unpack("<Q", head[:8])[0]
    return 2 <= n <= size - 8


def _read_header(path: str, f, size: int) -> tuple[int, dict]:
    if size < 10:
        raise _fail(path, f"the file is {size} bytes; a header needs at least 10")
    n = struct.unpack("<Q", f.read(8))[0]
    if n < 2 or n > MAX_HEADER or n > size - 8:
        raise _fail(path, f"header length {n} is outside [2, min({MAX_HEADER}, "
                          f"file size − 8 = {size - 8})]")
    hb = f.read(n)
    if len(hb) != n:
        raise _fail(path, "the file ended inside the header")
    try:
        text = hb.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _fail(path, f"the header is not UTF-8 ({e})") from None
    h = _json(text, "the header", path)
    if not isinstance(h, dict):
        raise _fail(path, "the header is not a JSON object")
    return 8 + n, h


def _entries(path: str, h: dict, buflen: int):
    """Validate every tensor entry: dtype, shape, offsets within the buffer,
    no two tensors sharing a byte.  Returns {name: (dtype, shape, begin, end)}."""
    out: dict[str, tuple[str, tuple[int, ...], int, int]] = {}
    for name, e in h.items():
        if name == META_KEY:
            continue
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise _fail(path, f"tensor {name!r}: an entry is an object with exactly dtype, "
                              "shape and data_offsets")
        st, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
        if not isinstance(st, str) or (st not in _ST_DTYPES and st not in _ML_DTYPES):
            raise _fail(path, f"tensor {name!r}: unsupported dtype {st!r}")
        if (not isinstance(shape, list) or len(shape) > MAX_RANK
                or not all(_int(x) and x >= 0 for x in shape)):
            raise _fail(path, f"tensor {name!r}: shape must be a list of at most {MAX_RANK} "
                              f"non-negative integers, got {shape!r}"[:300])
        if (not isinstance(offs, list) or len(offs) != 2 or not all(_int(x) for x in offs)
                or not 0 <= offs[0] <= offs[1] <= buflen):
            raise _fail(path, f"tensor {name!r}: data_offsets {offs!r} do not lie within the "
                              f"{buflen}-byte data buffer"[:300])
        out[name] = (st, tuple(shape), offs[0], offs[1])
    spans = sorted((b, e, n) for n, (_, _, b, e) in out.items() if e > b)
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise _fail(path, f"tensors {n0!r} [{b0}, {e0}) and {n1!r} [{b1}, {e1}) overlap")
    return out


def _sized(path: str, name: str, st: str, shape, b: int, e: int) -> None:
    n = 1
    for x in shape:
        n *= x
    want = n * _itemsize(st)
    if want != e - b:
        raise _fail(path, f"tensor {name!r}: {st}{list(shape)} needs {want} bytes, "
                          f"data_offsets span {e - b}"[:300])


def _plain(buf: memoryview, st: str, shape, b: int, e: int):
    if st in _ST_DTYPES:
        dt = _ST_DTYPES[st]
    else:
        mlname = _ML_DTYPES[st][0]
        dt = _ml(mlname)
        if dt is None:
            if st == "BF16":      # widened exactly to float32 (a copy)
                u = np.frombuffer(buf[b:e], "<u2").astype(np.uint32) << np.uint32(16)
                out = u.view(np.float32).reshape(shape)
                out.flags.writeable = False
                return out
            raise GritUsageError(f"reading {st} tensors needs ml_dtypes: pip install ml_dtypes")
    return np.frombuffer(buf[b:e], dt).reshape(shape)


def _grit_error_for(name: str, err: GritError) -> GritError:
    """The same GritError subclass, its message naming the tensor."""
    if err.detail is not None:
        d = replace(err.detail, message=f"tensor {name!r}: {err.detail.message}")
        new = type(err)(detail=d)
    else:
        new = type(err)(f"tensor {name!r}: {err}")
    new.tensor = name  # type: ignore[attr-defined]
    return new


def _build(name: str, strict: bool, make, desc: str, shape, raw: dict):
    try:
        return make()
    except GritFileError:
        raise
    except GritError as err:
        e = _grit_error_for(name, err)
        if strict:
            raise e from None
        return CheckFailed(name, e, desc, tuple(shape), raw)


def _doc_v1(path: str, doc: dict, entries: dict, buf: memoryview, strict: bool, out: dict):
    from ..array import GritArray
    from ..grade import register_grade
    from ..placement.expr import layout_word, parse_layout, register_layout
    if doc.get("version") != VERSION:
        raise _fail(path, f"{GRIT_KEY} schema {SCHEMA} version {doc.get('version')!r}; this "
                          f"reader knows version {VERSION}")
    extra = set(doc) - {"schema", "version", "tensors", "grades", "layouts"}
    if extra:
        raise _fail(path, f"{GRIT_KEY}: unknown keys {sorted(extra)} in version {VERSION}")
    tensors, grades, layouts = doc.get("tensors"), doc.get("grades", []), doc.get("layouts", {})
    if not isinstance(tensors, dict) or not isinstance(grades, list) \
            or not isinstance(layouts, dict):
        raise _fail(path, f"{GRIT_KEY}: tensors and layouts are objects, grades a list")
    for k, v in layouts.items():
        if not _WORD_KEY.match(k) or not isinstance(v, str):
            raise _fail(path, f"{GRIT_KEY}: layouts maps '0x' + 16 lowercase hex digits to an "
                              f"expression, got {k!r}"[:300])
        try:
            w = layout_word(parse_layout(v))
        except GritError as e:
            raise _fail(path, f"{GRIT_KEY}: layout {k}: {e}") from None
        if w != int(k, 16):
            raise _fail(path, f"{GRIT_KEY}: layout {v!r} hashes to 0x{w:016x}, not {k}")
        register_layout(v)
    for g in grades:
        if not isinstance(g, str):
            raise _fail(path, f"{GRIT_KEY}: grades are canonical grade strings")
        try:
            register_grade(g)
        except GritError as e:
            raise _fail(path, f"{GRIT_KEY}: grade {g!r}: {e}") from None
    claimed: dict[str, str] = {}
    for name, t in tensors.items():
        if name in entries or name == META_KEY:
            raise _fail(path, f"GRIT tensor {name!r} collides with a tensor of the file")
        if (not isinstance(t, dict) or not {"desc", "shape", "planes"} <= set(t)
                or not set(t) <= {"desc", "shape", "planes", "grade", "gid"}):
            raise _fail(path, f"{GRIT_KEY}: tensor {name!r} needs desc, shape, planes "
                              "(and optionally grade, gid)")
        desc, shape, planes = t["desc"], t["shape"], t["planes"]
        if not isinstance(desc, str) or not _HEX_DESC.match(desc):
            raise _fail(path, f"{GRIT_KEY}: tensor {name!r}: desc is 128 hex digits")
        if (not isinstance(shape, list) or len(shape) > MAX_RANK
                or not all(_int(x) and x >= 0 for x in shape)):
            raise _fail(path, f"{GRIT_KEY}: tensor {name!r}: bad shape")
        if not isinstance(planes, dict) or not set(planes) <= set(ROLES):
            raise _fail(path, f"{GRIT_KEY}: tensor {name!r}: planes maps roles {ROLES} to "
                              "tensor names")
        d = D.Descriptor.from_hex(desc)
        g = t.get("grade")
        if g is not None:
            if not isinstance(g, str):
                raise _fail(path, f"{GRIT_KEY}: tensor {name!r}: grade is a string")
            try:
                gr = register_grade(g)
            except GritError as e:
                raise _fail(path, f"{GRIT_KEY}: tensor {name!r}: grade {g!r}: {e}") from None
            if gr.id != d.grade_id:
                raise _fail(path, f"{GRIT_KEY}: tensor {name!r}: grade {g!r} has id "
                                  f"0x{gr.id:016x}, the descriptor says 0x{d.grade_id:016x}")
        views: list[Any] = [b"", b"", b"", b""]
        raw = {}
        for role, tn in planes.items():
            if not isinstance(tn, str) or tn not in entries:
                raise _fail(path, f"tensor {name!r}: plane {role} names no tensor ({tn!r})"[:300])
            if tn in claimed:
                raise _fail(path, f"tensor {tn!r} is a plane of both {claimed[tn]!r} and "
                                  f"{name!r}")
            claimed[tn] = name
            st, shp, b, e = entries[tn]
            if st != "U8" or shp != (e - b,):
                raise _fail(path, f"plane tensor {tn!r} must be U8 with shape [{e - b}], got "
                                  f"{st}{list(shp)}")
            views[ROLES.index(role)] = buf[b:e] if e > b else b""
            raw[role] = views[ROLES.index(role)]
        gid = t.get("gid")

        def make(d=d, shape=shape, views=views, gid=gid):
            a = GritArray(d, shape, views)
            if gid is not None and gid != a.gid_base32:
                raise _fail(path, f"tensor {name!r}: recorded gid {gid!r} is not the gid of "
                                  f"its descriptor, grade and shape ({a.gid_base32})"[:300])
            return a

        out[name] = _build(name, strict, make, desc, shape, raw)
    return claimed


def _doc_descmap(path: str, doc: dict, entries: dict, buf: memoryview, strict: bool,
                 out: dict):
    from ..array import GritArray
    for name, desc in doc.items():
        if not isinstance(desc, str) or not _HEX_DESC.match(desc):
            raise _fail(path, f"{GRIT_KEY}: tensor {name!r}: expected a 128-hex-digit "
                              "descriptor")
        if name not in entries:
            raise _fail(path, f"{GRIT_KEY}: names tensor {name!r}, which the file lacks"[:300])
    claimed = {}
    for name, desc in doc.items():
        st, shape, b, e = entries[name]
        view = buf[b:e] if e > b else b""
        claimed[name] = name
        out[name] = _build(
            name, strict, lambda d=desc, s=shape, v=view: GritArray.from_payload(d, s, v),
            desc, shape, {"payload": view})
    return claimed


def load(path, *, strict: bool = True) -> SafetensorsTensors:
    """Read a safetensors file: ``{name: GritArray | ndarray}`` in file order.

    Every view is zero-copy over a read-only memory map of the file.  A
    malformed container (header, offsets, dtypes, the ``__grit__`` document)
    raises :class:`GritFileError`.  A GRIT tensor whose level-1 check fails
    raises that check's GritError with the tensor's name in the message
    (``.tensor`` holds it); with ``strict=False`` a :class:`CheckFailed`
    record stands in its place instead."""
    path = os.fspath(path)
    try:
        f = open(path, "rb")
    except (OSError, TypeError) as e:
        raise GritUsageError(f"cannot read {path!r}: {e}") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        start, h = _read_header(path, f, size)
        meta = h.get(META_KEY, {})
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            raise _fail(path, f"{META_KEY} must be an object of strings")
        buflen = size - start
        entries = _entries(path, h, buflen)
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    buf = memoryview(mm)[start:]
    out = SafetensorsTensors()
    out.metadata = {k: v for k, v in meta.items() if k != GRIT_KEY}
    out.convention = None
    claimed: dict = {}
    grit_out: dict = {}
    if GRIT_KEY in meta:
        doc = _json(meta[GRIT_KEY], GRIT_KEY, path)
        if not isinstance(doc, dict):
            raise _fail(path, f"{GRIT_KEY} is not a JSON object")
        if doc.get("schema") == SCHEMA:
            out.convention = f"{SCHEMA}/{VERSION}"
            claimed = _doc_v1(path, doc, entries, buf, strict, grit_out)
        elif "schema" in doc and not _HEX_DESC.match(str(doc.get("schema"))):
            raise _fail(path, f"{GRIT_KEY}: unknown schema {doc.get('schema')!r}"[:300])
        else:
            out.convention = "descriptor-map"
            claimed = _doc_descmap(path, doc, entries, buf, strict, grit_out)
    # file order: plain tensors and GRIT tensors by their first byte
    first: dict[str, int] = {}
    for name, (st, shape, b, e) in entries.items():
        if name in claimed:
            owner = claimed[name]
            first[owner] = min(first.get(owner, b), b)
            continue
        _sized(path, name, st, shape, b, e)
        first[name] = b
    for name in grit_out:
        first.setdefault(name, -1)
    for name in sorted(first, key=lambda n: (first[n], n)):
        if name in grit_out:
            out[name] = grit_out[name]
        else:
            st, shape, b, e = entries[name]
            out[name] = _plain(buf, st, shape, b, e)
    return out
