"""Hugging Face Hub repositories as inputs: ``hf://ORG/REPO[@REVISION][/PATH]``
(and ``hf://datasets/ORG/REPO…``), read through grit's own HTTP client behind
the byte-source interface (:class:`grit.io.source.ByteSource`).

A repository is opened at one commit: :func:`repo` resolves the revision
(a branch, a tag, ``refs/pr/N`` or a sha; ``main`` when none is given) to
its commit sha once, and lists the repository's files at that sha with the
sizes and LFS sha256 the Hub API reports.  Every file of a scan is then
named ``hf://ORG/REPO@SHA/PATH`` and read at that commit, so a push while a
checkpoint is scanned cannot mix two versions of it.

:class:`HubSource` reads one file by exact ranged GETs of its resolve URL
at the commit, through grit's own bounded HTTP client
(:func:`grit.io.http.read_ranged`, under the :class:`~grit.io.http.NetPolicy`
http(s) URLs run under: total deadlines, header limits, redirects only to
http(s), the token not carried to another host, per-file and per-scan
caps): each ``(offset, length)`` a reader asks for is one request for
exactly those bytes, no read-ahead.  Its size is the listing's; a read
that brings back other than the bytes asked for is a
:class:`~grit.io.http.RemoteError`.  Container headers are kept in the
:class:`~grit.io.http.HeaderCache`, keyed by the file's ``hf://`` name with
the commit sha, its LFS sha256 (its git blob id when it is not in LFS), its
size and the byte range.

The one Hub API call per repository and revision (``GET
/api/{models,datasets}/ORG/REPO[/revision/REV]?blobs=true``: the commit and
the listing, what ``huggingface_hub``'s ``repo_info(…, files_metadata=True)``
asks) goes through the same client and policy: total deadlines, a 408,
429, 5xx or timeout retried with backoff within ``retry_time``, the
answer read under the deadline for its length (at most
:data:`MAX_ANSWER` bytes).  Inside a :func:`grit.io.remote.session` (one scan) a revision is
resolved once; a repository at a commit is listed once per process and
token.  The small files beside a model file (config.json, the shard
index) are read by :mod:`grit.io.remote`, once per scan, and kept in the
header cache by commit, so a rescan asks the Hub for nothing but the
revision.

The token is ``huggingface_hub``'s own lookup (``HF_TOKEN``, else the saved
token) and the endpoint ``HF_ENDPOINT`` (else ``https://huggingface.co``),
both read when a repository is opened.  Every failure of the Hub or the
network (401 for a private or gated repository without the right token,
404 for a repository, revision or file, a timeout past its retries) is a
:class:`~grit.io.http.RemoteError` with the HTTP status where there was one.
Nothing is written outside grit's header cache: no ``huggingface_hub``
download cache is used.  ``huggingface_hub`` is the optional extra
``grit-tensor[hub]``; without it an ``hf://`` input is a :class:`HubUnavailable`
error naming the extra.
"""
from __future__ import annotations

import contextvars
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import quote, unquote

from ..errors import GritUsageError
from .._files import loads_json
from . import remote as _remote
from .http import (SMALL_READ, CachedSource, HeaderCache, RemoteError, Requester,
                   is_url, parse_url, policy, read_document, read_ranged)

__all__ = ["HF_PREFIX", "HubPath", "HubFile", "HubRepo", "HubSource", "HubUnavailable",
           "is_hub", "is_remote", "repo", "endpoint", "resolve_all", "url_of",
           "api_url", "PREFIX", "MAX_ANSWER"]

HF_PREFIX = "hf://"
DEFAULT_ENDPOINT = "https://huggingface.co"
#: the repository kinds an hf:// path may name, by their path prefix
_KINDS = {"datasets": "dataset", "models": "model", "spaces": "space"}
_SHA = re.compile(r"^[0-9a-f]{40}$")
#: the revisions written with their slashes (the others are %-quoted)
_SPECIAL_REF = re.compile(r"^refs/(?:pr|convert)/[^/]+$")
#: the longest hf:// name and revision accepted
MAX_NAME = 4096
MAX_REVISION = 256
#: a branch or tag name git accepts (git check-ref-format, in short), or a sha
_REVISION = re.compile(r"^(?!.*\.\.)(?!.*//)[^\x00-\x20\x7f~^:?*\[\\]+$")
#: one half of a repository id, as the Hub allows it
_REPO_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
#: the most files a repository listing may hold (the largest Hub repos hold ~10^5)
MAX_LISTING = 1_000_000
#: the longest answer of the Hub API read (a listing of ~10^5 files is ~20 MiB)
MAX_ANSWER = 256 << 20
#: repositories kept open (by endpoint, token, kind, id and commit sha)
_KEEP = 32


