"""The analyses of ``grit scan``, over the files :mod:`grit.scan.collect` read.

Per file (one file's planes mapped at a time): the container's problems and
the §7.3 level-1 check of every GRIT tensor against its on-disk plane
lengths (``structural``), recognised and ggml-typed tensors (``inferred``,
``inexpressible``); with ``--deep``, :mod:`grit.scan.deep` then runs the
level-2/3 checks.
Across files: ``cross-file`` gid disagreement, grade ``drift`` per
checkpoint and role, and ``escape-hatch`` exposure.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .. import descriptor as D
from ..array import GritArray
from ..boundary import diagnose
from ..errors import Detail, GritError, Status
from ..explain import diff, render, to_dict
from ..fingerprint import base32_decode, base32_encode, gid as _gid
from ..grade import lookup_grade
from ..io.gguf import (companion_names, KV_DIGEST, GGUFContents, Inexpressible, block_span,
                       nvfp4_scale_disagreements)
from ..io.problems import Problem, ProblemKind as PK
from ..io.recognise import Recognised, recognise_file
from ..io.safetensors import CheckFailed, SafetensorsFile, grit_array
from . import causes as _causes
from . import config as _cfg
from .collect import Input
from .findings import CHECK_CODES, MAX_PER_CODE, Finding

__all__ = ["Tensor", "Context", "file_analyses", "cross_file", "drift",
           "escape_hatch", "role_of", "RECIPES", "checkpoint_contracts"]

#: tensor names shown per finding in the human report; JSON carries every tensor
SHOW_NAMES = 3


@dataclass
class Tensor:
    """One GRIT tensor as scan sees it (descriptor, shape, where, how)."""

    file: str
    checkpoint: str
    name: str
    desc: D.Descriptor
    shape: tuple[int, ...]
    inferred: bool = False
    ok: bool = False                       # level 1 passed on the on-disk lengths
    planes: Any = None                     # --deep: four buffers, the array, or a
    #                                        function building them (None: failed)
    expected_digest: bytes | None = None
    gid: str | None = None
    ggml_type: str | None = None           # GGUF: the tensor's ggml block type
    file_type: int | None = None           # GGUF: the file's general.file_type
    grade: Any = None                      # the Grade its file made known (None: unknown)


class Context:
    """Per-scan accumulators shared by the analyses."""

    def __init__(self, deep: bool):
        self.deep = deep
        self.tensors: list[Tensor] = []
        self.findings: list[Finding] = []
        #: the grades the files made known, by id: each file's grades are known
        #: only while it is read (grit.grade.grade_scope); the cross-file
        #: analyses label grades from here
        self.grades: dict[int, Any] = {}
        #: per checkpoint, its modules and per-tensor scales (grit.scan.config)
        self.checkpoints: dict[str, _cfg.Checkpoint] = {}
        #: GGUF NVFP4 companion scales of one value: (checkpoint, file, tensor, value)
        self.companion_scales: list[tuple[str, str, str, float]] = []
        self._listed: dict[tuple, int] = {}
        self._last: dict[tuple, Finding] = {}

    def add(self, *a, **kw) -> None:
        self.keep(Finding(*a, **kw))

    def keep(self, f: Finding) -> None:
        """List ``f``, or, past :data:`MAX_PER_CODE` findings of its code in
        its file, count it (and what it already counted) in the last listed
        one's ``omitted``."""
        key = (f.file, f.code)
        last = self._last.get(key)
        if last is not None and self._listed[key] >= MAX_PER_CODE:
            last.omitted += 1 + f.omitted
            return
        self._listed[key] = self._listed.get(key, 0) + 1
        self._last[key] = f
        self.findings.append(f)

    def detail(self, code: str, path: str, name: str | None, det: Detail,
               extra: Sequence[str] = (), omitted: int = 0,
               facts: Mapping[str, Any] | None = None) -> None:
        """A finding from a failed check's §7.5 detail (and ``facts`` of scan's)."""
        self.add(code, path, name, det.message, tuple(det.lines) + tuple(extra),
                 {**{k: v for k, v in det.to_dict().items() if k not in ("message", "lines")},
                  **(facts or {})},
                 kind=det.status if code == "S501" else None, omitted=omitted)

    def checked(self, path: str, name: str, det: Detail, extra: Sequence[str] = (),
                omitted: int = 0, inferred_from: str | None = None) -> None:
        """A level-1 failure (S101–S103 by its status); ``inferred_from``: the
        convention a descriptor scan inferred was inferred from."""
        self.detail(CHECK_CODES[det.status], path, name, det, extra, omitted,
                    None if inferred_from is None else {"inferred_from": inferred_from})

    def merge(self, other: "Context") -> None:
        """Take in ``other``'s accumulators (one file's, checked on its own
        Context) as if its analyses had run on this Context: findings through
        :meth:`keep`, grades first seen first, checkpoint records extended in
        the order the files come."""
        for f in other.findings:
            self.keep(f)
        self.tensors.extend(other.tensors)
        for k, g in other.grades.items():
            self.grades.setdefault(k, g)
        for name, ck in other.checkpoints.items():
            mine = self.checkpoints.get(name)
            if mine is None:
                self.checkpoints[name] = ck
                continue
            mine.files.extend(ck.files)
            for pre, leaves in ck.modules.items():
                mine.modules.setdefault(pre, {}).update(leaves)
            mine.scalars.update(ck.scalars)
        self.companion_scales.extend(other.companion_scales)

    def finish(self, t: Tensor) -> None:
        g = lookup_grade(t.desc.grade_id)
        if g is not None:
            t.grade = g
            self.grades.setdefault(g.id, g)
            try:
                t.gid = base32_encode(_gid(g.canonical, t.desc.to_bytes(), t.shape))
            except GritError:
                t.gid = None
        self.tensors.append(t)


