/*
 * grit._ext -- FNV-1a-64 / FNV-1a-128 and the plane digest of GRIT v1 §6.
 *
 * Private accelerator for grit/fingerprint.py, which owns the public API and a
 * pure-Python fallback that must give identical values.  Every function here
 * accepts any C-contiguous buffer-protocol object and continues from a state
 * passed as a Python int, so a long message can be hashed in pieces.
 *
 * Integer arithmetic only (C99); nothing here depends on floating point, and
 * the build passes -ffp-contract=off regardless.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../core/fnv.h"
#include "../core/fnv_multi.h"

/* Above this many bytes, hashing runs with the GIL released: below it the
 * release/re-acquire costs more than the loop (FNV runs at roughly 1 GB/s). */
#define GRIT_NOGIL_BYTES ((Py_ssize_t)64 * 1024)

/* -------------------------------------------------------------------------
 * Python conversions */

static PyObject *SIXTY_FOUR; /* the int 64, kept for the shifts below */

/* Acquire a C-contiguous byte view of obj.  Objects without the buffer
 * protocol raise TypeError; buffers that cannot be presented as one
 * contiguous run of bytes raise ValueError. */
static int
get_bytes(PyObject *obj, Py_buffer *view)
{
    if (!PyObject_CheckBuffer(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "expected a bytes-like object, got %.200s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) {
        if (PyErr_ExceptionMatches(PyExc_BufferError)) {
            PyErr_Format(PyExc_ValueError,
                         "%.200s buffer is not C-contiguous; pass a "
                         "contiguous copy", Py_TYPE(obj)->tp_name);
        }
        return -1;
    }
    return 0;
}

static int
range_error(const char *what)
{
    if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Format(PyExc_ValueError, "h must be in range [0, 2**%s)", what);
    }
    return -1;
}

static int
state64_from_py(PyObject *obj, uint64_t *out)
{
    PyObject *idx = PyNumber_Index(obj);
    if (idx == NULL) {
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(idx);
    Py_DECREF(idx);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        return range_error("64");
    }
    *out = (uint64_t)v;
    return 0;
}

static int
state128_from_py(PyObject *obj, fnv128_t *out)
{
    PyObject *idx = PyNumber_Index(obj);
    if (idx == NULL) {
        return -1;
    }
    /* The mask never fails on an int; the range check is on the high half,
     * which is negative for h < 0 and >= 2**64 for h >= 2**128. */
    unsigned long long lo = PyLong_AsUnsignedLongLongMask(idx);
    if (lo == (unsigned long long)-1 && PyErr_Occurred()) {
        Py_DECREF(idx);
        return -1;
    }
    PyObject *hi_obj = PyNumber_Rshift(idx, SIXTY_FOUR);
    Py_DECREF(idx);
    if (hi_obj == NULL) {
        return -1;
    }
    unsigned long long hi = PyLong_AsUnsignedLongLong(hi_obj);
    Py_DECREF(hi_obj);
    if (hi == (unsigned long long)-1 && PyErr_Occurred()) {
        return range_error("128");
    }
    out->hi = (uint64_t)hi;
    out->lo = (uint64_t)lo;
    return 0;
}

static PyObject *
state128_to_py(fnv128_t st)
{
    PyObject *lo = PyLong_FromUnsignedLongLong(st.lo);
    if (lo == NULL || st.hi == 0) {
        return lo;
    }
    PyObject *hi = PyLong_FromUnsignedLongLong(st.hi);
    if (hi == NULL) {
        Py_DECREF(lo);
        return NULL;
    }
    PyObject *shifted = PyNumber_Lshift(hi, SIXTY_FOUR);
    Py_DECREF(hi);
    if (shifted == NULL) {
        Py_DECREF(lo);
        return NULL;
    }
    PyObject *res = PyNumber_Or(shifted, lo);
    Py_DECREF(shifted);
    Py_DECREF(lo);
    return res;
}

/* One bytes-like argument hashed into a state by a step function, the GIL
 * released for large buffers. */
typedef void (*fnv_step)(void *state, const unsigned char *p, size_t n);

static void
step64(void *state, const unsigned char *p, size_t n)
{
    uint64_t *h = (uint64_t *)state;
    *h = fnv64_update(*h, p, n);
}

static void
step128(void *state, const unsigned char *p, size_t n)
{
    fnv128_t *st = (fnv128_t *)state;
    *st = fnv128_update(*st, p, n);
}

static int
hash_buffer(PyObject *obj, fnv_step step, void *state)
{
    Py_buffer view;
    if (get_bytes(obj, &view) < 0) {
        return -1;
    }
    const unsigned char *p = (const unsigned char *)view.buf;
    size_t n = (size_t)view.len;
    if (view.len > GRIT_NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        step(state, p, n);
        Py_END_ALLOW_THREADS
    }
    else {
        step(state, p, n);
    }
    PyBuffer_Release(&view);
    return 0;
}

/* -------------------------------------------------------------------------
 * Module functions */

PyDoc_STRVAR(fnv1a64_doc,
"fnv1a64(buffer, h=0xcbf29ce484222325, /) -> int\n\n"
"FNV-1a-64 of a C-contiguous bytes-like object, continuing from state h.");

