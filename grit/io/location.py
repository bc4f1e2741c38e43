"""Where a checkpoint's files are: a local path, an http(s) URL or an
``hf://`` name, asked one way.

:meth:`Location.of` names the kind once (one class each: :class:`Local`,
:class:`Http`, :class:`Hub`); after that a caller asks the
:class:`Location` for a file beside a model file (:meth:`~Location.sibling`),
whether one is there (:meth:`~Location.exists`, :meth:`~Location.is_file`),
its first bytes (:meth:`~Location.read_small`), its byte source
(:meth:`~Location.open`), the folder's names (:meth:`~Location.listing`),
what the path names (:meth:`~Location.entry`: a folder, a file, nothing)
and the files under a folder (:meth:`~Location.files`), and never asks
itself whether the path is local or remote.  A remote answer is asked
once inside :func:`grit.io.remote.session`.
"""
from __future__ import annotations

import errno
import os
import posixpath
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterator, Literal, Sequence

from .._files import open_regular
from ..errors import GritUsageError
from . import hub as _hub
from . import remote as _remote
from .http import HeaderCache, RemoteError, is_url, parse_url
from .hub import HubPath, is_hub, repo
from .source import ByteSource, open_source

__all__ = ["Location", "Local", "Http", "Hub", "Entry", "Kind", "open_all"]

#: the kinds of location: a local path, an http(s) URL, an ``hf://`` name
Kind = Literal["local", "http", "hub"]


@dataclass(frozen=True)
class Entry:
    """What a path names (:meth:`Location.entry`): ``what`` is a folder, a
    file or nothing (``absent``); ``at`` is the location to read it at (an
    ``hf://`` name at the commit its revision resolved to); ``absent`` and
    ``folder`` are the words a message says them with."""

    what: Literal["folder", "file", "absent"]
    at: "Location"
    #: "no such …" of a path that names nothing
    absent: str
    #: where a folder holding no model file is ("under this directory", …)
    folder: str


@dataclass(frozen=True)
class Location:
    """The location of a checkpoint file or folder: ``path`` as given;
    ``kind`` (local, http, hub) and ``folder``, the folder its siblings
    are in (a local folder, or a remote name ending in ``/`` or an
    ``hf://`` repository's root, is its own folder; a file's is the one
    holding it)."""

    path: str

    kind: ClassVar[Kind]
    #: whether its files are read over the network
    remote: ClassVar[bool] = True
    #: whether its folder can be listed (an https server lists nothing)
    listable: ClassVar[bool] = True
    #: whether a file's first bytes cost no request (so a file of any name
    #: may be sniffed, or read as a manifest)
    free_reads: ClassVar[bool] = False
    #: what a failure to answer :meth:`entry` failed to read
    noun: ClassVar[str] = "the location"

    @classmethod
    def of(cls, path: str | os.PathLike) -> "Location":
        p = os.fspath(path)
        if is_hub(p):
            return Hub(p)
        if is_url(p):
            return Http(p)
        return Local(p)

    @property
    def folder(self) -> str:
        p = self.path
        whole = p.endswith("/")
        return p.rstrip("/") if whole else posixpath.dirname(p)

    @property
    def bare(self) -> str:
        """The path as a file's name (a URL's without its query and
        fragment)."""
        return self.path

    @property
    def key(self) -> str:
        """What names the file however the path is written (a local file's
        real path), to tell two paths naming one file."""
        return self.path

    def sibling(self, name: str) -> str:
        """The path of the file ``name`` in this location's folder."""
        return f"{self.folder}/{name}" if self.folder else name

    def _target(self, name_or_path: str) -> "tuple[Location, str]":
        """A bare file name is a sibling; anything holding a separator (or
        naming a remote file) is a path already, asked of its own kind."""
        if "/" in name_or_path or os.sep in name_or_path or is_url(name_or_path) \
                or is_hub(name_or_path):
            return Location.of(name_or_path), name_or_path
        return self, self.sibling(name_or_path)

    def exists(self, name_or_path: str) -> bool:
        """Whether a file is there: locally ``os.path.exists``; remotely
        False only for a 404 or a name the repository listing lacks (a
        server failing otherwise counts as holding it, so the read that
        follows reports the failure).  Inside a
        :func:`grit.io.remote.session`, a remote file is asked once (the
        probe a read of it makes)."""
        loc, p = self._target(name_or_path)
        return loc._exists(p)

    def is_file(self, name_or_path: str) -> bool:
        """Whether a file (not a folder) is there; remotely as
        :meth:`exists`."""
        loc, p = self._target(name_or_path)
        return loc._is_file(p)

    def read_small(self, name_or_path: str, limit: int) -> bytes:
        """At most ``limit + 1`` bytes of a file (all of it when no longer:
        a caller sees a file over its limit by the length).  Absent is
        FileNotFoundError (a remote 404, a name the listing lacks); a local
        file that cannot be read (anything but a regular file included) an
        OSError; a remote one that cannot be read the
        :class:`~grit.io.http.RemoteError` saying why.  Inside a
        :func:`grit.io.remote.session`, a remote file is asked once."""
        loc, p = self._target(name_or_path)
        return loc._read_small(p, limit)

    def open(self, name_or_path: str, cache: HeaderCache | None = None) -> ByteSource:
        """The byte source of a file: a local file's (mapped), an https
        URL's (ranged reads through ``cache``; inside a scan's session its
        probe is the one a series check would make), an ``hf://`` file's
        at its commit (:class:`grit.io.hub.HubSource`)."""
        loc, p = self._target(name_or_path)
        return loc._open(p, cache)

    # each kind's answers, for a path of its own kind
    def _exists(self, p: str) -> bool:
        raise NotImplementedError

    def _is_file(self, p: str) -> bool:
        return self._exists(p)

    def _read_small(self, p: str, limit: int) -> bytes:
        raise NotImplementedError

    def _open(self, p: str, cache: HeaderCache | None) -> ByteSource:
        raise NotImplementedError

    def listing(self) -> list[str]:
        """The names in this location's folder, sorted (a sub-folder of an
        ``hf://`` repository by its name).  An https URL names one file:
        its server lists no folder, so asking is a GritUsageError."""
        raise NotImplementedError

    def admit(self) -> None:
        """Check the path as an input's name (a GritUsageError says what is
        wrong with it)."""

    def entry(self) -> Entry:
        """What the path names — a folder, a file, nothing — and the
        location to read it at.  A remote location that cannot answer
        raises the error saying why (a RemoteError)."""
        raise NotImplementedError

    def files(self, onerror: Callable[[OSError], None]) -> Iterator[str]:
        """The paths of the files under this folder, in the order of a
        top-down walk with sorted names (a folder's files first, then its
        sub-folders'); a sub-folder that cannot be listed is handed to
        ``onerror``."""
        raise NotImplementedError


