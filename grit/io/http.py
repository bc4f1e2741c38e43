"""Remote files read by HTTP ``Range`` requests, behind the byte-source
interface (:class:`grit.io.source.ByteSource`) the container readers use,
through one bounded HTTP client that http(s) URLs and ``hf://`` files share.

:class:`HTTPSource` learns the file's size from one ``Range: bytes=0-0``
request (``206`` and ``Content-Range: bytes 0-0/SIZE``) and then reads each
``(offset, length)`` the readers ask for as one ranged GET, checked three
ways before its bytes are used: the status is 206, the ``Content-Range``
names exactly the range asked for and the size first seen (a file that
changes while it is read is an error, not a mixture), and the body holds
the bytes its Content-Range promised (fewer is a :class:`RemoteError`).
It never gives a zero-copy view: readers read.

Bad servers and networks are typed errors in bounded time, never a hang or
an unbounded allocation: every request runs under the :class:`NetPolicy`
(:func:`policy`; defaults below, ``GRIT_NET_*`` environment variables,
docs/scan.md "Network policy") — total deadlines to connect (name
resolution included), to the end of the response headers, and for the
whole body (``timeout + bytes / min_rate``), whatever pace the server
keeps; at most ``max_header_bytes`` of status lines and headers, at most
``max_headers`` headers and ``max_interim`` ``1xx`` responses; redirects
only to http(s) and at most ``max_redirects`` (an ``Authorization``
header is not carried to another host); a body sent with a
``Content-Encoding`` other than identity refused (grit asks for the bytes
themselves, never inflates).  A connection error, a timeout, 408, 429 or
a 5xx status is retried at most ``retries`` times with exponential backoff
within ``retry_time`` seconds, then raised as :class:`RemoteError`; 401,
403, 404 and other 4xx are raised at once (416 as
:class:`~grit.io.source.SourceRangeError`); a server that ignores ``Range``
(200 with the whole body) is refused after reading nothing past its
headers.  Requests and body bytes are capped per file and per scan
(:class:`RemoteLimitError`, a scan finding).  Every URL is parsed and
checked (:func:`parse_url`) before anything is sent.

Nothing is written anywhere but the optional header cache
(:class:`HeaderCache`: container headers keyed by URL, ETag/Last-Modified,
size and range, so a rescan of an unchanged file moves no payload byte; an
entry is trusted only when its stored digest matches).
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import http.client
import io
import ipaddress
import os
import re
import socket
import ssl
import stat
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Iterator

from ..errors import GritUsageError
from .source import ByteSource, LimitError, SourceRangeError

__all__ = ["HTTPSource", "CachedSource", "RemoteError", "RemoteLimitError", "is_url",
           "HeaderCache", "default_cache", "CACHED_READS", "SMALL_READ", "cacheable",
           "NetPolicy", "policy", "use_policy", "parse_url", "ParsedURL", "budget",
           "fetch_range", "fetch", "read_document", "Requester", "ENV"]

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.IGNORECASE)
#: the first bytes of a file a source keeps once read (a sniff's, asked again
#: by the container reader)
_HEAD = 64
#: statuses worth asking again
_RETRY = frozenset({408, 429, 500, 502, 503, 504})
_REDIRECT = frozenset({301, 302, 303, 307, 308})


class RemoteError(GritUsageError):
    """A remote file that cannot be read as asked: ``status`` is the HTTP
    status when the server answered (None for a network failure)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class RemoteLimitError(RemoteError, LimitError):
    """A cap of the :class:`NetPolicy` was reached: the requests or body
    bytes one file or one scan may move (``grit scan`` reports it as S808)."""


# ---------------------------------------------------------------------------
# the policy


