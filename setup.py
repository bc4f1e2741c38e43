"""Build hook for the native code; metadata lives in pyproject.toml.

Three things are built from grit/_native/ (core/: the C core, no Python in
it; py/: the CPython bindings over it):

* ``grit._ext`` -- FNV-1a for grit.fingerprint;
* ``grit._kernels`` -- the codec and relayout kernels for grit.codec and
  grit.placement;
* ``grit/lib/libgrit.so`` -- the C library of grit/include/grit.h, for C
  and C++ programs (docs/c-library.md); pkg-config and CMake find it
  through grit/lib/pkgconfig/grit.pc and grit/lib/cmake/grit/.

All three are optional: a failed compile (no C compiler, unusual platform)
does not fail the install.  :mod:`grit.fingerprint` then uses its
pure-Python FNV-1a, the codec its numpy path, and ``grit.get_library()``
says the library is absent.
"""
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# No contraction (a fused multiply-add is a different result, GRIT v1 §1.1) and
# no fast-math: the codec kernels rely on every float operation being one
# IEEE binary32 operation.  The FNV code is integer-only and gets the same
# flags, so that no build of the package depends on the compiler's defaults.
_GCC_LIKE_ARGS = ["-O2", "-ffp-contract=off", "-std=c99"]

_CORE = "grit/_native/core"
# the kernels' core files both the extension and the library compile
_KERNEL_CORE = [f"{_CORE}/{n}.c" for n in ("threads", "decode", "encode")]
# the library: the kernels, FNV-1a and grit.h's API
LIBGRIT_SOURCES = _KERNEL_CORE + [
    f"{_CORE}/{n}.c" for n in ("fnv", "formats", "fingerprint", "grade", "check", "codec", "generic", "layout")]
LIBGRIT_DEPENDS = [f"{_CORE}/{n}.h" for n in ("core", "fnv", "lib")] + ["grit/include/grit.h"]


def libgrit_name() -> str:
    return {"darwin": "libgrit.dylib", "win32": "grit.dll"}.get(sys.platform, "libgrit.so")


class _BuildExt(build_ext):
    """Add GCC/Clang flags only when the compiler is not MSVC, and build
    libgrit beside the extensions."""

    def build_extensions(self):
        if self.compiler.compiler_type != "msvc":
            for ext in self.extensions:
                ext.extra_compile_args = list(ext.extra_compile_args or []) + _GCC_LIKE_ARGS
        super().build_extensions()
        self._build_libgrit()

    def _libgrit_path(self) -> str:
        # setuptools runs build_extensions with inplace off and copies the
        # extensions back afterwards (run below); an editable install
        # (pip install -e) finds the package, and so the library, in the
        # source tree
        root = "" if self.editable_mode else self.build_lib
        return os.path.join(root, "grit", "lib", libgrit_name())

    def run(self):
        super().run()
        if self.inplace and not self.editable_mode:
            built = self._libgrit_path()
            if os.path.exists(built):
                os.makedirs(os.path.join("grit", "lib"), exist_ok=True)
                self.copy_file(built, os.path.join("grit", "lib", libgrit_name()))

    def get_outputs(self):
        out = super().get_outputs()
        path = self._libgrit_path()
        return out + ([path] if os.path.exists(path) and not self.editable_mode else [])

    def _build_libgrit(self):
        """grit/lib/libgrit.so from LIBGRIT_SOURCES; a failure is a warning
        (the Python package works without the library)."""
        if self.compiler.compiler_type == "msvc":
            self.warn("libgrit: building the C library with MSVC is not supported; skipped")
            return
        out = self._libgrit_path()
        try:
            objects = self.compiler.compile(
                LIBGRIT_SOURCES, output_dir=os.path.join(self.build_temp, "libgrit"),
                extra_postargs=_GCC_LIKE_ARGS + ["-fPIC", "-fvisibility=hidden"],
                depends=LIBGRIT_DEPENDS)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            soname = [] if sys.platform == "darwin" else [f"-Wl,-soname,{libgrit_name()}"]
            self.compiler.link_shared_object(
                objects, out, libraries=["m"] + ([] if sys.platform == "darwin" else ["pthread"]),
                extra_postargs=soname)
        except Exception as exc:  # noqa: BLE001 - any compiler failure leaves Python working
            self.warn(f"libgrit: the C library was not built ({exc}); "
                      "grit.get_library() will say so")


setup(
    ext_modules=[
        Extension(
            "grit._ext",
            sources=["grit/_native/py/fnv.c", f"{_CORE}/fnv.c", f"{_CORE}/fnv_multi.c",
                     f"{_CORE}/fnv_wide.c"],
            depends=[f"{_CORE}/fnv.h", f"{_CORE}/fnv_multi.h", f"{_CORE}/fnv_wide.h"],
            optional=True,
        ),
        # Hot loops of the codec for the registered grades; grit.codec falls
        # back to its numpy path (same bytes) when this one is missing.
        Extension(
            "grit._kernels",
            sources=([f"grit/_native/py/{name}.c"
                      for name in ("module", "plane", "decode", "encode", "relayout", "ggml")]
                     + _KERNEL_CORE + [f"{_CORE}/{n}.c" for n in ("relayout", "ggml")]),
            depends=[f"{_CORE}/core.h", "grit/_native/py/kernels_py.h"],
            optional=True,
        ),
    ],
    cmdclass={"build_ext": _BuildExt},
)
