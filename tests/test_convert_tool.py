"""grit convert as a tool: --allow-requant (the errors of each re-quantised
weight, derived here independently from the two checkpoints' bytes),
--jobs (the same output for any number), the progress bar (on a terminal
only), and the fast verdict paths against the decode comparison."""
from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grit
from grit import layouts as L
from grit.convert import PROOF_FILE, convert, quick_verdict, requant_grade, verdict, verify
from test_convert import tree_digest

#: E2M1 code -> value (OCP MX v1.0, table of FP4 E2M1), an independent table
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float64)


def _nvfp4_checkpoint(tmp_path, rows=32, cols=256, seed=0):
    rng = np.random.default_rng(seed)
    src = tmp_path / "src"
    src.mkdir()
    x = (rng.standard_normal((rows, cols)) * rng.uniform(0.01, 10, (rows, 1))).astype(np.float32)
    grit.save(str(src / "model.safetensors"),
              {"model.layers.0.mlp.down_proj.weight": grit.encode(x, grit.GRADE_NVF4),
               "model.norm.weight": np.ones(rows, np.float32)})
    (src / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    return src


def _gpt_oss_decode(folder, stem):
    """gpt-oss's MXFP4 as its reference dequantises it: each byte two E2M1
    codes (element 2j in the low nibble) times 2^(scale − 127), in binary64
    (every value is exact there), from the file's raw bytes."""
    from safetensors.numpy import load_file
    t = load_file(str(folder / "model.safetensors"))
    blocks, scales = t[stem + "_blocks"], t[stem + "_scales"]
    lo, hi = blocks & 0x0F, blocks >> 4
    codes = np.stack([lo, hi], axis=-1).reshape(*blocks.shape[:-1], 32)
    vals = E2M1[codes] * np.ldexp(1.0, scales.astype(np.int64) - 127)[..., None]
    return vals.reshape(blocks.shape[0], -1).astype(np.float32)


def _ulps(x, y):
    """Binary32 values between x and y, counted apart from the bit trick the
    code uses: the same sign, the difference of the magnitudes' patterns;
    opposite signs, the sum of the distances to zero."""
    ax = np.abs(x).view(np.uint32).astype(np.int64)
    ay = np.abs(y).view(np.uint32).astype(np.int64)
    same = np.signbit(x) == np.signbit(y)
    return np.where(same, np.abs(ax - ay), ax + ay)


def test_a_refusal_names_the_reason_and_the_flag(tmp_path):
    src = _nvfp4_checkpoint(tmp_path)
    with pytest.raises(grit.GritUsageError) as e:
        convert(str(src), str(tmp_path / "oss"), "gpt-oss")
    text = str(e.value)
    assert "1 array(s) cannot be written" in text
    assert "model.layers.0.mlp.down_proj.weight: gpt-oss cannot hold" in text
    assert "gpt-oss writes MXFP4" in text                       # the reason
    assert f"--allow-requant: re-quantise it into {grit.GRADE_MXFP4.canonical}" in text
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_allow_requant_reports_the_errors_a_peer_derives(tmp_path):
    src = _nvfp4_checkpoint(tmp_path)
    out = tmp_path / "oss"
    rep = convert(str(src), str(out), "gpt-oss", allow_requant=True)
    assert rep.counts == {"re-quantised": 1}
    [w] = rep.proof["weights"]
    assert w["requant"]["into"] == grit.GRADE_MXFP4.canonical
    assert "gpt-oss cannot hold" in w["requant"]["why"]
    assert w["target"]["grade"] == grit.GRADE_MXFP4.canonical
    assert not w["exact_by_construction"]
    # independently: the source's decode, the output's as gpt-oss reads its bytes
    x = grit.decode(grit.load(str(src / "model.safetensors"))[w["name"]]).astype(np.float32)
    y = _gpt_oss_decode(out, "model.layers.0.mlp.down_proj")
    d = y.astype(np.float64) - x.astype(np.float64)
    v = w["verdict"]
    assert v["verdict"] == "re-quantised"
    assert v["elements"] == x.size
    assert v["differ"] == int((x != y).sum()) > 0
    assert v["max_abs"] == float(np.abs(d).max()) > 0
    assert v["rms"] == pytest.approx(math.sqrt(float(np.mean(d * d))), rel=1e-12)
    assert v["max_ulps"] == int(_ulps(x, y).max())
    assert v["nonfinite"] == 0
    assert verify(str(src), str(out)).ok
    # a proof whose numbers were changed disagrees with the checkpoints
    doc = json.loads((out / PROOF_FILE).read_text())
    doc["weights"][0]["verdict"]["max_abs"] *= 0.5
    bad = tmp_path / "bad-proof.json"
    bad.write_text(json.dumps(doc))
    rep2 = verify(str(src), str(out), str(bad))
    assert not rep2.ok and any("re-quantised" in p for p in rep2.problems)


def test_requant_on_the_command_line(tmp_path):
    src = _nvfp4_checkpoint(tmp_path)
    r = subprocess.run([sys.executable, "-m", "grit.cli", "convert", str(src),
                        str(tmp_path / "oss"), "--to", "gpt-oss"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--allow-requant" in r.stderr
    r = subprocess.run([sys.executable, "-m", "grit.cli", "convert", str(src),
                        str(tmp_path / "oss"), "--to", "gpt-oss", "--allow-requant", "-j", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    v = json.loads((tmp_path / "oss" / PROOF_FILE).read_text())["weights"][0]["verdict"]
    assert (f"model.layers.0.mlp.down_proj.weight: re-quantised into "
            f"{grit.GRADE_MXFP4.canonical}: max abs {v['max_abs']:.6g}, RMS {v['rms']:.6g}, "
            f"max {v['max_ulps']} ulp(s)") in r.stdout
    assert r.stderr == ""                                   # no bar on a pipe


@pytest.mark.parametrize("grade, to, want", [
    (grit.GRADE_MXFP4, "modelopt", grit.GRADE_NVF4.canonical),
    (grit.GRADE_Q4KS, "compressed-tensors", "grit1(e=s8,k0=32,s0=binary32,esr=ratiomaxabs)"),
    (grit.GRADE_NVF4, "gpt-oss", grit.GRADE_MXFP4.canonical),
])
def test_the_nearest_format_is_written_and_proved(tmp_path, grade, to, want):
    rng = np.random.default_rng(4)
    src = tmp_path / "m.safetensors"
    a = grit.encode(rng.standard_normal((16, 512)).astype(np.float32), grade)
    grit.save(str(src), {"x.weight": a})
    assert requant_grade(to, a).canonical == want
    rep = convert(str(src), str(tmp_path / "out"), to, allow_requant=True)
    assert rep.counts == {"re-quantised": 1}
    assert rep.proof["weights"][0]["target"]["grade"] == want
    assert verify(str(src), str(tmp_path / "out")).ok


def test_nothing_to_requantise_is_the_same_conversion(tmp_path):
    src = _nvfp4_checkpoint(tmp_path)
    convert(str(src), str(tmp_path / "a"), "modelopt")
    convert(str(src), str(tmp_path / "b"), "modelopt", allow_requant=True)
    assert tree_digest(tmp_path / "a") == tree_digest(tmp_path / "b")


def _sharded(tmp_path, shards=3, per=4):
    rng = np.random.default_rng(8)
    src = tmp_path / "src"
    src.mkdir()
    grades = (grit.GRADE_MXFP4, grit.GRADE_NVF4)
    for s in range(shards):
        t = {}
        for i in range(per):
            k = s * per + i
            t[f"model.layers.{k}.mlp.up_proj.weight"] = grit.encode(
                rng.standard_normal((8 + k, 64 * (1 + k % 3))).astype(np.float32),
                grades[k % 2])
            t[f"model.layers.{k}.input_layernorm.weight"] = rng.standard_normal(
                8 + k).astype(np.float32)
        grit.save(str(src / f"model-{s:05d}.safetensors"), t)
    (src / "config.json").write_text("{}")
    (src / "tokenizer.json").write_text("{}")
    return src


@pytest.mark.parametrize("to", ["compressed-tensors", "grit"])
def test_jobs_write_the_same_output(tmp_path, to):
    src = _sharded(tmp_path)
    one = convert(str(src), str(tmp_path / "j1"), to, jobs=1)
    four = convert(str(src), str(tmp_path / "j4"), to, jobs=4)
    assert one.proof == four.proof
    assert tree_digest(tmp_path / "j1") == tree_digest(tmp_path / "j4")
    # and each file is what grit.save writes for the same tensors
    from grit import conventions
    for n in sorted(os.listdir(src)):
        if n.endswith(".safetensors"):
            em = conventions.emit(to, dict(grit.load(str(src / n))))
            grit.save(str(tmp_path / "saved.safetensors"), em.tensors)
            assert (tmp_path / "saved.safetensors").read_bytes() == \
                (tmp_path / "j4" / n).read_bytes()
    with pytest.raises(grit.GritUsageError, match="--jobs"):
        convert(str(src), str(tmp_path / "j0"), to, jobs=0)


@pytest.mark.parametrize("jobs", [1, 3])
def test_digests_ahead_prove_the_same(tmp_path, monkeypatch, jobs):
    """The fast path (each file's source digests computed in threads while it
    is written, the next file's while it is proved, several weights per
    thread) gives the proof and the files of the general path (each digest
    in the proof's pass), and the digests are §6.5's of the source arrays."""
    import grit.convert as gc
    src = _sharded(tmp_path, shards=3, per=5)
    monkeypatch.setattr(gc, "_RELEASE_STEP", 1000)      # many rounds, lanes refilled
    monkeypatch.setattr(gc, "_CMP_STEP", 300)
    passes = []
    general = gc._digest_and_compare
    monkeypatch.setattr(gc, "_digest_and_compare", lambda *a: passes.append(1) or general(*a))
    fast = convert(str(src), str(tmp_path / "fast"), "compressed-tensors", jobs=jobs)
    assert not passes
    monkeypatch.setattr(gc, "_PROOF_AHEAD", False)
    slow = convert(str(src), str(tmp_path / "slow"), "compressed-tensors", jobs=jobs)
    assert len(passes) == len(slow.proof["weights"]) == 15
    assert fast.proof == slow.proof
    assert tree_digest(tmp_path / "fast") == tree_digest(tmp_path / "slow")
    arrays = {}
    for n in sorted(os.listdir(src)):
        if n.endswith(".safetensors"):
            arrays.update(grit.load(str(src / n)))
    for w in fast.proof["weights"]:
        assert w["source"]["digest"] == arrays[w["name"]].digest.hex()


@pytest.mark.parametrize("jobs", [1, 3])
def test_a_written_byte_that_differs_is_found_by_both_paths(tmp_path, monkeypatch, jobs):
    """Where a written plane is not the source's bytes (here: one byte of
    the 5th weight's element codes changed after it is written), the one
    pass's comparison finds it as the general path does: the same proof,
    the target's own digest, and the verdict the decodes give."""
    import grit.convert as gc
    src = _sharded(tmp_path, shards=3, per=5)
    monkeypatch.setattr(gc, "_RELEASE_STEP", 1000)
    clean = convert(str(src), str(tmp_path / "clean"), "compressed-tensors", jobs=jobs)
    copy = gc._copy_or_write
    seen = []

    def spoil(src_fd, src_off, fd, buf, offset):
        copy(src_fd, src_off, fd, buf, offset)
        seen.append(offset)
        if len(seen) == 9:              # (with jobs=1: a weight's codes in the 2nd file)
            last = offset + memoryview(buf).nbytes - 1
            os.pwrite(fd, bytes([int(np.asarray(buf).reshape(-1)[-1]) ^ 0x10]), last)
    monkeypatch.setattr(gc, "_copy_or_write", spoil)
    monkeypatch.setattr(gc, "_run", lambda pool, fn, items: [fn(x) for x in items])
    fast = convert(str(src), str(tmp_path / "fast"), "compressed-tensors", jobs=jobs)
    seen.clear()
    monkeypatch.setattr(gc, "_PROOF_AHEAD", False)
    slow = convert(str(src), str(tmp_path / "slow"), "compressed-tensors", jobs=jobs)
    assert fast.proof == slow.proof
    changed = [(w, c) for w, c in zip(fast.proof["weights"], clean.proof["weights"])
               if w != c]
    assert len(changed) == 1
    w, c = changed[0]
    assert w["source"] == c["source"] and w["target"]["digest"] != c["target"]["digest"]
    assert w["verdict"]["verdict"] == "scalar-rounded" and w["verdict"]["differ"] >= 1
    assert verify(str(src), str(tmp_path / "fast")).ok


@pytest.mark.parametrize("fails", ["write", "digest"])
def test_a_failure_leaves_no_digest_running(tmp_path, monkeypatch, fails):
    """An error while a file is written, or in a digest thread, reaches the
    caller, and no digest thread is left running (nothing is moved into
    place)."""
    import threading

    import grit.convert as gc
    src = _sharded(tmp_path, shards=3, per=4)
    monkeypatch.setattr(gc, "_RELEASE_STEP", 512)

    def boom(*a, **k):
        raise OSError(28, f"no space left ({fails})")
    if fails == "write":
        monkeypatch.setattr(gc, "_pwrite", boom)
    else:
        monkeypatch.setattr(gc, "_digests_compared", boom)
    with pytest.raises(OSError, match=fails):
        convert(str(src), str(tmp_path / "out"), "compressed-tensors", jobs=2)
    assert not [t for t in threading.enumerate() if t.name == "grit-digest"]
    assert sorted(os.listdir(tmp_path)) == ["src"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=70), st.integers(0, 7), st.integers(0, 7), st.data())
def test_word_comparison_equals_byte_comparison(data, sx, sy, draw):
    """_equal compares 64-bit words where both arrays are aligned to them:
    it says what a byte comparison says, for any alignment, length and
    change."""
    import grit.convert as gc
    bx, by = np.zeros(len(data) + 16, np.uint8), np.zeros(len(data) + 16, np.uint8)
    x, y = bx[sx:sx + len(data)], by[sy:sy + len(data)]
    x[:] = np.frombuffer(data, np.uint8)
    y[:] = x
    if data and draw.draw(st.booleans()):
        y[draw.draw(st.integers(0, len(data) - 1))] ^= draw.draw(st.integers(1, 255))
    assert gc._equal(x, y) is bool(np.array_equal(x, y))
    assert gc._equal(x, y[:-1]) is (len(data) == 0)        # lengths differ: never equal


def test_progress_counts_every_byte_twice_in_order(tmp_path):
    src = _sharded(tmp_path, shards=2, per=3)
    seen = []
    convert(str(src), str(tmp_path / "out"), "grit", progress=lambda *a: seen.append(a),
            jobs=2)
    total = 2 * sum(os.path.getsize(src / n) for n in os.listdir(src)
                    if n.endswith(".safetensors"))
    assert {t for _, _, t in seen} == {total}
    done = [d for _, d, _ in seen]
    assert done == sorted(done) and done[0] == 0
    assert done[-1] == total
    assert [os.path.basename(f) for f, d, _ in seen if d == 0] == ["model-00000.safetensors"]


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_the_bar_is_drawn_on_a_terminal_only(monkeypatch):
    from grit.cli import _convert_progress
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    with _convert_progress() as update:
        update("/x/model-00001\x1b[2J[bold].safetensors", 5, 10)
    text = err.getvalue()
    assert "converting" in text and "50%" in text
    assert "model-00001\\x1b[2J[bold].safetensors" in text     # escaped, not markup
    with _convert_progress() as update:
        update("/x/model-00002.safetensors")               # a file alone: no count
    assert "model-00002.safetensors" in err.getvalue()
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with _convert_progress() as update:
        assert update is None


def test_the_fast_verdicts_are_the_decode_comparison():
    """Every way quick_verdict can answer — stored planes compared (with the
    comparison given or made), canonical planes compared, the decodes
    compared — answers as verdict() does."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    a = grit.encode(x, grit.GRADE_MXFP4)
    moved = grit.relayout(a, L.COL_MAJOR)                # other placement, same decode
    flipped = bytearray(bytes(a.planes[0]))
    flipped[7] ^= 0x10
    changed = grit.GritArray(a.descriptor, a.shape, [bytes(flipped), a.planes[1], b"", b""])
    moved_changed = grit.relayout(changed, L.COL_MAJOR)
    for p, q, want in ((a, moved, "bit-exact"), (moved, a, "bit-exact"),
                       (a, moved_changed, "scalar-rounded"), (a, changed, "scalar-rounded")):
        assert quick_verdict(p, q) == verdict(p, q), (p.descriptor, q.descriptor)
        assert verdict(p, q)["verdict"] == want
    # the caller's own comparison of the stored planes is taken where placements agree
    assert quick_verdict(a, changed, False) == verdict(a, changed)
    assert quick_verdict(a, grit.GritArray(a.descriptor, a.shape, list(a.planes)), True) == \
        verdict(a, a)


def test_a_failure_while_writing_leaves_nothing(tmp_path, monkeypatch):
    """The output is written into a temporary folder and moved into place
    only when complete: a write that fails half way leaves neither."""
    import grit.convert as gc
    src = _sharded(tmp_path, shards=2, per=2)
    before = tree_digest(src)
    calls = []
    real = gc._pwrite

    def failing(fd, buf, offset):
        calls.append(offset)
        if len(calls) == 5:
            raise OSError(28, "No space left on device")
        real(fd, buf, offset)
    monkeypatch.setattr(gc, "_pwrite", failing)
    with pytest.raises(OSError, match="No space"):
        convert(str(src), str(tmp_path / "out"), "compressed-tensors", jobs=2)
    assert sorted(os.listdir(tmp_path)) == ["src"]
    assert tree_digest(src) == before


@pytest.mark.parametrize("copy", ["kernel", "refused", "absent"])
def test_planes_copied_file_to_file_are_the_bytes_save_writes(tmp_path, monkeypatch, copy):
    """A plane that is a view of the source file is copied by the kernel
    (copy_file_range); where the file system refuses, or the platform has
    none, it is written from memory; the file is the same either way."""
    import errno

    import grit.convert as gc
    from grit import conventions
    rng = np.random.default_rng(10)
    src = tmp_path / "m.safetensors"
    grit.save(str(src), {"x.weight": grit.GritArray(
        grit.GRADE_MXFP4.descriptor(group_axis=1), (64, 8192),
        [rng.integers(0, 256, 64 * 4096, dtype=np.uint8),
         rng.integers(120, 130, 64 * 256, dtype=np.uint8), b"", b""])})
    calls = []
    real = os.copy_file_range

    def counting(*a):
        calls.append(a[2])
        if copy == "refused":
            raise OSError(errno.EXDEV, "cross-device")
        return real(*a)
    monkeypatch.setattr(gc, "_COPY_RANGE", None if copy == "absent" else counting)
    rep = convert(str(src), str(tmp_path / "ct"), "compressed-tensors")
    assert rep.counts == {"bit-exact": 1}
    assert (calls == [64 * 4096]) if copy != "absent" else not calls   # the 256 KiB codes
    em = conventions.emit("compressed-tensors", dict(grit.load(str(src))))
    grit.save(str(tmp_path / "saved.safetensors"), em.tensors)
    saved, out = _parts(tmp_path / "saved.safetensors"), _parts(tmp_path / "ct" / "m.safetensors")
    # the same header (but for the spaces that place the data section) and data
    assert out[0].rstrip(b" ") == saved[0].rstrip(b" ") and out[1] == saved[1]


def _parts(path) -> tuple[bytes, bytes]:
    """(header, data section) of a safetensors file."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return raw[8:8 + n], raw[8 + n:]


def _starts(path) -> dict[str, int]:
    """Each entry's offset in the safetensors file ``path``, from its header."""
    head = _parts(path)[0]
    return {k: 8 + len(head) + e["data_offsets"][0]
            for k, e in json.loads(head).items() if k != "__metadata__"}


def test_copied_tensors_keep_their_place_in_the_page(tmp_path):
    """The output's header is padded so that the tensors copied from the
    source lie at the same offset within a 4096-byte page as in the source
    (a copy that keeps it runs faster); the official safetensors reader
    reads the file as the emitted tensors, and the padding is spaces."""
    from safetensors.numpy import load_file

    from grit import conventions
    rng = np.random.default_rng(12)
    src = tmp_path / "m.safetensors"
    # a small plain tensor first, so that the data section starts unaligned
    grit.save(str(src), {"x.weight": grit.GritArray(
        grit.GRADE_MXFP4.descriptor(group_axis=1), (64, 8192),
        [rng.integers(0, 256, 64 * 4096, dtype=np.uint8),
         rng.integers(120, 130, 64 * 256, dtype=np.uint8), b"", b""]),
        "b": rng.standard_normal(3).astype(np.float32)})
    convert(str(src), str(tmp_path / "ct"), "compressed-tensors")
    a, b = _starts(src), _starts(tmp_path / "ct" / "m.safetensors")
    assert b["x.weight_packed"] % 4096 == a["x.weight.grit.data"] % 4096
    # without the padding the codes would not keep their place (the check is not vacuous)
    em = conventions.emit("compressed-tensors", dict(grit.load(str(src))))
    grit.save(str(tmp_path / "saved.safetensors"), em.tensors)
    assert _starts(tmp_path / "saved.safetensors")["x.weight_packed"] % 4096 != \
        a["x.weight.grit.data"] % 4096
    head = _parts(tmp_path / "ct" / "m.safetensors")[0]
    assert len(head) % 8 == 0 and head == head.rstrip(b" ") + b" " * (len(head) - len(
        head.rstrip(b" ")))
    got = load_file(str(tmp_path / "ct" / "m.safetensors"))
    want = load_file(str(tmp_path / "saved.safetensors"))
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]), k


def test_the_proof_pass_hashes_compares_and_gives_back_every_byte(monkeypatch):
    """The digest of the one pass is §6.5's; the comparison finds a change
    anywhere; every byte of both arrays' planes is handed back once, in
    order, whatever the steps."""
    import grit.convert as gc
    monkeypatch.setattr(gc, "_CMP_STEP", 1000)
    monkeypatch.setattr(gc, "_RELEASE_STEP", 3000)
    rng = np.random.default_rng(11)
    a = grit.encode(rng.standard_normal((40, 320)).astype(np.float32), grit.GRADE_NVF4)
    b = grit.GritArray(a.descriptor, a.shape, [bytes(p) for p in a.planes])
    got: dict[str, list] = {"a": [], "b": []}
    d, same = gc._digest_and_compare(a, b, lambda z: got["a"].append(bytes(z)),
                                     lambda z: got["b"].append(bytes(z)))
    assert same and d == a.digest.hex()
    planes = b"".join(bytes(p) for p in a.planes)
    assert b"".join(got["a"]) == planes == b"".join(got["b"])
    for i in (0, 999, 1000, 6399, len(bytes(a.planes[0])) + 3):
        q = bytearray(planes)
        q[i] ^= 1
        n0, n1 = len(bytes(a.planes[0])), len(bytes(a.planes[1]))
        c = grit.GritArray(a.descriptor, a.shape, [bytes(q[:n0]), bytes(q[n0:n0 + n1]),
                                                   bytes(q[n0 + n1:]), b""])
        assert gc._digest_and_compare(a, c) == (d, False)


def test_a_converted_source_is_built_one_weight_at_a_time(tmp_path, monkeypatch):
    """GPTQ's weights are converted (repacked) from the file's tensors: the
    convert builds each when it handles it (never a file's worth at once)
    and proves the same as grit.load's eager conversion."""
    from grit.io import recognise
    from test_load_gptq_awq import P, gptq_case, gptq_cfg, write
    _, _, _, tensors = gptq_case(4, 32)
    path = write(tmp_path, tensors, gptq_cfg(4, 32))
    eager = grit.load(path)
    lazy = recognise.with_recognised(path, grit.io.safetensors.load(path),
                                     defer_converted=True)
    assert isinstance(lazy[f"{P}.weight"], recognise.Deferred)
    assert lazy[f"{P}.weight"].build().digest == eager[f"{P}.weight"].digest
    built = []
    real = recognise.Deferred.build
    monkeypatch.setattr(recognise.Deferred, "build",
                        lambda self: (built.append(self.record.name), real(self))[1])
    rep = convert(os.path.dirname(path), str(tmp_path / "g"), "grit")
    assert rep.counts == {"bit-exact": 1}
    assert built == [f"{P}.weight"] * 3          # checked, written, proved: built each time
    [w] = rep.proof["weights"]
    assert w["source"]["digest"] == eager[f"{P}.weight"].digest.hex()
    assert verify(os.path.dirname(path), str(tmp_path / "g")).ok
    # compressed-tensors holds symmetric codes only: the asymmetric weight is re-quantised
    with pytest.raises(grit.GritUsageError, match="--allow-requant"):
        convert(os.path.dirname(path), str(tmp_path / "ct"), "compressed-tensors")
    rep = convert(os.path.dirname(path), str(tmp_path / "ct"), "compressed-tensors",
                  allow_requant=True)
    assert rep.counts == {"re-quantised": 1}
    assert verify(os.path.dirname(path), str(tmp_path / "ct")).ok


def test_the_requant_error_of_values_that_are_not_finite(monkeypatch):
    """NaN is NaN whatever its bits; ±inf and NaN against a number differ and
    are counted apart; the finite elements alone make max abs, RMS and ulps
    (here by hand: 1 → 1.5 is 0.5 and 2^22 ulps; −0 → +0 is nothing)."""
    import grit.convert as gc
    x = np.array([1.0, np.nan, np.inf, -0.0, 2.0, np.nan], np.float32)
    y = np.array([1.5, np.nan, np.inf, 0.0, np.inf, 3.0], np.float32)
    y[1] = np.frombuffer(np.uint32(0x7FC00001).tobytes(), np.float32)[0]   # another NaN

    class Fixed:
        def __init__(self, v):
            self.v, self.shape = v, v.shape
    monkeypatch.setattr(gc, "decode", lambda a: a.v)
    assert gc.requant_error(Fixed(x), Fixed(y)) == {
        "verdict": "re-quantised", "elements": 6, "differ": 4, "max_abs": 0.5,
        "rms": math.sqrt(0.25 / 2), "max_ulps": 2 ** 22, "nonfinite": 2}


def test_too_little_room_is_refused_before_writing(tmp_path, monkeypatch):
    import collections

    import grit.convert as gc
    src = _sharded(tmp_path, shards=2, per=2)
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(gc.shutil, "disk_usage", lambda p: usage(10**6, 10**6 - 1000, 1000))
    with pytest.raises(grit.GritUsageError, match=r"needs \d+ bytes of model files, and 1000 "):
        convert(str(src), str(tmp_path / "out"), "grit")
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_refusals_the_bytes_decide_are_reported_together_in_file_order(tmp_path,
                                                                        monkeypatch):
    """A refusal found while writing (an emitter that looks at bytes the
    check did not read) is collected for every weight, listed in file
    order for any --jobs, and nothing is moved into place."""
    import dataclasses

    import grit.convert as gc
    from grit import conventions
    src = _sharded(tmp_path, shards=1, per=6)
    real = conventions.by_name("grit")
    seen: dict[str, int] = {}

    def emit(name, a):
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1 and int(name.split(".")[2]) % 2:      # the odd layers, writing
            raise grit.GritUsageError(f"{name}: grit cannot hold these bytes")
        return real.emit(name, a)
    fake = dataclasses.replace(real, emit=emit)
    monkeypatch.setattr(gc.conventions, "by_name", lambda n: fake if n == "grit" else real)
    with pytest.raises(grit.GritUsageError) as e:
        convert(str(src), str(tmp_path / "out"), "grit", jobs=3)
    assert str(e.value).splitlines() == ["grit: 3 array(s) cannot be written:"] + [
        f"  model.layers.{k}.mlp.up_proj.weight: grit cannot hold these bytes"
        for k in (1, 3, 5)]
    assert sorted(os.listdir(tmp_path)) == ["src"]


def _fsynced(monkeypatch) -> list[str]:
    """The paths os.fsync is called on from now on (read from /proc)."""
    seen: list[str] = []
    real = os.fsync

    def fsync(fd):
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    return seen


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to name an fd")
@pytest.mark.parametrize("source", ["safetensors", "gguf"])
def test_fsync_flushes_every_output_file_and_folder_only_when_asked(tmp_path, monkeypatch,
                                                                    source):
    """--fsync: every file of the output and its folder (while staged), then
    the folder it is moved into, are flushed before convert returns; without
    it nothing is (as a copy); the bytes are the same either way.  Both
    converters (safetensors, and GGUF on one side) go through it."""
    if source == "gguf":
        from test_convert_gguf import _gguf_py_file
        src = tmp_path / "q8.gguf"
        _gguf_py_file(str(src), "Q8_0")
        to = "grit"
    else:
        src, to = _sharded(tmp_path, shards=2, per=2), "compressed-tensors"
    seen = _fsynced(monkeypatch)
    convert(str(src), str(tmp_path / "plain"), to)
    assert seen == []
    out = tmp_path / "out" / "synced"
    seen.clear()
    convert(str(src), str(out), to, fsync=True)
    seen[:] = [p for p in seen if not p.endswith(".tmp")]
    staging = os.path.dirname(seen[0])
    assert os.path.basename(staging).startswith(".grit-convert-")
    files = sorted(p.name for p in out.iterdir())
    assert sorted(os.path.basename(p) for p in seen[:-2]) == files
    assert all(os.path.dirname(p) == staging for p in seen[:-2])
    assert seen[-2:] == [staging, str(tmp_path / "out")]
    assert tree_digest(tmp_path / "plain") == tree_digest(out)


def test_the_pages_a_converted_weight_is_built_from_are_given_back(tmp_path, monkeypatch):
    """A weight a converter builds (GPTQ) is built from the file tensors'
    mapped pages: convert (its check, its write, its proof) and verify each
    give back every byte of every such tensor once the weight is used, as they
    do a weight that is a view of the file."""
    import test_load_gptq_awq as G
    from grit.io import safetensors as st_io
    from grit.io.source import LocalFile
    _, _, _, tensors = G.gptq_case(4, 32)
    path = G.write(tmp_path, tensors, G.gptq_cfg(4, 32))
    hdr = st_io.read(path)
    spans = {tn: (hdr.span(tn)[0], sum(hdr.span(tn))) for tn in hdr.entries}
    assert len(spans) >= 4                        # qweight, qzeros, scales, g_idx
    given: list[tuple[int, int]] = []
    real = LocalFile.release

    def release(self, buf):
        off = self.locate(buf)
        if off is not None and os.path.samefile(self.name, path):
            given.append((off, off + memoryview(buf).nbytes))
        return real(self, buf)
    monkeypatch.setattr(LocalFile, "release", release)

    def covered() -> set[str]:
        return {tn for tn, (a, b) in spans.items()
                if any(x <= a and b <= y for x, y in given)}
    convert(os.path.dirname(path), str(tmp_path / "g"), "grit")
    assert covered() == set(spans)
    given.clear()
    assert verify(os.path.dirname(path), str(tmp_path / "g")).ok
    assert covered() == set(spans)


@pytest.mark.parametrize("lanes", (None, 1))
def test_verify_groups_weights_and_finds_a_change_in_its_weight_alone(tmp_path, monkeypatch,
                                                                      lanes):
    """grit verify digests and compares the weights of a file a few at once
    (their chains interleaved) or, with one lane, one at a time: a clean
    output holds either way, and a byte changed in one weight of a group is
    a problem of that weight alone."""
    import grit.convert as gc
    seen: list[int] = []
    real = gc._digests_compared

    def counting(a, b, **kw):
        seen.append(len(a))
        return real(a, b, **kw)
    monkeypatch.setattr(gc, "_digests_compared", counting)
    if lanes is not None:
        monkeypatch.setattr(gc, "LANES", lanes)
    rng = np.random.default_rng(13)
    desc = grit.GRADE_MXFP4.descriptor(group_axis=1)
    src = tmp_path / "m.safetensors"
    grit.save(str(src), {f"l{i}.weight": grit.GritArray(
        desc, (32, 4096), [rng.integers(0, 256, 32 * 2048, dtype=np.uint8),
                           rng.integers(120, 130, 32 * 128, dtype=np.uint8), b"", b""])
        for i in range(5)})
    out = tmp_path / "ct"
    convert(str(src), str(out), "compressed-tensors")
    seen.clear()
    assert verify(str(src), str(out)).ok
    assert seen == ([4, 1] if lanes is None else [1] * 5)
    victim = "l2.weight"
    starts = _starts(out / "m.safetensors")
    at = starts["l2.weight_packed"] + 1000
    raw = bytearray((out / "m.safetensors").read_bytes())
    raw[at] ^= 0x40
    (out / "m.safetensors").write_bytes(bytes(raw))
    rep = verify(str(src), str(out))
    assert not rep.ok and rep.checked == 5
    assert rep.problems and all(p.startswith(victim + ":") for p in rep.problems), rep.problems
    assert any("target digest" in p for p in rep.problems)
