"""grit scan's report formats (--format text|json|jsonl|sarif), --fail-on, the
coverage accounting and the human report's layout, on files written by the
official libraries (safetensors.numpy, gguf-py's GGUFWriter, grit.save).

Expected byte counts and byte ranges are read from the files themselves —
the safetensors header parsed here with struct + json, the GGUF through
gguf-py's GGUFReader — never from grit's readers."""
from __future__ import annotations

import io
import json
import os
import re
import struct
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner
from safetensors.numpy import save_file

import grit
from grit.cli import main
from grit.scan import output as scan_report
from grit.scan.findings import REGISTRY
from grit.scan.output import text as scan_text
from grit.scan import scan

gguf = pytest.importorskip("gguf")
jsonschema = pytest.importorskip("jsonschema")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join(ROOT, "tests", "sarif", "sarif-schema-2.1.0.json")
R = CliRunner()
Q = gguf.GGMLQuantizationType
rng = np.random.default_rng(1414)


def values(n: int, shape=(8, 64)) -> np.ndarray:
    return np.random.default_rng(n).standard_normal(shape).astype(np.float32)


def st_header(path: str) -> tuple[int, dict]:
    """(where the data buffer starts, the header's tensor entries), by hand."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return 8 + n, h


def st_span(path: str, names) -> tuple[int, int]:
    """The envelope (offset in the file, length) of tensors ``names``."""
    start, h = st_header(path)
    b = min(h[n]["data_offsets"][0] for n in names)
    e = max(h[n]["data_offsets"][1] for n in names)
    return start + b, e - b


def st_bytes(path: str, names=None) -> int:
    _, h = st_header(path)
    return sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in h.items()
               if names is None or k in names)


# ---------------------------------------------------------------------------
# the files


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("formats")
    out = {}
    # grit.save: two GRIT tensors and one plain tensor (clean)
    p = str(d / "clean" / "model.safetensors")
    os.makedirs(os.path.dirname(p))
    grit.save(p, {"model.layers.0.mlp.up_proj.weight": grit.encode(values(1), grit.GRADE_MXFP4),
                  "model.layers.1.mlp.up_proj.weight": grit.encode(values(2), grit.GRADE_MXFP4),
                  "model.norm.weight": np.ones(64, np.float32)})
    out["clean"] = p
    # grit.save, then the last 40 bytes cut off: a truncated shard (structural)
    p = str(d / "short" / "model.safetensors")
    os.makedirs(os.path.dirname(p))
    grit.save(p, {"model.layers.0.mlp.up_proj.weight": grit.encode(values(3), grit.GRADE_MXFP4),
                  "model.layers.1.mlp.up_proj.weight": grit.encode(values(4), grit.GRADE_MXFP4)})
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) - 40)
    out["short"] = p
    # grit.save: one role, two grades (disagreement, no structural)
    p = str(d / "half" / "model.safetensors")
    os.makedirs(os.path.dirname(p))
    grit.save(p, {"model.layers.0.self_attn.q_proj.weight": grit.encode(values(5),
                                                                        grit.GRADE_MXFP4),
                  "model.layers.1.self_attn.q_proj.weight": grit.encode(values(6),
                                                                        grit.GRADE_NVF4)})
    out["half"] = p
    # gguf-py: Q8_0 (inferred), IQ4_NL (inexpressible), F32 (plain) -> notes only
    p = str(d / "ggml" / "model.gguf")
    os.makedirs(os.path.dirname(p))
    w = gguf.GGUFWriter(p, "llama")
    w.add_tensor("blk.0.attn_v.weight", gguf.quants.quantize(values(7, (8, 256)), Q.Q8_0),
                 raw_dtype=Q.Q8_0)
    w.add_tensor("blk.1.attn_v.weight", gguf.quants.quantize(values(8, (8, 256)), Q.Q8_0),
                 raw_dtype=Q.Q8_0)
    blk, tsz = gguf.GGML_QUANT_SIZES[Q.IQ4_NL]
    iq = rng.integers(0, 256, (8 * 256 // blk, tsz), dtype=np.uint8)
    iq[:, 0:2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    w.add_tensor("blk.0.ffn_down.weight", iq.reshape(8, -1), raw_dtype=Q.IQ4_NL)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(256, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out["ggml"] = p
    # safetensors.numpy + config.json: compressed-tensors NVFP4 (inferred from its config)
    d2 = d / "ct"
    d2.mkdir()
    W = "model.layers.0.mlp.down_proj"
    codes = rng.integers(0, 16, (4, 64), dtype=np.uint8)
    save_file({f"{W}.weight_packed": (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8),
               f"{W}.weight_scale": rng.integers(0x28, 0x58, (4, 4), dtype=np.uint8)
               .view(ml_dtypes.float8_e4m3fn),
               f"{W}.weight_global_scale": np.array([0.25], np.float32),
               "model.norm.weight": np.ones(64, np.float32)}, str(d2 / "model.safetensors"))
    (d2 / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "format": "nvfp4-pack-quantized",
                                      "weights": {"num_bits": 4, "type": "float",
                                                  "strategy": "tensor_group",
                                                  "group_size": 16, "symmetric": True}}}}}))
    out["ct"] = str(d2 / "model.safetensors")
    out["ct_weight"] = W
    # not a model file at all
    p = str(d / "junk.safetensors")
    with open(p, "wb") as f:
        f.write(b"\xff" * 64)
    out["junk"] = p
    return out


def cli(*args):
    r = R.invoke(main, ["scan", *args])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    return r.exit_code, r.output


# ---------------------------------------------------------------------------
# every format on every file


KEYS = ("clean", "short", "half", "ggml", "ct", "junk")


@pytest.mark.parametrize("key", KEYS)
def test_every_format_says_the_same(files, key):
    path = files[key]
    code_j, out_j = cli("--format", "json", path)
    doc = json.loads(out_j)
    code_alias, out_alias = cli("--json", path)
    assert (code_alias, out_alias) == (code_j, out_j)            # --json is an alias
    code_l, out_l = cli("--format", "jsonl", path)
    lines = out_l.splitlines()
    assert len(lines) == len(doc["findings"]) + 1                # findings + the summary
    recs = [json.loads(ln) for ln in lines]
    assert [r["type"] for r in recs] == ["finding"] * len(doc["findings"]) + ["summary"]
    assert [{k: v for k, v in r.items() if k != "type"} for r in recs[:-1]] == doc["findings"]
    assert recs[-1]["coverage"] == doc["coverage"]
    assert recs[-1]["exit_code"] == doc["exit_code"] == code_l == code_j
    code_s, out_s = cli("--format", "sarif", path)
    log = json.loads(out_s)
    [run] = log["runs"]
    assert [r["ruleId"] for r in run["results"]] == [
        f["code"] for f in doc["findings"]]
    assert run["properties"]["coverage"] == doc["coverage"]
    assert run["invocations"][0]["exitCode"] == code_s == code_j
    code_t, out_t = cli(path)                                    # text (the default)
    assert code_t == code_j
    assert "coverage: " in out_t
    for f in doc["findings"]:
        assert f["code"] in out_t


@pytest.fixture(scope="module")
def validator():
    with open(SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    assert schema["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0")
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def test_sarif_is_valid_against_the_official_schema(files, validator):
    paths = [files[k] for k in KEYS]
    _, out = cli("--format", "sarif", "--deep", *paths)
    log = json.loads(out)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    assert log["version"] == "2.1.0"
    # the validator does catch a broken log (the test can fail)
    bad = json.loads(out)
    bad["runs"][0]["results"][0]["level"] = "fatal"
    assert list(validator.iter_errors(bad))


def test_sarif_rules_come_from_the_registry(files):
    _, out = cli("--format", "sarif", files["ggml"])
    rules = json.loads(out)["runs"][0]["tool"]["driver"]["rules"]
    reg = REGISTRY
    assert [r["id"] for r in rules] == sorted(reg)
    level = {1: "error", 2: "warning", 3: "note", 5: "none"}
    for r in rules:
        spec = reg[r["id"]]
        assert r["shortDescription"]["text"] == spec.title
        assert spec.what in r["fullDescription"]["text"]
        assert spec.fix in r["help"]["text"]
        assert r["defaultConfiguration"]["level"] == level[int(spec.severity)]
        assert re.fullmatch(r"[A-Za-z0-9]+", r["name"])


def test_sarif_regions_are_the_tensors_byte_ranges(files):
    # GGUF: each tensor's absolute offset and size as gguf-py reads them
    g = files["ggml"]
    by_name = {t.name: (int(t.data_offset), int(t.n_bytes)) for t in gguf.GGUFReader(g).tensors}
    _, out = cli("--format", "sarif", g)
    [run] = json.loads(out)["runs"]
    seen = 0
    for res in run["results"]:
        [loc] = res["locations"]
        art = loc["physicalLocation"]["artifactLocation"]
        assert run["artifacts"][art["index"]]["length"] == os.path.getsize(g)
        tensor = res["properties"]["tensor"]
        region = loc["physicalLocation"].get("region")
        if tensor in by_name:
            off, n = by_name[tensor]
            assert region == {"byteOffset": off, "byteLength": n}
            seen += 1
        for rel in res.get("relatedLocations", ()):
            off, n = by_name[rel["message"]["text"]]
            assert rel["physicalLocation"]["region"] == {"byteOffset": off, "byteLength": n}
            seen += 1
    assert seen >= 3          # the two Q8_0 tensors (one S602) and the IQ4_NL (S702)

    # safetensors (grit.save, truncated): the failing GRIT tensor's planes
    s = files["short"]
    _, out = cli("--format", "sarif", s)
    [run] = json.loads(out)["runs"]
    _, h = st_header(s)
    checked = 0
    for res in run["results"]:
        t = res["properties"]["tensor"]
        planes = [n for n in h if n.startswith(f"{t}.grit.")] if t else []
        if not planes:
            continue
        off, n = st_span(s, planes)
        assert res["locations"][0]["physicalLocation"]["region"] == {
            "byteOffset": off, "byteLength": n}
        checked += 1
    assert checked >= 1


def test_sarif_regions_of_a_recognised_checkpoint(files):
    """compressed-tensors: the planes of one weight are not adjacent in the
    file (safetensors sorts by name), so each weight's region is its data
    plane and each plane is a related location; no region takes in bytes of
    a tensor that is not the weight's own."""
    p, W = files["ct"], files["ct_weight"]
    start, h = st_header(p)
    span = {n: (start + v["data_offsets"][0], v["data_offsets"][1] - v["data_offsets"][0])
            for n, v in h.items()}
    _, out = cli("--format", "sarif", p)
    [res] = [r for r in json.loads(out)["runs"][0]["results"] if r["ruleId"] == "S601"]
    own = {f"{W}.weight_packed", f"{W}.weight_scale", f"{W}.weight_global_scale"}
    by_text = {r["message"]["text"]: r["physicalLocation"]["region"]
               for r in res["relatedLocations"]}
    off, n = span[f"{W}.weight_packed"]
    # one weight: the finding names it, and its region is the result's own
    assert res["properties"]["tensor"] == f"{W}.weight"
    assert res["locations"][0]["physicalLocation"]["region"] == {"byteOffset": off,
                                                                 "byteLength": n}
    by_text["primary"] = res["locations"][0]["physicalLocation"]["region"]
    assert f"{W}.weight: data plane" not in by_text          # it is the region itself
    for role, t in (("scale0", "weight_scale"), ("scale1", "weight_global_scale")):
        off, n = span[f"{W}.{t}"]
        assert by_text[f"{W}.weight: {role} plane"] == {"byteOffset": off, "byteLength": n}
    for reg in by_text.values():
        a, b = reg["byteOffset"], reg["byteOffset"] + reg["byteLength"]
        inside = {t for t, (o, m) in span.items() if o < b and a < o + m}
        assert inside <= own, inside


