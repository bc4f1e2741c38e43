"""Recognising quantised safetensors checkpoints that carry no GRIT metadata.

:func:`recognise` looks at a safetensors header (names, dtypes, shapes, byte
lengths), the ``__metadata__`` map and the ``config.json`` beside the file, and
returns one :class:`Recognised` record per quantised weight it can identify:

* ``kind == "inferred"`` — a GRIT v1 descriptor for a layout v1 can express,
  with the file tensors that hold each plane, so that the §7.3 size equations
  can be run against the on-disk lengths and :meth:`Recognised.array` can build
  a :class:`~grit.array.GritArray` from the file;
* ``kind == "converted"`` — a weight v1 expresses although the file's bytes are
  not v1 planes in place (GPTQ, AWQ): ``section``/``reason`` say why for the
  bytes, and :meth:`Recognised.array` builds the planes;
* ``kind == "inexpressible"`` — a layout v1 cannot express, with the §0.3 item
  that excludes it and the arithmetic that shows it (never silently skipped).

Conventions recognised (docs/scan.md, "Recognising checkpoints without GRIT
metadata", has the table and every choice):

* compressed-tensors ``nvfp4-pack-quantized`` — ``weight_packed`` uint8
  [out, in/2] (E2M1 codes, element 2j in the low nibble: GRIT's LSB-first
  order, ROW_MAJOR), ``weight_scale`` float8_e4m3fn [out, in/16],
  ``weight_global_scale`` float32 [1].  The file stores g = 448·6/amax and
  decodes e·(s/g); GRIT's level-1 scale multiplies, so the scale1 plane is
  f32(1/g) — converted, 4 bytes — and the decode agrees bit-for-bit exactly
  when f32(s·f32(1/g)) == f32(s/g) for every E4M3 code s (see
  :func:`nvfp4_global_exact`);
* compressed-tensors ``mxfp4-pack-quantized`` — ``weight_packed`` as above,
  ``weight_scale`` uint8 E8M0 [out, in/32]: GRADE_MXFP4, zero-copy;
* compressed-tensors ``pack-quantized`` int4/int8, symmetric — ``weight_packed``
  int32 words of 32/b codes, element 8j+i at bits 4i (LSB-first consecutive,
  ROW_MAJOR), codes offset-binary (stored u = q + 2^(b−1)); the offset is a
  constant zero-point plane (``zp=u4``/``zp=u8``) synthesised at n_groups0
  bytes, as the GGUF reader does for Q4_0;
* asymmetric ``pack-quantized`` (zero points packed 8 to an int32 along the
  output axis) — inexpressible, §0.3d;
* GPTQ (AutoGPTQ ``pack``: ``qweight`` [in·b/32, out], ``qzeros`` [in/g,
  out·b/32], ``scales`` [in/g, out]; 2/4/8 bits) and AWQ GEMM (``qweight`` [in,
  out/8], nibble order 0,2,4,6,1,3,5,7) — ``kind == "converted"``: their bytes
  are not v1 planes (§0.3d, ``qzeros`` dense nibbles), and :meth:`Recognised.array`
  moves them into the canonical placement (:func:`gptq_awq_planes`), with
  ``zpc=minus1`` for GPTQ's v1 checkpoint format (it stores z − 1);
* compressed-tensors ``float-quantized`` FP8 — ``weight`` F8_E4M3 [out, in] (one
  code per byte, ROW_MAJOR, zero-copy), ``weight_scale`` F32/BF16/F16:
  ``channel`` ([out, 1]) is ``grit1(e=e4m3,k0=in,s0=…,esr=ratiomaxabs)`` when
  in ≤ 65535 (k0 is a uint16), ``group`` is k0 = group_size; ``tensor`` (one
  scale) is a single group of k0 = numel, expressible only when the tensor has
  one row and numel ≤ 65535; ``block`` (2-D blocks) is inexpressible, §3.7
  (v1 groups are 1-D runs along one axis);
* GPTQ act-order (a ``g_idx`` that is not i // group_size) — §0.3c;
* FNUZ FP8 dtypes in the header — §0.3a;
* bitsandbytes NF4/FP4 (``quant_map``, ``absmax``, ``quant_state``) — §0.3b;
* torchao tensor subclasses flattened for safetensors: the metadata key
  ``tensor_names`` (a JSON list) and, per weight ``<module>.<w>``, a JSON
  ``{"_type", "_data", "_tensor_data_names"}``; each component is the file
  tensor ``<module>._<w>_<component>``.  NVFP4Tensor (unswizzled scales),
  MXTensor (fp4 / fp8 elements, unswizzled), Float8Tensor (1-D blocks: per
  row, per group, or per tensor with one row) and Int8Tensor (symmetric, 1-D
  blocks) are inferred; tiled / opaque int4 layouts, swizzled scales, 2-D
  blocks and float zero points are reported.
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .. import descriptor as D
from .._files import open_regular
from ..array import GritArray
from ..errors import GritError, GritSizeError, GritUsageError
from ..formats import FormatFields, fmt_decode, fmt_pack, format_token, REGISTERED
from ..grade import Grade, lookup_grade, register_grade
from . import safetensors as _st
from .dtypes import ST_DTYPES
from .http import RemoteError
from .hub import is_remote, read_small

__all__ = ["recognise", "Recognised", "nvfp4_global_exact", "SCALE_FORMATS",
           "ST_DTYPE_BYTES", "read_config", "recognise_file", "SMALL_MAX",
           "with_recognised", "gptq_awq_planes", "AWQ_ORDER", "read_modelopt_config",
           "read_remote_config"]

#: the largest small tensor (a GPTQ g_idx, an NVFP4 global scale) the
#: recogniser reads to decide a convention
SMALL_MAX = 1 << 20
#: the largest config.json read beside a model file
MAX_CONFIG = 16 * 1024 * 1024


#: safetensors dtype -> bytes per element (the whole-byte types of grit.io.dtypes)
ST_DTYPE_BYTES = {n: d.itemsize for n, d in ST_DTYPES.items() if d.itemsize is not None}

#: bfloat16 as a parameterised §2 word (8-bit significand, IEEE inf/NaN); it has
#: no registered token, so grade strings spell it x350f
BF16_WORD = fmt_pack(FormatFields(w=16, p=8, has_inf=1, nan_enc=2, szero=1, unsigned=0))

#: the safetensors dtype of a scale tensor -> its §2 format token
SCALE_FORMATS = {"F16": "binary16", "F32": "binary32", "BF16": format_token(BF16_WORD),
                 "F8_E4M3": "e4m3", "U8": "e8m0", "F8_E8M0": "e8m0"}

#: a scale format token -> the numpy dtype of its little-endian values
_SCALE_NP = {"binary16": "<f2", "binary32": "<f4", format_token(BF16_WORD): "<u2"}

#: safetensors FP8 weight dtype -> its §2 element token (float-quantized)
_FP8_ELEMS = {"F8_E4M3": "e4m3", "F8_E5M2": "e5m2"}


def _product_notes(first: str, scale_name: str, sdt: str) -> list[str]:
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

_FNUZ = {"F8_E4M3FNUZ": "e4m3fnuz (bias 8, NaN at the negative-zero code 0x80)",
         "F8_E5M2FNUZ": "e5m2fnuz (bias 16, NaN at the negative-zero code 0x80)"}

Header = Mapping[str, tuple[str, Sequence[int], int]]
Reader = Callable[[str], "np.ndarray | None"]


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
    #: converted: (convention, bits, qweight, scales, qzeros) for gptq_awq_planes
    layout: tuple | None = None

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
                out.append(_n_groups0(self))
        return out

    def array(self, path: str, view: Callable[[str], Any] | None = None):
        """The recognised tensor read from the safetensors file at ``path``
        as a checked :class:`~grit.array.GritArray` (raises the §7.3
        GritError when the file's bytes disagree with the descriptor).

        File-backed planes are zero-copy views of a read-only memory map of
        the file (nothing is read into memory as a whole; a range past the
        end of the file is cut short, so that the size check reports it);
        ``view(tensor)``, when given, supplies those views instead (e.g.
        slices of a map the caller already holds).  Converted and
        synthesised planes are built (4 bytes for f32(1/g); n_groups0 bytes
        for a constant plane)."""
        if self.kind not in ("inferred", "converted") or self.descriptor is None:
            raise GritUsageError(f"{self.name}: {self.convention} is not a GRIT v1 array "
                                 f"({self.section}: {self.reason})")
        names = [p[1] for p in self.planes if p is not None and p[0] != "const"]
        if view is None:
            view = _st.read(path).view
        raw = {n: view(n) for n in names}
        if self.kind == "converted":
            return GritArray(self.descriptor, self.shape or (), self._converted(raw))
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
                planes.append(bytes([p[1]]) * _n_groups0(self))
        return GritArray(self.descriptor, self.shape or (), planes)

    def _converted(self, raw: Mapping[str, Any]) -> list:
        g = lookup_grade(self.descriptor.grade_id) if self.descriptor is not None else None
        if self.layout is None or self.shape is None or g is None:
            raise GritUsageError(f"{self.name}: no conversion recorded")
        kind, bits, qw, sc, qz = self.layout
        out_f, in_f = self.shape
        n_g = in_f // int(str(g["k0"]))
        per = 32 // bits
        sdt = np.dtype(_SCALE_NP[str(g["s0"])])
        word = np.dtype("<u4")
        want: dict[str, tuple[tuple[int, int], np.dtype]] = {
            qw: ((in_f // per, out_f) if kind == "gptq" else (in_f, out_f // per), word),
            sc: ((n_g, out_f), sdt), qz: ((n_g, out_f // per), word)}
        arrays = {}
        for tn, (shape, dt) in want.items():
            buf = memoryview(raw[tn]).cast("B")
            need = shape[0] * shape[1] * dt.itemsize
            if len(buf) != need:
                raise GritSizeError(f"{tn} holds {len(buf)} bytes, its shape {list(shape)} "
                                    f"needs {need} (is the file cut short?)")
            arrays[tn] = np.frombuffer(buf, dt).reshape(shape)
        data, scale0, aux = gptq_awq_planes(kind, bits, arrays[qw], arrays[sc], arrays[qz])
        return [data, scale0, b"", aux]

    def to_dict(self) -> dict:
        return {"name": self.name, "convention": self.convention, "kind": self.kind,
                "tensors": list(self.tensors), "shape": list(self.shape or ()) or None,
                "grade": self.grade, "section": self.section, "reason": self.reason,
                "lines": list(self.lines), "notes": list(self.notes)}


def _n_groups0(r: Recognised) -> int:
    g = lookup_grade(r.descriptor.grade_id) if r.descriptor is not None else None
    if g is None or not r.shape:
        return 0
    return math.prod(r.shape) // int(g["k0"])


def nvfp4_global_exact(g: float) -> tuple[bool, int]:
    """Whether f32(s·f32(1/g)) == f32(s/g) for every finite E4M3 code s —
    i.e. whether GRIT's multiplying level-1 scale f32(1/g) reproduces
    compressed-tensors' s/g bit-for-bit.  Returns (exact, codes that differ)."""
    gv = np.float32(g)
    r = np.float32(1.0) / gv
    bad = 0
    for code in range(256):
        s = np.float32(fmt_decode(REGISTERED["e4m3"], code))
        if np.isnan(s):
            continue
        a, b = np.float32(s * r), np.float32(s / gv)
        if a.tobytes() != b.tobytes():
            bad += 1
    return bad == 0, bad


# ---------------------------------------------------------------------------
# config.json: compressed-tensors quantization_config


def _qconfig(config: Mapping | None) -> dict:
    if not isinstance(config, Mapping):
        return {}
    q = config.get("quantization_config") or config.get("compression_config")
    return dict(q) if isinstance(q, Mapping) else {}


def _ct_scheme(q: dict, module: str) -> tuple[dict, str | None]:
    """(weights args, format) of the config group that covers ``module``:
    the group whose ``re:`` target matches it, else the only group."""
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping):
        return {}, q.get("format")
    cands = []
    for g in groups.values():
        if not isinstance(g, Mapping) or not isinstance(g.get("weights"), Mapping):
            continue
        cands.append(g)
        for t in g.get("targets") or ():
            if isinstance(t, str) and t.startswith("re:"):
                try:
                    if re.match(t[3:], module):
                        return dict(g["weights"]), g.get("format") or q.get("format")
                except re.error:
                    pass
    if len(cands) == 1:
        return dict(cands[0]["weights"]), cands[0].get("format") or q.get("format")
    return {}, q.get("format")


