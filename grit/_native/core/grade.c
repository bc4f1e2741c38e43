/*
 * The grade registry (§6.2, §7.3 step 2): the six grades of Appendix A
 * built in, and canonical grade strings registered at run time.  A grade's
 * frame fields come from its canonical string by grit/grade.py's rules
 * (Grade._frame_fields); tests/test_libgrit.py compares the two.
 *
 * Concurrency: registration takes a mutex; lookups take no lock (the
 * index below).  Entries never move or change once published.
 */
#include "lib.h"

#include <stdlib.h>

#define MAX_GRADES (1024 * 1024)

/* ------------------------------------------------------------------------
 * §4.2 keys in canonical order, their domains and defaults */

enum { D_FMT, D_INT, D_SP, D_ENUM };

typedef struct {
    const char *key;
    int domain;
    const char *dflt;               /* NULL: no default (required or structural) */
    const char *const *tokens;      /* D_ENUM: the canonical tokens */
} key_info;

static const char *const T_ZPC[] = {"asis", "minus1", NULL};
static const char *const T_ZPS[] = {"shared", "l1", NULL};
static const char *const T_CT[] = {"dense", "pad8", NULL};
static const char *const T_PO[] = {"lsb", "msb", NULL};
static const char *const T_RND[] = {"rne", "rna", "rtz", "rtp", "rtn", NULL};
static const char *const T_SAT[] = {"satfinite", "satmax", "ovfinf", NULL};
static const char *const T_ESR[] = {"exp2floormaxabs", "exp2ceilmaxabs", "exp2rnemaxabs",
                                    "ratiomaxabs", "affineminmax", NULL};
static const char *const T_SUBN[] = {"preserve", "ftz", "any", NULL};
static const char *const T_ORDER[] = {"seq", "tree", "unspec", NULL};   /* and pairwise<k> */

enum { K_E, K_K0, K_S0, K_K1, K_S1, K_ZP, K_ZPC, K_ZPS, K_SP, K_CT, K_PO, K_ER, K_ES, K_ESR,
       K_ESN, K_DR, K_DS, K_DT, K_AO, K_AP, K_AB, K_AI, K_AN, N_KEYS };

static const key_info KEYS[N_KEYS] = {
    {"e", D_FMT, NULL, NULL}, {"k0", D_INT, NULL, NULL}, {"s0", D_FMT, NULL, NULL},
    {"k1", D_INT, NULL, NULL}, {"s1", D_FMT, NULL, NULL}, {"zp", D_FMT, NULL, NULL},
    {"zpc", D_ENUM, "asis", T_ZPC}, {"zps", D_ENUM, "shared", T_ZPS}, {"sp", D_SP, NULL, NULL},
    {"ct", D_ENUM, "dense", T_CT}, {"po", D_ENUM, "lsb", T_PO},
    {"er", D_ENUM, "rne", T_RND}, {"es", D_ENUM, "satfinite", T_SAT},
    {"esr", D_ENUM, NULL, T_ESR}, {"esn", D_ENUM, "preserve", T_SUBN},
    {"dr", D_ENUM, "rne", T_RND}, {"ds", D_ENUM, "satfinite", T_SAT},
    {"dt", D_FMT, "binary32", NULL},
    {"ao", D_ENUM, "unspec", T_ORDER}, {"ap", D_FMT, "binary32", NULL},
    {"ab", D_FMT, "binary32", NULL}, {"ai", D_FMT, "binary32", NULL},
    {"an", D_ENUM, "any", T_SUBN},
};

/* the registered format tokens (grit/formats.py _REG) */
static const struct {
    const char *name;
    grit_fmt_t word;
} FORMATS[] = {
    {"e2m1", 0x2043}, {"e2m3", 0x2085}, {"e3m2", 0x2065}, {"e4m3", 0x2887}, {"e5m2", 0x3467},
    {"e8m0", 0x4807}, {"binary16", 0x356F}, {"binary32", 0x371F}, {"u2", 0x43E1},
    {"u4", 0x43E3}, {"u6", 0x43E5}, {"u8", 0x43E7}, {"s2", 0x03E1}, {"s4", 0x03E3},
    {"s8", 0x03E7},
};
#define N_FORMATS (sizeof FORMATS / sizeof FORMATS[0])

