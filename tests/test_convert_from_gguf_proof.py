"""The proof of a conversion from a GGUF (grit.convert_gguf._prove_from_gguf):
the weights are digested and compared a few at a time (their FNV-1a chains
interleaved, ``grit.fingerprint.digests_compared``), within a budget of
built planes, or — blocks of a split type — compared as they are unblocked
with nothing built, the output's planes digested a few at a time; the
output and its proof are those of proving one weight at a time, and a byte
changed in any weight of a group is found in that weight alone.  The GGUF is gguf-py's (tests/test_convert_gguf_split.py's two-block
Llama of Q8_0 weights)."""
from __future__ import annotations

import json

import pytest

gguf = pytest.importorskip("gguf", reason="gguf-py is not installed")

from grit import convert as C  # noqa: E402
from grit import convert_gguf as CG  # noqa: E402
from _support import assert_progress, recorded, then  # noqa: E402
from test_convert_gguf_split import _llama_q8, _same_output  # noqa: E402


@pytest.fixture(scope="module")
def q8(tmp_path_factory):
    root = tmp_path_factory.mktemp("q8p")
    src = str(root / "m.gguf")
    _llama_q8(src)
    return src


def _proof(folder) -> dict:
    return json.loads((folder / C.PROOF_FILE).read_text())


@pytest.mark.parametrize("fast", (True, False))
def test_grouped_proof_is_the_one_at_a_time_proof(q8, tmp_path, monkeypatch, fast):
    """Grouped (the default), one weight at a time (LANES = 1) and with no
    room for more than one built weight (a budget of 0): the same files,
    proof included, whether the Q8_0 blocks are compared as they are
    unblocked (fast: nothing built, ``unblocks_to``) or the source's planes
    built and compared; and the groups were formed (more than one weight
    at once).  Both ways give the same files."""
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", fast)
    seen = recorded(monkeypatch, CG, "digests_compared", lambda a, b, **kw: len(a))
    compared = recorded(monkeypatch, CG, "unblocks_to")
    grouped = C.convert(q8, str(tmp_path / "g"), "compressed-tensors")
    assert grouped.counts == {"bit-exact": 14}
    if fast:        # (the query and key weights of both blocks: rows moved, built)
        assert compared == ["Q8_0"] * 10 and sum(seen) == 4
    else:
        assert not compared and max(seen) > 1 and sum(seen) == 14
    monkeypatch.setattr(CG, "LANES", 1)
    C.convert(q8, str(tmp_path / "one"), "compressed-tensors")
    _same_output(tmp_path / "g", tmp_path / "one")
    monkeypatch.setattr(CG, "LANES", 4)
    monkeypatch.setattr(CG, "_group_budget", lambda g: 0)
    C.convert(q8, str(tmp_path / "tight"), "compressed-tensors")
    _same_output(tmp_path / "g", tmp_path / "tight")
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", not fast)
    C.convert(q8, str(tmp_path / "other"), "compressed-tensors")
    _same_output(tmp_path / "g", tmp_path / "other")


def _data_spans(path: str) -> dict[str, tuple[int, int]]:
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        head = json.loads(f.read(n))
    return {k: (8 + n + e["data_offsets"][0], 8 + n + e["data_offsets"][1])
            for k, e in head.items() if k != "__metadata__"}


@pytest.mark.parametrize("fast", (True, False))
@pytest.mark.parametrize("victim", ("model.layers.0.self_attn.k_proj.weight",
                                    "model.layers.1.mlp.up_proj.weight"))
def test_a_changed_byte_is_found_in_its_weight_alone(q8, tmp_path, monkeypatch, victim, fast):
    """A byte of one weight changed in the written file before the proof
    reads it back: that weight's target digest is not the source's and its
    verdict is not bit-exact; every other weight of its group proves as
    before — blocks compared as unblocked or planes built (verify re-derives
    the proof the other way)."""
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", fast)
    monkeypatch.setattr(CG, "_COMPARE_STEP", 3 * 34)      # three Q8_0 blocks a step

    def change(g, to, plan, out, *rest):
        a, b = _data_spans(out)[victim]
        with open(out, "r+b") as f:
            f.seek((a + b) // 2)
            x = f.read(1)
            f.seek((a + b) // 2)
            f.write(bytes([x[0] ^ 0x01]))
    then(monkeypatch, CG, "_write_from_gguf", change)
    rep = C.convert(q8, str(tmp_path / "out"), "compressed-tensors")
    assert rep.counts.get("bit-exact") == 13
    for w in rep.proof["weights"]:
        if w["name"] == victim:
            assert w["target"]["digest"] != w["source"]["digest"]
            assert w["verdict"]["verdict"] != "bit-exact"
        else:
            assert w["verdict"]["verdict"] == "bit-exact", w["name"]
    # the proof says what the files hold: grit verify re-derives the same verdicts
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", not fast)
    assert C.verify(q8, str(tmp_path / "out")).ok


@pytest.mark.parametrize("fast", (True, False))
@pytest.mark.parametrize("lanes", (None, 1))
def test_verify_finds_a_changed_byte_in_its_weight_alone(q8, tmp_path, monkeypatch, lanes,
                                                         fast):
    """grit verify, grouped or one weight at a time, blocks compared as
    unblocked or planes built: a clean conversion holds; a byte changed in
    one weight's output is a problem of that weight alone (its target
    digest and verdict)."""
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", fast)
    if lanes is not None:
        monkeypatch.setattr(CG, "LANES", lanes)
    out = tmp_path / "out"
    C.convert(q8, str(out), "compressed-tensors")
    assert C.verify(q8, str(out)).ok
    victim = "model.layers.0.mlp.gate_proj.weight"
    a, b = _data_spans(str(out / "model.safetensors"))[victim]
    with open(out / "model.safetensors", "r+b") as f:
        f.seek(a + 7)
        x = f.read(1)
        f.seek(a + 7)
        f.write(bytes([x[0] ^ 0x10]))
    rep = C.verify(q8, str(out))
    assert not rep.ok and rep.checked == 14
    assert rep.problems and all(p.startswith(victim + ":") for p in rep.problems), rep.problems
    assert any("target digest" in p for p in rep.problems)


def test_progress_counts_the_bytes_written_and_proved(q8, tmp_path):
    """The progress bar's feed: the output's bytes as its tensors are
    written, then as each weight is proved."""
    calls: list = []
    C.convert(q8, str(tmp_path / "out"), "compressed-tensors",
              progress=lambda *a: calls.append(a))
    assert_progress(calls, "model.safetensors", steps=10)
