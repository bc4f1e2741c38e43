#!/usr/bin/env bash
# A libFuzzer campaign on libgrit's grit_check and codec (scripts/fuzz_check.c), built
# with AddressSanitizer and UndefinedBehaviorSanitizer (any report aborts).
#
#   scripts/fuzz_c.sh [SECONDS] [EXTRA libFuzzer ARGS...]
#
# SECONDS (default 60) bounds the run (-max_total_time); one process, one
# core.  The corpus starts from the descriptors of spec/conformance/
# vectors.json and lives in $GRIT_FUZZ_C_OUT/corpus (default build/fuzz_c;
# kept between runs).  Prints
# libFuzzer's final stats; the number of executions is its "stat::
# number_of_executed_units".  Exit status: libFuzzer's (0 when nothing was
# found), 77 when clang with libFuzzer is not available.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-60}"
shift || true
CC="${CC_FUZZ:-clang}"
if ! command -v "$CC" >/dev/null 2>&1; then
    echo "fuzz_c: $CC not found (apt-get install clang)" >&2
    exit 77
fi
OUT="${GRIT_FUZZ_C_OUT:-build/fuzz_c}"
mkdir -p "$OUT/corpus"
SRC=grit/_native/core
"$CC" -std=c99 -g -O1 -ffp-contract=off -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -Igrit/include scripts/fuzz_check.c \
    $SRC/threads.c $SRC/decode.c $SRC/encode.c $SRC/fnv.c $SRC/formats.c \
    $SRC/fingerprint.c $SRC/grade.c $SRC/check.c $SRC/codec.c $SRC/generic.c $SRC/layout.c -lm -lpthread \
    -o "$OUT/fuzz_check" || { echo "fuzz_c: $CC cannot build a libFuzzer target" >&2; exit 77; }
# seeds: each vector's descriptor as a level-1 and a level-2 case; the grades
python3 - "$OUT" <<'PY'
import json, struct, sys, pathlib
out = pathlib.Path(sys.argv[1])
doc = json.loads(pathlib.Path("spec/conformance/vectors.json").read_text())
sys.path.insert(0, "tests")
sys.path.insert(0, ".")
try:
    import grit
    from fuzz_strategies import SEED_GRADES, SEED_LAYOUTS
    seeds = [grit.Grade.parse(g).canonical for g in SEED_GRADES]
    layouts = [str(grit.parse_layout(e)) for e in SEED_LAYOUTS]
except ImportError:                     # hypothesis missing: the vectors' grades only
    seeds, layouts = [], []
grades = [g["canonical"] for g in doc["grades"].values()] + seeds
(out / "grades.txt").write_text("\n".join(dict.fromkeys(grades)) + "\n")
(out / "layouts.txt").write_text("\n".join(layouts) + "\n")
for i, e in enumerate(layouts):
    (out / "corpus" / f"layout{i}").write_bytes(b"l" + e.encode())
for k, r in enumerate(doc["vectors"] + doc["negative"]):
    shape = r["shape"][:8]
    if any(not -(1 << 63) <= s < (1 << 63) for s in shape):
        continue
    payload = bytes.fromhex(r["payload_hex"])
    for level in (1, 2):
        b = bytes([level]) + bytes.fromhex(r["desc_hex"]) + struct.pack("<b", len(r["shape"]))
        b += struct.pack(f"<{len(shape)}q", *shape)
        b += struct.pack("<4q", *r["plane_bytes"]) + payload
        (out / "corpus" / f"seed{k}_{level}").write_bytes(b)
for i, g in enumerate(grades):
    (out / "corpus" / f"grade{i}").write_bytes(b"g" + g.encode())
PY
export GRIT_FUZZ_GRADES="$OUT/grades.txt"
export GRIT_FUZZ_LAYOUTS="$OUT/layouts.txt"
# the grade registry lives as long as the process (docs/c-library.md): not a leak
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"
exec "$OUT/fuzz_check" -max_total_time="$SECS" -print_final_stats=1 -max_len=4096 \
    -rss_limit_mb=2048 -detect_leaks=0 -artifact_prefix="$OUT/" "$@" "$OUT/corpus"
