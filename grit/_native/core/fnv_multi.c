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
#include "fnv_wide.h"

#include <string.h>

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

/* The kernels with a comparison: lane k also reads q[k]'s n bytes and ORs
 * their difference from p[k]'s into d[k] (0: the same bytes).  The chains
 * above leave the core's other ports idle, and the comparison runs there: a
 * word of each buffer per eight bytes, one load, one xor and one or; its
 * pointer and its accumulator are touched once per word, so the compiler
 * may keep them in memory and leave the registers to the chains. */
#define LOADC(k)                                                        \
    LOAD(k);                                                            \
    const unsigned char *q##k = q[k];                                   \
    uint64_t d##k = 0
#define STOREC(k) (STORE(k), d[k] |= d##k)
#define WORD_CMP(k) (d##k |= load64(p##k + i) ^ load64(q##k + i))
#define BYTE_CMP(k) (d##k |= (uint64_t)(p##k[i] ^ q##k[i]))

static inline uint64_t
load64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

/* eight steps of every lane, i advanced by eight */
#define EIGHT(STEPS)                                                    \
    do {                                                                \
        STEPS; i++; STEPS; i++; STEPS; i++; STEPS; i++;                 \
        STEPS; i++; STEPS; i++; STEPS; i++; STEPS; i++;                 \
    } while (0)

static void
lanes3_cmp(uint64_t *hi, uint64_t *lo, uint64_t *d, const unsigned char *const *p,
           const unsigned char *const *q, size_t n)
{
    const uint64_t c = PRIME_LOW;
    LOADC(0); LOADC(1); LOADC(2);
    size_t i = 0;
    while (i + 8 <= n) {
        WORD_CMP(0); WORD_CMP(1); WORD_CMP(2);
        EIGHT(LANE_STEP(0); LANE_STEP(1); LANE_STEP(2));
    }
    for (; i < n; i++) {
        BYTE_CMP(0); BYTE_CMP(1); BYTE_CMP(2);
        LANE_STEP(0); LANE_STEP(1); LANE_STEP(2);
    }
    STOREC(0); STOREC(1); STOREC(2);
}

static void
lanes2_cmp(uint64_t *hi, uint64_t *lo, uint64_t *d, const unsigned char *const *p,
           const unsigned char *const *q, size_t n)
{
    const uint64_t c = PRIME_LOW;
    LOADC(0); LOADC(1);
    size_t i = 0;
    while (i + 8 <= n) {
        WORD_CMP(0); WORD_CMP(1);
        EIGHT(LANE_STEP(0); LANE_STEP(1));
    }
    for (; i < n; i++) {
        BYTE_CMP(0); BYTE_CMP(1);
        LANE_STEP(0); LANE_STEP(1);
    }
    STOREC(0); STOREC(1);
}

