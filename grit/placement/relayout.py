"""§5.4–§5.5: relayout — the byte permutation between two placements, as
the composition of the placement stages of :mod:`grit.placement.stages`.

Every relayout routes through the canonical order (ROW_MAJOR data and
scales; LINEAR_META or ROW_MAJOR aux): the source stages move each role to
canonical, the target stages move it out, with whole-array operations (no
per-element Python).  Because each stage is a permutation of units (or
PACK_K4_12B's bijective bit packing, or BLOCK_AOS's interleaving of whole
fields), decode ∘ relayout = decode (L1) and relayouts compose (L2); opaque
placements are no stage and are refused both ways (L3).  This module chooses
the target stage of each role (``relayout``'s arguments) and composes.

Arrays are read through (descriptor, shape, planes) and results built with
the array's own type; ``grit.array`` wraps these functions with its type
checks and composes the public ``grit.decode`` from :func:`canonical` and the
codec's canonical-order reader.
"""
from __future__ import annotations

import numpy as np

from .. import descriptor as D
from ..errors import GritLayoutError, GritUsageError
from ..facts import ROLE_FIELD, ROLE_NAMES, canonical_words, is_canonical
from ..facts import has_aux as _has_aux
from .expr import Expr, RowMajor, as_expr, resolve_layout, same_layout
from .planes import Geometry, geometry, native_kernels, native_threads
from .registered import MEANING, PACK_BYTES, PACK_K4_12B, ROW_MAJOR
from .stages import (Fields, Interleaved, PackK4, Permutation, Stage, resolve, stages_of)
from .words import CLASS_HASHED, CLASS_OPAQUE, placement_class, placement_name

__all__ = ["relayout", "canonical", "canonical_form", "canonical_planes", "is_canonical",
           "canonical_words", "canonical_descriptor", "applies"]

_ROLE_FIELD = ROLE_FIELD


# ---------------------------------------------------------------------------
# applicability


def applies(array, placement, role: str) -> bool:
    """Whether ``placement`` may be ``role``'s placement for this array
    (grade, flags and shape), i.e. a relayout to it would succeed."""
    try:
        s = resolve(array.descriptor, role, placement, target=True)
        s.check_geometry(array.descriptor, geometry(array.descriptor, array.shape), role)
    except GritLayoutError:
        return False
    return True


def _check_geometry(d: D.Descriptor, shape, role: str, s: Stage) -> None:
    s.check_geometry(d, geometry(d, shape), role)


# ---------------------------------------------------------------------------
# the composition: source stages -> canonical order -> target stages


def _is_pack(st: dict[str, Stage]) -> bool:
    pack = isinstance(st["scale"], PackK4)
    if pack != isinstance(st["meta"], PackK4):
        raise GritLayoutError("PACK_K4_12B packs scales and mins together: placement_scale and "
                              "placement_meta must both be PACK_K4_12B")
    return pack


def _permute_sides(st: dict[str, Stage], g: Geometry, s0, s1, aux, inverse: bool):
    """The scale planes and the aux plane under their permutation stages
    (to canonical order when ``inverse``)."""
    sc, me = st["scale"], st["meta"]
    if isinstance(sc, Permutation):
        s0 = sc.move(s0, g.scale0, inverse=inverse)
        s1 = sc.move(s1, g.scale1, inverse=inverse)
    if isinstance(me, Permutation):
        aux = me.move(aux, g.aux, inverse=inverse)
    return s0, s1, aux


def _k4_fused(g: Geometry, f: Fields):
    """The native one-pass BLOCK_AOS-over-PACK_K4_12B kernels, when they
    apply: one super-block of 8 scales and 8 mins per block, no other aux.
    A fast path of the composition: it skips the unpacked intermediate."""
    k = native_kernels()
    if k is None or f.blocks == 0:
        return None
    if f.scale0 != PACK_BYTES or f.aux != 0 or g.n_groups1 != f.blocks:
        return None
    return k


def _nbytes(buf) -> int:
    return len(memoryview(buf).cast("B"))