def _names(names: Sequence[str]) -> str:
    if len(names) == 1:
        return names[0]
    shown = ", ".join(names[:SHOW_NAMES])
    return f"{len(names)} tensors: {shown}" + (", …" if len(names) > SHOW_NAMES else "")


def _parse_digest(text) -> bytes | None:
    if not isinstance(text, str):
        return None
    t = text.strip()
    if re.fullmatch(r"[0-9a-fA-F]{32}", t):
        return bytes.fromhex(t)
    try:
        b = base32_decode(t)
    except (GritError, ValueError):
        return None
    return b if len(b) == 16 else None


def _digests(keys: Iterable[Any], value: Callable[[str], Any]) -> dict[str, Any]:
    """The ``grit.digest.<tensor>`` entries of a metadata map / KV section
    (only those values are read)."""
    return {k[len(KV_DIGEST):]: value(k) for k in keys
            if isinstance(k, str) and k.startswith(KV_DIGEST)}


def _digest(ctx: Context, t: Tensor, recorded: Mapping[str, Any]) -> None:
    if t.name in recorded:
        t.expected_digest = _parse_digest(recorded[t.name])
        if t.expected_digest is None:
            ctx.add("S114", t.file, t.name,
                    f"metadata grit.digest.{t.name} is not a 16-byte digest "
                    "(26 base32 or 32 hex digits)")


#: container problems -> finding codes (UNREADABLE is the file's own finding)
_PROBLEM_CODES = {
    PK.BAD_ENTRY: "S121", PK.BAD_DTYPE: "S122", PK.BAD_SHAPE: "S123",
    PK.BAD_OFFSETS: "S124", PK.SIZE: "S125", PK.OVERLAP: "S126", PK.PAST_END: "S127",
    PK.BAD_METADATA: "S128", PK.COVERAGE: "S129", PK.ANNOTATION_NOT_JSON: "S115",
    PK.BAD_ANNOTATION: "S116",
    PK.BAD_GRADE: "S112", PK.BAD_DESCRIPTOR: "S111", PK.MISSING_TENSOR: "S113",
}
#: GGUF: a tensor's size is fixed by its ggml type, so one that cannot be read as
#: that type, or whose bytes are cut off, is an input that could not be read
_GGUF_CODES = {**_PROBLEM_CODES, PK.BAD_TENSOR: "S806", PK.PAST_END: "S807",
               PK.OVERLAP: "S141", PK.MISALIGNED: "S142", PK.OFFSET: "S143"}


def _problem(ctx: Context, path: str, p: Problem, codes: Mapping[PK, str]) -> None:
    if p.kind is PK.CHECK_FAILED:
        ctx.checked(path, p.tensor, p.error.detail, omitted=p.omitted)
        return
    ctx.add(codes[p.kind], path, p.tensor, p.message, p.lines, p.facts(), omitted=p.omitted)


# ---------------------------------------------------------------------------
# per file


