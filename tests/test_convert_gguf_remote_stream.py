"""``grit convert URL DST --to gguf`` streamed: a remote checkpoint of three
shards (compressed-tensors NVFP4, a module's tensors cut across two of them)
by an https URL of its index and by hf:// (real servers on loopback) is read
one shard at a time into a spool beside DST, each shard's tensors written
into the GGUF at their planned offsets and proved, then its bytes given
back — the spool never holds a second shard's weights — and the output is
byte for byte the conversion of the same files from a local folder.  A
server that stalls or dies within a shard ends in a RemoteError leaving
nothing; too little free disk for the GGUF and the largest shard is refused
before a weight's byte is asked for."""
from __future__ import annotations

import glob
import json
import os
import shutil
import struct
import time

import pytest

pytest.importorskip("gguf", reason="gguf-py is not installed")

import http_server  # noqa: E402
from grit import convert as C  # noqa: E402
from grit import convert_gguf as CG  # noqa: E402
from grit.errors import GritUsageError  # noqa: E402
from grit.io.hub import PREFIX  # noqa: E402
from _support import assert_progress  # noqa: E402
from http_server import Server  # noqa: E402
from test_convert_gguf_sources import (SMALL, _large_spans, _same_output,  # noqa: E402,F401
                                       _sent_coverage, _sent_ranges, model, shard)
from test_scan_hub import REPO, hub, isolated  # noqa: E402,F401  (the Hub on loopback)

#: the three shards' cuts in the sorted tensor names: before layer 0's
#: down_proj.weight_packed (its weight's large tensors in the second shard,
#: its divisor in the first) and after layer 1's (a large tensor kept while
#: the third shard, holding that weight's scales, is read)
CUTS = [4, 28]


def _serve(d) -> Server:
    """A loopback server of the folder ``d``'s files under /ckpt/ (the
    folder's own name, so general.name is the local conversion's)."""
    s = Server()
    for n in os.listdir(d):
        s.files[f"/ckpt/{n}"] = (d / n).read_bytes()
    return s


@pytest.fixture
def three(model, tmp_path, monkeypatch):  # noqa: F811
    """(the folder of the checkpoint in three shards (:data:`CUTS`) — named
    as the remote ones, for general.name —, the shard names, its local
    --to gguf conversion); tensors over SMALL bytes are large (not in the check's
    image of a remote file)."""
    monkeypatch.setattr(C, "SMALL_MAX", SMALL)
    d = tmp_path / "ckpt"
    files = shard(model, d, at=CUTS)
    h0, h1 = _header(d / files[0]), _header(d / files[1])
    assert "model.layers.0.mlp.down_proj.weight_global_scale" in h0
    assert "model.layers.0.mlp.down_proj.weight_packed" in h1
    assert len(files) == 3 and _carried(d, files)[(1, 2)] > SMALL
    rep = C.convert(str(d), str(tmp_path / "local"), "gguf")
    assert rep.counts == {"bit-exact": 14}
    return d, files, tmp_path / "local"


def _header(path) -> dict:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return h


def _carried(d, files: list[str]) -> dict[tuple[int, int], int]:
    """(shard j, shard k) -> the large bytes of shard j a conversion still
    needs while shard k is read: the large tensors of j whose module (a
    compressed-tensors weight's leaves) has a tensor in shard k or later."""
    where, size = {}, {}
    for j, fn in enumerate(files):
        for n, e in _header(d / fn).items():
            where[n] = j
            size[n] = e["data_offsets"][1] - e["data_offsets"][0]
    last: dict[str, int] = {}
    for n, j in where.items():
        m = n.rsplit(".", 1)[0]
        last[m] = max(last.get(m, 0), j)
    return {(j, k): sum(size[n] for n, i in where.items() if i == j and size[n] > SMALL
                        and last[n.rsplit(".", 1)[0]] >= k)
            for j in range(len(files)) for k in range(len(files))}


def _held(spool: str, files: list[str]) -> list[int]:
    """The disk bytes each shard's spool file holds (its allocated blocks)."""
    out = []
    for fn in files:
        try:
            out.append(os.stat(os.path.join(spool, fn)).st_blocks * 512)
        except FileNotFoundError:
            out.append(0)
    return out


