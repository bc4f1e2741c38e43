"""§5.5 and §12: the audited escape hatch, its proof, the ledger and the rate.

A witness that bytes are in placement p comes from canonical construction,
from ``relayout`` (which moves the bytes), or from :func:`assume_placement`
(which moves nothing and says so).  An assumption sets NOTE_ASSUMED in the
descriptor's note (§11.1: never hashed, so the gid does not fork), appends a
ledger record, and counts as an assumed boundary crossing.  Only
:func:`verify_placement` clears the bit, and only when it has read the bytes
and proved the claim.

What "proved" means here (docs/spec-decisions.md, "§12 Audit and §4.3
kernels"): decode is the only observable a placement has (L1), so a claim is
proved when the bytes, read under the claimed placement, decode bit for bit to
a reference the caller supplies.  Without a reference no dense placement
leaves a content signature (every byte string is a valid ROW_MAJOR plane and
a valid TILE_16X16 plane), so the other checks — the relayout round trip, the
level-2 content invariants, an expected digest — are necessary conditions
only: they can refute a claim, never prove one.

Boundary crossings are counted per process (grit.crossings): every passed
``grit.check`` at level ≥ 1 and every GritArray construction, every
assume_placement (an assumed crossing), every verify_placement, and every
:func:`crossing` a caller reports.  Checks the package runs inside these
three functions are not counted again.
"""
from __future__ import annotations

import json
import math
import operator
import os
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

import numpy as np

from . import crossings
from ._files import atomic_write
from . import descriptor as D
from .array import GritArray, decode, relayout
from .boundary import diagnose
from .check import as_digest
from .placement.relayout import applies
from .errors import Detail, GritError, GritLayoutError, GritUsageError, Status
from .facts import ROLE_FIELD, ROLE_NAMES, canonical_words, is_canonical
from .facts import has_aux as _has_aux
from .fingerprint import digest as _digest
from .placement.words import (
    CLASS_HASHED, CLASS_OPAQUE, REGISTERED, UNSPECIFIED, placement_by_name,
    placement_class, placement_name,
)

__all__ = [
    "AuditRecord", "assume_placement", "verify_placement", "ledger", "rate", "counts",
    "crossing", "max_rate", "set_max_rate", "write_jsonl", "read_jsonl", "ENV_MAX_RATE",
    "ROLES",
]

ENV_MAX_RATE = "GRIT_AUDIT_MAX_RATE"
ROLES = ROLE_NAMES

_ROW_MAJOR = REGISTERED["ROW_MAJOR"][0]
_BLOCK_AOS = REGISTERED["BLOCK_AOS"][0]
_FIELD = ROLE_FIELD
_CANDIDATE_LIMIT = 1 << 16   # elements: above this a failed proof does not search for
                             # the placement the bytes are likelier in


# ---------------------------------------------------------------------------
# the ledger record

