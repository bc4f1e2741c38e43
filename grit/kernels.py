"""§4.3 and §7.5: a grade-checked kernel registry and ``matmul``.

A kernel declares the accumulation contract it offers (ao, ap, ab, ai, an:
its numeric behaviour), the placements it requires of each GRIT operand's
planes, optionally the sparse metadata order it requires (L6), and which
operand grades it serves.  Its offer for a call is the operand B's grade with
the kernel's accumulation contract, k = grade(B)[α := α(kernel)], and:

* selection (§4.3): a kernel may serve the requested grade r iff k ⊑ r;
* propagation (§4.3): the result grade is grade(x) ⊔ grade(B) ⊔ k, with the
  join taken on the accumulation axes; the representation, encode and decode
  fields are B's (docs/spec-decisions.md explains why).

``matmul(x, B)`` computes ``x @ B.T`` for B of shape [N, K] grouped along K
(group_axis 1: the reduction axis, as a linear layer's weight), x of shape
[..., K] (float32 values or a GritArray grouped along its last axis); the
result has shape [..., N].  When nothing fits, the error is the §7.5
diagnostic: what is placed how, what the kernel requires, and the one-line fix.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from . import descriptor as D
from .facts import ROLE_FIELD, ROLE_NAMES
from .array import GritArray, canonical, decode
from .errors import GritGradeError, GritLayoutError, GritUsageError
from .formats import CANONICAL_NAN
from .grade import (
    ACCUM_KEYS, DEFAULTS, KEYS, Grade, _axis_join, _axis_leq, _NO_JOIN, parse_fields,
    grade_from,
)
from .placement.words import (
    REGISTERED, UNSPECIFIED, is_well_formed, placement_by_name, placement_name,
)

__all__ = [
    "Kernel", "MatmulResult", "register_kernel", "unregister_kernel", "kernels",
    "get_kernel", "matmul", "ROLES",
]

ROLES = ROLE_NAMES
_ROW_MAJOR = REGISTERED["ROW_MAJOR"][0]
_LINEAR_META = REGISTERED["LINEAR_META"][0]
_FIELD = ROLE_FIELD
_ORDER_NAMES = {D.SPORDER_UNORDERED: "SPORDER_UNORDERED", D.SPORDER_ASC_LSB: "SPORDER_ASC_LSB"}
_AO_WORDS = {"seq": "deterministic", "tree": "a tree order", "unspec": "nondeterministic"}


# ---------------------------------------------------------------------------
# values

@dataclass(frozen=True, slots=True)
class MatmulResult:
    """What ``matmul`` returns: the values, the grade they carry (§4.3
    propagation), and the name of the kernel that computed them."""

    values: np.ndarray
    grade: Grade
    kernel: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Kernel:
    """A registered kernel.  ``accumulation`` holds all five α fields
    (defaults explicit); ``requires`` maps a plane role to the placement
    words it accepts; ``operand_grades`` None means any grade the codec
    decodes, else B's grade must be decode-equivalent to one of them."""

    name: str
    accumulation: Mapping[str, str]
    requires: Mapping[str, frozenset[int]]
    fn: Callable[[Any, GritArray], np.ndarray]
    sp_order: int | None = None
    operand_grades: tuple[Grade, ...] | None = None
    description: str = ""
    cost: float = 1.0

    def offer(self, operand: Grade) -> Grade:
        """k for an operand of this grade: its fields, this kernel's α."""
        return operand.replace(**self.accumulation)

    def accepts_grade(self, g: Grade) -> bool:
        return self.operand_grades is None or any(
            g.decode_equivalent(o) for o in self.operand_grades)

    def misplaced(self, a: GritArray) -> list[tuple[str, int, frozenset[int]]]:
        """(role, word, accepted words) for each plane of ``a`` this kernel
        cannot read as placed."""
        d = a.descriptor
        aux = bool(d.flags & (D.F_SPARSE | D.F_HAS_ZP))
        out = []
        for role, ok in self.requires.items():
            if role == "meta" and not aux:
                continue
            w = getattr(d, _FIELD[role])
            if w not in ok:
                out.append((role, w, ok))
        return out

    def order_violation(self, a: GritArray) -> int | None:
        """The operand's sp_order when this kernel requires another (L6)."""
        d = a.descriptor
        if self.sp_order is None or not d.flags & D.F_SPARSE:
            return None
        return d.sp_order if d.sp_order != self.sp_order else None


