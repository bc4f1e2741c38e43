"""Plane bytes ↔ code arrays (§3.4, §3.5, §3.8 and docs/spec-decisions.md
"Bytes of each plane").

* Element planes: a dense bitstream of width w (2..32) — LSB-first by default,
  the mirror image under MSB-first — or PAD8 (one element per byte, low bits)
  for w ≤ 8.  Widths that are a multiple of 8 are little-endian bytes under
  either bit order.
* scale0 and zero points: one value per byte for w ≤ 8, else the dense
  little-endian LSB-first stream of width w.
* scale1: the dense LSB-first stream of width(scale1), as the §7.3 size
  equation counts it.
* Sparse metadata: N indices per quad, LSB-first, independent of the bit order.

Every reader returns the smallest unsigned dtype that holds a code and never
copies more than it must; every writer returns ``bytes``.  A plane too short
for the codes asked of it is a ``GritUsageError`` (callers pass checked planes,
so it names a caller's bug, never a file's).
"""
from __future__ import annotations

import numpy as np

from .._sparse import meta_indices
from ..errors import GritUsageError

__all__ = [
    "unpack_stream", "pack_stream", "unpack_elements", "pack_elements",
    "read_group_plane", "write_group_plane", "read_scale1", "write_scale1",
    "read_meta", "write_meta", "code_dtype_for_width",
]

_CHUNK = 1 << 20  # elements per block in the generic bit paths (a multiple of 8)


def code_dtype_for_width(w: int) -> np.dtype:
    return np.dtype(np.uint8 if w <= 8 else np.uint16 if w <= 16 else np.uint32)


def _u8(buf) -> np.ndarray:
    return np.frombuffer(buf, dtype=np.uint8)


# ---------------------------------------------------------------------------
# dense bitstreams

