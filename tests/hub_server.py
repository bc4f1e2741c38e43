"""A Hub-shaped endpoint on loopback for the hf:// tests: threaded, serving
repositories held in memory, answering the routes huggingface_hub 2.4
calls —

* ``GET /api/{models,datasets}/ORG/REPO[/revision/REV]`` (repo info: the
  commit sha the revision names, the siblings with sizes and LFS objects),
* ``GET /api/…/ORG/REPO/tree/REV[/PATH]?recursive=…`` (the listing: each
  file's size, git blob id and ``lfs {oid (sha256), size, pointerSize}``),
* ``POST /api/…/ORG/REPO/paths-info/REV`` (paths=…),
* ``GET``/``HEAD /[datasets/]ORG/REPO/resolve/REV/PATH`` with single
  ``Range`` requests (206, Content-Range; ``X-Repo-Commit``, ``ETag``),

with the Hub's error shapes (401 for a private repository without its
Bearer token, 404 with ``X-Error-Code`` RepoNotFound / RevisionNotFound /
EntryNotFound) and byte counting of the file bodies it sends.  A commit's
sha is the sha1 of its files, so two commits of different bytes have
different shas."""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from http_server import ranged, send_416

_API = re.compile(r"^/api/(?P<kind>models|datasets)/(?P<org>[^/]+)/(?P<name>[^/]+)"
                  r"(?:/(?P<op>revision|tree|paths-info)/(?P<rest>.*))?$")
_RESOLVE = re.compile(r"^/(?:(?P<kind>datasets)/)?(?P<org>[^/]+)/(?P<name>[^/]+)/resolve/"
                      r"(?P<rest>.*)$")
LFS_SUFFIXES = (".safetensors", ".gguf", ".bin")


_HASHES: dict[int, tuple[bytes, str, str]] = {}


def _hashes(data: bytes) -> tuple[str, str]:
    """(git blob id, sha256) of a served file, computed once per bytes object
    (a per-request hash of a large file would time the server, not the client)."""
    hit = _HASHES.get(id(data))
    if hit is None or hit[0] is not data:
        hit = (data, hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(),
               hashlib.sha256(data).hexdigest())
        _HASHES[id(data)] = hit
    return hit[1], hit[2]


def blob_id(data: bytes) -> str:
    return _hashes(data)[0]


def sha256(data: bytes) -> str:
    return _hashes(data)[1]


@dataclass
class Repo:
    private: bool = False
    token: str | None = None
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)


class _Threading(ThreadingHTTPServer):
    request_queue_size = 256       # the listen backlog: many clients connect at once