def file_analyses(ctx: Context, inp: Input) -> list[Tensor]:
    """The structural, inferred and inexpressible findings of one parsed
    file, and its GRIT tensors (appended to ``ctx.tensors`` and returned)."""
    first = len(ctx.tensors)
    c = inp.container
    if c is not None:
        FILE_ANALYSES[c.name](ctx, inp)
    return ctx.tensors[first:]


def _safetensors(ctx: Context, inp: Input) -> None:
    f: SafetensorsFile = inp.safetensors  # type: ignore[assignment]
    rec, path, doc = inp.file, inp.file.path, inp.safetensors.doc
    owner = dict(doc.claimed)          # file tensor -> the GRIT tensor it belongs to
    recognised: list[Recognised] = []
    if not doc.present:                # no GRIT metadata: recognise the wild
        recognised = _recognise(f, inp.config)
        for r in recognised:
            if r.kind == "inferred":
                owner.update((p[1], r.name) for p in r.planes
                             if p is not None and p[0] != "const")
    _cfg.record(ctx.checkpoints, rec.checkpoint or path, path,
                {n: (e.dtype, e.shape) for n, e in f.entries.items()
                 if e.dtype is not None and e.shape is not None},
                inp.config, lambda tn: f.tensor_values(tn, 16))
    claimed = set(owner)
    past_end: list[Problem] = []
    for p in f.problems:
        # GRIT planes are measured by the size equations, not as plain tensors
        # (a span that cannot be located at all stays a finding: load refuses it)
        if p.kind is PK.PAST_END and p.tensor in claimed:
            past_end.append(p)
            continue
        _problem(ctx, path, p, _PROBLEM_CODES)
    n_inf = sum(r.kind == "inferred" for r in recognised)
    rec.tensors = len([n for n in f.entries if n not in claimed]) + len(doc.declared) + n_inf
    rec.grit_tensors = len(doc.declared) + n_inf
    trunc = f.truncation()
    recorded = _digests(f.metadata, f.metadata.get)
    for name, g in doc.tensors.items():
        t = Tensor(path, rec.checkpoint, name, g.desc, g.shape)
        if g.payload is not None:
            try:
                a = grit_array(f, g)
            except GritError as e:
                det = e.detail
                planes = None
            else:
                det, planes = Detail(status=Status.OK, message="Ok"), list(a.planes)
        else:
            det = diagnose(g.desc, g.shape, [f.on_disk(tn) for tn in g.planes], level=1)
            planes = [f.plane(tn) for tn in g.planes] if ctx.deep else None
        if det is None:
            ctx.add("S104", path, name, "the level-1 check could not run")
        elif det.status != Status.OK:
            ctx.checked(path, name, det, trunc if det.status == Status.SIZE_MISMATCH else ())
        else:
            t.ok = True
            t.planes = planes if ctx.deep else None
        _digest(ctx, t, recorded)
        ctx.finish(t)
    _recognised(ctx, inp, recognised, trunc)
    # a plane whose declared span runs past the end while the bytes present
    # satisfy the size equations: load refuses the span, so scan reports it
    ok = {t.name for t in ctx.tensors if t.file == path and t.ok}
    for p in past_end:
        if owner[p.tensor] in ok:
            _problem(ctx, path, p, _PROBLEM_CODES)


def _recognise(f: SafetensorsFile, config) -> list[Recognised]:
    """Run grit.io.recognise over a safetensors header without GRIT metadata."""
    return recognise_file(f, config)


