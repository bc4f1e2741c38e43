/* Check one GRIT tensor of a safetensors file with libgrit (docs/c-library.md):
 *   check_tensor model.safetensors blk.0.attn_q.weight
 * Reads the descriptor, shape and grade from __metadata__["__grit__"] and
 * the planes "<name>.grit.<role>" (docs/file-format.md), then runs
 * grit_check at level 2 and prints the status and the gid.  A sketch: the
 * JSON is searched, not parsed. */
#include <grit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *after(const char *s, const char *a, const char *b, const char *c) {
    char key[512];
    snprintf(key, sizeof key, "%s%s%s", a, b, c);
    const char *p = s ? strstr(s, key) : NULL;
    return p ? p + strlen(key) : NULL;
}

int main(int argc, char **argv) {
    FILE *f = argc == 3 ? fopen(argv[1], "rb") : NULL;
    if (!f) { fprintf(stderr, "usage: check_tensor FILE.safetensors TENSOR\n"); return 2; }
    fseek(f, 0, SEEK_END); long size = ftell(f); rewind(f);
    unsigned char *file = malloc((size_t)size + 1);
    if (!file || fread(file, 1, (size_t)size, f) != (size_t)size) return 2;
    unsigned long long hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | file[i];
    char *hdr = (char *)file + 8, *data = hdr + hlen;
    hdr[hlen - 1] = '\0';                  /* the header's closing brace */
    const char *t = after(hdr, "\\\"", argv[2], "\\\":{");
    const char *d = after(t, "\\\"desc\\\":\\\"", "", ""), *s = after(t, "\\\"shape\\\":[", "", "");
    const char *g = after(t, "\\\"grade\\\":\\\"", "", "");
    if (!d || !s || !g) { fprintf(stderr, "%s: no GRIT tensor %s\n", argv[1], argv[2]); return 2; }
    grit_view_t v; memset(&v, 0, sizeof v);
    uint8_t desc[64];
    for (int i = 0; i < 64; i++) sscanf(d + 2 * i, "%2hhx", &desc[i]);
    grit_desc_from_bytes(desc, &v.d);
    for (char *e; *s != ']' && v.rank < GRIT_MAXRANK; s = *e == ',' ? e + 1 : e)
        v.shape[v.rank++] = strtoll(s, &e, 10);
    grit_detail_t det;                     /* a grade the library does not know: register it */
    if (grit_register_grade(g, strcspn(g, "\\"), NULL, &det) != GRIT_OK) { puts(det.message); return 1; }
    static const char *role[4] = {"data", "scale0", "scale1", "aux"};
    for (int i = 0; i < 4; i++) {
        char name[300]; long long a, b;
        snprintf(name, sizeof name, "\"%s.grit.%s\":{", argv[2], role[i]);
        const char *p = after(strstr(hdr, name), "\"data_offsets\":[", "", "");
        if (p && sscanf(p, "%lld,%lld", &a, &b) == 2) { v.plane[i] = data + a; v.plane_bytes[i] = b - a; }
    }
    grit_status_t st = grit_check(&v, 2, &det);
    uint8_t gid[16]; char b32[27];
    if (grit_gid(&v, gid, NULL) == GRIT_OK) grit_base32_encode(gid, b32); else strcpy(b32, "-");
    printf("%s: %s (%s) gid %s\n", argv[2], grit_status_name(st), det.message, b32);
    return st == GRIT_OK ? 0 : 1;
}
