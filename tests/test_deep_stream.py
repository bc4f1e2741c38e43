"""scan --deep streams planes: the streamed digest is grit.fingerprint.digest,
the leading-rows sample of a large tensor decodes as its leading rows, and
the findings are those of the one-shot check (the general path, the oracle)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import grit
from grit.boundary import check
from grit.errors import GritDigestError, GritUsageError
from grit.fingerprint import DigestStream, digest
from grit.io.gguf import converted
from grit.io.source import Span, open_source
from grit.scan import deep as D
from grit.scan import scan

CHUNK = 4096
SIZES = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 3 * CHUNK + 17]


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(D, "CHUNK", CHUNK)


@pytest.mark.parametrize("sizes", [(a, b, c, d) for a, b, c, d in
                                   [(s, 0, 0, 0) for s in SIZES]
                                   + [(SIZES[i], SIZES[-1 - i], SIZES[(i + 2) % 7],
                                       SIZES[(i + 3) % 7]) for i in range(7)]])
def test_streamed_digest_equals_one_shot(tmp_path, small_chunks, sizes):
    rng = np.random.default_rng(sum(sizes))
    planes = [rng.integers(0, 256, n, np.uint8).tobytes() for n in sizes]
    want = digest(planes)
    # in memory, chunked
    assert D.stream_digest(planes) == want
    # views of a file, read through its byte source at offsets off the page grid
    p = tmp_path / "planes.bin"
    p.write_bytes(b"x" * 13 + b"".join(planes))
    with open_source(p) as src:
        offs = np.cumsum([13] + list(sizes))
        views = [src.view(int(o), n) for o, n in zip(offs, sizes)]
        seen: list[int] = []
        assert D.stream_digest(views, src, seen.append) == want
        assert all(n == 0 or src.locate(v) == o for v, o, n in zip(views, offs, sizes))
        # the progress feed: every byte once, in pieces of at most one chunk
        assert sum(seen) == sum(sizes) and all(0 < k <= CHUNK for k in seen)
        # spans of the source (a source without views): the same digest, read in chunks
        spans = [Span(src, int(o), n) for o, n in zip(offs, sizes)]
        assert D.stream_digest(spans) == want


@pytest.mark.parametrize("cuts", [[1], [7, 1000], [4096] * 3, [1] * 50])
def test_digest_stream_any_chunking(cuts):
    data = os.urandom(sum(cuts))
    want = digest([data, b"", data[:5], b"abc"])
    ds = DigestStream()
    ds.plane(len(data))
    pos = 0
    for c in cuts:
        ds.update(data[pos:pos + c])
        pos += c
    for p in (b"", data[:5], b"abc"):
        ds.plane(len(p))
        ds.update(p)
    assert ds.digest() == want


def test_digest_stream_misuse_is_a_usage_error():
    ds = DigestStream()
    with pytest.raises(GritUsageError):
        ds.update(b"x")
    ds.plane(2)
    with pytest.raises(GritUsageError):
        ds.update(b"abc")
    with pytest.raises(GritUsageError):
        ds.plane(0)                  # plane 0 still needs 2 bytes
    with pytest.raises(GritUsageError):
        ds.digest()
    ds.update(b"ab")
    for _ in range(3):
        ds.plane(0)
    with pytest.raises(GritUsageError):
        ds.plane(0)


def _q8_0(rows: int, cols: int, seed: int = 0) -> grit.GritArray:
    rng = np.random.default_rng(seed)
    b = rng.integers(0, 256, (rows * cols // 32, 34), np.uint8)
    b[:, 1] = 0x3C                   # d = 1.0 (binary16 0x3C00, little-endian)
    b[:, 0] = 0
    return converted("Q8_0", b.reshape(-1), (rows, cols))


@pytest.mark.parametrize("make", [
    lambda: _q8_0(512, 256),
    lambda: grit.encode(np.random.default_rng(1).standard_normal((512, 256), np.float32),
                        grit.GRADE_MXFP4),
    lambda: grit.encode(np.random.default_rng(2).standard_normal((512, 256), np.float32),
                        grit.GRADE_NVF4),
    lambda: grit.encode(np.random.default_rng(3).standard_normal((512, 256), np.float32),
                        grit.GRADE_Q4KS),
])
def test_the_leading_rows_sample_decodes_as_the_leading_rows(monkeypatch, make):
    a = make()
    monkeypatch.setattr(D, "WHOLE", a.nbytes // 5)
    t = D.Tensor("f", "f", "t", a.descriptor, a.shape, ok=True)
    mvs = [D._mv(p) for p in a.planes]
    pre = D._prefix(t, mvs, a.nbytes // 5)
    assert pre is not None
    shape, sizes = pre
    assert sum(sizes) <= a.nbytes // 5 and shape[0] < a.shape[0]
    sub = grit.GritArray(a.descriptor, shape,
                         [bytes(m[:n]) for m, n in zip(mvs, sizes)])
    np.testing.assert_array_equal(grit.decode(sub).view(np.uint32),
                                  grit.decode(a)[:shape[0]].view(np.uint32))


def _file(tmp_path, arrays, digests=True, corrupt=None):
    p = tmp_path / "m.safetensors"
    meta = {f"grit.digest.{n}": grit.base32_encode(a.digest) for n, a in arrays.items()} \
        if digests else None
    grit.save(p, arrays, meta)
    if corrupt is not None:
        f = grit.io.safetensors.read(p)
        off, n = f.span(corrupt)
        raw = bytearray(p.read_bytes())
        raw[off + n // 2] ^= 0xFF
        p.write_bytes(bytes(raw))
    return str(p)


def _deep_findings(path):
    return sorted((f.code, f.tensor, f.message) for f in scan([path], deep=True).findings
                  if f.category == "deep")


def test_a_corrupted_plane_is_the_one_shot_checks_digest_mismatch(tmp_path, small_chunks):
    rng = np.random.default_rng(5)
    arrays = {f"w{i}": grit.encode(rng.standard_normal((64, 256), np.float32), g)
              for i, g in enumerate([grit.GRADE_MXFP4, grit.GRADE_NVF4, grit.GRADE_Q4KS])}
    p = _file(tmp_path, arrays, corrupt="w1.grit.data")
    got = scan([p], deep=True)
    bad = [f for f in got.findings if f.code == "S501"]
    assert [f.tensor for f in bad] == ["w1"]
    # the general path: grit.check on the whole (corrupted) planes
    loaded = grit.load(p)
    with pytest.raises(GritDigestError) as e:
        check(loaded["w1"].descriptor, loaded["w1"].shape, loaded["w1"].planes, level=2,
              expected_digest=arrays["w1"].digest)
    assert bad[0].message == e.value.detail.message
    assert bad[0].detail["expected"] == e.value.detail.expected
    assert bad[0].detail["actual"] == e.value.detail.actual


def test_findings_do_not_depend_on_the_chunk_size(tmp_path, monkeypatch):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((128, 256), np.float32)
    x[::7] = 0.0
    arrays = {"a": grit.encode(x, grit.GRADE_MXFP4), "b": grit.encode(x, grit.GRADE_Q4KS)}
    p = _file(tmp_path, arrays, corrupt="b.grit.data")
    runs = []
    for chunk in (4096, 1 << 22):
        monkeypatch.setattr(D, "CHUNK", chunk)
        runs.append(_deep_findings(p))
    assert runs[0] == runs[1] and any(c == "S501" for c, _, _ in runs[0])


def _gguf_q8_0(path, rows: int, cols: int, *, nan_scales=False, corrupt=False):
    """A GGUF of one Q8_0 tensor written by gguf-py, its grit.digest KV entry
    recorded from the bytes written (before any corruption)."""
    import gguf
    b = np.random.default_rng(9).integers(0, 256, (rows * cols // 32, 34), np.uint8)
    b[:, 0], b[:, 1] = (0x00, 0x7E) if nan_scales else (0x00, 0x3C)   # NaN / 1.0
    raw = b.reshape(-1)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_string("grit.digest.w", grit.base32_encode(digest([raw, b"", b"", b""])))
    w.add_tensor("w", b.reshape(rows, cols // 32 * 34), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if corrupt:
        data = bytearray(path.read_bytes())
        data[-1000] ^= 0x40
        path.write_bytes(bytes(data))
    return str(path)


def test_gguf_digest_mismatch_through_the_byte_source(tmp_path, small_chunks):
    p = _gguf_q8_0(tmp_path / "c.gguf", 64, 1024, corrupt=True)
    bad = [f for f in scan([p], deep=True).findings if f.code == "S501"]
    a = grit.load(p)["w"]
    with pytest.raises(GritDigestError) as e:
        check(a.descriptor, a.shape, a.planes, level=2,
              expected_digest=grit.base32_decode(
                  grit.io.gguf_file.read_gguf(p).value("grit.digest.w")))
    assert [f.tensor for f in bad] == ["w"]
    assert bad[0].detail["actual"] == e.value.detail.actual
    assert _deep_findings(_gguf_q8_0(tmp_path / "ok.gguf", 64, 1024)) == []


def test_the_probes_on_the_leading_rows_see_what_the_whole_tensor_shows(tmp_path,
                                                                         monkeypatch):
    p = _gguf_q8_0(tmp_path / "nan.gguf", 256, 1024, nan_scales=True)
    whole = _deep_findings(p)
    assert [c for c, _, _ in whole] == ["S502"]
    monkeypatch.setattr(D, "PROBE", 32 * 1024)          # the tensor is 278 528 bytes
    assert _deep_findings(p) == whole


def _sparse_file(tmp_path, bad_quad: int | None):
    x = np.random.default_rng(11).standard_normal((64, 128)).astype(np.float32)
    x.reshape(-1, 4)[:, 1:3] = 0                       # 2:4, indices (0, 3): aux 0xCC
    a = grit.encode(x, grit.GRADE_I8S24)
    p = tmp_path / f"sp{bad_quad}.safetensors"
    grit.save(p, {"w": a})
    if bad_quad is not None:                           # one nibble per quad: (3, 0)
        f = grit.io.safetensors.read(p)
        off, _ = f.span("w.grit.aux")
        raw = bytearray(p.read_bytes())
        i = off + bad_quad // 2
        raw[i] = (raw[i] & 0xF0) | 0x3 if bad_quad % 2 == 0 else (raw[i] & 0x0F) | 0x30
        p.write_bytes(bytes(raw))
    return str(p)


def test_sparse_metadata_order_whole_and_on_the_leading_rows(tmp_path, monkeypatch):
    # quad 2 sits in row 0, quad 2000 in row 62 (32 quads a row)
    early, late, ok = (_sparse_file(tmp_path, q) for q in (2, 2000, None))
    for p in (early, late):
        bad = [f for f in scan([p], deep=True).findings if f.code == "S501"]
        a = grit.load(p, strict=False)["w"]
        det = grit.diagnose(a.descriptor, a.shape, a.planes, level=2)
        assert [f.message for f in bad] == [det.message]
    assert _deep_findings(ok) == []
    # bounds below the tensor (the probes' below the order's, as the defaults are):
    # the order is checked on its leading rows, and said so
    monkeypatch.setattr(D, "WHOLE", 2048)
    monkeypatch.setattr(D, "PROBE", 1024)
    assert [c for c, _, _ in _deep_findings(early)] == ["S501"]
    got = _deep_findings(late)
    assert [c for c, _, _ in got] == ["S504"] and "rows only" in got[0][2]
    assert "of 64 rows" in got[0][2]


def test_the_probe_sample_fits_inside_the_order_sample():
    """The probes' check re-reads the metadata order on its sample: it must be
    a part of what the order check read (else one tensor gets S501 and S504)."""
    assert D.CHUNK > 0 and D.PROBE <= D.WHOLE
