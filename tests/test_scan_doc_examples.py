"""docs/scan.md's example outputs are what ``grit scan`` prints: each block
marked ``<!-- scan-example: NAME -->`` is built and scanned by
scripts/scan_doc_examples.py and compared line for line.  A stale block is
fixed by ``python scripts/scan_doc_examples.py --write``."""
from __future__ import annotations

import os
import runpy

import pytest

pytest.importorskip("safetensors")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = runpy.run_path(os.path.join(ROOT, "scripts", "scan_doc_examples.py"),
                    run_name="scan_doc_examples")


def test_every_example_is_marked_once():
    with open(EX["DOC"], encoding="utf-8") as f:
        names = [n for n, _, _ in EX["blocks"](f.read())]
    assert sorted(names) == sorted(EX["EXAMPLES"])


@pytest.mark.parametrize("name", sorted(EX["EXAMPLES"]))
def test_the_documented_output_is_the_output(name):
    with open(EX["DOC"], encoding="utf-8") as f:
        text = f.read()
    lines = text.splitlines()
    [(a, b)] = [(a, b) for n, a, b in EX["blocks"](text) if n == name]
    got = EX["report"](name)
    if got is None:
        pytest.skip(f"{name}: its input is not here (the real checkpoint is cached only "
                    "where GRIT_REAL_CHECKPOINT=1 fetched it)")
    want = EX["expected"](name, lines[a:b], got)
    assert lines[a:b] == want, (
        f"docs/scan.md's {name!r} example is stale: run python scripts/scan_doc_examples.py "
        "--write")


def test_a_stale_block_is_found_and_rewritten(tmp_path):
    p = tmp_path / "doc.md"
    p.write_text("intro\n\n<!-- scan-example: ct-nvfp4 -->\n```\nold output\n```\n\ntail\n")
    assert EX["check"](write=False, path=str(p)) == ["ct-nvfp4"]
    assert EX["check"](write=True, path=str(p)) == ["ct-nvfp4"]
    assert EX["check"](write=False, path=str(p)) == []
    text = p.read_text()
    assert text.startswith("intro\n\n<!-- scan-example: ct-nvfp4 -->\n```\n")
    assert text.endswith("```\n\ntail\n") and "old output" not in text