def test_sarif_artifact_uris(files, tmp_path):
    _, out = cli("--format", "sarif", files["clean"])
    [run] = json.loads(out)["runs"]
    assert run["artifacts"][0]["location"]["uri"].startswith("file:///")
    # a relative path is a relative URI against %SRCROOT% (the working directory)
    rel = os.path.relpath(files["clean"])
    _, out = cli("--format", "sarif", rel)
    [run] = json.loads(out)["runs"]
    loc = run["artifacts"][0]["location"]
    assert loc["uriBaseId"] == "SRCROOT" and not loc["uri"].startswith("/")
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"].endswith("/")


# ---------------------------------------------------------------------------
# --fail-on


@pytest.mark.parametrize("key, worst, codes", [
    # worst severity: exit codes under --fail-on structural, disagreement, warning
    ("clean", None, (0, 0, 0)),
    ("short", 1, (1, 1, 1)),
    ("half", 2, (0, 2, 2)),
    ("ggml", 5, (0, 0, 0)),          # notes only (inferred, inexpressible): no exit code
    ("junk", 4, (4, 4, 4)),          # nothing could be parsed
])
def test_fail_on_exit_codes(files, key, worst, codes):
    _, out = cli("--json", files[key])
    sev = {f["severity"] for f in json.loads(out)["findings"]}
    assert (min(sev) if sev else None) == worst
    for level, want in zip(("structural", "disagreement", "warning"), codes):
        for fmt in ("text", "json", "jsonl", "sarif"):
            code, out = cli("--format", fmt, "--fail-on", level, files[key])
            assert code == want, (level, fmt)
        doc = json.loads(cli("--json", "--fail-on", level, files[key])[1])
        assert doc["exit_code"] == want and doc["exit_policy"] == f"fail-on {level}"
        assert doc["exit_code_graded"] == (worst if worst and worst < 5 else 0)


