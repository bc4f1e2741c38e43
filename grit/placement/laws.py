"""The array laws on canonical GritArrays: slicing (L5), transpose (L4),
concat, and the metadata-order requirement of sparse kernels (L6).

Every plane of a canonical array is a grid over the grouped view
(docs/spec-decisions.md "lin(i)"): the non-group axes in their order, then the
group axis cut into *quanta* — the smallest run of elements that never splits
a level-0 group, a level-1 group (when level-1 groups stay inside rows) or an
N:M quad.  Each plane holds a fixed number of units per quantum, so one
numpy array of shape (*other axes, quanta, chunk) per plane makes slicing,
transposing and concatenating plain numpy indexing — the same on every plane,
which is what keeps the planes consistent with each other.  A chunk is bytes
when a quantum's units fill whole bytes (always, for the registered grades),
else unpacked codes.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from .. import descriptor as D
from .._sparse import meta_indices
from ..check import check
from ..facts import is_canonical, meta_bits
from ..errors import GritDigestError, GritGradeError, GritLayoutError, GritUsageError
from .planes import Units, from_units, geometry, to_units
from .registered import ROW_MAJOR as _ROW
from .relayout import canonical_planes, relayout
from .words import placement_name

__all__ = ["getitem", "transpose", "concat", "require_metadata_order", "quantum"]


# ---------------------------------------------------------------------------
# the quantum and the per-plane grids


@dataclass(frozen=True, slots=True)
class _Plan:
    q: int                  # elements per quantum along the group axis
    s1: str                 # "none" | "single" | "grid" | "straddle"
    why: str                # what q protects, for messages


def quantum(d: D.Descriptor, shape) -> _Plan:
    k0 = d.k0
    q, why = k0, f"k0 = {k0}"
    sparse = bool(d.flags & D.F_SPARSE)
    if d.n_levels == 1:
        s1 = "none"
    elif d.k1 == 0:
        s1 = "single"
    elif (shape[d.group_axis] // k0) % d.k1 == 0:
        s1 = "grid"
        q, why = k0 * d.k1, f"k0·k1 = {k0}·{d.k1} = {k0 * d.k1} (level-1 groups)"
    else:
        s1 = "straddle"
    if sparse and q % d.sp_m:
        q = math.lcm(q, d.sp_m)
        why += f" and the {d.sp_n}:{d.sp_m} quad → {q}"
    return _Plan(q, s1, why)


@dataclass(frozen=True, slots=True)
class _Role:
    plane: int
    units: Units
    per_q: int              # units per quantum
    as_bytes: bool


def _roles(d: D.Descriptor, shape, plan: _Plan) -> list[_Role]:
    g = geometry(d, shape)
    q, k0 = plan.q, d.k0
    out = []

    def add(plane, u: Units, per_q):
        out.append(_Role(plane, u, per_q, (per_q * u.bits) % 8 == 0))

    sparse = bool(d.flags & D.F_SPARSE)
    add(0, g.data, q // d.sp_m * d.sp_n if sparse else q)
    add(1, g.scale0, q // k0)
    if plan.s1 == "grid":
        add(2, g.scale1, q // (k0 * d.k1))
    if sparse:
        add(3, g.aux, q // d.sp_m)
    elif d.flags & D.F_HAS_ZP:
        add(3, g.aux, q // k0)
    return out


def _grid(buf, r: _Role, other: tuple[int, ...], nq: int) -> np.ndarray:
    if r.as_bytes:
        cb = r.per_q * r.units.bits // 8
        raw = np.frombuffer(buf, dtype=np.uint8, count=r.units.nbytes) if r.units.nbytes \
            else np.zeros(0, np.uint8)
        return raw.reshape(*other, nq, cb)
    x = to_units(buf, r.units)
    return x.reshape(*other, nq, r.per_q)


def _ungrid(x: np.ndarray, r: _Role, count: int) -> bytes:
    if r.as_bytes:
        return np.ascontiguousarray(x).tobytes()
    u = Units(count, r.units.bits, None, None, r.units.msb)
    return from_units(np.ascontiguousarray(x).reshape(1, count), u)


def _require_canonical(a, what: str) -> None:
    if not is_canonical(a.descriptor):
        d = a.descriptor
        raise GritLayoutError(
            f"{what} needs the canonical placement; this array is placed "
            f"data={placement_name(d.placement_data)}, scale={placement_name(d.placement_scale)}, "
            f"meta={placement_name(d.placement_meta)}.\n"
            f"  Fix:  grit.relayout(x, grit.layouts.ROW_MAJOR) first")


def _regular_sparse(a) -> None:
    """Fixed stored-value offsets need every quad to name exactly N distinct
    positions < M (§3.8's single cursor otherwise shifts later quads)."""
    d = a.descriptor
    if not d.flags & D.F_SPARSE or a.size == 0:
        return
    bits = meta_bits(d.sp_meta_fmt)
    idx = np.sort(meta_indices(a.planes[3], d.sp_n, bits, a.size // d.sp_m), axis=1)
    ok = (idx < d.sp_m).all(axis=1)
    if d.sp_n > 1:
        ok &= (np.diff(idx.astype(np.int16), axis=1) != 0).all(axis=1)
    if not ok.all():
        q = int(np.flatnonzero(~ok)[0])
        raise GritLayoutError(
            f"sparse metadata of quad {q} does not name {d.sp_n} distinct positions < {d.sp_m}: "
            "stored values then sit at offsets that depend on every earlier quad (§3.8), so "
            "this array cannot be cut or reordered without re-encoding it")


def _s1_units(a) -> np.ndarray:
    g = geometry(a.descriptor, a.shape)
    return to_units(a.planes[2], g.scale1)[0]


def _s1_from_map(g0: np.ndarray, k1: int, s1: np.ndarray, unit: Units) -> bytes:
    """scale1 of a result whose level-0 groups are the source groups ``g0``
    (in result order): each result level-1 group must come from one source
    level-1 group (level-1 alignment)."""
    n = g0.size
    if n % k1:
        raise GritLayoutError(f"the result has {n} level-0 groups, not whole level-1 groups of "
                              f"k1 = {k1}")
    g1 = g0.reshape(-1, k1) // k1
    if not (g1 == g1[:, :1]).all():
        raise GritLayoutError(
            "this selection puts level-0 groups of different level-1 groups into one level-1 "
            f"group of the result (level-1 groups of k1 = {k1} straddle rows here); it would "
            "change their scales — not a view, not a copy.\n"
            "  Fix:  grit.requantize(grit.decode(x)[...], grade)")
    u = Units(g1.shape[0], unit.bits, None, None)
    return from_units(s1[g1[:, 0]].reshape(1, g1.shape[0], *s1.shape[1:]), u)


def _g0_map(a) -> np.ndarray:
    d = a.descriptor
    other = tuple(s for i, s in enumerate(a.shape) if i != d.group_axis)
    cs = a.shape[d.group_axis] // d.k0
    return np.arange(a.size // d.k0, dtype=np.int64).reshape(*other, cs)


def _build(a, shape, group_axis: int, planes, note: int | None = None):
    """A result array of ``a``'s own type (the laws read arrays through their
    descriptor, shape and planes, and never import the array module above)."""
    d = a.descriptor.replace(group_axis=group_axis)
    if note is not None:
        d = d.replace(note=note)
    return type(a)(d, shape, planes)


# ---------------------------------------------------------------------------
# slicing (L5)


def _norm_key(a, key):
    nd = a.ndim
    if not isinstance(key, tuple):
        key = (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise GritUsageError("an index can only have a single ellipsis ('...')")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (nd - len(key) + 1) + key[i + 1:]
    if len(key) > nd:
        raise GritUsageError(f"too many indices for a GritArray of rank {nd}")
    key = key + (slice(None),) * (nd - len(key))
    ga = a.group_axis
    ranges, dropped = [], []
    for ax, (k, n) in enumerate(zip(key, a.shape)):
        if isinstance(k, slice):
            if k.step not in (None, 1):
                cls = GritLayoutError if ax == ga else GritUsageError
                raise cls(f"axis {ax}: slice step {k.step}; GritArray slices take step 1 only"
                          + (" (a strided group-axis slice re-groups elements, L5)"
                             if ax == ga else ""))
            start, stop, _ = k.indices(n)
            ranges.append((start, max(start, stop)))
        elif isinstance(k, (bool, np.bool_)) or k is None:
            raise GritUsageError(f"unsupported index {k!r} (slices with step 1, integers on "
                                 "non-group axes, and ... only)")
        else:
            try:
                i = operator.index(k)
            except TypeError:
                raise GritUsageError(f"unsupported index {k!r} (slices with step 1, integers "
                                     "on non-group axes, and ... only)") from None
            if ax == ga:
                raise GritLayoutError(
                    f"an integer index on the group axis ({ax}) picks one element out of a "
                    f"group of k0 = {a.descriptor.k0} (L5: never a silent view).\n"
                    "  Fix:  grit.decode(x)[...]  — the values, not a GritArray")
            if not -n <= i < n:
                raise GritUsageError(f"index {i} is out of bounds for axis {ax} with size {n}")
            i %= n
            ranges.append((i, i + 1))
            dropped.append(ax)
    return ranges, dropped


def getitem(a, key):
    _require_canonical(a, "slicing")
    d = a.descriptor
    ga = d.group_axis
    ranges, dropped = _norm_key(a, key)
    plan = quantum(d, a.shape)
    C = a.shape[ga]
    g0s, g0e = ranges[ga]
    if (g0s, g0e) != (0, C):
        if plan.s1 == "straddle":
            raise GritLayoutError(
                f"group-axis slice [{g0s}:{g0e}] of axis {ga}: level-1 groups of k1 = {d.k1} "
                f"straddle rows of {C // d.k0} level-0 groups, so no group-axis slice keeps them "
                "whole (L5).\n  Fix:  grit.requantize(grit.decode(x)[...], grade)")
        for what, v in (("start", g0s), ("end", g0e)):
            if v % plan.q:
                raise GritLayoutError(
                    f"group-axis slice [{g0s}:{g0e}] of axis {ga}: the {what} {v} is not a "
                    f"multiple of {plan.why}. A slice that cuts a group would re-group the "
                    "elements under other scales — never a silent view (L5).\n"
                    f"  Fix:  slice at multiples of {plan.q}, or requantize: "
                    "grit.requantize(grit.decode(x)[...], grade)")
    _regular_sparse(a)
    new_shape_full = tuple(e - s for s, e in ranges)
    new_shape = tuple(n for ax, n in enumerate(new_shape_full) if ax not in dropped)
    new_ga = ga - sum(1 for ax in dropped if ax < ga)
    if new_shape_full == a.shape:
        return a if not dropped else _build(a, new_shape, new_ga, a.planes)
    view = _view(a, ranges, plan)
    if view is not None:
        return _build(a, new_shape, new_ga, view)
    return _build(a, new_shape, new_ga, _copy_slice(a, ranges, plan))


def _grouped(a, ranges):
    """(starts, lengths, extents) in grouped-view axis order."""
    ga = a.group_axis
    order = [i for i in range(a.ndim) if i != ga] + [ga]
    return ([ranges[i][0] for i in order], [ranges[i][1] - ranges[i][0] for i in order],
            [a.shape[i] for i in order])


def _view(a, ranges, plan: _Plan):
    """Memoryview slices when the selection is one contiguous lin range and
    every plane's cut falls on a byte."""
    starts, lens, full = _grouped(a, ranges)
    count = math.prod(lens)
    p = next((i for i, n in enumerate(lens) if n != 1), len(lens))
    if count and any(lens[i] != full[i] for i in range(p + 1, len(lens))):
        return None
    lin0 = 0
    for s, n in zip(starts, full):
        lin0 = lin0 * n + s
    d = a.descriptor
    if plan.s1 == "straddle":
        return None
    roles = _roles(d, a.shape, plan)
    if not all(r.as_bytes for r in roles):
        return None
    q0, nqs = lin0 // plan.q, count // plan.q
    out = [b"", b"", a.planes[2], b""]
    for r in roles:
        cb = r.per_q * r.units.bits // 8
        out[r.plane] = memoryview(a.planes[r.plane])[q0 * cb:(q0 + nqs) * cb] if cb else b""
    if plan.s1 == "none":
        out[2] = b""
    return out


def _copy_slice(a, ranges, plan: _Plan):
    d = a.descriptor
    ga = d.group_axis
    other = tuple(s for i, s in enumerate(a.shape) if i != ga)
    nq = a.shape[ga] // plan.q
    sl = tuple(slice(s, e) for i, (s, e) in enumerate(ranges) if i != ga)
    qs = slice(ranges[ga][0] // plan.q, ranges[ga][1] // plan.q)
    out = [b"", b"", b"", b""]
    starts, lens, _ = _grouped(a, ranges)
    n_new_q = math.prod(lens) // plan.q
    for r in _roles(d, a.shape, plan):
        g = _grid(a.planes[r.plane], r, other, nq)[sl + (qs,)]
        out[r.plane] = _ungrid(g, r, n_new_q * r.per_q)
    if plan.s1 == "single":
        out[2] = a.planes[2]
    elif plan.s1 == "straddle":
        m = _g0_map(a)[sl + (slice(ranges[ga][0] // d.k0, ranges[ga][1] // d.k0),)]
        out[2] = _s1_from_map(m.reshape(-1), d.k1, _s1_units(a), geometry(d, a.shape).scale1)
    return out


# ---------------------------------------------------------------------------
# transpose (L4)


def transpose(a, axes):
    nd = a.ndim
    if axes is None:
        axes = tuple(range(nd))[::-1]
    try:
        axes = tuple(operator.index(x) for x in axes)
    except TypeError:
        raise GritUsageError("transpose axes must be integers") from None
    axes = tuple(x % nd if -nd <= x < nd else nd for x in axes)
    if sorted(axes) != list(range(nd)):
        raise GritUsageError(f"axes {axes} are not a permutation of 0..{nd - 1}")
    ga = a.group_axis
    if axes[ga] != ga:
        moved_to = axes.index(ga)
        raise GritLayoutError(
            f"this transpose moves the group axis {ga} to position {moved_to}. A group-axis "
            "transpose does not exist as a placement change (L4): the k0-neighbourhoods the "
            "scales cover would change, so the only spelling is a new quantisation.\n"
            f"  Fix:  grit.requantize(grit.decode(x).transpose({axes}), grade, "
            f"group_axis={ga})")
    if axes == tuple(range(nd)):
        return a
    _require_canonical(a, "transpose")
    _regular_sparse(a)
    d = a.descriptor
    plan = quantum(d, a.shape)
    other_axes = [i for i in range(nd) if i != ga]
    # the permutation of the grouped view's leading (non-group) axes
    lead = [other_axes.index(axes[i]) for i in range(nd) if i != ga]
    other = tuple(a.shape[i] for i in other_axes)
    nq = a.shape[ga] // plan.q
    new_shape = tuple(a.shape[i] for i in axes)
    if lead == sorted(lead):
        return a
    out = [b"", b"", b"", b""]
    tail = [len(lead), len(lead) + 1]
    for r in _roles(d, a.shape, plan):
        g = _grid(a.planes[r.plane], r, other, nq).transpose(*lead, *tail)
        out[r.plane] = _ungrid(g, r, r.units.count)
    if plan.s1 == "single":
        out[2] = a.planes[2]
    elif plan.s1 == "straddle":
        m = _g0_map(a).transpose(*lead, len(lead))
        out[2] = _s1_from_map(m.reshape(-1), d.k1, _s1_units(a), geometry(d, a.shape).scale1)
    return _build(a, new_shape, ga, out)


# ---------------------------------------------------------------------------
# concat


def concat(arrs, axis: int = 0):
    """Concatenate a non-empty list of arrays (grit.array checks the types)."""
    a0 = arrs[0]
    nd = a0.ndim
    try:
        ax = operator.index(axis)
    except TypeError:
        raise GritUsageError(f"axis must be an int, got {type(axis).__name__}") from None
    if not -nd <= ax < nd:
        raise GritUsageError(f"axis {axis} is out of range for rank {nd}")
    ax %= nd
    frame = a0.descriptor.replace(note=0)
    for x in arrs[1:]:
        if x.ndim != nd:
            raise GritUsageError(f"concat: ranks differ ({nd} vs {x.ndim})")
        if x.descriptor.replace(note=0) != frame:
            raise GritGradeError(
                "concat: the arrays differ in grade or descriptor frame (grade, group axis or "
                "placements); only arrays of one contract concatenate without re-quantising.\n"
                "  Fix:  grit.requantize / grit.relayout the odd one out first")
        if any(x.shape[i] != a0.shape[i] for i in range(nd) if i != ax):
            raise GritUsageError(f"concat: shapes {a0.shape} and {x.shape} differ off axis {ax}")
    note = 0
    for x in arrs:
        note |= x.descriptor.note & D.NOTE_ASSUMED
    note |= a0.descriptor.note
    if len(arrs) == 1:
        return a0
    d0 = a0.descriptor
    if not is_canonical(d0):
        canon = [relayout(x, _ROW) for x in arrs]
        out = concat(canon, ax)
        return relayout(out, data=d0.placement_data, scale=d0.placement_scale,
                        meta=d0.placement_meta if d0.placement_meta else None)
    for x in arrs:
        _regular_sparse(x)
    ga = d0.group_axis
    plans = [quantum(d0, x.shape) for x in arrs]
    kinds = {p.s1 for p in plans}
    new_shape = tuple(sum(x.shape[ax] for x in arrs) if i == ax else a0.shape[i]
                      for i in range(nd))
    res_plan = quantum(d0, new_shape)
    if ax == ga and ("straddle" in kinds or res_plan.s1 != plans[0].s1):
        raise GritLayoutError(
            "concat along the group axis: level-1 groups would straddle rows of the result; "
            "not expressible without re-quantising.\n  Fix:  grit.requantize(...)")
    plan = plans[0]                  # one C off the concat axis: one plan for all
    other_axes = [i for i in range(nd) if i != ga]
    gax = len(other_axes) if ax == ga else other_axes.index(ax)
    out = [b"", b"", b"", b""]
    roles = _roles(d0, a0.shape, plan)
    for i, r in enumerate(roles):
        parts = []
        for x in arrs:
            rx = _roles(d0, x.shape, plan)[i]
            other = tuple(x.shape[j] for j in other_axes)
            parts.append(_grid(x.planes[rx.plane], rx, other, x.shape[ga] // plan.q))
        g = np.concatenate(parts, axis=gax)
        count = sum(_roles(d0, x.shape, plan)[i].units.count for x in arrs)
        out[r.plane] = _ungrid(g, r, count)
    if plan.s1 == "single":
        s1 = {bytes(x.planes[2]) for x in arrs}
        if len(s1) != 1:
            raise GritLayoutError(
                "concat: the per-tensor level-1 scales (k1 = 0) differ; one result cannot carry "
                "two — re-quantise.\n  Fix:  grit.requantize(np.concatenate([...]), grade)")
        out[2] = a0.planes[2]
    elif plan.s1 == "straddle":
        maps, units, off = [], [], 0
        for x in arrs:
            maps.append(_g0_map(x) + off)     # off is a whole number of level-1 groups
            units.append(_s1_units(x))
            off += x.size // d0.k0
        m = np.concatenate(maps, axis=gax)
        out[2] = _s1_from_map(m.reshape(-1), d0.k1, np.concatenate(units, axis=0),
                              geometry(d0, a0.shape).scale1)
    return _build(a0, new_shape, ga, out, note=note)



# ---------------------------------------------------------------------------
# L6


def require_metadata_order(a, *, verify: bool = False):
    d = a.descriptor
    if not d.flags & D.F_SPARSE:
        return a
    if d.sp_order != D.SPORDER_ASC_LSB:
        raise GritLayoutError(
            f"operand declares SPORDER_UNORDERED metadata ({a.grade.canonical}); a kernel that "
            "requires SPORDER_ASC_LSB (mma.sp::ordered_metadata) must reject it (L6).\n"
            "  Fix:  re-encode into the asclsb grade: grit.requantize(x, "
            "x.grade.replace(sp=...:asclsb))")
    if verify:
        try:
            check(d, a.shape, a.planes, level=2, canonical=canonical_planes)
        except GritDigestError:
            raise
    return a
