"""compressed-tensors (vLLM, llm-compressor): the packed formats its
``config.json`` names, recognised from the tensors, and its
``quantization_config`` checked against them.

Recognised (docs/scan.md, "Recognising checkpoints without GRIT metadata",
has the table and every choice):

* ``nvfp4-pack-quantized`` — ``weight_packed`` uint8 [out, in/2] (E2M1 codes,
  element 2j in the low nibble: GRIT's LSB-first order, ROW_MAJOR),
  ``weight_scale`` float8_e4m3fn [out, in/16], ``weight_global_scale``
  float32 [1].  The file stores g = 448·6/amax and decodes e·(s/g); GRIT's
  level-1 scale multiplies, so the scale1 plane is f32(1/g) — converted, 4
  bytes — and the decode agrees bit-for-bit exactly when f32(s·f32(1/g)) ==
  f32(s/g) for every E4M3 code s (see :func:`nvfp4_global_exact`);
* ``mxfp4-pack-quantized`` — ``weight_packed`` as above, ``weight_scale``
  uint8 E8M0 [out, in/32]: GRADE_MXFP4, zero-copy;
* ``pack-quantized`` int4/int8, symmetric — ``weight_packed`` int32 words of
  32/b codes, element 8j+i at bits 4i (LSB-first consecutive, ROW_MAJOR),
  codes offset-binary (stored u = q + 2^(b−1)); the offset is a constant
  zero-point plane (``zp=u4``/``zp=u8``) synthesised at n_groups0 bytes, as
  the GGUF reader does for Q4_0;
* asymmetric ``pack-quantized`` (zero points packed 8 to an int32 along the
  output axis) — inexpressible, §0.3d;
* ``float-quantized`` FP8 — ``weight`` F8_E4M3 [out, in] (one code per byte,
  ROW_MAJOR, zero-copy), ``weight_scale`` F32/BF16/F16: ``channel`` ([out,
  1]) is ``grit1(e=e4m3,k0=in,s0=…,esr=ratiomaxabs)`` when in ≤ 65535 (k0 is
  a uint16), ``group`` is k0 = group_size; ``tensor`` (one scale) is a single
  group of k0 = numel, expressible only when the tensor has one row and
  numel ≤ 65535; ``block`` (2-D blocks) is inexpressible, §3.7 (v1 groups
  are 1-D runs along one axis).

The config is validated against compressed-tensors' own schema's field
names, defaults and closed value sets (:data:`CT_FIELDS`, :data:`CT_ENUMS`),
taken from the package's source (compressed-tensors 0.20.0:
``quantization/quant_args.py``, ``quant_scheme.py``, ``quant_config.py``,
``config/base.py``).  The package itself is not imported: its
``quant_args.py`` imports torch at module level (docs/spec-decisions.md,
"config vs tensors"); tests/test_scan_config.py compares the table with the
source whenever the package is importable.

Which scheme a module gets follows compressed-tensors'
``match_targets`` / ``_scheme_from_targets``: targets that match it are
ordered exact names, then ``re:`` patterns (sorted as strings), then class
names; the first one's scheme wins, and a target string repeated in two
groups belongs to the later group.  Class names are matched without the
model: ``Linear`` (and any other class target) matches every module whose
weight is 2-D, except embeddings.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from ..formats import REGISTERED, fmt_decode
from ..dtypes import bits_dtype
from .base import (FP8_DTYPES, FP8_ELEMS, K0_MAX, SCALE_FORMATS, SERVED_GROUPS, Checkpoint,
                   Convention, Emitted, Header, Reader, Recognised, add_finding, as_list,
                   decodes_as, descriptor_for, emit_planes, grade_of, groups_check, ignored,
                   inexpressible, is_linear, leaves_line, match_target, product_notes, quantised,
                   refuse, scale_direction, unconverted_modules)

__all__ = ["CT_FIELDS", "CT_ENUMS", "nvfp4_global_exact", "scheme_for", "CONVENTION"]

def nvfp4_global_exact(g: float) -> tuple[bool, int]:
    """Whether f32(s·f32(1/g)) == f32(s/g) for every finite E4M3 code s —
    i.e. whether GRIT's multiplying level-1 scale f32(1/g) reproduces
    compressed-tensors' s/g bit-for-bit.  Returns (exact, codes that differ)."""
    gv = np.float32(g)
    s = _e4m3_finite()
    with np.errstate(all="ignore"):       # (binary32 arithmetic, element by element)
        r = np.float32(1.0) / gv
        a, b = s * r, s / gv
    bad = int(np.count_nonzero(a.view(np.uint32) != b.view(np.uint32)))
    return bad == 0, bad


_E4M3: list = []


def _e4m3_finite() -> np.ndarray:
    """The values of the E4M3 codes that are not NaN, as float32 (made once)."""
    if not _E4M3:
        v = np.array([fmt_decode(REGISTERED["e4m3"], c) for c in range(256)], np.float32)
        _E4M3.append(v[~np.isnan(v)])
    return _E4M3[0]



def _ct_scheme(q: dict, module: str) -> tuple[dict, str | None]:
    """(weights args, format) of the config group compressed-tensors applies
    to ``module`` (:func:`scheme_for`: exact names, then ``re:`` patterns,
    then class names), else of the only group with weights."""
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping):
        return {}, q.get("format")
    win, _ = scheme_for(groups, module, True)
    if win is None:
        cands = [gn for gn, g in groups.items()
                 if isinstance(g, Mapping) and isinstance(g.get("weights"), Mapping)]
        win = cands[0] if len(cands) == 1 else None
    g = groups.get(win) if win is not None else None
    if not isinstance(g, Mapping) or not isinstance(g.get("weights"), Mapping):
        return {}, q.get("format")
    return dict(g["weights"]), g.get("format") or q.get("format")



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


