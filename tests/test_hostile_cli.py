"""Hostile files and arguments on the command line: every file grit check,
--resume and --output name goes through the guarded open (regular files
only, bounded size, schema-checked JSON with a depth limit); write errors
are one line and an exit status.  Each case runs in a subprocess with a
time limit, so a hang fails the test rather than holding the suite."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _grit(*args, timeout: float = 60, stdout=None):
    env = {**os.environ, "PYTHONPATH": ROOT, "GRIT_CACHE_DIR": os.devnull}
    r = subprocess.run([sys.executable, "-m", "grit.cli", *args], env=env, timeout=timeout,
                       stdout=stdout if stdout is not None else subprocess.PIPE,
                       stderr=subprocess.PIPE)
    err = r.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err[-3000:]
    return r.returncode, (r.stdout or b"").decode("utf-8", "replace"), err


def test_a_fifo_as_a_check_target_is_refused_at_once(tmp_path):
    fifo = tmp_path / "cases.json"
    os.mkfifo(fifo)
    code, _, err = _grit("check", str(fifo), timeout=20)
    assert code == 4 and "FIFO" in err


def test_a_device_as_a_check_target_is_refused_unread():
    code, _, err = _grit("check", "/dev/zero", timeout=20)
    assert code == 4 and "character device" in err


def test_an_oversized_case_file_is_refused(tmp_path, monkeypatch):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate((64 << 20) + 1)
    code, _, err = _grit("check", str(big))
    assert code == 4 and "larger than" in err


@pytest.mark.parametrize("doc,needle", [
    ([1], "a case is a JSON object"),
    ([{"desc_hex": "00"}], "missing shape, plane_bytes"),
    ([{"desc_hex": 5, "shape": [1], "plane_bytes": [1]}], "desc_hex must be a str"),
    ([{"desc_hex": "00", "shape": ["x"], "plane_bytes": [1]}], "shape must hold integers"),
    ([{"desc_hex": "00", "shape": [1], "plane_bytes": [1], "grades": [1]}], "grades"),
])
def test_case_files_are_schema_checked(tmp_path, doc, needle):
    p = tmp_path / "cases.json"
    p.write_text(json.dumps(doc))
    code, out, _ = _grit("check", str(p))
    assert code == 1 and "Unreadable" in out and needle in out, out


def test_deep_json_is_refused_before_parsing(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    code, _, err = _grit("check", str(p))
    assert code == 4 and "deeper than" in err


def _model(tmp_path):
    from safetensors.numpy import save_file  # noqa: PLC0415
    d = tmp_path / "ckpt"
    d.mkdir()
    save_file({"a": np.ones(4, np.float32)}, str(d / "model.safetensors"))
    return d


@pytest.mark.parametrize("record", [
    {"type": "entry", "entry": "E", "complete": True},
    {"type": "entry", "entry": "E", "complete": True, "exit_codes": None},
    {"type": "entry", "entry": "E", "complete": True, "exit_codes": {"graded": "0"}},
    {"type": "entry", "entry": "E", "complete": "yes", "exit_codes": {}},
])
def test_resume_records_without_their_fields_are_not_records(tmp_path, record):
    d = _model(tmp_path)
    out = tmp_path / "out.jsonl"
    record = dict(record, entry=str(d))
    out.write_text(json.dumps(record) + "\n")
    code, _, err = _grit("scan", "--resume", str(out), str(d))
    assert code == 0, err
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert recs[-1]["type"] == "entry" and recs[-1]["complete"] is True
    assert isinstance(recs[-1]["exit_codes"]["graded"], int)
    # a damaged record before a good one is a damaged file: refused, one line
    out.write_text(json.dumps(record) + "\n" + json.dumps(recs[-1]) + "\n")
    code, _, err = _grit("scan", "--resume", str(out), str(d))
    assert code == 4 and "cannot be resumed" in err


def test_a_deep_resume_line_is_not_a_record(tmp_path):
    d = _model(tmp_path)
    out = tmp_path / "out.jsonl"
    out.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    code, _, err = _grit("scan", "--resume", str(out), str(d))
    assert code == 0, err


def test_a_fifo_as_resume_or_output_is_a_usage_error(tmp_path):
    d = _model(tmp_path)
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    for flag in ("--resume", "--output"):
        code, _, err = _grit("scan", flag, str(fifo), str(d), timeout=20)
        assert code == 2 and "FIFO" in err, err


def test_output_into_a_missing_folder_is_a_usage_error(tmp_path):
    d = _model(tmp_path)
    code, _, err = _grit("scan", "--output", str(tmp_path / "no" / "out.jsonl"), str(d))
    assert code == 2 and "does not exist" in err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_a_full_disk_is_one_line_and_an_exit_status(tmp_path):
    d = _model(tmp_path)
    code, _, err = _grit("scan", "--output", "/dev/full", str(d))
    assert code == 4 and "cannot write" in err and len(err.strip().splitlines()) == 1, err
    with open("/dev/full", "wb") as full:
        code, _, err = _grit("scan", "--format", "json", str(d), stdout=full)
    assert code == 4 and "cannot write the report" in err, err


@pytest.mark.parametrize("fmt", ["json", "jsonl", "sarif", "text"])
def test_names_that_are_not_utf8_are_escaped_one_way_in_every_format(tmp_path, fmt):
    """A byte of a file name that is not UTF-8 is written as the text \\xHH
    (the text report's escape) in every format — never a lone surrogate, never
    a traceback; a SARIF URI carries it %-encoded as the byte itself."""
    from safetensors.numpy import save_file  # noqa: PLC0415
    d = os.fsdecode(os.path.join(os.fsencode(str(tmp_path)), b"d\xfe"))
    os.mkdir(d)
    save_file({"a": np.ones(4, np.float32)}, os.fsdecode(os.path.join(os.fsencode(d),
                                                                      b"ok\xff.safetensors")))
    with open(os.fsdecode(os.path.join(os.fsencode(d), b"j\xffunk.safetensors")), "wb") as f:
        f.write(b"junk" * 10)
    env = {**os.environ, "PYTHONPATH": ROOT, "GRIT_CACHE_DIR": os.devnull}
    r = subprocess.run([sys.executable, "-m", "grit.cli", "scan", "--format", fmt,
                        os.path.relpath(d)], capture_output=True, env=env, timeout=60,
                       cwd=os.getcwd())
    assert b"Traceback" not in r.stderr and r.returncode == 1, r.stderr[-2000:]
    text = r.stdout.decode("utf-8")                     # valid UTF-8
    docs = [json.loads(x) for x in text.splitlines()] if fmt == "jsonl" else (
        [json.loads(text)] if fmt != "text" else [])
    for doc in docs:                                    # no lone surrogate anywhere
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    assert "d\\xfe" in (text if fmt == "text" else json.dumps(docs, ensure_ascii=False)
                        .replace("\\\\", "\\"))
    if fmt == "sarif":
        assert "d%FE/j%FFunk.safetensors" in text
