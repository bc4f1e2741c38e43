"""§7 and §14: grit_check.

``diagnose`` never raises on bad input: for *any* 64 bytes, any shape and any
plane sizes it returns exactly one :class:`Detail` (status OK or the first
failure in the normative step order).  ``check`` is the must-use form: it
returns a :class:`CheckReport` on success and raises the ``GritError``
subclass of the failing status otherwise.

Check levels (the §7.2 table, as this implementation fixes it):

* 0 — erased: nothing is read; OK (L9: sound because decode is placement-invariant).
* 1 — O(1): frame, grade, placement, size equations (steps 1–4). Never touches plane bytes.
* 2 — level 1 + content (step 5): expected digest, sparse-metadata order. O(bytes).
* 3 — level 2 + advisory decode-sanity probes (§7.6). Probes only add warnings.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field, replace
from typing import Sequence

from . import descriptor as D
from .errors import Detail, GritLayoutError, GritUsageError, Status, error_for
from .facts import (META_BITS, MAXRANK, PLANE_NAMES, PlaneSizes, canonical_sizes, container_width,
                    fmt_width, has_aux, numel_of)
from .fingerprint import digest as _digest
from .formats import FORMAT_NAMES, fmt_classify, format_token
from .grade import Grade, lookup_grade
from ._sparse import first_disordered_quad
from .placement import stages
from .placement.words import (CLASS_OPAQUE, UNSPECIFIED, is_well_formed, placement_class,
                              placement_name)

__all__ = ["check", "diagnose", "CheckReport", "plane_sizes", "PlaneSizes", "MAXRANK",
           "LEVELS", "as_shape", "as_digest"]

LEVELS = (0, 1, 2, 3)


@dataclass(frozen=True, slots=True)
class CheckReport:
    """A passed check: the level it ran at, the grade it resolved, and its
    warnings (never failures): ``unverified`` names each level-2 content
    check that could not run (§7.3 step 5 on bytes grit cannot read),
    ``probes`` the level-3 advisory probe warnings (§7.6), and ``warnings``
    is both, in that order."""

    level: int
    grade: Grade | None
    status: Status = Status.OK
    unverified: tuple[str, ...] = field(default=())
    probes: tuple[str, ...] = field(default=())

    def __bool__(self) -> bool:
        return True

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.unverified + self.probes


def _fmt_name(word: int) -> str:
    if word == 0:
        return "absent"
    return format_token(word) if fmt_classify(word) is None else f"0x{word:04x}"


# ---------------------------------------------------------------------------
# the steps; each returns None (pass) or the failing Detail

def _fail(status: Status, step: int, message: str, **kw) -> Detail:
    return Detail(status=status, step=step, message=message, **kw)


def _step1_frame(d: D.Descriptor) -> Detail | None:
    G = Status.GRADE_UNKNOWN

    def bad(field_: str, expected, actual, why: str) -> Detail:
        return _fail(G, 1, f"GradeUnknown: descriptor frame is not a v1 frame: {why}",
                     field=field_, expected=expected, actual=actual,
                     lines=("A descriptor whose header cannot be believed has no knowable "
                            "grade (§7.1).",))

    if d.magic != D.MAGIC:
        return bad("magic", f"0x{D.MAGIC:08x}", f"0x{d.magic:08x}",
                   f"magic is 0x{d.magic:08x}, not 0x{D.MAGIC:08x} ('GRT1')")
    if d.hdr_bytes != D.HDR_BYTES:
        return bad("hdr_bytes", D.HDR_BYTES, d.hdr_bytes, f"hdr_bytes is {d.hdr_bytes}, not 64")
    if d.version != D.VERSION:
        return bad("version", D.VERSION, d.version, f"version is {d.version}, not 1")
    if d.n_levels not in (1, 2):
        return bad("n_levels", "1 or 2", d.n_levels, f"n_levels is {d.n_levels}")
    if d.flags & D.F_RESERVED:
        return bad("flags", f"flags & 0x{D.F_RESERVED:02x} == 0", f"0x{d.flags:02x}",
                   "reserved flag bits 0xC0 are set")
    if d.frame_rsvd != 0:
        return bad("frame_rsvd", 0, d.frame_rsvd, "frame_rsvd is not 0")
    if d.container not in (D.CT_DENSE, D.CT_PAD8):
        return bad("container", "0 or 1", d.container, f"container is {d.container}")
    if d.n_levels == 1 and (d.k1 != 0 or d.scale1 != 0):
        return bad("k1" if d.k1 else "scale1", 0, d.k1 or f"0x{d.scale1:04x}",
                   "n_levels == 1 requires k1 == 0 and scale1 absent")
    if d.flags & D.F_SPARSE and d.flags & D.F_HAS_ZP:
        return bad("flags", "not SPARSE and HAS_ZP", f"0x{d.flags:02x}",
                   "SPARSE and HAS_ZP together (v1 has one aux plane)")
    if d.flags & D.F_ZP_L1SCALED and not (d.flags & D.F_HAS_ZP and d.n_levels == 2):
        return bad("flags", "ZP_L1SCALED => HAS_ZP and n_levels == 2", f"0x{d.flags:02x}",
                   "ZP_L1SCALED without HAS_ZP and two scale levels")
    if d.elem >> 15:
        return bad("elem", "bias_ovr = 0", f"0x{d.elem:04x}", "elem.bias_ovr is set")
    for name in ("elem", "scale0", "scale1", "zp_fmt"):
        w = getattr(d, name)
        if (w >> 11) & 3 == 3:
            return bad(name, "nan_enc != 3", f"0x{w:04x}", f"{name}.nan_enc is the reserved 3")
    return None


def _step2_grade(d: D.Descriptor) -> tuple[Detail | None, Grade | None]:
    g = lookup_grade(d.grade_id)
    if g is None:
        return _fail(
            Status.GRADE_UNKNOWN, 2,
            f"GradeUnknown: grade_id 0x{d.grade_id:016X} is not a grade this process knows.",
            field="grade_id", actual=f"0x{d.grade_id:016X}",
            lines=("Likeliest cause: the producer used a grade whose canonical string was not "
                   "shipped with the file.",
                   "Fix:  grit.register_grade('grit1(...)')  # the producer's canonical string")
        ), None
    mism = g.frame_mismatches(d)
    if mism:
        name, want, got = mism[0]
        show = _fmt_name if name in ("elem", "scale0", "scale1", "zp_fmt") else (
            lambda v: f"0x{v:02x}" if name == "flags" else v)
        cause = _likely_grade_cause(name, want, got, g)
        return _fail(
            Status.GRADE_UNKNOWN, 2,
            f"GradeUnknown: descriptor {name} = {show(got)} but grade "
            f"{g.name or g.canonical} requires {name} = {show(want)}.",
            field=name, expected=show(want), actual=show(got),
            lines=((f"grade: {g.canonical}",) + ((cause,) if cause else ())
                   + tuple(f"also differs: {n} = {show(gv)} (grade {show(wv)})"
                           for n, wv, gv in mism[1:]))
        ), g
    return None, g


def _step2_interleave(d: D.Descriptor) -> Detail | None:
    """Step 2's rule for F_INTERLEAVED (docs/spec-decisions.md
    "interleaved-flag"): no grade carries the flag, so it is compared with the
    data placement it describes instead, and a flag that contradicts it is an
    internally inconsistent frame (§7.1: GradeUnknown)."""
    problem = stages.interleave_problem(d)
    if problem is None:
        return None
    field_, actual, expected, why = problem
    return _fail(Status.GRADE_UNKNOWN, 2, f"GradeUnknown: {why}.",
                 field=field_, actual=actual, expected=expected,
                 lines=("A descriptor whose flags contradict its own placement cannot be "
                        "believed (§7.1).",
                        "Fix:  clear F_INTERLEAVED (separate planes), or give the data plane "
                        "the interleaving placement the producer used"))


def _likely_grade_cause(name: str, want, got, g: Grade) -> str | None:
    if name == "k0":
        return (f"Likeliest cause: the tensor was quantised at group_size={got} but the "
                f"contract says {want} (or the reverse).")
    if name == "elem" and {FORMAT_NAMES.get(want), FORMAT_NAMES.get(got)} == {"u4", "s4"}:
        return "Likeliest cause: unsigned nibbles spelled int4 (§10.2) — decodes to garbage."
    if name == "flags":
        return "Likeliest cause: a zero-point, sparsity or bit-order convention differs."
    return None


def _step3_placement(d: D.Descriptor) -> Detail | None:
    for name, word in (("placement_data", d.placement_data),
                       ("placement_scale", d.placement_scale),
                       ("placement_meta", d.placement_meta)):
        if not is_well_formed(word):
            cls = (word >> 60) & 0xF
            why = ("class 0x1 but not in the registry" if cls == 1
                   else f"class 0x{cls:X} is not a v1 placement class")
            return _fail(Status.PLACEMENT_UNKNOWN, 3,
                         f"PlacementUnknown: {name} = 0x{word:016x}: {why}.",
                         field=name, actual=f"0x{word:016x}",
                         lines=("Legal: UNSPECIFIED (0), registered class 0x1, hashed class "
                                "0x8, opaque class 0xF.",))
    aux = has_aux(d)
    if aux != (d.placement_meta != UNSPECIFIED):
        if aux:
            msg = ("an aux plane is declared (SPARSE or HAS_ZP) but placement_meta is "
                   "UNSPECIFIED")
        else:
            msg = (f"placement_meta is {placement_name(d.placement_meta)} but no aux plane "
                   "is declared")
        return _fail(Status.PLACEMENT_UNKNOWN, 3, f"PlacementUnknown: {msg}.",
                     field="placement_meta", actual=f"0x{d.placement_meta:016x}",
                     expected="non-zero" if aux else "0x0000000000000000")
    # nothing else: §7.3 step 3 admits every well-formed word in every role; a word
    # that does not fit the array is refused by the reader of the bytes (relayout,
    # decode) with the reason (docs/spec-decisions.md "interleaved-flag")
    return None


def plane_sizes(d: D.Descriptor, shape: Sequence[int]) -> PlaneSizes | Detail:
    """§7.3 step 4: the exact byte count of each plane, or the SizeMismatch
    Detail explaining why the shape cannot carry this descriptor: the
    canonical derivation (grit.facts) with the placements' size rules."""
    ps = canonical_sizes(d, shape)
    if isinstance(ps, Detail):
        return ps
    return replace(ps, sizes=stages.plane_sizes(d, ps))