def test_fail_on_and_exit_policy_simple_conflict(files):
    code, out = cli("--fail-on", "warning", "--exit-policy", "simple", files["clean"])
    assert code == 2 and "--fail-on replaces --exit-policy" in out
    code, out = cli("--json", "--format", "sarif", files["clean"])
    assert code == 2 and "--json is --format json" in out


def test_help_documents_formats_and_exit_codes():
    out = R.invoke(main, ["scan", "--help"]).output
    for word in ("--format", "jsonl", "sarif", "--fail-on", "structural|disagreement|warning",
                 "no finding at or above LEVEL", "3 warnings only", "coverage"):
        assert word in out, word


# ---------------------------------------------------------------------------
# coverage


def cov(path):
    return json.loads(cli("--json", path)[1])["coverage"]


def test_coverage_grit_save(files):
    p = files["clean"]
    c = cov(p)
    plain = np.ones(64, np.float32).nbytes
    start, _ = st_header(p)
    data = os.path.getsize(p) - start              # the data buffer, from the file size
    assert c["bytes_total"] == data == st_bytes(p)
    assert c["bytes_not_checkable"] == plain
    assert c["not_checkable_because"] == {"plain": plain}
    assert c["bytes_checked"] == data - plain
    assert c["bytes_inferred"] == 0
    assert c["files"][p]["bytes_checked"] == data - plain


