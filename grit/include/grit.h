/*
 * grit.h -- the C binding of GRIT v1 (self-describing quantized tensors).
 *
 * The structs and constants are §3.1, §7.1 and Appendix A of the spec,
 * verbatim; the functions below them are libgrit's API (docs/c-library.md):
 * fingerprints (§6), the printable gid (§6.4), the format word (§2.4, §2.5),
 * the grade registry the check resolves grade_id against (§6.2, §7.3 step 2),
 * grit_check at levels 0-2 (§7.3, §14), and decode/encode of every registered
 * grade into caller buffers (§8-§10).
 *
 * C99 or C++ (11 or later).  Every function is reentrant: the only state is
 * the grade registry (grit_register_grade; thread-safe), and nothing aborts:
 * a failure is a grit_status_t with a grit_detail_t saying why.
 *
 * Link with -lgrit (pkg-config --libs grit), or in CMake
 * find_package(grit) and target_link_libraries(app grit::grit).
 */
#ifndef GRIT_H
#define GRIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(GRIT_BUILDING_LIBRARY)
#  define GRIT_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#  define GRIT_API __attribute__((visibility("default")))
#else
#  define GRIT_API
#endif

/* ------------------------------------------------------------------------
 * Appendix A.1 -- descriptor constants */

#define GRIT_MAGIC              0x31545247u   /* 'G','R','T','1' LE */
#define GRIT_HDR_BYTES          64
#define GRIT_VERSION            1
#define GRIT_F_HAS_ZP           0x01
#define GRIT_F_ZP_MINUS1        0x02
#define GRIT_F_SPARSE           0x04
#define GRIT_F_MSB_FIRST        0x08
#define GRIT_F_INTERLEAVED      0x10
#define GRIT_F_ZP_L1SCALED      0x20
/*      reserved                0xC0  -- MUST be 0 */
#define GRIT_CT_DENSE           0
#define GRIT_CT_PAD8            1
#define GRIT_SPMETA_NONE        0
#define GRIT_SPMETA_U2          1
#define GRIT_SPMETA_U4          2
#define GRIT_SPORDER_UNORDERED  0
#define GRIT_SPORDER_ASC_LSB    1
#define GRIT_NOTE_ASSUMED       0x00000001u   /* NOT hashed */
#define GRIT_PLACEMENT_UNSPECIFIED  0x0000000000000000ull
#define GRIT_P_ROW_MAJOR            0x1000000000000001ull
#define GRIT_P_COL_MAJOR            0x1000000000000002ull
#define GRIT_P_SWIZZLE_128X4B       0x1000000000000003ull
#define GRIT_P_TILE_16X16           0x1000000000000004ull
#define GRIT_P_BLOCK_AOS            0x1000000000000005ull
#define GRIT_P_LINEAR_META          0x1000000000000011ull
#define GRIT_P_META_M16N8K32        0x1000000000000012ull
#define GRIT_P_PACK_K4_12B          0x1000000000000020ull
#define GRIT_FMT_E2M1           0x2043u
#define GRIT_FMT_E4M3           0x2887u
#define GRIT_FMT_E8M0           0x4807u
#define GRIT_FMT_BINARY16       0x356Fu
#define GRIT_FMT_BINARY32       0x371Fu
#define GRIT_FMT_U2             0x43E1u
#define GRIT_FMT_U4             0x43E3u
#define GRIT_FMT_U6             0x43E5u
#define GRIT_FMT_U8             0x43E7u
#define GRIT_FMT_S4             0x03E3u
#define GRIT_FMT_S8             0x03E7u
#define GRIT_GRADE_MXFP4        0x2370EE9EE454A183ull
#define GRIT_GRADE_Q4KS         0x1C600DE02594FB55ull
#define GRIT_GRADE_NVF4         0x00FF6F4C2870831Eull
#define GRIT_GRADE_I8S24        0xBBBB283A2539EBE8ull
#define GRIT_GRADE_MXFP4_RNE    0x254285E10D6068C8ull
#define GRIT_GRADE_NVF4_RTZ     0x006C3850A3F42DEAull

/* extents a view carries (grit/facts.py MAXRANK) */
#define GRIT_MAXRANK            8

/* ------------------------------------------------------------------------
 * §3.1 -- the 64-byte descriptor and the view */

