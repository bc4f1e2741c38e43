"""``grit explain A B``: the field-by-field descriptor diff of §7.5 / §13."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

import grit
from grit.cli import main
from grit.explain import (
    VERDICT_DIFFERENT, VERDICT_PLACEMENT, VERDICT_SAME, ExplainInputError, diff, render, resolve, to_dict,
)

R = CliRunner()


def _row(ex, field):
    return next(d for d in ex if d.field == field)


def test_mxfp4_vs_rne_is_decode_equivalent_with_an_edge():
    ex = diff("GRADE_MXFP4", "GRADE_MXFP4_RNE")
    assert not ex.same and ex.decode_equivalent and ex.supersedes == "decode"
    assert ex.verdict == "same decode, different encode (supersedes edge: decode scope)"
    # only grade_id differs in the frame; only esr in the grade
    assert [d.field for d in ex.differences] == ["grade_id", "esr", "canonical"]
    assert _row(ex, "esr").remark == "encode"
    text = render(ex)
    assert "esr: exp2floormaxabs → exp2rnemaxabs" in text
    assert "GRADE_MXFP4_RNE" in text and "decode-equivalent: yes" in text
    assert "= decode projection: " + grit.GRADE_MXFP4.decode_projection in text
    assert text.rstrip().endswith(ex.verdict)


def test_mxfp4_vs_nvf4_differs_in_representation():
    ex = diff(grit.GRADE_MXFP4, "nvf4")
    assert not ex.same and ex.decode_equivalent is False and ex.supersedes is None
    assert ex.verdict == VERDICT_DIFFERENT
    text = render(ex)
    for line in ("k0: 32 → 16", "n_levels: 1 → 2", "scale0: e8m0 (0x4807) → e4m3 (0x2887)",
                 "scale1: ABSENT (0x0000) → binary32 (0x371f)", "s1: (absent) → binary32",
                 "esr: exp2floormaxabs → ratiomaxabs", "decode-equivalent: no"):
        assert line in text, line
    assert "≠ decode projection" in text


def test_note_only_difference_is_the_same_contract_and_gid():
    d = grit.GRADE_MXFP4.descriptor()
    e = d.with_note(grit.descriptor.NOTE_ASSUMED | (7 << grit.descriptor.NOTE_PRODUCER_SHIFT))
    shape = (4, 64)
    a = (d, grit.GRADE_MXFP4, shape, "a")
    b = (e, grit.GRADE_MXFP4, shape, "b")
    ex = diff(a, b)
    assert ex.same and ex.verdict == VERDICT_SAME
    assert [x.field for x in ex.differences] == ["note.assumed (NOTE_ASSUMED)", "note.producer"]
    assert _row(ex, "gid").equal
    text = render(ex)
    assert "note.producer: 0 → 7" in text and "not hashed" in text
    assert "gid are unchanged" in text
    # through the CLI, as hex: exit 0
    r = R.invoke(main, ["explain", d.hex(), e.hex()])
    assert r.exit_code == 0, r.output
    assert "same contract" in r.output


def test_hex_vs_grade_name():
    h = grit.GRADE_NVF4.descriptor().hex()
    spaced = " ".join(h[i:i + 16] for i in range(0, 128, 16))
    d, g, shape, label = resolve(spaced)
    assert d == grit.GRADE_NVF4.descriptor() and g is grit.GRADE_NVF4 and shape is None
    ex = diff(spaced, "GRADE_NVF4")
    assert ex.same and not ex.differences
    r = R.invoke(main, ["explain", spaced, "nvf4"])
    assert r.exit_code == 0 and "verdict: same contract" in r.output
    r = R.invoke(main, ["explain", h, "grit1(k0=16,e=fp4,s0=e4m3,k1=0,s1=f32,esr=ratio,er=rtz)"])
    assert r.exit_code == 1
    assert "er: rne → rtz" in r.output and "supersedes edge: decode scope" in r.output


def test_unregistered_grade_and_format_words():
    g = grit.Grade.parse("grit1(e=x20a7,k0=64,s0=e8m0,esr=exp2floormaxabs)")
    ex = diff(g, "mxfp4")
    text = render(ex)
    assert "k0: 64 → 32" in text
    assert "x20a7 (w=8 p=5" in text and "nan_enc=" in text
    # a hex descriptor whose grade this process does not know
    h = g.descriptor().hex()
    ex = diff(h, "mxfp4")
    assert "not registered" in render(ex) and ex.verdict == VERDICT_DIFFERENT


def test_placement_only_difference():
    from grit.placement.words import placement_by_name
    d = grit.GRADE_MXFP4.descriptor()
    e = d.replace(placement_scale=placement_by_name("SWIZZLE_128X4B"))
    ex = diff(d, e)
    assert not ex.same and ex.verdict == VERDICT_PLACEMENT
    assert any("relayout" in r for r in ex.remarks)
    assert "placement_scale: ROW_MAJOR (0x1000000000000001) → SWIZZLE_128X4B" in render(ex)


def test_show_all_and_flags():
    ex = diff("GRADE_I8S24", "GRADE_I8S24")
    text = render(ex, show_all=True)
    assert "= flags: 0x04 SPARSE" in text and "= sp_order: ASC_LSB" in text
    assert "= placement_meta: LINEAR_META" in text and "= an: any" in text
    assert "flags" not in render(ex)
    r = R.invoke(main, ["explain", "i8s24", "GRADE_I8S24", "--all"])
    assert r.exit_code == 0 and "= sp_meta_fmt: U2" in r.output


def test_color_output():
    assert "\x1b[" in render(diff("mxfp4", "nvf4"), color=True)
    assert "\x1b[" not in render(diff("mxfp4", "nvf4"))


def test_json_output():
    r = R.invoke(main, ["explain", "GRADE_MXFP4", "GRADE_MXFP4_RNE", "--json"])
    assert r.exit_code == 1
    out = json.loads(r.output)
    assert out["differences"] == ["grade_id", "esr", "canonical"]
    assert out["decode_equivalent"] is True and out["supersedes"] == "decode"
    assert out["same_contract"] is False
    esr = next(f for f in out["fields"] if f["field"] == "esr")
    assert (esr["a"], esr["b"], esr["equal"]) == ("exp2floormaxabs", "exp2rnemaxabs", False)
    assert len(out["fields"]) == len(to_dict(diff("mxfp4", "mxfp4_rne"))["fields"])
    r = R.invoke(main, ["explain", "mxfp4", "mxfp4", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["verdict"] == VERDICT_SAME


@pytest.mark.parametrize("a,b,which,why", [
    ("nonsense", "mxfp4", "A", "not 128 hex digits"),
    ("mxfp4", "ab" * 20, "B", "128 hex digits"),
    ("mxfp4", "grit1(e=e2m1)", "B", "not a valid grade string"),
    ("mxfp4", "grit1(e=e2m1,k0=32,s0=e8m0,esr=ocpmx,swizzled=1)", "B", "unknown grade key"),
])
def test_unresolvable_exit_4(a, b, which, why):
    r = R.invoke(main, ["explain", a, b])
    assert r.exit_code == 4
    assert f"cannot resolve {which}" in r.output and why in r.output
    r = R.invoke(main, ["explain", a, b, "--json"])
    assert r.exit_code == 4 and json.loads(r.output)["argument"] == which


def test_unresolvable_files(tmp_path):
    p = tmp_path / "junk.bin"
    p.write_bytes(b"not a checkpoint")
    r = R.invoke(main, ["explain", f"{p}:w", "mxfp4"])
    assert r.exit_code == 4 and "cannot resolve A" in r.output and "cannot read" in r.output
    r = R.invoke(main, ["explain", "mxfp4", str(p)])
    assert r.exit_code == 4 and ":TENSOR" in r.output
    with pytest.raises(ExplainInputError):
        resolve(42)


def test_status_still_explained():
    r = R.invoke(main, ["explain", "SizeMismatch"])
    assert r.exit_code == 0 and "What it means" in r.output
    assert R.invoke(main, ["explain", "Bogus"]).exit_code == 2
    assert R.invoke(main, ["explain", "a", "b", "c"]).exit_code == 2


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory):
    gguf = pytest.importorskip("gguf")
    T = gguf.GGMLQuantizationType
    path = tmp_path_factory.mktemp("explain") / "t.gguf"
    w = gguf.GGUFWriter(str(path), "explain-test")
    x = np.linspace(-1, 1, 4 * 64, dtype=np.float32).reshape(4, 64)
    w.add_tensor("w.q8", gguf.quants.quantize(x, T.Q8_0), raw_dtype=T.Q8_0)
    w.add_tensor("w.q8.half", gguf.quants.quantize(x[:2], T.Q8_0), raw_dtype=T.Q8_0)
    w.add_tensor("w.f32", x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_file_tensor(gguf_path):
    d, g, shape, label = resolve(f"{gguf_path}:w.q8")
    assert shape == (4, 64) and g is not None and g["e"] == "s8" and g.k0 == 32
    assert label.endswith(":w.q8")
    ex = diff(f"{gguf_path}:w.q8", f"{gguf_path}:w.q8")
    assert ex.same and _row(ex, "gid").equal
    # same descriptor, other shape: same contract, different gid
    ex = diff(f"{gguf_path}:w.q8", f"{gguf_path}:w.q8.half")
    assert ex.same and not _row(ex, "gid").equal and "shapes differ" in render(ex)
    r = R.invoke(main, ["explain", f"{gguf_path}:w.q8", "GRADE_MXFP4"])
    assert r.exit_code == 1
    for line in ("elem: s8 (0x03e7) → e2m1 (0x2043)", "placement_data: BLOCK_AOS",
                 "esr: ratiomaxabs → exp2floormaxabs", VERDICT_DIFFERENT):
        assert line in r.output, line


def test_file_tensor_unresolvable(gguf_path):
    r = R.invoke(main, ["explain", f"{gguf_path}:nope", "mxfp4"])
    assert r.exit_code == 4 and "no tensor 'nope'" in r.output and "w.q8" in r.output
    r = R.invoke(main, ["explain", "mxfp4", f"{gguf_path}:w.f32"])
    assert r.exit_code == 4 and "cannot resolve B" in r.output and "not a GRIT array" in r.output


def test_gguf_zero_copy_vs_canonical_is_same_decode_different_placement(gguf_path, tmp_path):
    gguf = pytest.importorskip("gguf")
    q8 = grit.load(str(gguf_path))["w.q8"]
    canon = grit.canonical(q8)
    # the values agree with gguf-py's own reader + dequantize (the oracle), in both placements
    [t] = [t for t in gguf.GGUFReader(str(gguf_path)).tensors if t.name == "w.q8"]
    want = gguf.quants.dequantize(t.data, t.tensor_type)
    assert np.array_equal(np.asarray(grit.decode(q8)), want)
    assert np.array_equal(np.asarray(grit.decode(canon)), want)
    other = str(tmp_path / "canon.safetensors")
    grit.save(other, {"w": canon})
    ex = diff(f"{gguf_path}:w.q8", f"{other}:w")
    assert ex.verdict == VERDICT_PLACEMENT and ex.kind == "placement" and not ex.same
    assert [d.field for d in ex.differences] == ["flags", "placement_data", "gid"]
    assert "INTERLEAVED → 0x00" in render(ex)
    r = R.invoke(main, ["explain", f"{gguf_path}:w.q8", f"{other}:w", "--json"])
    assert r.exit_code == 1
    out = json.loads(r.output)
    assert (out["verdict"], out["verdict_kind"]) == (VERDICT_PLACEMENT, "placement")
    # a frame field besides the placement (k0 here) is another contract
    d = q8.descriptor
    ex = diff((d, q8.grade, None, "a"), grit.Grade.parse(
        "grit1(e=s8,k0=64,s0=binary16,esr=ratiomaxabs)"))
    assert ex.verdict == VERDICT_DIFFERENT and ex.kind == "different"
    # the same grade with a flag other than INTERLEAVED changed is not placement-only
    e = d.replace(flags=d.flags ^ grit.descriptor.F_MSB_FIRST)
    ex = diff((d, q8.grade, None, "a"), (e, q8.grade, None, "b"))
    assert ex.verdict == VERDICT_DIFFERENT


def test_a_bare_grade_is_compared_at_the_tensors_group_axis(tmp_path):
    # a 2-D weight groups along its last axis (group_axis 1); a grade names no
    # axis, so against a tensor it stands for its descriptor at that axis
    p = str(tmp_path / "m.safetensors")
    grit.save(p, {"w": grit.encode(np.ones((64, 128), np.float32), grit.GRADE_MXFP4)})
    assert grit.load(p)["w"].descriptor.group_axis == 1
    for a, b in ((f"{p}:w", "GRADE_MXFP4"), ("GRADE_MXFP4", f"{p}:w"),
                 (f"{p}:w", grit.GRADE_MXFP4.canonical)):
        ex = diff(a, b)
        assert ex.same and ex.verdict == VERDICT_SAME, render(ex)
        assert any("group_axis 1" in r for r in ex.remarks)
    r = R.invoke(main, ["explain", f"{p}:w", "GRADE_MXFP4"])
    assert r.exit_code == 0 and "verdict: same contract" in r.output, r.output
    # another grade still differs, and a descriptor (not a bare grade) keeps its axis
    assert diff(f"{p}:w", "GRADE_NVF4").verdict == VERDICT_DIFFERENT
    ex = diff(f"{p}:w", grit.GRADE_MXFP4.descriptor().hex())
    assert not ex.same and [d.field for d in ex.differences][0] == "group_axis"
