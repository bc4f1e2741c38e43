"""Checkpoint-wide byte checks of sharded safetensors checkpoints: the index
(``model.safetensors.index.json``) against every shard header, and the
shards' bytes against each other.

Each shard's own header checks (a span that differs from numel × item size,
overlaps, gaps and trailing bytes, tensors past the end of the file: S125–
S129) are the per-file analyses'; what is checked here needs every shard at
once:

* the index against the shards (S150–S155): a shard it names that is not
  there, a tensor it maps to a shard that does not hold it, a shard tensor it
  does not list, ``metadata.total_size`` against the sum of the tensors' byte
  spans;
* the shards against each other (S154, S156, S157): a tensor in two shards,
  short shards counted over the checkpoint (how many, the bytes missing, the
  tensors cut), members missing from a ``-NNNNN-of-MMMMM`` series.

A GGUF model in llama.cpp's gguf-split shards (``PREFIX-0000i-of-0000N.gguf``)
is checked as ``grit.io.gguf_split`` checks it before reading it
(:func:`grit.io.gguf_split.faults`: the split entries, the shards missing,
the counts, the numbers against the names, a tensor in two shards, the
tensors in all), each fault a finding (S160–S165) instead of a refusal.

A checkpoint is the shards :func:`grit.scan.collect.checkpoint_of` groups,
with the index beside them (found whether a shard, the folder or the index
itself was named).  Shards are read once, by the per-file pass; only their
header spans are kept here (:class:`Shard`).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import AbstractSet

from .analyses import Context
from .findings import Finding
from ..io.gguf_split import Fault, ShardFacts, series, series_faults
from ..io.gguf_split import facts as shard_facts
from ..io.location import Location
from .collect import Input, ShardIndex, checkpoint_of, index_of, is_shard, read_index

__all__ = ["Shard", "Checkpoints"]

_MEMBER = re.compile(r"^(?P<stem>.+)-(?P<i>\d{3,6})-of-(?P<n>\d{3,6})(?P<ext>\.[A-Za-z]+)$")
#: tensor names quoted in one message
SHOWN = 3


@dataclass
class Shard:
    """What the checkpoint checks need of one scanned safetensors file: its
    size, data bytes and the declared [begin, end) of each tensor (None: the
    file could not be read)."""

    path: str
    avail: int = 0
    spans: dict[str, tuple[int, int]] | None = None
    #: file tensor -> the GRIT tensor whose plane it is (an index may name either)
    owner: dict[str, str] = field(default_factory=dict)

    def holds(self, name: str) -> bool:
        """Whether ``name`` is a tensor of the file or a GRIT tensor of it."""
        return name in (self.spans or {}) or name in self.grit

    @property
    def grit(self) -> set[str]:
        return set(self.owner.values())

    def unit(self, t: str) -> str:
        """The name a file tensor is listed under: its GRIT tensor's, or its own."""
        return self.owner.get(t, t)

    @property
    def missing(self) -> int:
        """Bytes the header places past the end of the file."""
        ends = [e for _, e in (self.spans or {}).values()]
        return max(0, max(ends, default=0) - self.avail)


def _key(path: str) -> str:
    return Location.of(path).key


#: the missing shards an S161's detail lists (``missing_count`` counts them all)
SHOWN_MISSING = 1000
#: each kind of split GGUF fault (grit.io.gguf_split.FAULTS), its finding code
SPLIT_CODES = {"entries": "S160", "missing": "S161", "count": "S162", "name": "S163",
               "number": "S163", "duplicate": "S164", "total": "S165"}


def _split_finding(ctx: Context, fault: Fault) -> None:
    text = fault.text
    if fault.kind == "missing":
        nums = fault.detail["numbers"]
        text = (f"split model: shard{'s' if len(nums) > 1 else ''} "
                f"{', '.join(map(str, nums[:20]))}{' …' if len(nums) > 20 else ''} of "
                f"{fault.detail['count']} {'are' if len(nums) > 1 else 'is'} missing: "
                f"{_names(fault.detail['missing'])}")
    detail = {"fault": fault.kind, **fault.detail}
    for k in ("missing", "numbers"):          # a series of up to 65535: the first ones
        if len(detail.get(k, ())) > SHOWN_MISSING:
            detail[k] = detail[k][:SHOWN_MISSING]
            detail["missing_count"] = len(fault.detail[k])
    ctx.add(SPLIT_CODES[fault.kind], fault.path, fault.tensor, text, detail=detail)


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


