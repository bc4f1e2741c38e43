"""What every convention module shares: the :class:`Recognised` record a
recogniser returns for each weight, the scale-format tables, the small
grade/descriptor helpers, and the checkpoint record the config checks read
(:class:`Checkpoint`).

A convention here is pure: it reads a container's header (tensor names,
dtypes, shapes, byte lengths), its metadata, the parsed ``config.json`` and,
through a callback, a few small tensors' values; it never opens a file or a
URL (that is :mod:`grit.io`'s, which calls the conventions).
"""
from __future__ import annotations

import fnmatch
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .. import descriptor as D
from ..array import GritArray, canonical
from ..errors import GritUsageError
from ..formats import FormatFields, fmt_pack, format_token
from ..grade import Grade, lookup_grade, register_grade

#: bfloat16 as a parameterised §2 word (8-bit significand, IEEE inf/NaN); it has
#: no registered token, so grade strings spell it x350f
BF16_WORD = fmt_pack(FormatFields(w=16, p=8, has_inf=1, nan_enc=2, szero=1, unsigned=0))

#: the safetensors dtype of a scale tensor -> its §2 format token
SCALE_FORMATS = {"F16": "binary16", "F32": "binary32", "BF16": format_token(BF16_WORD),
                 "F8_E4M3": "e4m3", "U8": "e8m0", "F8_E8M0": "e8m0"}

#: a scale format token -> the numpy dtype of its little-endian values
SCALE_NP = {"binary16": "<f2", "binary32": "<f4", format_token(BF16_WORD): "<u2"}

#: safetensors FP8 weight dtype -> its §2 element token (float-quantized)
FP8_ELEMS = {"F8_E4M3": "e4m3", "F8_E5M2": "e5m2"}


def product_notes(first: str, scale_name: str, sdt: str) -> list[str]:
    """The notes of a recognised FP8/int8 tensor whose decode is the float32
    product of the code and its scale: a scale stored narrower than F32 is
    read exactly, but a runtime that multiplies in that dtype rounds again."""
    notes = [first]
    if sdt != "F32":
        notes.append(f"{scale_name} is {sdt}: a runtime that multiplies in {sdt} rounds each "
                     f"product once more to {sdt}; GRIT's value is the float32 product")
    return notes

#: the largest k0 a v1 descriptor holds (the field is a uint16)
K0_MAX = 0xFFFF

Header = Mapping[str, tuple[str, Sequence[int], int]]
Reader = Callable[[str], "np.ndarray | None"]