@dataclass(frozen=True, slots=True, kw_only=True)
class NetPolicy:
    """How far grit trusts a server: the deadlines, sizes and counts every
    remote request (http(s) and hf:// alike) runs under.  The defaults are
    the class's; :meth:`from_env` reads the ``GRIT_NET_*`` overrides
    (:data:`ENV`); :func:`use_policy` sets one for a block."""

    #: seconds to connect (name resolution, TCP and TLS together), and seconds
    #: from the request sent to the end of the response's headers: each a total
    timeout: float = 10.0
    #: the slowest body accepted (bytes/s on average): a body of n bytes must
    #: be complete within timeout + n / min_rate seconds
    min_rate: int = 1 << 16
    #: status lines and headers, all interim responses included (bytes)
    max_header_bytes: int = 1 << 16
    #: header fields in one response (http.client itself refuses past 100)
    max_headers: int = 100
    #: ``1xx`` interim responses before the final one
    max_interim: int = 4
    #: redirects followed for one request (only to http and https)
    max_redirects: int = 5
    #: attempts after the first for a failure worth retrying
    retries: int = 3
    #: the first wait between attempts (seconds; doubled each time)
    backoff: float = 0.25
    #: seconds one request may spend, all its attempts and waits together
    retry_time: float = 60.0
    #: requests and body bytes one remote file may take
    file_requests: int = 1 << 16
    file_bytes: int = 1 << 40
    #: requests and body bytes one scan may take (all its remote files)
    scan_requests: int = 1 << 20
    scan_bytes: int = 1 << 44

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v == v \
                    or v < 0 or v == float("inf"):
                raise GritUsageError(f"network policy: {f.name} must be a finite "
                                     f"non-negative number, got {v!r:.60}")
        if self.timeout <= 0 or self.min_rate < 1:
            raise GritUsageError("network policy: timeout and min_rate must be positive")

    @classmethod
    def from_env(cls, environ=None) -> "NetPolicy":
        """The defaults with each ``GRIT_NET_<FIELD>`` set in the environment
        (e.g. ``GRIT_NET_TIMEOUT=30``) in place of its field; a value that is
        not a number is a GritUsageError naming the variable."""
        env = os.environ if environ is None else environ
        got: dict = {}
        for f in dataclasses.fields(cls):
            var = ENV[f.name]
            text = env.get(var)
            if text is None or text.strip() == "":
                continue
            try:
                got[f.name] = (float(text) if f.type in ("float", float) else int(text, 0))
            except ValueError:
                raise GritUsageError(f"{var}={text!r:.60}: not a number") from None
        return cls(**got)


#: the environment variable of each policy field
ENV = {f.name: "GRIT_NET_" + f.name.upper() for f in dataclasses.fields(NetPolicy)}

_POLICY: "contextvars.ContextVar[NetPolicy | None]" = contextvars.ContextVar(
    "grit_net_policy", default=None)


def policy() -> NetPolicy:
    """The policy in force: the one :func:`use_policy` set here, else the
    defaults with the environment's ``GRIT_NET_*`` overrides."""
    p = _POLICY.get()
    return p if p is not None else NetPolicy.from_env()


@contextlib.contextmanager
def use_policy(p: NetPolicy | None = None, **changes) -> Iterator[NetPolicy]:
    """Inside the block (and the threads started in a copy of its context),
    ``p`` (else the policy in force) with ``changes`` applied is the
    policy."""
    q = dataclasses.replace(p if p is not None else policy(), **changes)
    token = _POLICY.set(q)
    try:
        yield q
    finally:
        _POLICY.reset(token)


class _Budget:
    """Requests and body bytes one scan has taken (thread-safe)."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        self.lock = threading.Lock()

    def take(self, p: NetPolicy, requests: int = 0, nbytes: int = 0, where: str = "") -> None:
        with self.lock:
            self.requests += requests
            self.bytes += nbytes
            r, b = self.requests, self.bytes
        if r > p.scan_requests:
            raise RemoteLimitError(f"{where}: the scan has made {p.scan_requests} remote "
                                   f"requests, its cap ({ENV['scan_requests']})")
        if b > p.scan_bytes:
            raise RemoteLimitError(f"{where}: the scan has read {p.scan_bytes} remote body "
                                   f"bytes, its cap ({ENV['scan_bytes']})")


_BUDGET: "contextvars.ContextVar[_Budget | None]" = contextvars.ContextVar(
    "grit_net_budget", default=None)


@contextlib.contextmanager
def budget() -> Iterator[_Budget]:
    """Inside the block, every remote request and body byte counts against
    one scan's caps (``scan_requests``, ``scan_bytes``)."""
    b = _Budget()
    token = _BUDGET.set(b)
    try:
        yield b
    finally:
        _BUDGET.reset(token)


# ---------------------------------------------------------------------------
# URLs


def is_url(path) -> bool:
    """Whether ``path`` names a remote file this module reads (http/https)."""
    return isinstance(path, str) and path[:8].lower().startswith(("http://", "https://"))


#: the longest URL accepted
MAX_URL = 8192
_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


