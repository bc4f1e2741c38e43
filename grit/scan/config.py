"""Checkpoint-wide contracts of ``grit scan``: the quantisation config against
the tensors (S310–S319) and the parts runtimes fuse (S320, S321).

Per safetensors file, :func:`record` keeps what these checks need of its
header — each module's leaves (dtype, shape, file) and the values of its
per-tensor scales (one float each) — in a :class:`Checkpoint` per checkpoint,
with the config read beside it.  After every file is read,
:func:`config_vs_tensors` checks each claim of the config and
:func:`fused_grades` / :func:`fused_scales` the fused parts.

The compressed-tensors config is validated against its own schema's field
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

import fnmatch
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..io.recognise import read_modelopt_config

__all__ = ["CT_FIELDS", "CT_ENUMS", "SERVED_GROUPS", "Checkpoint", "record",
           "config_vs_tensors", "fused_grades", "fused_scales", "on_disk", "scheme_for",
           "FUSED_SCALE_LEAVES"]

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

#: group sizes the runtime kernels serve, per on-disk element: vLLM's
#: ``MARLIN_SUPPORTED_GROUP_SIZES`` for int4 (GPTQ, AWQ, pack-quantized);
#: NVFP4 blocks of 16 and MXFP4 blocks of 32 are fixed by the formats
SERVED_GROUPS: dict[str, tuple[int, ...]] = {
    "int4": (-1, 32, 64, 128), "nvfp4": (16,), "mxfp4": (32,)}

#: per-tensor / global scale leaves that fused parts must share
FUSED_SCALE_LEAVES = ("weight_scale_2", "weight_global_scale", "weight_scale")


# ---------------------------------------------------------------------------
# what is on disk

Leaf = tuple[str, tuple[int, ...], str]          # dtype, shape, file


@dataclass
class Checkpoint:
    """What the config checks need of one checkpoint's safetensors files."""

    name: str
    config: dict | None = None
    modelopt: dict | None = None                 # hf_quant_config.json "quantization"
    #: module prefix -> leaf -> (dtype, shape, file)
    modules: dict[str, dict[str, Leaf]] = field(default_factory=dict)
    #: tensor name -> its value (per-tensor scales, weight_shape), read small
    scalars: dict[str, tuple[float, ...]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)


_FLOAT = ("F16", "BF16", "F32", "F64")
_FP8 = ("F8_E4M3", "F8_E5M2")


def record(ckpts: dict[str, Checkpoint], checkpoint: str, path: str,
           entries: Mapping[str, tuple[str, Sequence[int]]], config: dict | None,
           value: Callable[[str], Any]) -> None:
    """Keep one safetensors file's header in its checkpoint's record.
    ``entries``: tensor -> (dtype, shape); ``value(tensor)``: a small
    tensor's values or None."""
    ck = ckpts.get(checkpoint)
    if ck is None:
        ck = ckpts[checkpoint] = Checkpoint(checkpoint, config, read_modelopt_config(path))
    ck.files.append(path)
    for n, (dt, shape) in entries.items():
        if "." not in n:
            continue
        pre, leaf = n.rsplit(".", 1)
        shp = tuple(int(x) for x in shape)
        ck.modules.setdefault(pre, {})[leaf] = (dt, shp, path)
        small = math.prod(shp) <= 2 and (leaf in FUSED_SCALE_LEAVES or leaf == "weight_shape")
        if small:
            try:
                v = value(n)
            except Exception:  # noqa: BLE001 - an unreadable scalar is unknown
                v = None
            if v is not None and 0 < len(v) <= 2:
                ck.scalars[n] = tuple(float(x) for x in v)


