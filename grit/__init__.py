"""grit — GRIT v1: Grouped Reduced-precision Interchange Type.

A GRIT array is (Grade, Placement, Planes, Shape): a hashed numeric contract,
a 64-bit layout word, up to four byte planes, and a shape, behind a 64-byte
descriptor.  This package encodes and decodes bit-exactly to the spec, checks
any descriptor in O(1) with a precise diagnosis, and scans real checkpoints.
"""
from . import layouts
from .check import CheckReport, check, diagnose, plane_sizes
from .descriptor import Descriptor
from .errors import (
    Detail, GritDigestError, GritEncodeError, GritError, GritFormatError, GritGradeError,
    GritLayoutError, GritSizeError, GritUsageError, Status,
)
from .fingerprint import base32_decode, base32_encode, digest, fnv1a64, fnv1a128, gid
from .formats import Format
from .grade import (
    GRADE_I8S24, GRADE_MXFP4, GRADE_MXFP4_RNE, GRADE_NVF4, GRADE_NVF4_RTZ, GRADE_Q4KS,
    Grade, known_grades, lookup_grade, register_grade,
)
from .array import GritArray
from .codec import Requantized, decode, encode, requantize

__version__ = "0.1.0"

__all__ = [
    "GritArray", "Requantized", "decode", "encode", "requantize",
    "CheckReport", "Descriptor", "Detail", "Format", "GRADE_I8S24", "GRADE_MXFP4",
    "GRADE_MXFP4_RNE", "GRADE_NVF4", "GRADE_NVF4_RTZ", "GRADE_Q4KS", "Grade",
    "GritDigestError", "GritEncodeError", "GritError", "GritFormatError", "GritGradeError",
    "GritLayoutError", "GritSizeError", "GritUsageError", "Status", "base32_decode",
    "base32_encode", "check", "diagnose", "digest", "fnv1a128", "fnv1a64", "gid",
    "known_grades", "layouts", "lookup_grade", "plane_sizes", "register_grade",
]
from . import audit, kernels  # noqa: E402
from .audit import assume_placement, verify_placement  # noqa: E402
from .kernels import MatmulResult, matmul, register_kernel  # noqa: E402
__all__ += ["assume_placement", "verify_placement", "matmul", "MatmulResult",
            "register_kernel", "audit", "kernels"]
from .placement.relayout import canonical, decode, relayout  # noqa: E402,F811
from .array import concat, require_metadata_order  # noqa: E402
from .placement.expr import layout_word, parse_layout, register_layout  # noqa: E402
__all__ += ["relayout", "canonical", "concat", "require_metadata_order", "layout_word",
            "parse_layout", "register_layout", "load"]


def __getattr__(name):
    if name == "load":
        from .io import load
        return load
    raise AttributeError(f"module 'grit' has no attribute {name!r}")