def _size_explain(d: D.Descriptor, ps: PlaneSizes, i: int, got: int) -> tuple[str, ...]:
    pad8 = d.container == D.CT_PAD8
    if d.flags & D.F_INTERLEAVED:
        return (("INTERLEAVED: the data plane carries all four planes (their §7.3 sizes "
                 f"summed = {ps.sizes[0]} bytes); scale0, scale1 and aux are empty.",)
                + (("A too-large plane is as much a mismatch as a too-small one (§7.3).",)
                   if got > ps.sizes[i] else ()))
    if i == 0:
        cw = container_width(d.elem, pad8)
        lines = [f"nnz={ps.nnz}, cw({_fmt_name(d.elem)})={cw} -> {ps.sizes[0]} bytes."]
        if got and got * 2 == ps.sizes[0]:
            lines.append("Likeliest cause: dense/sparse confusion (2:4 stores half the "
                         "elements) or a truncated shard.")
        elif got and got == ps.sizes[0] * 2:
            lines.append("Likeliest cause: PAD8/dense container confusion (one element "
                         "per byte vs two), or a dense tensor declared 2:4 sparse.")
        elif got < ps.sizes[0]:
            lines.append("Likeliest cause: a truncated shard or a short read.")
    elif i == 1:
        cw = container_width(d.scale0, True)
        lines = [f"numel={ps.numel}, k0={d.k0} -> n_groups0={ps.n_groups0}, "
                 f"cw({_fmt_name(d.scale0)})={cw} -> {ps.sizes[1]} bytes."]
        if got and cw and (got * 8) % cw == 0:
            n_actual = got * 8 // cw
            if n_actual and ps.numel % n_actual == 0:
                lines.append(f"Likeliest cause: the checkpoint was quantised at "
                             f"group_size={ps.numel // n_actual}, not {d.k0}.")
    elif i == 2:
        per = 2 if d.flags & D.F_ZP_L1SCALED else 1
        lines = [f"n_groups1={ps.n_groups1} x {per} value(s) x width({_fmt_name(d.scale1)})="
                 f"{fmt_width(d.scale1)} bits -> {ps.sizes[2]} bytes."]
    else:
        if d.flags & D.F_SPARSE:
            lines = [f"numel={ps.numel}/{d.sp_m} x {d.sp_n} indices x meta bits -> "
                     f"{ps.sizes[3]} bytes."]
        elif d.flags & D.F_HAS_ZP:
            lines = [f"n_groups0={ps.n_groups0} zero points, one per byte (PAD8) -> "
                     f"{ps.sizes[3]} bytes."]
            if got * 2 == ps.sizes[3]:
                lines.append("Likeliest cause: dense-nibble zero points (GPTQ/AWQ qzeros), "
                             "inexpressible in v1 (§0.3d).")
        else:
            lines = ["no aux plane is declared -> 0 bytes."]
    if got > ps.sizes[i]:
        lines.append("A too-large plane is as much a mismatch as a too-small one (§7.3).")
    return tuple(lines)


