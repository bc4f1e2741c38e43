"""A real HTTP server on loopback for the remote-read tests: threaded,
serving in-memory files with single ``Range`` requests (206 and
Content-Range, 416 past the end), counting requests and body bytes, with
faults to inject per path — latency, a fixed status, ignoring Range,
truncated bodies, a redirect, a status for the first N requests."""
from __future__ import annotations

import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


def ranged(range_header: str | None, data: bytes) -> tuple[int, bytes, str | None]:
    """(status, body, Content-Range) answering one ``Range: bytes=A-[B]``
    header over ``data``: 200 and all of it without one, 206 and the slice
    (cut at the end), 416 with ``bytes */SIZE`` when A is past the end."""
    m = _RANGE.match(range_header or "")
    if m is None:
        return 200, data, None
    a = int(m.group(1))
    if a >= len(data):
        return 416, b"", f"bytes */{len(data)}"
    b = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
    return 206, data[a:b + 1], f"bytes {a}-{b}/{len(data)}"


def send_416(handler, crange: str) -> None:
    handler.send_response(416)
    handler.send_header("Content-Range", crange)
    handler.send_header("Content-Length", "0")
    handler.end_headers()


class _Threading(ThreadingHTTPServer):
    request_queue_size = 128       # the listen backlog: --jobs 16 opens 16 at once


class Server:
    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.faults: dict[str, dict] = {}
        self.requests = 0
        self.body_bytes = 0
        self.largest = 0                     # the longest body sent
        self.asked: dict[str, int] = {}      # requests by path
        self.latency = 0.0                   # seconds before every answer (a path's own wins)
        self._lock = threading.Lock()
        self._etags: dict[int, tuple[bytes, str]] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                path = self.path.split("?")[0]
                with server._lock:
                    server.requests += 1
                    server.asked[path] = server.asked.get(path, 0) + 1
                f = server.faults.get(path, {})
                if f.get("latency") or server.latency:
                    time.sleep(f.get("latency") or server.latency)
                if "redirect" in f:
                    self.send_response(302)
                    self.send_header("Location", f["redirect"])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                fail = f.get("fail_first")
                if fail and fail[1] > 0:
                    fail[1] -= 1
                    return self._status(fail[0])
                if "status" in f:
                    return self._status(f["status"])
                data = server.files.get(path)
                if data is None:
                    return self._status(404)
                code, body, crange = ranged(
                    None if f.get("ignore_range") else self.headers.get("Range"), data)
                if code == 416:
                    return send_416(self, crange)
                self._body(code, body, crange, cut=f.get("truncate") if crange else None)

            def _status(self, code):
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _body(self, code, body, crange, cut=None):
                sent = body if cut is None else body[:cut]
                with server._lock:   # counted before the client sees a byte, headers included
                    server.body_bytes += len(sent)
                    server.largest = max(server.largest, len(sent))
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", f'"{server.etag(self.path)}"')
                if crange:
                    self.send_header("Content-Range", crange)
                self.end_headers()
                try:
                    trickle = server.faults.get(self.path.split("?")[0], {}).get("trickle")
                    if trickle:                  # (bytes per send, seconds between sends)
                        k, pause = trickle
                        for i in range(0, len(sent), k):
                            self.wfile.write(sent[i:i + k])
                            self.wfile.flush()
                            time.sleep(pause)
                    else:
                        self.wfile.write(sent)
                    if cut is not None:
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = _Threading(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def etag(self, path: str) -> str:
        """The file's current ETag: a hash of its bytes, as a real server's
        changes with the content (computed once per bytes object put in
        ``files``, so a large file is not hashed per request)."""
        import hashlib  # noqa: PLC0415
        data = self.files.get(path.split("?")[0], b"")
        with self._lock:
            hit = self._etags.get(id(data))
        if hit is not None and hit[0] is data:
            return hit[1]
        tag = hashlib.sha256(data).hexdigest()[:16]
        with self._lock:
            self._etags[id(data)] = (data, tag)
        return tag

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}{path}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
