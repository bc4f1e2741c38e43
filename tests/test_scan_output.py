"""The output end of grit scan (grit.scan.output): the JSON report against its
shipped JSON Schema, the finding record (``code``, ``tensor``, ``role``,
``consequences``, ``fingerprint``), the typed Python API, the markdown
report, baselines and the ``[tool.grit.scan]`` settings."""
from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import runpy

import numpy as np

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


# ---------------------------------------------------------------------------
# --format markdown


def test_markdown_report(ex, tmp_path):
    code, md = cli("--format", "markdown", ex)
    assert code == 1
    assert md.startswith("### grit scan — exit 1: structural violations\n")
    rows = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert rows[0] == "| severity | code | file | tensor | finding |"
    _, doc = cli("--format", "json", ex)
    findings = json.loads(doc)["findings"]
    def count(fs):
        return sum(1 + count(f["consequences"]) for f in fs)
    assert len(rows) - 1 == count(findings)          # a row per finding and consequence
    top = [r for r in rows[1:] if not r.startswith("| ↳")]
    assert len(top) == len(findings)                 # in report order
    for row, f in zip(top, findings):
        assert row.startswith(f"| {f['severity']} ") and f"| {f['code']} {f['status']} |" in row
        # every cell of the row is one cell: no | of a name or message escapes it
        assert len(re.findall(r"(?<!\\)\|", row)) == 6
    # -o OUT.md names the format
    out = tmp_path / "scan.md"
    cli("-o", out, ex / "wrong-group-size.safetensors")
    assert out.read_text().startswith("### grit scan — exit 1")


def test_markdown_escapes_what_a_file_names():
    f = Finding("S101", "/m/a|b.safetensors", "w[x](javascript:1)<img src=x>*_`|",
                "SizeMismatch: data plane is 1 bytes\n| forged | row |")
    rep = O.ScanReport([ScannedFile("/m/a|b.safetensors", "safetensors", "/m/a|b.safetensors",
                                    True, 1, 1)], [f])
    buf = io.StringIO()
    O.write_markdown(rep, "graded", file=buf)
    md = buf.getvalue()
    (row,) = [ln for ln in md.splitlines() if "S101" in ln]
    assert "<img" not in md and "&lt;img" in row
    assert "\\[x\\](javascript:1)" in row               # no link
    assert len(re.findall(r"(?<!\\)\|", row)) == 6
    assert "forged" in row and not any(ln.startswith("| forged") for ln in md.splitlines())


def test_markdown_caps_its_rows():
    fs = [Finding("S101", "/m/x.safetensors", f"w{i}", "m") for i in range(30)]
    rep = O.ScanReport([ScannedFile("/m/x.safetensors", "safetensors", "/m/x.safetensors",
                                    True, 30, 30)], fs)
    buf = io.StringIO()
    O.write_markdown(rep, "graded", file=buf, max_rows=10)
    md = buf.getvalue()
    assert sum(ln.startswith("| 1 structural") for ln in md.splitlines()) == 10
    assert "… and 20 more findings not listed here" in md


# ---------------------------------------------------------------------------
# baselines


def _bad_file(path, cut: int, name="w") -> None:
    """A GRIT safetensors file whose last tensor's data plane is ``cut``
    bytes short (S101 on it, with the numbers in its message)."""
    a = grit.encode(np.ones((4, 64), np.float32), grit.GRADE_MXFP4)
    grit.save(str(path), {"a": a, name: a})
    os.truncate(path, os.path.getsize(path) - cut)


