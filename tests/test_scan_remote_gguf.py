"""Remote GGUF files: the header walk over a byte source without a view
(windows read through ``src.read``) is the same walk as over a local file's
view — the same fields, tensor infos and problems on every GGUF these tests
can produce — and ``grit scan`` of an http(s) GGUF (a real server on
loopback) reports what the local scan of the same bytes reports, reading the
header windows alone at level 1, nothing but the size probe on a warm-cache
rescan, and each tensor once under --deep; bad servers and lying headers are
findings, in bounded time."""
from __future__ import annotations

import os
import struct
import time

import numpy as np
import pytest

import grit
from grit.io import gguf as G
from grit.io import gguf_file as GF
from grit.io.gguf_file import read_gguf, read_source
from grit.io.source import ByteSource, LocalFile
from grit.scan import scan

from _support import write_gguf
from http_server import Server

gguf = pytest.importorskip("gguf")
import test_gguf_file as TG  # noqa: E402 - its writers and hostile headers (needs gguf)

Q = gguf.GGMLQuantizationType
VT = gguf.GGUFValueType
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "corpus", "hostile")
GEMMA = "/root/.cache/grit-real-checkpoint/gemma-3-270m-q4_k_m.gguf"


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("GRIT_CACHE_DIR", str(d))
    return d


class Unviewed(ByteSource):
    """A local file as a byte source without a view (as a remote one is),
    counting reads and the labels they are read with."""

    def __init__(self, path):
        self._f = LocalFile(path)
        self.name, self.size = self._f.name, self._f.size
        self.reads: list[tuple[int, int, str]] = []

    def read(self, offset, length, what="read"):
        self.reads.append((int(offset), int(length), what))
        return super().read(offset, length, what)

    def _readinto(self, offset, mv):
        return self._f._readinto(offset, mv)

    def close(self):
        self._f.close()


# ---------------------------------------------------------------------------
# the one walk: windows give what the view gives


def _problems(f):
    return [(p.kind, p.message, p.tensor, p.facts(), p.lines, p.omitted) for p in f.problems]


def _fields(f):
    out = []
    for k, fl in f.fields.items():
        try:
            v = ("v", TG._bits(fl.value()))
        except ValueError as e:
            v = ("e", str(e))
        out.append((k, fl.type, fl.item_type, fl.count, fl.offset, v))
    return out


def _same_walk(path):
    """read_gguf (the view) and read_source over Unviewed (windows) agree
    on everything; the windowed source read only header windows.  Returns
    both files and the reads of the walk (before any value is decoded)."""
    a = read_gguf(path)
    src = Unviewed(path)
    b = read_source(src, str(path))
    walk = list(src.reads)
    assert (a.version, a.order, a.alignment, a.data_start, a.size) == \
        (b.version, b.order, b.alignment, b.data_start, b.size)
    assert a.tensors == b.tensors and a.names == b.names
    assert _problems(a) == _problems(b)
    assert _fields(a) == _fields(b)
    assert a.buf is not None and b.buf is None and isinstance(b.header, GF.WindowedBytes)
    assert {w for _, _, w in src.reads} <= {GF.WINDOW_READ}
    for off, n, _ in src.reads:
        assert 0 <= off and off + n <= src.size
    return a, b, walk


