/*
 * §8-§10 through libgrit: decode / encode of the registered grades into
 * caller buffers, over the core's kernels (decode.c, encode.c), after
 * grit_check level 1; and the lin-order transforms (§3.7).
 */
#include "lib.h"

/* the codec of a view that passed level 1, or a failure */
static grit_status_t
codec_for(const grit_view_t *v, size_t n, const char *what, const grit_grade_entry **out,
          grit_detail_t *det)
{
    grit_status_t st = grit_check(v, 1, det);
    if (st != GRIT_OK) {
        return st;
    }
    if (!grit_core_init()) {
        return grit_fail(det, GRIT_GRADE_UNKNOWN, 0, -1, "grade_id", NULL, NULL,
                         "GradeUnknown: the codec kernels failed their binary32 self-check "
                         "in this build.");
    }
    const grit_grade_entry *g = grit_lookup_grade(v->d.grade_id);
    const grit_desc_t *d = &v->d;
    /* grit.facts.CANONICAL: UNSPECIFIED or ROW_MAJOR data and scales;
     * UNSPECIFIED, ROW_MAJOR or LINEAR_META aux; no meta word without one */
    int aux = (d->flags & (GRIT_F_SPARSE | GRIT_F_HAS_ZP)) != 0;
    uint64_t pm = d->placement_meta;
    int meta_ok = pm == GRIT_PLACEMENT_UNSPECIFIED
                  || (aux && (pm == GRIT_P_ROW_MAJOR || pm == GRIT_P_LINEAR_META));
    int data_ok = d->placement_data == GRIT_P_ROW_MAJOR
                  || d->placement_data == GRIT_PLACEMENT_UNSPECIFIED;
    int scale_ok = d->placement_scale == GRIT_P_ROW_MAJOR
                   || d->placement_scale == GRIT_PLACEMENT_UNSPECIFIED;
    if (!data_ok || !scale_ok || !meta_ok || (d->flags & GRIT_F_INTERLEAVED)) {
        return grit_fail(det, GRIT_PLACEMENT_UNKNOWN, 0, -1, "placement_data", "canonical", NULL,
                         "PlacementUnknown: the codec reads and writes the canonical placement "
                         "only (ROW_MAJOR data and scales, LINEAR_META or ROW_MAJOR aux); "
                         "relayout first (L1).");
    }
    uint64_t numel = 1;
    for (int32_t i = 0; i < v->rank; i++) {
        numel *= (uint64_t)v->shape[i];
    }
    if (numel != (uint64_t)n) {
        char e[24], a[24];
        snprintf(e, sizeof e, "%llu", (unsigned long long)numel);
        snprintf(a, sizeof a, "%llu", (unsigned long long)n);
        return grit_fail(det, GRIT_SIZE_MISMATCH, 0, -1, what, e, a,
                         "SizeMismatch: %s holds %s values; the view has numel = %s.", what, a,
                         e);
    }
    for (int i = 0; i < 4; i++) {
        if (v->plane_bytes[i] > 0 && v->plane[i] == NULL) {
            return grit_fail(det, GRIT_SIZE_MISMATCH, 0, i, "plane", "a buffer", "NULL",
                             "SizeMismatch: plane %d has %lld bytes but a NULL pointer.", i,
                             (long long)v->plane_bytes[i]);
        }
    }
    *out = g;
    return GRIT_OK;
}

static const uint8_t *
plane_or_empty(const grit_view_t *v, int i)
{
    static const uint8_t empty[4] = {0, 0, 0, 0};
    return v->plane_bytes[i] > 0 ? (const uint8_t *)v->plane[i] : empty;
}

/* the kernels serve a built-in grade in the placement they were written
 * for (ROW_MAJOR data and scales) with a binary32 dt; everything else is
 * the general codec (generic.c), which gives the same bits */
static int
use_kernels(const grit_view_t *v, const grit_grade_entry *g, int general)
{
    return !general && g->codec >= 0 && v->d.placement_data == GRIT_P_ROW_MAJOR
           && v->d.placement_scale == GRIT_P_ROW_MAJOR;
}

