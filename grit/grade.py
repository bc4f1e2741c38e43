"""§4: the Grade — grammar, canonical form, decode projection, refinement
order ⊑ and join ⊔, the grade ↔ frame map, and the grade registry.

The key table (names, order, domains, defaults) is the one
``docs/spec-decisions.md`` records; it matches the other public
implementation so that grade ids agree across implementations.
"""
from __future__ import annotations

import contextlib
import contextvars
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterator, Mapping

from . import descriptor as D
from .placement.words import REGISTERED as P
from .errors import GritGradeError, GritUsageError, pin
from .fingerprint import fnv1a64
from .formats import Format, format_by_name, format_token

__all__ = [
    "Grade", "Sparsity", "KEYS", "DEFAULTS", "REQUIRED", "STRUCTURAL",
    "DECODE_KEYS", "ENCODE_KEYS", "ACCUM_KEYS", "VALUE_ALIASES",
    "register_grade", "lookup_grade", "known_grades", "grade_from", "grade_scope",
    "GRADE_MXFP4", "GRADE_MXFP4_RNE", "GRADE_Q4KS", "GRADE_NVF4",
    "GRADE_NVF4_RTZ", "GRADE_I8S24", "REGISTERED_GRADES",
]

# ---------------------------------------------------------------------------
# §4.2 the 23 keys, in canonical order, with their domains and defaults

# key: (domain, default or None).  Domains: fmt, int, sp, and the enum names
# of VALUE_ALIASES.
_KEY_TABLE: tuple[tuple[str, str, str | None], ...] = (
    # representation (1-11)
    ("e", "fmt", None), ("k0", "int", None), ("s0", "fmt", None),
    ("k1", "int", None), ("s1", "fmt", None), ("zp", "fmt", None),
    ("zpc", "zpc", "asis"), ("zps", "zps", "shared"), ("sp", "sp", None),
    ("ct", "ct", "dense"), ("po", "po", "lsb"),
    # encode projection π_enc (12-15)
    ("er", "rnd", "rne"), ("es", "sat", "satfinite"),
    ("esr", "scalerule", None), ("esn", "subn", "preserve"),
    # decode projection π_dec (16-18)
    ("dr", "rnd", "rne"), ("ds", "sat", "satfinite"), ("dt", "fmt", "binary32"),
    # accumulation contract α (19-23)
    ("ao", "order", "unspec"), ("ap", "fmt", "binary32"), ("ab", "fmt", "binary32"),
    ("ai", "fmt", "binary32"), ("an", "subn", "any"),
)
KEYS: tuple[str, ...] = tuple(k for k, _, _ in _KEY_TABLE)
DOMAIN: Mapping[str, str] = MappingProxyType({k: d for k, d, _ in _KEY_TABLE})
DEFAULTS: Mapping[str, str] = MappingProxyType(
    {k: v for k, _, v in _KEY_TABLE if v is not None})
REQUIRED = ("e", "k0", "s0", "esr")
STRUCTURAL = ("k1", "s1", "zp", "sp")  # emitted iff the structure exists
DECODE_KEYS = ("e", "k0", "s0", "k1", "s1", "zp", "zpc", "zps", "sp", "ct", "po",
               "dr", "ds", "dt")
ENCODE_KEYS = ("er", "es", "esr", "esn")
ACCUM_KEYS = ("ao", "ap", "ab", "ai", "an")
pin(len(KEYS) == 23 and set(DECODE_KEYS) <= set(KEYS),
    "the 23 grade keys of §4.2, the decode projection among them (§4.5)")