def claims_module(leaves: set[str], t: dict, h: Header) -> bool:
    """A module of packed codes (``weight_packed``) or of one FP8 / int8 code a
    byte (``weight``), each beside its ``weight_scale``."""
    return "weight_scale" in leaves and (
        "weight_packed" in leaves
        or ("weight" in leaves and h[t["weight"]][0] in (*FP8_ELEMS, "I8")))


def module_format(leaves: Mapping[str, Any]) -> tuple[str, str] | None:
    def dt(leaf):
        return leaves[leaf][0] if leaf in leaves else None
    if "weight_packed" in leaves:
        if dt("weight_packed") == "I32":
            return "pack-quantized", "int"
        if dt("weight_scale") == "F8_E4M3" or "weight_global_scale" in leaves:
            return "nvfp4-pack-quantized", "nvfp4"
        return "mxfp4-pack-quantized", "mxfp4"
    if "weight" not in leaves or "weight_scale" not in leaves:
        return None
    if dt("weight") in FP8_DTYPES:
        if dt("weight_scale") in ("U8", "F8_E8M0"):
            return "mxfp8-quantized", "fp8"
        return "float-quantized", "fp8"
    if dt("weight") == "I8":
        return "int-quantized", "int8"
    return None


def claims_config(q: Mapping, ck: Checkpoint) -> bool:
    return q.get("config_groups") is not None or \
        str(q.get("quant_method", "")).lower() == "compressed-tensors"