def _to_canonical(d: D.Descriptor, shape, planes, st: dict[str, Stage]):
    g = geometry(d, shape)
    data, s0, s1, aux = planes
    pack = _is_pack(st)
    ds = st["data"]
    if isinstance(ds, Interleaved):
        f = ds.fields(d, g, pack)
        if len(memoryview(data)) != f.blocks * f.block:
            raise GritLayoutError(f"interleaved data plane is {len(memoryview(data))} bytes; "
                                  f"{ds.expr} needs {f.blocks} blocks of {f.block}")
        k = _k4_fused(g, f) if pack else None
        if k is not None:
            # one pass: blocks -> scale1, unpacked scales and mins, data
            s1, s0, aux, data = k.deinterleave_k4(data, f.scale1, f.data, f.blocks,
                                                  native_threads(f.blocks * f.block))
            return ds.block_units(data, g, f, inverse=True), s0, s1, aux
        data, s0, s1, aux = ds.deinterleave(data, f)
        data = ds.block_units(data, g, f, inverse=True)
    elif isinstance(ds, Permutation):
        data = ds.move(data, g.data, inverse=True)
    if pack:
        s0, aux = PackK4.unpack(s0, g)
    else:
        s0, s1, aux = _permute_sides(st, g, s0, s1, aux, inverse=True)
    return data, s0, s1, aux


def _from_canonical(d: D.Descriptor, shape, planes, st: dict[str, Stage]):
    g = geometry(d, shape)
    data, s0, s1, aux = planes
    pack = isinstance(st["scale"], PackK4)
    ds = st["data"]
    if pack and isinstance(ds, Interleaved):
        f = ds.fields(d, g, True)
        k = _k4_fused(g, f)
        if k is not None and _nbytes(s0) == _nbytes(aux) == 8 * f.blocks \
                and _nbytes(s1) == f.scale1 * f.blocks:
            # one pass: scale1, scales and mins (packed on the way), data -> blocks
            data = ds.block_units(data, g, f, inverse=False)
            return (k.interleave_k4((s1, s0, aux, data), f.scale1, f.data, f.blocks,
                                    native_threads(f.blocks * f.block)), b"", b"", b"")
    if pack:
        s0, aux = PackK4.pack(s0, aux, g)
    else:
        s0, s1, aux = _permute_sides(st, g, s0, s1, aux, inverse=False)
    if isinstance(ds, Interleaved):
        f = ds.fields(d, g, pack)
        data = ds.block_units(data, g, f, inverse=False)
        return ds.interleave((data, s0, s1, aux), f), b"", b"", b""
    if isinstance(ds, Permutation):
        data = ds.move(data, g.data, inverse=False)
    return data, s0, s1, aux


# ---------------------------------------------------------------------------
# public API


def _as_array(x, what: str):
    """Relayout reads an array through (descriptor, shape, planes) and builds
    its result with the array's own type, so it never depends on the array
    module (which sits above it); grit.array checks the type at the API."""
    if not all(hasattr(x, a) for a in ("descriptor", "shape", "planes")):
        raise GritUsageError(f"{what}() takes a GritArray, got {type(x).__name__}")
    return x


def canonical_form(d: D.Descriptor, shape, planes) -> tuple[D.Descriptor, tuple]:
    """(descriptor, planes) of a checked (d, shape, planes) in the canonical
    order (the order the codec reads); themselves when they already are.
    Raises GritLayoutError for an opaque or unresolvable placement (L3, §5.3)."""
    if is_canonical(d):
        return d, tuple(planes)
    out = tuple(_to_canonical(d, shape, planes, stages_of(d)))
    return canonical_descriptor(d), out


def canonical_descriptor(d: D.Descriptor) -> D.Descriptor:
    """``d`` with its placement words the canonical ones (the descriptor
    :func:`canonical_form` gives its planes; ``d`` itself when it is
    canonical), no plane read."""
    if is_canonical(d):
        return d
    data, scale, meta = canonical_words(d)
    return d.replace(placement_data=data, placement_scale=scale, placement_meta=meta,
                     flags=d.flags & ~D.F_INTERLEAVED)


def canonical_planes(d: D.Descriptor, shape, planes) -> tuple:
    """The four planes of :func:`canonical_form`."""
    return canonical_form(d, shape, planes)[1]


def canonical(array):
    """``array`` with its planes in the canonical order (itself when they
    already are; UNSPECIFIED counts as canonical)."""
    array = _as_array(array, "canonical")
    d = array.descriptor
    if is_canonical(d):
        return array
    return relayout(array, ROW_MAJOR)


def _same(cur: int, spec_word: int, given) -> bool:
    """Whether the current word and a requested placement are the same
    placement (§5.3's collision rule for hashed words)."""
    if cur != spec_word:
        return False
    if placement_class(cur) in (CLASS_HASHED, CLASS_OPAQUE):
        if not same_layout(cur, given if isinstance(given, (Expr, str)) else spec_word):
            raise GritLayoutError(
                f"placement 0x{cur:016x}: the requested expression hashes to the array's word "
                f"but is a different expression ({as_expr(given)} vs {resolve_layout(cur)}); a "
                "hash collision — refused (§5.3)")
    return True


