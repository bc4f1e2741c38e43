"""Writing files safely: every file grit writes goes through here."""
from __future__ import annotations

import os
import tempfile

__all__ = ["atomic_write"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str, write, *, by_name: bool = False) -> None:
    """Write through ``write(fileobj)`` into a temporary file in the target's
    folder, fsync, and rename it over ``path``: readers (including live
    memory maps of the old file) see the old file or the new one, never a
    partial one, and an input file is never written in place."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".grit-", suffix=".tmp", dir=folder)
    try:
        if by_name:                      # the writer opens the file itself
            os.close(fd)
            write(tmp)
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        else:
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
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
