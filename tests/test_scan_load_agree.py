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
