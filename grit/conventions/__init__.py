"""Quantisation conventions: one module each, and the registry every reader
asks.

A convention (:class:`~grit.conventions.base.Convention`) is the one owner of
what its tensors mean: which header it claims, the GRIT arrays (or the
inexpressible records) it recognises there, and the checks of its declared
``quantization_config`` against the tensors.  :func:`recognise` (what
``grit.load`` and ``grit scan`` call on a safetensors header without GRIT
metadata) and :func:`check_config` (``grit scan``'s checkpoint-wide
config checks) are the only dispatch; nothing outside this package branches
on a convention.

The built-in conventions are listed in :data:`BUILTIN`, in the order they
are asked.  A package adds one without editing grit through the entry-point
group ``grit.conventions``: each entry point names a
:class:`~grit.conventions.base.Convention`, asked after the built-in ones.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Mapping

from ..array import GritArray
from ..errors import GritError, GritUsageError
from ..dtypes import with_ml_dtypes
from . import bitsandbytes, compressed_tensors, fp8_fnuz, gpt_oss, gptq_awq, grit, modelopt, torchao
from .base import (Checkpoint, Convention, Emitted, Header, Leaf, Reader, Recognised, dense_format,
                   qconfig)

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "conventions", "recognise", "check_config",
           "scale_leaves", "small_leaves", "sidecars", "module_format", "emit", "Emission",
           "by_name", "Convention", "Emitted", "Recognised", "Checkpoint"]

#: the built-in conventions, in the order they are asked: header-wide ones
#: first (a dtype v1 cannot express, a codebook, torchao's metadata, gpt-oss's
#: ``*_blocks`` / ``*_scales`` pairs), then
#: the module conventions
BUILTIN: tuple[Convention, ...] = (
    fp8_fnuz.CONVENTION, bitsandbytes.CONVENTION, torchao.CONVENTION, gpt_oss.CONVENTION,
    compressed_tensors.CONVENTION, modelopt.CONVENTION, gptq_awq.CONVENTION, grit.CONVENTION)

#: the entry-point group third-party conventions register under
ENTRY_POINT_GROUP = "grit.conventions"

_loaded: tuple[Convention, ...] | None = None


def conventions() -> tuple[Convention, ...]:
    """The built-in conventions, then those registered under
    :data:`ENTRY_POINT_GROUP` (loaded once; an entry point that does not
    name a :class:`Convention` is a :class:`~grit.errors.GritUsageError`)."""
    global _loaded
    if _loaded is None:
        extra = []
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            conv = ep.load()
            if not isinstance(conv, Convention):
                raise GritUsageError(f"entry point {ep.name!r} of group {ENTRY_POINT_GROUP!r} "
                                     f"names a {type(conv).__name__}, not a Convention")
            extra.append(conv)
        _loaded = BUILTIN + tuple(extra)
    return _loaded


def scale_leaves() -> tuple[str, ...]:
    """Every convention's per-tensor scale leaves, in registry order."""
    return tuple(dict.fromkeys(leaf for c in conventions() for leaf in c.scale_leaves))


def small_leaves() -> tuple[str, ...]:
    """The leaves of small values the config checks read: the per-tensor
    scales and each convention's other small leaves."""
    return scale_leaves() + tuple(dict.fromkeys(
        leaf for c in conventions() for leaf in c.small_leaves))


def by_name(name: str) -> Convention:
    """The registered convention called ``name`` (a GritUsageError naming the
    known ones otherwise)."""
    for c in conventions():
        if c.name == name:
            return c
    raise GritUsageError(f"no convention {name!r}; known: "
                         f"{', '.join(c.name for c in conventions())}")


@dataclass(frozen=True)
class Emission:
    """What :func:`emit` writes: every file tensor (the convention's for each
    GRIT array, the plain tensors as they are), the JSON objects to merge
    into the files beside them (``config.json`` …), and each array's
    :class:`Emitted` record."""

    tensors: dict[str, Any]
    configs: dict[str, dict]
    weights: dict[str, Emitted]


def emit(convention: str, arrays: Mapping[str, Any]) -> Emission:
    """``{name: GritArray | ndarray}`` as the tensors and config entries of
    ``convention``: each GRIT array through the convention's ``emit``, plain
    arrays unchanged.  Every array the convention cannot hold is refused at
    once, in one GritUsageError listing each with its reason; a file tensor
    two arrays would both write is refused too."""
    conv = by_name(convention)
    if conv.emit is None or conv.emit_config is None:
        raise GritUsageError(f"convention {convention!r} does not write tensors")
    tensors: dict[str, Any] = {}
    weights: dict[str, Emitted] = {}
    plain: dict[str, tuple[int, ...]] = {}
    refused: list[str] = []
    for name, a in arrays.items():
        if isinstance(a, GritArray):
            try:
                em = conv.emit(name, a)
            except GritError as e:
                refused.append(str(e).splitlines()[0])
                continue
            weights[name] = em
            out = {tn: with_ml_dtypes(v) for tn, v in em.tensors.items()}
        else:
            plain[name] = tuple(getattr(a, "shape", ()))
            out = {name: a}
        for tn, v in out.items():
            if tn in tensors:
                refused.append(f"{name}: file tensor {tn!r} is written twice")
            tensors[tn] = v
    if refused:
        raise GritUsageError(f"{convention}: {len(refused)} array(s) cannot be written:\n  "
                             + "\n  ".join(refused))
    return Emission(tensors, conv.emit_config(weights, plain), weights)


def sidecars() -> tuple[str, ...]:
    """The JSON files beside a model file that some convention reads."""
    return tuple(dict.fromkeys(name for c in conventions() for name in c.sidecars))


