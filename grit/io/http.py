"""Remote files read by HTTP ``Range`` requests, behind the byte-source
interface (:class:`grit.io.source.ByteSource`) the container readers use.

:class:`HTTPSource` learns the file's size from one ``Range: bytes=0-0``
request (``206`` and ``Content-Range: bytes 0-0/SIZE``) and then reads each
``(offset, length)`` the readers ask for as one ranged GET, checked three
ways before its bytes are used: the status is 206, the ``Content-Range``
names exactly the range asked for and the size first seen (a file that
changes while it is read is an error, not a mixture), and the body holds
the bytes its Content-Range promised (fewer is a :class:`RemoteError`).
It never gives a zero-copy view: readers read.

Bad servers and networks are typed errors, never a hang: every request has
a timeout; a connection error, a timeout, 429 or a 5xx status is retried a
bounded number of times with exponential backoff, then raised as
:class:`RemoteError`; 401, 403, 404 and other 4xx are raised at once (416 as
:class:`~grit.io.source.SourceRangeError`); a server that ignores ``Range``
(200 with the whole body) is refused after reading nothing past the status
line — the body is not downloaded.  Redirects are followed (urllib's rules:
at most 10).  Nothing is written anywhere but the optional header cache
(:class:`HeaderCache`: container headers keyed by URL, ETag/Last-Modified,
size and range, so a rescan of an unchanged file moves no payload byte).
"""
from __future__ import annotations

import hashlib
import http.client
import os
import re
import tempfile
import socket
import time
import urllib.error
import urllib.request

from ..errors import GritUsageError
from .source import ByteSource, SourceRangeError

__all__ = ["HTTPSource", "CachedSource", "RemoteError", "is_url", "HeaderCache", "default_cache",
           "CACHED_READS", "SMALL_READ", "cacheable"]

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.IGNORECASE)
#: the first bytes of a file a source keeps once read (a sniff's, asked again
#: by the container reader)
_HEAD = 64
#: statuses worth asking again
_RETRY = frozenset({408, 429, 500, 502, 503, 504})