# Accepted spellings of enumerated values (§4.4 rule 4); the right-hand sides
# are the canonical tokens, i.e. each domain's value set.
VALUE_ALIASES: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "rnd": {
        "rne": "rne", "rn": "rne", "nearesttiestoeven": "rne", "nearest_even": "rne",
        "roundtiestoeven": "rne", "even": "rne",
        "rna": "rna", "nearesttiestoaway": "rna", "away": "rna",
        "rtz": "rtz", "towardzero": "rtz", "trunc": "rtz", "truncate": "rtz",
        "rtp": "rtp", "towardpositive": "rtp", "ceil": "rtp", "up": "rtp",
        "rtn": "rtn", "towardnegative": "rtn", "floor": "rtn", "down": "rtn",
    },
    "sat": {
        "satfinite": "satfinite", "sat_finite": "satfinite", "satf": "satfinite",
        "finite": "satfinite", "clamp": "satfinite",
        "satmax": "satmax", "sat_max": "satmax",
        "ovfinf": "ovfinf", "ovf_inf": "ovfinf", "inf": "ovfinf", "overflowtoinf": "ovfinf",
    },
    "scalerule": {
        "exp2floormaxabs": "exp2floormaxabs", "exp2floor": "exp2floormaxabs",
        "floor": "exp2floormaxabs", "rtz_shared_exp": "exp2floormaxabs",
        "ocpmx": "exp2floormaxabs",
        "exp2ceilmaxabs": "exp2ceilmaxabs", "exp2ceil": "exp2ceilmaxabs",
        "rceil": "exp2ceilmaxabs",
        "exp2rnemaxabs": "exp2rnemaxabs", "exp2rne": "exp2rnemaxabs",
        "rne_shared_exp": "exp2rnemaxabs",
        "ratiomaxabs": "ratiomaxabs", "ratio": "ratiomaxabs",
        "amax_over_emax": "ratiomaxabs",
        "affineminmax": "affineminmax", "affine": "affineminmax", "minmax": "affineminmax",
    },
    "subn": {
        "preserve": "preserve", "preserved": "preserve", "subnormalpreserved": "preserve",
        "denorm": "preserve",
        "ftz": "ftz", "flushtozero": "ftz", "subnormalftz": "ftz",
        "any": "any", "subnormalany": "any",
    },
    "order": {
        "seq": "seq", "sequential": "seq", "inorder": "seq",
        "tree": "tree", "treeany": "tree", "any_tree": "tree",
        "unspec": "unspec", "unspecified": "unspec", "any": "unspec",
    },
    "zpc": {
        "asis": "asis", "asstored": "asis", "stored": "asis",
        "minus1": "minus1", "storedminusone": "minus1", "stored_minus_one": "minus1",
        "gptq": "minus1",
    },
    "zps": {
        "shared": "shared", "sharedscale": "shared", "symmetric": "shared",
        "l1": "l1", "ownscale": "l1", "level1": "l1", "l1scaled": "l1",
    },
    "ct": {"dense": "dense", "packed": "dense", "pad8": "pad8", "padto8": "pad8",
           "padded": "pad8"},
    "po": {"lsb": "lsb", "lsbfirst": "lsb", "littlebit": "lsb", "msb": "msb",
           "msbfirst": "msb"},
    "metaorder": {"asclsb": "asclsb", "ascendinglsb": "asclsb", "ordered": "asclsb",
                  "sorted": "asclsb", "unord": "unord", "unordered": "unord",
                  "none": "unord"},
})

_INT_RE = re.compile(r"[0-9]+\Z")
_PAIRWISE_RE = re.compile(r"pairwise([0-9]+)\Z")
_META_BITS = {"u2": 2, "u4": 4}


@dataclass(frozen=True, slots=True)
class Sparsity:
    """The ``sp`` value: n survivors of every m, metadata format and order."""

    n: int
    m: int
    meta: str   # "u2" | "u4"
    order: str  # "asclsb" | "unord"

    @property
    def meta_bits(self) -> int:
        return _META_BITS[self.meta]

    def __str__(self) -> str:
        return f"{self.n}:{self.m}:{self.meta}:{self.order}"


# ---------------------------------------------------------------------------
# value normalisation

_MAX_DIGITS = 20   # every integer a grade carries fits a uint64 (k0 and k1 a uint16)


def _small_int(text: str, what: str) -> int:
    """A decimal integer of at most 20 digits (``text`` matched _INT_RE);
    longer ones are out of every field's range, and are refused before
    int() would parse them (CPython refuses over 4,300 digits itself)."""
    if len(text) > _MAX_DIGITS:
        raise GritGradeError(f"{what}: an integer of {len(text)} digits is out of range")
    return int(text)


def _norm_int(key: str, raw: str) -> str:
    if not _INT_RE.match(raw):
        raise GritGradeError(f"grade field {key}={raw!r:.60}: expected a decimal integer")
    v = _small_int(raw, f"grade field {key}")
    if key == "k0" and not 1 <= v <= 0xFFFF:
        raise GritGradeError(f"k0={v}: must be 1..65535 (a uint16 in the descriptor)")
    if key == "k1" and v > 0xFFFF:
        raise GritGradeError(f"k1={v}: must be 0..65535 (a uint16 in the descriptor)")
    return str(v)


