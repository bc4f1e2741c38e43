/*
 * What the kernels share that is not inline -- the thread pool, the E4M3
 * table and the one-time set-up (core.h has the overview).
 */
#include "core.h"

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
 * One-time set-up */

/* Self-check of the scalar conversions on values whose codes §2.5 and IEEE
 * 754 pin: a miscompiled or non-IEEE build fails it. */
static int
self_check(void)
{
    return e2m1_encode(0.25f) == 0 && e2m1_encode(0.75f) == 2 && e2m1_encode(1.25f) == 2
        && e2m1_encode(2.5f) == 4 && e2m1_encode(5.0f) == 6 && e2m1_encode(-0.0f) == 8
        && e2m1_encode(1e30f) == 7
        && half_rne_satfinite(1.0f) == 0x3C00 && half_rne_satfinite(65519.0f) == 0x7BFF
        && half_rne_satfinite(65520.0f) == 0x7BFF
        && half_rne_satfinite(pow2f(-25)) == 0 && half_rne_satfinite(3.0f * pow2f(-25)) == 2
        && half_value(0x0001) == pow2f(-24) && half_value(0x7BFF) == 65504.0f
        && e4m3_encode_nonneg(448.0f, 0) == 0x7E && e4m3_encode_nonneg(1.0f, 0) == 0x38
        && e4m3_encode_nonneg(pow2f(-10), 0) == 0 && e4m3_encode_nonneg(3.0f * pow2f(-10), 0) == 2
        && e4m3_encode_nonneg(1.0625f, 0) == 0x38 && e4m3_encode_nonneg(1.1875f, 1) == 0x39
        && grit_e4m3[0x7E] == 448.0f && grit_e4m3[0x01] == pow2f(-9) && grit_e4m3[0x7F] != grit_e4m3[0x7F]
        && mx_exponent(f2u(6.0f), 0) == 0 && mx_exponent(f2u(1.5f), 1) == -1
        && mx_exponent(f2u(1.4f), 1) == -2 && mx_exponent(1, 0) == -127
        && pow2f(-126) * 0.5f == pow2f(-127)        /* subnormals are not flushed */
        && rint_nonneg(2.5f) == 2 && rint_nonneg(3.5f) == 4 && rint_signed(-2.5f) == -2;
}

static int init_ok = 0;

static void
init_once(void)
{
    grit_init_e4m3();
    grit_init_i8();
#ifdef GRIT_AVX2
    grit_init_i8_shuffles();
    __builtin_cpu_init();
    grit_use_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    init_ok = self_check();
}

#ifndef GRIT_NO_THREADS
static pthread_once_t init_flag = PTHREAD_ONCE_INIT;

int
grit_core_init(void)
{
    pthread_once(&init_flag, init_once);
    return init_ok;
}
#else
/* no threads: a plain flag (the caller owns the only thread) */
int
grit_core_init(void)
{
    static int done = 0;
    if (!done) {
        init_once();
        done = 1;
    }
    return init_ok;
}
#endif