# ---------------------------------------------------------------------------
# the registry

_KERNELS: dict[str, Kernel] = {}


def _words(v: Any, what: str) -> frozenset[int]:
    items = [v] if isinstance(v, (int, str)) else list(v)
    out = set()
    for p in items:
        if isinstance(p, str):
            w = placement_by_name(p)
        elif isinstance(p, int) and not isinstance(p, bool):
            w = p
        else:
            raise GritUsageError(f"{what}: expected placement words or names, got {p!r}")
        if not is_well_formed(w) or w == UNSPECIFIED:
            raise GritLayoutError(
                f"{what}: 0x{w:016x} is not a placement a kernel can require "
                "(UNSPECIFIED, or not well-formed)")
        out.add(w)
    if not out:
        raise GritUsageError(f"{what}: no placement given")
    return frozenset(out)


def _parse_accumulation(text: str) -> dict[str, str]:
    """'ao=seq,an=preserve' (or 'grit1(ao=seq)') -> normalised α fields."""
    s = "".join(text.split()).lower()
    if s.startswith("grit1(") and s.endswith(")"):
        s = s[6:-1]
    return parse_fields(",".join(filter(None, s.split(","))), ACCUM_KEYS, "accumulation")


def _as_accumulation(offers: "Grade | str | Mapping[str, str]") -> tuple[dict[str, str],
                                                                        Grade | None]:
    """(all five α fields, the full grade if one was given)."""
    full = None
    if isinstance(offers, Grade):
        full, given = offers, {k: offers[k] for k in ACCUM_KEYS}
    elif isinstance(offers, str):
        try:
            full = grade_from(offers)
            given = {k: full[k] for k in ACCUM_KEYS}
        except GritGradeError:
            given = _parse_accumulation(offers)
    elif isinstance(offers, Mapping):
        given = _parse_accumulation(",".join(f"{k}={v}" for k, v in offers.items()))
    else:
        raise GritUsageError(f"offers must be a Grade, a grade string or 'ao=...,...', got "
                             f"{type(offers).__name__}")
    return {k: given.get(k, DEFAULTS[k]) for k in ACCUM_KEYS}, full


