"""libgrit, the C library of GRIT v1, as shipped in this package.

``get_include()`` / ``get_library()`` / ``get_pkgconfig_dir()`` /
``get_cmake_dir()`` say where the header, the shared library and the
pkg-config and CMake files are (docs/c-library.md).  ``library()`` loads the
library with ctypes and declares every function of grit.h, for tests, benches
and tools that compare the C side with the Python one; the package itself
never needs it (its own native code is the private extensions grit._ext and
grit._kernels, built from the same C core).
"""
from __future__ import annotations

import ctypes
import functools
import sys
from pathlib import Path
from typing import Sequence

from .errors import GritUsageError

__all__ = ["get_include", "get_library", "get_pkgconfig_dir", "get_cmake_dir", "library",
           "available", "View", "Detail", "MAXRANK", "STATUS_NAMES", "view", "check"]

_PKG = Path(__file__).resolve().parent
MAXRANK = 8
#: grit_status_t value -> the spec's spelling (grit_status_name)
STATUS_NAMES = ("Ok", "SizeMismatch", "GradeUnknown", "PlacementUnknown", "DigestMismatch")


def _library_name() -> str:
    return {"darwin": "libgrit.dylib", "win32": "grit.dll"}.get(sys.platform, "libgrit.so")


def get_include() -> str:
    """The directory holding grit.h (``-I$(python -c ...)``)."""
    return str(_PKG / "include")


def get_pkgconfig_dir() -> str:
    """The directory holding grit.pc, for PKG_CONFIG_PATH."""
    return str(_PKG / "lib" / "pkgconfig")


def get_cmake_dir() -> str:
    """The directory holding gritConfig.cmake, for ``-Dgrit_DIR=`` or
    CMAKE_PREFIX_PATH (``find_package(grit)``)."""
    return str(_PKG / "lib" / "cmake" / "grit")


def get_library() -> str:
    """The path of the shared library; GritUsageError when the package was
    installed without it (no C compiler at install time)."""
    p = _PKG / "lib" / _library_name()
    if not p.is_file():
        raise GritUsageError(f"libgrit was not built: {p} does not exist (install the package "
                             "where a C compiler is available)")
    return str(p)


def available() -> bool:
    return (_PKG / "lib" / _library_name()).is_file()


# ---------------------------------------------------------------------------
# the ABI of grit.h, as ctypes structures

class _Desc(ctypes.Structure):
    # 64 bytes, 8-aligned: filled from the wire bytes by grit_desc_from_bytes
    _fields_ = [("words", ctypes.c_uint64 * 8)]


class View(ctypes.Structure):
    """grit_view_t"""
    _fields_ = [("d", _Desc), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAXRANK), ("plane", ctypes.c_void_p * 4),
                ("plane_bytes", ctypes.c_int64 * 4), ("gid", ctypes.c_uint8 * 16)]


class Detail(ctypes.Structure):
    """grit_detail_t"""
    _fields_ = [("status", ctypes.c_int), ("step", ctypes.c_int32), ("plane", ctypes.c_int32),
                ("field", ctypes.c_char * 32), ("expected", ctypes.c_char * 80),
                ("actual", ctypes.c_char * 80), ("message", ctypes.c_char * 256)]


