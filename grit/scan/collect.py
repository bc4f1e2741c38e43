"""Inputs of ``grit scan``: walk paths, directory trees and manifests into a
stable list of model files, and open each one through its container reader
(``grit.io.safetensors.read``, ``grit.io.gguf.read``) — once per file."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .._files import loads_json, open_regular, read_regular
from ..errors import GritError
from ..io import sniff as _sniff_file
from ..io.containers import GGUF, HEAD_BYTES, SAFETENSORS, Container, by_suffix, named, sniffed
from ..io import remote as _remote
from ..io.gguf import GGUFContents
from ..io.gguf_split import MAX_PROBED, SHARD_NAME, shard_name
from ..io.http import default_cache
from ..io.location import Entry, Location, open_all
from ..io.problems import ProblemKind
from ..io.recognise import read_config, read_remote_config
from ..io.safetensors import SafetensorsFile
from ..io.source import ByteSource, LimitError
from .findings import Finding

__all__ = ["MODEL_SUFFIXES", "MANIFEST_SUFFIXES", "INDEX_SUFFIX", "ScannedFile", "Input",
           "expand", "sniff", "checkpoint_of", "is_shard", "index_of", "read_index", "ShardIndex",
           "open_input", "open_source", "why", "exists"]

MODEL_SUFFIXES = (".safetensors", ".gguf")
#: a manifest is a file named so (docs/scan.md, "Manifests")
MANIFEST_SUFFIXES = (".json", ".txt", ".lst", ".manifest")
#: the files a model folder holds beside its weights — its context, not inputs:
#: named on the command line (``grit scan *`` in a Hub download), they are
#: skipped, and never read as manifests
CONTEXT_NAMES = frozenset({
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "added_tokens.json", "vocab.json", "vocab.txt", "merges.txt",
    "tokenizer.model", "chat_template.json", "chat_template.jinja", "preprocessor_config.json",
    "processor_config.json", "hf_quant_config.json", "quantization_config.json",
    "params.json", "readme.md", "license", "license.md", "license.txt", ".gitattributes",
    "notice", "use_policy.md"})
#: suffixes of context files whatever their name
CONTEXT_SUFFIXES = (".md", ".jinja", ".py", ".png", ".jpg", ".gitattributes")
#: other weight formats, by their first bytes: what each is and what to do
FOREIGN = ((b"PK\x03\x04", "a zip archive (a PyTorch .pt/.bin checkpoint or a NumPy .npz): "
            "grit reads safetensors and GGUF; re-save it as safetensors (torch: "
            "safetensors.torch.save_file(torch.load(path)); NumPy: safetensors.numpy."
            "save_file(dict(numpy.load(path))))"),
           (b"\x80", "a Python pickle (a PyTorch .pt/.bin/.ckpt file or a .pkl): grit reads "
            "safetensors and GGUF, and never unpickles a file (it can run code); re-save it "
            "as safetensors where you trust it"),
           (b"\x93NUMPY", "a NumPy .npy array: grit reads safetensors and GGUF; re-save it with "
            "safetensors.numpy.save_file"))
#: the largest manifest read (config.json: grit.io.recognise.MAX_CONFIG)
MAX_MANIFEST = 16 * 1024 * 1024
#: a sharded safetensors checkpoint's index (``model.safetensors.index.json``)
INDEX_SUFFIX = ".safetensors.index.json"
#: the largest index read (a 1,000-shard MoE's weight_map is a few MiB)
MAX_INDEX = 64 * 1024 * 1024

#: what a shard file name in an index may not hold: separators, control characters
_NOT_IN_NAME = re.compile(r"[/\\\x00-\x1f]")
_SHARD = re.compile(r"^(?P<stem>.+)-\d{3,6}-of-\d{3,6}(?P<ext>\.[A-Za-z]+)$")


@dataclass
class ScannedFile:
    """One input of the report (a model file, or a path that failed)."""

    path: str
    format: str | None = None
    checkpoint: str | None = None
    parsed: bool = False
    tensors: int = 0
    grit_tensors: int = 0
    error: str | None = None

    def to_dict(self) -> dict:
        return {"path": self.path, "format": self.format, "checkpoint": self.checkpoint,
                "parsed": self.parsed, "tensors": self.tensors,
                "grit_tensors": self.grit_tensors, "error": self.error}


def why(e: BaseException) -> str:
    """One line naming an exception."""
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}"[:300]


def checkpoint_of(path: str) -> str:
    """Shards ``model-00001-of-00004.safetensors`` … form one checkpoint.
    A URL's checkpoint is named from its path alone: a query (a pre-signed
    URL's signature) and a fragment are not part of any sibling's name."""
    path = Location.of(path).bare
    folder, base = os.path.split(path)
    m = _SHARD.match(base)
    return os.path.join(folder, m["stem"] + m["ext"]) if m else path


def is_shard(path: str) -> bool:
    """Whether ``path`` names a member of a sharded checkpoint
    (``<stem>-NNNNN-of-NNNNN.<ext>``): only those have an index beside them."""
    return checkpoint_of(path) != Location.of(path).bare


def index_of(path: str) -> str:
    """The index a checkpoint's shards are listed in: ``model.safetensors.index.json``
    beside ``model-00001-of-00003.safetensors`` (and beside ``model.safetensors``)."""
    return checkpoint_of(path) + ".index.json"


@dataclass(frozen=True)
class ShardIndex:
    """A parsed ``*.safetensors.index.json``: ``weight_map`` {tensor: shard
    file name, relative to the index's folder} and ``metadata.total_size``
    (None when absent)."""

    path: str
    weight_map: dict[str, str]
    total_size: int | None


def _file_name(v: str) -> bool:
    """Whether ``v`` names a file in the index's own folder (no separator,
    no ``..``, nothing a path cannot hold)."""
    if v in ("", ".", "..") or os.path.basename(v) != v or _NOT_IN_NAME.search(v):
        return False
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:           # a lone surrogate from JSON escapes
        return False
    return True


def exists(path: str) -> bool:
    """Whether a file is there: locally ``os.path.exists``; remotely
    (http(s), hf://) False only for a 404 or a name the repository listing
    lacks (:meth:`grit.io.location.Location.exists`)."""
    return Location.of(path).exists(path)


def _read_limited(path: str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of a file, local or remote; OSError when
    it cannot be read (FileNotFoundError when it is absent: a remote 404)."""
    try:
        return Location.of(path).read_small(path, limit)
    except GritError as e:
        raise OSError(why(e)) from None


def read_index(path: str) -> ShardIndex:
    """Parse a shard index (a local file or a remote one: http(s), hf://);
    ValueError says what is wrong with it (OSError when it cannot be
    read)."""
    raw = _read_limited(path, MAX_INDEX)
    if len(raw) > MAX_INDEX:
        raise ValueError(f"the index is larger than {MAX_INDEX >> 20} MiB")
    try:
        doc = loads_json(raw, "index")
    except ValueError as e:
        raise ValueError(f"not a JSON document ({str(e)[:120]})") from None
    if not isinstance(doc, dict):
        raise ValueError("the index is not a JSON object")
    wm = doc.get("weight_map")
    if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
        raise ValueError('"weight_map" is not an object of tensor name -> shard file name')
    bad = next((v for v in sorted(set(wm.values())) if not _file_name(v)), None)
    if bad is not None:
        raise ValueError(f'"weight_map" names {bad[:80]!r}, which is not a file name in the '
                         "index's folder")
    meta = doc.get("metadata", {})
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if total is not None and (isinstance(total, bool) or not isinstance(total, int)
                              or total < 0):
        raise ValueError(f'"metadata.total_size" is {str(total)[:40]}, not a byte count')
    return ShardIndex(path, dict(wm), total)


def sniff(path: str) -> str | None:
    """The container a file's first bytes say it is ("gguf", "safetensors"),
    or None (also when it cannot be opened)."""
    try:
        return _sniff_file(path)
    except OSError:
        return None


# ---------------------------------------------------------------------------
# paths, trees, manifests


def expand(paths: Sequence[str], findings: list[Finding],
           files: list[ScannedFile], indexes: list[str] | None = None,
           jobs: int = 1) -> list[str]:
    """Model files to scan, in a stable order: each PATH as given, directory
    trees walked sorted, manifests expanded (one level).  A path that fails
    is a ScannedFile with ``error`` and an ``unreadable`` finding.  Shard
    indexes (``*.safetensors.index.json``) found in a tree or named as a PATH
    are appended to ``indexes``; a named index adds the shards it lists that
    exist (grit.scan.shards checks the rest).  With ``jobs`` > 1 the Hub
    repositories named (as PATHs, or in a manifest) are opened that many at
    a time before the walk, which then finds them open.

    Local paths, https URLs and ``hf://`` names take one way through here:
    each question (what a path names, a folder's files, an index's
    siblings, whether a shard is there) is its
    :class:`~grit.io.location.Location`'s.  A remote file is a model file
    or a shard index by its name (an https URL names one file, whose reader
    says what it is); sniffing unnamed files, manifests and a model's
    context files are questions of a folder whose reads cost no request."""
    if indexes is None:
        indexes = []
    out: list[str] = []
    context: list[str] = []        # a model folder's other files, named: skipped
    seen: set[str] = set()

    def add(p: str) -> None:
        key = Location.of(p).key
        if key not in seen:
            seen.add(key)
            out.append(p)

    def bad(code: str, p: str, message: str) -> None:
        files.append(ScannedFile(p, error=message))
        findings.append(Finding(code, p, None, message))

    def walk(p: str, folder: Entry) -> None:
        n0, i0 = len(out), len(indexes)

        def onerror(e: OSError) -> None:
            bad("S802", e.filename or p, f"cannot list directory: {e.strerror or e}")

        for q in folder.at.files(onerror):
            name = q.lower()
            if name.endswith(MODEL_SUFFIXES):
                add(q)
            elif name.endswith(INDEX_SUFFIX):
                indexes.append(q)
        if len(out) == n0 and len(indexes) == i0:
            bad("S803", p, f"no .safetensors or .gguf files {folder.folder}")

    def index(at: Location) -> None:
        """A named index: its shards that are there are scanned (on a
        broken index — its own finding, grit.scan.shards — its checkpoint's
        shards by name)."""
        indexes.append(at.path)
        try:
            listed = sorted(set(read_index(at.path).weight_map.values()))
        except (OSError, ValueError):
            listed = _shards_named(at)
        for n in listed:
            q = at.sibling(n)
            if at.is_file(q):
                add(q)

    def one(p: str, from_manifest: str | None) -> None:
        loc = Location.of(p)
        try:
            loc.admit()
        except GritError as e:
            bad("S809", p, str(e))
            return
        try:
            entry = loc.entry()
        except GritError as e:
            bad("S805", p, f"cannot read {loc.noun}: {why(e)}")
            return
        at = entry.at
        name = at.bare.lower()
        if entry.what == "folder":
            walk(p, entry)
        elif entry.what == "absent":
            bad("S801", p, entry.absent + (f" (listed in {from_manifest})" if from_manifest
                                           else ""))
        elif name.endswith(MODEL_SUFFIXES) or (at.free_reads and sniff(p) is not None):
            add(at.path)
            for q in split_siblings(at):
                add(q)
        elif name.endswith(INDEX_SUFFIX):
            index(at)
        elif not at.listable:            # a URL names one file: its reader says what it is
            add(at.path)
        elif not at.free_reads:
            bad("S804", p, "not a model file, a repository folder or a shard index")
        elif os.path.basename(p).lower() in CONTEXT_NAMES or \
                p.lower().endswith(CONTEXT_SUFFIXES):
            context.append(p)
        elif (kind := _foreign(p)) is not None:
            bad("S804", p, f"not a model file grit reads: {kind}")
        elif from_manifest is not None:
            bad("S804", p, f"listed in {from_manifest} but neither a model file nor a "
                           "directory (manifests do not nest)")
        elif not p.lower().endswith(MANIFEST_SUFFIXES):
            bad("S804", p, "not a model file, a directory, a shard index or a manifest (a "
                           f"manifest is named {', '.join(MANIFEST_SUFFIXES)})")
        else:
            try:
                listed = read_manifest(p)
            except (OSError, ValueError) as e:
                bad("S804", p, f"not a model file, a directory or a manifest: {e}")
                return
            if not listed:
                bad("S804", p, "manifest lists no paths")
            open_all(listed, jobs)
            for q in listed:
                one(q, p)

    open_all([os.fspath(p) for p in paths], jobs)
    for p in paths:
        one(os.fspath(p), None)
    if context and not out and not findings:
        bad("S803", context[0], f"{len(context)} file(s) named and none a model file: "
                                 f"{', '.join(os.path.basename(c) for c in context[:4])} "
                                 "are a model's context (config, tokenizer, README), not inputs")
    return out


def split_siblings(at: Location) -> list[str]:
    """The other shards of the gguf-split series a named GGUF file
    belongs to by its name (``PREFIX-0000i-of-0000N.gguf``), those that
    are there, in order: a folder that can be listed is listed once; beside
    an https URL (none beside a pre-signed one) each is asked for, for a
    series of at most :data:`MAX_PROBED`.  Whether the files really are
    the shards of one model is grit.scan.shards' check."""
    m = SHARD_NAME.fullmatch(os.path.basename(at.bare))
    if m is None:
        return []
    n = int(m.group(3))
    names = [shard_name(m.group(1), i, n) for i in range(n)]
    if at.listable:
        try:
            there = set(at.listing())
        except (OSError, GritError):
            return []
        return [at.sibling(x) for x in names if x != m.group(0) and x in there]
    if n > MAX_PROBED:
        return []
    out = []
    for x in names:
        q = at.sibling(x)
        if x != m.group(0) and at.is_file(q):
            out.append(q)
    return out


def _shards_named(index: Location) -> list[str]:
    """The names of the model files beside an index that belong to its
    checkpoint by name (none where the folder cannot be listed)."""
    stem = Location.of(index.path[:-len(".index.json")]).key
    try:
        names = index.listing()
    except (OSError, GritError):
        return []
    return sorted(n for n in names if n.lower().endswith(MODEL_SUFFIXES)
                  and Location.of(checkpoint_of(index.sibling(n))).key == stem)


def _foreign(path: str) -> str | None:
    """What another weight format a file is, from its first bytes (None: not
    one grit names)."""
    try:
        with open_regular(path) as f:
            head = f.read(8)
    except OSError:
        return None
    return next((what for magic, what in FOREIGN if head.startswith(magic)), None)


def read_manifest(path: str) -> list[str]:
    """A JSON list of paths, ``{"paths": [...]}``, or a text file with one path
    per line (``#`` comments, blank lines ignored).  Relative paths are
    relative to the manifest's folder."""
    try:
        raw = read_regular(path, MAX_MANIFEST)
    except GritError:
        raise ValueError("manifest larger than 16 MiB") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    if "\x00" in text:
        raise ValueError("binary content")
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        try:
            doc = loads_json(text, "manifest")
        except ValueError as e:
            raise ValueError(f"invalid JSON manifest ({e})") from None
        items = doc.get("paths") if isinstance(doc, dict) else doc
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise ValueError('a JSON manifest is a list of path strings or {"paths": [...]}')
    else:
        items = [ln.strip() for ln in text.splitlines()]
        items = [ln for ln in items if ln and not ln.startswith("#")]
    base = os.path.dirname(path)
    return [x if os.path.isabs(x) or Location.of(x).remote else os.path.join(base, x)
            for x in items]


# ---------------------------------------------------------------------------
# one model file


@dataclass
class Input:
    """One model file as read: its report record, what its container's
    reader returned (``contents``: a SafetensorsFile, a GGUFContents; None
    when unreadable), the findings made while opening it, and the
    config.json beside a file the conventions apply to."""

    file: ScannedFile
    contents: Any = None
    config: dict | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def container(self) -> Container | None:
        """The container the file was read as (None: not read)."""
        return named(self.file.format) if self.contents is not None else None

    @property
    def safetensors(self) -> SafetensorsFile | None:
        return self.contents if self.file.format == SAFETENSORS.name else None

    @property
    def gguf(self) -> GGUFContents | None:
        return self.contents if self.file.format == GGUF.name else None

    @property
    def source(self) -> ByteSource | None:
        """The byte source the contents were read through."""
        c = self.container
        return c.source_of(self.contents) if c is not None else None


def open_input(path: str, cache: bool = True) -> Input:
    """Read one model file with the reader its content (else its suffix)
    names.  Never raises for bad input: a file that cannot be opened or
    parsed has ``file.error`` set and an ``unreadable`` finding."""
    rec = ScannedFile(path, checkpoint=checkpoint_of(path))
    inp = Input(rec)
    if Location.of(path).remote:
        return _remote_config(_open_remote(inp, cache))
    sniffed = sniff(path)
    by_suffix = _by_suffix(path, query=False)
    rec.format = sniffed or by_suffix or "safetensors"
    _misnamed(inp, by_suffix, sniffed)

    def read() -> list:
        c = named(rec.format)
        inp.contents = c.read(path)
        if c.conventions:
            inp.config = read_config(path)
        return inp.contents.problems
    return _read(inp, read)


def _read(inp: Input, read: Callable[[], list]) -> Input:
    """Run ``read`` (it fills ``inp`` with the container it read, as
    ``inp.file.format`` names it, and returns the reader's problems): an
    error it raises, or an UNREADABLE problem, is ``file.error`` and an S805
    finding; otherwise the file is parsed."""
    rec = inp.file
    limited = False
    try:
        problems = read()
    except (OSError, GritError, ValueError) as e:
        rec.error = why(e)
        limited = isinstance(e, LimitError)
    else:
        fatal = [p for p in problems if p.kind is ProblemKind.UNREADABLE]
        if fatal:
            rec.error = f"{rec.format}: {fatal[0].message}"
        else:
            rec.parsed = True
    if rec.error:
        inp.contents = None
        inp.findings.append(Finding("S808" if limited else "S805", rec.path, None,
                                    f"could not read as {rec.format}: {rec.error}"))
    return inp


def _misnamed(inp: Input, by_suffix: str | None, sniffed: str | None) -> None:
    """S131 when the file's name and its first bytes name two containers."""
    if sniffed is not None and by_suffix is not None and sniffed != by_suffix:
        inp.findings.append(Finding(
            "S131", inp.file.path, None,
            f"the file is named .{by_suffix} but its content is {sniffed}; it was scanned as "
            f"{sniffed}",
            ("GGUF files begin with the magic 'GGUF'; safetensors files with an 8-byte header "
             "length followed by '{'. A reader that trusts the suffix will reject this file.",),
            {"suffix": by_suffix, "content": sniffed}))


def _open_remote(inp: Input, cache: bool = True) -> Input:
    """A remote file — http(s), or a Hub repository's ``hf://ORG/REPO@SHA/PATH``
    (a :class:`grit.io.hub.HubSource`) — read as :func:`open_source` reads
    (the header alone at level 1)."""
    rec = inp.file
    rec.format = _by_suffix(rec.path) or "safetensors"
    headers = default_cache() if cache else None

    def read() -> list:
        return _from_source(inp, Location.of(rec.path).open(rec.path, headers))
    return _read(inp, read)


def _by_suffix(path: str, query: bool = True) -> str | None:
    """The container a file's name ends in, if any (a URL's name without
    its ``?query``)."""
    c = by_suffix(path.split("?")[0] if query else path)
    return c.name if c is not None else None


def open_source(inp: Input, src: ByteSource) -> Input:
    """Read ``inp``'s model file through the byte source ``src`` (a remote
    file; any ByteSource) with the reader its first bytes name, as
    :func:`open_input` does for a local file: the GGUF magic, gguf; a
    safetensors header, safetensors; neither, the name's suffix (else
    safetensors), with the S131 finding when suffix and content disagree.
    The first 8 bytes are read with the safetensors reader's own label (a
    header cache answers its read of them); a ninth only for a file named
    .gguf that is not GGUF.  Never raises for bad input: a file that cannot
    be read has ``file.error`` set and an S805 finding."""
    inp.file.format = _by_suffix(inp.file.path) or "safetensors"
    return _read(inp, lambda: _from_source(inp, src))


def _from_source(inp: Input, src: ByteSource) -> list:
    """:func:`open_source`'s reading: the container sniffed from ``src``'s
    first bytes (``inp.file.format``), read through it; its problems."""
    rec = inp.file
    by_suffix = _by_suffix(rec.path)
    # the 8 bytes the safetensors reader reads first (its own label: a header
    # cache answers it); more only when they refute the container the name
    # says, to tell what the file is instead
    head = src.read(0, min(8, src.size), "header length")
    said = named(by_suffix) if by_suffix is not None else None
    if said is not None and said.sniff_bytes <= len(head) and not said.sniff(head, src.size) \
            and src.size >= HEAD_BYTES:
        head = src.read(0, HEAD_BYTES, "header length")
    found = sniffed(head, src.size)
    sniffed_name = found.name if found is not None else None
    rec.format = sniffed_name or rec.format
    _misnamed(inp, by_suffix, sniffed_name)
    inp.contents = named(rec.format).read_source(src, rec.path)
    return inp.contents.problems


def _remote_config(inp: Input) -> Input:
    """The config.json beside a remote safetensors file, read remotely (a
    404 is no config, as a missing local file is; a config that is there
    but cannot be read is an S805 finding of its own, the model file still
    scanned)."""
    if inp.safetensors is None or not inp.file.parsed:
        return inp
    if _remote.in_session() and is_shard(inp.file.path):
        # asked now, on the thread reading this file, rather than one file after
        # another by the checkpoint-wide checks (grit.scan.shards), which find
        # the answers kept: whether the index is there, and the index itself
        idx = index_of(inp.file.path)
        if exists(idx):
            try:
                read_index(idx)
            except (OSError, ValueError):      # the checks report it
                pass
    try:
        inp.config = read_remote_config(inp.file.path)
    except GritError as e:
        cfg = Location.of(inp.file.path).sibling("config.json")
        inp.findings.append(Finding("S805", cfg, None, f"could not read config.json: {why(e)}"))
    return inp
