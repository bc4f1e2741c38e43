"""§13 ``grit scan``: every finding category on the shipped examples, both exit
policies, the JSON schema, read-only inputs, hostile files."""
import hashlib
import json
import os
import runpy
import struct

import numpy as np
import pytest
from click.testing import CliRunner

import grit
from grit.cli import main
from grit.scan.findings import REGISTRY
from grit.scan.output.record import Record
from grit.scan import CATEGORIES, role_of, scan

R = CliRunner()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def ex(tmp_path_factory):
    out = tmp_path_factory.mktemp("examples")
    runpy.run_path(os.path.join(ROOT, "scripts", "make_examples.py"))["main"](str(out))
    return out


def run(*args):
    r = R.invoke(main, ["scan", *map(str, args)])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert "Traceback" not in r.output
    return r


def js(*args):
    r = run("--json", *args)
    return r.exit_code, json.loads(r.output)


def by(doc, category, status=None):
    return [f for f in doc["findings"] if f["category"] == category
            and (status is None or f["status"] == status)]


# ---------------------------------------------------------------------------
# the five categories on the examples


def test_examples_show_every_kind(ex):
    code, doc = js(ex)
    cats = {f["category"] for f in doc["findings"]}
    assert cats == set(CATEGORIES) - {"deep", "unreadable"}
    assert code == doc["exit_code"] == doc["exit_code_graded"] == 1
    assert doc["exit_code_simple"] == 1
    assert doc["summary"]["parsed"] == doc["summary"]["files"] == 10


def test_wrong_group_size_is_a_size_mismatch_naming_the_cause(ex):
    _, doc = js(ex / "wrong-group-size.safetensors")
    [f] = by(doc, "structural")
    assert f["status"] == "SizeMismatch" and f["severity"] == 1
    assert f["tensor"] == "encoder.layers.0.fc1.weight"
    assert f["detail"]["plane"] == 1 and f["detail"]["expected"] == 128
    assert f["detail"]["actual"] == 64
    assert any("group_size=64" in ln for ln in f["detail"]["lines"])


def test_truncated_shard_measured_on_disk(ex):
    code, doc = js(ex / "sharded")
    # the checkpoint's count of its short shards, the shard's own finding nested in it
    # (one root cause, one finding)
    [c] = [x for x in by(doc, "structural") if x["code"] == "S156"]
    [f] = c["consequences"]
    assert c["message"].startswith("1 of 2 shards are short: 1500 bytes missing in all")
    assert f["status"] == "SizeMismatch" and f["file"].endswith("model-00002-of-00002.safetensors")
    assert f["tensor"] == "model.layers.3.mlp.gate_proj.weight"
    assert f["detail"]["actual"] < f["detail"]["expected"]
    assert any("truncated (1500 bytes missing)" in ln for ln in f["detail"]["lines"])
    assert code == 1
    # grit.load refuses the file outright; scan still measured every tensor in it
    with pytest.raises(grit.GritError):
        grit.load(ex / "sharded" / "model-00002-of-00002.safetensors")


def test_cross_file_disagreement_carries_the_explain_diff(ex):
    code, doc = js(ex / "revisions.txt")              # a manifest
    [f] = by(doc, "cross-file")
    assert f["tensor"] == "lm_head.weight" and f["severity"] == 2
    assert f["detail"]["a"]["gid"] != f["detail"]["b"]["gid"]
    ex_ = f["detail"]["explain"]
    assert "esr" in ex_["differences"] and "grade_id" in ex_["differences"]
    assert ex_["decode_equivalent"] is True and ex_["same_contract"] is False
    assert "exp2rnemaxabs" in f["detail"]["explain_text"]
    assert code == 2 and doc["exit_code_simple"] == 1


