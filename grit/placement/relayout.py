"""§5.4–§5.5: relayout — the byte permutation between two placements.

Every relayout routes through the canonical order (ROW_MAJOR data and
scales; LINEAR_META or ROW_MAJOR aux): source → canonical → target, role by
role, with whole-array numpy operations (no per-element Python).  Because
each step is a permutation of units (or PACK_K4_12B's bijective bit packing,
or BLOCK_AOS's interleaving of whole fields), decode ∘ relayout = decode (L1)
and relayouts compose (L2); opaque placements are refused both ways (L3).

Arrays are read through (descriptor, shape, planes) and results built with
the array's own type; ``grit.array`` wraps these functions with its type
checks and composes the public ``grit.decode`` from :func:`canonical` and the
codec's canonical-order reader.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import descriptor as D
from ..errors import GritLayoutError, GritUsageError
from ..facts import ROLE_FIELD, PlaneRole, canonical_words, fmt_width, is_canonical
from ..facts import has_aux as _has_aux
from .expr import (Compose, Expr, Interleave, Perm, RowMajor, Swizzle, apply, as_expr, layout_word, register_layout,
                   resolve_layout, same_layout, validate)
from .planes import (Geometry, Units, from_units, geometry, native_kernels, native_permute,
                     native_threads, to_units)
from .registered import (LINEAR_META, MEANING, META_M16N8K32, PACK_BYTES,
                         PACK_K4_12B, ROW_MAJOR, SWIZZLE_128X4B, block_aos_expr,
                         pack_k4_12b, pack_k4_applies, unpack_k4_12b)
from .words import (CLASS_HASHED, CLASS_OPAQUE, CLASS_REGISTERED, UNSPECIFIED,
                    placement_class, placement_name)

__all__ = ["relayout", "canonical", "canonical_form", "canonical_planes", "is_canonical", "canonical_words",
           "applies", "Spec"]

_ROLE_FIELD = ROLE_FIELD


@dataclass(frozen=True, slots=True)
class Spec:
    """What a placement word means for one role of one array."""

    word: int
    kind: str                  # "canonical" | "expr" | "interleave" | "pack"
    expr: Expr | None = None


# ---------------------------------------------------------------------------
# words -> specs

def _not_applicable(name: str, role: str, why: str) -> GritLayoutError:
    return GritLayoutError(f"placement {name} does not apply to the {role} plane(s) here: {why}")


def _spec(d: D.Descriptor, role: str, p, *, target: bool) -> Spec:
    """Resolve a placement (word, expression or expression text) for one role."""
    if isinstance(p, (Expr, str)):
        e = as_expr(p)
        if e.opaque:
            raise GritLayoutError(f"{e} is opaque: it can be stored, never relayouted into (L3)")
        register_layout(e)                       # refuses a colliding expression
        word = layout_word(e)
        return _spec_expr(d, role, word, e)
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
        raise GritUsageError(f"a placement is a 64-bit word or a layout expression, got "
                             f"{type(p).__name__}")
    word = int(p)
    cls = placement_class(word)
    name = placement_name(word)
    if word == UNSPECIFIED:
        if target:
            raise GritLayoutError("relayout needs a concrete target placement; UNSPECIFIED "
                                  "asserts no layout")
        return Spec(word, "canonical")
    if role == "meta" and not _has_aux(d):
        raise _not_applicable(name, role, "this array has no aux plane (neither SPARSE nor "
                                          "HAS_ZP)")
    if cls == CLASS_OPAQUE:
        raise GritLayoutError(
            f"{role} placement {name} is opaque: opacity is one-way (L3) — it can be stored "
            "and consumed, never relayouted")
    if cls == CLASS_HASHED:
        e = resolve_layout(word)
        if e is None:
            raise GritLayoutError(
                f"{role} placement {name} resolves to no layout expression in this process; "
                "a hashed word alone never licenses a relayout (§5.3).\n"
                "  Fix:  grit.register_layout('<the producer's expression>')")
        return _spec_expr(d, role, word, e)
    if cls != CLASS_REGISTERED or word not in MEANING:
        raise GritLayoutError(f"{role} placement 0x{word:016x} is not a v1 placement "
                              "(PlacementUnknown)")
    m = MEANING[word]
    if role not in m.roles:
        raise _not_applicable(m.name, role, f"it is a placement of the {', '.join(sorted(m.roles))} "
                                            "plane(s) only")
    if word in (ROW_MAJOR, LINEAR_META):
        if word == LINEAR_META and not d.flags & D.F_SPARSE:
            raise _not_applicable(m.name, role, "it orders sparse metadata; this aux plane "
                                                "holds zero points")
        return Spec(word, "canonical")
    if m.kind == "block_aos":
        try:
            return Spec(word, "interleave", block_aos_expr(d))
        except GritLayoutError as e:
            raise _not_applicable(m.name, role, str(e)) from None
    if m.kind == "pack_k4":
        why = pack_k4_applies(d)
        if why:
            raise _not_applicable(m.name, role, why)
        return Spec(word, "pack")
    if word == SWIZZLE_128X4B:
        if fmt_width(d.scale0) != 8:
            raise _not_applicable(m.name, role, "its tiles hold 8-bit scale values")
        if d.n_levels == 2 and d.k1 != 0:
            raise _not_applicable(m.name, role, "scale1 must be absent or one per-tensor value "
                                                "(k1 = 0); the 128x4 tiles order level-0 scales")
    if word == META_M16N8K32:
        if not (d.flags & D.F_SPARSE and d.sp_n == 2 and d.sp_m == 4
                and d.sp_meta_fmt == D.SPMETA_U2 and fmt_width(d.elem) == 8):
            raise _not_applicable(m.name, role, "it is the metadata of mma.sp m16n8k32: 2:4 "
                                                "sparsity, u2 indices, 8-bit elements")
    return Spec(word, "expr", m.expr)


def _spec_expr(d: D.Descriptor, role: str, word: int, e: Expr) -> Spec:
    if e.opaque:
        raise GritLayoutError(f"{e} is opaque: never relayoutable (L3)")
    if isinstance(e, Interleave):
        if role != "data":
            raise _not_applicable(str(e), role, "Interleave is a data placement (it carries "
                                                "every plane inside the data plane)")
        return Spec(word, "interleave", e)
    return Spec(word, "expr", e)                 # RowMajor too: identity bytes, own word


def applies(array, placement, role: str) -> bool:
    """Whether ``placement`` may be ``role``'s placement for this array
    (grade, flags and shape), i.e. a relayout to it would succeed."""
    try:
        s = _spec(array.descriptor, role, placement, target=True)
        _check_geometry(array.descriptor, array.shape, role, s)
    except GritLayoutError:
        return False
    return True


def _check_geometry(d: D.Descriptor, shape, role: str, s: Spec) -> None:
    """Dry-run a spec's index map on index arrays (cheap: tiny dtype)."""
    g = geometry(d, shape)
    if s.kind == "expr":
        units = {"data": (g.data,), "scale": (g.scale0, g.scale1), "meta": (g.aux,)}[role]
        for u in units:
            if u.count > 1:
                if u.R is None and not _flat(s.expr):
                    raise GritLayoutError(f"placement {s.expr} does not apply here: "
                                          f"{u.why_no_grid}")
                validate(s.expr, u.count, u.R, u.C)
    elif s.kind == "interleave":
        _block_fields(d, g, s.expr, _scale_is_pack(d, None), _scale_is_pack(d, None))


