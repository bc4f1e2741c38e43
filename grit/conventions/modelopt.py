"""NVIDIA ModelOpt: NVFP4 weights as ModelOpt exports them, and
``hf_quant_config.json`` (``quant_algo`` NVFP4 or FP8) checked against the
tensors.

NVFP4: ``weight`` uint8 [out, in/2] (E2M1 codes, element 2j in the low
nibble, ROW_MAJOR), ``weight_scale`` float8_e4m3fn [out, in/16],
``weight_scale_2`` float32 (one value).  ModelOpt's per-tensor scale is a
multiplier (amax / (6·448); it decodes e·(s·weight_scale_2)), as GRIT's
level-1 scale is: GRADE_NVF4's three planes are the file's bytes, zero-copy.
(compressed-tensors stores the reciprocal, a divisor: its module says so.)
FP8 weights (``weight`` F8_E4M3 with a ``weight_scale``) follow the
compressed-tensors float-quantized layout and are recognised there.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ..errors import GritUsageError
from ..dtypes import bits_dtype
from .base import (Checkpoint, Convention, Emitted, Header, Reader, Recognised, add_finding,
                   as_list, decodes_as, descriptor_for, emit_planes, grade_of, groups_check,
                   ignored, inexpressible, is_linear, leaves_line, quantised, refuse,
                   scale_direction, unconverted_modules)

__all__ = ["CONVENTION"]


_MODELOPT = {"NVFP4": ("modelopt-nvfp4", "nvfp4", 16), "FP8": ("float-quantized", "fp8", None)}


#: ModelOpt's own file beside the checkpoint; its ``quantization`` object is
#: the config (config.json's ``quantization_config`` when it is absent)
HF_QUANT_CONFIG = "hf_quant_config.json"


def _own(ck: Checkpoint) -> dict | None:
    doc = ck.sidecars.get(HF_QUANT_CONFIG)
    q = doc.get("quantization") if isinstance(doc, dict) else None
    return q if isinstance(q, dict) else None


def module_format(leaves: Mapping[str, tuple]) -> tuple[str, str] | None:
    w, s = leaves.get("weight"), leaves.get("weight_scale")
    if w is not None and s is not None and w[0] == "U8" and s[0] == "F8_E4M3":
        return "modelopt-nvfp4", "nvfp4"
    return None


def claims_config(q: Mapping, ck: Checkpoint) -> bool:
    return _own(ck) is not None or str(q.get("quant_method", "")).lower() == "modelopt"


def check_config(ctx, ck: Checkpoint, q: Mapping, where: str) -> None:
    own = _own(ck)
    if own is not None:                  # hf_quant_config.json's, before config.json's
        q = own
    algo = str(q.get("quant_algo") or "").upper()
    if algo not in _MODELOPT:
        return
    fmt, elem, dflt = _MODELOPT[algo]
    gs = q.get("group_size", dflt)
    exclude = [t for t in as_list(q.get("exclude_modules") or q.get("ignore"))
               if isinstance(t, str)]
    src = "ModelOpt quant_algo " + algo
    used: set[str] = set()
    wrong: dict[str, list[str]] = {}
    ign_bad, dense_bad = [], []
    for pre in sorted(ck.modules):
        lv = ck.modules[pre]
        got = ck.formats.get(pre)
        if got is None or not is_linear(pre, lv):
            continue
        ig = ignored(pre, exclude, True, glob=True)
        if ig is not None:
            used.add(ig)
            if quantised(got[0]):
                ign_bad.append(pre)
            continue
        if got[0] == "dense":
            dense_bad.append(pre)
            continue
        if got[0] != fmt:
            wrong.setdefault(got[0], []).append(pre)
            continue
        if algo == "NVFP4":
            groups_check(ctx, lv["weight_scale"][2], pre, src, lv["weight"][1][-1] * 2, gs,
                          "group", lv["weight_scale"], elem, src)
    for held, pres in sorted(wrong.items()):
        add_finding(ctx, "S310", where, ck, pres,
                f"{len(pres)} module(s): {src} declared, the shards hold {held}",
                (leaves_line(ck, pres[0]),), {"declared": algo, "on_disk": held,
                                               "modules": pres})
    if ign_bad:
        add_finding(ctx, "S315", where, ck, ign_bad,
                f"{len(ign_bad)} module(s) in exclude_modules ship quantised tensors",
                (leaves_line(ck, ign_bad[0]),), {"modules": ign_bad})
    if dense_bad:
        add_finding(ctx, "S316", where, ck, dense_bad,
                f"{len(dense_bad)} module(s) not in exclude_modules ship only a dense weight "
                f"under {src}", (leaves_line(ck, dense_bad[0]),), {"modules": dense_bad})
    for t in exclude:
        if t not in used:
            ctx.add("S314", where, None, f"exclude_modules entry {t!r} matches no module", (),
                    {"exclude": t})




# ---------------------------------------------------------------------------
# recognition: NVFP4 weights as ModelOpt exports them


def claims_module(leaves: set[str], t: dict, h: Header) -> bool:
    """``weight`` U8 (two E2M1 codes a byte) beside an F8_E4M3 ``weight_scale``:
    ModelOpt's NVFP4 (``weight_scale_2`` is its per-tensor multiplier)."""
    return "weight" in leaves and "weight_scale" in leaves and \
        h[t["weight"]][0] == "U8" and h[t["weight_scale"]][0] == "F8_E4M3"


