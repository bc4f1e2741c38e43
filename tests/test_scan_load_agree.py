"""#12: scan and load read a file through the same reader and agree on it.

The fuzzer's mutants (scripts/fuzz_files.py) go to both: scan clean (no
finding of severity 1, 2 or 4) implies ``grit.load`` succeeds, and a load
that fails implies scan has an error-severity finding.  ``GRIT_FUZZ_SCALE``
multiplies the case counts.
"""
from __future__ import annotations

import os
import random
import runpy
import tempfile

import pytest

import grit
from grit.scan import Severity, scan

pytest.importorskip("safetensors.numpy")
pytest.importorskip("gguf")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUZZ = runpy.run_path(os.path.join(ROOT, "scripts", "fuzz_files.py"))
SCALE = max(1, int(os.environ.get("GRIT_FUZZ_SCALE", "1")))


@pytest.fixture(scope="module")
def pool():
    with tempfile.TemporaryDirectory() as d:
        return FUZZ["seeds"](d)


@pytest.mark.parametrize("seed", [21, 22])
def test_scan_is_clean_only_where_load_succeeds(tmp_path, pool, seed):
    rng = random.Random(seed)
    seen = {"clean": 0, "flagged": 0, "load_ok": 0, "load_failed": 0}
    for i in range(300 * SCALE):
        name, kind, data = pool[rng.randrange(len(pool))]
        op, mutant = FUZZ["mutate"](rng, kind, data)
        p = tmp_path / f"c{i}.{'gguf' if kind == 'gguf' else 'safetensors'}"
        p.write_bytes(mutant)
        try:
            grit.load(str(p))
            loaded = True
        except grit.GritError:
            loaded = False
        rep = scan([str(p)])
        errors = [f for f in rep.findings if f.severity is not Severity.WARNING]
        if not errors:
            assert loaded, (name, op, [f.code for f in rep.findings])
        if not loaded:
            assert errors, (name, op)
        seen["clean" if not errors else "flagged"] += 1
        seen["load_ok" if loaded else "load_failed"] += 1
        p.unlink()
    # both sides of the implication were exercised
    assert all(v > 0 for v in seen.values()), seen


def test_load_refuses_what_the_official_library_refuses(tmp_path, pool):
    """For safetensors mutants the official library is the peer for what a
    valid file is: where it refuses, grit.load refuses (grit refuses more: the
    __grit__ document), and where both read a file, the plain tensors agree
    value for value.  The descriptor-map seed is left out: its payload span
    is not numel × itemsize by design, which the library refuses."""
    import numpy as np
    from safetensors.numpy import load_file

    from grit.io.safetensors import read
    rng = random.Random(31)
    st_pool = [s for s in pool if s[1] == "safetensors" and s[0] != "map.safetensors"]
    both = refused_by_peer = 0
    for i in range(300 * SCALE):
        name, kind, data = st_pool[rng.randrange(len(st_pool))]
        op, mutant = FUZZ["mutate"](rng, kind, data)
        p = tmp_path / f"c{i}.safetensors"
        p.write_bytes(mutant)
        try:
            peer = load_file(str(p))
        except Exception:            # the peer's error types vary (SafetensorError, …)
            peer = None
        try:
            got = grit.load(str(p))
        except grit.GritError:
            got = None
        if peer is None:
            refused_by_peer += 1
            assert got is None, (name, op)
        elif got is not None:
            both += 1
            claimed = set(read(str(p)).doc.claimed)
            for k, v in peer.items():
                if k in claimed:
                    continue
                assert got[k].dtype == v.dtype and got[k].shape == v.shape, (name, op, k)
                assert np.array_equal(got[k].view(np.uint8), v.view(np.uint8)), (name, op, k)
        p.unlink()
    assert both > 0 and refused_by_peer > 0
