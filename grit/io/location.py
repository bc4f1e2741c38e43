"""Where a checkpoint's files are: a local path, an http(s) URL or an
``hf://`` name, asked one way.

:meth:`Location.of` names the kind once; after that a caller asks the
:class:`Location` for a file beside a model file (:meth:`~Location.sibling`),
whether one is there (:meth:`~Location.exists`), its first bytes
(:meth:`~Location.read_small`), its byte source (:meth:`~Location.open`) or
the folder's names (:meth:`~Location.listing`), and never asks itself
whether the path is local or remote.  The remote answers are
:mod:`grit.io.remote`'s (asked once inside its ``session``).
"""
from __future__ import annotations

import errno
import os
import posixpath
from dataclasses import dataclass
from typing import Literal

from .._files import open_regular
from ..errors import GritUsageError
from . import remote as _remote
from .http import HeaderCache, is_url
from .hub import HubPath, is_hub, repo
from .source import ByteSource, open_source

__all__ = ["Location", "Kind"]

#: the kinds of location: a local path, an http(s) URL, an ``hf://`` name
Kind = Literal["local", "http", "hub"]


@dataclass(frozen=True)
class Location:
    """The location of a checkpoint file or folder: ``path`` as given,
    ``kind`` (local, http, hub) and ``folder``, the folder its siblings
    are in (a local folder, or a remote name ending in ``/`` or an
    ``hf://`` repository's root, is its own folder; a file's is the one
    holding it)."""

    path: str
    kind: Kind
    folder: str

    @classmethod
    def of(cls, path: str | os.PathLike) -> "Location":
        p = os.fspath(path)
        if is_hub(p):
            kind: Kind = "hub"
        elif is_url(p):
            kind = "http"
        else:
            folder = p if os.path.isdir(p) else os.path.dirname(p)
            return cls(p, "local", folder)
        whole = p.endswith("/") or (kind == "hub" and _hub_root(p))
        return cls(p, kind, p.rstrip("/") if whole else posixpath.dirname(p))

    @property
    def remote(self) -> bool:
        """Whether its files are read over the network."""
        return self.kind != "local"

    def sibling(self, name: str) -> str:
        """The path of the file ``name`` in this location's folder."""
        if self.kind == "local":
            return os.path.join(self.folder, name)
        return f"{self.folder}/{name}" if self.folder else name

    def _resolve(self, name_or_path: str) -> str:
        """A bare file name is a sibling; anything holding a separator (or
        naming a remote file) is a path already."""
        if "/" in name_or_path or os.sep in name_or_path or is_url(name_or_path) \
                or is_hub(name_or_path):
            return name_or_path
        return self.sibling(name_or_path)

    def exists(self, name_or_path: str) -> bool:
        """Whether a file is there: locally ``os.path.exists``; remotely
        False only for a 404 or a name the repository listing lacks (a
        server failing otherwise counts as holding it, so the read that
        follows reports the failure; :func:`grit.io.remote.exists`)."""
        p = self._resolve(name_or_path)
        return os.path.exists(p) if self.kind == "local" else _remote.exists(p)

    def read_small(self, name_or_path: str, limit: int) -> bytes:
        """At most ``limit + 1`` bytes of a file (all of it when no longer:
        a caller sees a file over its limit by the length).  Absent is
        FileNotFoundError (a remote 404, a name the listing lacks); a local
        file that cannot be read (anything but a regular file included) an
        OSError; a remote one that cannot be read the
        :class:`~grit.io.http.RemoteError` saying why."""
        p = self._resolve(name_or_path)
        if self.kind == "local":
            with open_regular(p) as f:
                return f.read(limit + 1)
        raw = _remote.read_small(p, limit)
        if raw is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), p)
        return raw

    def open(self, name_or_path: str, cache: HeaderCache | None = None) -> ByteSource:
        """The byte source of a file: a local file's (mapped), an https
        URL's (ranged reads through ``cache``; inside a scan's session its
        probe is the one a series check would make), an ``hf://`` file's
        at its commit (:class:`grit.io.hub.HubSource`)."""
        p = self._resolve(name_or_path)
        if self.kind == "local":
            return open_source(p)
        if self.kind == "hub":
            where = HubPath.parse(p)
            return repo(where).open(where.path, cache)
        return _remote.http_source(p, cache)

    def listing(self) -> list[str]:
        """The names in this location's folder, sorted (a sub-folder of an
        ``hf://`` repository by its name).  An https URL names one file:
        its server lists no folder, so asking is a GritUsageError."""
        if self.kind == "local":
            return sorted(os.listdir(self.folder or "."))
        if self.kind == "http":
            raise GritUsageError(f"{self.path[:200]!r}: an http(s) URL names one file; its "
                                 "folder cannot be listed")
        where = HubPath.parse(self.folder)
        pre = where.path.strip("/") + "/" if where.path.strip("/") else ""
        return sorted({p[len(pre):].split("/", 1)[0] for p in repo(where).under(where.path)
                       if p.startswith(pre)})


def _hub_root(p: str) -> bool:
    """Whether ``p`` names an ``hf://`` repository's root (a name that does
    not parse is a file's: asking for it says what is wrong)."""
    try:
        return HubPath.parse(p).path == ""
    except GritUsageError:
        return False
