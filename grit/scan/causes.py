"""One root cause, one finding.

A wrong value in a checkpoint's ``quantization_config`` shows up in every
module it governs, and in each of them more than once: a declared
``group_size`` that the scale tensors contradict is an S311 per module, the
descriptor scan inferred from that config fails the size equations (an S101
per tensor, under an inferred descriptor), and when the declared size is one
no kernel serves, an S318 per module too.  :func:`group` makes of each such
cause one top-level finding, its consequences nested under it
(:attr:`Finding.consequences`, one level):

* the S311s of one declaration (the config entry that declares it, the
  declared group size and strategy, one checkpoint) become one S311 naming
  every module (``detail.modules``: each module's scale shape and the k0 its
  scales say), with the S318s of the same declaration as consequences;
* the S318s of one declaration with no S311 (the scales agree with a size
  no kernel serves) become one S318 naming every module;
* a declared format the tensors are not (S310 with ``on_disk``), else a
  declared element they are not (S312), is the root of the config findings
  about the same modules that follow from it (S312, S311, S318);
* every root takes the S101s of its modules' tensors whose descriptor scan
  inferred (from that config).

The report counts a root once; its consequences do not set the exit code
(an S101 under an inferred descriptor says the config is wrong, not the
bytes: the root's severity is the verdict).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from ..conventions.base import names_label
from .findings import Finding

__all__ = ["group"]

#: module lines shown in a root's lines; the detail carries them all
SHOW = 3

#: where -> (checkpoint name, its files)
Where = Callable[[str | None], tuple[str | None, frozenset[str]]]


def group(config: Iterable[Finding], findings: Sequence[Finding],
          where: Where) -> tuple[list[Finding], set[int]]:
    """The config findings ``config`` (one pass of the checkpoint contracts)
    with each root cause made one finding, and the ids of the per-file
    ``findings`` that became consequences.  ``where(file)``: the checkpoint
    a config finding's file field names, and the checkpoint's files."""
    config = list(config)
    out = _group_sizes(config, where)
    out = _formats(out, where)
    taken = _inferred(out, findings, where)
    return out, taken


def _tensors(f: Finding) -> list[str]:
    ts = f.detail.get("tensors")
    if isinstance(ts, list) and all(isinstance(t, str) for t in ts):
        return ts
    return [f.tensor] if f.tensor else []


def _adopt(root: Finding, f: Finding) -> None:
    """``f`` (and what it carried) becomes one of ``root``'s consequences."""
    root.consequences.append(f)
    root.consequences.extend(f.consequences)
    f.consequences = []


def _group_sizes(config: list[Finding], where: Where) -> list[Finding]:
    s311: dict[tuple, list[Finding]] = {}
    s318: dict[tuple, list[Finding]] = {}
    for f in config:
        d = f.detail
        if d.get("declared_by") is None or f.code not in ("S311", "S318"):
            continue
        ck = where(f.file)[0]
        if f.code == "S311":
            key = (ck, d["declared_by"], repr(d.get("declared_group_size")))
            s311.setdefault(key + (d.get("strategy"),), []).append(f)
        else:
            s318.setdefault((ck, d["declared_by"], repr(d.get("group_size"))), []).append(f)
    roots: dict[int, Finding] = {}       # id of a cause's first finding -> its root
    folded: set[int] = set()             # the findings a root stands for
    unserved: dict[tuple, Finding] = {}
    for key, fs in s318.items():
        unserved[key] = fs[0] if len(fs) == 1 else _one_s318(fs, _file(fs, where))
        roots[id(fs[0])] = unserved[key]
        folded.update(id(f) for f in fs)
    for key, fs in s311.items():
        root = fs[0] if len(fs) == 1 else _one_s311(fs, _file(fs, where))
        c = unserved.pop(key[:3], None)
        if c is not None:
            _adopt(root, c)
            del roots[next(k for k, v in roots.items() if v is c)]
        roots[id(fs[0])] = root
        folded.update(id(f) for f in fs)
    return [roots.get(id(f), f) for f in config if id(f) in roots or id(f) not in folded]