def test_baseline_counts_only_new_findings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ckpt").mkdir()
    _bad_file(tmp_path / "ckpt" / "old.safetensors", 10)
    code, _ = cli("--write-baseline", "grit-baseline.json", "ckpt")
    assert code == 0                                   # what it records is then known
    doc = json.loads((tmp_path / "grit-baseline.json").read_text())
    assert doc["version"] == 1
    s101 = {"code": "S101", "file": "ckpt/old.safetensors", "subject": "w"}
    assert s101 in doc["findings"]                     # relative to the working directory
    # the same problem with other numbers in its message is still known
    os.truncate("ckpt/old.safetensors", os.path.getsize("ckpt/old.safetensors") - 3)
    code, out = cli("--baseline", "grit-baseline.json", "--format", "json", "ckpt")
    rep = json.loads(out)
    assert code == 0 and rep["findings"] == [] and rep["baseline"]["known"] >= 1
    assert rep["exit_code"] == 0 and rep["summary"]["known"] == rep["baseline"]["known"]
    # a new finding is shown as new, and fails
    _bad_file(tmp_path / "ckpt" / "new.safetensors", 10, name="v")
    code, out = cli("--baseline", "grit-baseline.json", "--format", "json", "ckpt")
    rep = json.loads(out)
    assert code == 1
    assert {(f["code"], f["file"], f["tensor"]) for f in rep["findings"]} >= {
        ("S101", "ckpt/new.safetensors", "v")}
    assert all(f["file"] == "ckpt/new.safetensors" for f in rep["findings"])
    assert rep["baseline"] == {"file": "grit-baseline.json", "known": doc["findings"].__len__(),
                               "new": len(rep["findings"])}
    # SARIF marks what it lists as new (against the official schema)
    code, out = cli("--baseline", "grit-baseline.json", "--format", "sarif", "ckpt")
    log = json.loads(out)
    schema = json.load(open(SARIF_SCHEMA))
    assert not list(jsonschema.validators.validator_for(schema)(schema).iter_errors(log))
    assert {r["baselineState"] for r in log["runs"][0]["results"]} == {"new"}
    # the text report says how many were known
    code, out = cli("--baseline", "grit-baseline.json", "ckpt")
    assert "new.safetensors" in out and "old.safetensors" not in out
    assert f"baseline grit-baseline.json: {len(doc['findings'])} known finding" in out


def test_a_baseline_is_counted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fs = [Finding("S154", "x.safetensors", "t", "in two shards") for _ in range(3)]
    rep = O.ScanReport([ScannedFile("x.safetensors", "safetensors", "x.safetensors",
                                    True, 1, 1)], fs[:2])
    O.write_baseline(rep, "b.json")
    after = O.apply_baseline(dataclasses.replace(rep, findings=fs), "b.json")
    assert len(after.known) == 2 and len(after.findings) == 1 and after.exit_code() == 1


def test_a_bad_baseline_is_a_usage_error(tmp_path, monkeypatch, ex):
    monkeypatch.chdir(tmp_path)
    for text in ("not json", '{"version": 9, "findings": []}',
                 '{"version": 1, "findings": [{"code": "S101"}]}'):
        (tmp_path / "b.json").write_text(text)
        r = R.invoke(main, ["scan", "--baseline", "b.json", str(ex / "clean")])
        assert r.exit_code == 2 and "b.json" in r.output, r.output
    r = R.invoke(main, ["scan", "--baseline", "absent.json", str(ex / "clean")])
    assert r.exit_code == 2 and "absent.json" in r.output


# ---------------------------------------------------------------------------
# settings: [tool.grit.scan] / .grit.toml


def _project(tmp_path) -> None:
    (tmp_path / "models" / "vendor").mkdir(parents=True)
    _bad_file(tmp_path / "models" / "a.safetensors", 10)
    _bad_file(tmp_path / "models" / "vendor" / "b.safetensors", 10)


def _codes_files(out: str) -> set[tuple[str, str]]:
    return {(f["code"], os.path.normpath(f["file"])) for f in json.loads(out)["findings"]}


def test_settings_from_pyproject_found_walking_up(tmp_path, monkeypatch):
    _project(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.grit.scan]\nformat = "json"\n'
        'per-file-ignores = { "models/vendor/**" = ["S1"] }\n')
    monkeypatch.chdir(tmp_path / "models")             # a folder below the project's
    code, out = cli(".")
    got = _codes_files(out)                            # format = json
    assert ("S101", "a.safetensors") in got
    assert not any("vendor" in f for _, f in got)      # ignored by the glob
    assert json.loads(out)["summary"]["suppressed"] >= 1 and code == 1
    # the flags override the file
    code, out = cli("--format", "jsonl", ".")
    assert json.loads(out.splitlines()[-1])["type"] == "summary"
    code, out = cli("--isolated", "--format", "json", ".")
    assert any("vendor" in f for _, f in _codes_files(out))