def on_disk(leaves: Mapping[str, Leaf]) -> tuple[str, str] | None:
    """(format, element) of one module as its tensors show it, or None for a
    module without a weight.  Formats are compressed-tensors' names where one
    fits; element is ``int4``/``int8``/``intN``, ``nvfp4``, ``mxfp4``, ``fp8``,
    ``dense``."""
    def dt(leaf):
        return leaves[leaf][0] if leaf in leaves else None
    if "weight_packed" in leaves:
        if dt("weight_packed") == "I32":
            return "pack-quantized", "int"
        if dt("weight_scale") == "F8_E4M3" or "weight_global_scale" in leaves:
            return "nvfp4-pack-quantized", "nvfp4"
        return "mxfp4-pack-quantized", "mxfp4"
    if {"qweight", "qzeros", "scales"} <= set(leaves):
        return "gptq/awq", "int"
    if "weight" not in leaves:
        return None
    w = dt("weight")
    if w in _FP8 and "weight_scale" in leaves:
        return "float-quantized", "fp8"
    if w == "I8" and "weight_scale" in leaves:
        return "int-quantized", "int8"
    if w == "U8" and dt("weight_scale") == "F8_E4M3":
        return "modelopt-nvfp4", "nvfp4"
    if w in _FLOAT:
        return "dense", "dense"
    return None


def _is_linear(pre: str, leaves: Mapping[str, Leaf]) -> bool:
    if "embed" in pre.rsplit(".", 1)[-1] or pre.endswith(("wte", "wpe")):
        return False
    if {"weight_packed", "qweight"} & set(leaves):
        return True
    w = leaves.get("weight")
    return w is not None and len(w[1]) == 2


def _quantised(fmt: str | None) -> bool:
    return fmt is not None and fmt != "dense"


# ---------------------------------------------------------------------------
# compressed-tensors target matching


#: a target that names a module class (compressed-tensors' class-name targets)
_CLASS = re.compile(r"[A-Z][A-Za-z0-9_]*")


def _match(name: str, target: str, linear: bool) -> str | None:
    """How ``target`` matches module ``name``: "exact", "re", "class" or None."""
    if target.startswith("re:"):
        try:
            return "re" if re.match(target[3:], name) else None
        except re.error:
            return None
    if target == name:
        return "exact"
    if linear and _CLASS.fullmatch(target):
        return "class"
    return None


def scheme_for(groups: Mapping[str, Any], name: str, linear: bool
               ) -> tuple[str | None, list[tuple[str, str]]]:
    """(winning group, [(target, group) matched, in compressed-tensors' order])."""
    target_group: dict[str, str] = {}
    for gname, g in groups.items():
        if isinstance(g, Mapping):
            for t in _list(g.get("targets")):
                if isinstance(t, str):
                    target_group[t] = gname            # a later group takes the target
    hits = {t: _match(name, t, linear) for t in target_group}
    order = sorted((t for t, k in hits.items() if k in ("exact", "re")),
                   key=lambda t: ("re:" in t, t))
    order += [t for t, k in hits.items() if k == "class"]
    matched = [(t, target_group[t]) for t in order]
    return (matched[0][1] if matched else None), matched


def _ignored(name: str, ignore: Sequence[str], linear: bool, glob: bool = False) -> str | None:
    for t in ignore:
        if not isinstance(t, str):
            continue
        if _match(name, t, linear) or (glob and fnmatch.fnmatchcase(name, t)):
            return t
    return None


# ---------------------------------------------------------------------------
# config vs tensors


def _q(config: Mapping | None) -> dict:
    if not isinstance(config, Mapping):
        return {}
    q = config.get("quantization_config") or config.get("compression_config")
    return dict(q) if isinstance(q, Mapping) else {}


def config_vs_tensors(ctx, ckpts: Mapping[str, Checkpoint]) -> None:
    """S310–S319 for every checkpoint with a quantisation config."""
    for name in sorted(ckpts):
        ck = ckpts[name]
        q = _q(ck.config)
        where = ck.files[0] if len(ck.files) == 1 else ck.name
        method = str(q.get("quant_method", "")).lower()
        try:
            if q.get("config_groups") is not None or method == "compressed-tensors":
                _compressed_tensors(ctx, ck, q, where)
            elif method in ("gptq", "awq"):
                _gptq_awq(ctx, ck, q, method, where)
            if ck.modelopt is not None or method == "modelopt":
                _modelopt(ctx, ck, ck.modelopt if ck.modelopt is not None else q, where)
        except _ODD as e:       # a config of unexpected types: said, never a traceback
            ctx.add("S319", where, None, "the quantisation config could not be checked "
                    f"against the tensors: {type(e).__name__}: {e}"[:300], (),
                    {"problems": [f"{type(e).__name__}: {e}"[:300]]})


