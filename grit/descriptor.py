"""§3 and Appendix A: the pinned 64-byte descriptor.

One little-endian layout, one pack, one unpack.  ``Descriptor.from_bytes``
accepts *any* 64 bytes (§14: the all-zeros and all-ones patterns are
well-formed inputs); whether they mean anything is grit_check's business.
"""
from __future__ import annotations

import operator
import struct
from dataclasses import dataclass, fields, replace

from .errors import GritGradeError, GritUsageError, pin

__all__ = [
    "Descriptor", "DESC_STRUCT", "MAGIC", "HDR_BYTES", "VERSION",
    "F_HAS_ZP", "F_ZP_MINUS1", "F_SPARSE", "F_MSB_FIRST", "F_INTERLEAVED",
    "F_ZP_L1SCALED", "F_RESERVED", "CT_DENSE", "CT_PAD8", "SPMETA_NONE",
    "SPMETA_U2", "SPMETA_U4", "SPORDER_UNORDERED", "SPORDER_ASC_LSB",
    "NOTE_ASSUMED", "NOTE_PRODUCER_SHIFT", "NOTE_PRODUCER_MASK", "FRAME_SPANS",
    "NOTE_SPAN", "is_descriptor_hex",
]

# Appendix A.1
MAGIC = 0x31545247  # 'G','R','T','1' little-endian
HDR_BYTES = 64
VERSION = 1
F_HAS_ZP = 0x01
F_ZP_MINUS1 = 0x02
F_SPARSE = 0x04
F_MSB_FIRST = 0x08
F_INTERLEAVED = 0x10
F_ZP_L1SCALED = 0x20
F_RESERVED = 0xC0
CT_DENSE = 0
CT_PAD8 = 1
SPMETA_NONE = 0
SPMETA_U2 = 1
SPMETA_U4 = 2
SPORDER_UNORDERED = 0
SPORDER_ASC_LSB = 1
NOTE_ASSUMED = 0x00000001  # NOT hashed (§11.1)
NOTE_PRODUCER_SHIFT = 8    # bits 8..15: producer tag
NOTE_PRODUCER_MASK = 0x0000FF00

# grit_desc_t, §3.1: sizeof == 64, no padding, no bitfields.
DESC_STRUCT = struct.Struct("<IBBBB HHHH hHH BBBBBB I QQQQ")
pin(DESC_STRUCT.size == HDR_BYTES, "grit_desc_t must be exactly 64 bytes (§3.1)")

FRAME_SPANS = ((0, 28), (32, 64))  # §3.1: hashed
NOTE_SPAN = (28, 32)               # §11.1: informational only


@dataclass(frozen=True, slots=True, kw_only=True)
class Descriptor:
    """grit_desc_t as a value.  Field names are the C binding's."""

    magic: int = MAGIC
    hdr_bytes: int = HDR_BYTES
    version: int = VERSION
    n_levels: int = 1
    flags: int = 0
    elem: int = 0
    scale0: int = 0
    scale1: int = 0
    zp_fmt: int = 0
    group_axis: int = 0
    k0: int = 0
    k1: int = 0
    sp_n: int = 0
    sp_m: int = 0
    sp_meta_fmt: int = 0
    sp_order: int = 0
    container: int = 0
    frame_rsvd: int = 0
    note: int = 0
    placement_data: int = 0
    placement_scale: int = 0
    placement_meta: int = 0
    grade_id: int = 0

    # -- the one unpack
    @classmethod
    def from_bytes(cls, b) -> "Descriptor":
        try:
            mv = memoryview(b).cast("B")
        except TypeError:
            raise GritUsageError(
                f"a descriptor is 64 bytes, got {type(b).__name__}") from None
        if mv.nbytes != HDR_BYTES:
            raise GritGradeError(
                f"a v1 descriptor is exactly {HDR_BYTES} bytes, got {mv.nbytes}")
        return cls(**dict(zip(_NAMES, DESC_STRUCT.unpack(mv))))

    @classmethod
    def coerce(cls, desc) -> "Descriptor":
        """A Descriptor from a Descriptor, 64 bytes-like, or 128 hex digits."""
        if isinstance(desc, cls):
            return desc
        if isinstance(desc, str):
            return cls.from_hex(desc)
        return cls.from_bytes(desc)

    @classmethod
    def from_hex(cls, text: str, *, strict: bool = False) -> "Descriptor":
        """From 128 hex digits.  Lenient by default (whitespace and a 0x
        prefix are dropped, as typed on a command line); ``strict``: exactly
        128 hex digits and nothing else, as a file stores them."""
        if not isinstance(text, str):
            raise GritUsageError(f"descriptor hex is text, got {type(text).__name__}")
        if strict:
            if not is_descriptor_hex(text):
                raise GritGradeError(f"a stored descriptor is exactly {2 * HDR_BYTES} hex "
                                     f"digits, got {text[:40]!r}")
            return cls.from_bytes(bytes.fromhex(text))
        t = "".join(text.split())
        if t.lower().startswith("0x"):
            t = t[2:]
        try:
            raw = bytes.fromhex(t)
        except ValueError:
            raise GritGradeError(f"descriptor hex is not hexadecimal: {text[:40]!r}") from None
        return cls.from_bytes(raw)

    # -- the one pack
    def to_bytes(self) -> bytes:
        try:
            return DESC_STRUCT.pack(*(getattr(self, n) for n in _NAMES))
        except struct.error as e:
            raise GritUsageError(f"descriptor field out of range: {e}") from None

    def hex(self) -> str:
        return self.to_bytes().hex()

    def frame_bytes(self) -> bytes:
        """The 60 hashed bytes: [0,28) ‖ [32,64)."""
        b = self.to_bytes()
        return b[0:28] + b[32:64]

    # -- note (§11.1): bit 0 NOTE_ASSUMED, bits 8..15 producer tag
    @property
    def assumed(self) -> bool:
        return bool(self.note & NOTE_ASSUMED)

    @property
    def producer(self) -> int:
        return (self.note & NOTE_PRODUCER_MASK) >> NOTE_PRODUCER_SHIFT

    def with_note(self, note: int) -> "Descriptor":
        try:
            n = operator.index(note)
        except TypeError:
            raise GritUsageError(f"a note is an integer, got {type(note).__name__}") from None
        return replace(self, note=n & 0xFFFFFFFF)

    def replace(self, **changes) -> "Descriptor":
        unknown = sorted(set(changes) - set(_NAMES))
        if unknown:
            raise GritUsageError(f"no descriptor field {', '.join(unknown)} (§3.1 names: "
                                 f"{', '.join(_NAMES)})")
        return replace(self, **changes)

    @property
    def placements(self) -> tuple[int, int, int]:
        return (self.placement_data, self.placement_scale, self.placement_meta)


def is_descriptor_hex(text) -> bool:
    """Whether ``text`` is exactly 128 hex digits (a descriptor as files store it)."""
    return (isinstance(text, str) and len(text) == 2 * HDR_BYTES
            and all(c in _HEX_DIGITS for c in text))


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_NAMES = tuple(f.name for f in fields(Descriptor))
pin(len(_NAMES) == len(DESC_STRUCT.unpack(bytes(HDR_BYTES))),
    "one Descriptor field per grit_desc_t member (§3.1)")