def _norm_enum(key: str, domain: str, raw: str) -> str:
    if domain == "order":
        m = _PAIRWISE_RE.match(raw)
        if m:
            k = _small_int(m.group(1), f"grade field {key}")
            if k < 2:
                raise GritGradeError(f"{key}={raw}: pairwise<k> needs k >= 2")
            return f"pairwise{k}"
    table = VALUE_ALIASES[domain]
    if raw not in table:
        allowed = sorted(set(table.values()))
        if domain == "order":
            allowed.insert(1, "pairwise<k>")
        raise GritGradeError(f"grade field {key}={raw!r}: expected one of {', '.join(allowed)}")
    return table[raw]


def _norm_sp(raw: str) -> str:
    parts = raw.split(":")
    if len(parts) != 4:
        raise GritGradeError(f"sp={raw!r}: expected N:M:<u2|u4>:<asclsb|unord>, e.g. 2:4:u2:asclsb")
    n_s, m_s, meta, order = parts
    if not (_INT_RE.match(n_s) and _INT_RE.match(m_s)):
        raise GritGradeError(f"sp={raw!r}: N and M must be decimal integers")
    n, m = _small_int(n_s, "sp N"), _small_int(m_s, "sp M")
    if not 1 <= n < m:
        raise GritGradeError(
            f"sp={raw!r}: N survivors of every M needs 1 <= N < M (§3.8: N is the "
            "number of survivors, not of zeros)")
    try:
        meta_tok = format_token(format_by_name(meta))
    except GritGradeError:
        meta_tok = meta
    if meta_tok not in _META_BITS:
        raise GritGradeError(f"sp={raw!r}: metadata format must be u2 or u4")
    if m > 1 << _META_BITS[meta_tok]:
        raise GritGradeError(
            f"sp={raw!r}: a {meta_tok} index cannot address {m} positions")
    return f"{n}:{m}:{meta_tok}:{_norm_enum('sp', 'metaorder', order)}"


def _non_ascii(s: str) -> str:
    ch = next(c for c in s if not c.isascii())
    return (f"grade text is ASCII: {ch!r} (U+{ord(ch):04X}) at offset {s.index(ch)} is not "
            "(a look-alike such as the Kelvin sign would otherwise lowercase into a key)")


def _norm_value(key: str, raw: str) -> str:
    if raw == "":
        raise GritGradeError(f"grade field {key}= has an empty value")
    if not raw.isascii():
        raise GritGradeError(f"grade field {key}: {_non_ascii(raw)}")
    d = DOMAIN[key]
    if d == "fmt":
        try:
            return format_token(format_by_name(raw))
        except GritGradeError as e:
            raise GritGradeError(f"grade field {key}: {e}") from None
    if d == "int":
        return _norm_int(key, raw)
    if d == "sp":
        return _norm_sp(raw)
    return _norm_enum(key, d, raw)


def parse_fields(body: str, keys=None, what: str = "grade") -> dict[str, str]:
    """``k=v,k=v`` (already stripped and lowercased) -> {key: canonical token}.
    Rejects malformed items, unknown keys (or keys outside ``keys``) and
    duplicates (§4.4 rule 6)."""
    seen: dict[str, str] = {}
    for item in (body.split(",") if body else []):
        if "=" not in item:
            raise GritGradeError(f"{what} field {item!r} is not key=value")
        key, raw = item.split("=", 1)
        if key not in DOMAIN:
            raise GritGradeError(
                f"unknown grade key {key!r} (§4.4: an unknown key would silently drop "
                "a contract; layout such as 'swizzled' is never in the grade)")
        if keys is not None and key not in keys:
            raise GritGradeError(
                f"{key!r} is not an {what} key ({', '.join(keys)}): fields alone "
                f"name an {what} contract; a representation needs a full grade")
        if key in seen:
            raise GritGradeError(f"duplicate {what} key {key!r}")
        seen[key] = _norm_value(key, raw)
    return seen


# ---------------------------------------------------------------------------
# the Grade value

