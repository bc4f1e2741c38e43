"""Reading and writing files safely: every file grit opens or writes goes
through here."""
from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
import weakref
from typing import Any, BinaryIO, Iterable, Iterator

import numpy as np

from .errors import GritUsageError

__all__ = ["atomic_write", "open_regular", "NotRegularFileError", "read_regular", "loads_json",
           "check_output", "MAX_JSON_DEPTH", "GritFileError", "register_map", "check_mapped",
           "MappedTensors", "check_tensors"]


class GritFileError(GritUsageError):
    """A file is not a well-formed container (header, offsets, dtypes, the
    ``__grit__`` document), or changed under grit's map of it.  A
    GritUsageError, as for an unreadable GGUF."""


class NotRegularFileError(OSError):
    """The path names a FIFO, a device, a socket or a directory, not a file."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path) -> BinaryIO:
    """Open ``path`` for binary reading if it is a regular file.  The open
    itself never blocks (O_NONBLOCK: a FIFO named like a checkpoint would
    otherwise wait forever for a writer); anything but a regular file is then
    refused with NotRegularFileError (an OSError, so callers that report
    unreadable inputs report it too)."""
    p = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) \
        | getattr(os, "O_BINARY", 0)
    fd = os.open(p, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(errno.EINVAL, f"{_kind(mode)}, not a regular file", p)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`: a FIFO,
    a device or a directory is NotRegularFileError) when it holds at most
    ``limit`` bytes; a larger one is a GritUsageError, found by reading at
    most ``limit + 1`` bytes (a file that grows while read is bounded too)."""
    with open_regular(path) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise GritUsageError(f"{os.fspath(path)!r}: larger than {limit} bytes")
    return data


#: JSON documents grit reads nest at most this deep (arrays and objects)
MAX_JSON_DEPTH = 64
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def loads_json(data: bytes | str, what: str, max_depth: int = MAX_JSON_DEPTH):
    """``data`` (UTF-8 bytes or text) parsed as JSON, nesting at most
    ``max_depth`` deep; anything else — undecodable bytes, invalid JSON,
    deeper nesting (decided before parsing, so the parser cannot run out of
    stack) — is a ValueError naming ``what``."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{what}: not UTF-8 ({e})"[:300]) from None
    else:
        text = data
    marks = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    if marks and max(itertools.accumulate(_STEP[c] for c in marks)) > max_depth:
        raise ValueError(f"{what}: JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError(f"{what}: not valid JSON ({e})"[:300]) from None


def check_output(path) -> str:
    """``path`` checked as a file grit may write a report to: a regular file
    or a character device (``/dev/null``, a terminal) when it exists — a
    directory, FIFO (whose open waits for a reader), socket or block device
    is refused — and otherwise a name in a folder that exists.  The path;
    GritUsageError for one refused."""
    p = os.fspath(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        folder = os.path.dirname(os.path.abspath(p))
        if not os.path.isdir(folder):
            raise GritUsageError(f"cannot write {p!r}: the folder {folder!r} does not exist") \
                from None
        return p
    except OSError as e:
        raise GritUsageError(f"cannot write {p!r}: {e.strerror or e}") from None
    if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
        raise GritUsageError(f"cannot write {p!r}: it is {_kind(mode)}")
    return p


# ---------------------------------------------------------------------------
# files mapped into memory, and the check before their views are read
#
# A read of a mapped page the file no longer holds (the file was truncated
# after it was mapped) is SIGBUS: the process dies.  Every map grit makes of
# a local file is registered here with a duplicate of its descriptor, and
# check_mapped, called before grit reads through views of it (decode, digest,
# save, a loaded tensor handed out), compares the file's size now with the
# size mapped: smaller is a GritFileError instead of a crash.  (A truncation
# between the check and the read still faults: the check closes the window
# grit's own calls leave, not a race with another process.)

_MAPPED: dict[int, tuple[int, int, str]] = {}   # id(map) -> (fd, size, name)
_MAPPED_LOCK = threading.Lock()


def register_map(mm: Any, size: int, fd: int, name: str) -> None:
    """Register the map ``mm`` of ``size`` bytes of the file open as ``fd``
    until ``mm`` is collected (its last view gone)."""
    if size <= 0:
        return
    dup = os.dup(fd)
    key = id(mm)
    with _MAPPED_LOCK:
        _MAPPED[key] = (dup, size, name)
    weakref.finalize(mm, _forget, key, dup)


def _forget(key: int, dup: int) -> None:
    with _MAPPED_LOCK:
        if _MAPPED.get(key, (None,))[0] == dup:
            del _MAPPED[key]
    with contextlib.suppress(OSError):
        os.close(dup)


def _owner(b: Any) -> Any:
    """The object whose memory ``b`` views, through memoryviews' exporters
    and ndarrays' bases (a map, for a view of one)."""
    for _ in range(64):
        if isinstance(b, memoryview):
            b = b.obj
        elif isinstance(b, np.ndarray) and b.base is not None:
            b = b.base
        else:
            break
    return b