def module_format(leaves: Mapping[str, Leaf]) -> tuple[str, str] | None:
    """(format, element) of one module as its tensors show it: the first
    convention that classifies it, else ``dense`` for a float ``weight``, else
    None (no weight)."""
    for c in conventions():
        if c.module_format is not None:
            got = c.module_format(leaves)
            if got is not None:
                return got
    return dense_format(leaves)


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
    q = qconfig(config)
    used: set[str] = set()
    convs = conventions()
    for conv in convs:
        if conv.recognise_header is None:
            continue
        for r in conv.recognise_header({n: v for n, v in h.items() if n not in used},
                                       metadata, q, read):
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
        # a module's bias is a plain tensor beside its weight, never one of the
        # weight's planes: it stays out of what a convention claims
        leaves = prefixes[pre] - {"bias"}
        if not leaves:
            continue
        t = {leaf: pre + "." + leaf for leaf in leaves}
        conv = next((c for c in convs if c.claims_module is not None
                     and c.recognise_module is not None and c.claims_module(leaves, t, h)),
                    None)
        if conv is None:
            continue
        try:
            r = conv.recognise_module(pre, t, h, q, read)
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError,
                OverflowError) as e:
            r = [Recognised(pre + ".weight", "unrecognised", "inexpressible",
                            tuple(sorted(t.values())), section="§7.3",
                            reason=f"the tensors look quantised but their shapes do not "
                                   f"fit the convention ({type(e).__name__}: {e})"[:200])]
        out.extend(r)
        used.update(t.values())
    out.extend(_unclaimed(h, used))
    return out


#: dtypes of codes: a tensor of one of them beside a ``*scale*`` tensor is
#: quantised, whatever its name
_CODE_DTYPES = ("I8", "U8", "I32", "U32", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3",
                "F6_E3M2")
#: leaf names only packed codes have
_PACKED_LEAF = re.compile(r"^(qweight|qzeros|.*_packed|.*_blocks)$")


def _unclaimed(h: Header, used: set[str]) -> list[Recognised]:
    """The tensors no convention claimed whose name or dtype says quantised:
    a packed-codes leaf (``*_packed``, ``*_blocks``, ``qweight``), or codes
    (int8/uint8/FP8…) beside a ``*scale*`` tensor of the same module.  One
    record per module, kind ``unrecognised``: nothing passes as a plain
    tensor by accident."""
    modules: dict[str, dict[str, str]] = {}
    for n in h:
        pre, _, leaf = n.rpartition(".")
        modules.setdefault(pre, {})[leaf] = n
    out = []
    for pre in sorted(modules):
        leaves = modules[pre]
        free = {leaf: n for leaf, n in leaves.items() if n not in used}
        scaled = any("scale" in leaf for leaf in leaves)
        why = [f"{n}: {h[n][0]} {list(h[n][1])}" for leaf, n in sorted(free.items())
               if _PACKED_LEAF.match(leaf) or (scaled and "scale" not in leaf
                                               and h[n][0] in _CODE_DTYPES)]
        if not why:
            continue
        out.append(Recognised(
            (pre + ".weight") if pre else sorted(free)[0], "unclaimed", "unrecognised",
            tuple(sorted(free.values())), section="§13",
            reason=("tensors named or typed as quantised codes that no convention grit "
                    "knows claims: their bytes were not checked"),
            lines=tuple(why) + (f"beside: {', '.join(sorted(set(leaves) - set(free)))}",
                                ) if set(leaves) - set(free) else tuple(why)))
    return out


#: what a config of unexpected types can make the checks raise
_ODD = (TypeError, ValueError, KeyError, IndexError, AttributeError, ArithmeticError,
        RecursionError)


def check_config(ctx, ckpts: Mapping[str, Checkpoint]) -> None:
    """Every convention's config checks (S310–S319) for every checkpoint
    whose ``quantization_config`` (or ModelOpt's ``hf_quant_config.json``) it
    claims."""
    for name in sorted(ckpts):
        ck = ckpts[name]
        q = qconfig(ck.config)
        where = ck.files[0] if len(ck.files) == 1 else ck.name
        ck.formats = {pre: f for pre, lv in ck.modules.items()
                      if (f := module_format(lv)) is not None}
        try:
            known = False
            for conv in conventions():
                claims = conv.claims_config is not None and conv.claims_config(q, ck)
                known = known or claims or _method(q) in conv.methods
                if claims and conv.check_config is not None:
                    conv.check_config(ctx, ck, q, where)
            if q and not known:
                _unknown(ctx, where, q)
        except _ODD as e:       # a config of unexpected types: said, never a traceback
            ctx.add("S319", where, None, "the quantisation config could not be checked "
                    f"against the tensors: {type(e).__name__}: {e}"[:300], (),
                    {"problems": [f"{type(e).__name__}: {e}"[:300]]})


def _method(q: Mapping) -> str:
    return str(q.get("quant_method") or "").lower()


def _unknown(ctx, where: str, q: Mapping) -> None:
    """S703: a ``quantization_config`` whose method no convention names."""
    m = q.get("quant_method")
    known = sorted({m for c in conventions() for m in c.methods})
    what = f"quant_method {m!r}" if m is not None else "a quantization_config without " \
        "quant_method"
    ctx.add("S703", where, None,
            f"{what}: no convention grit knows reads it, so the quantised tensors it "
            "declares were not checked", (f"known quant_method values: {', '.join(known)}",
                                          f"config keys: {', '.join(sorted(map(str, q)))}"),
            {"quant_method": m, "known": known})