def relayout(array, placement=None, *, data=None, scale=None, meta=None):
    """Move the planes of ``array`` into another placement (§5.5 way 2).

    ``placement`` (a word from ``grit.layouts``, a layout expression or its
    text) is applied to every plane role it is a placement of for this array;
    ROW_MAJOR means the canonical order for every role.  ``data=``, ``scale=``
    and ``meta=`` set one role each and win over ``placement``.  Scales and
    mins under PACK_K4_12B travel together, so setting either role to or from
    it moves the other.  The note (NOTE_ASSUMED included, §12) is kept; the
    INTERLEAVED flag follows the data placement.  Returns ``array`` itself
    when nothing changes (L2: relayout(p←p) = id)."""
    array = _as_array(array, "relayout")
    d = array.descriptor
    roles = ROLE_NAMES
    given = {"data": data, "scale": scale, "meta": meta}
    cur_words = {r: getattr(d, _ROLE_FIELD[r]) for r in roles}
    specs_src = stages_of(d)     # first: an unresolvable source is refused (§5.3, L3)
    want: dict[str, object] = {}
    if placement is not None:
        if not isinstance(placement, (Expr, str)) and isinstance(placement, (int, np.integer)) \
                and int(placement) == ROW_MAJOR:
            for r, w in zip(roles, canonical_words(d)):
                if r != "meta" or _has_aux(d):
                    want[r] = w
        else:
            tried = []
            for r in roles:
                if r == "meta" and not _has_aux(d):
                    continue
                try:
                    s_ = resolve(d, r, placement, target=True)
                    _check_geometry(d, array.shape, r, s_)
                except GritLayoutError as e:
                    tried.append((r, e))
                    continue
                want[r] = placement
            if not want:
                # the reason given for a role the placement belongs to, if any
                own = MEANING.get(placement if isinstance(placement, int) else -1)
                for r, e in tried:
                    if own is None or r in own.roles:
                        raise e
                raise tried[0][1] if tried else GritLayoutError(
                    "this array has no plane a placement could apply to")
    for r in roles:
        if given[r] is not None:
            want[r] = given[r]
    specs_tgt = dict(specs_src)
    for r, p in want.items():
        specs_tgt[r] = resolve(d, r, p, target=True)
    # PACK_K4_12B moves scales and mins together
    sp, mp = isinstance(specs_tgt["scale"], PackK4), isinstance(specs_tgt["meta"], PackK4)
    if sp != mp:
        lead = "scale" if ("scale" in want and (sp or "meta" not in want)) else "meta"
        other = "meta" if lead == "scale" else "scale"
        if other in given and given[other] is not None:
            raise GritLayoutError("PACK_K4_12B packs scales and mins together: placement_scale "
                                  "and placement_meta must both be PACK_K4_12B, or neither")
        if isinstance(specs_tgt[lead], PackK4):
            specs_tgt[other] = resolve(d, other, PACK_K4_12B, target=True)
        else:
            specs_tgt[other] = resolve(d, other, canonical_words(d)[roles.index(other)],
                                     target=True)
    if isinstance(specs_tgt["data"], Interleaved):
        for r in ("scale", "meta"):
            if isinstance(specs_tgt[r], Permutation) and not isinstance(specs_tgt[r].expr,
                                                                         RowMajor):
                # the role that was asked for wins; the other one goes canonical
                if r not in want:
                    specs_tgt[r] = resolve(d, r, canonical_words(d)[roles.index(r)], target=True)
                    continue
                if "data" not in want:
                    specs_tgt["data"] = resolve(d, "data", ROW_MAJOR, target=True)
                    break
                raise GritLayoutError(
                    f"{specs_tgt['data'].label} carries the {r} plane inside each block in "
                    f"canonical or PACK_K4_12B order; its {r} placement is "
                    f"{placement_name(specs_tgt[r].word)}.\n"
                    f"  Fix:  grit.relayout(x, data=..., {r}=grit.layouts.ROW_MAJOR)")
    for r in want:       # before any byte moves, naming the placement that does not fit
        _check_geometry(d, array.shape, r, specs_tgt[r])
    if all(_same(cur_words[r], specs_tgt[r].word, want.get(r, specs_tgt[r].word))
           for r in roles):
        return array
    planes = _to_canonical(d, array.shape, array.planes, specs_src)
    planes = _from_canonical(d, array.shape, planes, specs_tgt)
    flags = d.flags & ~D.F_INTERLEAVED
    if isinstance(specs_tgt["data"], Interleaved):
        flags |= D.F_INTERLEAVED
    nd = d.replace(placement_data=specs_tgt["data"].word,
                   placement_scale=specs_tgt["scale"].word,
                   placement_meta=specs_tgt["meta"].word, flags=flags)
    return type(array)(nd, array.shape, planes)
