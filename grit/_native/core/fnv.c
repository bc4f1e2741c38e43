/*
 * FNV-1a-64 / FNV-1a-128 and the plane digest of GRIT v1 §6 (fnv.h).
 */
#include "fnv.h"

/* -------------------------------------------------------------------------
 * 128-bit state: unsigned __int128 where the compiler has it, else two
 * uint64 halves.  Both paths compute exactly the same function. */

#if defined(__SIZEOF_INT128__) && !defined(GRIT_FNV_PORTABLE)

const char grit_fnv128_impl[] = "int128";

__extension__ typedef unsigned __int128 u128; /* silences -Wpedantic */

fnv128_t
fnv128_update(fnv128_t st, const unsigned char *p, size_t n)
{
    /* Words are kept apart so that (h << 88), whose low word is zero, costs
     * a shift on the high word and adds nothing to the low word's chain. */
    uint64_t hi = st.hi, lo = st.lo;
    for (size_t i = 0; i < n; i++) {
        lo ^= p[i];
        u128 prod = (u128)lo * FNV128_PRIME_LOW;
        hi = hi * FNV128_PRIME_LOW + (uint64_t)(prod >> 64) + (lo << 24);
        lo = (uint64_t)prod;
    }
    st.hi = hi;
    st.lo = lo;
    return st;
}

#else

const char grit_fnv128_impl[] = "portable";

fnv128_t
fnv128_update(fnv128_t st, const unsigned char *p, size_t n)
{
    uint64_t hi = st.hi, lo = st.lo;
    for (size_t i = 0; i < n; i++) {
        lo ^= p[i];
        /* lo * 0x13b as a 128-bit product: each 32-bit half times a 9-bit
         * constant fits in 41 bits, so only one carry can arise. */
        uint64_t a = (lo & UINT64_C(0xffffffff)) * FNV128_PRIME_LOW;
        uint64_t b = (lo >> 32) * FNV128_PRIME_LOW;
        uint64_t new_lo = a + (b << 32);
        uint64_t carry = new_lo < a;
        /* high word: hi * 0x13b + high half of lo * 0x13b + (h << 88)'s
         * contribution, which is lo << 24 (bits of lo landing at 88..127). */
        hi = hi * FNV128_PRIME_LOW + (b >> 32) + carry + (lo << 24);
        lo = new_lo;
    }
    st.hi = hi;
    st.lo = lo;
    return st;
}

#endif

uint64_t
fnv64_update(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= FNV64_PRIME;
    }
    return h;
}

fnv128_t
fnv128_u64le(fnv128_t st, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++) {
        b[i] = (unsigned char)(v >> (8 * i));
    }
    return fnv128_update(st, b, sizeof b);
}

/* -------------------------------------------------------------------------
 * §6.5 digest */

#if defined(__GNUC__)
#define GRIT_NOINLINE __attribute__((noinline))
#else
#define GRIT_NOINLINE
#endif

/* Kept out of line: inlined into its caller, GCC spills the multiply's
 * result through the stack inside the byte loop (about 10% slower). */
GRIT_NOINLINE fnv128_t
fnv128_digest(const unsigned char *const *p, const size_t *len, int n)
{
    fnv128_t st = {FNV128_OFFSET_HI, FNV128_OFFSET_LO};
    for (int i = 0; i < n; i++) {
        st = fnv128_u64le(st, (uint64_t)len[i]);
        st = fnv128_update(st, p[i], len[i]);
    }
    return st;
}

/* §6.1 self-check: a miscompiled loop fails it. */
int
fnv_self_check(void)
{
    static const unsigned char a[1] = {'a'};
    fnv128_t st = {FNV128_OFFSET_HI, FNV128_OFFSET_LO};
    st = fnv128_update(st, a, 1);
    return fnv64_update(FNV64_OFFSET, a, 1) == UINT64_C(0xaf63dc4c8601ec8c)
        && st.hi == UINT64_C(0xd228cb696f1a8caf)
        && st.lo == UINT64_C(0x78912b704e4a8964);
}