def test_role_drift_and_artifact_drift(ex):
    code, doc = js(ex / "half-converted.safetensors")
    [f] = by(doc, "drift", "RoleDrift")
    assert f["tensor"] is None and f["role"] == "self_attn.q_proj" and f["severity"] == 2
    grades = {v["grade"]: v["tensors"] for v in f["detail"]["grades"].values()}
    assert sorted(grades) == ["GRADE_MXFP4", "GRADE_NVF4"]
    assert len(grades["GRADE_NVF4"]) == 2
    assert code == 2
    code, doc = js(ex / "revisions" / "rev-b")
    [f] = by(doc, "drift")
    assert f["status"] == "ArtifactDrift" and f["severity"] == 3 and code == 3


def test_escape_hatch_grouped_by_producer(ex):
    code, doc = js(ex / "escape-hatch.safetensors")
    [f] = by(doc, "escape-hatch")
    assert f["detail"]["producer"] == 7 and len(f["detail"]["tensors"]) == 2
    assert (code, doc["exit_code_simple"]) == (3, 1)


def test_inferred_and_inexpressible_gguf(ex):
    code, doc = js(ex / "llama-ggml.gguf")
    inf = {f["detail"]["ggml_type"] for f in by(doc, "inferred")}
    assert inf == {"Q8_0", "Q4_K"}
    [x] = by(doc, "inexpressible")
    assert x["detail"]["ggml_type"] == "IQ4_NL" and "kvalues_iq4nl" in x["detail"]["reason"]
    assert x["tensor"] == "blk.0.ffn_down.weight"
    assert code == 3


def test_deep_digest_and_probes(ex):
    p = ex / "corrupted-bytes.safetensors"
    code, doc = js(p)
    assert (code, doc["findings"]) == (0, [])
    code, doc = js("--deep", p)
    st = {f["status"]: f for f in by(doc, "deep")}
    assert st["DigestMismatch"]["severity"] == 1
    assert st["DigestMismatch"]["tensor"] == "decoder.layers.0.ffn.weight"
    assert st["Probe"]["severity"] == 3 and "e8m0" in st["Probe"]["message"]
    assert code == 1
    # the clean checkpoint's recorded digests all verify
    code, doc = js("--deep", ex / "clean")
    assert (code, doc["exit_code_simple"], doc["findings"]) == (0, 0, [])


# ---------------------------------------------------------------------------
# exit policies and the JSON schema


@pytest.mark.parametrize("target, graded, simple", [
    ("clean", 0, 0), ("wrong-group-size.safetensors", 1, 1),
    ("half-converted.safetensors", 2, 1), ("escape-hatch.safetensors", 3, 1),
    ("llama-ggml.gguf", 3, 1), (".", 1, 1),
])
def test_exit_codes_both_policies(ex, target, graded, simple):
    assert run(ex / target).exit_code == graded
    assert run("--exit-policy", "graded", ex / target).exit_code == graded
    assert run("--exit-policy", "simple", ex / target).exit_code == simple
    _, doc = js("--exit-policy", "simple", ex / target)
    assert (doc["exit_code"], doc["exit_code_graded"], doc["exit_code_simple"]) == \
        (simple, graded, simple)


def test_nothing_parsed_is_4_or_2(tmp_path):
    (tmp_path / "notes.md").write_text("no models here")
    assert run(tmp_path).exit_code == 4
    assert run("--exit-policy", "simple", tmp_path).exit_code == 2
    code, doc = js(tmp_path)
    assert code == 4 and doc["findings"][0]["severity"] == 4
    assert run(tmp_path / "missing.safetensors").exit_code == 4


def test_json_schema(ex):
    _, doc = js("--deep", ex)
    assert set(doc) == {"version", "exit_policy", "exit_code", "exit_code_graded",
                        "exit_code_simple", "baseline", "files", "findings", "summary",
                        "coverage"}
    assert doc["version"] == 2 and doc["baseline"] is None
    for f in doc["findings"]:
        assert {"code", "category", "severity", "file", "tensor", "status", "message",
                "detail", "consequences", "fingerprint"} <= set(f) <= {
            "code", "category", "severity", "file", "tensor", "status", "message", "detail",
            "consequences", "fingerprint", "role", "label", "omitted"}
        assert f["code"] in REGISTRY and "finding_code" not in f["detail"]
        assert f["category"] in CATEGORIES and f["severity"] in (1, 2, 3, 4, 5)
        assert isinstance(f["detail"], dict)
    for f in doc["files"]:
        assert set(f) == {"path", "format", "checkpoint", "parsed", "tensors", "grit_tensors",
                          "error"}
    s = doc["summary"]
    assert s["findings"] == len(doc["findings"]) and s["deep"] is True
    assert sum(s["by_category"].values()) == len(doc["findings"])


