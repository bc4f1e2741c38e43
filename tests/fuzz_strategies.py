"""Generators of hostile inputs for the fuzz contract (#12): 64-byte
descriptors, shapes and planes; grade strings; layout expressions.

Every generator is written once against a small *chooser* interface (pick one
of, an integer in a range, a coin, some bytes) and runs on two back ends:

* :class:`DrawChooser` — hypothesis' ``draw``, so the properties of
  tests/test_fuzz_contract.py shrink a failure to a minimal example;
* :class:`RandomChooser` — a seeded ``random.Random``, so
  scripts/fuzz_contract.py runs millions of cases without hypothesis'
  per-example overhead, from the same mutation ideas.

:func:`descriptor_outcome`, :func:`grade_outcome` and :func:`layout_outcome`
run one input through every public entry point and return what happened; an
exception outside the ``GritError`` family comes back as an *escape* (type,
message, and the input that raised it), never as a crash of the harness.
"""
from __future__ import annotations

import contextlib
import functools
import os
import random
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from hypothesis import strategies as st

import grit
from grit import descriptor as D
from grit import grade as G
from grit.placement import expr as X
from grit.placement.words import REGISTERED as PLACEMENTS

#: the package's folder, with a separator: a frame in a file under it was raised by grit
_PACKAGE = os.path.dirname(os.path.abspath(grit.__file__)) + os.sep

__all__ = [
    "RandomChooser", "DrawChooser", "SEED_GRADES", "SEED_LAYOUTS", "fuzz_registry",
    "gen_descriptor", "gen_shape", "gen_planes", "gen_case", "gen_grade_text",
    "gen_layout_text", "descriptor_outcome", "grade_outcome", "layout_outcome", "Outcome",
    "descriptor_cases", "grade_texts", "layout_texts", "DECODE_MAX_NUMEL",
    "BYTES_MAX", "FIELD_BITS",
]

# ---------------------------------------------------------------------------
# choosers


