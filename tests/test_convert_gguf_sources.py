"""``grit convert --to gguf`` from every source grit recognises: shards (a
module's tensors cut across two files, read as one checkpoint), a shard
index, an https URL and an hf:// repository (real servers on loopback:
checked from the headers and small tensors, then each model file read
once).  Each is compared with the conversion of the same checkpoint as one
local file — the same tensors and KV entries, and for a remote source the
same bytes — and, where GRIT_LLAMA_CPP names a llama.cpp tree, with what
llama.cpp's converter writes for the shards."""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch (CPU) is not installed")
pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("tokenizers", reason="tokenizers is not installed")
pytest.importorskip("compressed_tensors", reason="compressed-tensors is not installed")
gguf = pytest.importorskip("gguf", reason="gguf-py is not installed")

import grit  # noqa: E402
import http_server  # noqa: E402
from grit import convert as C  # noqa: E402
from grit import convert_gguf as CG  # noqa: E402
from grit.io.hub import PREFIX  # noqa: E402
from _support import given_back  # noqa: E402
from http_server import Server  # noqa: E402
from test_scan_hub import REPO, hub, isolated  # noqa: E402,F401  (the Hub on loopback)

HERE = os.path.dirname(os.path.abspath(__file__))
#: tensors larger than this are not read by the check before writing (the
#: tiny model's tensors are all under grit's 1 MiB)
SMALL = 4096


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A tiny Llama quantised to NVFP4 by compressed-tensors (one file)."""
    import hf_tiny
    return hf_tiny.write_model(str(tmp_path_factory.mktemp("one") / "one"), "llama", seed=11)


def _header(path: str) -> tuple[dict, bytes]:
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return h, b[8 + n:]


def shard(src: str, folder, parts: int = 2, at: list[int] | None = None) -> list[str]:
    """``src``'s model.safetensors cut into ``parts`` shards by name order
    (so that a module's tensors fall into two of them; ``at``: the cuts, as
    indices into the sorted names), written byte for byte with an index and
    the files beside it; returns the shard names."""
    h, data = _header(os.path.join(src, "model.safetensors"))
    os.makedirs(folder)
    for n in os.listdir(src):
        if n != "model.safetensors":
            shutil.copy(os.path.join(src, n), folder)
    names = sorted(h)
    ends = [0, *(at or [i * len(names) // parts for i in range(1, parts)]), len(names)]
    cut = [names[a:b] for a, b in zip(ends, ends[1:])]
    parts = len(cut)
    wmap, files = {}, []
    for i, part in enumerate(cut):
        fn = f"model-{i + 1:05d}-of-{parts:05d}.safetensors"
        hdr, off, blobs = {}, 0, []
        for k in part:
            a, b = h[k]["data_offsets"]
            hdr[k] = {"dtype": h[k]["dtype"], "shape": h[k]["shape"],
                      "data_offsets": [off, off + b - a]}
            blobs.append(data[a:b])
            off += b - a
            wmap[k] = fn
        hj = json.dumps(hdr).encode()
        hj += b" " * (-len(hj) % 8)
        with open(os.path.join(folder, fn), "wb") as f:
            f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
        files.append(fn)
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f)
    return files


def _tensors(path: str) -> dict:
    r = gguf.GGUFReader(path)
    return {t.name: (t.tensor_type, list(t.shape), t.data.tobytes()) for t in r.tensors}


def _kv(path: str) -> dict:
    return {k: f.contents() for k, f in gguf.GGUFReader(path).fields.items()
            if k not in ("general.name", "GGUF.kv_count")}


@pytest.fixture(scope="module")
def one(model, tmp_path_factory):
    """The --to gguf output of the one-file checkpoint."""
    out = str(tmp_path_factory.mktemp("g1") / "g")
    assert C.convert(model, out, "gguf").counts == {"bit-exact": 14}
    return os.path.join(out, CG.GGUF_FILE)


def test_shards_convert_as_the_one_file(model, one, tmp_path):
    """A module's packed codes and its scales in different shards: read as
    one checkpoint, from the folder and from its index, the same tensors
    and KV entries as the one file."""
    files = shard(model, tmp_path / "sh")
    h0, _ = _header(str(tmp_path / "sh" / files[0]))
    h1, _ = _header(str(tmp_path / "sh" / files[1]))
    split = {k.rsplit(".", 1)[0] for k in h0} & {k.rsplit(".", 1)[0] for k in h1}
    assert split, "the cut leaves every module whole"
    for i, src in enumerate((str(tmp_path / "sh"),
                             str(tmp_path / "sh" / "model.safetensors.index.json"))):
        rep = C.convert(src, str(tmp_path / f"g{i}"), "gguf")
        assert rep.counts == {"bit-exact": 14}
        got = os.path.join(tmp_path / f"g{i}", CG.GGUF_FILE)
        assert _tensors(got) == _tensors(one)
        assert _kv(got) == _kv(one)
        assert C.verify(src, str(tmp_path / f"g{i}")).ok


def test_a_shard_index_naming_a_missing_file_is_refused(model, tmp_path):
    shard(model, tmp_path / "sh")
    os.remove(tmp_path / "sh" / "model-00002-of-00002.safetensors")
    with pytest.raises(grit.GritUsageError, match="not beside it"):
        C.convert(str(tmp_path / "sh" / "model.safetensors.index.json"),
                  str(tmp_path / "g"), "gguf")
    (tmp_path / "sh" / "model.safetensors.index.json").write_text('{"weight_map": '
                                                                  '{"a": "../x.safetensors"}}')
    with pytest.raises(grit.GritUsageError, match="not a shard index"):
        C.convert(str(tmp_path / "sh" / "model.safetensors.index.json"),
                  str(tmp_path / "g"), "gguf")


def test_shards_byte_identical_to_llama_cpp_converter(model, tmp_path):
    d = os.environ.get("GRIT_LLAMA_CPP", "")
    if not d or not os.path.isfile(os.path.join(d, "convert_hf_to_gguf.py")):
        pytest.skip("GRIT_LLAMA_CPP names no llama.cpp source tree with convert_hf_to_gguf.py")
    shard(model, tmp_path / "sh")
    ref = str(tmp_path / "ref.gguf")
    p = subprocess.run([sys.executable, os.path.join(HERE, "llama_cpp_convert.py"), d,
                        str(tmp_path / "sh"), ref, "llama-bpe"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    C.convert(str(tmp_path / "sh"), str(tmp_path / "g"), "gguf")
    ours = str(tmp_path / "g" / CG.GGUF_FILE)
    assert _tensors(ours) == _tensors(ref)
    a, b = _kv(ref), _kv(ours)          # (grit's own entries besides: grit.*)
    assert {k: v for k, v in a.items() if k != "general.size_label"} == \
        {k: v for k, v in b.items() if not k.startswith("grit.")}


def _large_spans(folder, files: list[str]) -> dict[str, list[tuple[int, int]]]:
    """file -> the byte spans of its tensors over SMALL bytes."""
    out = {}
    for fn in files:
        with open(os.path.join(folder, fn), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            h = json.loads(f.read(n))
        h.pop("__metadata__", None)
        out[fn] = [(8 + n + e["data_offsets"][0], 8 + n + e["data_offsets"][1])
                   for e in h.values() if e["data_offsets"][1] - e["data_offsets"][0] > SMALL]
        assert out[fn]
    return out


def _coverage(size: int, ranges: list[tuple[int, int]]) -> np.ndarray:
    """How many times each byte of a file of ``size`` was sent (ranges end
    inclusive)."""
    c = np.zeros(size, np.int64)
    for a, b in ranges:
        c[a:b + 1] += 1
    return c


def _sent_ranges(monkeypatch) -> list[tuple[int, str | None]]:
    """The bodies the loopback server sends from now on, each recorded as
    (the id of the file's bytes, its Content-Range or None)."""
    sent: list[tuple[int, str | None]] = []
    plain = http_server.ranged

    def ranged(hdr, data):
        got = plain(hdr, data)
        sent.append((id(data), got[2]))
        return got
    monkeypatch.setattr(http_server, "ranged", ranged)
    return sent


def _sent_coverage(sent: list[tuple[int, str | None]], data: bytes) -> np.ndarray:
    """How many times each byte of ``data`` was sent (never the whole file
    at once: every body a range)."""
    ranges = []
    for i, cr in sent:
        if i == id(data):
            assert cr is not None
            a, b = cr.split()[1].split("/")[0].split("-")
            ranges.append((int(a), int(b)))
    return _coverage(len(data), ranges)


def _same_output(remote_out, local_out) -> None:
    for n in (CG.GGUF_FILE, "config.json", C.PROOF_FILE):
        assert (remote_out / n).read_bytes() == (local_out / n).read_bytes(), n


def test_an_https_shard_index_converts_as_its_local_files(model, tmp_path, monkeypatch):
    """An https shard index: config.json and the tokenizer read beside it,
    the shards checked from their headers and small tensors, then each byte
    of a large tensor sent once, in ranges of at most SPOOL_CHUNK; the
    output is byte for byte the local conversion's (the folder of the same
    name), and no spool is left."""
    files = shard(model, tmp_path / "m")
    monkeypatch.setattr(C, "SMALL_MAX", SMALL)
    monkeypatch.setattr(C, "SPOOL_CHUNK", 1 << 14)
    sent = _sent_ranges(monkeypatch)
    s = Server()
    try:
        for n in os.listdir(tmp_path / "m"):
            s.files[f"/m/{n}"] = (tmp_path / "m" / n).read_bytes()
        rep = C.convert(s.url("/m/model.safetensors.index.json"), str(tmp_path / "out"), "gguf")
        assert rep.counts == {"bit-exact": 14}
        assert s.largest <= 1 << 14 or s.largest in (len(v) for k, v in s.files.items()
                                                     if not k.endswith(".safetensors"))
        def cov(path: str) -> np.ndarray:
            return _sent_coverage(sent, s.files[path])
        for fn, spans in _large_spans(tmp_path / "m", files).items():
            c = cov(f"/m/{fn}")
            assert c.min() == 1                          # every byte sent
            for a, b in spans:
                assert c[a:b].max() == 1, (fn, a, b)     # a large tensor's bytes once
        for fn in ("config.json", "tokenizer.json"):     # once, after a 1-byte probe
            c = cov(f"/m/{fn}")
            assert c.min() == 1 and c[1:].max() == 1, fn
    finally:
        s.close()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]
    C.convert(str(tmp_path / "m"), str(tmp_path / "local"), "gguf")
    _same_output(tmp_path / "out", tmp_path / "local")
    assert C.verify(str(tmp_path / "m"), str(tmp_path / "out")).ok


