/*
 * §6: grade_id, gid, digest, the printable gid (Crockford base32), and the
 * descriptor's wire bytes (§3.1, little-endian).
 */
#include "lib.h"

static void
be128(fnv128_t st, uint8_t out[16])
{
    for (int i = 0; i < 8; i++) {
        out[i] = (uint8_t)(st.hi >> (56 - 8 * i));
        out[8 + i] = (uint8_t)(st.lo >> (56 - 8 * i));
    }
}

static const fnv128_t FNV128_BASIS = {FNV128_OFFSET_HI, FNV128_OFFSET_LO};

uint64_t
grit_fnv1a64(const void *p, size_t n)
{
    return fnv64_update(FNV64_OFFSET, (const unsigned char *)p, n);
}

void
grit_fnv1a128(const void *p, size_t n, uint8_t out[16])
{
    be128(fnv128_update(FNV128_BASIS, (const unsigned char *)p, n), out);
}

uint64_t
grit_grade_id(const char *canonical, size_t len)
{
    return grit_fnv1a64(canonical, len);
}

/* ------------------------------------------------------------------------
 * descriptor bytes */

static uint64_t
ld_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static void
st_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

void
grit_desc_from_bytes(const uint8_t b[64], grit_desc_t *d)
{
    d->magic = (uint32_t)ld_le(b, 4);
    d->hdr_bytes = b[4];
    d->version = b[5];
    d->n_levels = b[6];
    d->flags = b[7];
    d->elem = (grit_fmt_t)ld_le(b + 8, 2);
    d->scale0 = (grit_fmt_t)ld_le(b + 10, 2);
    d->scale1 = (grit_fmt_t)ld_le(b + 12, 2);
    d->zp_fmt = (grit_fmt_t)ld_le(b + 14, 2);
    d->group_axis = (int16_t)(uint16_t)ld_le(b + 16, 2);
    d->k0 = (uint16_t)ld_le(b + 18, 2);
    d->k1 = (uint16_t)ld_le(b + 20, 2);
    d->sp_n = b[22];
    d->sp_m = b[23];
    d->sp_meta_fmt = b[24];
    d->sp_order = b[25];
    d->container = b[26];
    d->frame_rsvd = b[27];
    d->note = (uint32_t)ld_le(b + 28, 4);
    d->placement_data = ld_le(b + 32, 8);
    d->placement_scale = ld_le(b + 40, 8);
    d->placement_meta = ld_le(b + 48, 8);
    d->grade_id = ld_le(b + 56, 8);
}

void
grit_desc_to_bytes(const grit_desc_t *d, uint8_t b[64])
{
    st_le(b, d->magic, 4);
    b[4] = d->hdr_bytes;
    b[5] = d->version;
    b[6] = d->n_levels;
    b[7] = d->flags;
    st_le(b + 8, d->elem, 2);
    st_le(b + 10, d->scale0, 2);
    st_le(b + 12, d->scale1, 2);
    st_le(b + 14, d->zp_fmt, 2);
    st_le(b + 16, (uint16_t)d->group_axis, 2);
    st_le(b + 18, d->k0, 2);
    st_le(b + 20, d->k1, 2);
    b[22] = d->sp_n;
    b[23] = d->sp_m;
    b[24] = d->sp_meta_fmt;
    b[25] = d->sp_order;
    b[26] = d->container;
    b[27] = d->frame_rsvd;
    st_le(b + 28, d->note, 4);
    st_le(b + 32, d->placement_data, 8);
    st_le(b + 40, d->placement_scale, 8);
    st_le(b + 48, d->placement_meta, 8);
    st_le(b + 56, d->grade_id, 8);
}

/* ------------------------------------------------------------------------
 * §6.3 gid, §6.5 digest */

void
grit_gid_with(const char *canonical, size_t len, const grit_desc_t *d, int32_t rank,
              const int64_t *shape, uint8_t out[16])
{
    static const unsigned char zero = 0;
    uint8_t b[64], r[4];
    grit_desc_to_bytes(d, b);
    fnv128_t st = fnv128_update(FNV128_BASIS, (const unsigned char *)canonical, len);
    st = fnv128_update(st, &zero, 1);
    st = fnv128_update(st, b, 28);                 /* frame, part 1 */
    st = fnv128_update(st, b + 32, 32);            /* frame, part 2: the note is skipped */
    st_le(r, (uint32_t)rank, 4);
    st = fnv128_update(st, r, 4);
    for (int32_t i = 0; i < rank; i++) {
        st = fnv128_u64le(st, (uint64_t)shape[i]);
    }
    be128(st, out);
}

