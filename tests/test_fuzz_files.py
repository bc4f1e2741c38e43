"""#12: a standing, seeded mutation fuzzer over safetensors and GGUF files
written by the official libraries (scripts/fuzz_files.py is the engine).

Every mutant: ``grit.load`` succeeds or raises a GritError; ``grit.scan.scan``
returns findings without raising; neither runs past the per-case time limit;
the peak RSS does not grow past the bound.  At the CI budget the run takes a
few seconds; ``GRIT_FUZZ_SCALE=N`` multiplies the case counts (the long
campaign of the issue's closing note is ``python scripts/fuzz_files.py
--cases N --seed S``).
"""
from __future__ import annotations

import os
import random
import runpy

import pytest

pytest.importorskip("safetensors.numpy")
pytest.importorskip("gguf")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUZZ = runpy.run_path(os.path.join(ROOT, "scripts", "fuzz_files.py"))
SCALE = max(1, int(os.environ.get("GRIT_FUZZ_SCALE", "1")))
#: cases per seed at the CI budget (x GRIT_FUZZ_SCALE)
CASES = 400


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_mutants_get_typed_answers(seed):
    counts = FUZZ["campaign"](CASES * SCALE, seed)
    assert counts.cases == CASES * SCALE
    assert counts.escapes == [], counts.summary()
    # the mutants reach every layer: some load, most are refused, and the
    # refusals are of several kinds (not one early check catching everything)
    assert counts.load_ok > 0 and counts.load_grit_error > counts.cases // 2
    assert len(counts.by_code) >= 10, counts.summary()
    assert counts.seconds < 60 * SCALE


def test_the_seeds_are_valid_files(tmp_path):
    """Unmutated, every seed loads, and the official libraries read their files
    (all but the descriptor-map one, which no library writes)."""
    import grit
    from gguf import GGUFReader
    from safetensors.numpy import load_file
    for name, kind, data in FUZZ["seeds"](str(tmp_path)):
        p = str(tmp_path / name)
        grit.load(p)
        if kind == "gguf":
            assert len(GGUFReader(p).tensors) > 0, name
        elif name != "map.safetensors":
            load_file(p)
        out = FUZZ["run_case"](p)
        assert out.load == "ok" and out.escape is None and out.disagree is None


def test_every_operation_is_exercised():
    rng = random.Random(5)
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        pool = FUZZ["seeds"](d)
    ops = set()
    for _ in range(400):
        name, kind, data = pool[rng.randrange(len(pool))]
        op, mutant = FUZZ["mutate"](rng, kind, data)
        ops.add(op)
        assert isinstance(mutant, bytes)
    assert ops == {"flip", "truncate", "extend", "length", "json", "pad", "counts", "kv"}


def test_a_hang_and_an_escape_are_caught(tmp_path, monkeypatch):
    """The harness itself: a reader that raises a raw error, or sleeps past the
    limit, is counted as an escape (so a passing run means something)."""
    import time

    import grit
    p = tmp_path / "x.safetensors"
    p.write_bytes(b"\0" * 16)
    g = FUZZ["run_case"].__globals__
    monkeypatch.setitem(g, "CASE_SECONDS", 0.2)

    def boom(path, **kw):
        raise ValueError("raw")
    monkeypatch.setattr(grit, "load", boom)
    out = FUZZ["run_case"](str(p))
    assert out.escape is not None and "ValueError" in out.escape

    def sleepy(path, **kw):
        time.sleep(5)
    monkeypatch.setattr(grit, "load", sleepy)
    out = FUZZ["run_case"](str(p))
    assert out.escape is not None and "over" in out.escape
