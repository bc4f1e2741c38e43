"""On the real gemma GGUF (skipped without it): every name ``grit scan --json``
reports resolves through grit explain — each tensor to its descriptor, each
role of a drift finding to the reason it is not one tensor."""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from grit.cli import main
from grit.explain import ExplainInputError, resolve

from test_explain_scan_names import reported

GEMMA = "/root/.cache/grit-real-checkpoint/gemma-3-270m-q4_k_m.gguf"
pytestmark = pytest.mark.skipif(not os.path.exists(GEMMA), reason="gemma GGUF not cached")


def test_every_name_scan_reports_on_gemma_resolves():
    r = CliRunner().invoke(main, ["scan", GEMMA, "--json"])
    names = reported(json.loads(r.output))
    assert len(names) > 100
    loaded: dict = {}
    roles = []
    for path, name in sorted(names):
        try:
            d, g, shape, label = resolve(f"{path}:{name}", loaded=loaded)
        except ExplainInputError as e:
            assert "is a role" in str(e) and "has no tensor" not in str(e), (name, str(e))
            roles.append(name)
        else:
            assert g is not None and shape, name
    # Q4_K_M mixes two grades in exactly these roles (scan's S302)
    assert sorted(roles) == ["attn_v", "ffn_down"]
    out = CliRunner().invoke(main, ["explain", f"{GEMMA}:blk.0.ffn_down.weight",
                                    f"{GEMMA}:blk.2.ffn_down.weight", "--json"])
    assert out.exit_code == 1 and json.loads(out.output)["verdict_kind"] == "different"
