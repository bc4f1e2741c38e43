"""The fused ggml kernels of the converted block types (grit/_native/ggml.c,
kinds 4..12): decoding the raw ggml blocks in place gives the same bits as
the general path -- grit.io.gguf's conversion into the canonical planes,
then decode_canonical -- on random blocks with every element code and the
special scale codes (binary16 / binary32 ±Inf, NaN payloads, ±0,
subnormals, the largest finite; s8 −128 scales), in both SIMD loops and at
any thread count; and the same values as gguf-py's
``gguf.quants.dequantize`` apart from the one difference docs/placements.md
("GGUF") documents for these types: NaN bits (canonical 0x7FC00000)."""
from __future__ import annotations

import numpy as np
import pytest

import grit
from grit import ggml, native
from grit.codec.decode import decode_canonical
from grit.ggml import CONVERTED
from grit.io import gguf as G

gguf = pytest.importorskip("gguf")
T = gguf.GGMLQuantizationType
NAN = 0x7FC00000
NEG0 = 0x80000000
INF, NINF = 0x7F800000, 0xFF800000

pytestmark = pytest.mark.skipif(native.kernels() is None
                                or not hasattr(native.kernels(), "decode_ggml"),
                                reason="grit._kernels not built")

TYPES = list(CONVERTED)
SHAPES = [(4, 512), (512,), (2, 3, 256), (1, 1024), (37, 256), (5, 768)]
SHAPES_32 = [(7, 96), (3, 32)]          # rows of a few 32-element blocks (Q4_0 .. Q5_1)


def shapes(name):
    return SHAPES + (SHAPES_32 if CONVERTED[name].block_elems == 32 else [])


# the binary16 scale codes worth forcing: ±Inf, NaN (quiet, signalling,
# negative, with payload), ±0, the smallest and largest subnormal, the
# largest finite, 1, −2
F16_SPECIAL = [0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE01, 0x0000, 0x8000, 0x0001, 0x83FF,
               0x7BFF, 0x3C00, 0xC000]
# Q8_K's binary32 d
F32_SPECIAL = [INF, NINF, 0x7FC00000, 0x7F800001, 0xFFC00001, 0x7FFFFFFF, 0x00000000, NEG0,
               0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0x3F800000, 0xC0000000]
# byte offsets of each type's binary16 scale fields (d, and m / dmin)
F16_AT = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q2_K": (80, 82),
          "Q5_K": (0, 2), "Q6_K": (208,), "TQ2_0": (64,)}