def test_human_output(ex):
    r = run(ex)
    assert r.exit_code == 1
    for title in ("1. Descriptor-vs-bytes", "2. Cross-file", "3. Grade drift",
                  "4. Escape-hatch", "Inferred descriptors", "cannot express"):
        assert title in r.output
    assert "group_size=64" in r.output
    assert "10/10 files parsed" in r.output and "graded 1, simple 1" in r.output
    assert "scanning" not in r.output          # no progress bar off a terminal


def test_help_lists_scan():
    r = R.invoke(main, ["--help"])
    assert "scan" in r.output
    h = R.invoke(main, ["scan", "--help"]).output
    assert "--deep" in h and "--exit-policy" in h and "Exit status" in h


# ---------------------------------------------------------------------------
# inputs are never modified


def _snapshot(root):
    out = {}
    for folder, _, names in os.walk(root):
        for n in names:
            p = os.path.join(folder, n)
            st = os.stat(p)
            with open(p, "rb") as f:
                out[p] = (st.st_mtime_ns, st.st_size, hashlib.sha256(f.read()).hexdigest())
    return out


def test_files_unmodified(ex):
    before = _snapshot(ex)
    run("--deep", ex)
    run("--json", "--deep", ex)
    assert _snapshot(ex) == before


# ---------------------------------------------------------------------------
# manifests, roles


def test_manifests(ex, tmp_path):
    m = tmp_path / "list.json"
    m.write_text(json.dumps({"paths": [str(ex / "clean"), str(ex / "nope.gguf")]}))
    code, doc = js(m)
    [u] = by(doc, "unreadable")
    assert "nope.gguf" in u["file"] and code == 1
    t = tmp_path / "list.txt"
    t.write_text(f"# comment\n\n{ex / 'clean' / 'model.safetensors'}\n")
    assert run(t).exit_code == 0


@pytest.mark.parametrize("name, role", [
    ("blk.3.attn_q.weight", "attn_q"),
    ("model.layers.3.self_attn.q_proj.weight", "self_attn.q_proj"),
    ("blk.3.ffn_down_exps.7.weight", "ffn_down_exps"),
    ("lm_head.weight", "lm_head"),
    ("token_embd.weight", "token_embd"),
    ("transformer.h.11.mlp.c_fc.bias", "mlp.c_fc"),
])
def test_role_of(name, role):
    assert role_of(name) == role


# ---------------------------------------------------------------------------
# hostile inputs: exit 4 (nothing parsed) or a finding, never a traceback


