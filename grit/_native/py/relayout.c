/*
 * grit._kernels: the relayout entry points over the core's relayout kernels
 * (core/relayout.c); each returns new bytes (the caller's numpy path returns
 * bytes too).
 */
#include "kernels_py.h"

PyObject *
grit_py_transpose(PyObject *self, PyObject *args)
{
    Py_buffer src;
    Py_ssize_t R, C;
    int bits, msb = 0, nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nni|pi", &src, &R, &C, &bits, &msb, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    if (R < 0 || C < 0 || !(bits == 4 || (bits > 0 && bits % 8 == 0))) {
        PyErr_SetString(PyExc_ValueError, "transpose: R, C >= 0 and bits 4 or a multiple of 8");
        goto done;
    }
    size_t n = (size_t)R * (size_t)C;
    Py_ssize_t nbytes = (Py_ssize_t)((n * (size_t)bits + 7) / 8);
    if (!need(&src, nbytes, "src")) {
        goto done;
    }
    unsigned char *dst = NULL;
    res = grit_new_plane(nbytes, &dst);
    if (res == NULL || nbytes == 0) {
        goto done;
    }
    const unsigned char *s = src.buf;
    Py_BEGIN_ALLOW_THREADS
    grit_k_transpose(s, dst, (size_t)R, (size_t)C, bits, msb, nthreads);
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&src);
    return res;
}

PyObject *
grit_py_tile(PyObject *self, PyObject *args)
{
    Py_buffer src, tab;
    Py_ssize_t rows, rowbytes, tr, tcb, w;
    int inverse = 0, nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnnnny*|pi", &src, &rows, &rowbytes, &tr, &tcb, &w, &tab,
                          &inverse, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    size_t *off = NULL;
    if (rows < 0 || rowbytes < 0 || tr < 1 || tcb < 1 || w < 1 || rows % tr || rowbytes % tcb
        || tcb % w || tab.len != (Py_ssize_t)(8 * (size_t)(tr * tcb / w))) {
        PyErr_SetString(PyExc_ValueError, "tile: inconsistent tile geometry");
        goto done;
    }
    Py_ssize_t nbytes = rows * rowbytes;
    if (!need(&src, nbytes, "src")) {
        goto done;
    }
    size_t nchunks = (size_t)(tr * tcb / w);
    off = (size_t *)PyMem_Malloc(nchunks * sizeof(size_t) + 1);
    if (off == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (grit_k_tile_offsets(tab.buf, nchunks, (size_t)tcb, (size_t)w, (size_t)rowbytes, off) < 0) {
        PyErr_SetString(PyExc_ValueError, "tile: tab entry out of range");
        goto done;
    }
    unsigned char *dst = NULL;
    res = grit_new_plane(nbytes, &dst);
    if (res == NULL || nbytes == 0) {
        goto done;
    }
    const unsigned char *s = src.buf;
    Py_BEGIN_ALLOW_THREADS
    grit_k_tile(s, dst, (size_t)rows, (size_t)rowbytes, (size_t)tr, (size_t)tcb, (size_t)w, off,
                inverse, nthreads);
    Py_END_ALLOW_THREADS
done:
    PyMem_Free(off);
    PyBuffer_Release(&src);
    PyBuffer_Release(&tab);
    return res;
}

static int
parse_widths(PyObject *ws, size_t w[4])
{
    if (!PyTuple_Check(ws) || PyTuple_GET_SIZE(ws) != 4) {
        PyErr_SetString(PyExc_ValueError, "widths must be a 4-tuple");
        return 0;
    }
    for (int f = 0; f < 4; f++) {
        Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GET_ITEM(ws, f));
        if (v < 0) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "widths must be >= 0");
            }
            return 0;
        }
        w[f] = (size_t)v;
    }
    return 1;
}