def _recognised(ctx: Context, inp: Input, recognised: list[Recognised], trunc) -> None:
    f, path, ckpt = inp.safetensors, inp.file.path, inp.file.checkpoint
    inferred: dict[tuple[str, str], list[Recognised]] = {}
    inexpr: dict[tuple, list[Recognised]] = {}
    unclaimed: list[Recognised] = []
    more: dict[tuple[str, str], list[tuple[Recognised, tuple]]] = {}
    for r in recognised:
        for fnd in r.findings:
            more.setdefault((fnd[0], fnd[1]), []).append((r, fnd))
        if r.kind == "unrecognised":
            unclaimed.append(r)
        elif r.kind == "inferred":
            sizes = r.plane_lengths(f.on_disk)
            det = diagnose(r.descriptor, r.shape, sizes, level=1)
            t = Tensor(path, ckpt, r.name, r.descriptor, tuple(r.shape), inferred=True)
            if det.status != Status.OK:
                ctx.checked(path, r.name, det,
                            (f"descriptor inferred from {r.convention}: grade {r.grade}",)
                            + (trunc if det.status == Status.SIZE_MISMATCH else ()),
                            inferred_from=r.convention)
            else:
                t.ok = True
                if ctx.deep:      # built when --deep comes to it, one tensor at a time
                    t.planes = lambda inp=inp, r=r: _inferred_planes(ctx, inp, r)
            ctx.finish(t)
            inferred.setdefault((r.convention, r.grade), []).append(r)
        else:
            inexpr.setdefault((r.convention, r.section, r.reason, r.lines), []).append(r)
    for (conv, grade), rs in sorted(inferred.items()):
        names = [r.name for r in rs]
        notes: list[str] = []
        for r in rs:
            for n in r.notes:
                if n not in notes:
                    notes.append(n)
        lines = (f"grade {grade}",) + rs[0].lines + tuple(notes[:4]) + (
            (f"… {len(notes) - 4} more notes in detail.notes",) if len(notes) > 4 else ())
        ctx.add("S601", path, _names(names),
                f"{len(names)} {conv} tensor(s): descriptor inferred from the tensor layout "
                "(no GRIT metadata in the file)", lines,
                {"convention": conv, "grade": grade, "tensors": names,
                 "planes": {r.name: [None if p is None else list(p) for p in r.planes]
                            for r in rs},
                 "notes": {r.name: list(r.notes) for r in rs if r.notes}})
    for (conv, section, reason, lines), rs in sorted(inexpr.items(),
                                                     key=lambda kv: (kv[0][0], kv[0][1] or "",
                                                                     kv[0][2] or "")):
        names = [r.name for r in rs]
        # what a convention claimed and could not read is no recognised weight (S705)
        ctx.add("S705" if conv == "unrecognised" else "S701", path, _names(names),
                f"{len(names)} {conv} tensor(s) are not GRIT v1 arrays and were not checked",
                (f"Reason ({section}): {reason}",) + tuple(lines),
                {"convention": conv, "section": section, "reason": reason,
                 "arithmetic": list(lines), "tensors": names,
                 "files": sorted({t for r in rs for t in r.tensors})})
    if unclaimed:
        names = [r.name for r in unclaimed]
        ctx.add("S704", path, _names(names),
                f"{len(names)} module(s) hold tensors that look quantised and no convention "
                "claims them: not checked",
                tuple(line for r in unclaimed[:4] for line in r.lines)
                + ((f"… {len(unclaimed) - 4} more modules in detail.tensors",)
                   if len(unclaimed) > 4 else ()),
                {"tensors": names, "files": sorted({t for r in unclaimed for t in r.tensors}),
                 "lines": {r.name: list(r.lines) for r in unclaimed}})
    for (code, _key), hits in sorted(more.items()):
        r0, (_, _, message, lines, detail) = hits[0]
        names = [r.name for r, _ in hits]
        ctx.add(code, path, _names(names),
                message + (f" ({len(hits)} tensors)" if len(hits) > 1 else ""),
                lines + ((f"… {len(hits) - 1} more in detail.tensors",) if len(hits) > 1
                         else ()),
                {**detail, "tensors": names, "each": [d for _, (_, _, _, _, d) in hits]})


def _inferred_planes(ctx: Context, inp: Input, r: Recognised) -> list | None:
    """--deep: the planes of an inferred tensor, through ``r.array`` on views
    of the file's read-only map (converted and synthesised planes are built,
    file-backed ones are not copied); None, with a finding, where it fails."""
    path = inp.file.path
    try:
        return list(r.array(inp.safetensors.view).planes)
    except GritError as e:
        det = e.detail
        if det is None:
            ctx.add("S503", path, r.name, str(e).splitlines()[0])
        else:
            ctx.detail("S501", path, r.name, det)
    except (ValueError, TypeError, IndexError, KeyError, MemoryError, OverflowError) as e:
        ctx.add("S503", path, r.name,
                f"level-3 probes could not run: {type(e).__name__}: {e}"[:300])
    return None


