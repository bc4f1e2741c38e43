"""torchao tensor subclasses flattened for safetensors
(``torchao.prototype.safetensors``): the metadata key ``tensor_names`` (a
JSON list) and, per weight ``<module>.<w>``, a JSON ``{"_type", "_data",
"_tensor_data_names"}``; each component is the file tensor
``<module>._<w>_<component>``.  NVFP4Tensor (unswizzled scales), MXTensor
(fp4 / fp8 elements, unswizzled), Float8Tensor (1-D blocks: per row, per
group, or per tensor with one row) and Int8Tensor (symmetric, 1-D blocks)
are inferred; tiled / opaque int4 layouts, swizzled scales, 2-D blocks and
float zero points are reported.
"""
from __future__ import annotations

import json
import math
from typing import Mapping

from .base import (Convention, FP8_ELEMS, K0_MAX, SCALE_FORMATS, Header, Reader, Recognised,
                   descriptor_for, grade_of, inexpressible, product_notes)

__all__ = ["CONVENTION"]

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


def recognise_header(h: Header, metadata: Mapping | None, q: dict,
                     read: Reader | None) -> list[Recognised]:
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
            out.append(inexpressible(tn, conv, files, "§7.3",
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
        return inexpressible(tn, conv, files, "not inferred",
                     "tensor-core tiled int4 packing (4-D qdata for the tinygemm kernel, "
                     "scale and zero point packed together); " + opaque, lines)
    if typ == "Int4OpaqueTensor":
        return inexpressible(tn, conv, files, "not inferred",
                     "CPU-kernel int4 packing (opaque by name); " + opaque, lines)
    if typ == "Int4Tensor":
        zp = t.get("zero_point")
        zd = f"{h[zp][0]} {list(h[zp][1])}" if zp else "absent"
        return inexpressible(tn, conv, files, "§0.3d",
                     f"int4 with a per-group zero_point ({zd}) held as a floating value "
                     "beside the scale, not an integer code in a CT_PAD8 aux plane; v1 "
                     "zero points are integer codes one per byte", lines)
    if typ in ("Int4PlainInt32Tensor", "IntxUnpackedToInt8Tensor"):
        return inexpressible(tn, conv, files, "not inferred",
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
    return inexpressible(tn, conv, files, "not inferred",
                 "swizzled (blocked 128×4) scales: the scale order is the cuBLAS tile "
                 "layout, not row-major; v1 has no placement for it", lines)


def _ta_nvfp4(tn, conv, t, files, h, data, lines) -> Recognised:
    q, s = t["qdata"], t["_scale_e4m3"]
    if _ta_attr(data.get("_is_swizzled_scales")):
        return _swizzled(tn, conv, files, lines)
    out_f, in_f = _ta_fp4_shape(q, h)
    k0 = int(_ta_attr(data.get("_block_size")) or 16)
    if h[s][0] != "F8_E4M3":
        return inexpressible(tn, conv, files, "§2.6",
                             f"_scale_e4m3 is {h[s][0]}, not float8_e4m3fn", lines)
    pts = t.get("_per_tensor_scale")
    ln = (f"qdata U8 [{out_f}, {in_f // 2}] -> shape [{out_f}, {in_f}], e2m1, element 2j "
          "in the low nibble (LSB-first), ROW_MAJOR", f"k0 = _block_size = {k0}")
    if pts is None:
        g = grade_of(f"grit1(e=e2m1,k0={k0},s0=e4m3,esr=ratiomaxabs)")
        planes = (("file", q), ("file", s), None, None)
        notes = ()
    else:
        pdt, pshape, _ = h[pts]
        if pdt != "F32" or math.prod(int(x) for x in pshape) != 1:
            return inexpressible(tn, conv, files, "§2.6",
                         f"_per_tensor_scale {pdt} {list(pshape)} is not one float32", lines)
        g = grade_of(f"grit1(e=e2m1,k0={k0},s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)")
        planes = (("file", q), ("file", s), ("file", pts), None)
        notes = ("the per-tensor scale multiplies (torchao decodes e·(p·s)), as GRIT's "
                 "level-1 scale does: the scale1 plane is the file's 4 bytes, zero-copy; "
                 "torchao rounds p·s to the original dtype when that is bf16/f16, GRIT "
                 "keeps it in float32",)
    return Recognised(tn, conv, "inferred", files, (out_f, in_f), g.canonical,
                      descriptor_for(g, (out_f, in_f), False), planes, lines=lines + ln,
                      notes=notes)


_TA_MX_ELEMS = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}


def _ta_mx(tn, conv, t, files, h, data, lines) -> Recognised:
    q, s = t["qdata"], t["scale"]
    if _ta_attr(data.get("_is_swizzled_scales")):
        return _swizzled(tn, conv, files, lines)
    el = str(_ta_attr(data.get("_elem_dtype")))
    k0 = int(_ta_attr(data.get("block_size")) or 32)
    if h[s][0] not in ("U8", "F8_E8M0"):
        return inexpressible(tn, conv, files, "§2.6", f"scale is {h[s][0]}, not E8M0", lines)
    if el == "float4_e2m1fn_x2":
        out_f, in_f = _ta_fp4_shape(q, h)
        e, ln = "e2m1", "e2m1, element 2j in the low nibble (LSB-first)"
    elif el in _TA_MX_ELEMS and h[q][0] in FP8_ELEMS and len(h[q][1]) == 2:
        out_f, in_f = (int(x) for x in h[q][1])
        e, ln = _TA_MX_ELEMS[el], "one code per byte"
    else:
        return inexpressible(tn, conv, files, "not inferred",
                     f"MX element dtype {el} with qdata {h[q][0]}: its packing was not "
                     "verified for this version", lines)
    g = grade_of(f"grit1(e={e},k0={k0},s0=e8m0,esr=exp2floormaxabs)")
    return Recognised(tn, conv, "inferred", files, (out_f, in_f), g.canonical,
                      descriptor_for(g, (out_f, in_f), False),
                      (("file", q), ("file", s), None, None),
                      lines=lines + (f"qdata -> shape [{out_f}, {in_f}], {ln}, ROW_MAJOR; "
                                     f"scale = E8M0 exponent (bias 127), k0 = {k0}",),
                      notes=("esr names one scale rule; torchao's ScaleCalculationMode "
                             "changes only how scales were chosen, not the decode",))


def _ta_float8(tn, conv, t, files, h, data, lines, kind) -> Recognised:
    q, s = t["qdata"], t["scale"]
    if "zero_point" in t:
        return inexpressible(tn, conv, files, "§0.3d", "a zero_point component beside an "
                     f"{kind} qdata: not the symmetric form this version infers", lines)
    qdt, shape, _ = h[q]
    shape = tuple(int(x) for x in shape)
    if kind == "F8" and qdt not in FP8_ELEMS:
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
        return inexpressible(tn, conv, files, "§2.6", f"scale dtype {sdt} is not F32/BF16/F16",
                     lines + (shape_line,))
    if any(b != 1 for b in bs[:-1]):
        if all(b == n for b, n in zip(bs, shape)) and numel <= K0_MAX and \
                all(n == 1 for n in shape[:-1]):
            pass                            # per tensor over a single row: k0 = numel
        else:
            what = ("per-tensor scale: one group of k0 = numel = "
                    f"{numel}, which spans rows" if tuple(bs) == shape else
                    f"2-D block scales ({' × '.join(map(str, bs))})")
            return inexpressible(tn, conv, files, "§3.7",
                         f"{what}; v1 groups are 1-D runs of k0 consecutive elements along "
                         "the group axis (g0 = lin(i) / k0), so a group cannot span rows",
                         lines + (shape_line,))
    k0 = int(bs[-1])
    if k0 <= 0 or shape[-1] % k0:
        raise ValueError(f"block {k0} does not divide the last axis {shape[-1]}")
    if k0 > K0_MAX:
        return inexpressible(tn, conv, files, "§3.7", f"k0 = {k0} > {K0_MAX}, the largest k0 "
                     "(a uint16)", lines + (shape_line,))
    e = FP8_ELEMS[qdt] if kind == "F8" else "s8"
    g = grade_of(f"grit1(e={e},k0={k0},s0={SCALE_FORMATS[sdt]},esr=ratiomaxabs)")
    notes = product_notes("decode is f32(q·scale), as torchao's dequantize (qdata to "
                           "float32 times the block's scale)", "scale", sdt)
    return Recognised(tn, conv, "inferred", files, shape, g.canonical,
                      descriptor_for(g, shape, False), (("file", q), ("file", s), None, None),
                      lines=lines + (shape_line, f"k0 = {k0}, {e} one code per byte, "
                                     "ROW_MAJOR, zero-copy"), notes=tuple(notes))


CONVENTION = Convention("torchao", methods=("torchao",),
                        recognise_header=recognise_header)