PyObject *
grit_py_interleave(PyObject *self, PyObject *args)
{
    PyObject *fields, *ws;
    Py_ssize_t blocks;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOn|i", &fields, &ws, &blocks, &nthreads)) {
        return NULL;
    }
    size_t w[4];
    if (!parse_widths(ws, w) || blocks < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "blocks must be >= 0");
        }
        return NULL;
    }
    if (!PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) != 4) {
        PyErr_SetString(PyExc_ValueError, "fields must be a 4-tuple");
        return NULL;
    }
    Py_buffer fb[4];
    int got[4] = {0, 0, 0, 0};
    PyObject *res = NULL;
    unsigned char *field[4] = {NULL, NULL, NULL, NULL}, *aos = NULL;
    size_t block = 0;
    for (int f = 0; f < 4; f++) {
        if (w[f] == 0) {
            continue;
        }
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(fields, f), &fb[f], PyBUF_SIMPLE) < 0) {
            goto done;
        }
        got[f] = 1;
        if (!need(&fb[f], (Py_ssize_t)(w[f] * (size_t)blocks), "field")) {
            goto done;
        }
        field[f] = fb[f].buf;
        block += w[f];
    }
    res = grit_new_plane((Py_ssize_t)(block * (size_t)blocks), &aos);
    if (res == NULL || block * (size_t)blocks == 0) {
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    grit_k_interleave(aos, field, w, (size_t)blocks, 0, nthreads);
    Py_END_ALLOW_THREADS
done:
    for (int f = 0; f < 4; f++) {
        if (got[f]) {
            PyBuffer_Release(&fb[f]);
        }
    }
    return res;
}

PyObject *
grit_py_deinterleave(PyObject *self, PyObject *args)
{
    Py_buffer src;
    PyObject *ws;
    Py_ssize_t blocks;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*On|i", &src, &ws, &blocks, &nthreads)) {
        return NULL;
    }
    PyObject *out[4] = {NULL, NULL, NULL, NULL}, *res = NULL;
    size_t w[4];
    unsigned char *field[4] = {NULL, NULL, NULL, NULL};
    if (!parse_widths(ws, w) || blocks < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "blocks must be >= 0");
        }
        goto done;
    }
    size_t block = w[0] + w[1] + w[2] + w[3];
    if (!need(&src, (Py_ssize_t)(block * (size_t)blocks), "src")) {
        goto done;
    }
    for (int f = 0; f < 4; f++) {
        unsigned char *fp = NULL;
        out[f] = grit_new_plane((Py_ssize_t)(w[f] * (size_t)blocks), &fp);
        if (out[f] == NULL) {
            goto done;
        }
        field[f] = fp;
    }
    unsigned char *aos = src.buf;
    Py_BEGIN_ALLOW_THREADS
    grit_k_interleave(aos, field, w, (size_t)blocks, 1, nthreads);
    Py_END_ALLOW_THREADS
    res = PyTuple_Pack(4, out[0], out[1], out[2], out[3]);
done:
    for (int f = 0; f < 4; f++) {
        Py_XDECREF(out[f]);
    }
    PyBuffer_Release(&src);
    return res;
}

PyObject *
grit_py_pack_k4(PyObject *self, PyObject *args)
{
    Py_buffer sc, m;
    Py_ssize_t groups;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*n|i", &sc, &m, &groups, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    if (groups >= 0 && need(&sc, 8 * groups, "sc") && need(&m, 8 * groups, "m")) {
        unsigned char *pk = NULL;
        res = grit_new_plane(12 * groups, &pk);
        if (res != NULL && groups > 0) {
            unsigned char *s = sc.buf, *mm = m.buf;
            Py_BEGIN_ALLOW_THREADS
            grit_k_pack_k4(pk, s, mm, (size_t)groups, 0, nthreads);
            Py_END_ALLOW_THREADS
        }
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "groups must be >= 0");
    }
    PyBuffer_Release(&sc);
    PyBuffer_Release(&m);
    return res;
}

