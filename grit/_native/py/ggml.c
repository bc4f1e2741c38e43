/*
 * grit._kernels: the decode_ggml entry point over the core's fused ggml
 * block kernels (core/ggml.c).
 */
#include "kernels_py.h"

PyObject *
grit_py_decode_ggml(PyObject *self, PyObject *args)
{
    Py_buffer src, out;
    int kind, nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "iy*w*|i", &kind, &src, &out, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    if (kind < 0 || kind >= GGML_KINDS) {
        PyErr_Format(PyExc_ValueError, "decode_ggml: unknown kind %d", kind);
    } else if (aligned4(&out, "out") && whole(out.len, 4 * (Py_ssize_t)grit_ggml_block_elems[kind], "out")) {
        size_t blocks = (size_t)out.len / 4 / grit_ggml_block_elems[kind];
        if (need(&src, (Py_ssize_t)(blocks * grit_ggml_block_bytes[kind]), "src")) {
            const unsigned char *s = src.buf;
            float *o = out.buf;
            Py_BEGIN_ALLOW_THREADS
            grit_k_decode_ggml(kind, s, o, blocks, nthreads);
            Py_END_ALLOW_THREADS
            res = Py_NewRef(Py_None);
        }
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&out);
    return res;
}