def check_mapped(buffers: Iterable[Any]) -> None:
    """Raise GritFileError when any of ``buffers`` views a registered map
    whose file is now shorter than when it was mapped (reading it would
    kill the process with SIGBUS); otherwise nothing.  One dict look-up per
    buffer, and one fstat per map (about 1-3 us a call)."""
    if not _MAPPED:
        return
    seen: set[int] = set()
    for b in buffers:
        if b is None or isinstance(b, bytes):
            continue
        key = id(_owner(b))
        got = _MAPPED.get(key)
        if got is None or key in seen:
            continue
        seen.add(key)
        fd, size, name = got
        try:
            now = os.fstat(fd).st_size
        except OSError:
            now = -1
        if now < size:
            raise GritFileError(f"{name}: the file changed while it was mapped: {size} bytes "
                                f"when loaded, {max(now, 0)} now; its tensors can no longer "
                                "be read (load it again)")


def _buffers_of(v: Any) -> tuple:
    """The mapped buffers a loaded value reads: an ndarray itself; a GRIT
    array's planes once built, else the storage it builds them from."""
    if isinstance(v, np.ndarray):
        return (v,)
    planes = getattr(v, "_planes", None)
    if planes is not None:
        return tuple(planes)
    src = getattr(v, "_source", None)
    data = getattr(src, "data", None)
    return (data,) if data is not None else ()


def check_tensors(tensors) -> None:
    """:func:`check_mapped` over every value of a mapping of tensors (what
    a writer is about to read)."""
    vals = dict.values(tensors) if isinstance(tensors, dict) else tensors.values()
    check_mapped(b for v in vals for b in _buffers_of(v))


class MappedTensors(dict):
    """A dict of tensors loaded as views of a mapped file: each value
    handed out (``[]``, ``get``, ``values``, ``items``) is checked first
    (:func:`check_mapped`), so a file truncated since it was loaded is a
    GritFileError rather than a SIGBUS when the value is read."""

    def __getitem__(self, key):
        v = dict.__getitem__(self, key)
        check_mapped(_buffers_of(v))
        return v

    def get(self, key, default=None):
        return self[key] if key in self else default

    def values(self):
        vals = list(dict.values(self))
        check_mapped(b for v in vals for b in _buffers_of(v))
        return vals

    def items(self):
        its = list(dict.items(self))
        check_mapped(b for _, v in its for b in _buffers_of(v))
        return its


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class _Terminated(BaseException):
    """A termination signal arrived while a temporary file existed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: the signals whose default action ends the process without unwinding it
#: (SIGINT already unwinds, as KeyboardInterrupt)
_FATAL = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


@contextlib.contextmanager
def _unwind_on_termination() -> Iterator[None]:
    """While the body runs, a SIGTERM or SIGHUP that would kill the process
    outright unwinds it instead (so a temporary file is removed), and is then
    delivered again under its default action: the process still ends by that
    signal, with the exit status a shell expects.  Handlers the program set
    itself, ignored signals and threads other than the main one are left as
    they are (only the main thread may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame):
        raise _Terminated(signum)

    installed = []
    for s in _FATAL:
        if signal.getsignal(s) is signal.SIG_DFL:
            signal.signal(s, handler)
            installed.append(s)
    try:
        yield
    except _Terminated as t:
        for s in installed:
            signal.signal(s, signal.SIG_DFL)
        installed.clear()
        os.kill(os.getpid(), t.signum)   # default action: the process ends here
        raise                            # not reached on POSIX
    finally:
        for s in installed:
            signal.signal(s, signal.SIG_DFL)


def fsync_path(path: str, *, folder: bool = False) -> None:
    """Flush the file (or with ``folder``, the folder's entries) at ``path``
    to disk."""
    fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if folder else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, write, *, by_name: bool = False, fsync: bool = True) -> None:
    """Write through ``write(fileobj)`` into a temporary file in the target's
    folder, fsync, and rename it over ``path``: readers (including live
    memory maps of the old file) see the old file or the new one, never a
    partial one, and an input file is never written in place.  An exception,
    Ctrl-C, SIGTERM or SIGHUP during the write removes the temporary file
    (only SIGKILL or a crash of the machine can leave a ``.grit-*.tmp``).

    ``by_name``: ``write(path)`` opens the file itself, at a name no file
    has yet, in a folder of its own (``mkdtemp``: no other user can put a
    file there).  Opening an existing file with truncation, even an empty
    one, marks it on ext4 to have all its blocks allocated and its pages
    sent to the disk when it is closed (``auto_da_alloc``): about 0.8 s of
    system time at the close of a 2 GB GGUF.  ``fsync=False``: the file is
    left in the page cache (a caller that syncs a whole folder itself)."""
    with _unwind_on_termination():
        _atomic_write(path, write, by_name, fsync)


def _atomic_write(path: str, write, by_name: bool, fsync: bool = True) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise GritUsageError(f"cannot save to {path!r}: it is a directory; name a file in it")
    if not os.path.isdir(folder):
        raise GritUsageError(f"cannot save to {path!r}: the folder {folder!r} does not exist")
    if by_name:
        own = tempfile.mkdtemp(prefix=".grit-", suffix=".tmp", dir=folder)
        tmp = os.path.join(own, "file")
    else:
        own = None
        fd, tmp = tempfile.mkstemp(prefix=".grit-", suffix=".tmp", dir=folder)
    try:
        if by_name:                      # the writer opens the file itself
            write(tmp)
            if fsync:
                fsync_path(tmp)
        else:
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
                if fsync:
                    os.fsync(f.fileno())
        # mkstemp makes 0600 files: give the result the mode a plain open() would
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        if own is not None:
            shutil.rmtree(own, ignore_errors=True)
