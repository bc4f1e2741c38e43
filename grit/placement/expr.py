"""§5.3: the layout expression language.

An expression is a value (frozen dataclasses, one per constructor) with one
canonical text, one parser, and one 64-bit word::

    P ::= RowMajor | ColMajor
        | Tile(P,[tr,tc]) | Interleave(P,n) | Swizzle(bits,base,shift)
        | Perm([p0,...]) | Pad(align) | Compose(P,P)
        | Opaque(vendor,hexblob)

``Perm(πn)`` (also ``Perm(pin)``) is accepted as input for ggml's nibble
order :func:`halves`; the canonical text, and so the word, is the Perm written
out.

word(P) = 0x8 << 60 | (FNV-1a-64(str(P)) & (2^60 − 1)); an expression that
contains Opaque anywhere takes class 0xF with the same payload (it is storable,
never relayoutable — L3).  docs/placements.md gives the grammar and the exact
index map of every constructor.

Index maps act on a *unit grid*: the units of one plane (elements, scale
values, quads' metadata fields) viewed as an (R, C) row-major matrix, C along
the group axis (docs/placements.md "Unit grids").  ``apply`` permutes a unit
array ``x`` of shape (B, R·C, *unit) — B independent grids — so that
``out[b, j] = x[b, idx[j]]`` where ``idx`` is the expression's index map;
``apply(..., inverse=True)`` undoes it.  The same code computes the index map
(``index_map``: apply to ``arange``) and moves the bytes, so the two can never
disagree.

The registry resolves words to expressions for this process.  Equal hashed
words never suffice to call two placements equal (§5.3): ``same_layout``
compares canonical texts and refuses when either side is unresolvable.
"""
from __future__ import annotations

import contextlib
import contextvars
import re
from dataclasses import dataclass
from typing import Iterator, Union

import numpy as np

from ..errors import GritLayoutError, GritUsageError
from ..fingerprint import fnv1a64
from .words import CLASS_HASHED, CLASS_OPAQUE, placement_class, placement_name

__all__ = [
    "Expr", "RowMajor", "ColMajor", "Tile", "Interleave", "Swizzle", "Perm", "Pad",
    "Compose", "Opaque", "parse_layout", "layout_word", "register_layout", "resolve_layout",
    "same_layout", "apply", "index_map", "validate", "as_expr", "PAYLOAD_MASK", "layout_scope",
    "brief", "halves", "MAX_HALVES",
]

PAYLOAD_MASK = (1 << 60) - 1


