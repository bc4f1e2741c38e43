"""``grit convert``: a quantised checkpoint moved between conventions without
re-quantising, and ``grit verify``: the move proved from the two checkpoints.

:func:`convert` reads a safetensors checkpoint (one file, or a folder of
shards with their index; local, ``https://`` or ``hf://``) as GRIT arrays —
each weight a convention recognises (:mod:`grit.conventions`), the other
tensors as they are — and writes each shard again through the target
convention's ``emit``: element codes and scale bytes are moved, never
re-derived.  Where the two conventions' arithmetic differs (a per-tensor
scale stored as a divisor in one and a multiplier in the other), the
emitter says so and the proof counts the elements that decode differently.
Anything the target cannot hold is refused with the reason, before a byte
is written — or, with ``allow_requant``, re-quantised into the target's
nearest format (:func:`requant_grade`) and its error reported
(:func:`requant_error`).

Every file is checked before any is written, from the headers and the
small tensors (:func:`_plan`); that check fixes each output file's layout,
and each file is then written tensor by tensor at its offsets (``jobs`` at
a time), read back, and proved tensor by tensor, the mapped pages given
back as it goes (docs/convert.md, "How it runs").  The output is written
into a temporary folder beside ``dst`` and moved into place when complete;
the input is only read.  The files beside the model files (tokenizer,
generation config …) are copied; ``config.json`` keeps everything but the
source's quantisation entry, which the target's replaces.

The proof (``grit-proof.json``) holds, per weight, the source's and the
target's gid, grade and plane digests and the decode verdict, derived by
reading the written files back; its SHA-256 is recorded in the output's
``config.json``.  :func:`verify` derives every verdict again from the two
checkpoints alone and compares them with the proof.
"""
from __future__ import annotations

import errno
import hashlib
import json
import math
import mmap
import os
import re
import shutil
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

import numpy as np

from . import conventions
from ._files import fsync_path, loads_json, read_regular
from .array import GritArray, canonical, decode
from .codec.encode import encode
from .errors import GritError, GritUsageError
from .fingerprint import LANES, DigestStream, digest as _digest
from .fingerprint import digests_compared as _digests_compared
from .grade import GRADE_MXFP4, GRADE_NVF4, Grade
from .io import safetensors as _st
from .io.containers import by_suffix
from .io.hub import is_remote
from .io.location import Location
from .io.problems import raise_first
from .io.recognise import (MAX_CONFIG, SMALL_MAX, Deferred, read_config, read_remote_config,
                           read_sidecars, with_recognised)
from .io.safetensors import Layout, entries_of, layout
from .io.source import address_of

__all__ = ["convert", "verify", "PROOF_FILE", "ConvertReport", "VerifyReport", "TARGETS",
           "requant_grade", "requant_error", "quick_verdict", "verdict"]

#: the proof's file name in the output folder
PROOF_FILE = "grit-proof.json"
#: the proof's schema name
PROOF_SCHEMA = "grit-convert-proof/1"
#: the config.json key that records the proof's digest
PROOF_KEY = "grit_convert_proof"
#: the largest proof grit verify reads
MAX_PROOF = 256 << 20
#: what ``--to`` names -> the convention that writes it
TARGETS = {"compressed-tensors": "compressed-tensors", "modelopt": "modelopt",
           "gpt-oss": "gpt-oss", "grit": "grit"}
#: the files of a checkpoint folder that are its model, not copied as they are
_INDEX = ".safetensors.index.json"
#: the most tensors ``--jobs`` handles at once
MAX_JOBS = 256
#: bytes per ranged read when a remote model file is read
SPOOL_CHUNK = 16 << 20
#: bytes per pwrite call (a partial write continues from where it stopped)
_WRITE_STEP = 1 << 30
#: bytes compared per step when two planes are compared (bounded temporaries)
_CMP_STEP = 1 << 20
#: bytes of a mapped plane handled before its pages are given back
_RELEASE_STEP = 1 << 23
#: files copied from beside a remote model file named by URL (a repository
#: lists its files; a URL's folder cannot be listed)
BESIDE_REMOTE = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                 "generation_config.json", "chat_template.jinja", "chat_template.json",
                 "tokenizer.model", "vocab.json", "merges.txt", "preprocessor_config.json")
#: the largest file copied from beside a remote checkpoint
MAX_BESIDE = 1 << 30


@dataclass(frozen=True)
class Container:
    """The converter of a container the safetensors path of this module
    does not read or write, registered in :data:`CONTAINERS` by its tools
    module (GGUF: ``grit.convert_gguf``): the ``--to`` names it writes,
    whether it reads a source (``reads(src)``) or wrote an output
    (``wrote(dst)``), and its ``convert`` and ``verify``."""

    name: str
    targets: tuple[str, ...]
    reads: Callable[[str], bool]
    wrote: Callable[[str], bool]
    convert: Callable[..., "ConvertReport"]
    verify: Callable[..., "VerifyReport"]


#: container name -> its converter (:class:`Container`)
CONTAINERS: dict[str, Container] = {}


@dataclass
class ConvertReport:
    """What :func:`convert` wrote: the output folder, the proof, and per
    verdict how many weights have it."""

    dst: str
    proof: dict
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class VerifyReport:
    """What :func:`verify` found: one line per disagreement (empty: the proof
    holds) and the number of weights checked."""

    problems: list[str]
    checked: int

    @property
    def ok(self) -> bool:
        return not self.problems


# ---------------------------------------------------------------------------
# the checkpoint's files


def _model_files(src: str) -> tuple[str, list[str]]:
    """(folder, the safetensors files of the checkpoint ``src``: a file, or
    every ``*.safetensors`` directly in a folder, sorted), asked of its
    :class:`~grit.io.location.Location`: a local path, an ``https://`` URL of
    one safetensors file (a server lists no folder), or
    ``hf://ORG/REPO[@REV][/PATH]`` (a file or a folder of the repository,
    named at its commit)."""
    loc = Location.of(src if is_remote(src) else os.path.abspath(src))
    loc.admit()
    e = loc.entry()
    if e.what == "absent":
        raise GritUsageError(f"{src}: {e.absent}")
    if e.what == "file":
        name = Location.of(e.at.bare)
        if not name.path.lower().endswith(".safetensors"):
            raise GritUsageError(
                f"{src}: convert reads safetensors checkpoints (a .safetensors file or a "
                "folder of them" + (")" if loc.listable else
                                    "; by URL one file: name each shard, or use hf://)"))
        return name.folder, [e.at.path]
    folder = Location.of(e.at.path.rstrip("/") + "/")
    files = [folder.sibling(n) for n in folder.listing()
             if n.lower().endswith(".safetensors") and folder.is_file(n)]
    if not files:
        raise GritUsageError(f"{src}: no .safetensors files {e.folder}")
    return folder.folder.rstrip("/") or folder.folder, files


def _json(path: str) -> dict | None:
    """The JSON object in ``path`` (None: absent or not an object), read
    through the guarded open every file grit reads goes through: a regular
    file, bounded in size and nesting."""
    if not os.path.lexists(path):
        return None
    try:
        doc = loads_json(read_regular(path, MAX_CONFIG), path)
    except ValueError as e:
        raise GritUsageError(str(e)) from None
    return doc if isinstance(doc, dict) else None


