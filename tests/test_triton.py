"""grit.interop.triton: the Triton decode kernels give grit.decode's bits —
on every conformance vector of a grade they serve, and on fuzzed planes and
ggml blocks (GRIT_TRITON_FUZZ_BLOCKS per type, 10^5 by default, each type
one launch) — and their GPU code has no FMA and no flush-to-zero.

No GPU is needed: the kernels run under Triton's interpreter
(TRITON_INTERPRET=1, numpy on the CPU), set here before the module is
imported; the PTX check compiles them for an sm_90 target, which needs no
device either."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

os.environ["TRITON_INTERPRET"] = "1"           # before grit.interop.triton decorates its kernels

import grit  # noqa: E402

torch = pytest.importorskip("torch", reason="torch is not installed (the [torch] extra)")
pytest.importorskip("triton", reason="triton is not installed (the [torch] extra)")
gtr = pytest.importorskip("grit.interop.triton")

from grit.ggml import CONVERTED, ZERO_COPY  # noqa: E402
from grit.io import gguf as G  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = json.loads((ROOT / "spec" / "conformance" / "vectors.json").read_text())
FUZZ = int(os.environ.get("GRIT_TRITON_FUZZ_BLOCKS", 100_000))

REGISTERED = {"MXFP4": grit.GRADE_MXFP4, "MXFP4_RNE": grit.GRADE_MXFP4_RNE,
              "NVF4": grit.GRADE_NVF4, "NVF4_RTZ": grit.GRADE_NVF4_RTZ,
              "Q4KS": grit.GRADE_Q4KS, "I8S24": grit.GRADE_I8S24}


def bits(x) -> np.ndarray:
    x = x.numpy() if isinstance(x, torch.Tensor) else x
    return np.ascontiguousarray(x).view(np.uint32)


def same(got: "torch.Tensor", want: np.ndarray) -> None:
    assert tuple(got.shape) == want.shape and got.dtype == torch.float32
    g, w = bits(got).reshape(-1), bits(want).reshape(-1)
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, (f"{bad.size} of {w.size} differ; first at {bad[0]}: "
                           f"0x{g[bad[0]]:08x} != 0x{w[bad[0]]:08x}")


def test_runs_under_the_interpreter():
    assert gtr.INTERPRETED


# -- the conformance vectors

def _vector_array(v):
    for g in DOC["grades"].values():
        grit.register_grade(g["canonical"])
    raw, planes, off = bytes.fromhex(v["payload_hex"]), [], 0
    for n in v["plane_bytes"]:
        planes.append(raw[off:off + n])
        off += n
    return grit.GritArray(v["desc_hex"], v["shape"], planes)


@pytest.mark.parametrize("v", DOC["vectors"], ids=[v["name"] for v in DOC["vectors"]])
def test_conformance_vector(v):
    a = _vector_array(v)
    if v["grade"] not in ("GRADE_" + n for n in REGISTERED) and not gtr.supports(a):
        with pytest.raises(grit.GritUsageError, match="no kernel"):
            gtr.decode(a)
        return
    assert gtr.supports(a), v["grade"]
    want = np.array([int(h, 16) for h in v["decoded_f32_bits"]],
                    dtype=np.uint32).view(np.float32).reshape(v["shape"])
    same(gtr.decode(a), want)


def test_every_registered_grade_has_conformance_vectors_the_kernels_pass():
    served = {v["grade"] for v in DOC["vectors"] if gtr.supports(_vector_array(v))}
    assert {"GRADE_" + n for n in REGISTERED} <= served


# -- encoded arrays: shapes and group axes

@pytest.mark.parametrize("name", list(REGISTERED))
@pytest.mark.parametrize("shape,axis", [((3, 512), 1), ((512, 6), 0), ((2, 3, 256), 2),
                                        ((256,), 0)])
def test_encoded_arrays(name, shape, axis):
    rng = np.random.default_rng(hash((name, shape)) % 2**32)
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(10) ** rng.integers(
        -20, 20, shape).astype(np.float32)
    x.reshape(-1)[7] = np.nan
    x.reshape(-1)[100] = -0.0
    a = grit.encode(x, REGISTERED[name], group_axis=axis)
    same(gtr.decode(a), grit.decode(a))


# -- fuzzed canonical planes: every byte value, FUZZ groups per frame

@pytest.mark.parametrize("name", ["MXFP4", "NVF4", "Q4KS", "I8S24"])
def test_fuzzed_planes(name):
    g = REGISTERED[name]
    d = g.descriptor(group_axis=1)
    block = 256 if name == "Q4KS" else d.k0        # Q4KS: the super-block
    shape = (-(-FUZZ * block // 2048), 2048)
    sizes = grit.plane_sizes(d, shape).sizes
    rng = np.random.default_rng(11)
    planes = [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]
    if name == "NVF4":
        for s1 in (0x3F800000, 0x00000001, 0x7F7FFFFF, 0x7FC00001, 0xFF800000, 0x80000000,
                   0x3DCCCCCD):
            planes[2] = np.frombuffer(np.uint32(s1).tobytes(), np.uint8).copy()
            a = grit.GritArray(d, shape, planes)
            same(gtr.decode(a), grit.decode(a))
        return
    a = grit.GritArray(d, shape, planes)
    assert a.size // block >= FUZZ
    same(gtr.decode(a), grit.decode(a))


# -- the ggml block structs: FUZZ random blocks per type, special scales

F16 = [0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE01, 0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF,
       0x3C00, 0xC000]
F32 = [0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFC00001, 0, 0x80000000, 1,
       0x807FFFFF, 0x7F7FFFFF, 0x3F800000]
E8M0 = [0xFF, 0x00, 0x01, 0xFE, 0x7F]
E4M3 = [0x7F, 0xFF, 0x00, 0x80, 0x01, 0x7E, 0xFE, 0x38]
# byte offsets of each type's scale fields: (offset, kind)
FIELDS = {"Q8_0": [(0, F16)], "MXFP4": [(0, E8M0)], "NVFP4": [(s, E4M3) for s in range(4)],
          "Q4_K": [(0, F16), (2, F16)], "Q4_0": [(0, F16)], "Q4_1": [(0, F16), (2, F16)],
          "Q5_0": [(0, F16)], "Q5_1": [(0, F16), (2, F16)], "Q2_K": [(80, F16), (82, F16)],
          "Q5_K": [(0, F16), (2, F16)], "Q6_K": [(208, F16)], "Q8_K": [(0, F32)],
          "TQ2_0": [(64, F16)]}


def fuzzed_blocks(name: str, nb: int, rng) -> np.ndarray:
    """nb random blocks; each scale field takes a special code in half of them."""
    t = ZERO_COPY.get(name) or CONVERTED[name]
    b = rng.integers(0, 256, (nb, t.block_bytes), dtype=np.uint8)
    for off, special in FIELDS[name]:
        width = 4 if special is F32 else (2 if special is F16 else 1)
        pick = rng.random(nb) < 0.5
        k = min(nb, len(special))
        pick[:k] = True
        codes = np.array(special, dtype=np.uint32)[rng.integers(0, len(special), nb)]
        codes[:k] = special[:k]
        for k in range(width):
            b[pick, off + k] = (codes[pick] >> np.uint32(8 * k)).astype(np.uint8)
    if name == "Q6_K":                       # s8 sub-block scales −128, 0, 127
        b[:, 192:208][rng.random((nb, 16)) < 0.1] = 0x80
    return b


def test_the_kernel_table_is_grit_ggml():
    assert set(gtr.BLOCK_TYPES) == set(ZERO_COPY) | set(CONVERTED)


@pytest.mark.parametrize("name", list(FIELDS))
def test_fuzzed_ggml_blocks(name, monkeypatch):
    t = ZERO_COPY.get(name) or CONVERTED[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    b = fuzzed_blocks(name, FUZZ, rng)
    shape = (FUZZ // 8, 8 * t.block_elems) if FUZZ % 8 == 0 else (FUZZ, t.block_elems)
    # the array as grit.io.gguf loads it: zero-copy, or deferred over the blocks
    a = G.converted(name, b.reshape(-1), shape) if name in ZERO_COPY \
        else G._deferred(name, b.reshape(-1), t.block_bytes, shape)
    want = grit.decode(a)
    # gtr.decode(a) chooses the blocks kernel: decode_blocks of this type over
    # the file's blocks as they are (so the FUZZ blocks run through the
    # interpreter once, not twice), and gives grit.decode's bits
    calls = []

    def spy(what, data, shp):
        calls.append((what, np.array_equal(data.cpu().numpy().reshape(-1), b.reshape(-1)),
                      tuple(shp)))
        return blocks_kernel(what, data, shp)
    blocks_kernel = gtr.decode_blocks
    monkeypatch.setattr(gtr, "decode_blocks", spy)
    same(gtr.decode(a), want)
    assert calls == [(name, True, shape)]


def test_nvfp4_blocks_with_their_companion_scale():
    """NVFP4 blocks with a binary32 level-1 scale: the two-level GRIT array
    (canonical planes under the NVF4 frame with that k1) decodes the same."""
    rng = np.random.default_rng(12)
    nb, shape = 512, (64, 512)
    b = fuzzed_blocks("NVFP4", nb, rng)
    one = G.converted("NVFP4", b.reshape(-1), shape)
    c = grit.canonical(one)
    for k1, s1 in ((0, np.array([0.75], np.float32)),
                   (32, rng.standard_normal(64).astype(np.float32)),
                   (1024, np.array([np.float32(3e38), np.nan], np.float32))):
        g = G.nvfp4_scaled_grade(k1)
        two = grit.GritArray(g.descriptor(group_axis=1), shape,
                             [c.planes[0], c.planes[1], s1.tobytes(), b""])
        got = gtr.decode_blocks("NVFP4", torch.from_numpy(b.reshape(-1)), shape,
                                scale1=torch.from_numpy(s1), k1=k1)
        same(got, grit.decode(two))
        same(gtr.decode(two), grit.decode(two))          # the frame kernel, any k1


def test_arrays_loaded_from_gguf_decode_from_their_blocks(tmp_path):
    gguf = pytest.importorskip("gguf")
    rng = np.random.default_rng(13)
    path = str(tmp_path / "m.gguf")
    w = gguf.GGUFWriter(path, "grit-test")
    names = ["Q8_0", "Q4_K", "Q5_K", "Q6_K", "Q4_0"]
    for n in names:
        w.add_tensor(n, fuzzed_blocks(n, 16, rng).reshape(2, -1),
                     raw_dtype=gguf.GGMLQuantizationType[n])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    arrays = grit.load(path)
    for n in names:
        a = arrays[n]
        # read in place: the raw blocks, never relayouted planes
        assert gtr._plan(a) == ("zero-copy" if n in ZERO_COPY else "blocks", n)
        same(gtr.decode(a), grit.decode(a))


def test_refusals():
    msb = grit.encode(np.ones(64, np.float32), "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs,po=msb)")
    assert not gtr.supports(msb)
    with pytest.raises(grit.GritUsageError, match="no kernel"):
        gtr.decode(msb)
    with pytest.raises(grit.GritUsageError, match="ggml type"):
        gtr.decode_blocks("IQ4_NL", torch.zeros(18, dtype=torch.uint8), (32,))
    with pytest.raises(grit.GritUsageError, match="whole blocks"):
        gtr.decode_blocks("Q8_0", torch.zeros(34, dtype=torch.uint8), (16,))
    with pytest.raises(grit.GritUsageError, match="at least"):
        gtr.decode_blocks("Q8_0", torch.zeros(33, dtype=torch.uint8), (32,))
    with pytest.raises(grit.GritUsageError, match="companion"):
        gtr.decode_blocks("Q8_0", torch.zeros(34, dtype=torch.uint8), (32,),
                          scale1=torch.ones(1))
    m = grit.encode(np.ones((2, 64), np.float32), grit.GRADE_MXFP4)
    d, s0, s1, aux = (torch.from_numpy(np.frombuffer(bytes(p), np.uint8).copy())
                      for p in m.planes)
    with pytest.raises(grit.GritUsageError, match="scale0 plane"):
        gtr.decode_planes(m.descriptor, m.shape, [d, s0[:1], s1, aux])


# -- the GPU code: no FMA, no flush-to-zero (compiled for sm_90, no device needed)

PTX_CHECK = textwrap.dedent("""
    import json, re, sys
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    import grit.interop.triton as gtr
    out = {}
    def ptx(fn, sig, const, fusion):
        src = ASTSource(fn=fn, signature={**sig, **{k: "constexpr" for k in const}},
                        constexprs=const)
        return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"enable_fp_fusion": fusion}).asm["ptx"]
    bsig = {"src": "*u8", "s1": "*fp32", "out": "*fp32", "numel": "i64"}
    for kind, name in enumerate(gtr.BLOCK_TYPES):
        const = {"KIND": kind, "BB": gtr._block_size(name)[0], "K1": 4,
                 "HAS_S1": name == "NVFP4", "BLOCK": 1024}
        out[name] = ptx(gtr._blocks_kernel, bsig, const, False)
    fsig = {"data": "*u8", "s0": "*u8", "s1": "*u8", "aux": "*u8", "base": "*i64",
            "out": "*fp32", "numel": "i64"}
    for kind in range(4):
        out[f"frame{kind}"] = ptx(gtr._frame_kernel, fsig, {"KIND": kind, "K1": 0,
                                                            "BLOCK": 1024}, False)
    out["Q4_K fused"] = ptx(gtr._blocks_kernel, bsig, {"KIND": 3, "BB": 144, "K1": 0,
                                                       "HAS_S1": False, "BLOCK": 1024}, True)
    json.dump(out, sys.stdout)