def _layout_variants(tmp_path):
    """The layout file of tests/test_gguf_file.py, intact and edited as its
    tests edit it: cut in the data and in the tensor infos, a tensor
    overlapping the next, two swapped, one misaligned, an unknown type."""
    out = []
    for k, edit in enumerate(["intact", "cut-last", "cut-data", "cut-info-0", "cut-info-2",
                              "overlap", "swap", "misaligned", "unknown-type", "gap"]):
        d = tmp_path / f"layout{k}"
        d.mkdir()
        p = TG._layout_file(d)
        where, data = TG._where(p)
        if edit == "cut-last":
            os.truncate(p, where[3][4] + 5)
        elif edit == "cut-data":
            os.truncate(p, where[1][4] + 100)
        elif edit == "cut-info-0":
            os.truncate(p, where[0][1] + 11)
        elif edit == "cut-info-2":
            os.truncate(p, where[2][1] + 11)
        elif edit == "overlap":
            TG._poke(p, where[2][3], "<Q", where[1][4] - data + 32)
        elif edit == "swap":
            TG._poke(p, where[1][3], "<Q", where[2][4] - data)
            TG._poke(p, where[2][3], "<Q", where[1][4] - data)
        elif edit == "misaligned":
            TG._poke(p, where[0][3], "<Q", where[0][4] - data + 4)
        elif edit == "unknown-type":
            TG._poke(p, where[1][2], "<I", 9999)
        elif edit == "gap":
            with open(p, "ab") as fh:
                fh.write(b"\0" * 32)
            TG._poke(p, where[3][3], "<Q", where[3][4] - data + 32)
        out.append(p)
    return out


def _long_strings(tmp_path):
    """KV strings and string-array items longer than a window, and length
    prefixes that straddle windows."""
    long = "x" * (GF.MAX_WINDOW + 12345)
    items = [("y" * (i % 37)) for i in range(30_000)] + [long, "", "z" * 70_000, "end"]
    kv = [("t.long", long, VT.STRING, None), ("t.items", items, VT.ARRAY, VT.STRING),
          ("t.after", 7, VT.UINT32, None), ("t.scores", [0.5] * 300_000, VT.ARRAY, VT.FLOAT32)]
    return write_gguf(tmp_path / "long.gguf", {"w": (np.zeros((4, 64), np.float32), None)},
                      kv=kv)


def _corpus(tmp_path):
    files = []
    for big in (False, True):
        for version in (2, 3):
            files.append(TG.write(tmp_path / f"every-{int(big)}-{version}.gguf", big=big,
                                  version=version))
    files.append(TG.write(tmp_path / "vocab.gguf", kvs=[], tensors=[], vocab=TG.VOCAB))
    files.append(TG.write(tmp_path / "vocab-be.gguf", kvs=[], tensors=[], vocab=5000, big=True))
    for i, (name, blob) in enumerate(TG.HOSTILE.items()):
        p = tmp_path / f"hostile{i}.gguf"
        p.write_bytes(blob)
        files.append(p)
    zeros = tmp_path / "zeros.gguf"
    with open(zeros, "wb") as fh:
        fh.write(TG._head(n_tensors=2**62, n_kv=0))
        fh.truncate(2**30)
    files.append(zeros)
    files += _layout_variants(tmp_path)
    files.append(_long_strings(tmp_path))
    files.append(write_gguf(tmp_path / "aligned.gguf",
                            {"a": (np.arange(24, dtype=np.float32), None),
                             "b": (np.zeros((2, 34), np.uint8), Q.Q8_0)}, alignment=256))
    files += [os.path.join(CORPUS, n) for n in sorted(os.listdir(CORPUS))
              if os.path.getsize(os.path.join(CORPUS, n)) >= 24]
    return files


def test_the_windowed_walk_equals_the_view_walk_on_every_gguf(tmp_path):
    files = _corpus(tmp_path)
    assert len(files) > 40
    kinds = set()
    for p in files:
        a, b, _ = _same_walk(p)
        kinds.update(q.kind for q in a.problems)
        if not a.problems:
            kinds.add("clean")
    # the corpus reaches every kind of problem the walk reports
    assert {"clean", GF.K.UNREADABLE, GF.K.PAST_END, GF.K.OVERLAP, GF.K.OFFSET,
            GF.K.MISALIGNED, GF.K.BAD_TENSOR} <= kinds