def _beside(folder: str, files: list[str]) -> list[str]:
    """The regular files beside the model files that the output keeps as they
    are (not model files of any container, shard indexes, config.json, the
    sidecars the conventions read, or a proof): the folder's files, or
    beside an https URL (whose folder is not listed) the ones of
    :data:`BESIDE_REMOTE` that are there."""
    skip = {"config.json", PROOF_FILE} | set(conventions.sidecars())
    here = Location.of(folder.rstrip("/") + "/")
    names = [n for n in here.listing() if here.is_file(n)] if here.listable else \
        [n for n in BESIDE_REMOTE if here.exists(n)]
    return [n for n in sorted(names) if not (n in skip or n.endswith(_INDEX) or
                                             by_suffix(n) is not None)]


def _copy_beside(folder: str, name: str, work: str) -> None:
    """One file beside the checkpoint into the output, as it is (a remote
    one read in bounded steps, at most :data:`MAX_BESIDE` bytes)."""
    out = os.path.join(work, name)
    here = Location.of(folder.rstrip("/") + "/")
    if not here.remote:
        shutil.copyfile(here.sibling(name), out)
        return
    src = here.open(name)
    if src.size > MAX_BESIDE:
        raise GritUsageError(f"{folder}/{name}: {src.size} bytes, over the {MAX_BESIDE}-byte "
                             "limit of a file copied from beside a checkpoint")
    spool_into(out, src)


def _basename(f: str) -> str:
    """A model file's name (a URL's without its query)."""
    return f.split("?")[0].rstrip("/").rsplit("/", 1)[-1]


# ---------------------------------------------------------------------------
# the verdict of one weight


def _planes_digest(a: GritArray) -> str:
    return _digest(list(a.planes)).hex()


def _side(a: GritArray, digest: str | None = None) -> dict:
    """One side of a proof entry; ``digest``: the plane digest where it is
    known already (the same four planes byte for byte as an array digested)."""
    return {"gid": a.gid_base32, "grade": a.grade.canonical, "shape": list(a.shape),
            "digest": digest if digest is not None else _planes_digest(a)}