typedef uint16_t grit_fmt_t;
typedef struct grit_desc {          /* sizeof == 64, alignof == 8 */
  uint32_t   magic;                 /* 0x31545247 == 'G','R','T','1' LE     */
  uint8_t    hdr_bytes;             /* 64                                    */
  uint8_t    version;               /* 1                                     */
  uint8_t    n_levels;              /* 1 or 2                                */
  uint8_t    flags;                 /* GRIT_F_*                              */
  grit_fmt_t elem, scale0, scale1, zp_fmt;
  int16_t    group_axis;
  uint16_t   k0;                    /* elements per level-0 group            */
  uint16_t   k1;                    /* level-0 groups per level-1 group;
                                       0 == per-tensor (n_levels == 2 only)  */
  uint8_t    sp_n, sp_m;            /* N of every M survive                  */
  uint8_t    sp_meta_fmt;           /* GRIT_SPMETA_*                         */
  uint8_t    sp_order;              /* GRIT_SPORDER_*                        */
  uint8_t    container;             /* GRIT_CT_DENSE | GRIT_CT_PAD8          */
  uint8_t    frame_rsvd;            /* 0                                     */
  uint32_t   note;                  /* informational, NOT hashed (§11)       */
  uint64_t   placement_data;
  uint64_t   placement_scale;       /* covers scale0 AND scale1              */
  uint64_t   placement_meta;        /* covers the aux plane (meta or zp)     */
  uint64_t   grade_id;              /* FNV-1a-64 of the canonical grade      */
} grit_desc_t;
typedef struct grit_view {
  grit_desc_t d;
  int32_t     rank;
  int64_t     shape[GRIT_MAXRANK];
  void*       plane[4];             /* data, scale0, scale1, aux             */
  int64_t     plane_bytes[4];
  uint8_t     gid[16];              /* 0 => compute on demand                */
} grit_view_t;

/* The ABI, checked where it is compiled (§3: "This is the ABI"). */
#if defined(__cplusplus)
#  define GRIT_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#  define GRIT_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
#if defined(__cplusplus) && __cplusplus >= 201103L
#  define GRIT_ALIGNOF(t) alignof(t)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#  define GRIT_ALIGNOF(t) _Alignof(t)
#else
   /* C99: the offset of t after one char is t's alignment */
#  define GRIT_ALIGNOF(t) offsetof(struct { char c_; t t_; }, t_)
#endif
#if defined(__cplusplus) || (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L) \
    || defined(__GNUC__) || defined(__clang__)
#if !defined(__cplusplus) && !(defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L)
   /* C99 under GCC/Clang: _Static_assert is an extension there; say so */
#  undef GRIT_STATIC_ASSERT
#  define GRIT_STATIC_ASSERT(c, m) __extension__ _Static_assert(c, m)
#endif
GRIT_STATIC_ASSERT(sizeof(grit_desc_t) == 64, "grit_desc_t is 64 bytes (§3)");
GRIT_STATIC_ASSERT(GRIT_ALIGNOF(grit_desc_t) == 8, "grit_desc_t is 8-aligned (§3)");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, magic) == 0, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, hdr_bytes) == 4, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, version) == 5, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, n_levels) == 6, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, flags) == 7, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, elem) == 8, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, scale0) == 10, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, scale1) == 12, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, zp_fmt) == 14, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, group_axis) == 16, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, k0) == 18, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, k1) == 20, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, sp_n) == 22, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, sp_m) == 23, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, sp_meta_fmt) == 24, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, sp_order) == 25, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, container) == 26, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, frame_rsvd) == 27, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, note) == 28, "§3.1 offset: the note is [28,32)");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, placement_data) == 32, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, placement_scale) == 40, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, placement_meta) == 48, "§3.1 offset");
GRIT_STATIC_ASSERT(offsetof(grit_desc_t, grade_id) == 56, "§3.1 offset");
GRIT_STATIC_ASSERT(sizeof(grit_fmt_t) == 2, "§2: the format word is 16 bits");
GRIT_STATIC_ASSERT(offsetof(grit_view_t, d) == 0, "a view starts with its descriptor");
GRIT_STATIC_ASSERT(offsetof(grit_view_t, rank) == 64, "rank follows the 64-byte descriptor");
#endif

/* ------------------------------------------------------------------------
 * §7.1 -- the must-use result type */

