#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../core/core.h"

/* ------------------------------------------------------------------------
 * Python interface: argument checks, and the planes the entry points return */

GRIT_HIDDEN PyObject *grit_new_plane(Py_ssize_t n, unsigned char **p);

static inline int
aligned4(Py_buffer *b, const char *what)
{
    if (((uintptr_t)b->buf & 3) != 0) {
        PyErr_Format(PyExc_ValueError, "%s must be 4-byte aligned", what);
        return 0;
    }
    return 1;
}

static inline int
need(Py_buffer *b, Py_ssize_t n, const char *what)
{
    if (b->len < n) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, %zd needed", what, b->len, n);
        return 0;
    }
    return 1;
}

static inline int
whole(Py_ssize_t nbytes, Py_ssize_t unit, const char *what)
{
    if (nbytes % unit != 0) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a multiple of %zd", what,
                     nbytes, unit);
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------
 * Entry points (METH_VARARGS), listed in module.c's method table */

GRIT_HIDDEN PyObject *grit_py_decode_mxfp4(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_decode_nvf4(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_decode_q4ks(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_decode_i8s24(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_decode_ggml(PyObject *self, PyObject *args);  /* ggml.c */
GRIT_HIDDEN PyObject *grit_py_nvfp4_block(PyObject *self, PyObject *args);  /* ggml.c */
GRIT_HIDDEN PyObject *grit_py_nvfp4_unblock(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_mxfp4_block(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_mxfp4_unblock(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_nvfp4_unblock_eq(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_mxfp4_unblock_eq(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_q8_0_block(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_q8_0_unblock(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_q8_0_unblock_eq(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_encode_mxfp4(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_encode_nvf4(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_encode_q4ks(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_encode_i8s24(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_transpose(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_tile(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_interleave(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_deinterleave(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_pack_k4(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_unpack_k4(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_interleave_k4(PyObject *self, PyObject *args);
GRIT_HIDDEN PyObject *grit_py_deinterleave_k4(PyObject *self, PyObject *args);

