/*
 * grit._kernels: the module -- its method table and docstrings, simd(), the
 * import-time self-check and PyInit (kernels.h has the overview).
 */
#include "kernels.h"

PyDoc_STRVAR(decode_doc,
"decode_mxfp4(data, scale0, out, nthreads=1)\n"
"decode_nvf4(data, scale0, scale1, out, nthreads=1)\n"
"decode_q4ks(data, scale0, scale1, aux, out, nthreads=1)\n"
"decode_i8s24(data, scale0, aux, out, nthreads=1)\n\n"
"Fill the float32 buffer ``out`` (its length gives numel, in lin order) with\n"
"decode() of the canonical planes.");

PyDoc_STRVAR(encode_doc,
"encode_mxfp4(x, rne, nthreads=1) -> (data, scale0)\n"
"encode_nvf4(x, rtz, nthreads=1) -> (data, scale0, scale1)\n"
"encode_q4ks(x, nthreads=1) -> (data, scale0, scale1, aux)\n"
"encode_i8s24(x, nthreads=1) -> (data, scale0, aux)\n\n"
"encode() of the float32 buffer ``x`` (lin order) into the canonical planes,\n"
"as bytes.");

PyDoc_STRVAR(transpose_doc,
"transpose(src, R, C, bits, msb=False, nthreads=1) -> bytes\n\n"
"The R x C grid of ``bits``-bit units (4, or a multiple of 8) stored\n"
"column-major: unit (r, c) at position c*R + r.  4-bit units are packed two\n"
"per byte, LSB-first (``msb``: unit 2i in the high nibble); a padding nibble\n"
"is zero.");

PyDoc_STRVAR(tile_doc,
"tile(src, rows, rowbytes, tr, tcb, w, tab, inverse=False, nthreads=1) -> bytes\n\n"
"Cut a grid of ``rows`` rows of ``rowbytes`` bytes into tiles of ``tr`` rows\n"
"x ``tcb`` bytes, tiles in row-major order, each stored as chunks of ``w``\n"
"bytes: chunk s of a tile is the tile's row-major chunk tab[s] (``tab`` an\n"
"int64 buffer, a permutation of 0..tr*tcb/w-1).  ``inverse`` undoes it.");

PyDoc_STRVAR(interleave_doc,
"interleave((f0, f1, f2, f3), (w0, w1, w2, w3), blocks, nthreads=1) -> bytes\n"
"deinterleave(src, (w0, w1, w2, w3), blocks, nthreads=1) -> (f0, f1, f2, f3)\n\n"
"Blocks of the fields' w-byte pieces in field order (BLOCK_AOS), and back.\n"
"A field of width 0 takes no bytes (and comes back as b'').");

PyDoc_STRVAR(k4_doc,
"pack_k4_12b(sc, m, groups, nthreads=1) -> bytes\n"
"unpack_k4_12b(packed, groups, nthreads=1) -> (sc, m)\n\n"
"PACK_K4_12B: per super-block 8 six-bit scales and 8 six-bit mins (one per\n"
"byte, high bits ignored) <-> 12 bytes.");

PyDoc_STRVAR(k4ilv_doc,
"interleave_k4((s1, sc, m, data), w1, wd, blocks, nthreads=1) -> bytes\n"
"deinterleave_k4(src, w1, wd, blocks, nthreads=1) -> (s1, sc, m, data)\n\n"
"BLOCK_AOS of PACK_K4_12B super-blocks in one pass: block b is s1's w1\n"
"bytes, pack_k4_12b of sc's and m's 8 bytes, then data's wd bytes.");

PyDoc_STRVAR(simd_doc,
"simd(enable=None) -> str\n\n"
"The vector path in use, 'avx2' or 'portable'.  ``enable=False`` forces the\n"
"portable C loops, ``True`` restores AVX2 where the CPU has it (both give the\n"
"same bits; tests run both).");

static int cpu_has_avx2 = 0;

static PyObject *
py_simd(PyObject *self, PyObject *args)
{
    PyObject *enable = Py_None;
    (void)self;
    if (!PyArg_ParseTuple(args, "|O", &enable)) {
        return NULL;
    }
    if (enable != Py_None) {
        int on = PyObject_IsTrue(enable);
        if (on < 0) {
            return NULL;
        }
        grit_use_avx2 = on && cpu_has_avx2;
    }
    return PyUnicode_FromString(grit_use_avx2 ? "avx2" : "portable");
}