def test_an_hf_repository_of_shards_converts_as_its_local_files(
        model, hub, tmp_path, monkeypatch):  # noqa: F811
    """hf://ORG/REPO holding shards, the index and the tokenizer: each byte
    of a large tensor sent once (but for the first PREFIX bytes of a file,
    which its header's request reads and the spool again), the output byte
    for byte the local conversion's; grit verify reads it back remotely."""
    name = REPO.rsplit("/", 1)[-1]
    files = shard(model, tmp_path / name)
    monkeypatch.setattr(C, "SMALL_MAX", SMALL)
    hub.commit(REPO, {n: (tmp_path / name / n).read_bytes()
                      for n in os.listdir(tmp_path / name)})
    hub.reset()
    rep = C.convert(f"hf://{REPO}", str(tmp_path / "out"), "gguf")
    assert rep.counts == {"bit-exact": 14}
    for fn, spans in _large_spans(tmp_path / name, files).items():
        size = (tmp_path / name / fn).stat().st_size
        cov = _coverage(size, [(a, b) for p, a, b in hub.ranges if p.endswith(fn)])
        assert cov.min() == 1
        for a, b in spans:
            a = max(a, PREFIX)
            if a < b:
                assert cov[a:b].max() == 1, (fn, a, b)
    C.convert(str(tmp_path / name), str(tmp_path / "local"), "gguf")
    _same_output(tmp_path / "out", tmp_path / "local")
    assert C.verify(f"hf://{REPO}", str(tmp_path / "out")).ok