#: what a config of unexpected types can make the checks raise
_ODD = (TypeError, ValueError, KeyError, IndexError, AttributeError, ArithmeticError,
        RecursionError)


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
    if fmt in ("float-quantized", "int-quantized", "dense"):
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


def _groups_check(ctx, where: str, pre: str, what: str, in_f: int | None,
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
                {"group_size": gs, "element": elem, "served": list(SERVED_GROUPS[elem])})
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
        ctx.add("S311", where, f"{pre}.weight",
                f"{what}: {how}, but the scale tensor is {scale[0]} {list(scale[1])}",
                (f"declared by {src}",
                 f"the scales say k0 = {in_f // cols if cols else '?'}" if cols and not in_f % cols
                 else "the scale columns do not divide in_features"),
                {"declared_group_size": gs, "strategy": strategy, "in_features": in_f,
                 "scale_shape": list(scale[1]), "scale_file": os.path.basename(scale[2])})


def _compressed_tensors(ctx, ck: Checkpoint, q: dict, where: str) -> None:
    _schema(ctx, q, where)
    cg = q.get("config_groups")
    groups: Mapping[str, Any] = cg if isinstance(cg, Mapping) else {}
    ignore = [t for t in _list(q.get("ignore")) if isinstance(t, str)]
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
        got = on_disk(leaves)
        if got is None:
            continue
        lin = _is_linear(pre, leaves)
        ig = _ignored(pre, ignore, lin)
        win, matched = scheme_for(groups, pre, lin)
        used_targets.update(t for t, _ in matched)
        if ig is not None:
            used_ignore.add(ig)
            if _quantised(got[0]):
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
        if not _quantised(got[0]):
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
        _groups_check(ctx, scale[2] if scale else where, pre, f"config group {win!r}", in_f,
                      w.get("group_size"), strategy, scale, elem,
                      f"config_groups.{win}.weights")
    for (win, fmt, got), pres in sorted(fmt_bad.items()):
        _add(ctx, "S310", where, ck, pres,
                f"{len(pres)} module(s) of config group {win!r}: format {fmt!r} declared, the "
                f"shards hold {got}", (f"{_leaves_line(ck, pres[0])}",),
                {"group": win, "declared": fmt, "on_disk": got, "modules": pres})
    if status_bad:
        _add(ctx, "S310", where, ck, status_bad,
                f"{len(status_bad)} module(s) ship packed tensors but quantization_status is "
                f"{status!r}, not 'compressed'",
                ("compressed-tensors decompresses only a config whose status is compressed",),
                {"status": status, "modules": status_bad})
    for (win, declared, got), pres in sorted(elem_bad.items()):
        _add(ctx, "S312", where, ck, pres,
                f"{len(pres)} module(s) of config group {win!r}: {declared} declared, the "
                f"tensors read as {got}", (_leaves_line(ck, pres[0]),),
                {"group": win, "declared": declared, "on_disk": got, "modules": pres})
    for (win, gnames, targets), pres in sorted(overlaps.items()):
        _add(ctx, "S313", where, ck, pres,
                f"{len(pres)} module(s) match config groups {', '.join(map(repr, gnames))} "
                f"with different weights schemes: {win!r} wins",
                (f"matched targets in compressed-tensors' order: {list(targets)}",
                 f"group {win!r} applies to: " + ", ".join(pres[:6])
                 + (", …" if len(pres) > 6 else "")),
                {"winner": win, "groups": list(gnames), "targets": list(targets),
                 "modules": pres})
    for t in [t for g in groups.values() if isinstance(g, Mapping)
              for t in _list(g.get("targets")) if isinstance(t, str)]:
        if t not in used_targets:
            ctx.add("S314", where, None, f"config_groups target {t!r} matches no module",
                    (), {"target": t})
    for t in ignore:
        if t not in used_ignore:
            ctx.add("S314", where, None, f"ignore entry {t!r} matches no module", (),
                    {"ignore": t})
    if ign_bad:
        _add(ctx, "S315", where, ck, ign_bad,
                f"{len(ign_bad)} ignored module(s) ship quantised tensors",
                (_leaves_line(ck, ign_bad[0]),), {"modules": ign_bad})
    for win, pres in sorted(dense_bad.items()):
        _add(ctx, "S316", where, ck, pres,
                f"{len(pres)} module(s) targeted by config group {win!r} ship only a dense "
                "weight", (_leaves_line(ck, pres[0]),), {"group": win, "modules": pres})
    for win, pres in sorted(act.items()):
        _add(ctx, "S317", where, ck, pres,
                f"{len(pres)} module(s) of config group {win!r} use act-order (g_idx): "
                "§0.3 (c), groups permuted", (), {"group": win, "modules": pres})