static void
lanes1_cmp(uint64_t *hi, uint64_t *lo, uint64_t *d, const unsigned char *const *p,
           const unsigned char *const *q, size_t n)
{
    const uint64_t c = PRIME_LOW;
    LOADC(0);
    size_t i = 0;
    while (i + 8 <= n) {
        WORD_CMP(0);
        EIGHT(LANE_STEP(0));
    }
    for (; i < n; i++) {
        BYTE_CMP(0);
        LANE_STEP(0);
    }
    STOREC(0);
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

/* and the comparison, a loop of its own */
static void
lanes_each_cmp(uint64_t *hi, uint64_t *lo, uint64_t *d, const unsigned char *const *p,
               const unsigned char *const *q, size_t n, int k)
{
    lanes_each(hi, lo, p, n, k);
    for (int j = 0; j < k; j++) {
        uint64_t dj = 0;
        for (size_t i = 0; i < n; i++) {
            dj |= (uint64_t)(p[j][i] ^ q[j][i]);
        }
        d[j] |= dj;
    }
}
static void
lanes3_cmp(uint64_t *hi, uint64_t *lo, uint64_t *d, const unsigned char *const *p,
           const unsigned char *const *q, size_t n)
{
    lanes_each_cmp(hi, lo, d, p, q, n, 3);
}
static void
lanes2_cmp(uint64_t *hi, uint64_t *lo, uint64_t *d, const unsigned char *const *p,
           const unsigned char *const *q, size_t n)
{
    lanes_each_cmp(hi, lo, d, p, q, n, 2);
}
static void
lanes1_cmp(uint64_t *hi, uint64_t *lo, uint64_t *d, const unsigned char *const *p,
           const unsigned char *const *q, size_t n)
{
    lanes_each_cmp(hi, lo, d, p, q, n, 1);
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

/* The comparison beside the digest, a block at a time: each lane's block
 * hashed (lanesN), then compared with memcmp while it is still in the L1
 * cache.  (Where the lanes' chains and the comparison's words share one loop,
 * four lanes need more registers than x86-64 has: GCC spills the chains'
 * words and the loop runs slower.) */
#define CMP_BLOCK 4096

static void
lanes_cmp_blocks(uint64_t *hi, uint64_t *lo, uint64_t *d, const unsigned char *const *p,
                 const unsigned char *const *q, size_t n, int k)
{
    const unsigned char *pb[FNV_MULTI_LANES];
    for (size_t off = 0; off < n; off += CMP_BLOCK) {
        size_t m = n - off < CMP_BLOCK ? n - off : CMP_BLOCK;
        for (int j = 0; j < k; j++) {
            pb[j] = p[j] + off;
        }
        LANES[k](hi, lo, pb, m);
        for (int j = 0; j < k; j++) {
            if (d[j] == 0 && q[j] != p[j] && memcmp(pb[j], q[j] + off, m) != 0) {
                d[j] = 1;
            }
        }
    }
}

static void
lanes4_cmpb(uint64_t *hi, uint64_t *lo, uint64_t *d, const unsigned char *const *p,
            const unsigned char *const *q, size_t n)
{
    lanes_cmp_blocks(hi, lo, d, p, q, n, 4);
}

typedef void (*lanes_cmp_fn)(uint64_t *, uint64_t *, uint64_t *, const unsigned char *const *,
                             const unsigned char *const *, size_t);
/* up to three lanes the comparison shares the chains' loop (measured on
 * x86-64: 0.5-1.3x the time of the digest alone, where a separate pass of
 * numpy's comparison makes 1.1x), four a block at a time (1.15x) */
static const lanes_cmp_fn LANES_CMP[FNV_MULTI_LANES + 1] = {NULL, lanes1_cmp, lanes2_cmp,
                                                            lanes3_cmp, lanes4_cmpb};

/* Where one message stands: its segment, the offset in it. */
typedef struct {
    size_t seg, off;
} cursor;

/* Where one lane stands: its stream's index, the stream's cursor, and with
 * a comparison the other message's cursor and whether the two still agree
 * (once they do not, the lane compares its bytes with themselves). */
typedef struct {
    size_t s;
    cursor a, b;
    int live;
} lane_t;

/* c moved to the first non-empty segment of f at or after it (0: f is done). */
static int
settle(cursor *c, const fnv_segments *f)
{
    while (c->seg < f->n && c->off == f->len[c->seg]) {
        c->seg++;
        c->off = 0;
    }
    return c->seg < f->n;
}

static void
update_many(fnv128_t *st, const fnv_segments *streams, const fnv_segments *others, int *eq,
            size_t k, int lanes)
{
    lane_t lane[FNV_MULTI_LANES];
    int active = 0;
    size_t next = 0;

    if (lanes < 1) {
        lanes = 1;
    }
    if (lanes > FNV_MULTI_LANES) {
        lanes = FNV_MULTI_LANES;
    }
    for (;;) {
        /* a free lane takes the next stream that has bytes left; a stream
         * without any is done at once (its other message must be empty too) */
        while (active < lanes && next < k) {
            lane_t c = {next++, {0, 0}, {0, 0}, 1};
            int more = settle(&c.a, &streams[c.s]);
            if (others != NULL) {
                eq[c.s] = 1;
                if (!more && settle(&c.b, &others[c.s])) {
                    eq[c.s] = 0;
                }
            }
            if (more) {
                lane[active++] = c;
            }
        }
        if (active == 0) {
            return;
        }
        /* all lanes advance by what the shortest current segment holds */
        size_t n = SIZE_MAX;
        uint64_t hi[FNV_MULTI_LANES], lo[FNV_MULTI_LANES], d[FNV_MULTI_LANES];
        const unsigned char *pp[FNV_MULTI_LANES], *qq[FNV_MULTI_LANES];
        for (int j = 0; j < active; j++) {
            lane_t *l = &lane[j];
            const fnv_segments *f = &streams[l->s];
            size_t left = f->len[l->a.seg] - l->a.off;
            n = left < n ? left : n;
            hi[j] = st[l->s].hi;
            lo[j] = st[l->s].lo;
            d[j] = 0;
            pp[j] = f->seg[l->a.seg] + l->a.off;
            qq[j] = pp[j];
            if (others != NULL && l->live) {
                const fnv_segments *g = &others[l->s];
                if (!settle(&l->b, g)) {
                    l->live = 0;                /* the other message is shorter */
                }
                else {
                    left = g->len[l->b.seg] - l->b.off;
                    n = left < n ? left : n;
                    qq[j] = g->seg[l->b.seg] + l->b.off;
                }
            }
        }
        if (grit_fnv_wide && n >= FNV_WIDE_MIN) {
            /* the chain-and-sums loop, where the machine has it (fnv_wide.h) */
            fnv128_wide(active, hi, lo, d, pp, others != NULL ? qq : NULL, n);
        }
        else if (others != NULL) {
            LANES_CMP[active](hi, lo, d, pp, qq, n);
        }
        else {
            LANES[active](hi, lo, pp, n);
        }
        /* a lane whose stream is done is handed back; the others keep their
         * order (it does not change the values, only which lane runs what) */
        int kept = 0;
        for (int j = 0; j < active; j++) {
            lane_t *l = &lane[j];
            st[l->s].hi = hi[j];
            st[l->s].lo = lo[j];
            l->a.off += n;
            if (others != NULL && l->live) {
                l->b.off += n;
                if (d[j] != 0) {
                    l->live = 0;
                }
            }
            if (settle(&l->a, &streams[l->s])) {
                lane[kept++] = *l;
            }
            else if (others != NULL) {
                /* equal: no difference seen, and the other message ends here too */
                eq[l->s] = l->live && !settle(&l->b, &others[l->s]);
            }
        }
        active = kept;
    }
}

void
fnv128_update_many(fnv128_t *st, const fnv_segments *streams, size_t k, int lanes)
{
    update_many(st, streams, NULL, NULL, k, lanes);
}

void
fnv128_update_many_cmp(fnv128_t *st, const fnv_segments *streams, const fnv_segments *others,
                       int *eq, size_t k, int lanes)
{
    update_many(st, streams, others, eq, k, lanes);
}