def _companions(ctx: Context, path: str, got: GGUFContents, ctx_ckpt: str = "") -> None:
    """S603/S604 for the NVFP4 tensors' companion scales, and under --deep
    S505 for scale bytes ggml and GRIT read differently."""
    companions = getattr(got.tensors, "companions", {})
    missing: dict[str, list[str]] = {}
    elsewhere: list[tuple[str, str]] = []
    for name, c in companions.items():
        if c.attached and c.scale is not None and c.k1 == 0:
            # one scale for the whole tensor: its value, read from the companion
            # itself (small), not from the attached array's planes (building
            # those would read the whole tensor)
            whole = got.tensors.model if got.tensors.model is not None else got.tensors
            v = np.asarray(whole.get(c.scale), dtype="<f4").reshape(-1)
            if v.size == 1:
                ctx.companion_scales.append((ctx_ckpt, path, c.scale, float(v[0])))
        if c.scale is not None and c.scale != companion_names(name)[0]:
            elsewhere.append((name, c.scale))
        if not c.attached:
            missing.setdefault(c.reason if c.scale is None else f"{c.scale}: {c.reason}",
                               []).append(name)
        elif c.rounding[0]:
            differ, pairs = c.rounding
            ctx.add("S604", path, name,
                    f"NVFP4 tensor with companion {c.scale}: {differ} of {pairs} (scale value, "
                    "E4M3 scale, E2M1 code) combinations decode 1 ulp apart from ggml's "
                    "dequantize × scale",
                    ("GRIT: f32(f32(s1·s0)·e) (§8.1); ggml: f32(f32(s0·e)·s1)",),
                    {"companion": c.scale, "k1": c.k1, "differ": differ, "pairs": pairs})
    for reason, names in sorted(missing.items()):
        ctx.add("S603", path, _names(names),
                f"{len(names)} NVFP4 tensor(s) decoded without a companion scale ({reason})",
                ("llama.cpp's converter writes <base>.scale (F32), and leaves it out when the "
                 "scale is 1.0",), {"tensors": names, "reason": reason})
    if elsewhere:
        names = [n for n, _ in elsewhere]
        ctx.add("S605", path, _names(names),
                f"{len(names)} NVFP4 tensor(s) have their companion scale under a name "
                "llama.cpp does not load",
                tuple(f"{c} found; llama.cpp loads {companion_names(n)[0]} (optional: when "
                      "absent it runs the tensor without its per-tensor scale)"
                      for n, c in elsewhere[:4])
                + ((f"… {len(elsewhere) - 4} more in detail.tensors",)
                   if len(elsewhere) > 4 else ()),
                {"tensors": names, "companions": {n: c for n, c in elsewhere},
                 "expected": {n: companion_names(n)[0] for n, _ in elsewhere}})
    if not ctx.deep:
        return
    for name, gt in got.tensors.ggml_types.items():
        v = got.tensors.get(name)
        if gt != "NVFP4" or not isinstance(v, GritArray) or name in got.annotated:
            continue
        n, total = nvfp4_scale_disagreements(v)
        if n:
            ctx.add("S505", path, name,
                    f"{n} of {total} E4M3 block scales have bit 7 set or are 0x7F: ggml "
                    "(UE4M3) and GRIT (E4M3) decode their blocks differently",
                    (), {"scales": n, "of": total})


def _gguf(ctx: Context, inp: Input) -> None:
    got: GGUFContents = inp.gguf  # type: ignore[assignment]
    rec, path = inp.file, inp.file.path
    for p in got.problems:
        _problem(ctx, path, p, _GGUF_CODES)
    ft = got.kv.value("general.file_type")      # a split model's: its first shard's
    file_type = ft if isinstance(ft, int) and not isinstance(ft, bool) else None
    recorded = _digests(got.kv.fields, got.kv.value)
    lost = [p for p in got.problems
            if p.kind in (PK.BAD_TENSOR, PK.PAST_END, PK.CHECK_FAILED) and p.tensor]
    failed = {p.tensor for p in lost}
    # (the reader counted, without keeping, the failures past its cap)
    rec.tensors = (len(got.tensors) + len(failed - set(got.tensors))
                   + sum(p.omitted for p in lost))
    inferred: dict[str, list[str]] = {}
    inexpr: dict[tuple[str, str], list[str]] = {}
    for name, v in got.tensors.items():
        gt = got.tensors.ggml_types.get(name)
        if isinstance(v, GritArray):
            rec.grit_tensors += 1
            planes: Any = None
            if ctx.deep:            # a remote file's blocks are streamed, not held
                span = block_span(got, name)
                planes = v if span is None else [span, b"", b"", b""]
            t = Tensor(path, rec.checkpoint, name, v.descriptor, tuple(v.shape),
                       inferred=name not in got.annotated, ok=True,
                       planes=planes, ggml_type=gt, file_type=file_type)
            if t.inferred:
                inferred.setdefault(gt, []).append(name)
            _digest(ctx, t, recorded)
            ctx.finish(t)
        elif isinstance(v, CheckFailed):
            det = v.error.detail
            if det is not None:
                ctx.checked(path, name, det)
            else:
                ctx.add("S104", path, name, str(v.error).splitlines()[0])
        elif isinstance(v, Inexpressible):
            inexpr.setdefault((v.ggml_type, v.reason), []).append(name)
    for gt, names in sorted(inferred.items()):
        g = lookup_grade(got.tensors[names[0]].descriptor.grade_id)
        ctx.add("S602", path, _names(names),
                f"{len(names)} {gt} tensor(s): descriptor inferred from the ggml block type "
                "(no GRIT annotation in the file)",
                (f"grade {g.canonical if g else '?'}",),
                {"ggml_type": gt, "tensors": names,
                 "grade": g.canonical if g else None})
    _companions(ctx, path, got, rec.checkpoint or path)
    for (gt, reason), names in sorted(inexpr.items()):
        ctx.add("S702", path, _names(names),
                f"{len(names)} {gt} tensor(s) are not GRIT v1 arrays and were not checked",
                (f"Reason: {reason}",), {"ggml_type": gt, "reason": reason, "tensors": names})