def register_kernel(name: str, offers: "Grade | str | Mapping[str, str]",
                    requires: Mapping[str, Any], fn: Callable[[Any, GritArray], np.ndarray],
                    *, operand_grades: Iterable["Grade | str"] | None = None,
                    sp_order: "int | str | None" = None, description: str = "",
                    cost: float = 1.0, replace: bool = False) -> Kernel:
    """Register a matmul kernel.

    ``offers``: its accumulation contract, as ``'ao=seq,an=preserve'`` (keys
    not named take their defaults) or a full Grade, whose α is taken and whose
    representation, unless ``operand_grades`` says otherwise, is the only one
    served.  ``requires``: {'data' | 'scale' | 'meta': word, name or several},
    applied to every GritArray operand.  ``sp_order``: the metadata order a
    sparse operand must declare (``'asclsb'`` / SPORDER_ASC_LSB), L6.
    ``fn(x, B)`` gets x (float32 [M, K] or a GritArray) and B and returns
    float32 [M, N].  ``cost`` orders candidates (lowest first)."""
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise GritUsageError(f"a kernel name is a non-empty str without surrounding "
                             f"space, got {name!r}")
    if name in _KERNELS and not replace:
        raise GritUsageError(f"kernel {name!r} is already registered (replace=True to replace)")
    if not callable(fn):
        raise GritUsageError(f"kernel {name!r}: fn must be callable")
    accum, full = _as_accumulation(offers)
    if not isinstance(requires, Mapping):
        raise GritUsageError(f"kernel {name!r}: requires must map roles to placements")
    bad = set(requires) - set(ROLES)
    if bad:
        raise GritUsageError(f"kernel {name!r}: unknown role(s) {sorted(bad)}; roles are "
                             f"{', '.join(ROLES)}")
    req = {r: _words(requires[r], f"kernel {name!r} requires[{r!r}]")
           for r in ROLES if r in requires}
    if isinstance(sp_order, str):
        order = {"asclsb": D.SPORDER_ASC_LSB, "sporder_asc_lsb": D.SPORDER_ASC_LSB,
                 "unord": D.SPORDER_UNORDERED, "sporder_unordered": D.SPORDER_UNORDERED}.get(
                     sp_order.strip().lower())
        if order is None:
            raise GritUsageError(f"kernel {name!r}: sp_order {sp_order!r} is not asclsb/unord")
    elif sp_order is None or sp_order in (D.SPORDER_ASC_LSB, D.SPORDER_UNORDERED):
        order = sp_order
    else:
        raise GritUsageError(f"kernel {name!r}: sp_order {sp_order!r} is not asclsb/unord")
    if operand_grades is not None:
        ops = tuple(grade_from(g) for g in operand_grades)
    else:
        ops = (full,) if full is not None else None
    try:
        c = float(cost)
    except (TypeError, ValueError):
        raise GritUsageError(f"kernel {name!r}: cost must be a number") from None
    k = Kernel(name=name, accumulation=MappingProxyType(accum),
               requires=MappingProxyType(req), fn=fn, sp_order=order, operand_grades=ops,
               description=str(description), cost=c)
    _KERNELS[name] = k
    return k


def unregister_kernel(name: str) -> None:
    if _KERNELS.pop(name, None) is None:
        raise GritUsageError(f"no kernel named {name!r}")


def kernels() -> tuple[Kernel, ...]:
    """The registered kernels, in registration order."""
    return tuple(_KERNELS.values())


def get_kernel(name: str) -> Kernel:
    k = _KERNELS.get(name)
    if k is None:
        raise GritUsageError(f"no kernel named {name!r}; registered: "
                             f"{', '.join(map(repr, _KERNELS)) or 'none'}")
    return k


# ---------------------------------------------------------------------------
# the request

@dataclass(frozen=True)
class _Request:
    """What the caller asked for: a full grade, accumulation fields only, or
    nothing.  ``fields`` are the axes a kernel's offer is compared on."""

    fields: Mapping[str, str]
    grade: Grade | None = None
    text: str = ""


def _as_request(grade: Any) -> _Request:
    if grade is None:
        return _Request(fields={})
    if isinstance(grade, Grade):
        return _Request(fields=grade.fields(), grade=grade, text=grade.name or grade.canonical)
    if isinstance(grade, str):
        try:
            g = grade_from(grade)
        except GritGradeError as e:
            try:
                acc = _parse_accumulation(grade)
            except GritGradeError:
                if "".join(grade.split()).lower().startswith("grit1("):
                    raise e from None
                raise
            return _Request(fields=acc, text=",".join(f"{k}={v}" for k, v in acc.items()))
        return _Request(fields=g.fields(), grade=g, text=g.name or g.canonical)
    raise GritUsageError(f"grade must be a Grade, a grade string, 'ao=...' fields or None, "
                         f"got {type(grade).__name__}")


def _fails(k: Kernel, operand: Grade, req: _Request) -> list[tuple[str, str, str]]:
    """(key, requested, offered) for each axis where k ⊑ r fails."""
    offer = k.offer(operand)
    return [(key, want, offer[key]) for key, want in req.fields.items()
            if not _axis_leq(key, offer[key], want)]