def _step4_sizes(d: D.Descriptor, shape, nbytes: Sequence[int]) -> Detail | None:
    ps = plane_sizes(d, shape)
    if isinstance(ps, Detail):
        return ps
    for i, (want, got) in enumerate(zip(ps.sizes, nbytes)):
        if want != got:
            return _fail(Status.SIZE_MISMATCH, 4,
                         f"SizeMismatch: {PLANE_NAMES[i]} plane is {got} bytes; descriptor "
                         f"requires {want}.",
                         field=PLANE_NAMES[i], expected=want, actual=got, plane=i,
                         lines=_size_explain(d, ps, i, got))
    return None


def _meta_for_content_check(d: D.Descriptor, shape, planes,
                            canonical) -> tuple[bytes | memoryview | None, str | None]:
    """The sparse-metadata bytes §7.4 reads, or None and why they cannot be
    read.  Every non-interleaving placement permutes whole quads, and the
    order check is per quad, so the aux plane is read as it is; an
    interleaved data plane carries the aux plane inside its blocks, which only
    the placement stages can take apart: ``canonical`` (passed by the caller,
    grit.boundary) returns the canonical planes.  Opaque (or unresolvable)
    placements are the vendor's bytes: not checked, and the report says so."""
    if placement_class(d.placement_meta) == CLASS_OPAQUE:
        return None, (f"placement_meta {placement_name(d.placement_meta)} is opaque: its "
                      "metadata order is the vendor's (L3)")
    if not d.flags & D.F_INTERLEAVED:
        return planes[3], None
    if canonical is None:
        raise GritUsageError("the level-2 content check of an interleaved data plane needs "
                             "canonical= (grit.check passes the placement stages)")
    try:
        return canonical(d, shape, planes)[3], None
    except GritLayoutError as e:
        return None, ("the metadata travels inside the interleaved data plane, which cannot "
                      f"be taken apart here: {str(e).splitlines()[0]}")