# ---------------------------------------------------------------------------
# across files


def cross_file(ctx: Context) -> None:
    """The same tensor name with different gids in two files."""
    by_name: dict[str, list[Tensor]] = {}
    for t in ctx.tensors:
        if t.gid is not None:
            by_name.setdefault(t.name, []).append(t)
    for name in sorted(by_name):
        ts = by_name[name]
        if len({t.file for t in ts}) < 2 or len({t.gid for t in ts}) < 2:
            continue
        ref = ts[0]
        done: set[str] = {ref.gid}
        for t in ts[1:]:
            if t.gid in done:
                continue
            done.add(t.gid)
            ga, gb = ref.grade, t.grade
            message = f"tensor {name!r} has gid {t.gid} here and {ref.gid} in {ref.file}"
            sides = {"a": {"file": ref.file, "gid": ref.gid}, "b": {"file": t.file, "gid": t.gid}}
            try:
                ex = diff((ref.desc, ga, ref.shape, f"{ref.file}:{name}"),
                          (t.desc, gb, t.shape, f"{t.file}:{name}"))
            except GritError as e:
                ctx.add("S201", t.file, name, message,
                        (f"(no field diff: {str(e).splitlines()[0]})",), sides)
                continue
            lines = [f"A {ref.file}  gid {ref.gid}", f"B {t.file}  gid {t.gid}"]
            # the gids are on the A/B lines; the canonical strings repeat the grade keys
            lines += [fd.line() for fd in ex.differences if fd.field not in ("gid", "canonical")]
            lines.append(f"verdict: {ex.verdict}")
            ctx.add("S201", t.file, name, message, tuple(lines),
                    {**sides, "explain": to_dict(ex), "explain_text": render(ex, color=False)})


def _grade_label(ctx: Context, gid_: int) -> str:
    g = ctx.grades.get(gid_)
    if g is None:
        return f"0x{gid_:016X}"
    return g.name or g.canonical


_INDEX = re.compile(r"^\d+$")
_SUFFIX = ("weight", "qweight", "bias")


def role_of(name: str) -> str:
    """The logical role of a tensor name: its layer indices removed.

    ``blk.3.attn_q.weight`` → ``attn_q``; ``model.layers.3.self_attn.q_proj.weight``
    → ``self_attn.q_proj``; ``blk.3.ffn_down_exps.7.weight`` → ``ffn_down_exps``.
    A name without a numeric component is its own role (``lm_head.weight`` →
    ``lm_head``)."""
    parts = name.split(".")
    idx = [i for i, p in enumerate(parts) if _INDEX.match(p)]
    rest = [p for p in (parts[idx[0] + 1:] if idx else parts) if not _INDEX.match(p)]
    if len(rest) > 1 and rest[-1] in _SUFFIX:
        rest = rest[:-1]
    return ".".join(rest) or name


#: llama.cpp's mixed quantisation recipes (llama_ftype, the GGUF general.file_type;
#: gguf.LlamaFileType): name, the ggml types the recipe assigns, and what it mixes.
#: Every K-quant falls back to a legacy type of the same width when a row is not a
#: multiple of 256 (Q2_K/Q3_K → IQ4_NL, Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0), so
#: the fallbacks belong to the recipe too.
_FALLBACK = {"Q2_K": "IQ4_NL", "Q3_K": "IQ4_NL", "Q4_K": "Q5_0", "Q5_K": "Q5_1",
             "Q6_K": "Q8_0"}


