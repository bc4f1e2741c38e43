"""NVIDIA ModelOpt: ``hf_quant_config.json`` (``quant_algo`` NVFP4 or FP8)
checked against the tensors."""
from __future__ import annotations

from typing import Mapping

from .base import (Checkpoint, Convention, add_finding, as_list, groups_check, ignored, is_linear,
                   leaves_line, on_disk, quantised)

__all__ = ["CONVENTION"]


_MODELOPT = {"NVFP4": ("modelopt-nvfp4", "nvfp4", 16), "FP8": ("float-quantized", "fp8", None)}


def claims_config(q: Mapping, ck: Checkpoint) -> bool:
    return ck.modelopt is not None or str(q.get("quant_method", "")).lower() == "modelopt"


def check_config(ctx, ck: Checkpoint, q: Mapping, where: str) -> None:
    if ck.modelopt is not None:          # hf_quant_config.json's, before config.json's
        q = ck.modelopt
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
        got = on_disk(lv)
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




CONVENTION = Convention("modelopt", claims_config=claims_config, check_config=check_config)