class Grade:
    """A parsed, canonical grade.  Immutable; equal iff canonical strings are."""

    __slots__ = ("_v", "canonical", "id", "_hash", "_frame")
    _v: Mapping[str, str]
    canonical: str                  # §4.4 canonical form
    id: int                         # §6.2 grade_id
    _hash: int
    _frame: "Mapping[str, int] | None"

    def __init__(self, values: Mapping[str, str]):
        # values: key -> canonical token for every present key (structural keys
        # only when present; defaults filled in).  Use Grade.parse / from_fields.
        v = {k: values[k] for k in KEYS if k in values}
        _validate(v)
        object.__setattr__(self, "_v", MappingProxyType(v))
        canon = "grit1(" + ",".join(f"{k}={v[k]}" for k in KEYS if _emitted(k, v)) + ")"
        object.__setattr__(self, "canonical", canon)
        object.__setattr__(self, "id", fnv1a64(canon.encode("utf-8")))
        object.__setattr__(self, "_hash", hash(canon))
        object.__setattr__(self, "_frame", None)

    def __setattr__(self, *_):
        raise AttributeError("Grade is immutable")

    # -- construction
    @classmethod
    def parse(cls, text: str) -> "Grade":
        """§4.4: strip whitespace, lowercase, any order, aliases, drop defaults,
        reject unknown/duplicate/missing keys and dangling structure."""
        if isinstance(text, Grade):
            return text
        if not isinstance(text, str):
            raise GritUsageError(f"a grade string is a str, got {type(text).__name__}")
        s = "".join(text.split())
        if not s.isascii():
            raise GritGradeError(_non_ascii(s))
        s = s.lower()
        if not (s.startswith("grit1(") and s.endswith(")")):
            raise GritGradeError(
                f"not a grade string: {text[:60]!r} (expected grit1(key=value,...))")
        return cls(parse_fields(s[len("grit1("):-1]))

    @classmethod
    def from_fields(cls, **fields) -> "Grade":
        """Build from keyword fields: ``Grade.from_fields(e='e2m1', k0=32, ...)``."""
        vals = {}
        for k, raw in fields.items():
            if k not in DOMAIN:
                raise GritGradeError(f"unknown grade key {k!r}")
            if raw is None:
                continue
            if isinstance(raw, Format):
                raw = raw.name
            vals[k] = _norm_value(k, str(raw).strip().lower())
        return cls(vals)

    # -- views
    def __getitem__(self, key: str) -> str | None:
        """The canonical token of ``key`` (defaults included), None if absent."""
        if key not in DOMAIN:
            raise KeyError(key)
        return self._v.get(key, DEFAULTS.get(key) if _has_slot(key, self._v) else None)

    def _required(self, key: str) -> str:
        """The token of a key every grade carries (e, k0, s0, esr, ...)."""
        v = self[key]
        if v is None:  # pragma: no cover - _validate refuses a grade without it
            raise GritGradeError(f"grade {self.canonical} has no {key}")
        return v

    def fields(self) -> dict[str, str]:
        """Every field with a value, defaults explicit, in canonical order."""
        return {k: v for k in KEYS if (v := self[k]) is not None}

    def __eq__(self, other) -> bool:
        return isinstance(other, Grade) and other.canonical == self.canonical

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return self.canonical

    def __repr__(self) -> str:
        name = _NAME_OF.get(self.canonical)
        return f"<Grade {name or self.canonical} 0x{self.id:016X}>"

    @property
    def name(self) -> str | None:
        """The registered constant name (e.g. ``GRADE_MXFP4``), if any."""
        return _NAME_OF.get(self.canonical)

    @property
    def decode_projection(self) -> str:
        """§4.5: ``gritdec1(...)`` with every decode field explicit."""
        return "gritdec1(" + ",".join(
            f"{k}={self[k]}" for k in DECODE_KEYS if self[k] is not None) + ")"

    def decode_equivalent(self, other: "Grade") -> bool:
        return self.decode_projection == grade_from(other).decode_projection

    # -- typed accessors
    @property
    def elem(self) -> Format:
        return Format(format_by_name(self._required("e")))

    @property
    def k0(self) -> int:
        return int(self._required("k0"))

    @property
    def k1(self) -> int | None:
        return int(self["k1"]) if self["k1"] is not None else None

    @property
    def s0(self) -> Format:
        return Format(format_by_name(self._required("s0")))

    @property
    def s1(self) -> Format | None:
        return Format(format_by_name(self["s1"])) if self["s1"] else None

    @property
    def zp(self) -> Format | None:
        return Format(format_by_name(self["zp"])) if self["zp"] else None

    @property
    def sp(self) -> Sparsity | None:
        t = self["sp"]
        if t is None:
            return None
        n, m, meta, order = t.split(":")
        return Sparsity(int(n), int(m), meta, order)

    @property
    def n_levels(self) -> int:
        return 2 if self["s1"] is not None else 1

    # -- §4 ↔ §3: the frame fields this grade fixes
    def frame_fields(self) -> dict[str, int]:
        """The descriptor fields grit_check step 2 compares with this grade."""
        return dict(self._frame_map())

    def _frame_map(self) -> Mapping[str, int]:
        frame = self._frame
        if frame is None:
            frame = MappingProxyType(self._frame_fields())
            object.__setattr__(self, "_frame", frame)
        return frame

    def _frame_fields(self) -> dict[str, int]:
        flags = 0
        if self["zp"] is not None:
            flags |= D.F_HAS_ZP
            if self["zpc"] == "minus1":
                flags |= D.F_ZP_MINUS1
            if self["zps"] == "l1":
                flags |= D.F_ZP_L1SCALED
        sp = self.sp
        if sp is not None:
            flags |= D.F_SPARSE
        if self["po"] == "msb":
            flags |= D.F_MSB_FIRST
        return {
            "n_levels": self.n_levels,
            "flags": flags,
            "elem": self.elem.word,
            "scale0": self.s0.word,
            "scale1": self.s1.word if self.s1 else 0,
            "zp_fmt": self.zp.word if self.zp else 0,
            "k0": self.k0,
            "k1": self.k1 or 0,
            "sp_n": sp.n if sp else 0,
            "sp_m": sp.m if sp else 0,
            "sp_meta_fmt": ({"u2": D.SPMETA_U2, "u4": D.SPMETA_U4}[sp.meta]
                            if sp else D.SPMETA_NONE),
            "sp_order": (D.SPORDER_ASC_LSB if sp and sp.order == "asclsb"
                         else D.SPORDER_UNORDERED),
            "container": D.CT_PAD8 if self["ct"] == "pad8" else D.CT_DENSE,
        }

    def frame_mismatches(self, desc: D.Descriptor) -> list[tuple[str, int, int]]:
        """(field, grade's value, descriptor's value) for each disagreement.
        F_INTERLEAVED is a placement flag and is not the grade's business."""
        out = []
        for name, want in self._frame_map().items():
            got = getattr(desc, name)
            if name == "flags":
                got &= ~D.F_INTERLEAVED
            if got != want:
                out.append((name, want, got))
        return out

    def descriptor(self, *, group_axis: int = 0, placement_data: int | None = None,
                   placement_scale: int | None = None, placement_meta: int | None = None,
                   note: int = 0) -> D.Descriptor:
        """The descriptor of this grade with canonical placements: ROW_MAJOR
        data and scales; aux ROW_MAJOR for zero points, LINEAR_META for
        sparsity metadata, UNSPECIFIED when there is no aux plane (App. A.4)."""
        row = P["ROW_MAJOR"][0]
        if placement_meta is None:
            placement_meta = (P["LINEAR_META"][0] if self["sp"] else
                              row if self["zp"] else 0)
        return D.Descriptor(
            group_axis=group_axis,
            placement_data=row if placement_data is None else placement_data,
            placement_scale=row if placement_scale is None else placement_scale,
            placement_meta=placement_meta, grade_id=self.id, note=note,
            **self.frame_fields())

    # -- §4.3 refinement and join
    def refines(self, other: "Grade | str") -> bool:
        """self ⊑ other: every behaviour self permits, other permits."""
        o = grade_from(other)
        return all(_axis_leq(k, self[k], o[k]) for k in KEYS)

    __le__ = refines

    def join(self, other: "Grade | str") -> "Grade":
        """self ⊔ other: the least grade both refine.  Raises GritGradeError
        when they differ on an axis that has no upper bound (representation,
        roundings, formats): such results have no common contract."""
        o = grade_from(other)
        vals = {}
        for k in KEYS:
            a, b = self[k], o[k]
            j = _axis_join(k, a, b)
            if j is _NO_JOIN:
                raise GritGradeError(
                    f"no common grade: {k}={a} vs {k}={b} have no join "
                    f"({self.canonical} ⊔ {o.canonical})")
            if j is not None:
                vals[k] = j
        return Grade(vals)

    __or__ = join

    def relax(self, **changes) -> "Grade":
        """A weaker grade with some fields replaced; each change must be a
        weakening (self ⊑ result), e.g. ``g.relax(ao='unspec')``."""
        vals = dict(self._v)
        for k, raw in changes.items():
            if k not in DOMAIN:
                raise GritGradeError(f"unknown grade key {k!r}")
            vals[k] = _norm_value(k, str(raw).strip().lower())
        g = Grade(vals)
        if not self.refines(g):
            bad = [k for k in changes if not _axis_leq(k, self[k], g[k])]
            raise GritGradeError(
                f"relax({', '.join(f'{k}={changes[k]}' for k in bad)}) would strengthen "
                f"the contract, not weaken it; use Grade.parse for a different grade")
        return g

    def replace(self, **changes) -> "Grade":
        """A grade with fields replaced or removed (value None) — any change."""
        vals = dict(self._v)
        for k, raw in changes.items():
            if k not in DOMAIN:
                raise GritGradeError(f"unknown grade key {k!r}")
            if raw is None:
                vals.pop(k, None)
            else:
                vals[k] = _norm_value(k, str(raw).strip().lower())
        return Grade(vals)