def _recipe(name: str, ktypes: Sequence[str], mix: str) -> tuple[str, frozenset, str]:
    return name, frozenset(ktypes) | {_FALLBACK[k] for k in ktypes}, mix


RECIPES: dict[int, tuple[str, frozenset, str]] = {
    10: _recipe("Q2_K", ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"),
                "Q2_K with Q3_K/Q4_K/Q5_K for attn_v/ffn_down/attn_output and Q6_K for output"),
    11: _recipe("Q3_K_S", ("Q3_K", "Q4_K", "Q5_K", "Q6_K"),
                "Q3_K with Q4_K/Q5_K for some layers and Q6_K for output"),
    12: _recipe("Q3_K_M", ("Q3_K", "Q4_K", "Q5_K", "Q6_K"),
                "Q3_K with Q4_K/Q5_K for attn_v/ffn_down/attn_output and Q6_K for output"),
    13: _recipe("Q3_K_L", ("Q3_K", "Q4_K", "Q5_K", "Q6_K"),
                "Q3_K with Q5_K for attn_v/ffn_down/attn_output and Q6_K for output"),
    14: _recipe("Q4_K_S", ("Q4_K", "Q5_K", "Q6_K"),
                "Q4_K with Q5_K for the first attn_v/ffn_down layers and Q6_K for output"),
    15: _recipe("Q4_K_M", ("Q4_K", "Q5_K", "Q6_K"),
                "Q4_K with Q6_K for half of the attn_v/ffn_down layers (Q5_0/Q8_0 where a row "
                "is not a multiple of 256)"),
    16: _recipe("Q5_K_S", ("Q5_K", "Q6_K"), "Q5_K with Q6_K for output"),
    17: _recipe("Q5_K_M", ("Q5_K", "Q6_K"),
                "Q5_K with Q6_K for half of the attn_v/ffn_down layers"),
    18: _recipe("Q6_K", ("Q6_K",), "Q6_K (Q8_0 where a row is not a multiple of 256)"),
}


def _by_design(ts: Sequence[Tensor]) -> tuple[str, frozenset, str] | None:
    """The llama.cpp recipe that explains a role's grade mix: every tensor comes
    from a GGUF declaring the same known mixed file_type, and every ggml type
    is one that recipe assigns.  None otherwise."""
    fts = {t.file_type for t in ts}
    if len(fts) != 1:
        return None
    r = RECIPES.get(next(iter(fts)))      # type: ignore[arg-type]
    if r is None or not all(t.ggml_type in r[1] for t in ts):
        return None
    return r


def drift(ctx: Context) -> None:
    """Per checkpoint: a role carrying several grades (S301, or S302 when a
    declared recipe explains it), and roles using different grades (S303)."""
    by_ckpt: dict[str, list[Tensor]] = {}
    for t in ctx.tensors:
        by_ckpt.setdefault(t.checkpoint, []).append(t)
    for ckpt in sorted(by_ckpt):
        roles: dict[str, dict[int, list[Tensor]]] = {}
        for t in by_ckpt[ckpt]:
            roles.setdefault(role_of(t.name), {}).setdefault(t.desc.grade_id, []).append(t)
        single: dict[int, list[str]] = {}
        schemes: set[Any] = set()
        for role in sorted(roles):
            grades = roles[role]
            if len(grades) == 1:
                single.setdefault(next(iter(grades)), []).append(role)
                schemes.add(_scheme(next(iter(grades.values()))))
                continue
            _role_drift(ctx, ckpt, role, grades)
        if len(single) > 1 and len(schemes) > 1:
            lines = tuple(f"{_grade_label(ctx, g)}: " + ", ".join(rs[:6]) + (", …" if len(rs) > 6
                                                                        else "")
                          for g, rs in sorted(single.items(), key=lambda kv: -len(kv[1])))
            files = sorted({t.file for t in by_ckpt[ckpt]})
            ctx.add("S303", files[0] if len(files) == 1 else ckpt, None,
                    f"{len(single)} grades across roles in one checkpoint (mixed precision "
                    "by role)", lines,
                    {"scope": "artifact", "checkpoint": ckpt,
                     "grades": {f"0x{g:016X}": {"grade": _grade_label(ctx, g), "roles": rs}
                                for g, rs in single.items()}})


_K0 = re.compile(r"\bk0=\d+")


