"""GPTQ (AutoGPTQ ``pack``) and AWQ (AutoAWQ GEMM): recognised from
``qweight`` / ``qzeros`` / ``scales``, and their ``quantization_config``
checked against the tensors.

GPTQ: ``qweight`` [in·b/32, out], ``qzeros`` [in/g, out·b/32], ``scales``
[in/g, out]; 2/4/8 bits.  AWQ GEMM: ``qweight`` [in, out/8], nibble order
0,2,4,6,1,3,5,7.  Their bytes are not v1 planes (§0.3d, ``qzeros`` dense
nibbles): ``kind == "converted"``, and the record's converter moves them
into the canonical placement (:func:`gptq_awq_planes`), with ``zpc=minus1``
for GPTQ's v1 checkpoint format (it stores z − 1).  Act-order (a ``g_idx``
that is not i // group_size) is §0.3c.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..errors import GritSizeError, GritUsageError
from ..dtypes import bits_dtype
from .base import (K0_MAX, SCALE_FORMATS, SCALE_NP, Checkpoint, Convention, Emitted, Header, Reader,
                   Recognised, add_finding, as_list, decodes_as, descriptor_for, emit_planes,
                   grade_of, groups_check, inexpressible, leaves_line, quantised, refuse,
                   unconverted_modules)

__all__ = ["AWQ_ORDER", "gptq_awq_planes", "CONVENTION"]

#: AutoAWQ's GEMM packing: nibble i of an int32 holds output column 8c + AWQ_ORDER[i]
#: (awq/modules/linear/gemm.py ``pack``; its unpack is AWQ_REVERSE_ORDER)
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
#: the widths whose codes tile an int32 exactly (GPTQ's 3-bit packing straddles words)
_GPTQ_BITS = (2, 4, 8)


def claims_module(leaves: set[str], t: dict, h: Header) -> bool:
    return {"qweight", "qzeros", "scales"} <= leaves


def module_format(leaves: Mapping[str, Any]) -> tuple[str, str] | None:
    return ("gptq/awq", "int") if {"qweight", "qzeros", "scales"} <= set(leaves) else None


def claims_config(q: Mapping, ck: Checkpoint) -> bool:
    return q.get("config_groups") is None and \
        str(q.get("quant_method", "")).lower() in ("gptq", "awq")


def recognise_module(pre: str, t: dict, h: Header, q: dict,
                     read: Reader | None) -> list[Recognised]:
    method = str(q.get("quant_method", "")).lower()
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
        out.append(inexpressible(name, conv, files, "§0.3c",
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
        out.insert(0, inexpressible(name, conv, files, section,
                            reason + "; not converted by grit.load: " + "; ".join(blockers),
                            rlines))
        return out
    minus1 = kind == "gptq" and not v2
    g = grade_of(f"grit1(e=u{bits},k0={k0},s0={s0},zp=u{bits}"
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
        descriptor_for(g, (out_f, in_f), True), (("convert", qw), ("convert", sc), None,
                                         ("convert", qz)),
        section=section,
        reason=reason + f"; grit.load converts it into a v1 array ({how}): {g.canonical}",
        lines=rlines, notes=tuple(notes),
        converter=_converter(kind, int(bits), qw, sc, qz, (out_f, in_f), k0,
                             str(g["s0"]))))
    return out


def _converter(kind: str, bits: int, qw: str, sc: str, qz: str, shape: tuple[int, int],
               k0: int, s0: str):
    """The planes of a GPTQ / AWQ weight from its three file tensors' bytes."""
    out_f, in_f = shape
    n_g = in_f // k0
    per = 32 // bits
    sdt = np.dtype(SCALE_NP[s0])
    word = np.dtype("<u4")
    want: dict[str, tuple[tuple[int, int], np.dtype]] = {
        qw: ((in_f // per, out_f) if kind == "gptq" else (in_f, out_f // per), word),
        sc: ((n_g, out_f), sdt), qz: ((n_g, out_f // per), word)}

    def convert(raw: Mapping[str, Any]) -> list:
        arrays = {}
        for tn, (shp, dt) in want.items():
            buf = memoryview(raw[tn]).cast("B")
            need = shp[0] * shp[1] * dt.itemsize
            if len(buf) != need:
                raise GritSizeError(f"{tn} holds {len(buf)} bytes, its shape {list(shp)} "
                                    f"needs {need} (is the file cut short?)")
            arrays[tn] = np.frombuffer(buf, dt).reshape(shp)
        data, scale0, aux = gptq_awq_planes(kind, bits, arrays[qw], arrays[sc], arrays[qz])
        return [data, scale0, b"", aux]
    return convert


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




def check_config(ctx, ck: Checkpoint, q: dict, where: str) -> None:
    method = str(q.get("quant_method", "")).lower()
    bits = q.get("bits", q.get("w_bit"))
    gs = q.get("group_size", q.get("q_group_size"))
    ignore = [t for t in as_list(q.get("modules_to_not_convert")) if isinstance(t, str)]
    src = f"quantization_config ({method})"
    if q.get("desc_act") is True:
        gi = [p for p, lv in ck.modules.items() if "g_idx" in lv]
        add_finding(ctx, "S317", where, ck, sorted(gi),
             f"{method}: desc_act = true: act-order, §0.3 (c), groups permuted",
             (f"{len(gi)} module(s) ship a g_idx",), {"desc_act": True, "modules": gi})
    bad_bits: list[str] = []
    for pre in sorted(ck.modules):
        lv = ck.modules[pre]
        got = ck.formats.get(pre)
        if got is None:
            continue
        if any(pre == t or pre.endswith("." + t) or t in pre.split(".") for t in ignore):
            if quantised(got[0]):
                add_finding(ctx, "S315", where, ck, [pre],
                     f"{pre}: in modules_to_not_convert but quantised",
                        (leaves_line(ck, pre),), {"module": pre})
            continue
        if got[0] != "gptq/awq":
            continue
        qw, sc = lv["qweight"][1], lv["scales"][1]
        if len(qw) != 2 or len(sc) != 2 or not isinstance(bits, int) or not 1 <= bits <= 8:
            continue
        per = 32 // bits
        out_f = sc[1]
        in_f = qw[0] * per if qw[1] == out_f else qw[0]
        if qw[1] != out_f and qw[1] * per != out_f:
            bad_bits.append(pre)
            continue
        elem = f"int{bits}"
        groups_check(ctx, lv["scales"][2], pre, method, in_f, gs,
                      "channel" if gs == -1 else "group", lv["scales"], elem, src, axis=0)
    if bad_bits:
        add_finding(ctx, "S312", where, ck, bad_bits,
                f"{len(bad_bits)} {method} module(s): bits = {bits} declared, but qweight's "
                "packing does not fit it against the scales", (leaves_line(ck, bad_bits[0]),),
                {"bits": bits, "modules": bad_bits})



# ---------------------------------------------------------------------------
# emitting: GRIT arrays as AutoGPTQ's packing


def _pack_words(codes: np.ndarray, bits: int) -> np.ndarray:
    """Codes (uint8, last axis a multiple of 32/bits) packed LSB-first into
    little-endian int32 words along the last axis: code per·j + k at bits
    k·bits of word j (AutoGPTQ's ``pack``)."""
    per = 32 // bits
    c = codes.astype(np.uint32).reshape(*codes.shape[:-1], codes.shape[-1] // per, per)
    shifts = np.arange(per, dtype=np.uint32) * np.uint32(bits)
    return np.bitwise_or.reduce(c << shifts, axis=-1).astype("<u4").view("<i4")


def emit(name: str, array: Any) -> Emitted:
    """A GRIT array of GPTQ's shape (``e=u<b>``, b in 2/4/8, one scale and one
    zero point per group along the input axis, ``zps=shared``) as AutoGPTQ's
    ``qweight`` [in·b/32, out], ``qzeros`` [in/g, out·b/32], ``scales``
    [in/g, out] and a contiguous ``g_idx``: the inverse of
    :func:`gptq_awq_planes`, exact.  ``zpc=minus1`` is GPTQ's v1 checkpoint
    format (the stored zero points are z − 1), without it v2."""
    conv = "gptq"
    grade, (data, s0, _s1, aux) = emit_planes(name, array, conv)
    bits_s = str(grade["e"])[1:] if str(grade["e"]).startswith("u") else ""
    bits = int(bits_s) if bits_s.isdigit() else 0
    k0, sf = int(grade["k0"]), str(grade["s0"])
    minus1 = grade["zpc"] == "minus1"
    template = (f"grit1(e=u{bits},k0={k0},s0={sf},zp=u{bits}"
                f"{',zpc=minus1' if minus1 else ''},esr=affineminmax)")
    if bits not in _GPTQ_BITS or sf not in SCALE_NP or len(array.shape) != 2 or \
            not decodes_as(grade, template):
        raise refuse(name, conv, grade, "GPTQ packs u2/u4/u8 codes with one zero point and "
                     "one F16/BF16/F32 scale per group along the input axis of a 2-D weight")
    out_f, in_f = (int(x) for x in array.shape)
    per = 32 // bits
    n_g = in_f // k0
    if out_f % per:
        raise refuse(name, conv, grade, f"out_features {out_f} does not fill whole int32 words "
                     f"of {per} zero points")
    if in_f % per:
        raise refuse(name, conv, grade, f"in_features {in_f} does not fill whole int32 words "
                     f"of {per} codes")
    # canonical u<b> codes row-major over [out, in], LSB-first: whole words per row, so
    # the words of row j are column j of qweight
    words = np.frombuffer(data, "<u4").reshape(out_f, in_f // per)
    zeros = np.frombuffer(aux, np.uint8).reshape(out_f, n_g)
    pre = name[:-len(".weight")] if name.endswith(".weight") else name
    if SCALE_NP[sf] == "<u2":                        # bfloat16: its own dtype on disk
        sdt: Any = bits_dtype("bfloat16")
    else:
        sdt = np.dtype(SCALE_NP[sf])
    return Emitted(
        {f"{pre}.qweight": np.ascontiguousarray(words.T).view("<i4"),
         f"{pre}.qzeros": _pack_words(np.ascontiguousarray(zeros.T), bits),
         f"{pre}.scales": np.ascontiguousarray(
             np.frombuffer(s0, sdt).reshape(out_f, n_g).T),
         f"{pre}.g_idx": (np.arange(in_f) // k0).astype(np.int32)},
        {"bits": bits, "group_size": k0, "checkpoint_format": "gptq" if minus1 else "gptq_v2",
         "scale_dtype": sf})


def emit_config(emitted, plain) -> dict:
    """config.json's ``quantization_config``: one bit width, group size and
    checkpoint format for the whole checkpoint (GPTQ has no per-module
    entries); the plain 2-D weights' modules in ``modules_to_not_convert``."""
    keys = {(e.scheme["bits"], e.scheme["group_size"], e.scheme["checkpoint_format"])
            for e in emitted.values()}
    if len(keys) > 1:
        raise GritUsageError(f"gptq: one (bits, group_size, checkpoint_format) per checkpoint; "
                             f"these arrays have {sorted(keys)}")
    bits, gs, fmt = keys.pop() if keys else (4, 128, "gptq")
    return {"config.json": {"quantization_config": {
        "quant_method": "gptq", "bits": bits, "group_size": gs, "desc_act": False,
        "sym": False, "checkpoint_format": fmt,
        "modules_to_not_convert": unconverted_modules(plain)}}}


CONVENTION = Convention("gptq-awq", methods=("gptq", "awq"),
                        claims_module=claims_module,
                        recognise_module=recognise_module, claims_config=claims_config,
                        check_config=check_config, module_format=module_format,
                        emit=emit, emit_config=emit_config)