@dataclass(frozen=True)
class Emitted:
    """One GRIT array as a convention writes it: the file tensors (name ->
    array of the safetensors dtype), what the config needs of it
    (``scheme``: the convention's own description, e.g. compressed-tensors'
    weights args and format), and how exact the move is: ``exact`` when the
    convention's decode of the tensors is the array's decode bit for bit, else
    ``notes`` say where they part (e.g. a per-tensor scale inverted)."""

    tensors: dict[str, Any]
    scheme: dict
    exact: bool = True
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Convention:
    """One quantisation convention, the single owner of what it means in
    both directions.  Every part is optional; the registry
    (:mod:`grit.conventions`) asks each convention in turn:

    * ``recognise_header(header, metadata, q, read)`` — the weights the
      convention finds anywhere in a header (by dtype, by a metadata key),
      each a :class:`Recognised` naming the file tensors it takes;
    * ``claims_module(leaves, tensors, header)`` / ``recognise_module(prefix,
      tensors, header, q, read)`` — a module prefix (``…q_proj``) whose leaf
      tensors follow the convention, and the records for it;
    * ``methods`` — the ``quant_method`` values that name the convention;
    * ``emit(name, array)`` / ``emit_config(emitted, plain)`` — the other
      direction: a GRIT array as the convention's tensors, and the config
      entries that declare them;
    * ``scale_leaves`` / ``small_leaves`` — the leaves of per-tensor scales
      (fused parts must share them) and of other small values the config
      checks read; ``sidecars`` — the JSON files beside a model file it
      reads; ``module_format(leaves)`` — how a module of its tensors is
      classified for the config checks;
    * ``claims_config(q, checkpoint)`` / ``check_config(ctx, checkpoint, q,
      where)`` — a ``quantization_config`` the convention declares, checked
      against the checkpoint's tensors (findings through ``ctx.add``).

    ``q`` is the ``quantization_config`` of the ``config.json`` beside the
    file (``{}`` without one) and ``read(tensor)`` a small tensor's values or
    None."""

    name: str
    #: the ``quant_method`` values of a ``quantization_config`` that name this
    #: convention (a config whose method no convention names is reported)
    methods: tuple[str, ...] = ()
    recognise_header: Callable[..., list] | None = None
    claims_module: Callable[..., bool] | None = None
    recognise_module: Callable[..., list] | None = None
    claims_config: Callable[..., bool] | None = None
    check_config: Callable[..., None] | None = None
    #: leaves holding a per-tensor scale (one float) that parts a runtime fuses
    #: must share (``grit scan``'s S321)
    scale_leaves: tuple[str, ...] = ()
    #: further leaves of at most two numbers the config checks read
    #: (``Checkpoint.scalars``)
    small_leaves: tuple[str, ...] = ()
    #: ``module_format(leaves)`` — (format, element) of a module whose tensors
    #: follow the convention (compressed-tensors' format names where one fits;
    #: element ``int``/``int8``, ``nvfp4``, ``mxfp4``, ``fp8``), or None
    module_format: Callable[..., tuple[str, str] | None] | None = None
    #: JSON files beside a model file the convention reads (the reader
    #: hands them over in ``Checkpoint.sidecars``)
    sidecars: tuple[str, ...] = ()
    #: ``emit(name, array)`` — the file tensors that hold one GRIT array in
    #: this convention (an :class:`Emitted`), or a GritError saying why the
    #: convention cannot hold it; ``emit_config(emitted, plain)`` — the JSON
    #: files the convention writes beside them (file name -> the object to
    #: merge into it), given every emitted weight and the names of the plain
    #: tensors written as they are
    emit: Callable[..., "Emitted"] | None = None
    emit_config: Callable[..., dict] | None = None