typedef enum grit_status {
  GRIT_OK                = 0,
  GRIT_SIZE_MISMATCH     = 1,
  GRIT_GRADE_UNKNOWN     = 2,
  GRIT_PLACEMENT_UNKNOWN = 3,
  GRIT_DIGEST_MISMATCH   = 4
} grit_status_t;
#if defined(__cplusplus) && __cplusplus >= 201703L
#  define GRIT_NODISCARD [[nodiscard]]
#elif defined(__GNUC__) || defined(__clang__)
#  define GRIT_NODISCARD __attribute__((warn_unused_result))
#else
#  define GRIT_NODISCARD
#endif

/* What failed, where, and what was expected instead (§7.5).  The strings
 * are NUL-terminated and truncated to their arrays; field names are those
 * of grit_desc_t, "data" / "scale0" / "scale1" / "aux" for a plane, or
 * "rank", "shape", "digest", "level", "out".  step is the §7.3 step that
 * failed (1-5; 0 on GRIT_OK or outside grit_check), plane the offending
 * plane (0-3) or -1. */
typedef struct grit_detail {
  grit_status_t status;
  int32_t       step;
  int32_t       plane;
  char          field[32];
  char          expected[80];
  char          actual[80];
  char          message[256];
} grit_detail_t;

/* The spelling of a status in the spec and the conformance suite:
 * "Ok", "SizeMismatch", "GradeUnknown", "PlacementUnknown", "DigestMismatch". */
GRIT_API const char* grit_status_name(grit_status_t s);

/* ------------------------------------------------------------------------
 * §3 -- descriptor bytes (little-endian on the wire, whatever the host) */

GRIT_API void grit_desc_from_bytes(const uint8_t bytes[64], grit_desc_t* out);
GRIT_API void grit_desc_to_bytes(const grit_desc_t* d, uint8_t bytes[64]);

/* ------------------------------------------------------------------------
 * §6 -- fingerprints */

/* FNV-1a-64 of n bytes (§6.1) */
GRIT_API uint64_t grit_fnv1a64(const void* p, size_t n);
/* FNV-1a-128 of n bytes, big-endian into out (§6.1) */
GRIT_API void grit_fnv1a128(const void* p, size_t n, uint8_t out[16]);
/* §6.2: FNV-1a-64 of a canonical grade string (UTF-8, no NUL) */
GRIT_API uint64_t grit_grade_id(const char* canonical, size_t len);
/* §6.3: the gid of a view, big-endian into out.  The grade's canonical
 * string comes from the registry (grade_id); GRIT_GRADE_UNKNOWN when the
 * grade is not registered, GRIT_SIZE_MISMATCH when rank is outside
 * [0, GRIT_MAXRANK]. */
GRIT_NODISCARD GRIT_API grit_status_t grit_gid(const grit_view_t* v, uint8_t out[16],
                                               grit_detail_t* out_detail);
/* §6.3 with the canonical grade string given */
GRIT_API void grit_gid_with(const char* canonical, size_t len, const grit_desc_t* d,
                            int32_t rank, const int64_t* shape, uint8_t out[16]);
/* §6.5: the digest of the four planes of a view (plane_bytes[i] > 0 reads
 * plane[i]; negative counts as 0), big-endian into out */
GRIT_API void grit_digest(const grit_view_t* v, uint8_t out[16]);

/* §6.4 -- Crockford base32: 26 symbols and a NUL into out (27 bytes) */
GRIT_API void grit_base32_encode(const uint8_t gid[16], char out[27]);
/* Parse 26 symbols (len must be 26); I, L read as 1, O as 0, any case; U
 * and anything else are refused, as is a first symbol above 7.  0 on
 * success, -1 on a malformed string. */
GRIT_NODISCARD GRIT_API int grit_base32_parse(const char* s, size_t len, uint8_t gid[16]);

/* ------------------------------------------------------------------------
 * §2 -- the format word */

/* 1 when word is a legal v1 format word (docs/spec-decisions.md "format
 * words"), else 0 */
GRIT_API int grit_fmt_valid(grit_fmt_t word);
/* §2.4: the value of code, exactly (every NaN is 0x7FC00000) */
GRIT_API float grit_fmt_decode(grit_fmt_t word, uint32_t code);
/* §2.5 fmt_encode_rne with satfinite, for a legal word of width <= 8 or
 * binary16 / binary32 (the IEEE conversions) and integers of any width;
 * -1 when word is illegal, or x is NaN and the format has no NaN */