def _join_accumulation(k: Kernel, operands: Iterable[Grade]) -> dict[str, str] | str:
    """⊔ of the kernel's α and each operand's, or the reason it has none."""
    acc = dict(k.accumulation)
    for g in operands:
        for key in ACCUM_KEYS:
            j = _axis_join(key, acc[key], g[key])
            if j is _NO_JOIN:
                return (f"operand grade has {key}={g[key]}, kernel {k.name!r} offers "
                        f"{key}={acc[key]}: a flat axis with no join")
            acc[key] = j
    return acc


# ---------------------------------------------------------------------------
# operands

def _as_x(x: Any) -> tuple[Any, tuple[int, ...], int]:
    """(x as float32 ndarray or GritArray, leading shape, K)."""
    if isinstance(x, GritArray):
        if x.ndim < 1:
            raise GritUsageError("matmul operand A must have at least one axis")
        if x.group_axis != x.ndim - 1:
            raise GritUsageError(
                f"matmul operand A is grouped along axis {x.group_axis}; the reduction axis "
                f"is its last ({x.ndim - 1}). A group-axis transpose is not a placement change "
                "(L4): requantize along the last axis.")
        return x, x.shape[:-1], x.shape[-1]
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as e:
        raise GritUsageError(f"matmul operand A must be values or a GritArray: {e}") from None
    if arr.dtype != np.float32:
        if arr.dtype.kind not in "fiu" or not np.can_cast(arr.dtype, np.float32, "safe"):
            raise GritUsageError(
                f"matmul operand A is {arr.dtype}; the working precision is binary32 (§1.1): "
                "convert it explicitly (x.astype(np.float32)) so the rounding is yours")
        arr = arr.astype(np.float32)
    if arr.ndim < 1:
        raise GritUsageError("matmul operand A must have at least one axis")
    return arr, arr.shape[:-1], arr.shape[-1]


def _check_b(w: Any) -> GritArray:
    if not isinstance(w, GritArray):
        raise GritUsageError(f"matmul operand B must be a GritArray [N, K], got "
                             f"{type(w).__name__}")
    if w.ndim != 2:
        raise GritUsageError(f"matmul operand B must be [N, K], got shape {w.shape}")
    if w.group_axis != 1:
        raise GritUsageError(
            f"matmul operand B is grouped along axis {w.group_axis}; B is [N, K] grouped "
            "along K (axis 1), the reduction axis. A group-axis transpose is not a placement "
            "change (L4): requantize B along K.")
    return w


def _values(op: Any) -> np.ndarray:
    return decode(op) if isinstance(op, GritArray) else op


def _canonical_nan(v: np.ndarray) -> np.ndarray:
    nan = np.isnan(v)
    if nan.any():
        v.view(np.uint32)[nan] = np.uint32(CANONICAL_NAN)
    return v


# ---------------------------------------------------------------------------
# §7.5 diagnostics

def _short(word: int) -> str:
    h = f"{word:016x}"
    return f"0x{h[:4]}…{h[-4:]}"


def _expr(word: int) -> str:
    return f"grit.layouts.{placement_name(word)}" if word in _REG_WORDS else f"0x{word:016x}"


_REG_WORDS = frozenset(w for w, _ in REGISTERED.values())


def _pick(ok: frozenset[int], role: str) -> int:
    """The accepted word a fix should name: the canonical one when allowed."""
    for pref in ((_LINEAR_META, _ROW_MAJOR) if role == "meta" else (_ROW_MAJOR,)):
        if pref in ok:
            return pref
    return min(ok)


def _names(ok: frozenset[int]) -> str:
    return " or ".join(f"{placement_name(w)} ({_short(w)})" for w in sorted(ok))