""")


def test_gpu_code_has_no_fma_and_no_flush_to_zero():
    triton = pytest.importorskip("triton")
    from triton.backends import backends
    if "nvidia" not in backends:
        pytest.skip("this triton has no CUDA backend to compile for")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", PTX_CHECK], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    ptx = json.loads(r.stdout)
    assert triton.__version__
    for name, code in ptx.items():
        if name == "Q4_K fused":
            continue
        assert "fma" not in code, name
        assert ".ftz" not in code, name
        assert ".approx" not in code, name
        assert "mul.rn.f32" in code, name
    # the control: left to itself the compiler contracts S·q − Z into an FMA
    assert "fma.rn.f32" in ptx["Q4_K fused"]


def test_grit_linear_buffers_decode_as_on_a_gpu():
    """GritLinear on a CUDA device decodes its buffers with decode_planes:
    the same call on the CPU buffers gives the CPU path's bits."""
    from grit.interop.nn import BUFFERS, GritLinear
    rng = np.random.default_rng(14)
    w = rng.standard_normal((48, 512)).astype(np.float32)
    for grade in REGISTERED.values():
        m = GritLinear.from_array(grit.encode(w, grade))
        got = gtr.decode_planes(m.descriptor, m.weight_shape, [getattr(m, n) for n in BUFFERS])
        same(got, m.decoded_weight().numpy())