def _watch(monkeypatch, tmp_path, files: list[str], hub=None  # noqa: F811
           ) -> list[tuple[int, list[int]]]:
    """(the shard being read, the disk bytes of every shard's spool file),
    recorded by the server's request handler (the loopback server's or,
    with ``hub``, the Hub's) at each request made while a shard is read
    (``grit.convert_gguf._fill``), and once before the first."""
    seen: list[tuple[int, list[int]]] = []
    reading = [-1]
    real_fill, plain = CG._fill, http_server.ranged

    def spool() -> str | None:
        got = glob.glob(str(tmp_path / ".grit-gguf-spool-*"))
        return got[0] if got else None

    def fill(local, i):
        if i == 0:
            seen.append((-1, _held(local.folder, files)))     # images only
        reading[0] = i
        try:
            return real_fill(local, i)
        finally:
            reading[0] = -1

    def ranged(hdr, data):
        s = spool()
        if reading[0] >= 0 and s is not None:
            seen.append((reading[0], _held(s, files)))
        return plain(hdr, data)
    monkeypatch.setattr(CG, "_fill", fill)
    monkeypatch.setattr(http_server, "ranged", ranged)
    if hub is not None:
        class Sent(list):                   # the Hub's handler records each range sent
            def append(self, x):
                ranged(None, b"")
                super().append(x)
        hub.ranges = Sent(hub.ranges)
    return seen


def _one_shard_at_a_time(seen, d, files) -> None:
    """While shard k is read, every other shard's spool file holds no more
    than its image (header and small tensors: as before the first shard was
    read) and the large tensors a later shard's module still needs, within
    a block at each end of each large tensor."""
    assert seen and seen[0][0] == -1
    base = seen[0][1]
    carried = _carried(d, files)
    blk = os.statvfs(str(d)).f_bsize
    sizes = [os.path.getsize(d / fn) for fn in files]
    nlarge = [sum(1 for e in _header(d / fn).values()
                  if e["data_offsets"][1] - e["data_offsets"][0] > SMALL) for fn in files]
    assert {k for k, _ in seen[1:]} == set(range(len(files)))    # each shard observed
    for k, held in seen[1:]:
        others = 0
        for j, b in enumerate(held):
            if j != k:
                extra = b - base[j]
                assert extra <= carried[(j, k)] + 2 * blk * nlarge[j], (k, j, held, base)
                others += extra
        assert others < min(sizes), (k, held, base)     # never a second shard's weights


@pytest.fixture
def punches(tmp_path):
    if not CG._can_punch(str(tmp_path)):
        pytest.skip("this file system does not punch holes (fallocate): the spool keeps "
                    "every shard")


def test_an_https_index_streams_one_shard_at_a_time(three, tmp_path, monkeypatch, punches):
    d, files, local = three
    monkeypatch.setattr(C, "SPOOL_CHUNK", 1 << 12)
    seen = _watch(monkeypatch, tmp_path, files)
    sent = _sent_ranges(monkeypatch)
    s = _serve(d)
    try:
        calls: list = []
        rep = C.convert(s.url("/ckpt/model.safetensors.index.json"), str(tmp_path / "out"), "gguf",
                        progress=lambda *a: calls.append(a))
        assert rep.counts == {"bit-exact": 14}
        assert_progress(calls, CG.GGUF_FILE, steps=20)    # a shard's tensors at a time
        for fn, spans in _large_spans(d, files).items():
            c = _sent_coverage(sent, s.files[f"/ckpt/{fn}"])
            assert c.min() == 1                          # every byte sent
            for a, b in spans:
                assert c[a:b].max() == 1, (fn, a, b)     # a large tensor's bytes once
    finally:
        s.close()
    _same_output(tmp_path / "out", local)
    _one_shard_at_a_time(seen, d, files)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]
    assert C.verify(str(d), str(tmp_path / "out")).ok


def test_an_hf_repository_streams_as_its_local_files(three, hub, tmp_path,  # noqa: F811
                                                     monkeypatch, punches):
    d, files, local = three
    seen = _watch(monkeypatch, tmp_path, files, hub)
    hub.commit(REPO, {n: (d / n).read_bytes() for n in os.listdir(d)})
    hub.reset()
    C.convert(f"hf://{REPO}", str(tmp_path / "out"), "gguf")
    for fn, spans in _large_spans(d, files).items():
        cov = [0] * os.path.getsize(d / fn)
        for p, a, b in hub.ranges:
            if p.endswith(fn):
                for x in range(a, b + 1):
                    cov[x] += 1
        for a, b in spans:
            a = max(a, PREFIX)          # (the header's request reads the first PREFIX bytes)
            assert a >= b or max(cov[a:b]) == 1, (fn, a, b)
    _same_output(tmp_path / "out", local)
    _one_shard_at_a_time(seen, d, files)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]


@pytest.mark.parametrize("fault", [{"trickle": (1, 0.2)}, {"truncate": 100}],
                         ids=["stalls", "dies"])