def test_coverage_truncated_counts_the_bytes_present(files):
    p = files["short"]
    c = cov(p)
    start, _ = st_header(p)
    assert c["bytes_checked"] == os.path.getsize(p) - start == c["bytes_total"]


def test_coverage_gguf(files):
    p = files["ggml"]
    c = cov(p)
    ts = gguf.GGUFReader(p).tensors
    by = {}
    for t in ts:
        by.setdefault(t.tensor_type.name, 0)
        by[t.tensor_type.name] += int(t.n_bytes)
    assert c["bytes_checked"] == 0
    assert c["inferred_from"] == {"ggml block types": by["Q8_0"]}
    assert c["not_checkable_because"] == {"plain": by["F32"], "inexpressible": by["IQ4_NL"]}
    assert c["bytes_total"] == sum(by.values())


def test_coverage_compressed_tensors(files):
    p, W = files["ct"], files["ct_weight"]
    c = cov(p)
    quant = [f"{W}.weight_packed", f"{W}.weight_scale", f"{W}.weight_global_scale"]
    assert c["inferred_from"] == {
        "compressed-tensors config (nvfp4-pack-quantized)": st_bytes(p, quant)}
    assert c["not_checkable_because"] == {"plain": st_bytes(p, ["model.norm.weight"])}
    assert c["bytes_total"] == st_bytes(p)