def _hostile(tmp_path, ex):
    d = tmp_path / "hostile"
    d.mkdir()
    gg = (ex / "llama-ggml.gguf").read_bytes()
    st = (ex / "clean" / "model.safetensors").read_bytes()
    mx = grit.encode(np.ones((4, 32), np.float32), grit.GRADE_MXFP4).descriptor.hex()

    def st_file(header: dict, data: bytes = b"") -> bytes:
        h = json.dumps(header).encode()
        return struct.pack("<Q", len(h)) + h + data

    def grit_doc(tensors) -> dict:
        return {"__grit__": json.dumps({"schema": "grit-safetensors", "version": 1,
                                        "tensors": tensors})}

    files = {
        "empty.safetensors": b"",
        "empty.gguf": b"",
        "junk.safetensors": bytes(range(256)) * 4,
        "junk.gguf": b"GGUF" + bytes(range(256)) * 4,
        "trunc.gguf": gg[: len(gg) // 2],
        "trunc-header.gguf": gg[:40],
        "trunc-header.safetensors": st[:100],
        "trunc-data.safetensors": st[: len(st) - 3000],
        "huge-header-len.safetensors": struct.pack("<Q", 2**62) + b"{}",
        "lying-offsets.safetensors": st_file(
            {"x": {"dtype": "U8", "shape": [2**40], "data_offsets": [0, 2**40]}}, b"abc"),
        "giant-shape.safetensors": st_file(
            {"__metadata__": grit_doc({"t": {"desc": mx, "shape": [2**62, 2**62],
                                             "planes": {"data": "p"}}}),
             "p": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}}, b"abc"),
        "bad-doc.safetensors": st_file(
            {"__metadata__": {"__grit__": '{"schema": "grit-safetensors", "tensors": '
                                          '{"t": {"desc": 5, "shape": "x", "planes": [1]}},'
                                          ' "grades": [1, "bad("]}'}}),
        "not-json-doc.safetensors": st_file({"__metadata__": {"__grit__": "{nope"}}),
        "header-array.safetensors": st_file([1, 2, 3]),    # type: ignore[arg-type]
        "deep-nest.safetensors": struct.pack("<Q", 20000) + b"[" * 20000,
    }
    for n, b in files.items():
        (d / n).write_bytes(b)
    return d, files


def test_hostile_files_one_by_one(tmp_path, ex):
    d, files = _hostile(tmp_path, ex)
    for n in files:
        for extra in ((), ("--deep",)):
            r = run(*extra, "--json", d / n)
            doc = json.loads(r.output)
            assert r.exit_code in (1, 3, 4), (n, r.output)
            assert doc["findings"], n
            assert all(f["file"] for f in doc["findings"]), n
            if r.exit_code == 4:
                assert doc["summary"]["parsed"] == 0
                assert all(f["category"] == "unreadable" for f in doc["findings"])


def test_hostile_tree_beside_a_good_checkpoint(tmp_path, ex):
    d, files = _hostile(tmp_path, ex)
    r = run("--json", "--deep", d, ex / "clean")
    doc = json.loads(r.output)
    assert r.exit_code == 1 and doc["summary"]["parsed"] >= 2
    unread = {os.path.basename(f["file"]) for f in by(doc, "unreadable")}
    assert {"empty.safetensors", "junk.gguf", "trunc.gguf"} <= unread
    assert all(f["severity"] == 1 for f in by(doc, "unreadable"))
    r = run(d)                                             # the human table too
    assert r.exit_code == 1 and "Inputs that could not be read" in r.output


def test_scan_api_never_raises_on_garbage(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"GGUF" + b"\xff" * 64)
    rep = scan([str(p)])
    assert rep.exit_code_graded == 4 and rep.findings[0].category == "unreadable"


# ---------------------------------------------------------------------------
# plain safetensors entries are validated like grit.load validates them


def _st(path, header: dict, data: bytes) -> None:
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


@pytest.mark.parametrize("entries, status, words", [
    ({"w": {"dtype": "FLOAT99", "shape": [4], "data_offsets": [0, 16]}},
     "BadHeader", ["'FLOAT99'"]),
    ({"w": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}},
     "BadHeader", ["negative", "-4"]),
    ({"w": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 16]}},
     "SizeMismatch", ["needs 32 bytes", "span 16", "2 × 4 = 8, × 4 bytes (F32) = 32"]),
    ({"w": {"dtype": "F32", "shape": [10**30], "data_offsets": [0, 16]}},
     "BadHeader", ["past 2^63 − 1"]),
    ({"w": {"dtype": "F32", "shape": [0, 2**64 + 3], "data_offsets": [0, 0]}},
     "BadHeader", ["past 2^63 − 1", "dim 1"]),
    ({"w": {"dtype": "F32", "shape": [1 << 40, 1 << 40], "data_offsets": [0, 16]}},
     "SizeMismatch", ["2^64"]),
    ({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
      "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}},
     "Overlap", ["'a' [0, 16)", "'b' [8, 24)", "8 shared bytes"]),
])
def test_plain_safetensors_entries_are_validated(tmp_path, entries, status, words):
    p = tmp_path / "m.safetensors"
    _st(p, entries, bytes(max(e["data_offsets"][1] for e in entries.values())))
    with pytest.raises(grit.GritError):
        grit.load(str(p))
    code, doc = js(p)
    assert code == 1
    [f] = by(doc, "structural")
    assert f["status"] == status and f["severity"] == 1
    text = " ".join([f["message"], *f["detail"]["lines"]])
    assert all(w in text for w in words), text
    assert f["tensor"] in entries


