"""One scan's session with remote servers — http(s) URLs and ``hf://``
names alike: what it asked of the files beside its remote model files
(config.json, hf_quant_config.json, a shard index, a series member asked
for), the header cache their reads go through, the scan's caps on
requests and body bytes (:func:`grit.io.http.budget`) and the Hub's
per-scan resolutions (each revision's commit, each repository opened).

:func:`session` is one scan (and the threads it starts in a copy of its
context): :func:`once` asks each question once however many shards ask
it.  The questions themselves are each kind's
(:mod:`grit.io.location`'s ``Http`` and ``Hub``, :mod:`grit.io.hub`);
nothing here asks whether a path is http(s) or ``hf://``.  Outside a
session each question is asked afresh.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from .http import HeaderCache, HTTPSource, RemoteError, budget

__all__ = ["session", "in_session", "current", "once", "header_cache", "http_source",
           "signed", "beside_signed"]


@dataclass
class _Session:
    """What one scan asked of the files beside its remote model files: each
    answer by URL (bytes, None for absent, or the error), and the header
    cache their reads go through; the Hub's resolutions (``revisions``:
    each revision's commit; ``repos``: each repository opened, by commit),
    kept while the scan runs (:mod:`grit.io.hub`)."""

    cache: HeaderCache | None
    answers: dict[tuple[str, int], Any] = field(default_factory=dict)
    asking: dict[tuple[str, int], threading.Lock] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: the folders of model files named by pre-signed URLs (:func:`signed`)
    signed: set[str] = field(default_factory=set)
    revisions: dict[tuple, str] = field(default_factory=dict)
    repos: dict[tuple, Any] = field(default_factory=dict)


_SESSION: "contextvars.ContextVar[_Session | None]" = contextvars.ContextVar(
    "grit_remote_session", default=None)


@contextlib.contextmanager
def session(cache: HeaderCache | None = None) -> Iterator[None]:
    """Inside the block (one ``grit scan``, and the threads it starts in a
    copy of its context), each small file beside a remote model file —
    config.json, hf_quant_config.json, a shard index, a series member asked
    for — is asked of its server once, however many shards look for it, and
    an http(s) one is read through ``cache`` (a rescan of an unchanged file
    moves one probe byte); a Hub revision is resolved to its commit once
    and every repository opened is kept, however many."""
    token = _SESSION.set(_Session(cache))
    try:
        with budget():               # the scan's caps
            yield
    finally:
        _SESSION.reset(token)


def in_session() -> bool:
    """Whether a :func:`session` is open here (answers are kept)."""
    return _SESSION.get() is not None


def current() -> _Session | None:
    """The :func:`session` open here (None: none)."""
    return _SESSION.get()


def once(key: tuple[str, int], ask):
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


def header_cache() -> HeaderCache | None:
    """The header cache of the :func:`session` open here (None: none, or
    a scan without a cache)."""
    s = _SESSION.get()
    return None if s is None else s.cache


def http_source(path: str, cache: HeaderCache | None = None) -> HTTPSource:
    """The HTTPSource of a remote file — a model file, or one beside it.
    Inside a :func:`session`: probed once (the probe tells whether it is
    there and its size; a series check asking for a shard the scan read
    asks nothing more), through the session's header cache; outside one,
    a new source through ``cache``."""
    if _SESSION.get() is None:
        return HTTPSource(path, cache=cache)
    return once((path, -2), lambda: HTTPSource(path, cache=header_cache()))


def signed(url: str) -> None:
    """In this :func:`session`, ``url`` (an http(s) URL) is a model file named with a query
    (a pre-signed URL: the signature covers that object alone), so the
    files beside it are not asked for (:func:`beside_signed`: the
    location answers absent for any name in its folder)."""
    s = _SESSION.get()
    if s is not None and "?" in url:
        with s.lock:
            s.signed.add(url.split("?", 1)[0].rsplit("/", 1)[0] + "/")


def beside_signed(path: str) -> bool:
    """Whether ``path`` is in the folder of a pre-signed URL of this
    :func:`session` (:func:`signed`)."""
    s = _SESSION.get()
    if s is None or not s.signed:
        return False
    with s.lock:
        return any(path.startswith(f) for f in s.signed)