/* ------------------------------------------------------------------------
 * parsing a canonical string */

typedef struct {
    const char *p;
    size_t n;
} span;

static int
span_is(span s, const char *t)
{
    size_t n = strlen(t);
    return s.n == n && memcmp(s.p, t, n) == 0;
}

/* a canonical decimal: digits, no leading zero (unless "0"), <= 20 digits */
static int
parse_uint(span s, uint64_t max, uint64_t *out)
{
    if (s.n == 0 || s.n > 20 || (s.n > 1 && s.p[0] == '0')) {
        return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] < '0' || s.p[i] > '9') {
            return 0;
        }
        unsigned d = (unsigned)(s.p[i] - '0');
        if (v > (max - d) / 10) {
            return 0;
        }
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

/* a canonical format token: a registered name, or x + 4 lowercase hex
 * digits of a legal word that has no name */
static int
parse_fmt(span s, grit_fmt_t *out)
{
    for (size_t i = 0; i < N_FORMATS; i++) {
        if (span_is(s, FORMATS[i].name)) {
            *out = FORMATS[i].word;
            return 1;
        }
    }
    if (s.n != 5 || s.p[0] != 'x') {
        return 0;
    }
    unsigned w = 0;
    for (size_t i = 1; i < 5; i++) {
        char c = s.p[i];
        unsigned d = (c >= '0' && c <= '9') ? (unsigned)(c - '0')
                   : (c >= 'a' && c <= 'f') ? (unsigned)(c - 'a' + 10) : 16u;
        if (d > 15) {
            return 0;
        }
        w = w * 16 + d;
    }
    for (size_t i = 0; i < N_FORMATS; i++) {
        if (FORMATS[i].word == w) {
            return 0;                               /* has a name: not canonical */
        }
    }
    if (!grit_fmt_valid((grit_fmt_t)w)) {
        return 0;
    }
    *out = (grit_fmt_t)w;
    return 1;
}

/* 1 + the token's index in its domain, or 0 */
static int
parse_enum(int key, span s)
{
    int i = 0;
    for (const char *const *t = KEYS[key].tokens; *t; t++, i++) {
        if (span_is(s, *t)) {
            return i + 1;
        }
    }
    if (key == K_AO && s.n > 8 && memcmp(s.p, "pairwise", 8) == 0) {
        uint64_t k;
        span d = {s.p + 8, s.n - 8};
        return parse_uint(d, UINT64_MAX, &k) && k >= 2 ? i + 1 : 0;
    }
    return 0;
}

/* sp = N:M:meta:order, canonical */
static int
parse_sp(span s, grit_desc_t *f)
{
    span part[4];
    int np = 0;
    size_t start = 0;
    for (size_t i = 0; i <= s.n; i++) {
        if (i == s.n || s.p[i] == ':') {
            if (np == 4) {
                return 0;
            }
            part[np].p = s.p + start;
            part[np].n = i - start;
            np++;
            start = i + 1;
        }
    }
    uint64_t n, m;
    if (np != 4 || !parse_uint(part[0], UINT64_MAX, &n) || !parse_uint(part[1], UINT64_MAX, &m)
        || !(n >= 1 && n < m)) {
        return 0;
    }
    int bits = span_is(part[2], "u2") ? 2 : span_is(part[2], "u4") ? 4 : 0;
    if (bits == 0 || m > (UINT64_C(1) << bits)) {
        return 0;
    }
    int asc = span_is(part[3], "asclsb");
    if (!asc && !span_is(part[3], "unord")) {
        return 0;
    }
    f->sp_n = (uint8_t)n;
    f->sp_m = (uint8_t)m;
    f->sp_meta_fmt = bits == 2 ? GRIT_SPMETA_U2 : GRIT_SPMETA_U4;
    f->sp_order = asc ? GRIT_SPORDER_ASC_LSB : GRIT_SPORDER_UNORDERED;
    f->flags |= GRIT_F_SPARSE;
    return 1;
}

