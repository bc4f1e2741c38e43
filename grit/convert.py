"""``grit convert``: a quantised checkpoint moved between conventions without
re-quantising, and ``grit verify``: the move proved from the two checkpoints.

:func:`convert` reads a safetensors checkpoint (one file, or a folder of
shards with their index) as GRIT arrays — each weight a convention
recognises (:mod:`grit.conventions`), the other tensors as they are — and
writes each shard again through the target convention's ``emit``: element
codes and scale bytes are moved, never re-derived.  Where the two
conventions' arithmetic differs (a per-tensor scale stored as a divisor in
one and a multiplier in the other), the emitter says so and the proof counts
the elements that decode differently.  Anything the target cannot hold is
refused with the reason, before a byte is written.

The output is written into a temporary folder beside ``dst`` and moved into
place when complete; the input is only read.  The files beside the model
files (tokenizer, generation config …) are copied; ``config.json`` keeps
everything but the source's quantisation entry, which the target's
replaces.

The proof (``grit-proof.json``) holds, per weight, the source's and the
target's gid, grade and plane digests and the decode verdict, derived by
reading the written files back; its SHA-256 is recorded in the output's
``config.json``.  :func:`verify` derives every verdict again from the two
checkpoints alone and compares them with the proof.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

import numpy as np

from . import conventions
from ._files import loads_json, read_regular
from .array import GritArray, canonical, decode
from .errors import GritError, GritUsageError
from .fingerprint import digest as _digest
from .io import hub as _hub
from .io import load, save
from .io.hub import HubPath, is_hub, is_remote
from .io.recognise import read_remote_config
from .io.containers import by_suffix
from .io.recognise import MAX_CONFIG

__all__ = ["convert", "verify", "PROOF_FILE", "ConvertReport", "VerifyReport", "TARGETS"]

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
    every ``*.safetensors`` of a folder, sorted).  A remote ``src``: an
    ``https://`` URL of one safetensors file, or ``hf://ORG/REPO[@REV][/PATH]``
    (a file, or the safetensors files directly under a folder of the
    repository, named at its commit)."""
    if is_hub(src):
        where = HubPath.parse(src)
        r = _hub.repo(where)
        if where.path.lower().endswith(".safetensors"):
            return os.path.dirname(r.name(where.path)), [r.name(where.path)]
        depth = where.path.strip("/").count("/") + 1 if where.path.strip("/") else 0
        files = [r.name(p) for p in r.under(where.path)
                 if p.lower().endswith(".safetensors") and p.count("/") == depth]
        if not files:
            raise GritUsageError(f"{src}: no .safetensors files in this repository folder")
        return r.name(where.path.strip("/")), files
    if is_remote(src):
        if not src.split("?")[0].lower().endswith(".safetensors"):
            raise GritUsageError(f"{src}: convert reads one safetensors file by URL (a folder "
                                 "of shards: name the files, or use hf://)")
        return src.split("?")[0].rsplit("/", 1)[0], [src]
    if os.path.isfile(src):
        if not src.lower().endswith(".safetensors"):
            raise GritUsageError(f"{src}: convert reads safetensors checkpoints (a .safetensors "
                                 "file or a folder of them)")
        return os.path.dirname(os.path.abspath(src)), [os.path.abspath(src)]
    if not os.path.isdir(src):
        raise GritUsageError(f"{src}: no such file or folder")
    files = sorted(os.path.join(src, n) for n in os.listdir(src)
                   if n.lower().endswith(".safetensors") and
                   os.path.isfile(os.path.join(src, n)))
    if not files:
        raise GritUsageError(f"{src}: no .safetensors files in this folder")
    return os.path.abspath(src), files


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
    sidecars the conventions read, or a proof)."""
    if is_remote(folder):
        return []                  # a remote checkpoint: its model files alone (docs/convert.md)
    skip = {"config.json", PROOF_FILE} | set(conventions.sidecars())
    out = []
    for n in sorted(os.listdir(folder)):
        p = os.path.join(folder, n)
        if n in skip or n.endswith(_INDEX) or by_suffix(n) is not None or \
                not os.path.isfile(p):
            continue
        out.append(n)
    return out


def _basename(f: str) -> str:
    """A model file's name (a URL's without its query)."""
    return f.split("?")[0].rstrip("/").rsplit("/", 1)[-1]


# ---------------------------------------------------------------------------
# the verdict of one weight


def _planes_digest(a: GritArray) -> str:
    return _digest(list(a.planes)).hex()


def _side(a: GritArray) -> dict:
    return {"gid": a.gid_base32, "grade": a.grade.canonical, "shape": list(a.shape),
            "digest": _planes_digest(a)}


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


def quick_verdict(src: GritArray, dst: GritArray) -> dict:
    """:func:`verdict`, skipping the decodes where their result is known:
    §8's decode reads nothing but the decode projection of the grade (§4.5),
    the shape, the group axis and the planes in the canonical placement, so
    two arrays equal in all four decode equally.  Otherwise the decodes are
    compared (tests/test_convert.py proves the two paths agree)."""
    if src.grade.decode_projection == dst.grade.decode_projection and \
            tuple(src.shape) == tuple(dst.shape) and \
            src.descriptor.group_axis == dst.descriptor.group_axis:
        cs, cd = canonical(src), canonical(dst)
        if all(np.array_equal(np.frombuffer(p, np.uint8), np.frombuffer(q, np.uint8))
               for p, q in zip(cs.planes, cd.planes)):
            return {"verdict": "bit-exact", "elements": int(np.prod(src.shape, dtype=np.int64))}
    return verdict(src, dst)


# ---------------------------------------------------------------------------
# convert


def convert(src: str, dst: str, to: str, *, overwrite: bool = False,
            progress: Callable[[str], None] | None = None) -> ConvertReport:
    """Write the checkpoint ``src`` as ``dst`` in the convention ``to`` (one
    of :data:`TARGETS`) — see the module docstring.  ``dst`` must not exist
    (``overwrite=True``: it is replaced when the new one is complete).
    ``progress(file)`` is called before each model file is written."""
    for c in CONTAINERS.values():
        if to in c.targets or c.reads(src):
            return c.convert(src, dst, to, overwrite=overwrite, progress=progress)
    if to not in TARGETS:
        raise GritUsageError(f"--to must be one of {', '.join(TARGETS)}, got {to!r}")
    folder, files = _model_files(src)
    dst = os.path.abspath(dst)
    if os.path.exists(dst) and not overwrite:
        raise GritUsageError(f"{dst} exists (overwrite it with --force)")
    if not is_remote(folder) and (os.path.abspath(folder) == dst or
                                  any(os.path.dirname(f) == dst for f in files)):
        raise GritUsageError("the output would replace the input: choose another folder")
    conv = TARGETS[to]
    parent = os.path.dirname(dst) or "."
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".grit-convert-", dir=parent)
    try:
        proof, configs, weight_map = _write(files, work, conv, progress)
        _finish(folder, files, work, configs, weight_map, proof)
        if os.path.exists(dst):
            shutil.rmtree(dst)
        os.replace(work, dst)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    counts: dict[str, int] = {}
    for w in proof["weights"]:
        counts[w["verdict"]["verdict"]] = counts.get(w["verdict"]["verdict"], 0) + 1
    return ConvertReport(dst, proof, counts)


def _write(files: list[str], work: str, conv: str, progress) -> tuple[dict, dict, dict]:
    weights: list[dict] = []
    emitted_all: dict[str, conventions.Emitted] = {}
    plain_all: dict[str, tuple[int, ...]] = {}
    weight_map: dict[str, str] = {}
    # every file is checked before any is written: a refusal writes nothing.  A
    # checkpoint of one file (every https:// source) keeps what the check read
    # and emitted, so its bytes are read and moved once
    kept: dict[str, tuple[Any, conventions.Emission]] = {}
    for f in files:
        tensors = load(f)
        em = conventions.emit(conv, dict(tensors))
        if len(files) == 1:
            kept[f] = (tensors, em)
        del tensors, em
    # then one file at a time, nothing of it kept once its proof entries are made
    # (the maps of the source and of what was written are released)
    for f in files:
        if progress is not None:
            progress(f)
        if f in kept:
            tensors, em = kept.pop(f)
        else:
            tensors = load(f)
            em = conventions.emit(conv, dict(tensors))
        out = os.path.join(work, _basename(f))
        save(out, em.tensors)
        emitted_all.update((n, replace(e, tensors={})) for n, e in em.weights.items())
        plain_all.update((n, tuple(getattr(v, "shape", ()))) for n, v in tensors.items()
                         if not isinstance(v, GritArray))
        weight_map.update({tn: _basename(f) for tn in em.tensors})
        back = load(out)
        for name, e in em.weights.items():
            a, b = tensors[name], back.get(name)
            if not isinstance(b, GritArray):
                raise GritError(f"{name}: the written file does not read back as a GRIT "
                                f"array ({type(b).__name__}): the target convention's reader "
                                "and writer disagree")
            weights.append({"name": name, "file": _basename(f),
                            "source": _side(a), "target": _side(b),
                            "verdict": quick_verdict(a, b),
                            "exact_by_construction": e.exact, "notes": list(e.notes)})
        del tensors, em, back
    configs = conventions.by_name(conv).emit_config(emitted_all, plain_all)
    proof = {"schema": PROOF_SCHEMA, "to": conv, "weights": weights,
             "plain": sorted(set(plain_all))}
    return proof, configs, weight_map


def _finish(folder: str, files: list[str], work: str, configs: dict, weight_map: dict,
            proof: dict) -> None:
    for n in _beside(folder, files):
        shutil.copyfile(os.path.join(folder, n), os.path.join(work, n))
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


def _arrays(path: str) -> dict[str, Any]:
    _, files = _model_files(path)
    out: dict[str, Any] = {}
    for f in files:
        out.update(load(f))
    return out


def verify(src: str, dst: str, proof: str | None = None) -> VerifyReport:
    """Re-derive every verdict of a conversion from the two checkpoints and
    compare with the proof (``proof``: its path; default the one in ``dst``,
    whose SHA-256 must match the one ``dst``'s config.json records)."""
    for c in CONTAINERS.values():
        if c.reads(src) or c.wrote(dst):
            return c.verify(src, dst, proof)
    problems: list[str] = []
    folder = dst if os.path.isdir(dst) else os.path.dirname(dst)
    ppath = proof or os.path.join(folder, PROOF_FILE)
    if not os.path.isfile(ppath):
        raise GritUsageError(f"{ppath}: no proof to verify against")
    text = read_regular(ppath, MAX_PROOF)
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
    a, b = _arrays(src), _arrays(dst)
    claimed = {w.get("name"): w for w in doc["weights"] if isinstance(w, Mapping)}
    srcw = {n for n, v in a.items() if isinstance(v, GritArray)}
    if srcw != set(claimed):
        problems.append(f"the proof names {len(claimed)} weights, the source has {len(srcw)}: "
                        f"missing {sorted(srcw - set(claimed))[:5]}, extra "
                        f"{sorted(set(claimed) - srcw)[:5]}")
    for name in sorted(srcw & set(claimed)):
        w, x, y = claimed[name], a[name], b.get(name)
        if not isinstance(y, GritArray):
            problems.append(f"{name}: the output holds no GRIT array under this name")
            continue
        for side, arr in (("source", x), ("target", y)):
            got = _side(arr)
            for k in ("gid", "grade", "digest", "shape"):
                if (w.get(side) or {}).get(k) != got[k]:
                    problems.append(f"{name}: {side} {k} is {got[k]}, the proof says "
                                    f"{(w.get(side) or {}).get(k)}")
        v = verdict(x, y)
        if v != w.get("verdict"):
            problems.append(f"{name}: the decodes give {v}, the proof says {w.get('verdict')}")
    for n in doc.get("plain") or ():
        x, y = a.get(n), b.get(n)
        if isinstance(x, np.ndarray) and not (isinstance(y, np.ndarray) and x.dtype == y.dtype
                                              and x.shape == y.shape
                                              and x.tobytes() == y.tobytes()):
            problems.append(f"{n}: the plain tensor is not copied as it was")
    return VerifyReport(problems, len(srcw & set(claimed)))
