/*
 * Layout expressions (§5.3) in libgrit: a registry of canonical expression
 * texts, so that grit_check resolves class-0x8 words as grit/placement/
 * expr.py does.  The text must be canonical -- what str(grit.parse_layout(t))
 * returns: constructor names as written there, no whitespace, integers
 * without leading zeros, Perm written out, Compose nested to the right,
 * Opaque's blob in lowercase hex -- and legal by expr.py's constructor rules
 * (Tile dims >= 1; Interleave n >= 1, outermost only; Swizzle fields in
 * 0..30 with shift >= bits; Perm a permutation of 0..n-1; Pad >= 1; Opaque
 * vendor [A-Za-z0-9_.-]+; at most 64 constructors deep).  Its word is class
 * 0x8 (0xF when it contains Opaque) over the low 60 bits of FNV-1a-64 of the
 * text.  tests/test_libgrit.py compares acceptance and words with Python on
 * fuzzed texts.
 *
 * The registry is a list published by an atomic pointer store: lookups take
 * no lock, registration takes the writer mutex; entries live as long as the
 * process.  Lookups walk the list: grit_check resolves a word only for an
 * F_INTERLEAVED descriptor with a hashed data word.
 */
#include "lib.h"

#include <stdlib.h>

#define MAX_LAYOUT_DEPTH 64
#define MAX_LAYOUTS 65536
#define PAYLOAD_MASK ((UINT64_C(1) << 60) - 1)

enum { L_ROW, L_COL, L_TILE, L_INTERLEAVE, L_SWIZZLE, L_PERM, L_PAD, L_COMPOSE, L_OPAQUE };

static const char *const NAMES[] = {"RowMajor", "ColMajor", "Tile", "Interleave", "Swizzle",
                                    "Perm", "Pad", "Compose", "Opaque"};

typedef struct {
    const char *s;
    size_t n, i;
    int opaque;
    const char *why;
} lparser;

/* the node kinds the parser returns: the constructor, or -1 on failure */
static int
lfail(lparser *p, const char *why)
{
    if (p->why == NULL) {
        p->why = why;
    }
    return -1;
}

static int
eat(lparser *p, char c)
{
    if (p->i < p->n && p->s[p->i] == c) {
        p->i++;
        return 1;
    }
    return 0;
}

/* a canonical decimal of at most 19 digits (expr.py's parser limit) */
static int
luint(lparser *p, uint64_t *out)
{
    size_t start = p->i;
    uint64_t v = 0;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        if (p->i - start == 19) {
            return 0;
        }
        v = v * 10 + (uint64_t)(p->s[p->i] - '0');
        p->i++;
    }
    size_t len = p->i - start;
    if (len == 0 || (len > 1 && p->s[start] == '0')) {
        return 0;
    }
    *out = v;
    return 1;
}

static int lexpr(lparser *p, int depth);

static int
lperm(lparser *p)
{
    /* the entries, then: each below the count, none twice */
    size_t start = p->i;
    uint64_t count = 0, v, maxv = 0;
    if (!eat(p, '[')) {
        return lfail(p, "Perm needs [p0,...]");
    }
    do {
        if (!luint(p, &v)) {
            return lfail(p, "a Perm entry is not a canonical integer");
        }
        count++;
        maxv = v > maxv ? v : maxv;
    } while (eat(p, ','));
    if (!eat(p, ']')) {
        return lfail(p, "Perm needs a closing ]");
    }
    if (maxv >= count) {
        return lfail(p, "Perm needs a permutation of 0..n-1");
    }
    uint8_t *seen = (uint8_t *)calloc((size_t)count, 1);
    if (seen == NULL) {
        return lfail(p, "out of memory");
    }
    size_t end = p->i;
    p->i = start + 1;
    int ok = 1;
    for (uint64_t k = 0; k < count; k++) {
        (void)luint(p, &v);
        (void)eat(p, ',');
        ok &= !seen[v];
        seen[v] = 1;
    }
    free(seen);
    p->i = end;
    return ok ? L_PERM : lfail(p, "Perm needs a permutation of 0..n-1");
}

