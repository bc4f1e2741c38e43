/*
 * libFuzzer target on libgrit's boundary (§14): grit_check at levels 0-2,
 * grit_gid, grit_plane_sizes, grit_register_grade and grit_base32_parse,
 * and, for a view that passes level 2, decode and encode through the
 * general codec and through grit_decode / grit_encode (equal results),
 * built with -fsanitize=fuzzer,address,undefined (scripts/fuzz_c.sh).
 *
 * Input: byte 0 picks the entry (0x67 'g': the rest is a grade string to
 * register; 0x6C 'l': a layout expression to register; 0x62 'b': the rest
 * is a base32 string; else a check case):
 *   [0]        level (low 2 bits: 0, 1, 2, 3 -> level 0..3)
 *   [1, 65)    the 64 descriptor bytes
 *   [65]       rank, as int8 (any value, -128..127)
 *   then       min(rank, 8) extents as raw int64 LE, 4 plane_bytes as raw int64 LE
 *   rest       plane contents (level >= 2)
 * At levels 0-1 every plane pointer is an address that faults if read: §14
 * says level 1 never dereferences one.  At level 2 each plane_bytes is cut
 * to what the input holds and the plane is a heap copy of exactly that many
 * bytes, so any read past a plane is an AddressSanitizer report.
 *
 * GRIT_FUZZ_GRADES names a file of canonical grade strings, one a line,
 * registered at start so that frames beyond the six built-in grades are
 * reachable; GRIT_FUZZ_LAYOUTS one of layout expressions, so that hashed
 * words resolve.
 */
#include "grit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* how often the codec was reached, printed at exit */
static unsigned long n_decoded = 0, n_encoded = 0, n_refused = 0;

static void
report(void)
{
    fprintf(stderr, "fuzz_check codec: %lu views decoded, %lu encoded, %lu encodes refused\n",
            n_decoded, n_encoded, n_refused);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    atexit(report);
    for (int layouts = 0; layouts < 2; layouts++) {
        const char *path = getenv(layouts ? "GRIT_FUZZ_LAYOUTS" : "GRIT_FUZZ_GRADES");
        FILE *f = path ? fopen(path, "r") : NULL;
        char line[4096];
        while (f != NULL && fgets(line, sizeof line, f) != NULL) {
            size_t n = strcspn(line, "\r\n");
            grit_detail_t det;
            grit_status_t st = layouts ? grit_register_layout(line, n, NULL, &det)
                                       : grit_register_grade(line, n, NULL, &det);
            if (st != GRIT_OK) {
                fprintf(stderr, "not registered: %.*s: %s\n", (int)n, line, det.message);
            }
        }
        if (f != NULL) {
            fclose(f);
        }
    }
    return 0;
}

static int64_t
ld64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return (int64_t)v;
}

static void
must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "contract broken: %s\n", what);
        abort();
    }
}

/* A view that passed level 2 (its planes are exact-size heap copies):
 * decode through the general codec and through grit_decode (the same
 * bits), then encode the decoded values back through both (the same
 * planes, or the same refusal). */
