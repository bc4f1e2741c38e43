"""grit scan's findings are right and few: one root cause is one finding
(its consequences nested), a clean recognised checkpoint exits 0, llama.cpp's
separate GGUF tensors are never a fused disagreement, and a remote scan
reports no index the user never named."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save

from grit.scan import scan

sys.path.insert(0, str(Path(__file__).parent))
from _support import write_gguf  # noqa: E402
from http_server import Server  # noqa: E402

rng = np.random.default_rng(23)


# ---------------------------------------------------------------------------
# S320 in GGUF: llama.cpp runs attn_q/k/v and ffn_gate/up as separate matmuls


def _blocks(ggml_type, rows: int, cols: int) -> np.ndarray:
    """Random blocks of ``ggml_type`` for a [rows, cols] tensor (level 1 reads
    no value)."""
    import gguf  # noqa: PLC0415
    elems, nbytes = gguf.GGML_QUANT_SIZES[ggml_type]
    return rng.integers(0, 256, (rows, cols // elems * nbytes), dtype=np.uint8)


def test_gguf_q_k_v_and_gate_up_of_different_types_are_no_fused_disagreement(tmp_path):
    """A GGUF by gguf-py's GGUFWriter whose attn_q/attn_k are Q4_K and attn_v Q6_K,
    ffn_gate Q4_K and ffn_up Q6_K: llama.cpp (llm_build_ffn, build_attn) multiplies
    each by its own ggml_mul_mat, so nothing is fused and there is no S320."""
    gguf = pytest.importorskip("gguf")
    Q = gguf.GGMLQuantizationType
    types = {"attn_q": Q.Q4_K, "attn_k": Q.Q4_K, "attn_v": Q.Q6_K,
             "ffn_gate": Q.Q4_K, "ffn_up": Q.Q6_K, "ffn_down": Q.Q4_K}
    tensors = {f"blk.{i}.{n}.weight": (_blocks(t, 8, 256), t)
               for i in range(2) for n, t in types.items()}
    path = write_gguf(tmp_path / "mixed.gguf", tensors)
    rep = scan([path])
    got = {f.code for f in rep.findings}
    assert "S320" not in got, [(f.code, f.message) for f in rep.findings]
    # the mix is still visible where it is: one role per grade (S303)
    assert "S303" in got


# ---------------------------------------------------------------------------
# S150: no finding for an index nobody named


def test_a_lone_https_file_gets_no_finding_for_an_index_beside_it(tmp_path):
    """``https://…/model.safetensors`` is a whole checkpoint: loaders read it
    and never an index (transformers takes model.safetensors before the
    index). A server answering the absent ``model.safetensors.index.json``
    with 403 (as S3 does for a missing key without ListBucket) gave an S150
    for a file the user never named."""
    s = Server()
    try:
        s.files["/m/model.safetensors"] = save({"a.weight": np.zeros((4, 4), np.float32)})
        s.faults["/m/model.safetensors.index.json"] = {"status": 403}
        rep = scan([s.url("/m/model.safetensors")], cache=False)
        assert [(f.code, f.message) for f in rep.findings] == []
        assert rep.exit_code_graded == 0
        assert "/m/model.safetensors.index.json" not in s.asked
    finally:
        s.close()


def test_a_shard_url_still_has_its_index_checked(tmp_path):
    """A shard's checkpoint is indexed: a refused index beside a named shard
    stays S150 (what tests/test_scan_remote.py checks in full)."""
    s = Server()
    try:
        s.files["/m/model-00001-of-00001.safetensors"] = save(
            {"a.weight": np.zeros((4, 4), np.float32)})
        s.faults["/m/model.safetensors.index.json"] = {"status": 403}
        rep = scan([s.url("/m/model-00001-of-00001.safetensors")], cache=False)
        assert [f.code for f in rep.findings] == ["S150"]
    finally:
        s.close()