@dataclass(frozen=True)
class Local(Location):
    """A local file or folder."""

    kind: ClassVar[Kind] = "local"
    remote: ClassVar[bool] = False
    free_reads: ClassVar[bool] = True
    noun: ClassVar[str] = "the directory"

    @property
    def folder(self) -> str:
        p = self.path
        return p if os.path.isdir(p) else os.path.dirname(p)

    @property
    def key(self) -> str:
        return os.path.realpath(self.path)

    def sibling(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def _exists(self, p: str) -> bool:
        return os.path.exists(p)

    def _is_file(self, p: str) -> bool:
        return os.path.isfile(p)

    def _read_small(self, p: str, limit: int) -> bytes:
        with open_regular(p) as f:
            return f.read(limit + 1)

    def _open(self, p: str, cache: HeaderCache | None) -> ByteSource:
        return open_source(p)

    def listing(self) -> list[str]:
        return sorted(os.listdir(self.folder or "."))

    def entry(self) -> Entry:
        p = self.path
        what: Literal["folder", "file", "absent"] = \
            "folder" if os.path.isdir(p) else "file" if os.path.exists(p) else "absent"
        return Entry(what, self, "no such file or directory", "under this directory")

    def files(self, onerror: Callable[[OSError], None]) -> Iterator[str]:
        for folder, dirs, names in os.walk(self.path, onerror=onerror):
            dirs.sort()
            for n in sorted(names):
                yield os.path.join(folder, n)


@dataclass(frozen=True)
class _Remote(Location):
    """A remote location: each small question asked of its server once
    inside a :func:`grit.io.remote.session`, none asked beside a
    pre-signed URL (:func:`grit.io.remote.signed`)."""

    def _exists(self, p: str) -> bool:
        if _remote.beside_signed(p):
            return False
        return _remote.once((p, -1), lambda: self._ask_exists(p))

    def _read_small(self, p: str, limit: int) -> bytes:
        raw = None if _remote.beside_signed(p) else \
            _remote.once((p, limit), lambda: self._ask_small(p, limit))
        if raw is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), p)
        return raw

    def _ask_exists(self, p: str) -> bool:
        raise NotImplementedError

    def _ask_small(self, p: str, limit: int) -> bytes | None:
        """The first ``limit + 1`` bytes of a small file, None when it is
        absent; any other failure is a RemoteError."""
        raise NotImplementedError


