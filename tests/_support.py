"""Assertions and loaders shared by several test files."""
import importlib.util
from pathlib import Path

import grit

ROOT = Path(__file__).resolve().parents[1]


def load_reference(name: str = "grit_spec_reference"):
    """spec/reference.py as a module (it is a standalone script, not part of
    the package: each caller gets its own instance, so registrations made by
    one test file's copy never leak into another's)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "spec" / "reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def assert_same_array(a, b):
    """b is a GritArray with a's descriptor bytes (note included), shape, plane
    bytes, gid and digest."""
    assert isinstance(b, grit.GritArray)
    assert a.descriptor.to_bytes() == b.descriptor.to_bytes()
    assert a.shape == b.shape
    assert [bytes(p) for p in a.planes] == [bytes(p) for p in b.planes]
    assert a.gid == b.gid and a.digest == b.digest


def assert_same_bits(a, b):
    """Two float32 arrays of one shape with identical bit patterns (NaNs and
    signed zeros included); the message names the first differing elements."""
    import numpy as np
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
    ua, ub = a.view(np.uint32).reshape(-1), b.view(np.uint32).reshape(-1)
    bad = np.flatnonzero(ua != ub)
    assert bad.size == 0, (f"{bad.size} elements differ, first at {bad[:8].tolist()}: "
                           f"{[hex(v) for v in ua[bad[:8]]]} vs {[hex(v) for v in ub[bad[:8]]]}")


def write_gguf(path, tensors, arch: str = "llama", kv=(), alignment=None) -> str:
    """A GGUF file written by gguf-py's GGUFWriter: ``tensors`` is
    ``{name: (array, raw ggml type or None)}`` in order, ``kv`` (key, value,
    value type, sub type) entries, ``alignment`` a custom data alignment.
    Returns the path as a str."""
    import gguf  # noqa: PLC0415 - only the GGUF tests need it
    w = gguf.GGUFWriter(str(path), arch)
    if alignment:
        w.add_custom_alignment(alignment)
    for k, v, vt, sub in kv:
        w.add_key_value(k, v, vt, sub)
    for name, (data, raw) in tensors.items():
        w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def raw_tensors(path) -> dict:
    """{name: (dtype, shape, bytes)} of a safetensors file, read from its
    header by the format's own definition (safetensors.numpy has no FP8
    dtypes)."""
    import json
    import struct
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        body = f.read()
    return {k: (v["dtype"], tuple(v["shape"]), body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}


def given_back(monkeypatch):
    """A function of a local file's path giving, from now on, which of its
    bytes were handed to its map's ``release`` (MADV_DONTNEED): a bool
    array of the file's size (every release still done)."""
    import os

    import numpy as np

    from grit.io.source import LocalFile
    spans: dict[str, list[tuple[int, int]]] = {}
    plain_release = LocalFile.release

    def release(self, buf):
        off = self.locate(buf)
        if off is not None:
            spans.setdefault(os.path.realpath(self.name), []).append(
                (off, off + memoryview(buf).nbytes))
        plain_release(self, buf)
    monkeypatch.setattr(LocalFile, "release", release)

    def back(path) -> "np.ndarray":
        b = np.zeros(os.path.getsize(path), bool)
        for a, e in spans.get(os.path.realpath(path), ()):
            b[a:e] = True
        return b
    return back


def recorded(monkeypatch, module, name: str, what=None) -> list:
    """``module.name`` replaced, for the test, by a wrapper that records
    ``what(*args, **kwargs)`` of each call (by default its first argument)
    and calls through; returns the record."""
    seen: list = []
    real = getattr(module, name)

    def wrapper(*a, **kw):
        seen.append(a[0] if what is None else what(*a, **kw))
        return real(*a, **kw)
    monkeypatch.setattr(module, name, wrapper)
    return seen


def then(monkeypatch, module, name: str, after) -> None:
    """``module.name`` replaced, for the test, by a wrapper that calls
    through and then ``after(*args)`` (a file written, then changed)."""
    real = getattr(module, name)

    def wrapper(*a, **kw):
        got = real(*a, **kw)
        after(*a)
        return got
    monkeypatch.setattr(module, name, wrapper)


def assert_progress(calls: list, file: str, *, steps: int = 3) -> None:
    """``calls``, the ``progress(file, done, total)`` calls of a conversion,
    name ``file`` and count its bytes up to one total, never back, through at
    least ``steps`` values between 0 and the total, and end there."""
    assert calls and all(c[0] == file and len(c) == 3 for c in calls), calls[:3]
    totals = {c[2] for c in calls}
    assert len(totals) == 1 and totals.pop() > 0
    done = [c[1] for c in calls]
    assert done == sorted(done) and done[0] >= 0 and done[-1] == calls[-1][2]
    assert len({d for d in done if 0 < d < calls[-1][2]}) >= steps, done