/* 1 and the frame when s is a canonical grade string (§4.4), else 0 and why */
static int
parse_canonical(const char *str, size_t len, grit_desc_t *f, grit_codec_params *cp,
                const char **why)
{
    static const char head[] = "grit1(";
    memset(f, 0, sizeof *f);
    memset(cp, 0, sizeof *cp);
    cp->dt = GRIT_FMT_BINARY32;
    if (len < sizeof head || memcmp(str, head, sizeof head - 1) != 0 || str[len - 1] != ')') {
        *why = "not grit1(key=value,...)";
        return 0;
    }
    span v[N_KEYS];
    int have[N_KEYS] = {0}, last = -1;
    size_t i = sizeof head - 1, end = len - 1;
    if (i == end) {
        *why = "no fields";
        return 0;
    }
    while (i <= end) {
        size_t j = i;
        while (j < end && str[j] != ',') {
            j++;
        }
        size_t eq = i;
        while (eq < j && str[eq] != '=') {
            eq++;
        }
        if (eq == j) {
            *why = "a field is not key=value";
            return 0;
        }
        span key = {str + i, eq - i}, val = {str + eq + 1, j - eq - 1};
        int k = -1;
        for (int q = 0; q < N_KEYS; q++) {
            if (span_is(key, KEYS[q].key)) {
                k = q;
            }
        }
        if (k < 0) {
            *why = "unknown key";
            return 0;
        }
        if (k <= last) {
            *why = "keys are not in the canonical order of §4.2 (or repeat)";
            return 0;
        }
        if (val.n == 0) {
            *why = "empty value";
            return 0;
        }
        last = k;
        have[k] = 1;
        v[k] = val;
        i = j + 1;
    }
    if (!have[K_E] || !have[K_K0] || !have[K_S0] || !have[K_ESR]) {
        *why = "missing a required key (e, k0, s0, esr)";
        return 0;
    }
    if (have[K_K1] != have[K_S1]) {
        *why = "k1 without s1 or s1 without k1";
        return 0;
    }
    if (!have[K_ZP] && (have[K_ZPC] || have[K_ZPS])) {
        *why = "zpc or zps without zp";
        return 0;
    }
    if (have[K_SP] && have[K_ZP]) {
        *why = "sp and zp together (one aux plane, §3.3)";
        return 0;
    }
    for (int k = 0; k < N_KEYS; k++) {
        if (!have[k]) {
            continue;
        }
        if (KEYS[k].dflt != NULL && span_is(v[k], KEYS[k].dflt)) {
            *why = "a field has its default value (canonical form drops it)";
            return 0;
        }
        int ok = 1;
        grit_fmt_t w = 0;
        uint64_t n = 0;
        switch (KEYS[k].domain) {
        case D_FMT:
            ok = parse_fmt(v[k], &w);
            break;
        case D_INT:
            ok = parse_uint(v[k], 0xFFFF, &n) && (k != K_K0 || n >= 1);
            break;
        case D_SP:
            ok = parse_sp(v[k], f);
            break;
        default:
            ok = parse_enum(k, v[k]);
            break;
        }
        uint8_t tok = (uint8_t)(ok > 0 ? ok - 1 : 0);
        if (!ok) {
            *why = "a value is not a canonical token of its key's domain";
            return 0;
        }
        switch (k) {
        case K_E: f->elem = w; break;
        case K_S0: f->scale0 = w; break;
        case K_S1: f->scale1 = w; break;
        case K_ZP: f->zp_fmt = w; break;
        case K_K0: f->k0 = (uint16_t)n; break;
        case K_K1: f->k1 = (uint16_t)n; break;
        case K_ER: cp->er = tok; break;
        case K_ES: cp->es = tok; break;
        case K_ESR: cp->esr = tok; break;
        case K_ESN: cp->esn_ftz = tok == 1; break;
        case K_DR: cp->dr = tok; break;
        case K_DS: cp->ds = tok; break;
        case K_DT: cp->dt = w; break;
        default: break;
        }
    }
    if (have[K_ZPS] && span_is(v[K_ZPS], "l1") && !have[K_S1]) {
        *why = "zps=l1 without a level-1 scale";
        return 0;
    }
    /* grit/grade.py Grade._frame_fields */
    f->n_levels = have[K_S1] ? 2 : 1;
    if (have[K_ZP]) {
        f->flags |= GRIT_F_HAS_ZP;
        if (have[K_ZPC] && span_is(v[K_ZPC], "minus1")) {
            f->flags |= GRIT_F_ZP_MINUS1;
        }
        if (have[K_ZPS] && span_is(v[K_ZPS], "l1")) {
            f->flags |= GRIT_F_ZP_L1SCALED;
        }
    }
    if (have[K_PO] && span_is(v[K_PO], "msb")) {
        f->flags |= GRIT_F_MSB_FIRST;
    }
    f->container = have[K_CT] && span_is(v[K_CT], "pad8") ? GRIT_CT_PAD8 : GRIT_CT_DENSE;
    return 1;
}