def _equal(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether two byte arrays are equal: compared as 64-bit words where both
    are aligned to them (a quarter of the time of bytes), the rest as bytes."""
    if x.size != y.size:
        return False
    n = x.size - x.size % 8
    if n and x.ctypes.data % 8 == 0 and y.ctypes.data % 8 == 0:
        return bool(np.array_equal(x[:n].view(np.uint64), y[:n].view(np.uint64))
                    and np.array_equal(x[n:], y[n:]))
    return bool(np.array_equal(x, y))


def _same_bytes(p, q) -> bool:
    """Whether two buffers hold the same bytes (compared a bounded step at a
    time: no temporary of a plane's size)."""
    x = np.frombuffer(p, np.uint8) if len(memoryview(p).cast("B")) else np.zeros(0, np.uint8)
    y = np.frombuffer(q, np.uint8) if len(memoryview(q).cast("B")) else np.zeros(0, np.uint8)
    if x.size != y.size:
        return False
    return all(_equal(x[i:i + _CMP_STEP], y[i:i + _CMP_STEP])
               for i in range(0, x.size, _CMP_STEP))


def _u8(p) -> np.ndarray:
    m = memoryview(p)
    if not m.nbytes:
        return np.empty(0, np.uint8)
    return np.frombuffer(m.cast("B") if m.ndim != 1 or m.format != "B" else m, np.uint8)


def _entry_bytes(buf) -> np.ndarray:
    """The bytes of a file entry's buffer (``entries_of``), as uint8 (a
    dtype the buffer protocol cannot name, bfloat16, included)."""
    if isinstance(buf, np.ndarray):
        return np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
    return _u8(buf)


def _digest_and_compare(a: GritArray, b: GritArray, release_a=None, release_b=None
                        ) -> tuple[str, bool]:
    """(``a``'s plane digest (§6.5), whether ``b``'s four planes as stored are
    ``a``'s bytes), in one pass over the planes a bounded step at a time
    (each step of ``a`` hashed while it is in the cache); ``release_a`` /
    ``release_b``: called with each part of a plane once it is done (the
    pages of a mapped file given back as the pass goes)."""
    ds = DigestStream()
    same = True
    for p, q in zip(a.planes, b.planes):
        x, y = _u8(p), _u8(q)
        ds.plane(x.size)
        same = same and x.size == y.size
        done = 0
        for i in range(0, x.size, _CMP_STEP):
            c = x[i:i + _CMP_STEP]
            ds.update(c)
            same = same and _equal(c, y[i:i + _CMP_STEP])
            if i + _CMP_STEP - done >= _RELEASE_STEP or i + _CMP_STEP >= x.size:
                for rel, z in ((release_a, x), (release_b, y)):
                    if rel is not None and z[done:i + _CMP_STEP].size:
                        rel(z[done:i + _CMP_STEP])
                done = i + _CMP_STEP
    return ds.digest().hex(), same


#: whether a file's weights are digested and compared in threads of their own
#: while the next file is written (the general path, each weight's digest and
#: comparison in the proof's pass, is the reference: tests/test_convert_tool.py
#: proves the two give the same proof)
_PROOF_AHEAD = True


class _Proofs:
    """The §6.5 plane digests of a written model file's source weights, each
    compared with the weight read back from the file in the same pass
    (:func:`grit.fingerprint.digests_compared`: a few interleaved FNV-1a
    streams per core, each one's bytes compared with the written ones in
    the same loop), in threads of their own while the next file is
    written; each part of a plane given back to its map (``release_a``,
    ``release_b``) as the rounds go.  :meth:`result` waits for them and
    gives (digest, same) by weight; :meth:`stop` makes them end at their
    next round."""

    def __init__(self, pairs: dict[str, tuple[GritArray, GritArray]], release_a, release_b,
                 workers: int) -> None:
        self.got: dict[str, tuple[str, bool]] = {}
        self.error: BaseException | None = None
        self._stop = threading.Event()
        names = list(pairs)
        self._threads = [threading.Thread(target=self._run, args=(names[w::workers], pairs,
                                                                  release_a, release_b),
                                          name="grit-digest", daemon=True)
                         for w in range(min(workers, len(names)))]
        for t in self._threads:
            t.start()

    def _run(self, names: list[str], pairs: dict[str, tuple[GritArray, GritArray]],
             release_a, release_b) -> None:
        def done(release):
            def give_back(chunk) -> None:
                if self._stop.is_set():
                    raise _Stopped
                if release is not None:
                    release(chunk)
            return give_back
        try:
            got = _digests_compared([pairs[n][0].planes for n in names],
                                    [pairs[n][1].planes for n in names], step=_RELEASE_STEP,
                                    done=done(release_a), done_other=done(release_b))
            self.got.update(zip(names, ((d.hex(), same) for d, same in got)))
        except _Stopped:
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the caller by result()
            self.error = e

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def result(self) -> dict[str, tuple[str, bool]]:
        for t in self._threads:
            t.join()
        if self.error is not None:
            raise self.error
        return self.got


class _Stopped(Exception):
    """A digest thread told to end."""


def _same_planes(p, q) -> bool:
    """Whether two arrays' four planes (as stored) are the same bytes."""
    return all(_same_bytes(x, y) for x, y in zip(p, q))


def verdict(src: GritArray, dst: GritArray) -> dict:
    """The decode verdict of a moved weight: ``bit-exact`` when the two
    decodes are equal bit for bit (NaN as NaN), else ``scalar-rounded`` with
    the count of elements that differ and the largest difference in binary32
    ulps."""
    x = np.ascontiguousarray(decode(src), np.float32).reshape(-1).view(np.int32)
    y = np.ascontiguousarray(decode(dst), np.float32).reshape(-1).view(np.int32)
    if x.shape != y.shape:
        return {"verdict": "shape-differs", "source_shape": list(src.shape),
                "target_shape": list(dst.shape)}
    diff = x != y
    if not diff.any():
        return {"verdict": "bit-exact", "elements": int(x.size)}
    # ulps between two binary32 values: their bit patterns on one ordered line
    ox = np.where(x < 0, np.int64(-2**31) - x, x).astype(np.int64)
    oy = np.where(y < 0, np.int64(-2**31) - y, y).astype(np.int64)
    return {"verdict": "scalar-rounded", "elements": int(x.size),
            "differ": int(diff.sum()), "max_ulps": int(np.abs(ox - oy)[diff].max())}


def quick_verdict(src: GritArray, dst: GritArray, same_planes: bool | None = None) -> dict:
    """:func:`verdict`, skipping the decodes where their result is known:
    §8's decode reads nothing but the decode projection of the grade (§4.5),
    the shape, the group axis and the planes in the canonical placement, so
    two arrays equal in all four decode equally.  Where the two arrays' placement
    words are the same too, their stored planes are compared (``same_planes``:
    that comparison, when the caller made it) without moving them into the
    canonical placement.  Otherwise the decodes are compared
    (tests/test_convert.py proves the paths agree)."""
    ds, dd = src.descriptor, dst.descriptor
    if src.grade.decode_projection == dst.grade.decode_projection and \
            tuple(src.shape) == tuple(dst.shape) and ds.group_axis == dd.group_axis:
        if (ds.placement_data, ds.placement_scale, ds.placement_meta) == \
                (dd.placement_data, dd.placement_scale, dd.placement_meta):
            same = _same_planes(src.planes, dst.planes) if same_planes is None else same_planes
        else:
            same = _same_planes(canonical(src).planes, canonical(dst).planes)
        if same:
            return {"verdict": "bit-exact", "elements": int(np.prod(src.shape, dtype=np.int64))}
    return verdict(src, dst)


# ---------------------------------------------------------------------------
# re-quantising what the target cannot hold (--allow-requant)


def requant_grade(to: str, a: GritArray) -> Grade | None:
    """The target's nearest format for a weight it cannot hold as it is
    (docs/convert.md, "Re-quantising"): the format of the target whose
    element is of the source's kind (float or integer) and nearest width,
    groups along the last axis.  None: the target has no format to
    re-quantise into (``grit`` holds every array as it is)."""
    conv = TARGETS.get(to, to)
    if conv == "gpt-oss":
        return GRADE_MXFP4
    if conv == "modelopt":
        return GRADE_NVF4
    if conv != "compressed-tensors":
        return None
    g = a.grade
    e, s0 = str(g["e"]), str(g["s0"])
    cols = int(a.shape[-1]) if a.shape else 1
    k0 = int(str(g["k0"]))
    k = k0 if 0 < k0 <= cols and cols % k0 == 0 else cols
    fm = re.fullmatch(r"e(\d+)m(\d+)", e)
    if fm is not None and 1 + int(fm[1]) + int(fm[2]) <= 4:      # FP4 (and narrower)
        return GRADE_MXFP4 if s0 == "e8m0" else GRADE_NVF4
    if fm is not None:                                            # FP6, FP8: FP8 E4M3
        if s0 == "e8m0":
            return Grade.parse("grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)")
        return Grade.parse(f"grit1(e=e4m3,k0={k},s0=binary32,esr=ratiomaxabs)")
    return Grade.parse(f"grit1(e=s8,k0={k},s0=binary32,esr=ratiomaxabs)")   # integers: int8


def _requantised(a: GritArray, g: Grade, *, trial: bool = False) -> GritArray:
    """``a`` decoded and encoded by grit's encoder into ``g``, groups along
    the last axis; ``trial``: an array of the same descriptor and plane
    sizes whose bytes do not matter (what the check before writing emits)."""
    values = np.ones(a.shape, np.float32) if trial else decode(a)
    return encode(values, g, group_axis=len(a.shape) - 1)


#: elements per step of the error statistics (bounded temporaries)
_STEP = 1 << 22


def _ordered(bits: np.ndarray) -> np.ndarray:
    """binary32 bit patterns (int32) on one ordered line of integers: the
    distance between two is their difference in ulps."""
    b = bits.astype(np.int64)
    return np.where(b < 0, np.int64(-2**31) - b, b)


def requant_error(src: GritArray, dst: GritArray) -> dict:
    """The verdict of a re-quantised weight: ``re-quantised``, with the
    elements whose decodes differ, and over the elements finite in both
    decodes the largest absolute difference, the RMS difference (binary64
    arithmetic) and the largest difference in binary32 ulps; ``nonfinite``:
    the elements that differ where a decode is not finite (±inf, or NaN in
    one decode only)."""
    x = np.ascontiguousarray(decode(src), np.float32).reshape(-1)
    y = np.ascontiguousarray(decode(dst), np.float32).reshape(-1)
    if x.shape != y.shape:
        return {"verdict": "shape-differs", "source_shape": list(src.shape),
                "target_shape": list(dst.shape)}
    differ = nonfinite = finite = ulps = 0
    max_abs, sq = 0.0, 0.0
    for i in range(0, x.size, _STEP):
        xs, ys = x[i:i + _STEP], y[i:i + _STEP]
        xb, yb = xs.view(np.int32), ys.view(np.int32)
        xn, yn = np.isnan(xs), np.isnan(ys)
        both = np.isfinite(xs) & np.isfinite(ys)
        changed = (xb != yb) & ~(xn & yn)                 # NaN is NaN, whatever its bits
        differ += int(changed.sum())
        nonfinite += int((changed & ~both).sum())
        if both.any():
            d = ys[both].astype(np.float64) - xs[both].astype(np.float64)
            finite += int(d.size)
            max_abs = max(max_abs, float(np.abs(d).max()))
            sq += float(np.sum(d * d))
            ulps = max(ulps, int(np.abs(_ordered(yb[both]) - _ordered(xb[both])).max()))
    return {"verdict": "re-quantised", "elements": int(x.size), "differ": differ,
            "max_abs": max_abs, "rms": math.sqrt(sq / finite) if finite else 0.0,
            "max_ulps": ulps, "nonfinite": nonfinite}


# ---------------------------------------------------------------------------
# convert


def staged(dst: str, fill: Callable[[str], dict], *, fsync: bool = False
           ) -> tuple[str, dict]:
    """``fill(work)`` writes the output into a temporary folder beside
    ``dst``, which then replaces ``dst``; nothing is left on failure.
    ``fsync``: every file and the folder flushed to disk before the move,
    and the parent folder after it (the output survives a power loss once
    this returns).  Returns ``dst`` and what ``fill`` returned."""
    parent = os.path.dirname(dst) or "."
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".grit-convert-", dir=parent)
    try:
        got = fill(work)
        if fsync:
            for root, _, names in os.walk(work):
                for n in names:
                    fsync_path(os.path.join(root, n))
                fsync_path(root, folder=True)
        if os.path.exists(dst):
            shutil.rmtree(dst)
        os.replace(work, dst)
        if fsync:
            fsync_path(parent, folder=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return dst, got


def convert(src: str, dst: str, to: str, *, overwrite: bool = False,
            progress: Callable[..., None] | None = None, allow_requant: bool = False,
            jobs: int = 1, fsync: bool = False) -> ConvertReport:
    """Write the checkpoint ``src`` as ``dst`` in the convention ``to`` (one
    of :data:`TARGETS`) — see the module docstring.  ``dst`` must not exist
    (``overwrite=True``: it is replaced when the new one is complete).
    ``allow_requant``: a weight the target cannot hold is re-quantised into
    its nearest format (:func:`requant_grade`) instead of refusing.
    ``jobs``: tensors handled at once (threads; the output is the same for
    any number).  ``fsync``: the output flushed to disk before it is moved
    into place (:func:`staged`; off by default, as for a copy).
    ``progress(file, done, total)`` is called as each model
    file begins and as each tensor is written and proved (``done`` of
    ``total`` units: the source's bytes, counted once writing and once
    proving)."""

    for c in CONTAINERS.values():
        if to in c.targets or c.reads(src):
            if allow_requant:
                raise GritUsageError(f"--allow-requant is not supported by the {c.name} "
                                     "converter: it moves blocks as they are or refuses")
            return c.convert(src, dst, to, overwrite=overwrite, progress=progress,
                             fsync=fsync)
    if to not in TARGETS:
        raise GritUsageError(f"--to must be one of {', '.join(TARGETS)}, got {to!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise GritUsageError(f"--jobs must be an integer from 1 to {MAX_JOBS}, got {jobs!r}")
    folder, files = _model_files(src)
    dst = os.path.abspath(dst)
    if os.path.exists(dst) and not overwrite:
        raise GritUsageError(f"{dst} exists (overwrite it with --force)")
    if not is_remote(folder) and (os.path.abspath(folder) == dst or
                                  any(os.path.dirname(f) == dst for f in files)):
        raise GritUsageError("the output would replace the input: choose another folder")
    conv = TARGETS[to]

    def fill(work: str) -> dict:
        proof, configs, weight_map = _write(files, work, conv, progress,
                                            allow_requant=allow_requant, jobs=jobs)
        _finish(folder, files, work, configs, weight_map, proof)
        return proof

    dst, proof = staged(dst, fill, fsync=fsync)
    counts: dict[str, int] = {}
    for w in proof["weights"]:
        counts[w["verdict"]["verdict"]] = counts.get(w["verdict"]["verdict"], 0) + 1
    return ConvertReport(dst, proof, counts)


@dataclass
class _Planned:
    """One model file as the check before writing found it: the output's
    layout (every entry's dtype, shape and offset: decided by descriptors,
    shapes and dtypes alone), the GRIT arrays in file order with the grade
    each re-quantised one goes into, the file tensors each weight emits,
    and the plain tensors."""

    file: str
    name: str
    size: int
    layout: Layout
    weights: list[str]
    requant: dict[str, tuple[Grade, str]]
    emitted: dict[str, list[str]]
    plain: dict[str, tuple[int, ...]]


def _refusal(e: GritError) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _plan(f: str, conv: str, allow_requant: bool, refused: list[str]) -> _Planned | None:
    """Check one model file against the target before anything is written:
    each weight emitted over bytes that do not matter (a local file's map,
    untouched; a remote file's header and small tensors, every other byte
    zero), every refusal added to ``refused``; the output's layout."""
    tensors, source, size, locate = _read_for_plan(f)
    conv_ = conventions.by_name(conv)
    if conv_.emit is None or conv_.emit_config is None:
        raise GritUsageError(f"convention {conv!r} does not write tensors")
    out: dict[str, Any] = {}
    weights: list[str] = []
    requant: dict[str, tuple[Grade, str]] = {}
    emitted: dict[str, list[str]] = {}
    plain: dict[str, tuple[int, ...]] = {}
    bad = len(refused)
    for name, raw in tensors.items():
        v = _built(raw)
        if not isinstance(v, GritArray):
            plain[name] = tuple(getattr(v, "shape", ()))
            names = {name: v}
        else:
            try:
                names = conv_.emit(name, v).tensors
            except GritError as e:
                why = _refusal(e)
                g = requant_grade(conv, v)
                if not allow_requant or g is None:
                    refused.append(why if g is None else
                                   f"{why} (--allow-requant: re-quantise it into {g.canonical})")
                    continue
                try:
                    names = conv_.emit(name, _requantised(v, g, trial=True)).tensors
                except GritError as e2:
                    refused.append(f"{name}: cannot be re-quantised into {g.canonical} either: "
                                   f"{_refusal(e2)}")
                    continue
                requant[name] = (g, why)
            weights.append(name)
            _release(source, (v, raw))      # what the emitter read of a local file's map
            emitted[name] = list(names)
        for tn, t in names.items():
            if tn in out:
                refused.append(f"{name}: file tensor {tn!r} is written twice")
            out[tn] = t
    if len(refused) > bad:
        return None
    lay, entries = layout(out)
    at = _data_at(lay, entries, locate)
    if at is not None:
        lay, _ = layout(out, data_at=at)
    return _Planned(f, _basename(f), size, lay, weights, requant, emitted, plain)


def _data_at(lay: Layout, entries: dict, locate: Callable[[Any], int | None]) -> int | None:
    """Where the output's data section is to start (``layout``'s
    ``data_at``) so that the most bytes copied file to file (the entries
    that are views of the source file, at ``locate(buf)`` in it) keep their
    offset within the page (:data:`~grit.io.safetensors.DATA_PERIOD`): the
    kernel copies those about a quarter faster.  None: no entry is a copy."""
    period = _st.DATA_PERIOD
    shares: dict[int, int] = {}
    for tn, (_, _, off, nb) in lay.entries.items():
        at = locate(_entry_bytes(entries[tn][2])) if nb >= _COPY_MIN else None
        if at is not None and (at - off) % 8 == 0:
            d = (at - off) % period
            shares[d] = shares.get(d, 0) + nb
    if not shares:
        return None
    d = max(sorted(shares), key=shares.__getitem__)
    return (len(lay.head) + d) % period


def _open_remote(f: str):
    return Location.of(f).open(f)


def spool_into(path: str, src, *, over: bool = False) -> None:
    """The byte source ``src`` into the new local file ``path`` (``over``:
    over the existing file ``path``, from its start), each byte read once,
    in ranged reads of at most :data:`SPOOL_CHUNK` bytes (memory: one
    chunk)."""
    with open(path, "r+b" if over else "xb") as out:
        for buf in src.stream(0, src.size, SPOOL_CHUNK):
            out.write(buf)


def _read_for_plan(f: str):
    """(the tensors of a model file for the check, the byte source whose
    pages can be given back, or None, the file's size, the offset in the
    file of a buffer that views it, or None): a local file as
    :func:`grit.load` reads it (views of its map); a remote one from its
    header and its small tensors (at most SMALL_MAX bytes each, the ones
    recognition reads), over an image of the file whose other bytes are
    zero pages never touched, so nothing but those is read."""
    if not is_remote(f):
        tensors, source = _load_local(f)
        return tensors, source, int(source.size), source.locate
    hdr = remote_image(f)
    base, n = address_of(hdr.buffer), memoryview(hdr.buffer).nbytes

    def locate(buf) -> int | None:           # as the spool's map will place it
        a = address_of(buf)
        if a is None or base is None or not 0 <= a - base <= n - memoryview(buf).nbytes:
            return None
        return hdr.start + (a - base)
    return (with_recognised(f, _st.tensors_of(hdr, bits=True), defer_converted=True), None,
            int(hdr.size), locate)


def remote_image(f: str) -> _st.SafetensorsFile:
    """The remote safetensors file ``f`` parsed from its header and its
    small tensors (at most SMALL_MAX bytes each), over an image of its data
    whose other bytes are zero pages never touched (:func:`_zeros`)."""
    src = _open_remote(f)
    hdr = _st.read_source(src, f)
    raise_first(hdr.problems)
    image = _zeros(hdr.avail)
    for n in hdr.entries:
        off, k = hdr.span(n)
        if 0 < k <= SMALL_MAX:
            b = off - hdr.start
            image[b:b + k] = src.read(off, k, f"tensor {n!r}")
    return replace(hdr, buffer=image)


def _zeros(n: int) -> memoryview:
    """``n`` zero bytes that take no memory until written: an anonymous
    private map, not reserved against the commit limit (a remote file's
    image may be larger than the machine's memory; only the pages of the
    small tensors are ever written)."""
    if n == 0:
        return memoryview(b"")
    flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_ANONYMOUS", 0) | \
        getattr(mmap, "MAP_NORESERVE", _MAP_NORESERVE)
    return memoryview(mmap.mmap(-1, n, flags=flags))


#: Linux's MAP_NORESERVE (Python's mmap module names it from 3.13)
_MAP_NORESERVE = 0x4000 if sys.platform == "linux" else 0


def _write(files: list[str], work: str, conv: str, progress, *, allow_requant: bool = False,
           jobs: int = 1) -> tuple[dict, dict, dict]:
    # every file is checked before any is written: a refusal writes nothing
    refused: list[str] = []
    checked = [_plan(f, conv, allow_requant, refused) for f in files]
    plans = [p for p in checked if p is not None]
    if refused or len(plans) != len(files):
        raise _refused(conv, refused)
    _room(work, plans)
    weights: list[dict] = []
    emitted_all: dict[str, conventions.Emitted] = {}
    plain_all: dict[str, tuple[int, ...]] = {}
    weight_map: dict[str, str] = {}
    total = 2 * sum(p.size for p in plans)
    done = [0]
    proving: list[_Written] = []        # files written, their proofs under way

    def proved() -> None:
        entries, emitted = _prove(proving[0], pool)
        proving.pop(0)
        weights.extend(entries)
        emitted_all.update(emitted)

    spools = os.path.join(work, ".spool")   # a remote file's copy, with its config beside
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        try:
            for p in plans:
                if progress is not None:
                    progress(p.file, done[0], total)
                local, spool = p.file, None
                if is_remote(p.file):                   # each byte read once, by ranged reads
                    while proving:                      # (one spool on disk at a time)
                        proved()
                    local = spool = spooled(p.file, spools)
                # written while the previous file's proof runs in its threads
                w = _write_file(p, local, work, conv, pool, progress, done, total, refused,
                                jobs, spool)
                if w is not None:
                    proving.append(w)
                # at most ``jobs`` files' proofs in flight (with -j1: the previous file's
                # while this one was written)
                while len(proving) > (jobs if w is not None else 0):
                    proved()
                plain_all.update(p.plain)
                weight_map.update({tn: p.name for n in p.weights for tn in p.emitted[n]})
                weight_map.update({tn: p.name for tn in p.plain})
            while proving:
                proved()
        finally:
            for w in proving:
                w.close()
            shutil.rmtree(spools, ignore_errors=True)
    if refused:
        raise _refused(conv, refused)
    emit_config = conventions.by_name(conv).emit_config
    if emit_config is None:                 # (refused by _plan already)
        raise GritUsageError(f"convention {conv!r} does not write tensors")
    configs = emit_config(emitted_all, plain_all)
    proof = {"schema": PROOF_SCHEMA, "to": conv, "weights": weights,
             "plain": sorted(set(plain_all))}
    return proof, configs, weight_map


def _room(work: str, plans: list[_Planned]) -> None:
    """Refuse before writing when the output's file system cannot hold the
    model files (their sizes are planned) and the largest remote file's
    spool."""
    need = sum(p.layout.size for p in plans) + max(
        [p.size for p in plans if is_remote(p.file)], default=0)
    free = shutil.disk_usage(work).free
    if need > free:
        raise GritUsageError(f"the output needs {need} bytes of model files"
                             f"{' and spool' if any(is_remote(p.file) for p in plans) else ''}"
                             f", and {free} bytes are free beside {os.path.dirname(work)}")


def _refused(conv: str, refused: list[str]) -> GritUsageError:
    return GritUsageError(f"{conv}: {len(refused)} array(s) cannot be written:\n  "
                          + "\n  ".join(refused))


def _pwrite(fd: int, buf, offset: int) -> None:
    mv = memoryview(buf).cast("B") if not isinstance(buf, np.ndarray) else \
        memoryview(np.ascontiguousarray(buf).reshape(-1).view(np.uint8))
    while mv.nbytes:
        n = os.pwrite(fd, mv[:_WRITE_STEP], offset)
        mv, offset = mv[n:], offset + n


def _copy_or_write(src_fd: int, src_off: int | None, fd: int, buf, offset: int) -> None:
    """``buf`` into ``fd`` at ``offset``: where it is the bytes of the source
    file at ``src_off``, copied by the kernel from file to file, else (or
    where the file system cannot) written from memory."""
    n = memoryview(buf).nbytes
    if src_off is not None and n and _COPY_RANGE is not None:
        done = 0
        try:
            while done < n:
                k = _COPY_RANGE(src_fd, fd, n - done, src_off + done, offset + done)
                if k <= 0:
                    break
                done += k
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
                raise
        if done == n:
            return
        buf, offset = _u8(buf)[done:], offset + done
    _pwrite(fd, buf, offset)


#: the smallest buffer copied file to file (smaller ones are written from memory)
_COPY_MIN = 1 << 16
#: os.copy_file_range where the platform has it
_COPY_RANGE = getattr(os, "copy_file_range", None)


def _release(source, values) -> None:
    """Give the pages of the planes in ``values`` back (``MADV_DONTNEED``
    on the file's read-only map: the page cache keeps them, the process
    does not): memory stays at the tensors being handled."""
    release = getattr(source, "release", None)
    if release is None:
        return
    for v in values:
        for p in (v.planes if isinstance(v, GritArray) else
                  v.parts() if isinstance(v, Deferred) else (v,)):
            if isinstance(p, np.ndarray):
                # a dtype the buffer protocol cannot name (bfloat16): its bytes
                if not (p.flags.c_contiguous and p.nbytes):
                    continue
                p = p.reshape(-1).view(np.uint8)
            if isinstance(p, (memoryview, np.ndarray)) and memoryview(p).nbytes:
                release(p)


def _load_local(path: str):
    """(the tensors of the local safetensors file ``path`` as
    :func:`grit.load` reads them, but each weight a converter builds
    :class:`~grit.io.recognise.Deferred`; the byte source their views are
    of)."""
    hdr = _st.read(path)
    return with_recognised(path, _st.tensors_of(hdr, bits=True), defer_converted=True), hdr.source


def _built(v):
    """A weight whose planes a converter builds (GPTQ, AWQ …), built now:
    one at a time, never a file's worth at once."""
    return v.build() if isinstance(v, Deferred) else v


@dataclass
class _Written:
    """A model file written, and its proof begun: the source's tensors and
    byte source, the output's file descriptor, the
    file read back, the name each weight reads back under, the weights'
    digests and comparisons in progress (:class:`_Proofs`); ``spool``: the
    local copy of a remote file, removed once the file is proved."""

    p: _Planned
    tensors: Any
    source: Any
    fd: int
    emitted: dict
    back: Any
    back_source: Any
    owner: dict
    proofs: _Proofs
    spool: str | None
    tick: Callable[[str, int], None]
    ticked: list[int]

    def close(self) -> None:
        """Stop what runs, close and remove what is
        this file's (idempotent)."""
        self.proofs.stop()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.spool is not None:
            os.unlink(self.spool)
            self.spool = None


def _write_file(p: _Planned, local: str, work: str, conv: str, pool, progress, done: list,
                total: int, refused: list[str], jobs: int = 1, spool: str | None = None
                ) -> _Written | None:
    """Write one model file entry by entry at the planned offsets (the
    weights ``jobs`` at a time), then begin its proof: the file read back,
    and its weights digested and compared in threads
    (:class:`_Proofs`) while the caller goes on (the next file is written);
    :func:`_prove` finishes it.  None: a weight was refused (``refused``)."""
    tensors, source = _load_local(local)
    emit = conventions.by_name(conv).emit
    if emit is None:                        # (refused by _plan already)
        raise GritUsageError(f"convention {conv!r} does not write tensors")
    out = os.path.join(work, p.name)
    emitted: dict[str, conventions.Emitted] = {}
    late: dict[str, str] = {}                  # refusals the bytes decide, by weight

    lock = threading.Lock()
    mine = [0]                                 # this file's units so far

    def tick(f: str, n: int) -> None:
        with lock:
            done[0] += n
            mine[0] += n
            if progress is not None:
                progress(f, done[0], total)

    def write_one(name: str) -> None:
        raw = tensors[name]
        v = _built(raw)
        if isinstance(v, GritArray):
            rq = p.requant.get(name)
            try:
                em = emit(name, _requantised(v, rq[0]) if rq else v)
            except GritError as e:            # a refusal the bytes decide
                late[name] = _refusal(e)
                return
            emitted[name] = replace(em, tensors={})
            items = em.tensors
        else:
            items = {name: v}
        for tn, (dt, shape, buf) in entries_of(items).items():
            want = p.layout.entries.get(tn)
            nb = memoryview(buf).nbytes if not isinstance(buf, np.ndarray) else buf.nbytes
            if want is None or (want[0], want[1], want[3]) != (dt, tuple(shape), nb):
                raise GritError(f"{name}: the emitted tensor {tn!r} ({dt} {list(shape)}, {nb} "
                                f"bytes) is not the one checked before writing "
                                f"({want and (want[0], list(want[1]), want[3])})")
            u = _entry_bytes(buf)
            _copy_or_write(src_fd, locate(u) if locate is not None and u.size >= _COPY_MIN
                           else None, fd, u, want[2])
        _release(source, (v, raw))
        tick(p.file, _nbytes(v))

    # a buffer that is a view of the source file's map is copied file to file by the
    # kernel (copy_file_range): its pages are not brought into this process
    locate = getattr(source, "locate", None)
    src_fd = os.open(local, os.O_RDONLY)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            os.ftruncate(fd, p.layout.size)
            _pwrite(fd, p.layout.head, 0)
            _run(pool, write_one, [*p.weights, *p.plain])
            refused.extend(late[n] for n in p.weights if n in late)      # in file order
        finally:
            os.close(src_fd)
        if refused:
            os.close(fd)
            if spool is not None:
                os.unlink(spool)
            return None
    except BaseException:
        os.close(fd)
        raise
    try:
        back, back_source = _load_local(out)
        # the name each weight reads back under (a convention may name it otherwise:
        # gpt-oss's ``x_blocks`` / ``x_scales`` read back as ``x``)
        owner = {frozenset(r.tensors): r.name
                 for r in (getattr(back, "recognised", None) or {}).values()}
        # the weights that are arrays on both sides as the files hold them (not built by
        # a converter: those are digested and compared in the proof's pass, one at a time)
        pairs = {}
        for n in p.weights if _PROOF_AHEAD else ():
            a, b = tensors[n], back.get(owner.get(frozenset(p.emitted[n]), n))
            if isinstance(a, GritArray) and isinstance(b, GritArray):
                pairs[n] = (a, b)
        # one thread per LANES weights, at most ``jobs`` (a thread with fewer weights to
        # interleave hashes fewer bytes per CPU second)
        proofs = _Proofs(pairs, getattr(source, "release", None),
                         getattr(back_source, "release", None),
                         max(1, min(jobs, -(-len(pairs) // LANES))))
    except BaseException:
        os.close(fd)
        raise
    return _Written(p, tensors, source, fd, emitted, back, back_source, owner, proofs,
                    spool, tick, mine)


def _prove(w: _Written, pool) -> tuple[list[dict], dict]:
    """The proof entry of each weight of the written file (``w``), read back
    through the target convention's recogniser and compared with the
    source's tensors (the digests and comparisons its :class:`_Proofs`
    made, the others here), and the emitted weights; the file is then on
    disk and closed."""
    p, tensors, source, back, back_source = w.p, w.tensors, w.source, w.back, w.back_source
    emitted, tick = w.emitted, w.tick
    known = w.proofs.result()

    def prove(name: str) -> dict:
        as_ = w.owner.get(frozenset(p.emitted[name]), name)
        a_raw, b_raw = tensors[name], back.get(as_)
        a, b = _built(a_raw), _built(b_raw)
        if not isinstance(b, GritArray):
            raise GritError(f"{name}: the written file does not read back as a GRIT "
                            f"array ({type(b).__name__}): the target convention's reader "
                            "and writer disagree")
        if name in known:
            da, same = known[name]
        else:
            da, same = _digest_and_compare(a, b, getattr(source, "release", None),
                                           getattr(back_source, "release", None))
        sa = _side(a, da)
        sb = _side(b, da if same else None)
        rq = p.requant.get(name)
        entry = {"name": name, "file": p.name, "source": sa, "target": sb,
                 "verdict": requant_error(a, b) if rq else quick_verdict(a, b, same),
                 "exact_by_construction": emitted[name].exact and not rq,
                 "notes": list(emitted[name].notes)}
        if as_ != name:
            entry["as"] = as_
        if rq:
            entry["requant"] = {"into": rq[0].canonical, "why": rq[1]}
        _release(source, (a, a_raw))
        _release(back_source, (b, b_raw))
        tick(p.file, _nbytes(a))
        return entry

    entries = _run(pool, prove, p.weights)
    w.close()
    tick(p.file, 2 * p.size - w.ticked[0])       # the header and the plain tensors
    return entries, emitted


def _run(pool: ThreadPoolExecutor, fn: Callable[[str], Any], items: list[str]) -> list:
    """``fn`` of every item on the pool, the results in the items' order.
    Nothing is left running when it returns or raises (an error, Ctrl-C):
    the tasks not started are cancelled and the running ones waited for,
    so no task writes to a file its caller has closed."""
    futures = [pool.submit(fn, x) for x in items]
    try:
        wait(futures)
    except BaseException:
        for f in futures:
            f.cancel()
        wait(futures)
        raise
    return [f.result() for f in futures]


def _nbytes(v) -> int:
    if isinstance(v, GritArray):
        return int(sum(v.plane_bytes))
    return int(getattr(v, "nbytes", 0))


def spooled(f: str, folder: str) -> str:
    """The remote model file ``f`` read once into the local ``folder``
    (made if absent) in ranged reads of at most :data:`SPOOL_CHUNK` bytes,
    with the config.json and the conventions' sidecars beside ``f`` written
    beside it (once per folder), so that the copy is recognised as ``f``
    is; returns the copy's path (the caller removes it)."""
    os.makedirs(folder, exist_ok=True)
    cfg = os.path.join(folder, "config.json")
    if not os.path.exists(cfg):
        docs = read_sidecars(f)
        conf = read_config(f)
        if conf is not None:
            docs["config.json"] = conf
        for name, doc in docs.items():
            with open(os.path.join(folder, name), "w") as out:
                json.dump(doc, out)
        if conf is None:                      # (written once: the folder's mark)
            with open(cfg, "w") as out:
                out.write("null")
    path = os.path.join(folder, _basename(f))
    src = _open_remote(f)
    free = shutil.disk_usage(folder).free
    if src.size > free:
        raise GritUsageError(f"{f}: {src.size} bytes to read into {folder}, where "
                             f"{free} bytes are free")
    spool_into(path, src)
    return path


def _finish(folder: str, files: list[str], work: str, configs: dict, weight_map: dict,
            proof: dict) -> None:
    for n in _beside(folder, files):
        _copy_beside(folder, n, work)
    if len(files) > 1:
        with open(os.path.join(work, "model" + _INDEX), "w") as f:
            json.dump({"metadata": {}, "weight_map": dict(sorted(weight_map.items()))}, f,
                      indent=2)
    cfg = (read_remote_config(files[0]) if is_remote(files[0])
           else _json(os.path.join(folder, "config.json"))) or {}
    for k in ("quantization_config", "compression_config"):
        cfg.pop(k, None)
    text = json.dumps(proof, indent=1, sort_keys=True).encode("utf-8")
    with open(os.path.join(work, PROOF_FILE), "wb") as f:
        f.write(text)
    for fn, doc in configs.items():
        base = cfg if fn == "config.json" else (_json(os.path.join(work, fn)) or {})
        base.update(doc)
        if fn == "config.json":
            cfg = base
        else:
            with open(os.path.join(work, fn), "w") as f:
                json.dump(base, f, indent=2)
    cfg[PROOF_KEY] = {"file": PROOF_FILE, "sha256": hashlib.sha256(text).hexdigest()}
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


# ---------------------------------------------------------------------------
# verify


def read_proof(dst: str, proof: str | None = None) -> tuple[str, Mapping, list[str]]:
    """(the output folder, the proof ``dst`` holds or ``proof`` names, the
    problems found so far): with no ``proof`` given, its SHA-256 must be the
    one ``dst``'s config.json records.  A missing or malformed proof is a
    :class:`GritUsageError`."""
    if proof is None and is_remote(dst):
        raise GritUsageError(f"{dst}: an output on a server is verified against a local copy "
                             f"of its proof: name it with --proof (its {PROOF_FILE})")
    folder = dst if os.path.isdir(dst) else os.path.dirname(dst)
    ppath = proof or os.path.join(folder, PROOF_FILE)
    if not os.path.isfile(ppath):
        raise GritUsageError(f"{ppath}: no proof to verify against")
    text = read_regular(ppath, MAX_PROOF)
    problems: list[str] = []
    if proof is None:
        rec = (_json(os.path.join(folder, "config.json")) or {}).get(PROOF_KEY)
        if not isinstance(rec, Mapping) or rec.get("sha256") != hashlib.sha256(text).hexdigest():
            problems.append(f"{PROOF_FILE}: its SHA-256 is not the one config.json records "
                            "(the proof was changed)")
    try:
        doc = loads_json(text, ppath)
    except ValueError as e:
        raise GritUsageError(str(e)) from None
    if not isinstance(doc, Mapping) or doc.get("schema") != PROOF_SCHEMA or \
            not isinstance(doc.get("weights"), list):
        raise GritUsageError(f"{ppath}: not a {PROOF_SCHEMA} proof")
    return folder, doc, problems


def verify(src: str, dst: str, proof: str | None = None) -> VerifyReport:
    """Re-derive every verdict of a conversion from the two checkpoints and
    compare with the proof (``proof``: its path; default the one in ``dst``,
    whose SHA-256 must match the one ``dst``'s config.json records).

    The source's files are read one at a time, each weight digested and
    compared with the output's in one pass and the pages of both given
    back as it goes (``MADV_DONTNEED``), so memory stays at about the
    tensor being checked; a remote model file is read once into a spool
    beside the output folder (:func:`spooled`), deleted when its weights
    are checked (a remote output, named with ``--proof``: in a spool
    beside the proof, each file read when a source file's tensors are
    first checked against it and deleted once all it holds are,
    :class:`_Output`)."""
    for c in CONTAINERS.values():
        if c.reads(src) or c.wrote(dst):
            return c.verify(src, dst, proof)
    folder, doc, problems = read_proof(dst, proof)
    claimed = {w.get("name"): w for w in doc["weights"] if isinstance(w, Mapping)}
    plain = [n for n in doc.get("plain") or () if isinstance(n, str)]
    found: dict[str, list[str]] = {}            # by weight, and by plain tensor name
    found_plain: dict[str, list[str]] = {}
    srcw: set[str] = set()
    spools: list[str] = []                      # made when a remote file is read

    # beside the output folder; for a remote output, beside the proof (a local file)
    near = proof if is_remote(dst) and proof is not None else folder

    def spool(side: str) -> str:
        if not spools:
            parent = os.path.dirname(os.path.abspath(near))
            try:
                spools.append(tempfile.mkdtemp(prefix=".grit-verify-spool-", dir=parent))
            except OSError as e:
                raise GritUsageError(f"{parent}: cannot hold the spool of a remote model "
                                     f"file: {e}") from None
        return os.path.join(spools[0], side)
    try:
        side = _Output(dst, spool, set(claimed) | set(plain))
        _, files = _model_files(src)
        for f in files:
            local = spooled(f, spool("src")) if is_remote(f) else f
            try:
                a, a_source = _load_local(local)
                ws = {n for n, v in a.items() if isinstance(v, (GritArray, Deferred))}
                srcw |= ws
                names = (ws & set(claimed)) | {n for n in plain if n in a}
                b, b_sources = side.holding(names)
                found.update(_verify_weights(sorted(ws & set(claimed)), claimed, a, b,
                                             a_source, b_sources))
                for n in plain:
                    if n in a:
                        found_plain[n] = _verify_plain(n, a[n], b.get(n), a_source, b_sources)
                del b, b_sources
                side.checked(names)
            finally:
                if local != f:
                    os.unlink(local)
    finally:
        for d in spools:
            shutil.rmtree(d, ignore_errors=True)
    if srcw != set(claimed):
        problems.append(f"the proof names {len(claimed)} weights, the source has {len(srcw)}: "
                        f"missing {sorted(srcw - set(claimed))[:5]}, extra "
                        f"{sorted(set(claimed) - srcw)[:5]}")
    for name in sorted(found):
        problems.extend(found[name])
    for n in plain:
        problems.extend(found_plain.get(n, ()))
    return VerifyReport(problems, len(srcw & set(claimed)))


class _Output:
    """The model files of the output ``path`` as verify reads them: local
    files mapped, all at once (nothing read until used); remote ones each
    read into the folder ``spool("dst")`` (:func:`spooled`) when a source
    file's tensors are first checked against it, and its copy deleted once
    every tensor it holds that the proof names has been checked (which
    tensors a remote file holds: its header and small tensors,
    :func:`remote_image`; of those, the ones in ``wanted``, the names the
    proof checks).  So a remote output converted file by file from a
    sharded source is on disk one file at a time."""

    def __init__(self, path: str, spool: Callable[[str], str], wanted: set[str]) -> None:
        _, self.files = _model_files(path)
        self.spool = spool
        self.loaded: dict[int, tuple[dict[str, Any], Any, str | None]] = {}
        self.holds: list[set[str]] = []
        for i, f in enumerate(self.files):
            if is_remote(f):
                held = with_recognised(f, _st.tensors_of(remote_image(f), bits=True))
                self.holds.append(set(held) & wanted)
            else:
                self.holds.append(set())
                self._load(i)

    def _load(self, i: int) -> None:
        f = self.files[i]
        local = spooled(f, self.spool("dst")) if is_remote(f) else f
        t, s = _load_local(local)  # (a converted weight is built when compared, one at a time)
        self.loaded[i] = (t, s, local if local != f else None)

    def holding(self, names: set[str]) -> tuple[dict[str, Any], list]:
        """(the output's tensors, their byte sources), every file that holds
        one of ``names`` among them."""
        for i, held in enumerate(self.holds):
            if i not in self.loaded and held & names:
                self._load(i)
        out: dict[str, Any] = {}
        for i in sorted(self.loaded):
            out.update(self.loaded[i][0])
        return out, [self.loaded[i][1] for i in sorted(self.loaded)]

    def checked(self, names: set[str]) -> None:
        """``names`` are checked: a remote file's copy holding none left to
        check is deleted."""
        for i, held in enumerate(self.holds):
            held -= names
            if i in self.loaded and self.loaded[i][2] is not None and not held:
                _, _, local = self.loaded.pop(i)
                os.unlink(local)


def _release_any(sources: list, values) -> None:
    """:func:`_release` of ``values`` through whichever of ``sources`` maps
    them (the others find them outside their maps and do nothing)."""
    for s in sources:
        _release(s, values)


def _verify_weights(names: list[str], claimed: Mapping, a: Mapping, b: Mapping, a_source,
                    b_sources: list) -> dict[str, list[str]]:
    """:func:`_verify_weight` of each weight of ``names`` (source tensors
    ``a``, output tensors ``b``): the weights that are arrays on both sides
    as the files hold them digested and compared :data:`LANES` at a time in
    one pass (``grit.fingerprint.digests_compared``: their FNV-1a chains
    interleaved; the arrays are views of the files, so holding a group
    holds no memory), the others (built by a converter) one at a time."""
    out: dict[str, list[str]] = {}
    release_b = lambda c: _release_any(b_sources, (c,))  # noqa: E731
    whole = [n for n in names if isinstance(a[n], GritArray)
             and isinstance(b.get(_output_name(n, claimed[n])), GritArray)]
    for i in range(0, len(whole), LANES):
        group = whole[i:i + LANES]
        got = _digests_compared([a[n].planes for n in group],
                                [b[_output_name(n, claimed[n])].planes for n in group],
                                step=_RELEASE_STEP, done=getattr(a_source, "release", None),
                                done_other=release_b)
        for n, (d, same) in zip(group, got):
            out[n] = _verify_weight(n, claimed[n], a[n], b, a_source, b_sources,
                                    (d.hex(), same))
    for n in names:
        if n not in out:
            out[n] = _verify_weight(n, claimed[n], a[n], b, a_source, b_sources)
    return out


def _output_name(name: str, w: Mapping) -> str:
    """The name weight ``name`` reads back under in the output (its proof
    entry's ``as``, where the convention names it otherwise)."""
    return w["as"] if isinstance(w.get("as"), str) else name


def _verify_weight(name: str, w: Mapping, av, b: Mapping, a_source, b_sources: list,
                   known: tuple[str, bool] | None = None) -> list[str]:
    """The disagreements of one weight with its proof entry ``w``: its
    source (``av``) and output (in ``b``) digested and compared in one pass
    (:func:`_digest_and_compare`, the pages given back every 8 MiB; ``known``:
    that pass's result, where the caller made it), the output digested
    apart where its planes are not the source's, the verdict re-derived
    (:func:`quick_verdict`, or :func:`requant_error`); every page of both
    given back after."""
    problems: list[str] = []
    y_raw = b.get(_output_name(name, w))
    x, y = _built(av), _built(y_raw)
    if not isinstance(y, GritArray):
        _release(a_source, (x, av))
        return [f"{name}: the output holds no GRIT array under this name"]
    try:
        da, same = known if known is not None else _digest_and_compare(
            x, y, getattr(a_source, "release", None),
            lambda c: _release_any(b_sources, (c,)))
        for side, got in (("source", _side(x, da)), ("target", _side(y, da if same else None))):
            for k in ("gid", "grade", "digest", "shape"):
                if (w.get(side) or {}).get(k) != got[k]:
                    problems.append(f"{name}: {side} {k} is {got[k]}, the proof says "
                                    f"{(w.get(side) or {}).get(k)}")
        claimed_v = w.get("verdict")
        v = requant_error(x, y) if isinstance(claimed_v, Mapping) and \
            claimed_v.get("verdict") == "re-quantised" else quick_verdict(x, y, same)
        if v != claimed_v:
            problems.append(f"{name}: the decodes give {v}, the proof says {w.get('verdict')}")
    finally:
        _release(a_source, (x, av))
        _release_any(b_sources, (y, y_raw))
    return problems


def _verify_plain(n: str, x, y, a_source, b_sources: list) -> list[str]:
    """Whether the plain tensor ``n`` of the source (``x``) is in the output
    (``y``) as it was: dtype, shape and bytes (compared a bounded step at a
    time, the pages of both given back after)."""
    if not isinstance(x, np.ndarray):
        return []
    try:
        same = isinstance(y, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape and (
            _same_bytes(_bytes_of(x), _bytes_of(y)))
    finally:
        _release(a_source, (x,))
        if isinstance(y, np.ndarray):
            _release_any(b_sources, (y,))
    return [] if same else [f"{n}: the plain tensor is not copied as it was"]


def _bytes_of(x: np.ndarray):
    """The bytes of an array as stored (a view where it is contiguous, any
    dtype, bfloat16 included)."""
    if x.flags.c_contiguous:
        return x.reshape(-1).view(np.uint8) if x.size else np.zeros(0, np.uint8)
    return x.tobytes()