def _grade(text: str) -> Grade:
    g = register_grade(text)
    return lookup_grade(g.id) or g


def _desc(grade: Grade, shape: Sequence[int], has_zp: bool) -> D.Descriptor:
    return grade.descriptor(group_axis=len(shape) - 1)


# ---------------------------------------------------------------------------


def _json_beside(path: str, name: str) -> dict | None:
    """The JSON object in file ``name`` beside a model file (None: absent,
    larger than MAX_CONFIG, not JSON or not an object).  Beside a remote
    model file (http(s), hf://) the sibling is read remotely: absent is a
    404 (a name the repository listing lacks), any other failure a
    RemoteError."""
    cfg = os.path.join(os.path.dirname(os.fspath(path)), name)
    if is_remote(path):
        raw = read_small(cfg, MAX_CONFIG)
        if raw is None or len(raw) > MAX_CONFIG:
            return None
    else:
        try:
            if not os.path.isfile(cfg) or os.path.getsize(cfg) > MAX_CONFIG:
                return None
            with open_regular(cfg) as f:
                raw = f.read()
        except OSError:
            return None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def read_config(path: str) -> dict | None:
    """The ``config.json`` beside a model file (None: absent, too large,
    not a JSON object, or unreadable)."""
    try:
        return _json_beside(path, "config.json")
    except RemoteError:
        return None


def read_remote_config(path: str) -> dict | None:
    """As :func:`read_config` beside a remote model file, where a sibling
    that is there but cannot be read (anything but a 404) is the
    :class:`~grit.io.http.RemoteError` saying why, for the caller to
    report."""
    return _json_beside(path, "config.json")


def read_modelopt_config(path: str) -> dict | None:
    """The ``quantization`` object of ModelOpt's ``hf_quant_config.json``
    beside a model file (None: absent, too large, not JSON or no such
    object)."""
    try:
        doc = _json_beside(path, "hf_quant_config.json")
    except RemoteError:
        return None
    q = doc.get("quantization") if doc is not None else None
    return q if isinstance(q, dict) else None