def recognise_module(pre: str, t: dict, h: Header, q: dict,
                     read: Reader | None) -> list[Recognised]:
    wn, sn = t["weight"], t["weight_scale"]
    (_, wshape, _), (_, sshape, _) = h[wn], h[sn]
    name = pre + ".weight"
    files = tuple(sorted(v for k, v in t.items() if k in ("weight", "weight_scale",
                                                           "weight_scale_2")))
    conv = "modelopt/nvfp4"
    if len(wshape) != 2 or len(sshape) != 2 or not sshape[1]:
        raise ValueError(f"weight {list(wshape)} / weight_scale {list(sshape)} are not 2-D")
    out_f, in_f = int(wshape[0]), int(wshape[1]) * 2
    k0 = in_f // int(sshape[1])
    lines = (f"weight U8 {list(wshape)} -> shape [{out_f}, {in_f}], e2m1, element 2j in the "
             "low nibble (LSB-first), ROW_MAJOR (zero-copy)",
             f"weight_scale F8_E4M3 {list(sshape)} -> k0 = {in_f} / {sshape[1]} = {k0}")
    ws2 = t.get("weight_scale_2")
    if ws2 is None:
        return [inexpressible(name, conv, files, "§7.3",
                              "no weight_scale_2 tensor: the per-tensor scale is missing",
                              lines)]
    dt2, shape2, _ = h[ws2]
    if dt2 != "F32" or math.prod(int(x) for x in shape2) != 1:
        return [inexpressible(name, conv, files, "§2.6",
                              f"weight_scale_2 is {dt2} {list(shape2)}, not one float32", lines)]
    g = grade_of(f"grit1(e=e2m1,k0={k0},s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)")
    found = []
    v = read(ws2) if read is not None else None
    if v is not None and np.size(v) == 1:
        d = scale_direction(ws2, float(np.asarray(v).reshape(-1)[0]), "multiplier")
        if d is not None:
            found.append(d)
    notes = ["weight_scale_2 multiplies (ModelOpt decodes e·(s·weight_scale_2)), as GRIT's "
             "level-1 scale does (§8.1): the scale1 plane is the file's 4 bytes, zero-copy"]
    return [Recognised(name, conv, "inferred", files, (out_f, in_f), g.canonical,
                       descriptor_for(g, (out_f, in_f), False),
                       (("file", wn), ("file", sn), ("file", ws2), None),
                       lines=lines, notes=tuple(notes), findings=tuple(found))]


# ---------------------------------------------------------------------------
# emitting: NVF4-shaped GRIT arrays as ModelOpt writes them


def emit(name: str, array) -> Emitted:
    """An NVF4-shaped GRIT array (E2M1 codes, E4M3 block scales, one binary32
    per-tensor multiplier) as ModelOpt's ``weight`` / ``weight_scale`` /
    ``weight_scale_2``: the three planes as they are, exact."""
    conv = "modelopt"
    grade, (data, s0, s1, _aux) = emit_planes(name, array, conv)
    k0 = int(grade["k0"])
    if not decodes_as(grade, f"grit1(e=e2m1,k0={k0},s0=e4m3,k1=0,s1=binary32,"
                             "esr=ratiomaxabs)"):
        raise refuse(name, conv, grade, "ModelOpt writes NVFP4 (E2M1 codes, E4M3 block "
                     "scales, one float32 per-tensor scale) here")
    shape = tuple(array.shape)
    rows, cols = math.prod(shape[:-1]), shape[-1]
    pre = name[:-len(".weight")] if name.endswith(".weight") else name
    return Emitted(
        {f"{pre}.weight": np.frombuffer(data, np.uint8).reshape(rows, cols // 2),
         f"{pre}.weight_scale": np.frombuffer(s0, bits_dtype("float8_e4m3fn")).reshape(
             rows, cols // k0),
         f"{pre}.weight_scale_2": np.frombuffer(s1, "<f4").reshape(())},
        {"quant_algo": "NVFP4", "group_size": k0})


def emit_config(emitted, plain) -> dict:
    """``hf_quant_config.json`` (ModelOpt's own) and config.json's
    ``quantization_config`` (what transformers and vLLM read); the plain
    2-D weights' modules in ``exclude_modules``."""
    sizes = {em.scheme["group_size"] for em in emitted.values()} or {16}
    if len(sizes) != 1:
        raise GritUsageError(f"modelopt: one group_size per checkpoint; these arrays have "
                             f"{sorted(sizes)}")
    exclude = unconverted_modules(plain)
    q = {"quant_algo": "NVFP4", "group_size": sizes.pop(), "exclude_modules": exclude,
         "kv_cache_quant_algo": None}
    return {HF_QUANT_CONFIG: {"producer": {"name": "modelopt"}, "quantization": q},
            "config.json": {"quantization_config": {"quant_method": "modelopt", **q}}}


CONVENTION = Convention("modelopt", methods=("modelopt",),
                        claims_module=claims_module, recognise_module=recognise_module,
                        claims_config=claims_config, check_config=check_config,
                        scale_leaves=("weight_scale_2",), module_format=module_format,
                        sidecars=(HF_QUANT_CONFIG,), emit=emit, emit_config=emit_config)