/* ------------------------------------------------------------------------
 * the registry */

static const struct {
    const char *canonical;
    int codec, flag;
} BUILTIN[6] = {
    {"grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)", GRIT_K_MXFP4, 0},
    {"grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2rnemaxabs)", GRIT_K_MXFP4, 1},
    {"grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)", GRIT_K_Q4KS, 0},
    {"grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)", GRIT_K_NVF4, 0},
    {"grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,er=rtz,esr=ratiomaxabs)", GRIT_K_NVF4, 1},
    {"grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:asclsb,esr=ratiomaxabs)", GRIT_K_I8S24, 0},
};

/* Entries live in chunks that never move; a hash index (open addressing on
 * the id, entry number + 1 per slot, 0 empty) finds them.  The writer fills
 * an entry, then stores its slot (release); a full-ish index is replaced by
 * one twice the size, published by a pointer store (release), and the old
 * one is kept (readers may still probe it), so lookups take no lock. */
#define CHUNK 1024
#define MAX_CHUNKS (MAX_GRADES / CHUNK)

typedef struct {
    size_t mask;                    /* capacity - 1 */
    uint32_t *slot;
} grade_index;

static grit_grade_entry *chunks[MAX_CHUNKS];
static size_t count = 0;            /* entries written (writer only) */
static grade_index *index_now = NULL;

#if defined(__GNUC__) || defined(__clang__)
#define LOAD_PTR(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#define STORE_PTR(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)
#define LOAD_SLOT(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#define STORE_SLOT(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)
#else
#define LOAD_PTR(p) (p)
#define STORE_PTR(p, v) ((p) = (v))
#define LOAD_SLOT(p) (p)
#define STORE_SLOT(p, v) ((p) = (v))
#endif

#ifndef GRIT_NO_THREADS
static pthread_mutex_t writer = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;
#endif

static grit_grade_entry *
entry(size_t i)
{
    return &chunks[i / CHUNK][i % CHUNK];
}

static size_t
hash_id(uint64_t id)
{
    return (size_t)(id ^ (id >> 29) ^ (id >> 47));   /* ids are FNV-1a: well mixed */
}

/* slot for entry number i (caller holds the writer lock) */
static void
index_put(grade_index *ix, size_t i)
{
    size_t h = hash_id(entry(i)->id) & ix->mask;
    while (ix->slot[h] != 0) {
        h = (h + 1) & ix->mask;
    }
    STORE_SLOT(ix->slot[h], (uint32_t)(i + 1));
}

/* an index with room for one more entry (caller holds the writer lock) */
static grade_index *
index_with_room(void)
{
    grade_index *ix = index_now;
    if (ix != NULL && (count + 1) * 2 <= ix->mask + 1) {
        return ix;
    }
    size_t cap = ix ? 2 * (ix->mask + 1) : 64;
    grade_index *nx = (grade_index *)malloc(sizeof *nx);
    uint32_t *slots = (uint32_t *)calloc(cap, sizeof *slots);
    if (nx == NULL || slots == NULL) {
        free(nx);
        free(slots);
        return NULL;
    }
    nx->mask = cap - 1;
    nx->slot = slots;
    for (size_t i = 0; i < count; i++) {
        index_put(nx, i);
    }
    STORE_PTR(index_now, nx);       /* the old index stays valid for readers */
    return nx;
}