def test_valid_plain_safetensors_has_no_structural_finding(tmp_path):
    p = tmp_path / "m.safetensors"
    _st(p, {"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
            "b": {"dtype": "BF16", "shape": [4], "data_offsets": [16, 24]},
            "c": {"dtype": "U8", "shape": [0, 7], "data_offsets": [24, 24]}}, bytes(24))
    grit.load(str(p))
    code, doc = js(p)
    assert code == 0 and not doc["findings"]


def test_content_suffix_mismatch_is_a_warning(tmp_path, ex):
    st = tmp_path / "model.gguf"
    st.write_bytes((ex / "clean" / "model.safetensors").read_bytes())
    code, doc = js(st)
    [f] = by(doc, "structural", "SuffixMismatch")
    assert f["severity"] == 3 and (f["detail"]["suffix"], f["detail"]["content"]) == ("gguf", "safetensors")
    assert "named .gguf but its content is safetensors" in f["message"]
    assert code == 3 and doc["files"][0]["format"] == "safetensors"
    gg = tmp_path / "llama.safetensors"
    gg.write_bytes((ex / "llama-ggml.gguf").read_bytes())
    _, doc = js(gg)
    [f] = by(doc, "structural", "SuffixMismatch")
    assert f["severity"] == 3 and (f["detail"]["suffix"], f["detail"]["content"]) == ("safetensors", "gguf")
    assert {x["detail"]["ggml_type"] for x in by(doc, "inferred")} == {"Q8_0", "Q4_K"}


# ---------------------------------------------------------------------------
# llama.cpp's mixed recipes (general.file_type): drift by design is a warning