static PyMethodDef kernels_methods[] = {
    {"decode_mxfp4", grit_py_decode_mxfp4, METH_VARARGS, decode_doc},
    {"decode_nvf4", grit_py_decode_nvf4, METH_VARARGS, decode_doc},
    {"decode_q4ks", grit_py_decode_q4ks, METH_VARARGS, decode_doc},
    {"decode_i8s24", grit_py_decode_i8s24, METH_VARARGS, decode_doc},
    {"encode_mxfp4", grit_py_encode_mxfp4, METH_VARARGS, encode_doc},
    {"encode_nvf4", grit_py_encode_nvf4, METH_VARARGS, encode_doc},
    {"encode_q4ks", grit_py_encode_q4ks, METH_VARARGS, encode_doc},
    {"encode_i8s24", grit_py_encode_i8s24, METH_VARARGS, encode_doc},
    {"simd", py_simd, METH_VARARGS, simd_doc},
    {"transpose", grit_py_transpose, METH_VARARGS, transpose_doc},
    {"tile", grit_py_tile, METH_VARARGS, tile_doc},
    {"interleave", grit_py_interleave, METH_VARARGS, interleave_doc},
    {"deinterleave", grit_py_deinterleave, METH_VARARGS, interleave_doc},
    {"pack_k4_12b", grit_py_pack_k4, METH_VARARGS, k4_doc},
    {"unpack_k4_12b", grit_py_unpack_k4, METH_VARARGS, k4_doc},
    {"interleave_k4", grit_py_interleave_k4, METH_VARARGS, k4ilv_doc},
    {"deinterleave_k4", grit_py_deinterleave_k4, METH_VARARGS, k4ilv_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernels_module = {
    PyModuleDef_HEAD_INIT,
    "grit._kernels",
    "Private native fast paths of grit.codec for the registered grades (GRIT v1 §8–§10).",
    -1,
    kernels_methods,
    NULL, NULL, NULL, NULL,
};

/* Import-time self-check of the scalar conversions on values whose codes
 * §2.5 and IEEE 754 pin: a miscompiled or non-IEEE build fails the import and
 * the package stays on its numpy path. */
static int
self_check(void)
{
    return e2m1_encode(0.25f) == 0 && e2m1_encode(0.75f) == 2 && e2m1_encode(1.25f) == 2
        && e2m1_encode(2.5f) == 4 && e2m1_encode(5.0f) == 6 && e2m1_encode(-0.0f) == 8
        && e2m1_encode(1e30f) == 7
        && half_rne_satfinite(1.0f) == 0x3C00 && half_rne_satfinite(65519.0f) == 0x7BFF
        && half_rne_satfinite(65520.0f) == 0x7BFF
        && half_rne_satfinite(pow2f(-25)) == 0 && half_rne_satfinite(3.0f * pow2f(-25)) == 2
        && half_value(0x0001) == pow2f(-24) && half_value(0x7BFF) == 65504.0f
        && e4m3_encode_nonneg(448.0f, 0) == 0x7E && e4m3_encode_nonneg(1.0f, 0) == 0x38
        && e4m3_encode_nonneg(pow2f(-10), 0) == 0 && e4m3_encode_nonneg(3.0f * pow2f(-10), 0) == 2
        && e4m3_encode_nonneg(1.0625f, 0) == 0x38 && e4m3_encode_nonneg(1.1875f, 1) == 0x39
        && grit_e4m3[0x7E] == 448.0f && grit_e4m3[0x01] == pow2f(-9) && grit_e4m3[0x7F] != grit_e4m3[0x7F]
        && mx_exponent(f2u(6.0f), 0) == 0 && mx_exponent(f2u(1.5f), 1) == -1
        && mx_exponent(f2u(1.4f), 1) == -2 && mx_exponent(1, 0) == -127
        && pow2f(-126) * 0.5f == pow2f(-127)        /* subnormals are not flushed */
        && rint_nonneg(2.5f) == 2 && rint_nonneg(3.5f) == 4 && rint_signed(-2.5f) == -2;
}

PyMODINIT_FUNC
PyInit__kernels(void)
{
    grit_init_e4m3();
    grit_init_i8();
#ifdef GRIT_AVX2
    grit_init_i8_shuffles();
#endif
    if (!self_check()) {
        PyErr_SetString(PyExc_ImportError, "grit._kernels failed its binary32 self-check");
        return NULL;
    }
#ifdef GRIT_AVX2
    __builtin_cpu_init();
    cpu_has_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    grit_use_avx2 = cpu_has_avx2;
    PyObject *m = PyModule_Create(&kernels_module);
    if (m == NULL) {
        return NULL;
    }
#ifdef Py_GIL_DISABLED
    PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED);
#endif
    if (PyModule_AddIntConstant(m, "MAX_THREADS", MAX_THREADS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
