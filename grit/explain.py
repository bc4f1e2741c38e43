"""§7.5 and §13: ``grit explain A B`` — a field-by-field descriptor diff.

Each side is resolved to a descriptor (and, where this process knows it, the
grade its ``grade_id`` names and the shape of the array it came from).  The
diff walks every field of the 64-byte descriptor, the note split into its
parts, the two canonical grade strings key by key (defaults explicit), the
decode projections and — when both shapes are known — the gids.  A verdict
line says whether the two are the same contract, decode-equivalent (and
whether a supersedes edge joins them), or not interchangeable.

    >>> from grit.explain import diff, render
    >>> print(render(diff("GRADE_MXFP4", "GRADE_MXFP4_RNE")))   # doctest: +SKIP
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import descriptor as D
from .facts import PlaneRole
from .array import GritArray
from .descriptor import Descriptor
from ._files import open_regular
from ._text import ESCAPE_ERRORS, escape_char, escape_errors, printable
from .errors import GritError, GritUsageError
from .fingerprint import base32_encode, gid as _gid
from .formats import FORMAT_NAMES, fmt_classify, fmt_unpack, format_token
from .grade import ACCUM_KEYS, ENCODE_KEYS, KEYS, Grade, grade_from, lookup_grade
from .io import load, sniff
from .io.containers import SAFETENSORS, named
from .io.gguf import Inexpressible
from .io.recognise import MAX_CONFIG, Recognised, read_config, recognise_file
from .io.safetensors import CheckFailed
from .placement.words import placement_name
from .supersedes import equivalent

__all__ = [
    "ExplainInputError", "FieldDiff", "Explanation", "resolve", "diff", "render",
    "to_dict", "grit_explain", "VERDICT_SAME", "VERDICT_DECODE", "VERDICT_PLACEMENT",
    "VERDICT_DIFFERENT",
    "printable", "escape_char", "ESCAPE_ERRORS", "escape_errors",
]

VERDICT_SAME = "same contract"
VERDICT_DECODE = "same decode, different encode"
#: one grade, the same frame but for the placement words and the INTERLEAVED
#: flag (the flag says how the placement lays the planes out, §3.3): the
#: values are the same, the bytes are not — relayout connects them (§5.4 L2)
VERDICT_PLACEMENT = "same decode, different placement"
VERDICT_DIFFERENT = "different contracts: bytes are not interchangeable"


class ExplainInputError(GritUsageError):
    """An argument of ``explain`` names no descriptor (the message says why)."""


# ---------------------------------------------------------------------------
# resolving one side

def _hex_text(ref: str) -> str | None:
    t = "".join(ref.split())
    if t[:2].lower() == "0x":
        t = t[2:]
    if len(t) == 128 and all(c in "0123456789abcdefABCDEF" for c in t):
        return t
    return None


def _looks_hex(ref: str) -> bool:
    t = "".join(ref.split())
    if t[:2].lower() == "0x":
        t = t[2:]
    return len(t) >= 32 and all(c in "0123456789abcdefABCDEF" for c in t)


def _split_file_ref(ref: str):
    """(path, tensor) for ``FILE:TENSOR`` where FILE exists, else None."""
    i = ref.find(":")
    while i != -1:
        path = ref[:i]
        if path and os.path.isfile(path):
            return path, ref[i + 1:]
        i = ref.find(":", i + 1)
    return None


def _from_loaded(value, path: str, tensor: str, label: str | None = None):
    label = label or f"{path}:{tensor}"
    if isinstance(value, GritArray):
        return value.descriptor, value.grade, tuple(value.shape), label
    if isinstance(value, Inexpressible):
        raise ExplainInputError(
            f"tensor {tensor!r} in {path} ({value.ggml_type}) is not expressible in GRIT v1: "
            f"{value.reason}")
    if isinstance(value, CheckFailed):      # the descriptor stands; its bytes do not fit it
        d = Descriptor.from_hex(value.desc)
        return d, lookup_grade(d.grade_id), tuple(value.shape), label
    what = (f"a plain {value.dtype} array" if isinstance(value, np.ndarray)
            else type(value).__name__)
    raise ExplainInputError(
        f"tensor {tensor!r} in {path} is {what}, not a GRIT array: it has no descriptor")


def _not_an_array(r: Recognised, path: str, tensor: str) -> ExplainInputError:
    part = "" if tensor == r.name else f"part of the weight {r.name!r}, "
    return ExplainInputError(
        f"tensor {tensor!r} in {path} is {part}a weight in the {r.convention} layout, "
        f"which is not a GRIT v1 array ({r.section}): {r.reason}")


def _recognised_side(tensors, path: str, tensor: str):
    """The recogniser's view of ``tensor`` in a safetensors file without GRIT
    metadata: its weight's side when ``tensor`` is the weight or one of the
    file tensors holding it, the reason when v1 cannot express it, or None
    when the recogniser did not place it."""
    recs = getattr(tensors, "recognised", None) or {}
    r = recs.get(tensor)
    if r is None:
        r = next((x for x in recs.values() if tensor in x.tensors), None)
    if r is None:
        return None
    v = tensors.get(r.name)
    if isinstance(v, (GritArray, CheckFailed)):
        label = f"{path}:{r.name}" if r.name == tensor else \
            f"{path}:{r.name} (the weight that file tensor {tensor!r} holds a plane of)"
        if r.kind == "converted":       # the descriptor is of the planes load built
            label += f" (converted by grit.load from its {r.convention} tensors)"
        return _from_loaded(v, path, r.name, label)
    raise _not_an_array(r, path, tensor)


def _in_role(name: str, role: list[str]) -> bool:
    parts = name.split(".")
    n = len(role)
    return any(parts[i:i + n] == role for i in range(len(parts) - n + 1))


def _role_side(tensors, path: str, role: str):
    """``role`` as ``grit scan`` names it in a grade-drift finding (a tensor
    name without its layer indices: ``attn_v`` for ``blk.3.attn_v.weight``):
    the one descriptor its tensors share, or, when they carry several — the
    drift scan reports —, an error listing its tensors per grade.  None when
    no array of the file has ``role`` among its dotted parts."""
    want = role.split(".")
    members = [(n, v) for n, v in tensors.items()
               if isinstance(v, GritArray) and _in_role(n, want)]
    if not members:
        return None
    by_desc: dict[bytes, list] = {}
    for n, v in members:
        by_desc.setdefault(v.descriptor.to_bytes(), []).append((n, v))
    if len(by_desc) == 1:
        n, v = members[0]
        shapes = {tuple(x.shape) for _, x in members}
        return (v.descriptor, v.grade, shapes.pop() if len(shapes) == 1 else None,
                f"{path}:{role} (the role of {len(members)} tensors, e.g. {n})")
    parts = []
    for group in by_desc.values():
        g = group[0][1].grade
        label = (g.name or g.canonical) if g is not None else "an unregistered grade"
        shown = ", ".join(n for n, _ in group[:3]) + (", …" if len(group) > 3 else "")
        parts.append(f"{label}: {len(group)} × {shown}")
    raise ExplainInputError(
        f"{role!r} is a role in {path}, not one tensor: its {len(members)} tensors carry "
        f"{len(by_desc)} descriptors ({'; '.join(parts)}); name one of them as "
        f"{path}:TENSOR")


def _problem_for(problems, tensor: str):
    return next((p for p in problems if p.tensor == tensor), None)


def _plain_problem(value, problems, path: str, tensor: str) -> None:
    """A tensor the reader keeps as plain data because of a problem (a GRIT
    annotation that cannot be read): the problem is the reason it is no array."""
    p = _problem_for(problems, tensor)
    if isinstance(value, np.ndarray) and p is not None:
        raise ExplainInputError(f"tensor {tensor!r} in {path} is a plain {value.dtype} "
                                f"array, not a GRIT array: {p.message}")


def _from_reader(path: str, tensor: str, err: GritError):
    """``tensor`` of a file that :func:`grit.load` refuses as a whole (a
    container problem somewhere in it): the problem-collecting reader's view
    of that one tensor, as ``grit scan`` sees it."""
    c = named(sniff(path) or SAFETENSORS.name)      # the reader names what is wrong
    contents = c.read(path)
    problems = contents.problems
    side = _READER_SIDE[c.name](contents, path, tensor)
    if side is not None:
        return side
    p = _problem_for(problems, tensor)
    if p is not None:
        raise ExplainInputError(f"tensor {tensor!r} in {path} cannot be read: {p.message}")
    raise ExplainInputError(f"cannot read {path}: {err}")


def _gguf_side(got, path: str, tensor: str):
    if tensor in got.tensors:
        _plain_problem(got.tensors[tensor], got.problems, path, tensor)
        return _from_loaded(got.tensors[tensor], path, tensor)
    return None


def _safetensors_side(f, path: str, tensor: str):
    g = f.doc.tensors.get(tensor)
    if g is not None and g.desc is not None and g.shape is not None:
        return g.desc, lookup_grade(g.desc.grade_id), tuple(g.shape), f"{path}:{tensor}"
    if not f.doc.present and f.parsed:
        recs = recognise_file(f, read_config(path))
        r = next((x for x in recs if tensor == x.name or tensor in x.tensors), None)
        if r is not None:
            if r.descriptor is None:
                raise _not_an_array(r, path, tensor)
            return r.descriptor, lookup_grade(r.descriptor.grade_id), \
                tuple(r.shape or ()), f"{path}:{r.name}"
    return None


#: each container's reading of one tensor of a file grit.load refuses whole
_READER_SIDE = {"gguf": _gguf_side, "safetensors": _safetensors_side}


def _shard_of(path: str, tensor: str) -> str | None:
    """The shard an index (``model.safetensors.index.json``: a JSON object
    whose ``weight_map`` maps tensor names to shard files beside it) names
    for ``tensor``; None when ``path`` is no such index.  The index is read
    bounded (:data:`grit.io.recognise.MAX_CONFIG`)."""
    if not path.lower().endswith(".json"):
        return None
    try:
        with open_regular(path) as f:
            raw = f.read(MAX_CONFIG + 1)
        doc = json.loads(raw.decode("utf-8")) if len(raw) <= MAX_CONFIG else None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    wm = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(wm, dict):
        return None
    shard = wm.get(tensor)
    if not isinstance(shard, str):
        raise ExplainInputError(f"the index {path} maps no tensor {tensor!r} to a shard "
                                f"({len(wm)} tensors in its weight_map)")
    if not shard or os.path.basename(shard) != shard or shard in (".", ".."):
        raise ExplainInputError(f"the index {path} puts {tensor!r} in {shard!r}, which is "
                                "not a file name beside the index")
    return os.path.join(os.path.dirname(path), shard)


def _file_side(path: str, tensor: str, loaded: dict | None):
    """One side ``FILE:TENSOR``: every name ``grit scan FILE`` reports
    resolves (a GRIT tensor, a recognised weight under its logical name or
    one of its file tensors, a GGUF tensor, a tensor of a file that load
    refuses as a whole; a sharded checkpoint's tensor through its index),
    or raises saying why it is not an array."""
    shard = _shard_of(path, tensor)
    if shard is not None:
        if not os.path.isfile(shard):
            raise ExplainInputError(f"the index {path} puts {tensor!r} in {shard}, "
                                    "which is not a file")
        return _file_tensor(shard, tensor, loaded)
    return _file_tensor(path, tensor, loaded)


def _file_tensor(path: str, tensor: str, loaded: dict | None):
    key = os.path.realpath(path)
    got = None if loaded is None else loaded.get(key)
    if got is None:
        try:
            got = load(path, strict=False)
        except GritError as e:
            got = e
        except ImportError as e:
            raise ExplainInputError(f"cannot read {path}: {e}") from None
        if loaded is not None:
            loaded[key] = got
    if isinstance(got, GritError):
        try:
            return _from_reader(path, tensor, got)
        except (OSError, GritError) as e:
            if isinstance(e, ExplainInputError):
                raise
            raise ExplainInputError(f"cannot read {path}: {got}") from None
    value = got.get(tensor)
    side = _recognised_side(got, path, tensor)
    if side is not None:
        return side
    if tensor not in got:
        role = _role_side(got, path, tensor)
        if role is not None:
            return role
        names = list(got)
        shown = ", ".join(names[:8]) + (", …" if len(names) > 8 else "")
        raise ExplainInputError(
            f"{path} has no tensor {tensor!r} ({len(names)} tensors: {shown or 'none'})")
    return _from_loaded(value, path, tensor)


def resolve(ref, *, loaded: dict | None = None
            ) -> tuple[Descriptor, Grade | None, tuple[int, ...] | None, str]:
    """``(descriptor, grade or None, shape or None, label)`` for one side.

    ``ref`` is a Descriptor, a Grade, a GritArray, 64 bytes, or a string: 128
    hex digits (whitespace allowed), a grade string ``grit1(...)``, a
    registered name (``GRADE_MXFP4`` / ``mxfp4``), or ``FILE:TENSOR`` (read
    through :func:`grit.load`; ``loaded``, a dict, keeps each file read so
    that two sides in one file read it once).  A grade resolves to its
    canonical descriptor (``grade.descriptor()``; :func:`diff` takes it at the
    other side's group axis when the other side is not a grade alone).  Raises
    :class:`ExplainInputError`."""
    if isinstance(ref, Descriptor):
        return ref, lookup_grade(ref.grade_id), None, "descriptor"
    if isinstance(ref, Grade):
        return _grade_side(ref)
    if isinstance(ref, GritArray):
        return ref.descriptor, ref.grade, tuple(ref.shape), "array"
    if isinstance(ref, (bytes, bytearray, memoryview)):
        try:
            d = Descriptor.from_bytes(ref)
        except GritError as e:
            raise ExplainInputError(str(e)) from None
        return d, lookup_grade(d.grade_id), None, "descriptor"
    if not isinstance(ref, str):
        raise ExplainInputError(
            f"expected a descriptor, grade or FILE:TENSOR, got {type(ref).__name__}")
    text = ref.strip()
    if not text:
        raise ExplainInputError("empty argument")
    h = _hex_text(text)
    if h is not None:
        d = Descriptor.from_hex(h)
        return d, lookup_grade(d.grade_id), None, "hex descriptor"
    if _looks_hex(text):
        n = len("".join(text.split())) - (2 if text[:2].lower() == "0x" else 0)
        raise ExplainInputError(
            f"a descriptor is 128 hex digits (64 bytes), got {n} hex digits")
    if "".join(text.split()).lower().startswith("grit1("):
        try:
            g = Grade.parse(text)
        except GritError as e:
            raise ExplainInputError(f"not a valid grade string: {e}") from None
        return _grade_side(g)
    fr = _split_file_ref(text)
    if fr is not None:
        return _file_side(fr[0], fr[1], loaded)
    if os.path.exists(text):
        raise ExplainInputError(
            f"{text} is a file: name a tensor in it as {text}:TENSOR")
    try:
        g = grade_from(text)
    except GritError:
        raise ExplainInputError(
            f"{text!r} is not 128 hex digits, a grade string grit1(...), a registered grade "
            "name (e.g. GRADE_MXFP4) or FILE:TENSOR with an existing FILE") from None
    return _grade_side(g)


class _GradeSide(tuple):
    """What :func:`resolve` answers for a grade named alone: a contract with
    no tensor, whose descriptor has group axis 0 only for want of one."""


def _grade_side(g: Grade) -> tuple:
    return _GradeSide((g.descriptor(), g, None, g.name or g.canonical))


# ---------------------------------------------------------------------------
# renderings of field values

_FLAG_NAMES = (
    (D.F_HAS_ZP, "HAS_ZP"), (D.F_ZP_MINUS1, "ZP_MINUS1"), (D.F_SPARSE, "SPARSE"),
    (D.F_MSB_FIRST, "MSB_FIRST"), (D.F_INTERLEAVED, "INTERLEAVED"),
    (D.F_ZP_L1SCALED, "ZP_L1SCALED"),
)
_SPMETA = {D.SPMETA_NONE: "NONE", D.SPMETA_U2: "U2", D.SPMETA_U4: "U4"}
_SPORDER = {D.SPORDER_UNORDERED: "UNORDERED", D.SPORDER_ASC_LSB: "ASC_LSB"}
_CT = {D.CT_DENSE: "DENSE", D.CT_PAD8: "PAD8"}


def _fmt_word(word: int) -> str:
    if word == 0:
        return "ABSENT (0x0000)"
    if word in FORMAT_NAMES:
        return f"{FORMAT_NAMES[word]} (0x{word:04x})"
    f = fmt_unpack(word)
    parts = (f"w={f.w} p={f.p} has_inf={f.has_inf} nan_enc={f.nan_enc} szero={f.szero} "
             f"unsigned={f.unsigned} bias_ovr={f.bias_ovr}")
    why = fmt_classify(word)
    tail = "" if why is None else f"; illegal: {why}"
    return f"{format_token(word)} ({parts}{tail})"


def _flags(v: int) -> str:
    names = [n for bit, n in _FLAG_NAMES if v & bit]
    rest = v & ~sum(bit for bit, _ in _FLAG_NAMES) & 0xFF
    if rest:
        names.append(f"reserved 0x{rest:02x}")
    return f"0x{v:02x} " + ("|".join(names) if names else "(none)")


def _enum(table: dict[int, str]):
    return lambda v: table.get(v, f"{v} (unknown)")


def _grade_id(v: int, local: dict | None = None) -> str:
    g = lookup_grade(v) or (local or {}).get(v)
    if g is None:
        return f"0x{v:016X} (not registered in this process)"
    return f"0x{v:016X} {(g.name + ' ') if g.name else ''}{g.canonical}"


def _plain(v: int) -> str:
    return str(v)


def _hex32(v: int) -> str:
    return f"0x{v:08X}"


_RENDER = {
    "magic": lambda v: f"0x{v:08X}" + (" ('GRT1')" if v == D.MAGIC else " (not 'GRT1')"),
    "flags": _flags,
    "elem": _fmt_word, "scale0": _fmt_word, "scale1": _fmt_word, "zp_fmt": _fmt_word,
    "sp_meta_fmt": _enum(_SPMETA), "sp_order": _enum(_SPORDER), "container": _enum(_CT),
    "placement_data": lambda v: f"{placement_name(v)} (0x{v:016X})",
    "placement_scale": lambda v: f"{placement_name(v)} (0x{v:016X})",
    "placement_meta": lambda v: f"{placement_name(v)} (0x{v:016X})",
    "grade_id": _grade_id,
}

_FRAME_FIELDS = ("magic", "hdr_bytes", "version", "n_levels", "flags", "elem", "scale0",
                 "scale1", "zp_fmt", "group_axis", "k0", "k1", "sp_n", "sp_m",
                 "sp_meta_fmt", "sp_order", "container", "frame_rsvd")
_PLACEMENT_FIELDS = tuple(r.field for r in PlaneRole)

_ROLE = {**{k: "representation" for k in KEYS[:11]},
         **{k: "encode" for k in ENCODE_KEYS}, **{k: "decode" for k in ("dr", "ds", "dt")},
         **{k: "accumulation" for k in ACCUM_KEYS}}


# ---------------------------------------------------------------------------
# the diff

@dataclass(frozen=True)
class FieldDiff:
    """One compared field.  ``a``/``b`` are raw values (None: absent on that
    side), ``a_text``/``b_text`` their human renderings."""

    section: str    # frame | note | placement | grade | contract
    field: str
    a: Any
    b: Any
    a_text: str
    b_text: str
    equal: bool
    remark: str = ""

    def line(self) -> str:
        if self.equal:
            return f"{self.field}: {self.a_text}"
        return f"{self.field}: {self.a_text} → {self.b_text}"

    def to_dict(self) -> dict:
        return {"section": self.section, "field": self.field, "a": self.a, "b": self.b,
                "a_text": self.a_text, "b_text": self.b_text, "equal": self.equal,
                "remark": self.remark}


class Explanation(list):
    """``list[FieldDiff]`` plus the two sides, the verdict and remarks."""

    a_label: str
    b_label: str
    a_grade: Grade | None
    b_grade: Grade | None
    verdict: str
    #: the verdict as a closed set: "same", "placement", "decode", "different"
    kind: str
    same: bool
    decode_equivalent: bool | None
    supersedes: str | None
    remarks: list[str]

    @property
    def differences(self) -> list[FieldDiff]:
        return [d for d in self if not d.equal]


def _fd(section, field, a, b, render=_plain, remark="") -> FieldDiff:
    at = "(absent)" if a is None else render(a)
    bt = "(absent)" if b is None else render(b)
    return FieldDiff(section, field, a, b, at, bt, a == b, remark)


def _note_parts(note: int) -> tuple[int, int, int]:
    rest = note & ~(D.NOTE_ASSUMED | D.NOTE_PRODUCER_MASK) & 0xFFFFFFFF
    return (note & D.NOTE_ASSUMED, (note & D.NOTE_PRODUCER_MASK) >> D.NOTE_PRODUCER_SHIFT,
            rest)


def diff(a, b) -> Explanation:
    """Compare two descriptors (anything :func:`resolve` accepts) field by field."""
    loaded: dict = {}
    a, b = _side(a, loaded), _side(b, loaded)
    da, ga, sa, la = a
    db, gb, sb, lb = b
    # a bare grade against a tensor's descriptor: the grade's descriptor at the
    # tensor's group axis (a 2-D weight groups along axis 1; the grade does not
    # say which axis, so the axis alone is no difference of contract)
    axis_note = None
    bare_a, bare_b = isinstance(a, _GradeSide), isinstance(b, _GradeSide)
    if bare_a and not bare_b and da.group_axis != db.group_axis:
        da, axis_note = da.replace(group_axis=db.group_axis), ("A", db.group_axis)
    elif bare_b and not bare_a and db.group_axis != da.group_axis:
        db, axis_note = db.replace(group_axis=da.group_axis), ("B", da.group_axis)
    # a grade given in full on one side names the other side's grade_id too
    if ga is None and gb is not None and da.grade_id == gb.id:
        ga = gb
    if gb is None and ga is not None and db.grade_id == ga.id:
        gb = ga
    local = {g.id: g for g in (ga, gb) if g is not None}
    out = Explanation()
    out.a_label, out.b_label, out.a_grade, out.b_grade = la, lb, ga, gb
    out.remarks = []
    if axis_note is not None:
        out.remarks.append(f"{axis_note[0]} is a grade: its canonical descriptor is taken at "
                           f"the other side's group_axis {axis_note[1]}")

    for name in _FRAME_FIELDS:
        out.append(_fd("frame", name, getattr(da, name), getattr(db, name),
                       _RENDER.get(name, _plain)))
    (aa, ap, ar), (ba, bp, br) = _note_parts(da.note), _note_parts(db.note)
    out.append(_fd("note", "note.assumed (NOTE_ASSUMED)", aa, ba,
                   lambda v: "yes" if v else "no"))
    out.append(_fd("note", "note.producer", ap, bp, _plain))
    out.append(_fd("note", "note.reserved", ar, br, _hex32))
    for name in _PLACEMENT_FIELDS:
        out.append(_fd("placement", name, getattr(da, name), getattr(db, name),
                       _RENDER[name]))
    out.append(_fd("frame", "grade_id", da.grade_id, db.grade_id,
                   lambda v: _grade_id(v, local)))

    # the grades, key by key (defaults explicit)
    if ga is not None and gb is not None:
        fa, fb = ga.fields(), gb.fields()
        for k in KEYS:
            if k in fa or k in fb:
                out.append(_fd("grade", k, fa.get(k), fb.get(k), str, remark=_ROLE[k]))
        out.append(_fd("contract", "canonical", ga.canonical, gb.canonical, str))
        out.append(_fd("contract", "decode projection", ga.decode_projection,
                       gb.decode_projection, str))
    for side, g, d in (("A", ga, da), ("B", gb, db)):
        if g is None:
            out.remarks.append(
                f"grade of {side} unknown: grade_id 0x{d.grade_id:016X} is not registered "
                "in this process (teach it with grit.register_grade); canonical strings "
                "cannot be compared")
        else:
            bad = g.frame_mismatches(d)
            if bad:
                out.remarks.append(
                    f"{side}'s descriptor disagrees with its own grade ({g.name or g.canonical})"
                    ": " + ", ".join(f"{n} is {got}, the grade says {want}"
                                     for n, want, got in bad))
    if sa is not None and sb is not None:
        gid_a = _safe_gid(ga, da, sa)
        gid_b = _safe_gid(gb, db, sb)
        out.append(_fd("contract", "shape", list(sa), list(sb),
                       lambda v: "x".join(map(str, v)) or "()"))
        if gid_a is not None and gid_b is not None:
            out.append(_fd("contract", "gid", gid_a, gid_b, _plain))
        if tuple(sa) != tuple(sb):
            out.remarks.append("the shapes differ, so the gids differ even where the "
                               "descriptors agree (gid hashes grade, frame and shape, §6.3)")

    _verdict(out, da, db, ga, gb)
    return out


def _side(ref, loaded: dict):
    # an already-resolved side (the tuple resolve returns) passes through
    if isinstance(ref, tuple) and len(ref) == 4 and isinstance(ref[0], Descriptor):
        return ref
    return resolve(ref, loaded=loaded)



def _safe_gid(g, d, shape) -> str | None:
    if g is None:
        return None
    try:
        return base32_encode(_gid(g.canonical, d.to_bytes(), shape))
    except GritError:
        return None


def _verdict(out: Explanation, da, db, ga, gb) -> None:
    frame_same = da.frame_bytes() == db.frame_bytes()
    note_differs = da.note != db.note
    out.decode_equivalent = None
    out.supersedes = None
    out.kind = "different"
    if ga is not None and gb is not None:
        out.decode_equivalent = ga.decode_equivalent(gb)
    placements_differ = da.placements != db.placements
    if frame_same:
        out.same = True
        out.verdict, out.kind = VERDICT_SAME, "same"
        if ga is None:
            out.remarks.append("the frames are byte-identical, but the grade is unknown")
        if note_differs:
            out.remarks.append(
                "only the note differs: the note (bytes [28,32)) is informational and not "
                "hashed, so grade_id and gid are unchanged (§11.1)")
        return
    out.same = False
    grades_same = ga is not None and gb is not None and ga == gb
    if grades_same:
        # the grade is one contract; the frame differs (placement or a frame field)
        if _placement_only(out, da, db):
            out.verdict, out.kind = VERDICT_PLACEMENT, "placement"
            out.remarks.append(
                "bytes are not interchangeable as stored: grit.relayout moves one into the "
                "other's placement (§5.4 L2) unless a placement is opaque (class 0xF); the "
                "gids differ because gid hashes the placement words (§6.3)")
        else:
            out.verdict = VERDICT_DIFFERENT
        return
    if out.decode_equivalent:
        scope = ("full" if equivalent(ga, gb, "full")
                 else "decode" if equivalent(ga, gb, "decode") else None)
        out.supersedes = scope
        edge = (f"supersedes edge: {scope} scope" if scope
                else "no supersedes edge registered")
        out.verdict, out.kind = f"{VERDICT_DECODE} ({edge})", "decode"
        if placements_differ:
            out.verdict += "; placements differ: relayout first"
        return
    out.verdict = VERDICT_DIFFERENT


def _placement_only(out: Explanation, da, db) -> bool:
    """Whether the two frames differ only in their placement words and the
    F_INTERLEAVED flag (and in at least one of them)."""
    frame_only = [d.field for d in out if d.section == "frame" and not d.equal]
    if frame_only not in ([], ["flags"]):
        return False
    flags = da.flags ^ db.flags
    return flags in (0, D.F_INTERLEAVED) and (bool(flags) or da.placements != db.placements)


# ---------------------------------------------------------------------------
# output

_SECTION_TITLE = {
    "frame": "descriptor frame (hashed: bytes [0,28) and [32,64))",
    "note": "note (bytes [28,32), informational, not hashed)",
    "placement": "placements",
    "grade": "canonical grade strings, key by key (defaults explicit)",
    "contract": "contract",
}
_ALWAYS = ("decode projection", "gid")  # shown even when equal
_ORDER = ("frame", "placement", "note", "grade", "contract")


def _c(s: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{s}\x1b[0m" if color else s


def render(diffs: Sequence[FieldDiff], color: bool = False, *, show_all: bool = False) -> str:
    """Human text: differing fields per section (all with ``show_all``),
    then remarks and the verdict line.  Every text that can come from a file
    (a label naming FILE:TENSOR, a grade string) passes :func:`printable`, so
    only ``color``'s own escape sequences reach the terminal."""
    P = printable
    lines: list[str] = []
    if isinstance(diffs, Explanation):
        ga, gb = diffs.a_grade, diffs.b_grade
        for side, label, g in (("A", diffs.a_label, ga), ("B", diffs.b_label, gb)):
            bits = [label]
            if g is not None:
                if g.name and g.name != label:
                    bits.append(g.name)
                if g.canonical != label:
                    bits.append(g.canonical)
            else:
                bits.append("(grade not registered)")
            lines.append(f"{side}: " + "  ".join(map(P, bits)))
    for sec in _ORDER:
        rows = [d for d in diffs if d.section == sec
                and (show_all or not d.equal or d.field in _ALWAYS)]
        if not rows:
            continue
        lines.append("")
        lines.append(_c(_SECTION_TITLE[sec], "1", color))
        for d in rows:
            role = f"  [{P(d.remark)}]" if d.remark and sec == "grade" else ""
            if d.equal:
                lines.append(f"  = {P(d.field)}: {P(d.a_text)}{role}")
            else:
                lines.append(f"  ≠ {P(d.field)}: {_c(P(d.a_text), '31', color)} → "
                             f"{_c(P(d.b_text), '32', color)}{role}")
    n = sum(not d.equal for d in diffs)
    if n == 0 and not show_all:
        lines.append("")
        lines.append("no field differs")
    if isinstance(diffs, Explanation):
        if diffs.decode_equivalent is not None and diffs.a_grade != diffs.b_grade:
            lines.append("")
            lines.append("decode-equivalent: " + ("yes (decode projections are identical)"
                                                  if diffs.decode_equivalent else "no"))
        if diffs.remarks:
            lines.append("")
            lines.extend(f"- {P(r)}" for r in diffs.remarks)
        lines.append("")
        lines.append(_c(f"verdict: {P(diffs.verdict)}", "1;32" if diffs.same else "1;31", color))
    return "\n".join(lines)


def to_dict(diffs: Sequence[FieldDiff]) -> dict:
    """JSON-ready form: every field (equal ones included) and the verdict."""
    out: dict = {"fields": [d.to_dict() for d in diffs],
                 "differences": [d.field for d in diffs if not d.equal]}
    if isinstance(diffs, Explanation):
        out.update({
            "a": {"label": diffs.a_label,
                  "canonical": diffs.a_grade.canonical if diffs.a_grade else None},
            "b": {"label": diffs.b_label,
                  "canonical": diffs.b_grade.canonical if diffs.b_grade else None},
            "same_contract": diffs.same, "decode_equivalent": diffs.decode_equivalent,
            "supersedes": diffs.supersedes, "verdict": diffs.verdict,
            "verdict_kind": diffs.kind,
            "remarks": list(diffs.remarks),
        })
    return out


def grit_explain(a, b, *, show_all: bool = False, color: bool = False, file=None) -> Explanation:
    """§7.5: print the field-by-field descriptor diff of ``a`` and ``b``."""
    ex = diff(a, b)
    print(render(ex, color, show_all=show_all), file=file)
    return ex