def _scheme(ts: Sequence[Tensor]) -> Any:
    """What one role's tensors (of one grade) were quantised with: the
    grade, except that a per-channel scheme (one group per row, k0 = the row
    length) is one scheme whatever the row length — a per-channel config
    over layers of different in_features gives grades that differ in k0
    alone, which is no mix of precisions (S303)."""
    t = ts[0]
    if t.grade is not None and all(x.shape and x.desc.k0 == x.shape[-1] for x in ts):
        return _K0.sub("k0=row", t.grade.canonical)
    return t.desc.grade_id


def _role_drift(ctx: Context, ckpt: str, role: str, grades: dict[int, list[Tensor]]) -> None:
    parts = sorted(grades.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    lines = tuple(f"{_grade_label(ctx, g)} (0x{g:016X}): {len(ts)} × "
                  + _names([t.name for t in ts]).split(": ", 1)[-1]
                  for g, ts in parts)
    everyone = [t for ts in grades.values() for t in ts]
    files = sorted({t.file for t in everyone})
    where = files[0] if len(files) == 1 else ckpt
    recipe = _by_design(everyone)
    detail: dict[str, Any] = {"scope": "role", "checkpoint": ckpt, "role": role,
                              "grades": {f"0x{g:016X}": {"grade": _grade_label(ctx, g),
                                                          "tensors": [t.name for t in ts]}
                                         for g, ts in parts}}
    if recipe is None:
        ctx.add("S301", where, role,
                f"role {role!r} carries {len(grades)} grades in one checkpoint "
                "(half-converted?)", lines, detail)
        return
    name, _, mix = recipe
    used = sorted({t.ggml_type for t in everyone})
    file_type = everyone[0].file_type
    detail["recipe"] = {"file_type": file_type, "name": name, "ggml_types": used}
    ctx.add("S302", where, role,
            f"role {role!r} carries {len(grades)} grades ({'/'.join(used)}): mixed by "
            f"design: llama.cpp {name} mixes {mix}",
            lines + (f"general.file_type = {file_type} (MOSTLY_{name}); every ggml type here "
                     "is one the recipe assigns.",), detail)


def escape_hatch(ctx: Context) -> None:
    """Tensors carrying NOTE_ASSUMED, by producer tag and file."""
    groups: dict[tuple[int, str], list[Tensor]] = {}
    for t in ctx.tensors:
        if t.desc.note & D.NOTE_ASSUMED:
            groups.setdefault((t.desc.producer, t.file), []).append(t)
    for (prod, path), ts in sorted(groups.items()):
        names = [t.name for t in ts]
        ctx.add("S401", path, _names(names),
                f"producer tag {prod} (0x{prod:02X}): {len(ts)} tensor(s) carry NOTE_ASSUMED — "
                "a placement was asserted with assume_placement, not verified",
                ("Fix: grit.verify_placement(x, p) reads the bytes, proves the claim and clears "
                 "the flag.",),
                {"producer": prod, "tensors": names})


class _Found:
    """What a check adds, kept whole (no per-file cap) until its root causes
    are grouped."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def add(self, *a, **kw) -> None:
        self.findings.append(Finding(*a, **kw))


def checkpoint_contracts(ctx: Context) -> None:
    """Per checkpoint: the quantisation config against the tensors
    (S310–S319, one finding per root cause: grit.scan.causes) and the parts
    runtimes fuse (S320, S321); grit.scan.config."""
    found = _Found()
    _cfg.config_vs_tensors(found, ctx.checkpoints)
    ckpt: dict[str, tuple[str | None, frozenset[str]]] = {}
    for name, ck in ctx.checkpoints.items():
        fs = frozenset(ck.files)
        ckpt[name] = (name, fs)
        for p in fs:
            ckpt.setdefault(p, (name, fs))
    config, taken = _causes.group(found.findings, ctx.findings,
                                  lambda where: ckpt.get(where or "", (where, frozenset())))
    if taken:
        ctx.findings[:] = [f for f in ctx.findings if id(f) not in taken]
    for f in config:
        ctx.keep(f)
    _cfg.fused_grades(ctx)
    _cfg.fused_scales(ctx, ctx.checkpoints, ctx.companion_scales)


#: each container's per-file analyses (a container grit reads and scan does
#: not analyse is a KeyError: a bug, never a silent skip)
FILE_ANALYSES: dict[str, Callable[[Context, Input], None]] = {
    "safetensors": _safetensors, "gguf": _gguf}
