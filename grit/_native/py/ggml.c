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

/* A 4-bit type's blocks of `bb` bytes: `cb` code bytes and `sb` scale bytes each. */
typedef struct {
    const char *name;
    Py_ssize_t bb, cb, sb;
    void (*block)(const unsigned char *, const unsigned char *, unsigned char *, size_t);
    void (*unblock)(const unsigned char *, unsigned char *, unsigned char *, size_t);
    int (*unblock_eq)(const unsigned char *, const unsigned char *, const unsigned char *,
                      size_t);
} fp4_kind;

static const fp4_kind NVFP4 = {"nvfp4", 36, 32, 4, grit_k_nvfp4_block,
                               grit_k_nvfp4_unblock, grit_k_nvfp4_unblock_eq};
static const fp4_kind MXFP4 = {"mxfp4", 17, 16, 1, grit_k_mxfp4_block,
                               grit_k_mxfp4_unblock, grit_k_mxfp4_unblock_eq};
static const fp4_kind Q8_0 = {"q8_0", 34, 32, 2, grit_k_q8_0_block,
                              grit_k_q8_0_unblock, grit_k_q8_0_unblock_eq};

/* the exact sizes of nb blocks and of their planes, else ValueError */
static int
fp4_sizes(const fp4_kind *k, Py_ssize_t blocks_len, Py_ssize_t codes_len,
          Py_ssize_t scales_len, size_t *nb)
{
    if (!whole(blocks_len, k->bb, "blocks")) {
        return 0;
    }
    Py_ssize_t n = blocks_len / k->bb;
    if (codes_len != k->cb * n || scales_len != k->sb * n) {
        PyErr_Format(PyExc_ValueError, "%s: %zd blocks need %zd code and %zd scale bytes, "
                     "got %zd and %zd", k->name, n, k->cb * n, k->sb * n, codes_len,
                     scales_len);
        return 0;
    }
    *nb = (size_t)n;
    return 1;
}

static PyObject *
fp4_block(const fp4_kind *k, PyObject *args)
{
    Py_buffer codes, scales, out;
    size_t nb;
    if (!PyArg_ParseTuple(args, "y*y*w*", &codes, &scales, &out)) {
        return NULL;
    }
    PyObject *res = NULL;
    if (fp4_sizes(k, out.len, codes.len, scales.len, &nb)) {
        const unsigned char *c = codes.buf, *s = scales.buf;
        unsigned char *o = out.buf;
        Py_BEGIN_ALLOW_THREADS
        k->block(c, s, o, nb);
        Py_END_ALLOW_THREADS
        res = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&codes);
    PyBuffer_Release(&scales);
    PyBuffer_Release(&out);
    return res;
}

static PyObject *
fp4_unblock(const fp4_kind *k, PyObject *args)
{
    Py_buffer blocks, codes, scales;
    size_t nb;
    if (!PyArg_ParseTuple(args, "y*w*w*", &blocks, &codes, &scales)) {
        return NULL;
    }
    PyObject *res = NULL;
    if (fp4_sizes(k, blocks.len, codes.len, scales.len, &nb)) {
        const unsigned char *b = blocks.buf;
        unsigned char *c = codes.buf, *s = scales.buf;
        Py_BEGIN_ALLOW_THREADS
        k->unblock(b, c, s, nb);
        Py_END_ALLOW_THREADS
        res = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&blocks);
    PyBuffer_Release(&codes);
    PyBuffer_Release(&scales);
    return res;
}

static PyObject *
fp4_unblock_eq(const fp4_kind *k, PyObject *args)
{
    Py_buffer blocks, codes, scales;
    size_t nb;
    if (!PyArg_ParseTuple(args, "y*y*y*", &blocks, &codes, &scales)) {
        return NULL;
    }
    PyObject *res = NULL;
    if (fp4_sizes(k, blocks.len, codes.len, scales.len, &nb)) {
        const unsigned char *b = blocks.buf, *c = codes.buf, *s = scales.buf;
        int eq;
        Py_BEGIN_ALLOW_THREADS
        eq = k->unblock_eq(b, c, s, nb);
        Py_END_ALLOW_THREADS
        res = PyBool_FromLong(eq);
    }
    PyBuffer_Release(&blocks);
    PyBuffer_Release(&codes);
    PyBuffer_Release(&scales);
    return res;
}

PyObject *
grit_py_nvfp4_unblock_eq(PyObject *self, PyObject *args)
{
    (void)self;
    return fp4_unblock_eq(&NVFP4, args);
}

PyObject *
grit_py_mxfp4_unblock_eq(PyObject *self, PyObject *args)
{
    (void)self;
    return fp4_unblock_eq(&MXFP4, args);
}

PyObject *
grit_py_nvfp4_block(PyObject *self, PyObject *args)
{
    (void)self;
    return fp4_block(&NVFP4, args);
}

PyObject *
grit_py_nvfp4_unblock(PyObject *self, PyObject *args)
{
    (void)self;
    return fp4_unblock(&NVFP4, args);
}

PyObject *
grit_py_mxfp4_block(PyObject *self, PyObject *args)
{
    (void)self;
    return fp4_block(&MXFP4, args);
}

PyObject *
grit_py_mxfp4_unblock(PyObject *self, PyObject *args)
{
    (void)self;
    return fp4_unblock(&MXFP4, args);
}

PyObject *
grit_py_q8_0_block(PyObject *self, PyObject *args)
{
    (void)self;
    return fp4_block(&Q8_0, args);
}

PyObject *
grit_py_q8_0_unblock(PyObject *self, PyObject *args)
{
    (void)self;
    return fp4_unblock(&Q8_0, args);
}

PyObject *
grit_py_q8_0_unblock_eq(PyObject *self, PyObject *args)
{
    (void)self;
    return fp4_unblock_eq(&Q8_0, args);
}
