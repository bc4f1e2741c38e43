"""Build hook for the optional native extension; metadata lives in pyproject.toml.

``optional=True`` keeps a failed compile (no C compiler, unusual platform) from
failing the install: :mod:`grit.fingerprint` then uses its pure-Python FNV-1a
and warns once when it hashes a large input.
"""
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# Integer-only code, but contraction is pinned off anyway so that no build of
# the package ever depends on the compiler's floating-point defaults.
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
            sources=["grit/_native/fnv.c"],
            optional=True,
        ),
    ],
    cmdclass={"build_ext": _BuildExt},
)
