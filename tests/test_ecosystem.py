"""The ecosystem's names of grades (grit.ecosystem) and ``grit grade NAME``:
the names whose grade the spec pins (Appendix A.1) resolve to it; every
ggml name's grade groups the elements gguf-py says its block holds; the OCP
MX names carry the MX v1.0 block (32 elements, one E8M0 scale); families
need their group size; the docs' table lists every name."""
from __future__ import annotations

import json
import pathlib
import re

import pytest
from click.testing import CliRunner

import grit
from grit.cli import main
from grit.ecosystem import GGML_PREFIX, NAMES, grade_named, lookup_name, names_of
from grit.errors import GritUsageError
from grit.ggml import TYPES

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name,grade", [
    ("q4_k", grit.GRADE_Q4KS), ("Q4_K", grit.GRADE_Q4KS), ("ggml:q4_k", grit.GRADE_Q4KS),
    ("mxfp4", grit.GRADE_MXFP4), ("MXFP4", grit.GRADE_MXFP4), ("ggml:MXFP4", grit.GRADE_MXFP4),
    ("mxfp4-pack-quantized", grit.GRADE_MXFP4),
    ("nvfp4", grit.GRADE_NVF4), ("NVFP4", grit.GRADE_NVF4),
    ("nvfp4-pack-quantized", grit.GRADE_NVF4), ("GRADE_NVF4", grit.GRADE_NVF4),
    ("nvf4", grit.GRADE_NVF4),
])
def test_pinned_grades_by_their_ecosystem_names(name, grade):
    assert grade_named(name) == grade
    assert grade_named(name).id == grade.id


def test_ggml_names_group_what_gguf_py_says_a_block_holds():
    gguf = pytest.importorskip("gguf")
    for name in TYPES:
        g = grade_named(GGML_PREFIX + name)
        k0, k1 = int(g["k0"]), int(g["k1"] or 0)
        block_elems, _ = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name]]
        # a block holds whole groups; a super-block (k1 > 1) is the block
        assert block_elems % (k0 * max(k1, 1)) == 0, name
        assert k1 <= 1 or k0 * k1 == block_elems, name
        assert GGML_PREFIX + name in names_of(g) or name in names_of(g)


def test_ggml_nvfp4_is_the_blocks_alone():
    one = grade_named("ggml:nvfp4")
    assert one["s1"] is None and one["k0"] == "16" and one["s0"] == "e4m3"
    assert grade_named("nvfp4")["s1"] == "binary32"
    assert names_of(one) == ["ggml:NVFP4"]


@pytest.mark.parametrize("name,e", [("mxfp8", "e4m3"), ("MXFP8_E4M3", "e4m3"),
                                    ("mxfp8_e5m2", "e5m2"), ("mxfp6_e2m3", "e2m3"),
                                    ("mxfp6_e3m2", "e3m2"), ("mxfp8-quantized", "e4m3")])
def test_ocp_mx_names(name, e):
    # OCP MX v1.0, table 1: 32 elements share one E8M0 scale
    g = grade_named(name)
    assert (g["e"], g["k0"], g["s0"], g["s1"]) == (e, "32", "e8m0", None)


def test_families_take_their_group_size():
    g = grade_named("fp8(k0=4096)")
    assert (g["e"], g["k0"], g["s0"]) == ("e4m3", "4096", "binary32")
    assert grade_named("FP8_E4M3(k0=4096)") == grade_named("e4m3(k0=4096)") == g
    assert names_of(g) == ["FP8(k0=4096)"]
    h = grade_named("int8( k0=128 , s0=binary16 )")
    assert (h["e"], h["k0"], h["s0"], h["zp"]) == ("s8", "128", "binary16", None)
    assert "INT8(k0=128,s0=binary16)" in names_of(h)
    assert grade_named("w4a16(k0=128)")["zp"] == "u4"
    # ggml's Q8_0 is the INT8 family at k0=32 with binary16 scales
    assert names_of(grade_named("q8_0")) == ["Q8_0", "INT8(k0=32,s0=binary16)"]
    with pytest.raises(GritUsageError, match=r"group size from the tensor.*fp8\(k0=4096\)"):
        grade_named("fp8")
    for bad in ("q4_k(k0=32)", "fp8(k0=x)", "fp8(k1=3)", "fp8(k0=1,k0=2)", "no-such-format",
                "fp8(k0=4096"):
        with pytest.raises(GritUsageError):
            grade_named(bad)


def test_grade_strings_and_registered_names_still_resolve():
    text = "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"
    assert grade_named(text) == grit.GRADE_MXFP4 == grade_named("GRADE_MXFP4")
    assert grade_named("mxfp4_rne") == grit.GRADE_MXFP4_RNE
    assert lookup_name("no-such") is None


def test_grit_grade_accepts_ecosystem_names():
    r = CliRunner().invoke(main, ["grade", "--json", "q4_k"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["grade_id"] == "0x1C600DE02594FB55" and doc["name"] == "GRADE_Q4KS"
    assert doc["known_as"] == ["Q4_K"]
    r = CliRunner().invoke(main, ["grade", "nvfp4"])
    assert r.exit_code == 0 and "0x00FF6F4C2870831E" in r.output and "NVFP4" in r.output
    r = CliRunner().invoke(main, ["grade", "fp8(k0=128)"])
    assert r.exit_code == 0 and "e=e4m3,k0=128,s0=binary32" in r.output
    r = CliRunner().invoke(main, ["grade", "fp8"])
    assert r.exit_code == 2 and "group size" in r.output


def test_the_docs_table_lists_every_name():
    text = (ROOT / "docs" / "info.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]*) \| ([^|]*) \| `([^`]+)` \|$", text, re.M)
    listed = {name.lower(): (aliases, grade) for name, aliases, _src, grade in rows}
    records = {id(r): r for r in NAMES.values()}.values()
    assert set(listed) == {r.name.lower() for r in records}
    for r in records:
        aliases, grade = listed[r.name.lower()]
        assert grade == (r.grade_text or r.template), r.name
        assert sorted(a.strip(" `") for a in aliases.split(",") if a.strip()) == \
            sorted(r.aliases), r.name
