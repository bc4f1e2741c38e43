"""The output end of grit scan (grit.scan.output): the JSON report against its
shipped JSON Schema, the finding record (``code``, ``tensor``, ``role``,
``consequences``, ``fingerprint``), the typed Python API, the markdown
report, baselines and the ``[tool.grit.scan]`` settings."""
from __future__ import annotations

import io
import json
import os
import re
import runpy

import pytest
from click.testing import CliRunner

import grit
from grit.cli import main
from grit.scan import output as O
from grit.scan.collect import ScannedFile
from grit.scan.findings import REGISTRY, Finding, Severity
from grit.scan.output.record import ByteRange, Record, identity

jsonschema = pytest.importorskip("jsonschema")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SARIF_SCHEMA = os.path.join(ROOT, "tests", "sarif", "sarif-schema-2.1.0.json")
R = CliRunner()


def cli(*args) -> tuple[int, str]:
    r = R.invoke(main, ["scan", *map(str, args)])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    return r.exit_code, r.output


@pytest.fixture(scope="module")
def ex(tmp_path_factory):
    out = tmp_path_factory.mktemp("examples")
    runpy.run_path(os.path.join(ROOT, "scripts", "make_examples.py"))["main"](str(out))
    return out


@pytest.fixture(scope="module")
def validator():
    schema = O.schema()
    cls = jsonschema.Draft202012Validator
    cls.check_schema(schema)
    return cls(schema)


@pytest.fixture(scope="module")
def line_validator():
    return jsonschema.Draft202012Validator(O.schema(lines=True))


def _errors(v, doc) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in v.iter_errors(doc)][:5]


# ---------------------------------------------------------------------------
# the JSON Schema, against real reports


def test_the_schema_ships_in_the_package():
    import importlib.resources
    text = importlib.resources.files("grit.scan.output").joinpath("schema.json").read_text()
    assert json.loads(text)["$schema"].startswith("https://json-schema.org/draft/2020-12")
    assert O.schema()["$defs"]["report"]["properties"]["version"] == {"const": O.SCHEMA_VERSION}


def test_json_and_jsonl_reports_are_valid(ex, validator, line_validator):
    _, out = cli("--format", "json", "--deep", ex)
    doc = json.loads(out)
    assert not _errors(validator, doc)
    assert len(doc["findings"]) > 10
    _, out = cli("--format", "jsonl", "--deep", ex)
    lines = [json.loads(ln) for ln in out.splitlines()]
    for ln in lines:
        assert not _errors(line_validator, ln), ln
    assert [ln["type"] for ln in lines] == ["finding"] * (len(lines) - 1) + ["summary"]
    # the schema does catch a broken report (the test can fail)
    for breakage in (lambda d: d["findings"][0].pop("code"),
                     lambda d: d["findings"][0].__setitem__("tensor", ["a", "b"]),
                     lambda d: d["findings"][0]["detail"].__setitem__("byte_range", {"offset": -1}),
                     lambda d: d["findings"][0].__setitem__("consequences", [{"code": "S1"}])):
        bad = json.loads(json.dumps(doc))
        breakage(bad)
        assert _errors(validator, bad)


def test_every_finding_has_its_code_on_top_and_a_tensor_name_or_null(ex):
    _, out = cli("--format", "json", "--deep", ex)
    doc = json.loads(out)
    seen_roles = 0
    for f in doc["findings"]:
        assert f["code"] in REGISTRY
        assert REGISTRY[f["code"]].category.value == f["category"]
        assert "finding_code" not in f["detail"]
        t = f["tensor"]
        assert t is None or not re.match(r"^\d+ tensors: ", t), f
        if f["code"] in ("S301", "S302"):          # grade drift names a role, not a tensor
            assert t is None and isinstance(f["role"], str)
            seen_roles += 1
        if "label" in f:                            # several tensors: every name listed
            assert t is None and f["label"].startswith(f"{len(f['detail']['tensors'])} tensors")
    assert seen_roles


def test_s156_names_a_file_that_exists(ex):
    _, out = cli("--format", "json", ex / "sharded")
    (f,) = [x for x in json.loads(out)["findings"] if x["code"] == "S156"]
    assert os.path.isfile(f["file"]) and f["file"].endswith("-of-00002.safetensors")


# ---------------------------------------------------------------------------
# consequences: a root-cause finding and the findings it absorbed