def test_fixed_size_arrays_are_stepped_over_and_windows_are_bounded(tmp_path):
    p = _long_strings(tmp_path)
    a, b, reads = _same_walk(p)
    scores = a.fields["t.scores"]
    lo, hi = scores.offset + 12, scores.offset + 12 + 4 * 300_000
    # no window lies wholly inside the scores array: its bytes were not asked for
    # (the long string is read at once, the rest in windows of at most MAX_WINDOW)
    for off, n, _ in reads:
        assert not (lo <= off and off + n <= hi), (off, n)
        assert n <= GF.MAX_WINDOW or n == GF.MAX_WINDOW + 12345
    assert sum(n for _, n, _ in reads) < os.path.getsize(p) - 4 * 300_000 + 2 * GF.MAX_WINDOW
    assert b.value("t.after") == 7 and b.value("t.items")[-1] == "end"


def test_the_vocabulary_walk_reads_windows_that_grow(tmp_path):
    p = TG.write(tmp_path / "v.gguf", kvs=[], tensors=[], vocab=TG.VOCAB)
    a, b, reads = _same_walk(p)
    sizes = [n for _, n, _ in reads]
    assert sizes[0] == GF.FIRST_WINDOW and max(sizes) == GF.MAX_WINDOW
    # contiguous windows from 0 to past the header: nothing read twice
    assert [o for o, _, _ in reads] == [sum(sizes[:i]) for i in range(len(sizes))]
    assert sum(sizes) < a.data_start + GF.MAX_WINDOW


@pytest.mark.skipif(not os.path.exists(GEMMA), reason="the gemma GGUF is not cached")
def test_the_windowed_walk_equals_the_view_walk_on_gemma():
    a, b, reads = _same_walk(GEMMA)
    assert len(a.tensors) == 236
    assert sum(n for _, n, _ in reads) < a.data_start + GF.MAX_WINDOW


def test_tensor_reads_fall_back_to_the_source(tmp_path):
    p = TG._layout_file(tmp_path)
    local = G.read(p)
    src = Unviewed(p)
    remote = G.read_source(src, str(p))
    assert src.reads and all(w == GF.WINDOW_READ for _, _, w in src.reads)   # no tensor byte
    assert list(remote.tensors) == list(local.tensors)
    for name, v in local.tensors.items():
        r = remote.tensors[name]
        if isinstance(v, np.ndarray):
            assert isinstance(r, G.Unread)
            x = r.read()
            assert x.dtype == v.dtype and x.shape == v.shape and x.tobytes() == v.tobytes()
        else:
            assert isinstance(r, grit.GritArray)
            assert [bytes(q) for q in r.planes] == [bytes(q) for q in v.planes]
    for t in local.file.tensors:
        assert local.file.data(t).tobytes() == remote.file.data(t).tobytes()
    assert any(w.startswith("tensor ") for _, _, w in src.reads)


# ---------------------------------------------------------------------------
# grit scan over HTTP


def verdicts(rep):
    return sorted((f.code, f.status, f.tensor or "", f.message) for f in rep.findings)