def unpack_stream(buf, count: int, w: int, msb: bool = False) -> np.ndarray:
    """The first ``count`` codes of a dense width-``w`` bitstream.

    LSB-first: code j is stream bits [j·w, j·w + w), stream bit k being bit
    k % 8 of byte k / 8, the code's LSB first.  MSB-first: stream bit k is bit
    7 − k % 8 of byte k / 8 and the code's MSB comes first.  Multiples of 8
    bits are little-endian bytes either way."""
    if not 2 <= w <= 32:
        raise GritUsageError(f"stream width {w} outside 2..32")
    raw = _u8(buf)
    nbytes = (count * w + 7) // 8
    if raw.size < nbytes:
        raise GritUsageError(f"plane holds {raw.size} bytes, {nbytes} needed for {count} "
                             f"codes of {w} bits")
    dt = code_dtype_for_width(w)
    if count == 0:
        return np.zeros(0, dtype=dt)
    if w % 8 == 0:
        if w == 8:
            return raw[:count]
        if w in (16, 32):
            return raw[:nbytes].view("<u2" if w == 16 else "<u4").astype(dt, copy=False)
        b = raw[:nbytes].reshape(count, w // 8).astype(np.uint32)
        return (b << (np.arange(w // 8, dtype=np.uint32) * 8)).sum(axis=1, dtype=np.uint32)
    if w == 4:
        lo, hi = raw[:nbytes] & np.uint8(0x0F), raw[:nbytes] >> np.uint8(4)
        out = np.empty(2 * nbytes, dtype=np.uint8)
        out[0::2], out[1::2] = (hi, lo) if msb else (lo, hi)
        return out[:count]
    if w == 2:
        shifts = np.array([6, 4, 2, 0] if msb else [0, 2, 4, 6], dtype=np.uint8)
        out = (raw[:nbytes, None] >> shifts) & np.uint8(3)
        return out.reshape(-1)[:count]
    return _unpack_generic(raw, count, w, msb).astype(dt, copy=False)


def _unpack_generic(raw: np.ndarray, count: int, w: int, msb: bool) -> np.ndarray:
    """Any width: gather the ≤ 5 bytes each code touches into a uint64."""
    nb = (w + 7 + 7) // 8                          # bytes a w-bit code can span
    padded = np.zeros(raw.size + nb, dtype=np.uint64)
    padded[:raw.size] = raw
    out = np.empty(count, dtype=np.uint64)
    mask = np.uint64((1 << w) - 1)
    for start in range(0, count, _CHUNK):
        j = np.arange(start, min(count, start + _CHUNK), dtype=np.int64)
        bit = j * w
        b = bit >> 3
        s = (bit & 7).astype(np.uint64)
        v = np.zeros(j.size, dtype=np.uint64)
        for t in range(nb):
            sh = np.uint64(8 * (nb - 1 - t) if msb else 8 * t)
            v |= padded[b + t] << sh
        if msb:   # the stream read big-endian: code j starts s bits below the top
            v = v >> (np.uint64(8 * nb - w) - s)
        else:
            v = v >> s
        out[start:start + j.size] = v & mask
    return out


def pack_stream(codes, w: int, msb: bool = False) -> bytes:
    """Inverse of :func:`unpack_stream`; the last byte is zero-padded."""
    if not 2 <= w <= 32:
        raise GritUsageError(f"stream width {w} outside 2..32")
    c = np.ascontiguousarray(codes).reshape(-1)
    n = c.size
    if n == 0:
        return b""
    mask = (1 << w) - 1
    if w % 8 == 0:
        if w == 8:
            return (c.astype(np.uint8) if c.dtype != np.uint8 else c).tobytes()
        if w in (16, 32):
            return (c & mask).astype("<u2" if w == 16 else "<u4").tobytes()
        c32 = (c.astype(np.uint64) & np.uint64(mask)).astype(np.uint32)
        b = (c32[:, None] >> (np.arange(w // 8, dtype=np.uint32) * 8)) & np.uint32(0xFF)
        return b.astype(np.uint8).tobytes()
    if w == 4:
        c8 = c.astype(np.uint8) & np.uint8(0x0F)
        if n % 2:
            c8 = np.concatenate([c8, np.zeros(1, np.uint8)])
        first, second = c8[0::2], c8[1::2]
        if msb:
            first, second = second, first
        return (first | (second << np.uint8(4))).tobytes()
    if w == 2:
        c8 = c.astype(np.uint8) & np.uint8(3)
        pad = (-n) % 4
        if pad:
            c8 = np.concatenate([c8, np.zeros(pad, np.uint8)])
        q = c8.reshape(-1, 4)
        shifts = np.array([6, 4, 2, 0] if msb else [0, 2, 4, 6], dtype=np.uint8)
        return np.bitwise_or.reduce(q << shifts, axis=1).astype(np.uint8).tobytes()
    return _pack_generic(c, n, w, msb)


def _pack_generic(c: np.ndarray, n: int, w: int, msb: bool) -> bytes:
    """Any width: expand to bits and let packbits lay out the stream.  Blocks
    of _CHUNK codes (a multiple of 8) end on byte boundaries."""
    order = "big" if msb else "little"
    shifts = (np.arange(w - 1, -1, -1) if msb else np.arange(w)).astype(np.uint64)
    parts = []
    for start in range(0, n, _CHUNK):
        blk = c[start:start + _CHUNK].astype(np.uint64)
        bits = ((blk[:, None] >> shifts) & np.uint64(1)).astype(np.uint8)
        parts.append(np.packbits(bits.reshape(-1), bitorder=order).tobytes())
    return b"".join(parts)


# ---------------------------------------------------------------------------
# planes

def unpack_elements(buf, count: int, w: int, pad8: bool, msb: bool) -> np.ndarray:
    """The element plane: PAD8 (w ≤ 8, one per byte, low bits — the decoder
    masks) or the dense stream in the grade's bit order."""
    if pad8 and w <= 8:
        return _u8(buf)[:count]
    return unpack_stream(buf, count, w, msb)


def pack_elements(codes, w: int, pad8: bool, msb: bool) -> bytes:
    if pad8 and w <= 8:
        c = np.ascontiguousarray(codes).reshape(-1)
        return (c.astype(np.uint8) & np.uint8((1 << w) - 1)).tobytes()
    return pack_stream(codes, w, msb)


def read_group_plane(buf, count: int, w: int) -> np.ndarray:
    """scale0 or the zero-point plane: PAD8 for w ≤ 8 (§3.4), else the dense
    little-endian LSB-first stream of width w."""
    if w <= 8:
        return _u8(buf)[:count]
    return unpack_stream(buf, count, w, msb=False)


def write_group_plane(codes, w: int) -> bytes:
    if w <= 8:
        c = np.ascontiguousarray(codes).reshape(-1)
        return (c.astype(np.uint8) & np.uint8((1 << w) - 1)).tobytes()
    return pack_stream(codes, w, msb=False)


def read_scale1(buf, count: int, w: int) -> np.ndarray:
    """scale1: the dense LSB-first stream of width(scale1) (§7.3's equation);
    identical to PAD8 for 8-bit formats."""
    if w == 8:
        return _u8(buf)[:count]
    return unpack_stream(buf, count, w, msb=False)


def write_scale1(codes, w: int) -> bytes:
    if w == 8:
        return np.ascontiguousarray(codes).reshape(-1).astype(np.uint8).tobytes()
    return pack_stream(codes, w, msb=False)


def read_meta(buf, n: int, bits: int, nquads: int) -> np.ndarray:
    """(nquads, n) survivor indices, slot j of quad q at bits
    [(q·n + j)·bits, +bits), LSB-first (§3.8)."""
    if nquads == 0:
        return np.zeros((0, n), dtype=np.uint8)
    return meta_indices(buf, n, bits, nquads)


def write_meta(idx, bits: int) -> bytes:
    """Inverse of :func:`read_meta` for an (nquads, n) index array."""
    return pack_stream(np.asarray(idx).reshape(-1), bits, msb=False)
