"""The names the ecosystem gives grades, resolved to GRIT grades in one table.

A quantised weight is known outside GRIT by the name of its format: ggml's
block types (``Q4_K``, ``Q8_0`` …), the OCP Microscaling formats (``MXFP4``,
``MXFP6_E2M3``, ``MXFP8_E4M3`` …), NVIDIA's ``NVFP4``, and the scaled FP8 and
integer weights of compressed-tensors, ModelOpt, GPTQ (``FP8``, ``INT8``,
``INT4``).  :data:`NAMES` holds each one once, with the grade it denotes:

* a **fixed** name denotes one grade.  ggml's names are read from the ggml
  records themselves (:data:`grit.ggml.TYPES`: each type's ``grade_text``),
  never restated; ``ggml:NAME`` always means ggml's record.  A bare name that
  two sources use means the format as its owner defines it: ``NVFP4`` is
  NVIDIA's two-level format (E2M1 codes, an E4M3 scale per 16 elements and
  one binary32 scale per tensor: GRADE_NVF4, what ModelOpt,
  compressed-tensors' ``nvfp4-pack-quantized`` and llama.cpp with the
  tensor's ``.scale`` companion hold), ``ggml:NVFP4`` the bare ggml blocks;
* a **family** has its group size from the tensor (FP8 per channel: the row
  length), so it is resolved with it: ``fp8(k0=4096)``, and the scale format
  when it is not binary32: ``int8(k0=128,s0=binary16)``.

:func:`grade_named` resolves a name (a grade string and a registered grade
name as :func:`grit.grade.grade_from` does, then this table, case
insensitively); :func:`names_of` is the reverse (the names a grade is known
by), which ``grit info`` and ``grit grade`` print beside the grade.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import GritError, GritUsageError
from .ggml import TYPES as _GGML
from .grade import Grade, grade_from

__all__ = ["Named", "NAMES", "grade_named", "names_of", "lookup_name", "GGML_PREFIX"]

#: the prefix naming ggml's record of a type explicitly (``ggml:NVFP4``)
GGML_PREFIX = "ggml:"

#: the OCP Microscaling v1.0 element of each MX format: 32 elements share one
#: E8M0 scale, the shared exponent floor(log2(amax)) − emax(element)
_MX = {"MXFP4": "e2m1", "MXFP6_E2M3": "e2m3", "MXFP6_E3M2": "e3m2", "MXFP8_E4M3": "e4m3",
       "MXFP8_E5M2": "e5m2"}
_MX_GRADE = "grit1(e={e},k0=32,s0=e8m0,esr=exp2floormaxabs)"


@dataclass(frozen=True)
class Named:
    """One name of the table: ``grade_text`` for a fixed name, ``template``
    (with ``{k0}`` and ``{s0}``) for a family; ``source`` says whose name it
    is, ``aliases`` the other spellings (case does not matter)."""

    name: str
    source: str
    what: str
    grade_text: str | None = None
    template: str | None = None
    aliases: tuple[str, ...] = ()

    @property
    def family(self) -> bool:
        return self.template is not None

    def grade(self, k0: int | None = None, s0: str | None = None) -> Grade:
        """The grade this name denotes (a family's with ``k0`` and ``s0``,
        s0 binary32 unless given)."""
        if self.template is None:
            if k0 is not None or s0 is not None:
                raise GritUsageError(f"{self.name} is one grade; it takes no k0 or s0")
            return Grade.parse(self.grade_text or "")
        if k0 is None:
            raise GritUsageError(
                f"{self.name} ({self.what}) has its group size from the tensor: give it, "
                f"e.g. {self.name.lower()}(k0=4096) (s0 is binary32 unless given: "
                f"{self.name.lower()}(k0=128,s0=binary16))")
        return Grade.parse(self.template.format(k0=k0, s0=s0 or "binary32"))


def _table() -> dict[str, Named]:
    out: dict[str, Named] = {}

    def add(n: Named) -> None:
        for key in (n.name, *n.aliases):
            k = key.lower()
            if k in out:         # a name is defined once
                raise AssertionError(f"ecosystem name {key} defined twice")
            out[k] = n
    for name, e in _MX.items():
        add(Named(name, "OCP MX v1.0", f"{e.upper()} elements, one E8M0 scale per 32",
                  grade_text=_MX_GRADE.format(e=e),
                  aliases=(("MXFP8", "mxfp8-quantized") if name == "MXFP8_E4M3" else
                           ("mxfp4-pack-quantized",) if name == "MXFP4" else ())))
    add(Named("NVFP4", "NVIDIA", "E2M1 elements, one E4M3 scale per 16, one binary32 scale "
                                 "per tensor", aliases=("nvfp4-pack-quantized", "NVF4"),
              grade_text="grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)"))
    add(Named("FP8", "FP8 (OCP 8-bit floating point)",
              "E4M3 elements, one scale per group of k0", aliases=(
                  "FP8_E4M3", "E4M3", "F8_E4M3", "float8_e4m3fn", "float-quantized"),
              template="grit1(e=e4m3,k0={k0},s0={s0},esr=ratiomaxabs)"))
    add(Named("FP8_E5M2", "FP8 (OCP 8-bit floating point)",
              "E5M2 elements, one scale per group of k0", aliases=(
                  "E5M2", "F8_E5M2", "float8_e5m2"),
              template="grit1(e=e5m2,k0={k0},s0={s0},esr=ratiomaxabs)"))
    add(Named("INT8", "symmetric integer", "signed 8-bit codes, one scale per group of k0",
              aliases=("int-quantized", "W8A8", "W8A16"),
              template="grit1(e=s8,k0={k0},s0={s0},esr=ratiomaxabs)"))
    add(Named("INT4", "symmetric integer (offset binary, as GPTQ and compressed-tensors "
                      "store it)", "unsigned 4-bit codes less a constant zero point, one "
                               "scale per group of k0", aliases=("W4A16", "pack-quantized"),
              template="grit1(e=u4,k0={k0},s0={s0},zp=u4,esr=ratiomaxabs)"))
    for name, rec in _GGML.items():
        if name.lower() not in out:
            add(Named(name, "ggml", f"ggml block type {name}", grade_text=rec.grade_text))
    return out


#: every name (and alias), lower case -> its record
NAMES: dict[str, Named] = _table()

_PARAMS = re.compile(r"^(?P<name>[^()]+?)\s*(?:\((?P<args>[^()]*)\))?$")


def lookup_name(text: str) -> Named | None:
    """The record of an ecosystem name (``ggml:NAME``: ggml's own record),
    or None."""
    key = text.strip().lower()
    if key.startswith(GGML_PREFIX):
        rec = next((r for n, r in _GGML.items() if n.lower() == key[len(GGML_PREFIX):]), None)
        return None if rec is None else Named(rec.name, "ggml", f"ggml block type {rec.name}",
                                              grade_text=rec.grade_text)
    return NAMES.get(key)


def grade_named(text: str) -> Grade:
    """The grade ``text`` names: a grade string or a registered grade name
    (:func:`grit.grade.grade_from`), else an ecosystem name of :data:`NAMES`,
    a family's with its parameters (``fp8(k0=4096)``,
    ``int8(k0=128,s0=binary16)``).  GritUsageError when it names none."""
    if not isinstance(text, str):
        raise GritUsageError(f"a grade name is a str, got {type(text).__name__}")
    s = text.strip()
    if s.lower().startswith("grit1("):
        return grade_from(s)
    m = _PARAMS.match(s)
    rec = lookup_name(m["name"]) if m is not None else None
    if rec is None or m is None:
        try:
            return grade_from(s)
        except GritError:
            pass
        raise GritUsageError(
            f"{text!r} is not a grade string (grit1(...)), a registered grade name "
            f"(GRADE_MXFP4, mxfp4) or an ecosystem name ({', '.join(_shown())} …; "
            "docs/info.md lists them)")
    args: dict[str, str] = {}
    for part in filter(None, (m["args"] or "").split(",")):
        k, eq, v = part.partition("=")
        k, v = k.strip().lower(), v.strip()
        if not eq or k not in ("k0", "s0") or k in args:
            raise GritUsageError(f"{text!r}: parameters are k0=N and s0=FORMAT, once each")
        args[k] = v
    k0 = args.get("k0")
    if k0 is not None and not k0.isdigit():
        raise GritUsageError(f"{text!r}: k0 is a whole number of elements, got {k0!r}")
    return rec.grade(int(k0) if k0 is not None else None, args.get("s0"))


def _shown() -> list[str]:
    return ["Q4_K", "Q8_0", "MXFP4", "MXFP8", "NVFP4", "FP8(k0=…)", "INT8(k0=…)"]


def names_of(grade: Grade) -> list[str]:
    """The ecosystem names ``grade`` is known by: the one-grade names, then
    the families (with their parameters: ``FP8(k0=4096)``), then ggml's records as
    ``ggml:NAME`` where the bare name means another grade."""
    out: list[str] = []
    records = list({id(r): r for r in NAMES.values()}.values())
    for rec in records:                          # the one-grade names first
        if rec.template is None and Grade.parse(rec.grade_text or "") == grade:
            out.append(rec.name)
    for rec in records:
        if rec.template is None:
            continue
        k0, s0 = grade["k0"], grade["s0"]
        try:
            if k0 is not None and s0 is not None and rec.grade(int(k0), s0) == grade:
                out.append(f"{rec.name}(k0={k0})" if s0 == "binary32"
                           else f"{rec.name}(k0={k0},s0={s0})")
        except GritError:
            continue
    for name, block in _GGML.items():
        if NAMES.get(name.lower()) is not None and NAMES[name.lower()].source != "ggml" and \
                Grade.parse(block.grade_text) == grade:
            out.append(GGML_PREFIX + name)
    return out