class HubUnavailable(GritUsageError):
    """An ``hf://`` input without ``huggingface_hub`` installed."""


def is_hub(path) -> bool:
    """Whether ``path`` names a Hub repository or a file in one (``hf://``)."""
    return isinstance(path, str) and path[:5].lower() == HF_PREFIX


def endpoint() -> str:
    """The Hub endpoint: ``$HF_ENDPOINT`` when set (read at each call), else
    huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _hf():
    try:
        import huggingface_hub  # noqa: PLC0415 - optional: only hf:// inputs need it
        import huggingface_hub.errors  # noqa: F401, PLC0415
    except ImportError:
        raise HubUnavailable("hf:// inputs need huggingface_hub: pip install 'grit-tensor[hub]'") \
            from None
    _no_agent_registry(huggingface_hub)
    return huggingface_hub


def _no_agent_registry(hf) -> None:
    """huggingface_hub builds each request's User-Agent with an "agent
    harness" registry it first fetches from its import-time endpoint (not
    the one grit passes) and then writes under HF_HOME.  grit asks only the
    endpoint it was given and writes nothing outside its own cache, so an
    unloaded registry is set empty (the User-Agent then names no agent)."""
    mod = getattr(getattr(hf, "utils", None), "_detect_agent", None)
    if mod is not None and getattr(mod, "_registry", "") is None:
        mod._registry = {"standardEnvVars": [], "harnesses": {}}


@dataclass(frozen=True, slots=True, kw_only=True)
class HubPath:
    """A parsed ``hf://[datasets/]ORG/REPO[@REVISION][/PATH]``: ``kind`` is
    ``model``, ``dataset`` or ``space``; ``revision`` None means ``main``;
    ``path`` is "" for the repository's root."""

    kind: str
    repo_id: str
    revision: str | None
    path: str

    @classmethod
    def parse(cls, text: str) -> "HubPath":
        if not is_hub(text):
            raise GritUsageError(f"not an hf:// path: {text!r:.200}")
        if len(text) > MAX_NAME:
            raise GritUsageError(f"{text[:80]!r}…: an hf:// name of {len(text)} characters "
                                 f"(at most {MAX_NAME})")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise GritUsageError(f"{text!r:.200}: an hf:// name holds bytes that are not "
                                 "UTF-8") from None
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
            raise GritUsageError(f"{text!r:.200}: an hf:// name holds control characters")
        parts = [p for p in text[len(HF_PREFIX):].split("/")]
        kind = "model"
        if parts and parts[0] in _KINDS:
            kind = _KINDS[parts.pop(0)]
        if len(parts) < 2 or not parts[0] or not parts[1] or parts[1].startswith("@"):
            raise GritUsageError(f"{text!r:.200}: an hf:// path names ORG/REPO "
                                 "(hf://ORG/REPO[@REVISION][/PATH])")
        org, name, rest = parts[0], parts[1], parts[2:]
        revision = None
        if "@" in name:
            name, first = name.split("@", 1)
            if first == "refs" and len(rest) >= 2 and rest[0] in ("pr", "convert"):
                revision, rest = "/".join([first] + rest[:2]), rest[2:]
            else:
                revision = unquote(first)
            if not revision:
                raise GritUsageError(f"{text!r:.200}: an empty revision after '@'")
            if len(revision) > MAX_REVISION or not _REVISION.match(revision):
                raise GritUsageError(f"{text!r:.200}: {revision!r:.80} is not a revision (a "
                                     f"branch, tag or sha: at most {MAX_REVISION} characters, "
                                     "no control characters, '..', '~', '^', ':', '?', '*', "
                                     "'[' or '\\')")
        if not _REPO_PART.match(org) or not _REPO_PART.match(name):
            raise GritUsageError(f"{text!r:.200}: {org}/{name!r:.80} is not a repository id "
                                 "(letters, digits, '-', '_', '.'; at most 96 each)")
        path = "/".join(p for p in rest if p)
        if any(p in (".", "..") for p in rest):
            raise GritUsageError(f"{text!r:.200}: '.' and '..' are not paths in a repository")
        return cls(kind=kind, repo_id=f"{org}/{name}", revision=revision, path=path)

    def __str__(self) -> str:
        prefix = "" if self.kind == "model" else f"{self.kind}s/"
        r = self.revision
        rev = "" if r is None else "@" + (r if _SPECIAL_REF.match(r) else quote(r, safe=""))
        return f"{HF_PREFIX}{prefix}{self.repo_id}{rev}" + (f"/{self.path}" if self.path else "")

    def at(self, revision: str | None, path: str | None = None) -> "HubPath":
        """This path at another revision (and another file)."""
        return HubPath(kind=self.kind, repo_id=self.repo_id, revision=revision,
                       path=self.path if path is None else path)


