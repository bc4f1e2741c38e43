"""The proof of ``grit convert --to gguf`` compares an NVFP4 weight's written
blocks with the source's planes as the blocks are unblocked, without
building the planes read back (grit.convert_gguf._blocks_hold,
grit.ggml.unblocks_to): the output and proof are those of building the
planes and comparing them, and a changed byte of a weight's blocks or of its
companion scale is found in that weight alone, both ways.  The source is a
tiny Llama that compressed-tensors quantised to NVFP4
(tests/test_convert_gguf_sources.py)."""
from __future__ import annotations

import pytest

pytest.importorskip("gguf", reason="gguf-py is not installed")

from grit import convert as C  # noqa: E402
from grit import convert_gguf as CG  # noqa: E402
from grit.io.gguf_file import read_gguf  # noqa: E402
from _support import assert_progress, recorded, then  # noqa: E402
from test_convert_gguf_sources import model  # noqa: E402,F401
from test_convert_gguf_split import _same_output  # noqa: E402


def test_blocks_compared_as_unblocked_give_the_planes_proof(model, tmp_path,  # noqa: F811
                                                             monkeypatch):
    calls = recorded(monkeypatch, CG, "unblocks_to")
    rep = C.convert(model, str(tmp_path / "fast"), "gguf")
    assert rep.counts == {"bit-exact": 14} and len(calls) >= 10     # the q/k rows move
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", False)
    calls.clear()
    C.convert(model, str(tmp_path / "planes"), "gguf")
    assert not calls
    _same_output(tmp_path / "fast", tmp_path / "planes")


def _flip(path: str, tensor: str, at: int) -> None:
    f = read_gguf(path)
    t = next(t for t in f.tensors if t.name == tensor)
    off = f.data_start + t.offset + at
    with open(path, "r+b") as fh:
        fh.seek(off)
        x = fh.read(1)
        fh.seek(off)
        fh.write(bytes([x[0] ^ 0x01]))


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("where", [("blk.0.ffn_up.weight", 40),     # a code byte
                                   ("blk.0.ffn_up.weight", 1),      # an E4M3 scale
                                   ("blk.0.ffn_up.scale", 0)])      # the companion
def test_a_changed_byte_is_found_in_its_weight_alone(model, tmp_path, monkeypatch,  # noqa: F811
                                                      fast, where):
    """A byte of a weight's written blocks or companion changed before the
    proof reads the file back: that weight alone is not bit-exact, its
    blocks compared as unblocked or its planes built; verify, the other
    way, re-derives the same proof."""
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", fast)
    then(monkeypatch, CG, "save_gguf", lambda path, *a: _flip(path, *where))
    rep = C.convert(model, str(tmp_path / "out"), "gguf")
    assert rep.counts.get("bit-exact") == 13
    for w in rep.proof["weights"]:
        if w["gguf_name"] == "blk.0.ffn_up.weight":
            assert w["verdict"]["verdict"] != "bit-exact"
            assert w["target"]["digest"] != w["source"]["digest"]
        else:
            assert w["verdict"]["verdict"] == "bit-exact", w["gguf_name"]
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", not fast)
    ver = C.verify(model, str(tmp_path / "out"))
    assert ver.ok and ver.checked == 14, ver.problems


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("gname", ["blk.1.attn_q.weight", "blk.0.ffn_down.weight"])
def test_verify_finds_a_changed_weight_alone(model, tmp_path, monkeypatch, fast,  # noqa: F811
                                             gname):
    """verify of a clean conversion holds; a byte changed afterwards in one
    weight's blocks (a query weight, whose rows move, or not) is a problem
    of that weight alone — its target digest and verdict —, its blocks
    compared as unblocked or its planes built."""
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", fast)
    out = tmp_path / "out"
    C.convert(model, str(out), "gguf")
    assert C.verify(model, str(out)).ok
    _flip(str(out / CG.GGUF_FILE), gname, 50)
    ver = C.verify(model, str(out))
    assert ver.checked == 14
    named = {p.split(":")[0] for p in ver.problems}
    assert named == {f"model.layers.{gname.split('.')[1]}." + (
        "self_attn.q_proj.weight" if "attn_q" in gname else "mlp.down_proj.weight")}
    assert any("target digest" in p for p in ver.problems), ver.problems


