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
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np

from ..errors import GritUsageError
from .gguf import GGUFContents, GGUFTensors, read_files
from .gguf_file import GGUFFile, read_gguf
from .gguf_writer import gguf_py
from .problems import raise_first
from .source import limit

__all__ = ["SPLIT_NO", "SPLIT_COUNT", "SPLIT_TENSORS", "SHARD_NAME", "Split", "shard_name",
           "gguf_files", "shards", "shard_counts", "read_split", "load_split", "write_outline"]

#: the KV entries gguf-split writes in every shard (gguf-py's ``Keys.Split``)
SPLIT_NO = "split.no"
SPLIT_COUNT = "split.count"
SPLIT_TENSORS = "split.tensors.count"
#: a shard's file name (``llama_split_path``): prefix, number from 1, count
SHARD_NAME = re.compile(r"(?s)(.+)-([0-9]{5})-of-([0-9]{5})\.gguf")
#: the largest split.count (a u16)
MAX_SPLIT = 65535


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


def shards(path: str) -> Split:
    """The shards of the model ``path`` is a shard of, or whose shards the
    folder ``path`` holds (a folder holding one GGUF file that is no shard:
    that file), every one walked and checked against the others (module
    docstring)."""
    if os.path.isdir(path):
        found = gguf_files(path)
        if not found:
            raise GritUsageError(f"{path}: holds no .gguf file")
        named = [SHARD_NAME.fullmatch(os.path.basename(p)) for p in found]
        heads = {(m.group(1), m.group(3)) for m in named if m is not None}
        if len(found) == 1:
            path = found[0]
        elif None in named or len(heads) != 1:
            raise GritUsageError(
                f"{path}: holds {len(found)} GGUF files that are not the shards of one model "
                f"(PREFIX-0000i-of-0000N.gguf): {', '.join(os.path.basename(p) for p in found[:6])}"
                f"{' …' if len(found) > 6 else ''}")
        else:
            path = min(found)
            (prefix, n), = heads
            want = {shard_name(os.path.join(os.path.dirname(path), prefix), i, int(n))
                    for i in range(int(n))}
            if extra := sorted(set(found) - want):
                raise GritUsageError(f"{path}: beside the shards of {prefix}-*-of-{n}.gguf lie "
                                     f"other GGUF files: {', '.join(map(os.path.basename, extra))}")
    first = _walked(path)
    if first.fields.get(SPLIT_COUNT) is None:
        return Split((path,), (first,))
    no, count, total = shard_counts(first)
    if count == 1:
        if total != len(first.names):
            raise GritUsageError(f"{path}: {SPLIT_TENSORS} = {total}, but the file holds "
                                 f"{len(first.names)} tensors")
        return Split((path,), (first,))
    folder, base = os.path.split(path)
    m = SHARD_NAME.fullmatch(base)
    if m is None or (int(m.group(2)), int(m.group(3))) != (no + 1, count):
        raise GritUsageError(f"{path}: {SPLIT_NO} = {no} and {SPLIT_COUNT} = {count}: the "
                             f"shard's name must end in -{no + 1:05d}-of-{count:05d}.gguf")
    prefix = os.path.join(folder, m.group(1))
    paths = [shard_name(prefix, i, count) for i in range(count)]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise GritUsageError(f"{path}: shard(s) of the split model missing ({len(missing)} of "
                             f"{count}): {', '.join(map(os.path.basename, missing[:5]))}"
                             f"{' …' if len(missing) > 5 else ''}")
    files: list[GGUFFile] = []
    seen: dict[str, str] = {}
    held = 0
    for i, p in enumerate(paths):
        f = first if p == path else _walked(p)
        got = shard_counts(f)
        if got[0] != i:
            raise GritUsageError(f"{p}: {SPLIT_NO} = {got[0]}, but the file is named as "
                                 f"shard {i + 1} of {count} ({SPLIT_NO} {i})")
        if got[1:] != (count, total):
            raise GritUsageError(f"{p}: {SPLIT_COUNT} = {got[1]} and {SPLIT_TENSORS} = "
                                 f"{got[2]}; the shard {os.path.basename(path)} says {count} "
                                 f"and {total}")
        for name in sorted(f.names):
            if name in seen:
                raise GritUsageError(f"{p}: tensor {name!r} is also in the shard "
                                     f"{os.path.basename(seen[name])}")
            seen[name] = p
        held += len(f.names)
        if held > total:
            raise GritUsageError(f"{p}: the shards up to this one hold {held} tensors; "
                                 f"{SPLIT_TENSORS} says {total}")
        files.append(f)
    if held != total:
        raise GritUsageError(f"{paths[0]}: the {count} shards hold {held} tensors; "
                             f"{SPLIT_TENSORS} says {total}")
    return Split(tuple(paths), tuple(files))


def read_split(path: str, *, lazy: bool = False) -> tuple[Split, GGUFContents]:
    """The model ``path`` is a shard of (or a file of, or whose shards a
    folder holds: :func:`shards`) read as one GGUF file
    (:func:`grit.io.gguf.read_files`), without the ``split.*`` KV entries."""
    s = shards(path)
    got = read_files(s.files, lazy=lazy)
    for k in (SPLIT_NO, SPLIT_COUNT, SPLIT_TENSORS):
        got.tensors.metadata.pop(k, None)
    return s, got


def load_split(path: str, *, lazy: bool = False) -> GGUFTensors:
    """:func:`read_split`'s tensors, the first problem raised (as
    :func:`grit.io.gguf.load`)."""
    _, got = read_split(path, lazy=lazy)
    raise_first(got.problems)
    return got.tensors


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