def _q8(rng, rows, cols):
    """Q8_0 blocks with finite scales: (rows, cols / 32 * 34) bytes."""
    b = rng.integers(-127, 128, (rows * cols // 32, 34), dtype=np.int8).view(np.uint8)
    b[:, :2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    return b.reshape(rows, -1)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Local GGUFs and their bytes: clean (a 262k vocabulary and 8 MiB of
    Q8_0), truncated, bad offsets, NVFP4 with its companion, a recorded
    digest (right and stale)."""
    d = tmp_path_factory.mktemp("remote-gguf")
    rng = np.random.default_rng(15)
    big = _q8(rng, 1024, 8192)                                   # 8.5 MiB
    files = {}
    w = gguf.GGUFWriter(str(d / "clean.gguf"), "llama")
    w.add_token_list(TG._vocab())
    w.add_tensor("blk.0.ffn.weight", big, raw_dtype=Q.Q8_0)
    w.add_tensor("blk.0.norm.weight", np.ones(8192, np.float32))
    w.add_tensor("blk.0.attn.weight", _q8(rng, 64, 256), raw_dtype=Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    files["clean"] = (d / "clean.gguf").read_bytes()
    files["cut"] = files["clean"][:-5000]
    where, data = TG._where(d / "clean.gguf")
    offs = bytearray(files["clean"])
    struct.pack_into("<Q", offs, where[2][3], where[1][4] - data + 4)     # misaligned, overlap
    files["offsets"] = bytes(offs)
    blocks = rng.integers(0, 256, (6 * 256 // 64, 36), dtype=np.uint8)
    blocks[:, :4] = rng.integers(0x20, 0x7F, (blocks.shape[0], 4), dtype=np.uint8)
    write_gguf(d / "nvfp4.gguf", {"blk.0.ffn_gate.weight": (blocks.reshape(6, -1), Q.NVFP4),
                                  "blk.0.ffn_gate.scale": (np.array([0.1], np.float32), None)})
    files["nvfp4"] = (d / "nvfp4.gguf").read_bytes()
    small = {"blk.0.w": (_q8(rng, 16, 256), Q.Q8_0), "blk.0.k": (_q8(rng, 16, 256), Q.Q8_0)}
    write_gguf(d / "plain.gguf", small)
    digest = grit.load(str(d / "plain.gguf"))["blk.0.w"].digest
    stale = grit.load(str(d / "plain.gguf"))["blk.0.k"].digest
    for name, dg in (("digest", digest), ("stale", stale)):
        write_gguf(d / f"{name}.gguf", small,
                   kv=[("grit.digest.blk.0.w", grit.base32_encode(dg), VT.STRING, None)])
        files[name] = (d / f"{name}.gguf").read_bytes()
    x = rng.standard_normal((256, 4096)).astype(np.float32)
    with pytest.warns(UserWarning, match="GRIT payload"):
        grit.save(str(d / "annotated.gguf"), {"blk.0.w": grit.encode(x, grit.GRADE_MXFP4)})
    files["annotated"] = (d / "annotated.gguf").read_bytes()
    for k, b in files.items():
        (d / f"{k}.gguf").write_bytes(b)
    return d, files


@pytest.fixture
def served(made):
    d, files = made
    s = Server()
    for k, b in files.items():
        s.files[f"/{k}.gguf"] = b
    yield s, d, files
    s.close()


@pytest.mark.parametrize("name", ["clean", "cut", "offsets", "nvfp4", "digest", "stale",
                                  "annotated"])
@pytest.mark.parametrize("deep", [False, True])
def test_a_remote_gguf_scan_reports_what_the_local_scan_reports(served, name, deep):
    s, d, files = served
    remote = scan([s.url(f"/{name}.gguf")], deep=deep)
    local = scan([str(d / f"{name}.gguf")], deep=deep)
    assert verdicts(remote) == verdicts(local)
    assert remote.exit_code_graded == local.exit_code_graded
    assert [(f.format, f.parsed, f.tensors, f.grit_tensors) for f in remote.files] == \
        [(f.format, f.parsed, f.tensors, f.grit_tensors) for f in local.files]
    codes = {f.code for f in remote.findings}
    if name == "cut":
        assert "S807" in codes
    if name == "offsets":
        assert codes & {"S141", "S142", "S143"}
    if name == "nvfp4":
        assert remote.files[0].grit_tensors == 1 and "S603" not in codes
    if deep and name == "stale":
        assert "S501" in codes
    if deep and name == "digest":
        assert "S501" not in codes
    if name == "annotated":
        assert remote.files[0].grit_tensors == 1 and "S602" not in codes


def test_a_grit_annotated_payload_is_not_read_at_level_one(served):
    s, d, files = served
    s.body_bytes = 0
    rep = scan([s.url("/annotated.gguf")])
    assert rep.files[0].parsed and rep.exit_code_graded == 0
    f = read_gguf(d / "annotated.gguf")
    assert f.data_start < GF.FIRST_WINDOW < len(files["annotated"]) // 8
    assert s.body_bytes <= 1 + 8 + GF.FIRST_WINDOW


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(CORPUS)
                                        if n.endswith(".gguf") or n.startswith("gguf")))
def test_every_hostile_gguf_scans_remotely_as_locally(name):
    with open(os.path.join(CORPUS, name), "rb") as fh:
        blob = fh.read()
    s = Server()
    try:
        s.files["/" + name] = blob
        t0 = time.monotonic()
        remote = scan([s.url("/" + name)], deep=True)
        assert time.monotonic() - t0 < 10
        local = scan([os.path.join(CORPUS, name)], deep=True)
        if not blob:          # an empty file: the server has no byte 0 to send
            assert [f.code for f in remote.findings] == ["S805"]
            return
        assert verdicts(remote) == verdicts(local)
        assert remote.exit_code_graded == local.exit_code_graded
    finally:
        s.close()


def test_level_one_reads_the_header_windows_alone(served):
    s, d, files = served
    s.body_bytes = s.requests = 0
    rep = scan([s.url("/clean.gguf")])
    assert rep.files[0].parsed and rep.files[0].tensors == 3
    f = read_gguf(d / "clean.gguf")
    size = len(files["clean"])
    # the size probe, the first 8 bytes, then windows up to the header's end
    assert f.data_start <= s.body_bytes <= 1 + 8 + f.data_start + GF.MAX_WINDOW
    assert s.body_bytes < size / 2 and s.requests <= 2 + 2 + f.data_start // GF.MAX_WINDOW + 8
    # a warm cache: the size probe's one byte, nothing else
    s.body_bytes = s.requests = 0
    again = scan([s.url("/clean.gguf")])
    assert verdicts(again) == verdicts(rep)
    assert s.body_bytes <= 1 and s.requests == 1


def test_deep_reads_each_tensor_at_most_once(served):
    """A tensor with a recorded digest is read whole, once; one without is
    read only as far as the probes' leading rows."""
    s, d, files = served
    for name in ("clean", "digest"):
        s.body_bytes = 0
        scan([s.url(f"/{name}.gguf")], deep=True, cache=False)
        f = read_gguf(d / f"{name}.gguf")
        grit_bytes = sum(t.nbytes for t in f.tensors if t.ggml_type == "Q8_0")
        assert s.body_bytes <= f.data_start + GF.MAX_WINDOW + grit_bytes + 9
        if name == "digest":               # blk.0.w's digest is verified: all its bytes
            w = next(t for t in f.tensors if t.name == "blk.0.w")
            assert s.body_bytes >= f.data_start + w.nbytes
        else:                              # 8.5 MiB of Q8_0 without digests: probed only
            assert s.body_bytes < grit_bytes


def test_a_misnamed_remote_file_is_s131_as_a_local_one(served, tmp_path):
    s, d, files = served
    s.files["/clean.safetensors"] = files["nvfp4"]
    (tmp_path / "clean.safetensors").write_bytes(files["nvfp4"])
    x = grit.encode(np.ones((4, 64), np.float32), grit.GRADE_MXFP4)
    grit.save(str(tmp_path / "st.safetensors"), {"w": x})
    s.files["/st.gguf"] = (tmp_path / "st.safetensors").read_bytes()
    (tmp_path / "st.gguf").write_bytes(s.files["/st.gguf"])
    for remote_path, local_path in (("/clean.safetensors", "clean.safetensors"),
                                    ("/st.gguf", "st.gguf")):
        r = scan([s.url(remote_path)])
        loc = scan([str(tmp_path / local_path)])
        assert verdicts(r) == verdicts(loc)
        assert "S131" in {f.code for f in r.findings}


def _timed_scan(url):
    t0 = time.monotonic()
    rep = scan([url])
    return rep, time.monotonic() - t0


def test_bad_servers_and_lying_headers_are_findings_never_hangs(served, tmp_path):
    s, d, files = served
    # a server that ignores Range: refused at the status line (the body is not read)
    s.faults["/clean.gguf"] = {"ignore_range": True}
    rep, dt = _timed_scan(s.url("/clean.gguf"))
    [f] = rep.findings
    assert f.code == "S805" and "ignores Range" in f.message and dt < 10
    # a body cut short inside the header windows
    s.faults["/clean.gguf"] = {"truncate": 1000}
    rep, dt = _timed_scan(s.url("/clean.gguf"))
    assert [f.code for f in rep.findings] == ["S805"] and "broke off" in rep.findings[0].message
    assert dt < 10 and rep.exit_code_graded == 4
    # a redirect is followed: the file it points to is scanned
    s.faults["/moved.gguf"] = {"redirect": s.url("/offsets.gguf")}
    rep, dt = _timed_scan(s.url("/moved.gguf"))
    local = scan([str(d / "offsets.gguf")])
    assert rep.findings and rep.files[0].parsed and dt < 10
    assert sorted((f.code, f.tensor or "") for f in rep.findings) == \
        sorted((f.code, f.tensor or "") for f in local.findings)
    # 404
    rep, dt = _timed_scan(s.url("/missing.gguf"))
    [f] = rep.findings
    assert f.code == "S805" and "404" in f.message and "as gguf" in f.message and dt < 10
    # counts that claim more bytes than the file has: the local file's finding
    for i, (name, blob) in enumerate(TG.HOSTILE.items()):
        s.files[f"/h{i}.gguf"] = blob
        (tmp_path / f"h{i}.gguf").write_bytes(blob)
        rep, dt = _timed_scan(s.url(f"/h{i}.gguf"))
        assert verdicts(rep) == verdicts(scan([str(tmp_path / f"h{i}.gguf")])), name
        assert [f.code for f in rep.findings] == ["S805"] and dt < 5, name


@pytest.mark.skipif(not os.path.exists(GEMMA), reason="the gemma GGUF is not cached")
def test_gemma_over_http_reads_its_header_alone():
    size = os.path.getsize(GEMMA)
    s = Server()
    try:
        with open(GEMMA, "rb") as fh:
            s.files["/gemma.gguf"] = fh.read()
        s.body_bytes = s.requests = 0
        remote = scan([s.url("/gemma.gguf")])
        data_start = read_gguf(GEMMA).data_start
        assert s.body_bytes <= 9 + data_start + GF.MAX_WINDOW < size / 10
        assert verdicts(remote) == verdicts(scan([GEMMA]))
    finally:
        s.close()


def test_deep_streams_remote_blocks_in_chunks(made, monkeypatch):
    """--deep over HTTP hashes a zero-copy tensor's blocks in CHUNK-byte
    ranged reads (grit.io.gguf.block_span) and the probes read a bounded
    prefix: no response is longer than the larger bound, however large the
    tensor; the verdicts (digest right and stale) are the local scan's."""
    import grit.scan.deep as deep_mod
    monkeypatch.setattr(deep_mod, "CHUNK", 2048)
    monkeypatch.setattr(deep_mod, "PROBE", 4096)
    d, files = made
    s = Server()
    try:
        for name in ("clean", "digest", "stale"):
            s.files[f"/{name}.gguf"] = files[name]
            s.largest = 0
            remote = scan([s.url(f"/{name}.gguf")], deep=True, cache=False)
            assert verdicts(remote) == verdicts(scan([str(d / f"{name}.gguf")], deep=True))
            body = max(t.nbytes for t in read_gguf(d / f"{name}.gguf").tensors
                       if t.ggml_type == "Q8_0")
            # the header windows aside (at most MAX_WINDOW), no read past the bounds
            assert s.largest <= max(4096, GF.MAX_WINDOW) < body or name != "clean"
            assert ("S501" in {f.code for f in remote.findings}) == (name == "stale")
    finally:
        s.close()