def test_plain_tensors_are_compared_as_the_files_bytes(model, tmp_path, monkeypatch):  # noqa: F811
    """The proof and verify compare a BF16 tensor read back as the file's
    bytes (no F32 copy of it is made: memory stays at the tensor being
    compared), and a changed byte of one is found: the conversion fails
    naming it, and verify of a changed output names it alone."""
    import shutil

    from grit.errors import GritError
    from grit.io.gguf import Unread
    widened: list[str] = []
    real_read = Unread.read

    def read(self):
        widened.append(self.name)
        return real_read(self)
    monkeypatch.setattr(Unread, "read", read)
    dst = tmp_path / "out"
    C.convert(model, str(dst), "gguf")
    types = {t.name: t.ggml_type for t in read_gguf(str(dst / CG.GGUF_FILE)).tensors}
    assert types["token_embd.weight"] == types["output.weight"] == "BF16"
    assert C.verify(model, str(dst)).ok
    assert widened == []
    bad = tmp_path / "bad"
    shutil.copytree(dst, bad)
    _flip(str(bad / CG.GGUF_FILE), "output.weight", 333)
    rep = C.verify(model, str(bad))
    assert [p.split(" ")[0] for p in rep.problems] == ["output.weight"], rep.problems
    assert "its values are not the source's" in rep.problems[0]
    then(monkeypatch, CG, "save_gguf", lambda path, *a: _flip(path, "token_embd.weight", 70))
    with pytest.raises(GritError, match="token_embd.weight: .*its values are not the source's"):
        C.convert(model, str(tmp_path / "o2"), "gguf")
    assert not (tmp_path / "o2").exists()


def test_moved_rows_digested_with_their_group(model, tmp_path, monkeypatch):  # noqa: F811
    """The query and key weights, whose rows move, are moved and digested
    with their group's source digests (several FNV-1a chains at a time, as
    many as fit in half the largest weight), or alone at their turn: the
    same files and proof both ways; a byte changed in a key weight's
    written blocks is found in it alone."""
    alone = recorded(monkeypatch, CG, "digests", lambda arrays, **kw: len(arrays) == 1)
    rep = C.convert(model, str(tmp_path / "ahead"), "gguf")
    assert rep.counts == {"bit-exact": 14}
    assert len([w for w in rep.proof["weights"] if w["rows"] is not None]) == 4
    n_ahead = sum(alone)
    alone.clear()
    monkeypatch.setattr(CG, "_MOVED_AHEAD", False)
    C.convert(model, str(tmp_path / "turn"), "gguf")
    assert sum(alone) >= n_ahead + 2          # some moved with their group
    _same_output(tmp_path / "ahead", tmp_path / "turn")
    then(monkeypatch, CG, "save_gguf", lambda path, *a: _flip(path, "blk.1.attn_k.weight", 100))
    for ahead in (True, False):
        monkeypatch.setattr(CG, "_MOVED_AHEAD", ahead)
        rep = C.convert(model, str(tmp_path / f"bad{ahead}"), "gguf")
        bad = [w["gguf_name"] for w in rep.proof["weights"]
               if w["verdict"]["verdict"] != "bit-exact"]
        assert bad == ["blk.1.attn_k.weight"]


def test_progress_counts_the_bytes_written_and_proved(model, tmp_path):  # noqa: F811
    """The progress bar's feed: the GGUF's bytes as its tensors are written,
    then as each is proved, up to twice its tensors' bytes."""
    calls: list = []
    C.convert(model, str(tmp_path / "out"), "gguf", progress=lambda *a: calls.append(a))
    assert_progress(calls, CG.GGUF_FILE, steps=20)
