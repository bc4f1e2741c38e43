"""grit._files.atomic_write: a writer that opens the file by name gets a
name no file has yet, in a folder of its own, so it never truncates an
existing file (which on ext4 makes the close allocate every block and send
the pages to the disk); ``fsync=False`` leaves the file to the page cache."""
from __future__ import annotations

import os
import stat

import numpy as np
import pytest

import grit
from grit import _files


def _fsyncs(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def counted(fd):
        calls.append(fd)
        return real(fd)
    monkeypatch.setattr(os, "fsync", counted)
    return calls


@pytest.mark.parametrize("fsync", [True, False])
def test_a_writer_by_name_opens_a_new_file_in_a_private_folder(tmp_path, monkeypatch, fsync):
    calls = _fsyncs(monkeypatch)
    seen = {}

    def write(path):
        seen["exists"] = os.path.lexists(path)
        seen["mode"] = stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode)
        seen["folder"] = os.path.dirname(path)
        with open(path, "wb") as f:          # as gguf-py's GGUFWriter opens it
            f.write(b"payload")
    target = tmp_path / "out.gguf"
    _files.atomic_write(str(target), write, by_name=True, fsync=fsync)
    assert seen["exists"] is False                        # nothing there to truncate
    assert seen["mode"] == 0o700                          # no other user's file there
    assert os.path.dirname(seen["folder"]) == str(tmp_path)
    assert target.read_bytes() == b"payload"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.gguf"]   # the folder is gone
    assert bool(calls) == fsync
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_files._umask()


def test_a_failed_writer_by_name_leaves_nothing(tmp_path):
    def write(path):
        with open(path, "wb") as f:
            f.write(b"half")
        raise OSError("disk full")
    with pytest.raises(OSError, match="disk full"):
        _files.atomic_write(str(tmp_path / "out.gguf"), write, by_name=True)
    assert list(tmp_path.iterdir()) == []


def test_a_gguf_save_writes_by_name_and_fsyncs_unless_told(tmp_path, monkeypatch):
    calls = _fsyncs(monkeypatch)
    a = np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64)
    grit.save(str(tmp_path / "a.gguf"), {"w": a})
    assert calls                                          # grit.save: durable
    n = len(calls)
    from grit.io.gguf_writer import save_gguf
    save_gguf(str(tmp_path / "b.gguf"), {"w": a}, fsync=False)
    assert len(calls) == n
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gguf", "b.gguf"]