@dataclass
class Recognised:
    """One recognised quantised weight (or one inexpressible one)."""

    name: str                               # the logical weight, e.g. "…q_proj.weight"
    convention: str                         # e.g. "compressed-tensors/nvfp4-pack-quantized"
    #: "inferred" — the file's bytes are the planes (a file tensor, a 4-byte
    #: conversion or a synthesised constant per plane); "converted" — v1
    #: expresses the weight but not the file's bytes in place (``section`` /
    #: ``reason`` say why), and :meth:`array` moves them into the canonical
    #: placement (``layout``); "inexpressible" — v1 cannot express it
    kind: str
    tensors: tuple[str, ...] = ()           # the file tensors it accounts for
    shape: tuple[int, ...] | None = None    # logical shape (inferred)
    grade: str | None = None                # canonical grade string (inferred)
    descriptor: D.Descriptor | None = None
    #: per plane (data, scale0, scale1, aux): ("file", tensor) — the tensor's
    #: bytes are the plane; ("global_recip", tensor) — f32(1/g) of a float32
    #: scalar; ("const", byte) — synthesised, n_groups0 bytes of one value;
    #: None — absent
    planes: tuple[Any, Any, Any, Any] = (None, None, None, None)
    section: str | None = None              # §0.3 item (inexpressible)
    reason: str | None = None
    lines: tuple[str, ...] = ()             # derivation / arithmetic
    notes: tuple[str, ...] = ()             # declared-vs-actual remarks (inferred)
    #: findings about the weight beyond its descriptor, each (code, group key,
    #: message, lines, detail): scan reports one finding per code and key per
    #: file, naming every weight that has it
    findings: tuple[tuple[str, str, str, tuple[str, ...], dict], ...] = ()
    #: converted: the planes built from the file tensors' bytes (``{tensor:
    #: buffer}`` -> [data, scale0, scale1, aux]), by the convention that
    #: recognised the weight
    converter: Callable[[Mapping[str, Any]], list] | None = None

    def plane_lengths(self, on_disk: Callable[[str], int]) -> list[int]:
        """The four plane lengths §7.3 step 4 is run against: a file-backed
        plane's on-disk length; a converted or synthesised plane's own."""
        out = []
        for p in self.planes:
            if p is None:
                out.append(0)
            elif p[0] == "file":
                out.append(on_disk(p[1]))
            elif p[0] == "global_recip":
                out.append(4)
            elif p[0] == "convert":     # the file tensor the plane is moved from
                out.append(on_disk(p[1]))
            else:                                      # ("const", v): n_groups0 bytes
                out.append(n_groups0(self))
        return out

    def array(self, view: Callable[[str], Any]):
        """The recognised tensor as a checked :class:`~grit.array.GritArray`
        (raises the §7.3 GritError when the file's bytes disagree with the
        descriptor).  ``view(tensor)`` gives a file tensor's bytes (a
        zero-copy slice of the file's map, for a reader that has one; a
        range past the end of the file cut short, so that the size check
        reports it).  Converted and synthesised planes are built (4 bytes
        for f32(1/g); n_groups0 bytes for a constant plane; the
        convention's ``converter`` for a converted weight)."""
        if self.kind not in ("inferred", "converted") or self.descriptor is None:
            raise GritUsageError(f"{self.name}: {self.convention} is not a GRIT v1 array "
                                 f"({self.section}: {self.reason})")
        names = [p[1] for p in self.planes if p is not None and p[0] != "const"]
        raw = {n: view(n) for n in names}
        if self.kind == "converted":
            if self.converter is None:
                raise GritUsageError(f"{self.name}: no conversion recorded")
            return GritArray(self.descriptor, self.shape or (), self.converter(raw))
        planes = []
        for p in self.planes:
            if p is None:
                planes.append(b"")
            elif p[0] == "file":
                planes.append(raw[p[1]])
            elif p[0] == "global_recip":
                g = np.frombuffer(raw[p[1]], "<f4")
                planes.append((np.float32(1.0) / g).astype("<f4").tobytes()
                              if g.size == 1 else raw[p[1]])
            else:
                planes.append(bytes([p[1]]) * n_groups0(self))
        return GritArray(self.descriptor, self.shape or (), planes)

    def to_dict(self) -> dict:
        return {"name": self.name, "convention": self.convention, "kind": self.kind,
                "tensors": list(self.tensors), "shape": list(self.shape or ()) or None,
                "grade": self.grade, "section": self.section, "reason": self.reason,
                "lines": list(self.lines), "notes": list(self.notes)}


def n_groups0(r: Recognised) -> int:
    g = lookup_grade(r.descriptor.grade_id) if r.descriptor is not None else None
    if g is None or not r.shape:
        return 0
    return math.prod(r.shape) // int(g["k0"])


# ---------------------------------------------------------------------------
# config.json: compressed-tensors quantization_config


def qconfig(config: Mapping | None) -> dict:
    if not isinstance(config, Mapping):
        return {}
    q = config.get("quantization_config") or config.get("compression_config")
    return dict(q) if isinstance(q, Mapping) else {}


def grade_of(text: str) -> Grade:
    g = register_grade(text)
    return lookup_grade(g.id) or g


def descriptor_for(grade: Grade, shape: Sequence[int], has_zp: bool) -> D.Descriptor:
    return grade.descriptor(group_axis=len(shape) - 1)


