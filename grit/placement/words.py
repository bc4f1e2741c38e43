"""§5.1–§5.2: the 64-bit placement word, its classes, and the registered
placements of Appendix A.1 (one table; names, words and meanings)."""
from __future__ import annotations

from ..errors import GritLayoutError

__all__ = [
    "UNSPECIFIED", "CLASS_UNSPECIFIED", "CLASS_REGISTERED", "CLASS_HASHED",
    "CLASS_OPAQUE", "REGISTERED", "PLACEMENT_NAMES", "placement_class",
    "placement_name", "placement_by_name", "is_well_formed", "OPAQUE_ALL_ONES",
]

UNSPECIFIED = 0x0000000000000000
OPAQUE_ALL_ONES = 0xFFFFFFFFFFFFFFFF

CLASS_UNSPECIFIED = 0x0
CLASS_REGISTERED = 0x1
CLASS_HASHED = 0x8
CLASS_OPAQUE = 0xF

# name -> (word, what it means; docs/placements.md has the byte-level definition)
REGISTERED: dict[str, tuple[int, str]] = {
    "ROW_MAJOR": (0x1000000000000001, "canonical §3.7 order: groups in lin() order"),
    "COL_MAJOR": (0x1000000000000002, "the last two axes of the grouped view exchanged"),
    "SWIZZLE_128X4B": (0x1000000000000003, "Blackwell 128x4 scale-factor tile layout"),
    "TILE_16X16": (0x1000000000000004, "16x16 tiles, row-major tiles of row-major elements"),
    "BLOCK_AOS": (0x1000000000000005, "planes interleaved per block, as ggml block structs"),
    "LINEAR_META": (0x1000000000000011, "sparsity metadata in ascending quad order"),
    "META_M16N8K32": (0x1000000000000012, "mma.sp m16n8k32 metadata fragment order"),
    "PACK_K4_12B": (0x1000000000000020, "ggml get_scale_min_k4 12-byte scale/min packing"),
}
PLACEMENT_NAMES: dict[int, str] = {w: n for n, (w, _) in REGISTERED.items()}


def placement_class(word: int) -> int:
    return (word >> 60) & 0xF


def is_well_formed(word: int) -> bool:
    """Step 3 of §7.3: unspecified, registered class 0x1, class 0x8 or 0xF."""
    if word == UNSPECIFIED:
        return True
    c = placement_class(word)
    if c == CLASS_REGISTERED:
        return word in PLACEMENT_NAMES
    return c in (CLASS_HASHED, CLASS_OPAQUE)


def placement_name(word: int) -> str:
    if word == UNSPECIFIED:
        return "UNSPECIFIED"
    if word in PLACEMENT_NAMES:
        return PLACEMENT_NAMES[word]
    c = placement_class(word)
    kind = {CLASS_HASHED: "HASHED", CLASS_OPAQUE: "OPAQUE"}.get(c, f"class 0x{c:X}")
    return f"{kind}(0x{word:016x})"


def placement_by_name(name: str) -> int:
    key = name.strip().upper()
    if key == "UNSPECIFIED":
        return UNSPECIFIED
    if key in REGISTERED:
        return REGISTERED[key][0]
    raise GritLayoutError(f"unknown placement name {name!r}; registered: {', '.join(REGISTERED)}")
