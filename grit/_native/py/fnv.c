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

#include <string.h>

#include "../core/fnv.h"
#include "../core/fnv_multi.h"
#include "../core/fnv_wide.h"

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

/* The segments of k messages, from a sequence of k sequences of bytes-like
 * objects: each segment's buffer held (pinned) until streams_release. */
typedef struct {
    Py_ssize_t k, acquired, total;
    PyObject *outer, **lists;
    Py_buffer *views;
    const unsigned char **seg;
    size_t *len;
    fnv_segments *fs;
} streams_t;

static void
streams_release(streams_t *m)
{
    for (Py_ssize_t i = 0; i < m->acquired; i++) {
        PyBuffer_Release(&m->views[i]);
    }
    if (m->lists != NULL) {
        for (Py_ssize_t i = 0; i < m->k; i++) {
            Py_XDECREF(m->lists[i]);
        }
    }
    PyMem_Free(m->views);
    PyMem_Free(m->seg);
    PyMem_Free(m->len);
    PyMem_Free(m->lists);
    PyMem_Free(m->fs);
    Py_XDECREF(m->outer);
    memset(m, 0, sizeof *m);
}

/* 0, or -1 with an exception set (m then holds nothing: released) */
static int
streams_acquire(streams_t *m, PyObject *obj, Py_ssize_t k, const char *what)
{
    Py_ssize_t nseg = 0;

    memset(m, 0, sizeof *m);
    m->outer = PySequence_Fast(obj, "streams must be a sequence of sequences of bytes-like "
                                    "segments");
    if (m->outer == NULL) {
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(m->outer) != k) {
        PyErr_Format(PyExc_ValueError, "%zd states for %zd %s", k,
                     PySequence_Fast_GET_SIZE(m->outer), what);
        goto fail;
    }
    m->k = k;
    m->lists = PyMem_Calloc((size_t)k + 1, sizeof *m->lists);
    m->fs = PyMem_Calloc((size_t)k + 1, sizeof *m->fs);
    if (m->lists == NULL || m->fs == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        m->lists[i] = PySequence_Fast(PySequence_Fast_GET_ITEM(m->outer, i),
                                      "each stream must be a sequence of bytes-like segments");
        if (m->lists[i] == NULL) {
            goto fail;
        }
        nseg += PySequence_Fast_GET_SIZE(m->lists[i]);
    }
    m->views = PyMem_Calloc((size_t)nseg + 1, sizeof *m->views);
    m->seg = PyMem_Calloc((size_t)nseg + 1, sizeof *m->seg);
    m->len = PyMem_Calloc((size_t)nseg + 1, sizeof *m->len);
    if (m->views == NULL || m->seg == NULL || m->len == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(m->lists[i]);
        m->fs[i].seg = m->seg + m->acquired;
        m->fs[i].len = m->len + m->acquired;
        m->fs[i].n = (size_t)n;
        for (Py_ssize_t j = 0; j < n; j++) {
            Py_buffer *v = &m->views[m->acquired];
            if (get_bytes(PySequence_Fast_GET_ITEM(m->lists[i], j), v) < 0) {
                goto fail;
            }
            m->seg[m->acquired] = (const unsigned char *)v->buf;
            m->len[m->acquired] = (size_t)v->len;
            m->total += v->len;
            m->acquired++;
        }
    }
    return 0;

fail:
    streams_release(m);
    return -1;
}

/* k states from a sequence of ints, for a loop of `lanes` lanes (NULL with
 * an exception set: lanes out of range, or a state that is not one) */
static fnv128_t *
states_acquire(PyObject *obj, int lanes, Py_ssize_t *k)
{
    if (lanes < 1 || lanes > FNV_MULTI_LANES) {
        PyErr_Format(PyExc_ValueError, "lanes must be from 1 to %d, got %d",
                     FNV_MULTI_LANES, lanes);
        return NULL;
    }
    PyObject *states = PySequence_Fast(obj, "states must be a sequence of ints");
    if (states == NULL) {
        return NULL;
    }
    *k = PySequence_Fast_GET_SIZE(states);
    fnv128_t *st = PyMem_Calloc((size_t)*k + 1, sizeof *st);
    if (st == NULL) {
        PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; st != NULL && i < *k; i++) {
        if (state128_from_py(PySequence_Fast_GET_ITEM(states, i), &st[i]) < 0) {
            PyMem_Free(st);
            st = NULL;
        }
    }
    Py_DECREF(states);
    return st;
}

