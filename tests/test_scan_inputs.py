"""What grit scan takes as input when a model folder is named file by file
(``grit scan *`` in a Hub download): the weights and indexes are inputs;
the folder's other files (config, tokenizer, README, chat template) are its
context, skipped, never read as manifests; other weight formats are named as
what they are, with what to do."""
from __future__ import annotations

import zipfile

import numpy as np

import grit
from grit.scan import scan


def _folder(tmp_path):
    d = tmp_path / "hf_model"
    d.mkdir()
    grit.save(str(d / "model.safetensors"),
              {"w": grit.encode(np.ones((4, 64), np.float32), grit.GRADE_MXFP4)})
    for n in ("config.json", "tokenizer.json", "tokenizer_config.json",
              "generation_config.json", "special_tokens_map.json"):
        (d / n).write_text("{}")
    (d / "README.md").write_text("# a model\nmodel.safetensors\n")
    (d / "merges.txt").write_text("#version: 0.2\na b\n")
    (d / "chat_template.jinja").write_text("{{ messages }}")
    return d


def test_a_model_folder_named_file_by_file_scans_its_weights_alone(tmp_path):
    d = _folder(tmp_path)
    rep = scan(sorted(str(p) for p in d.iterdir()))
    assert [f.code for f in rep.findings] == []
    assert [r.path for r in rep.files] == [str(d / "model.safetensors")]
    assert rep.exit_code_graded == 0


def test_context_alone_is_one_finding_that_says_so(tmp_path):
    d = _folder(tmp_path)
    rep = scan([str(d / "README.md"), str(d / "config.json")])
    [f] = rep.findings
    assert f.code == "S803" and "context" in f.message


def test_other_weight_formats_are_named_with_what_to_do(tmp_path):
    with zipfile.ZipFile(tmp_path / "pytorch_model.bin", "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    (tmp_path / "model.pt").write_bytes(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00}\x94.")
    np.savez(tmp_path / "weights.npz", w=np.ones(3))
    np.save(tmp_path / "w.npy", np.ones(3))
    rep = scan([str(tmp_path / n) for n in ("pytorch_model.bin", "model.pt", "weights.npz",
                                            "w.npy")])
    msgs = {f.file.rsplit("/", 1)[-1]: f.message for f in rep.findings}
    assert set(msgs) == {"pytorch_model.bin", "model.pt", "weights.npz", "w.npy"}
    assert "zip archive" in msgs["pytorch_model.bin"] and "zip archive" in msgs["weights.npz"]
    assert "pickle" in msgs["model.pt"] and "never unpickles" in msgs["model.pt"]
    assert "NumPy .npy" in msgs["w.npy"]
    assert all("safetensors" in m for m in msgs.values())
    assert not any("UTF-8" in m for m in msgs.values())


def test_a_manifest_is_a_file_named_so(tmp_path):
    d = _folder(tmp_path)
    (tmp_path / "list.txt").write_text("hf_model/model.safetensors\n")
    (tmp_path / "notes").write_text("hf_model/model.safetensors\n")
    rep = scan([str(tmp_path / "list.txt")])
    assert [r.path for r in rep.files] == [str(d / "model.safetensors")]
    rep = scan([str(tmp_path / "notes")])
    [f] = rep.findings
    assert f.code == "S804" and "manifest is named" in f.message


def test_output_writes_the_report_it_prints(tmp_path):
    """--output OUT is where the report goes, not another mode: the manifest's
    two revisions are still compared (S201), in the format OUT's suffix
    names, with the exit status of the report."""
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    manifest = os.path.join(root, "examples", "revisions.txt")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "grit.cli", "scan", *args],
                              capture_output=True, text=True, timeout=120)
    plain = run("--format", "json", manifest)
    out = tmp_path / "r.json"
    got = run("-o", str(out), manifest)
    assert got.returncode == plain.returncode == 2, got.stderr
    assert got.stdout == ""
    assert json.loads(out.read_text()) == json.loads(plain.stdout)
    assert "S201" in out.read_text()
    sarif = tmp_path / "r.sarif"
    assert run("-o", str(sarif), manifest).returncode == 2
    assert json.loads(sarif.read_text())["version"] == "2.1.0"


def test_the_text_report_shows_a_url_as_given(tmp_path, monkeypatch):
    """A remote file's name in the text report is its URL (os.path.relpath
    would make it "http:/127.0.0.1…")."""
    import io

    from grit.scan.output import text as R
    from http_server import Server
    monkeypatch.setenv("GRIT_CACHE_DIR", str(tmp_path / "cache"))
    a = grit.encode(np.ones((4, 64), np.float32), grit.GRADE_MXFP4)
    grit.save(str(tmp_path / "m.safetensors"), {"w": a})
    data = (tmp_path / "m.safetensors").read_bytes()
    s = Server()
    try:
        s.files["/m.safetensors"] = data[:-10]          # cut: a finding that names the file
        url = s.url("/m.safetensors")
        rep = scan([url])
    finally:
        s.close()
    out = io.StringIO()
    R.render(rep, "graded", file=out)
    text = out.getvalue()
    assert url in text and url.replace("://", ":/") not in text
