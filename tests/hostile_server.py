"""A hostile HTTP peer on loopback: a raw TCP server (no http.server
niceties) that answers each request by the behaviour its path names, for
the tests and for scripts/fuzz_remote.py.  ``url(behaviour, **params)``
names one; every behaviour serves ``data`` (a bytes object, or a
:class:`Virtual` file computed range by range) unless it does something
worse:

ok              honest 206 answers to Range requests
silent          accepts, reads the request, never answers
continue        endless ``100 Continue`` interim responses
interim         ``n`` interim responses (102/103), then the honest answer
trickle_head    status and headers one byte every ``pause`` seconds
trickle_body    honest headers, the body one byte every ``pause`` seconds
many_headers    ``n`` header fields
long_header     one header line of ``n`` bytes
redirect        a 302 to ``to`` (a URL, relative or not)
redirect_loop   a 302 to itself
ignore_range    200 with the whole body
wrong_range     206 with a Content-Range of another range
lie_size        206 whose Content-Range names size ``n``
short_body      Content-Length promised, half the body sent, then close
reset           half the body, then a TCP reset
endless_body    206, no Content-Length, bytes forever
bad_chunked     chunked encoding with a malformed chunk size
endless_chunks  chunked, chunks forever (each of ``n`` bytes)
gzip            the body gzip-compressed (a bomb when ``bomb``)
status          the status ``n`` (with ``retry_after`` when given)
garbage         bytes that are not HTTP at all
no_status       closes without a byte
"""
from __future__ import annotations

import gzip
import zlib
import re
import socket
import socketserver
import threading
import time
from urllib.parse import parse_qs, urlsplit, urlencode

_RANGE = re.compile(rb"^range:\s*bytes=(\d+)-(\d*)\s*$", re.IGNORECASE | re.MULTILINE)


_BOMB: list[bytes] = []


def _bomb() -> bytes:
    """64 MiB of zeros, gzip-compressed (about 64 KiB), made once."""
    if not _BOMB:
        c = zlib.compressobj(9, zlib.DEFLATED, 31)       # gzip framing, 1 MiB at a time
        zero = bytes(1 << 20)
        _BOMB.append(b"".join([c.compress(zero) for _ in range(64)] + [c.flush()]))
    return _BOMB[0]


class Virtual:
    """A file of ``size`` bytes computed by ``at(offset, n)``: a server can
    pretend to hold a file far larger than memory."""

    def __init__(self, size: int, at) -> None:
        self.size, self.at = size, at

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, s: slice) -> bytes:
        a, b, _ = s.indices(self.size)
        return self.at(a, max(0, b - a))


def endless_gguf(n_kv: int = 1 << 32) -> Virtual:
    """A GGUF header claiming ``n_kv`` KV entries (uint8 values, 3-digit
    keys: 16 bytes each) and no tensors, its entries invented as read."""
    import struct  # noqa: PLC0415
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, n_kv)
    entry = 16

    def one(i: int) -> bytes:
        return struct.pack("<Q", 3) + b"%03d" % (i % 1000) + struct.pack("<IB", 0, 1)

    def at(off: int, n: int) -> bytes:
        out = bytearray()
        if off < len(head):
            out += head[off:off + n]
        pos = max(off, len(head))
        while len(out) < n:
            i, r = divmod(pos - len(head), entry)
            piece = one(i)[r:]
            out += piece[:n - len(out)]
            pos += len(piece)
        return bytes(out)
    return Virtual(len(head) + entry * n_kv, at)