_u8p = ctypes.POINTER(ctypes.c_uint8)
_i64p = ctypes.POINTER(ctypes.c_int64)
_fp = ctypes.POINTER(ctypes.c_float)
_SIGNATURES = {
    "grit_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "grit_desc_from_bytes": (None, [ctypes.c_char_p, ctypes.POINTER(_Desc)]),
    "grit_desc_to_bytes": (None, [ctypes.POINTER(_Desc), ctypes.c_char_p]),
    "grit_fnv1a64": (ctypes.c_uint64, [ctypes.c_char_p, ctypes.c_size_t]),
    "grit_fnv1a128": (None, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]),
    "grit_grade_id": (ctypes.c_uint64, [ctypes.c_char_p, ctypes.c_size_t]),
    "grit_gid": (ctypes.c_int, [ctypes.POINTER(View), ctypes.c_char_p, ctypes.POINTER(Detail)]),
    "grit_gid_with": (None, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(_Desc),
                             ctypes.c_int32, _i64p, ctypes.c_char_p]),
    "grit_digest": (None, [ctypes.POINTER(View), ctypes.c_char_p]),
    "grit_base32_encode": (None, [ctypes.c_char_p, ctypes.c_char_p]),
    "grit_base32_parse": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]),
    "grit_fmt_valid": (ctypes.c_int, [ctypes.c_uint16]),
    "grit_fmt_decode": (ctypes.c_float, [ctypes.c_uint16, ctypes.c_uint32]),
    "grit_fmt_encode_rne": (ctypes.c_int64, [ctypes.c_uint16, ctypes.c_float]),
    "grit_register_grade": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t,
                                           ctypes.POINTER(ctypes.c_uint64),
                                           ctypes.POINTER(Detail)]),
    "grit_register_layout": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t,
                                            ctypes.POINTER(ctypes.c_uint64),
                                            ctypes.POINTER(Detail)]),
    "grit_layout_expression": (ctypes.c_char_p, [ctypes.c_uint64]),
    "grit_grade_canonical": (ctypes.c_char_p, [ctypes.c_uint64]),
    "grit_grade_frame": (ctypes.c_int, [ctypes.c_uint64, ctypes.POINTER(_Desc)]),
    "grit_check": (ctypes.c_int, [ctypes.POINTER(View), ctypes.c_int, ctypes.POINTER(Detail)]),
    "grit_check_digest": (ctypes.c_int, [ctypes.POINTER(View), ctypes.c_int, ctypes.c_char_p,
                                         ctypes.POINTER(Detail)]),
    "grit_plane_sizes": (ctypes.c_int, [ctypes.POINTER(_Desc), ctypes.c_int32, _i64p, _i64p,
                                        ctypes.POINTER(Detail)]),
    "grit_decode": (ctypes.c_int, [ctypes.POINTER(View), _fp, ctypes.c_size_t, ctypes.c_int,
                                   ctypes.POINTER(Detail)]),
    "grit_encode": (ctypes.c_int, [ctypes.POINTER(View), _fp, ctypes.c_size_t, ctypes.c_int,
                                   ctypes.POINTER(Detail)]),
    "grit_fmt_encode": (ctypes.c_int64, [ctypes.c_uint16, ctypes.c_float, ctypes.c_int,
                                         ctypes.c_int]),
    "grit_decode_general": (ctypes.c_int, [ctypes.POINTER(View), _fp, ctypes.c_size_t,
                                           ctypes.POINTER(Detail)]),
    "grit_encode_general": (ctypes.c_int, [ctypes.POINTER(View), _fp, ctypes.c_size_t,
                                           ctypes.POINTER(Detail)]),
    "grit_lin_to_c": (ctypes.c_int, [_fp, _fp, ctypes.c_int32, _i64p, ctypes.c_int]),
    "grit_c_to_lin": (ctypes.c_int, [_fp, _fp, ctypes.c_int32, _i64p, ctypes.c_int]),
    "grit_library_version": (ctypes.c_char_p, []),
}


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """libgrit loaded with ctypes, every grit.h function declared."""
    lib = ctypes.CDLL(get_library())
    for name, (res, args) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


def view(desc: bytes, shape: Sequence[int], plane_bytes: Sequence[int],
         planes: Sequence[bytes | None] | None = None) -> tuple[View, list]:
    """A grit_view_t of the 64 descriptor bytes, shape and plane sizes
    (``planes``: the bytes themselves, for level 2, decode and the digest).
    Extents must fit int64 (ctypes refuses others).
    Returns the view and the buffers it points into (keep them alive)."""
    if len(desc) != 64:
        raise GritUsageError(f"a descriptor is 64 bytes, got {len(desc)}")
    v = View()
    library().grit_desc_from_bytes(bytes(desc), ctypes.byref(v.d))
    # a rank past GRIT_MAXRANK is carried (the check refuses it) but only
    # MAXRANK extents fit the view
    v.rank = len(shape)
    for i, s in enumerate(shape[:MAXRANK]):
        v.shape[i] = s
    keep: list = []
    for i in range(4):
        v.plane_bytes[i] = plane_bytes[i]
        p = planes[i] if planes is not None else None
        if p:
            buf = ctypes.create_string_buffer(bytes(p), len(p))
            keep.append(buf)
            v.plane[i] = ctypes.addressof(buf)
    return v, keep


def check(desc: bytes, shape: Sequence[int], plane_bytes: Sequence[int], level: int = 1,
          planes: Sequence[bytes | None] | None = None,
          expected_digest: bytes | None = None) -> Detail:
    """grit_check_digest through libgrit: the filled grit_detail_t."""
    v, _keep = view(desc, shape, plane_bytes, planes)
    det = Detail()
    library().grit_check_digest(ctypes.byref(v), level, expected_digest, ctypes.byref(det))
    return det
