"""grit — GRIT v1: Grouped Reduced-precision Interchange Type.

A GRIT array is (Grade, Placement, Planes, Shape): a hashed numeric contract,
a 64-bit layout word, up to four byte planes, and a shape, behind a 64-byte
descriptor.  This package encodes and decodes bit-exactly to the spec, checks
any descriptor in O(1) with a precise diagnosis, and scans real checkpoints.
"""
from . import layouts
from .check import CheckReport, plane_sizes
from .boundary import check, diagnose
from .descriptor import Descriptor
from .errors import (
    Detail, GritDigestError, GritEncodeError, GritError, GritFormatError, GritGradeError,
    GritLayoutError, GritPinError, GritSizeError, GritUsageError, Status,
)
from .fingerprint import base32_decode, base32_encode, digest, fnv1a64, fnv1a128, gid
from .formats import Format
from .grade import (
    GRADE_I8S24, GRADE_MXFP4, GRADE_MXFP4_RNE, GRADE_NVF4, GRADE_NVF4_RTZ, GRADE_Q4KS,
    Grade, known_grades, lookup_grade, register_grade,
)
# the public decode canonicalises any non-opaque placement, then runs the codec
from .array import GritArray, canonical, concat, decode, relayout, require_metadata_order
from .codec.encode import Requantized, encode, requantize
from .placement.expr import layout_word, parse_layout, register_layout
from . import audit, kernels
from .audit import assume_placement, verify_placement
from .kernels import MatmulResult, matmul, register_kernel
from .io import load, save, save_gguf
from .clib import get_cmake_dir, get_include, get_library, get_pkgconfig_dir
# the tools: grit.explain.diff / render, and grit.scan (the package, callable as its scan)
from . import explain, scan
# grit info (the module, callable as its info) and the ecosystem's grade names
from . import info
from .ecosystem import grade_named
# grit.convert's converters of other containers register themselves (GGUF)
from . import convert_gguf as _convert_gguf  # noqa: F401

__version__ = "0.1.0"

__all__ = [
    "CheckReport", "Descriptor", "Detail", "Format", "GRADE_I8S24", "GRADE_MXFP4",
    "GRADE_MXFP4_RNE", "GRADE_NVF4", "GRADE_NVF4_RTZ", "GRADE_Q4KS", "Grade", "GritArray",
    "GritDigestError", "GritEncodeError", "GritError", "GritFormatError", "GritGradeError",
    "GritLayoutError", "GritSizeError", "GritUsageError", "MatmulResult", "Requantized",
    "Status", "assume_placement", "audit", "base32_decode", "base32_encode", "canonical",
    "check", "concat", "decode", "diagnose", "digest", "encode", "fnv1a128", "fnv1a64", "gid",
    "kernels", "known_grades", "layout_word", "layouts", "load", "lookup_grade", "matmul",
    "parse_layout", "plane_sizes", "register_grade", "register_kernel", "register_layout",
    "relayout", "require_metadata_order", "requantize", "verify_placement",
]

__all__ += ["save", "save_gguf", "GritPinError"]
# libgrit, the C library (docs/c-library.md)
__all__ += ["get_include", "get_library", "get_pkgconfig_dir", "get_cmake_dir"]
__all__ += ["explain", "scan"]
__all__ += ["info", "grade_named"]
