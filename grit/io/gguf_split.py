"""A GGUF model in llama.cpp's gguf-split shards, read as one file.

gguf-split (and gguf-py's GGUFWriter with ``split_max_tensors`` /
``split_max_size``) writes a model as ``PREFIX-00001-of-0000N.gguf`` …
``PREFIX-0000N-of-0000N.gguf`` (llama.cpp's ``llama_split_path``:
``"%s-%05d-of-%05d.gguf"``, numbered from 1).  Every shard carries the KV
entries ``split.no`` (u16, numbered from 0), ``split.count`` (u16, N) and
``split.tensors.count`` (i32, the model's tensors in all shards); the
model's other KV entries are in the first shard only, and each shard's
tensors lie in its own data section.  llama.cpp loads the shards as one
model, and so does :func:`read_split` here.

Given any one shard, or a folder holding them, :func:`shards` finds the
others by name, and :func:`read_split` walks each and checks what the files
say before the model is read: ``split.count`` a positive integer no larger
than a model's tensors allow (``split.tensors.count``, itself within
``GRIT_MAX_TENSORS``), every shard named once and present, each shard's
``split.no`` the number in its name and its ``split.count`` and
``split.tensors.count`` the first shard's, no tensor name in two shards,
and the shards' tensors ``split.tensors.count`` in all.  Any disagreement
is a :class:`~grit.errors.GritUsageError` naming the shard.  A file without
``split.count`` (or with ``split.count`` 1) is a model of one file.

The checks are one generator, :func:`faults`, over what each shard says
(:class:`ShardFacts`): :func:`shards` raises its first fault (``grit
convert``, ``grit.load`` through :func:`load`), ``grit scan`` reports every
one (S160–S165) for the files :func:`series` groups, in any location
(:func:`series_faults`), and ``grit info`` lists them.  :func:`views` gives
each shard of a sound split model as its part of the model read as one file
(what ``grit scan`` checks file by file); :func:`remote_folder` and
:func:`choose` say which file an ``hf://`` folder stands for.
"""
from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from ..errors import GritError, GritUsageError
from .gguf import GGUFContents, GGUFTensors, loaded, read_files
from .gguf_file import GGUFFile, read_gguf
from .gguf_writer import gguf_py
from .location import Location
from .remote import beside_signed
from .problems import raise_first
from .source import limit

__all__ = ["SPLIT_NO", "SPLIT_COUNT", "SPLIT_TENSORS", "SHARD_NAME", "Split", "shard_name",
           "gguf_files", "shards", "shard_counts", "read_split", "load_split", "write_outline",
           "ShardFacts", "facts", "Fault", "FAULTS", "faults", "choose", "load",
           "series", "series_faults", "remote_folder", "views", "MAX_PROBED"]

#: the KV entries gguf-split writes in every shard (gguf-py's ``Keys.Split``)
SPLIT_NO = "split.no"
SPLIT_COUNT = "split.count"
SPLIT_TENSORS = "split.tensors.count"
#: a shard's file name (``llama_split_path``): prefix, number from 1, count
SHARD_NAME = re.compile(r"(?s)(.+)-([0-9]{5})-of-([0-9]{5})\.gguf")
#: the largest split.count (a u16)
MAX_SPLIT = 65535
#: the most shards of a series asked for one by one beside a file whose
#: folder cannot be listed (an https URL); a longer series is not asked for
MAX_PROBED = 256


def shard_name(prefix: str, no: int, count: int) -> str:
    """The file name of shard ``no`` (from 0) of ``count`` (llama.cpp's
    ``llama_split_path``)."""
    return f"{prefix}-{no + 1:05d}-of-{count:05d}.gguf"


def gguf_files(folder: str) -> list[str]:
    """The ``.gguf`` files directly in ``folder``, by name."""
    try:
        names = sorted(os.listdir(folder))
    except OSError as e:
        raise GritUsageError(f"{folder}: cannot be listed: {e.strerror or e}") from None
    return [os.path.join(folder, n) for n in names
            if n.lower().endswith(".gguf") and os.path.isfile(os.path.join(folder, n))]


