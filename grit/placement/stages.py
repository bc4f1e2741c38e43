"""The placements as typed stages (the shape of zarr v3's codec pipeline).

A placement word means one of four things for one plane role of one array,
and each is a class here that owns its applicability, its plane-size rule and
its move to and from the canonical order:

=============  =====================================  ==========================
stage          words                                   move
=============  =====================================  ==========================
Canonical      UNSPECIFIED, ROW_MAJOR, LINEAR_META     identity
Permutation    COL_MAJOR, TILE_16X16, SWIZZLE_128X4B,  a permutation of the
               META_M16N8K32, hashed expressions        role's units (index maps,
                                                       grit.placement.expr)
Interleaved    BLOCK_AOS, hashed Interleave(P, n)      all four planes carried
                                                       per block in the data plane
PackK4         PACK_K4_12B (scale and meta together)   the 12-byte ggml packing of
                                                       8 u6 scales and 8 u6 mins
=============  =====================================  ==========================

Opaque words (class 0xF) and hashed words that resolve to no expression are
no stage: :func:`resolve` refuses them (L3, §5.3).  Each move has a native
fast path (grit.native) beside its numpy path; the fast path is the same map
executed as byte moves and is tested equal to the numpy path
(tests/test_native_relayout.py).  ``grit.placement.relayout`` composes the
stages (source → canonical → target); ``grit.check`` reads the size rules
and the rule of the INTERLEAVED flag (:func:`interleave_problem`) from here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import descriptor as D
from ..errors import GritLayoutError, GritUsageError
from ..facts import ROLE_FIELD, PlaneSizes, fmt_width
from ..facts import has_aux as _has_aux
from .expr import (Compose, Expr, Interleave, Perm, RowMajor, Swizzle, apply, as_expr, brief,
                   layout_word, register_layout, resolve_layout, validate)
from .planes import (Geometry, Units, from_units, native_kernels, native_permute,
                     native_threads, to_units)
from .registered import (BLOCK_AOS, LINEAR_META, MEANING, META_M16N8K32, PACK_BYTES,
                         PACK_K4_12B, ROW_MAJOR, SWIZZLE_128X4B, block_aos_expr,
                         pack_k4_12b, pack_k4_applies, unpack_k4_12b)
from .words import (CLASS_HASHED, CLASS_OPAQUE, CLASS_REGISTERED, PLACEMENT_NAMES,
                    UNSPECIFIED, placement_class, placement_name)

__all__ = ["Stage", "Canonical", "Permutation", "Interleaved", "PackK4", "Fields", "resolve",
           "stages_of", "plane_sizes", "interleave_problem"]


def _nbytes(buf) -> int:
    return len(memoryview(buf).cast("B"))


def _not_applicable(name: str, role: str, why: str) -> GritLayoutError:
    return GritLayoutError(f"placement {name} does not apply to the {role} plane(s) here: {why}")


# ---------------------------------------------------------------------------
# the stages


@dataclass(frozen=True, slots=True)
class Stage:
    """What one placement word means for one plane role of one array."""

    word: int

    @property
    def label(self) -> str:
        """The placement in a message: its registered name, else :func:`brief`
        of its expression (a long Perm shortened), else the word."""
        if self.word in PLACEMENT_NAMES:
            return PLACEMENT_NAMES[self.word]
        e = getattr(self, "expr", None)
        return brief(e) if isinstance(e, Expr) else placement_name(self.word)

    def check_geometry(self, d: D.Descriptor, g: Geometry, role: str) -> None:
        """Raise GritLayoutError unless the stage fits this array's grids
        (a dry run on index arrays: cheap)."""


@dataclass(frozen=True, slots=True)
class Canonical(Stage):
    """The order the codec reads: the identity move."""


def _flat(e: Expr) -> bool:
    """Whether ``e`` permutes a flat run of units (no grid needed)."""
    if isinstance(e, Compose):
        return _flat(e.first) and _flat(e.second)
    return isinstance(e, (Perm, Swizzle, RowMajor))


@dataclass(frozen=True, slots=True)
class Permutation(Stage):
    """A layout expression over the role's unit grid: relayout permutes units
    (docs/placements.md "Unit grids"); the size of every plane is unchanged."""

    expr: Expr

    def check_geometry(self, d: D.Descriptor, g: Geometry, role: str) -> None:
        units = {"data": (g.data,), "scale": (g.scale0, g.scale1), "meta": (g.aux,)}[role]
        for u in units:
            if u.count > 1:
                if u.R is None and not _flat(self.expr):
                    raise GritLayoutError(f"placement {self.label} does not apply here: "
                                          f"{u.why_no_grid}")
                validate(self.expr, u.count, u.R, u.C, self.label)

    def move(self, buf, u: Units, *, inverse: bool) -> bytes:
        """One plane to (``inverse``) or from the canonical order: the native
        byte moves where they cover the case, else numpy on the unit grid."""
        e = self.expr
        # one unit (a per-tensor scale1) is fixed by every permutation
        if isinstance(e, RowMajor) or u.count <= 1:
            return buf
        if u.R is None and not _flat(e):
            raise GritLayoutError(f"placement {self.label} does not apply here: "
                                  f"{u.why_no_grid}")
        fast = native_permute(buf, u, e, inverse)
        if fast is not None:
            return fast
        return from_units(apply(e, to_units(buf, u), u.R, u.C, inverse=inverse), u)


@dataclass(frozen=True, slots=True)
class Fields:
    """The byte fields of one Interleave block, in block order."""

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
        raise GritLayoutError(f"placement {brief(e)} does not apply here: a block's {what} "
                              f"field is {bits} bits, not a whole number of bytes")
    return bits // 8


@dataclass(frozen=True, slots=True)
class Interleaved(Stage):
    """Interleave(P, n): every plane carried inside the data plane, per block
    of n level-0 groups, fields in the order scale1 ‖ scale0 ‖ aux ‖ data, the
    block's elements permuted by P.  A data placement; the descriptor says so
    with F_INTERLEAVED."""

    expr: Interleave

    @staticmethod
    def size_rule(sizes: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """The data plane carries all four planes: their sizes summed."""
        return (sum(sizes), 0, 0, 0)

    def fields(self, d: D.Descriptor, g: Geometry, pack: bool) -> Fields:
        """The block fields, with scales and mins PACK_K4_12B-packed when ``pack``."""
        e = self.expr
        n = e.n
        if g.n_groups0 % n:
            raise GritLayoutError(f"placement {self.label} does not apply here: {g.n_groups0} "
                                  f"level-0 groups are not whole blocks of {n}")
        nb = g.n_groups0 // n
        if d.n_levels == 2:
            if d.k1 == 0:
                raise GritLayoutError(f"placement {self.label} does not apply to a per-tensor "
                                      "level-1 scale (k1 = 0): a block cannot carry it")
            if n % d.k1:
                raise GritLayoutError(f"placement {self.label} does not apply here: a block "
                                      f"must hold whole level-1 groups of k1 = {d.k1} level-0 "
                                      "groups")
            f1 = _whole(n // d.k1 * g.scale1.bits, "scale1", e)
        else:
            f1 = 0
        f0 = n // 8 * PACK_BYTES if pack else _whole(n * g.scale0.bits, "scale0", e)
        if pack or not _has_aux(d):
            fa = 0
        else:
            per_block = g.aux.count // g.n_groups0 * n if g.n_groups0 else 0
            fa = _whole(per_block * g.aux.bits, "aux", e)
        du = g.data.count // g.n_groups0 * n if g.n_groups0 else 0
        fd = _whole(du * g.data.bits, "data", e)
        return Fields(nb, f1, f0, fa, fd, du)

    def check_geometry(self, d: D.Descriptor, g: Geometry, role: str) -> None:
        pack = d.placement_scale == PACK_K4_12B
        self.fields(d, g, pack)

    def block_units(self, buf, g: Geometry, f: Fields, *, inverse: bool) -> bytes:
        """Permute the elements inside every block by the inner expression,
        each block's units seen as an (n, units/n) grid."""
        e = self.expr.inner
        if isinstance(e, RowMajor) or g.data.count == 0:
            return buf
        u = g.data
        x = to_units(buf, u).reshape(f.blocks, f.data_units,
                                     *((u.bits // 8,) if u.bits % 8 == 0 else ()))
        n = g.n_groups0 // f.blocks
        y = apply(e, x, n, f.data_units // n, inverse=inverse)
        return from_units(y.reshape(1, u.count, *y.shape[2:]), u)

    @staticmethod
    def interleave(planes, f: Fields) -> bytes:
        """(data, scale0, scale1, aux) field bytes -> the interleaved plane."""
        k = native_kernels()
        fields = (planes[2], planes[1], planes[3], planes[0])
        widths = (f.scale1, f.scale0, f.aux, f.data)
        if k is not None and all(_nbytes(b) == w * f.blocks for b, w in zip(fields, widths) if w):
            return k.interleave(fields, widths, f.blocks, native_threads(f.blocks * f.block))
        cols = [np.frombuffer(buf, dtype=np.uint8).reshape(f.blocks, width)
                for buf, width in zip(fields, widths) if width]
        if not cols:
            return b""
        return np.concatenate(cols, axis=1).tobytes()

    @staticmethod
    def deinterleave(buf, f: Fields) -> tuple[bytes, bytes, bytes, bytes]:
        """The interleaved plane -> (data, scale0, scale1, aux) field bytes."""
        k = native_kernels()
        if k is not None and _nbytes(buf) == f.blocks * f.block:
            s1, s0, aux, data = k.deinterleave(buf, (f.scale1, f.scale0, f.aux, f.data),
                                               f.blocks, native_threads(f.blocks * f.block))
            return data, s0, s1, aux
        raw = np.frombuffer(buf, dtype=np.uint8).reshape(f.blocks, f.block)
        out, off = {}, 0
        for name, width in (("scale1", f.scale1), ("scale0", f.scale0), ("aux", f.aux),
                            ("data", f.data)):
            out[name] = raw[:, off:off + width].tobytes() if width else b""
            off += width
        return out["data"], out["scale0"], out["scale1"], out["aux"]


@dataclass(frozen=True, slots=True)
class PackK4(Stage):
    """PACK_K4_12B: the 8 u6 scales (scale0) and 8 u6 mins (aux) of each
    super-block packed into 12 scale0 bytes, ggml's get_scale_min_k4 layout;
    the aux plane is empty.  Scale and meta roles move together."""

    applies: ClassVar = staticmethod(pack_k4_applies)

    @staticmethod
    def size_rule(d: D.Descriptor, ps: PlaneSizes,
                  sizes: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """12 scale0 bytes per super-block, no aux bytes, when both words are
        PACK_K4_12B on a grade the pack applies to (:func:`pack_k4_applies`);
        anywhere else the planes keep the sizes §7.3 writes, and the reader of
        the bytes refuses the word (docs/spec-decisions.md "interleaved-flag":
        step 3 as written)."""
        if d.placement_scale == PACK_K4_12B and d.placement_meta == PACK_K4_12B \
                and pack_k4_applies(d) is None:
            return (sizes[0], ps.n_groups1 * PACK_BYTES, sizes[2], 0)
        return sizes

    @staticmethod
    def unpack(s0, g: Geometry) -> tuple[bytes, bytes]:
        """12-byte packed scale0 -> (scale0, aux) one u6 per byte."""
        k = native_kernels()
        if k is not None and _nbytes(s0) == g.n_groups1 * PACK_BYTES:
            return k.unpack_k4_12b(s0, g.n_groups1, native_threads(g.n_groups1 * 20))
        sc, m = unpack_k4_12b(np.frombuffer(s0, dtype=np.uint8).reshape(g.n_groups1,
                                                                        PACK_BYTES))
        return sc.tobytes(), m.tobytes()

    @staticmethod
    def pack(s0, aux, g: Geometry) -> tuple[bytes, bytes]:
        """(scale0, aux) one u6 per byte -> (packed scale0, empty aux)."""
        k = native_kernels()
        if k is not None and _nbytes(s0) == _nbytes(aux) == g.n_groups1 * 8:
            return k.pack_k4_12b(s0, aux, g.n_groups1, native_threads(g.n_groups1 * 20)), b""
        sc = np.frombuffer(s0, dtype=np.uint8).reshape(g.n_groups1, 8)
        m = np.frombuffer(aux, dtype=np.uint8).reshape(g.n_groups1, 8)
        return pack_k4_12b(sc, m).tobytes(), b""


# ---------------------------------------------------------------------------
# words -> stages


def _expr_stage(role: str, word: int, e: Expr) -> Stage:
    if e.opaque:
        raise GritLayoutError(f"{e} is opaque: never relayoutable (L3)")
    if isinstance(e, Interleave):
        if role != "data":
            raise _not_applicable(str(e), role, "Interleave is a data placement (it carries "
                                                "every plane inside the data plane)")
        return Interleaved(word, e)
    return Permutation(word, e)                 # RowMajor too: identity bytes, own word


def resolve(d: D.Descriptor, role: str, p, *, target: bool) -> Stage:
    """The stage of a placement (word, expression or expression text) for one
    role of arrays with descriptor ``d``; GritLayoutError where it does not
    apply (``target``: UNSPECIFIED, which asserts no layout, is refused)."""
    if isinstance(p, (Expr, str)):
        e = as_expr(p)
        if e.opaque:
            raise GritLayoutError(f"{e} is opaque: it can be stored, never relayouted into (L3)")
        register_layout(e)                       # refuses a colliding expression
        return _expr_stage(role, layout_word(e), e)
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
        return Canonical(word)
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
        return _expr_stage(role, word, e)
    if cls != CLASS_REGISTERED or word not in MEANING:
        raise GritLayoutError(f"{role} placement 0x{word:016x} is not a v1 placement "
                              "(PlacementUnknown)")
    m = MEANING[word]
    if role not in m.roles:
        raise _not_applicable(m.name, role, f"it is a placement of the "
                                            f"{', '.join(sorted(m.roles))} plane(s) only")
    if word in (ROW_MAJOR, LINEAR_META):
        if word == LINEAR_META and not d.flags & D.F_SPARSE:
            raise _not_applicable(m.name, role, "it orders sparse metadata; this aux plane "
                                                "holds zero points")
        return Canonical(word)
    if m.kind == "block_aos":
        try:
            return Interleaved(word, block_aos_expr(d))
        except GritLayoutError as e:
            raise _not_applicable(m.name, role, str(e)) from None
    if m.kind == "pack_k4":
        why = PackK4.applies(d)
        if why:
            raise _not_applicable(m.name, role, why)
        return PackK4(word)
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
    return Permutation(word, m.expr)


def stages_of(d: D.Descriptor) -> dict[str, Stage]:
    """The stage of each role as the descriptor places it (refuses an opaque
    or unresolvable source: L3, §5.3).  The data stage interleaves exactly
    when the descriptor sets F_INTERLEAVED: the flag is what sizes the planes
    (§7.3 step 4 with docs/spec-decisions.md "interleaved-flag"), so a data
    word that interleaves without it, or the flag over a word that does not,
    has no reading and is refused here rather than misread."""
    st = {r: resolve(d, r, getattr(d, f), target=False) for r, f in ROLE_FIELD.items()}
    flag = bool(d.flags & D.F_INTERLEAVED)
    if isinstance(st["data"], Interleaved) != flag:
        name = placement_name(d.placement_data)
        if flag:
            why = (f"the INTERLEAVED flag says the data plane carries every plane, but "
                   f"placement_data {name} does not interleave")
        else:
            why = (f"placement_data {name} interleaves every plane into the data plane, but "
                   "the descriptor does not set F_INTERLEAVED, so its planes are separate "
                   "(sized by §7.3 as written) and have no block order to read.\n"
                   "  Fix:  relayout from the producer's separate planes, or set "
                   "F_INTERLEAVED with the interleaved plane")
        raise GritLayoutError(f"{why} (docs/spec-decisions.md \"interleaved-flag\")")
    if flag:
        for r in ("scale", "meta"):
            s = st[r]
            if isinstance(s, Permutation) and not isinstance(s.expr, RowMajor):
                raise GritLayoutError(
                    f"{st['data'].expr} carries the {r} plane inside each block in canonical "
                    f"or PACK_K4_12B order; placement_{r} is {placement_name(s.word)}, which "
                    "has no reading inside a block")
    return st


# ---------------------------------------------------------------------------
# what grit.check reads: the size rules and the word-level applicability


def plane_sizes(d: D.Descriptor, ps: PlaneSizes) -> tuple[int, int, int, int]:
    """The plane sizes of (d, shape) under d's placements: the canonical
    §7.3 sizes ``ps.sizes`` with each placement's size rule applied."""
    sizes = PackK4.size_rule(d, ps, ps.sizes)
    if d.flags & D.F_INTERLEAVED:
        sizes = Interleaved.size_rule(sizes)
    return sizes


def interleave_problem(d: D.Descriptor) -> tuple[str, str, str, str] | None:
    """Step 2's agreement of F_INTERLEAVED with the data placement
    (docs/spec-decisions.md "interleaved-flag"): None, or (field, actual,
    expected, why).  A descriptor without the flag is never refused here.
    With it, the data word must be one that carries every plane: BLOCK_AOS,
    a hashed word whose expression is an Interleave(P, n) (or that this
    process cannot resolve: §5.3 then refuses every read of it, and the
    checker cannot tell), or an opaque word (the vendor's bytes).  A flag
    that contradicts its own data placement is a frame that cannot be
    believed (§7.1: GradeUnknown)."""
    if not d.flags & D.F_INTERLEAVED:
        return None
    w = d.placement_data
    cls = placement_class(w)
    if w == BLOCK_AOS or cls == CLASS_OPAQUE:
        return None
    if cls == CLASS_HASHED:
        e = resolve_layout(w)
        if e is None or isinstance(e, Interleave):
            return None
        what = f"placement_data {placement_name(w)} is {e}, which does not interleave"
    else:
        what = f"placement_data {placement_name(w)} does not interleave"
    return ("flags", f"0x{d.flags:02x}",
            "INTERLEAVED only with BLOCK_AOS, an Interleave(P, n) expression or an opaque "
            "data placement",
            f"the INTERLEAVED flag says the data plane carries every plane, but {what}")