def _has_slot(key: str, v: Mapping[str, str]) -> bool:
    """Whether key exists in a grade with these values (defaults included)."""
    if key in ("zpc", "zps"):
        return "zp" in v
    if key in STRUCTURAL or key in REQUIRED:
        return key in v
    return True


def _emitted(key: str, v: Mapping[str, str]) -> bool:
    if key not in v:
        return False
    if key in REQUIRED or key in STRUCTURAL:
        return True
    return v[key] != DEFAULTS[key]


def _validate(v: dict[str, str]) -> None:
    missing = [k for k in REQUIRED if k not in v]
    if missing:
        raise GritGradeError(f"grade is missing required key(s): {', '.join(missing)}")
    if ("k1" in v) != ("s1" in v):
        have, lack = ("k1", "s1") if "k1" in v else ("s1", "k1")
        raise GritGradeError(f"{have} without {lack}: a level-1 scale needs both")
    if "zp" not in v:
        for k in ("zpc", "zps"):
            if k in v:
                raise GritGradeError(f"{k} without zp: a zero-point convention needs a zero point")
    if v.get("zps") == "l1" and "s1" not in v:
        raise GritGradeError("zps=l1 without a level-1 scale (s1/k1)")
    if "sp" in v and "zp" in v:
        raise GritGradeError("sp and zp together: v1 has one aux plane (§3.3)")
    # drop defaults so that equal grades have equal value maps
    for k in list(v):
        if k in DEFAULTS and k not in REQUIRED and k not in STRUCTURAL and v[k] == DEFAULTS[k]:
            del v[k]


