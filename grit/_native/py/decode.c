/*
 * grit._kernels: the decode_* entry points over the core's decode kernels
 * (core/decode.c).
 */
#include "kernels_py.h"

/* decode_<kind>(planes..., out, nthreads): the planes the kind reads, in
 * order, then the float32 output buffer. */
static PyObject *
decode_common(PyObject *args, const char *fmt, int kind)
{
    /* data, scale0, scale1 or aux, aux, out: as many as fmt lists */
    Py_buffer b[5];
    int nthreads = 1, nb = 0, ok;
    for (const char *f = fmt; *f && *f != '|'; f++) {
        nb += (*f == 'y' || *f == 'w');
    }
    switch (nb) {
    case 3:
        ok = PyArg_ParseTuple(args, fmt, &b[0], &b[1], &b[2], &nthreads);
        break;
    case 4:
        ok = PyArg_ParseTuple(args, fmt, &b[0], &b[1], &b[2], &b[3], &nthreads);
        break;
    default:
        ok = PyArg_ParseTuple(args, fmt, &b[0], &b[1], &b[2], &b[3], &b[4], &nthreads);
        break;
    }
    if (!ok) {
        return NULL;
    }
    Py_buffer *out = &b[nb - 1];
    PyObject *res = NULL;
    Py_ssize_t n = out->len / 4;
    const unsigned char *data = b[0].buf, *s0 = b[1].buf, *s1 = NULL, *aux = NULL;
    int good = aligned4(out, "out") && whole(out->len, 4 * (Py_ssize_t)grit_kind_unit[kind], "out")
        && need(&b[0], n / 2, "data");
    switch (kind) {
    case GRIT_K_MXFP4:
        good = good && need(&b[1], n / 32, "scale0");
        break;
    case GRIT_K_NVF4:
        good = good && need(&b[1], n / 16, "scale0") && need(&b[2], 4, "scale1");
        s1 = b[2].buf;
        break;
    case GRIT_K_Q4KS:
        good = good && need(&b[1], n / 32, "scale0") && need(&b[2], n / 64, "scale1")
            && need(&b[3], n / 32, "aux");
        s1 = b[2].buf;
        aux = b[3].buf;
        break;
    default:
        good = good && need(&b[1], n / 16, "scale0") && need(&b[2], n / 8, "aux");
        aux = b[2].buf;
        break;
    }
    if (good) {
        float *o = out->buf;
        Py_BEGIN_ALLOW_THREADS
        grit_k_decode(kind, data, s0, s1, aux, o, (size_t)n, nthreads);
        Py_END_ALLOW_THREADS
        res = Py_NewRef(Py_None);
    }
    for (int i = 0; i < nb; i++) {
        PyBuffer_Release(&b[i]);
    }
    return res;
}

PyObject *
grit_py_decode_mxfp4(PyObject *self, PyObject *args)
{
    (void)self;
    return decode_common(args, "y*y*w*|i", GRIT_K_MXFP4);
}

PyObject *
grit_py_decode_nvf4(PyObject *self, PyObject *args)
{
    (void)self;
    return decode_common(args, "y*y*y*w*|i", GRIT_K_NVF4);
}

PyObject *
grit_py_decode_q4ks(PyObject *self, PyObject *args)
{
    (void)self;
    return decode_common(args, "y*y*y*y*w*|i", GRIT_K_Q4KS);
}

PyObject *
grit_py_decode_i8s24(PyObject *self, PyObject *args)
{
    (void)self;
    return decode_common(args, "y*y*y*w*|i", GRIT_K_I8S24);
}
