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

from importlib.metadata import entry_points
from typing import Mapping

from . import bitsandbytes, compressed_tensors, fp8_fnuz, gptq_awq, modelopt, torchao
from .base import Checkpoint, Convention, Header, Reader, Recognised, qconfig

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "conventions", "recognise", "check_config",
           "Convention", "Recognised", "Checkpoint"]

#: the built-in conventions, in the order they are asked: header-wide ones
#: first (a dtype v1 cannot express, a codebook, torchao's metadata), then
#: the module conventions
BUILTIN: tuple[Convention, ...] = (
    fp8_fnuz.CONVENTION, bitsandbytes.CONVENTION, torchao.CONVENTION,
    compressed_tensors.CONVENTION, modelopt.CONVENTION, gptq_awq.CONVENTION)

#: the entry-point group third-party conventions register under
ENTRY_POINT_GROUP = "grit.conventions"

_loaded: tuple[Convention, ...] | None = None


def conventions() -> tuple[Convention, ...]:
    """The built-in conventions, then those registered under
    :data:`ENTRY_POINT_GROUP` (loaded once; an entry point that does not
    name a :class:`Convention` is a :class:`~grit.errors.GritUsageError`)."""
    global _loaded
    if _loaded is None:
        from ..errors import GritUsageError
        extra = []
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            conv = ep.load()
            if not isinstance(conv, Convention):
                raise GritUsageError(f"entry point {ep.name!r} of group {ENTRY_POINT_GROUP!r} "
                                     f"names a {type(conv).__name__}, not a Convention")
            extra.append(conv)
        _loaded = BUILTIN + tuple(extra)
    return _loaded


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
        leaves = prefixes[pre]
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
        try:
            for conv in conventions():
                if conv.check_config is not None and conv.claims_config is not None \
                        and conv.claims_config(q, ck):
                    conv.check_config(ctx, ck, q, where)
        except _ODD as e:       # a config of unexpected types: said, never a traceback
            ctx.add("S319", where, None, "the quantisation config could not be checked "
                    f"against the tensors: {type(e).__name__}: {e}"[:300], (),
                    {"problems": [f"{type(e).__name__}: {e}"[:300]]})