# ---------------------------------------------------------------------------
# §4.3 per-axis orders.  ao: seq ⊑ pairwise(k) ⊑ tree ⊑ unspec (distinct
# pairwise widths are incomparable, their join is tree).  esn, an:
# preserve, ftz ⊑ any.  Every other axis is flat: equal or incomparable.

_NO_JOIN = object()


def _ao_rank(t: str) -> int:
    return 0 if t == "seq" else 1 if t.startswith("pairwise") else 2 if t == "tree" else 3


def _axis_leq(key: str, a: str | None, b: str | None) -> bool:
    if a == b:
        return True
    if a is None or b is None:
        return False
    if key == "ao":
        ra, rb = _ao_rank(a), _ao_rank(b)
        return ra < rb and not (ra == rb == 1)
    if DOMAIN[key] == "subn":
        return b == "any"
    return False


def _axis_join(key: str, a, b):
    if a == b:
        return a
    if _axis_leq(key, a, b):
        return b
    if _axis_leq(key, b, a):
        return a
    if key == "ao":
        return "tree"  # two different pairwise widths
    if a is not None and b is not None and DOMAIN[key] == "subn":
        return "any"
    return _NO_JOIN


# ---------------------------------------------------------------------------
# the registry: "a grade the implementation knows" is any grade whose
# canonical string it has been given (§7.3 step 2)