grit_status_t
grit_gid(const grit_view_t *v, uint8_t out[16], grit_detail_t *det)
{
    const grit_grade_entry *g = grit_lookup_grade(v->d.grade_id);
    char id[24];
    snprintf(id, sizeof id, "0x%016llX", (unsigned long long)v->d.grade_id);
    if (g == NULL) {
        return grit_fail(det, GRIT_GRADE_UNKNOWN, 0, -1, "grade_id", NULL, id,
                         "GradeUnknown: grade_id %s is not a registered grade; its canonical "
                         "string is needed for the gid (§6.3).", id);
    }
    if (v->rank < 0 || v->rank > GRIT_MAXRANK) {
        char a[16];
        snprintf(a, sizeof a, "%d", (int)v->rank);
        return grit_fail(det, GRIT_SIZE_MISMATCH, 0, -1, "rank", "0..8", a,
                         "SizeMismatch: rank %d is outside [0, GRIT_MAXRANK = 8].",
                         (int)v->rank);
    }
    grit_gid_with(g->canonical, g->len, &v->d, v->rank, v->shape, out);
    return grit_ok(det);
}

void
grit_digest(const grit_view_t *v, uint8_t out[16])
{
    const unsigned char *p[4];
    size_t len[4];
    for (int i = 0; i < 4; i++) {
        len[i] = v->plane_bytes[i] > 0 && v->plane[i] != NULL ? (size_t)v->plane_bytes[i] : 0;
        p[i] = (const unsigned char *)v->plane[i];
    }
    be128(fnv128_digest(p, len, 4), out);
}

/* ------------------------------------------------------------------------
 * §6.4 Crockford base32: 26 symbols of the 128-bit value zero-extended on
 * the left to 130 bits */

static const char B32[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

void
grit_base32_encode(const uint8_t gid[16], char out[27])
{
    uint64_t hi = 0, lo = 0;
    for (int i = 0; i < 8; i++) {
        hi = (hi << 8) | gid[i];
        lo = (lo << 8) | gid[8 + i];
    }
    /* symbol k (from the right) holds bits [5k, 5k + 5) of the value */
    for (int k = 0; k < 26; k++) {
        int sh = 5 * k;
        uint64_t bits;
        if (sh >= 64) {
            bits = hi >> (sh - 64);
        } else if (sh > 59) {
            bits = (lo >> sh) | (hi << (64 - sh));
        } else {
            bits = lo >> sh;
        }
        out[25 - k] = B32[bits & 31];
    }
    out[26] = '\0';
}

static int
b32_value(char c)
{
    if (c >= 'a' && c <= 'z') {
        c = (char)(c - 'a' + 'A');
    }
    if (c == 'I' || c == 'L') {
        return 1;
    }
    if (c == 'O') {
        return 0;
    }
    for (int i = 0; i < 32; i++) {
        if (B32[i] == c) {
            return i;
        }
    }
    return -1;                                      /* U, and every other symbol */
}

int
grit_base32_parse(const char *s, size_t len, uint8_t gid[16])
{
    if (s == NULL || len != 26) {
        return -1;
    }
    uint64_t hi = 0, lo = 0;
    for (size_t i = 0; i < 26; i++) {
        int v = b32_value(s[i]);
        if (v < 0 || (i == 0 && v > 7)) {
            return -1;                              /* past 128 bits */
        }
        hi = (hi << 5) | (lo >> 59);
        lo = (lo << 5) | (uint64_t)v;
    }
    for (int i = 0; i < 8; i++) {
        gid[i] = (uint8_t)(hi >> (56 - 8 * i));
        gid[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
    }
    return 0;
}

/* ------------------------------------------------------------------------ */

const char *
grit_status_name(grit_status_t s)
{
    switch (s) {
    case GRIT_OK:
        return "Ok";
    case GRIT_SIZE_MISMATCH:
        return "SizeMismatch";
    case GRIT_GRADE_UNKNOWN:
        return "GradeUnknown";
    case GRIT_PLACEMENT_UNKNOWN:
        return "PlacementUnknown";
    case GRIT_DIGEST_MISMATCH:
        return "DigestMismatch";
    }
    return "?";
}

const char *
grit_library_version(void)
{
    return "0.1.0";
}