def _layout_error(op: str, var: str, k: Kernel, bad: list, alt: str | None) -> GritLayoutError:
    role, word, ok = bad[0]
    plane = {"data": "", "scale": "'s scale plane", "meta": "'s metadata plane"}[role]
    head = (f"matmul operand {op}{plane} is placed {placement_name(word)} ({_short(word)}) but "
            f"kernel '{k.name}' requires {_names(ok)}.")
    targets = {r: _pick(o, r) for r, _, o in bad}
    if any(w == UNSPECIFIED for _, w, _ in bad):
        r0 = next(r for r, w, _ in bad if w == UNSPECIFIED)
        fix = (f"{var} = grit.assume_placement({var}, {_args(targets)}, reason='<why the "
               f"bytes are {placement_name(targets[r0])}>')  # UNSPECIFIED cannot be relayouted")
    else:
        fix = f"{var} = grit.relayout({var}, {_args(targets)})"
    lines = [f"Fix:  {fix}"]
    if alt:
        lines.append(f"Or:   grit.matmul(x, B, kernel='{alt}')")
    return GritLayoutError(head + "\n" + "\n".join("  " + ln for ln in lines))


def _args(targets: Mapping[str, int]) -> str:
    """relayout's arguments for these targets: ROW_MAJOR alone when every
    target is its role's canonical order (relayout reads it so)."""
    canon = {"data": (_ROW_MAJOR,), "scale": (_ROW_MAJOR,), "meta": (_LINEAR_META, _ROW_MAJOR)}
    if all(w in canon[r] for r, w in targets.items()):
        return _expr(_ROW_MAJOR)
    return ", ".join(f"{r}={_expr(targets[r])}" for r in ROLES if r in targets)


def _order_error(op: str, var: str, a: GritArray, k: Kernel, got: int,
                 alt: str | None) -> GritLayoutError:
    sp = a.grade["sp"]
    want = "asclsb" if k.sp_order == D.SPORDER_ASC_LSB else "unord"
    target = a.grade.replace(sp=sp.rsplit(":", 1)[0] + ":" + want).canonical
    lines = [f"Fix:  {var} = grit.requantize({var}, '{target}').array  # re-rounds; level 2 "
             "verifies the order (§7.4)"]
    if alt:
        lines.append(f"Or:   grit.matmul(x, B, kernel='{alt}')")
    return GritLayoutError(
        f"matmul operand {op}'s sparse metadata is {_ORDER_NAMES.get(got, got)} but kernel "
        f"'{k.name}' requires {_ORDER_NAMES[k.sp_order]} (L6).\n"
        + "\n".join("  " + ln for ln in lines))


def _axis_text(key: str, value: str) -> str:
    if key == "ao":
        word = _AO_WORDS.get(value, "a fixed pairwise order" if value.startswith("pairwise")
                             else value)
        return f"ao={value} ({word})"
    return f"{key}={value}"


def _placement_fix(k: Kernel, ops: list[tuple[str, str, GritArray]]) -> str:
    parts = []
    for op, var, a in ops:
        bad = k.misplaced(a)
        if bad:
            parts.append(f"{var} = grit.relayout({var}, "
                         f"{_args({r: _pick(o, r) for r, _, o in bad})})")
    return "; ".join(parts)


