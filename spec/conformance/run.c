/*
 * The conformance suite (§15) against libgrit: reads the line form of
 * spec/conformance/vectors.json (to_lines.py writes it) and compares, in C,
 * every field libgrit can produce:
 *
 *   grade     registers the grade's canonical string; its grade_id
 *   vec       grit_check levels 1 and 2 (with the expected digest) pass;
 *             digest, gid, gid_base32 and its parse; decode (the decoded
 *             bits) and encode (the payload bytes), through grit_decode /
 *             grit_encode and again through the general codec alone, for
 *             every grade
 *   neg       grit_check at the vector's level gives expected_error
 *   canon / noncanon / reject / distinct
 *             grade_id of canonical strings; the registry takes canonical
 *             strings only and refuses every rejected spelling
 *   gid       gid and gid_base32 of a descriptor and shape
 *   b32*      base32 encode, accepted aliases, rejected strings
 *
 * Prints one line per difference and a summary; exits 1 on any difference.
 *
 *   cc -std=c99 -I grit/include spec/conformance/run.c -Lgrit/lib -lgrit -o run
 *   python spec/conformance/to_lines.py | ./run
 */
#include "grit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0, checks = 0, builtin = 0, vectors = 0;

static void
fail(const char *name, const char *what, const char *detail)
{
    failures++;
    printf("FAIL %s: %s%s%s\n", name, what, detail ? ": " : "", detail ? detail : "");
}

#define EXPECT(cond, name, what, detail) \
    do { checks++; if (!(cond)) fail(name, what, detail); } while (0)

/* ------------------------------------------------------------------------
 * tokens */

static char *save;

static char *
tok(void)
{
    char *t = strtok_r(NULL, " \n", &save);
    return t ? t : (char *)"";
}

static int
hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* hex -> bytes (malloc'd); "-" is empty; *n its length */
static uint8_t *
unhex(const char *h, size_t *n)
{
    size_t len = strcmp(h, "-") == 0 ? 0 : strlen(h) / 2;
    uint8_t *b = (uint8_t *)malloc(len ? len : 1);
    for (size_t i = 0; i < len; i++) {
        b[i] = (uint8_t)(hexval(h[2 * i]) << 4 | hexval(h[2 * i + 1]));
    }
    *n = len;
    return b;
}

static void
tohex(const uint8_t *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        sprintf(out + 2 * i, "%02x", b[i]);
    }
    out[2 * n] = '\0';
}

static uint32_t
bits_of(const char *h)
{
    return (uint32_t)strtoul(h, NULL, 16);
}

static float
f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* desc, rank and shape, plane sizes and payload into a view; returns the
 * payload buffer (free it) */
static uint8_t *
read_view(grit_view_t *v, const char *name)
{
    memset(v, 0, sizeof *v);
    size_t n;
    uint8_t *d = unhex(tok(), &n);
    if (n != 64) {
        fail(name, "descriptor is not 64 bytes", NULL);
    }
    grit_desc_from_bytes(d, &v->d);
    free(d);
    int rank = atoi(tok());
    v->rank = rank;
    for (int i = 0; i < rank; i++) {
        long long s = strtoll(tok(), NULL, 10);
        if (i < GRIT_MAXRANK) {
            v->shape[i] = s;
        }
    }
    for (int i = 0; i < 4; i++) {
        v->plane_bytes[i] = strtoll(tok(), NULL, 10);
    }
    uint8_t *payload = unhex(tok(), &n);
    size_t off = 0;
    for (int i = 0; i < 4; i++) {
        int64_t b = v->plane_bytes[i];
        if (b > 0 && off + (size_t)b <= n) {
            v->plane[i] = payload + off;
            off += (size_t)b;
        }
    }
    return payload;
}

/* ------------------------------------------------------------------------
 * records */