def test_a_remote_refusal_reads_no_tensor_bytes(model, tmp_path, monkeypatch):
    """An architecture llama.cpp's converter is not given: refused from
    config.json, before a model file's large tensors are asked for."""
    monkeypatch.setattr(C, "SMALL_MAX", SMALL)
    s = Server()
    try:
        for n in os.listdir(model):
            s.files[f"/m/{n}"] = (open(os.path.join(model, n), "rb")).read()
        cfg = json.loads(s.files["/m/config.json"])
        cfg["architectures"] = ["FalconForCausalLM"]
        s.files["/m/config.json"] = json.dumps(cfg).encode()
        size = len(s.files["/m/model.safetensors"])
        with pytest.raises(grit.GritUsageError, match="FalconForCausalLM"):
            C.convert(s.url("/m/model.safetensors"), str(tmp_path / "out"), "gguf")
        assert s.body_bytes < size
    finally:
        s.close()
    assert not os.path.exists(tmp_path / "out")
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]


def test_an_https_file_converts_as_the_local_file(model, tmp_path):
    """One model file by URL, its config.json and tokenizer beside it: the
    output is byte for byte the local conversion's; grit verify reads it
    back remotely."""
    shutil.copytree(model, tmp_path / "m")
    s = Server()
    try:
        for n in os.listdir(tmp_path / "m"):
            s.files[f"/m/{n}"] = (tmp_path / "m" / n).read_bytes()
        url = s.url("/m/model.safetensors")
        assert C.convert(url, str(tmp_path / "out"), "gguf").counts == {"bit-exact": 14}
        assert C.verify(url, str(tmp_path / "out")).ok
    finally:
        s.close()
    C.convert(str(tmp_path / "m"), str(tmp_path / "local"), "gguf")
    _same_output(tmp_path / "out", tmp_path / "local")