def _formats(config: list[Finding], where: Where) -> list[Finding]:
    """A declared format (S310) or element (S312) the tensors are not takes
    the findings of its modules that follow from it."""
    absorbed: set[int] = set()
    for code, follows in (("S310", ("S312", "S311", "S318")), ("S312", ("S311", "S318"))):
        for root in config:
            if root.code != code or "on_disk" not in root.detail or id(root) in absorbed:
                continue
            mine, ck = set(_tensors(root)), where(root.file)[0]
            for f in config:
                if f is not root and f.code in follows and id(f) not in absorbed and \
                        where(f.file)[0] == ck and set(_tensors(f)) <= mine:
                    absorbed.add(id(f))
                    _adopt(root, f)
    return [f for f in config if id(f) not in absorbed]


def _inferred(config: list[Finding], findings: Sequence[Finding], where: Where) -> set[int]:
    """Each config root takes the S101s of its tensors under a descriptor
    scan inferred (from the config it contradicts)."""
    s101: dict[tuple[str | None, str | None], list[Finding]] = {}
    for f in findings:
        if f.code == "S101" and f.detail.get("inferred_from"):
            s101.setdefault((f.file, f.tensor), []).append(f)
    taken: set[int] = set()
    if not s101:
        return taken
    for root in config:
        if root.code not in ("S310", "S311", "S312"):
            continue
        files = sorted(where(root.file)[1] | ({root.file} if root.file else set()))
        for t in _tensors(root) + [t for c in root.consequences for t in _tensors(c)]:
            for p in files:
                for c in s101.get((p, t), ()):
                    if id(c) not in taken:
                        taken.add(id(c))
                        root.consequences.append(c)
    return taken


def _file(fs: Sequence[Finding], where: Where) -> str | None:
    """The file field of a root: the one file its findings name, else their
    checkpoint."""
    files = {f.file for f in fs}
    return next(iter(files)) if len(files) == 1 else where(fs[0].file)[0]


def _modules(fs: Sequence[Finding], keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    return {f.tensor or "": {k: f.detail.get(k) for k in keys if k in f.detail} for f in fs}


def _prefix(f: Finding) -> str:
    """What the message says declares it (``config group 'group_0'``)."""
    return f.message.split(": ", 1)[0]


def _one_s311(fs: Sequence[Finding], file: str | None) -> Finding:
    d = fs[0].detail
    k0s = sorted({f.detail.get("scales_k0") for f in fs}, key=lambda k: (k is None, k or 0))
    said = ", ".join("?" if k is None else str(k) for k in k0s)
    gs, strategy = d.get("declared_group_size"), d.get("strategy")
    how = f"group_size {gs}" if strategy in ("group", "tensor_group", "", None) else \
        f"strategy {strategy}"
    tensors = [f.tensor or "" for f in fs]
    return Finding(
        "S311", file, names_label(tensors),
        f"{_prefix(fs[0])}: {how} is declared for {len(fs)} modules, but their scale tensors "
        f"say k0 = {said}",
        (f"declared by {d.get('declared_by')}",
         *(f"{f.tensor}: scale tensor {f.detail.get('scale_shape')}, in_features "
           f"{f.detail.get('in_features')}" for f in fs[:SHOW]),
         *((f"… {len(fs) - SHOW} more modules in detail.modules",) if len(fs) > SHOW else ())),
        {"declared_by": d.get("declared_by"), "declared_group_size": gs, "strategy": strategy,
         "scales_k0": [k for k in k0s if k is not None], "tensors": tensors,
         "modules": _modules(fs, ("scale_shape", "scale_file", "in_features", "scales_k0"))},
        omitted=sum(f.omitted for f in fs))


def _one_s318(fs: Sequence[Finding], file: str | None) -> Finding:
    d = fs[0].detail
    tensors = [f.tensor or "" for f in fs]
    return Finding(
        "S318", file, names_label(tensors), f"{fs[0].message} ({len(fs)} modules)", fs[0].lines,
        {**{k: v for k, v in d.items() if k != "tensors"}, "tensors": tensors},
        omitted=sum(f.omitted for f in fs))