def recognise_file(f: "_st.SafetensorsFile", config: Mapping | None) -> list[Recognised]:
    """:func:`recognise` over one safetensors file as read by
    :func:`grit.io.safetensors.read` (its entries with a dtype, a shape that
    fits int64 and a located span; small tensors read through the file's
    map, at most :data:`SMALL_MAX` bytes).  Never raises: a failure of the
    recogniser itself is one inexpressible record saying so."""
    header = {n: (e.dtype, e.shape, f.on_disk(n)) for n, e in f.entries.items()
              if e.dtype is not None and e.shape is not None and e.span is not None
              and all(x < 2**63 for x in e.shape)}
    try:
        return recognise(header, f.metadata, config, lambda tn: f.tensor_values(tn, SMALL_MAX))
    except (GritError, ValueError, KeyError, IndexError, TypeError, OverflowError) as e:
        # recognise() is written never to raise; should it, the file is still
        # readable and the failure is reported, never lost
        text = str(e).splitlines()[0] if str(e) else ""
        return [Recognised(os.path.basename(f.path), "unrecognised", "inexpressible",
                           section="§13", reason=f"the recogniser failed: "
                                                 f"{type(e).__name__}: {text}"[:300])]


def with_recognised(path, tensors: "_st.SafetensorsTensors", *,
                    strict: bool = True) -> "_st.SafetensorsTensors":
    """``tensors`` (what :func:`grit.io.safetensors.load` read from the file
    at ``path``) with each weight :func:`recognise` infers as one checked
    GritArray under its logical name, in place of the file tensors that hold
    its planes (at the position of the first of them); every other tensor,
    the inexpressible ones included, as it was.

    The result also carries ``.config`` (the config.json beside the file, or
    None) and ``.recognised`` (``{name: Recognised}``, inferred and
    inexpressible alike, so nothing the recogniser saw is silently dropped).
    A file with GRIT metadata is returned as it is (its descriptors are its
    own).  An inferred weight whose bytes fail the check raises that
    GritError naming the weight, or with ``strict=False`` stands as a
    :class:`~grit.io.safetensors.CheckFailed` record."""
    tensors.config = None
    tensors.recognised = {}
    if tensors.convention is not None:
        return tensors
    f = getattr(tensors, "_source", None) or _st.read(path)    # the header load parsed
    config = read_config(path)
    recs = recognise_file(f, config)
    out = _st.SafetensorsTensors()
    out.metadata, out.convention = tensors.metadata, tensors.convention
    out.config, out.recognised = config, {r.name: r for r in recs}
    first: dict[str, Recognised] = {}          # first file tensor -> its weight
    taken: set[str] = set()
    for r in recs:
        if r.kind not in ("inferred", "converted"):
            continue
        parts = [tn for tn in tensors if tn in r.tensors]
        if not parts:
            continue
        first[parts[0]] = r
        taken.update(parts)
    for name, value in tensors.items():
        r = first.get(name)
        if r is not None:
            try:
                out[r.name] = r.array(os.fspath(path), view=f.view)
            except GritError as err:
                e = _st.renamed_error(r.name, err)
                if strict:
                    raise e from None
                raw = {tn: f.view(tn) for tn in r.tensors if tn in f.entries}
                out[r.name] = _st.CheckFailed(r.name, e, r.descriptor.hex()
                                              if r.descriptor is not None else "",
                                              tuple(r.shape or ()), raw)
        elif name not in taken:
            out[name] = value
    return out


def recognise(header_tensors: Header, metadata: Mapping | None = None,
              config: Mapping | None = None, read: Reader | None = None) -> list[Recognised]:
    """Recognise the quantised weights of one safetensors file.

    ``header_tensors`` maps each tensor name to ``(dtype, shape, nbytes)``;
    ``metadata`` is the header's ``__metadata__``; ``config`` the parsed
    ``config.json`` beside the file (or None).  ``read(name)``, when given,
    returns a small tensor's values (a GPTQ ``g_idx``, an NVFP4 global scale)
    so that act-order and the global-scale exactness can be decided; without
    it those are judged from ``config`` alone.  Never raises on odd input:
    what it cannot place it leaves alone."""
    h = {n: v for n, v in header_tensors.items()
         if isinstance(v, tuple) and len(v) == 3}
    out: list[Recognised] = []
    q = _qconfig(config)
    method = str(q.get("quant_method", "")).lower()
    used: set[str] = set()

    # §0.3a: FNUZ FP8 anywhere in the header
    for n in sorted(h):
        dt = h[n][0]
        if dt in _FNUZ:
            used.add(n)
            out.append(Recognised(
                n, f"fp8-fnuz/{dt}", "inexpressible", (n,), section="§0.3a",
                reason=(f"dtype {dt}: {_FNUZ[dt]}; v1 fixes every exponent bias at "
                        "2^(e−1) − 1 (bias_ovr = 0) and has no nan_enc for a NaN at the "
                        "negative-zero code, so no grit_fmt_t word denotes it"),
                lines=(f"{n}: {dt} {list(h[n][1])}, {h[n][2]} bytes",)))

    # §0.3b: bitsandbytes 4-bit (NF4 / FP4) — a code book travels with the tensor
    for n in sorted(h):
        m = re.match(r"^(.*)\.quant_state\.bitsandbytes__(nf4|fp4)$", n)
        if not m:
            continue
        base, kind = m[1], m[2]
        parts = [t for t in h if t == base or t.startswith(base + ".")]
        used.update(parts)
        qm = base + ".quant_map"
        lines = [f"{t}: {h[t][0]} {list(h[t][1])}" for t in sorted(parts)]
        out.append(Recognised(
            base, f"bitsandbytes/{kind}", "inexpressible", tuple(sorted(parts)),
            section="§0.3b",
            reason=(f"bitsandbytes {kind.upper()}: each 4-bit code indexes the "
                    f"{h[qm][1][0] if qm in h and h[qm][1] else 16}-entry value table "
                    f"{qm!r} (a codebook), scaled by absmax; v1 has no codebook element class"),
            lines=tuple(lines)))

    # torchao tensor subclasses (torchao.prototype.safetensors): the metadata names them
    for r in _torchao_all(h, metadata):
        used.update(r.tensors)
        out.append(r)

    # module prefixes
    prefixes: dict[str, set[str]] = {}
    for n in h:
        if n in used or "." not in n:
            continue
        pre, leaf = n.rsplit(".", 1)
        prefixes.setdefault(pre, set()).add(leaf)

    for pre in sorted(prefixes):
        leaves = prefixes[pre]
        t = {leaf: pre + "." + leaf for leaf in leaves}
        try:
            if "weight_packed" in leaves and "weight_scale" in leaves:
                r = _compressed_tensors(pre, t, h, q, read)
            elif ("weight" in leaves and "weight_scale" in leaves
                  and h[t["weight"]][0] in _FP8_ELEMS):
                r = _ct_float8(pre, t, h, q)
            elif {"qweight", "qzeros", "scales"} <= leaves:
                r = _gptq_awq(pre, t, h, q, method, read)
            else:
                continue
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError,
                OverflowError) as e:
            r = [Recognised(pre + ".weight", "unrecognised", "inexpressible",
                            tuple(sorted(t.values())), section="§7.3",
                            reason=f"the tensors look quantised but their shapes do not "
                                   f"fit the convention ({type(e).__name__}: {e})"[:200])]
        out.extend(r)
    return out