def test_a_server_failing_within_a_shard_is_a_remote_error_leaving_nothing(
        three, tmp_path, monkeypatch, fault):
    """The first shard streams; the second's body trickles a byte every
    0.2 s (the read's deadline, timeout + bytes / min_rate, ends it) or is
    cut short (the connection closed): a RemoteError within one request's
    deadline of the second shard's first request, and no output, staging
    folder or spool left beside DST."""
    from grit.io.http import RemoteError, use_policy
    d, files, _ = three
    monkeypatch.setattr(C, "SPOOL_CHUNK", 1 << 12)
    s = _serve(d)
    real = CG._fill

    began = []

    def failing(local, i):
        if i == 1:
            s.faults[f"/ckpt/{files[1]}"] = dict(fault)
            began.append(time.monotonic())
        return real(local, i)
    monkeypatch.setattr(CG, "_fill", failing)
    out = tmp_path / "o"
    out.mkdir()
    try:
        with use_policy(timeout=0.5, retries=0) as policy, pytest.raises(RemoteError):
            C.convert(s.url("/ckpt/model.safetensors.index.json"), str(out / "g"), "gguf")
        # one request's deadline (timeout + bytes / min_rate: at most the 64 KiB a
        # file's first request reads), and a margin for a loaded machine
        assert time.monotonic() - began[0] < policy.timeout + (64 << 10) / policy.min_rate + 3
    finally:
        s.close()
    assert s.faults.get(f"/ckpt/{files[1]}")              # the second shard was reached
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("fault", [{"trickle": (1, 0.2)}, {"truncate": 100}],
                         ids=["stalls", "dies"])
def test_verify_of_a_source_failing_within_a_shard_is_a_remote_error(three, tmp_path,
                                                                     monkeypatch, fault):
    """grit verify streaming a remote SRC: the second shard's body trickles
    or is cut short — a RemoteError within one request's deadline of that
    shard's first request, and no spool left beside DST."""
    from grit.io.http import RemoteError, use_policy
    d, files, local = three
    monkeypatch.setattr(C, "SPOOL_CHUNK", 1 << 12)
    s = _serve(d)
    real = CG._fill
    began = []

    def failing(loc, i):
        if i == 1:
            s.faults[f"/ckpt/{files[1]}"] = dict(fault)
            began.append(time.monotonic())
        return real(loc, i)
    monkeypatch.setattr(CG, "_fill", failing)
    try:
        with use_policy(timeout=0.5, retries=0) as policy, pytest.raises(RemoteError):
            C.verify(s.url("/ckpt/model.safetensors.index.json"), str(local))
        assert time.monotonic() - began[0] < policy.timeout + (64 << 10) / policy.min_rate + 3
    finally:
        s.close()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]


def test_too_little_disk_is_refused_before_a_weight_is_read(three, tmp_path, monkeypatch):
    """Free disk below what the GGUF and the spool need at once: a usage
    error, after the check (headers, small tensors, the files beside) and
    before any large tensor's byte is sent; nothing is left.  Free disk of
    the GGUF and the largest shard is enough (with holes punched)."""
    d, files, local = three
    sent = _sent_ranges(monkeypatch)
    gguf = os.path.getsize(local / CG.GGUF_FILE)
    free = [gguf]
    real = shutil.disk_usage

    def usage(path):
        return real(path)._replace(free=free[0])
    monkeypatch.setattr(CG.shutil, "disk_usage", usage)
    s = _serve(d)
    try:
        url = s.url("/ckpt/model.safetensors.index.json")
        with pytest.raises(GritUsageError, match=rf"{gguf} bytes free; converting the remote "
                           r"checkpoint needs \d+ \(the GGUF and at most \d+ bytes of model"):
            C.convert(url, str(tmp_path / "out"), "gguf")
        for fn, spans in _large_spans(d, files).items():
            c = _sent_coverage(sent, s.files[f"/ckpt/{fn}"])
            for a, b in spans:
                assert c[a:b].max() == 0, (fn, a, b)
        assert not os.path.exists(tmp_path / "out")
        assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]
        if CG._can_punch(str(tmp_path)):
            free[0] = gguf + max(os.path.getsize(d / f) for f in files)
            C.convert(url, str(tmp_path / "out"), "gguf")
            _same_output(tmp_path / "out", local)
    finally:
        s.close()


def test_a_tensor_built_from_several_source_tensors_waits_for_every_shard(
        three, tmp_path, monkeypatch, punches):
    """A planned tensor that is not one of the source's own (here a copy of
    model.norm.weight, as a tensor built from several would be) may read any
    shard: it is written once the last is read, and no large tensor is given
    back before — the output is still the local conversion's."""
    d, files, local = three
    real = CG._prepared

    def prepared(src):
        p = real(src)
        g = next(g for g, e in p.plan.items() if e[1] == "model.norm.weight")
        v, name, how, rows = p.plan[g]
        p.plan[g] = (v.copy(), name, how, rows)
        return p
    monkeypatch.setattr(CG, "_prepared", prepared)
    seen = _watch(monkeypatch, tmp_path, files)
    s = _serve(d)
    try:
        C.convert(s.url("/ckpt/model.safetensors.index.json"), str(tmp_path / "out"), "gguf")
    finally:
        s.close()
    _same_output(tmp_path / "out", local)
    large = [sum(e["data_offsets"][1] - e["data_offsets"][0] for e in _header(d / fn).values()
                 if e["data_offsets"][1] - e["data_offsets"][0] > SMALL) for fn in files]
    held = [h for k, h in seen if k == len(files) - 1]
    assert held and all(h[j] >= large[j] for h in held
                        for j in range(len(files) - 1))     # every earlier shard kept