static PyObject *
py_fnv1a64(PyObject *self, PyObject *args)
{
    PyObject *obj, *h_obj = NULL;
    uint64_t h = FNV64_OFFSET;

    (void)self;
    if (!PyArg_ParseTuple(args, "O|O:fnv1a64", &obj, &h_obj)) {
        return NULL;
    }
    if (h_obj != NULL && state64_from_py(h_obj, &h) < 0) {
        return NULL;
    }
    if (hash_buffer(obj, step64, &h) < 0) {
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(h);
}

PyDoc_STRVAR(fnv1a128_doc,
"fnv1a128(buffer, h=0x6c62272e07bb014262b821756295c58d, /) -> int\n\n"
"FNV-1a-128 (mod 2**128) of a C-contiguous bytes-like object, continuing\n"
"from state h.  Serialise the result big-endian.");

static PyObject *
py_fnv1a128(PyObject *self, PyObject *args)
{
    PyObject *obj, *h_obj = NULL;
    fnv128_t st = {FNV128_OFFSET_HI, FNV128_OFFSET_LO};

    (void)self;
    if (!PyArg_ParseTuple(args, "O|O:fnv1a128", &obj, &h_obj)) {
        return NULL;
    }
    if (h_obj != NULL && state128_from_py(h_obj, &st) < 0) {
        return NULL;
    }
    if (hash_buffer(obj, step128, &st) < 0) {
        return NULL;
    }
    return state128_to_py(st);
}

PyDoc_STRVAR(digest_doc,
"digest(planes, /) -> int\n\n"
"§6.5 digest of exactly four planes (data, scale0, scale1, aux): FNV-1a-128\n"
"over u64le(len) || bytes for every plane in order; an empty plane adds\n"
"only u64le(0).  Returns the 128-bit value as an int.");

#define GRIT_PLANES 4

static fnv128_t
digest_planes(const Py_buffer *views)
{
    const unsigned char *p[GRIT_PLANES];
    size_t len[GRIT_PLANES];
    for (int i = 0; i < GRIT_PLANES; i++) {
        p[i] = (const unsigned char *)views[i].buf;
        len[i] = (size_t)views[i].len;
    }
    return fnv128_digest(p, len, GRIT_PLANES);
}

static PyObject *
py_digest(PyObject *self, PyObject *arg)
{
    Py_buffer views[GRIT_PLANES];
    int acquired = 0;
    PyObject *res = NULL;
    fnv128_t st;
    Py_ssize_t total = 0;

    (void)self;
    PyObject *seq = PySequence_Fast(arg, "digest expects a sequence of four "
                                         "bytes-like planes");
    if (seq == NULL) {
        return NULL;
    }
    if (PySequence_Fast_GET_SIZE(seq) != GRIT_PLANES) {
        PyErr_Format(PyExc_ValueError,
                     "digest needs exactly four planes, got %zd",
                     PySequence_Fast_GET_SIZE(seq));
        goto done;
    }
    for (; acquired < GRIT_PLANES; acquired++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, acquired);
        if (get_bytes(item, &views[acquired]) < 0) {
            goto done;
        }
        total += views[acquired].len;
    }

    /* The views pin every buffer, so the loop can run without the GIL. */
    if (total > GRIT_NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        st = digest_planes(views);
        Py_END_ALLOW_THREADS
    }
    else {
        st = digest_planes(views);
    }
    res = state128_to_py(st);

done:
    for (int i = 0; i < acquired; i++) {
        PyBuffer_Release(&views[i]);
    }
    Py_DECREF(seq);
    return res;
}

/* -------------------------------------------------------------------------
 * Several streams at once (core/fnv_multi.c) */

PyDoc_STRVAR(fnv1a128_many_doc,
"fnv1a128_many(states, streams, lanes=4, /) -> list[int]\n\n"
"FNV-1a-128 of several messages at once: states[i] continued over the\n"
"concatenation of the bytes-like segments of streams[i], for every i --\n"
"the values of fnv1a128 over each segment in turn.  At most `lanes`\n"
"(1 to 4) streams are advanced together, interleaved; lanes=1 runs them\n"
"one after the other.");