static grit_status_t
decode_with(const grit_view_t *v, float *out, size_t n_out, int nthreads, int general,
            grit_detail_t *det)
{
    const grit_grade_entry *g;
    grit_status_t st = codec_for(v, n_out, "out", &g, det);
    if (st != GRIT_OK) {
        return st;
    }
    if (!use_kernels(v, g, general)) {
        return grit_generic_decode(v, g, out, n_out, det);
    }
    if (n_out) {
        grit_k_decode(g->codec, plane_or_empty(v, 0), plane_or_empty(v, 1), plane_or_empty(v, 2),
                      plane_or_empty(v, 3), out, n_out, nthreads);
    }
    return grit_ok(det);
}

static grit_status_t
encode_with(const grit_view_t *v, const float *x, size_t n_in, int nthreads, int general,
            grit_detail_t *det)
{
    const grit_grade_entry *g;
    grit_status_t st = codec_for(v, n_in, "x", &g, det);
    if (st != GRIT_OK) {
        return st;
    }
    if (!use_kernels(v, g, general) || n_in == 0) {
        /* numel 0: the kernels write nothing, but a per-tensor scale1
         * (k1 = 0) still has its plane */
        return grit_generic_encode(v, g, x, n_in, det);
    }
    if (n_in) {
        grit_k_encode(g->codec, g->codec_flag, x, n_in, (unsigned char *)v->plane[0],
                      (unsigned char *)v->plane[1], (unsigned char *)v->plane[2],
                      (unsigned char *)v->plane[3], nthreads);
    }
    return grit_ok(det);
}

grit_status_t
grit_decode(const grit_view_t *v, float *out, size_t n_out, int nthreads, grit_detail_t *det)
{
    return decode_with(v, out, n_out, nthreads, 0, det);
}

grit_status_t
grit_encode(const grit_view_t *v, const float *x, size_t n_in, int nthreads, grit_detail_t *det)
{
    return encode_with(v, x, n_in, nthreads, 0, det);
}

grit_status_t
grit_decode_general(const grit_view_t *v, float *out, size_t n_out, grit_detail_t *det)
{
    return decode_with(v, out, n_out, 1, 1, det);
}

grit_status_t
grit_encode_general(const grit_view_t *v, const float *x, size_t n_in, grit_detail_t *det)
{
    return encode_with(v, x, n_in, 1, 1, det);
}

/* ------------------------------------------------------------------------
 * lin order: C order of the array with `axis` moved last.  With
 * outer = prod(shape[:axis]), A = shape[axis], inner = prod(shape[axis+1:]),
 * element (o, a, i) is at C index (o·A + a)·inner + i and at lin index
 * (o·inner + i)·A + a. */

static int
lin_dims(int32_t rank, const int64_t *shape, int axis, size_t *outer, size_t *A, size_t *inner)
{
    if (rank < 1 || rank > GRIT_MAXRANK || axis < 0 || axis >= rank) {
        return -1;
    }
    *outer = 1, *inner = 1;
    for (int i = 0; i < axis; i++) {
        *outer *= (size_t)shape[i];
    }
    for (int i = axis + 1; i < rank; i++) {
        *inner *= (size_t)shape[i];
    }
    *A = (size_t)shape[axis];
    return 0;
}

/* lin[(o·inner + i)·A + a] <-> c[(o·A + a)·inner + i]; to_c picks the direction */
static int
lin_move(const float *from, float *to, int32_t rank, const int64_t *shape, int axis, int to_c)
{
    size_t outer, A, inner;
    if (lin_dims(rank, shape, axis, &outer, &A, &inner) < 0) {
        return -1;
    }
    for (size_t o = 0; o < outer; o++) {
        for (size_t a = 0; a < A; a++) {
            for (size_t i = 0; i < inner; i++) {
                size_t c = (o * A + a) * inner + i, l = (o * inner + i) * A + a;
                if (to_c) {
                    to[c] = from[l];
                } else {
                    to[l] = from[c];
                }
            }
        }
    }
    return 0;
}

int
grit_lin_to_c(const float *lin, float *out, int32_t rank, const int64_t *shape, int axis)
{
    return lin_move(lin, out, rank, shape, axis, 1);
}

int
grit_c_to_lin(const float *in, float *lin, int32_t rank, const int64_t *shape, int axis)
{
    return lin_move(in, lin, rank, shape, axis, 0);
}