static void
codec(grit_view_t *v)
{
    uint64_t numel = 1;
    for (int32_t i = 0; i < v->rank; i++) {
        numel *= (uint64_t)v->shape[i];
    }
    if (numel > (1u << 12)) {
        return;
    }
    size_t n = (size_t)numel, nb = (n ? n : 1) * sizeof(float);
    float *a = (float *)malloc(nb), *b = (float *)malloc(nb);
    grit_detail_t det;
    grit_status_t s1 = grit_decode_general(v, a, n, &det);
    must(s1 == GRIT_OK || s1 == GRIT_PLACEMENT_UNKNOWN, "decode: Ok or a placement refused");
    grit_status_t s2 = grit_decode(v, b, n, 1, &det);
    must(s1 == s2 && (s1 != GRIT_OK || memcmp(a, b, n * sizeof(float)) == 0),
         "grit_decode gives the general codec's bits");
    if (s1 == GRIT_OK) {
        n_decoded++;
        uint8_t *pa[4], *pb[4];
        grit_view_t va = *v, vb = *v;
        for (int i = 0; i < 4; i++) {
            size_t k = (size_t)(v->plane_bytes[i] > 0 ? v->plane_bytes[i] : 1);
            pa[i] = (uint8_t *)malloc(k);
            pb[i] = (uint8_t *)malloc(k);
            va.plane[i] = v->plane_bytes[i] > 0 ? pa[i] : NULL;
            vb.plane[i] = v->plane_bytes[i] > 0 ? pb[i] : NULL;
        }
        grit_status_t e1 = grit_encode_general(&va, a, n, &det);
        must(e1 == GRIT_OK || e1 == GRIT_GRADE_UNKNOWN, "encode: Ok or the grade refused");
        grit_status_t e2 = grit_encode(&vb, a, n, 1, &det);
        must(e1 == e2, "grit_encode refuses what the general codec refuses");
        n_encoded += e1 == GRIT_OK;
        n_refused += e1 != GRIT_OK;
        for (int i = 0; i < 4 && e1 == GRIT_OK; i++) {
            must(v->plane_bytes[i] <= 0
                 || memcmp(pa[i], pb[i], (size_t)v->plane_bytes[i]) == 0,
                 "grit_encode writes the general codec's planes");
        }
        for (int i = 0; i < 4; i++) {
            free(pa[i]);
            free(pb[i]);
        }
    }
    free(a);
    free(b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    grit_detail_t det;
    if (size >= 1 && data[0] == 'g') {
        uint64_t id;
        grit_status_t st = grit_register_grade((const char *)data + 1, size - 1, &id, &det);
        must(st == GRIT_OK || st == GRIT_GRADE_UNKNOWN, "register: one of two statuses");
        if (st == GRIT_OK) {
            const char *c = grit_grade_canonical(id);
            must(c != NULL && strlen(c) == size - 1 && memcmp(c, data + 1, size - 1) == 0,
                 "a registered grade is found under its id");
        }
        return 0;
    }
    if (size >= 1 && data[0] == 'l') {
        uint64_t w;
        grit_status_t st = grit_register_layout((const char *)data + 1, size - 1, &w, &det);
        must(st == GRIT_OK || st == GRIT_PLACEMENT_UNKNOWN, "register_layout: two statuses");
        if (st == GRIT_OK) {
            const char *t = grit_layout_expression(w);
            must(t != NULL && strlen(t) == size - 1 && memcmp(t, data + 1, size - 1) == 0,
                 "a registered layout is found under its word");
        }
        return 0;
    }
    if (size >= 1 && data[0] == 'b') {
        uint8_t gid[16];
        char enc[27];
        if (grit_base32_parse((const char *)data + 1, size - 1, gid) == 0) {
            grit_base32_encode(gid, enc);
            must(grit_base32_parse(enc, 26, gid) == 0, "base32 round trip");
        }
        return 0;
    }
    if (size < 66) {
        return 0;
    }
    int level = data[0] & 3;
    grit_view_t v;
    memset(&v, 0, sizeof v);
    grit_desc_from_bytes(data + 1, &v.d);
    v.rank = (int8_t)data[65];
    size_t off = 66;
    int nshape = v.rank < 0 ? 0 : v.rank > GRIT_MAXRANK ? GRIT_MAXRANK : v.rank;
    for (int i = 0; i < nshape; i++) {
        if (off + 8 > size) {
            return 0;
        }
        v.shape[i] = ld64(data + off);
        off += 8;
    }
    for (int i = 0; i < 4; i++) {
        if (off + 8 > size) {
            return 0;
        }
        v.plane_bytes[i] = ld64(data + off);
        off += 8;
    }
    uint8_t *copies[4] = {NULL, NULL, NULL, NULL};
    if (level >= 2) {
        for (int i = 0; i < 4; i++) {
            size_t left = size - off, want = (size_t)(v.plane_bytes[i] & 0xFFFF);
            size_t n = want < left ? want : left;
            v.plane_bytes[i] = (int64_t)n;
            if (n) {
                copies[i] = (uint8_t *)malloc(n);
                memcpy(copies[i], data + off, n);
                v.plane[i] = copies[i];
                off += n;
            }
        }
    } else {
        for (int i = 0; i < 4; i++) {
            v.plane[i] = (void *)(uintptr_t)(16 + 8 * i);   /* faults if read */
        }
    }
    memset(&det, 0xA5, sizeof det);
    grit_status_t st = grit_check(&v, level, &det);
    must(st >= GRIT_OK && st <= GRIT_DIGEST_MISMATCH, "exactly one of the five statuses");
    must(det.status == st, "detail carries the status");
    must(memchr(det.message, '\0', sizeof det.message) != NULL
         && memchr(det.field, '\0', sizeof det.field) != NULL
         && memchr(det.expected, '\0', sizeof det.expected) != NULL
         && memchr(det.actual, '\0', sizeof det.actual) != NULL, "strings are terminated");
    must(st == GRIT_OK ? det.step == 0 : (det.step >= 1 && det.step <= 5), "step");
    must(level >= 1 || st == GRIT_OK, "level 0 reads nothing");
    int64_t sizes[4];
    (void)grit_plane_sizes(&v.d, v.rank, v.shape, sizes, &det);
    uint8_t gid[16];
    (void)grit_gid(&v, gid, &det);
    if (level >= 2) {
        uint8_t dig[16];
        grit_digest(&v, dig);
        must(grit_check_digest(&v, 2, dig, &det) != GRIT_DIGEST_MISMATCH
             || det.field[0] == 'a', "the planes' own digest matches");
    }
    if (level >= 2 && st == GRIT_OK) {
        codec(&v);
    }
    for (int i = 0; i < 4; i++) {
        free(copies[i]);
    }
    return 0;
}
