"""The fused ggml kernels (grit/_native/ggml.c): grit.decode of an array
loaded zero-copy from GGUF reads the ggml blocks in place, and gives the same
bits as the general path (relayout to the canonical planes, then
decode_canonical) on random blocks with every element code and the special
scale bytes (NaN, ±Inf, ±0, subnormal); and the same values as gguf-py's
``gguf.quants.dequantize`` apart from the differences docs/placements.md
("GGUF") documents (canonical NaN, E2M1 code 8 = −0.0, E8M0 0xFF and E4M3
0x7F = NaN)."""
from __future__ import annotations

import numpy as np
import pytest

import grit
from grit import ggml, native
from grit.codec.decode import decode_canonical

gguf = pytest.importorskip("gguf")
T = gguf.GGMLQuantizationType
NAN = 0x7FC00000
RNG = np.random.default_rng(20261201)

pytestmark = pytest.mark.skipif(native.kernels() is None
                                or not hasattr(native.kernels(), "decode_ggml"),
                                reason="grit._kernels not built")

TYPES = ["Q8_0", "MXFP4", "NVFP4", "Q4_K"]
SHAPES = [(4, 512), (512,), (2, 3, 256), (1, 1024), (37, 256)]

# the scale bytes worth forcing: binary16 (Q8_0 d, Q4_K d and dmin), E8M0, E4M3
F16_SPECIAL = [0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF, 0x3C00]
E8M0_SPECIAL = [0xFF, 0x00, 0x01, 0xFE, 0x7F]
E4M3_SPECIAL = [0x7F, 0xFF, 0x00, 0x80, 0x01, 0x7E, 0xFE, 0x38]



