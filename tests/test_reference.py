"""spec/reference.py and spec/conformance/vectors.json (§15).

The pinned values below are typed in from the specification text (Appendix A
and B), not read from the vector file, so the file is checked against the spec
rather than against itself."""
import ast
import json
import math
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from _support import load_reference

ROOT = Path(__file__).resolve().parents[1]
REF_PATH = ROOT / "spec" / "reference.py"
VECTORS = ROOT / "spec" / "conformance" / "vectors.json"


def _load_reference():
    return load_reference("grit_spec_reference")


ref = _load_reference()


@pytest.fixture(scope="module")
def doc():
    with open(VECTORS, encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def by_name(doc):
    return {v["name"]: v for v in doc["vectors"]}


# ---------------------------------------------------------------------------
# §15: the two commands

def test_verify_passes():
    r = subprocess.run([sys.executable, str(REF_PATH), "verify"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("all ok"), r.stdout
    assert r.stdout.startswith("verify: ")


def test_gen_reproduces_the_committed_file_byte_for_byte(tmp_path):
    out = tmp_path / "vectors.json"
    r = subprocess.run([sys.executable, str(REF_PATH), "gen", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert out.read_bytes() == VECTORS.read_bytes()


def test_verify_rejects_a_tampered_file(tmp_path, doc):
    bad = json.loads(json.dumps(doc))
    v = bad["vectors"][0]
    v["decoded_f32_bits"][0] = "%08x" % (int(v["decoded_f32_bits"][0], 16) ^ 1)
    bad["negative"][0]["expected_error"] = "SizeMismatch"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    r = subprocess.run([sys.executable, str(REF_PATH), "verify", "--in", str(path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "decoded_f32_bits" in r.stdout and "expected SizeMismatch" in r.stdout


def test_reference_is_standalone():
    """Standard library only; never the grit package, never numpy."""
    tree = ast.parse(REF_PATH.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "argparse", "itertools", "json", "math", "os",
                        "random", "struct", "sys", "time"}, imported


# ---------------------------------------------------------------------------
# contents of the suite

SPEC_NAMED = ["mxfp4/tie_to_even", "nvf4/wide_dynamic_range", "i8s24/quad_pattern"]


def test_counts_and_schema(doc, by_name):
    assert doc["format"] == "grit-conformance" and doc["version"] == 1
    assert doc["spec"] == "GRIT v1"
    assert len(doc["vectors"]) >= 100
    assert len(doc["negative"]) >= 20
    errors = [v["expected_error"] for v in doc["negative"]]
    for e in ("SizeMismatch", "GradeUnknown", "PlacementUnknown", "DigestMismatch"):
        assert errors.count(e) >= 3, e
    for name in SPEC_NAMED:
        assert name in by_name
    neg = {v["name"] for v in doc["negative"]}
    assert {"degenerate/all_zeros_descriptor", "degenerate/all_ones_descriptor"} <= neg
    kinds = {v["kind"] for v in doc["fingerprint"]}
    assert kinds == {"canonicalization", "distinct", "reject", "frame_note_split",
                     "distinct_gid", "crockford"}
    assert "fp/frame_note_split" in {v["name"] for v in doc["fingerprint"]}
    sup = {v["name"]: v for v in doc["supersedes"]}
    assert "supersedes/demo/mxfp4_rne_bytes_decode_identically" in sup
    assert sup["supersedes/demo/mxfp4_rne_bytes_decode_identically"]["kind"] == "byte_demo"
    edges = {(v["from"], v["to"]) for v in doc["supersedes"] if "kind" not in v}
    assert edges == {("GRADE_MXFP4_RNE", "GRADE_MXFP4"), ("GRADE_NVF4_RTZ", "GRADE_NVF4")}
    positive_keys = ["name", "grade", "grade_canonical", "desc_hex", "shape", "input_f32",
                     "payload_hex", "plane_bytes", "decoded_f32", "decoded_f32_bits",
                     "digest", "gid", "gid_base32"]
    for v in doc["vectors"]:
        assert [k for k in v if not k.startswith("decision")] == positive_keys
        assert v["grade"] in doc["grades"]
    for v in doc["negative"]:
        assert {"name", "desc_hex", "shape", "payload_hex", "plane_bytes", "check_level",
                "expected_error"} <= set(v)


def test_every_registered_grade_is_covered(doc):
    registered = ["GRADE_MXFP4", "GRADE_MXFP4_RNE", "GRADE_Q4KS", "GRADE_NVF4",
                  "GRADE_NVF4_RTZ", "GRADE_I8S24"]
    names = {}
    for v in doc["vectors"]:
        names.setdefault(v["grade"], []).append(v["name"])
    for g in registered:
        joined = " ".join(names[g])
        for topic in ("signed_zero", "nan_poison", "inf_poison", "subnormal", "saturation",
                      "random_normal", "tie"):
            assert topic in joined, (g, topic)
        assert any("zero" in n and ("all" in n) for n in names[g]), g
    extra = [g for g in doc["grades"] if g.startswith("X_")]
    assert len(extra) >= 7 and all(names.get(g) for g in extra)


def test_beyond_the_registered_six(doc):
    """2-level, zp shared + minus1, MSB-first, PAD8, u4/unordered sparse,
    generic format words, non-last group axis on 2-D."""
    canon = {v["grade_canonical"] for v in doc["vectors"]}
    assert any(",k1=4," in c for c in canon)
    assert any("zpc=minus1" in c and "zps=l1" not in c for c in canon)
    assert any("po=msb" in c for c in canon)
    assert any("ct=pad8" in c for c in canon)
    assert any(":u4:" in c for c in canon) and any(":unord" in c for c in canon)
    assert any("e=x" in c for c in canon) and any("e=e5m2" in c for c in canon)
    axis0_2d = [v for v in doc["vectors"] if len(v["shape"]) == 2
                and struct.unpack_from("<h", bytes.fromhex(v["desc_hex"]), 16)[0] == 0]
    assert len({v["grade"] for v in axis0_2d}) >= 4


# ---------------------------------------------------------------------------
# Appendix B, typed from the spec text

def test_appendix_b1_mxfp4_tie_to_even(by_name):
    v = by_name["mxfp4/tie_to_even"]
    inputs = ([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.5]
              + [-0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5.0, -6.5] + [0.0] * 16)
    assert v["shape"] == [32] and v["input_f32"] == inputs
    assert v["payload_hex"] == "20426476a8caecfe0000000000000000" + "7f"
    decode = [0, 1, 1, 2, 2, 4, 4, 6, -0.0, -1, -1, -2, -2, -4, -4, -6] + [0] * 16
    assert [struct.pack("<f", x) for x in v["decoded_f32"]] == [
        struct.pack("<f", x) for x in decode]
    assert v["decoded_f32_bits"][8] == "80000000"
    assert v["plane_bytes"] == [16, 1, 0, 0]
    assert v["digest"] == "9452a02851ba1a1d793b97df51266001"
    assert v["gid"] == "42d145a24c0f96ea7e336d82a2ac740d"
    assert v["gid_base32"] == "22T52T4K0FJVN7WCVDGAHARX0D"


def test_appendix_b2_i8s24_quad_pattern(by_name):
    v = by_name["i8s24/quad_pattern"]
    assert v["shape"] == [32] and v["input_f32"] == [3.0, 0.0, 0.0, 1.0] * 8
    data, meta, scale = "7f2a" * 8, "cccccccc", "0c26"       # scale0 0x260c, LE
    assert v["payload_hex"] == data + scale + meta
    assert v["plane_bytes"] == [16, 2, 0, 4]
    assert v["decoded_f32"] == [2.99981689453125, 0.0, 0.0, 0.9920654296875] * 8
    assert v["decoded_f32_bits"][1] == "00000000"            # +0.0 exactly
    assert v["gid_base32"] == "2X7NNMYRJ9K6508JQTR1J37VR9"


def test_b3_byte_demo(doc):
    demo = {v["name"]: v for v in doc["supersedes"]}[
        "supersedes/demo/mxfp4_rne_bytes_decode_identically"]
    assert demo["desc_hex_from"][-16:] == "c868600de1854225"    # 0x254285E10D6068C8 LE
    assert demo["desc_hex_to"][-16:] == "83a154e49eee7023"      # 0x2370EE9EE454A183 LE
    assert demo["gid_from"] != demo["gid_to"]


# ---------------------------------------------------------------------------
# Appendix A

A1_IDS = {
    "GRADE_MXFP4": 0x2370EE9EE454A183, "GRADE_Q4KS": 0x1C600DE02594FB55,
    "GRADE_NVF4": 0x00FF6F4C2870831E, "GRADE_I8S24": 0xBBBB283A2539EBE8,
    "GRADE_MXFP4_RNE": 0x254285E10D6068C8, "GRADE_NVF4_RTZ": 0x006C3850A3F42DEA,
}

A4 = {
    "GRADE_MXFP4": """47525431400101004320074800000000
                      00002000000000000000000000000000
                      01000000000000100100000000000010
                      000000000000000083a154e49eee7023""",
    "GRADE_Q4KS": """4752543140010221e343e5436f35e543
                     00002000080000000000000000000000
                     01000000000000100100000000000010
                     010000000000001055fb9425e00d601c""",
    "GRADE_NVF4": """4752543140010200432087281f370000
                     00001000000000000000000000000000
                     01000000000000100100000000000010
                     00000000000000001e8370284c6fff00""",
    "GRADE_I8S24": """4752543140010104e7036f3500000000
                      00002000000002040101000000000000
                      01000000000000100100000000000010
                      1100000000000010e8eb39253a28bbbb""",
}


@pytest.mark.parametrize("name", sorted(A1_IDS))
def test_grade_ids_equal_appendix_a1(name, doc):
    assert ref.grade_id(ref.GRADES[name]) == A1_IDS[name]
    assert doc["grades"][name]["grade_id"] == f"0x{A1_IDS[name]:016x}"


@pytest.mark.parametrize("name", sorted(A4))
def test_appendix_a4_descriptors(name, doc):
    want = bytes.fromhex("".join(A4[name].split()))
    assert ref.descriptor_for(ref.GRADES[name], 0) == want
    rank1 = [v for v in doc["vectors"] if v["grade"] == name and len(v["shape"]) == 1]
    assert rank1 and all(bytes.fromhex(v["desc_hex"]) == want for v in rank1)


def test_format_words_appendix_a1():
    words = {"e2m1": 0x2043, "e4m3": 0x2887, "e8m0": 0x4807, "binary16": 0x356F,
             "binary32": 0x371F, "u2": 0x43E1, "u4": 0x43E3, "u6": 0x43E5, "u8": 0x43E7,
             "s4": 0x03E3, "s8": 0x03E7}
    for token, word in words.items():
        assert ref.FORMATS[token] == word
        assert ref.fmt_problem(word) is None


def test_e2m1_e4m3_e8m0_tables():
    """Appendix A.2 / A.3."""
    e2m1 = [ref.fmt_decode(0x2043, c) for c in range(16)]
    assert e2m1[:8] == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert [-x for x in e2m1[:8]] == e2m1[8:] and math.copysign(1, e2m1[8]) < 0
    assert ref.fmt_decode(0x2887, 0x01) == 2.0 ** -9 and ref.fmt_decode(0x2887, 0x38) == 1.0
    assert ref.fmt_decode(0x2887, 0x7E) == 448.0
    assert math.isnan(ref.fmt_decode(0x2887, 0x7F)) and math.isnan(ref.fmt_decode(0x2887, 0xFF))
    assert ref.fmt_decode(0x4807, 0x7F) == 1.0 and ref.fmt_decode(0x4807, 0) == 2.0 ** -127
    assert math.isnan(ref.fmt_decode(0x4807, 0xFF))


# ---------------------------------------------------------------------------
# §6

def test_fnv_self_checks_and_crockford_example():
    assert ref.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert ref.fnv1a128(b"a") == 0xD228CB696F1A8CAF78912B704E4A8964
    g = bytes.fromhex("42d145a24c0f96ea7e336d82a2ac740d")
    assert ref.base32_encode(g) == "22T52T4K0FJVN7WCVDGAHARX0D"
    assert ref.base32_decode("22t52t4kOfjvn7wcvdgaharxOd") == g
    with pytest.raises(ValueError):
        ref.base32_decode("22T52T4K0FJVN7WCVDGAHARX0U")


def test_gid_ignores_the_note_only():
    d = ref.descriptor_for(ref.GRADES["GRADE_MXFP4"], 0)
    canon = ref.GRADES["GRADE_MXFP4"]
    base = ref.gid(canon, d, [32])
    noted = d[:28] + b"\xff\xff\xff\xff" + d[32:]
    assert ref.gid(canon, noted, [32]) == base
    for i in list(range(28)) + list(range(32, 64)):
        changed = bytearray(d)
        changed[i] ^= 0x01
        assert ref.gid(canon, bytes(changed), [32]) != base, i


# ---------------------------------------------------------------------------
# §2, §8, §9 pieces the vectors exercise only indirectly

def test_ladder_and_arithmetic_rounding_agree():
    """§2.5's ladder and the quantum arithmetic used for wide floats give the
    same code for every value midway between and at each 8-bit float code."""
    for word in (ref.FORMATS["e4m3"], ref.FORMATS["e5m2"], ref.FORMATS["e2m1"],
                 ref.FORMATS["e3m2"], 0x2044, 0x2027, 0x4827):
        f = ref.Fmt(word)
        lad = ref.ladder(word)
        probes = [m for m, _ in lad]
        probes += [(a[0] + b[0]) / 2 for a, b in zip(lad, lad[1:])]
        probes += [ref.f32(m * 1.0001) for m, _ in lad] + [ref.f32(m * 0.9999) for m, _ in lad]
        for a in probes:
            a = ref.f32(a)
            if a > f.max_finite:
                continue
            for rnd in ref.ROUNDINGS:
                for neg in (False, True):
                    assert ref._ladder_round(f, a, neg, rnd) == ref._arith_round(f, a, neg, rnd)


def test_ties_go_to_the_even_code_without_mantissa_bits():
    """§2.5: with m_bits = 0 neighbouring codes differ in the exponent only, so
    "even code" is the rule (0x2828: 9-bit signed powers of two, bias 127)."""
    assert ref.fmt_problem(0x2828) is None
    assert ref.fmt_decode(0x2828, 126) == 0.5 and ref.fmt_decode(0x2828, 127) == 1.0
    assert ref.fmt_encode(0x2828, 0.75) == 126          # tie between codes 126 and 127
    assert ref.fmt_encode(0x2828, 3.0) == 128           # tie between 2.0 (128) and 4.0 (129)
    assert ref.fmt_encode(0x2828, -3.0) == 128 | 0x100


def test_binary16_encode_is_the_ieee_conversion():
    rng = random.Random(7)
    for _ in range(3000):
        x = ref.f32(struct.unpack("<f", struct.pack("<I", rng.getrandbits(32)))[0])
        if x != x or abs(x) > 65504:
            continue
        want = struct.unpack("<H", struct.pack("<e", x))[0]
        assert ref.fmt_encode(ref.FORMATS["binary16"], x) == want, x


def test_exp2_scale_rules_at_the_boundaries():
    """§9.2: floor, ceil and rne of log2(amax) computed from the exponent and
    the significand, never a float log2."""
    def scale(grade_text, amax):
        _, planes = ref.encode(grade_text, [32], [amax] + [0.0] * 31)
        return planes[1][0] - 127 + 2               # floor/ceil/rne(log2 amax)
    floor = "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"
    ceil = "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2ceilmaxabs)"
    rne = "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2rnemaxabs)"
    below, above = ref.bits_f32(0x3FB504F3), ref.bits_f32(0x3FB504F4)   # around sqrt(2)
    assert [scale(floor, x) for x in (1.0, below, above, 2.0)] == [0, 0, 0, 1]
    assert [scale(ceil, x) for x in (1.0, ref.bits_f32(0x3F800001), 2.0)] == [0, 1, 1]
    assert [scale(rne, x) for x in (1.0, below, above, 2.0)] == [0, 0, 1, 1]
    # the clamp: a subnormal amax saturates the shared exponent at -127
    _, planes = ref.encode(floor, [32], [1e-40] + [0.0] * 31)
    assert planes[1] == b"\x00"


def _sparse_desc(order: str):
    text = f"grit1(e=s8,k0=4,s0=binary16,sp=2:4:u2:{order},esr=ratiomaxabs)"
    return text, ref.descriptor_for(text, 0)


def test_unordered_metadata_decode():
    """docs/spec-decisions.md: §10.4 as written for either order -- each quad
    keeps the set of positions its indices name, one cursor hands out stored
    values in ascending logical order across the array (a repeated index shifts
    later quads), unnamed positions are +0."""
    text, desc = _sparse_desc("unord")
    data = bytes([10, 20, 30, 40])                  # quads 0 and 1, two values each
    scale = struct.pack("<e", 1.0)                  # one binary16 per 4 elements
    meta = bytes([(1 << 0) | (1 << 2) | (2 << 4) | (0 << 6)])   # q0 (1, 1), q1 (2, 0)
    bits = ref.decode(desc, [8], [data, scale * 2, b"", meta], grades=[text])
    vals = [struct.unpack("<f", struct.pack("<I", b))[0] for b in bits]
    assert vals == [0.0, 10.0, 0.0, 0.0, 20.0, 0.0, 30.0, 0.0]
    assert ref.check(desc, [8], [data, scale * 2, b"", meta], 2, grades=[text]) == "Ok"
    text2, desc2 = _sparse_desc("asclsb")
    assert ref.check(desc2, [8], [data, scale * 2, b"", meta], 2,
                     grades=[text2]) == "DigestMismatch"
    assert ref.check(desc2, [8], [data, scale * 2, b"", meta], 1, grades=[text2]) == "Ok"


def test_check_is_total_on_arbitrary_descriptors():
    """§14: any 64 bytes, any shape, any plane sizes -> exactly one status."""
    rng = random.Random(14)
    mx = ref.descriptor_for(ref.GRADES["GRADE_MXFP4"], 0)
    for i in range(3000):
        if i % 3 == 0:
            desc = bytes(rng.getrandbits(8) for _ in range(64))
        else:                                       # a few bytes off a real descriptor
            b = bytearray(mx)
            for _ in range(rng.randint(1, 3)):
                b[rng.randrange(64)] = rng.getrandbits(8)
            desc = bytes(b)
        shape = [rng.choice([0, 1, 3, 32, 64, -1, 1 << 62]) for _ in range(rng.randint(0, 9))]
        sizes = [rng.choice([0, 1, 2, 16, 1 << 40]) for _ in range(4)]
        assert ref.check(desc, shape, sizes, 1) in ref.STATUSES
    assert ref.check(bytes(64), [32], [0, 0, 0, 0], 0) == "Ok"      # level 0: erased
    assert ref.check(b"\xff" * 64, [32], [0, 0, 0, 0], 1) == "GradeUnknown"


def test_encode_decode_round_trip_on_registered_grades():
    """decode(encode(v)) is idempotent: re-encoding a decoded array reproduces
    it (the projection is a projection)."""
    rng = random.Random(3)
    for name in ("GRADE_MXFP4", "GRADE_MXFP4_RNE", "GRADE_NVF4", "GRADE_I8S24"):
        vals = [ref.f32(rng.gauss(0, 1)) for _ in range(64)]
        text = ref.GRADES[name]
        desc, planes = ref.encode(text, [64], vals)
        once = ref.decode(desc, [64], planes)
        again = ref.decode(*ref.encode(text, [64], [ref.bits_f32(b) for b in once])[:1],
                           [64], ref.encode(text, [64], [ref.bits_f32(b) for b in once])[1])
        assert once == again, name


# ---------------------------------------------------------------------------
# "the spec says" versus "we decided" (#12 item 14)

def _documented_decision_ids() -> list[str]:
    text = (ROOT / "docs" / "spec-decisions.md").read_text(encoding="utf-8")
    start = text.index("| id | the decision |")
    ids = []
    for line in text[start:].splitlines()[2:]:
        if not line.lstrip().startswith("|"):
            break
        ids.append(line.split("|")[1].strip().strip("`"))
    return ids


def test_decision_ids_are_the_documented_ones(doc):
    documented = _documented_decision_ids()
    assert documented == sorted(documented) and len(documented) == len(set(documented))
    assert tuple(documented) == ref.DECISION_IDS
    used = set()
    for part in ("vectors", "negative", "fingerprint"):
        for v in doc[part]:
            used |= set(v.get("decision", [])) | set(v.get("decision_encode", []))
    assert used == set(documented)      # every id is used, every used id is documented


# The spec-silent choices the issue names, each of which another implementation
# following the text could settle differently (independent of the tables that
# mark them in spec/reference.py).
NAMED_DECISIONS = {
    "size_mismatch/interleaved_separate_planes": "interleaved-flag",
    "digest_mismatch/interleaved_passes_steps_1_to_4": "interleaved-flag",
    "size_mismatch/rank_9": "maxrank",
    "fp/reject/k0_zero": "k0-range",
    "fp/reject/k0_too_large": "k0-range",
    "fp/reject/pairwise1": "ao-pairwise",
    "fp/reject/sp_u2_cannot_address_8": "sp-domain",
    "fp/reject/sp_with_zp": "sp-with-zp",
}


def test_the_named_spec_silent_vectors_say_so(doc):
    every = {v["name"]: v for p in ("vectors", "negative", "fingerprint") for v in doc[p]}
    for name, dec in NAMED_DECISIONS.items():
        assert dec in every[name].get("decision", []), name


def test_a_group_axis_that_is_not_last_is_marked(doc):
    for v in doc["vectors"]:
        ga = struct.unpack_from("<h", bytes.fromhex(v["desc_hex"]), 16)[0]
        assert ("row-major-lin" in v.get("decision", [])) == (ga != len(v["shape"]) - 1), v["name"]


def test_the_text_alone_still_covers_every_status_and_registered_grade(doc):
    plain = [v for v in doc["vectors"] if not v.get("decision")]
    assert {"GRADE_MXFP4", "GRADE_MXFP4_RNE", "GRADE_Q4KS", "GRADE_NVF4", "GRADE_NVF4_RTZ",
            "GRADE_I8S24"} <= {v["grade"] for v in plain}
    assert {v["expected_error"] for v in doc["negative"] if not v.get("decision")} == {
        "SizeMismatch", "GradeUnknown", "PlacementUnknown", "DigestMismatch"}
    assert sum(not v.get("decision") for v in doc["fingerprint"]) >= 30


def test_verify_spec_only_skips_exactly_the_decided_parts(doc):
    counts, errors = ref.verify(doc, spec_only=True)
    assert errors == []
    whole = sum(bool(v.get("decision")) for p in ("vectors", "negative", "fingerprint")
                for v in doc[p])
    enc = sum(bool(v.get("decision_encode")) and not v.get("decision") for v in doc["vectors"])
    assert (counts["decided"], counts["decided_encode"]) == (whole, enc)
    assert whole > 0 and enc > 0


def test_spec_only_tolerates_another_settlement_and_nothing_else(doc):
    """An implementation that settles a decided point the other way passes
    --spec-only and fails the full suite; a wrong answer where the text
    speaks fails both."""
    import copy
    other = copy.deepcopy(doc)
    rank9 = next(v for v in other["negative"] if v["name"] == "size_mismatch/rank_9")
    rank9["expected_error"] = "Ok"              # say, an implementation with MAXRANK 16
    gptq = next(v for v in other["vectors"] if v["name"] == "x/gptq4/random_normal_s64_64")
    gptq["input_f32"][0] = 0.125                # its encode rests on gptq-affine only
    assert ref.verify(other, spec_only=True)[1] == []
    assert len(ref.verify(other)[1]) >= 2
    bad = copy.deepcopy(doc)
    trunc = next(v for v in bad["negative"] if v["name"] == "size_mismatch/truncated_data_plane")
    trunc["expected_error"] = "Ok"
    assert ref.verify(bad, spec_only=True)[1] != []


def test_verify_spec_only_on_the_command_line():
    out = subprocess.run([sys.executable, str(REF_PATH), "verify", "--spec-only"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "spec only:" in out.stdout and out.stdout.rstrip().endswith("all ok")


# Two vectors pinning the arithmetic of #12 items 9 and 12, their payloads
# derived by hand from the text (and GPTQ's quantizer), not read from the file.
HAND_DERIVED = {
    # lo = -1.5, hi = 6: S = binary16(7.5 / 15) = 0.5 (0x3800), z = rne(1.5 / 0.5) = 3;
    # q = clamp(rne(v / S) + z): -1.5 -> 0, 6 -> 15, 0.25 -> rne(0.5) + 3 = 3,
    # 1.25 -> rne(2.5) + 3 = 5, 0.75 -> rne(1.5) + 3 = 5, 0 -> 3 (adding z before
    # rounding would give 4, 6, 4 for the three ties).  u4 LSB-first pairs:
    # (0, 15) f0, (3, 5) 53, (5, 3) 35, then 33; scale 00 38; zero point 03 (PAD8).
    "x/gptq4/ties_round_before_zero_point": "f0" "53" "35" + "33" * 13 + "0038" + "03",
    # group 0 holds NaN: scale0 = E4M3 NaN 7f, codes 0 (§9.1 rule 2, whatever es);
    # group 1: amax 6, S = e4m3(6 / 6) = 1.0 (0x38); e2m1 codes 1 -> 2, 2 -> 4,
    # 3 -> 5, 6 -> 7: bytes 00 00 42 75, scales 7f 38.
    "x/ratio_ovfinf/poison": "00004275" "7f38",
}


@pytest.mark.parametrize("name", sorted(HAND_DERIVED))
def test_hand_derived_arithmetic_vectors(by_name, name):
    assert by_name[name]["payload_hex"] == HAND_DERIVED[name]
