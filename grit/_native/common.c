/*
 * grit._kernels: what the kernels share that is not inline -- the thread
 * pool, the E4M3 table and the allocator of the planes the entry points
 * return (kernels.h has the overview).
 */
#include "kernels.h"

int grit_use_avx2 = 0;

/* ------------------------------------------------------------------------
 * E4M3 (OCP "fn": bias 7, three mantissa bits, S.1111.111 = NaN), filled at
 * import from §2.4. */

float grit_e4m3[256];

void
grit_init_e4m3(void)
{
    for (unsigned c = 0; c < 256; c++) {
        unsigned e = (c >> 3) & 15, m = c & 7;
        float v;
        if (e == 15 && m == 7) {
            v = u2f(CANON_NAN);
        } else if (e == 0) {
            v = (float)m * pow2f(-9);               /* m/8 · 2^(1-7) */
        } else {
            v = (float)(8 + m) * pow2f((int)e - 10); /* (1 + m/8) · 2^(e-7) */
        }
        grit_e4m3[c] = canon((c & 0x80) ? -v : v);  /* 0xFF: 0x7FC00000 too */
    }
}

/* ------------------------------------------------------------------------
 * Threads: [0, units) is cut into contiguous parts; part 0 runs on the
 * calling thread.  A thread that cannot be started runs inline, so the
 * result is the same whatever happens. */

typedef struct {
    range_fn fn;
    void *ctx;
    int part;
    size_t lo, hi;
} job_t;

#ifndef GRIT_NO_THREADS
static void *
job_main(void *p)
{
    job_t *j = (job_t *)p;
    j->fn(j->ctx, j->part, j->lo, j->hi);
    return NULL;
}
#endif

static void
part_range(size_t units, int parts, int t, size_t *lo, size_t *hi)
{
    size_t q = units / (size_t)parts, r = units % (size_t)parts, ut = (size_t)t;
    *lo = ut * q + (ut < r ? ut : r);
    *hi = *lo + q + (ut < r ? 1 : 0);
}

void
grit_run_parts(range_fn fn, void *ctx, size_t units, int parts)
{
    job_t jobs[MAX_THREADS];
    for (int t = 0; t < parts; t++) {
        jobs[t].fn = fn;
        jobs[t].ctx = ctx;
        jobs[t].part = t;
        part_range(units, parts, t, &jobs[t].lo, &jobs[t].hi);
    }
#ifndef GRIT_NO_THREADS
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS];
    for (int t = 1; t < parts; t++) {
        started[t] = pthread_create(&tid[t], NULL, job_main, &jobs[t]) == 0;
    }
    fn(ctx, 0, jobs[0].lo, jobs[0].hi);
    for (int t = 1; t < parts; t++) {
        if (started[t]) {
            pthread_join(tid[t], NULL);
        } else {
            fn(ctx, t, jobs[t].lo, jobs[t].hi);
        }
    }
#else
    for (int t = 0; t < parts; t++) {
        fn(ctx, t, jobs[t].lo, jobs[t].hi);
    }
#endif
}

/* The relayout kernels never look at `part`: their units are dealt out in
 * chunks from a shared counter, so that a thread slowed down (on a shared
 * machine, by a busy neighbour on its core) takes fewer chunks instead of
 * holding the others up at the join, as an even static split would.  With
 * groups (run_dealt_groups), thread t starts on group t's counter and moves
 * on to the other groups when its own is done: the streaming transposes give
 * each thread its own columns, i.e. its own pages of the output, so that the
 * threads do not fault the same fresh pages at once. */
#if !defined(GRIT_NO_THREADS) && (defined(__GNUC__) || defined(__clang__))
typedef struct {
    range_fn fn;
    void *ctx;
    size_t gsize, chunk;         /* units per group, per chunk */
    int ngroups;
    size_t next[MAX_THREADS];    /* per group: the first unit not yet taken (atomic) */
} deal_t;

typedef struct {
    deal_t *d;
    int part;
} deal_job;

static void
deal_work(deal_t *d, int part)
{
    for (int k = 0; k < d->ngroups; k++) {
        const int g = (part + k) % d->ngroups;
        const size_t base = (size_t)g * d->gsize;
        for (;;) {
            size_t lo = __atomic_fetch_add(&d->next[g], d->chunk, __ATOMIC_RELAXED);
            if (lo >= d->gsize) {
                break;
            }
            size_t hi = lo + d->chunk < d->gsize ? lo + d->chunk : d->gsize;
            d->fn(d->ctx, part, base + lo, base + hi);
        }
    }
}

static void *
deal_main(void *p)
{
    deal_job *j = (deal_job *)p;
    deal_work(j->d, j->part);
    return NULL;
}

/* units [0, ngroups * gsize), group g = [g * gsize, (g + 1) * gsize) */
void
grit_run_dealt_groups(range_fn fn, void *ctx, size_t gsize, int ngroups, int parts)
{
    if (parts <= 1) {
        fn(ctx, 0, 0, gsize * (size_t)ngroups);
        return;
    }
    deal_t d;
    d.fn = fn;
    d.ctx = ctx;
    d.gsize = gsize;
    d.ngroups = ngroups;
    d.chunk = gsize * (size_t)ngroups / ((size_t)parts * 8);   /* about 8 chunks a thread */
    if (d.chunk < 1) {
        d.chunk = 1;
    }
    for (int g = 0; g < ngroups; g++) {
        d.next[g] = 0;
    }
    deal_job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS];
    for (int t = 1; t < parts; t++) {
        jobs[t].d = &d;
        jobs[t].part = t;
        started[t] = pthread_create(&tid[t], NULL, deal_main, &jobs[t]) == 0;
    }
    deal_work(&d, 0);            /* a thread that failed to start leaves its chunks to us */
    for (int t = 1; t < parts; t++) {
        if (started[t]) {
            pthread_join(tid[t], NULL);
        }
    }
}

void
grit_run_dealt(range_fn fn, void *ctx, size_t units, int parts)
{
    grit_run_dealt_groups(fn, ctx, units, 1, parts);
}
#else
void
grit_run_dealt_groups(range_fn fn, void *ctx, size_t gsize, int ngroups, int parts)
{
    grit_run_parts(fn, ctx, gsize * (size_t)ngroups, parts);
}
#endif

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