@dataclass(frozen=True, slots=True, kw_only=True)
class HubFile:
    """One file of a repository listing: its path in the repository, its
    size, the sha256 of its LFS object (None when it is not in LFS) and its
    git blob id."""

    path: str
    size: int
    sha256: str | None
    blob_id: str | None

    @property
    def validator(self) -> str | None:
        """What names these exact bytes: the LFS sha256, else the blob id."""
        return self.sha256 or self.blob_id


class HubRepo:
    """One repository at one commit: ``sha``, the ``files`` listed there
    ({path: HubFile}), the ``endpoint`` and the ``token`` its files are read
    with.  Open one with :func:`repo`."""

    def __init__(self, where: HubPath, sha: str, files: dict[str, HubFile], endpoint: str,
                 token: str | None = None):
        self.where = where.at(None, "")
        #: the small files read whole (config.json, the index), by (path, limit)
        self.small: dict[tuple[str, int], bytes] = {}
        self.sha = sha
        self.files = files
        self.endpoint = endpoint
        self.token = token

    def name(self, path: str) -> str:
        """The ``hf://`` name of a file at this repository's commit."""
        return str(self.where.at(self.sha, path))

    def under(self, folder: str) -> list[str]:
        """The files under ``folder`` ("" for all), sorted."""
        pre = folder.strip("/") + "/" if folder.strip("/") else ""
        return sorted(p for p in self.files if p.startswith(pre))

    def is_folder(self, path: str) -> bool:
        pre = path.strip("/") + "/"
        return any(p.startswith(pre) for p in self.files)

    def open(self, path: str, cache: HeaderCache | None = None) -> "HubSource":
        """The byte source of one listed file (RemoteError 404 when the
        listing has no such file)."""
        f = self.files.get(path)
        if f is None:
            raise RemoteError(f"{self.name(path)}: HTTP 404: the repository has no such file at "
                              f"commit {self.sha[:12]}", 404)
        return HubSource(self, f, cache)

    def read_small(self, path: str, limit: int, cache: HeaderCache | None = None) -> bytes | None:
        """The first ``limit + 1`` bytes of a small listed file (all of it
        when it is no longer), None when the listing lacks it; read once (a
        file at a commit never changes; it is kept in ``cache`` too)."""
        if path not in self.files:
            return None
        key = (path, limit)
        hit = self.small.get(key)
        if hit is None:
            with self.open(path, cache) as src:
                hit = src.read(0, min(src.size, limit + 1), "small file")
            if len(hit) <= SMALL_READ:
                self.small[key] = hit
        return hit


def url_of(r: "HubRepo", path: str) -> str:
    """The resolve URL of a file at the repository's commit on the
    repository's endpoint (``hf_hub_url`` moves its URL to the endpoint
    asked for only while huggingface_hub's import-time endpoint is a prefix
    of its template, so it is written here)."""
    prefix = "" if r.where.kind == "model" else f"{r.where.kind}s/"
    return f"{r.endpoint}/{prefix}{r.where.repo_id}/resolve/{r.sha}/{quote(path)}"


