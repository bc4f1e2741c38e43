"""§5: placements — the 64-bit words (``words``), the layout expression
language and its registry (``expr``), the meaning of every registered word
(``registered``), the unit grids of each plane (``planes``), and relayout
(``relayout``: ``grit.relayout`` / ``grit.canonical`` are its public form)."""
from .words import *  # noqa: F401,F403
from .words import __all__ as _words_all
from .expr import (ColMajor, Compose, Expr, Interleave, Opaque, Pad, Perm, RowMajor,  # noqa: F401
                   Swizzle, Tile, apply, index_map, layout_word, parse_layout,
                   register_layout, resolve_layout, same_layout)

__all__ = list(_words_all) + [
    "Expr", "RowMajor", "ColMajor", "Tile", "Interleave", "Swizzle", "Perm", "Pad", "Compose",
    "Opaque", "parse_layout", "layout_word", "register_layout", "resolve_layout", "same_layout",
    "apply", "index_map",
]