@dataclass
class Checkpoints:
    """The safetensors files a scan read and the shard indexes it found."""

    indexes: list[str] = field(default_factory=list)
    shards: dict[str, Shard] = field(default_factory=dict)     # realpath -> shard
    #: realpath -> a scanned GGUF file's path and split facts (None: unreadable)
    gguf: dict[str, tuple[str, ShardFacts | None]] = field(default_factory=dict)

    def note(self, inp: Input) -> None:
        """Keep the spans of one scanned safetensors file, the split facts
        of one GGUF file."""
        if inp.file.format == "gguf":
            got = inp.gguf
            self.gguf[_key(inp.file.path)] = (
                inp.file.path, shard_facts(got.file) if got is not None and inp.file.parsed
                else None)
            return
        if inp.file.format != "safetensors":
            return
        f = inp.safetensors
        sh = Shard(inp.file.path)
        if f is not None and inp.file.parsed:
            sh.avail = f.avail
            sh.spans = {n: e.span for n, e in f.entries.items() if e.span is not None}
            sh.owner = dict(f.doc.claimed)
        self.shards[_key(inp.file.path)] = sh

    # -----------------------------------------------------------------------

    def check(self, ctx: Context) -> None:
        """Add the checkpoint-wide findings to ``ctx``."""
        groups: dict[str, list[Shard]] = {}
        for sh in self.shards.values():
            groups.setdefault(_key(checkpoint_of(sh.path)), []).append(sh)
        indexes: dict[str, str] = {}          # checkpoint key -> index path
        for p in self.indexes:
            indexes.setdefault(_key(p[:-len(".index.json")]), p)
        for k, members in groups.items():
            beside = index_of(members[0].path)
            # only a sharded checkpoint has an index: a lone model.safetensors is
            # what loaders read, never an index beside it (which is not looked for,
            # so a server refusing that name is no finding)
            if k in indexes or not any(is_shard(m.path) for m in members):
                continue
            if Location.of(beside).is_file(beside):
                indexes[k] = beside
        done: set[str] = set()
        for k, ip in sorted(indexes.items()):
            done.add(k)
            self._indexed(ctx, ip, groups.get(k, []))
        for k, members in sorted(groups.items()):
            if k in done:
                continue
            if len(members) > 1 or _MEMBER.match(os.path.basename(members[0].path)):
                self._shards(ctx, checkpoint_of(members[0].path), members)
        self._splits(ctx)

    def _splits(self, ctx: Context) -> None:
        """The GGUF files, grouped by their split series, each group
        checked as one split model (grit.io.gguf_split.series_faults):
        S160–S165."""
        read = {path: fa for path, fa in self.gguf.values()}
        for group in series(read):
            for fault in series_faults([(p, read[p]) for p in group]):
                _split_finding(ctx, fault)

    def _indexed(self, ctx: Context, ip: str, members: list[Shard]) -> None:
        folder = Location.of(ip)
        try:
            idx = read_index(ip)
        except OSError as e:
            ctx.add("S150", ip, None, f"cannot read the shard index: {e.strerror or e}")
            idx = None
        except ValueError as e:
            ctx.add("S150", ip, None, f"not a shard index: {e}")
            idx = None
        named: dict[str, Shard | None] = {}       # shard file name -> the scanned shard
        if idx is not None:
            for fname in sorted(set(idx.weight_map.values())):
                named[fname] = self.shards.get(_key(folder.sibling(fname)))
        shards = list({_key(s.path): s for s in
                       [s for s in named.values() if s is not None] + members}.values())
        shards.sort(key=lambda s: s.path)
        reported: set[str] = set()
        if idx is not None:
            reported = self._against_index(ctx, idx, folder, named, shards)
        self._shards(ctx, ip, shards, reported)

    def _against_index(self, ctx: Context, idx: ShardIndex, folder: Location,
                       named: dict[str, Shard | None], shards: list[Shard]) -> set[str]:
        """The index against the shards; the shard files it names that are
        not there (reported here, not again as series members)."""
        ip = idx.path
        absent: set[str] = set()
        by_shard: dict[str, list[str]] = {}
        for t, fname in idx.weight_map.items():
            by_shard.setdefault(fname, []).append(t)
        holders: dict[str, list[str]] = {}      # tensor -> the shards holding it
        for s in shards:
            for t in set(s.spans or {}) | s.grit:
                holders.setdefault(t, []).append(s.path)
        for fname, tensors in sorted(by_shard.items()):
            if not folder.exists(fname):
                ctx.add("S151", ip, None,
                        f"the index maps {len(tensors)} tensors to {fname!r}, which is not "
                        f"there: {_names(tensors)}",
                        detail={"shard": fname, "tensors": len(tensors)})
                absent.add(fname)
                continue
            s = named.get(fname)
            if s is None or s.spans is None:
                continue               # not scanned, or unreadable (its own finding)
            for t in tensors:
                if not s.holds(t):
                    where = holders.get(t)
                    ctx.add("S152", ip, t,
                            f"the index maps tensor {t!r} to {fname!r}, whose header has no "
                            "such tensor" + (f"; it is in {os.path.basename(where[0])!r}"
                                             if where else "; no shard holds it"),
                            detail={"shard": fname, "found_in": where or []})
        wm = idx.weight_map
        for s in shards:
            fname = os.path.basename(s.path)
            unlisted = {s.unit(t) for t in s.spans or {}
                        if t not in wm and s.unit(t) not in wm}
            for t in sorted(unlisted):
                ctx.add("S153", s.path, t,
                        f"tensor {t!r} of {fname!r} is not in the index's weight_map: "
                        "loaders never read it", detail={"index": ip})
        if idx.total_size is not None and named and all(
                s is not None and s.spans is not None for s in named.values()):
            total = sum(e - b for s in named.values() if s is not None
                        for b, e in (s.spans or {}).values())
            if total != idx.total_size:
                ctx.add("S155", ip, None,
                        f"metadata.total_size = {idx.total_size}, but the tensors of the "
                        f"{len(named)} shards span {total} bytes ({total - idx.total_size:+d})",
                        detail={"field": "metadata.total_size", "expected": total,
                                "actual": idx.total_size})
        return absent

    def _shards(self, ctx: Context, where: str, shards: list[Shard],
                reported: AbstractSet[str] = frozenset()) -> None:
        """The checks across one checkpoint's shards (``where`` names the
        checkpoint in the findings; ``reported``: absent shard files the
        index's findings named already)."""
        seen: dict[str, str] = {}
        for s in sorted(shards, key=lambda s: s.path):
            for t in sorted({s.unit(t) for t in s.spans or {}}):
                first = seen.setdefault(t, s.path)
                if first != s.path:
                    ctx.add("S154", s.path, t,
                            f"tensor {t!r} is in {os.path.basename(first)!r} and in "
                            f"{os.path.basename(s.path)!r}",
                            detail={"shards": [first, s.path]})
        short = [s for s in shards if s.spans is not None and s.missing]
        if short:
            total = sum(s.missing for s in short)
            per = [(os.path.basename(s.path), s.missing,
                    sorted(t for t, (_, e) in (s.spans or {}).items() if e > s.avail))
                   for s in short]
            lines = tuple(f"{n}: {m} bytes missing; cut: {_names(ts)}" for n, m, ts in per)
            # named by its first short shard (a file that exists; the
            # checkpoint's own name, model.safetensors, may name none)
            root = Finding("S156", min(s.path for s in short), None,
                           f"{len(short)} of {len(shards)} shards are short: {total} bytes "
                           f"missing in all, {sum(len(ts) for _, _, ts in per)} tensors cut"[:300],
                           lines,
                           {"shards": [{"shard": n, "missing": m, "tensors": ts}
                                       for n, m, ts in per], "missing": total,
                            "checkpoint": where})
            _cut_tensors(ctx, root, short)
            ctx.keep(root)
        self._series(ctx, where, shards, reported)

    def _series(self, ctx: Context, where: str, shards: list[Shard],
                reported: AbstractSet[str]) -> None:
        members = [(s, _MEMBER.match(os.path.basename(s.path))) for s in shards]
        got = [(s, m) for s, m in members if m is not None]
        if not got:
            return
        counts = sorted({int(m["n"]) for _, m in got})
        if len(counts) > 1:
            ctx.add("S157", where, None,
                    f"the shards disagree on how many there are: -of-{counts} "
                    f"({_names([os.path.basename(s.path) for s, _ in got])})",
                    detail={"counts": counts})
            return
        s0, m0 = got[0]
        n, width = counts[0], len(m0["i"])
        folder = Location.of(s0.path)
        absent = []
        for i in range(1, n + 1):
            name = f"{m0['stem']}-{i:0{width}d}-of-{m0['n']}{m0['ext']}"
            if name not in reported and not folder.exists(name):
                absent.append(name)
        if absent:
            ctx.add("S157", where, None,
                    f"{len(absent)} of the {n} shards of the series are not in the folder: "
                    f"{_names(absent)}", detail={"absent": absent, "count": n})


#: the per-shard findings of a tensor the end of its shard cut off
_CUT = frozenset({"S127", "S101"})


def _cut_tensors(ctx: Context, root: Finding, short: list[Shard]) -> None:
    """One root cause, one finding: the short shards' own findings of the
    tensors their ends cut (S127; S101 for a GRIT tensor whose plane was cut)
    become the S156's consequences (grit.scan.causes)."""
    cut: dict[str, set[str]] = {}
    for sh in short:
        names = {t for t, (_, e) in (sh.spans or {}).items() if e > sh.avail}
        cut[sh.path] = names | {sh.owner[t] for t in names if t in sh.owner}
    kept = []
    for f in ctx.findings:
        if f.code in _CUT and f.tensor in cut.get(f.file or "", ()):
            root.consequences.append(f)
        else:
            kept.append(f)
    ctx.findings[:] = kept