class Expr:
    """Base of the nine constructors.  ``str(e)`` is the canonical text."""

    __slots__ = ()

    @property
    def word(self) -> int:
        return layout_word(self)

    @property
    def opaque(self) -> bool:
        return False

    @property
    def interleaved(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class RowMajor(Expr):
    def __str__(self) -> str:
        return "RowMajor"


@dataclass(frozen=True, slots=True)
class ColMajor(Expr):
    def __str__(self) -> str:
        return "ColMajor"


@dataclass(frozen=True, slots=True)
class Tile(Expr):
    inner: Expr
    dims: tuple[int, int]

    def __post_init__(self):
        _need_expr(self.inner, "Tile")
        d = tuple(self.dims)
        if len(d) != 2 or any(not isinstance(v, int) or v < 1 for v in d):
            raise GritLayoutError(f"Tile dims must be two positive integers, got {self.dims!r}")
        object.__setattr__(self, "dims", d)
        if self.inner.interleaved:
            raise GritLayoutError("Interleave acts on whole planes; it cannot be tiled")

    def __str__(self) -> str:
        return f"Tile({self.inner},[{self.dims[0]},{self.dims[1]}])"

    @property
    def opaque(self) -> bool:
        return self.inner.opaque


@dataclass(frozen=True, slots=True)
class Interleave(Expr):
    """The four planes interleaved per block of ``n`` level-0 groups (the
    data placement of ggml-style block structs); ``inner`` orders the
    elements inside each block's data field."""

    inner: Expr
    n: int

    def __post_init__(self):
        _need_expr(self.inner, "Interleave")
        if not isinstance(self.n, int) or self.n < 1:
            raise GritLayoutError(f"Interleave block must be >= 1 level-0 groups, got {self.n!r}")
        if self.inner.interleaved:
            raise GritLayoutError("Interleave cannot nest")

    def __str__(self) -> str:
        return f"Interleave({self.inner},{self.n})"

    @property
    def opaque(self) -> bool:
        return self.inner.opaque

    @property
    def interleaved(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class Swizzle(Expr):
    bits: int
    base: int
    shift: int

    def __post_init__(self):
        for k in ("bits", "base", "shift"):
            v = getattr(self, k)
            if not isinstance(v, int) or v < 0 or v > 30:
                raise GritLayoutError(f"Swizzle {k} must be an integer in 0..30, got {v!r}")
        if self.shift < self.bits:
            raise GritLayoutError(
                f"Swizzle({self.bits},{self.base},{self.shift}): shift < bits makes the "
                "source and target bit fields overlap; the map would not be a permutation")

    def __str__(self) -> str:
        return f"Swizzle({self.bits},{self.base},{self.shift})"


@dataclass(frozen=True, slots=True)
class Perm(Expr):
    pi: tuple[int, ...]

    def __post_init__(self):
        p = tuple(self.pi)
        if not p or sorted(p) != list(range(len(p))) or any(
                isinstance(v, bool) or not isinstance(v, int) for v in p):
            raise GritLayoutError(f"Perm needs a permutation of 0..n-1, got {list(p)[:12]}...")
        object.__setattr__(self, "pi", p)

    def __str__(self) -> str:
        return "Perm([" + ",".join(map(str, self.pi)) + "])"


#: the largest n of the ``πn`` shorthand the parser expands (ggml's runs are
#: 16, 32 and 64 elements); a longer permutation is written out
MAX_HALVES = 4096


def halves(n: int) -> tuple[int, ...]:
    """``πn``, ggml's nibble order over a run of n elements as a permutation
    (physical -> logical): byte l holds element l in its low nibble and
    element l + n/2 in its high nibble, so in GRIT's LSB-first stream the
    nibble at physical position 2l + h holds logical element h·n/2 + l.
    ``Perm(πn)`` (or ``Perm(pin)``) in an expression's text is this Perm."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2 or n % 2 or n > MAX_HALVES:
        raise GritLayoutError(f"πn needs an even n in [2, {MAX_HALVES}], got {n!r}")
    h = n // 2
    return tuple(hh * h + ll for ll in range(h) for hh in (0, 1))


@dataclass(frozen=True, slots=True)
class Pad(Expr):
    align: int

    def __post_init__(self):
        if not isinstance(self.align, int) or self.align < 1:
            raise GritLayoutError(f"Pad alignment must be >= 1, got {self.align!r}")

    def __str__(self) -> str:
        return f"Pad({self.align})"


@dataclass(frozen=True, slots=True)
class Compose(Expr):
    """``first``, then ``second`` (second permutes first's output)."""

    first: Expr
    second: Expr

    def __post_init__(self):
        _need_expr(self.first, "Compose")
        _need_expr(self.second, "Compose")
        if self.first.interleaved or self.second.interleaved:
            raise GritLayoutError("Interleave acts on whole planes; put it outermost "
                                  "(Interleave(Compose(...), n)), not inside Compose")
        # canonical form: right-nested — Compose(Compose(a,b),c) is Compose(a,Compose(b,c))
        if isinstance(self.first, Compose):
            a, b = self.first.first, self.first.second
            object.__setattr__(self, "first", a)
            object.__setattr__(self, "second", Compose(b, self.second))

    def __str__(self) -> str:
        return f"Compose({self.first},{self.second})"

    @property
    def opaque(self) -> bool:
        return self.first.opaque or self.second.opaque


_VENDOR = re.compile(r"[A-Za-z0-9_.\-]+\Z")


@dataclass(frozen=True, slots=True)
class Opaque(Expr):
    vendor: str
    blob: bytes = b""

    def __post_init__(self):
        if not isinstance(self.vendor, str) or not _VENDOR.match(self.vendor):
            raise GritLayoutError(f"Opaque vendor must match [A-Za-z0-9_.-]+, got "
                                  f"{self.vendor!r}")
        object.__setattr__(self, "blob", bytes(self.blob))

    def __str__(self) -> str:
        return f"Opaque({self.vendor},{self.blob.hex()})"

    @property
    def opaque(self) -> bool:
        return True


def _need_expr(x, where: str) -> None:
    if not isinstance(x, Expr):
        raise GritLayoutError(f"{where}: expected a layout expression, got {type(x).__name__}")


# ---------------------------------------------------------------------------
# parsing (whitespace ignored, constructor names case-insensitive)

_NAMES = {n.lower(): n for n in ("RowMajor", "ColMajor", "Tile", "Interleave", "Swizzle",
                                  "Perm", "Pad", "Compose", "Opaque")}


#: nesting and integer limits of the layout grammar as parsed: deeper or
#: longer inputs are refused with GritLayoutError before Python's recursion
#: or int() limits are reached
MAX_DEPTH = 64
_MAX_DIGITS = 19


class _Parser:
    def __init__(self, text: str):
        self.s = "".join(text.split())
        self.i = 0
        self.depth = 0

    def fail(self, why: str):
        raise GritLayoutError(f"layout expression {self.s[:80]!r}: {why} at offset {self.i}")

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def eat(self, ch: str) -> None:
        if self.peek() != ch:
            self.fail(f"expected {ch!r}")
        self.i += 1

    def ident(self) -> str:
        m = re.compile(r"[A-Za-z][A-Za-z0-9]*").match(self.s, self.i)
        if not m:
            self.fail("expected a constructor name")
        self.i = m.end()
        return m.group(0)

    def int_(self) -> int:
        m = re.compile(r"[0-9]+").match(self.s, self.i)
        if not m:
            self.fail("expected a non-negative integer")
        if len(m.group(0)) > _MAX_DIGITS:
            self.fail(f"an integer of {len(m.group(0))} digits is out of range")
        self.i = m.end()
        return int(m.group(0))

    def ints(self) -> list[int]:
        self.eat("[")
        out = [self.int_()]
        while self.peek() == ",":
            self.i += 1
            out.append(self.int_())
        self.eat("]")
        return out

    def halves(self) -> tuple[int, ...]:
        """``πn`` / ``pin``: the shorthand of docs/placements.md for :func:`halves`."""
        m = re.compile(r"(?:π|pi)(?=[0-9])", re.IGNORECASE).match(self.s, self.i)
        if not m:
            self.fail("expected '[' (a permutation p0,...) or πn")
        self.i = m.end()
        at, n = self.i, self.int_()
        try:
            return halves(n)
        except GritLayoutError as e:
            self.i = at
            self.fail(str(e))
            raise

    def expr(self) -> Expr:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail(f"nested deeper than {MAX_DEPTH} constructors")
        try:
            return self._expr()
        finally:
            self.depth -= 1

    def compose(self, a: Expr, b: Expr) -> Expr:
        """Compose(a, b) built as its canonical right-nested chain, refused
        when that chain nests deeper than MAX_DEPTH: the canonical text must
        parse again, and re-nesting a balanced tree of n operands makes it n
        deep (a tree 10 levels deep would be 1,024 deep, past Python's
        recursion limit)."""
        chain = _chain(a) + _chain(b)
        if _chain_depth(chain) > MAX_DEPTH:
            self.fail(f"its canonical form (Compose nested to the right) is deeper than "
                      f"{MAX_DEPTH} constructors")
        out = chain[-1]
        for x in reversed(chain[:-1]):
            out = Compose(x, out)     # x is no Compose: no re-nesting, no recursion
        return out

    def _expr(self) -> Expr:
        name = _NAMES.get(self.ident().lower())
        if name is None:
            self.fail("unknown constructor")
        if name in ("RowMajor", "ColMajor"):
            return RowMajor() if name == "RowMajor" else ColMajor()
        self.eat("(")
        if name == "Tile":
            inner = self.expr()
            self.eat(",")
            dims = self.ints()
            out: Expr = Tile(inner, tuple(dims))  # type: ignore[arg-type]
        elif name == "Interleave":
            inner = self.expr()
            self.eat(",")
            out = Interleave(inner, self.int_())
        elif name == "Swizzle":
            b = self.int_()
            self.eat(",")
            m = self.int_()
            self.eat(",")
            out = Swizzle(b, m, self.int_())
        elif name == "Perm":
            out = Perm(self.halves() if self.peek() != "[" else tuple(self.ints()))
        elif name == "Pad":
            out = Pad(self.int_())
        elif name == "Compose":
            a = self.expr()
            self.eat(",")
            out = self.compose(a, self.expr())
        else:  # Opaque
            m = _VENDOR_PREFIX.match(self.s, self.i)
            if not m:
                self.fail("expected a vendor token")
            self.i = m.end()
            self.eat(",")
            h = re.compile(r"[0-9A-Fa-f]*").match(self.s, self.i)
            self.i = h.end()  # type: ignore[union-attr]
            if len(h.group(0)) % 2:  # type: ignore[union-attr]
                self.fail("blob hex has an odd number of digits")
            out = Opaque(m.group(0), bytes.fromhex(h.group(0)))  # type: ignore[union-attr]
        self.eat(")")
        return out


_VENDOR_PREFIX = re.compile(r"[A-Za-z0-9_.\-]+")


def _chain(e: Expr) -> list[Expr]:
    """The operands of a canonical (right-nested) Compose chain, in order."""
    out = []
    while isinstance(e, Compose):
        out.append(e.first)
        e = e.second
    out.append(e)
    return out


def _chain_depth(chain: list[Expr]) -> int:
    """Nesting depth of the canonical text of Compose over ``chain`` (one
    operand: the operand's own depth).  Operand i (from 1) sits under i
    Composes, the last one under as many as the one before it."""
    n = len(chain)
    return max(min(i, n - 1) + _depth(x) for i, x in enumerate(chain, 1))


def _depth(e: Expr) -> int:
    """Nesting depth of ``e``'s canonical text, counting constructors (the
    parser's measure); recursion stays within MAX_DEPTH of parsed input."""
    if isinstance(e, Compose):
        return _chain_depth(_chain(e))
    if isinstance(e, (Tile, Interleave)):
        return 1 + _depth(e.inner)
    return 1


def parse_layout(text: str) -> Expr:
    """Parse a layout expression; ``str(parse_layout(t))`` is its canonical text."""
    if not isinstance(text, str):
        raise GritUsageError(f"a layout expression is text, got {type(text).__name__}")
    p = _Parser(text)
    e = p.expr()
    if p.i != len(p.s):
        p.fail("trailing characters")
    return e


def as_expr(x: "Expr | str") -> Expr:
    return x if isinstance(x, Expr) else parse_layout(x)


# ---------------------------------------------------------------------------
# words and the in-process registry

def layout_word(e: "Expr | str") -> int:
    """§5.3: class 0x8 (0xF when the expression contains Opaque) over the
    60 low bits of FNV-1a-64 of the canonical text."""
    e = as_expr(e)
    cls = CLASS_OPAQUE if e.opaque else CLASS_HASHED
    return (cls << 60) | (fnv1a64(str(e).encode("ascii")) & PAYLOAD_MASK)


_REGISTRY: dict[int, Expr] = {}
#: the enclosing layout_scope layers, innermost last (a context variable: per thread)
_SCOPES: contextvars.ContextVar[tuple[dict[int, Expr], ...]] = contextvars.ContextVar(
    "grit_layout_scopes", default=())


@contextlib.contextmanager
def layout_scope() -> Iterator[None]:
    """As grit.grade.grade_scope, for layout expressions: those registered in
    the ``with`` block are resolved in it only (``grit scan`` reads each file
    in its own scope)."""
    token = _SCOPES.set(_SCOPES.get() + ({},))
    try:
        yield
    finally:
        _SCOPES.reset(token)


def register_layout(e: "Expr | str") -> int:
    """Teach this process (inside a :func:`layout_scope`: that scope) an
    expression; returns its word.  Idempotent.  A different expression with
    the same word is a collision and is refused."""
    e = as_expr(e)
    w = layout_word(e)
    have = resolve_layout(w)
    if have is not None and str(have) != str(e):
        raise GritLayoutError(
            f"placement word 0x{w:016x} collision: {have} vs {e} hash alike; equal words never "
            "mean equal layouts (§5.3) — the second expression is refused")
    if have is None:
        layers = _SCOPES.get()
        (layers[-1] if layers else _REGISTRY)[w] = e
    return w


def resolve_layout(word: int) -> Expr | None:
    """The expression registered under a class-0x8/0xF word (the enclosing
    scopes' first), or None."""
    for layer in reversed(_SCOPES.get()):
        e = layer.get(word)
        if e is not None:
            return e
    return _REGISTRY.get(word)


def same_layout(a: "int | Expr | str", b: "int | Expr | str") -> bool:
    """§5.3's collision rule.  Words of classes 0x0/0x1 compare as words.
    For hashed words the full canonical expressions are compared; either side
    unresolvable raises GritLayoutError (never a match on the strength of the
    word alone)."""
    ea, wa = _expr_and_word(a)
    eb, wb = _expr_and_word(b)
    hashed = lambda w: placement_class(w) in (CLASS_HASHED, CLASS_OPAQUE)  # noqa: E731
    if not hashed(wa) and not hashed(wb):
        return wa == wb
    if hashed(wa) != hashed(wb):
        return False
    if ea is None or eb is None:
        missing = placement_name(wa if ea is None else wb)
        raise GritLayoutError(
            f"cannot compare placements: {missing} resolves to no layout expression in this "
            "process; equal hashed words never suffice (§5.3).\n"
            "  Fix:  grit.register_layout('<the producer's expression>')")
    return str(ea) == str(eb)


def _expr_and_word(x) -> tuple[Expr | None, int]:
    if isinstance(x, (Expr, str)):
        e = as_expr(x)
        return e, layout_word(e)
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise GritUsageError(f"a placement is a 64-bit word or a layout expression, got "
                             f"{type(x).__name__}")
    w = int(x)
    if placement_class(w) in (CLASS_HASHED, CLASS_OPAQUE):
        return resolve_layout(w), w
    return None, w


# ---------------------------------------------------------------------------
# index maps on unit grids

#: a Perm of more entries than this is shortened in messages (brief)
BRIEF_PERM = 16


def brief(e: Expr) -> str:
    """The text of ``e`` for a message: the canonical text with every Perm
    of more than BRIEF_PERM entries cut to its first entries and its length
    (``Perm([0,1,2,3,128,…; 512 entries])``, not the 2,000 characters of
    SWIZZLE_128X4B's).  Not parseable; :func:`str` is the canonical text."""
    def cut(m: re.Match) -> str:
        items = m.group(1).split(",")
        if len(items) <= BRIEF_PERM:
            return m.group(0)
        return f"Perm([{','.join(items[:8])},…; {len(items)} entries])"
    return re.sub(r"Perm\(\[([0-9,]+)\]\)", cut, str(e))


def _grid_error(e: Expr, why: str, label: str | None = None) -> GritLayoutError:
    return GritLayoutError(f"placement {label or brief(e)} does not apply here: {why}")


def apply(e: Expr, x: np.ndarray, R: int | None, C: int | None,
          inverse: bool = False) -> np.ndarray:
    """Permute ``x`` (shape (B, R·C, *unit)) by ``e``'s index map over the
    (R, C) grid; ``R``/``C`` None means the units have no grid (only flat
    maps — Perm, Swizzle, RowMajor — apply).  Returns a new array (or ``x``
    itself for the identity)."""
    if e.opaque:
        raise GritLayoutError(f"{brief(e)} is opaque: storable, never relayoutable (L3)")
    B, N = x.shape[0], x.shape[1]
    unit = x.shape[2:]
    if isinstance(e, RowMajor):
        return x
    if isinstance(e, Pad):
        if C is None:
            raise _grid_error(e, "these units have no row length")
        if C % e.align:
            raise _grid_error(e, f"row length {C} is not a multiple of {e.align}; padding "
                                 "bytes would break §7.3's exact plane sizes")
        return x
    if isinstance(e, ColMajor):
        if R is None:
            raise _grid_error(e, "these units have no (rows, columns) grid")
        if not inverse:
            return _swap(x.reshape(B, R, C, *unit)).reshape(x.shape)
        return _swap(x.reshape(B, C, R, *unit)).reshape(x.shape)
    if isinstance(e, Tile):
        if R is None:
            raise _grid_error(e, "these units have no (rows, columns) grid")
        tr, tc = e.dims
        if R % tr or C % tc:
            raise _grid_error(e, f"grid {R}x{C} is not a multiple of the {tr}x{tc} tile")
        nr, nc = R // tr, C // tc
        ax = tuple(range(5, 5 + len(unit)))
        if not inverse:
            t = x.reshape(B, nr, tr, nc, tc, *unit).transpose(0, 1, 3, 2, 4, *ax)
            t = np.ascontiguousarray(t).reshape(B * nr * nc, tr * tc, *unit)
            t = apply(e.inner, t, tr, tc)
            return np.ascontiguousarray(t).reshape(x.shape)
        t = x.reshape(B * nr * nc, tr * tc, *unit)
        t = apply(e.inner, t, tr, tc, inverse=True)
        t = t.reshape(B, nr, nc, tr, tc, *unit).transpose(0, 1, 3, 2, 4, *ax)
        return np.ascontiguousarray(t).reshape(x.shape)
    if isinstance(e, Perm):
        n = len(e.pi)
        if N % n:
            raise _grid_error(e, f"{N} units are not a whole number of periods of {n}")
        pi = np.asarray(e.pi, dtype=np.intp)
        if inverse:
            pi = np.argsort(pi)
        return x.reshape(B, N // n, n, *unit)[:, :, pi].reshape(x.shape)
    if isinstance(e, Swizzle):
        span = 1 << (e.base + e.bits)
        if N % span:
            raise _grid_error(e, f"{N} units are not a multiple of 2^(base+bits) = {span}")
        j = np.arange(N, dtype=np.int64)
        idx = j ^ ((j >> e.shift) & (((1 << e.bits) - 1) << e.base))
        return x[:, idx]                         # an involution: its own inverse
    if isinstance(e, Compose):
        if not inverse:
            return apply(e.second, apply(e.first, x, R, C), R, C)
        return apply(e.first, apply(e.second, x, R, C, inverse=True), R, C, inverse=True)
    if isinstance(e, Interleave):
        raise _grid_error(e, "Interleave acts on whole planes (placement_data only), not on "
                             "the units of one plane")
    raise GritLayoutError(f"no index map for {e}")  # pragma: no cover


def _swap(x: np.ndarray) -> np.ndarray:
    """(B, R, C, *unit) -> contiguous (B, C, R, *unit).  numpy's strided copy
    of a transpose is cache-hostile for narrow units; copying bands of a few
    source rows at a time keeps both sides in cache (about 7x faster for
    bytes).  The band loop runs R / band times, never per element."""
    B, R, C = x.shape[:3]
    ub = x.itemsize * int(np.prod(x.shape[3:], dtype=np.int64))
    out = np.empty((B, C, R) + x.shape[3:], dtype=x.dtype)
    if C * ub <= 64 or R <= 16:
        out[...] = x.swapaxes(1, 2)
        return out
    band = max(1, 16 // max(1, ub))
    for r0 in range(0, R, band):
        out[:, :, r0:r0 + band] = x[:, r0:r0 + band].swapaxes(1, 2)
    return out


def validate(e: Expr, N: int, R: int | None, C: int | None,
             label: str | None = None) -> None:
    """Raise exactly what :func:`apply` would raise on N units of an (R, C)
    grid, without moving any data; ``label`` names the placement in the
    message (a registered name), else :func:`brief` of the part that fails."""
    if e.opaque:
        raise GritLayoutError(f"{label or brief(e)} is opaque: storable, never relayoutable (L3)")
    if isinstance(e, (RowMajor,)):
        return
    if isinstance(e, (Pad, ColMajor, Tile)) and (R is None or C is None):
        raise _grid_error(e, "these units have no (rows, columns) grid", label)
    if isinstance(e, Pad):
        if C % e.align:
            raise _grid_error(e, f"row length {C} is not a multiple of {e.align}; padding "
                                 "bytes would break §7.3's exact plane sizes", label)
    elif isinstance(e, Tile):
        tr, tc = e.dims
        if R % tr or C % tc:
            raise _grid_error(e, f"grid {R}x{C} is not a multiple of the {tr}x{tc} tile", label)
        validate(e.inner, tr * tc, tr, tc, label)
    elif isinstance(e, Perm):
        if N % len(e.pi):
            raise _grid_error(e, f"{N} units are not a whole number of periods of "
                                 f"{len(e.pi)}", label)
    elif isinstance(e, Swizzle):
        if N % (1 << (e.base + e.bits)):
            raise _grid_error(e, f"{N} units are not a multiple of 2^(base+bits) = "
                                 f"{1 << (e.base + e.bits)}", label)
    elif isinstance(e, Compose):
        validate(e.first, N, R, C, label)
        validate(e.second, N, R, C, label)
    elif isinstance(e, Interleave):
        raise _grid_error(e, "Interleave acts on whole planes (placement_data only), not on "
                             "the units of one plane", label)


def index_map(e: "Expr | str", R: int, C: int) -> np.ndarray:
    """The index map of ``e`` over an (R, C) grid: ``idx[j]`` is the logical
    (row-major) index of the unit stored at physical position ``j``."""
    e = as_expr(e)
    return apply(e, np.arange(R * C, dtype=np.int64).reshape(1, R * C), R, C)[0]


Placement = Union[int, Expr, str]
