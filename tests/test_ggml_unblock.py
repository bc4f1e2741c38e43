"""The direct inverses of ggml's NVFP4 and MXFP4 blocks (grit.ggml
``BlockType.unblock``, ``unblocked``) and the two-step 4-bit code split,
against the general paths they stand in for: grit's relayout of the
zero-copy planes to the canonical placement (``grit.array.canonical``) and
the bitstream reader (``unpack_stream``)."""
from __future__ import annotations

import numpy as np
import pytest

import grit
from grit import ggml
from grit.array import GritArray, canonical
from grit.codec.packing import unpack_stream
from grit.io.gguf_writer import save_gguf


@pytest.mark.parametrize("name, shape", [("NVFP4", (3, 128)), ("NVFP4", (2, 5, 64)),
                                         ("MXFP4", (4, 96)), ("MXFP4", (1, 32)),
                                         ("Q8_0", (3, 64)), ("Q8_0", (2, 3, 32))])
@pytest.mark.parametrize("fast", [True, False])
def test_unblock_is_the_relayout_of_the_blocks(name, shape, fast, monkeypatch):
    """A split type's direct inverse (its C kernel, or numpy) gives the
    planes the general relayout gives of the blocks, and they are the planes
    written."""
    from grit import native
    if fast and not native.split_blocks_on():
        pytest.skip("the native block kernels are not built")
    if not fast:
        monkeypatch.setattr(native, "split_blocks_on", lambda: False)
    t = ggml.TYPES[name]
    rng = np.random.default_rng(len(shape) * 7 + shape[-1])
    n = int(np.prod(shape))
    nb = n // t.block_elems
    cb, sb = t.split
    planes = (rng.integers(0, 256, nb * cb, dtype=np.uint8).tobytes(),
              rng.integers(0, 256, nb * sb, dtype=np.uint8).tobytes(), b"", b"")
    blocks = t.write(planes, nb)
    got = t.unblock(blocks)
    want = canonical(GritArray(t.descriptor(len(shape) - 1), shape, t.read(blocks))).planes
    assert [bytes(p) for p in got] == [bytes(p) for p in want] == list(planes)


