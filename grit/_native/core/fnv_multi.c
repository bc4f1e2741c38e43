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

/* The prime's low word, read through a volatile so that the compiler cannot
 * see it: a multiply by the constant 0x13b is strength-reduced into a shift,
 * an lea and a subtraction, three or four instructions where one multiply
 * does; one lane waits on its multiply either way, but interleaved lanes are
 * bound by the instructions issued (about 25% more bytes a second with the
 * multiply, measured on x86-64). */
static volatile const uint64_t PRIME_LOW = FNV128_PRIME_LOW;

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) \
    && !defined(GRIT_FNV_NO_ASM)

/* x * c as a 128-bit product, low word returned, high word in *high.  GCC
 * keeps a product of unsigned __int128 type in a pair it moves through the
 * stack inside these loops (about 20% slower at three lanes); the one
 * instruction, written out, leaves the registers to the lanes.  Clang and
 * other targets take the __int128 form below (GRIT_FNV_NO_ASM selects it
 * here too: tests/test_native_fnv.py builds both). */
static inline uint64_t
mul_wide(uint64_t x, uint64_t c, uint64_t *high)
{
    uint64_t low, h;
    __asm__("mulq %3" : "=a"(low), "=d"(h) : "a"(x), "rm"(c) : "cc");
    *high = h;
    return low;
}

const char grit_fnv_multi_impl[] = "int128-asm";

#else

static inline uint64_t
mul_wide(uint64_t x, uint64_t c, uint64_t *high)
{
    u128_m prod = (u128_m)x * c;
    *high = (uint64_t)(prod >> 64);
    return (uint64_t)prod;
}

const char grit_fnv_multi_impl[] = "int128";

#endif

/* One lane's step, as fnv128_update's loop body (fnv.c), c the prime's low word. */
#define LANE_STEP(k)                                                    \
    do {                                                                \
        uint64_t high##k;                                               \
        lo##k ^= p##k[i];                                               \
        uint64_t low##k = mul_wide(lo##k, c, &high##k);                 \
        hi##k = hi##k * c + high##k + (lo##k << 24);                    \
        lo##k = low##k;                                                 \
    } while (0)

/* The lanes' words come in and go out through two small arrays, not through
 * pointers to each state: pointers kept for the stores after the loop would
 * hold registers the loop needs (GCC then spills a state word into memory
 * inside the loop, a third slower at three lanes). */
#define LOAD(k)                                                         \
    uint64_t hi##k = hi[k], lo##k = lo[k];                              \
    const unsigned char *p##k = p[k]
#define STORE(k) (hi[k] = hi##k, lo[k] = lo##k)

static void
lanes4(uint64_t *hi, uint64_t *lo, const unsigned char *const *p, size_t n)
{
    const uint64_t c = PRIME_LOW;
    LOAD(0); LOAD(1); LOAD(2); LOAD(3);
    for (size_t i = 0; i < n; i++) {
        LANE_STEP(0); LANE_STEP(1); LANE_STEP(2); LANE_STEP(3);
    }
    STORE(0); STORE(1); STORE(2); STORE(3);
}

static void
lanes3(uint64_t *hi, uint64_t *lo, const unsigned char *const *p, size_t n)
{
    const uint64_t c = PRIME_LOW;
    LOAD(0); LOAD(1); LOAD(2);
    for (size_t i = 0; i < n; i++) {
        LANE_STEP(0); LANE_STEP(1); LANE_STEP(2);
    }
    STORE(0); STORE(1); STORE(2);
}

static void
lanes2(uint64_t *hi, uint64_t *lo, const unsigned char *const *p, size_t n)
{
    const uint64_t c = PRIME_LOW;
    LOAD(0); LOAD(1);
    for (size_t i = 0; i < n; i++) {
        LANE_STEP(0); LANE_STEP(1);
    }
    STORE(0); STORE(1);
}

#else

/* Without a 128-bit integer type the lanes are run one after the other
 * (the portable loop of fnv.c): the same values, without the overlap. */
static void
lanes_each(uint64_t *hi, uint64_t *lo, const unsigned char *const *p, size_t n, int k)
{
    for (int j = 0; j < k; j++) {
        fnv128_t st = {hi[j], lo[j]};
        st = fnv128_update(st, p[j], n);
        hi[j] = st.hi;
        lo[j] = st.lo;
    }
}
static void
lanes4(uint64_t *hi, uint64_t *lo, const unsigned char *const *p, size_t n)
{
    lanes_each(hi, lo, p, n, 4);
}
static void
lanes3(uint64_t *hi, uint64_t *lo, const unsigned char *const *p, size_t n)
{
    lanes_each(hi, lo, p, n, 3);
}
static void
lanes2(uint64_t *hi, uint64_t *lo, const unsigned char *const *p, size_t n)
{
    lanes_each(hi, lo, p, n, 2);
}

const char grit_fnv_multi_impl[] = "portable";

#endif

static void
lanes1(uint64_t *hi, uint64_t *lo, const unsigned char *const *p, size_t n)
{
    fnv128_t st = {hi[0], lo[0]};
    st = fnv128_update(st, p[0], n);
    hi[0] = st.hi;
    lo[0] = st.lo;
}

typedef void (*lanes_fn)(uint64_t *, uint64_t *, const unsigned char *const *, size_t);
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
        uint64_t hi[FNV_MULTI_LANES], lo[FNV_MULTI_LANES];
        const unsigned char *pp[FNV_MULTI_LANES];
        for (int j = 0; j < active; j++) {
            const fnv_segments *f = &streams[lane[j].s];
            size_t left = f->len[lane[j].seg] - lane[j].off;
            n = left < n ? left : n;
            hi[j] = st[lane[j].s].hi;
            lo[j] = st[lane[j].s].lo;
            pp[j] = f->seg[lane[j].seg] + lane[j].off;
        }
        LANES[active](hi, lo, pp, n);
        for (int j = 0; j < active; j++) {
            st[lane[j].s].hi = hi[j];
            st[lane[j].s].lo = lo[j];
        }
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