static PyObject *
states_to_list(const fnv128_t *st, Py_ssize_t k)
{
    PyObject *res = PyList_New(k);
    for (Py_ssize_t i = 0; res != NULL && i < k; i++) {
        PyObject *v = state128_to_py(st[i]);
        if (v == NULL) {
            Py_CLEAR(res);
            break;
        }
        PyList_SET_ITEM(res, i, v);
    }
    return res;
}

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
    Py_ssize_t k = 0;
    streams_t m;

    (void)self;
    if (!PyArg_ParseTuple(args, "OO|i:fnv1a128_many", &states_obj, &streams_obj, &lanes)) {
        return NULL;
    }
    fnv128_t *st = states_acquire(states_obj, lanes, &k);
    if (st == NULL) {
        return NULL;
    }
    if (streams_acquire(&m, streams_obj, k, "streams") == 0) {
        /* the views pin every segment, so the loop can run without the GIL */
        if (m.total > GRIT_NOGIL_BYTES) {
            Py_BEGIN_ALLOW_THREADS
            fnv128_update_many(st, m.fs, (size_t)k, lanes);
            Py_END_ALLOW_THREADS
        }
        else {
            fnv128_update_many(st, m.fs, (size_t)k, lanes);
        }
        streams_release(&m);
        res = states_to_list(st, k);
    }
    PyMem_Free(st);
    return res;
}

PyDoc_STRVAR(fnv1a128_many_cmp_doc,
"fnv1a128_many_cmp(states, streams, others, lanes=4, /) -> (list[int], list[bool])\n\n"
"fnv1a128_many(states, streams, lanes), and for every i whether the\n"
"concatenation of the segments of others[i] is the message of streams[i]\n"
"byte for byte (the same length and bytes; the segments may be cut\n"
"differently), compared in the same loop.");

static PyObject *
py_fnv1a128_many_cmp(PyObject *self, PyObject *args)
{
    PyObject *states_obj, *streams_obj, *others_obj, *res = NULL;
    int lanes = FNV_MULTI_LANES;
    Py_ssize_t k = 0;
    streams_t m, o;
    int *eq = NULL;

    (void)self;
    if (!PyArg_ParseTuple(args, "OOO|i:fnv1a128_many_cmp", &states_obj, &streams_obj,
                          &others_obj, &lanes)) {
        return NULL;
    }
    fnv128_t *st = states_acquire(states_obj, lanes, &k);
    if (st == NULL) {
        return NULL;
    }
    eq = PyMem_Calloc((size_t)k + 1, sizeof *eq);
    if (eq == NULL) {
        PyErr_NoMemory();
        PyMem_Free(st);
        return NULL;
    }
    if (streams_acquire(&m, streams_obj, k, "streams") == 0) {
        if (streams_acquire(&o, others_obj, k, "others") == 0) {
            if (m.total + o.total > GRIT_NOGIL_BYTES) {
                Py_BEGIN_ALLOW_THREADS
                fnv128_update_many_cmp(st, m.fs, o.fs, eq, (size_t)k, lanes);
                Py_END_ALLOW_THREADS
            }
            else {
                fnv128_update_many_cmp(st, m.fs, o.fs, eq, (size_t)k, lanes);
            }
            streams_release(&o);
            PyObject *hs = states_to_list(st, k);
            PyObject *same = hs == NULL ? NULL : PyList_New(k);
            for (Py_ssize_t i = 0; same != NULL && i < k; i++) {
                PyObject *b = eq[i] ? Py_True : Py_False;
                Py_INCREF(b);
                PyList_SET_ITEM(same, i, b);
            }
            if (same != NULL) {
                res = PyTuple_Pack(2, hs, same);
            }
            Py_XDECREF(hs);
            Py_XDECREF(same);
        }
        streams_release(&m);
    }
    PyMem_Free(eq);
    PyMem_Free(st);
    return res;
}