_LOCK = threading.Lock()
_OPEN: "OrderedDict[tuple, HubRepo]" = OrderedDict()


def api_url(ep: str, where: HubPath, revision: str | None) -> str:
    """The Hub API URL that answers a revision's commit and its files with
    their sizes and LFS objects (what ``huggingface_hub``'s ``repo_info(…,
    files_metadata=True)`` asks)."""
    base = f"{ep}/api/{where.kind}s/{where.repo_id}"
    if revision is None:
        return base + "?blobs=true"
    return f"{base}/revision/{quote(revision, safe='')}?blobs=true"


def _ask_repo(ep: str, where: HubPath, rev: str | None, token: str | None) -> dict:
    """The Hub's answer for a repository at a revision, asked through
    grit's own client under the network policy (deadlines, retries with
    backoff for 408/429/5xx and timeouts within ``retry_time``, the scan's
    caps); a RemoteError with the HTTP status otherwise."""
    name = str(where.at(rev, ""))
    asker = Requester(name)
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    raw = read_document(asker, api_url(ep, where, rev), headers, MAX_ANSWER)
    try:
        doc = loads_json(raw, "the Hub's answer")
    except ValueError as e:
        raise RemoteError(f"{name}: {str(e)[:200]}") from None
    if not isinstance(doc, dict):
        raise RemoteError(f"{name}: the Hub's answer is not a JSON object")
    return doc


def _scope_sha(key: tuple) -> str | None:
    s = _remote.current()
    if s is None:
        return None
    with s.lock:
        return s.revisions.get(key)


def repo(where: HubPath | str) -> HubRepo:
    """The repository ``where`` names, at the commit its revision resolves
    to now (a sha names itself; a repository at a sha is listed once per
    process and token; inside a :func:`grit.io.remote.session` a revision is resolved
    once)."""
    hf = _hf()
    if isinstance(where, str):
        where = HubPath.parse(where)
    ep = endpoint()
    try:
        parse_url(ep + "/")
    except GritUsageError as e:
        raise GritUsageError(f"HF_ENDPOINT: {e}") from None
    try:
        token = hf.get_token()
    except (OSError, ValueError) as e:       # a saved token that cannot be read
        raise RemoteError(f"{where}: the saved Hub token cannot be read: "
                          f"{type(e).__name__}: {str(e)[:160]}") from None
    rev = where.revision
    key = (ep, token, where.kind, where.repo_id)
    sha = rev if rev is not None and _SHA.match(rev) else _scope_sha(key + (rev,))
    if sha is not None:
        hit = _kept(key + (sha,))
        if hit is not None:
            return hit
    # one request: the commit the revision names and the files at that commit
    info = _ask_repo(ep, where, rev, token or None)
    got = info.get("sha")
    if not isinstance(got, str) or not _SHA.match(got):
        raise RemoteError(f"{where.at(rev, '')}: the Hub named no commit for revision "
                          f"{rev or 'main'!r:.80} (sha {str(got)[:60]!r})")
    if sha is not None and got != sha:
        raise RemoteError(f"{where.at(rev, '')}: asked for commit {sha}, the Hub answered "
                          f"{got}")
    sha = got
    s = _remote.current()
    if s is not None:
        with s.lock:
            s.revisions[key + (rev,)] = sha
    hit = _kept(key + (sha,))
    if hit is not None:
        return hit
    siblings = info.get("siblings")
    if siblings is None:
        siblings = []
    if not isinstance(siblings, list):
        raise RemoteError(f"{where.at(sha, '')}: the listing is not a list")
    if len(siblings) > MAX_LISTING:
        raise RemoteError(f"{where.at(sha, '')}: the listing holds more than {MAX_LISTING} "
                          "files")
    files: dict[str, HubFile] = {}
    for e in siblings:
        e = e if isinstance(e, dict) else {}
        path, size = e.get("rfilename"), e.get("size")
        if not isinstance(path, str) or isinstance(size, bool) or not isinstance(size, int) \
                or size < 0 or size >= 1 << 63:
            raise RemoteError(f"{where.at(sha, '')}: the listing names {str(path)[:80]!r} "
                              f"with size {str(size)[:40]!r}")
        lfs = e.get("lfs")
        sha256 = lfs.get("sha256") if isinstance(lfs, dict) else None
        blob = e.get("blobId")
        files[path] = HubFile(path=path, size=size,
                              sha256=sha256 if isinstance(sha256, str) else None,
                              blob_id=blob if isinstance(blob, str) else None)
    r = HubRepo(where, sha, files, ep, token or None)
    with _LOCK:
        _OPEN[key + (sha,)] = r
        while len(_OPEN) > _KEEP:
            _OPEN.popitem(last=False)
    if s is not None:
        with s.lock:
            s.repos[key + (sha,)] = r
    return r