GRIT_API int64_t grit_fmt_encode_rne(grit_fmt_t word, float x);
/* §2.5 fmt_encode under any rounding and saturation (the grade tokens er /
 * dr and es / ds; docs/spec-decisions.md for the modes beyond rne and
 * satfinite), for every legal word of any width; -1 when word, rounding or
 * saturation is illegal, or x is NaN and the format has no NaN */
typedef enum grit_rounding {
  GRIT_RND_RNE = 0, GRIT_RND_RNA = 1, GRIT_RND_RTZ = 2, GRIT_RND_RTP = 3, GRIT_RND_RTN = 4
} grit_rounding_t;
typedef enum grit_saturation {
  GRIT_SAT_SATFINITE = 0, GRIT_SAT_SATMAX = 1, GRIT_SAT_OVFINF = 2
} grit_saturation_t;
GRIT_API int64_t grit_fmt_encode(grit_fmt_t word, float x, int rounding, int saturation);

/* ------------------------------------------------------------------------
 * The grade registry (§6.2, §7.3 step 2)
 *
 * The six grades of Appendix A are built in.  grit_register_grade adds a
 * canonical grade string (§4.4: the form canonicalisation emits -- keys in
 * §4.2 order, canonical tokens, no default values); its grade_id is the
 * FNV-1a-64 of exactly those bytes.  Registration is thread-safe and may
 * run concurrently with grit_check and every other call (a lock guards the
 * table; a registered grade stays for the life of the process).  Re-
 * registering the same string is a no-op.
 *
 * Returns GRIT_OK, or GRIT_GRADE_UNKNOWN with the reason in out_detail
 * (not a canonical grade string; or the registry is full: 2^20 grades).
 * out_id (may be NULL) receives the grade_id. */
GRIT_NODISCARD GRIT_API grit_status_t grit_register_grade(const char* canonical, size_t len,
                                                          uint64_t* out_id,
                                                          grit_detail_t* out_detail);
/* The canonical string of a registered grade_id, NUL-terminated, valid for
 * the life of the process; NULL when the id is not registered. */
GRIT_API const char* grit_grade_canonical(uint64_t grade_id);
/* The frame fields (§7.3 step 2) a registered grade fixes, as a descriptor
 * with every other field zero: n_levels, flags, elem, scale0, scale1,
 * zp_fmt, k0, k1, sp_n, sp_m, sp_meta_fmt, sp_order, container.  0 when the
 * id is not registered, else 1. */
GRIT_API int grit_grade_frame(uint64_t grade_id, grit_desc_t* out);

/* ------------------------------------------------------------------------
 * The layout registry (§5.3): class-0x8 words resolved as grit_check needs
 *
 * grit_register_layout adds a canonical layout expression (the text
 * str(grit.parse_layout(t)) gives: no whitespace, constructor names as in
 * §5.3, Perm written out, Compose nested to the right, Opaque's blob in
 * lowercase hex) and returns its word in out_word (may be NULL): class 0x8,
 * or 0xF when it contains Opaque, over the low 60 bits of its FNV-1a-64.
 * Anything else is GRIT_PLACEMENT_UNKNOWN with the reason; so is a word
 * already registered for another text (§5.3: equal words never mean equal
 * layouts).  Thread-safe, idempotent; an expression stays for the life of
 * the process.  grit_check uses it in step 2: an F_INTERLEAVED descriptor
 * whose hashed data word resolves to an expression that is not an
 * Interleave(P, n) is GRIT_GRADE_UNKNOWN (docs/spec-decisions.md
 * "interleaved-flag"); an unresolved hashed word is accepted. */
GRIT_NODISCARD GRIT_API grit_status_t grit_register_layout(const char* canonical, size_t len,
                                                           uint64_t* out_word,
                                                           grit_detail_t* out_detail);
/* The canonical text registered under a class-0x8/0xF word, NUL-terminated
 * and valid for the life of the process; NULL when none is. */
GRIT_API const char* grit_layout_expression(uint64_t word);