class RandomChooser:
    """Choices from a seeded ``random.Random``."""

    def __init__(self, rng: random.Random):
        self.r = rng

    def pick(self, seq: Sequence):
        return seq[self.r.randrange(len(seq))]

    def int(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def coin(self, p: float = 0.5) -> bool:
        return self.r.random() < p

    def blob(self, n: int) -> bytes:
        """``n`` bytes: random, or one repeated pattern (runs of zeros, 0xFF,
        NaN codes: the content the check and the codec treat specially)."""
        if n == 0:
            return b""
        if self.r.random() < 0.7:
            return self.r.randbytes(n)
        pat = self.r.choice((b"\x00", b"\xff", b"\x7f", b"\x80", b"\x55", b"\x0c",
                             self.r.randbytes(self.r.randint(1, 8))))
        return (pat * (n // len(pat) + 1))[:n]


class DrawChooser:
    """Choices from hypothesis' ``draw`` (shrinkable)."""

    def __init__(self, draw: Callable):
        self.draw = draw

    def pick(self, seq: Sequence):
        return self.draw(st.sampled_from(seq))

    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def coin(self, p: float = 0.5) -> bool:
        # shrinks toward False when p < 1/2, toward True otherwise
        n = self.draw(st.integers(0, 99))
        return n < round(p * 100) if p < 0.5 else n >= round((1 - p) * 100)

    def blob(self, n: int) -> bytes:
        """``n`` bytes from a short drawn pattern repeated (hypothesis'
        buffer cannot hold megabytes of drawn bytes)."""
        if n == 0:
            return b""
        pat = self.draw(st.binary(min_size=1, max_size=min(n, 64)))
        return (pat * (n // len(pat) + 1))[:n]


# ---------------------------------------------------------------------------
# seed grades: the six registered ones and grades that exercise every key

SEED_GRADES: tuple[str, ...] = (
    G.GRADE_MXFP4.canonical, G.GRADE_MXFP4_RNE.canonical, G.GRADE_Q4KS.canonical,
    G.GRADE_NVF4.canonical, G.GRADE_NVF4_RTZ.canonical, G.GRADE_I8S24.canonical,
    "grit1(e=u4,k0=8,s0=binary16,zp=u4,zpc=minus1,esr=affineminmax)",
    "grit1(e=u4,k0=4,s0=e8m0,zp=u8,esr=affineminmax)",
    "grit1(e=s4,k0=8,s0=e4m3,k1=2,s1=binary16,ct=pad8,esr=ratiomaxabs)",
    "grit1(e=e4m3,k0=2,s0=e8m0,po=msb,er=rna,es=ovfinf,esr=exp2ceilmaxabs,esn=ftz)",
    "grit1(e=e5m2,k0=1,s0=binary32,dr=rtz,ds=satmax,dt=binary16,esr=ratiomaxabs)",
    "grit1(e=s8,k0=4,s0=binary16,sp=2:4:u2:unord,esr=ratiomaxabs)",
    "grit1(e=e2m1,k0=8,s0=e4m3,sp=1:2:u2:asclsb,esr=ratiomaxabs,ao=seq)",
    "grit1(e=u2,k0=16,s0=u6,k1=4,s1=binary16,zp=u6,zps=l1,esr=affineminmax)",
    "grit1(e=e2m3,k0=32,s0=e8m0,ct=pad8,esr=exp2floormaxabs,ao=pairwise8,ap=binary16)",
    "grit1(e=e3m2,k0=4,s0=e8m0,k1=0,s1=binary32,esr=exp2rnemaxabs,ab=binary16,an=ftz)",
    "grit1(e=s2,k0=4,s0=binary16,sp=3:8:u4:asclsb,esr=ratiomaxabs,ai=binary16)",
    "grit1(e=u8,k0=2,s0=binary16,k1=3,s1=binary32,zp=u8,zps=l1,esr=affineminmax)",
    "grit1(e=x28a7,k0=4,s0=e8m0,esr=exp2floormaxabs)",
)

# layout expressions registered for the fuzz (so their class-0x8 words resolve)
SEED_LAYOUTS: tuple[str, ...] = (
    "RowMajor", "ColMajor", "Tile(RowMajor,[2,2])", "Tile(ColMajor,[1,4])",
    "Perm([1,0])", "Perm([3,1,2,0])", "Swizzle(1,0,1)", "Swizzle(2,1,3)", "Pad(2)",
    "Compose(ColMajor,Perm([1,0]))", "Compose(Tile(RowMajor,[2,2]),Swizzle(1,0,1))",
    "Interleave(RowMajor,1)", "Interleave(RowMajor,2)", "Interleave(ColMajor,1)",
    "Interleave(Perm([1,0]),4)", "Interleave(Tile(RowMajor,[1,2]),8)",
    "Opaque(acme,00ff)",
)


@contextlib.contextmanager
def fuzz_registry():
    """The seed grades and layouts registered for the duration, and the
    process registries as they were afterwards (other tests see no trace)."""
    grades, layouts = dict(G._REGISTRY), dict(X._REGISTRY)
    try:
        for g in SEED_GRADES:
            grit.register_grade(g)
        for e in SEED_LAYOUTS:
            grit.register_layout(e)
        yield
    finally:
        G._REGISTRY.clear()
        G._REGISTRY.update(grades)
        X._REGISTRY.clear()
        X._REGISTRY.update(layouts)


def _word(text: str) -> int:
    return X.layout_word(X.parse_layout(text))


_REG = [w for w, _ in PLACEMENTS.values()]
_HASHED_GOOD = [_word(e) for e in SEED_LAYOUTS]

#: placement words of every class: unspecified, registered, hashed
#: (registered and not), opaque, unregistered class 0x1, illegal classes
PLACEMENT_POOL: tuple[int, ...] = tuple(
    [0] + _REG + _HASHED_GOOD
    + [0x8000000000000000, 0x8123456789ABCDEF, 0x8FFFFFFFFFFFFFFF,
       0xF000000000000000, 0xFFFFFFFFFFFFFFFF, 0xF0000000DEADBEEF,
       0x1000000000000000, 0x1000000000000006, 0x1000000000000013, 0x1FFFFFFFFFFFFFFF]
    + [c << 60 | 1 for c in (2, 3, 4, 5, 6, 7, 9, 0xA, 0xB, 0xC, 0xD, 0xE)])

#: (width in bits, signed) of every descriptor field, §3.1
FIELD_BITS: dict[str, tuple[int, bool]] = {
    "magic": (32, False), "hdr_bytes": (8, False), "version": (8, False),
    "n_levels": (8, False), "flags": (8, False), "elem": (16, False),
    "scale0": (16, False), "scale1": (16, False), "zp_fmt": (16, False),
    "group_axis": (16, True), "k0": (16, False), "k1": (16, False), "sp_n": (8, False),
    "sp_m": (8, False), "sp_meta_fmt": (8, False), "sp_order": (8, False),
    "container": (8, False), "frame_rsvd": (8, False), "note": (32, False),
    "placement_data": (64, False), "placement_scale": (64, False),
    "placement_meta": (64, False), "grade_id": (64, False),
}

_FORMAT_WORDS = (0x0000, 0x2043, 0x2887, 0x4807, 0x356F, 0x371F, 0x43E1, 0x43E3, 0x43E5,
                 0x43E7, 0x03E3, 0x03E7, 0x28A7, 0x3F07, 0x8043, 0x1843, 0x0001, 0x0020, 0xFFFF)
_FLAG_BITS = (D.F_HAS_ZP, D.F_ZP_MINUS1, D.F_SPARSE, D.F_MSB_FIRST, D.F_INTERLEAVED,
              D.F_ZP_L1SCALED, 0x40, 0x80)


def _field_value(c, name: str, d: D.Descriptor) -> int:
    """A hostile value for one field: edges of its width, near the current
    value, a neighbour grade's value, or a value chosen for the field."""
    bits, signed = FIELD_BITS[name]
    lo, hi = (-(1 << bits - 1), (1 << bits - 1) - 1) if signed else (0, (1 << bits) - 1)
    cur = getattr(d, name)
    kind = c.int(0, 5)
    if kind == 0:
        v = c.pick((lo, hi, 0, 1, -1 if signed else hi - 1))
    elif kind == 1:
        v = cur + c.int(-2, 2)
    elif kind == 2:
        v = c.int(lo, hi)
    elif kind == 3 and name in ("elem", "scale0", "scale1", "zp_fmt"):
        v = c.pick(_FORMAT_WORDS)
    elif kind == 3 and name.startswith("placement_"):
        v = c.pick(PLACEMENT_POOL)
    elif kind == 3 and name == "flags":
        v = cur ^ c.pick(_FLAG_BITS)
    elif kind == 3 and name == "grade_id":
        v = grit.Grade.parse(c.pick(SEED_GRADES)).id
    else:
        v = getattr(grit.Grade.parse(c.pick(SEED_GRADES)).descriptor(), name)
    return min(max(v, lo), hi)


@functools.lru_cache(maxsize=1)
def _legal_words() -> tuple[int, ...]:
    """The 1,421 legal format words (docs/spec-decisions.md §2)."""
    from grit.formats import fmt_classify
    return tuple(w for w in range(1, 1 << 16) if fmt_classify(w) is None)


def gen_fresh_grade(c) -> "grit.Grade | None":
    """A grade built from random fields: any legal element and scale format
    (spelled as a name or x-word), group sizes, one or two levels, zero
    points or sparsity, container, bit order and decode projection.  None
    when the fields do not make a grade."""
    from grit.formats import format_token
    fmt = lambda: format_token(c.pick(_legal_words()))       # noqa: E731
    f = {"e": fmt(), "k0": c.pick((1, 2, 3, 4, 8, 16, 32, c.int(1, 300))), "s0": fmt(),
         "esr": c.pick(("exp2floormaxabs", "exp2ceilmaxabs", "exp2rnemaxabs", "ratiomaxabs",
                        "affineminmax"))}
    if c.coin(0.35):
        f["k1"], f["s1"] = c.pick((0, 1, 2, 4)), fmt()
    if c.coin(0.25):
        f["zp"], f["zpc"] = fmt(), c.pick(("asis", "minus1"))
        if "s1" in f:
            f["zps"] = c.pick(("shared", "l1"))
    elif c.coin(0.25):
        meta = c.pick(("u2", "u4"))
        m = c.int(2, 4 if meta == "u2" else 16)
        f["sp"] = f"{c.int(1, m - 1)}:{m}:{meta}:{c.pick(('asclsb', 'unord'))}"
    if c.coin(0.3):
        f["ct"] = c.pick(("dense", "pad8"))
    if c.coin(0.3):
        f["po"] = c.pick(("lsb", "msb"))
    if c.coin(0.3):
        f["dr"], f["ds"], f["dt"] = (c.pick(("rne", "rna", "rtz", "rtp", "rtn")),
                                     c.pick(("satfinite", "satmax", "ovfinf")), fmt())
    try:
        return grit.Grade.from_fields(**f)
    except grit.GritGradeError:
        return None


def gen_descriptor(c) -> D.Descriptor:
    """A descriptor: 64 random bytes, a degenerate pattern, or the frame of a
    seed grade or of a freshly built (and registered) one — any group axis,
    placements of every class, F_INTERLEAVED toggled — with a few fields
    mutated."""
    kind = c.int(0, 19)
    if kind == 0:
        return D.Descriptor.from_bytes(c.blob(64))
    if kind == 1:
        return D.Descriptor.from_bytes(c.pick((bytes(64), b"\xff" * 64)))
    g = gen_fresh_grade(c) if kind <= 5 else None
    if g is not None:
        grit.register_grade(g)          # undone when fuzz_registry() exits
    else:
        g = grit.Grade.parse(c.pick(SEED_GRADES))
    d = g.descriptor(group_axis=c.int(0, 3))
    if c.coin(0.4):      # a placement word of any class in one or more roles
        for role in ("placement_data", "placement_scale", "placement_meta"):
            if c.coin(0.5):
                d = d.replace(**{role: c.pick(PLACEMENT_POOL)})
    if c.coin(0.2):
        d = d.replace(flags=d.flags ^ D.F_INTERLEAVED)
    elif d.placement_data == PLACEMENTS["BLOCK_AOS"][0] or \
            d.placement_data >> 60 in (0x8, 0xF):
        if c.coin(0.6):
            d = d.replace(flags=d.flags | D.F_INTERLEAVED)
    for _ in range(c.pick((0, 0, 0, 1, 1, 2, 3))):
        name = c.pick(tuple(FIELD_BITS))
        d = d.replace(**{name: _field_value(c, name, d)})
    return d


_HUGE = (2**31 - 1, 2**31, 2**32, 2**40, 2**62, 2**63 - 1, 2**63, 2**64, -1, -(2**63))


def gen_shape(c, d: D.Descriptor) -> tuple[int, ...]:
    """A shape: one that fits ``d`` (group-axis extent a multiple of k0, of
    sp_m and of k1 groups), or a hostile one (rank 0 or 9, zeros, extents past
    2^31 and 2^63, negative, products past 2^63)."""
    kind = c.int(0, 9)
    if kind <= 5:
        lo = d.group_axis + 1 if 0 <= d.group_axis < 8 else 1
        rank = c.int(lo, max(lo, 4))
        k0 = d.k0 or 1
        unit = k0
        if d.flags & D.F_SPARSE and d.sp_m:
            unit = unit * d.sp_m // _gcd(unit, d.sp_m)
        if d.n_levels == 2 and d.k1:
            unit *= d.k1
        shape = [c.int(1, 3) for _ in range(rank)]
        ga = d.group_axis if 0 <= d.group_axis < rank else 0
        shape[ga] = unit * c.int(1, 2)
        if kind == 5 and c.coin():
            shape[c.int(0, rank - 1)] = 0
        return tuple(shape)
    if kind == 6:
        return tuple(c.int(0, 4) for _ in range(c.pick((0, 9, 10))))
    if kind == 7:
        rank = c.int(1, 4)
        return tuple(c.pick(_HUGE + (0, 1, 32)) for _ in range(rank))
    if kind == 8:   # an empty array with giant extents (#12 item 2)
        return (0, *(c.pick((2**20, 2**31, 2**40, 2**62)) for _ in range(c.int(1, 3))), 32)
    return tuple(c.int(0, 2**16) for _ in range(c.int(1, 3)))


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


#: planes of more bytes than this travel as byte counts only (level 1)
BYTES_MAX = 1 << 20


def gen_planes(c, d: D.Descriptor, shape) -> tuple:
    """Four planes: the §7.3 sizes (or their zero-sum for an impossible
    shape), one or two of them mutated (±1, zero, huge), as bytes when small
    enough to hold, else as byte counts."""
    ps = grit.plane_sizes(d, shape)
    sizes = [0, 0, 0, 0] if isinstance(ps, grit.Detail) else list(ps.sizes)
    for _ in range(c.pick((0, 0, 0, 1, 1, 2))):
        i = c.int(0, 3)
        sizes[i] = max(0, c.pick((sizes[i] + 1, sizes[i] - 1, 0, 1, sizes[i] * 2,
                                  2**40, 2**63 - 1)))
    if sum(sizes) <= BYTES_MAX:
        return tuple(c.blob(n) for n in sizes)
    return tuple(sizes)


@dataclass(frozen=True)
class Case:
    desc: bytes
    shape: tuple[int, ...]
    planes: tuple
    digest: bytes | None = None      # an expected §6.5 digest for levels 2 and 3

    def reproducer(self) -> dict:
        """A JSON-able reproducer: descriptor hex, shape, planes (hex when
        short, else their lengths)."""
        pl = [p.hex() if isinstance(p, bytes) and len(p) <= 512 else
              (len(p) if isinstance(p, bytes) else p) for p in self.planes]
        out = {"desc_hex": self.desc.hex(), "shape": list(self.shape), "planes": pl}
        if self.digest is not None:
            out["expected_digest"] = self.digest.hex()
        return out


def gen_case(c) -> Case:
    d = gen_descriptor(c)
    shape = gen_shape(c, d)
    planes = gen_planes(c, d, shape)
    digest = None
    if all(isinstance(p, bytes) for p in planes) and c.coin(0.3):
        digest = grit.digest(planes)
        if c.coin(0.5):                                    # one bit off
            digest = bytes([digest[0] ^ 1]) + digest[1:]
    return Case(d.to_bytes(), shape, planes, digest)


# ---------------------------------------------------------------------------
# running one descriptor case through every entry point

#: decode runs only on arrays of at most this many elements (or none at all)
DECODE_MAX_NUMEL = 1 << 16


@dataclass
class Outcome:
    """What one input did: a status name per (entry, level), and the escapes
    (non-GritError exceptions, and broken contracts) with a reproducer."""

    statuses: dict[str, str] = field(default_factory=dict)
    escapes: list[dict] = field(default_factory=list)

    def escape(self, where: str, exc: BaseException | None, repro: Any, why: str = "") -> None:
        tb = traceback.extract_tb(exc.__traceback__) if exc is not None else []
        frame = next((f for f in reversed(tb) if f.filename.startswith(_PACKAGE)), None)
        self.escapes.append({
            "where": where,
            "type": type(exc).__name__ if exc is not None else "ContractBroken",
            "message": (str(exc) if exc is not None else why)[:300],
            "raised_in": (f"{frame.filename[len(_PACKAGE):]}:{frame.lineno} "
                          f"({frame.name})") if frame else None,
            "exc": exc, "repro": repro})


def _status_of(exc: BaseException) -> str:
    s = getattr(exc, "status", None)
    return s.spec_name if s is not None else type(exc).__name__


def descriptor_outcome(case: Case, levels: Sequence[int] = (0, 1, 2, 3),
                       decode: bool = True) -> Outcome:
    """Run a case through Descriptor.from_bytes/to_bytes, grit.diagnose and
    grit.check at each level, and (where level 1 passed and the array is
    small) GritArray + grit.decode.  The contract: every call returns or
    raises a GritError; diagnose and check agree; levels 2 and 3 agree with
    level 1 unless they fail on content (DigestMismatch)."""
    out = Outcome()
    repro = case.reproducer()
    d = D.Descriptor.from_bytes(case.desc)
    if d.to_bytes() != case.desc or D.Descriptor.from_hex(d.hex(), strict=True) != d:
        out.escape("Descriptor round trip", None, repro, "from_bytes/to_bytes differ")
    has_bytes = all(isinstance(p, bytes) for p in case.planes)
    level1 = None
    for level in levels:
        if level >= 2 and not has_bytes:
            continue
        key = f"L{level}"
        dig = case.digest if level >= 2 else None
        try:
            det = grit.diagnose(case.desc, case.shape, case.planes, level, dig)
        except grit.GritError as e:
            out.statuses[key] = "raised:" + _status_of(e)
            out.escape(f"diagnose L{level}", None, repro,
                       f"diagnose raised {type(e).__name__} instead of returning a Detail: {e}")
            continue
        except Exception as e:                     # noqa: BLE001 - the escapes we hunt
            out.statuses[key] = "escape:" + type(e).__name__
            out.escape(f"diagnose L{level}", e, repro)
            continue
        if not isinstance(det, grit.Detail):
            out.escape(f"diagnose L{level}", None, repro, f"returned {type(det).__name__}")
            continue
        status = det.status.spec_name
        out.statuses[key] = status
        try:
            grit.check(case.desc, case.shape, case.planes, level, dig)
            got = "Ok"
        except grit.GritError as e:
            got = _status_of(e)
        except Exception as e:                     # noqa: BLE001
            got = "escape:" + type(e).__name__
            out.escape(f"check L{level}", e, repro)
        if got != status and not got.startswith("escape:"):
            out.escape(f"check L{level}", None, repro,
                       f"check says {got}, diagnose says {status}")
        if level == 1:
            level1 = status
        elif level >= 2 and level1 is not None and status != level1 and \
                status != "DigestMismatch":
            out.escape(f"diagnose L{level}", None, repro,
                       f"level {level} says {status}, level 1 says {level1}")
    if decode and level1 == "Ok":
        numel = 1
        for x in case.shape:
            numel *= x
        if numel <= DECODE_MAX_NUMEL:
            _decode(case, out, repro)
    return out


def _decode(case: Case, out: Outcome, repro) -> None:
    try:
        arr = grit.GritArray(case.desc, case.shape, case.planes)
    except grit.GritError as e:
        out.statuses["decode"] = _status_of(e)
        out.escape("GritArray", None, repro, f"level 1 passed but GritArray raised {e!r:.200}")
        return
    except Exception as e:                         # noqa: BLE001
        out.statuses["decode"] = "escape:" + type(e).__name__
        out.escape("GritArray", e, repro)
        return
    try:
        v = grit.decode(arr)
        _ = arr.gid
        if tuple(v.shape) != tuple(case.shape) or v.dtype.name != "float32":
            out.escape("decode", None, repro, f"decode gave {v.dtype} {v.shape}")
        out.statuses["decode"] = "Ok"
    except grit.GritError as e:
        out.statuses["decode"] = "raised:" + type(e).__name__
    except Exception as e:                         # noqa: BLE001
        out.statuses["decode"] = "escape:" + type(e).__name__
        out.escape("decode", e, repro)


# ---------------------------------------------------------------------------
# grade strings

_SPELLINGS = {"e2m1": ("E2M1", "fp4", "float4_e2m1fn"), "e8m0": ("ue8m0", "E8M0fnu"),
              "binary16": ("fp16", "half", "F16"), "binary32": ("fp32", "float"),
              "s8": ("int8", "i8"), "u4": ("uint4", "nibble"), "e4m3": ("e4m3fn", "fp8e4m3"),
              "exp2floormaxabs": ("ocpmx", "floor"), "ratiomaxabs": ("ratio",),
              "affineminmax": ("minmax",), "asclsb": ("ordered",), "l1": ("l1scaled",)}
_WS = (" ", "\t", "\n", "\r\n", "\u00a0", "\u2028", "\u3000", "\x0b", "\x1c", "\u200b",
       "\ufeff")
_CONFUSE = {"k": ("\u212a", "\u03ba", "\u0138"), "e": ("\u0435", "\u00e9", "\u1d49"),
            "s": ("\u0455", "\u017f"), "i": ("\u0130", "\u0131"), "0": ("\u0660", "\uff10",
                                                                        "\u2070", "\u00b0"),
            "1": ("\u0661", "\u00b9", "\u2460", "l"), "2": ("\u0662", "\uff12", "\u00b2"),
            "3": ("\u0663", "\u00b3"), "4": ("\u0664", "\u2074"), "x": ("\u00d7", "\u0445"),
            "=": ("\uff1d", "\u2261"), ",": ("\uff0c", "\u201a"), "(": ("\uff08",)}
_JUNK_VALUES = ("", "=", "0", "-1", "+32", "0x20", "32.0", "1e3", "9" * 5000, "9" * 21,
                "1" + "0" * 19, "18446744073709551616", "65536", "65535", "٣٢", "３２",
                "3_2", "pairwise" + "9" * 5000, "pairwise1", "pairwise0", "pairwise01",
                "2:4", "2:4:u2", "4:2:u2:asclsb", "2:8:u2:asclsb", "0:4:u2:asclsb",
                "2:4:u8:asclsb", "2:4:u2:asclsb:x", "2:" + "4" * 5000 + ":u2:asclsb",
                "x2043", "x204", "x20433", "x_204", "x٢٠٤٣", "bfloat16", "e4m3fnuz", "nf4",
                "None", "null", "\x00", "e2m1\x00", "grit1(e=e2m1)", "(", ")")
_KEYS = G.KEYS + ("layout", "swizzled", "k2", "s2", "", "E", "K0", "ao ")


def gen_grade_text(c) -> str:
    """A grade string: a seed grade respelled (aliases, case, whitespace,
    field order), then mutated (huge integers, unicode digits, whitespace and
    confusables, every key, junk values, deep nesting, truncation)."""
    g = grit.Grade.parse(c.pick(SEED_GRADES))
    items = [[k, v] for k, v in g.fields().items() if c.coin(0.2) or k in g._v]
    if c.coin(0.3):
        items = [items[i] for i in _shuffled(c, len(items))]
    for it in items:
        if it[1] in _SPELLINGS and c.coin(0.3):
            it[1] = c.pick(_SPELLINGS[it[1]])
    for _ in range(c.pick((0, 0, 0, 1, 1, 2, 3))):
        kind = c.int(0, 6)
        if not items:
            break
        i = c.int(0, len(items) - 1)
        if kind == 0:
            items[i][1] = c.pick(_JUNK_VALUES)
        elif kind == 1:
            items[i][0] = c.pick(_KEYS)
        elif kind == 2:
            items.insert(c.int(0, len(items)), list(items[i]))     # duplicate
        elif kind == 3:
            del items[i]
        elif kind == 4:
            items[i][1] = c.pick(("9", "1", "0")) * c.pick((21, 4300, 4301, 10000))
        elif kind == 5:
            k, v = items[i]
            items[i][1] = "".join(c.pick(_CONFUSE[ch]) if ch in _CONFUSE and c.coin(0.5)
                                  else ch for ch in v)
            items[i][0] = "".join(c.pick(_CONFUSE[ch]) if ch in _CONFUSE and c.coin(0.3)
                                  else ch for ch in k)
        else:
            items[i][1] = items[i][1] + c.pick(("(", ")", ",", "=", ":", "((" * 400))
    body = ",".join(f"{k}={v}" for k, v in items)
    text = c.pick(("grit1(", "GRIT1(", "Grit1(", "grit1 (", "grit2(", "(", "gritdec1(")) \
        + body + c.pick((")", ")", ")", "", "))", ") ", ",)"))
    kind = c.int(0, 9)
    if kind == 0:        # whitespace of every kind, anywhere
        for _ in range(c.int(1, 4)):
            j = c.int(0, len(text))
            text = text[:j] + c.pick(_WS) + text[j:]
    elif kind == 1:      # deep nesting
        n = c.pick((10, 331, 332, 1000, 5000))
        text = "grit1(" * n + body + ")" * n
    elif kind == 2:      # truncated
        text = text[:c.int(0, len(text))]
    elif kind == 3:      # a confusable anywhere
        j = c.int(0, max(0, len(text) - 1))
        if text and text[j] in _CONFUSE:
            text = text[:j] + c.pick(_CONFUSE[text[j]]) + text[j + 1:]
    elif kind == 4:      # lone surrogates, NUL, control characters
        j = c.int(0, len(text))
        text = text[:j] + c.pick(("\ud800", "\x00", "\x1b[31m", "\udfff", "\U0001F600")) \
            + text[j:]
    return text


def _shuffled(c, n: int) -> list[int]:
    idx = list(range(n))
    for i in range(n - 1, 0, -1):
        j = c.int(0, i)
        idx[i], idx[j] = idx[j], idx[i]
    return idx


def grade_outcome(text: str) -> Outcome:
    """Grade.parse either succeeds or raises GritGradeError; a parsed grade
    round-trips through its canonical form (same grade, same id) and its
    decode projection is stable."""
    out = Outcome()
    repro = {"grade": text if len(text) <= 300 else text[:150] + f"...({len(text)} chars)"}
    try:
        g = grit.Grade.parse(text)
    except grit.GritGradeError:
        out.statuses["parse"] = "GradeError"
        return out
    except Exception as e:                         # noqa: BLE001
        out.statuses["parse"] = "escape:" + type(e).__name__
        out.escape("Grade.parse", e, repro)
        return out
    out.statuses["parse"] = "Ok"
    if not "".join(text.split()).isascii():
        out.escape("Grade.parse", None, repro, "accepted a character outside ASCII")
    try:
        again = grit.Grade.parse(g.canonical)
        if again != g or again.id != g.id or again.canonical != g.canonical:
            out.escape("Grade.parse(canonical)", None, repro,
                       f"canonical {g.canonical!r} parses to {again.canonical!r}")
        if not g.canonical.isascii() or g.id != grit.fnv1a64(g.canonical.encode("ascii")):
            out.escape("Grade.canonical", None, repro, f"canonical {g.canonical!r}")
        _ = g.decode_projection, g.frame_fields(), g.descriptor()
    except Exception as e:                         # noqa: BLE001
        out.escape("Grade round trip", e, repro)
    return out


# ---------------------------------------------------------------------------
# layout expressions


def gen_layout_text(c, depth: int = 0) -> str:
    """A layout expression: a seed, a random well-formed tree, or one of
    them mutated (huge numbers, deep nesting, unicode, bad arity)."""
    kind = c.int(0, 9)
    if kind <= 2:
        text = c.pick(SEED_LAYOUTS)
    elif kind <= 6:
        text = _random_expr(c, depth)
    elif kind == 7:      # deep nesting of one constructor, or balanced Compose trees
        n = c.pick((8, 30, 63, 64, 65, 331, 332, 1000))
        shape = c.int(0, 3)
        if shape == 0:
            text = "Tile(" * n + "RowMajor" + ",[1,1])" * n
        elif shape == 1:
            text = "Compose(" * n + "RowMajor" + ",ColMajor)" * n
        elif shape == 2:
            text = "Compose(RowMajor," * n + "RowMajor" + ")" * n
        else:
            text = _balanced(c.int(1, 12))
    elif kind == 8:
        text = "Compose(" * c.int(1, 6) + _random_expr(c, 3)
        text = text + ",RowMajor)" * text.count("Compose(")
    else:
        text = c.pick(("Pad(", "Perm([", "Swizzle(", "Tile(RowMajor,[", "Interleave(RowMajor,")) \
            + c.pick(("9" * 5000, "9" * 20, "1" * 19, "٣", "３", "0", "-1", "+1", "1_0",
                      "0x10", "")) + c.pick((")", "])", ",1,1)", "]", ""))
    for _ in range(c.pick((0, 0, 1, 2))):
        j = c.int(0, len(text))
        text = text[:j] + c.pick(("(", ")", ",", "[", "]", " ", "\u00a0", "\u200b", "٣",
                                  "Compose(", "Interleave(", "Opaque(", "x", "0", "\x00",
                                  "\ud800", "RowMajor")) + text[j:]
    if c.coin(0.1):
        text = text.lower() if c.coin() else text.upper()
    return text


def _balanced(k: int) -> str:
    s = "RowMajor"
    for _ in range(k):
        s = f"Compose({s},{s})"
    return s


def _random_expr(c, depth: int) -> str:
    if depth > 5 or c.coin(0.3):
        return c.pick(("RowMajor", "ColMajor", "Pad(4)", "Perm([0])", "Swizzle(0,0,0)"))
    k = c.int(0, 7)
    inner = _random_expr(c, depth + 1)
    if k == 0:
        return f"Tile({inner},[{c.int(0, 5)},{c.int(0, 5)}])"
    if k == 1:
        return f"Interleave({inner},{c.int(0, 8)})"
    if k == 2:
        return f"Swizzle({c.int(0, 31)},{c.int(0, 31)},{c.int(0, 31)})"
    if k == 3:
        n = c.int(1, 6)
        return "Perm([" + ",".join(str(i) for i in _shuffled(c, n)) + "])"
    if k == 4:
        return f"Pad({c.int(0, 64)})"
    if k == 5:
        return f"Opaque({c.pick(('acme', 'a.b-c_1', 'x'))},{c.pick(('', '00', 'ff0', 'ABCD'))})"
    return f"Compose({inner},{_random_expr(c, depth + 1)})"


def layout_outcome(text: str) -> Outcome:
    """parse_layout either succeeds or raises GritLayoutError; a parsed
    expression round-trips through its canonical text (equal expression,
    equal word)."""
    out = Outcome()
    repro = {"layout": text if len(text) <= 300 else text[:150] + f"...({len(text)} chars)"}
    try:
        e = grit.parse_layout(text)
    except grit.GritLayoutError:
        out.statuses["parse"] = "LayoutError"
        return out
    except Exception as ex:                        # noqa: BLE001
        out.statuses["parse"] = "escape:" + type(ex).__name__
        out.escape("parse_layout", ex, repro)
        return out
    out.statuses["parse"] = "Ok"
    try:
        canon = str(e)
        again = grit.parse_layout(canon)
        if again != e or str(again) != canon or again.word != e.word:
            out.escape("parse_layout(canonical)", None, repro,
                       f"canonical {canon[:80]!r} parses to {str(again)[:80]!r}")
    except Exception as ex:                        # noqa: BLE001
        out.escape("parse_layout round trip", ex, repro)
    return out


# ---------------------------------------------------------------------------
# the hypothesis strategies


@st.composite
def descriptor_cases(draw) -> Case:
    return gen_case(DrawChooser(draw))


@st.composite
def grade_texts(draw) -> str:
    return gen_grade_text(DrawChooser(draw))


@st.composite
def layout_texts(draw) -> str:
    return gen_layout_text(DrawChooser(draw))