def test_a_shard_that_completes_no_weight(model, tmp_path, monkeypatch):  # noqa: F811
    """The second of three shards holds one large tensor of a weight whose
    other tensors lie in the first and the third: nothing is written when
    it is read, the tensor is kept until the third is, and the output is
    the local conversion's."""
    monkeypatch.setattr(C, "SMALL_MAX", SMALL)
    d = tmp_path / "ckpt"
    files = shard(model, d, at=[4, 5])
    assert list(_header(d / files[1])) == ["model.layers.0.mlp.down_proj.weight_packed"]
    C.convert(str(d), str(tmp_path / "local"), "gguf")
    s = _serve(d)
    try:
        C.convert(s.url("/ckpt/model.safetensors.index.json"), str(tmp_path / "out"), "gguf")
    finally:
        s.close()
    _same_output(tmp_path / "out", tmp_path / "local")
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]


def test_a_shard_changed_after_the_check_is_refused_leaving_nothing(three, tmp_path,
                                                                    monkeypatch):
    """The server's second shard changes (a small tensor: a global scale)
    between the check, which planned the GGUF from it, and its read: a
    GritError naming the file, and nothing left beside DST."""
    from grit.errors import GritError
    d, files, _ = three
    s = _serve(d)
    real = CG._fill
    path = f"/ckpt/{files[1]}"

    def changed(local, i):
        if i == 1:
            h = _header(d / files[1])
            n = next(k for k in h if k.endswith("weight_global_scale"))
            start = 8 + struct.unpack("<Q", s.files[path][:8])[0] + h[n]["data_offsets"][0]
            b = bytearray(s.files[path])
            b[start] ^= 1
            s.files[path] = bytes(b)
        return real(local, i)
    monkeypatch.setattr(CG, "_fill", changed)
    out = tmp_path / "o"
    out.mkdir()
    try:
        with pytest.raises(GritError, match=rf"{files[1]}: its header or small tensors "
                           "changed while it was read"):
            C.convert(s.url("/ckpt/model.safetensors.index.json"), str(out / "g"), "gguf")
    finally:
        s.close()
    assert list(out.iterdir()) == []


def test_verify_of_a_remote_source_streams_one_shard_at_a_time(three, tmp_path, monkeypatch,
                                                               punches):
    """grit verify with the https index as SRC reads it as the conversion
    does: one shard at a time into a spool beside DST (never a second
    shard's weights), each large tensor's bytes once, and checks each GGUF
    tensor once its last shard is read: the proof holds (every weight
    checked), a byte changed in the GGUF is found in its weight alone, and
    no spool is left."""
    from grit.io.gguf_file import read_gguf
    d, files, local = three
    monkeypatch.setattr(C, "SPOOL_CHUNK", 1 << 12)
    s = _serve(d)
    try:
        url = s.url("/ckpt/model.safetensors.index.json")
        seen = _watch(monkeypatch, tmp_path, files)
        sent = _sent_ranges(monkeypatch)
        rep = C.verify(url, str(local))
        assert rep.ok and rep.checked == 14, rep.problems
        for fn, spans in _large_spans(d, files).items():
            c = _sent_coverage(sent, s.files[f"/ckpt/{fn}"])
            for a, b in spans:
                assert c[a:b].max() == 1, (fn, a, b)     # a large tensor's bytes once
        _one_shard_at_a_time(seen, d, files)
        bad = tmp_path / "bad"
        shutil.copytree(local, bad)
        f = read_gguf(str(bad / CG.GGUF_FILE))
        t = next(t for t in f.tensors if t.name == "blk.1.ffn_down.weight")
        with open(bad / CG.GGUF_FILE, "r+b") as fh:
            fh.seek(f.data_start + t.offset + 100)
            x = fh.read(1)
            fh.seek(f.data_start + t.offset + 100)
            fh.write(bytes([x[0] ^ 0x01]))
        rep = C.verify(url, str(bad))
        assert rep.problems and rep.checked == 14
        assert {p.split(":")[0] for p in rep.problems} == \
            {"model.layers.1.mlp.down_proj.weight"}, rep.problems
    finally:
        s.close()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]
