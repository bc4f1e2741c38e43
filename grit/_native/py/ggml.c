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

/* the exact sizes of nb NVFP4 blocks and of their planes, else ValueError */
static int
nvfp4_sizes(Py_ssize_t blocks_len, Py_ssize_t codes_len, Py_ssize_t scales_len, size_t *nb)
{
    if (!whole(blocks_len, 36, "blocks")) {
        return 0;
    }
    Py_ssize_t n = blocks_len / 36;
    if (codes_len != 32 * n || scales_len != 4 * n) {
        PyErr_Format(PyExc_ValueError, "nvfp4: %zd blocks need %zd code and %zd scale bytes, "
                     "got %zd and %zd", n, 32 * n, 4 * n, codes_len, scales_len);
        return 0;
    }
    *nb = (size_t)n;
    return 1;
}

PyObject *
grit_py_nvfp4_block(PyObject *self, PyObject *args)
{
    Py_buffer codes, scales, out;
    size_t nb;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*w*", &codes, &scales, &out)) {
        return NULL;
    }
    PyObject *res = NULL;
    if (nvfp4_sizes(out.len, codes.len, scales.len, &nb)) {
        const unsigned char *c = codes.buf, *s = scales.buf;
        unsigned char *o = out.buf;
        Py_BEGIN_ALLOW_THREADS
        grit_k_nvfp4_block(c, s, o, nb);
        Py_END_ALLOW_THREADS
        res = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&codes);
    PyBuffer_Release(&scales);
    PyBuffer_Release(&out);
    return res;
}

PyObject *
grit_py_nvfp4_unblock(PyObject *self, PyObject *args)
{
    Py_buffer blocks, codes, scales;
    size_t nb;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*w*w*", &blocks, &codes, &scales)) {
        return NULL;
    }
    PyObject *res = NULL;
    if (nvfp4_sizes(blocks.len, codes.len, scales.len, &nb)) {
        const unsigned char *b = blocks.buf;
        unsigned char *c = codes.buf, *s = scales.buf;
        Py_BEGIN_ALLOW_THREADS
        grit_k_nvfp4_unblock(b, c, s, nb);
        Py_END_ALLOW_THREADS
        res = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&blocks);
    PyBuffer_Release(&codes);
    PyBuffer_Release(&scales);
    return res;
}