def test_coverage_unreadable_and_totals(files):
    c = cov(files["junk"])
    assert c["not_checkable_because"] == {"unreadable": os.path.getsize(files["junk"])}
    keys = ("clean", "ggml", "ct", "junk")
    both = json.loads(cli("--json", *[files[k] for k in keys])[1])["coverage"]
    each = [cov(files[k]) for k in keys]
    for k in ("bytes_total", "bytes_checked", "bytes_inferred", "bytes_not_checkable"):
        assert both[k] == sum(e[k] for e in each)


def test_coverage_line_in_text(files):
    p = files["ggml"]
    _, out = cli(p)
    c = cov(p)
    [line] = [ln for ln in out.splitlines() if ln.startswith("coverage: ")]
    assert f"{c['bytes_total']:,} tensor bytes" in line
    assert f"{c['bytes_inferred']:,} checked against an inferred descriptor" in line
    assert "(ggml block types " in line
    assert f"{c['bytes_not_checkable']:,} not checkable" in line


# ---------------------------------------------------------------------------
# the human report: inferred-from, piped vs terminal


def test_inferred_sections_say_from_what(files):
    _, out = cli(files["ggml"], files["ct"])
    [title] = [ln for ln in out.splitlines() if ln.startswith("Inferred descriptors")]
    assert "ggml block types" in title
    assert "compressed-tensors config (nvfp4-pack-quantized)" in title
    doc = json.loads(cli("--json", files["ggml"], files["ct"])[1])
    src = {f["code"]: f["detail"].get("inferred_from")
           for f in doc["findings"] if f["category"] == "inferred"}
    assert src == {"S602": "ggml block types",
                   "S601": "compressed-tensors config (nvfp4-pack-quantized)"}


def test_piped_output_is_not_padded_or_wrapped(files, tmp_path):
    """A real pipe (not a terminal): labels are followed by ': ', never
    aligned with runs of spaces, and each message stays on one line however
    long it is; nothing ends in whitespace."""
    paths = [files[k] for k in ("short", "half", "ggml", "ct")]
    env = dict(os.environ, PYTHONPATH=ROOT, COLUMNS="40")
    r = subprocess.run([sys.executable, "-m", "grit.cli", "scan", *paths],
                       capture_output=True, env=env, timeout=120)
    out = r.stdout.decode()
    assert "\x1b" not in out
    lines = out.splitlines()
    assert not [ln for ln in lines if ln != ln.rstrip()]
    labels = [ln.strip() for ln in lines if re.match(r"^    (file|tensor|role)(:| {2})", ln)]
    assert labels and all(re.match(r"^(file|tensor|role): \S", ln) for ln in labels)
    doc = json.loads(subprocess.run([sys.executable, "-m", "grit.cli", "scan", "--json",
                                     *paths], capture_output=True, env=env,
                                    timeout=120).stdout)
    long = [f["message"] for f in doc["findings"] if len(f["message"]) > 40]
    assert long
    for m in long:                                  # whole, on one line
        assert f"    {m}" in lines
    assert max(len(ln) for ln in lines) > 80        # nothing was wrapped to COLUMNS


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_terminal_output_wraps_between_words_only(files, monkeypatch):
    monkeypatch.setenv("COLUMNS", "50")
    monkeypatch.setenv("NO_COLOR", "1")
    rep = scan([files["half"], files["ggml"], files["short"]])
    out = _Tty()
    scan_report.render(rep, "graded", file=out)
    text = out.getvalue()
    lines = text.splitlines()
    for ln in lines:
        if len(ln) > 50:       # only a label and one unbreakable token overflow
            assert " " not in re.sub(r"^\s*(file|tensor|role) +", "", ln).strip(), ln
    flat = " ".join(ln.strip() for ln in lines)
    # every file name, tensor name and grade string is shown whole on one line
    grades = {g.canonical for g in (grit.GRADE_MXFP4, grit.GRADE_NVF4)}
    doc = json.loads(cli("--json", files["half"], files["ggml"], files["short"])[1])
    for g in grades:
        assert any(g in ln for ln in lines) or g not in flat
    for f in doc["findings"]:
        if f["tensor"]:
            m = re.match(r"^\d+ tensors: (.*)$", f["tensor"])
            for name in (m[1].split(", ") if m else [f["tensor"]]):
                assert any(name in ln for ln in lines), name
        for word in f["message"].split():
            assert any(word in ln for ln in lines), word
    for p in (files["half"], files["ggml"], files["short"]):
        shown = os.path.relpath(p)
        shown = p if shown.startswith("..") else shown
        assert any(shown in ln for ln in lines)
    assert re.search(r"^    file    \S", text, re.M)      # aligned labels on a terminal