def _rooted(tmp_path) -> O.ScanReport:
    a = str(tmp_path / "model-00001-of-00002.safetensors")
    b = str(tmp_path / "model-00002-of-00002.safetensors")
    root = Finding("S156", b, None, "1 of 2 shards are short: 10 bytes missing in all",
                   ("model-00002-of-00002.safetensors: 10 bytes missing",),
                   {"missing": 10})
    root.consequences = [
        Finding("S127", b, "w.cut", "tensor 'w.cut' runs past the end of the file",
                detail={"byte_range": {"offset": 100, "length": 50}}),
        Finding("S127", b, "w.cut2", "tensor 'w.cut2' runs past the end of the file")]
    return O.ScanReport([ScannedFile(a, "safetensors", a, True, 1, 1),
                         ScannedFile(b, "safetensors", a, True, 2, 2)], [root])


def test_consequences_in_every_form(tmp_path, validator, line_validator):
    rep = _rooted(tmp_path)
    # JSON: a nested list of findings, each a whole finding record
    doc = rep.to_dict()
    assert not _errors(validator, doc)
    (f,) = doc["findings"]
    assert [c["code"] for c in f["consequences"]] == ["S127", "S127"]
    assert f["consequences"][0]["tensor"] == "w.cut" and f["consequences"][0]["consequences"] == []
    assert f["consequences"][0]["detail"]["byte_range"] == {"offset": 100, "length": 50}
    # JSON Lines
    buf = io.StringIO()
    O.write_jsonl(rep, "graded", file=buf)
    first = json.loads(buf.getvalue().splitlines()[0])
    assert not _errors(line_validator, first)
    assert first["consequences"] == f["consequences"]
    # SARIF: valid against the official schema, the nested list a result property
    log = O.to_sarif(rep)
    sv = jsonschema.validators.validator_for(json.load(open(SARIF_SCHEMA)))
    assert not list(sv(json.load(open(SARIF_SCHEMA))).iter_errors(log))
    (res,) = log["runs"][0]["results"]
    assert res["properties"]["consequences"] == f["consequences"]
    assert res["partialFingerprints"]["gritFinding/v1"] == f["fingerprint"]
    # text: listed under the root finding, further in
    buf = io.StringIO()
    O.render(rep, "graded", file=buf)
    text = buf.getvalue()
    root_at = text.index("S156 Truncated")
    head = text.index("2 findings this one explains:")
    cons = [m.start() for m in re.finditer(r"S127 Truncated", text)]
    assert root_at < head < cons[0] < cons[1]
    for line in text.splitlines():
        if "S127 Truncated" in line:
            assert line.startswith("      ")          # two levels in (the root: two spaces)
    # markdown
    buf = io.StringIO()
    O.write_markdown(rep, "graded", file=buf)
    md = buf.getvalue()
    assert md.index("S156") < md.index("S127") and "w.cut2" in md


# ---------------------------------------------------------------------------
# the Python API


def test_grit_scan_returns_a_typed_report(ex):
    rep = grit.scan([str(ex / "wrong-group-size.safetensors")])
    assert isinstance(rep, grit.scan.Report)
    (r,) = rep.records()
    assert isinstance(r, Record)
    assert (r.code, r.severity, r.status) == ("S101", Severity.STRUCTURAL, "SizeMismatch")
    assert r.file == str(ex / "wrong-group-size.safetensors")
    assert r.tensor == "encoder.layers.0.fc1.weight" and r.role is None
    # the byte range, against the file's own header (read here by hand)
    raw = (ex / "wrong-group-size.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    hdr = json.loads(raw[8:8 + n])
    spans = [v["data_offsets"] for k, v in hdr.items() if k != "__metadata__"]
    assert isinstance(r.byte_range, ByteRange)
    assert r.byte_range.offset == 8 + n + min(s[0] for s in spans)
    assert r.byte_range.length == sum(s[1] - s[0] for s in spans)
    assert set(r.byte_range.planes) == {"data", "scale0"}
    assert "scale0 plane" in r.message
    assert rep.exit_code() == 1 and rep.exit_code("simple") == 1
    with pytest.raises(AttributeError):
        r.code = "S102"                              # frozen


def test_identity_ignores_the_message_and_the_working_directory(tmp_path, monkeypatch):
    p = str(tmp_path / "m.safetensors")
    a = Finding("S101", p, "w", "scale0 plane is 64 bytes; descriptor requires 128.")
    b = Finding("S101", p, "w", "scale0 plane is 32 bytes; descriptor requires 128.")
    monkeypatch.chdir(tmp_path)
    assert identity(a) == identity(b) == {"code": "S101", "file": "m.safetensors",
                                          "subject": "w"}
    c = Finding("S101", "m.safetensors", "w", "another message")
    assert Record.of(c).fingerprint == Record.of(a).fingerprint
    assert Record.of(Finding("S101", p, "v", "m")).fingerprint != Record.of(a).fingerprint