# ---------------------------------------------------------------------------
# compressed-tensors


def _ct_declared_group(w: dict, in_features: int) -> int | None:
    gs = w.get("group_size")
    strat = str(w.get("strategy", "")).lower()
    if isinstance(gs, int) and not isinstance(gs, bool) and gs > 0:
        return gs
    if strat == "channel":
        return in_features
    return None


def _compressed_tensors(pre: str, t: dict, h: Header, q: dict,
                        read: Reader | None) -> list[Recognised]:
    wp, ws = t["weight_packed"], t["weight_scale"]
    pdt, pshape, _ = h[wp]
    sdt, sshape, _ = h[ws]
    w, fmt = _ct_scheme(q, pre)
    fmt = str(fmt or "").lower()
    name = pre + ".weight"
    files = tuple(sorted(t.values()))
    if len(pshape) != 2 or len(sshape) != 2 or sshape[1] == 0:
        raise ValueError(f"weight_packed {list(pshape)} / weight_scale {list(sshape)} "
                         "are not 2-D")
    out_f = pshape[0]

    if pdt == "U8":                      # FP4: two E2M1 codes per byte
        in_f = pshape[1] * 2
        nv = "weight_global_scale" in t or sdt == "F8_E4M3" or "nvfp4" in fmt
        if nv:
            conv = "compressed-tensors/nvfp4-pack-quantized"
            k0 = _ct_declared_group(w, in_f) or 16          # NVFP4's fixed group
            if sdt != "F8_E4M3":
                return [_inex(name, conv, files, "§2.6",
                              f"weight_scale is {sdt}; nvfp4 scales are float8_e4m3fn")]
            if "weight_global_scale" not in t:
                return [_inex(name, conv, files, "§7.3",
                              "no weight_global_scale tensor: the level-1 scale is missing")]
            g = _grade(f"grit1(e=e2m1,k0={k0},s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)")
            gs_name = t["weight_global_scale"]
            notes = [("declared-vs-actual: the file stores weight_global_scale g = 448·6/amax "
                      "and decodes e·(s/g); GRIT's level-1 scale multiplies (§8.1), so the "
                      "scale1 plane is f32(1/g), a 4-byte conversion of the file's value")]
            if read is not None:
                try:
                    gv = read(gs_name)
                except Exception:  # noqa: BLE001 - an unreadable scalar is just unknown
                    gv = None
                if gv is not None and np.size(gv) == 1:
                    ok, nbad = nvfp4_global_exact(float(np.asarray(gv).reshape(-1)[0]))
                    notes.append(
                        f"g = {float(np.asarray(gv).reshape(-1)[0])!r}: decode is bit-exact"
                        if ok else
                        f"g = {float(np.asarray(gv).reshape(-1)[0])!r}: f32(s·f32(1/g)) ≠ "
                        f"f32(s/g) for {nbad} of the 254 finite E4M3 codes — GRIT's decode "
                        "differs from compressed-tensors' by up to 1 ulp of S there")
            return [Recognised(
                name, conv, "inferred", files, (out_f, in_f), g.canonical,
                _desc(g, (out_f, in_f), False),
                (("file", wp), ("file", ws), ("global_recip", gs_name), None),
                lines=(f"weight_packed U8 {list(pshape)} -> shape [{out_f}, {in_f}], e2m1 "
                       "LSB-first (element 2j low nibble), ROW_MAJOR",
                       f"k0={k0} "
                       f"({'config group_size' if w.get('group_size') else 'nvfp4 default'})"),
                notes=tuple(notes))]
        conv = "compressed-tensors/mxfp4-pack-quantized"
        if sdt not in ("U8", "F8_E8M0"):
            return [_inex(name, conv, files, "§2.6",
                          f"weight_scale is {sdt}; mxfp4 scales are uint8 E8M0 exponents")]
        k0 = _ct_declared_group(w, in_f) or 32
        g = _grade(f"grit1(e=e2m1,k0={k0},s0=e8m0,esr=exp2floormaxabs)")
        return [Recognised(
            name, conv, "inferred", files, (out_f, in_f), g.canonical,
            _desc(g, (out_f, in_f), False), (("file", wp), ("file", ws), None, None),
            lines=(f"weight_packed U8 {list(pshape)} -> shape [{out_f}, {in_f}], e2m1 "
                   "LSB-first, ROW_MAJOR; weight_scale = E8M0 exponent (bias 127)",
                   f"k0={k0}"))]

    if pdt == "I32":                     # int pack-quantized: 32/b codes per int32 word
        conv = "compressed-tensors/pack-quantized"
        bits = w.get("num_bits")
        if bits not in (4, 8):
            bits = 4
        per = 32 // bits
        in_f = pshape[1] * per
        if "weight_shape" in t and read is not None:
            try:
                ws_v = read(t["weight_shape"])
                if ws_v is not None and np.size(ws_v) == 2:
                    out_f, in_f = (int(x) for x in np.asarray(ws_v).reshape(-1))
            except Exception:  # noqa: BLE001
                pass
        k0 = _ct_declared_group(w, in_f) or in_f // sshape[1]
        sym = w.get("symmetric", "weight_zero_point" not in t)
        n_groups0 = out_f * (in_f // k0) if k0 else 0
        if not sym or "weight_zero_point" in t:
            zp = t.get("weight_zero_point")
            zdt, zshape, zn = h[zp] if zp else ("?", [], 0)
            pred = n_groups0
            if bits == 8:
                return [_inex(
                    name, conv, files, "not inferred",
                    "asymmetric int8: the zero points fill CT_PAD8 bytes, but they are "
                    "packed 4 to an int32 along the output axis, so the aux plane's byte "
                    "order is (out/4, group, 4) — a relayout this version does not infer",
                    (f"aux: predicted {pred} bytes, present {zn} ({zdt} {list(zshape)})",))]
            return [_inex(
                name, conv, files, "§0.3d",
                f"asymmetric int{bits}: zero points are packed {per} to an int32 along the "
                f"output axis; v1 stores a sub-byte zero-point plane CT_PAD8, one per byte",
                (f"aux: predicted {pred} bytes (n_groups0 {pred} × 1 byte, PAD8), present "
                 f"{zn} ({zdt} {list(zshape)}, {per} codes per int32) — §0.3d",
                 f"n_groups0 = {out_f} × {in_f} / k0={k0} = {pred}"))]
        if sdt not in SCALE_FORMATS or sdt in ("U8", "F8_E8M0"):
            return [_inex(name, conv, files, "§2.6",
                          f"weight_scale dtype {sdt} has no v1 scale format here")]
        s0 = SCALE_FORMATS[sdt]
        g = _grade(f"grit1(e=u{bits},k0={k0},s0={s0},zp=u{bits},esr=ratiomaxabs)")
        off = 1 << (bits - 1)
        return [Recognised(
            name, conv, "inferred", files, (out_f, in_f), g.canonical,
            _desc(g, (out_f, in_f), True),
            (("file", wp), ("file", ws), None, ("const", off)),
            lines=(f"weight_packed I32 {list(pshape)} -> shape [{out_f}, {in_f}], "
                   f"u{bits} codes LSB-first ({per} per little-endian int32), ROW_MAJOR",
                   f"k0={k0}, s0={s0} ({sdt})"),
            notes=(f"codes are offset-binary (stored q + {off}); the offset is a constant "
                   f"zero-point plane of n_groups0 = {n_groups0} bytes of {off}, synthesised "
                   "(not in the file)",))]
    return [_inex(name, "compressed-tensors", files, "§7.3",
                  f"weight_packed dtype {pdt} is neither U8 (fp4) nor I32 (int pack)")]


def _ct_float8(pre: str, t: dict, h: Header, q: dict) -> list[Recognised]:
    """compressed-tensors float-quantized FP8: ``weight`` F8_E4M3 [out, in] and
    ``weight_scale`` (F32/BF16/F16) per tensor, channel, group or 2-D block."""
    wn, sn = t["weight"], t["weight_scale"]
    wdt, wshape, _ = h[wn]
    sdt, sshape, _ = h[sn]
    w, _fmt = _ct_scheme(q, pre)
    name = pre + ".weight"
    files = (wn, sn)
    conv = "compressed-tensors/float-quantized"
    if len(wshape) != 2:
        raise ValueError(f"weight {list(wshape)} is not 2-D")
    out_f, in_f = (int(x) for x in wshape)
    numel = out_f * in_f
    s_numel = math.prod(int(x) for x in sshape)
    strat = str(w.get("strategy", "")).lower()
    if strat not in ("tensor", "channel", "group", "block"):      # judge by the shapes
        if s_numel == 1:
            strat = "tensor"
        elif len(sshape) in (1, 2) and sshape[0] == out_f and s_numel == out_f:
            strat = "channel"
        elif len(sshape) == 2 and sshape[0] == out_f:
            strat = "group"
        elif len(sshape) == 2:
            strat = "block"
        else:
            raise ValueError(f"weight_scale {list(sshape)} fits no FP8 strategy for "
                             f"weight {list(wshape)}")
    conv = f"{conv}/{strat}"
    shape_line = (f"weight {wdt} {list(wshape)}, weight_scale {sdt} {list(sshape)} "
                  f"({s_numel} scale(s))")
    if strat == "block":
        bs = w.get("block_structure")
        if (isinstance(bs, (list, tuple)) and len(bs) == 2
                and all(isinstance(x, int) and x > 0 for x in bs)):
            bo, bi = int(bs[0]), int(bs[1])
            src = "config block_structure"
        elif len(sshape) == 2 and sshape[0] and sshape[1]:
            bo, bi = -(-out_f // int(sshape[0])), -(-in_f // int(sshape[1]))
            src = "from the shapes"
        else:
            bo = bi = 0
            src = "unknown"
        return [_inex(
            name, conv, files, "§3.7",
            f"2-D block scales ({bo}×{bi}, {src}): one scale covers {bo} rows × {bi} "
            "columns; v1 groups are 1-D runs of k0 consecutive elements along the group "
            "axis (g0 = lin(i) / k0), so a group cannot span rows",
            (shape_line,))]
    if sdt not in SCALE_FORMATS or sdt in ("U8", "F8_E8M0", "F8_E4M3"):
        return [_inex(name, conv, files, "§2.6",
                      f"weight_scale dtype {sdt} is not a float-quantized FP8 scale "
                      "(F32, BF16 or F16)", (shape_line,))]
    s0 = SCALE_FORMATS[sdt]
    if strat == "tensor":
        if numel <= K0_MAX and out_f == 1:
            k0, how = numel, f"per-tensor scale over numel = {numel} with a single row: k0 = numel"
        else:
            why = []
            if out_f != 1:
                why.append(f"k0 = numel = {out_f} × {in_f} = {numel} does not divide the "
                           f"group axis (shape[1] = {in_f}): a group cannot span rows")
            if numel > K0_MAX:
                why.append(f"numel = {numel} > {K0_MAX}, the largest k0 (a uint16)")
            return [_inex(
                name, conv, files, "§3.7",
                "per-tensor scale: one scale for the whole tensor is a single group of "
                f"k0 = numel elements, expressible in v1 only when every dimension but the "
                f"group axis is 1 and numel ≤ {K0_MAX} (k0 is a uint16)",
                (shape_line,) + tuple(why))]
    elif strat == "channel":
        k0, how = in_f, f"per-channel scale: k0 = in_features = {in_f}"
    else:
        gs = w.get("group_size")
        if isinstance(gs, int) and not isinstance(gs, bool) and gs > 0:
            k0, how = gs, f"k0 = {gs} (config group_size)"
        elif len(sshape) == 2 and sshape[1]:
            k0, how = in_f // int(sshape[1]), f"k0 = {in_f} / {sshape[1]} (from the shapes)"
        else:
            raise ValueError(f"weight_scale {list(sshape)}: no group size")
    if k0 > K0_MAX:
        return [_inex(name, conv, files, "§3.7",
                      f"{strat} scale needs k0 = {k0} > {K0_MAX}, the largest k0 "
                      "(the descriptor field is a uint16)", (shape_line, how))]
    e = _FP8_ELEMS[wdt]
    g = _grade(f"grit1(e={e},k0={k0},s0={s0},esr=ratiomaxabs)")
    notes = _product_notes("decode is f32(e·s) (§8.1), the float32 product of the FP8 code "
                           "and its scale, i.e. q.astype(float32) · scale", "weight_scale", sdt)
    return [Recognised(
        name, conv, "inferred", files, (out_f, in_f), g.canonical,
        _desc(g, (out_f, in_f), False), (("file", wn), ("file", sn), None, None),
        lines=(f"weight {wdt} [{out_f}, {in_f}] -> {e} codes, one per byte, ROW_MAJOR "
               f"(zero-copy); weight_scale -> s0={s0} ({sdt}, zero-copy)", how),
        notes=tuple(notes))]


def _inex(name, conv, files, section, reason, lines=()) -> Recognised:
    return Recognised(name, conv, "inexpressible", tuple(files), section=section,
                      reason=reason, lines=tuple(lines))


# ---------------------------------------------------------------------------
# GPTQ / AWQ


#: AutoAWQ's GEMM packing: nibble i of an int32 holds output column 8c + AWQ_ORDER[i]
#: (awq/modules/linear/gemm.py ``pack``; its unpack is AWQ_REVERSE_ORDER)
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
#: the widths whose codes tile an int32 exactly (GPTQ's 3-bit packing straddles words)
_GPTQ_BITS = (2, 4, 8)


def _gptq_awq(pre: str, t: dict, h: Header, q: dict, method: str,
              read: Reader | None) -> list[Recognised]:
    qw, qz, sc = t["qweight"], t["qzeros"], t["scales"]
    wdt, wshape, wn = h[qw]
    zdt, zshape, zn = h[qz]
    sdt, sshape, sn = h[sc]
    if len(wshape) != 2 or len(sshape) != 2 or len(zshape) != 2:
        raise ValueError("qweight/qzeros/scales are not 2-D")
    n_g, out_f = sshape
    bits = q.get("bits") or q.get("w_bit") or 4
    if not isinstance(bits, int) or isinstance(bits, bool) or not 1 <= bits <= 8:
        raise ValueError(f"bits = {bits!r} is not a width of 1 to 8")
    per = 32 // int(bits)
    if wshape[1] == out_f:                # GPTQ: qweight [in/8, out]
        conv, in_f = "gptq", wshape[0] * per
    elif wshape[1] * per == out_f:        # AWQ: qweight [in, out/8]
        conv, in_f = "awq", wshape[0]
    else:
        raise ValueError(f"qweight {list(wshape)} fits neither GPTQ [in/{per}, out] nor "
                         f"AWQ [in, out/{per}] against scales {list(sshape)}")
    kind = conv
    if method in ("gptq", "awq") and method != conv:
        conv = f"{conv} (config says {method})"
    if n_g <= 0 or in_f <= 0 or in_f % n_g:
        raise ValueError(f"{n_g} scale rows do not divide in_features = {in_f}")
    k0 = in_f // n_g
    numel = in_f * out_f
    n_groups0 = numel // k0
    s0 = SCALE_FORMATS.get(sdt, sdt)
    name = pre + ".weight"
    files = tuple(sorted(t.values()))
    lines = (f"aux: predicted {n_groups0} bytes (n_groups0 × 1 byte, PAD8), present {zn} "
             f"(dense nibbles) — §0.3d",
             f"n_groups0 = {in_f} × {out_f} / k0={k0} = {n_groups0}; qzeros {zdt} "
             f"{list(zshape)} = {zn} bytes, {per} zero points per int32",
             f"data: {(numel * int(bits) + 7) // 8} bytes predicted, {wn} present; scale0 "
             f"({s0}): {sn} present")
    rlines: tuple[str, ...]
    if int(bits) >= 8:
        section, reason, rlines = (
            "not inferred", f"{bits}-bit {kind.upper()}: qzeros fill CT_PAD8 bytes "
            f"({zn} present, {n_groups0} predicted), but qweight packs the codes down the "
            "input axis and qzeros across the output axis, so neither plane is the file's "
            "bytes in place", lines[1:])
    else:
        section, reason, rlines = (
            "§0.3d", f"{kind.upper()} packs qzeros as dense {bits}-bit codes, {per} per "
            f"int32; v1 stores a sub-byte zero-point plane CT_PAD8 (one per byte), so the "
            f"file holds {zn} aux bytes where the size equations require {n_groups0}", lines)
    out: list[Recognised] = []
    act, why = _act_order(t.get("g_idx"), k0, q, read)
    if act:
        out.append(_inex(name, conv, files, "§0.3c",
                         "act-order: g_idx assigns columns to groups out of order; §3.7 "
                         "groups are contiguous runs g0 = lin(i)/k0, and a permutation "
                         "changes decode, so it cannot be a placement (L1)", (why,)))
    # what keeps grit.load from converting the weight into a v1 array
    fmt = str(q.get("checkpoint_format", "gptq")).lower()
    v2 = fmt == "gptq_v2"
    version = str(q.get("version", "gemm")).lower()
    blockers = []
    if act:
        blockers.append("act-order (§0.3c)")
    elif act is None and "g_idx" in t:
        blockers.append("its g_idx could not be read, so act-order is undecided")
    if conv != kind:
        blockers.append(f"the tensor shapes say {kind}, the config {method}")
    if kind == "gptq" and fmt not in ("gptq", "gptq_v2"):
        blockers.append(f"checkpoint_format {fmt!r} is neither gptq nor gptq_v2")
    if kind == "gptq" and bits not in _GPTQ_BITS:
        blockers.append(f"{bits}-bit GPTQ codes straddle int32 words, not converted here")
    if kind == "awq" and (bits != 4 or version != "gemm"):
        blockers.append(f"AWQ {version} {bits}-bit: only the 4-bit GEMM packing is converted")
    if kind == "awq" and in_f % 2:
        blockers.append(f"in_features = {in_f} is odd: a row does not end on a byte")
    if out_f % per or tuple(zshape) != (n_g, out_f // per) or wdt not in ("I32", "U32") \
            or zdt not in ("I32", "U32"):
        blockers.append(f"qweight {wdt} {list(wshape)} / qzeros {zdt} {list(zshape)} do not "
                        f"fit [{n_g}, {out_f}] scales")
    if sdt not in ("F16", "BF16", "F32"):
        blockers.append(f"scales dtype {sdt} is not F16/BF16/F32")
    if k0 > K0_MAX:
        blockers.append(f"k0 = {k0} > {K0_MAX}, the largest k0 (a uint16)")
    if blockers:
        out.insert(0, _inex(name, conv, files, section,
                            reason + "; not converted by grit.load: " + "; ".join(blockers),
                            rlines))
        return out
    minus1 = kind == "gptq" and not v2
    g = _grade(f"grit1(e=u{bits},k0={k0},s0={s0},zp=u{bits}"
               f"{',zpc=minus1' if minus1 else ''},esr=affineminmax)")
    how = ("qweight's codes moved to [out, in] rows (LSB-first), scales and the qzeros "
           "unpacked one per byte transposed to [out, in/k0]")
    notes = [f"decode is f32(s·f32(q − z)) (§8.1, zps=shared), the float32 value of "
             f"{kind.upper()}'s (q − z)·s; a runtime that multiplies in {sdt} rounds it "
             f"once more to {sdt}"]
    if kind == "gptq":
        notes.append("checkpoint_format gptq_v2: qzeros are the zero points" if v2 else
                     "checkpoint_format gptq (v1): qzeros hold z − 1, so zpc=minus1 "
                     f"(ZP_MINUS1, §8.4) adds the one back; a stored {(1 << bits) - 1} reads "
                     f"as z = {1 << bits}")
    if kind == "awq":
        notes.append(f"AWQ GEMM nibble order: nibble i holds column 8c + {list(AWQ_ORDER)}[i]")
    out.insert(0, Recognised(
        name, conv, "converted", files, (out_f, in_f), g.canonical,
        _desc(g, (out_f, in_f), True), (("convert", qw), ("convert", sc), None,
                                         ("convert", qz)),
        section=section,
        reason=reason + f"; grit.load converts it into a v1 array ({how}): {g.canonical}",
        lines=rlines, notes=tuple(notes), layout=(kind, int(bits), qw, sc, qz)))
    return out


def _act_order(gi: str | None, k0: int, q: dict, read: Reader | None
               ) -> tuple[bool | None, str]:
    """Whether ``g_idx`` assigns input columns to groups out of order (None:
    undecided), and the arithmetic that shows it."""
    act, why = None, ""
    if gi is None:                    # no g_idx: the columns are in order unless declared
        act = False
    elif read is not None:
        try:
            v = read(gi)
        except Exception:  # noqa: BLE001
            v = None
        if v is not None:
            v = np.asarray(v).reshape(-1).astype(np.int64)
            trivial = np.arange(v.size, dtype=np.int64) // max(k0, 1)
            diff = np.nonzero(v != trivial)[0]
            act = bool(diff.size)
            if act:
                i = int(diff[0])
                why = (f"g_idx[{i}] = {int(v[i])}, contiguous grouping gives "
                       f"{i} // {k0} = {i // k0} ({diff.size} of {v.size} columns differ)")
    if (act is None or gi is None) and q.get("desc_act") is not None:
        act = bool(q.get("desc_act"))
        why = f"config desc_act = {q.get('desc_act')}"
    return act, why


def _shifted(words: np.ndarray, bits: int) -> np.ndarray:
    """The 32/bits codes of each little-endian int32 word, LSB first, on a new
    last axis."""
    per = 32 // bits
    w = words.astype("<u4", copy=False)[..., None]
    shifts = (np.arange(per, dtype=np.uint32) * np.uint32(bits))
    return ((w >> shifts) & np.uint32((1 << bits) - 1)).astype(np.uint8)


def gptq_awq_planes(kind: str, bits: int, qweight: np.ndarray, scales: np.ndarray,
                    qzeros: np.ndarray) -> tuple[bytes, bytes, bytes]:
    """The data, scale0 and aux planes of a GPTQ / AWQ weight in GRIT's
    canonical placement over the logical [out, in] shape: the codes row-major
    LSB-first, one scale and one zero point (CT_PAD8) per group of k0
    input columns, groups in g0 = lin(i)/k0 order.

    GPTQ (AutoGPTQ ``pack``): qweight [in/per, out], code (r·per + k, j) at
    bits k·b of word (r, j); qzeros [n_g, out/per], zero (g, c·per + k) at
    bits k·b of word (g, c).  AWQ GEMM (4-bit, in even): qweight [in, out/8]
    and qzeros [n_g, out/8], nibble i of word (r, c) holds column
    8c + AWQ_ORDER[i]."""
    w = qweight.astype("<u4", copy=False)
    zs = _shifted(qzeros, bits)                     # [n_g, out/per, per]
    if kind == "gptq":
        # the little-endian bytes of column j's words, top to bottom, are
        # already row j of the LSB-first stream: a transpose of words
        data = np.ascontiguousarray(w.T).tobytes()
        zero = zs.reshape(qzeros.shape[0], -1)
    else:
        wt = np.ascontiguousarray(w.T)              # [out/8, in]: word c of input row r
        lo, hi = wt[:, 0::2], wt[:, 1::2]           # input rows 2m and 2m + 1
        d = np.empty((wt.shape[0], 8, wt.shape[1] // 2), np.uint8)
        for i, col in enumerate(AWQ_ORDER):         # nibble i -> output row 8c + col
            sh = np.uint32(4 * i)
            d[:, col, :] = ((lo >> sh) & 15) | (((hi >> sh) & 15) << 4)
        data = d.tobytes()
        zc = np.empty_like(zs)
        zc[..., list(AWQ_ORDER)] = zs
        zero = zc.reshape(qzeros.shape[0], -1)
    return (data, np.ascontiguousarray(scales.T).tobytes(),
            np.ascontiguousarray(zero.T).astype(np.uint8).tobytes())


# ---------------------------------------------------------------------------
# torchao tensor subclasses (torchao.prototype.safetensors flatten_tensor_state_dict)

#: torchao subclasses whose flattened form is recognised, and those only reported
_TA_KNOWN = ("NVFP4Tensor", "MXTensor", "Float8Tensor", "Int8Tensor", "Int4Tensor",
             "Int4TilePackedTo4dTensor", "Int4OpaqueTensor", "Int4PlainInt32Tensor",
             "IntxUnpackedToInt8Tensor")


def _ta_json(v):
    if isinstance(v, (bytes, str)):
        try:
            return json.loads(v)
        except ValueError:
            return None
    return v


def _ta_attr(v):
    """A torchao-encoded attribute value: {"_type", "_data"} -> its _data."""
    if isinstance(v, Mapping) and "_type" in v and "_data" in v:
        return v["_data"]
    return v


def _torchao_all(h: Header, metadata: Mapping | None) -> list[Recognised]:
    if not isinstance(metadata, Mapping) or "tensor_names" not in metadata:
        return []
    names = _ta_json(metadata.get("tensor_names"))
    if not isinstance(names, list):
        return []
    out = []
    for tn in names:
        if not isinstance(tn, str) or "." not in tn:
            continue
        info = _ta_json(metadata.get(tn))
        if not isinstance(info, Mapping) or info.get("_type") not in _TA_KNOWN:
            continue
        mod, w = tn.rsplit(".", 1)
        data = info.get("_data") if isinstance(info.get("_data"), Mapping) else {}
        comps = info.get("_tensor_data_names")
        if not isinstance(comps, list):
            comps = []
        t = {c: f"{mod}._{w}_{c}" for c in comps if isinstance(c, str)}
        files = tuple(sorted(t.values()))
        conv = f"torchao/{info['_type']}"
        missing = [n for n in files if n not in h]
        if missing:
            out.append(_inex(tn, conv, files, "§7.3",
                             f"component tensor(s) {missing} named by the metadata are "
                             "not in this file (sharded across files?)"))
            continue
        try:
            out.append(_torchao_one(tn, info["_type"], conv, t, files, h, data))
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError,
                OverflowError) as e:
            out.append(Recognised(tn, "unrecognised", "inexpressible", files, section="§7.3",
                                  reason=f"torchao {info['_type']}: the tensors do not fit "
                                         f"the subclass ({type(e).__name__}: {e})"[:200]))
    return out


def _ta_lines(t: dict, h: Header) -> tuple[str, ...]:
    return tuple(f"{n}: {h[n][0]} {list(h[n][1])}, {h[n][2]} bytes" for n in sorted(t.values()))


def _torchao_one(tn, typ, conv, t, files, h, data) -> Recognised:
    lines = _ta_lines(t, h)
    opaque = ("not inferred: a kernel-specific packed layout; v1 could carry it only as an "
              "opaque placement word (class 0xF), which no reader can decode")
    if typ == "Int4TilePackedTo4dTensor":
        return _inex(tn, conv, files, "not inferred",
                     "tensor-core tiled int4 packing (4-D qdata for the tinygemm kernel, "
                     "scale and zero point packed together); " + opaque, lines)
    if typ == "Int4OpaqueTensor":
        return _inex(tn, conv, files, "not inferred",
                     "CPU-kernel int4 packing (opaque by name); " + opaque, lines)
    if typ == "Int4Tensor":
        zp = t.get("zero_point")
        zd = f"{h[zp][0]} {list(h[zp][1])}" if zp else "absent"
        return _inex(tn, conv, files, "§0.3d",
                     f"int4 with a per-group zero_point ({zd}) held as a floating value "
                     "beside the scale, not an integer code in a CT_PAD8 aux plane; v1 "
                     "zero points are integer codes one per byte", lines)
    if typ in ("Int4PlainInt32Tensor", "IntxUnpackedToInt8Tensor"):
        return _inex(tn, conv, files, "not inferred",
                     f"{typ}: its flattened safetensors form was not verified for this "
                     "version, so its placement is not inferred", lines)
    if typ == "NVFP4Tensor":
        return _ta_nvfp4(tn, conv, t, files, h, data, lines)
    if typ == "MXTensor":
        return _ta_mx(tn, conv, t, files, h, data, lines)
    if typ == "Float8Tensor":
        return _ta_float8(tn, conv, t, files, h, data, lines, "F8")
    return _ta_float8(tn, conv, t, files, h, data, lines, "I8")


def _ta_fp4_shape(q: str, h: Header) -> tuple[int, int]:
    dt, shape, _ = h[q]
    if dt != "U8" or len(shape) != 2:
        raise ValueError(f"qdata {dt} {list(shape)} is not U8 [rows, cols/2]")
    return int(shape[0]), int(shape[1]) * 2


def _swizzled(tn, conv, files, lines) -> Recognised:
    """torchao's swizzled scales: not row-major, and v1 registers no placement
    for the cuBLAS 128×4 tile order of a safetensors scale tensor."""
    return _inex(tn, conv, files, "not inferred",
                 "swizzled (blocked 128×4) scales: the scale order is the cuBLAS tile "
                 "layout, not row-major; v1 has no placement for it", lines)


def _ta_nvfp4(tn, conv, t, files, h, data, lines) -> Recognised:
    q, s = t["qdata"], t["_scale_e4m3"]
    if _ta_attr(data.get("_is_swizzled_scales")):
        return _swizzled(tn, conv, files, lines)
    out_f, in_f = _ta_fp4_shape(q, h)
    k0 = int(_ta_attr(data.get("_block_size")) or 16)
    if h[s][0] != "F8_E4M3":
        return _inex(tn, conv, files, "§2.6", f"_scale_e4m3 is {h[s][0]}, not float8_e4m3fn",
                     lines)
    pts = t.get("_per_tensor_scale")
    ln = (f"qdata U8 [{out_f}, {in_f // 2}] -> shape [{out_f}, {in_f}], e2m1, element 2j "
          "in the low nibble (LSB-first), ROW_MAJOR", f"k0 = _block_size = {k0}")
    if pts is None:
        g = _grade(f"grit1(e=e2m1,k0={k0},s0=e4m3,esr=ratiomaxabs)")
        planes = (("file", q), ("file", s), None, None)
        notes = ()
    else:
        pdt, pshape, _ = h[pts]
        if pdt != "F32" or math.prod(int(x) for x in pshape) != 1:
            return _inex(tn, conv, files, "§2.6",
                         f"_per_tensor_scale {pdt} {list(pshape)} is not one float32", lines)
        g = _grade(f"grit1(e=e2m1,k0={k0},s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)")
        planes = (("file", q), ("file", s), ("file", pts), None)
        notes = ("the per-tensor scale multiplies (torchao decodes e·(p·s)), as GRIT's "
                 "level-1 scale does: the scale1 plane is the file's 4 bytes, zero-copy; "
                 "torchao rounds p·s to the original dtype when that is bf16/f16, GRIT "
                 "keeps it in float32",)
    return Recognised(tn, conv, "inferred", files, (out_f, in_f), g.canonical,
                      _desc(g, (out_f, in_f), False), planes, lines=lines + ln, notes=notes)


_TA_MX_ELEMS = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}


def _ta_mx(tn, conv, t, files, h, data, lines) -> Recognised:
    q, s = t["qdata"], t["scale"]
    if _ta_attr(data.get("_is_swizzled_scales")):
        return _swizzled(tn, conv, files, lines)
    el = str(_ta_attr(data.get("_elem_dtype")))
    k0 = int(_ta_attr(data.get("block_size")) or 32)
    if h[s][0] not in ("U8", "F8_E8M0"):
        return _inex(tn, conv, files, "§2.6", f"scale is {h[s][0]}, not E8M0", lines)
    if el == "float4_e2m1fn_x2":
        out_f, in_f = _ta_fp4_shape(q, h)
        e, ln = "e2m1", "e2m1, element 2j in the low nibble (LSB-first)"
    elif el in _TA_MX_ELEMS and h[q][0] in _FP8_ELEMS and len(h[q][1]) == 2:
        out_f, in_f = (int(x) for x in h[q][1])
        e, ln = _TA_MX_ELEMS[el], "one code per byte"
    else:
        return _inex(tn, conv, files, "not inferred",
                     f"MX element dtype {el} with qdata {h[q][0]}: its packing was not "
                     "verified for this version", lines)
    g = _grade(f"grit1(e={e},k0={k0},s0=e8m0,esr=exp2floormaxabs)")
    return Recognised(tn, conv, "inferred", files, (out_f, in_f), g.canonical,
                      _desc(g, (out_f, in_f), False), (("file", q), ("file", s), None, None),
                      lines=lines + (f"qdata -> shape [{out_f}, {in_f}], {ln}, ROW_MAJOR; "
                                     f"scale = E8M0 exponent (bias 127), k0 = {k0}",),
                      notes=("esr names one scale rule; torchao's ScaleCalculationMode "
                             "changes only how scales were chosen, not the decode",))


def _ta_float8(tn, conv, t, files, h, data, lines, kind) -> Recognised:
    q, s = t["qdata"], t["scale"]
    if "zero_point" in t:
        return _inex(tn, conv, files, "§0.3d", "a zero_point component beside an "
                     f"{kind} qdata: not the symmetric form this version infers", lines)
    qdt, shape, _ = h[q]
    shape = tuple(int(x) for x in shape)
    if kind == "F8" and qdt not in _FP8_ELEMS:
        raise ValueError(f"qdata is {qdt}, not FP8")
    if kind == "I8" and qdt != "I8":
        raise ValueError(f"qdata is {qdt}, not int8")
    if not shape:
        raise ValueError("qdata is 0-D")
    sdt, sshape, _ = h[s]
    s_numel = math.prod(int(x) for x in sshape)
    numel = math.prod(shape)
    bs = _ta_attr(data.get("block_size"))
    if isinstance(bs, list) and len(bs) == len(shape) and all(isinstance(x, int) for x in bs):
        bs = tuple(bs)
    else:                                   # judge by the shapes (per tensor / per row)
        gran = str(_ta_attr(data.get("granularity")) or "")
        if s_numel == 1 or "PerTensor" in gran:
            bs = shape
        elif s_numel == numel // shape[-1]:
            bs = (1,) * (len(shape) - 1) + (shape[-1],)
        else:
            raise ValueError(f"scale {list(sshape)}: no block_size and not per row/tensor")
    shape_line = f"block_size {list(bs)}, scale {sdt} {list(sshape)} ({s_numel} scale(s))"
    if sdt not in ("F32", "BF16", "F16"):
        return _inex(tn, conv, files, "§2.6", f"scale dtype {sdt} is not F32/BF16/F16",
                     lines + (shape_line,))
    if any(b != 1 for b in bs[:-1]):
        if all(b == n for b, n in zip(bs, shape)) and numel <= K0_MAX and \
                all(n == 1 for n in shape[:-1]):
            pass                            # per tensor over a single row: k0 = numel
        else:
            what = ("per-tensor scale: one group of k0 = numel = "
                    f"{numel}, which spans rows" if tuple(bs) == shape else
                    f"2-D block scales ({' × '.join(map(str, bs))})")
            return _inex(tn, conv, files, "§3.7",
                         f"{what}; v1 groups are 1-D runs of k0 consecutive elements along "
                         "the group axis (g0 = lin(i) / k0), so a group cannot span rows",
                         lines + (shape_line,))
    k0 = int(bs[-1])
    if k0 <= 0 or shape[-1] % k0:
        raise ValueError(f"block {k0} does not divide the last axis {shape[-1]}")
    if k0 > K0_MAX:
        return _inex(tn, conv, files, "§3.7", f"k0 = {k0} > {K0_MAX}, the largest k0 "
                     "(a uint16)", lines + (shape_line,))
    e = _FP8_ELEMS[qdt] if kind == "F8" else "s8"
    g = _grade(f"grit1(e={e},k0={k0},s0={SCALE_FORMATS[sdt]},esr=ratiomaxabs)")
    notes = _product_notes("decode is f32(q·scale), as torchao's dequantize (qdata to "
                           "float32 times the block's scale)", "scale", sdt)
    return Recognised(tn, conv, "inferred", files, shape, g.canonical,
                      _desc(g, shape, False), (("file", q), ("file", s), None, None),
                      lines=lines + (shape_line, f"k0 = {k0}, {e} one code per byte, "
                                     "ROW_MAJOR, zero-copy"), notes=tuple(notes))