@dataclass(frozen=True, slots=True)
class ParsedURL:
    """A checked http(s) URL: ``host`` as sent (ASCII; IDNA for an
    internationalised name; an IPv6 address without brackets), ``port``,
    ``target`` (the path and query as sent: ASCII, non-ASCII %-encoded as
    UTF-8) and ``url`` (the whole, normalised)."""

    scheme: str
    host: str
    port: int
    target: str
    url: str


def _ascii_part(text: str, what: str, whole: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise GritUsageError(f"{whole!r:.200}: the {what} holds bytes that are not UTF-8") \
            from None
    return urllib.parse.quote(text, safe="/%:@!$&'()*+,;=?~-._")


def parse_url(url) -> ParsedURL:
    """``url`` checked as an http(s) URL grit will fetch; anything else — no
    host, a malformed host or port, user credentials in the URL, control
    characters, undecodable bytes, more than MAX_URL characters — is a
    GritUsageError, raised before anything is sent."""
    if not isinstance(url, str) or not is_url(url):
        raise GritUsageError(f"not an http(s) URL: {url!r:.200}")
    if len(url) > MAX_URL:
        raise GritUsageError(f"{url[:80]!r}…: a URL of {len(url)} characters (at most "
                             f"{MAX_URL})")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise GritUsageError(f"{url!r:.200}: a URL holds no spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError as e:
        raise GritUsageError(f"{url!r:.200}: not a valid URL ({e})") from None
    if parts.username is not None or parts.password is not None:
        raise GritUsageError(f"{url!r:.200}: credentials in a URL are not sent; give a "
                             "token another way")
    if not host:
        raise GritUsageError(f"{url!r:.200}: the URL names no host")
    scheme = parts.scheme.lower()
    if "[" in parts.netloc:
        try:
            ipaddress.IPv6Address(host.split("%")[0])
        except ValueError:
            raise GritUsageError(f"{url!r:.200}: {host!r:.80} is not an IPv6 address") \
                from None
        shown = f"[{host}]"
    else:
        try:
            ascii_host = host.encode("idna").decode("ascii") if not host.isascii() else host
        except (UnicodeError, ValueError):
            raise GritUsageError(f"{url!r:.200}: {host!r:.80} is not a valid host name") \
                from None
        labels = ascii_host.rstrip(".").split(".")
        if not all(_HOST_LABEL.match(x) for x in labels) or len(ascii_host) > 253:
            raise GritUsageError(f"{url!r:.200}: {host!r:.80} is not a valid host name")
        host = shown = ascii_host
    if port == 0:
        raise GritUsageError(f"{url!r:.200}: port 0")
    port = port or (443 if scheme == "https" else 80)
    path = _ascii_part(parts.path or "/", "path", url)
    query = _ascii_part(parts.query, "query", url)
    target = path + (f"?{query}" if query else "")
    default = (scheme == "https" and port == 443) or (scheme == "http" and port == 80)
    norm = f"{scheme}://{shown}{'' if default else f':{port}'}{target}"
    return ParsedURL(scheme, host, port, target, norm)


# ---------------------------------------------------------------------------
# one request, bounded


class _Deadline(socket.timeout):
    """A deadline of the policy passed (a TimeoutError)."""


class _TooLong(http.client.HTTPException):
    """More bytes than the policy allows in this phase of a response."""


class _Guard:
    """A connected socket whose every receive runs under the phase's
    deadline (the socket's timeout is set to the time left before each
    one) and byte allowance: what http.client reads a response through."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.deadline = float("inf")
        self.left = 0
        self.phase = "headers"

    def arm(self, seconds: float, nbytes: int, phase: str) -> None:
        self.deadline = time.monotonic() + seconds
        self.left = nbytes
        self.phase = phase

    def _time_left(self) -> float:
        t = self.deadline - time.monotonic()
        if t <= 0:
            raise _Deadline(f"the {self.phase} did not arrive in time")
        return t

    def sendall(self, data) -> None:
        self.sock.settimeout(self._time_left())
        self.sock.sendall(data)

    def recv_into(self, b) -> int:
        if self.left <= 0:
            raise _TooLong(f"the {self.phase} ran past the policy's byte limit")
        mv = memoryview(b)
        self.sock.settimeout(self._time_left())
        n = self.sock.recv_into(mv[:min(len(mv), self.left)])
        self.left -= n
        return n

    def makefile(self, mode: str, *a, **k):
        return io.BufferedReader(_GuardIO(self), 8192)

    def close(self) -> None:
        """http.client closes its connection once a response that ends the
        connection has begun; the response still reads through it, so the
        socket is closed only by :meth:`really_close`."""

    def really_close(self) -> None:
        self.sock.close()


class _GuardIO(io.RawIOBase):
    def __init__(self, g: _Guard) -> None:
        self.g = g

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        return self.g.recv_into(b)


def _response_class(p: NetPolicy):
    class Response(http.client.HTTPResponse):
        """http.client's response, counting the interim (1xx) status lines."""

        interim = 0

        def _read_status(self):
            self.interim += 1
            if self.interim > p.max_interim + 1:
                raise _TooLong(f"more than {p.max_interim} interim (1xx) responses")
            return super()._read_status()  # type: ignore[misc]
    return Response


def _resolve(host: str, port: int, seconds: float) -> list:
    """getaddrinfo within ``seconds`` (it takes no timeout of its own: it
    runs on a daemon thread, left behind on a timeout)."""
    try:
        ipaddress.ip_address(host)
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                  flags=socket.AI_NUMERICHOST)
    except ValueError:
        pass
    out: list = []

    def ask() -> None:
        try:
            out.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as e:
            out.append(e)
    t = threading.Thread(target=ask, daemon=True, name="grit-resolve")
    t.start()
    t.join(seconds)
    if not out:
        raise _Deadline(f"resolving {host} took longer than {seconds:.1f} s")
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


_TLS: list[ssl.SSLContext] = []


def _tls() -> ssl.SSLContext:
    """The TLS context of every https request (the system's trust store and
    hostname checks: ssl.create_default_context), made once."""
    if not _TLS:
        _TLS.append(ssl.create_default_context())
    return _TLS[0]


def _connect(u: ParsedURL, p: NetPolicy) -> _Guard:
    end = time.monotonic() + p.timeout
    last: BaseException | None = None
    for family, kind, proto, _, addr in _resolve(u.host, u.port, p.timeout):
        left = end - time.monotonic()
        if left <= 0:
            break
        s = socket.socket(family, kind, proto)
        try:
            s.settimeout(left)
            s.connect(addr)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if u.scheme == "https":
                s.settimeout(max(0.001, end - time.monotonic()))
                s = _tls().wrap_socket(s, server_hostname=u.host)
            return _Guard(s)
        except BaseException as e:
            s.close()
            last = e
            if not isinstance(e, OSError):
                raise
    if last is None:
        raise _Deadline(f"could not connect to {u.host} in {p.timeout:.1f} s")
    raise last


class _Open:
    """One response whose status and headers are in: ``status``,
    ``headers``, and :meth:`readinto` for its body under the body's
    deadline and allowance.  Close it (a context manager)."""

    def __init__(self, conn, resp, guard: _Guard, url: str) -> None:
        self.conn, self.resp, self.guard, self.url = conn, resp, guard, url
        self.status = resp.status
        self.headers = resp.headers

    def body(self, mv: memoryview, p: NetPolicy) -> int:
        """Fill ``mv`` from the body; the bytes got (fewer when the body
        ends first).  Past the deadline (timeout + n / min_rate) a
        RemoteError saying the body came too slowly."""
        want = mv.nbytes
        seconds = p.timeout + want / p.min_rate
        # the body and any chunk framing around it; nothing after it is read
        self.guard.arm(seconds, 2 * want + p.max_header_bytes, "body")
        got = 0
        while got < want:
            try:
                piece = self.resp.read1(want - got)
            except TimeoutError:       # the deadline, or the time left before it
                raise RemoteError(f"{self.url}: the body came slower than {p.min_rate} "
                                  f"bytes/s on average ({got} of {want} bytes in "
                                  f"{seconds:.1f} s)", self.status) from None
            except (OSError, http.client.HTTPException, ValueError) as e:
                raise RemoteError(f"{self.url}: the body broke off after {got} of {want} "
                                  f"bytes ({type(e).__name__}: {str(e)[:80]})",
                                  self.status) from None
            if not piece:
                break
            mv[got:got + len(piece)] = piece
            got += len(piece)
        return got

    def whole(self, limit: int, p: NetPolicy) -> bytes:
        """The whole body, at most ``limit`` bytes, complete within
        timeout + n / min_rate seconds for n its Content-Length (``limit``
        when it sends none); longer, or cut short of its Content-Length, is
        a RemoteError."""
        text = (self.headers.get("Content-Length") or "").strip()
        want = int(text) if text.isdigit() and len(text) < 20 else None
        if want is not None and want > limit:
            raise RemoteError(f"{self.url}: a body of {want} bytes (at most {limit} read)",
                              self.status)
        cap = limit if want is None else want
        self.guard.arm(p.timeout + cap / p.min_rate, 2 * cap + p.max_header_bytes, "body")
        parts: list[bytes] = []
        got = 0
        while True:
            try:
                piece = self.resp.read1(min(1 << 16, cap + 1 - got))
            except TimeoutError:
                raise RemoteError(f"{self.url}: the body came slower than {p.min_rate} "
                                  f"bytes/s on average ({got} bytes)", self.status) from None
            except (OSError, http.client.HTTPException, ValueError) as e:
                raise RemoteError(f"{self.url}: the body broke off after {got} bytes "
                                  f"({type(e).__name__}: {str(e)[:80]})", self.status) from None
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
            if got > cap:
                raise RemoteError(f"{self.url}: a body of more than {limit} bytes",
                                  self.status)
        if want is not None and got < want:
            raise RemoteError(f"{self.url}: the body broke off after {got} of {want} bytes",
                              self.status)
        return b"".join(parts)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.resp.close()
        with contextlib.suppress(Exception):
            self.conn.close()
        self.guard.really_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _once(u: ParsedURL, headers: dict, p: NetPolicy) -> _Open:
    """One GET of ``u`` (no redirect followed), its headers read under the
    policy's deadline and limits."""
    guard = _connect(u, p)
    conn_class = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = conn_class(u.host, u.port)
    conn.sock = guard
    conn.response_class = _response_class(p)
    try:
        guard.arm(p.timeout, p.max_header_bytes + 8192, "response headers")
        conn.putrequest("GET", u.target, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        if not any(k.lower() == "user-agent" for k in headers):
            conn.putheader("User-Agent", "grit")
        conn.putheader("Accept-Encoding", "identity")
        conn.putheader("Connection", "close")
        conn.endheaders()
        resp = conn.getresponse()
    except BaseException:
        conn.close()
        guard.really_close()
        raise
    out = _Open(conn, resp, guard, u.url)
    if len(resp.headers) > p.max_headers:
        out.close()
        raise _TooLong(f"{len(resp.headers)} header fields (at most {p.max_headers})")
    return out


def open_url(url: str, headers: dict, p: NetPolicy, *, where: str | None = None) -> _Open:
    """A GET of ``url``, redirects followed (http(s) only, at most
    ``max_redirects``; ``Authorization`` dropped on a move to another host):
    the final response, headers read.  Network failures and policy limits
    raise OSError / http.client.HTTPException / RemoteError for the caller's
    retry loop."""
    u = parse_url(url)
    hdrs = dict(headers)
    for hop in range(p.max_redirects + 1):
        r = _once(u, hdrs, p)
        if r.status not in _REDIRECT:
            return r
        loc = r.headers.get("Location")
        r.close()
        if not loc:
            raise RemoteError(f"{where or url}: a redirect ({r.status}) without a Location",
                              r.status)
        try:
            nxt = urllib.parse.urljoin(u.url, loc)
        except ValueError:
            raise RemoteError(f"{where or url}: a redirect to {loc!r:.120}, not a URL",
                              r.status) from None
        if not is_url(nxt):
            raise RemoteError(f"{where or url}: a redirect to {nxt!r:.120} refused (only "
                              "http and https are followed)", r.status)
        try:
            v = parse_url(nxt)
        except GritUsageError as e:
            raise RemoteError(f"{where or url}: a redirect refused: {e}", r.status) from None
        if (v.host, v.port, v.scheme) != (u.host, u.port, u.scheme):
            hdrs = {k: x for k, x in hdrs.items() if k.lower() != "authorization"}
        u = v
    raise RemoteError(f"{where or url}: more than {p.max_redirects} redirects", None)


def fetch_range(src, url: str, offset: int, last: int, headers: dict, *, probe: bool = False,
                reason: str = "") -> _Open:
    """A ranged GET of bytes ``offset``–``last`` of ``url`` for the source
    ``src`` (its ``name``, ``requests``, ``policy``): retried under the
    policy, counted against the file's and the scan's caps; the response
    (status 200 or 206; the caller checks the rest)."""
    return fetch(src, url, headers, (offset, last), probe=probe)


def fetch(src, url: str, headers: dict, byte_range: tuple[int, int] | None = None, *,
          probe: bool = False) -> _Open:
    """A GET of ``url`` for ``src`` (its ``name``, ``requests``,
    ``policy``) — of bytes ``byte_range`` (first, last) when given —
    retried under the policy (a connection error, a timeout, 408, 429 and
    5xx: at most ``retries`` more attempts, backing off from ``backoff``
    seconds, all within ``retry_time``), counted against the file's and
    the scan's caps; the response (status 200 or 206; the caller checks
    the rest)."""
    p: NetPolicy = src.policy
    if byte_range is None:
        hdrs = dict(headers)
        offset = last = 0
    else:
        offset, last = byte_range
        hdrs = {**headers, "Range": f"bytes={offset}-{last}"}
    scan_budget = _BUDGET.get()
    delay = p.backoff
    end = time.monotonic() + p.retry_time
    for attempt in range(p.retries + 1):
        if src.requests >= p.file_requests:
            raise RemoteLimitError(f"{src.name}: {p.file_requests} requests made for this "
                                   f"file, its cap ({ENV['file_requests']})")
        src.requests += 1
        if scan_budget is not None:
            scan_budget.take(p, requests=1, where=src.name)
        why: str
        status: int | None = None
        try:
            r = open_url(url, hdrs, p, where=src.name)
        except RemoteError:
            raise
        except GritUsageError as e:
            raise RemoteError(f"{src.name}: {e}") from None
        except (_Deadline, TimeoutError) as e:
            why = f"TimeoutError: {e}"
        except (OSError, http.client.HTTPException, ValueError) as e:
            why = f"{type(e).__name__}: {str(e)[:160]}"
        else:
            status = r.status
            enc = (r.headers.get("Content-Encoding") or "identity").strip().lower()
            if status in (200, 206) and enc != "identity":
                r.close()
                raise RemoteError(f"{src.name}: the server sent the bytes encoded "
                                  f"({enc[:40]}); grit asks for them as they are", status)
            if status in (200, 206):
                return r
            r.close()
            if status == 416 and byte_range is not None:
                if probe:                 # an empty file has no byte 0
                    raise RemoteError(f"{src.name}: the server has no byte 0 to send "
                                      "(416: an empty file?)", 416)
                raise SourceRangeError(f"{src.name}: bytes {offset}-{last}: the server "
                                       "says the range is not satisfiable (416)")
            if status not in _RETRY:
                text = f"HTTP {status} {r.resp.reason}"[:120]
                raise RemoteError(f"{src.name}: {text}", status)
            why = f"HTTP {status} {r.resp.reason}"[:120]
        left = end - time.monotonic()
        if attempt == p.retries or left <= 0:
            raise RemoteError(f"{src.name}: {why} (after {attempt + 1} attempts)", status)
        time.sleep(min(delay, left))
        delay *= 2
    raise AssertionError("unreachable")  # pragma: no cover


class Requester:
    """What a request that reads no file is counted on (an API call): its
    ``name`` in messages, ``requests`` and ``bytes_read``, and the
    ``policy`` it runs under (the one in force when None)."""

    def __init__(self, name: str, policy: NetPolicy | None = None):
        self.name = name
        self.requests = 0
        self.bytes_read = 0
        self.policy = policy if policy is not None else globals()["policy"]()


def read_document(src, url: str, headers: dict, limit: int) -> bytes:
    """The whole body of a GET of ``url`` (an API answer: 200), at most
    ``limit`` bytes, for ``src`` (a :class:`Requester`): retried as
    :func:`fetch` retries, the body read under the policy's deadline for
    its length (its Content-Length, else ``limit``).  A longer body, one
    cut short, or another status is a RemoteError."""
    resp = fetch(src, url, headers)
    with resp:
        if resp.status != 200:
            raise RemoteError(f"{src.name}: expected 200, got {resp.status}", resp.status)
        data = resp.whole(limit, src.policy)
        count_body(src, len(data))
        return data


def count_body(src, n: int) -> None:
    """Count ``n`` body bytes read for ``src`` against the file's and the
    scan's caps."""
    p: NetPolicy = src.policy
    src.bytes_read += n
    if src.bytes_read > p.file_bytes:
        raise RemoteLimitError(f"{src.name}: {p.file_bytes} body bytes read from this file, "
                               f"its cap ({ENV['file_bytes']})")
    b = _BUDGET.get()
    if b is not None:
        b.take(p, nbytes=n, where=src.name)


def content_range(src, resp: _Open) -> tuple[int, int, int | None]:
    m = _CONTENT_RANGE.match(resp.headers.get("Content-Range") or "")
    if resp.status != 206 or m is None:
        raise RemoteError(f"{src.name}: expected 206 with a Content-Range, got "
                          f"{resp.status} {str(resp.headers.get('Content-Range'))[:80]!r}",
                          resp.status)
    size = None if m.group(3) == "*" else int(m.group(3))
    return int(m.group(1)), int(m.group(2)), size


def read_ranged(src, url: str, offset: int, mv: memoryview, headers: dict,
                size: int | None) -> int:
    """Fill ``mv`` with bytes ``offset``… of ``url`` by one ranged GET
    (:func:`fetch_range`), the answer checked: 206, the Content-Range
    naming exactly the range and ``size`` (when given), the whole body."""
    n = mv.nbytes
    resp = fetch_range(src, url, offset, offset + n - 1, headers)
    with resp:
        if resp.status == 200:
            raise RemoteError(f"{src.name}: the server stopped honouring Range requests "
                              "(200 with the whole file)", 200)
        first, last, total = content_range(src, resp)
        if size is not None and total is not None and total != size:
            raise RemoteError(f"{src.name}: the file changed while it was read: "
                              f"{size} bytes, now {total}", resp.status)
        if first != offset or last > offset + n - 1 or last < first:
            raise RemoteError(f"{src.name}: asked for bytes {offset}-{offset + n - 1}, "
                              f"the server sent {first}-{last}", resp.status)
        want = last - first + 1
        got = resp.body(mv[:want], src.policy)
        count_body(src, got)
        if got < want:          # a body shorter than its own Content-Range: not retried
            raise RemoteError(f"{src.name}: the body broke off after {got} of {want} bytes "
                              f"(bytes {first}-{last})", resp.status)
        return got


class CachedSource(ByteSource):
    """A remote byte source whose reads a :class:`HeaderCache` may answer:
    a read :func:`cacheable` keeps, of a file named by a validator
    (:meth:`_identity`: its name and an ETag, a Last-Modified or an LFS
    sha256; None when it has none), is served from, or kept in, ``cache``
    under (name, validator, size, range); ``cache_hits`` counts the reads
    it answered."""

    cache: "HeaderCache | None" = None
    cache_hits: int = 0
    #: the file's first bytes, once read (at most _HEAD): a sniff's, asked
    #: again by the container reader, are not asked of the server again
    _head: bytes = b""
    #: how many of the file's first bytes the first read of its header length
    #: fetches (0: only the bytes asked for): the header, and the small
    #: tensors written right after it, then come from memory
    prefix_bytes: int = 0
    _prefix: bytes | None = None

    def _identity(self) -> tuple[str, str] | None:
        return None

    def read(self, offset, length, what: str = "read") -> bytes:
        off, n = self.check_range(offset, length, what)
        if off == 0 and n <= len(self._head):
            return self._head[:n]
        data = self._read_through(off, n, what)
        if off == 0 and n <= _HEAD:
            self._head = data
        return data

    def _read_through(self, off: int, n: int, what: str) -> bytes:
        cache = self.cache
        ident = self._identity() if cache is not None else None
        if cache is None or ident is None or not cacheable(what, n):
            return self._fetch(off, n, what)
        data, hit = cache.through((*ident, self.size, off, n),
                                  lambda: self._fetch(off, n, what))
        self.cache_hits += hit
        return data

    def _fetch(self, off: int, n: int, what: str) -> bytes:
        """The bytes asked of the server — or of the prefix: the first read
        of the header length (a cache miss) fetches ``prefix_bytes`` bytes
        at once, and what lies in them is served from them (a read running
        past them asks for the rest alone)."""
        if self._prefix is None and off == 0 and what == "header length" \
                and self.prefix_bytes > n:
            try:
                self._prefix = ByteSource.read(self, 0, min(self.size, self.prefix_bytes),
                                               "header prefix")
            except (RemoteError, SourceRangeError) as e:
                # a server that answered with fewer bytes (a file shorter than
                # its listing): the reads ask for their own bytes, as without
                # a prefix; a failure to answer at all is the read's failure
                if isinstance(e, RemoteError) and e.status not in (206, 416):
                    raise
                self._prefix = b""
        pre = self._prefix
        if pre is None or off >= len(pre):
            return ByteSource.read(self, off, n, what)
        if off + n <= len(pre):
            return pre[off:off + n]
        return pre[off:] + ByteSource.read(self, len(pre), off + n - len(pre), what)


class HTTPSource(CachedSource):
    """A remote file by HTTP ``Range`` requests (see the module docstring).
    ``requests`` and ``bytes_read`` count what was asked of the server;
    ``etag`` and ``last_modified`` are the server's validators (None when it
    sends none).  ``policy`` is the :class:`NetPolicy` (the one in force
    when None) with the keyword overrides given."""

    def __init__(self, url: str, *, timeout: float | None = None, retries: int | None = None,
                 backoff: float | None = None, headers: dict | None = None,
                 cache: "HeaderCache | None" = None, min_rate: int | None = None,
                 policy: NetPolicy | None = None):
        target = parse_url(url)
        self.name = self.url = url
        self._target = target.url
        given = {"timeout": timeout, "retries": retries, "backoff": backoff,
                 "min_rate": min_rate}
        self.policy = dataclasses.replace(policy if policy is not None else globals()["policy"](),
                                          **{k: v for k, v in given.items() if v is not None})
        self.timeout = self.policy.timeout
        self.headers = dict(headers or {})
        self.requests = 0
        self.bytes_read = 0
        self.cache_hits = 0
        self.size = 0
        self.cache = cache
        self.etag = self.last_modified = None
        with fetch_range(self, self._target, 0, 0, self.headers, probe=True) as resp:
            if resp.status == 200:
                raise RemoteError(f"{url}: the server ignores Range requests (it answered "
                                  "200 with the whole file); grit reads remote files by "
                                  "range only, and read none of the body", 200)
            first, last, size = content_range(self, resp)
            if (first, last) != (0, 0) or size is None:
                raise RemoteError(f"{url}: asked for byte 0, the server sent "
                                  f"{str(resp.headers.get('Content-Range'))[:80]!r}",
                                  resp.status)
            self.size = size
            self.etag = _validator(resp.headers.get("ETag"))
            self.last_modified = _validator(resp.headers.get("Last-Modified"))

    def _identity(self) -> tuple[str, str] | None:
        validator = self.etag or self.last_modified
        return None if validator is None else (self.url, validator)

    def _readinto(self, offset: int, mv: memoryview) -> int:
        return read_ranged(self, self._target, offset, mv, self.headers, self.size)


def _validator(v: str | None) -> str | None:
    """A server's ETag or Last-Modified as a cache key part (None when
    absent or longer than 256 characters)."""
    return v if v is not None and len(v) <= 256 else None


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


#: the first bytes of a cache entry: the format, then the sha256 of the key
#: and the bytes (32 bytes), then the bytes
_ENTRY_MAGIC = b"grit-header-cache-1\n"


class HeaderCache:
    """Container headers of remote files, on disk, keyed by URL, validator
    (ETag or Last-Modified), file size and byte range: a rescan of a file the
    server still names the same way moves no payload byte.  Entries are
    written atomically under ``root`` and nowhere else.  The cache is
    untrusted input: an entry is used only when it is a regular file (not a
    link, FIFO or device) of exactly the expected length whose stored sha256
    of (key, bytes) matches; anything else — damaged, foreign, another
    key's — is a miss.  At most ``max_entry`` bytes are kept per read."""

    def __init__(self, root, max_entry: int = 1 << 27):
        self.root = os.fspath(root)
        self.max_entry = max_entry

    @staticmethod
    def _key(url: str, validator: str, size: int, off: int, n: int) -> bytes:
        return repr((url, validator, size, off, n)).encode("utf-8", "backslashreplace")

    def _path(self, url: str, validator: str, size: int, off: int, n: int) -> str:
        h = hashlib.sha256(self._key(url, validator, size, off, n)).hexdigest()
        return os.path.join(self.root, h[:2], h)

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
        want = len(_ENTRY_MAGIC) + 32 + n
        if n > self.max_entry:
            return None
        try:
            fd = os.open(self._path(url, validator, size, off, n),
                         os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != want:
                return None
            with os.fdopen(os.dup(fd), "rb") as f:
                blob = f.read(want + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(blob) != want or not blob.startswith(_ENTRY_MAGIC):
            return None
        digest, data = blob[len(_ENTRY_MAGIC):len(_ENTRY_MAGIC) + 32], blob[-n:] if n else b""
        if hashlib.sha256(self._key(url, validator, size, off, n) + data).digest() != digest:
            return None
        return data

    def put(self, url, validator, size, off, n, data: bytes) -> None:
        if len(data) != n or n > self.max_entry:
            return
        path = self._path(url, validator, size, off, n)
        digest = hashlib.sha256(self._key(url, validator, size, off, n) + data).digest()
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".grit-", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(_ENTRY_MAGIC + digest + data)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
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