def test_grit_toml_select_ignore_and_exit_policy(tmp_path, monkeypatch):
    _project(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.grit.scan]\nformat = "markdown"\n')
    (tmp_path / ".grit.toml").write_text(      # .grit.toml wins over pyproject.toml
        '[scan]\nformat = "json"\nignore = ["S101"]\nexit-policy = "simple"\n')
    monkeypatch.chdir(tmp_path)
    code, out = cli("models")
    assert not any(c == "S101" for c, _ in _codes_files(out))
    assert json.loads(out)["exit_policy"] == "simple"
    code, out = cli("--select", "S1", "--ignore", "S7", "models")   # flags replace the lists
    assert {c for c, _ in _codes_files(out)} == {"S101"} and code == 1   # simple: 1
    code, out = cli("--fail-on", "warning", "models")   # replaces the file's exit-policy
    assert json.loads(out)["exit_policy"] == "fail-on warning"


def test_settings_errors_are_usage_errors(tmp_path, monkeypatch, ex):
    monkeypatch.chdir(tmp_path)
    r = R.invoke(main, ["scan", "--ignore", "S9", str(ex / "clean")])
    assert r.exit_code == 2 and "--ignore: 'S9' is no finding code" in r.output
    for text, words in (('[scan]\nselect = ["X9"]\n', "no finding code"),
                        ('[scan]\nfrobnicate = 1\n', "unknown key 'frobnicate'"),
                        ('[scan]\nexit-policy = "simple"\nfail-on = "warning"\n', "replaces"),
                        ('[scan\n', "not TOML"),
                        ('[scan]\nformat = "html"\n', "format must be one of")):
        (tmp_path / ".grit.toml").write_text(text)
        r = R.invoke(main, ["scan", str(ex / "clean")])
        assert r.exit_code == 2 and words in r.output, (text, r.output)


def test_per_file_ignore_globs():
    from grit.scan.output.settings import _glob
    assert _glob("models/**/*.gguf").fullmatch("models/a/b/c.gguf")
    assert _glob("models/**/*.gguf").fullmatch("models/c.gguf")
    assert not _glob("models/*.gguf").fullmatch("models/a/c.gguf")
    assert _glob("shard-0000[1-3].safetensors").fullmatch("shard-00002.safetensors")
    assert not _glob("shard-0000[1-3].safetensors").fullmatch("shard-00004.safetensors")


def test_a_record_of_names_that_are_not_utf8(tmp_path):
    """A name carrying a byte that is not UTF-8 (surrogateescape) or a lone
    surrogate from a header's JSON still has a record, a fingerprint and a
    JSON form that is valid UTF-8."""
    f = Finding("S101", "/m/\udcff.safetensors", "w\ud800", "m")
    r = Record.of(f, str(tmp_path))
    assert re.fullmatch(r"[0-9a-f]{16}", r.fingerprint)
    assert r.fingerprint != Record.of(Finding("S101", "/m/\udcfe.safetensors", "w\ud800", "m"),
                                      str(tmp_path)).fingerprint
    rep = O.ScanReport([ScannedFile(f.file, "safetensors", f.file, True, 1, 1)], [f])
    buf = io.StringIO()
    O.write_json(rep, "graded", file=buf)
    buf.getvalue().encode("utf-8")                       # no lone surrogate written


def test_fingerprints_do_not_collide_on_how_parts_are_split():
    from grit.scan.output.record import fingerprint
    a = fingerprint({"code": "S101", "file": "a", "subject": "b:c"})
    b = fingerprint({"code": "S101", "file": "a:b", "subject": "c"})
    c = fingerprint({"code": "S101", "file": "a", "subject": ["b:c"]})
    d = fingerprint({"code": "S101", "file": "a", "subject": None})
    assert len({a, b, c, d}) == 4


def test_config_names_the_settings_file(tmp_path, monkeypatch):
    _project(tmp_path)
    (tmp_path / ".grit.toml").write_text('[scan]\nformat = "markdown"\n')   # passed by
    (tmp_path / "ci.toml").write_text('[scan]\nformat = "json"\nselect = ["S7"]\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text(
        '[tool.grit.scan]\nformat = "jsonl"\nexit-policy = "simple"\n')
    monkeypatch.chdir(tmp_path)
    code, out = cli("--config", "ci.toml", "models")
    doc = json.loads(out)
    assert doc["findings"] == [] and doc["summary"]["suppressed"] >= 1 and code == 0
    code, out = cli("--config", "sub/pyproject.toml", "models")
    assert json.loads(out.splitlines()[-1])["exit_policy"] == "simple" and code == 1
    code, out = cli("models")
    assert out.startswith("### grit scan")                # the file found walking up