def _grade_error(req: _Request, fitting: list[Kernel], operand: Grade, what: str,
                 exact: Kernel | None, ops: list[tuple[str, str, GritArray]],
                 named: bool = False) -> GritGradeError:
    k0 = fitting[0]
    key, want, got = _fails(k0, operand, req)[0]
    if named:
        head = (f"requested {_axis_text(key, want)}; kernel '{k0.name}' offers "
                f"{_axis_text(key, got)}.")
    elif len(fitting) == 1:
        head = (f"requested {_axis_text(key, want)}; the only kernel for ({what}), "
                f"'{k0.name}', offers {_axis_text(key, got)}.")
    else:
        offers = "; ".join(
            f"'{k.name}' offers " + ", ".join(f"{a}={o}" for a, _, o in _fails(k, operand, req))
            for k in fitting)
        head = f"requested {_axis_text(key, want)}; no kernel for ({what}) refines it: {offers}."
    lines = []
    if exact is not None:
        offer = exact.offer(operand)
        move = _placement_fix(exact, ops)
        if named:
            how = (f"grit.matmul(x, B, kernel='{exact.name}')  (offers "
                   f"{_axis_text(key, offer[key])}")
        else:
            how = f"grade={offer.canonical}  (kernel '{exact.name}'"
        notes = [exact.description] if exact.description else []
        if exact.cost > k0.cost:
            notes.append("slower")
        if move:
            notes.append("needs " + move)
        lines.append(f"Options: {how}{': ' + ', '.join(notes) if notes else ''})")
    relaxable = _axis_leq(key, want, got)
    call = (f"grade.relax({key}={got})" if relaxable else f"grade.replace({key}={got})")
    why = "accept nondeterminism, explicitly" if key == "ao" else f"accept {key}={got}, explicitly"
    lines.append(("         " if lines else "Options: ") + f"{call}  # {why}")
    return GritGradeError(head + "\n" + "\n".join("  " + ln for ln in lines))


# ---------------------------------------------------------------------------
# matmul