def _gptq_awq(ctx, ck: Checkpoint, q: dict, method: str, where: str) -> None:
    bits = q.get("bits", q.get("w_bit"))
    gs = q.get("group_size", q.get("q_group_size"))
    ignore = [t for t in _list(q.get("modules_to_not_convert")) if isinstance(t, str)]
    src = f"quantization_config ({method})"
    if q.get("desc_act") is True:
        gi = [p for p, lv in ck.modules.items() if "g_idx" in lv]
        _add(ctx, "S317", where, ck, sorted(gi),
             f"{method}: desc_act = true: act-order, §0.3 (c), groups permuted",
             (f"{len(gi)} module(s) ship a g_idx",), {"desc_act": True, "modules": gi})
    bad_bits: list[str] = []
    for pre in sorted(ck.modules):
        lv = ck.modules[pre]
        got = on_disk(lv)
        if got is None:
            continue
        if any(pre == t or pre.endswith("." + t) or t in pre.split(".") for t in ignore):
            if _quantised(got[0]):
                _add(ctx, "S315", where, ck, [pre],
                     f"{pre}: in modules_to_not_convert but quantised",
                        (_leaves_line(ck, pre),), {"module": pre})
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
        _groups_check(ctx, lv["scales"][2], pre, method, in_f, gs,
                      "channel" if gs == -1 else "group", lv["scales"], elem, src, axis=0)
    if bad_bits:
        _add(ctx, "S312", where, ck, bad_bits,
                f"{len(bad_bits)} {method} module(s): bits = {bits} declared, but qweight's "
                "packing does not fit it against the scales", (_leaves_line(ck, bad_bits[0]),),
                {"bits": bits, "modules": bad_bits})


_MODELOPT = {"NVFP4": ("modelopt-nvfp4", "nvfp4", 16), "FP8": ("float-quantized", "fp8", None)}