def _scale_is_pack(d, override) -> bool:
    return override if override is not None else d.placement_scale == PACK_K4_12B


# ---------------------------------------------------------------------------
# unit-grid moves for one plane


def _permute(buf, u: Units, e: Expr | None, inverse: bool) -> bytes:
    # one unit (a per-tensor scale1) is fixed by every permutation
    if e is None or isinstance(e, RowMajor) or u.count <= 1:
        return buf
    if u.R is None and not _flat(e):
        raise GritLayoutError(f"placement {e} does not apply here: {u.why_no_grid}")
    fast = native_permute(buf, u, e, inverse)
    if fast is not None:
        return fast
    x = to_units(buf, u)
    y = apply(e, x, u.R, u.C, inverse=inverse)
    return from_units(y, u)


def _flat(e: Expr) -> bool:
    if isinstance(e, Compose):
        return _flat(e.first) and _flat(e.second)
    return isinstance(e, (Perm, Swizzle, RowMajor))


# ---------------------------------------------------------------------------
# BLOCK_AOS / Interleave


@dataclass(frozen=True, slots=True)
class _Fields:
    blocks: int
    scale1: int
    scale0: int
    aux: int
    data: int
    data_units: int          # element units per block

    @property
    def block(self) -> int:
        return self.scale1 + self.scale0 + self.aux + self.data


