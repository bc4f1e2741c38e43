"""The ``grit`` command line: exit codes, JSON, help."""
import json

from click.testing import CliRunner

import grit
from grit.cli import main

R = CliRunner()


def test_help_explains():
    r = R.invoke(main, ["--help"])
    assert r.exit_code == 0 and "check" in r.output and "grade" in r.output
    assert "Exit status" in R.invoke(main, ["check", "--help"]).output


def test_check_shipped_example_reports_each_case():
    r = R.invoke(main, ["check", "examples/descriptors.json", "--json"])
    assert r.exit_code == 1
    res = {x["name"]: x for x in json.loads(r.output)["results"]}
    assert res["mxfp4 4096x4096, clean"]["status"] == "Ok"
    assert res["mxfp4 quantised at group size 64, declared 32"]["status"] == "SizeMismatch"
    assert res["q4ks declared with int4 elements"]["status"] == "GradeUnknown"
    assert res["unknown placement class"]["status"] == "PlacementUnknown"
    assert res["unregistered grade (taught with --grade)"]["status"] == "Ok"


def test_check_hex_descriptor():
    d = grit.GRADE_MXFP4.descriptor().hex()
    assert R.invoke(main, ["check", d, "--shape", "32", "--planes", "16,1,0,0"]).exit_code == 0
    r = R.invoke(main, ["check", d, "--shape", "32", "--planes", "16,2,0,0"])
    assert r.exit_code == 1 and "scale0 plane is 2 bytes" in r.output


def test_unreadable_input_exit_4(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{not json")
    assert R.invoke(main, ["check", str(p)]).exit_code == 4
    assert R.invoke(main, ["check", str(tmp_path / "missing.json")]).exit_code == 4


def test_grade_command():
    r = R.invoke(main, ["grade", "--json", "GRIT1(esr=ocpmx, s0=ue8m0, k0=32, e=fp4)"])
    out = json.loads(r.output)
    assert out["grade_id"] == "0x2370EE9EE454A183" and out["name"] == "GRADE_MXFP4"
    assert R.invoke(main, ["grade", "grit1(e=e4m3fnuz,k0=32,s0=e8m0,esr=floor)"]).exit_code == 2


def test_explain_status():
    r = R.invoke(main, ["explain", "SizeMismatch"])
    assert r.exit_code == 0 and "What it means" in r.output
    assert R.invoke(main, ["explain", "2"]).exit_code == 0
    assert R.invoke(main, ["explain", "Bogus"]).exit_code != 0
