"""The ggml block types GRIT expresses, one record each: the one room for a
ggml type's facts (docs/layers.md, "How to add a ggml type").

Each record is a subclass of :class:`BlockType` that registers itself in
:data:`TYPES` when it is defined, and holds, side by side, everything grit
knows of the type:

* its grade (``grade_text``) and block size (from grit.ggml_types);
* whether it is **zero-copy** — the block struct *is* a GRIT placement
  (``placement``: the data, scale and meta words, F_INTERLEAVED), so the
  file's bytes are the array's data plane — or **converted**: ggml splits an
  element's bits across fields, keeps a constant implicit or packs two
  planes into one byte, and grit moves the bits into the canonical
  placement (never changing one, writing the constants as explicit planes);
* ``read(blocks)``: the blocks as the planes of ``descriptor()`` (the
  zero-copy placement, or the canonical one), and ``write(planes, nb)``:
  canonical planes as blocks — the two directions of one struct, like
  gguf-py's quants.py keeps quantize and dequantize of a type in one class;
* ``kernel``: the id of its fused decode kernel in grit._kernels, looked up
  by the type's name in grit.native (which checks each id against the C
  side's block sizes when the extension loads).

docs/placements.md ("GGUF") derives every row.  :data:`INEXPRESSIBLE` says
why each other quantised ggml type is not a GRIT v1 array, and :data:`PLAIN`
is the numpy type of each unquantised one.  grit.io.gguf reads with these
records and grit.io.gguf_writer writes with them; grit.array's decode asks
:func:`kernel_for` / :func:`type_kernel` for the fused kernels."""
from __future__ import annotations

import mmap
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from . import descriptor as D
from . import native
from ._files import _owner
from .codec.packing import pack_stream, unpack_stream
from .ggml_types import BY_NAME as _SIZES
from .grade import Grade, lookup_grade, register_grade
from .placement.expr import Interleave, Perm, halves, register_layout
from .placement.registered import pack_k4_12b, unpack_k4_12b
from .placement.words import REGISTERED as _PLACEMENTS

__all__ = ["halves", "BlockType", "TYPES", "ZERO_COPY", "CONVERTED", "INEXPRESSIBLE", "PLAIN",
           "Blocks", "Q4_K_DATA", "MXFP4_DATA", "NVFP4_DATA", "kernel_for", "type_kernel",
           "blocks_of", "unblocked", "unblocks_to"]

_P = {n: w for n, (w, _) in _PLACEMENTS.items()}

#: the unquantised ggml types as numpy types (BF16: ml_dtypes' bfloat16 by
#: name, which grit.dtypes resolves; grit.io.gguf reads it widened to float32)
PLAIN: dict[str, str] = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I8": "i1", "I16": "<i2",
                         "I32": "<i4", "I64": "<i8", "BF16": "bfloat16"}

#: every registered record by ggml type name, in definition order
TYPES: dict[str, "BlockType"] = {}


#: the data placements of the nibble types: ggml's halves order inside each
#: block, the block's fields interleaved (k0·k1 elements for Q4_K's
#: super-block, k0 for MXFP4, 4 k0-groups of 16 for NVFP4's 64-element block)
Q4_K_DATA = Interleave(Perm(halves(64)), 8)
MXFP4_DATA = Interleave(Perm(halves(32)), 1)
NVFP4_DATA = Interleave(Perm(halves(16)), 4)
# registered in this process on import, so the placement words of an array
# loaded in them resolve to their expressions
for _e in (Q4_K_DATA, MXFP4_DATA, NVFP4_DATA):
    register_layout(_e)


# ---------------------------------------------------------------------------
# the bit orders ggml's structs use, both ways


def _u8(p) -> np.ndarray:
    return np.frombuffer(p, np.uint8) if len(memoryview(p)) else np.zeros(0, np.uint8)


def _plane(planes, i: int, nb: int) -> np.ndarray:
    return _u8(planes[i]).reshape(nb, -1)