def matmul(x: Any, w: GritArray, kernel: str | None = None,
           grade: "Grade | str | None" = None) -> MatmulResult:
    """``x @ w.T`` for ``w`` a GritArray [N, K] grouped along K and ``x``
    float32 [..., K] or a GritArray grouped along its last axis.

    ``grade`` is the requested grade r: a Grade (every field compared), a
    grade string or name, accumulation fields only (``'ao=seq'``), or None.
    A kernel serves the call iff its offer k ⊑ r, it can read every operand's
    placements (and sparse metadata order, L6), and its α joins the operands'.
    ``kernel=`` names one (used or refused, never substituted); otherwise the
    lowest-cost fitting kernel is used.  An operand no such kernel reads as
    placed, whose placement is a witness (not assumed, not UNSPECIFIED), is
    relayouted to the canonical order for the call (a GGUF block struct as
    grit.load gives it).  Returns :class:`MatmulResult` whose
    grade is grade(x) ⊔ grade(w) ⊔ k on the accumulation axes."""
    a, lead, K = _as_x(x)
    b = _check_b(w)
    N, Kb = b.shape
    if Kb != K:
        raise GritUsageError(f"matmul: A has K={K} (last axis) but B is [N={N}, K={Kb}]")
    req = _as_request(grade)
    bg = b.grade
    operands = [bg] + ([a.grade] if isinstance(a, GritArray) else [])
    ops = [("B", "B", b)] + ([("A", "x", a)] if isinstance(a, GritArray) else [])

    if req.grade is not None:
        rep = [k for k in KEYS if k not in ACCUM_KEYS and bg[k] != req.grade[k]]
        if rep:
            raise GritGradeError(
                f"requested grade {req.text} but operand B is {bg.name or bg.canonical}: they "
                f"differ on {', '.join(f'{k} ({bg[k]} vs {req.grade[k]})' for k in rep)}, and "
                "those fields are flat, so no kernel's offer for B refines the request.\n"
                "  Options: grade='ao=...'  # request only the accumulation contract\n"
                "           B = grit.requantize(B, <the requested grade>).array")

    # an operand whose placement is witnessed (§5.5: built in it, or relayouted
    # there; not assumed, not UNSPECIFIED) and that no kernel reads as placed
    # goes to the canonical order: a GGUF block struct, a swizzled export
    pool = [get_kernel(kernel)] if kernel is not None else \
        [k for k in _KERNELS.values() if all(k.accepts_grade(g) for g in operands)]
    if pool and not any(_reads(k, ops) for k in pool):
        moved = [(op, var, _to_canonical(o) if any(k.misplaced(o) for k in pool) else o)
                 for op, var, o in ops]
        if any(_reads(k, moved) for k in pool):
            ops = moved
            b = _operand(ops, "B")
            if isinstance(a, GritArray):
                a = _operand(ops, "A")

    def serves_grade(k: Kernel) -> bool:
        return not _fails(k, bg, req) and not isinstance(_join_accumulation(k, operands), str)

    def readable(k: Kernel) -> bool:
        return _reads(k, ops)

    def first_problem(k: Kernel):
        for op, var, o in ops:
            bad = k.misplaced(o)
            if bad:
                return ("layout", op, var, bad)
            got = k.order_violation(o)
            if got is not None:
                return ("order", op, var, got)
        return None

    fit_grade = [k for k in _KERNELS.values()
                 if all(k.accepts_grade(g) for g in operands) and serves_grade(k)]
    if kernel is not None:
        k = get_kernel(kernel)
        if not all(k.accepts_grade(g) for g in operands):
            served = ", ".join(g.name or g.canonical for g in k.operand_grades or ())
            raise GritGradeError(f"kernel '{k.name}' serves {served}, not operand B's grade "
                                 f"{bg.name or bg.canonical}")
        prob = first_problem(k)
        if prob is not None:
            alts = [c for c in fit_grade if c is not k and readable(c)]
            alt = min(alts, key=lambda c: c.cost).name if alts else None
            if prob[0] == "layout":
                raise _layout_error(prob[1], prob[2], k, prob[3], alt)
            raise _order_error(prob[1], prob[2], _operand(ops, prob[1]), k, prob[3], alt)
        if _fails(k, bg, req):
            exact = min((c for c in fit_grade if c is not k), key=lambda c: c.cost,
                        default=None)
            raise _grade_error(req, [k], bg, _what(b, a), exact, ops, named=True)
        joined = _join_accumulation(k, operands)
        if isinstance(joined, str):
            raise GritGradeError(f"no result grade: {joined}")
        chosen = k
    else:
        candidates = [k for k in fit_grade if readable(k)]
        if not candidates:
            accepting = [k for k in _KERNELS.values() if all(k.accepts_grade(g) for g in operands)]
            if not accepting:
                raise GritGradeError(
                    f"no kernel serves operand B's grade {bg.name or bg.canonical}; registered: "
                    f"{', '.join(repr(k) for k in _KERNELS) or 'none'}")
            placed = [k for k in accepting if readable(k)]
            if placed:
                # the operands as placed have kernels; none meets the grade
                unjoinable = [k for k in placed if not _fails(k, bg, req)]
                if unjoinable:
                    raise GritGradeError(f"no result grade: "
                                         f"{_join_accumulation(unjoinable[0], operands)}")
                exact = min(fit_grade, key=lambda c: c.cost) if fit_grade else None
                raise _grade_error(req, placed, bg, _what(b, a), exact, ops)
            k = min(fit_grade or accepting, key=lambda c: c.cost)
            prob = first_problem(k)
            if prob[0] == "layout":
                raise _layout_error(prob[1], prob[2], k, prob[3], None)
            raise _order_error(prob[1], prob[2], _operand(ops, prob[1]), k, prob[3], None)
        chosen = min(candidates, key=lambda c: c.cost)
        joined = _join_accumulation(chosen, operands)

    out = np.asarray(chosen.fn(a if isinstance(a, GritArray) else a.reshape(-1, K), b))
    M = int(np.prod(lead, dtype=np.int64)) if lead else 1
    if out.dtype != np.float32 or out.size != M * N:
        raise GritUsageError(f"kernel '{chosen.name}' returned {out.dtype} {out.shape}; "
                             f"expected float32 with {M} x {N} elements")
    values = np.ascontiguousarray(out).reshape(lead + (N,))
    return MatmulResult(values=values, grade=bg.replace(**joined), kernel=chosen.name)


def _reads(k: Kernel, ops: list[tuple[str, str, GritArray]]) -> bool:
    """Whether ``k`` reads every operand as placed (and ordered, L6)."""
    return not any(k.misplaced(o) or k.order_violation(o) is not None for _, _, o in ops)