class HubServer:
    def __init__(self):
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[tuple[str, str]] = []
        self.body_bytes = 0
        #: body bytes of the API's answers (JSON)
        self.api_bytes = 0
        self.body_by_path: dict[str, int] = {}
        #: (path, first, last) of each body sent
        self.ranges: list[tuple[str, int, int]] = []
        #: seconds to wait before answering, by route ("api", "resolve")
        self.latency: dict[str, float] = {}
        #: sizes the listing states instead of the true ones, by file path
        self.listed_size: dict[str, int] = {}
        #: [status, count] by route ("api", "resolve"): the next count requests
        #: of the route are answered with status (a 5xx burst)
        self.fail: dict[str, list] = {}
        #: seconds a read of a file waits before its answer, by file path (a hang)
        self.hang: dict[str, float] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in separate writes: without TCP_NODELAY a
            # kept-alive client waits out a delayed ACK (~40 ms) on every request
            disable_nagle_algorithm = True

            def log_message(self, *a):
                pass

            def do_HEAD(self):
                self._route(head=True)

            def do_GET(self):
                self._route()

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                self._body_in = self.rfile.read(n).decode() if n else ""
                self._route()

            def _route(self, head=False):
                url = urlsplit(self.path)
                with server._lock:
                    server.requests.append((self.command, url.path))
                m = _API.match(url.path)
                if m is not None:
                    time.sleep(server.latency.get("api", 0))
                    if self._burst("api"):
                        return
                    return self._api(m, parse_qs(url.query))
                m = _RESOLVE.match(url.path)
                if m is not None:
                    time.sleep(server.latency.get("resolve", 0))
                    if self._burst("resolve"):
                        return
                    return self._resolve(m, head)
                return self._error(404, "Not Found")

            # -- helpers ---------------------------------------------------
            def _burst(self, route):
                with server._lock:
                    f = server.fail.get(route)
                    if not f or f[1] <= 0:
                        return False
                    f[1] -= 1
                self._error(f[0], "Internal Error")
                return True

            def _repo(self, kind, org, name):
                kind = "dataset" if kind in ("datasets",) else "model"
                r = server.repos.get((kind, f"{org}/{name}"))
                if r is None:
                    self._error(404, "RepoNotFound")
                    return None
                if r.private and self.headers.get("Authorization") != f"Bearer {r.token}":
                    self._error(401, "RepoNotFound", "Invalid username or password.")
                    return None
                return r

            def _commit(self, r, rev):
                rev = unquote(rev)
                sha = r.refs.get(rev, rev)
                if sha not in r.commits:
                    self._error(404, "RevisionNotFound")
                    return None, None
                return sha, r.commits[sha]

            def _error(self, code, error_code, message=None):
                body = json.dumps({"error": message or error_code}).encode()
                self.send_response(code)
                self.send_header("X-Error-Code", error_code)
                if message:
                    self.send_header("X-Error-Message", message)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self._write(body)

            def _json(self, doc, headers=()):
                body = json.dumps(doc).encode()
                with server._lock:
                    server.api_bytes += len(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self._write(body)

            def _write(self, body):
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):   # a client that timed out
                    pass

            def _entry(self, path, data):
                size = server.listed_size.get(path, len(data))
                e = {"type": "file", "path": path, "size": size, "oid": blob_id(data)}
                if path.endswith(LFS_SUFFIXES):
                    e["lfs"] = {"oid": sha256(data), "size": len(data),
                                "pointerSize": 134}
                return e

            def _entries(self, files, folder, recursive):
                pre = folder.strip("/") + "/" if folder.strip("/") else ""
                out, dirs = [], set()
                for p in sorted(files):
                    if not p.startswith(pre):
                        continue
                    rest = p[len(pre):]
                    if "/" in rest and not recursive:
                        dirs.add(pre + rest.split("/")[0])
                        continue
                    if recursive:
                        parts = rest.split("/")[:-1]
                        for i in range(len(parts)):
                            dirs.add(pre + "/".join(parts[:i + 1]))
                    out.append(self._entry(p, files[p]))
                out += [{"type": "directory", "path": d, "oid": blob_id(d.encode())}
                        for d in sorted(dirs)]
                return out

            # -- the API ---------------------------------------------------
            def _api(self, m, query):
                r = self._repo(m["kind"], m["org"], m["name"])
                if r is None:
                    return
                op, rest = m["op"], m["rest"] or ""
                if op is None:
                    op, rest = "revision", "main"
                if op == "revision":
                    sha, files = self._commit(r, rest)
                    if sha is None:
                        return
                    # (siblings name the LFS object's hash "sha256"; the tree, "oid")
                    siblings = [{"rfilename": p, "size": server.listed_size.get(p, len(b)),
                                 "blobId": blob_id(b),
                                 **({"lfs": {"sha256": sha256(b),
                                             "size": len(b), "pointerSize": 134}}
                                    if p.endswith(LFS_SUFFIXES) else {})}
                                for p, b in sorted(files.items())]
                    return self._json({"id": f"{m['org']}/{m['name']}", "sha": sha,
                                       "private": r.private, "siblings": siblings})
                rev, _, folder = rest.partition("/")
                sha, files = self._commit(r, rev)
                if sha is None:
                    return
                if op == "tree":
                    folder = unquote(folder)
                    recursive = (query.get("recursive") or ["false"])[0].lower() == "true"
                    if folder and folder not in files and not any(
                            p.startswith(folder.strip("/") + "/") for p in files):
                        return self._error(404, "EntryNotFound")
                    return self._json(self._entries(files, folder, recursive))
                paths = parse_qs(getattr(self, "_body_in", "")).get("paths", [])
                out = [self._entry(p, files[p]) for p in paths if p in files]
                return self._json(out)

            def _resolve(self, m, head):
                r = self._repo(m["kind"], m["org"], m["name"])
                if r is None:
                    return
                rev, _, path = m["rest"].partition("/")
                sha, files = self._commit(r, rev)
                if sha is None:
                    return
                path = unquote(path)
                if server.hang.get(path):
                    time.sleep(server.hang[path])
                data = files.get(path)
                if data is None:
                    return self._error(404, "EntryNotFound")
                e = self._entry(path, data)
                etag = e["lfs"]["oid"] if "lfs" in e else e["oid"]
                hdrs = [("X-Repo-Commit", sha), ("ETag", f'"{etag}"'),
                        ("Accept-Ranges", "bytes")]
                code, body, crange = ranged(self.headers.get("Range"), data)
                if code == 416:
                    return send_416(self, crange)
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                for k, v in hdrs:
                    self.send_header(k, v)
                if crange:
                    self.send_header("Content-Range", crange)
                self.end_headers()
                if head:
                    return
                with server._lock:             # counted before the client can see them
                    server.body_bytes += len(body)
                    server.body_by_path[path] = server.body_by_path.get(path, 0) + len(body)
                    first = int(crange.split()[1].split("-")[0]) if crange else 0
                    server.ranges.append((path, first, first + len(body) - 1))
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = _Threading(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    # -- what the tests set up --------------------------------------------
    def commit(self, repo_id: str, files: dict[str, bytes], *, ref: str = "main",
               kind: str = "model", private: bool = False, token: str | None = None) -> str:
        """Serve ``files`` as a new commit of ``repo_id``, which ``ref`` then
        names; its sha."""
        r = self.repos.setdefault((kind, repo_id), Repo(private=private, token=token))
        h = hashlib.sha1()
        for p in sorted(files):
            h.update(p.encode() + b"\0" + files[p])
        sha = h.hexdigest()
        r.commits[sha] = dict(files)
        r.refs[ref] = sha
        return sha

    def model_bytes(self) -> int:
        """Body bytes sent of .safetensors / .gguf files."""
        return sum(n for p, n in self.body_by_path.items() if p.endswith((".safetensors",
                                                                          ".gguf")))

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.body_bytes = 0
            self.api_bytes = 0
            self.body_by_path.clear()
            self.ranges.clear()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
