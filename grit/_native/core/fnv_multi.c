/*
 * FNV-1a-128 of several messages at once (fnv_multi.h): up to
 * FNV_MULTI_LANES streams advanced together, one byte of each per step.
 *
 * Why: one FNV-1a-128 stream is latency bound.  Each byte's step is
 * lo ^= b; lo * 0x13b -- an xor and a 3-cycle multiply that the next byte
 * waits for -- so a core runs one stream at about one byte per 4 cycles
 * while its multiplier is idle most of the time.  Independent streams have
 * independent chains: interleaved in one loop they share the core's
 * multiplier instead of waiting on it.  Every lane computes exactly
 * fnv128_update's function (fnv.c); only the order in which the machine
 * runs the lanes' steps differs.
 */
#include "fnv_multi.h"

#if defined(__SIZEOF_INT128__) && !defined(GRIT_FNV_PORTABLE)

__extension__ typedef unsigned __int128 u128_m; /* silences -Wpedantic */

/* One lane's step, as fnv128_update's loop body (fnv.c). */
#define LANE_STEP(k)                                                    \
    do {                                                                \
        lo##k ^= p##k[i];                                               \
        u128_m prod##k = (u128_m)lo##k * FNV128_PRIME_LOW;              \
        hi##k = hi##k * FNV128_PRIME_LOW + (uint64_t)(prod##k >> 64)    \
                + (lo##k << 24);                                        \
        lo##k = (uint64_t)prod##k;                                      \
    } while (0)

#define LOAD(k)                                                         \
    uint64_t hi##k = st[k]->hi, lo##k = st[k]->lo;                      \
    const unsigned char *p##k = p[k]
#define STORE(k) (st[k]->hi = hi##k, st[k]->lo = lo##k)

static void
lanes4(fnv128_t *const *st, const unsigned char *const *p, size_t n)
{
    LOAD(0); LOAD(1); LOAD(2); LOAD(3);
    for (size_t i = 0; i < n; i++) {
        LANE_STEP(0); LANE_STEP(1); LANE_STEP(2); LANE_STEP(3);
    }
    STORE(0); STORE(1); STORE(2); STORE(3);
}

static void
lanes3(fnv128_t *const *st, const unsigned char *const *p, size_t n)
{
    LOAD(0); LOAD(1); LOAD(2);
    for (size_t i = 0; i < n; i++) {
        LANE_STEP(0); LANE_STEP(1); LANE_STEP(2);
    }
    STORE(0); STORE(1); STORE(2);
}

static void
lanes2(fnv128_t *const *st, const unsigned char *const *p, size_t n)
{
    LOAD(0); LOAD(1);
    for (size_t i = 0; i < n; i++) {
        LANE_STEP(0); LANE_STEP(1);
    }
    STORE(0); STORE(1);
}

const char grit_fnv_multi_impl[] = "int128";

#else

/* Without a 128-bit integer type the lanes are run one after the other
 * (the portable loop of fnv.c): the same values, without the overlap. */
static void
lanes_each(fnv128_t *const *st, const unsigned char *const *p, size_t n, int k)
{
    for (int j = 0; j < k; j++) {
        *st[j] = fnv128_update(*st[j], p[j], n);
    }
}
static void
lanes4(fnv128_t *const *st, const unsigned char *const *p, size_t n)
{
    lanes_each(st, p, n, 4);
}
static void
lanes3(fnv128_t *const *st, const unsigned char *const *p, size_t n)
{
    lanes_each(st, p, n, 3);
}
static void
lanes2(fnv128_t *const *st, const unsigned char *const *p, size_t n)
{
    lanes_each(st, p, n, 2);
}

const char grit_fnv_multi_impl[] = "portable";

#endif

static void
lanes1(fnv128_t *const *st, const unsigned char *const *p, size_t n)
{
    *st[0] = fnv128_update(*st[0], p[0], n);
}

typedef void (*lanes_fn)(fnv128_t *const *, const unsigned char *const *, size_t);
static const lanes_fn LANES[FNV_MULTI_LANES + 1] = {NULL, lanes1, lanes2, lanes3, lanes4};

/* Where one lane's stream stands: its index, its segment, the offset in it. */
typedef struct {
    size_t s, seg, off;
} cursor;

/* The first non-empty segment at or after c->seg (0: the stream is done). */
static int
settle(cursor *c, const fnv_segments *streams)
{
    const fnv_segments *f = &streams[c->s];
    while (c->seg < f->n && c->off == f->len[c->seg]) {
        c->seg++;
        c->off = 0;
    }
    return c->seg < f->n;
}

void
fnv128_update_many(fnv128_t *st, const fnv_segments *streams, size_t k, int lanes)
{
    cursor lane[FNV_MULTI_LANES];
    int active = 0;
    size_t next = 0;

    if (lanes < 1) {
        lanes = 1;
    }
    if (lanes > FNV_MULTI_LANES) {
        lanes = FNV_MULTI_LANES;
    }
    for (;;) {
        /* a free lane takes the next stream that has bytes left */
        while (active < lanes && next < k) {
            cursor c = {next++, 0, 0};
            if (settle(&c, streams)) {
                lane[active++] = c;
            }
        }
        if (active == 0) {
            return;
        }
        /* all lanes advance by what the shortest current segment holds */
        size_t n = SIZE_MAX;
        fnv128_t *sp[FNV_MULTI_LANES];
        const unsigned char *pp[FNV_MULTI_LANES];
        for (int j = 0; j < active; j++) {
            const fnv_segments *f = &streams[lane[j].s];
            size_t left = f->len[lane[j].seg] - lane[j].off;
            n = left < n ? left : n;
            sp[j] = &st[lane[j].s];
            pp[j] = f->seg[lane[j].seg] + lane[j].off;
        }
        LANES[active](sp, pp, n);
        /* a lane whose stream is done is handed back; the others keep their
         * order (it does not change the values, only which lane runs what) */
        int kept = 0;
        for (int j = 0; j < active; j++) {
            lane[j].off += n;
            if (settle(&lane[j], streams)) {
                lane[kept++] = lane[j];
            }
        }
        active = kept;
    }
}
