"""The registry of ``grit scan`` finding codes: one table from which ``grit
explain CODE``, the JSON report and docs/scan.md come; the closed sets
(category, severity, status) as enums that serialise as before."""
from __future__ import annotations

import json
import os
import re
import runpy

import pytest
from click.testing import CliRunner

from grit.cli import main
from grit.errors import Status
from grit.scan import CATEGORIES, SEVERITY, scan
from grit.scan import docs as scan_docs
from grit.scan.output.record import Record
from grit.scan.findings import (CHECK_CODES, REGISTRY, Category, Finding, ScanKind, Severity,
                                explain, status_name)

R = CliRunner()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCAN_SRC = os.path.join(ROOT, "grit", "scan")
CONVENTIONS_SRC = os.path.join(ROOT, "grit", "conventions")


@pytest.fixture(scope="module")
def ex(tmp_path_factory):
    out = tmp_path_factory.mktemp("examples")
    runpy.run_path(os.path.join(ROOT, "scripts", "make_examples.py"))["main"](str(out))
    return out


def test_docs_section_is_the_registry_rendered():
    with open(os.path.join(ROOT, "docs", "scan.md"), encoding="utf-8") as f:
        text = f.read()
    assert scan_docs.section(text) == scan_docs.render(), (
        "docs/scan.md's finding codes are stale: run python -m grit.scan.docs docs/scan.md")
    for code in REGISTRY:
        assert f"#### {code}\n" in text


def test_write_regenerates_only_the_marked_section(tmp_path):
    p = tmp_path / "scan.md"
    p.write_text(f"intro\n\n{scan_docs.BEGIN}\nold text\n{scan_docs.END}\n\ntail\n")
    assert scan_docs.write(str(p)) is True
    text = p.read_text()
    assert text.startswith("intro\n\n") and text.endswith(f"{scan_docs.END}\n\ntail\n")
    assert scan_docs.section(text) == scan_docs.render()
    assert scan_docs.write(str(p)) is False


def test_codes_are_consistent():
    order = list(Category)
    assert len(REGISTRY) >= 30
    for code, s in REGISTRY.items():
        assert re.fullmatch(r"S[1-8]\d\d", code) and s.code == code
        # the hundreds digit is the §13 item: the category's place in the report
        assert int(code[1]) == order.index(s.category) + 1, code
        assert isinstance(s.severity, Severity) and s.severity is not Severity.UNPARSED
        assert s.status is None or isinstance(s.status, (Status, ScanKind))
        assert s.status is not Status.OK
        assert s.title and s.what and s.why and s.fix
    # the dynamic status is only for the deep content check
    assert [c for c, s in REGISTRY.items() if s.status is None] == ["S501"]
    for st, code in CHECK_CODES.items():
        assert REGISTRY[code].status is st and REGISTRY[code].category is Category.STRUCTURAL


def test_every_code_is_emitted_and_every_emitted_code_is_registered():
    used: set[str] = set()
    # scan's own modules, and the conventions whose config checks emit findings
    for src in (SCAN_SRC, CONVENTIONS_SRC):
        for name in os.listdir(src):
            if name.endswith(".py") and name not in ("findings.py", "docs.py"):
                with open(os.path.join(src, name), encoding="utf-8") as f:
                    used |= set(re.findall(r'"(S\d{3})"', f.read()))
    used |= set(CHECK_CODES.values())
    assert used == set(REGISTRY), (sorted(used - set(REGISTRY)), sorted(set(REGISTRY) - used))


def test_two_kinds_of_status_never_share_a_name():
    spec = {s.spec_name for s in Status}
    assert not spec & {k.value for k in ScanKind}
    assert status_name(Status.SIZE_MISMATCH) == "SizeMismatch"
    assert status_name(ScanKind.ROLE_DRIFT) == "RoleDrift"


def test_enums_serialise_as_the_strings_and_ints_of_the_report():
    assert [c.value for c in CATEGORIES] == ["structural", "cross-file", "drift",
                                             "escape-hatch", "deep", "inferred",
                                             "inexpressible", "unreadable"]
    assert set(CATEGORIES) == {c.value for c in Category}          # str-valued
    assert {int(s): n for s, n in SEVERITY.items()} == {
        1: "structural", 2: "disagreement", 3: "warning", 4: "unparsed", 5: "note"}
    assert f"{Category.CROSS_FILE}" == str(Category.CROSS_FILE) == "cross-file"
    f = Finding("S126", "a.safetensors", "w", "overlap")
    assert f.category == "structural" and f.severity == 1 and f.status == "Overlap"
    assert f.kind is ScanKind.OVERLAP
    text = json.dumps(Record.of(f).to_dict())
    assert '"category": "structural"' in text and '"severity": 1' in text
    assert '"status": "Overlap"' in text and '"code": "S126"' in text
    with pytest.raises(ValueError):
        Finding("S101", None, None, "m", kind=Status.GRADE_UNKNOWN)   # S101 is SizeMismatch
    with pytest.raises(ValueError):
        Finding("S501", None, None, "m")                              # needs the check's status
    assert Finding("S501", None, None, "m", kind=Status.DIGEST_MISMATCH).status == \
        "DigestMismatch"


def test_json_findings_carry_their_code(ex, tmp_path):
    (tmp_path / "empty").mkdir()
    for paths, deep in (([str(ex)], True), ([str(tmp_path / "empty")], False)):
        doc = scan(paths, deep=deep).to_dict()
        assert doc["findings"]
        for f in doc["findings"]:
            spec = REGISTRY[f["code"]]
            assert f["category"] == spec.category.value
            if spec.status is not None:
                assert f["status"] == status_name(spec.status)
            nothing_parsed = doc["summary"]["parsed"] == 0
            assert f["severity"] == (4 if nothing_parsed else int(spec.severity))


def test_human_table_shows_codes(ex):
    r = R.invoke(main, ["scan", str(ex / "wrong-group-size.safetensors")])
    assert r.exit_code == 1 and "S101" in r.output and "grit explain CODE" in r.output


def test_explain_code_cli():
    r = R.invoke(main, ["explain", "S101"])
    assert r.exit_code == 0 and r.output.strip() == explain("S101")
    assert r.output.startswith("S101 SizeMismatch — structural, severity 1")
    for part in ("What it means:", "Why it matters:", "Fix:"):
        assert part in r.output
    assert R.invoke(main, ["explain", "s302"]).output.strip() == explain("S302")
    doc = json.loads(R.invoke(main, ["explain", "--json", "S501"]).output)
    assert doc["code"] == "S501" and doc["category"] == "deep" and doc["status"] is None
    assert doc["severity"] == 1 and doc["fix"]
    # the other forms still work
    assert "What it means" in R.invoke(main, ["explain", "SizeMismatch"]).output
    r = R.invoke(main, ["explain", "S999"])
    assert r.exit_code != 0 and "finding code" in r.output
    assert R.invoke(main, ["explain", "GRADE_MXFP4", "GRADE_MXFP4_RNE"]).exit_code == 1