static PyObject *
py_fnv1a128_many(PyObject *self, PyObject *args)
{
    PyObject *states_obj, *streams_obj, *res = NULL;
    int lanes = FNV_MULTI_LANES;
    PyObject *states = NULL, *streams = NULL, **lists = NULL;
    Py_buffer *views = NULL;
    const unsigned char **seg = NULL;
    size_t *len = NULL;
    fnv_segments *fs = NULL;
    fnv128_t *st = NULL;
    Py_ssize_t k = 0, nseg = 0, acquired = 0, total = 0;

    (void)self;
    if (!PyArg_ParseTuple(args, "OO|i:fnv1a128_many", &states_obj, &streams_obj, &lanes)) {
        return NULL;
    }
    if (lanes < 1 || lanes > FNV_MULTI_LANES) {
        PyErr_Format(PyExc_ValueError, "lanes must be from 1 to %d, got %d",
                     FNV_MULTI_LANES, lanes);
        return NULL;
    }
    states = PySequence_Fast(states_obj, "states must be a sequence of ints");
    if (states == NULL) {
        return NULL;
    }
    streams = PySequence_Fast(streams_obj, "streams must be a sequence of sequences "
                                           "of bytes-like segments");
    if (streams == NULL) {
        goto done;
    }
    k = PySequence_Fast_GET_SIZE(states);
    if (PySequence_Fast_GET_SIZE(streams) != k) {
        PyErr_Format(PyExc_ValueError, "%zd states for %zd streams", k,
                     PySequence_Fast_GET_SIZE(streams));
        goto done;
    }
    lists = PyMem_Calloc((size_t)k + 1, sizeof *lists);
    fs = PyMem_Calloc((size_t)k + 1, sizeof *fs);
    st = PyMem_Calloc((size_t)k + 1, sizeof *st);
    if (lists == NULL || fs == NULL || st == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        if (state128_from_py(PySequence_Fast_GET_ITEM(states, i), &st[i]) < 0) {
            goto done;
        }
        lists[i] = PySequence_Fast(PySequence_Fast_GET_ITEM(streams, i),
                                   "each stream must be a sequence of bytes-like segments");
        if (lists[i] == NULL) {
            goto done;
        }
        nseg += PySequence_Fast_GET_SIZE(lists[i]);
    }
    views = PyMem_Calloc((size_t)nseg + 1, sizeof *views);
    seg = PyMem_Calloc((size_t)nseg + 1, sizeof *seg);
    len = PyMem_Calloc((size_t)nseg + 1, sizeof *len);
    if (views == NULL || seg == NULL || len == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(lists[i]);
        fs[i].seg = seg + acquired;
        fs[i].len = len + acquired;
        fs[i].n = (size_t)n;
        for (Py_ssize_t j = 0; j < n; j++) {
            if (get_bytes(PySequence_Fast_GET_ITEM(lists[i], j), &views[acquired]) < 0) {
                goto done;
            }
            seg[acquired] = (const unsigned char *)views[acquired].buf;
            len[acquired] = (size_t)views[acquired].len;
            total += views[acquired].len;
            acquired++;
        }
    }
    /* the views pin every segment, so the loop can run without the GIL */
    if (total > GRIT_NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        fnv128_update_many(st, fs, (size_t)k, lanes);
        Py_END_ALLOW_THREADS
    }
    else {
        fnv128_update_many(st, fs, (size_t)k, lanes);
    }
    res = PyList_New(k);
    if (res == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *v = state128_to_py(st[i]);
        if (v == NULL) {
            Py_CLEAR(res);
            goto done;
        }
        PyList_SET_ITEM(res, i, v);
    }

done:
    for (Py_ssize_t i = 0; i < acquired; i++) {
        PyBuffer_Release(&views[i]);
    }
    if (lists != NULL) {
        for (Py_ssize_t i = 0; i < k; i++) {
            Py_XDECREF(lists[i]);
        }
    }
    PyMem_Free(views);
    PyMem_Free(seg);
    PyMem_Free(len);
    PyMem_Free(lists);
    PyMem_Free(fs);
    PyMem_Free(st);
    Py_XDECREF(streams);
    Py_DECREF(states);
    return res;
}

static PyMethodDef ext_methods[] = {
    {"fnv1a64", py_fnv1a64, METH_VARARGS, fnv1a64_doc},
    {"fnv1a128", py_fnv1a128, METH_VARARGS, fnv1a128_doc},
    {"digest", py_digest, METH_O, digest_doc},
    {"fnv1a128_many", py_fnv1a128_many, METH_VARARGS, fnv1a128_many_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef ext_module = {
    PyModuleDef_HEAD_INIT,
    "grit._ext",
    "Private native FNV-1a for grit.fingerprint (GRIT v1 §6).",
    -1,
    ext_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__ext(void)
{
    /* a miscompiled loop makes the import fail, and grit.fingerprint then
     * uses its pure-Python fallback instead of producing wrong fingerprints */
    if (!fnv_self_check()) {
        PyErr_SetString(PyExc_ImportError,
                        "grit._ext failed the FNV-1a self-check (§6.1)");
        return NULL;
    }
    if (SIXTY_FOUR == NULL) {
        SIXTY_FOUR = PyLong_FromLong(64);
        if (SIXTY_FOUR == NULL) {
            return NULL;
        }
    }
    PyObject *m = PyModule_Create(&ext_module);
    if (m == NULL) {
        return NULL;
    }
#ifdef Py_GIL_DISABLED
    /* No module state; the loops only read caller-owned buffers. */
    PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED);
#endif
    if (PyModule_AddStringConstant(m, "FNV128_IMPL", grit_fnv128_impl) < 0
        || PyModule_AddIntConstant(m, "NOGIL_BYTES", (long)GRIT_NOGIL_BYTES) < 0
        || PyModule_AddStringConstant(m, "FNV_MULTI_IMPL", grit_fnv_multi_impl) < 0
        || PyModule_AddIntConstant(m, "FNV_MULTI_LANES", FNV_MULTI_LANES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
