"""Converted ggml types load as deferred arrays (GritArray.deferred): loading
and a level-1 scan build no plane; the planes are built once, on first use,
and equal the eager conversion's; digest, equality, pickling and decode are
the eager array's; grit.save writes the file's own blocks back (the same
bytes the general path rebuilds from the planes)."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import grit
from grit.codec.decode import decode_canonical
from grit.errors import GritSizeError, GritUsageError
from grit.ggml import CONVERTED, Blocks
from grit.io import gguf as G
from grit.io.gguf_writer import native_type
from _support import write_gguf

gguf = pytest.importorskip("gguf")
T = gguf.GGMLQuantizationType
RNG = np.random.default_rng(20261202)
SHAPE = (3, 512)


def blocks(name, shape=SHAPE):
    t = T[name]
    bs, ts = gguf.GGML_QUANT_SIZES[t]
    n = int(np.prod(shape)) // bs
    b = RNG.integers(0, 256, (n, ts), dtype=np.uint8)
    if name == "Q8_K":          # the bsums ggml derives from the codes
        b[:, 0:4] = RNG.uniform(0.01, 1, (n, 1)).astype("<f4").view(np.uint8)
        q = b[:, 4:260].view(np.int8).reshape(n, 16, 16).astype(np.int16).sum(axis=2)
        b[:, 260:292] = q.astype("<i2").view(np.uint8)
    return b.reshape(*shape[:-1], shape[-1] // bs * ts)


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("deferred") / "converted.gguf"
    write_gguf(path, {name: (blocks(name), T[name]) for name in CONVERTED})
    return path


@pytest.fixture
def counted(monkeypatch):
    """Count the conversions (the only place a converted type's planes are built)."""
    calls: list[str] = []
    for name, t in CONVERTED.items():
        monkeypatch.setattr(t, "read", lambda b, _f=t.read, _n=name: calls.append(_n) or _f(b))
    return calls


def test_load_and_level_one_scan_build_no_plane(gguf_path, counted):
    arrays = grit.load(str(gguf_path))
    assert set(arrays) == set(CONVERTED)
    for name, a in arrays.items():
        assert isinstance(a.source, Blocks) and a.source.type_name == name
        sizes = a.plane_bytes
        assert a.nbytes == sum(sizes) and repr(a) and a.gid
        grit.check(a.descriptor, a.shape, sizes, level=1)
    from grit.scan import scan
    scan([str(gguf_path)])
    assert counted == []


def test_planes_are_built_once_and_equal_the_eager_conversion(gguf_path, counted):
    arrays = grit.load(str(gguf_path))
    for name, a in arrays.items():
        b = blocks_of(gguf_path, name)
        eager = G.converted(name, b, a.shape)
        counted.clear()
        p1 = a.planes
        p2 = a.planes
        assert counted == [name] and p1 is p2
        assert a.plane_bytes == eager.plane_bytes
        assert a == eager and a.digest == eager.digest and hash(a) == hash(eager)
        c = pickle.loads(pickle.dumps(a))
        assert c == eager and c.source is None
        np.testing.assert_array_equal(decode_canonical(a).view(np.uint32),
                                      decode_canonical(eager).view(np.uint32))


def blocks_of(path, name):
    r = gguf.GGUFReader(str(path))
    t = next(t for t in r.tensors if t.name == name)
    return np.asarray(t.data).reshape(-1, gguf.GGML_QUANT_SIZES[t.tensor_type][1])


def test_save_writes_the_files_blocks_the_general_path_rebuilds_the_same(gguf_path, tmp_path):
    arrays = grit.load(str(gguf_path))
    for name, a in arrays.items():
        fast = native_type(a)
        general = native_type(G.converted(name, blocks_of(gguf_path, name), a.shape))
        assert fast is not None and general is not None
        assert fast[0] == general[0] == name
        assert fast[1].tobytes() == general[1].tobytes() == blocks_of(gguf_path, name).tobytes()
    out = tmp_path / "copy.gguf"
    grit.save(str(out), arrays)
    for name in CONVERTED:       # the copy adds GRIT's KV annotations; the tensors are the same
        assert blocks_of(out, name).tobytes() == blocks_of(gguf_path, name).tobytes()


def test_q8_k_bsums_of_the_file_are_kept_even_when_they_are_not_the_codes_sums(tmp_path):
    b = blocks("Q8_K")
    b.reshape(-1, 292)[:, 260:292] = 0x5A           # bsums ggml would not derive
    path = tmp_path / "q8k.gguf"
    write_gguf(path, {"x": (b, T.Q8_K)})
    a = grit.load(str(path))["x"]
    assert native_type(a)[1].tobytes() == b.tobytes()
    # the general path, from the planes alone, derives them from the codes
    eager = G.converted("Q8_K", b.reshape(-1, 292), a.shape)
    assert native_type(eager)[1].tobytes() != b.tobytes()


def test_a_build_of_the_wrong_size_or_shape_is_a_typed_error():
    d = grit.Grade.parse(CONVERTED["Q4_0"].grade_text).descriptor(group_axis=1)
    good = G.converted("Q4_0", blocks("Q4_0", (2, 64)).reshape(-1, 18), (2, 64))
    a = grit.GritArray.deferred(d, (2, 64), lambda: good.planes)
    assert a == good
    short = grit.GritArray.deferred(d, (2, 64), lambda: (good.planes[0][:-1], *good.planes[1:]))
    with pytest.raises(GritSizeError):
        short.planes
    three = grit.GritArray.deferred(d, (2, 64), lambda: good.planes[:3])
    with pytest.raises(GritUsageError):
        three.planes
    with pytest.raises(GritUsageError):
        grit.GritArray.deferred(d, (2, 64), good.planes)
    with pytest.raises(GritSizeError):          # the shape is checked before any build
        grit.GritArray.deferred(d, (2, 60), lambda: good.planes)


def test_leading_rows_convert_only_their_blocks_and_equal_a_slice(gguf_path, counted):
    arrays = grit.load(str(gguf_path))
    for name, a in arrays.items():
        for rows in (1, 2, 3, 7):
            sub = G.leading(a, rows)
            r = min(rows, a.shape[0])
            assert sub.shape == (r, *a.shape[1:])
            assert sub == a[:r], (name, rows)          # the slicing law on the whole planes
    assert G.leading(G.converted("Q4_0", blocks("Q4_0").reshape(-1, 18), SHAPE), 1) is None


def test_deep_scan_of_converted_tensors_probes_the_same_rows_either_way(gguf_path, monkeypatch):
    """--deep converts only the probed leading rows of a converted tensor; the
    findings are those of building every plane."""
    from grit.scan import deep as DP
    from grit.scan import scan
    def findings():
        return sorted((f.code, f.tensor or "", f.message) for f in
                      scan([str(gguf_path)], deep=True).findings)
    fast = findings()
    monkeypatch.setattr(DP, "_leading", lambda t, a: None)
    assert findings() == fast


def test_transient_planes_build_for_the_call_only(gguf_path, counted):
    a = grit.load(str(gguf_path))["Q5_0"]
    t1, t2 = a.transient_planes(), a.transient_planes()
    assert counted == ["Q5_0", "Q5_0"] and t1 == t2
    p = a.planes
    assert counted == ["Q5_0"] * 3 and a.transient_planes() is p and p == t1


def test_decode_reads_the_blocks_in_place_and_equals_the_general_path(gguf_path, counted,
                                                                      monkeypatch):
    from grit import native
    if grit.ggml.type_kernel("Q4_0", (1, 32)) is None:
        pytest.skip("grit._kernels not built")
    arrays = grit.load(str(gguf_path))
    calls = []
    real = native.decode_ggml
    monkeypatch.setattr(native, "decode_ggml", lambda *a: calls.append(a[0]) or real(*a))
    fast = {n: grit.decode(a) for n, a in arrays.items()}
    assert counted == [] and sorted(calls) == sorted(t.kernel for t in CONVERTED.values())      # no plane built
    for name, a in arrays.items():
        general = decode_canonical(G.converted(name, blocks_of(gguf_path, name), a.shape))
        np.testing.assert_array_equal(fast[name].view(np.uint32), general.view(np.uint32))
    monkeypatch.setattr(native, "NATIVE", False)                  # kernels off: the general path
    calls.clear()
    for name, a in grit.load(str(gguf_path)).items():
        np.testing.assert_array_equal(grit.decode(a).view(np.uint32), fast[name].view(np.uint32))
    assert calls == []