static int
lexpr(lparser *p, int depth)
{
    if (depth > MAX_LAYOUT_DEPTH) {
        return lfail(p, "nested deeper than 64 constructors");
    }
    int kind = -1;
    for (int k = 0; k < 9; k++) {
        size_t len = strlen(NAMES[k]);
        if (p->n - p->i >= len && memcmp(p->s + p->i, NAMES[k], len) == 0) {
            size_t after = p->i + len;
            int more = after < p->n && ((p->s[after] >= 'a' && p->s[after] <= 'z')
                                        || (p->s[after] >= 'A' && p->s[after] <= 'Z')
                                        || (p->s[after] >= '0' && p->s[after] <= '9'));
            if (!more) {
                kind = k;
                p->i = after;
                break;
            }
        }
    }
    if (kind < 0) {
        return lfail(p, "expected a constructor name as written canonically");
    }
    if (kind == L_ROW || kind == L_COL) {
        return kind;
    }
    if (!eat(p, '(')) {
        return lfail(p, "expected '('");
    }
    uint64_t a, b, c;
    int inner, second;
    switch (kind) {
    case L_TILE:
        inner = lexpr(p, depth + 1);
        if (inner < 0) {
            return -1;
        }
        if (inner == L_INTERLEAVE) {
            return lfail(p, "Interleave acts on whole planes; it cannot be tiled");
        }
        if (!eat(p, ',') || !eat(p, '[') || !luint(p, &a) || !eat(p, ',') || !luint(p, &b)
            || !eat(p, ']')) {
            return lfail(p, "Tile needs (P,[rows,cols])");
        }
        if (a < 1 || b < 1) {
            return lfail(p, "Tile dims must be two positive integers");
        }
        break;
    case L_INTERLEAVE:
        inner = lexpr(p, depth + 1);
        if (inner < 0) {
            return -1;
        }
        if (inner == L_INTERLEAVE) {
            return lfail(p, "Interleave cannot nest");
        }
        if (!eat(p, ',') || !luint(p, &a)) {
            return lfail(p, "Interleave needs (P,n)");
        }
        if (a < 1) {
            return lfail(p, "Interleave block must be >= 1 level-0 groups");
        }
        break;
    case L_SWIZZLE:
        if (!luint(p, &a) || !eat(p, ',') || !luint(p, &b) || !eat(p, ',') || !luint(p, &c)) {
            return lfail(p, "Swizzle needs (bits,base,shift)");
        }
        if (a > 30 || b > 30 || c > 30) {
            return lfail(p, "Swizzle fields must be integers in 0..30");
        }
        if (c < a) {
            return lfail(p, "Swizzle shift < bits: the map would not be a permutation");
        }
        break;
    case L_PERM:
        if (lperm(p) < 0) {
            return -1;
        }
        break;
    case L_PAD:
        if (!luint(p, &a)) {
            return lfail(p, "Pad needs (align)");
        }
        if (a < 1) {
            return lfail(p, "Pad alignment must be >= 1");
        }
        break;
    case L_COMPOSE:
        inner = lexpr(p, depth + 1);
        if (inner < 0) {
            return -1;
        }
        if (inner == L_COMPOSE) {
            return lfail(p, "not canonical: Compose nests to the right");
        }
        if (!eat(p, ',')) {
            return lfail(p, "Compose needs (P,P)");
        }
        second = lexpr(p, depth + 1);
        if (second < 0) {
            return -1;
        }
        if (inner == L_INTERLEAVE || second == L_INTERLEAVE) {
            return lfail(p, "Interleave acts on whole planes; it cannot be composed");
        }
        break;
    default: {            /* Opaque(vendor,hex) */
        size_t start = p->i;
        while (p->i < p->n) {
            char ch = p->s[p->i];
            if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')
                  || ch == '_' || ch == '.' || ch == '-')) {
                break;
            }
            p->i++;
        }
        if (p->i == start || !eat(p, ',')) {
            return lfail(p, "Opaque needs (vendor,hexblob)");
        }
        start = p->i;
        while (p->i < p->n && ((p->s[p->i] >= '0' && p->s[p->i] <= '9')
                               || (p->s[p->i] >= 'a' && p->s[p->i] <= 'f'))) {
            p->i++;
        }
        if ((p->i - start) % 2) {
            return lfail(p, "Opaque's blob has an odd number of hex digits");
        }
        p->opaque = 1;
        break;
    }
    }
    if (!eat(p, ')')) {
        return lfail(p, "expected ')'");
    }
    return kind;
}