def random_blocks(name: str, shape, rng) -> np.ndarray:
    """Random blocks of ``name`` for ``shape`` as gguf-py lays them out
    (rows of bytes): block i < len(specials) gets special code i in its first
    scale field, every other field and block a special code half the time."""
    t = CONVERTED[name]
    n = int(np.prod(shape)) // t.block_elems
    b = rng.integers(0, 256, (n, t.block_bytes), dtype=np.uint8)
    for i in range(n):
        if name == "Q8_K":
            if i < len(F32_SPECIAL) or rng.random() < 0.5:
                c = F32_SPECIAL[i % len(F32_SPECIAL) if i < len(F32_SPECIAL)
                                else rng.integers(len(F32_SPECIAL))]
                b[i, 0:4] = np.frombuffer(np.uint32(c).tobytes(), np.uint8)
            continue
        for j, off in enumerate(F16_AT[name]):
            if (i < len(F16_SPECIAL) and j == 0) or rng.random() < 0.5:
                c = F16_SPECIAL[i if i < len(F16_SPECIAL) and j == 0
                                else rng.integers(len(F16_SPECIAL))]
                b[i, off], b[i, off + 1] = c & 0xFF, c >> 8
        # zero mins (Z = +0, so a negative scale times code 0 gives −0)
        if name == "Q2_K":
            for g in range(16):
                if rng.random() < 0.2:
                    b[i, g] &= 0x0F
        if name == "Q5_K" and rng.random() < 0.3:   # PACK_K4_12B's m bits
            b[i, 8:12] = 0
            b[i, 12:16] &= 0x0F
        if name == "Q6_K":                      # s8 sub-block scales: −128, 0, 127
            for g in range(16):
                if rng.random() < 0.1:
                    b[i, 192 + g] = (0x80, 0x00, 0x7F)[rng.integers(3)]
    return b.reshape(*shape[:-1], shape[-1] // t.block_elems * t.block_bytes)


@pytest.fixture(scope="module")
def cases():
    """{(type, shape): blocks} for every converted type and shape."""
    rng = np.random.default_rng(20261201)
    return {(name, shape): random_blocks(name, shape, rng)
            for name in TYPES for shape in shapes(name)}


def general(name, blocks, shape) -> np.ndarray:
    """The general path: grit.io.gguf's conversion, then decode_canonical."""
    t = CONVERTED[name]
    return decode_canonical(G.converted(name, blocks.reshape(-1, t.block_bytes), shape))


def fused(name, blocks, shape) -> np.ndarray:
    k = ggml.type_kernel(name, shape)
    assert k is not None and k.name == name
    return k.decode(blocks, int(np.prod(shape))).reshape(shape)


def same_bits(a, b) -> bool:
    return a.shape == b.shape and bool((a.view(np.uint32) == b.view(np.uint32)).all())


# ---------------------------------------------------------------------------
# the table


def test_every_record_has_a_kernel_by_name():
    """Every ggml record's kernel id is grit.native's entry for its name, and
    the ids are ggml.c's 0..12, each once."""
    assert set(native.GGML_KINDS) == set(ggml.TYPES) == set(CONVERTED) | set(ggml.ZERO_COPY)
    assert sorted(native.GGML_KINDS.values()) == list(range(len(native.GGML_KINDS)))
    for name, t in ggml.TYPES.items():
        assert t.kernel == native.GGML_KINDS[name] and t.name == name
        assert (t.block_elems, t.block_bytes) == gguf.GGML_QUANT_SIZES[T[name]]
    for name, t in CONVERTED.items():
        assert not t.zero_copy and t.placement is None
        # the loaded array's descriptor (grit.io.gguf builds it from the record)
        b = np.zeros((1, t.block_bytes), np.uint8)
        a = G.converted(name, b, (t.block_elems,))
        assert a.descriptor.to_bytes() == t.descriptor().to_bytes()
        assert t.descriptor() == t.grade.descriptor()
    assert all(t.zero_copy for t in ggml.ZERO_COPY.values())


def test_the_kernel_ids_agree_with_the_c_side_by_name():
    """The built extension's kernels take each name's blocks (probed by
    size); the C source's enum names the same ids; an extension whose ids
    are shifted is caught and its ggml kernels are not used."""
    assert native.ggml_kind_mismatches(native.kernels()) == []
    assert native.ggml_kernels_on()
    import pathlib
    import re
    src = "".join(p.read_text() for p in pathlib.Path(grit.__file__).parent.rglob("*.[ch]"))
    enum = {m[1]: int(m[2]) for m in re.finditer(r"\bGGML_(\w+) = (\d+)", src)}
    enum.pop("KINDS", None)
    assert enum == native.GGML_KINDS

    class Shifted:       # the C side with Q4_0 and Q4_1 swapped
        def decode_ggml(self, kind, data, out, nt):
            swap = {native.GGML_KINDS["Q4_0"]: native.GGML_KINDS["Q4_1"],
                    native.GGML_KINDS["Q4_1"]: native.GGML_KINDS["Q4_0"]}
            return native.kernels().decode_ggml(swap.get(kind, kind), data, out, nt)
    bad = native.ggml_kind_mismatches(Shifted())
    assert len(bad) == 2 and "Q4_0" in bad[0] and "Q4_1" in bad[1]

    class Extra:         # one kernel more than GGML_KINDS names
        def decode_ggml(self, kind, data, out, nt):
            if kind == len(native.GGML_KINDS):
                return None
            return native.kernels().decode_ggml(kind, data, out, nt)
    assert len(native.ggml_kind_mismatches(Extra())) == 1


@pytest.mark.parametrize("name", TYPES)
def test_the_c_side_block_size_is_the_table_s(name):
    """ggml.c's own block bytes and elements for the kind equal grit.ggml's:
    one block decodes, one byte less is refused, and so is an output that is
    not whole blocks."""
    t = CONVERTED[name]
    k = t.kernel
    kk = native.kernels()
    out = np.empty(2 * t.block_elems, np.float32)
    kk.decode_ggml(k, b"\0" * (2 * t.block_bytes), out, 1)
    assert (out == 0).all()
    with pytest.raises(ValueError, match="needed"):
        kk.decode_ggml(k, b"\0" * (2 * t.block_bytes - 1), out, 1)
    with pytest.raises(ValueError, match="multiple"):
        kk.decode_ggml(k, b"\0" * (2 * t.block_bytes), out[:-1], 1)
    with pytest.raises(ValueError, match="multiple"):
        kk.decode_ggml(k, b"\0" * (2 * t.block_bytes), np.empty(t.block_elems + 8,
                                                                 np.float32), 1)
    with pytest.raises(ValueError, match="aligned"):
        kk.decode_ggml(k, b"\0" * t.block_bytes,
                       np.empty(4 * t.block_elems + 1, np.uint8)[1:], 1)


def test_unknown_kinds_are_refused():
    kk = native.kernels()
    n = len(native.GGML_KINDS)
    for kind in (n, -1, 1 << 20):
        with pytest.raises(ValueError, match="unknown kind"):
            kk.decode_ggml(kind, b"\0" * 4096, np.empty(256, np.float32), 1)


def test_the_lookup_by_type_name(monkeypatch):
    for name, k in CONVERTED.items():
        n = k.block_elems
        assert ggml.type_kernel(name, (3, 2 * n)) is k
        assert ggml.type_kernel(name, (2 * n,)) is k
        assert ggml.type_kernel(name, ()) is None                 # a scalar
        assert ggml.type_kernel(name, (2, n + 16)) is None        # not whole blocks
        assert ggml.type_kernel(name, (n + 16, n // 2)) is None
        # no blocks at all: whole blocks, an empty result
        assert ggml.type_kernel(name, (3, 0)) is k
        assert k.decode(b"", 0).shape == (0,)
    # the zero-copy types by name too; names without a kernel: None
    for name, k in ggml.ZERO_COPY.items():
        assert ggml.type_kernel(name, (k.block_elems,)) is k
    for name in ("F32", "BF16", "Q3_K", "IQ4_NL", "TQ1_0", "q4_0", ""):
        assert ggml.type_kernel(name, (256,)) is None
    monkeypatch.setattr(native, "NATIVE", False)
    assert ggml.type_kernel("Q4_0", (32,)) is None
    assert ggml.type_kernel("Q8_0", (32,)) is None
    monkeypatch.setattr(native, "NATIVE", True)
    monkeypatch.setattr(native, "_ggml_ok", False)      # ids that failed the probe
    assert ggml.type_kernel("Q4_0", (32,)) is None


# ---------------------------------------------------------------------------
# fused == general, bit for bit


@pytest.mark.parametrize("name", TYPES)
def test_fused_equals_general_path_bit_for_bit(cases, name, simd):
    for shape in shapes(name):
        b = cases[(name, shape)]
        want = general(name, b, shape)
        got = fused(name, b, shape)
        assert got.dtype == np.float32 and got.flags.c_contiguous
        assert same_bits(got, want), (name, shape, int((got.view(np.uint32)
                                                        != want.view(np.uint32)).sum()))
        u = got.view(np.uint32).reshape(-1)
        assert (u[np.isnan(got.reshape(-1))] == NAN).all()
        if shape == (37, 256):
            # the values are not trivial: NaN (canonical), ±0 and ±Inf all occur
            for bits in (NAN, NEG0, 0, INF, NINF):
                assert (u == bits).any(), (name, hex(bits))
            assert (np.abs(got[np.isfinite(got)]) > 0).mean() > 0.5


@pytest.mark.parametrize("name", TYPES)
def test_thread_counts_give_the_same_bits(cases, name, monkeypatch, simd):
    shape = (37, 256)
    b = cases[(name, shape)]
    ref = general(name, b, shape)
    for nt in (1, 2, 3, 7, 64, 200):
        monkeypatch.setattr(native, "THREADS", nt)
        assert same_bits(fused(name, b, shape), ref), nt


def test_the_blocks_of_a_gguf_file(cases, tmp_path):
    """Raw blocks as gguf-py writes them and grit.load reads them back: the
    fused kernel on the file's bytes equals grit.decode of the loaded
    (converted) array."""
    path = str(tmp_path / "converted.gguf")
    w = gguf.GGUFWriter(path, "grit-test")
    keys = {}
    for (name, shape), b in cases.items():
        if shape in ((37, 256), (2, 3, 256), (7, 96)):
            key = f"{name}.{'x'.join(map(str, shape))}"
            keys[key] = (name, shape)
            w.add_tensor(key, b, raw_dtype=T[name])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    loaded = grit.load(path)
    r = gguf.GGUFReader(path)
    raw = {t.name: np.asarray(t.data) for t in r.tensors}
    for key, (name, shape) in keys.items():
        a = loaded[key]
        assert isinstance(a, grit.GritArray) and a.shape == shape
        assert ggml.kernel_for(a.descriptor, a.shape) is None      # canonical, not a struct
        assert same_bits(fused(name, raw[key], shape), grit.decode(a)), key


# ---------------------------------------------------------------------------
# against the peer, gguf-py's dequantize


def q8_k_ggml(blocks: np.ndarray) -> np.ndarray:
    """ggml's dequantize_row_q8_K (gguf-py has none): y = x.d · x.qs[j], in
    binary32 (block_q8_K: float d, int8 qs[256], int16 bsums[16])."""
    b = blocks.reshape(-1, 292)
    d = b[:, 0:4].copy().view(np.float32)
    q = b[:, 4:260].view(np.int8).astype(np.float32)
    with np.errstate(all="ignore"):
        return (d * q).reshape(-1)


def peer(name, blocks) -> np.ndarray:
    if name == "Q8_K":
        with pytest.raises(NotImplementedError):
            gguf.quants.dequantize(blocks, T[name])
        return q8_k_ggml(blocks)
    with np.errstate(all="ignore"):                # inf · 0 in gguf-py
        return gguf.quants.dequantize(blocks, T[name]).reshape(-1).astype(np.float32)


@pytest.mark.parametrize("name", TYPES)
def test_agrees_with_gguf_dequantize_apart_from_nan_bits(cases, name, simd):
    """For the converted types ggml's formula is the frame's step 5 operation
    for operation (docs/placements.md, "GGUF"), so the two differ only where
    both give NaN: GRIT writes 0x7FC00000, ggml keeps the sign and payload of
    the NaN it met (a binary16 NaN scale widened, or the default NaN of ∞·0).
    Signed zeros agree: ggml's −0 (a negative scale times a zero code, −0
    scales) is GRIT's, and GRIT's constant zero points are exact integers."""
    nan_bits_differ = 0
    for shape in shapes(name):
        b = cases[(name, shape)]
        got = fused(name, b, shape).reshape(-1)
        ref = peer(name, b)
        gn, rn = np.isnan(got), np.isnan(ref)
        assert (gn == rn).all(), f"{int((gn != rn).sum())} NaN positions differ"
        assert (got.view(np.uint32)[gn] == NAN).all()
        differ = got.view(np.uint32) != ref.view(np.uint32)
        # exactly the NaNs gguf-py does not write canonically, nothing else
        assert (differ == (rn & (ref.view(np.uint32) != NAN))).all(), (name, shape)
        nan_bits_differ += int(differ.sum())
        assert (got.view(np.uint32)[~gn] == ref.view(np.uint32)[~gn]).all()
        if shape == (37, 256):
            assert (ref.view(np.uint32) == NEG0).any()     # signed zero is compared
    assert nan_bits_differ > 0                            # the difference does occur


def test_a_large_output_is_whole_huge_pages_and_still_the_same_bits():
    """decode_ggml's output from 4 MiB on starts on a 2 MiB boundary (a view
    of a larger array); it is an ordinary C-contiguous float32 array and the
    bits are the general path's."""
    rng = np.random.default_rng(7)
    shape = (1 << 10, 1 << 10)                    # 4 MiB of float32: the threshold
    for name in ("Q4_0", "Q6_K"):
        b = random_blocks(name, shape, rng)
        got = fused(name, b, shape)
        assert got.ctypes.data % (2 << 20) == 0
        assert got.dtype == np.float32 and got.flags.c_contiguous and got.flags.writeable
        assert got.nbytes == 4 * got.size
        assert same_bits(got, general(name, b, shape))
    k = ggml.type_kernel("Q4_0", (4, 64))
    small = k.decode(random_blocks("Q4_0", (4, 64), rng), 256)
    assert small.flags.owndata and small.shape == (256,)