def _whole(bits: int, what: str, e: Interleave) -> int:
    if bits % 8:
        raise GritLayoutError(f"placement {e} does not apply here: a block's {what} field is "
                              f"{bits} bits, not a whole number of bytes")
    return bits // 8


def _block_fields(d: D.Descriptor, g: Geometry, e: Interleave, scale_pack: bool,
                  meta_pack: bool) -> _Fields:
    n = e.n
    if g.n_groups0 % n:
        raise GritLayoutError(f"placement {e} does not apply here: {g.n_groups0} level-0 groups "
                              f"are not whole blocks of {n}")
    nb = g.n_groups0 // n
    if d.n_levels == 2:
        if d.k1 == 0:
            raise GritLayoutError(f"placement {e} does not apply to a per-tensor level-1 scale "
                                  "(k1 = 0): a block cannot carry it")
        if n % d.k1:
            raise GritLayoutError(f"placement {e} does not apply here: a block must hold whole "
                                  f"level-1 groups of k1 = {d.k1} level-0 groups")
        f1 = _whole(n // d.k1 * g.scale1.bits, "scale1", e)
    else:
        f1 = 0
    if scale_pack:
        f0 = n // 8 * PACK_BYTES
    else:
        f0 = _whole(n * g.scale0.bits, "scale0", e)
    if meta_pack or not _has_aux(d):
        fa = 0
    else:
        per_block = g.aux.count // g.n_groups0 * n if g.n_groups0 else 0
        fa = _whole(per_block * g.aux.bits, "aux", e)
    du = g.data.count // g.n_groups0 * n if g.n_groups0 else 0
    fd = _whole(du * g.data.bits, "data", e)
    return _Fields(nb, f1, f0, fa, fd, du)


def _nbytes(buf) -> int:
    return len(memoryview(buf).cast("B"))


def _interleave(planes, f: _Fields) -> bytes:
    k = native_kernels()
    fields = (planes[2], planes[1], planes[3], planes[0])
    widths = (f.scale1, f.scale0, f.aux, f.data)
    if k is not None and all(_nbytes(b) == w * f.blocks for b, w in zip(fields, widths) if w):
        return k.interleave(fields, widths, f.blocks, native_threads(f.blocks * f.block))
    cols = []
    for buf, width in zip((planes[2], planes[1], planes[3], planes[0]),
                          (f.scale1, f.scale0, f.aux, f.data)):
        if width:
            cols.append(np.frombuffer(buf, dtype=np.uint8).reshape(f.blocks, width))
    if not cols:
        return b""
    return np.concatenate(cols, axis=1).tobytes()


def _deinterleave(buf, f: _Fields) -> tuple[bytes, bytes, bytes, bytes]:
    k = native_kernels()
    if k is not None and _nbytes(buf) == f.blocks * f.block:
        s1, s0, aux, data = k.deinterleave(buf, (f.scale1, f.scale0, f.aux, f.data), f.blocks,
                                           native_threads(f.blocks * f.block))
        return data, s0, s1, aux
    raw = np.frombuffer(buf, dtype=np.uint8).reshape(f.blocks, f.block)
    out, off = {}, 0
    for name, width in (("scale1", f.scale1), ("scale0", f.scale0), ("aux", f.aux),
                        ("data", f.data)):
        out[name] = raw[:, off:off + width].tobytes() if width else b""
        off += width
    return out["data"], out["scale0"], out["scale1"], out["aux"]


def _k4_fused(g: Geometry, f: _Fields):
    """The native one-pass BLOCK_AOS-over-PACK_K4_12B kernels, when they
    apply: one super-block of 8 scales and 8 mins per block, no other aux."""
    k = native_kernels()
    if k is None or f.blocks == 0:
        return None
    if f.scale0 != PACK_BYTES or f.aux != 0 or g.n_groups1 != f.blocks:
        return None
    return k


def _block_units(buf, g: Geometry, f: _Fields, e: Expr, inverse: bool) -> bytes:
    """Permute the elements inside every block by the Interleave's inner
    expression, each block's units seen as an (n, units/n) grid."""
    if isinstance(e, RowMajor) or g.data.count == 0:
        return buf
    u = g.data
    x = to_units(buf, u).reshape(f.blocks, f.data_units, *((u.bits // 8,) if u.bits % 8 == 0
                                                           else ()))
    n = g.n_groups0 // f.blocks
    y = apply(e, x, n, f.data_units // n, inverse=inverse)
    return from_units(y.reshape(1, u.count, *y.shape[2:]), u)


# ---------------------------------------------------------------------------
# to and from the canonical order


def _specs_of(d: D.Descriptor) -> dict[str, Spec]:
    return {r: _spec(d, r, getattr(d, _ROLE_FIELD[r]), target=False) for r in _ROLE_FIELD}


def _permute_sides(specs: dict[str, Spec], g: Geometry, s0, s1, aux, inverse: bool):
    """The scale planes and the aux plane under their expression placements
    (to canonical order when ``inverse``)."""
    if specs["scale"].kind == "expr":
        s0 = _permute(s0, g.scale0, specs["scale"].expr, inverse)
        s1 = _permute(s1, g.scale1, specs["scale"].expr, inverse)
    if specs["meta"].kind == "expr":
        aux = _permute(aux, g.aux, specs["meta"].expr, inverse)
    return s0, s1, aux


def _to_canonical(d: D.Descriptor, shape, planes, specs: dict[str, Spec]):
    g = geometry(d, shape)
    data, s0, s1, aux = planes
    pack = specs["scale"].kind == "pack"
    if pack != (specs["meta"].kind == "pack"):
        raise GritLayoutError("PACK_K4_12B packs scales and mins together: placement_scale and "
                              "placement_meta must both be PACK_K4_12B")
    if specs["data"].kind == "interleave":
        e = specs["data"].expr
        f = _block_fields(d, g, e, pack, pack)
        if len(memoryview(data)) != f.blocks * f.block:
            raise GritLayoutError(f"interleaved data plane is {len(memoryview(data))} bytes; "
                                  f"{e} needs {f.blocks} blocks of {f.block}")
        k = _k4_fused(g, f) if pack else None
        if k is not None:
            # one pass: blocks -> scale1, unpacked scales and mins, data
            s1, s0, aux, data = k.deinterleave_k4(data, f.scale1, f.data, f.blocks,
                                                  native_threads(f.blocks * f.block))
            return _block_units(data, g, f, e.inner, inverse=True), s0, s1, aux
        data, s0, s1, aux = _deinterleave(data, f)
        data = _block_units(data, g, f, e.inner, inverse=True)
    elif specs["data"].kind == "expr":
        data = _permute(data, g.data, specs["data"].expr, inverse=True)
    if pack:
        k = native_kernels()
        if k is not None and _nbytes(s0) == g.n_groups1 * PACK_BYTES:
            s0, aux = k.unpack_k4_12b(s0, g.n_groups1, native_threads(g.n_groups1 * 20))
        else:
            sc, m = unpack_k4_12b(np.frombuffer(s0, dtype=np.uint8).reshape(g.n_groups1,
                                                                            PACK_BYTES))
            s0, aux = sc.tobytes(), m.tobytes()
    else:
        s0, s1, aux = _permute_sides(specs, g, s0, s1, aux, inverse=True)
    return data, s0, s1, aux


def _from_canonical(d: D.Descriptor, shape, planes, specs: dict[str, Spec]):
    g = geometry(d, shape)
    data, s0, s1, aux = planes
    pack = specs["scale"].kind == "pack"
    if pack and specs["data"].kind == "interleave":
        e = specs["data"].expr
        f = _block_fields(d, g, e, True, True)
        k = _k4_fused(g, f)
        if k is not None and _nbytes(s0) == _nbytes(aux) == 8 * f.blocks \
                and _nbytes(s1) == f.scale1 * f.blocks:
            # one pass: scale1, scales and mins (packed on the way), data -> blocks
            data = _block_units(data, g, f, e.inner, inverse=False)
            return (k.interleave_k4((s1, s0, aux, data), f.scale1, f.data, f.blocks,
                                    native_threads(f.blocks * f.block)), b"", b"", b"")
    if pack:
        k = native_kernels()
        if k is not None and _nbytes(s0) == _nbytes(aux) == g.n_groups1 * 8:
            s0, aux = k.pack_k4_12b(s0, aux, g.n_groups1, native_threads(g.n_groups1 * 20)), b""
        else:
            sc = np.frombuffer(s0, dtype=np.uint8).reshape(g.n_groups1, 8)
            m = np.frombuffer(aux, dtype=np.uint8).reshape(g.n_groups1, 8)
            s0, aux = pack_k4_12b(sc, m).tobytes(), b""
    else:
        s0, s1, aux = _permute_sides(specs, g, s0, s1, aux, inverse=False)
    if specs["data"].kind == "interleave":
        e = specs["data"].expr
        f = _block_fields(d, g, e, pack, pack)
        data = _block_units(data, g, f, e.inner, inverse=False)
        return _interleave((data, s0, s1, aux), f), b"", b"", b""
    if specs["data"].kind == "expr":
        data = _permute(data, g.data, specs["data"].expr, inverse=False)
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
    out = tuple(_to_canonical(d, shape, planes, _specs_of(d)))
    data, scale, meta = canonical_words(d)
    return d.replace(placement_data=data, placement_scale=scale, placement_meta=meta,
                     flags=d.flags & ~D.F_INTERLEAVED), out


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
    roles = tuple(r.value for r in PlaneRole)
    given = {"data": data, "scale": scale, "meta": meta}
    cur_words = {r: getattr(d, _ROLE_FIELD[r]) for r in roles}
    specs_src = _specs_of(d)     # first: an unresolvable source is refused (§5.3, L3)
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
                    s_ = _spec(d, r, placement, target=True)
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
        specs_tgt[r] = _spec(d, r, p, target=True)
    # PACK_K4_12B moves scales and mins together
    sp, mp = specs_tgt["scale"].kind == "pack", specs_tgt["meta"].kind == "pack"
    if sp != mp:
        lead = "scale" if ("scale" in want and (sp or "meta" not in want)) else "meta"
        other = "meta" if lead == "scale" else "scale"
        if other in given and given[other] is not None:
            raise GritLayoutError("PACK_K4_12B packs scales and mins together: placement_scale "
                                  "and placement_meta must both be PACK_K4_12B, or neither")
        if specs_tgt[lead].kind == "pack":
            specs_tgt[other] = _spec(d, other, PACK_K4_12B, target=True)
        else:
            specs_tgt[other] = _spec(d, other, canonical_words(d)[roles.index(other)],
                                     target=True)
    if specs_tgt["data"].kind == "interleave":
        for r in ("scale", "meta"):
            if specs_tgt[r].kind == "expr" and not isinstance(specs_tgt[r].expr, RowMajor):
                # the role that was asked for wins; the other one goes canonical
                if r not in want:
                    specs_tgt[r] = _spec(d, r, canonical_words(d)[roles.index(r)], target=True)
                    continue
                if "data" not in want:
                    specs_tgt["data"] = _spec(d, "data", ROW_MAJOR, target=True)
                    break
                raise GritLayoutError(
                    f"{specs_tgt['data'].expr} carries the {r} plane inside each block in "
                    f"canonical or PACK_K4_12B order; its {r} placement is "
                    f"{placement_name(specs_tgt[r].word)}.\n"
                    f"  Fix:  grit.relayout(x, data=..., {r}=grit.layouts.ROW_MAJOR)")
    if all(_same(cur_words[r], specs_tgt[r].word, want.get(r, specs_tgt[r].word))
           for r in roles):
        return array
    planes = _to_canonical(d, array.shape, array.planes, specs_src)
    planes = _from_canonical(d, array.shape, planes, specs_tgt)
    flags = d.flags & ~D.F_INTERLEAVED
    if specs_tgt["data"].kind == "interleave":
        flags |= D.F_INTERLEAVED
    nd = d.replace(placement_data=specs_tgt["data"].word,
                   placement_scale=specs_tgt["scale"].word,
                   placement_meta=specs_tgt["meta"].word, flags=flags)
    return type(array)(nd, array.shape, planes)
