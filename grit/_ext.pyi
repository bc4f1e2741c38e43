# The private FNV-1a extension (grit/_native/fnv.c), as grit.fingerprint calls
# it: each function takes C-contiguous bytes-like objects.
from typing import Any, Sequence

def fnv1a64(buffer: Any, h: int = ..., /) -> int: ...
def fnv1a128(buffer: Any, h: int = ..., /) -> int: ...
def digest(planes: Sequence[Any], /) -> int: ...
def fnv1a128_many(states: Sequence[int], streams: Sequence[Sequence[Any]], lanes: int = ...,
                  /) -> list[int]: ...
def fnv1a128_many_cmp(states: Sequence[int], streams: Sequence[Sequence[Any]],
                      others: Sequence[Sequence[Any]], lanes: int = ...,
                      /) -> tuple[list[int], list[bool]]: ...

FNV128_IMPL: str
NOGIL_BYTES: int
FNV_MULTI_IMPL: str
FNV_MULTI_LANES: int
#: the chain-and-sums loops this machine has the instructions of, and those
#: that passed their self-check at import ("avx512", "avx2"), fastest first
FNV_WIDE_CPU: tuple[str, ...]
FNV_WIDE_LOOPS: tuple[str, ...]

def fnv_wide(on: bool | str | None = ..., /) -> str | bool: ...