def _modelopt(ctx, ck: Checkpoint, q: Mapping, where: str) -> None:
    algo = str(q.get("quant_algo") or "").upper()
    if algo not in _MODELOPT:
        return
    fmt, elem, dflt = _MODELOPT[algo]
    gs = q.get("group_size", dflt)
    exclude = [t for t in _list(q.get("exclude_modules") or q.get("ignore"))
               if isinstance(t, str)]
    src = "ModelOpt quant_algo " + algo
    used: set[str] = set()
    wrong: dict[str, list[str]] = {}
    ign_bad, dense_bad = [], []
    for pre in sorted(ck.modules):
        lv = ck.modules[pre]
        got = on_disk(lv)
        if got is None or not _is_linear(pre, lv):
            continue
        ig = _ignored(pre, exclude, True, glob=True)
        if ig is not None:
            used.add(ig)
            if _quantised(got[0]):
                ign_bad.append(pre)
            continue
        if got[0] == "dense":
            dense_bad.append(pre)
            continue
        if got[0] != fmt:
            wrong.setdefault(got[0], []).append(pre)
            continue
        if algo == "NVFP4":
            _groups_check(ctx, lv["weight_scale"][2], pre, src, lv["weight"][1][-1] * 2, gs,
                          "group", lv["weight_scale"], elem, src)
    for held, pres in sorted(wrong.items()):
        _add(ctx, "S310", where, ck, pres,
                f"{len(pres)} module(s): {src} declared, the shards hold {held}",
                (_leaves_line(ck, pres[0]),), {"declared": algo, "on_disk": held,
                                               "modules": pres})
    if ign_bad:
        _add(ctx, "S315", where, ck, ign_bad,
                f"{len(ign_bad)} module(s) in exclude_modules ship quantised tensors",
                (_leaves_line(ck, ign_bad[0]),), {"modules": ign_bad})
    if dense_bad:
        _add(ctx, "S316", where, ck, dense_bad,
                f"{len(dense_bad)} module(s) not in exclude_modules ship only a dense weight "
                f"under {src}", (_leaves_line(ck, dense_bad[0]),), {"modules": dense_bad})
    for t in exclude:
        if t not in used:
            ctx.add("S314", where, None, f"exclude_modules entry {t!r} matches no module", (),
                    {"exclude": t})


def _weights(ck: Checkpoint, modules: Sequence[str]) -> list[str]:
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


def _add(ctx, code: str, where: str, ck: Checkpoint, modules: Sequence[str], message: str,
         lines: Sequence[str], detail: dict) -> None:
    names = _weights(ck, modules)
    # the one shard that holds them all, else the checkpoint (as S301/S303 name it)
    files = {lf for pre in modules for (_, _, lf) in ck.modules.get(pre, {}).values()}
    ctx.add(code, next(iter(files)) if len(files) == 1 else where, _names(names), message,
            tuple(lines), {**detail, "tensors": names})


def _list(v: Any) -> list:
    return list(v) if isinstance(v, (list, tuple)) else []


def _names(names: Sequence[str]) -> str:
    if len(names) == 1:
        return names[0]
    return f"{len(names)} tensors: " + ", ".join(names[:3]) + (", …" if len(names) > 3 else "")


def _leaves_line(ck: Checkpoint, pre: str) -> str:
    lv = ck.modules.get(pre, {})
    return f"{pre}: " + ", ".join(f"{leaf} {d} {list(s)}" for leaf, (d, s, _) in sorted(lv.items()))


# ---------------------------------------------------------------------------
# fused parts

#: name pattern -> the fused set it belongs to: (prefix, family); one entry per
#: naming convention (HF modules; GGUF blk.N tensors)
_FUSE = (
    (re.compile(r"^(.*\.)(q_proj|k_proj|v_proj)$"), "qkv"),
    (re.compile(r"^(.*\.)(gate_proj|up_proj)$"), "gate_up"),
    (re.compile(r"^(.*\.experts\.\d+\.)(w1|w3)$"), "gate_up"),
    (re.compile(r"^(blk\.\d+\.)attn_(q|k|v)$"), "qkv"),
    (re.compile(r"^(blk\.\d+\.)ffn_(gate|up)$"), "gate_up"),
)
_EXPERTS = re.compile(r"^(.*\.experts)\.\d+\.")


def fused_key(module: str) -> tuple[str, str] | None:
    """(group prefix, family) of a module a runtime fuses, or None."""
    for rx, fam in _FUSE:
        m = rx.match(module)
        if m:
            return m[1], fam
    return None


def _module(name: str) -> str:
    return name[:-len(".weight")] if name.endswith(".weight") else name


