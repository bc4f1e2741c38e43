"""The files beside a remote model file — config.json, hf_quant_config.json,
a shard index, a series member asked for — for http(s) URLs and ``hf://``
names alike, asked of their servers once per scan.

:func:`session` is one scan (and the threads it starts in a copy of its
context): each small file is asked for once however many shards look for
it, an http(s) one through the scan's header cache, an ``hf://`` one at
its commit through the same cache (:mod:`grit.io.hub`); it also holds the
scan's caps on requests and body bytes (:func:`grit.io.http.budget`) and
the Hub's per-scan resolutions (:func:`grit.io.hub.scope`).  Outside a
session each question is asked afresh.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from .http import SMALL_READ, HeaderCache, HTTPSource, RemoteError, budget, is_url
from .hub import HubPath, is_hub, repo, scope
from ..errors import GritUsageError

__all__ = ["session", "in_session", "read_small", "http_source", "exists", "signed"]


@dataclass
class _Session:
    """What one scan asked of the files beside its remote model files: each
    answer by URL (bytes, None for absent, or the error), and the header
    cache their reads go through."""

    cache: HeaderCache | None
    answers: dict[tuple[str, int], Any] = field(default_factory=dict)
    asking: dict[tuple[str, int], threading.Lock] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: the folders of model files named by pre-signed URLs (:func:`signed`)
    signed: set[str] = field(default_factory=set)


_SESSION: "contextvars.ContextVar[_Session | None]" = contextvars.ContextVar(
    "grit_remote_session", default=None)


@contextlib.contextmanager
def session(cache: HeaderCache | None = None) -> Iterator[None]:
    """Inside the block (one ``grit scan``, and the threads it starts in a
    copy of its context), each small file beside a remote model file —
    config.json, hf_quant_config.json, a shard index, a series member asked
    for — is asked of its server once, however many shards look for it, and
    an http(s) one is read through ``cache`` (a rescan of an unchanged file
    moves one probe byte)."""
    token = _SESSION.set(_Session(cache))
    try:
        with budget(), scope():      # the scan's caps; the Hub's resolutions kept
            yield
    finally:
        _SESSION.reset(token)


def in_session() -> bool:
    """Whether a :func:`session` is open here (answers are kept)."""
    return _SESSION.get() is not None


def _once(key: tuple[str, int], ask):
    """``ask()``'s answer for ``key`` in this session (asked once; an error
    raised again), or asked afresh outside a session."""
    s = _SESSION.get()
    if s is None:
        return ask()
    with s.lock:                      # one lock a key: two threads asking wait for one answer
        one = s.asking.setdefault(key, threading.Lock())
    with one:
        with s.lock:
            if key in s.answers:
                got = s.answers[key]
                if isinstance(got, BaseException):
                    raise got
                return got
        try:
            got = ask()
        except RemoteError as e:
            with s.lock:
                s.answers[key] = e
            raise
        with s.lock:
            s.answers[key] = got
        return got


def _http_cache() -> HeaderCache | None:
    s = _SESSION.get()
    return None if s is None else s.cache


def read_small(path: str, limit: int) -> bytes | None:
    """The first ``limit + 1`` bytes of a small remote file (all of it when
    it is no longer: a caller sees a file over its limit by the length),
    None when it is absent (HTTP 404; a name the repository listing lacks).
    Any other failure is a RemoteError.  Inside a :func:`session`, asked
    once."""
    if _beside_signed(path):
        return None
    return _once((path, limit), lambda: _read_small(path, limit))


def _read_small(path: str, limit: int) -> bytes | None:
    if is_hub(path):
        where = HubPath.parse(path)
        r = repo(where)
        f = r.files.get(where.path)
        if f is None:
            return None
        key = (where.path, limit)
        hit = r.small.get(key)         # a file at a commit never changes: read once
        if hit is None:       # (a small file at a commit is kept in the header cache too)
            with r.open(where.path, _http_cache()) as src:
                hit = src.read(0, min(src.size, limit + 1), "small file")
            if len(hit) <= SMALL_READ:
                r.small[key] = hit
        return hit
    try:
        src = http_source(path)
    except RemoteError as e:
        if e.status in _ABSENT:
            return None
        if e.status == 416:          # no byte 0: an empty file
            return b""
        raise
    return src.read(0, min(src.size, limit + 1), "small file")


def http_source(path: str, cache: HeaderCache | None = None) -> HTTPSource:
    """The HTTPSource of a remote file — a model file, or one beside it.
    Inside a :func:`session`: probed once (the probe tells whether it is
    there and its size; a series check asking for a shard the scan read
    asks nothing more), through the session's header cache; outside one,
    a new source through ``cache``."""
    if _SESSION.get() is None:
        return HTTPSource(path, cache=cache)
    return _once((path, -2), lambda: HTTPSource(path, cache=_http_cache()))


def exists(path: str) -> bool:
    """Whether a remote file is there: False only when the server says 404
    (the repository listing lacks it); a server that fails otherwise counts
    as holding it, so the read that follows reports the failure.  Inside a
    :func:`session`, asked once (the probe a read of it makes)."""
    if _beside_signed(path):
        return False
    return _once((path, -1), lambda: _exists(path))


def _exists(path: str) -> bool:
    if is_hub(path):
        try:
            where = HubPath.parse(path)
            return where.path in repo(where).files
        except RemoteError as e:
            return e.status != 404
        except GritUsageError:
            return False
    try:
        http_source(path)
    except RemoteError as e:
        return e.status not in _ABSENT
    except GritUsageError:
        return False
    return True


#: the answer that says a file beside a remote model file (http(s)) is not there
_ABSENT = frozenset({404})


def signed(url: str) -> None:
    """In this :func:`session`, ``url`` is a model file named with a query
    (a pre-signed URL: the signature covers that object alone), so the
    files beside it are not asked for: :func:`exists` says False and
    :func:`read_small` None for any name in its folder."""
    s = _SESSION.get()
    if s is not None and is_url(url) and "?" in url:
        with s.lock:
            s.signed.add(url.split("?", 1)[0].rsplit("/", 1)[0] + "/")


def _beside_signed(path: str) -> bool:
    s = _SESSION.get()
    if s is None or not s.signed or not is_url(path):
        return False
    with s.lock:
        return any(path.startswith(f) for f in s.signed)