@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord:
    """One ledger entry.  The first seven fields are §12.3's record, in its
    order; ``event``, ``producer`` and ``checks`` are this implementation's
    additions (a reader of the §12 record ignores them)."""

    timestamp: str          # ISO 8601, UTC, microseconds, 'Z'
    gid_before: str         # base32 gid of the array handed in
    gid_after: str          # base32 gid of the array handed back
    placement_from: str     # 'data=ROW_MAJOR, scale=ROW_MAJOR' (roles the call names)
    placement_to: str
    reason: str
    source_location: str    # 'path/to/file.py:LINE' of the first caller outside grit
    event: str = "assume"   # 'assume' or 'verify'
    producer: int = 0       # note bits 8..15 of the array handed back
    checks: tuple[tuple[str, str], ...] = ()   # verify: (check, outcome) in run order

    _KEYS = ("timestamp", "gid_before", "gid_after", "placement_from", "placement_to",
             "reason", "source_location", "event", "producer", "checks")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a fixed key order (§12.3's seven first)."""
        out: dict[str, Any] = {k: getattr(self, k) for k in self._KEYS[:-1]}
        out["checks"] = {name: outcome for name, outcome in self.checks}
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "AuditRecord":
        if not isinstance(d, Mapping):
            raise GritUsageError(f"an audit record is a JSON object, got {type(d).__name__}")
        missing = [k for k in cls._KEYS[:7] if k not in d]
        if missing:
            raise GritUsageError(f"audit record lacks {', '.join(missing)}")
        checks = d.get("checks") or {}
        if not isinstance(checks, Mapping):
            raise GritUsageError("audit record 'checks' must be an object")
        try:
            return cls(**{k: str(d[k]) for k in cls._KEYS[:7]},
                       event=str(d.get("event", "assume")),
                       producer=operator.index(d.get("producer", 0)),
                       checks=tuple((str(k), str(v)) for k, v in checks.items()))
        except TypeError as e:
            raise GritUsageError(f"malformed audit record: {e}") from None


# ---------------------------------------------------------------------------
# process state: one lock over the ledger, the counters and the ceiling

_lock = crossings.LOCK
_records: list[AuditRecord] = []
_max_rate: float | None = None
_quiet = crossings.quiet


def crossing(n: int = 1) -> None:
    """Count ``n`` boundary crossings that did not go through grit.check (an
    adapter that validates by other means).  Never an assumed one."""
    n = operator.index(n)
    if n < 0:
        raise GritUsageError(f"crossing() counts forward only, got {n}")
    crossings.count(n)


def counts() -> tuple[int, int]:
    """(assumed crossings, total crossings) for this process."""
    return crossings.counts()


def rate() -> float:
    """§12.4: assumed crossings / total boundary crossings (0.0 when none)."""
    assumed, total = crossings.counts()
    return assumed / total if total else 0.0


def _parse_rate(x: Any, what: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise GritUsageError(f"{what} must be a number in [0, 1], got {x!r}") from None
    if math.isnan(v) or not 0.0 <= v <= 1.0:
        raise GritUsageError(f"{what} must be a number in [0, 1], got {x!r}")
    return v


def set_max_rate(x: float | None) -> None:
    """Set the ceiling of §12.4 for this process (None: fall back to the
    GRIT_AUDIT_MAX_RATE environment variable, read at each call)."""
    global _max_rate
    v = None if x is None else _parse_rate(x, "set_max_rate()")
    with _lock:
        _max_rate = v


def max_rate() -> float | None:
    """The ceiling in force: set_max_rate's value, else GRIT_AUDIT_MAX_RATE,
    else None (no ceiling)."""
    with _lock:
        if _max_rate is not None:
            return _max_rate
    raw = os.environ.get(ENV_MAX_RATE)
    if raw is None or not raw.strip():
        return None
    return _parse_rate(raw.strip(), ENV_MAX_RATE)


def ledger() -> tuple[AuditRecord, ...]:
    """§12.3: an immutable snapshot of this process's ledger, oldest first."""
    with _lock:
        return tuple(_records)


def write_jsonl(path: "str | os.PathLike[str]") -> int:
    """Write the whole ledger to ``path``, one JSON object per line in
    AuditRecord key order, replacing the file atomically (temporary file in
    the same folder, then rename).  Returns the number of records written."""
    snap = ledger()

    def write(f) -> None:
        for r in snap:
            f.write((json.dumps(r.to_dict(), ensure_ascii=False) + "\n").encode("utf-8"))

    atomic_write(os.fspath(path), write)
    return len(snap)


def read_jsonl(path: "str | os.PathLike[str]") -> tuple[AuditRecord, ...]:
    """The records of a file :func:`write_jsonl` wrote (blank lines ignored)."""
    out = []
    with open(os.fspath(path), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise GritUsageError(f"{path}:{n}: not JSON: {e.msg}") from None
            out.append(AuditRecord.from_dict(obj))
    return tuple(out)


def _append(rec: AuditRecord, assumed: bool) -> None:
    with _lock:
        _records.append(rec)
        crossings.record(assumed)


def _reset_for_tests() -> None:
    """Empty the ledger, zero the counters, drop the set_max_rate ceiling.
    For test isolation only: the ledger is otherwise append-only."""
    global _max_rate
    with _lock:
        _records.clear()
        crossings.reset()
        _max_rate = None


# ---------------------------------------------------------------------------
# shared helpers

def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _caller_location() -> str:
    """file:line of the nearest frame outside the grit package."""
    f = sys._getframe(1)
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if mod != "grit" and not mod.startswith("grit."):
            return f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>:0"


def _word(p: Any, what: str) -> int:
    """A placement word from a word or a registered name."""
    if isinstance(p, str):
        return placement_by_name(p)
    if isinstance(p, bool):
        raise GritUsageError(f"{what}: a bool is not a placement")
    try:
        w = operator.index(p)
    except TypeError:
        raise GritUsageError(f"{what}: expected a placement word or name, got "
                             f"{type(p).__name__}") from None
    if not 0 <= w < 1 << 64:
        raise GritUsageError(f"{what}: a placement word is 64 bits, got {w:#x}")
    return w


def _roles(a: GritArray, placement, data, scale, meta, what: str) -> dict[str, int]:
    """The claim of a call, read as relayout reads its arguments: ROW_MAJOR
    names the canonical order of every plane; another registered placement
    names every plane it can be a placement of for this array; a hashed or
    opaque word (which relayout cannot decide for) names data and scale;
    data=/scale=/meta= name one plane each and win over it."""
    roles: dict[str, int] = {}
    if placement is not None:
        w = _word(placement, what)
        aux = _has_aux(a.descriptor)
        if w == UNSPECIFIED:
            roles["data"] = roles["scale"] = w            # refused by the caller, by name
        elif w == _ROW_MAJOR:
            roles.update(_canonical_roles(a))
        else:
            if placement_class(w) in (CLASS_HASHED, CLASS_OPAQUE):
                roles["data"] = roles["scale"] = w
            else:
                roles.update({r: w for r in (ROLES if aux else ROLES[:2]) if applies(a, w, r)})
                if not roles:
                    raise GritLayoutError(
                        f"{what}: placement {placement_name(w)} ({_short(w)}) applies to no "
                        f"plane of this array (grade {a.grade.name or a.grade.canonical}, "
                        f"shape {a.shape}); name the plane with data=, scale= or meta=")
    for role, v in (("data", data), ("scale", scale), ("meta", meta)):
        if v is not None:
            roles[role] = _word(v, f"{what} {role}=")
    return roles


def _current(a: GritArray) -> dict[str, int]:
    d = a.descriptor
    return {"data": d.placement_data, "scale": d.placement_scale, "meta": d.placement_meta}


def _short(word: int) -> str:
    h = f"{word:016x}"
    return f"0x{h[:4]}…{h[-4:]}"


def _role_text(roles: Mapping[str, int]) -> str:
    return ", ".join(f"{r}={placement_name(roles[r])}" for r in ROLES if r in roles)


def _layout_expr(word: int) -> str:
    name = placement_name(word)
    return f"grit.layouts.{name}" if word in _NAMES_REG else f"0x{word:016x}"


_NAMES_REG = frozenset(w for w, _ in REGISTERED.values())


def _call_args(roles: Mapping[str, int]) -> str:
    """How a call names these roles: positional when data and scale agree
    and meta is not named, else keywords."""
    if set(roles) == {"data", "scale"} and roles["data"] == roles["scale"]:
        return _layout_expr(roles["data"])
    return ", ".join(f"{r}={_layout_expr(roles[r])}" for r in ROLES if r in roles)


def _require_array(a: Any, fn: str) -> GritArray:
    if not isinstance(a, GritArray):
        raise GritUsageError(f"{fn}() takes a GritArray, got {type(a).__name__}")
    return a


def _reclaim(a: GritArray, roles: Mapping[str, int], note: int) -> GritArray:
    """The same shape and plane bytes under a descriptor that claims ``roles``
    and carries ``note``.  Checked at level 1 (step 3 judges the words), not
    counted as a crossing."""
    d = a.descriptor
    changes = {_FIELD[r]: w for r, w in roles.items()}
    flags = d.flags
    if "data" in roles:
        # BLOCK_AOS interleaves; a hashed or opaque word keeps what the flag says
        w = roles["data"]
        if w == _BLOCK_AOS:
            flags |= D.F_INTERLEAVED
        elif placement_class(w) not in (CLASS_HASHED, CLASS_OPAQUE):
            flags &= ~D.F_INTERLEAVED
    nd = d.replace(flags=flags, note=note & 0xFFFFFFFF, **changes)
    with _quiet():
        return GritArray(nd, a.shape, a.planes)


# ---------------------------------------------------------------------------
# assume_placement (§12)

_MISSING: Any = object()


def assume_placement(array: GritArray, placement: "int | str | None" = None,
                     reason: str = _MISSING, *, data: "int | str | None" = None,
                     scale: "int | str | None" = None, meta: "int | str | None" = None,
                     producer: int | None = None) -> GritArray:
    """§12: the audited escape hatch.  Return ``array`` with its plane bytes
    untouched under a descriptor that claims ``placement`` (data and scale
    planes; ``data=``, ``scale=``, ``meta=`` name one plane each), with
    NOTE_ASSUMED set and, if given, ``producer`` (0..255) in note bits 8..15.

    ``reason`` is mandatory and must be a non-empty str literal at the call
    site, so that ``grep -rn assume_placement`` finds every use and its
    justification.  Appends a ledger record and counts one assumed crossing;
    raises GritLayoutError (recording nothing) when that would lift
    :func:`rate` above the ceiling (GRIT_AUDIT_MAX_RATE or set_max_rate)."""
    if reason is _MISSING:
        raise GritUsageError(
            "assume_placement() requires a reason: the escape hatch is audited (§12.1), "
            "and a reason is never defaulted.")
    if not isinstance(reason, str):
        raise GritUsageError(
            f"assume_placement() reason must be a str, got {type(reason).__name__}")
    if not reason.strip():
        raise GritUsageError(
            "assume_placement() reason is empty: say why these bytes are in this placement "
            "(§12.1: an empty reason is non-conformant).")
    a = _require_array(array, "assume_placement")
    roles = _roles(a, placement, data, scale, meta, "assume_placement()")
    if not roles:
        raise GritUsageError("assume_placement() needs a placement (or data=, scale=, meta=)")
    for r, w in roles.items():
        if w == UNSPECIFIED:
            raise GritUsageError(
                f"assume_placement() {r}=UNSPECIFIED asserts no placement; an assumption "
                "names the placement the bytes are in.")
    note = a.descriptor.note | D.NOTE_ASSUMED
    if producer is not None:
        if isinstance(producer, bool):
            raise GritUsageError("producer must be an int in 0..255, not a bool")
        p = operator.index(producer)
        if not 0 <= p <= 0xFF:
            raise GritUsageError(f"producer tag must be in 0..255 (note bits 8..15), got {p}")
        note = (note & ~D.NOTE_PRODUCER_MASK) | (p << D.NOTE_PRODUCER_SHIFT)
    before = _current(a)
    out = _reclaim(a, roles, note)
    rec = AuditRecord(
        timestamp=_now(), gid_before=a.gid_base32, gid_after=out.gid_base32,
        placement_from=_role_text({r: before[r] for r in roles}),
        placement_to=_role_text(roles), reason=reason,
        source_location=_caller_location(), event="assume",
        producer=out.descriptor.producer)
    with _lock:
        ceiling = max_rate()
        _assumed, _total = crossings.counts()
        if ceiling is not None and (_assumed + 1) / (_total + 1) > ceiling:
            would = (_assumed + 1) / (_total + 1)
            raise GritLayoutError(detail=Detail(
                status=Status.PLACEMENT_UNKNOWN, field="audit_rate",
                expected=f"<= {ceiling}", actual=would,
                message=(f"assume_placement refused: accepting it would lift the audit rate to "
                         f"{would:.4f} ({_assumed + 1} assumed / {_total + 1} crossings), "
                         f"above the ceiling {ceiling} ({ENV_MAX_RATE})."),
                lines=(f"Fix:  x = grit.relayout(x, {_call_args(roles)})  "
                       "# a real witness: the bytes move",
                       "Or:   construct the planes in the placement the consumer needs")))
        _append(rec, assumed=True)
    return out


# ---------------------------------------------------------------------------
# verify_placement (§12.2)

def _canonical_roles(a: GritArray) -> dict[str, int]:
    words = dict(zip(ROLES, canonical_words(a.descriptor)))
    return words if _has_aux(a.descriptor) else {r: words[r] for r in ROLES[:2]}


def _is_canonical(a: GritArray) -> bool:
    return is_canonical(a.descriptor)


def _to_canonical(a: GritArray) -> tuple[GritArray | None, str]:
    """The array relayouted into the codec's order, or None and why not."""
    if _is_canonical(a):
        return a, "identity"
    for r, w in _current(a).items():
        if placement_class(w) == CLASS_OPAQUE:
            return None, (f"{r} placement {placement_name(w)} is opaque: it can be consumed "
                          "but never relayouted out of (L3)")
    try:
        return relayout(a, _ROW_MAJOR), "relayout"
    except GritError as e:
        return None, f"relayout to the canonical order failed: {str(e).splitlines()[0]}"


def _bits_equal(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elementwise bit equality of float32 arrays, any NaN equal to any NaN
    (the codec emits the canonical NaN; a reference may not)."""
    g = np.ascontiguousarray(got, dtype=np.float32)
    w = np.ascontiguousarray(want, dtype=np.float32)
    return (g.view(np.uint32) == w.view(np.uint32)) | (np.isnan(g) & np.isnan(w))


def _reference_values(reference: Any, shape: tuple[int, ...]) -> np.ndarray:
    if isinstance(reference, GritArray):
        if not _is_canonical(reference):
            raise GritUsageError(
                "verify_placement(reference=...) must be in the canonical placement "
                f"(its placements are {_role_text(_current(reference))})")
        if reference.shape != shape:
            raise GritUsageError(f"reference shape {reference.shape} != array shape {shape}")
        with _quiet():
            return decode(reference)
    try:
        arr = np.asarray(reference)
    except (TypeError, ValueError) as e:
        raise GritUsageError(f"reference must be values or a GritArray: {e}") from None
    if arr.dtype.kind not in "fiu":
        raise GritUsageError(f"reference values must be real numbers, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise GritUsageError(f"reference shape {arr.shape} != array shape {shape}")
    with np.errstate(over="ignore"):
        return np.asarray(arr, dtype=np.float32)


def _likelier(a: GritArray, roles: Mapping[str, int], want: np.ndarray) -> str | None:
    """The name of another registered placement under which the bytes do
    decode to the reference, if a cheap search finds one."""
    if a.size > _CANDIDATE_LIMIT:
        return None
    meta_words = ("LINEAR_META", "META_M16N8K32")
    varied = [r for r in roles if r != "meta"]
    if varied:
        pool = [n for n in REGISTERED if n not in meta_words]
    else:
        varied, pool = ["meta"], list(meta_words)
    for name in pool:
        w = REGISTERED[name][0]
        if all(roles[r] == w for r in varied):
            continue
        try:
            cand = _reclaim(a, {r: w for r in varied}, a.descriptor.note)
            with _quiet():
                canon, _ = _to_canonical(cand)
                if canon is None:
                    continue
                if _bits_equal(decode(canon), want).all():
                    return name
        except GritError:
            continue
    return None


def verify_placement(array: GritArray, placement: "int | str | None" = None, *,
                     data: "int | str | None" = None, scale: "int | str | None" = None,
                     meta: "int | str | None" = None, reference: Any = None,
                     expected_digest: "bytes | None" = None) -> GritArray:
    """§12.2: read the bytes and prove the placement ``array`` claims; on
    proof return it with NOTE_ASSUMED cleared and append a 'verify' record.

    ``placement`` / ``data=`` / ``scale=`` / ``meta=`` name the claim to
    prove and must be what the descriptor already claims (default: all of
    it); verify_placement proves a claim, it never makes one (§5.5).
    Checks, in order, each recorded as passed / failed / not run and why:

    * ``digest``: the planes hash to ``expected_digest`` (§6.5), if given;
    * ``roundtrip``: relayout claimed → canonical → claimed reproduces the
      bytes (refutes placements that cannot hold these bytes);
    * ``content``: level-2 content invariants read in the canonical order
      (ASC_LSB metadata order, §7.4);
    * ``reference``: decode under the claim equals ``reference`` (values, or
      a GritArray in the canonical placement) bit for bit.

    Only ``reference`` proves; the others can only refute.  Any failed
    check, or no reference, raises GritLayoutError naming what ran."""
    a = _require_array(array, "verify_placement")
    roles = _roles(a, placement, data, scale, meta, "verify_placement()")
    cur = _current(a)
    if not roles:
        roles = {r: cur[r] for r in (ROLES if _has_aux(a.descriptor) else ROLES[:2])
                 if cur[r] != UNSPECIFIED}
        if not roles:
            raise GritUsageError("verify_placement(): the array claims no placement; there is "
                                 "nothing to prove")
    for r, w in roles.items():
        if w == UNSPECIFIED:
            raise GritUsageError(
                f"verify_placement() {r}=UNSPECIFIED is no claim; there is nothing to prove.")
        if cur[r] != w:
            raise GritLayoutError(detail=Detail(
                status=Status.PLACEMENT_UNKNOWN, field=_FIELD[r],
                expected=f"0x{w:016x}", actual=f"0x{cur[r]:016x}",
                message=(f"verify_placement: the array claims {r}={placement_name(cur[r])} "
                         f"({_short(cur[r])}), not {placement_name(w)} ({_short(w)}); "
                         "verify_placement proves the claim an array makes, it does not "
                         "make one (§5.5)."),
                lines=(f"Fix:  x = grit.relayout(x, {_call_args({r: w})})  # move the bytes",
                       f"Or:   x = grit.assume_placement(x, {_call_args({r: w})}, "
                       "reason='<why>')  # then verify that")))
    expected_digest = as_digest(expected_digest)
    want = None if reference is None else _reference_values(reference, a.shape)

    checks: list[tuple[str, str]] = []
    refuted: list[str] = []          # lines explaining a failed check
    with _quiet():
        # digest: the bytes are the ones the caller vouches for
        if expected_digest is None:
            checks.append(("digest", "not run: no expected_digest given"))
        else:
            got = _digest(a.planes)
            if got == expected_digest:
                checks.append(("digest", "passed"))
            else:
                checks.append(("digest", "failed"))
                refuted.append(f"the planes hash to {got.hex()}, not the expected "
                               f"{expected_digest.hex()} (the bytes changed)")
        canon, how = _to_canonical(a)
        # roundtrip: the claimed placement can hold exactly these bytes
        if canon is None:
            checks.append(("roundtrip", f"not run: {how}"))
        elif how == "identity":
            checks.append(("roundtrip", "passed: the claimed placement is the canonical order"))
        else:
            try:
                canon_words = _canonical_roles(a)
                back = relayout(canon, **{r: cur[r] for r in canon_words
                                                if cur[r] not in (canon_words[r], UNSPECIFIED)})
                same = all(memoryview(x) == memoryview(y) for x, y in zip(back.planes, a.planes))
            except GritError as e:
                same, why = False, str(e).splitlines()[0]
            else:
                why = "relayout back to the claimed placement does not reproduce the bytes"
            if same:
                checks.append(("roundtrip", "passed"))
            else:
                checks.append(("roundtrip", "failed"))
                refuted.append(why)
        # content: level-2 invariants, read in canonical order
        d = a.descriptor
        if not (d.flags & D.F_SPARSE and d.sp_order == D.SPORDER_ASC_LSB):
            checks.append(("content", "not applicable: no content invariant "
                           "(dense planes or SPORDER_UNORDERED metadata)"))
        elif canon is None:
            checks.append(("content", f"not run: {how}"))
        else:
            det = diagnose(canon.descriptor, canon.shape, canon.planes, level=2)
            if det.status == Status.OK:
                checks.append(("content", "passed: metadata ascending under the claim"))
            else:
                checks.append(("content", "failed"))
                refuted.append(det.message)
        # reference: the proof
        n_diff = 0
        if want is None:
            checks.append(("reference", "not run: no reference given"))
        elif canon is None:
            checks.append(("reference", f"not run: {how}"))
        else:
            got_v = decode(canon)
            eq = _bits_equal(got_v, want)
            n_diff = int(eq.size - np.count_nonzero(eq))
            if n_diff == 0:
                checks.append(("reference", f"passed: {eq.size} elements bit-identical"))
            else:
                checks.append(("reference", "failed"))
                i = np.unravel_index(int(np.flatnonzero(~eq.reshape(-1))[0]), eq.shape)
                gv = np.float32(got_v[i])
                rv = np.float32(want[i])
                refuted.append(
                    f"{n_diff} of {eq.size} elements differ from the reference; first at "
                    f"{tuple(int(j) for j in i)}: {float(gv)!r} (0x{int(gv.view(np.uint32)):08x})"
                    f" vs {float(rv)!r} (0x{int(rv.view(np.uint32)):08x})")

    claim = _role_text(roles)
    ran = "; ".join(f"{n}: {o}" for n, o in checks)
    if refuted:
        likely = _likelier(a, roles, want) if (want is not None and n_diff) else None
        lines = list(refuted) + [f"checks: {ran}"]
        if likely:
            lines.append(f"Likeliest cause: the bytes are {likely}; the assumption named the "
                         "wrong placement.")
            lines.append(f"Fix:  claim {likely} instead, or relayout the source into "
                         f"{claim} before claiming it")
        raise GritLayoutError(detail=Detail(
            status=Status.PLACEMENT_UNKNOWN, field="placement",
            expected=claim, actual="refuted",
            message=f"verify_placement: the bytes are not in the claimed placement ({claim}).",
            lines=tuple(lines)))
    if want is None or canon is None:
        missing = ("no reference was given" if want is None
                   else "the bytes could not be read under the claim")
        raise GritLayoutError(detail=Detail(
            status=Status.PLACEMENT_UNKNOWN, field="placement",
            expected=claim, actual="unproven",
            message=(f"verify_placement: cannot prove {claim}: {missing}; the checks that ran "
                     "can refute a placement but not prove one, so NOTE_ASSUMED stays set."),
            lines=(f"checks: {ran}",
                   "A dense placement leaves no content signature: every byte string is a "
                   "valid plane in every placement.",
                   f"Fix:  x = grit.verify_placement(x, {_call_args(roles)}, "
                   "reference=<values, or a GritArray in the canonical placement>)")))
    out = _reclaim(a, {}, a.descriptor.note & ~D.NOTE_ASSUMED)
    rec = AuditRecord(
        timestamp=_now(), gid_before=a.gid_base32, gid_after=out.gid_base32,
        placement_from=claim, placement_to=claim,
        reason=f"proved: decode under {claim} equals the reference",
        source_location=_caller_location(), event="verify",
        producer=out.descriptor.producer, checks=tuple(checks))
    _append(rec, assumed=False)
    return out