class HostileServer:
    """``data`` served at every path; ``requests`` counts requests,
    ``handled`` the connections closed."""

    def __init__(self, data=b"", *, linger: float = 30.0) -> None:
        self.data = data
        #: other files, by the last part of the URL's path (``data`` otherwise)
        self.files: dict = {}
        self.requests = 0
        self.linger = linger            # the longest a misbehaving answer goes on
        self._lock = threading.Lock()
        self._stop = threading.Event()
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(5)
                try:
                    head = self._read_request()
                    if head is None:
                        return
                    with server._lock:
                        server.requests += 1
                    server._answer(self.request, head)
                except (OSError, ValueError):
                    pass

            def _read_request(self) -> bytes | None:
                buf = b""
                while b"\r\n\r\n" not in buf:
                    got = self.request.recv(4096)
                    if not got or len(buf) > 1 << 16:
                        return None
                    buf += got
                return buf

        class TCP(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 128

        self.tcp = TCP(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.tcp.serve_forever, daemon=True)
        self.thread.start()

    # -- addresses -------------------------------------------------------------
    def url(self, behaviour: str = "ok", name: str = "model.safetensors", **params) -> str:
        q = urlencode(params)
        return (f"http://127.0.0.1:{self.tcp.server_address[1]}/{behaviour}/{name}"
                + (f"?{q}" if q else ""))

    def close(self) -> None:
        self._stop.set()
        self.tcp.shutdown()
        self.tcp.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- answers ---------------------------------------------------------------
    def _range(self, head: bytes, data) -> tuple[int, int] | None:
        m = _RANGE.search(head)
        if m is None:
            return None
        size = len(data)
        a = int(m.group(1))
        b = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
        return a, b

    def _sleep(self, seconds: float) -> bool:
        return not self._stop.wait(seconds)

    def _answer(self, s: socket.socket, head: bytes) -> None:
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        target = line.split(" ")[1] if line.count(" ") >= 2 else "/"
        parts = urlsplit(target)
        behaviour = parts.path.strip("/").split("/")[0] or "ok"
        q = {k: v[0] for k, v in parse_qs(parts.query).items()}
        n = int(q.get("n", "0") or 0)
        pause = float(q.get("pause", "0.5"))
        end = time.monotonic() + self.linger
        data = self.files.get(parts.path.rsplit("/", 1)[-1], self.data)
        size = len(data)
        rng = self._range(head, data)
        a, b = rng if rng is not None else (0, size - 1)
        if rng is not None and a >= size:
            s.sendall(b"HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */%d\r\n"
                      b"Content-Length: 0\r\n\r\n" % size)
            return
        body = data[a:b + 1]
        crange = b"Content-Range: bytes %d-%d/%d\r\n" % (a, b, size)
        ok = (b"HTTP/1.1 206 Partial Content\r\n" + crange + b'ETag: "hostile"\r\n'
              b"Content-Length: %d\r\n\r\n" % len(body))
        if behaviour == "silent":
            self._sleep(self.linger)
        elif behaviour == "continue":
            while time.monotonic() < end and not self._stop.is_set():
                s.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                if pause:
                    self._sleep(min(pause, 0.01))
        elif behaviour == "interim":
            for _ in range(n):
                s.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n")
            s.sendall(ok + body)
        elif behaviour == "trickle_head":
            for i in range(len(ok)):
                if time.monotonic() > end or not self._sleep(pause):
                    return
                s.sendall(ok[i:i + 1])
        elif behaviour == "trickle_body":
            s.sendall(ok)
            for i in range(len(body)):
                if time.monotonic() > end or not self._sleep(pause):
                    return
                s.sendall(body[i:i + 1])
        elif behaviour == "many_headers":
            extra = b"".join(b"X-H%d: v\r\n" % i for i in range(n))
            s.sendall(ok.replace(b"\r\n\r\n", b"\r\n" + extra + b"\r\n", 1) + body)
        elif behaviour == "long_header":
            s.sendall(ok.replace(b"\r\n\r\n", b"\r\nX-Long: " + b"a" * n + b"\r\n\r\n", 1)
                      + body)
        elif behaviour in ("redirect", "redirect_loop"):
            to = q.get("to", "") if behaviour == "redirect" else target
            s.sendall(b"HTTP/1.1 302 Found\r\nLocation: " + to.encode("utf-8", "replace")
                      + b"\r\nContent-Length: 0\r\n\r\n")
        elif behaviour == "ignore_range":
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
            s.sendall(data[0:min(size, 1 << 20)])
        elif behaviour == "wrong_range":
            c = min(size - 1, a + 1)
            s.sendall(b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %d-%d/%d\r\n"
                      b"Content-Length: %d\r\n\r\n" % (c, c + b - a, size, len(body)) + body)
        elif behaviour == "lie_size":
            s.sendall(b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %d-%d/%d\r\n"
                      b"Content-Length: %d\r\n\r\n" % (a, b, n, len(body)) + body)
        elif behaviour == "short_body":
            s.sendall(ok + body[:len(body) // 2])
        elif behaviour == "reset":
            s.sendall(ok + body[:len(body) // 2])
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        elif behaviour == "endless_body":
            s.sendall(b"HTTP/1.1 206 Partial Content\r\n" + crange + b"Connection: close\r\n\r\n")
            chunk = (body or b"x") * max(1, 65536 // max(1, len(body)))
            while time.monotonic() < end and not self._stop.is_set():
                s.sendall(chunk)
        elif behaviour == "bad_chunked":
            s.sendall(b"HTTP/1.1 206 Partial Content\r\n" + crange
                      + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n" + body + b"\r\n0\r\n\r\n")
        elif behaviour == "endless_chunks":
            s.sendall(b"HTTP/1.1 206 Partial Content\r\n" + crange
                      + b"Transfer-Encoding: chunked\r\n\r\n")
            k = max(1, n)
            while time.monotonic() < end and not self._stop.is_set():
                s.sendall(b"%x;ext=%s\r\n" % (k, b"e" * 100) + b"y" * k + b"\r\n")
        elif behaviour == "gzip":
            payload = _bomb() if q.get("bomb") else gzip.compress(bytes(body))
            s.sendall(b"HTTP/1.1 206 Partial Content\r\n" + crange + b"Content-Encoding: gzip\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
        elif behaviour == "status":
            extra = (b"Retry-After: %s\r\n" % q["retry_after"].encode()
                     if "retry_after" in q else b"")
            s.sendall(b"HTTP/1.1 %d X\r\n" % (n or 500) + extra + b"Content-Length: 0\r\n\r\n")
        elif behaviour == "garbage":
            s.sendall(b"\x00\xff" * 512 + b"\r\n\r\n")
        elif behaviour == "no_status":
            return
        else:
            s.sendall(ok + body)
