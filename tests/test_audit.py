"""§5.5 / §12: assume_placement, NOTE_ASSUMED, the ledger, the rate and its
ceiling, and verify_placement."""
import dataclasses
import datetime
import json
import pickle
import sys
import threading

import numpy as np
import pytest

import grit
from grit import descriptor as D
from grit import layouts as L
from grit.audit import AuditRecord

ROW = L.ROW_MAJOR
TILE = L.TILE_16X16


def _relayout():
    """grit.relayout (an import, kept as a function so the tests read as before)."""
    return grit.relayout


pytestmark = pytest.mark.usefixtures("clean_audit")


def _values(shape=(32, 64), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def mx(shape=(32, 64), **kw):
    return grit.encode(_values(shape), grit.GRADE_MXFP4, **kw)


def unplaced(shape=(32, 64)):
    """Bytes whose placement nobody has asserted (a file without a descriptor)."""
    return mx(shape, placement_data=0, placement_scale=0)


# --- the reason is mandatory (§12.1) --------------------------------------------------

@pytest.mark.parametrize("reason", ["", " ", "\t\n ", None, b"bytes", 7])
def test_reason_must_be_a_non_empty_str(reason):
    a = mx()
    with pytest.raises(grit.GritError):
        grit.assume_placement(a, TILE, reason)
    with pytest.raises(grit.GritError):
        grit.assume_placement(a, TILE, reason=reason)
    assert grit.audit.ledger() == ()


def test_reason_missing_is_an_error_not_a_default():
    a = mx()
    before = grit.audit.counts()
    with pytest.raises(grit.GritUsageError, match="requires a reason"):
        grit.assume_placement(a, TILE)
    with pytest.raises(grit.GritUsageError):
        grit.assume_placement(a, data=TILE)
    assert grit.audit.ledger() == () and grit.audit.counts() == before


# --- the note bit, the gid, the bytes ---------------------------------------------------

def test_note_bit_set_bytes_untouched_gid_ignores_the_note():
    a = mx()
    b = grit.assume_placement(a, data=TILE, scale=TILE, reason="converter wrote 16x16 tiles")
    assert b.descriptor.note & D.NOTE_ASSUMED and b.descriptor.assumed
    assert not a.descriptor.assumed                      # the input is not changed
    assert b.descriptor.placements == (TILE, TILE, 0)
    assert all(x is y for x, y in zip(a.planes, b.planes))  # not a byte moved
    assert b.digest == a.digest
    # the note is not in the gid (§11.1): same claim without the bit, same gid
    plain = grit.GritArray(b.descriptor.with_note(0), b.shape, b.planes)
    assert plain.gid == b.gid
    # assuming the placement already claimed changes nothing the gid sees
    c = grit.assume_placement(a, ROW, "re-asserting the canonical order")
    assert c.gid == a.gid and c.descriptor.assumed
    assert grit.audit.ledger()[-1].gid_before == grit.audit.ledger()[-1].gid_after


def test_producer_tag_goes_into_note_bits_8_to_15():
    b = grit.assume_placement(mx(), TILE, "tool 0x5a", producer=0x5A)
    assert b.descriptor.note == 0x5A01 and b.descriptor.producer == 0x5A
    # no producer= keeps the tag already there
    c = grit.assume_placement(b, ROW, "again")
    assert c.descriptor.producer == 0x5A
    assert grit.audit.ledger()[0].producer == 0x5A
    for bad in (256, -1, True):
        with pytest.raises(grit.GritUsageError):
            grit.assume_placement(mx(), TILE, "x", producer=bad)


def test_per_role_keywords_and_names():
    a = mx()
    b = grit.assume_placement(a, reason="only the data plane is tiled", data="tile_16x16")
    assert b.descriptor.placements == (TILE, ROW, 0)
    s = grit.encode(_values((16, 64)), grit.GRADE_I8S24)
    t = grit.assume_placement(s, meta=L.META_M16N8K32, reason="mma.sp fragment order")
    assert t.descriptor.placements == (ROW, ROW, L.META_M16N8K32)
    assert grit.audit.ledger()[-1].placement_from == "meta=LINEAR_META"
    assert grit.audit.ledger()[-1].placement_to == "meta=META_M16N8K32"
    # keyword wins over the positional for its role
    c = grit.assume_placement(unplaced(), ROW, "mixed", data=TILE)
    assert c.descriptor.placements == (TILE, ROW, 0)
    # ROW_MAJOR names the canonical order of every plane, as relayout reads it
    assert grit.assume_placement(unplaced(), ROW, "r").descriptor.placements == (ROW, ROW, 0)
    u = grit.GritArray(s.descriptor.replace(placement_data=0, placement_scale=0), s.shape,
                       s.planes)
    assert grit.assume_placement(u, ROW, "r").descriptor.placements == (ROW, ROW, L.LINEAR_META)
    # BLOCK_AOS brings its INTERLEAVED flag, and separate planes are not interleaved bytes
    n = len(grit.audit.ledger())
    with pytest.raises(grit.GritSizeError, match="INTERLEAVED"):
        grit.assume_placement(a, data=L.BLOCK_AOS, reason="ggml block structs")
    assert len(grit.audit.ledger()) == n


def test_positional_placement_names_the_planes_relayout_would_move():
    relayout = _relayout()
    if relayout is None:
        pytest.skip("grit.relayout is not available")
    for shape in ((32, 64), (32, 512)):
        a = mx(shape)
        assert (grit.assume_placement(a, TILE, "tiles").descriptor.placements
                == relayout(a, TILE).descriptor.placements)


def test_bad_placements_are_refused_and_not_recorded():
    a = mx()
    with pytest.raises(grit.GritLayoutError):
        grit.assume_placement(a, "NOT_A_PLACEMENT", "x")
    with pytest.raises(grit.GritLayoutError):              # class 0x1, not registered
        grit.assume_placement(a, 0x10000000000000FF, "x")
    with pytest.raises(grit.GritUsageError):
        grit.assume_placement(a, L.UNSPECIFIED, "x")
    with pytest.raises(grit.GritUsageError):
        grit.assume_placement(a, reason="no placement at all")
    with pytest.raises(grit.GritUsageError):
        grit.assume_placement(a.payload(), TILE, "not an array")
    with pytest.raises(grit.GritLayoutError):              # no aux plane to place
        grit.assume_placement(a, meta=L.LINEAR_META, reason="x")
    assert grit.audit.ledger() == () and grit.audit.counts()[0] == 0


# --- the ledger record --------------------------------------------------------------------

def test_ledger_record_fields():
    a = mx()
    why = "weights came tiled from the exporter"
    b = grit.assume_placement(a, None, why, data="TILE_16X16", scale=TILE); line = sys._getframe().f_lineno  # noqa: E702,E501
    (r,) = grit.audit.ledger()
    assert isinstance(r, AuditRecord) and r.event == "assume" and r.checks == ()
    assert r.timestamp.endswith("Z")
    ts = datetime.datetime.fromisoformat(r.timestamp[:-1] + "+00:00")
    assert abs(datetime.datetime.now(datetime.timezone.utc) - ts).total_seconds() < 60
    assert r.gid_before == a.gid_base32 and r.gid_after == b.gid_base32
    assert r.gid_before != r.gid_after                     # the placement words are hashed
    assert r.placement_from == "data=ROW_MAJOR, scale=ROW_MAJOR"
    assert r.placement_to == "data=TILE_16X16, scale=TILE_16X16"
    assert r.reason == "weights came tiled from the exporter"
    assert r.source_location == f"{__file__}:{line}"
    assert list(r.to_dict())[:7] == ["timestamp", "gid_before", "gid_after", "placement_from",
                                     "placement_to", "reason", "source_location"]


def test_source_location_skips_grit_frames():
    ns = {"__name__": "grit._pretend_adapter", "grit": grit}
    exec(compile("def load(a):\n    return grit.assume_placement(a, 'TILE_16X16', 'adapter')\n",
                 "grit/_pretend_adapter.py", "exec"), ns)
    ns["load"](mx()); line = sys._getframe().f_lineno  # noqa: E702
    assert grit.audit.ledger()[-1].source_location == f"{__file__}:{line}"


def test_ledger_is_an_immutable_append_only_snapshot():
    a = mx()
    grit.assume_placement(a, TILE, "one")
    snap = grit.audit.ledger()
    grit.assume_placement(a, TILE, "two")
    assert isinstance(snap, tuple) and len(snap) == 1 and len(grit.audit.ledger()) == 2
    assert grit.audit.ledger()[0] == snap[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap[0].reason = "rewritten"
    public = [n for n in dir(grit.audit) if not n.startswith("_")]
    assert not [n for n in public if n.startswith(("clear", "remove", "delete", "pop"))]


def test_jsonl_round_trip_is_whole_and_atomic(tmp_path):
    u = unplaced()
    b = grit.assume_placement(u, ROW, "exporter writes row-major", producer=3)
    grit.verify_placement(b, ROW, reference=grit.decode(mx()))
    path = tmp_path / "audit.jsonl"
    path.write_text("stale content that must go\n")
    assert grit.audit.write_jsonl(path) == 2
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    objs = [json.loads(ln) for ln in lines]
    assert [list(o) for o in objs] == [list(AuditRecord._KEYS)] * 2
    assert objs[1]["event"] == "verify" and objs[1]["checks"]["reference"].startswith("passed")
    assert grit.audit.read_jsonl(path) == grit.audit.ledger()
    assert grit.audit.write_jsonl(path) == 2               # rewriting is idempotent
    assert path.read_text(encoding="utf-8").splitlines() == lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.jsonl"]  # no temp left


# --- crossings, rate, ceiling ---------------------------------------------------------------

def test_crossings_and_rate():
    assert grit.audit.rate() == 0.0 and grit.audit.counts() == (0, 0)
    a = mx()                                   # a GritArray is built through grit.check
    n = grit.audit.counts()[1]
    assert n >= 1
    grit.GritArray(a.descriptor, a.shape, a.planes)
    assert grit.audit.counts() == (0, n + 1)
    grit.check(a.descriptor, a.shape, a.planes, level=0)          # erased: no crossing
    grit.check(a.descriptor, a.shape, a.planes, level=2)
    with pytest.raises(grit.GritSizeError):                        # failed: nothing crossed
        grit.check(a.descriptor, a.shape, [1, 2, 3, 4])
    assert grit.audit.counts() == (0, n + 2)
    grit.audit.crossing(2)
    grit.assume_placement(a, TILE, "one assumption")
    assert grit.audit.counts() == (1, n + 5)             # its own GritArray is not counted
    assert grit.audit.rate() == pytest.approx(1 / (n + 5))
    with pytest.raises(grit.GritUsageError):
        grit.audit.crossing(-1)


def test_ceiling_from_environment_refuses_and_records_nothing(monkeypatch):
    monkeypatch.setenv("GRIT_AUDIT_MAX_RATE", "0.5")
    a = mx()                                              # 1 crossing
    grit.audit._reset_for_tests()
    with pytest.raises(grit.GritLayoutError, match="above the ceiling"):
        grit.assume_placement(a, TILE, "first crossing of the process")   # would be 1/1
    assert grit.audit.ledger() == () and grit.audit.counts() == (0, 0)
    grit.audit.crossing(3)
    for _ in range(3):                                    # 1/4, 2/5, 3/6: at most 0.5
        grit.assume_placement(a, TILE, "within budget")
    assert grit.audit.rate() == 0.5
    with pytest.raises(grit.GritLayoutError) as ei:       # 4/7 > 0.5
        grit.assume_placement(a, TILE, "one too many")
    assert "Fix:" in str(ei.value) and ei.value.status == grit.Status.PLACEMENT_UNKNOWN
    assert len(grit.audit.ledger()) == 3 and grit.audit.counts() == (3, 6)


def test_set_max_rate_overrides_the_environment(monkeypatch):
    monkeypatch.setenv("GRIT_AUDIT_MAX_RATE", "0")
    a = mx()
    with pytest.raises(grit.GritLayoutError):
        grit.assume_placement(a, TILE, "ceiling 0 forbids every assumption")
    grit.audit.set_max_rate(1.0)
    grit.assume_placement(a, TILE, "ceiling 1 forbids none")
    grit.audit.set_max_rate(None)                         # back to the environment
    assert grit.audit.max_rate() == 0.0
    for bad in (1.5, -0.1, float("nan"), "x"):
        with pytest.raises(grit.GritUsageError):
            grit.audit.set_max_rate(bad)
    monkeypatch.setenv("GRIT_AUDIT_MAX_RATE", "lots")
    with pytest.raises(grit.GritUsageError, match="GRIT_AUDIT_MAX_RATE"):
        grit.assume_placement(a, TILE, "misconfigured ceiling")


def test_ledger_and_counters_are_thread_safe():
    a = mx()
    grit.audit._reset_for_tests()

    def work():
        for _ in range(25):
            grit.assume_placement(a, TILE, "threaded")
            grit.audit.crossing()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(grit.audit.ledger()) == 200 and grit.audit.counts() == (200, 400)


# --- NOTE_ASSUMED is sticky (§12.2) ---------------------------------------------------------

def test_sticky_through_descriptor_bytes_payload_and_pickle():
    b = grit.assume_placement(mx(), TILE, "sticky", producer=9)
    raw = b.descriptor.to_bytes()
    assert D.Descriptor.from_bytes(raw).assumed and D.Descriptor.from_bytes(raw).producer == 9
    c = grit.GritArray.from_payload(raw, b.shape, b.payload())
    assert c.descriptor.assumed and c.gid == b.gid
    assert pickle.loads(pickle.dumps(b)).descriptor.assumed


def test_sticky_through_relayout():
    relayout = _relayout()
    if relayout is None:
        pytest.skip("grit.relayout is not available")
    b = grit.assume_placement(unplaced(), ROW, "sticky", producer=4)
    r = relayout(b, data=TILE)
    assert r.descriptor.placement_data == TILE
    assert r.descriptor.assumed and r.descriptor.producer == 4
    assert relayout(r, ROW).descriptor.assumed


def test_sticky_through_slice():
    if not hasattr(grit.GritArray, "__getitem__"):
        pytest.skip("GritArray slicing is not available")
    b = grit.assume_placement(mx(), ROW, "sticky")
    assert b[0:16].descriptor.assumed


def test_sticky_through_concat():
    if not hasattr(grit, "concat"):
        pytest.skip("grit.concat is not available")
    b = grit.assume_placement(mx(), ROW, "sticky")
    assert grit.concat([b, mx()], axis=0).descriptor.assumed
    assert grit.concat([mx(), b], axis=0).descriptor.assumed


# --- verify_placement ------------------------------------------------------------------------

def test_verify_clears_the_bit_only_with_a_proof():
    ref = mx()
    b = grit.assume_placement(unplaced(), ROW, "exporter writes row-major", producer=2)
    n = len(grit.audit.ledger())
    with pytest.raises(grit.GritLayoutError, match="cannot prove") as ei:
        grit.verify_placement(b, ROW)
    msg = str(ei.value)
    assert "checks: digest: not run" in msg and "reference: not run" in msg
    assert "reference=" in msg                              # the fix names what is missing
    with pytest.raises(grit.GritLayoutError, match="cannot prove"):
        grit.verify_placement(b, ROW, expected_digest=b.digest)   # identity is not placement
    assert len(grit.audit.ledger()) == n                  # failures record nothing
    before = grit.audit.counts()
    v = grit.verify_placement(b, ROW, reference=grit.decode(ref), expected_digest=b.digest)
    assert not v.descriptor.assumed and v.descriptor.producer == 2
    assert v.gid == b.gid and all(x is y for x, y in zip(v.planes, b.planes))
    assert grit.audit.counts() == (before[0], before[1] + 1)
    r = grit.audit.ledger()[-1]
    checks = dict(r.checks)
    assert r.event == "verify" and r.gid_before == r.gid_after == b.gid_base32
    assert r.placement_to == "data=ROW_MAJOR, scale=ROW_MAJOR"
    assert checks["digest"] == "passed" and checks["reference"].startswith("passed")
    assert checks["content"].startswith("not applicable")
    # a canonical GritArray is a reference too; the default claim is the whole claim
    assert not grit.verify_placement(b, reference=ref).descriptor.assumed


def test_verify_refutes_wrong_values():
    ref = grit.decode(mx())
    b = grit.assume_placement(unplaced(), ROW, "optimistic")
    wrong = ref.copy()
    wrong[3, 5] = -wrong[3, 5] if wrong[3, 5] != 0 else np.float32(1.0)
    with pytest.raises(grit.GritLayoutError, match="not in the claimed placement") as ei:
        grit.verify_placement(b, ROW, reference=wrong)
    assert "1 of 2048 elements differ from the reference; first at (3, 5)" in str(ei.value)
    with pytest.raises(grit.GritLayoutError, match="hash to"):
        grit.verify_placement(b, ROW, reference=ref, expected_digest=bytes(16))
    assert grit.audit.ledger()[-1].event == "assume"


def test_verify_refutes_a_false_tile_claim():
    a = mx()
    b = grit.assume_placement(a, data=TILE, reason="wrong: these bytes are row-major")
    with pytest.raises(grit.GritLayoutError) as ei:
        grit.verify_placement(b, data=TILE, reference=grit.decode(a))
    assert b.descriptor.assumed
    if _relayout() is not None:
        msg = str(ei.value)
        assert "not in the claimed placement" in msg and "differ from the reference" in msg
        assert "the bytes are ROW_MAJOR" in msg
    else:
        assert "cannot prove" in str(ei.value)


def test_verify_proves_a_true_claim_through_relayout():
    relayout = _relayout()
    if relayout is None:
        pytest.skip("grit.relayout is not available")
    a = mx()
    tiled = relayout(a, data=TILE)                       # real tiled bytes
    lost = grit.GritArray(tiled.descriptor.replace(placement_data=0, placement_scale=0),
                          tiled.shape, tiled.planes)     # … whose claim was lost
    b = grit.assume_placement(lost, data=TILE, reason="the exporter tiles its weights")
    v = grit.verify_placement(b, data=TILE, reference=grit.decode(a))
    assert not v.descriptor.assumed
    checks = dict(grit.audit.ledger()[-1].checks)
    assert checks["roundtrip"] == "passed" and checks["reference"].startswith("passed")
    # sparse metadata in mma.sp fragment order: content is read in canonical order
    s = grit.encode(_values((32, 64)), grit.GRADE_I8S24)
    frag = relayout(s, meta=L.META_M16N8K32)
    c = grit.assume_placement(frag, meta=L.META_M16N8K32, reason="mma.sp order")
    grit.verify_placement(c, meta=L.META_M16N8K32, reference=grit.decode(s))
    assert dict(grit.audit.ledger()[-1].checks)["content"].startswith("passed")
    wrong = grit.assume_placement(s, meta=L.META_M16N8K32, reason="wrong: linear metadata")
    with pytest.raises(grit.GritLayoutError, match="not in the claimed placement"):
        grit.verify_placement(wrong, meta=L.META_M16N8K32, reference=grit.decode(s))


def test_verify_reads_sparse_metadata_order():
    s = grit.encode(_values((8, 64)), grit.GRADE_I8S24)
    aux = bytearray(bytes(s.planes[3]))
    aux[0] = 0b0111                        # quad 0 indices (3, 1): not ascending
    bad = grit.GritArray(s.descriptor, s.shape, [s.planes[0], s.planes[1], b"", bytes(aux)])
    b = grit.assume_placement(bad, meta=L.LINEAR_META, reason="metadata order trusted")
    with pytest.raises(grit.GritLayoutError, match="SPORDER_ASC_LSB"):
        grit.verify_placement(b, meta=L.LINEAR_META, reference=grit.decode(s))
    good = grit.assume_placement(s, meta=L.LINEAR_META, reason="metadata order trusted")
    v = grit.verify_placement(good, reference=grit.decode(s))
    assert dict(grit.audit.ledger()[-1].checks)["content"].startswith("passed")
    assert not v.descriptor.assumed


def test_verify_proves_claims_it_does_not_make_them():
    a = mx()
    with pytest.raises(grit.GritLayoutError, match="does not make one"):
        grit.verify_placement(a, TILE, reference=grit.decode(a))
    with pytest.raises(grit.GritUsageError):
        grit.verify_placement(a, L.UNSPECIFIED)
    with pytest.raises(grit.GritUsageError):
        grit.verify_placement(a, ROW, reference=np.zeros((2, 2), np.float32))
    with pytest.raises(grit.GritUsageError):
        grit.verify_placement(a, ROW, reference=grit.assume_placement(a, TILE, "t"))
    opaque = grit.assume_placement(a, L.OPAQUE, "vendor blob")
    with pytest.raises(grit.GritLayoutError, match="opaque"):
        grit.verify_placement(opaque, L.OPAQUE, reference=grit.decode(a))
