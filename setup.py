"""Build hook for the optional native extension; metadata lives in pyproject.toml.

``optional=True`` keeps a failed compile (no C compiler, unusual platform) from
failing the install: :mod:`grit.fingerprint` then uses its pure-Python FNV-1a
and warns once when it hashes a large input.
"""
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# No contraction (a fused multiply-add is a different result, GRIT v1 §1.1) and
# no fast-math: the codec kernels rely on every float operation being one
# IEEE binary32 operation.  The FNV code is integer-only and gets the same
# flags, so that no build of the package depends on the compiler's defaults.
_GCC_LIKE_ARGS = ["-O2", "-ffp-contract=off", "-std=c99"]


class _BuildExt(build_ext):
    """Add GCC/Clang flags only when the compiler is not MSVC."""

    def build_extensions(self):
        if self.compiler.compiler_type != "msvc":
            for ext in self.extensions:
                ext.extra_compile_args = list(ext.extra_compile_args or []) + _GCC_LIKE_ARGS
        super().build_extensions()


setup(
    ext_modules=[
        Extension(
            "grit._ext",
            sources=["grit/_native/py/fnv.c", "grit/_native/core/fnv.c"],
            depends=["grit/_native/core/fnv.h"],
            optional=True,
        ),
        # Hot loops of the codec for the registered grades; grit.codec falls
        # back to its numpy path (same bytes) when this one is missing.
        Extension(
            "grit._kernels",
            sources=([f"grit/_native/py/{name}.c"
                      for name in ("module", "plane", "decode", "encode", "relayout", "ggml")]
                     + [f"grit/_native/core/{name}.c" for name in ("threads", "decode", "encode")]),
            depends=["grit/_native/core/core.h", "grit/_native/py/kernels_py.h"],
            optional=True,
        ),
    ],
    cmdclass={"build_ext": _BuildExt},
)