def recognise_module(pre: str, t: dict, h: Header, q: dict,
                     read: Reader | None) -> list[Recognised]:
    if "weight_packed" not in t:
        return _ct_float8(pre, t, h, q)
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
                return [inexpressible(name, conv, files, "§2.6",
                              f"weight_scale is {sdt}; nvfp4 scales are float8_e4m3fn")]
            if "weight_global_scale" not in t:
                return [inexpressible(name, conv, files, "§7.3",
                              "no weight_global_scale tensor: the level-1 scale is missing")]
            g = grade_of(f"grit1(e=e2m1,k0={k0},s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)")
            gs_name = t["weight_global_scale"]
            notes = [("declared-vs-actual: the file stores weight_global_scale g = 448·6/amax "
                      "and decodes e·(s/g); GRIT's level-1 scale multiplies (§8.1), so the "
                      "scale1 plane is f32(1/g), a 4-byte conversion of the file's value")]
            found: list[tuple] = []
            if read is not None:
                try:
                    gv = read(gs_name)
                except Exception:  # noqa: BLE001 - an unreadable scalar is just unknown
                    gv = None
                if gv is not None and np.size(gv) == 1:
                    d = scale_direction(gs_name, float(np.asarray(gv).reshape(-1)[0]), "divisor")
                    if d is not None:
                        found.append(d)
                    ok, nbad = nvfp4_global_exact(float(np.asarray(gv).reshape(-1)[0]))
                    notes.append(
                        f"g = {float(np.asarray(gv).reshape(-1)[0])!r}: decode is bit-exact"
                        if ok else
                        f"g = {float(np.asarray(gv).reshape(-1)[0])!r}: f32(s·f32(1/g)) ≠ "
                        f"f32(s/g) for {nbad} of the 254 finite E4M3 codes — GRIT's decode "
                        "differs from compressed-tensors' by up to 1 ulp of S there")
            return [Recognised(
                name, conv, "inferred", files, (out_f, in_f), g.canonical,
                descriptor_for(g, (out_f, in_f), False),
                (("file", wp), ("file", ws), ("global_recip", gs_name), None),
                findings=tuple(found),
                lines=(f"weight_packed U8 {list(pshape)} -> shape [{out_f}, {in_f}], e2m1 "
                       "LSB-first (element 2j low nibble), ROW_MAJOR",
                       f"k0={k0} "
                       f"({'config group_size' if w.get('group_size') else 'nvfp4 default'})"),
                notes=tuple(notes))]
        conv = "compressed-tensors/mxfp4-pack-quantized"
        if sdt not in ("U8", "F8_E8M0"):
            return [inexpressible(name, conv, files, "§2.6",
                          f"weight_scale is {sdt}; mxfp4 scales are uint8 E8M0 exponents")]
        k0 = _ct_declared_group(w, in_f) or 32
        g = grade_of(f"grit1(e=e2m1,k0={k0},s0=e8m0,esr=exp2floormaxabs)")
        return [Recognised(
            name, conv, "inferred", files, (out_f, in_f), g.canonical,
            descriptor_for(g, (out_f, in_f), False), (("file", wp), ("file", ws), None, None),
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
                return [inexpressible(
                    name, conv, files, "not inferred",
                    "asymmetric int8: the zero points fill CT_PAD8 bytes, but they are "
                    "packed 4 to an int32 along the output axis, so the aux plane's byte "
                    "order is (out/4, group, 4) — a relayout this version does not infer",
                    (f"aux: predicted {pred} bytes, present {zn} ({zdt} {list(zshape)})",))]
            return [inexpressible(
                name, conv, files, "§0.3d",
                f"asymmetric int{bits}: zero points are packed {per} to an int32 along the "
                f"output axis; v1 stores a sub-byte zero-point plane CT_PAD8, one per byte",
                (f"aux: predicted {pred} bytes (n_groups0 {pred} × 1 byte, PAD8), present "
                 f"{zn} ({zdt} {list(zshape)}, {per} codes per int32) — §0.3d",
                 f"n_groups0 = {out_f} × {in_f} / k0={k0} = {pred}"))]
        if sdt not in SCALE_FORMATS or sdt in ("U8", "F8_E8M0"):
            return [inexpressible(name, conv, files, "§2.6",
                          f"weight_scale dtype {sdt} has no v1 scale format here")]
        s0 = SCALE_FORMATS[sdt]
        g = grade_of(f"grit1(e=u{bits},k0={k0},s0={s0},zp=u{bits},esr=ratiomaxabs)")
        off = 1 << (bits - 1)
        return [Recognised(
            name, conv, "inferred", files, (out_f, in_f), g.canonical,
            descriptor_for(g, (out_f, in_f), True),
            (("file", wp), ("file", ws), None, ("const", off)),
            lines=(f"weight_packed I32 {list(pshape)} -> shape [{out_f}, {in_f}], "
                   f"u{bits} codes LSB-first ({per} per little-endian int32), ROW_MAJOR",
                   f"k0={k0}, s0={s0} ({sdt})"),
            notes=(f"codes are offset-binary (stored q + {off}); the offset is a constant "
                   f"zero-point plane of n_groups0 = {n_groups0} bytes of {off}, synthesised "
                   "(not in the file)",))]
    return [inexpressible(name, "compressed-tensors", files, "§7.3",
                  f"weight_packed dtype {pdt} is neither U8 (fp4) nor I32 (int pack)")]


def _ct_float8(pre: str, t: dict, h: Header, q: dict) -> list[Recognised]:
    """One code per byte: compressed-tensors ``float-quantized`` FP8 (``weight``
    F8_E4M3/F8_E5M2 [out, in]) and ``int-quantized`` int8 (``weight`` I8) with
    a ``weight_scale`` (F32/BF16/F16) per tensor, channel, group or 2-D block
    (and, for int8, a ``weight_zero_point`` where asymmetric); and
    ``mxfp8-quantized`` (FP8 codes, ``weight_scale`` uint8 E8M0 per group)."""
    wn, sn = t["weight"], t["weight_scale"]
    wdt, wshape, _ = h[wn]
    sdt, sshape, _ = h[sn]
    w, _fmt = _ct_scheme(q, pre)
    name = pre + ".weight"
    files = (wn, sn)
    if wdt in FP8_ELEMS and sdt in ("U8", "F8_E8M0"):
        return _ct_mxfp8(name, wn, sn, h, w)
    conv = "compressed-tensors/int-quantized" if wdt == "I8" else \
        "compressed-tensors/float-quantized"
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
        return [inexpressible(
            name, conv, files, "§3.7",
            f"2-D block scales ({bo}×{bi}, {src}): one scale covers {bo} rows × {bi} "
            "columns; v1 groups are 1-D runs of k0 consecutive elements along the group "
            "axis (g0 = lin(i) / k0), so a group cannot span rows",
            (shape_line,))]
    if sdt not in SCALE_FORMATS or sdt in ("U8", "F8_E8M0", "F8_E4M3"):
        return [inexpressible(name, conv, files, "§2.6",
                              f"weight_scale dtype {sdt} is not a {conv.split('/')[1]} "
                              "scale (F32, BF16 or F16)", (shape_line,))]
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
            return [inexpressible(
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
        return [inexpressible(name, conv, files, "§3.7",
                      f"{strat} scale needs k0 = {k0} > {K0_MAX}, the largest k0 "
                      "(the descriptor field is a uint16)", (shape_line, how))]
    e = FP8_ELEMS.get(wdt, "s8")
    zp = t.get("weight_zero_point")
    if zp is not None and wdt == "I8":
        zdt, zshape, _ = h[zp]
        n_groups0 = numel // k0
        if zdt != "I8" or math.prod(int(x) for x in zshape) != n_groups0:
            return [inexpressible(
                name, conv, files + (zp,), "§3.4",
                f"weight_zero_point {zdt} {list(zshape)} is not one int8 per group "
                f"(n_groups0 = {n_groups0}), the CT_PAD8 zero-point plane v1 holds",
                (shape_line,))]
        g = grade_of(f"grit1(e=s8,k0={k0},s0={s0},zp=s8,esr=affineminmax)")
        notes = product_notes("decode is f32(s·f32(q − z)) (§8.1, zps=shared), compressed-"
                              "tensors' (q − z)·scale", "weight_scale", sdt)
        return [Recognised(
            name, conv, "inferred", files + (zp,), (out_f, in_f), g.canonical,
            descriptor_for(g, (out_f, in_f), True),
            (("file", wn), ("file", sn), None, ("file", zp)),
            lines=(f"weight {wdt} [{out_f}, {in_f}] -> s8 codes, one per byte, ROW_MAJOR "
                   f"(zero-copy); weight_scale -> s0={s0} ({sdt}, zero-copy); "
                   f"weight_zero_point -> zp=s8 (zero-copy)", how),
            notes=tuple(notes))]
    g = grade_of(f"grit1(e={e},k0={k0},s0={s0},esr=ratiomaxabs)")
    what = "int8" if wdt == "I8" else "FP8"
    notes = product_notes(f"decode is f32(e·s) (§8.1), the float32 product of the {what} "
                          "code and its scale, i.e. q.astype(float32) · scale",
                          "weight_scale", sdt)
    return [Recognised(
        name, conv, "inferred", files, (out_f, in_f), g.canonical,
        descriptor_for(g, (out_f, in_f), False), (("file", wn), ("file", sn), None, None),
        lines=(f"weight {wdt} [{out_f}, {in_f}] -> {e} codes, one per byte, ROW_MAJOR "
               f"(zero-copy); weight_scale -> s0={s0} ({sdt}, zero-copy)", how),
        notes=tuple(notes))]


def _ct_mxfp8(name: str, wn: str, sn: str, h: Header, w: dict) -> list[Recognised]:
    """``mxfp8-quantized``: FP8 codes [out, in], one uint8 E8M0 exponent (bias
    127) per group of ``group_size`` (32) along a row."""
    wdt, wshape, _ = h[wn]
    sdt, sshape, _ = h[sn]
    conv = "compressed-tensors/mxfp8-quantized"
    if len(wshape) != 2 or len(sshape) != 2 or not sshape[1]:
        raise ValueError(f"weight {list(wshape)} / weight_scale {list(sshape)} are not 2-D")
    out_f, in_f = (int(x) for x in wshape)
    k0 = _ct_declared_group(w, in_f) or in_f // int(sshape[1])
    e = FP8_ELEMS[wdt]
    g = grade_of(f"grit1(e={e},k0={k0},s0=e8m0,esr=exp2floormaxabs)")
    return [Recognised(
        name, conv, "inferred", (wn, sn), (out_f, in_f), g.canonical,
        descriptor_for(g, (out_f, in_f), False), (("file", wn), ("file", sn), None, None),
        lines=(f"weight {wdt} [{out_f}, {in_f}] -> {e} codes, one per byte, ROW_MAJOR "
               "(zero-copy); weight_scale U8 -> E8M0 exponents (bias 127), zero-copy",
               f"k0={k0} ({'config group_size' if w.get('group_size') else 'from the shapes'})"),
        notes=("decode is f32(2^(s−127)·e) (§8.1), exact: compressed-tensors' "
               "e·2^(s−127)",))]




# ---------------------------------------------------------------------------
# the compressed-tensors schema (field -> default), from its source

_REQUIRED = object()

#: model -> field -> default (``_REQUIRED`` for a field without one); the
#: models with ``extra="forbid"`` are QuantizationArgs and QuantizationScheme,
#: QuantizationConfig ignores extra fields
CT_FIELDS: dict[str, dict[str, Any]] = {
    "QuantizationArgs": {
        "num_bits": 8, "type": "int", "symmetric": True, "group_size": None,
        "strategy": None, "block_structure": None, "dynamic": False, "actorder": None,
        "scale_dtype": None, "zp_dtype": None, "observer": None, "observer_kwargs": {}},
    "QuantizationScheme": {
        "targets": _REQUIRED, "weights": None, "input_activations": None,
        "output_activations": None, "format": None},
    "QuantizationConfig": {
        "config_groups": _REQUIRED, "quant_method": "compressed-tensors",
        "kv_cache_scheme": None, "format": "fakequant", "quantization_status": "initialized",
        "global_compression_ratio": None, "ignore": [], "moe_sparsity_config": None},
}
#: the models that refuse unknown fields
CT_FORBID = ("QuantizationArgs", "QuantizationScheme")

#: the closed value sets (str enums) of the schema
CT_ENUMS: dict[str, tuple[str, ...]] = {
    "QuantizationType": ("int", "float"),
    "QuantizationStrategy": ("tensor", "channel", "group", "block", "token", "tensor_group",
                             "attn_head"),
    "ActivationOrdering": ("weight", "static", "group", "dynamic"),
    "QuantizationStatus": ("initialized", "calibration", "frozen", "compressed",
                           "decompressed"),
    "CompressionFormat": ("dense", "sparse-bitmask", "sparse-24-bitmask", "int-quantized",
                          "float-quantized", "naive-quantized", "pack-quantized", "marlin-24",
                          "mixed-precision", "nvfp4-pack-quantized", "mxfp4-pack-quantized",
                          "mxfp6-pack-quantized", "mxfp8-quantized"),
}

#: compressed-tensors' config keys beside the quantisation schema (the
#: ``compression_config`` of older files carries these; transformers adds
#: ``version``)
_CT_OUTER = ("sparsity_config", "transform_config", "version", "quant_method")



def scheme_for(groups: Mapping[str, Any], name: str, linear: bool
               ) -> tuple[str | None, list[tuple[str, str]]]:
    """(winning group, [(target, group) matched, in compressed-tensors' order])."""
    target_group: dict[str, str] = {}
    for gname, g in groups.items():
        if isinstance(g, Mapping):
            for t in as_list(g.get("targets")):
                if isinstance(t, str):
                    target_group[t] = gname            # a later group takes the target
    hits = {t: match_target(name, t, linear) for t in target_group}
    order = sorted((t for t, k in hits.items() if k in ("exact", "re")),
                   key=lambda t: ("re:" in t, t))
    order += [t for t, k in hits.items() if k == "class"]
    matched = [(t, target_group[t]) for t in order]
    return (matched[0][1] if matched else None), matched




def _schema(ctx, q: Mapping, where: str) -> None:
    """S319: the config against compressed-tensors' field names and value sets."""
    bad: list[str] = []

    def args(path: str, a: Any) -> None:
        if a is None:
            return
        if not isinstance(a, Mapping):
            bad.append(f"{path}: not an object")
            return
        extra = sorted(set(a) - set(CT_FIELDS["QuantizationArgs"]))
        if extra:
            bad.append(f"{path}: unknown field(s) {extra} (QuantizationArgs forbids extra "
                       f"fields; known: {sorted(CT_FIELDS['QuantizationArgs'])})")
        for fld, enum in (("type", "QuantizationType"), ("strategy", "QuantizationStrategy")):
            v = a.get(fld)
            if v is not None and str(v).lower() not in CT_ENUMS[enum]:
                bad.append(f"{path}.{fld} = {v!r} is not a {enum} ({', '.join(CT_ENUMS[enum])})")
        ao = a.get("actorder")
        if ao is not None and not isinstance(ao, bool) and str(ao) not in \
                CT_ENUMS["ActivationOrdering"]:
            bad.append(f"{path}.actorder = {ao!r} is not an ActivationOrdering")
        gs = a.get("group_size")
        if gs is not None and (not isinstance(gs, int) or isinstance(gs, bool) or gs < -1):
            bad.append(f"{path}.group_size = {gs!r}: the schema takes > 0 (group) or -1 "
                       "(channel)")
        st = str(a.get("strategy") or "").lower()
        if st in ("group", "tensor_group") and isinstance(gs, int) and gs <= 0:
            bad.append(f"{path}: strategy {st} requires group_size > 0, got {gs}")
        if st and st not in ("group", "tensor_group") and isinstance(gs, int) and gs > 0:
            bad.append(f"{path}: group_size {gs} requires strategy 'group', got {st!r}")

    st = q.get("quantization_status")
    if st is not None and str(st) not in CT_ENUMS["QuantizationStatus"]:
        bad.append(f"quantization_status = {st!r} is not a QuantizationStatus "
                   f"({', '.join(CT_ENUMS['QuantizationStatus'])})")
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping):
        bad.append("config_groups is required (a map of group name -> scheme)")
        groups = {}
    for gname, g in groups.items():
        if isinstance(g, list):                  # a preset name -> its targets
            continue
        if not isinstance(g, Mapping):
            bad.append(f"config_groups.{gname}: not an object")
            continue
        extra = sorted(set(g) - set(CT_FIELDS["QuantizationScheme"]))
        if extra:
            bad.append(f"config_groups.{gname}: unknown field(s) {extra} (QuantizationScheme "
                       "forbids extra fields)")
        if not isinstance(g.get("targets"), list):
            bad.append(f"config_groups.{gname}.targets is required (a list)")
        f = g.get("format")
        if f is not None and str(f) not in CT_ENUMS["CompressionFormat"]:
            bad.append(f"config_groups.{gname}.format = {f!r} is not a CompressionFormat")
        for k in ("weights", "input_activations", "output_activations"):
            args(f"config_groups.{gname}.{k}", g.get(k))
    args("kv_cache_scheme", q.get("kv_cache_scheme"))
    if bad:
        ctx.add("S319", where, None,
                f"quantization_config: {len(bad)} field(s) do not fit the compressed-tensors "
                "schema", tuple(bad[:8]) + ((f"… {len(bad) - 8} more",) if len(bad) > 8 else ()),
                {"problems": bad})


#: a declared compressed-tensors format -> the on-disk formats that fit it
_CT_FITS = {"pack-quantized": ("pack-quantized",),
            "nvfp4-pack-quantized": ("nvfp4-pack-quantized",),
            "mxfp4-pack-quantized": ("mxfp4-pack-quantized",),
            "float-quantized": ("float-quantized",),
            "mxfp8-quantized": ("mxfp8-quantized",),
            "int-quantized": ("int-quantized",),
            "naive-quantized": ("int-quantized", "float-quantized"),
            "dense": ("dense",), "fakequant": ("dense",)}


def _element(a: Mapping) -> str:
    """The element a weights args declares: int4/int8/…, fp8, nvfp4, mxfp4."""
    bits, typ = a.get("num_bits", 8), str(a.get("type", "int")).lower()
    if typ == "float":
        if bits == 4:
            return "nvfp4" if a.get("group_size") == 16 else "mxfp4"
        return f"fp{bits}"
    return f"int{bits}"


def _fits_element(declared: str, fmt: str, got: str, leaves, ck: Checkpoint, pre: str) -> bool:
    if got == "int":            # packed int: 32 / (in / packed columns) bits
        if not declared.startswith("int"):
            return False
        return True
    if declared in ("nvfp4", "mxfp4") and got in ("nvfp4", "mxfp4"):
        return True
    if declared == "int8" and got == "int8":
        return True
    return declared == got


def _packed_bits(leaves, ck: Checkpoint, pre: str) -> int | None:
    wp = leaves.get("weight_packed")
    ws = ck.scalars.get(pre + ".weight_shape")
    if wp is None or ws is None or len(ws) != 2 or len(wp[1]) != 2 or not wp[1][1]:
        return None
    per = int(ws[1]) // wp[1][1]
    return 32 // per if per and 32 % per == 0 and int(ws[1]) % wp[1][1] == 0 else None


def _in_features(fmt: str, leaves, ck: Checkpoint, pre: str, bits: int | None) -> int | None:
    if fmt in ("float-quantized", "mxfp8-quantized", "int-quantized", "dense"):
        return leaves["weight"][1][-1] if leaves["weight"][1] else None
    if fmt == "modelopt-nvfp4":
        return leaves["weight"][1][-1] * 2
    if fmt in ("nvfp4-pack-quantized", "mxfp4-pack-quantized"):
        return leaves["weight_packed"][1][-1] * 2
    if fmt == "pack-quantized":
        ws = ck.scalars.get(pre + ".weight_shape")
        if ws is not None and len(ws) == 2:
            return int(ws[1])
        if bits:
            return leaves["weight_packed"][1][-1] * (32 // bits)
    return None




def check_config(ctx, ck: Checkpoint, q: dict, where: str) -> None:
    _schema(ctx, q, where)
    cg = q.get("config_groups")
    groups: Mapping[str, Any] = cg if isinstance(cg, Mapping) else {}
    ignore = [t for t in as_list(q.get("ignore")) if isinstance(t, str)]
    top_fmt = str(q.get("format") or "fakequant")
    # an absent status is not read as the schema default ("initialized"): hand-written
    # configs leave it out, and the library always writes it
    status = str(q.get("quantization_status") or "compressed")
    # each group's weights scheme, as text once: two groups overlap only if they differ
    scheme_text = {gn: repr(g.get("weights")) for gn, g in groups.items()
                   if isinstance(g, Mapping)}
    used_targets: set[str] = set()
    used_ignore: set[str] = set()
    overlaps: dict[tuple, list[str]] = {}
    fmt_bad: dict[tuple, list[str]] = {}
    elem_bad: dict[tuple, list[str]] = {}
    ign_bad: list[str] = []
    dense_bad: dict[str, list[str]] = {}
    status_bad: list[str] = []
    act: dict[str, list[str]] = {}
    for pre in sorted(ck.modules):
        leaves = ck.modules[pre]
        got = ck.formats.get(pre)
        if got is None:
            continue
        lin = is_linear(pre, leaves)
        ig = ignored(pre, ignore, lin)
        win, matched = scheme_for(groups, pre, lin)
        used_targets.update(t for t, _ in matched)
        if ig is not None:
            used_ignore.add(ig)
            if quantised(got[0]):
                ign_bad.append(pre)
            continue
        if win is None:
            continue
        g = groups[win]
        w = g.get("weights") if isinstance(g.get("weights"), Mapping) else None
        if len({scheme_text[gn] for _, gn in matched}) > 1:
            key = (win, tuple(dict.fromkeys(gn for _, gn in matched)),
                   tuple(t for t, _ in matched))
            overlaps.setdefault(key, []).append(pre)
        if w is None:
            continue
        fmt = str(g.get("format") or top_fmt)
        if "weight_g_idx" in leaves or str(w.get("actorder")) in ("group", "dynamic"):
            act.setdefault(win, []).append(pre)
        if not quantised(got[0]):
            if fmt not in ("dense", "fakequant") or status == "compressed":
                dense_bad.setdefault(win, []).append(pre)
            continue
        fits = _CT_FITS.get(fmt)
        if fits is not None and got[0] not in fits:
            fmt_bad.setdefault((win, fmt, got[0]), []).append(pre)
        if got[0] not in ("dense",) and fmt != "dense" and status != "compressed" and \
                got[0].endswith("pack-quantized"):
            status_bad.append(pre)
        declared = _element(w)
        bits = _packed_bits(leaves, ck, pre)
        shown = f"int{bits}" if got[1] == "int" and bits else got[1]
        if not _fits_element(declared, fmt, got[1], leaves, ck, pre) or \
                (got[1] == "int" and bits and declared != f"int{bits}"):
            elem_bad.setdefault((win, declared, shown), []).append(pre)
        strategy = str(w.get("strategy") or "").lower()
        if not strategy:
            gs0 = w.get("group_size")
            strategy = ("tensor" if gs0 is None else "group" if isinstance(gs0, int) and
                        gs0 > 0 else "channel")
        scale = leaves.get("weight_scale")
        in_f = _in_features(got[0], leaves, ck, pre, bits or w.get("num_bits"))
        elem = shown if shown in SERVED_GROUPS else got[1]
        if got[1] == "int" and (bits or w.get("num_bits")) == 4:
            elem = "int4"
        groups_check(ctx, scale[2] if scale else where, pre, f"config group {win!r}", in_f,
                      w.get("group_size"), strategy, scale, elem,
                      f"config_groups.{win}.weights")
    for (win, fmt, got), pres in sorted(fmt_bad.items()):
        add_finding(ctx, "S310", where, ck, pres,
                f"{len(pres)} module(s) of config group {win!r}: format {fmt!r} declared, the "
                f"shards hold {got}", (f"{leaves_line(ck, pres[0])}",),
                {"group": win, "declared": fmt, "on_disk": got, "modules": pres})
    if status_bad:
        add_finding(ctx, "S310", where, ck, status_bad,
                f"{len(status_bad)} module(s) ship packed tensors but quantization_status is "
                f"{status!r}, not 'compressed'",
                ("compressed-tensors decompresses only a config whose status is compressed",),
                {"status": status, "modules": status_bad})
    for (win, declared, got), pres in sorted(elem_bad.items()):
        add_finding(ctx, "S312", where, ck, pres,
                f"{len(pres)} module(s) of config group {win!r}: {declared} declared, the "
                f"tensors read as {got}", (leaves_line(ck, pres[0]),),
                {"group": win, "declared": declared, "on_disk": got, "modules": pres})
    for (win, gnames, targets), pres in sorted(overlaps.items()):
        add_finding(ctx, "S313", where, ck, pres,
                f"{len(pres)} module(s) match config groups {', '.join(map(repr, gnames))} "
                f"with different weights schemes: {win!r} wins",
                (f"matched targets in compressed-tensors' order: {list(targets)}",
                 f"group {win!r} applies to: " + ", ".join(pres[:6])
                 + (", …" if len(pres) > 6 else "")),
                {"winner": win, "groups": list(gnames), "targets": list(targets),
                 "modules": pres})
    for t in [t for g in groups.values() if isinstance(g, Mapping)
              for t in as_list(g.get("targets")) if isinstance(t, str)]:
        if t not in used_targets:
            ctx.add("S314", where, None, f"config_groups target {t!r} matches no module",
                    (), {"target": t})
    for t in ignore:
        if t not in used_ignore:
            ctx.add("S314", where, None, f"ignore entry {t!r} matches no module", (),
                    {"ignore": t})
    if ign_bad:
        add_finding(ctx, "S315", where, ck, ign_bad,
                f"{len(ign_bad)} ignored module(s) ship quantised tensors",
                (leaves_line(ck, ign_bad[0]),), {"modules": ign_bad})
    for win, pres in sorted(dense_bad.items()):
        add_finding(ctx, "S316", where, ck, pres,
                f"{len(pres)} module(s) targeted by config group {win!r} ship only a dense "
                "weight", (leaves_line(ck, pres[0]),), {"group": win, "modules": pres})
    for win, pres in sorted(act.items()):
        add_finding(ctx, "S317", where, ck, pres,
                f"{len(pres)} module(s) of config group {win!r} use act-order (g_idx): "
                "§0.3 (c), groups permuted", (), {"group": win, "modules": pres})




# ---------------------------------------------------------------------------
# emitting: GRIT arrays as compressed-tensors tensors

#: a scale format token -> (safetensors dtype name, numpy dtype of its bytes,
#: compressed-tensors' scale dtype)
_EMIT_SCALES = {"binary32": ("F32", "<f4"), "binary16": ("F16", "<f2"),
                SCALE_FORMATS["BF16"]: ("BF16", "bfloat16")}
#: FP8 element token -> its ml_dtypes name
_EMIT_FP8 = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def _np(dtype: str) -> np.dtype:
    """A numpy dtype string as it is, an ml_dtypes name as the type that
    carries its bits (:func:`grit.dtypes.bits_dtype`: no ml_dtypes)."""
    return bits_dtype(dtype) if not dtype.startswith("<") else np.dtype(dtype)


def _scale_tensor(plane: bytes, token: str, shape: tuple[int, ...]):
    return np.frombuffer(plane, _np(_EMIT_SCALES[token][1])).reshape(shape)


def _args(num_bits: int, typ: str, strategy: str, group_size: int | None,
          **more: Any) -> dict:
    return {"num_bits": num_bits, "type": typ, "symmetric": more.pop("symmetric", True),
            "strategy": strategy, "group_size": group_size, "dynamic": False, **more}


def emit(name: str, array: Any) -> Emitted:
    """One GRIT array as compressed-tensors' tensors of the weight ``name``
    (``…/x.weight`` -> ``…/x.weight_packed`` and so on): nvfp4-pack-quantized
    (NVF4-shaped: its level-1 scale written as the divisor g = f32(1/s1),
    exact when f32(s0·s1) = f32(s0/g) for every E4M3 code — see
    :func:`nvfp4_global_exact`), mxfp4-pack-quantized, mxfp8-quantized,
    float-quantized (FP8 codes, one float scale per group), int-quantized
    (int8 codes, with an int8 zero point when it has one) and pack-quantized
    (u4/u8 codes offset by 2^(b−1): compressed-tensors' symmetric int
    packing).  Anything else is refused with the reason."""
    conv = "compressed-tensors"
    grade, planes = emit_planes(name, array, conv)
    data, s0, s1, aux = planes
    shape = tuple(array.shape)
    rows, cols = math.prod(shape[:-1]), shape[-1]
    pre = name[:-len(".weight")] if name.endswith(".weight") else name
    k0 = int(grade["k0"])
    n_g = cols // k0
    e, sf = str(grade["e"]), str(grade["s0"])
    if decodes_as(grade, f"grit1(e=e2m1,k0={k0},s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)"):
        s1v = np.frombuffer(s1, "<f4")
        if s1v.size != 1:
            raise refuse(name, conv, grade, "a per-tensor level-1 scale is one value; this "
                         f"array has {s1v.size}")
        g = np.float32(1.0) / s1v[0]
        back = np.float32(1.0) / g
        ok, nbad = nvfp4_global_exact(float(g))
        notes = [] if back == s1v[0] else [
            f"weight_global_scale g = f32(1/{float(s1v[0])!r}) = {float(g)!r} reads back as "
            f"1/g = {float(back)!r}"]
        if not ok:
            notes.append(f"compressed-tensors divides by g: f32(s0/g) ≠ f32(s0·s1) for {nbad} "
                         "of the 254 finite E4M3 codes (1 ulp of the scale)")
        return Emitted(
            {f"{pre}.weight_packed": np.frombuffer(data, np.uint8).reshape(rows, cols // 2),
             f"{pre}.weight_scale": np.frombuffer(s0, _np("float8_e4m3fn")).reshape(rows, n_g),
             f"{pre}.weight_global_scale": np.array([g], np.float32)},
            {"format": "nvfp4-pack-quantized",
             "weights": _args(4, "float", "tensor_group", k0)},
            exact=ok and not notes, notes=tuple(notes))
    if decodes_as(grade, f"grit1(e=e2m1,k0={k0},s0=e8m0,esr=exp2floormaxabs)"):
        return Emitted(
            {f"{pre}.weight_packed": np.frombuffer(data, np.uint8).reshape(rows, cols // 2),
             f"{pre}.weight_scale": np.frombuffer(s0, np.uint8).reshape(rows, n_g)},
            {"format": "mxfp4-pack-quantized",
             "weights": _args(4, "float", "group", k0, scale_dtype="torch.uint8")})
    if e in _EMIT_FP8 and decodes_as(grade, f"grit1(e={e},k0={k0},s0=e8m0,"
                                            "esr=exp2floormaxabs)"):
        return Emitted(
            {f"{pre}.weight": np.frombuffer(data, _np(_EMIT_FP8[e])).reshape(rows, cols),
             f"{pre}.weight_scale": np.frombuffer(s0, np.uint8).reshape(rows, n_g)},
            {"format": "mxfp8-quantized",
             "weights": _args(8, "float", "group", k0, scale_dtype="torch.uint8")})
    strategy, gs = ("channel", None) if k0 == cols else ("group", k0)
    if sf in _EMIT_SCALES and e in (*_EMIT_FP8, "s8"):
        scale = _scale_tensor(s0, sf, (rows, n_g))
        if e != "s8" and decodes_as(grade, f"grit1(e={e},k0={k0},s0={sf},esr=ratiomaxabs)"):
            return Emitted(
                {f"{pre}.weight": np.frombuffer(data, _np(_EMIT_FP8[e])).reshape(rows, cols),
                 f"{pre}.weight_scale": scale},
                {"format": "float-quantized", "weights": _args(8, "float", strategy, gs)})
        if e == "s8" and decodes_as(grade, f"grit1(e=s8,k0={k0},s0={sf},esr=ratiomaxabs)"):
            return Emitted(
                {f"{pre}.weight": np.frombuffer(data, np.int8).reshape(rows, cols),
                 f"{pre}.weight_scale": scale},
                {"format": "int-quantized", "weights": _args(8, "int", strategy, gs)})
        if e == "s8" and decodes_as(grade, f"grit1(e=s8,k0={k0},s0={sf},zp=s8,"
                                           "esr=affineminmax)"):
            return Emitted(
                {f"{pre}.weight": np.frombuffer(data, np.int8).reshape(rows, cols),
                 f"{pre}.weight_scale": scale,
                 f"{pre}.weight_zero_point": np.frombuffer(aux, np.int8).reshape(rows, n_g)},
                {"format": "int-quantized",
                 "weights": _args(8, "int", strategy, gs, symmetric=False)})
    for bits in (4, 8):
        if sf in _EMIT_SCALES and decodes_as(
                grade, f"grit1(e=u{bits},k0={k0},s0={sf},zp=u{bits},esr=ratiomaxabs)"):
            off = 1 << (bits - 1)
            zp = np.frombuffer(aux, np.uint8)
            if zp.size and not (zp == off).all():
                raise refuse(name, conv, grade, f"pack-quantized is symmetric: every zero "
                             f"point must be {off}, {int((zp != off).sum())} are not")
            per = 32 // bits
            if cols % per:
                raise refuse(name, conv, grade, f"a row of {cols} codes does not fill whole "
                             f"int32 words of {per}")
            # canonical u<b> codes are LSB-first consecutive: per codes a little-endian word
            words = np.frombuffer(data, "<u4").reshape(rows, cols // per).view(np.int32)
            return Emitted(
                {f"{pre}.weight_packed": words,
                 f"{pre}.weight_scale": _scale_tensor(s0, sf, (rows, n_g)),
                 f"{pre}.weight_shape": np.array([rows, cols], np.int64)},
                {"format": "pack-quantized", "weights": _args(bits, "int", strategy, gs)})
    raise refuse(name, conv, grade, "no compressed-tensors format has this decode (the "
                 "formats written: nvfp4-pack-quantized, mxfp4-pack-quantized, "
                 "mxfp8-quantized, float-quantized, int-quantized, pack-quantized)")


def emit_config(emitted: Mapping[str, Emitted], plain: Mapping[str, Sequence[int]]) -> dict:
    """config.json's ``quantization_config``: one config group per distinct
    scheme, each targeting its modules by exact name; ``format`` the one
    format, or ``mixed-precision``; the plain 2-D ``….weight`` modules in
    ``ignore``."""
    groups: dict[str, dict] = {}
    by_scheme: dict[str, list[str]] = {}
    for name, em in emitted.items():
        key = repr(sorted(em.scheme.items()))
        by_scheme.setdefault(key, []).append(name)
        groups.setdefault(key, em.scheme)
    config_groups = {}
    for i, (key, names) in enumerate(sorted(by_scheme.items())):
        scheme = groups[key]
        config_groups[f"group_{i}"] = {
            "targets": sorted(n[:-len(".weight")] if n.endswith(".weight") else n
                              for n in names),
            "weights": scheme["weights"], "input_activations": None,
            "output_activations": None, "format": scheme["format"]}
    fmts = {g["format"] for g in config_groups.values()}
    return {"config.json": {"quantization_config": {
        "quant_method": "compressed-tensors", "config_groups": config_groups,
        "format": fmts.pop() if len(fmts) == 1 else "mixed-precision",
        "quantization_status": "compressed", "kv_cache_scheme": None,
        "ignore": unconverted_modules(plain),
        "global_compression_ratio": None, "sparsity_config": {}, "transform_config": {},
        "version": "0.20.1"}}}


CONVENTION = Convention("compressed-tensors", methods=("compressed-tensors",),
                        claims_module=claims_module,
                        recognise_module=recognise_module, claims_config=claims_config,
                        check_config=check_config, emit=emit, emit_config=emit_config,
                        module_format=module_format,
                        scale_leaves=("weight_global_scale", "weight_scale"),
                        small_leaves=("weight_shape",))