@pytest.mark.parametrize("nb, n", [(1, 2), (3, 64), (7, 32), (16, 256)])
def test_four_bit_codes_are_unpack_streams(nb, n):
    buf = np.random.default_rng(nb * n).integers(0, 256, nb * n // 2 + 3, dtype=np.uint8)
    want = unpack_stream(buf.tobytes(), nb * n, 4).astype(np.uint8).reshape(nb, n)
    assert np.array_equal(ggml._codes((buf.tobytes(),), nb, 4, n), want)


@pytest.mark.parametrize("grade", ["grit1(e=e2m1,k0=16,s0=e4m3,esr=ratiomaxabs)",
                                   "GRADE_MXFP4"])
def test_unblocked_array_read_from_a_gguf(tmp_path, grade):
    """An array grit.load reads in place from a GGUF's blocks: ``unblocked``
    gives the planes canonical() does; an array of another placement, or
    not read from blocks, has none."""
    x = np.random.default_rng(1).standard_normal((8, 128)).astype(np.float32)
    g = getattr(grit, grade) if grade.startswith("GRADE_") else grit.register_grade(grade)
    a = grit.encode(x, g)
    save_gguf(str(tmp_path / "m.gguf"), {"w": a}, relayout=True)
    b = grit.load(str(tmp_path / "m.gguf"))["w"]
    got = ggml.unblocked(b)
    assert got is not None
    assert [bytes(p) for p in got] == [bytes(p) for p in canonical(b).planes]
    assert ggml.unblocked(a) is None


def test_only_the_types_with_a_direct_inverse_are_invertible():
    assert sorted(n for n, t in ggml.TYPES.items() if t.invertible) == ["MXFP4", "NVFP4", "Q8_0"]


@pytest.mark.parametrize("grade, shape", [
    ("GRADE_NVF4", (8, 64)), ("GRADE_NVF4", (8, 48)), ("GRADE_MXFP4", (4, 96)),
    ("grit1(e=e2m1,k0=16,s0=e4m3,esr=ratiomaxabs)", (2, 128)),
    ("grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)", (4, 64)),
    ("grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)", (4, 64)),
])
def test_native_kind_is_native_types_answer(grade, shape, tmp_path):
    """native_kind (no blocks built) names the type native_type builds, for
    canonical arrays and for the same arrays read back from a GGUF in
    ggml's placement."""
    from grit.io.gguf_writer import native_kind, native_type
    g = getattr(grit, grade) if grade.startswith("GRADE_") else grit.register_grade(grade)
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    a = grit.encode(x, g)
    want = native_type(a, relayout=True)
    assert native_kind(a) == (None if want is None else want[0])
    if want is not None:
        save_gguf(str(tmp_path / "m.gguf"), {"w": a}, relayout=True)
        b = grit.load(str(tmp_path / "m.gguf"))["w"]
        assert native_kind(b) == native_type(b, relayout=True)[0] == want[0]


@pytest.mark.parametrize("name", ["NVFP4", "MXFP4", "Q8_0"])
@pytest.mark.parametrize("nb", [1, 2, 33, 1000, 1001])
def test_fp4_block_kernels_equal_the_numpy_path(monkeypatch, name, nb, simd):
    """The C kernels that write and read NVFP4, MXFP4 and Q8_0 blocks
    (grit.native.split_block, split_unblock_into), in their portable and AVX2
    loops (MXFP4's two blocks at a time, then the odd one), give the bytes
    of the numpy path, both ways, on random planes and on codes with every
    nibble value at every position."""
    from grit import native
    if not native.split_blocks_on():
        pytest.skip("the native 4-bit block kernels are not built")
    t = ggml.TYPES[name]
    cb, sb = t.split
    rng = np.random.default_rng(nb)
    codes = rng.integers(0, 256, nb * cb, dtype=np.uint8)
    if nb >= 33:            # block b, byte j: the nibbles (b + j) % 16 and (b + 2j) % 16
        b, j = np.meshgrid(np.arange(33), np.arange(cb), indexing="ij")
        codes[:33 * cb] = (((b + j) % 16) | (((b + 2 * j) % 16) << 4)).reshape(-1)
    scales = rng.integers(0, 256, nb * sb, dtype=np.uint8)
    planes = (codes.tobytes(), scales.tobytes(), b"", b"")
    fast = t.write(planes, nb)
    fast_back = t.unblock(fast)
    monkeypatch.setattr(native, "split_blocks_on", lambda: False)
    slow = t.write(planes, nb)
    assert fast.shape == slow.shape == (nb, t.block_bytes)
    assert fast.tobytes() == slow.tobytes()
    slow_back = t.unblock(slow)
    assert [bytes(p) for p in fast_back] == [bytes(p) for p in slow_back] == list(planes)


def test_fp4_block_kernels_refuse_sizes_that_do_not_match():
    from grit import _kernels, native
    if not native.split_blocks_on():
        pytest.skip("the native 4-bit block kernels are not built")
    out = np.empty((2, 36), np.uint8)
    with pytest.raises(ValueError, match="nvfp4: 2 blocks need 64 code and 8 scale bytes"):
        _kernels.nvfp4_block(bytes(63), bytes(8), out)
    with pytest.raises(ValueError, match="not a multiple of 36"):
        _kernels.nvfp4_unblock(bytes(71), np.empty(64, np.uint8), np.empty(8, np.uint8))
    with pytest.raises(ValueError, match="scale bytes"):
        _kernels.nvfp4_unblock(bytes(72), np.empty(64, np.uint8), np.empty(9, np.uint8))
    with pytest.raises(ValueError, match="mxfp4: 3 blocks need 48 code and 3 scale bytes"):
        _kernels.mxfp4_block(bytes(48), bytes(2), np.empty((3, 17), np.uint8))
    with pytest.raises(ValueError, match="not a multiple of 17"):
        _kernels.mxfp4_unblock(bytes(18), np.empty(16, np.uint8), np.empty(1, np.uint8))
    with pytest.raises(ValueError, match="q8_0: 2 blocks need 64 code and 4 scale bytes"):
        _kernels.q8_0_unblock_eq(bytes(68), bytes(64), bytes(3))


@pytest.mark.parametrize("name", ["NVFP4", "MXFP4", "Q8_0"])
@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("nb", [40, 1201])
def test_unblocks_to_compares_without_the_planes(monkeypatch, name, fast, nb, simd):
    """grit.ggml.unblocks_to (the C comparison in its portable and AVX2
    loops, or each step unblocked and compared): True for the planes the
    blocks unblock to; False for a change of one bit at every byte of a
    block's codes and scales (the first block, one in the middle — past the
    AVX2 loop's first look at its differences — and the last: MXFP4's odd
    one), for a change in the last block of a run longer than a step, and
    for planes of other sizes."""
    from grit import native
    if fast and not native.split_blocks_on():
        pytest.skip("the native 4-bit block kernels are not built")
    if not fast:
        monkeypatch.setattr(native, "split_blocks_on", lambda: False)
        monkeypatch.setattr(ggml, "UNBLOCK_STEP", 7)
    t = ggml.TYPES[name]
    cb, sb = t.split
    rng = np.random.default_rng(5)
    blocks = rng.integers(0, 256, (nb, t.block_bytes), dtype=np.uint8)
    codes, scales = (np.frombuffer(bytes(p), np.uint8) for p in t.unblock(blocks)[:2])
    assert ggml.unblocks_to(name, blocks, codes, scales)
    for k in (0, nb // 2, nb - 1):
        for j in range(cb):
            c = codes.copy()
            c[k * cb + j] ^= 1 << (j % 8)
            assert not ggml.unblocks_to(name, blocks, c, scales), (k, j)
        for j in range(sb):
            s = scales.copy()
            s[k * sb + j] ^= 0x80
            assert not ggml.unblocks_to(name, blocks, codes, s), (k, j)
    for j in range(t.block_bytes):      # a change in the blocks themselves
        b = blocks.copy()
        b[nb - 1, j] ^= 0x01
        assert not ggml.unblocks_to(name, b, codes, scales), j
    assert not ggml.unblocks_to(name, blocks, codes[:-1], scales)
    assert not ggml.unblocks_to(name, blocks[:-1], codes, scales)
