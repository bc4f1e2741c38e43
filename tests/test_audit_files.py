"""§12 across files: NOTE_ASSUMED and the producer tag survive save/load
(safetensors and GGUF), the ledger and rate see the assumption, and
verify_placement on the loaded array clears the note for good."""
from __future__ import annotations

import numpy as np
import pytest

import grit
from grit import layouts as L


pytestmark = pytest.mark.usefixtures("clean_audit")


def _values(shape=(32, 64), seed=3):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


SUFFIXES = [".safetensors", pytest.param(".gguf", marks=pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("gguf") is None, reason="gguf-py absent"))]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_assumed_array_end_to_end(tmp_path, suffix):
    x = _values()
    canon = grit.encode(x, grit.GRADE_MXFP4)
    tiled = grit.relayout(canon, L.TILE_16X16)
    # a converter got tiled bytes with no descriptor and asserted their placement
    bare = grit.GritArray(tiled.descriptor.replace(placement_data=0, placement_scale=0),
                          tiled.shape, tiled.planes)
    a = grit.assume_placement(bare, L.TILE_16X16, "converter wrote 16x16 tiles",
                              producer=0x5A)
    assert a.descriptor.assumed and a.descriptor.producer == 0x5A
    assumed_before, total_before = grit.audit.counts()
    assert assumed_before == 1 and grit.audit.rate() == assumed_before / total_before

    # the ledger record, and its JSONL form
    (rec,) = [r for r in grit.audit.ledger() if r.event == "assume"]
    assert rec.gid_after == a.gid_base32 and rec.reason == "converter wrote 16x16 tiles"
    assert rec.producer == 0x5A and rec.source_location.endswith(
        tuple(f":{i}" for i in range(1, 10000)))
    jl = tmp_path / "ledger.jsonl"
    assert grit.audit.write_jsonl(jl) == len(grit.audit.ledger())
    assert grit.audit.read_jsonl(jl) == grit.audit.ledger()

    # save -> load keeps the note, the producer tag and the gid
    p = tmp_path / f"m{suffix}"
    grit.save(p, {"w": a})
    b = grit.load(p)["w"]
    assert b.descriptor.to_bytes() == a.descriptor.to_bytes()
    assert b.descriptor.assumed and b.descriptor.producer == 0x5A
    assert b.gid == a.gid and b.digest == a.digest
    assumed, total = grit.audit.counts()
    assert assumed == assumed_before and total > total_before    # loading checks, never assumes
    assert grit.audit.rate() == assumed / total

    # verify with a reference, after load: the note clears, the tag and gid stay
    v = grit.verify_placement(b, L.TILE_16X16, reference=grit.decode(canon))
    assert not v.descriptor.assumed and v.descriptor.producer == 0x5A and v.gid == b.gid
    events = [r.event for r in grit.audit.ledger()]
    assert events.count("verify") == 1
    assert grit.audit.write_jsonl(jl) == len(events)
    assert grit.audit.read_jsonl(jl) == grit.audit.ledger()

    # the cleared array stays cleared through another save/load
    q = tmp_path / f"v{suffix}"
    grit.save(q, {"w": v})
    c = grit.load(q)["w"]
    assert not c.descriptor.assumed and c.descriptor.producer == 0x5A
    assert c.descriptor.to_bytes() == v.descriptor.to_bytes() and c.gid == a.gid
    assert np.array_equal(grit.decode(c).view(np.uint32), grit.decode(canon).view(np.uint32))


def test_wrong_reference_after_load_keeps_note(tmp_path):
    canon = grit.encode(_values(), grit.GRADE_MXFP4)
    a = grit.assume_placement(canon, L.TILE_16X16, "a claim that is false", producer=7)
    p = tmp_path / "f.safetensors"
    grit.save(p, {"w": a})
    b = grit.load(p)["w"]
    with pytest.raises(grit.GritLayoutError):
        grit.verify_placement(b, L.TILE_16X16, reference=grit.decode(canon))
    grit.save(tmp_path / "g.safetensors", {"w": b})
    assert grit.load(tmp_path / "g.safetensors")["w"].descriptor.assumed