def _mixed_gguf(path, file_type=None, types=("Q4_K", "Q6_K")):
    gguf = pytest.importorskip("gguf")
    Q = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(str(path), "llama")
    if file_type is not None:
        w.add_file_type(file_type)
    rng = np.random.default_rng(0)
    for i, tn in enumerate(types * 2):
        qt = Q[tn]
        blk, tsz = gguf.GGML_QUANT_SIZES[qt]
        b = rng.integers(0, 256, (4, 256 // blk * tsz), dtype=np.uint8)
        w.add_tensor(f"blk.{i}.ffn_down.weight", b, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_llama_cpp_recipe_numbers():
    gguf = pytest.importorskip("gguf")
    from grit.scan.analyses import RECIPES as _RECIPES
    L = gguf.LlamaFileType
    for ft, (name, _, _) in _RECIPES.items():
        assert int(getattr(L, f"MOSTLY_{name}")) == ft


def test_role_drift_mixed_by_design_fallback_types(tmp_path):
    """Rows that are not a multiple of 256 take Q4_K's and Q6_K's legacy
    fallbacks (Q5_0, Q8_0): gemma-3-270m's attn_v under Q4_K_M."""
    gguf = pytest.importorskip("gguf")
    p = tmp_path / "q4km-fallback.gguf"
    _mixed_gguf(p, int(gguf.LlamaFileType.MOSTLY_Q4_K_M), ("Q5_0", "Q8_0"))
    code, doc = js(p)
    [f] = by(doc, "drift", "RoleDrift")
    assert f["severity"] == 3 and "llama.cpp Q4_K_M" in f["message"]
    assert f["detail"]["recipe"]["ggml_types"] == ["Q5_0", "Q8_0"] and code == 3


def test_role_drift_mixed_by_design_under_q4_k_m(tmp_path):
    gguf = pytest.importorskip("gguf")
    p = tmp_path / "q4km.gguf"
    _mixed_gguf(p, int(gguf.LlamaFileType.MOSTLY_Q4_K_M))
    code, doc = js(p)
    [f] = by(doc, "drift", "RoleDrift")
    assert f["severity"] == 3 and f["tensor"] is None and f["role"] == "ffn_down"
    assert "mixed by design: llama.cpp Q4_K_M mixes Q4_K with Q6_K" in f["message"]
    assert f["detail"]["recipe"] == {"file_type": 15, "name": "Q4_K_M",
                                     "ggml_types": ["Q4_K", "Q6_K"]}
    assert code == 3


def test_role_drift_without_file_type_stays_a_disagreement(tmp_path):
    p = tmp_path / "plain.gguf"
    _mixed_gguf(p)
    code, doc = js(p)
    [f] = by(doc, "drift", "RoleDrift")
    assert f["severity"] == 2 and "half-converted?" in f["message"]
    assert "recipe" not in f["detail"] and code == 2


def test_role_drift_outside_the_recipe_stays_a_disagreement(tmp_path):
    gguf = pytest.importorskip("gguf")
    p = tmp_path / "q5km.gguf"             # Q5_K_M never assigns Q4_K
    _mixed_gguf(p, int(gguf.LlamaFileType.MOSTLY_Q5_K_M))
    code, doc = js(p)
    [f] = by(doc, "drift", "RoleDrift")
    assert f["severity"] == 2 and code == 2


def test_deep_probes_inferred_tensors(tmp_path):
    """--deep runs the level-3 probes on tensors whose descriptor was inferred
    (no GRIT metadata): here MXFP4 whose E8M0 scales all hold one value while
    the groups' largest E2M1 codes (1, 2, 4, 7: 0.5 … 6) span four binades."""
    from safetensors.numpy import save_file
    d = tmp_path / "mx"
    d.mkdir()
    w = "model.layers.0.mlp.up_proj"
    top = np.array([1, 2, 4, 7], np.uint8)[np.arange(16) % 4]           # per 32-element group
    packed = (top.repeat(16) * np.uint8(0x11)).reshape(8, 32)
    save_file({f"{w}.weight_packed": packed,
               f"{w}.weight_scale": np.full((8, 2), 127, np.uint8)}, str(d / "m.safetensors"))
    (d / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
        "config_groups": {"g": {"targets": ["Linear"], "weights": {
            "num_bits": 4, "type": "float", "strategy": "group", "group_size": 32}}}}}))
    code, doc = js(d)
    assert code == 0 and not by(doc, "deep") and by(doc, "inferred")   # S601: a note
    code, doc = js("--deep", d)
    [p] = by(doc, "deep")
    assert (p["status"], p["severity"], p["tensor"]) == ("Probe", 3, f"{w}.weight")
    assert "e8m0" in p["message"] and "16 sampled" in p["message"]
    assert code == 3


# ---------------------------------------------------------------------------
# #12 item 7: a file's grades are known while that file is scanned, only


#: grades no other test teaches the process (one per test: loading registers)
_OWN_GRADE = "grit1(e=e2m1,k0={},s0=e8m0,esr=exp2floormaxabs)"