def test_a_remote_gguf_source_converts_as_the_local_file(
        model, hub, tmp_path, monkeypatch):  # noqa: F811
    """A GGUF by https URL and by hf://: read once into a spool beside the
    output (each byte sent once, in ranges of at most SPOOL_CHUNK), then
    converted as the local file — the output byte for byte the local
    conversion's — and grit verify of the URL reads it once more; no spool
    is left."""
    C.convert(model, str(tmp_path / "g"), "gguf")
    path = str(tmp_path / "g" / CG.GGUF_FILE)
    with open(path, "rb") as f:
        data = f.read()
    local = tmp_path / "local"
    C.convert(path, str(local), "compressed-tensors")
    monkeypatch.setattr(C, "SPOOL_CHUNK", 1 << 14)
    sent = _sent_ranges(monkeypatch)
    s = Server()
    try:
        s.files["/r/x.gguf"] = data
        url = s.url("/r/x.gguf")
        rep = C.convert(url, str(tmp_path / "out"), "compressed-tensors")
        assert rep.counts == {"bit-exact": 14}
        assert s.largest <= 1 << 14
        c = _sent_coverage(sent, data)
        assert c.min() == 1 and c[1:].max() == 1         # each byte once, after a probe
        assert C.verify(url, str(tmp_path / "out")).ok
        with pytest.raises(grit.GritUsageError, match="exists"):
            C.convert(url, str(tmp_path / "out"), "grit")
    finally:
        s.close()
    names = sorted(os.listdir(local))
    assert sorted(os.listdir(tmp_path / "out")) == names
    for n in names:
        assert (tmp_path / "out" / n).read_bytes() == (local / n).read_bytes(), n
    hub.commit(REPO, {"sub/model.gguf": data})
    C.convert(f"hf://{REPO}/sub/model.gguf", str(tmp_path / "hf"), "compressed-tensors")
    for n in names:
        assert (tmp_path / "hf" / n).read_bytes() == (local / n).read_bytes(), n
    assert C.verify(f"hf://{REPO}/sub/model.gguf", str(tmp_path / "hf")).ok
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]


def test_verify_of_a_gguf_gives_back_every_tensors_pages(model, tmp_path, monkeypatch):
    """grit verify of a --to gguf conversion hands every byte of every GGUF
    tensor (its spans as gguf-py reads them) and of every source tensor over
    4 KiB (from the safetensors header, by hand) to its file's map to be
    given back (MADV_DONTNEED) once checked."""
    out = tmp_path / "out"
    C.convert(model, str(out), "gguf")
    back = given_back(monkeypatch)
    assert C.verify(model, str(out)).ok
    g = os.path.join(out, CG.GGUF_FILE)
    b = back(g)
    tensors = gguf.GGUFReader(g).tensors
    assert len(tensors) > 10
    for t in tensors:
        assert b[t.data_offset:t.data_offset + t.n_bytes].all(), t.name
    st = os.path.join(model, "model.safetensors")
    b = back(st)
    h, _ = _header(st)
    with open(st, "rb") as f:
        start = 8 + struct.unpack("<Q", f.read(8))[0]
    big = [(k, start + e["data_offsets"][0], start + e["data_offsets"][1])
           for k, e in h.items() if e["data_offsets"][1] - e["data_offsets"][0] > SMALL]
    assert big
    for k, a, e in big:
        assert b[a:e].all(), k