def fused_grades(ctx, explained: Callable[[Sequence[Any]], Any]) -> None:
    """S320: fused parts (q/k/v, gate/up, one layer's experts) of one
    checkpoint that do not share a grade.  ``explained(tensors)`` is true
    when a declared llama.cpp recipe explains a GGUF mix (S302)."""
    sets: dict[tuple[str, str, str], list[Any]] = {}
    for t in ctx.tensors:
        mod = _module(t.name)
        k = fused_key(mod)
        if k is not None:
            sets.setdefault((t.checkpoint, k[0], k[1]), []).append(t)
        m = _EXPERTS.match(mod)
        if m:
            sets.setdefault((t.checkpoint, m[1] + ".", "experts"), []).append(t)
    for (ckpt, prefix, fam), ts in sorted(sets.items(), key=lambda kv: kv[0]):
        grades: dict[int, list[Any]] = {}
        for t in ts:
            grades.setdefault(t.desc.grade_id, []).append(t)
        if len(grades) < 2 or (all(t.ggml_type for t in ts) and explained(ts)):
            continue
        files = sorted({t.file for t in ts})
        lines = tuple(f"{_label(ctx, g)}: " + ", ".join(t.name for t in gts[:6])
                      + (", …" if len(gts) > 6 else "") for g, gts in grades.items())
        names = [t.name for t in ts]
        ctx.add("S320", files[0] if len(files) == 1 else ckpt, _names(names),
                f"{fam} parts of {prefix.rstrip('.')} carry {len(grades)} grades; a fused "
                "kernel takes one", lines,
                {"family": fam, "prefix": prefix, "tensors": names,
                 "grades": {f"0x{g:016X}": {"grade": _label(ctx, g),
                                            "tensors": [t.name for t in gts]}
                            for g, gts in grades.items()}})


def _label(ctx, gid_: int) -> str:
    g = ctx.grades.get(gid_)
    return (g.name or g.canonical) if g is not None else f"0x{gid_:016X}"


def fused_scales(ctx, ckpts: Mapping[str, Checkpoint],
                 extra: Sequence[tuple[str, str, str, float]] = ()) -> None:
    """S321: per-tensor / global scales of fused parts that differ.
    ``extra``: (checkpoint, file, tensor, value) of scales read elsewhere
    (GGUF NVFP4 companions, ``<tensor>.scale``)."""
    sets: dict[tuple[str, str, str, str], list[tuple[str, str, float]]] = {}
    for cname, ck in ckpts.items():
        for pre, lv in ck.modules.items():
            k = fused_key(pre)
            if k is None:
                continue
            for leaf in FUSED_SCALE_LEAVES:
                sv = ck.scalars.get(f"{pre}.{leaf}")
                if sv is not None and len(sv) == 1 and leaf in lv and \
                        math.prod(lv[leaf][1]) == 1:
                    sets.setdefault((cname, k[0], k[1], leaf), []).append(
                        (f"{pre}.{leaf}", lv[leaf][2], sv[0]))
    for cname, path, tn, v in extra:
        k = fused_key(_module(tn[:-len(".scale")] if tn.endswith(".scale") else tn))
        if k is not None:
            sets.setdefault((cname, k[0], k[1], "scale"), []).append((tn, path, v))
    for (cname, prefix, fam, leaf), parts in sorted(sets.items()):
        if len(parts) < 2:
            continue
        vals = [abs(v) for _, _, v in parts]
        if len({v for _, _, v in parts}) < 2:
            continue
        lo, hi = min(vals), max(vals)
        spread = hi / lo if lo > 0 and math.isfinite(hi) else None     # None: a zero
        files = sorted({p for _, p, _ in parts})
        ctx.add("S321", files[0] if len(files) == 1 else cname,
                _names([tn for tn, _, _ in parts]),
                f"{fam} parts of {prefix.rstrip('.')} have different {leaf}: spread "
                f"max/min = {'∞ (a zero scale)' if spread is None else format(spread, '.6g')}",
                tuple(f"{tn} = {str(np.float32(v))}" for tn, _, v in parts),  # shortest f32
                {"family": fam, "prefix": prefix, "leaf": leaf, "spread": spread,
                 "tensors": [tn for tn, _, _ in parts],
                 "values": {tn: v for tn, _, v in parts}})
