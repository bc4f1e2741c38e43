/*
 * §7 and §14: grit_check, levels 0-2, in the normative step order, as
 * grit/check.py (steps 1-5) with grit/facts.py canonical_sizes and the
 * placement size rules of grit/placement/stages.py.  For any 64 bytes and
 * any rank, shape and plane_bytes: every divisor is tested first, every
 * product is overflow-checked, no plane is read below level 2, and exactly
 * one status comes back.
 */
#include "lib.h"

#include <stdarg.h>

#define I64_MAX INT64_C(0x7FFFFFFFFFFFFFFF)
/* a plane size past int64: no plane_bytes equals it */
#define SIZE_HUGE UINT64_MAX

static void
copy_str(char *dst, size_t cap, const char *src)
{
    if (src == NULL) {
        dst[0] = '\0';
        return;
    }
    size_t n = strlen(src);
    if (n >= cap) {
        n = cap - 1;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

grit_status_t
grit_fail(grit_detail_t *d, grit_status_t s, int step, int plane, const char *field,
          const char *expected, const char *actual, const char *fmt, ...)
{
    if (d != NULL) {
        d->status = s;
        d->step = step;
        d->plane = plane;
        copy_str(d->field, sizeof d->field, field);
        copy_str(d->expected, sizeof d->expected, expected);
        copy_str(d->actual, sizeof d->actual, actual);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->message, sizeof d->message, fmt, ap);
        va_end(ap);
    }
    return s;
}

grit_status_t
grit_ok(grit_detail_t *d)
{
    if (d != NULL) {
        d->status = GRIT_OK;
        d->step = 0;
        d->plane = -1;
        d->field[0] = d->expected[0] = d->actual[0] = '\0';
        memcpy(d->message, "Ok", 3);
    }
    return GRIT_OK;
}

/* ------------------------------------------------------------------------
 * step 1: the frame */

static grit_status_t
frame_bad(grit_detail_t *det, const char *field, const char *expected, const char *actual,
          const char *why)
{
    return grit_fail(det, GRIT_GRADE_UNKNOWN, 1, -1, field, expected, actual,
                     "GradeUnknown: descriptor frame is not a v1 frame: %s", why);
}

static grit_status_t
step1_frame(const grit_desc_t *d, grit_detail_t *det)
{
    char a[48], why[96];
    if (d->magic != GRIT_MAGIC) {
        snprintf(a, sizeof a, "0x%08x", (unsigned)d->magic);
        snprintf(why, sizeof why, "magic is %s, not 0x31545247 ('GRT1')", a);
        return frame_bad(det, "magic", "0x31545247", a, why);
    }
    if (d->hdr_bytes != GRIT_HDR_BYTES) {
        snprintf(a, sizeof a, "%u", (unsigned)d->hdr_bytes);
        snprintf(why, sizeof why, "hdr_bytes is %s, not 64", a);
        return frame_bad(det, "hdr_bytes", "64", a, why);
    }
    if (d->version != GRIT_VERSION) {
        snprintf(a, sizeof a, "%u", (unsigned)d->version);
        snprintf(why, sizeof why, "version is %s, not 1", a);
        return frame_bad(det, "version", "1", a, why);
    }
    if (d->n_levels != 1 && d->n_levels != 2) {
        snprintf(a, sizeof a, "%u", (unsigned)d->n_levels);
        snprintf(why, sizeof why, "n_levels is %s", a);
        return frame_bad(det, "n_levels", "1 or 2", a, why);
    }
    if (d->flags & 0xC0) {
        snprintf(a, sizeof a, "0x%02x", (unsigned)d->flags);
        return frame_bad(det, "flags", "flags & 0xc0 == 0", a, "reserved flag bits 0xC0 are set");
    }
    if (d->frame_rsvd != 0) {
        snprintf(a, sizeof a, "%u", (unsigned)d->frame_rsvd);
        return frame_bad(det, "frame_rsvd", "0", a, "frame_rsvd is not 0");
    }
    if (d->container != GRIT_CT_DENSE && d->container != GRIT_CT_PAD8) {
        snprintf(a, sizeof a, "%u", (unsigned)d->container);
        snprintf(why, sizeof why, "container is %s", a);
        return frame_bad(det, "container", "0 or 1", a, why);
    }
    if (d->n_levels == 1 && (d->k1 != 0 || d->scale1 != 0)) {
        if (d->k1) {
            snprintf(a, sizeof a, "%u", (unsigned)d->k1);
        } else {
            snprintf(a, sizeof a, "0x%04x", (unsigned)d->scale1);
        }
        return frame_bad(det, d->k1 ? "k1" : "scale1", "0", a,
                         "n_levels == 1 requires k1 == 0 and scale1 absent");
    }
    if ((d->flags & GRIT_F_SPARSE) && (d->flags & GRIT_F_HAS_ZP)) {
        snprintf(a, sizeof a, "0x%02x", (unsigned)d->flags);
        return frame_bad(det, "flags", "not SPARSE and HAS_ZP", a,
                         "SPARSE and HAS_ZP together (v1 has one aux plane)");
    }
    if ((d->flags & GRIT_F_ZP_L1SCALED)
        && !((d->flags & GRIT_F_HAS_ZP) && d->n_levels == 2)) {
        snprintf(a, sizeof a, "0x%02x", (unsigned)d->flags);
        return frame_bad(det, "flags", "ZP_L1SCALED => HAS_ZP and n_levels == 2", a,
                         "ZP_L1SCALED without HAS_ZP and two scale levels");
    }
    if (d->elem >> 15) {
        snprintf(a, sizeof a, "0x%04x", (unsigned)d->elem);
        return frame_bad(det, "elem", "bias_ovr = 0", a, "elem.bias_ovr is set");
    }
    const struct {
        const char *name;
        unsigned w;
    } fmts[4] = {{"elem", d->elem}, {"scale0", d->scale0}, {"scale1", d->scale1},
                 {"zp_fmt", d->zp_fmt}};
    for (int i = 0; i < 4; i++) {
        if (((fmts[i].w >> 11) & 3) == 3) {
            snprintf(a, sizeof a, "0x%04x", fmts[i].w);
            snprintf(why, sizeof why, "%s.nan_enc is the reserved 3", fmts[i].name);
            return frame_bad(det, fmts[i].name, "nan_enc != 3", a, why);
        }
    }
    return GRIT_OK;
}

/* ------------------------------------------------------------------------
 * step 2: the grade, and F_INTERLEAVED against the data placement */

static grit_status_t
step2_grade(const grit_desc_t *d, grit_detail_t *det)
{
    const grit_grade_entry *g = grit_lookup_grade(d->grade_id);
    char a[48], e[48];
    if (g == NULL) {
        snprintf(a, sizeof a, "0x%016llX", (unsigned long long)d->grade_id);
        return grit_fail(det, GRIT_GRADE_UNKNOWN, 2, -1, "grade_id", NULL, a,
                         "GradeUnknown: grade_id %s is not a grade this process knows "
                         "(grit_register_grade adds one).", a);
    }
    const grit_desc_t *f = &g->frame;
    const struct {
        const char *name;
        unsigned want, got;
        int hex;
    } cmp[13] = {
        {"n_levels", f->n_levels, d->n_levels, 0},
        {"flags", f->flags, (unsigned)(d->flags & ~GRIT_F_INTERLEAVED), 2},
        {"elem", f->elem, d->elem, 4},
        {"scale0", f->scale0, d->scale0, 4},
        {"scale1", f->scale1, d->scale1, 4},
        {"zp_fmt", f->zp_fmt, d->zp_fmt, 4},
        {"k0", f->k0, d->k0, 0},
        {"k1", f->k1, d->k1, 0},
        {"sp_n", f->sp_n, d->sp_n, 0},
        {"sp_m", f->sp_m, d->sp_m, 0},
        {"sp_meta_fmt", f->sp_meta_fmt, d->sp_meta_fmt, 0},
        {"sp_order", f->sp_order, d->sp_order, 0},
        {"container", f->container, d->container, 0},
    };
    for (int i = 0; i < 13; i++) {
        if (cmp[i].want != cmp[i].got) {
            const char *fm = cmp[i].hex == 4 ? "0x%04x" : cmp[i].hex == 2 ? "0x%02x" : "%u";
            snprintf(e, sizeof e, fm, cmp[i].want);
            snprintf(a, sizeof a, fm, cmp[i].got);
            return grit_fail(det, GRIT_GRADE_UNKNOWN, 2, -1, cmp[i].name, e, a,
                             "GradeUnknown: descriptor %s = %s but grade %s requires %s = %s.",
                             cmp[i].name, a, g->canonical, cmp[i].name, e);
        }
    }
    if (d->flags & GRIT_F_INTERLEAVED) {
        /* docs/spec-decisions.md "interleaved-flag": BLOCK_AOS, a hashed word
         * whose registered expression is an Interleave or that this process
         * cannot resolve (grit_register_layout), or an opaque word */
        uint64_t w = d->placement_data;
        unsigned cls = (unsigned)(w >> 60);
        int hashed_other = cls == 0x8 && grit_layout_interleaves(w) == 0;
        if (!(w == GRIT_P_BLOCK_AOS || cls == 0xF || cls == 0x8) || hashed_other) {
            snprintf(a, sizeof a, "0x%02x", (unsigned)d->flags);
            return grit_fail(det, GRIT_GRADE_UNKNOWN, 2, -1, "flags",
                             "INTERLEAVED with BLOCK_AOS, Interleave or opaque data", a,
                             "GradeUnknown: the INTERLEAVED flag says the data plane carries "
                             "every plane, but placement_data 0x%016llx %s%s%s.",
                             (unsigned long long)w, hashed_other ? "is " : "does not interleave",
                             hashed_other ? grit_layout_expression(w) : "",
                             hashed_other ? ", which does not interleave" : "");
        }
    }
    return GRIT_OK;
}

/* ------------------------------------------------------------------------
 * step 3: placements */

static int
placement_ok(uint64_t w)
{
    if (w == GRIT_PLACEMENT_UNSPECIFIED) {
        return 1;
    }
    switch ((unsigned)(w >> 60)) {
    case 0x1:
        return w == GRIT_P_ROW_MAJOR || w == GRIT_P_COL_MAJOR || w == GRIT_P_SWIZZLE_128X4B
            || w == GRIT_P_TILE_16X16 || w == GRIT_P_BLOCK_AOS || w == GRIT_P_LINEAR_META
            || w == GRIT_P_META_M16N8K32 || w == GRIT_P_PACK_K4_12B;
    case 0x8:
    case 0xF:
        return 1;
    default:
        return 0;
    }
}

static grit_status_t
step3_placement(const grit_desc_t *d, grit_detail_t *det)
{
    const struct {
        const char *name;
        uint64_t w;
    } p[3] = {{"placement_data", d->placement_data}, {"placement_scale", d->placement_scale},
              {"placement_meta", d->placement_meta}};
    char a[24];
    for (int i = 0; i < 3; i++) {
        if (!placement_ok(p[i].w)) {
            unsigned cls = (unsigned)(p[i].w >> 60);
            snprintf(a, sizeof a, "0x%016llx", (unsigned long long)p[i].w);
            return grit_fail(det, GRIT_PLACEMENT_UNKNOWN, 3, -1, p[i].name, NULL, a,
                             "PlacementUnknown: %s = %s: %s%X%s.", p[i].name, a,
                             cls == 1 ? "class 0x" : "class 0x", cls,
                             cls == 1 ? " but not in the registry" : " is not a v1 placement class");
        }
    }
    int aux = (d->flags & (GRIT_F_SPARSE | GRIT_F_HAS_ZP)) != 0;
    if (aux != (d->placement_meta != GRIT_PLACEMENT_UNSPECIFIED)) {
        snprintf(a, sizeof a, "0x%016llx", (unsigned long long)d->placement_meta);
        return grit_fail(det, GRIT_PLACEMENT_UNKNOWN, 3, -1, "placement_meta",
                         aux ? "non-zero" : "0x0000000000000000", a,
                         aux ? "PlacementUnknown: an aux plane is declared (SPARSE or HAS_ZP) "
                               "but placement_meta is UNSPECIFIED."
                             : "PlacementUnknown: placement_meta is %s but no aux plane is "
                               "declared.", a);
    }
    return GRIT_OK;
}

/* ------------------------------------------------------------------------
 * step 4: the size equations */

/* ceil(count * bits / 8) without overflow; SIZE_HUGE past int64 */
static uint64_t
ceil_bytes(uint64_t count, uint64_t bits)
{
    if (count == 0 || bits == 0) {
        return 0;
    }
    uint64_t q = count / 8, r = count % 8;          /* count·bits/8 = q·bits + r·bits/8 */
    if (q > (uint64_t)I64_MAX / bits) {
        return SIZE_HUGE;
    }
    uint64_t v = q * bits + (r * bits + 7) / 8;
    return v > (uint64_t)I64_MAX ? SIZE_HUGE : v;
}

static unsigned
cw(unsigned word, int pad8)
{
    unsigned w = fmt_w(word);
    return pad8 && w <= 8 ? 8 : w;
}

static grit_status_t
size_bad(grit_detail_t *det, const char *field, const char *expected, const char *actual,
         const char *msg)
{
    return grit_fail(det, GRIT_SIZE_MISMATCH, 4, -1, field, expected, actual, "SizeMismatch: %s",
                     msg);
}

/* out: the four sizes (SIZE_HUGE past int64) */
static grit_status_t
sizes(const grit_desc_t *d, int32_t rank, const int64_t *shape, uint64_t out[4],
      grit_detail_t *det)
{
    char a[32], e[48], m[160];
    if (rank < 0 || rank > GRIT_MAXRANK) {
        snprintf(a, sizeof a, "%d", (int)rank);
        snprintf(m, sizeof m, "rank %d exceeds GRIT_MAXRANK = 8.", (int)rank);
        return size_bad(det, "rank", "<= 8", a, m);
    }
    int zero = 0;
    for (int32_t i = 0; i < rank; i++) {
        if (shape[i] < 0) {
            snprintf(a, sizeof a, "%lld", (long long)shape[i]);
            snprintf(m, sizeof m, "shape[%d] = %s is not an extent in [0, 2^63).", (int)i, a);
            return size_bad(det, "shape", NULL, a, m);
        }
        zero |= shape[i] == 0;
    }
    int ga = d->group_axis;
    if (ga < 0 || ga >= rank) {
        snprintf(a, sizeof a, "%d", ga);
        snprintf(e, sizeof e, rank ? "0..%d" : "rank >= 1", (int)rank - 1);
        snprintf(m, sizeof m, "group_axis %d is outside [0, rank=%d).", ga, (int)rank);
        return size_bad(det, "group_axis", e, a, m);
    }
    uint64_t numel = 1;
    if (zero) {
        numel = 0;
    } else {
        for (int32_t i = 0; i < rank; i++) {
            uint64_t s = (uint64_t)shape[i];
            if (numel > (uint64_t)I64_MAX / s) {
                return size_bad(det, "shape", NULL, ">= 2^63", "numel overflows int64.");
            }
            numel *= s;
        }
    }
    uint64_t k0 = d->k0, gax = (uint64_t)shape[ga];
    if (k0 == 0) {
        return size_bad(det, "k0", NULL, "0", "k0 = 0: a group must hold at least one element.");
    }
    if (gax % k0) {
        snprintf(a, sizeof a, "%llu", (unsigned long long)gax);
        snprintf(e, sizeof e, "multiple of %u", (unsigned)k0);
        snprintf(m, sizeof m, "shape[%d] = %s is not a multiple of k0 = %u.", ga, a, (unsigned)k0);
        return size_bad(det, "shape", e, a, m);
    }
    int sparse = (d->flags & GRIT_F_SPARSE) != 0;
    uint64_t nnz = numel;
    if (sparse) {
        uint64_t sm = d->sp_m;
        if (sm == 0) {
            return size_bad(det, "sp_m", NULL, "0", "SPARSE with sp_m = 0.");
        }
        if (gax % sm) {
            snprintf(a, sizeof a, "%llu", (unsigned long long)gax);
            snprintf(e, sizeof e, "multiple of %u", (unsigned)sm);
            snprintf(m, sizeof m, "shape[%d] = %s is not a multiple of sp_m = %u.", ga, a,
                     (unsigned)sm);
            return size_bad(det, "shape", e, a, m);
        }
        nnz = (d->sp_n && numel / sm > (uint64_t)I64_MAX / d->sp_n) ? SIZE_HUGE
                                                                     : numel / sm * d->sp_n;
    }
    uint64_t g0 = numel / k0, g1 = 0;
    if (d->n_levels == 2) {
        if (d->k1 == 0) {
            g1 = 1;
        } else if (g0 % d->k1) {
            snprintf(a, sizeof a, "%u", (unsigned)d->k1);
            snprintf(e, sizeof e, "divides %llu", (unsigned long long)g0);
            snprintf(m, sizeof m, "n_groups0 = %llu is not a multiple of k1 = %u.",
                     (unsigned long long)g0, (unsigned)d->k1);
            return size_bad(det, "k1", e, a, m);
        } else {
            g1 = g0 / d->k1;
        }
    }
    int pad8 = d->container == GRIT_CT_PAD8;
    out[0] = nnz == SIZE_HUGE ? SIZE_HUGE : ceil_bytes(nnz, cw(d->elem, pad8));
    out[1] = ceil_bytes(g0, cw(d->scale0, 1));
    out[2] = d->n_levels == 2
           ? ceil_bytes(g1, (uint64_t)((d->flags & GRIT_F_ZP_L1SCALED) ? 2 : 1) * fmt_w(d->scale1))
           : 0;
    if (sparse) {
        unsigned mb = d->sp_meta_fmt == GRIT_SPMETA_U2 ? 2 : d->sp_meta_fmt == GRIT_SPMETA_U4 ? 4 : 0;
        if (mb == 0) {
            snprintf(a, sizeof a, "%u", (unsigned)d->sp_meta_fmt);
            snprintf(m, sizeof m, "SPARSE with sp_meta_fmt = %s (not U2 or U4).", a);
            return size_bad(det, "sp_meta_fmt", NULL, a, m);
        }
        out[3] = ceil_bytes(numel / d->sp_m, (uint64_t)d->sp_n * mb);
    } else if (d->flags & GRIT_F_HAS_ZP) {
        out[3] = ceil_bytes(g0, cw(d->zp_fmt, 1));
    } else {
        out[3] = 0;
    }
    /* PACK_K4_12B (grit/placement/stages.py PackK4.size_rule): 12 scale0
     * bytes per super-block and no aux bytes, where the pack applies */
    if (d->placement_scale == GRIT_P_PACK_K4_12B && d->placement_meta == GRIT_P_PACK_K4_12B
        && d->n_levels == 2 && d->k1 == 8 && (d->flags & GRIT_F_HAS_ZP)
        && (d->flags & GRIT_F_ZP_L1SCALED) && d->scale0 == GRIT_FMT_U6
        && d->zp_fmt == GRIT_FMT_U6) {
        out[1] = g1 > (uint64_t)I64_MAX / 12 ? SIZE_HUGE : g1 * 12;
        out[3] = 0;
    }
    /* F_INTERLEAVED (Interleaved.size_rule): the data plane carries all four */
    if (d->flags & GRIT_F_INTERLEAVED) {
        uint64_t sum = 0;
        for (int i = 0; i < 4; i++) {
            sum = (out[i] == SIZE_HUGE || sum + out[i] > (uint64_t)I64_MAX) ? SIZE_HUGE
                                                                           : sum + out[i];
            if (sum == SIZE_HUGE) {
                break;
            }
        }
        out[0] = sum;
        out[1] = out[2] = out[3] = 0;
    }
    return GRIT_OK;
}

grit_status_t
grit_plane_sizes(const grit_desc_t *d, int32_t rank, const int64_t *shape, int64_t out_bytes[4],
                 grit_detail_t *det)
{
    uint64_t s[4];
    grit_status_t st = sizes(d, rank, shape, s, det);
    if (st != GRIT_OK) {
        return st;
    }
    for (int i = 0; i < 4; i++) {
        out_bytes[i] = s[i] == SIZE_HUGE ? -1 : (int64_t)s[i];
    }
    return grit_ok(det);
}

static const char *const PLANE[4] = {"data", "scale0", "scale1", "aux"};

static grit_status_t
step4_sizes(const grit_view_t *v, grit_detail_t *det)
{
    uint64_t want[4];
    grit_status_t st = sizes(&v->d, v->rank, v->shape, want, det);
    if (st != GRIT_OK) {
        return st;
    }
    for (int i = 0; i < 4; i++) {
        int64_t got = v->plane_bytes[i];
        if (got < 0 || (uint64_t)got != want[i]) {
            char e[32], a[32];
            if (want[i] == SIZE_HUGE) {
                snprintf(e, sizeof e, ">= 2^63");
            } else {
                snprintf(e, sizeof e, "%llu", (unsigned long long)want[i]);
            }
            snprintf(a, sizeof a, "%lld", (long long)got);
            return grit_fail(det, GRIT_SIZE_MISMATCH, 4, i, PLANE[i], e, a,
                             "SizeMismatch: %s plane is %s bytes; descriptor requires %s.",
                             PLANE[i], a, e);
        }
    }
    return GRIT_OK;
}

/* ------------------------------------------------------------------------
 * step 5: content */

static int
digest_eq(const grit_view_t *v, const uint8_t want[16], char got_hex[33])
{
    uint8_t got[16];
    grit_digest(v, got);
    for (int i = 0; i < 16; i++) {
        snprintf(got_hex + 2 * i, 3, "%02x", got[i]);
    }
    return memcmp(got, want, 16) == 0;
}

/* *note: why a content check could not run (the check still passes, and
 * says so in its message, as grit/check.py's CheckReport.unverified) */
static grit_status_t
step5_content(const grit_view_t *v, const uint8_t *expected_digest, grit_detail_t *det,
              const char **note)
{
    const grit_desc_t *d = &v->d;
    if (expected_digest != NULL) {
        char got[33], want[33];
        if (!digest_eq(v, expected_digest, got)) {
            for (int i = 0; i < 16; i++) {
                snprintf(want + 2 * i, 3, "%02x", expected_digest[i]);
            }
            return grit_fail(det, GRIT_DIGEST_MISMATCH, 5, -1, "digest", want, got,
                             "DigestMismatch: plane contents do not hash to the expected "
                             "digest.");
        }
    }
    if ((d->flags & GRIT_F_SPARSE) && d->sp_order == GRIT_SPORDER_ASC_LSB) {
        /* the aux plane as it is: every non-interleaving placement permutes
         * whole quads; opaque metadata and an interleaved data plane are not
         * read here (grit/check.py _meta_for_content_check: not verified) */
        if ((unsigned)(d->placement_meta >> 60) == 0xF) {
            *note = "Ok; level 2: the SPORDER_ASC_LSB metadata order (§7.4) was not verified: "
                    "placement_meta is opaque (the vendor's order)";
            return GRIT_OK;
        }
        if (d->flags & GRIT_F_INTERLEAVED) {
            *note = "Ok; level 2: the SPORDER_ASC_LSB metadata order (§7.4) was not verified: "
                    "the metadata travels inside the interleaved data plane, which libgrit "
                    "does not take apart";
            return GRIT_OK;
        }
        const uint8_t *meta = (const uint8_t *)v->plane[3];
        unsigned bits = d->sp_meta_fmt == GRIT_SPMETA_U2 ? 2 : 4, n = d->sp_n, m = d->sp_m;
        uint64_t numel = 1;
        for (int32_t i = 0; i < v->rank; i++) {
            numel *= (uint64_t)v->shape[i];         /* step 4 proved it fits */
        }
        uint64_t quads = numel / m;
        if (meta == NULL && v->plane_bytes[3] > 0) {
            return grit_fail(det, GRIT_DIGEST_MISMATCH, 5, 3, "aux", "the aux plane", "NULL",
                             "DigestMismatch: the aux plane pointer is NULL; level 2 reads the "
                             "sparse metadata (§7.4).");
        }
        for (uint64_t q = 0; q < quads; q++) {
            int prev = -1;
            for (unsigned j = 0; j < n; j++) {
                uint64_t bit = (q * n + j) * bits;
                unsigned idx = (meta[bit / 8] >> (bit % 8)) & ((1u << bits) - 1);
                if ((int)idx <= prev || idx >= m) {
                    char a[80], e[48];
                    int off = snprintf(a, sizeof a, "[");
                    for (unsigned t = 0; t < n && off < (int)sizeof a - 8; t++) {
                        uint64_t b2 = (q * n + t) * bits;
                        off += snprintf(a + off, sizeof a - (size_t)off, t ? ", %u" : "%u",
                                        (meta[b2 / 8] >> (b2 % 8)) & ((1u << bits) - 1));
                    }
                    snprintf(a + off, sizeof a - (size_t)off, "]");
                    snprintf(e, sizeof e, "strictly increasing, each < %u", m);
                    return grit_fail(det, GRIT_DIGEST_MISMATCH, 5, 3, "aux", e, a,
                                     "DigestMismatch: sparse metadata of quad %llu is %s, not "
                                     "strictly increasing indices < %u (SPORDER_ASC_LSB, §7.4).",
                                     (unsigned long long)q, a, m);
                }
                prev = (int)idx;
            }
        }
    }
    return GRIT_OK;
}

/* ------------------------------------------------------------------------ */

grit_status_t
grit_check_digest(const grit_view_t *v, int level, const uint8_t expected_digest[16],
                  grit_detail_t *det)
{
    grit_status_t st;
    if (level <= 0) {
        return grit_ok(det);
    }
    if ((st = step1_frame(&v->d, det)) != GRIT_OK || (st = step2_grade(&v->d, det)) != GRIT_OK
        || (st = step3_placement(&v->d, det)) != GRIT_OK || (st = step4_sizes(v, det)) != GRIT_OK) {
        return st;
    }
    const char *note = NULL;
    if (level >= 2 && (st = step5_content(v, expected_digest, det, &note)) != GRIT_OK) {
        return st;
    }
    grit_ok(det);
    if (note != NULL && det != NULL) {
        copy_str(det->message, sizeof det->message, note);
    }
    return GRIT_OK;
}

grit_status_t
grit_check(const grit_view_t *v, int level, grit_detail_t *det)
{
    return grit_check_digest(v, level, NULL, det);
}