@dataclass(frozen=True)
class Http(_Remote):
    """An http(s) URL: it names one file (its server lists no folder)."""

    kind: ClassVar[Kind] = "http"
    listable: ClassVar[bool] = False
    noun: ClassVar[str] = "the URL"

    @property
    def bare(self) -> str:
        return self.path.split("#", 1)[0].split("?", 1)[0]

    def _ask_exists(self, p: str) -> bool:
        try:
            _remote.http_source(p)
        except RemoteError as e:
            return e.status not in _ABSENT
        except GritUsageError:
            return False
        return True

    def _ask_small(self, p: str, limit: int) -> bytes | None:
        try:
            src = _remote.http_source(p)
        except RemoteError as e:
            if e.status in _ABSENT:
                return None
            if e.status == 416:          # no byte 0: an empty file
                return b""
            raise
        return src.read(0, min(src.size, limit + 1), "small file")

    def _open(self, p: str, cache: HeaderCache | None) -> ByteSource:
        return _remote.http_source(p, cache)

    def listing(self) -> list[str]:
        raise GritUsageError(f"{self.path[:200]!r}: an http(s) URL names one file; its "
                             "folder cannot be listed")

    def admit(self) -> None:
        parse_url(self.path)
        _remote.signed(self.path)       # a pre-signed URL's siblings are not asked for

    def entry(self) -> Entry:
        # a URL names one file (its reader says what it is), asked nothing here
        return Entry("file", self, "no such file", "at this URL")

    def files(self, onerror: Callable[[OSError], None]) -> Iterator[str]:
        return iter(self.listing())


#: the answer that says a file beside a remote model file (http(s)) is not there
_ABSENT = frozenset({404})


@dataclass(frozen=True)
class Hub(_Remote):
    """An ``hf://`` repository, a folder or a file in one (read at the
    commit its revision resolves to)."""

    kind: ClassVar[Kind] = "hub"
    noun: ClassVar[str] = "the Hub repository"

    @property
    def folder(self) -> str:
        p = self.path
        whole = p.endswith("/") or _hub_root(p)
        return p.rstrip("/") if whole else posixpath.dirname(p)

    def _ask_exists(self, p: str) -> bool:
        try:
            where = HubPath.parse(p)
            return where.path in repo(where).files
        except RemoteError as e:
            return e.status != 404
        except GritUsageError:
            return False

    def _ask_small(self, p: str, limit: int) -> bytes | None:
        where = HubPath.parse(p)
        return repo(where).read_small(where.path, limit, _remote.header_cache())

    def _open(self, p: str, cache: HeaderCache | None) -> ByteSource:
        where = HubPath.parse(p)
        return repo(where).open(where.path, cache)

    def listing(self) -> list[str]:
        where = HubPath.parse(self.folder)
        pre = where.path.strip("/") + "/" if where.path.strip("/") else ""
        return sorted({p[len(pre):].split("/", 1)[0] for p in repo(where).under(where.path)
                       if p.startswith(pre)})

    def admit(self) -> None:
        HubPath.parse(self.path)

    def entry(self) -> Entry:
        where = HubPath.parse(self.path)
        r = repo(where)
        path = where.path
        what: Literal["folder", "file", "absent"] = \
            "folder" if path == "" or r.is_folder(path) else \
            "file" if path in r.files else "absent"
        return Entry(what, Hub(r.name(path)),
                     f"no such file or folder in the repository at commit {r.sha[:12]}",
                     f"in this repository folder (commit {r.sha[:12]})")

    def files(self, onerror: Callable[[OSError], None]) -> Iterator[str]:
        where = HubPath.parse(self.path)
        r = repo(where)
        for n in sorted(r.under(where.path), key=_walk_order):
            yield r.name(n)


def _hub_root(p: str) -> bool:
    """Whether ``p`` names an ``hf://`` repository's root (a name that does
    not parse is a file's: asking for it says what is wrong)."""
    try:
        return HubPath.parse(p).path == ""
    except GritUsageError:
        return False


def _walk_order(path: str) -> list[tuple[int, str]]:
    """A repository path's place in a top-down walk with sorted names: a
    folder's files first, then its subfolders'."""
    parts = path.split("/")
    return [(1, d) for d in parts[:-1]] + [(0, parts[-1])]


def open_all(paths: Sequence[str], jobs: int) -> None:
    """Open the remote repositories ``paths`` name ``jobs`` at a time, so
    that a walk asking them one after the other finds each open (kept in
    this :func:`grit.io.remote.session`); local paths and URLs ask nothing."""
    _hub.resolve_all(list(paths), jobs)