def _step5_content(d: D.Descriptor, shape, planes, expected_digest,
                   canonical=None, notes: list[str] | None = None) -> Detail | None:
    """Step 5.  A content check that cannot run (its bytes are in an order
    grit cannot read) is not a failure — §7.3 names no status for it — but
    it is never silent: its reason is appended to ``notes``, which the
    passed check reports (Detail.lines, CheckReport.warnings)."""
    if expected_digest is not None:
        got = _digest(planes)
        if got != bytes(expected_digest):
            return _fail(Status.DIGEST_MISMATCH, 5,
                         "DigestMismatch: plane contents do not hash to the expected digest.",
                         field="digest", expected=bytes(expected_digest).hex(),
                         actual=got.hex(),
                         lines=("The bytes changed after the digest was taken (corruption, "
                                "a partial write, or a different tensor).",))
    if d.flags & D.F_SPARSE and d.sp_order == D.SPORDER_ASC_LSB:
        bits = META_BITS[d.sp_meta_fmt]        # step 4 refused any other sp_meta_fmt
        numel = numel_of(shape)
        meta, why_not = _meta_for_content_check(d, shape, planes, canonical)
        if meta is None:
            if notes is not None:
                notes.append("level 2: the SPORDER_ASC_LSB metadata order (§7.4) was not "
                             f"verified: {why_not}")
            return None
        bad = first_disordered_quad(meta, d.sp_n, d.sp_m, bits, numel // d.sp_m)
        if bad is not None:
            q, idx = bad
            return _fail(Status.DIGEST_MISMATCH, 5,
                         f"DigestMismatch: sparse metadata of quad {q} is {list(idx)}, not "
                         f"strictly increasing indices < {d.sp_m} (SPORDER_ASC_LSB, §7.4).",
                         field="aux", plane=3, actual=list(idx),
                         expected=f"strictly increasing, each < {d.sp_m}",
                         lines=("mma.sp::ordered_metadata makes this undefined behaviour; "
                                "the descriptor promised ASC_LSB.",
                                "Fix: re-sort the metadata (and data) or declare "
                                "sp order unord."))
    return None


# ---------------------------------------------------------------------------
# argument normalisation: only GritUsageError may come out of here

_as_desc = D.Descriptor.coerce


def as_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)):
        raise GritUsageError(f"shape must be a sequence of integers, got {shape!r:.60}")
    try:
        return tuple(operator.index(x) for x in shape)
    except TypeError:
        raise GritUsageError(f"shape must be a sequence of integers, got {shape!r:.60}") from None