/* ------------------------------------------------------------------------
 * the registry */

typedef struct layout_entry {
    uint64_t word;
    int interleave;             /* the outermost constructor is Interleave */
    char *text;
    struct layout_entry *next;
} layout_entry;

static layout_entry *head = NULL;
static size_t n_layouts = 0;

#if defined(__GNUC__) || defined(__clang__)
#define LOAD_HEAD() __atomic_load_n(&head, __ATOMIC_ACQUIRE)
#define STORE_HEAD(v) __atomic_store_n(&head, (v), __ATOMIC_RELEASE)
#else
#define LOAD_HEAD() (head)
#define STORE_HEAD(v) (head = (v))
#endif

#ifndef GRIT_NO_THREADS
static pthread_mutex_t writer = PTHREAD_MUTEX_INITIALIZER;
#endif

static const layout_entry *
find(uint64_t word)
{
    for (const layout_entry *e = LOAD_HEAD(); e != NULL; e = e->next) {
        if (e->word == word) {
            return e;
        }
    }
    return NULL;
}

GRIT_HIDDEN int
grit_layout_interleaves(uint64_t word)
{
    const layout_entry *e = find(word);
    return e == NULL ? -1 : e->interleave;
}

const char *
grit_layout_expression(uint64_t word)
{
    const layout_entry *e = find(word);
    return e == NULL ? NULL : e->text;
}

grit_status_t
grit_register_layout(const char *s, size_t len, uint64_t *out_word, grit_detail_t *det)
{
    lparser p = {s, len, 0, 0, NULL};
    int kind = s == NULL ? lfail(&p, "NULL") : lexpr(&p, 1);
    if (kind >= 0 && p.i != len) {
        kind = lfail(&p, "trailing characters");
    }
    if (kind < 0) {
        return grit_fail(det, GRIT_PLACEMENT_UNKNOWN, 0, -1, "layout",
                         "a canonical layout expression", NULL,
                         "PlacementUnknown: not a canonical layout expression (§5.3): %s at "
                         "offset %zu.", p.why, p.i);
    }
    uint64_t word = ((uint64_t)(p.opaque ? 0xF : 0x8) << 60) | (grit_fnv1a64(s, len) & PAYLOAD_MASK);
    if (out_word != NULL) {
        *out_word = word;
    }
#ifndef GRIT_NO_THREADS
    pthread_mutex_lock(&writer);
#endif
    int ok = 1;
    const layout_entry *have = find(word);
    if (have != NULL) {
        ok = strlen(have->text) == len && memcmp(have->text, s, len) == 0 ? 1 : -1;
    } else if (n_layouts == MAX_LAYOUTS) {
        ok = 0;
    } else {
        layout_entry *e = (layout_entry *)malloc(sizeof *e);
        char *t = (char *)malloc(len + 1);
        if (e == NULL || t == NULL) {
            free(e);
            free(t);
            ok = 0;
        } else {
            memcpy(t, s, len);
            t[len] = '\0';
            e->word = word;
            e->interleave = kind == L_INTERLEAVE;
            e->text = t;
            e->next = head;
            n_layouts++;
            STORE_HEAD(e);
        }
    }
#ifndef GRIT_NO_THREADS
    pthread_mutex_unlock(&writer);
#endif
    if (ok == 0) {
        return grit_fail(det, GRIT_PLACEMENT_UNKNOWN, 0, -1, "layout", NULL, NULL,
                         "PlacementUnknown: the layout registry is full (%d expressions) or out "
                         "of memory.", MAX_LAYOUTS);
    }
    if (ok < 0) {
        return grit_fail(det, GRIT_PLACEMENT_UNKNOWN, 0, -1, "layout", have->text, NULL,
                         "PlacementUnknown: placement word 0x%016llx is already %s's; equal "
                         "words never mean equal layouts (§5.3).", (unsigned long long)word,
                         have->text);
    }
    return grit_ok(det);
}