def _rewrite_grit(src, dst, edit) -> None:
    raw = open(src, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    doc = json.loads(h["__metadata__"]["__grit__"])
    edit(doc)
    h["__metadata__"]["__grit__"] = json.dumps(doc)
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    open(dst, "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])


def _carrier_and_plain(tmp_path, k0: int):
    """carrier.safetensors carries _OWN_GRADE; plain.safetensors holds the same
    tensor without any grade string.  The grade is encoded inside a scope, so
    this process never learns it."""
    from grit.grade import grade_scope, lookup_grade
    x = np.linspace(-2, 2, 240, dtype=np.float32).reshape(2, 120)
    carrier, plain = tmp_path / "a_carrier.safetensors", tmp_path / "b_plain.safetensors"
    with grade_scope():
        a = grit.encode(x, _OWN_GRADE.format(k0))
        grit.save(carrier, {"w": a})
        gid = a.grade.id
    assert lookup_grade(gid) is None

    def strip(doc):
        doc["grades"] = []
        for t in doc["tensors"].values():
            t.pop("grade")
    _rewrite_grit(carrier, plain, strip)
    return str(carrier), str(plain), gid


def _verdict(rep, path):
    return sorted((f.code, f.tensor) for f in rep.findings if f.file == path)


def test_verdicts_do_not_depend_on_file_order(tmp_path):
    from grit.grade import lookup_grade
    carrier, plain, gid = _carrier_and_plain(tmp_path, 24)
    first = scan([carrier, plain])
    second = scan([plain, carrier])
    assert _verdict(first, plain) == _verdict(second, plain) == [("S102", "w")]
    assert _verdict(first, carrier) == _verdict(second, carrier) == []
    # scanning taught this process nothing
    assert lookup_grade(gid) is None


def test_load_still_registers_a_carried_grade_for_the_process(tmp_path):
    from grit.grade import lookup_grade
    carrier, plain, gid = _carrier_and_plain(tmp_path, 40)
    with pytest.raises(grit.GritGradeError):
        grit.load(plain)
    got = grit.load(carrier)
    assert lookup_grade(gid) is not None and got["w"].grade.canonical == _OWN_GRADE.format(40)
    grit.load(plain)           # now known: docs/file-format.md, "Grades and layouts"
    assert _verdict(scan([plain]), plain) == []     # scan sees what the process knows


def test_grade_scopes_nest_and_are_per_thread():
    import threading
    from grit.grade import grade_scope, known_grades, lookup_grade, register_grade
    text = "grit1(e=e2m1,k0=128,s0=e8m0,esr=exp2floormaxabs)"
    with grade_scope():
        g = register_grade(text)
        seen_elsewhere = []
        th = threading.Thread(target=lambda: seen_elsewhere.append(lookup_grade(g.id)))
        th.start()
        th.join()
        assert seen_elsewhere == [None]
        with grade_scope():
            assert lookup_grade(g.id) is g and g in known_grades()
            assert register_grade(text) is g
        assert lookup_grade(g.id) is g
    assert lookup_grade(g.id) is None and g not in known_grades()


# ---------------------------------------------------------------------------
# per-file caps on repeated findings


def _many_bad_grades(path, n: int) -> None:
    inner = json.dumps({"schema": "grit-safetensors", "version": 1, "tensors": {},
                        "grades": [f"g{i:x}" for i in range(n)], "layouts": {}})
    hb = json.dumps({"__metadata__": {"__grit__": inner}}).encode()
    hb += b" " * (-len(hb) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hb)) + hb)


def test_repeated_findings_are_capped_per_file_and_code(tmp_path):
    from grit.io.safetensors import read
    from grit.scan.findings import MAX_PER_CODE
    p = str(tmp_path / "g.safetensors")
    _many_bad_grades(p, 100)
    kept = [q for q in read(p).problems]
    assert len(kept) == MAX_PER_CODE == 20 and kept[-1].omitted == 80
    assert all(q.omitted == 0 for q in kept[:-1])
    fs = [f for f in scan([p]).findings if f.code == "S112"]
    assert len(fs) == 20 and [f.omitted for f in fs] == [0] * 19 + [80]
    assert "'g0'" in fs[0].message and "'g13'" in fs[-1].message     # the first ones shown
    assert "omitted" not in Record.of(fs[0]).to_dict()
    assert Record.of(fs[-1]).to_dict()["omitted"] == 80
    code, doc = js(p)
    assert code == 1 and sum(1 + f.get("omitted", 0) for f in doc["findings"]
                             if f["code"] == "S112") == 100
    with pytest.raises(grit.GritError, match="'g0'"):     # load raises the first one
        grit.load(p)