def _kept(key: tuple) -> "HubRepo | None":
    """The repository opened at a commit: this session's (every repository a
    scan opens is kept while it runs, however many), else the process's."""
    s = _remote.current()
    if s is not None:
        with s.lock:
            hit = s.repos.get(key)
        if hit is not None:
            return hit
    with _LOCK:
        hit = _OPEN.get(key)
        if hit is not None:
            _OPEN.move_to_end(key)
    if hit is not None and s is not None:
        with s.lock:
            s.repos[key] = hit
    return hit


def resolve_all(names: list[str], jobs: int) -> None:
    """Open the repositories ``names`` (hf:// names) ``jobs`` at a time, so
    that a scan walking them one after the other finds each opened (kept
    in this :func:`grit.io.remote.session`).  A name that cannot be opened is left for the
    walk to report."""
    todo = list(dict.fromkeys(n for n in names if is_hub(n)))
    if jobs <= 1 or len(todo) <= 1 or _remote.current() is None:
        return

    def one(name: str) -> None:
        try:
            repo(name)
        except GritUsageError:        # RemoteError, HubUnavailable, a bad name
            pass
    with ThreadPoolExecutor(max_workers=min(jobs, len(todo)),
                            thread_name_prefix="grit-hub") as pool:
        # (each task in a copy of this thread's context: the session is there)
        futures = [pool.submit(contextvars.copy_context().run, one, n) for n in todo]
        for f in futures:
            f.result()


#: the first bytes of a Hub file one request fetches when its header is first
#: read (the header of a shard of a few hundred tensors, and the scales a
#: quantiser writes right after it; huggingface_hub's own metadata read asks
#: for 100,000)
PREFIX = 64 * 1024


class HubSource(CachedSource):
    """One file of a repository at its commit, read by exact ranged GETs of
    its resolve URL (see the module docstring); its first read fetches its
    first :data:`PREFIX` bytes, what lies in them is served from them.
    ``requests`` and ``bytes_read`` count what was asked of the Hub;
    ``cache_hits`` the header reads the cache answered."""

    prefix_bytes = PREFIX

    def __init__(self, repo: HubRepo, file: HubFile, cache: HeaderCache | None = None):
        self.repo = repo
        self.file = file
        self.name = self.url = repo.name(file.path)
        self.size = file.size
        self.cache = cache
        self.policy = policy()
        self.requests = 0
        self.bytes_read = 0
        self.cache_hits = 0
        self._url = url_of(repo, file.path)
        self._headers = {} if not repo.token else {"Authorization": f"Bearer {repo.token}"}

    def _identity(self) -> tuple[str, str] | None:
        """The cache's key for this file (grit.io.http.CachedSource): its
        name at the commit and its LFS sha256 (else blob id) — a file at a
        commit never changes."""
        v = self.file.validator
        return None if v is None else (self.name, v)

    def _readinto(self, offset: int, mv: memoryview) -> int:
        n = mv.nbytes
        got = read_ranged(self, self._url, offset, mv, self._headers, None)
        if got != n:
            raise RemoteError(f"{self.name}: asked for {n} bytes at offset {offset}, the Hub "
                              f"sent {got} (the listing says the file holds {self.size})", 206)
        return n


def is_remote(path) -> bool:
    """Whether ``path`` is read over the network (http(s) or hf://)."""
    return is_url(path) or is_hub(path)