def _codes(planes, nb: int, w: int, n: int) -> np.ndarray:
    """The data plane's nb·n w-bit codes as (nb, n) bytes (4-bit codes by
    :func:`_nibbles`, unpack_stream's LSB-first order in two numpy steps)."""
    if w == 4 and (nb * n) % 2 == 0 and _u8(planes[0]).size >= nb * n // 2:
        return _nibbles(_u8(planes[0])[:nb * n // 2]).reshape(nb, n)
    return unpack_stream(planes[0], nb * n, w).astype(np.uint8).reshape(nb, n)


def _nibbles(b: np.ndarray) -> np.ndarray:
    """Bytes -> their 4-bit codes, LSB-first: code 2j the low nibble of byte j."""
    c = np.empty((b.size, 2), np.uint8)
    np.bitwise_and(b, np.uint8(15), out=c[:, 0])
    np.right_shift(b, np.uint8(4), out=c[:, 1])
    return c.reshape(-1)


def _nibbles_inv(c: np.ndarray) -> np.ndarray:
    """4-bit codes (an even count) -> bytes, LSB-first (:func:`_nibbles`)."""
    c = c.reshape(-1, 2)
    return (c[:, 0] & np.uint8(15)) | (c[:, 1] << np.uint8(4))


_W16, _W8, _W4, _W32 = (np.uint64(m) for m in (0x0000FFFF0000FFFF, 0x00FF00FF00FF00FF,
                                               0x0F0F0F0F0F0F0F0F, 0xFFFFFFFF))


def _spread(x: np.ndarray) -> np.ndarray:
    """64-bit words of 16 LSB-first 4-bit codes -> the same codes in ggml's
    halves order over 16: byte k holds code k (low) and code k + 8 (high)."""
    def half(v):
        v = (v | (v << np.uint64(16))) & _W16
        v = (v | (v << np.uint64(8))) & _W8
        return (v | (v << np.uint64(4))) & _W4
    return half(x & _W32) | (half(x >> np.uint64(32)) << np.uint64(4))


def _gather(y: np.ndarray) -> np.ndarray:
    """The inverse of :func:`_spread`."""
    def half(v):
        v = (v | (v >> np.uint64(4))) & _W8
        v = (v | (v >> np.uint64(8))) & _W16
        return (v | (v >> np.uint64(16))) & _W32
    return half(y & _W4) | (half((y >> np.uint64(4)) & _W4) << np.uint64(32))


def _nibbles_halves(qs: np.ndarray) -> np.ndarray:
    """(nb, n/2) bytes in ggml's halves order -> (nb, n) codes in order."""
    return np.concatenate([qs & np.uint8(15), qs >> np.uint8(4)], axis=1)


def _halves_inv(c: np.ndarray) -> np.ndarray:
    """(nb, n) codes -> (nb, n/2) bytes in ggml's halves order."""
    h = c.shape[1] // 2
    return (c[:, :h] & np.uint8(15)) | ((c[:, h:] & np.uint8(15)) << np.uint8(4))


def _bit_planes(qh: np.ndarray, n: int) -> np.ndarray:
    """(nb, 4) bytes = one little-endian uint32 per block, bit j for element j."""
    return np.unpackbits(qh, axis=1, bitorder="little")[:, :n]


def _qh_inv(c: np.ndarray) -> np.ndarray:
    """bit 4 of 32 codes -> one little-endian uint32 per block."""
    return np.packbits((c >> np.uint8(4)) & np.uint8(1), axis=1, bitorder="little")


def _crumbs(qs: np.ndarray) -> np.ndarray:
    """K-quant 2-bit order: per 128-element half, 32 bytes; bits 2s..2s+1 of
    byte l hold element 32s + l of that half."""
    nb = qs.shape[0]
    sh = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    return ((qs.reshape(nb, -1, 1, 32) >> sh) & np.uint8(3)).reshape(nb, -1)


def _crumbs_inv(c: np.ndarray) -> np.ndarray:
    nb = c.shape[0]
    r = c.reshape(nb, -1, 4, 32) & np.uint8(3)
    return (r[:, :, 0] | (r[:, :, 1] << 2) | (r[:, :, 2] << 4) | (r[:, :, 3] << 6)).reshape(nb, -1)


def _k_nibbles(qs: np.ndarray) -> np.ndarray:
    """Q4_K/Q5_K order: per 64-element chunk, 32 bytes; low nibbles are
    elements 0..31 of the chunk, high nibbles 32..63."""
    nb = qs.shape[0]
    sh = np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    return ((qs.reshape(nb, -1, 1, 32) >> sh) & np.uint8(15)).reshape(nb, -1)


def _k_nibbles_inv(c: np.ndarray) -> np.ndarray:
    nb = c.shape[0]
    lo = (c & np.uint8(15)).reshape(nb, -1, 2, 32)
    return (lo[:, :, 0] | (lo[:, :, 1] << np.uint8(4))).reshape(nb, -1)


def _fill(nb: int, v: int) -> bytes:
    return np.full(nb, v, np.uint8).tobytes()


def _small(p: np.ndarray, bits: int) -> np.ndarray:
    """Codes of a ``bits``-wide field stored one per byte; ValueError when a
    byte has a bit the field has no room for (it would be lost)."""
    if (p >> np.uint8(bits)).any():
        raise ValueError(f"a {bits}-bit code has a higher bit set")
    return p


# ---------------------------------------------------------------------------
# the record


class BlockType:
    """One ggml block type GRIT expresses (see the module docstring).  A
    subclass sets ``name`` (the ggml type's), ``grade_text``, ``placement``
    for a zero-copy type, and ``read`` / ``write``; defining it registers
    it in :data:`TYPES`."""

    name: ClassVar[str]
    grade_text: ClassVar[str]
    #: (data, scale, meta) placement words of a zero-copy type; None: converted
    placement: ClassVar[tuple[int, int, int] | None] = None
    #: (code bytes, scale bytes) each block gives the canonical planes, for a
    #: type whose direct inverse (:meth:`unblock`) writes those two planes
    #: alone (``native.SPLIT_BLOCKS``); None: any other
    split: ClassVar[tuple[int, int] | None] = None

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.name in TYPES or cls.name not in _SIZES:
            raise TypeError(f"ggml type {cls.name!r}: listed twice, or not in grit.ggml_types")
        TYPES[cls.name] = cls()

    block_bytes = property(lambda self: _SIZES[self.name].block_bytes)
    block_elems = property(lambda self: _SIZES[self.name].block_elems)

    @property
    def zero_copy(self) -> bool:
        return self.placement is not None

    @cached_property
    def _parsed(self) -> Grade:
        return Grade.parse(self.grade_text)

    @property
    def grade(self) -> Grade:
        """The grade, registered where it is asked for (the process, or the
        enclosing grade_scope: a scan registers per file)."""
        g = register_grade(self._parsed)
        return lookup_grade(g.id) or g

    @property
    def kernel(self) -> int | None:
        """The fused decode kernel's id in grit._kernels (None: none)."""
        return native.ggml_kind(self.name)

    def carries(self, d: D.Descriptor, *, canonical: bool = False) -> bool:
        """Whether ``d`` is the descriptor of this type's array with
        ``d``'s group axis — :meth:`descriptor`'s, or with ``canonical`` the
        canonical placement's — up to the grade id: a grade that differs
        from the type's only in encode fields (§4: er, esr) decodes the same
        bytes the same way (§8.1 reads the frame alone)."""
        want = self.grade.descriptor(group_axis=d.group_axis) if canonical \
            else self.descriptor(d.group_axis)
        return d.replace(grade_id=0) == want.replace(grade_id=0)

    def decode(self, data, numel: int) -> np.ndarray:
        """The fused kernel's decode of ``numel`` elements' whole blocks read
        in place (:func:`grit.native.decode_ggml`); only where
        :func:`kernel_for` or :func:`type_kernel` gave this record."""
        kind = self.kernel
        if kind is None:
            raise ValueError(f"ggml type {self.name} has no fused kernel")
        return native.decode_ggml(kind, data, numel)

    def descriptor(self, group_axis: int = 0) -> D.Descriptor:
        """The descriptor :meth:`read` gives the planes of: the zero-copy
        struct's placement, or the canonical one."""
        if self.placement is None:
            return self.grade.descriptor(group_axis=group_axis)
        pd, ps, pm = self.placement
        d = self.grade.descriptor(group_axis=group_axis, placement_data=pd,
                                  placement_scale=ps, placement_meta=pm)
        return d.replace(flags=d.flags | D.F_INTERLEAVED)

    def read(self, b: np.ndarray) -> tuple:
        """(nb, block_bytes) blocks -> the four planes of :meth:`descriptor`
        (a zero-copy type: the blocks themselves, the data plane)."""
        return b.reshape(-1), b"", b"", b""

    @property
    def invertible(self) -> bool:
        """Whether :meth:`write` has the direct inverse :meth:`unblock`:
        every code of the canonical planes fits the blocks and no field is
        an implicit constant, so blocks written need no reading back
        (tests/test_ggml_unblock.py: ``unblock(write(p)) == p``)."""
        return type(self).unblock is not BlockType.unblock

    def unblock(self, b: np.ndarray) -> tuple | None:
        """(nb, block_bytes) blocks -> the four *canonical* planes of their
        elements, the inverse of :meth:`write`, where the type has a direct
        one (None: relayout :meth:`read`'s planes instead)."""
        return None

    def write(self, planes, nb: int) -> np.ndarray:
        """The four *canonical* planes of nb blocks' elements -> the
        (nb, block_bytes) blocks.  ValueError when the planes hold a code the
        struct has no room for; a converted type's implicit constants are
        not checked here (grit.io.gguf_writer reads the blocks back)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<ggml {self.name}: {'zero-copy' if self.zero_copy else 'converted'}>"


def _blocks(fields: list, nb: int, size: int) -> np.ndarray:
    b = np.ascontiguousarray(np.concatenate(fields, axis=1), dtype=np.uint8)
    if b.shape != (nb, size):
        raise ValueError(f"{b.shape[1]} bytes per block, expected {size}")
    return b


#: the blocks a direct inverse (:meth:`BlockType.unblock`) converts at a
#: time: its numpy temporaries stay at a few MiB, whatever the tensor
UNBLOCK_STEP = 1 << 15


def _in_steps(b: np.ndarray, code_bytes: int, scale_bytes: int, part, *,
              into: bool = False) -> tuple:
    """The canonical planes of (nb, block_bytes) blocks ``b`` whose every
    block gives ``code_bytes`` of the data plane and ``scale_bytes`` of the
    scale plane: ``part`` (blocks -> (codes, scales); with ``into``,
    ``part(blocks, codes, scales)`` writes them into the planes' parts)
    over :data:`UNBLOCK_STEP` blocks at a time, into the two planes."""
    nb = b.shape[0]
    codes = np.empty(nb * code_bytes, np.uint8)
    scales = np.empty(nb * scale_bytes, np.uint8)
    for s in range(0, nb, UNBLOCK_STEP):
        e = min(nb, s + UNBLOCK_STEP)
        cs, ss = codes[s * code_bytes:e * code_bytes], scales[s * scale_bytes:e * scale_bytes]
        if into:
            part(b[s:e], cs, ss)
        else:
            c, sc = part(b[s:e])
            cs[:] = np.asarray(c).reshape(-1)
            ss[:] = np.asarray(sc).reshape(-1)
        _let_go(b[s:e])
    return codes, scales, b"", b""


def _let_go(x: np.ndarray) -> None:
    """Give back the process's pages of blocks ``x`` when they view a file's
    read-only map (``MADV_DONTNEED``; the page cache keeps them, and a read
    of them later faults them back with the same bytes): once unblocked,
    the canonical planes stand for them, so a tensor read from a mapped
    GGUF costs its planes' memory, not twice that."""
    mm = _owner(x)
    dontneed = getattr(mmap, "MADV_DONTNEED", None)
    if not isinstance(mm, mmap.mmap) or dontneed is None or not x.size or \
            not x.flags.c_contiguous:
        return
    base = np.frombuffer(mm, np.uint8).__array_interface__["data"][0]
    off = x.__array_interface__["data"][0] - base
    if 0 <= off and off + x.nbytes <= len(mm):
        a = off - off % mmap.PAGESIZE
        mm.madvise(dontneed, a, off + x.nbytes - a)


def _nvfp4_unblock(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NVFP4 blocks -> (their codes LSB-first, their four E4M3 scales each)."""
    nb = b.shape[0]
    w = np.ascontiguousarray(b).reshape(-1).view("<u4").reshape(nb, 9)
    y = w[:, 1::2].astype(np.uint64) | (w[:, 2::2].astype(np.uint64) << np.uint64(32))
    return np.asarray(_gather(y), "<u8").view(np.uint8), b[:, :4]


# ---------------------------------------------------------------------------
# zero-copy types: the block struct is a GRIT placement


class Q8_0(BlockType):
    # d·q, q int8: 2-byte d then 32 codes
    name = "Q8_0"
    grade_text = "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)"
    placement = (_P["BLOCK_AOS"], _P["ROW_MAJOR"], 0)

    split = (32, 2)             # code and scale bytes a block: moved as they are

    def write(self, planes, nb):
        if native.split_blocks_on() and _u8(planes[0]).size == 32 * nb \
                and _u8(planes[1]).size == 2 * nb:  # one C pass (tests/test_ggml_unblock.py)
            return native.split_block(self.name, _u8(planes[0]), _u8(planes[1]), nb)
        return _blocks([_plane(planes, 1, nb), _plane(planes, 0, nb)], nb, self.block_bytes)

    def unblock(self, b):
        if native.split_blocks_on():
            return _in_steps(b, 32, 2, lambda *a: native.split_unblock_into(self.name, *a),
                             into=True)
        return _in_steps(b, 32, 2, lambda p: (p[:, 2:], p[:, :2]))


class MXFP4(BlockType):
    # one E8M0 byte then 16 bytes of nibbles in halves order
    name = "MXFP4"
    grade_text = "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"
    placement = (MXFP4_DATA.word, _P["ROW_MAJOR"], 0)
    split = (16, 1)

    def write(self, planes, nb):
        if native.split_blocks_on() and _u8(planes[0]).size == 16 * nb \
                and _u8(planes[1]).size == nb:  # one C pass (tests/test_ggml_unblock.py)
            return native.split_block(self.name, _u8(planes[0]), _u8(planes[1]), nb)
        return _blocks([_plane(planes, 1, nb), _halves_inv(_codes(planes, nb, 4, 32))], nb,
                       self.block_bytes)

    def unblock(self, b):
        if native.split_blocks_on():
            return _in_steps(b, 16, 1, lambda *a: native.split_unblock_into(self.name, *a),
                             into=True)
        return _in_steps(b, 16, 1, lambda p: (_nibbles_inv(_nibbles_halves(p[:, 1:])), p[:, 0]))


class NVFP4(BlockType):
    # four E4M3 block scales then 32 bytes of nibbles, halves order per 16
    name = "NVFP4"
    grade_text = "grit1(e=e2m1,k0=16,s0=e4m3,esr=ratiomaxabs)"
    placement = (NVFP4_DATA.word, _P["ROW_MAJOR"], 0)
    split = (32, 4)

    def write(self, planes, nb):
        # four E4M3 scales, then four runs of 8 bytes (16 codes in halves order):
        # each run is one 64-bit word of 16 LSB-first codes, its nibbles spread
        data = _u8(planes[0])
        sc = _plane(planes, 1, nb)
        if data.size != nb * 32 or sc.shape != (nb, 4):
            raise ValueError(f"NVFP4: {data.size} code bytes and {sc.size} scales for {nb} "
                             "blocks")
        if native.split_blocks_on():      # the same bytes, one C pass (tests/test_ggml_unblock.py)
            return native.split_block(self.name, data, np.ascontiguousarray(sc), nb)
        x = data.view("<u8") if data.ctypes.data % 8 == 0 else data.copy().view("<u8")
        out = np.empty((nb, 36), np.uint8)
        out[:, :4] = sc
        out[:, 4:] = np.asarray(_spread(x), "<u8").view(np.uint8).reshape(nb, 32)
        return out

    def unblock(self, b):
        if native.split_blocks_on():
            return _in_steps(b, 32, 4, lambda *a: native.split_unblock_into(self.name, *a),
                             into=True)
        return _in_steps(b, 32, 4, _nvfp4_unblock)


class Q4_K(BlockType):
    # d, dmin, 12 bytes of packed 6-bit scales/mins, 128 bytes of nibbles
    name = "Q4_K"
    grade_text = "grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)"
    placement = (Q4_K_DATA.word, _P["PACK_K4_12B"], _P["PACK_K4_12B"])

    def write(self, planes, nb):
        sc = _small(_plane(planes, 1, nb), 6)
        m = _small(_plane(planes, 3, nb), 6)
        return _blocks([_plane(planes, 2, nb), pack_k4_12b(sc, m),
                        _k_nibbles_inv(_codes(planes, nb, 4, 256))], nb, self.block_bytes)


# ---------------------------------------------------------------------------
# converted types: fields moved into the canonical planes


class Q4_0(BlockType):
    # d·(q − 8): u4 with the constant zero point 8
    name = "Q4_0"
    grade_text = "grit1(e=u4,k0=32,s0=binary16,zp=u4,esr=affineminmax)"

    def read(self, b):
        nb = b.shape[0]
        return (pack_stream(_nibbles_halves(b[:, 2:18]), 4), b[:, 0:2].tobytes(), b"",
                _fill(nb, 8))

    def write(self, planes, nb):
        return _blocks([_plane(planes, 1, nb), _halves_inv(_codes(planes, nb, 4, 32))], nb,
                       self.block_bytes)


class Q4_1(BlockType):
    # d·q + m: two levels per 32-element block, s0 = 1 and zp = −1 constant
    name = "Q4_1"
    grade_text = "grit1(e=u4,k0=32,s0=u8,k1=1,s1=binary16,zp=s8,zps=l1,esr=affineminmax)"

    def read(self, b):
        nb = b.shape[0]
        return (pack_stream(_nibbles_halves(b[:, 4:20]), 4), _fill(nb, 1), b[:, 0:4].tobytes(),
                _fill(nb, 0xFF))

    def write(self, planes, nb):
        return _blocks([_plane(planes, 2, nb), _halves_inv(_codes(planes, nb, 4, 32))], nb,
                       self.block_bytes)


class Q5_0(BlockType):
    # d·(q − 16): bit 4 of each code in qh
    name = "Q5_0"
    grade_text = "grit1(e=x43e4,k0=32,s0=binary16,zp=x43e4,esr=affineminmax)"

    def read(self, b):
        codes = _nibbles_halves(b[:, 6:22]) | (_bit_planes(b[:, 2:6], 32) << np.uint8(4))
        return pack_stream(codes, 5), b[:, 0:2].tobytes(), b"", _fill(b.shape[0], 16)

    def write(self, planes, nb):
        c = _codes(planes, nb, 5, 32)
        return _blocks([_plane(planes, 1, nb), _qh_inv(c), _halves_inv(c)], nb,
                       self.block_bytes)


class Q5_1(BlockType):
    # d·q + m, bit 4 of each code in qh
    name = "Q5_1"
    grade_text = "grit1(e=x43e4,k0=32,s0=u8,k1=1,s1=binary16,zp=s8,zps=l1,esr=affineminmax)"

    def read(self, b):
        nb = b.shape[0]
        codes = _nibbles_halves(b[:, 8:24]) | (_bit_planes(b[:, 4:8], 32) << np.uint8(4))
        return pack_stream(codes, 5), _fill(nb, 1), b[:, 0:4].tobytes(), _fill(nb, 0xFF)

    def write(self, planes, nb):
        c = _codes(planes, nb, 5, 32)
        return _blocks([_plane(planes, 2, nb), _qh_inv(c), _halves_inv(c)], nb,
                       self.block_bytes)


class Q2_K(BlockType):
    # (d·sc)·q − (dmin·m): sc and m the two nibbles of one byte
    name = "Q2_K"
    grade_text = "grit1(e=u2,k0=16,s0=u4,k1=16,s1=binary16,zp=u4,zps=l1,esr=affineminmax)"

    def read(self, b):
        sc = b[:, 0:16]
        return (pack_stream(_crumbs(b[:, 16:80]), 2), (sc & np.uint8(15)).tobytes(),
                b[:, 80:84].tobytes(), (sc >> np.uint8(4)).tobytes())

    def write(self, planes, nb):
        sc = _small(_plane(planes, 1, nb), 4) | (_small(_plane(planes, 3, nb), 4) << np.uint8(4))
        return _blocks([sc, _crumbs_inv(_codes(planes, nb, 2, 256)), _plane(planes, 2, nb)], nb,
                       self.block_bytes)


class Q5_K(BlockType):
    # (d·sc)·q − (dmin·m), Q4_K's scales; bit 4 of code 32j + l is bit j of qh[l]
    name = "Q5_K"
    grade_text = "grit1(e=x43e4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)"

    def read(self, b):
        nb = b.shape[0]
        sc, m = unpack_k4_12b(b[:, 4:16])
        qh = b[:, 16:48]
        hb = (qh.reshape(nb, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) \
            & np.uint8(1)
        codes = _k_nibbles(b[:, 48:176]) | (hb.reshape(nb, 256) << np.uint8(4))
        return pack_stream(codes, 5), sc.tobytes(), b[:, 0:4].tobytes(), m.tobytes()

    def write(self, planes, nb):
        c = _codes(planes, nb, 5, 256)
        hb = ((c >> np.uint8(4)) & np.uint8(1)).reshape(nb, 8, 32)
        qh = np.zeros((nb, 32), np.uint8)
        for j in range(8):
            qh |= hb[:, j] << np.uint8(j)
        sc = _small(_plane(planes, 1, nb), 6)
        m = _small(_plane(planes, 3, nb), 6)
        return _blocks([_plane(planes, 2, nb), pack_k4_12b(sc, m), qh, _k_nibbles_inv(c)], nb,
                       self.block_bytes)


class Q6_K(BlockType):
    # (d·sc)·(q − 32), sc int8
    name = "Q6_K"
    grade_text = "grit1(e=u6,k0=16,s0=s8,k1=16,s1=binary16,zp=u6,esr=affineminmax)"

    def read(self, b):
        nb = b.shape[0]
        ql, qh = b[:, 0:128], b[:, 128:192]
        lo = ((ql.reshape(nb, 2, 1, 64) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1))
              & np.uint8(15)).reshape(nb, 256)
        codes = lo | (_crumbs(qh) << np.uint8(4))
        return (pack_stream(codes, 6), b[:, 192:208].tobytes(), b[:, 208:210].tobytes(),
                _fill(nb * 16, 32))

    def write(self, planes, nb):
        c = _codes(planes, nb, 6, 256)
        lo = (c & np.uint8(15)).reshape(nb, 2, 2, 64)
        ql = (lo[:, :, 0] | (lo[:, :, 1] << np.uint8(4))).reshape(nb, 128)
        return _blocks([ql, _crumbs_inv(c >> np.uint8(4)), _plane(planes, 1, nb),
                        _plane(planes, 2, nb)], nb, self.block_bytes)


class Q8_K(BlockType):
    # d·q, q int8 (the 16 int16 bsums are sums of the codes: derived, not values)
    name = "Q8_K"
    grade_text = "grit1(e=s8,k0=256,s0=binary32,esr=ratiomaxabs)"

    def read(self, b):
        return b[:, 4:260].tobytes(), b[:, 0:4].tobytes(), b"", b""

    def write(self, planes, nb):
        q = _plane(planes, 0, nb)
        # bsums: ggml's block_q8_k field, the sum of each 16 codes (derived)
        bs = q.view(np.int8).reshape(nb, 16, 16).astype(np.int16).sum(axis=2, dtype=np.int16)
        return _blocks([_plane(planes, 1, nb), q, bs.astype("<i2").view(np.uint8)], nb,
                       self.block_bytes)


class TQ2_0(BlockType):
    # d·(q − 1)
    name = "TQ2_0"
    grade_text = "grit1(e=u2,k0=256,s0=binary16,zp=u2,esr=affineminmax)"

    def read(self, b):
        return (pack_stream(_crumbs(b[:, 0:64]), 2), b[:, 64:66].tobytes(), b"",
                _fill(b.shape[0], 1))

    def write(self, planes, nb):
        return _blocks([_crumbs_inv(_codes(planes, nb, 2, 256)), _plane(planes, 1, nb)], nb,
                       self.block_bytes)


#: the zero-copy records by name
ZERO_COPY: dict[str, BlockType] = {n: t for n, t in TYPES.items() if t.zero_copy}
#: the converted records by name
CONVERTED: dict[str, BlockType] = {n: t for n, t in TYPES.items() if not t.zero_copy}


# ---------------------------------------------------------------------------
# the quantised types v1 cannot express, and why

INEXPRESSIBLE: dict[str, str] = {
    "Q3_K": ("its 6-bit sub-block scales are offset-binary (value = code − 32); a v1 scale "
             "format is unsigned or two's-complement with no offset, so a bit-exact GRIT form "
             "would rewrite every scale code (XOR 0x20) — a change of bits, not a relayout"),
    "TQ1_0": ("elements are trits packed five to a byte in base 3 (1.6 bits each); a v1 "
              "element plane is a bitstream of w-bit codes"),
    "Q8_1": ("a compute-time activation type, not a storage type: its s = d·Σq field is "
             "derived, and gguf-py's size table (40 bytes per block) disagrees with ggml's "
             "block_q8_1 (36 bytes) — not loaded rather than guessed"),
    "Q1_0": "1-bit elements; v1 formats start at 2 bits",
}
for _n in ("IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"):
    INEXPRESSIBLE[_n] = ("elements index a codebook of vectors (lattice/grid tables with sign "
                         "masks); a v1 element decodes through a §2 format word, never a table")
for _n in ("IQ4_NL", "IQ4_XS"):
    INEXPRESSIBLE[_n] = ("4-bit codes index a non-uniform 16-entry value table (kvalues_iq4nl); "
                         "no §2 format has those values")


# ---------------------------------------------------------------------------
# the fused kernels


@dataclass(frozen=True)
class Blocks:
    """The ggml blocks of one tensor, read in place: what a converted type's
    canonical planes are built from (``GritArray.deferred``), and what a fused
    kernel decodes without building them.  ``data`` is a read-only byte
    buffer of whole blocks of ``type_name``."""

    type_name: str
    data: Any = field(repr=False)


def unblocked(a) -> tuple | None:
    """The canonical planes of an array in a zero-copy type's placement
    (its data plane the type's blocks: what grit.load reads in place from a
    GGUF) by the type's direct inverse (:meth:`BlockType.unblock`: NVFP4,
    MXFP4, Q8_0), the bytes ``grit.array.canonical`` gives by relayout
    (tests/test_ggml_unblock.py); None where there is none."""
    got = blocks_of(a)
    if got is None:
        return None
    t, b = got
    return t.unblock(b.reshape(-1, t.block_bytes))


def blocks_of(a) -> tuple[BlockType, np.ndarray] | None:
    """(the zero-copy type, its blocks' bytes) of an array in a zero-copy
    type's placement, groups along the last axis (its data plane the type's
    whole blocks, the other planes empty: what grit.load reads in place
    from a GGUF); None for any other array."""
    if not a.shape:
        return None
    d = a.descriptor.replace(grade_id=0)
    t = next((t for t in ZERO_COPY.values()
              if d == t.descriptor(len(a.shape) - 1).replace(grade_id=0)), None)
    if t is None or a.plane_bytes[1:] != (0, 0, 0):
        return None
    b = _u8(a.planes[0])
    if b.size % t.block_bytes or b.size // t.block_bytes * t.block_elems != a.size:
        return None
    return t, b


def unblocks_to(type_name: str, blocks, codes, scales) -> bool:
    """Whether the ggml blocks ``blocks`` of ``type_name`` (one of
    ``native.SPLIT_BLOCKS``: NVFP4, MXFP4, Q8_0) unblock (:meth:`BlockType.unblock`,
    the direct inverse :func:`unblocked` reads them by) to exactly the
    canonical planes ``codes`` and ``scales``: the comparison without the
    planes built (the C kernel's, where built and on; else each
    :data:`UNBLOCK_STEP` blocks unblocked and compared).  Sizes that are
    not the blocks' planes' are False."""
    t = ZERO_COPY[type_name]
    b, c, s = _u8(blocks), _u8(codes), _u8(scales)
    nb = b.size // t.block_bytes
    cb, sb = t.split
    if b.size != nb * t.block_bytes or c.size != nb * cb or s.size != nb * sb:
        return False
    if native.split_blocks_on():              # the same answer (tests/test_ggml_unblock.py)
        return native.split_unblock_eq(type_name, b, c, s)
    b = b.reshape(nb, t.block_bytes)
    for i in range(0, nb, UNBLOCK_STEP):
        e = min(nb, i + UNBLOCK_STEP)
        got = t.unblock(b[i:e])
        if not (np.array_equal(_u8(got[0]), c[i * cb:e * cb])
                and np.array_equal(_u8(got[1]), s[i * sb:e * sb])):
            return False
    return True


# zero-copy descriptor bytes (group axis 0, grade id 0) -> record
_BY_DESC: dict[bytes, BlockType] = {t.descriptor().replace(grade_id=0).to_bytes(): t
                                    for t in ZERO_COPY.values()}


def kernel_for(d: D.Descriptor, shape: tuple[int, ...]) -> BlockType | None:
    """The zero-copy record whose fused kernel decodes an array of
    descriptor ``d`` and ``shape``: its descriptor is the type's with the
    group axis last (ggml's ne[0]), up to the grade id (:meth:`BlockType.carries`),
    the row length is whole blocks, and the kernels are built and on; else
    None (the general path)."""
    if not shape or d.group_axis != len(shape) - 1 or not native.ggml_kernels_on():
        return None
    t = _BY_DESC.get(d.replace(group_axis=0, grade_id=0).to_bytes())
    if t is None or t.kernel is None or shape[-1] % t.block_elems:
        return None
    return t


def type_kernel(name: str, shape: tuple[int, ...]) -> BlockType | None:
    """The record whose fused kernel decodes raw ggml blocks of type
    ``name`` (zero-copy or converted) holding an array of ``shape`` (ggml's
    ne[0] the last axis), when the kernels are built and on, ``shape`` is
    not 0-d and its last axis is whole blocks (0 blocks included: an empty
    array); else None.  ``native.decode_ggml(t.kernel, blocks, numel)``
    gives the bits of ``decode_canonical`` of ``t.read(blocks)``'s array."""
    if not shape or not native.ggml_kernels_on():
        return None
    t = TYPES.get(name)
    if t is None or t.kernel is None or shape[-1] % t.block_elems:
        return None
    return t