def test_caps_count_per_file(tmp_path):
    a, b = str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")
    _many_bad_grades(a, 25)
    _many_bad_grades(b, 3)
    fs = scan([a, b]).findings
    assert [f.omitted for f in fs if f.file == a] == [0] * 19 + [5]
    assert [f.omitted for f in fs if f.file == b] == [0, 0, 0]


def test_level1_failures_are_capped_too(tmp_path):
    """Findings made by the analyses (not the reader) are capped the same way:
    30 GRIT tensors whose data planes are one byte short."""
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    a = grit.encode(x, grit.GRADE_MXFP4)
    data, scale = bytes(a.planes[0]), bytes(a.planes[1])
    p = tmp_path / "m.safetensors"
    grit.save(p, {f"t{i:02d}": a for i in range(30)})

    def short(h):
        for i in range(30):
            e = h[f"t{i:02d}.grit.data"]
            e["shape"] = [len(data) - 1]
            e["data_offsets"][1] -= 1
        return h
    raw = p.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    h = short(json.loads(raw[8:8 + n]))
    # rebuild the buffer so that it stays entirely indexed
    order = sorted((e["data_offsets"][0], k) for k, e in h.items() if k != "__metadata__")
    body, off = b"", 0
    for _, k in order:
        e = h[k]
        blob = (data if k.endswith(".data") else scale)[:e["data_offsets"][1]
                                                          - e["data_offsets"][0]]
        e["data_offsets"] = [off, off + len(blob)]
        body += blob
        off += len(blob)
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    p.write_bytes(struct.pack("<Q", len(hb)) + hb + body)
    fs = [f for f in scan([str(p)]).findings if f.code == "S101"]
    assert len(fs) == 20 and fs[-1].omitted == 10


def test_caps_bound_memory_where_findings_are_made(tmp_path):
    """100,000 unparsable grade strings: 20 findings, and the scan's peak
    allocation stays near the parsed document's (before the caps, a finding
    and an error object per string peaked at 116 MiB here; now 7 MiB)."""
    import tracemalloc
    p = str(tmp_path / "g.safetensors")
    _many_bad_grades(p, 100_000)
    tracemalloc.start()
    try:
        rep = scan([p])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    fs = [f for f in rep.findings if f.code == "S112"]
    assert len(fs) == 20 and fs[-1].omitted == 99_980
    assert peak < 32 * 2**20, peak


def test_layout_verdicts_do_not_depend_on_file_order(tmp_path):
    """The same for a layout expression a file carries: a file using the
    hashed word without carrying it passes level 1 (§7.3 step 3 admits any
    class-0x8 word) and --deep cannot read its planes in canonical order, in
    either order; before the scopes, a carrier scanned first made it clean."""
    from grit.placement.expr import layout_scope, resolve_layout
    a = grit.encode(np.linspace(-1, 1, 8 * 64, dtype=np.float32).reshape(8, 64),
                    grit.GRADE_MXFP4)
    carrier, plain = str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")
    with layout_scope():
        e = grit.parse_layout("Compose(ColMajor,Compose(Perm([1,0]),Perm([1,0])))")
        y = grit.relayout(a, data=e)
        grit.save(carrier, {"y": y})
        w = grit.layout_word(e)
    assert resolve_layout(w) is None

    def strip(doc):
        doc["layouts"] = {}
    _rewrite_grit(carrier, plain, strip)
    first = scan([carrier, plain], deep=True)
    second = scan([plain, carrier], deep=True)
    assert _verdict(first, plain) == _verdict(second, plain) == [("S502", "y")]
    [f] = [f for f in second.findings if f.file == plain]
    assert "cannot be read in canonical order" in f.message
    assert _verdict(first, carrier) == _verdict(second, carrier) == []
    assert resolve_layout(w) is None
