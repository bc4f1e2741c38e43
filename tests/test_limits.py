"""The readers' count limits (grit.io.source.LIMITS): a GGUF with more KV
entries than GRIT_MAX_GGUF_KV, or a file with more tensors than
GRIT_MAX_TENSORS, is an S808 finding (grit.load: LimitError, a GritError)
decided before the entries are walked; at the limit the file reads as
before.  The files are written byte by byte from the format definitions
(GGUF v3: count, key, type, value; safetensors: length, JSON header)."""
from __future__ import annotations

import json
import struct
import time

import pytest

import grit
from grit.io.source import LimitError
from grit.scan import scan


def _gguf_kv(path, n: int) -> None:
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, n))
        for i in range(n):
            k = b"k%07d" % i
            f.write(struct.pack("<Q", len(k)) + k + struct.pack("<IB", 0, 1))


def _gguf_tensors(path, n: int) -> None:
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, n, 0))
        for i in range(n):
            k = b"t%07d" % i
            f.write(struct.pack("<Q", len(k)) + k + struct.pack("<IQIQ", 1, 8, 0, 32 * i))
        f.write(b"\0" * (-f.tell() % 32) + b"\0" * (32 * n))


def _st(path, n: int) -> None:
    head = json.dumps({f"t{i}": {"dtype": "F32", "shape": [1],
                                 "data_offsets": [4 * i, 4 * i + 4]} for i in range(n)}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"\0" * (4 * n))


def test_a_gguf_of_100k_kv_entries_is_s808_at_once(tmp_path):
    p = tmp_path / "kv.gguf"
    _gguf_kv(p, 100_000)                              # past the default 65536
    t = time.monotonic()
    [f] = scan([str(p)], cache=False).findings
    assert f.code == "S808" and "GRIT_MAX_GGUF_KV" in f.message, f.message
    assert time.monotonic() - t < 5
    with pytest.raises(LimitError):
        grit.load(p)


@pytest.mark.parametrize("make,ext", [(_gguf_kv, ".gguf"), (_gguf_tensors, ".gguf"),
                                      (_st, ".safetensors")])
def test_limits_are_configurable_and_exact(tmp_path, monkeypatch, make, ext):
    var = "GRIT_MAX_GGUF_KV" if make is _gguf_kv else "GRIT_MAX_TENSORS"
    monkeypatch.setenv(var, "10")
    p = tmp_path / f"ten{ext}"
    make(p, 10)
    assert "S808" not in {f.code for f in scan([str(p)], cache=False).findings}
    make(p, 11)
    assert "S808" in {f.code for f in scan([str(p)], cache=False).findings}
    with pytest.raises(grit.GritError):
        grit.load(p)


def test_a_bad_limit_is_a_usage_error(monkeypatch):
    from grit.io.source import limit  # noqa: PLC0415
    monkeypatch.setenv("GRIT_MAX_TENSORS", "lots")
    with pytest.raises(grit.GritUsageError, match="GRIT_MAX_TENSORS"):
        limit("tensors")
