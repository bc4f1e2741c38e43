#include "kernels_py.h"

/* ------------------------------------------------------------------------
 * Planes returned to Python */

/* A new plane of n bytes, to be filled before anyone else sees it: bytes
 * when small; from LARGE_PLANE bytes on, a memoryview of a numpy uint8 array,
 * starting on a cache line (streamed lines stay whole lines).  numpy.empty
 * asks the kernel for transparent huge pages on allocations of 4 MiB or more
 * (on the 2 MiB-aligned part of them), so a fresh multi-megabyte output costs
 * one page fault per 2 MiB instead of one per 4 KiB -- on a virtual machine
 * those faults cost more than the relayout itself.  From HUGE_PLANE bytes on
 * the plane starts on a 2 MiB boundary of a slightly larger array (the slack
 * is address space, never touched): otherwise the unaligned head and tail of
 * the array are 4 KiB pages, 512 more faults for a 64 MiB plane, and a
 * two-thread transpose of 64 MiB spent 8-11 ms of system time instead of
 * 13.  numpy is a dependency of the package; if it cannot be imported,
 * bytes it is. */
#ifndef LARGE_PLANE
#define LARGE_PLANE (1 << 20)
#endif
#ifndef HUGE_PLANE
#define HUGE_PLANE ((Py_ssize_t)4 << 20)
#endif
#define HUGE_ALIGN ((Py_ssize_t)2 << 20)
static PyObject *np_empty = NULL;        /* numpy.empty, looked up once */
static int np_empty_failed = 0;

PyObject *
grit_new_plane(Py_ssize_t n, unsigned char **p)
{
    if (PyErr_Occurred()) {
        return NULL;                     /* an earlier plane failed */
    }
    if (n >= LARGE_PLANE && !np_empty_failed) {
        if (np_empty == NULL) {
            PyObject *np = PyImport_ImportModule("numpy");
            if (np != NULL) {
                np_empty = PyObject_GetAttrString(np, "empty");
                Py_DECREF(np);
            }
            if (np_empty == NULL) {
                PyErr_Clear();
                np_empty_failed = 1;
            }
        }
        if (np_empty != NULL) {
            const Py_ssize_t align = n >= HUGE_PLANE ? HUGE_ALIGN : 64;
            PyObject *arr = PyObject_CallFunction(np_empty, "ns",
                                                  n + (align == 64 ? 63 : 2 * HUGE_ALIGN), "u1");
            if (arr == NULL) {
                return NULL;             /* MemoryError: report it */
            }
            Py_buffer v;
            if (PyObject_GetBuffer(arr, &v, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
                Py_DECREF(arr);
                return NULL;
            }
            Py_ssize_t off = (Py_ssize_t)((align - ((uintptr_t)v.buf & (align - 1))) & (align - 1));
            *p = (unsigned char *)v.buf + off;   /* owned by arr, which the view keeps */
            PyBuffer_Release(&v);
            PyObject *whole = PyMemoryView_FromObject(arr);
            Py_DECREF(arr);
            if (whole == NULL) {
                return NULL;
            }
            PyObject *mv = PySequence_GetSlice(whole, off, off + n);
            Py_DECREF(whole);
            return mv;
        }
    }
    PyObject *b = PyBytes_FromStringAndSize(NULL, n);
    if (b != NULL) {
        *p = (unsigned char *)PyBytes_AS_STRING(b);
    }
    return b;
}