class RemoteError(GritUsageError):
    """A remote file that cannot be read as asked: ``status`` is the HTTP
    status when the server answered (None for a network failure)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def is_url(path) -> bool:
    """Whether ``path`` names a remote file this module reads (http/https)."""
    return isinstance(path, str) and path[:8].lower().startswith(("http://", "https://"))


class CachedSource(ByteSource):
    """A remote byte source whose reads a :class:`HeaderCache` may answer:
    a read :func:`cacheable` keeps, of a file named by a validator
    (:meth:`_identity`: its name and an ETag, a Last-Modified or an LFS
    sha256; None when it has none), is served from, or kept in, ``cache``
    under (name, validator, size, range); ``cache_hits`` counts the reads
    it answered."""

    cache: "HeaderCache | None" = None
    cache_hits: int = 0

    def _identity(self) -> tuple[str, str] | None:
        return None

    def read(self, offset, length, what: str = "read") -> bytes:
        off, n = self.check_range(offset, length, what)
        cache = self.cache
        ident = self._identity() if cache is not None else None
        if cache is None or ident is None or not cacheable(what, n):
            return ByteSource.read(self, off, n, what)
        data, hit = cache.through((*ident, self.size, off, n),
                                  lambda: ByteSource.read(self, off, n, what))
        self.cache_hits += hit
        return data


class HTTPSource(CachedSource):
    """A remote file by HTTP ``Range`` requests (see the module docstring).
    ``requests`` and ``bytes_read`` count what was asked of the server;
    ``etag`` and ``last_modified`` are the server's validators (None when it
    sends none)."""

    def __init__(self, url: str, *, timeout: float = 10.0, retries: int = 3,
                 backoff: float = 0.25, headers: dict | None = None,
                 cache: "HeaderCache | None" = None, min_rate: int = 1 << 16):
        if not is_url(url):
            raise GritUsageError(f"not an http(s) URL: {url!r:.200}")
        self.name = self.url = url
        self.timeout = float(timeout)
        #: the slowest body accepted, bytes per second on average: a read of n
        #: bytes is abandoned past timeout + n / min_rate seconds, so a server
        #: that trickles its body cannot hold a scan (each recv has its timeout)
        self.min_rate = max(1, int(min_rate))
        self.retries = max(0, int(retries))
        self.backoff = float(backoff)
        self.headers = dict(headers or {})
        self.requests = 0
        self.bytes_read = 0
        self.cache_hits = 0
        self.size = 0
        self.cache = cache
        self.etag = self.last_modified = None
        self._head = b""                 # the file's first bytes, once read (at most _HEAD)
        resp = self._get(0, 0, probe=True)
        try:
            if resp.status == 200:
                raise RemoteError(f"{url}: the server ignores Range requests (it answered "
                                  "200 with the whole file); grit reads remote files by "
                                  "range only, and read none of the body", 200)
            first, last, size = self._content_range(resp)
            if (first, last) != (0, 0) or size is None:
                raise RemoteError(f"{url}: asked for byte 0, the server sent "
                                  f"{resp.headers.get('Content-Range')!r}", resp.status)
            self.size = size
            self.etag = resp.headers.get("ETag")
            self.last_modified = resp.headers.get("Last-Modified")
        finally:
            resp.close()

    # -- one request, retried -------------------------------------------------
    def _get(self, offset: int, last: int, probe: bool = False):
        req = urllib.request.Request(self.url, headers={
            **self.headers, "Range": f"bytes={offset}-{last}", "Accept-Encoding": "identity"})
        delay = self.backoff
        for attempt in range(self.retries + 1):
            self.requests += 1
            why: str
            status: int | None = None
            try:
                resp = urllib.request.urlopen(req, timeout=self.timeout)  # noqa: S310 - http(s) only
                return resp
            except urllib.error.HTTPError as e:
                status = e.code
                e.close()
                if e.code == 416:
                    if probe:                 # an empty file has no byte 0
                        raise RemoteError(f"{self.url}: the server has no byte 0 to send "
                                          "(416: an empty file?)", 416) from None
                    raise SourceRangeError(f"{self.url}: bytes {offset}-{last}: the server "
                                           "says the range is not satisfiable (416)") from None
                if e.code not in _RETRY:
                    raise RemoteError(f"{self.url}: HTTP {e.code} {e.reason}", e.code) from None
                why = f"HTTP {e.code} {e.reason}"
            except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError,
                    http.client.HTTPException, OSError) as e:
                why = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
            if attempt == self.retries:
                raise RemoteError(f"{self.url}: {why} (after {self.retries + 1} attempts)",
                                  status)
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def _content_range(self, resp) -> tuple[int, int, int | None]:
        m = _CONTENT_RANGE.match(resp.headers.get("Content-Range") or "")
        if resp.status != 206 or m is None:
            raise RemoteError(f"{self.url}: expected 206 with a Content-Range, got "
                              f"{resp.status} {resp.headers.get('Content-Range')!r}", resp.status)
        size = None if m.group(3) == "*" else int(m.group(3))
        return int(m.group(1)), int(m.group(2)), size

    # -- ByteSource ------------------------------------------------------------
    def read(self, offset, length, what: str = "read") -> bytes:
        """As :meth:`ByteSource.read`; a read the cache keeps
        (:func:`cacheable`: a container header, a small file, a small
        tensor) of a file the server names by a validator (ETag or
        Last-Modified) is served from, or kept in, the cache."""
        off, n = self.check_range(offset, length, what)
        if off == 0 and n <= len(self._head):   # the first bytes, asked again (a sniff,
            return self._head[:n]               # then the container reader): not re-sent
        data = super().read(off, n, what)
        if off == 0 and n <= _HEAD:
            self._head = data
        return data

    def _identity(self) -> tuple[str, str] | None:
        validator = self.etag or self.last_modified
        return None if validator is None else (self.url, validator)

    def _readinto(self, offset: int, mv: memoryview) -> int:
        n = mv.nbytes
        resp = self._get(offset, offset + n - 1)
        try:
            if resp.status == 200:
                raise RemoteError(f"{self.url}: the server stopped honouring Range requests "
                                  "(200 with the whole file)", 200)
            first, last, size = self._content_range(resp)
            if size is not None and size != self.size:
                raise RemoteError(f"{self.url}: the file changed while it was read: "
                                  f"{self.size} bytes, now {size}", resp.status)
            if first != offset or last > offset + n - 1 or last < first:
                raise RemoteError(f"{self.url}: asked for bytes {offset}-{offset + n - 1}, "
                                  f"the server sent {first}-{last}", resp.status)
            want = last - first + 1
            got = 0
            deadline = time.monotonic() + self.timeout + want / self.min_rate
            while got < want:
                try:       # one recv at a time, so the deadline is looked at between them
                    piece = resp.read1(min(want - got, 1 << 20))
                except (OSError, http.client.HTTPException) as e:
                    raise RemoteError(f"{self.url}: the body broke off after {got} of {want} "
                                      f"bytes ({type(e).__name__})") from None
                if not piece:
                    break
                mv[got:got + len(piece)] = piece
                got += len(piece)
                if got < want and time.monotonic() > deadline:
                    raise RemoteError(f"{self.url}: the body came slower than "
                                      f"{self.min_rate} bytes/s on average ({got} of {want} "
                                      f"bytes in {self.timeout + want / self.min_rate:.1f} s)",
                                      resp.status)
            self.bytes_read += got
            if got < want:          # a body shorter than its own Content-Range: not retried
                raise RemoteError(f"{self.url}: the body broke off after {got} of {want} bytes "
                                  f"(bytes {first}-{last})", resp.status)
            return got
        finally:
            resp.close()


#: the reads a header cache keeps: what the container readers read at level 1,
#: and the small files beside a model file (config.json, a shard index)
CACHED_READS = frozenset({"header length", "header", "small file"})
#: the largest tensor read a header cache keeps: the small tensors a level-1
#: scan reads (the recogniser's shapes and global scales,
#: grit.io.recognise.SMALL_MAX), never the planes --deep streams
SMALL_READ = 1 << 20


def cacheable(what: str, n: int) -> bool:
    """Whether a header cache keeps a read of ``n`` bytes labelled ``what``:
    a container header or small file (:data:`CACHED_READS`), or a tensor
    read (``"tensor …"``) of at most :data:`SMALL_READ` bytes."""
    return what in CACHED_READS or (what.startswith("tensor ") and n <= SMALL_READ)


class HeaderCache:
    """Container headers of remote files, on disk, keyed by URL, validator
    (ETag or Last-Modified), file size and byte range: a rescan of a file the
    server still names the same way moves no payload byte.  Entries are
    written atomically under ``root`` and nowhere else; a damaged entry is a
    miss.  At most ``max_entry`` bytes are kept per read."""

    def __init__(self, root, max_entry: int = 1 << 27):
        self.root = os.fspath(root)
        self.max_entry = max_entry

    def _path(self, url: str, validator: str, size: int, off: int, n: int) -> str:
        h = hashlib.sha256(repr((url, validator, size, off, n)).encode("utf-8", "replace"))
        return os.path.join(self.root, h.hexdigest()[:2], h.hexdigest())

    def through(self, key: tuple, read) -> tuple[bytes, bool]:
        """The bytes cached under ``key`` (url, validator, size, offset,
        length) and True, else ``read()``'s, kept, and False."""
        hit = self.get(*key)
        if hit is not None:
            return hit, True
        data = read()
        self.put(*key, data)
        return data, False

    def get(self, url, validator, size, off, n) -> bytes | None:
        try:
            with open(self._path(url, validator, size, off, n), "rb") as f:
                data = f.read(n + 1)
        except OSError:
            return None
        return data if len(data) == n else None

    def put(self, url, validator, size, off, n, data: bytes) -> None:
        if len(data) != n or n > self.max_entry:
            return
        path = self._path(url, validator, size, off, n)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".grit-", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError:            # a cache that cannot be written is only slower
            return


def default_cache() -> HeaderCache:
    """The header cache: ``$GRIT_CACHE_DIR/http``, else
    ``$XDG_CACHE_HOME/grit/http``, else ``~/.cache/grit/http``."""
    root = os.environ.get("GRIT_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                 ".cache")
        root = os.path.join(base, "grit")
    return HeaderCache(os.path.join(root, "http"))
