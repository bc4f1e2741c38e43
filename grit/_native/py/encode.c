/*
 * grit._kernels: the encode_* entry points over the core's encode kernels
 * (core/encode.c); each returns the new planes.
 */
#include "kernels_py.h"

static PyObject *
encode_common(PyObject *args, const char *fmt, int kind)
{
    Py_buffer x;
    int flag = 0, nthreads = 1;
    int ok = kind <= 1 ? PyArg_ParseTuple(args, fmt, &x, &flag, &nthreads)
                       : PyArg_ParseTuple(args, fmt, &x, &nthreads);
    if (!ok) {
        return NULL;
    }
    static const char *what[4] = {"x (MXFP4)", "x (NVF4)", "x (Q4KS)", "x (I8S24)"};
    PyObject *planes[4] = {NULL, NULL, NULL, NULL}, *res = NULL;
    unsigned char *p[4] = {NULL, NULL, NULL, NULL};
    Py_ssize_t n = x.len / 4;
    if (!aligned4(&x, "x") || !whole(x.len, 4 * (Py_ssize_t)grit_kind_unit[kind], what[kind])) {
        goto done;
    }
    int np = 0;
    switch (kind) {
    case GRIT_K_MXFP4:
        planes[0] = grit_new_plane(n / 2, &p[0]);
        planes[1] = grit_new_plane(n / 32, &p[1]);
        np = 2;
        break;
    case GRIT_K_NVF4:
        planes[0] = grit_new_plane(n / 2, &p[0]);
        planes[1] = grit_new_plane(n / 16, &p[1]);
        planes[2] = grit_new_plane(4, &p[2]);
        np = 3;
        break;
    case GRIT_K_Q4KS:
        planes[0] = grit_new_plane(n / 2, &p[0]);
        planes[1] = grit_new_plane(n / 32, &p[1]);
        planes[2] = grit_new_plane(n / 64, &p[2]);
        planes[3] = grit_new_plane(n / 32, &p[3]);
        np = 4;
        break;
    default:
        planes[0] = grit_new_plane(n / 2, &p[0]);
        planes[1] = grit_new_plane(n / 16, &p[1]);
        planes[2] = grit_new_plane(n / 8, &p[3]);   /* the aux plane, third of three */
        np = 3;
        break;
    }
    for (int i = 0; i < np; i++) {
        if (planes[i] == NULL) {
            goto done;
        }
    }
    const float *xs = x.buf;
    Py_BEGIN_ALLOW_THREADS
    grit_k_encode(kind, flag, xs, (size_t)n, p[0], p[1], p[2], p[3], nthreads);
    Py_END_ALLOW_THREADS
    res = PyTuple_New(np);
    if (res != NULL) {
        for (int i = 0; i < np; i++) {
            PyTuple_SET_ITEM(res, i, planes[i]);
            planes[i] = NULL;
        }
    }
done:
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(planes[i]);
    }
    PyBuffer_Release(&x);
    return res;
}

PyObject *
grit_py_encode_mxfp4(PyObject *self, PyObject *args)
{
    (void)self;
    return encode_common(args, "y*p|i", GRIT_K_MXFP4);
}

PyObject *
grit_py_encode_nvf4(PyObject *self, PyObject *args)
{
    (void)self;
    return encode_common(args, "y*p|i", GRIT_K_NVF4);
}

PyObject *
grit_py_encode_q4ks(PyObject *self, PyObject *args)
{
    (void)self;
    return encode_common(args, "y*|i", GRIT_K_Q4KS);
}

PyObject *
grit_py_encode_i8s24(PyObject *self, PyObject *args)
{
    (void)self;
    return encode_common(args, "y*|i", GRIT_K_I8S24);
}