/* whether this machine has the chain-and-sums loop (fnv_wide.h) */

PyDoc_STRVAR(fnv_wide_doc,
"fnv_wide(on=None, /) -> str | bool\n\n"
"The chain-and-sums loop fnv1a128_many and fnv1a128_many_cmp run for long\n"
"segments ('avx512': AVX-512 VNNI; 'avx2': AVX2 -- the same values, faster\n"
"than the interleaved multiplies), or False for none.  With on given, switch\n"
"first: True for the fastest this machine passed, False for none, or a\n"
"loop's name (ValueError where it did not pass: FNV_WIDE_LOOPS).  For tests\n"
"that compare the paths; not thread-safe while a digest runs.");

/* the names of the loops, by their number in fnv_wide.h */
static const char *const WIDE_NAMES[] = {NULL, "avx512", "avx2"};

static int wide_best;   /* the loop fnv128_wide_init chose (0: none) */

/* the names of the loops whose bit is set in mask, fastest first (NULL: an
 * error, which PyModule_AddObject passes on) */
static PyObject *
wide_names(int mask)
{
    int n = 0;
    for (int i = FNV_WIDE_AVX512; i <= FNV_WIDE_AVX2; i++) {
        n += (mask >> i) & 1;
    }
    PyObject *t = PyTuple_New(n);
    n = 0;
    for (int i = FNV_WIDE_AVX512; t != NULL && i <= FNV_WIDE_AVX2; i++) {
        if ((mask >> i) & 1) {
            PyObject *name = PyUnicode_FromString(WIDE_NAMES[i]);
            if (name == NULL) {
                Py_CLEAR(t);
                break;
            }
            PyTuple_SET_ITEM(t, n++, name);
        }
    }
    return t;
}

static PyObject *
py_fnv_wide(PyObject *self, PyObject *args)
{
    PyObject *on = Py_None;
    (void)self;
    if (!PyArg_ParseTuple(args, "|O:fnv_wide", &on)) {
        return NULL;
    }
    if (PyUnicode_Check(on)) {
        int kernel = 0;
        for (int i = FNV_WIDE_AVX512; i <= FNV_WIDE_AVX2; i++) {
            if (PyUnicode_CompareWithASCIIString(on, WIDE_NAMES[i]) == 0) {
                kernel = i;
            }
        }
        if (!kernel || !(grit_fnv_wide_passed & (1 << kernel))) {
            PyErr_Format(PyExc_ValueError, "fnv_wide: no loop %R on this machine", on);
            return NULL;
        }
        grit_fnv_wide = kernel;
    } else if (on != Py_None) {
        int v = PyObject_IsTrue(on);
        if (v < 0) {
            return NULL;
        }
        grit_fnv_wide = v ? wide_best : 0;
    }
    if (!grit_fnv_wide) {
        Py_RETURN_FALSE;
    }
    return PyUnicode_FromString(WIDE_NAMES[grit_fnv_wide]);
}

static PyMethodDef ext_methods[] = {
    {"fnv_wide", py_fnv_wide, METH_VARARGS, fnv_wide_doc},
    {"fnv1a64", py_fnv1a64, METH_VARARGS, fnv1a64_doc},
    {"fnv1a128", py_fnv1a128, METH_VARARGS, fnv1a128_doc},
    {"digest", py_digest, METH_O, digest_doc},
    {"fnv1a128_many", py_fnv1a128_many, METH_VARARGS, fnv1a128_many_doc},
    {"fnv1a128_many_cmp", py_fnv1a128_many_cmp, METH_VARARGS, fnv1a128_many_cmp_doc},
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
    fnv128_wide_init();
    wide_best = grit_fnv_wide;
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
        || PyModule_AddIntConstant(m, "FNV_MULTI_LANES", FNV_MULTI_LANES) < 0
        || PyModule_AddObject(m, "FNV_WIDE_CPU", wide_names(grit_fnv_wide_cpu)) < 0
        || PyModule_AddObject(m, "FNV_WIDE_LOOPS", wide_names(grit_fnv_wide_passed)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