/* append (caller holds the writer lock); 0 when full or out of memory */
static int
append(const char *s, size_t len, const grit_desc_t *f, const grit_codec_params *cp, int codec,
       int flag, int copy)
{
    size_t n = count;
    if (n == MAX_GRADES) {
        return 0;
    }
    if (chunks[n / CHUNK] == NULL) {
        chunks[n / CHUNK] = (grit_grade_entry *)calloc(CHUNK, sizeof(grit_grade_entry));
        if (chunks[n / CHUNK] == NULL) {
            return 0;
        }
    }
    grade_index *ix = index_with_room();
    if (ix == NULL) {
        return 0;
    }
    char *c = NULL;
    if (copy) {
        c = (char *)malloc(len + 1);
        if (c == NULL) {
            return 0;
        }
        memcpy(c, s, len);
        c[len] = '\0';
    }
    grit_grade_entry *e = entry(n);
    e->id = grit_fnv1a64(s, len);
    e->canonical = copy ? c : s;
    e->len = len;
    e->frame = *f;
    e->params = *cp;
    e->codec = codec;
    e->codec_flag = flag;
    count = n + 1;
    index_put(ix, n);               /* publishes the entry */
    return 1;
}

static void
add_builtins(void)
{
    for (int i = 0; i < 6; i++) {
        grit_desc_t f;
        grit_codec_params cp;
        const char *why;
        const char *s = BUILTIN[i].canonical;
        if (parse_canonical(s, strlen(s), &f, &cp, &why)) {
            append(s, strlen(s), &f, &cp, BUILTIN[i].codec, BUILTIN[i].flag, 0);
        }
    }
}

static void
ensure_builtins(void)
{
#ifndef GRIT_NO_THREADS
    pthread_once(&builtin_once, add_builtins);
#else
    static int done = 0;
    if (!done) {
        add_builtins();
        done = 1;
    }
#endif
}

const grit_grade_entry *
grit_lookup_grade(uint64_t id)
{
    ensure_builtins();
    grade_index *ix = LOAD_PTR(index_now);
    if (ix == NULL) {
        return NULL;
    }
    for (size_t h = hash_id(id) & ix->mask;; h = (h + 1) & ix->mask) {
        uint32_t k = LOAD_SLOT(ix->slot[h]);
        if (k == 0) {
            return NULL;
        }
        const grit_grade_entry *e = entry(k - 1);
        if (e->id == id) {
            return e;
        }
    }
}

grit_status_t
grit_register_grade(const char *s, size_t len, uint64_t *out_id, grit_detail_t *det)
{
    grit_desc_t f;
    grit_codec_params cp;
    const char *why = "";
    if (s == NULL || !parse_canonical(s, len, &f, &cp, &why)) {
        return grit_fail(det, GRIT_GRADE_UNKNOWN, 0, -1, "grade", "a canonical grade string",
                         NULL, "GradeUnknown: not a canonical grade string (§4.4): %s.",
                         s == NULL ? "NULL" : why);
    }
    uint64_t id = grit_fnv1a64(s, len);
    if (out_id != NULL) {
        *out_id = id;
    }
    ensure_builtins();
#ifndef GRIT_NO_THREADS
    pthread_mutex_lock(&writer);
#endif
    int ok = 1;
    const grit_grade_entry *have = grit_lookup_grade(id);
    if (have == NULL) {
        ok = append(s, len, &f, &cp, -1, 0, 1);
    } else if (have->len != len || memcmp(have->canonical, s, len) != 0) {
        ok = -1;                                    /* an FNV-1a-64 collision */
    }
#ifndef GRIT_NO_THREADS
    pthread_mutex_unlock(&writer);
#endif
    if (ok == 0) {
        return grit_fail(det, GRIT_GRADE_UNKNOWN, 0, -1, "grade", NULL, NULL,
                         "GradeUnknown: the grade registry is full (%d grades) or out of "
                         "memory.", MAX_GRADES);
    }
    if (ok < 0) {
        return grit_fail(det, GRIT_GRADE_UNKNOWN, 0, -1, "grade_id", NULL, NULL,
                         "GradeUnknown: grade_id 0x%016llX is already another grade's.",
                         (unsigned long long)id);
    }
    return grit_ok(det);
}

const char *
grit_grade_canonical(uint64_t id)
{
    const grit_grade_entry *g = grit_lookup_grade(id);
    return g ? g->canonical : NULL;
}

int
grit_grade_frame(uint64_t id, grit_desc_t *out)
{
    const grit_grade_entry *g = grit_lookup_grade(id);
    if (g == NULL) {
        return 0;
    }
    *out = g->frame;
    return 1;
}