static int
is_builtin(const char *grade)
{
    static const char *const six[] = {"GRADE_MXFP4", "GRADE_MXFP4_RNE", "GRADE_Q4KS",
                                      "GRADE_NVF4", "GRADE_NVF4_RTZ", "GRADE_I8S24"};
    for (int i = 0; i < 6; i++) {
        if (strcmp(grade, six[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

static void
rec_grade(void)
{
    char *name = tok();
    uint64_t id = strtoull(tok(), NULL, 16), got = 0;
    char *canon = tok();
    grit_detail_t det;
    grit_status_t st = grit_register_grade(canon, strlen(canon), &got, &det);
    EXPECT(st == GRIT_OK, name, "grit_register_grade", det.message);
    EXPECT(got == id && grit_grade_id(canon, strlen(canon)) == id, name, "grade_id", canon);
}

static void
rec_vec(void)
{
    char name[256], grade[64], b32[32], msg[600];
    vectors++;
    snprintf(name, sizeof name, "%s", tok());
    snprintf(grade, sizeof grade, "%s", tok());
    grit_view_t v;
    uint8_t *payload = read_view(&v, name);
    size_t n;
    uint8_t *want_digest = unhex(tok(), &n), *want_gid = unhex(tok(), &n);
    snprintf(b32, sizeof b32, "%s", tok());
    size_t n_in = (size_t)atol(tok());
    float *x = (float *)malloc((n_in ? n_in : 1) * sizeof(float));
    for (size_t i = 0; i < n_in; i++) {
        x[i] = f32_of(bits_of(tok()));
    }
    size_t n_dec = (size_t)atol(tok());
    uint32_t *want_bits = (uint32_t *)malloc((n_dec ? n_dec : 1) * sizeof(uint32_t));
    for (size_t i = 0; i < n_dec; i++) {
        want_bits[i] = bits_of(tok());
    }

    grit_detail_t det;
    grit_status_t st = grit_check(&v, 1, &det);
    EXPECT(st == GRIT_OK, name, "grit_check level 1", det.message);
    st = grit_check_digest(&v, 2, want_digest, &det);
    EXPECT(st == GRIT_OK, name, "grit_check level 2 with the digest", det.message);
    EXPECT(det.status == GRIT_OK && det.step == 0 && det.plane == -1, name, "detail of Ok", NULL);

    uint8_t got[16];
    char hex[33], enc[27];
    grit_digest(&v, got);
    tohex(got, 16, hex);
    EXPECT(memcmp(got, want_digest, 16) == 0, name, "digest", hex);
    st = grit_gid(&v, got, &det);
    tohex(got, 16, hex);
    EXPECT(st == GRIT_OK && memcmp(got, want_gid, 16) == 0, name, "gid", hex);
    grit_base32_encode(got, enc);
    EXPECT(strcmp(enc, b32) == 0, name, "gid_base32", enc);
    EXPECT(grit_base32_parse(b32, strlen(b32), got) == 0 && memcmp(got, want_gid, 16) == 0,
           name, "base32 parse", b32);

    /* decode and encode, through grit_decode / grit_encode (the kernels for
     * the six grades of Appendix A) and through the general codec alone:
     * elements in lin order in the library, C order here */
    int axis = v.d.group_axis;
    float *lin = (float *)malloc((n_dec ? n_dec : 1) * sizeof(float));
    float *out = (float *)malloc((n_dec ? n_dec : 1) * sizeof(float));
    if (is_builtin(grade)) {
        builtin++;
    }
    for (int general = 0; general < 2; general++) {
        const char *path = general ? " (general codec)" : "";
        char what[64];
        memset(lin, 0xA5, (n_dec ? n_dec : 1) * sizeof(float));
        st = general ? grit_decode_general(&v, lin, n_dec, &det)
                     : grit_decode(&v, lin, n_dec, 1, &det);
        snprintf(what, sizeof what, "grit_decode%s", path);
        EXPECT(st == GRIT_OK, name, what, det.message);
        if (st == GRIT_OK && grit_lin_to_c(lin, out, v.rank, v.shape, axis) == 0) {
            snprintf(what, sizeof what, "decoded bits%s", path);
            for (size_t i = 0; i < n_dec; i++) {
                uint32_t b;
                memcpy(&b, &out[i], 4);
                if (b != want_bits[i]) {
                    snprintf(msg, sizeof msg, "element %zu is %08x, expected %08x", i,
                             (unsigned)b, (unsigned)want_bits[i]);
                    EXPECT(0, name, what, msg);
                    break;
                }
            }
            checks++;
        }
        /* encode into fresh planes of the same sizes, filled with garbage */
        grit_view_t e = v;
        uint8_t *planes[4];
        for (int i = 0; i < 4; i++) {
            size_t nb = (size_t)(v.plane_bytes[i] > 0 ? v.plane_bytes[i] : 1);
            planes[i] = (uint8_t *)malloc(nb);
            memset(planes[i], 0xA5, nb);
            e.plane[i] = v.plane_bytes[i] > 0 ? planes[i] : NULL;
        }
        if (grit_c_to_lin(x, lin, v.rank, v.shape, axis) == 0) {
            st = general ? grit_encode_general(&e, lin, n_in, &det)
                         : grit_encode(&e, lin, n_in, 2, &det);
            snprintf(what, sizeof what, "grit_encode%s", path);
            EXPECT(st == GRIT_OK, name, what, det.message);
            snprintf(what, sizeof what, "encoded planes%s", path);
            for (int i = 0; i < 4 && st == GRIT_OK; i++) {
                if (v.plane_bytes[i] > 0
                    && memcmp(planes[i], v.plane[i], (size_t)v.plane_bytes[i]) != 0) {
                    snprintf(msg, sizeof msg, "plane %d differs from the payload", i);
                    EXPECT(0, name, what, msg);
                }
            }
            checks++;
        }
        for (int i = 0; i < 4; i++) {
            free(planes[i]);
        }
    }
    free(lin);
    free(out);
    free(x);
    free(want_bits);
    free(want_digest);
    free(want_gid);
    free(payload);
}

static void
rec_neg(void)
{
    char name[256];
    snprintf(name, sizeof name, "%s", tok());
    grit_view_t v;
    uint8_t *payload = read_view(&v, name);
    int level = atoi(tok());
    char *dh = tok();
    size_t n;
    uint8_t *dig = unhex(dh, &n);
    char *want = tok();
    grit_detail_t det;
    memset(&det, 0x5A, sizeof det);                 /* the check must fill every field */
    grit_status_t st = grit_check_digest(&v, level, n == 16 ? dig : NULL, &det);
    char msg[400];
    snprintf(msg, sizeof msg, "got %s (%s)", grit_status_name(st), det.message);
    EXPECT(strcmp(grit_status_name(st), want) == 0, name, "status", msg);
    EXPECT(det.status == st && det.step >= 1 && det.step <= 5 && det.plane >= -1
           && det.plane <= 3 && det.message[0] != '\0'
           && memchr(det.message, '\0', sizeof det.message) != NULL
           && memchr(det.field, '\0', sizeof det.field) != NULL, name, "detail fields", NULL);
    if (st == GRIT_SIZE_MISMATCH && det.step == 4 && det.plane >= 0) {
        static const char *const planes[4] = {"data", "scale0", "scale1", "aux"};
        EXPECT(strcmp(det.field, planes[det.plane]) == 0, name, "detail field of the plane",
               det.field);
    }
    free(dig);
    free(payload);
}

static void
rec_canon(int canonical)
{
    char *name = tok();
    grit_detail_t det;
    if (canonical) {
        uint64_t id = strtoull(tok(), NULL, 16), got = 0;
        char *s = tok();
        grit_status_t st = grit_register_grade(s, strlen(s), &got, &det);
        EXPECT(st == GRIT_OK && got == id, name, "canonical string registers with its id",
               det.message);
    } else {
        size_t n;
        uint8_t *s = unhex(tok(), &n);
        grit_status_t st = grit_register_grade((const char *)s, n, NULL, &det);
        EXPECT(st == GRIT_GRADE_UNKNOWN && det.message[0], name,
               "a non-canonical or rejected spelling is refused", (const char *)NULL);
        free(s);
    }
}

static void
rec_distinct(void)
{
    char *name = tok();
    for (int k = 0; k < 2; k++) {
        uint64_t id = strtoull(tok(), NULL, 16);
        char *s = tok();
        EXPECT(grit_grade_id(s, strlen(s)) == id, name, "grade_id", s);
    }
}

static void
rec_gid(void)
{
    char name[256], b32[32];
    snprintf(name, sizeof name, "%s", tok());
    size_t n;
    uint8_t *d = unhex(tok(), &n);
    grit_view_t v;
    memset(&v, 0, sizeof v);
    grit_desc_from_bytes(d, &v.d);
    v.rank = atoi(tok());
    for (int i = 0; i < v.rank && i < GRIT_MAXRANK; i++) {
        v.shape[i] = strtoll(tok(), NULL, 10);
    }
    uint8_t *want = unhex(tok(), &n), got[16];
    snprintf(b32, sizeof b32, "%s", tok());
    grit_detail_t det;
    char enc[27], hex[33];
    grit_status_t st = grit_gid(&v, got, &det);
    tohex(got, 16, hex);
    EXPECT(st == GRIT_OK && memcmp(got, want, 16) == 0, name, "gid", hex);
    grit_base32_encode(got, enc);
    EXPECT(strcmp(enc, b32) == 0, name, "gid_base32", enc);
    free(d);
    free(want);
}

static void
rec_b32(int kind)
{
    char *name = tok();
    size_t n;
    uint8_t got[16];
    if (kind == 0 || kind == 1) {
        uint8_t *gid = unhex(tok(), &n);
        char *s = tok(), enc[27];
        if (kind == 0) {
            grit_base32_encode(gid, enc);
            EXPECT(strcmp(enc, s) == 0, name, "base32 encode", enc);
        }
        EXPECT(grit_base32_parse(s, strlen(s), got) == 0 && memcmp(got, gid, 16) == 0, name,
               "base32 parse accepts", s);
        free(gid);
    } else {
        char *s = tok();
        EXPECT(grit_base32_parse(s, strlen(s), got) != 0, name, "base32 parse rejects", s);
    }
}

int
main(int argc, char **argv)
{
    FILE *f = argc > 1 ? fopen(argv[1], "rb") : stdin;
    if (f == NULL) {
        perror(argv[1]);
        return 2;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = (char *)malloc(cap);
    for (;;) {
        if (len + 65536 > cap) {
            cap *= 2;
            buf = (char *)realloc(buf, cap);
        }
        size_t r = fread(buf + len, 1, cap - len - 1, f);
        if (r == 0) {
            break;
        }
        len += r;
    }
    buf[len] = '\0';
    int records = 0;
    char *line_save, *line = strtok_r(buf, "\n", &line_save);
    for (; line != NULL; line = strtok_r(NULL, "\n", &line_save)) {
        char *kind = strtok_r(line, " ", &save);
        if (kind == NULL) {
            continue;
        }
        records++;
        if (!strcmp(kind, "grade")) {
            rec_grade();
        } else if (!strcmp(kind, "vec")) {
            rec_vec();
        } else if (!strcmp(kind, "neg")) {
            rec_neg();
        } else if (!strcmp(kind, "canon")) {
            rec_canon(1);
        } else if (!strcmp(kind, "noncanon") || !strcmp(kind, "reject")) {
            rec_canon(0);
        } else if (!strcmp(kind, "distinct")) {
            rec_distinct();
        } else if (!strcmp(kind, "gid")) {
            rec_gid();
        } else if (!strcmp(kind, "b32")) {
            rec_b32(0);
        } else if (!strcmp(kind, "b32accept")) {
            rec_b32(1);
        } else if (!strcmp(kind, "b32reject")) {
            rec_b32(2);
        } else {
            printf("FAIL unknown record kind %s\n", kind);
            failures++;
        }
    }
    free(buf);
    printf("libgrit conformance: %d records, %d comparisons, %d differences; decoded bits "
           "and encoded planes of all %d vectors (%d of the six grades of Appendix A), each "
           "through grit_decode / grit_encode and through the general codec\n",
           records, checks, failures, vectors, builtin);
    return failures ? 1 : 0;
}