def _to_canonical(o: GritArray) -> GritArray:
    """``o`` relayouted to the canonical order when its placement is a
    witness (not NOTE_ASSUMED, no plane UNSPECIFIED) and relayout can move it;
    else ``o`` as it is, for the refusal to name."""
    d = o.descriptor
    aux = bool(d.flags & (D.F_SPARSE | D.F_HAS_ZP))
    words = [d.placement_data, d.placement_scale] + ([d.placement_meta] if aux else [])
    if d.note & D.NOTE_ASSUMED or UNSPECIFIED in words:
        return o
    try:
        return canonical(o)
    except GritLayoutError:       # an unresolvable or opaque placement (§5.3, L3)
        return o


def _operand(ops: list[tuple[str, str, GritArray]], name: str) -> GritArray:
    return next(o for n, _, o in ops if n == name)


def _what(b: GritArray, a: Any) -> str:
    parts = [b.grade.name or b.grade.canonical,
             f"B placed {placement_name(b.descriptor.placement_data)}"]
    if isinstance(a, GritArray):
        parts.append(f"A placed {placement_name(a.descriptor.placement_data)}")
    return ", ".join(parts)


# ---------------------------------------------------------------------------
# the shipped kernels

def _as_2d(op: Any, K: int) -> np.ndarray:
    v = _values(op)
    return np.ascontiguousarray(v, dtype=np.float32).reshape(-1, K)


_SUBNORMAL_PROBE = (np.float32(2.0 ** -126), np.float32(0.5))   # product 2^-127: subnormal


def _flushes_subnormals() -> bool:
    """True when this process's FPU flushes subnormals (FTZ/DAZ set by some
    loaded library): then an=preserve would be a false promise."""
    a, b = _SUBNORMAL_PROBE
    return bool(np.multiply(np.array([a]), np.array([b]))[0] == 0)


def _reference_seq(x: Any, w: GritArray) -> np.ndarray:
    """Σ_k in order: p = f32(a[m,k] · b[n,k]); acc = f32(acc + p), acc
    starting at the k = 0 product (+0.0 when K = 0).  Each step is one numpy
    binary32 operation over all (m, n): rounded to nearest even, never fused."""
    if _flushes_subnormals():
        raise GritGradeError(
            "kernel 'reference_seq' offers an=preserve, but this process flushes binary32 "
            "subnormals (FTZ/DAZ, usually set by a library built with fast-math).")
    K = w.shape[1]
    A = _as_2d(x, K)
    B = _as_2d(w, K)
    M, N = A.shape[0], B.shape[0]
    if K == 0:
        return np.zeros((M, N), np.float32)
    At = np.ascontiguousarray(A.T)        # row k: column k of A, contiguous
    Bt = np.ascontiguousarray(B.T)
    with np.errstate(all="ignore"):
        acc = np.multiply(At[0][:, None], Bt[0][None, :])
        p = np.empty_like(acc)
        for k in range(1, K):
            np.multiply(At[k][:, None], Bt[k][None, :], out=p)
            np.add(acc, p, out=acc)
    return _canonical_nan(acc)


def _numpy_unspec(x: Any, w: GritArray) -> np.ndarray:
    K = w.shape[1]
    A = _as_2d(x, K)
    B = _as_2d(w, K)
    with np.errstate(all="ignore"):
        out = np.matmul(A, B.T)
    return _canonical_nan(np.ascontiguousarray(out, dtype=np.float32))


_CANON = {"data": _ROW_MAJOR, "scale": _ROW_MAJOR, "meta": (_LINEAR_META, _ROW_MAJOR)}

register_kernel(
    "reference_seq", "ao=seq,ap=binary32,ab=binary32,ai=binary32,an=preserve", _CANON,
    _reference_seq, cost=64.0, description="software, exact")
register_kernel(
    "numpy_unspec", "ao=unspec", _CANON, _numpy_unspec, cost=1.0,
    description="numpy float32 matmul: BLAS order and fusion unspecified")
