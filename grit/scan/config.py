"""Checkpoint-wide contracts of ``grit scan``: the quantisation config against
the tensors (S310–S319) and the parts runtimes fuse (S320, S321).

Per safetensors file, :func:`record` keeps what these checks need of its
header — each module's leaves (dtype, shape, file) and the values of its
per-tensor scales (one float each) — in a
:class:`~grit.conventions.base.Checkpoint` per checkpoint, with the config
read beside it.  After every file is read, :func:`config_vs_tensors` runs
each convention's config checks (:func:`grit.conventions.check_config`: the
conventions own them) and :func:`fused_grades` / :func:`fused_scales` check
the fused parts.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..conventions import check_config, scale_leaves, small_leaves
from ..conventions.base import Checkpoint, names_label
from ..io.recognise import read_sidecars

__all__ = ["Checkpoint", "record", "config_vs_tensors", "fused_grades", "fused_scales",
           "fused_key"]

def record(ckpts: dict[str, Checkpoint], checkpoint: str, path: str,
           entries: Mapping[str, tuple[str, Sequence[int]]], config: dict | None,
           value: Callable[[str], Any]) -> None:
    """Keep one safetensors file's header in its checkpoint's record.
    ``entries``: tensor -> (dtype, shape); ``value(tensor)``: a small
    tensor's values or None."""
    ck = ckpts.get(checkpoint)
    if ck is None:
        ck = ckpts[checkpoint] = Checkpoint(checkpoint, config, read_sidecars(path))
    ck.files.append(path)
    wanted = small_leaves()
    for n, (dt, shape) in entries.items():
        if "." not in n:
            continue
        pre, leaf = n.rsplit(".", 1)
        shp = tuple(int(x) for x in shape)
        ck.modules.setdefault(pre, {})[leaf] = (dt, shp, path)
        if math.prod(shp) <= 2 and leaf in wanted:
            try:
                v = value(n)
            except Exception:  # noqa: BLE001 - an unreadable scalar is unknown
                v = None
            if v is not None and 0 < len(v) <= 2:
                ck.scalars[n] = tuple(float(x) for x in v)



def config_vs_tensors(ctx, ckpts: Mapping[str, Checkpoint]) -> None:
    """S310–S319 for every checkpoint with a quantisation config."""
    check_config(ctx, ckpts)


# ---------------------------------------------------------------------------
# fused parts

#: name pattern -> the fused set it belongs to: (prefix, family), for the module
#: names of the runtimes that fuse them (vLLM, SGLang, TensorRT-LLM load HF modules
#: into one qkv_proj / gate_up_proj).  llama.cpp's GGUF tensors (blk.N.attn_q/k/v,
#: ffn_gate/up) are not here: llama.cpp multiplies each by its own ggml_mul_mat
#: (build_attn, llm_build_ffn, each with its own optional .scale), so parts of
#: different types or scales are nothing a kernel has to reconcile
#: (docs/spec-decisions.md, "Fused parts in GGUF")
_FUSE = (
    (re.compile(r"^(.*\.)(q_proj|k_proj|v_proj)$"), "qkv"),
    (re.compile(r"^(.*\.)(gate_proj|up_proj)$"), "gate_up"),
    (re.compile(r"^(.*\.experts\.\d+\.)(w1|w3)$"), "gate_up"),
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


def fused_grades(ctx) -> None:
    """S320: fused parts (q/k/v, gate/up, one layer's experts) of one
    checkpoint that do not share a grade."""
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
        if len(grades) < 2:
            continue
        files = sorted({t.file for t in ts})
        lines = tuple(f"{_label(ctx, g)}: " + ", ".join(t.name for t in gts[:6])
                      + (", …" if len(gts) > 6 else "") for g, gts in grades.items())
        names = [t.name for t in ts]
        ctx.add("S320", files[0] if len(files) == 1 else ckpt, names_label(names),
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
    fused = scale_leaves()
    for cname, ck in ckpts.items():
        for pre, lv in ck.modules.items():
            k = fused_key(pre)
            if k is None:
                continue
            for leaf in fused:
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
                names_label([tn for tn, _, _ in parts]),
                f"{fam} parts of {prefix.rstrip('.')} have different {leaf}: spread "
                f"max/min = {'∞ (a zero scale)' if spread is None else format(spread, '.6g')}",
                tuple(f"{tn} = {str(np.float32(v))}" for tn, _, v in parts),  # shortest f32
                {"family": fam, "prefix": prefix, "leaf": leaf, "spread": spread,
                 "tensors": [tn for tn, _, _ in parts],
                 "values": {tn: v for tn, _, v in parts}})