def random_blocks(name: str, shape) -> np.ndarray:
    t = T[name]
    bs, ts = gguf.GGML_QUANT_SIZES[t]
    n = int(np.prod(shape)) // bs
    b = RNG.integers(0, 256, (n, ts), dtype=np.uint8)
    for i in range(n):
        if name in ("Q8_0", "Q4_K"):
            for off in ((0, 2) if name == "Q4_K" else (0,)):
                if RNG.random() < 0.5:
                    c = F16_SPECIAL[RNG.integers(len(F16_SPECIAL))]
                    b[i, off], b[i, off + 1] = c & 0xFF, c >> 8
        elif name == "MXFP4":
            if RNG.random() < 0.5:
                b[i, 0] = E8M0_SPECIAL[RNG.integers(len(E8M0_SPECIAL))]
        else:
            for s in range(4):
                if RNG.random() < 0.3:
                    b[i, s] = E4M3_SPECIAL[RNG.integers(len(E4M3_SPECIAL))]
    return b.reshape(*shape[:-1], shape[-1] // bs * ts)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """{(type, shape): (blocks, GritArray)} from one GGUF written by gguf-py."""
    path = str(tmp_path_factory.mktemp("ggml") / "blocks.gguf")
    w = gguf.GGUFWriter(path, "grit-test")
    blocks = {}
    for name in TYPES:
        for shape in SHAPES:
            key = f"{name}.{'x'.join(map(str, shape))}"
            blocks[key] = (name, shape, random_blocks(name, shape))
            w.add_tensor(key, blocks[key][2], raw_dtype=T[name])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    arrays = grit.load(path)
    return {(name, shape): (b, arrays[key]) for key, (name, shape, b) in blocks.items()}


def general(a) -> np.ndarray:
    return decode_canonical(grit.canonical(a))


def test_the_table_is_what_gguf_loads_zero_copy(loaded):
    """Every zero-copy GGUF type has a fused kernel, and every loaded array of
    those types takes it (the descriptor, not the type name, selects it)."""
    assert set(ggml.ZERO_COPY) == set(TYPES)
    assert all(t.kernel is not None for t in ggml.ZERO_COPY.values())
    for (name, shape), (_, a) in loaded.items():
        k = ggml.kernel_for(a.descriptor, a.shape)
        assert k is not None and k.name == name, (name, shape)
        bs, ts = gguf.GGML_QUANT_SIZES[T[name]]
        assert (k.block_elems, k.block_bytes) == (bs, ts)


@pytest.mark.parametrize("name", TYPES)
def test_fast_path_equals_general_path_bit_for_bit(loaded, name, monkeypatch, simd):
    calls = []
    real = native.decode_ggml
    monkeypatch.setattr(native, "decode_ggml", lambda *a: calls.append(1) or real(*a))
    for shape in SHAPES:
        _, a = loaded[(name, shape)]
        got = grit.decode(a)
        want = general(a)
        assert got.shape == want.shape == shape and got.dtype == np.float32
        assert got.flags.c_contiguous
        assert (got.view(np.uint32) == want.view(np.uint32)).all(), (name, shape)
        # the values are not trivial: NaN (canonical), ±0 and ±Inf all occur
        u = got.view(np.uint32).reshape(-1)
        if shape == (37, 256):
            assert (u == NAN).any() and (u == 0x80000000).any() and (u == 0).any()
        assert (u[np.isnan(got.reshape(-1))] == NAN).all()
    assert len(calls) == len(SHAPES)


@pytest.mark.parametrize("name", TYPES)
def test_thread_counts_and_the_switch_give_the_same_bits(loaded, name, monkeypatch, simd):
    _, a = loaded[(name, (37, 256))]
    ref = grit.decode(a).view(np.uint32)
    for nt in (1, 2, 3, 7):
        monkeypatch.setattr(native, "THREADS", nt)
        assert (grit.decode(a).view(np.uint32) == ref).all(), nt
    monkeypatch.setattr(native, "NATIVE", False)          # everything on numpy
    assert ggml.kernel_for(a.descriptor, a.shape) is None
    assert (grit.decode(a).view(np.uint32) == ref).all()


def test_other_descriptors_take_the_general_path(loaded):
    """The canonical form of a zero-copy array, and an array whose flags
    differ, are not the ggml struct: no fused kernel."""
    _, a = loaded[("Q8_0", (4, 512))]
    c = grit.canonical(a)
    assert ggml.kernel_for(c.descriptor, c.shape) is None
    d = a.descriptor
    assert ggml.kernel_for(d.replace(group_axis=0), a.shape) is None
    assert ggml.kernel_for(d.replace(flags=d.flags ^ grit.descriptor.F_INTERLEAVED),
                            a.shape) is None


def test_the_kernel_refuses_short_input():
    k = ggml.ZERO_COPY["Q4_K"].kernel
    out = np.empty(256, np.float32)
    with pytest.raises(ValueError):
        native.kernels().decode_ggml(k, b"\0" * 143, out, 1)
    with pytest.raises(ValueError):
        native.kernels().decode_ggml(native.GGML_KINDS["Q5_K"], b"\0" * 144, out, 1)
    with pytest.raises(ValueError):
        native.kernels().decode_ggml(k, b"\0" * 144, np.empty(255, np.float32), 1)


# ---------------------------------------------------------------------------
# against the peer, gguf-py's dequantize


def nibbles(q: np.ndarray, run: int) -> np.ndarray:
    """(nb, bytes) in ggml's halves order over runs of ``run`` -> codes in order"""
    q = q.reshape(q.shape[0], -1, run // 2)
    return np.concatenate([q & 15, q >> 4], axis=2).reshape(-1)


def peer_equal(got, ref, mask):
    g, r = got[mask], ref[mask]
    gn, rn = np.isnan(g), np.isnan(r)
    assert (gn == rn).all(), f"{int((gn != rn).sum())} NaN positions differ"
    assert (g.view(np.uint32)[gn] == NAN).all()
    bad = (g.view(np.uint32) != r.view(np.uint32)) & ~gn
    assert not bad.any(), f"{int(bad.sum())} values differ"


@pytest.mark.parametrize("name", TYPES)
def test_agrees_with_gguf_dequantize_apart_from_documented_differences(loaded, name, simd):
    for shape in SHAPES:
        b, a = loaded[(name, shape)]
        got = grit.decode(a).reshape(-1)
        with np.errstate(all="ignore"):                # inf · 0, 2^128 in gguf-py
            ref = gguf.quants.dequantize(b, T[name]).reshape(-1).astype(np.float32)
        blk = b.reshape(-1, gguf.GGML_QUANT_SIZES[T[name]][1])
        same = np.ones(got.size, bool)
        if name == "MXFP4":
            e = np.repeat(blk[:, 0], 32)
            q = nibbles(blk[:, 1:], 32)
            nan_scale = e == 0xFF                  # GRIT: NaN; ggml: 2^128 · v/2
            neg_zero = (q == 8) & ~nan_scale       # GRIT −0.0, ggml +0.0
            assert np.isnan(got[nan_scale]).all()
            assert (got[neg_zero].view(np.uint32) == 0x80000000).all()
            assert (ref[neg_zero].view(np.uint32) == 0).all()
            same = ~nan_scale & ~neg_zero
        elif name == "NVFP4":
            s = np.repeat(blk[:, :4].reshape(-1), 16)
            q = nibbles(blk[:, 4:], 16)
            # E4M3 0x7F/0xFF are NaN in GRIT; ggml's UE4M3 reads bit 7 and 0x7F
            # its own way (docs/placements.md): those blocks are compared for NaN only
            odd = (s & 0x7F) == 0x7F
            assert np.isnan(got[odd]).all()
            unsigned = s < 0x80
            neg_zero = (q == 8) & ~odd & unsigned
            assert (got[neg_zero].view(np.uint32) == 0x80000000).all()
            assert (ref[neg_zero].view(np.uint32) == 0).all()
            same = unsigned & ~odd & ~neg_zero
        peer_equal(got, ref, same)
        assert same.sum() > got.size // 4
