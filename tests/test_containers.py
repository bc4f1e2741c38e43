"""grit.io.containers: one record per container, the only place that chooses
between them — grit.load, grit.save, scan's opening of files and explain ask
the records."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from safetensors.numpy import save_file

import grit
from grit.io import containers as C


def test_every_record_answers_for_its_own_files(tmp_path):
    st = tmp_path / "a.safetensors"
    save_file({"w": np.ones((2, 2), np.float32)}, str(st))
    gg = tmp_path / "a.gguf"
    grit.save(str(gg), {"w": np.ones((2, 2), np.float32)})
    for path, rec in ((st, C.SAFETENSORS), (gg, C.GGUF)):
        head = path.read_bytes()[:C.HEAD_BYTES]
        assert C.sniffed(head, path.stat().st_size) is rec
        assert C.by_suffix(str(path)) is rec and C.named(rec.name) is rec
        assert grit.io.sniff(str(path)) == rec.name
        # fewer bytes than a record needs: it says no, never raises
        assert not rec.sniff(head[:rec.sniff_bytes - 1], path.stat().st_size)
    assert C.HEAD_BYTES == max(c.sniff_bytes for c in C.CONTAINERS)
    with pytest.raises(grit.GritUsageError, match="format must be one of"):
        grit.save(str(tmp_path / "x"), {}, format="npz")


def test_a_container_added_as_one_record_is_what_load_and_save_use(tmp_path, monkeypatch):
    """A toy container (numpy's .npy of one float array, magic b'\\x93NUMPY')
    added as one record: grit.load and grit.save reach it through the
    records alone."""
    saved = {}

    def save(path, tensors, metadata=None, **options):
        [(name, a)] = tensors.items()
        saved["name"] = name
        np.save(path, np.asarray(a))

    npy = C.Container("npy", (".npy",), lambda head, size: head[:6] == b"\x93NUMPY", 6,
                      read=lambda path: None, read_source=lambda src, path=None: None,
                      load=lambda path, **o: {"w": np.load(path)}, save=save,
                      source_of=lambda contents: None)
    monkeypatch.setattr(C, "CONTAINERS", C.CONTAINERS + (npy,))
    p = str(tmp_path / "x.npy")
    grit.save(p, {"w": np.arange(3, dtype=np.float32)})
    assert saved == {"name": "w"}
    np.testing.assert_array_equal(grit.load(p)["w"], np.arange(3, dtype=np.float32))
    assert dataclasses.is_dataclass(npy) and npy.conventions is False