def _int(f: GGUFFile, key: str, lo: int, hi: int) -> int:
    """The integer KV entry ``key`` of ``f``, refused unless in lo..hi."""
    fld = f.fields.get(key)
    v = None if fld is None else f.value(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise GritUsageError(f"{f.path}: {key} is "
                             f"{'absent' if fld is None else 'not an integer'}: the file is "
                             "not a shard of a split GGUF model")
    if not lo <= v <= hi:
        raise GritUsageError(f"{f.path}: {key} = {v} is outside {lo}..{hi}")
    return v


@dataclass(frozen=True)
class Split:
    """The shards of one model, in ``split.no`` order (one path: a model of
    one file), each walked (``files``)."""

    paths: tuple[str, ...]
    files: tuple[GGUFFile, ...]


def _walked(path: str) -> GGUFFile:
    f = read_gguf(path)
    if not f.parsed:
        raise_first(f.problems)
    return f


def shard_counts(f: GGUFFile) -> tuple[int, int, int]:
    """(split.no, split.count, split.tensors.count) of a shard, each
    checked against the bounds the others allow."""
    total = _int(f, SPLIT_TENSORS, 0, limit("tensors"))
    count = _int(f, SPLIT_COUNT, 1, min(MAX_SPLIT, total + 1))
    no = _int(f, SPLIT_NO, 0, count - 1)
    return no, count, total


@dataclass(frozen=True)
class ShardFacts:
    """What the checks across a split model's shards need of one walked
    GGUF file: its path, its tensors' names, whether it carries
    ``split.count`` (``split``) and, where its split entries can be read,
    (split.no, split.count, split.tensors.count) — else ``bad`` says why
    not (the message :func:`shard_counts` refuses them with, less the
    path)."""

    path: str
    names: frozenset[str]
    split: bool
    counts: tuple[int, int, int] | None
    bad: str | None = None


def facts(f: GGUFFile) -> ShardFacts:
    """The :class:`ShardFacts` of a walked GGUF file."""
    try:
        counts: tuple[int, int, int] | None = shard_counts(f)
        bad = None
    except GritUsageError as e:
        text = str(e)
        counts, bad = None, text.removeprefix(f"{f.path}: ")
    return ShardFacts(f.path, frozenset(f.names), f.fields.get(SPLIT_COUNT) is not None,
                      counts, bad)


#: the kinds of :class:`Fault`
FAULTS = ("entries", "name", "missing", "count", "number", "duplicate", "total")


@dataclass(frozen=True)
class Fault:
    """One way the shards of a split model disagree (:func:`faults`):
    ``kind`` (one of :data:`FAULTS`), ``path`` the shard it was found in,
    ``text`` what is wrong (``message`` names the shard first), ``tensor``
    a tensor it concerns, ``detail`` its facts."""

    kind: str
    path: str
    text: str
    tensor: str | None = None
    detail: dict = field(default_factory=dict)

    @property
    def message(self) -> str:
        return f"{self.path}: {self.text}"


def _shown(names: list[str], n: int = 5) -> str:
    return ", ".join(names[:n]) + (" …" if len(names) > n else "")


def faults(anchor: ShardFacts, *, facts_of: Callable[[str], ShardFacts | None],
           present: Callable[[str], bool], sibling: Callable[[str], str],
           name_of: Callable[[str], str] = os.path.basename) -> Iterator[Fault]:
    """The faults of the split model ``anchor`` is a shard of, in the order
    they are found (see the module docstring): its split entries, its name
    against them, the shards missing, then shard by shard in ``split.no``
    order its entries against the anchor's and its name, its tensors
    against the shards before it, and the tensors held against
    ``split.tensors.count``.  Nothing when ``anchor`` carries no
    ``split.count`` (a model of one file).

    ``facts_of(path)`` walks another shard (None: it could not be read,
    reported elsewhere, and the total is not checked); ``present(path)``
    says whether a shard is there; ``sibling(name)`` is the path of the
    file ``name`` beside the anchor; ``name_of(path)`` a path's file name.
    A generator: a caller that stops at the first fault walks no shard
    after it."""
    path = anchor.path
    if not anchor.split:
        return
    if anchor.counts is None:
        yield Fault("entries", path, anchor.bad or "")
        return
    no, count, total = anchor.counts
    if count == 1:
        if total != len(anchor.names):
            yield Fault("total", path, f"{SPLIT_TENSORS} = {total}, but the file holds "
                                       f"{len(anchor.names)} tensors",
                        detail={"expected": total, "actual": len(anchor.names)})
        return
    m = SHARD_NAME.fullmatch(name_of(path))
    if m is None or (int(m.group(2)), int(m.group(3))) != (no + 1, count):
        yield Fault("name", path, f"{SPLIT_NO} = {no} and {SPLIT_COUNT} = {count}: the "
                                  f"shard's name must end in -{no + 1:05d}-of-{count:05d}.gguf",
                    detail={"split.no": no, "split.count": count})
        return
    names = [shard_name(m.group(1), i, count) for i in range(count)]
    paths = [path if i == no else sibling(n) for i, n in enumerate(names)]
    missing = [i for i, p in enumerate(paths) if i != no and not present(p)]
    if missing:
        gone = [names[i] for i in missing]
        yield Fault("missing", path, f"shard(s) of the split model missing ({len(missing)} of "
                                     f"{count}): {_shown(gone)}",
                    detail={"missing": gone, "numbers": [i + 1 for i in missing],
                            "count": count})
    seen: dict[str, str] = {}
    held, whole, over = 0, not missing, False
    base = name_of(path)
    for i, p in enumerate(paths):
        if i in missing:
            continue
        f = anchor if i == no else facts_of(p)
        if f is None:
            whole = False
            continue
        if f.counts is None:
            yield Fault("entries", p, f.bad or "")
        elif f.counts[0] != i:
            yield Fault("number", p, f"{SPLIT_NO} = {f.counts[0]}, but the file is named as "
                                     f"shard {i + 1} of {count} ({SPLIT_NO} {i})",
                        detail={"split.no": f.counts[0], "named": i})
        elif f.counts[1:] != (count, total):
            yield Fault("count", p, f"{SPLIT_COUNT} = {f.counts[1]} and {SPLIT_TENSORS} = "
                                    f"{f.counts[2]}; the shard {base} says {count} and {total}",
                        detail={"split.count": f.counts[1], "split.tensors.count": f.counts[2],
                                "expected": [count, total], "anchor": path})
        for t in sorted(f.names):
            first = seen.setdefault(t, p)
            if first != p:
                yield Fault("duplicate", p, f"tensor {t!r} is also in the shard "
                                            f"{name_of(first)}", t,
                            {"shards": [first, p]})
        held += len(f.names)
        if held > total and not over:
            over = True
            yield Fault("total", p, f"the shards up to this one hold {held} tensors; "
                                    f"{SPLIT_TENSORS} says {total}",
                        detail={"expected": total, "actual": held})
    if whole and not over and held != total:
        yield Fault("total", paths[0], f"the {count} shards hold {held} tensors; "
                                       f"{SPLIT_TENSORS} says {total}",
                    detail={"expected": total, "actual": held})


def series(paths: Iterable[str]) -> list[list[str]]:
    """The GGUF files ``paths`` grouped into split series: the files named
    ``PREFIX-0000i-of-0000N.gguf`` with one folder, prefix and N together
    (in name order), any other file alone; the groups in the order their
    first file comes in ``paths``."""
    out: dict[tuple[str, ...], list[str]] = {}
    for p in paths:
        loc = Location.of(p)
        name = posixpath.basename(loc.bare)
        m = SHARD_NAME.fullmatch(name)
        key = (Location.of(loc.sibling(m.group(1))).key, m.group(3)) if m else (loc.key,)
        out.setdefault(key, []).append(p)
    return [sorted(g, key=lambda p: posixpath.basename(Location.of(p).bare))
            for g in out.values()]


def series_faults(members: Sequence[tuple[str, ShardFacts | None]]) -> Iterator[Fault]:
    """The faults (:func:`faults`) of one series of GGUF files read
    already (:func:`series`; ``None``: a file that could not be read), in
    any location (local, https, hf://).  The anchor is the first file
    whose split entries can be read; where none can, each file carrying
    ``split.count`` is an ``entries`` fault; without ``split.count`` in
    any, a model of one file each, no fault.  A shard not among
    ``members`` is looked for beside the anchor (not beside a pre-signed
    URL, whose signature covers one object, nor beside an https URL for a
    series of over :data:`MAX_PROBED`: a shard not asked for is not
    claimed missing)."""
    split = [fa for _, fa in members if fa is not None and fa.split]
    anchor = next((fa for fa in split if fa.counts is not None), None)
    if anchor is None:
        for fa in split:
            yield Fault("entries", fa.path, fa.bad or "")
        return
    by_key = {Location.of(p).key: fa for p, fa in members}
    here = Location.of(anchor.path)

    unasked = not here.listable and anchor.counts[1] > MAX_PROBED

    def present(p: str) -> bool:
        # beside a pre-signed URL nothing is asked for, nor beside an https
        # URL for a series longer than MAX_PROBED: a shard not read is not
        # known to be absent (and the total is not checked)
        return Location.of(p).key in by_key or unasked or beside_signed(p) or here.exists(p)

    yield from faults(anchor, facts_of=lambda p: by_key.get(Location.of(p).key),
                      present=present,
                      sibling=here.sibling,
                      name_of=lambda p: posixpath.basename(Location.of(p).bare))


def choose(folder: str, names: Sequence[str]) -> str:
    """Which of the GGUF files ``names`` (file names, sorted) in ``folder``
    a folder stands for: its one file, or the first of the shards of one
    model; anything else a GritUsageError."""
    if not names:
        raise GritUsageError(f"{folder}: holds no .gguf file")
    if len(names) == 1:
        return names[0]
    named = [SHARD_NAME.fullmatch(n) for n in names]
    heads = {(m.group(1), m.group(3)) for m in named if m is not None}
    if None in named or len(heads) != 1:
        raise GritUsageError(
            f"{folder}: holds {len(names)} GGUF files that are not the shards of one model "
            f"(PREFIX-0000i-of-0000N.gguf): {_shown(list(names), 6)}")
    (prefix, n), = heads
    want = {shard_name(prefix, i, int(n)) for i in range(int(n))}
    if extra := sorted(set(names) - want):
        raise GritUsageError(f"{folder}: beside the shards of {prefix}-*-of-{n}.gguf lie "
                             f"other GGUF files: {', '.join(extra)}")
    return min(names)


def views(got: Sequence[GGUFContents]) -> list[GGUFContents] | None:
    """Each shard of a split model, read on its own (``got``: every
    shard's contents, in order), as its part of the model read as one
    file: its own tensors, read with the first shard's ``grit.*``
    annotations and each NVFP4 tensor paired with its companion scale in
    whichever shard holds it (``tensors.model``: the whole model's), its
    own walk's problems and those of its tensors (the first shard's also
    the model's), ``model`` the first shard (the model's KV entries).
    None where the files are not the sound shards of one model (one
    unreadable, a fault of :func:`series_faults`; a model of one file):
    each is then read as the file it is."""
    files = [g.file for g in got]
    if len(files) < 2 or not all(f.parsed for f in files) or \
            next(series_faults([(f.path, facts(f)) for f in files]), None) is not None or \
            any(f.fields.get(SPLIT_COUNT) is None for f in files):
        return None
    whole = read_files(files)
    added = whole.problems[sum(len(f.problems) for f in files):]
    every = set().union(*(f.names for f in files))
    out = []
    for i, f in enumerate(files):
        t = GGUFTensors()
        t.ggml_types, t.metadata, t.companions = {}, whole.tensors.metadata, {}
        t.model = whole.tensors
        for ti in f.tensors:
            if ti.name in whole.tensors:
                dict.__setitem__(t, ti.name, dict.__getitem__(whole.tensors, ti.name))
                t.ggml_types[ti.name] = whole.tensors.ggml_types[ti.name]
            if ti.name in whole.tensors.companions:
                t.companions[ti.name] = whole.tensors.companions[ti.name]
        mine = [p for p in added
                if p.tensor in f.names or (i == 0 and p.tensor not in every)]
        out.append(GGUFContents(f, t, [*f.problems, *mine], whole.annotated, files[0]))
    return out


def remote_folder(src: str) -> tuple[str, list[str]] | None:
    """Where ``src`` names a remote folder that can be listed (an
    ``hf://`` repository or a folder in one; an https URL names one file)
    holding ``.gguf`` files and no ``.safetensors`` file: the folder, at
    the commit its revision resolved to, and the GGUF file names in it
    (sorted); else None (also where the location cannot answer: the
    reader of ``src`` says why).  :func:`choose` tells which file the
    folder stands for."""
    loc = Location.of(src)
    if not loc.remote or not loc.listable:
        return None
    try:
        entry = loc.entry()
        if entry.what != "folder":
            return None
        folder = entry.at.path.rstrip("/") + "/"
        names = Location.of(folder).listing()
    except GritError:
        return None
    ggufs = [n for n in names if n.lower().endswith(".gguf")]
    if not ggufs or any(n.endswith(".safetensors") for n in names):
        return None
    return folder, ggufs


def shards(path: str, first: GGUFFile | None = None) -> Split:
    """The shards of the model ``path`` is a shard of, or whose shards the
    folder ``path`` holds (a folder holding one GGUF file that is no shard:
    that file), every one walked and checked against the others (module
    docstring; the first fault :func:`faults` finds is a GritUsageError).
    ``first``: ``path`` walked already."""
    if os.path.isdir(path):
        found = gguf_files(path)
        path = os.path.join(path, choose(path, [os.path.basename(p) for p in found]))
        first = None
    if first is None:
        first = _walked(path)
    walked = {path: first}

    def walk(p: str) -> ShardFacts:
        walked[p] = _walked(p)
        return facts(walked[p])

    anchor = facts(first)
    folder = os.path.dirname(path)
    for fault in faults(anchor, facts_of=walk, present=os.path.isfile,
                        sibling=lambda n: os.path.join(folder, n)):
        raise GritUsageError(fault.message)
    if anchor.counts is None or anchor.counts[1] == 1:
        return Split((path,), (first,))
    paths = sorted(walked, key=lambda p: shard_counts(walked[p])[0])     # split.no order
    return Split(tuple(paths), tuple(walked[p] for p in paths))


def read_split(path: str, *, lazy: bool = False) -> tuple[Split, GGUFContents]:
    """The model ``path`` is a shard of (or a file of, or whose shards a
    folder holds: :func:`shards`) read as one GGUF file
    (:func:`grit.io.gguf.read_files`), without the ``split.*`` KV entries."""
    s = shards(path)
    return s, _one_file(s, lazy)


def _one_file(s: Split, lazy: bool = False) -> GGUFContents:
    got = read_files(s.files, lazy=lazy)
    for k in (SPLIT_NO, SPLIT_COUNT, SPLIT_TENSORS):
        got.tensors.metadata.pop(k, None)
    return got


def load_split(path: str, *, lazy: bool = False, strict: bool = False) -> GGUFTensors:
    """:func:`read_split`'s tensors, the first problem raised (as
    :func:`grit.io.gguf.load`, ``strict`` as its)."""
    _, got = read_split(path, lazy=lazy)
    return loaded(got, strict=strict)


def load(path, *, strict: bool = False) -> GGUFTensors:
    """``grit.load`` of a GGUF file or a folder: a file carrying
    ``split.count`` (a shard of a split model, any one) or a folder of
    GGUF files (:func:`shards`: its one file, or the shards of one model)
    gives the model's tensors, every shard's, as :func:`load_split`; any
    other file :func:`grit.io.gguf.load`'s (the header walked once)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return load_split(path, strict=strict)
    f = read_gguf(path)
    if not f.parsed or f.fields.get(SPLIT_COUNT) is None:
        return loaded(read_files([f]), strict=strict)
    return loaded(_one_file(shards(path, first=f)), strict=strict)


def write_outline(s: Split, path: str) -> None:
    """Write ``path``: a GGUF file holding the first shard's KV entries
    (without ``split.*``) and every shard's tensor infos, in order, as the
    unsplit file's header would, its data section a hole (a sparse file:
    no disk used, never read) — for a reader of the KV entries and the
    tensor list alone, such as transformers' GGUF config and tokenizer
    reader, which must see the model as one file.  Written by gguf-py's
    GGUFWriter."""
    gguf = gguf_py()
    r = gguf.GGUFReader(s.paths[0])
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(path, arch)
    w.data_alignment = s.files[0].alignment
    for key, f in r.fields.items():
        if key.startswith(("GGUF.", "split.")) or key == "general.architecture":
            continue
        array = f.types[0] == gguf.GGUFValueType.ARRAY
        w.add_key_value(key, f.contents(), f.types[0], sub_type=f.types[-1] if array else None)
    end = 0
    for f in s.files:
        for t in f.tensors:
            w.add_tensor_info(t.name, t.shape, np.dtype(np.float32), t.nbytes,
                              raw_dtype=gguf.GGMLQuantizationType(t.type_id))
            end += t.nbytes + (-t.nbytes % w.data_alignment)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    start = os.path.getsize(path)
    os.truncate(path, start + (-start % w.data_alignment) + end)