def inexpressible(name, conv, files, section, reason, lines=()) -> Recognised:
    return Recognised(name, conv, "inexpressible", tuple(files), section=section,
                      reason=reason, lines=tuple(lines))


# ---------------------------------------------------------------------------
# what the config checks read of a checkpoint

Leaf = tuple[str, tuple[int, ...], str]          # dtype, shape, file


@dataclass
class Checkpoint:
    """What the config checks need of one checkpoint's safetensors files."""

    name: str
    config: dict | None = None
    #: the JSON files beside a model file that conventions read
    #: (``Convention.sidecars``), by name; absent ones are missing
    sidecars: dict[str, dict] = field(default_factory=dict)
    #: module prefix -> leaf -> (dtype, shape, file)
    modules: dict[str, dict[str, Leaf]] = field(default_factory=dict)
    #: tensor name -> its value (per-tensor scales, weight_shape), read small
    scalars: dict[str, tuple[float, ...]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    #: module prefix -> (format, element) as its tensors show it (the
    #: conventions' ``module_format``; filled by the registry before the
    #: config checks run)
    formats: dict[str, tuple[str, str]] = field(default_factory=dict)


FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")
FP8_DTYPES = ("F8_E4M3", "F8_E5M2")

#: group sizes the runtime kernels serve, per on-disk element: vLLM's
#: ``MARLIN_SUPPORTED_GROUP_SIZES`` for int4 (GPTQ, AWQ, pack-quantized);
#: NVFP4 blocks of 16 and MXFP4 blocks of 32 are fixed by the formats
SERVED_GROUPS: dict[str, tuple[int, ...]] = {
    "int4": (-1, 32, 64, 128), "nvfp4": (16,), "mxfp4": (32,)}


def dense_format(leaves: Mapping[str, Leaf]) -> tuple[str, str] | None:
    """("dense", "dense") for a module whose ``weight`` is a float tensor: the
    format of a module no convention claims."""
    w = leaves.get("weight")
    return ("dense", "dense") if w is not None and w[0] in FLOAT_DTYPES else None


def is_linear(pre: str, leaves: Mapping[str, Leaf]) -> bool:
    if "embed" in pre.rsplit(".", 1)[-1] or pre.endswith(("wte", "wpe")):
        return False
    if {"weight_packed", "qweight"} & set(leaves):
        return True
    w = leaves.get("weight")
    return w is not None and len(w[1]) == 2


def quantised(fmt: str | None) -> bool:
    return fmt is not None and fmt != "dense"


# ---------------------------------------------------------------------------
# module targets: compressed-tensors' targets and ignore lists, ModelOpt's excludes


#: a target that names a module class (compressed-tensors' class-name targets)
CLASS_TARGET = re.compile(r"[A-Z][A-Za-z0-9_]*")


def match_target(name: str, target: str, linear: bool) -> str | None:
    """How ``target`` matches module ``name``: "exact", "re", "class" or None."""
    if target.startswith("re:"):
        try:
            return "re" if re.match(target[3:], name) else None
        except re.error:
            return None
    if target == name:
        return "exact"
    if linear and CLASS_TARGET.fullmatch(target):
        return "class"
    return None


def ignored(name: str, ignore: Sequence[str], linear: bool, glob: bool = False) -> str | None:
    for t in ignore:
        if not isinstance(t, str):
            continue
        if match_target(name, t, linear) or (glob and fnmatch.fnmatchcase(name, t)):
            return t
    return None



def groups_check(ctx, where: str, pre: str, what: str, in_f: int | None,
                  gs: Any, strategy: str, scale: Leaf | None, elem: str, src: str,
                  axis: int = -1) -> None:
    """S311 (group size vs the scale plane) and S318 (a group size no kernel
    serves).  ``axis``: the scale tensor's axis that runs over the groups of
    one row (-1: [out, in/k0], compressed-tensors and ModelOpt; 0: [in/k0,
    out], GPTQ/AWQ)."""
    if isinstance(gs, int) and not isinstance(gs, bool) and elem in SERVED_GROUPS and \
            gs not in SERVED_GROUPS[elem] and strategy in ("group", "tensor_group", ""):
        ctx.add("S318", where, f"{pre}.weight",
                f"{what}: group_size {gs} for {elem}; the kernels serve "
                f"{', '.join(map(str, SERVED_GROUPS[elem]))}", (f"declared by {src}",),
                {"group_size": gs, "element": elem, "served": list(SERVED_GROUPS[elem]),
                 "declared_by": src})
    if in_f is None or scale is None or len(scale[1]) < 1:
        return
    cols = scale[1][axis] if len(scale[1]) >= 2 else (1 if math.prod(scale[1]) <= 1 else None)
    if strategy == "tensor":
        want, how = 1, "strategy tensor: one scale"
        cols = math.prod(scale[1])
    elif strategy == "channel" or gs == -1:
        want, how = 1, "strategy channel: one scale per row"
    elif isinstance(gs, int) and gs > 0:
        if in_f % gs:
            want, how = None, f"group_size {gs} does not divide in_features {in_f}"
        else:
            want, how = in_f // gs, f"in_features {in_f} / group_size {gs} = {in_f // gs}"
    else:
        return
    if want is None or cols != want:
        k0 = in_f // cols if cols and not in_f % cols else None
        ctx.add("S311", where, f"{pre}.weight",
                f"{what}: {how}, but the scale tensor is {scale[0]} {list(scale[1])}",
                (f"declared by {src}",
                 f"the scales say k0 = {k0}" if k0 is not None
                 else "the scale columns do not divide in_features"),
                {"declared_group_size": gs, "strategy": strategy, "in_features": in_f,
                 "scale_shape": list(scale[1]), "scale_file": os.path.basename(scale[2]),
                 "declared_by": src, "scales_k0": k0})


def weight_names(ck: Checkpoint, modules: Sequence[str]) -> list[str]:
    """The tensor names scan reports for modules: the logical weight name (a
    recognised weight's, or the file's ``weight``), else the first leaf."""
    out = []
    for pre in modules:
        lv = ck.modules.get(pre, {})
        if {"weight", "weight_packed", "qweight"} & set(lv) or not lv:
            out.append(f"{pre}.weight")
        else:
            out.append(f"{pre}.{sorted(lv)[0]}")
    return out


def add_finding(ctx, code: str, where: str, ck: Checkpoint, modules: Sequence[str], message: str,
         lines: Sequence[str], detail: dict) -> None:
    names = weight_names(ck, modules)
    # the one shard that holds them all, else the checkpoint (as S301/S303 name it)
    files = {lf for pre in modules for (_, _, lf) in ck.modules.get(pre, {}).values()}
    ctx.add(code, next(iter(files)) if len(files) == 1 else where, names_label(names), message,
            tuple(lines), {**detail, "tensors": names})


def as_list(v: Any) -> list:
    return list(v) if isinstance(v, (list, tuple)) else []


def names_label(names: Sequence[str]) -> str:
    if len(names) == 1:
        return names[0]
    return f"{len(names)} tensors: " + ", ".join(names[:3]) + (", …" if len(names) > 3 else "")


def leaves_line(ck: Checkpoint, pre: str) -> str:
    lv = ck.modules.get(pre, {})
    return f"{pre}: " + ", ".join(f"{leaf} {d} {list(s)}" for leaf, (d, s, _) in sorted(lv.items()))



#: NVFP4's per-tensor scale: amax / (E2M1 max 6 · E4M3 max 448), the
#: multiplier ModelOpt stores; compressed-tensors stores its reciprocal, the
#: divisor 6·448 / amax
NVFP4_GLOBAL = 6 * 448


def scale_direction(tensor: str, value: float, stored_as: str) -> tuple | None:
    """The S322 finding of an NVFP4 per-tensor scale that reads as the other
    convention's direction, or None.  ``stored_as`` is how the convention
    applies it: ``"divisor"`` (compressed-tensors' ``weight_global_scale``
    g = 2688 / amax, ≫ 1 for any weight with amax < 2688) or
    ``"multiplier"`` (ModelOpt's ``weight_scale_2`` = amax / 2688, < 1).  A
    divisor below 1 or a multiplier above 1 means amax > 2688 under the
    convention's own reading, where the other reading gives an ordinary
    amax: the value was copied across without being inverted, and every
    weight decodes scaled by value² (or 1/value²)."""
    if not math.isfinite(value) or value <= 0:
        return None
    if stored_as == "divisor" and value < 1:
        own, other, other_name = NVFP4_GLOBAL / value, NVFP4_GLOBAL * value, "multiplier"
        factor = 1 / (value * value)
    elif stored_as == "multiplier" and value > 1:
        own, other, other_name = NVFP4_GLOBAL * value, NVFP4_GLOBAL / value, "divisor"
        factor = value * value
    else:
        return None
    lines = (f"{tensor} = {value!r}, applied as a {stored_as}: amax = "
             f"{'2688 / g' if stored_as == 'divisor' else '2688 · s'} = {own:.6g}",
             f"read as a {other_name} (the other convention's direction): amax = "
             f"{other:.6g}",
             f"decoded as stored, every element is {factor:.6g}× its value")
    return ("S322", f"{stored_as}>{other_name}",
            f"per-tensor scale {tensor} reads as the other convention's direction "
            f"(a {other_name} stored where a {stored_as} belongs)", lines,
            {"tensor": tensor, "value": value, "applied_as": stored_as,
             "amax_as_stored": own, "amax_other_direction": other, "factor": factor})


# ---------------------------------------------------------------------------
# emitting: GRIT arrays as a convention's tensors


def emit_planes(name: str, array: Any, convention: str) -> tuple[Any, tuple[Any, ...]]:
    """(grade, canonical planes) of a GRIT array a convention can write as
    row-major tensors: the groups along the last axis (``group_axis = rank −
    1``), the planes moved into the canonical placement.  Anything else is a
    :class:`~grit.errors.GritUsageError` naming the weight."""
    if not isinstance(array, GritArray):
        raise GritUsageError(f"{name}: {convention} holds GRIT arrays, not "
                             f"{type(array).__name__}")
    if len(array.shape) < 2 or array.descriptor.group_axis != len(array.shape) - 1:
        raise GritUsageError(
            f"{name}: {convention} groups along the last axis of a weight of rank ≥ 2; this "
            f"array has shape {list(array.shape)} and group axis "
            f"{array.descriptor.group_axis}")
    c = canonical(array)          # the array itself where it is canonical: no copy
    return c.grade, tuple(c.planes)


def refuse(name: str, convention: str, grade: Any, why: str) -> GritUsageError:
    """The error of a convention that cannot hold a grade (the caller raises it)."""
    return GritUsageError(f"{name}: {convention} cannot hold "
                          f"{getattr(grade, 'canonical', grade)}: {why}")


def decodes_as(grade: Any, template: str) -> bool:
    """Whether ``grade`` decodes as the grade ``template`` does (§4.5: equal
    decode projections; the encode rule and the accumulation contract do not
    matter to a file's bytes)."""
    return grade.decode_projection == Grade.parse(template).decode_projection


def unconverted_modules(plain: Mapping[str, Sequence[int]]) -> list[str]:
    """The modules whose 2-D ``….weight`` is written as a plain tensor (the
    layers a config names as not quantised: ``ignore``, ``exclude_modules``,
    ``modules_to_not_convert``), sorted; ``plain``: name -> shape."""
    return sorted(n[:-len(".weight")] for n, shape in plain.items()
                  if n.endswith(".weight") and len(shape) == 2)