/* ------------------------------------------------------------------------
 * §7 -- grit_check
 *
 * level 0: nothing is read; GRIT_OK.  level 1: steps 1-4 (frame, grade,
 * placement, size equations), O(1), never reads a plane pointer.  level 2:
 * level 1 plus step 5 (the SPORDER_ASC_LSB metadata order; reads the aux
 * plane).  Level 3's probes are advisory (§7.6) and not part of libgrit: a
 * level above 2 runs level 2; a level below 0 runs level 0.  out_detail
 * may be NULL.  For any 64 bytes, any rank, shape and plane_bytes, the
 * check reads nothing but the view (and at level 2 the aux plane, whose
 * plane_bytes the size step has proved), never traps, and returns exactly
 * one status (§14). */
GRIT_NODISCARD GRIT_API grit_status_t grit_check(const grit_view_t* v, int level,
                                                 grit_detail_t* out_detail);
/* grit_check with an expected §6.5 digest (NULL: none), verified at level 2
 * before the metadata order (§7.3 step 5) */
GRIT_NODISCARD GRIT_API grit_status_t grit_check_digest(const grit_view_t* v, int level,
                                                        const uint8_t expected_digest[16],
                                                        grit_detail_t* out_detail);
/* §7.3 step 4: the exact plane sizes of (d, rank, shape), or the
 * GRIT_SIZE_MISMATCH that the shape cannot carry the descriptor */
GRIT_NODISCARD GRIT_API grit_status_t grit_plane_sizes(const grit_desc_t* d, int32_t rank,
                                                       const int64_t* shape,
                                                       int64_t out_bytes[4],
                                                       grit_detail_t* out_detail);

/* ------------------------------------------------------------------------
 * §8-§10 -- decode / encode of every registered grade
 *
 * Any grade the registry holds (the six of Appendix A and every canonical
 * string registered at run time), in the canonical placements (UNSPECIFIED
 * or ROW_MAJOR data and scales; UNSPECIFIED, LINEAR_META or ROW_MAJOR aux):
 * elements are in lin order (§3.7: C order of the array with the group
 * axis moved last; for the last axis, plain C order).  Both run grit_check
 * level 1 first and return its failure.  Another placement is
 * GRIT_PLACEMENT_UNKNOWN ("relayout first").  n_out / n_in must equal numel
 * (else GRIT_SIZE_MISMATCH, field "out" or "x").  The six grades of
 * Appendix A in ROW_MAJOR run the SIMD kernels (nthreads <= 1: the calling
 * thread); every other grade runs the general codec on the calling thread.
 * The bits never depend on the path or on nthreads.
 *
 * grit_encode writes the planes v->plane[i] (caller buffers of
 * v->plane_bytes[i], which must be the §7.3 sizes); x is not modified.  A
 * grade without an encode rule (docs/spec-decisions.md "§9 Encode"), or an
 * input the grade cannot hold (NaN or ±inf where no scale format has a NaN
 * code; a NaN reaching a format without one), is GRIT_GRADE_UNKNOWN with
 * the reason; the planes' contents are then unspecified.  An allocation
 * failure of the general codec's scratch (a few bytes per group) is
 * GRIT_SIZE_MISMATCH, field "memory". */
GRIT_NODISCARD GRIT_API grit_status_t grit_decode(const grit_view_t* v, float* out,
                                                  size_t n_out, int nthreads,
                                                  grit_detail_t* out_detail);
GRIT_NODISCARD GRIT_API grit_status_t grit_encode(const grit_view_t* v, const float* x,
                                                  size_t n_in, int nthreads,
                                                  grit_detail_t* out_detail);
/* The same through the general codec alone, whatever the grade (the
 * kernels' reference: their bits are these) */
GRIT_NODISCARD GRIT_API grit_status_t grit_decode_general(const grit_view_t* v, float* out,
                                                          size_t n_out,
                                                          grit_detail_t* out_detail);
GRIT_NODISCARD GRIT_API grit_status_t grit_encode_general(const grit_view_t* v, const float* x,
                                                          size_t n_in,
                                                          grit_detail_t* out_detail);
/* C order <-> lin order for a float array of the given shape and group
 * axis (out and in must not overlap); 0 on success, -1 on a bad axis or
 * rank */
GRIT_API int grit_lin_to_c(const float* lin, float* out, int32_t rank, const int64_t* shape,
                           int axis);
GRIT_API int grit_c_to_lin(const float* in, float* lin, int32_t rank, const int64_t* shape,
                           int axis);

/* "1.0.0"-style version of the library */
GRIT_API const char* grit_library_version(void);

#ifdef __cplusplus
}
#endif

#endif /* GRIT_H */