def _as_planes(planes, need_bytes: bool) -> tuple[list[int], list[memoryview | None]]:
    try:
        items = list(planes)
    except TypeError:
        raise GritUsageError("planes must be four items (bytes-like or int byte counts)") from None
    if len(items) != 4:
        raise GritUsageError(f"planes must be exactly four items, got {len(items)}")
    sizes: list[int] = []
    bufs: list[memoryview | None] = []
    for i, p in enumerate(items):
        if p is None:
            p = b""
        if isinstance(p, bool):
            raise GritUsageError(f"plane {i}: a bool is not a byte count")
        if isinstance(p, int):
            sizes.append(p)
            bufs.append(None)
            continue
        try:
            mv = memoryview(p)
        except TypeError:
            try:
                sizes.append(operator.index(p))
                bufs.append(None)
                continue
            except TypeError:
                raise GritUsageError(
                    f"plane {i}: expected bytes-like or int, got {type(p).__name__}") from None
        if not mv.c_contiguous:
            raise GritUsageError(f"plane {i}: buffer is not C-contiguous")
        sizes.append(mv.nbytes)
        bufs.append(mv.cast("B") if mv.ndim else mv.cast("B"))
    if need_bytes and any(b is None for b, s in zip(bufs, sizes) if s):
        raise GritUsageError("check level >= 2 needs the plane bytes, not only their sizes")
    return sizes, bufs


def as_digest(x) -> bytes | None:
    """An expected §6.5 digest argument as 16 bytes (None stays None)."""
    if x is None:
        return None
    try:
        b = bytes(x)
    except TypeError:
        raise GritUsageError("expected_digest must be 16 bytes") from None
    if len(b) != 16:
        raise GritUsageError(f"expected_digest must be 16 bytes, got {len(b)}")
    return b


def diagnose(desc, shape, planes, level: int = 1, expected_digest=None, *,
             canonical=None) -> Detail:
    """Run grit_check and return its Detail (status OK on success).  Raises
    only GritUsageError for arguments of the wrong type.

    ``canonical(d, shape, planes) -> planes`` reads planes in the canonical
    order; the level-2 content check needs it for an interleaved data plane
    only (grit.diagnose passes the placement stages' reader)."""
    if level not in LEVELS:
        raise GritUsageError(f"check level must be 0..3, got {level!r}")
    d = _as_desc(desc)
    shp = as_shape(shape)
    sizes, bufs = _as_planes(planes, need_bytes=level >= 2)
    expected_digest = as_digest(expected_digest)
    ok = Detail(status=Status.OK, message="Ok")
    if level == 0:
        return ok
    f = _step1_frame(d)
    if f:
        return f
    f, _ = _step2_grade(d)
    if f:
        return f
    f = _step2_interleave(d)
    if f:
        return f
    f = _step3_placement(d) or _step4_sizes(d, shp, sizes)
    if f:
        return f
    if level >= 2:
        planes_b = [b if b is not None else b"" for b in bufs]
        notes: list[str] = []
        f = _step5_content(d, shp, planes_b, expected_digest, canonical, notes)
        if f:
            return f
        if notes:
            return replace(ok, lines=tuple(notes))
    return ok


def check(desc, shape, planes, level: int = 1, expected_digest=None, *,
          canonical=None, probe=None) -> CheckReport:
    """grit_check (§7), pure: returns a :class:`CheckReport`; raises the
    GritError subclass of the first failing status (§7.3 order).

    Levels 0–2 read only their arguments.  Level 3 adds the advisory probes
    of §7.6 through ``probe(d, shape, planes) -> warnings``, which the caller
    passes (grit.check passes grit.probes, reading the canonical order);
    ``canonical`` is as for :func:`diagnose`.  Counting the crossing (§12.4)
    is the caller's business too."""
    det = diagnose(desc, shape, planes, level, expected_digest, canonical=canonical)
    if det.status != Status.OK:
        raise error_for(det)
    d = _as_desc(desc)
    g = lookup_grade(d.grade_id) if level >= 1 else None
    probes: tuple[str, ...] = ()
    if level >= 3:
        if probe is None:
            raise GritUsageError("check level 3 needs probe= (grit.check passes grit.probes)")
        probes = tuple(probe(d, as_shape(shape), _as_planes(planes, True)[1]))
    # det.lines of a passed check: the level-2 checks that could not run
    return CheckReport(level=level, grade=g, unverified=det.lines, probes=probes)