def test_wrap_keeps_grade_strings_and_names_whole():
    grade = "GRIT1(esr=ocpmx, s0=ue8m0, k0=32, e=fp4)"
    name = "model.layers.17.mlp.experts.93.gate_up_proj.weight"
    text = f"tensor {name} declares {grade} but (as the plane shows) it is not"
    for width in range(10, 90):
        lines = scan_text.wrap(text, width, "    ")
        assert " ".join(ln.strip() for ln in lines) == text      # nothing lost or added
        assert any(grade in ln for ln in lines) and any(name in ln for ln in lines)
        for ln in lines:
            assert ln.startswith("    ")
            assert len(ln) <= width or grade in ln or name in ln or " " not in ln.strip()
    assert len(scan_text.wrap(text, 40, "")) > 2                # it does wrap


def test_cross_file_findings_carry_the_tensors_range(tmp_path):
    """S201 is made after every file was read: the GRIT tensor's range is
    kept for it (its planes back to back in grit.save's file)."""
    name = "lm_head.weight"
    paths = []
    for rev, g in (("a", grit.GRADE_MXFP4), ("b", grit.GRADE_MXFP4_RNE)):
        p = str(tmp_path / rev / "model.safetensors")
        os.makedirs(os.path.dirname(p))
        grit.save(p, {"model.norm.weight": np.ones(64, np.float32),
                      name: grit.encode(values(9), g)})
        paths.append(p)
    _, out = cli("--format", "sarif", *paths)
    [res] = [r for r in json.loads(out)["runs"][0]["results"] if r["ruleId"] == "S201"]
    loc = res["locations"][0]["physicalLocation"]
    where = paths[0] if loc["artifactLocation"]["uri"].endswith("/a/model.safetensors") \
        else paths[1]
    _, h = st_header(where)
    off, n = st_span(where, [t for t in h if t.startswith(f"{name}.grit.")])
    assert loc["region"] == {"byteOffset": off, "byteLength": n}


@pytest.mark.parametrize("keys", [("clean",), ("short", "half", "ggml", "ct", "junk")])
def test_streamed_sarif_is_the_log_to_sarif_builds(files, keys):
    """write_sarif writes result by result; what it writes parses to the
    dict to_sarif builds (no results and many)."""
    rep = scan([files[k] for k in keys])
    out = io.StringIO()
    scan_report.write_sarif(rep, "graded", file=out, fail_on="disagreement", version="9.9")
    assert json.loads(out.getvalue()) == scan_report.to_sarif(rep, "graded", "disagreement",
                                                              "9.9")
    assert out.getvalue().isascii()


REAL = os.path.expanduser("~/.cache/grit-real-checkpoint/gemma-3-270m-q4_k_m.gguf")


@pytest.mark.skipif(not os.path.exists(REAL), reason="real GGUF not cached")
def test_real_gguf_sarif_and_coverage(validator):
    _, out = cli("--format", "sarif", REAL)
    log = json.loads(out)
    assert not list(validator.iter_errors(log))
    [run] = log["runs"]
    c = run["properties"]["coverage"]
    ts = gguf.GGUFReader(REAL).tensors
    plain = {"F32", "F16", "BF16"}
    assert c["bytes_total"] == sum(int(t.n_bytes) for t in ts)
    assert c["not_checkable_because"].get("plain", 0) == sum(
        int(t.n_bytes) for t in ts if t.tensor_type.name in plain)
    assert c["bytes_checked"] == 0                     # no grit.desc annotations
    by_name = {t.name: (int(t.data_offset), int(t.n_bytes)) for t in ts}
    n = 0
    for res in run["results"]:
        for rel in res.get("relatedLocations", ()):
            off, size = by_name[rel["message"]["text"]]
            assert rel["physicalLocation"]["region"] == {"byteOffset": off, "byteLength": size}
            n += 1
    assert n > 100
