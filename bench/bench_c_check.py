"""libgrit (the C library of grit.h) in one run: grit_check per second per
core, the Python-side cost of reaching it, and decode / encode through the
library beside the CPython extension built before the core was split out.

    python bench/bench_c_check.py [--calls 20000000] [--n 4194304] [--repeat 7]
                                  [--before REV] [--json out.json]

Rows:
  * C, level-1 grit_check of a valid MXFP4 view, of a valid view of a grade
    registered at run time, of a frame failure (bad magic) and of a size
    failure: a C program (compiled here, cc -O2, linked to grit/lib) loops
    --calls times on one thread; checks per second per core;
  * the same valid check from Python: grit.clib.check (ctypes, building the
    view each call), a prebuilt view through ctypes (the call alone), and
    grit.check.diagnose (the Python implementation);
  * decode / encode of the four kernel families, one thread, --n elements,
    medians of --repeat, all into the same kind of numpy buffers: libgrit's
    grit_decode / grit_encode (through ctypes, grit_check included), the same
    through the general codec (grit_decode_general / grit_encode_general,
    the path every other grade takes), today's
    grit._kernels (a binding over the same core), and grit._kernels as built
    at --before (default: the commit before the core / binding split),
    compiled here into a temporary directory.

Ratios are "before" seconds / row seconds (>= 1: no slower).
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grit                     # noqa: E402
from grit import clib           # noqa: E402
from grit.check import diagnose  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from bench_codec import _median_s  # noqa: E402  (the benches' one median)

GRADES = {"mxfp4": grit.GRADE_MXFP4, "nvf4": grit.GRADE_NVF4, "q4ks": grit.GRADE_Q4KS,
          "i8s24": grit.GRADE_I8S24}

C_BENCH = r"""
#include <grit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}
static grit_view_t view_of(const char *hex, int64_t numel, const int64_t b[4]) {
    grit_view_t v; uint8_t d[64]; memset(&v, 0, sizeof v);
    for (int i = 0; i < 64; i++) sscanf(hex + 2 * i, "%2hhx", &d[i]);
    grit_desc_from_bytes(d, &v.d); v.rank = 2; v.shape[0] = numel / 256; v.shape[1] = 256;
    for (int i = 0; i < 4; i++) v.plane_bytes[i] = b[i];
    return v;
}
/* argv: check CALLS HEX B0 B1 B2 B3 [GRADE] */
int main(int argc, char **argv) {
    if (!strcmp(argv[1], "check")) {
        long calls = atol(argv[2]); int64_t b[4];
        for (int i = 0; i < 4; i++) b[i] = atoll(argv[4 + i]);
        if (argc > 8 && grit_register_grade(argv[8], strlen(argv[8]), NULL, NULL) != GRIT_OK) return 3;
        grit_view_t v = view_of(argv[3], 1 << 20, b);
        grit_detail_t d; unsigned acc = 0;
        double t = now();
        for (long i = 0; i < calls; i++) acc += grit_check(&v, 1, &d);   /* a call into the shared library each time */
        t = now() - t;
        printf("%.6f %u\n", t, acc);
        return 0;
    }
    return 2;
}
"""


def _build_c(tmp: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise SystemExit("bench_c_check: needs a C compiler")
    src, exe = tmp / "bench.c", tmp / "bench"
    src.write_text(C_BENCH)
    lib = Path(clib.get_library()).parent
    subprocess.run([cc, "-std=c99", "-D_DEFAULT_SOURCE", "-O2", f"-I{clib.get_include()}",
                    str(src), f"-L{lib}", f"-Wl,-rpath,{lib}", "-lgrit", "-o", str(exe)],
                   check=True)
    return exe


def _build_before(tmp: Path, rev: str):
    """grit._kernels as built at rev, imported under another name."""
    src = tmp / "before"
    src.mkdir()
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "setup.py", "grit/_native"],
                          check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=arch, check=True)
    (src / "pyproject.toml").write_text('[build-system]\nrequires=["setuptools"]\n'
                                        '[project]\nname="before"\nversion="0"\n'
                                        '[tool.setuptools]\npackages=[]\n')
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "-b", str(tmp / "lib")],
                   cwd=src, check=True, capture_output=True)
    so = next((tmp / "lib" / "grit").glob("_kernels*.so"))
    spec = importlib.util.spec_from_file_location("grit._kernels", so)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ext_codec(k, kind: str, x: np.ndarray, repeat: int) -> tuple[float, float]:
    """(encode s, decode s) of one extension module, one thread."""
    enc = getattr(k, f"encode_{kind}")
    args = (x, False, 1) if kind in ("mxfp4", "nvf4") else (x, 1)
    planes = enc(*args)
    out = np.empty(x.size, np.float32)
    dec = getattr(k, f"decode_{kind}")
    te = _median_s(lambda: enc(*args), repeat)
    td = _median_s(lambda: dec(*planes, out, 1), repeat)
    return te, td


def _lib_codec(g, x: np.ndarray, repeat: int, general: bool = False) -> tuple[float, float]:
    """(encode s, decode s) through libgrit (ctypes; the check included),
    into numpy buffers like the extension rows'; ``general``: through
    grit_encode_general / grit_decode_general."""
    lib = clib.library()
    d = g.descriptor(group_axis=1)
    shape = (x.size // 256, 256)
    sizes = grit.plane_sizes(d, shape).sizes
    planes = [np.zeros(max(n, 1), np.uint8) for n in sizes]
    v, _keep = clib.view(d.to_bytes(), shape, sizes)
    for i, n in enumerate(sizes):
        if n:
            v.plane[i] = planes[i].ctypes.data
    out = np.empty(x.size, np.float32)
    fp = ctypes.POINTER(ctypes.c_float)
    xp, op = x.ctypes.data_as(fp), out.ctypes.data_as(fp)
    det = clib.Detail()

    def enc():
        st = (lib.grit_encode_general(ctypes.byref(v), xp, x.size, ctypes.byref(det)) if general
              else lib.grit_encode(ctypes.byref(v), xp, x.size, 1, ctypes.byref(det)))
        if st != 0:
            raise RuntimeError(det.message.decode())

    def dec():
        st = (lib.grit_decode_general(ctypes.byref(v), op, x.size, ctypes.byref(det)) if general
              else lib.grit_decode(ctypes.byref(v), op, x.size, 1, ctypes.byref(det)))
        if st != 0:
            raise RuntimeError(det.message.decode())

    return _median_s(enc, repeat), _median_s(dec, repeat)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20_000_000)
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--before", default="72c65da~1",
                    help="git revision whose grit._kernels is the 'before' row")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rows: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        exe = _build_c(tmp)
        numel = 1 << 20
        mx = grit.GRADE_MXFP4.descriptor(group_axis=1)
        sizes = grit.plane_sizes(mx, (numel // 256, 256)).sizes
        custom = grit.Grade.parse("grit1(e=u4,k0=64,s0=binary16,zp=u4,zpc=minus1,esr=affineminmax)")
        cd = custom.descriptor(group_axis=1)
        csizes = grit.plane_sizes(cd, (numel // 256, 256)).sizes
        bad = bytes(64)
        cases = {
            "valid MXFP4": (mx.to_bytes().hex(), sizes, None),
            "valid, grade registered at run time": (cd.to_bytes().hex(), csizes, custom.canonical),
            "frame failure (bad magic)": (bad.hex(), sizes, None),
            "size failure (scale0 one byte short)": (mx.to_bytes().hex(),
                                                     (sizes[0], sizes[1] - 1, 0, 0), None),
        }
        print(f"{'row':62s} {'value':>14s}")
        for name, (hexd, b, g) in cases.items():
            cmd = [str(exe), "check", str(a.calls), hexd, *map(str, b)] + ([g] if g else [])
            t = float(subprocess.run(cmd, check=True, capture_output=True, text=True)
                      .stdout.split()[0])
            rows[f"C grit_check level 1, {name} (checks/s/core)"] = a.calls / t
        # Python side
        lib = clib.library()
        v, _keep = clib.view(mx.to_bytes(), (numel // 256, 256), sizes)
        det = clib.Detail()
        n_py = 200_000
        t = _median_s(lambda: [lib.grit_check(ctypes.byref(v), 1, ctypes.byref(det))
                             for _ in range(n_py)], 3)
        rows["ctypes grit_check, prebuilt view (calls/s)"] = n_py / t
        t = _median_s(lambda: [clib.check(mx.to_bytes(), (numel // 256, 256), sizes)
                             for _ in range(n_py // 10)], 3)
        rows["grit.clib.check, view built per call (calls/s)"] = n_py / 10 / t
        t = _median_s(lambda: [diagnose(mx, (numel // 256, 256), sizes)
                             for _ in range(n_py // 10)], 3)
        rows["grit.check.diagnose, Python (calls/s)"] = n_py / 10 / t
        for k, val in rows.items():
            print(f"{k:62s} {val:14,.0f}")

        # decode / encode
        before = _build_before(tmp, a.before)
        from grit import _kernels as now_k
        rng = np.random.default_rng(1)
        x = rng.standard_normal(a.n).astype(np.float32)
        print(f"\n{'codec, one thread, n = ' + str(a.n):44s} {'encode ms':>10s} {'decode ms':>10s}"
              f" {'enc before/row':>15s} {'dec before/row':>15s}")
        for kind, g in GRADES.items():
            bef_e, bef_d = _ext_codec(before, kind, x, a.repeat)
            now_e, now_d = _ext_codec(now_k, kind, x, a.repeat)
            lib_e, lib_d = _lib_codec(g, x, a.repeat)
            gen_e, gen_d = _lib_codec(g, x, max(1, a.repeat // 3), general=True)
            for label, (e, dd) in (("before: grit._kernels at " + a.before, (bef_e, bef_d)),
                                   ("grit._kernels (binding over the core)", (now_e, now_d)),
                                   ("libgrit grit_encode / grit_decode", (lib_e, lib_d)),
                                   ("libgrit general codec", (gen_e, gen_d))):
                key = f"{kind} {label}"
                rows[f"{key} encode s"], rows[f"{key} decode s"] = e, dd
                print(f"{kind + ' ' + label:44s} {e * 1e3:10.2f} {dd * 1e3:10.2f} "
                      f"{bef_e / e:15.2f} {bef_d / dd:15.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