_REGISTRY: dict[int, Grade] = {}
_NAME_OF: dict[str, str] = {}
REGISTERED_GRADES: dict[str, Grade] = {}

#: the enclosing grade_scope layers, innermost last (empty outside every
#: scope); a context variable, so that each thread (and asyncio task) has its own
_SCOPES: contextvars.ContextVar[tuple[dict[int, Grade], ...]] = contextvars.ContextVar(
    "grit_grade_scopes", default=())


@contextlib.contextmanager
def grade_scope() -> Iterator[None]:
    """A layer over the process registry for the ``with`` block: grades
    registered inside it are known inside it only (``lookup_grade`` consults
    the layers first, innermost first, then the process), and are forgotten
    when the block ends.  ``grit scan`` reads each file inside its own scope,
    so that the grades one file carries never decide another file's verdict.
    Scopes nest; an inner scope starts empty and sees the outer ones'."""
    token = _SCOPES.set(_SCOPES.get() + ({},))
    try:
        yield
    finally:
        _SCOPES.reset(token)


def register_grade(text: "str | Grade", name: str | None = None) -> Grade:
    """Teach this process a grade (inside a :func:`grade_scope`: that scope
    only).  Idempotent; refuses a 64-bit id collision between two different
    canonical strings."""
    g = Grade.parse(text) if not isinstance(text, Grade) else text
    have = lookup_grade(g.id)
    if have is not None:
        if have != g:
            raise GritGradeError(
                f"grade_id 0x{g.id:016X} collision: {have.canonical} vs {g.canonical}")
        return have  # keep the first object: lookup_grade(id) is GRADE_X stays true
    layers = _SCOPES.get()
    if layers:
        layers[-1][g.id] = g
        return g
    _REGISTRY[g.id] = g
    if name:
        _NAME_OF.setdefault(g.canonical, name)
    return g


def lookup_grade(grade_id: int) -> Grade | None:
    """The registered grade of ``grade_id``: the enclosing scopes' first
    (innermost first), then the process's; None when unknown."""
    for layer in reversed(_SCOPES.get()):
        g = layer.get(grade_id)
        if g is not None:
            return g
    return _REGISTRY.get(grade_id)


def known_grades() -> list[Grade]:
    """Every grade known here: the process's, then the enclosing scopes'."""
    out = list(_REGISTRY.values())
    for layer in _SCOPES.get():
        out += [g for k, g in layer.items() if k not in _REGISTRY]
    return out


def grade_from(x: "Grade | str") -> Grade:
    """A Grade from a Grade, a grade string, or a registered constant name
    (``GRADE_MXFP4`` or ``mxfp4``)."""
    if isinstance(x, Grade):
        return x
    if isinstance(x, str):
        key = x.strip().upper()
        if not key.startswith("GRADE_"):
            key = "GRADE_" + key
        if key in REGISTERED_GRADES:
            return REGISTERED_GRADES[key]
        return Grade.parse(x)
    raise GritUsageError(f"expected a Grade or grade string, got {type(x).__name__}")


def _register_v1(name: str, text: str, pinned_id: int) -> Grade:
    g = register_grade(text, name)
    # Appendix A.1 pins these ids: a wrong key table must fail at import.
    pin(g.canonical == text and g.id == pinned_id,
        f"{name}: canonical {g.canonical!r}, id 0x{g.id:016X}, Appendix A.1 pins "
        f"0x{pinned_id:016X}")
    REGISTERED_GRADES[name] = g
    return g


GRADE_MXFP4 = _register_v1(
    "GRADE_MXFP4", "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)", 0x2370EE9EE454A183)
GRADE_MXFP4_RNE = _register_v1(
    "GRADE_MXFP4_RNE", "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2rnemaxabs)", 0x254285E10D6068C8)
GRADE_Q4KS = _register_v1(
    "GRADE_Q4KS", "grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)",
    0x1C600DE02594FB55)
GRADE_NVF4 = _register_v1(
    "GRADE_NVF4", "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)",
    0x00FF6F4C2870831E)
GRADE_NVF4_RTZ = _register_v1(
    "GRADE_NVF4_RTZ",
    "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,er=rtz,esr=ratiomaxabs)", 0x006C3850A3F42DEA)
GRADE_I8S24 = _register_v1(
    "GRADE_I8S24", "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:asclsb,esr=ratiomaxabs)",
    0xBBBB283A2539EBE8)

