"""GGUF files grit writes load in llama.cpp (through its Python binding,
llama-cpp-python, when it is installed: .ci/run builds it from source) and
compute what the original computes.

On the real gemma checkpoint (tests/test_real_checkpoint.py fetches it):

* the load -> save copy: llama.cpp loads it and its logits for a prompt are
  the original's, bit for bit (every tensor is written as its own ggml type);
* a copy whose Q8_0 token embedding was re-encoded by ``grit.encode`` from its
  decoded values and saved with ``relayout=True``: llama.cpp loads it as
  Q8_0 and predicts the next token as with the same values given as F32,
  and as the original, with logits close to both; likewise a Q4_K weight re-encoded as GRADE_Q4KS
  (written as Q4_K, its logical shape in the file: llama.cpp checks every
  tensor's shape against the architecture's)."""
from __future__ import annotations

import os

import numpy as np
import pytest

llama_cpp = pytest.importorskip("llama_cpp")
gguf = pytest.importorskip("gguf")

import grit  # noqa: E402

from test_real_checkpoint import checkpoint  # noqa: E402,F401  (the fixture)

PROMPT = b"The capital of France is"


def logits(path: str) -> np.ndarray:
    m = llama_cpp.Llama(model_path=path, n_ctx=64, n_threads=2, n_batch=64, verbose=False,
                        logits_all=True, seed=0)
    toks = m.tokenize(PROMPT, add_bos=True)
    m.reset()
    m.eval(toks)
    out = np.array(m.scores[:len(toks)], dtype=np.float32)
    m.close()
    return out


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))


@pytest.fixture(scope="module")
def original(checkpoint):  # noqa: F811
    return logits(checkpoint)


def test_the_round_trip_copy_computes_the_same_logits(checkpoint, original, tmp_path):  # noqa: F811
    copy = str(tmp_path / "copy.gguf")
    grit.save(copy, grit.load(checkpoint))
    got = logits(copy)
    assert got.shape == original.shape and np.isfinite(got).all()
    assert np.array_equal(got.view(np.uint32), original.view(np.uint32))


@pytest.mark.parametrize("ggml,grade", [("Q8_0", grit.io.gguf.GGML_GRADES["Q8_0"]),
                                        ("Q4_K", grit.GRADE_Q4KS)])
def test_a_tensor_grit_encoded_loads_as_its_ggml_type(checkpoint, original, tmp_path,  # noqa: F811
                                                      ggml, grade):
    got = grit.load(checkpoint)
    name = "token_embd.weight" if ggml == "Q8_0" else \
        next(n for n, t in got.ggml_types.items() if t == ggml and n.endswith(".weight"))
    assert got.ggml_types[name] == ggml
    x = grit.decode(got[name])
    a = grit.encode(x, grade)                                   # canonical placement
    got[name] = a
    copy = str(tmp_path / "encoded.gguf")
    grit.save(copy, got, relayout=True)
    t = next(t for t in gguf.GGUFReader(copy).tensors if t.name == name)
    assert t.tensor_type == gguf.GGMLQuantizationType[ggml]
    assert [int(d) for d in reversed(t.shape)] == list(a.shape)
    new = logits(copy)
    assert new.shape == original.shape and np.isfinite(new).all()
    # llama.cpp computes with the re-encoded tensor's values: against the same weights
    # given as F32 (the decode of what grit wrote), and against the original (whose
    # values grit's min-max encoder re-quantised), the same next token at every
    # position and logits within 10% RMS (a quantised matmul in llama.cpp quantises
    # the activations too; the largest single differences are not the measure)
    twin = grit.load(checkpoint)
    twin[name] = np.asarray(grit.decode(a), np.float32)
    f32 = str(tmp_path / "f32.gguf")
    grit.save(f32, twin)
    for ref in (logits(f32), original):
        assert (new.argmax(-1) == ref.argmax(-1)).all()
        assert _rms(new - ref) < 0.1 * _rms(ref)
    assert os.path.getsize(copy) > 0