PyObject *
grit_py_unpack_k4(PyObject *self, PyObject *args)
{
    Py_buffer b;
    Py_ssize_t groups;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*n|i", &b, &groups, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL, *sc = NULL, *m = NULL;
    if (groups >= 0 && need(&b, 12 * groups, "packed")) {
        unsigned char *scp = NULL, *mp = NULL;
        sc = grit_new_plane(8 * groups, &scp);
        m = sc != NULL ? grit_new_plane(8 * groups, &mp) : NULL;
        if (sc != NULL && m != NULL) {
            if (groups > 0) {
                unsigned char *pk = b.buf;
                Py_BEGIN_ALLOW_THREADS
                grit_k_pack_k4(pk, scp, mp, (size_t)groups, 1, nthreads);
                Py_END_ALLOW_THREADS
            }
            res = PyTuple_Pack(2, sc, m);
        }
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "groups must be >= 0");
    }
    Py_XDECREF(sc);
    Py_XDECREF(m);
    PyBuffer_Release(&b);
    return res;
}

PyObject *
grit_py_interleave_k4(PyObject *self, PyObject *args)
{
    Py_buffer s1, sc, m, data;
    Py_ssize_t w1, wd, blocks;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "(y*y*y*y*)nnn|i", &s1, &sc, &m, &data, &w1, &wd, &blocks,
                          &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    if (w1 < 0 || wd < 0 || blocks < 0) {
        PyErr_SetString(PyExc_ValueError, "interleave_k4: widths and blocks must be >= 0");
    } else if (need(&s1, w1 * blocks, "s1") && need(&sc, 8 * blocks, "sc")
               && need(&m, 8 * blocks, "m") && need(&data, wd * blocks, "data")) {
        unsigned char *aos = NULL, *a1 = s1.buf, *asc = sc.buf, *am = m.buf, *ad = data.buf;
        res = grit_new_plane((w1 + 12 + wd) * blocks, &aos);
        if (res != NULL && blocks > 0) {
            Py_BEGIN_ALLOW_THREADS
            grit_k_interleave_k4(aos, a1, asc, am, ad, (size_t)w1, (size_t)wd, (size_t)blocks, 0,
                                 nthreads);
            Py_END_ALLOW_THREADS
        }
    }
    PyBuffer_Release(&s1);
    PyBuffer_Release(&sc);
    PyBuffer_Release(&m);
    PyBuffer_Release(&data);
    return res;
}

PyObject *
grit_py_deinterleave_k4(PyObject *self, PyObject *args)
{
    Py_buffer src;
    Py_ssize_t w1, wd, blocks;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnn|i", &src, &w1, &wd, &blocks, &nthreads)) {
        return NULL;
    }
    PyObject *o[4] = {NULL, NULL, NULL, NULL}, *res = NULL;
    if (w1 < 0 || wd < 0 || blocks < 0) {
        PyErr_SetString(PyExc_ValueError, "deinterleave_k4: widths and blocks must be >= 0");
    } else if (need(&src, (w1 + 12 + wd) * blocks, "src")) {
        unsigned char *aos = src.buf, *a1 = NULL, *asc = NULL, *am = NULL, *ad = NULL;
        o[0] = grit_new_plane(w1 * blocks, &a1);
        o[1] = grit_new_plane(8 * blocks, &asc);
        o[2] = grit_new_plane(8 * blocks, &am);
        o[3] = grit_new_plane(wd * blocks, &ad);
        if (o[0] != NULL && o[1] != NULL && o[2] != NULL && o[3] != NULL) {
            if (blocks > 0) {
                Py_BEGIN_ALLOW_THREADS
                grit_k_interleave_k4(aos, a1, asc, am, ad, (size_t)w1, (size_t)wd, (size_t)blocks,
                                     1, nthreads);
                Py_END_ALLOW_THREADS
            }
            res = PyTuple_Pack(4, o[0], o[1], o[2], o[3]);
        }
    }
    for (int f = 0; f < 4; f++) {
        Py_XDECREF(o[f]);
    }
    PyBuffer_Release(&src);
    return res;
}
