"""Run llama.cpp's own converter (convert_hf_to_gguf.py of a llama.cpp source
tree, with that tree's gguf-py) on a tiny test model:

    python tests/llama_cpp_convert.py LLAMA_CPP_DIR MODEL_DIR OUT.gguf PRE [MODEL_DIR OUT.gguf PRE ...]

(several models in one process: the converter's imports are most of its time).

Two things of the tiny test models are not what the converter expects of a
real model, and are set here: the tokenizer's pre-tokenizer name ``PRE``
(the converter finds it by hashing a tokenised text, and the test's small
vocabulary matches no hash it knows), and, where the models have no
tokenizer.model, SentencePiece is skipped (without the sentencepiece package the
converter would fail on importing it instead of falling back to BPE, so
without the package SentencePiece is skipped).
Nothing that writes a tensor is touched.
"""
import sys

llama_dir, jobs = sys.argv[1], sys.argv[2:]
sys.path.insert(0, llama_dir)
import convert_hf_to_gguf  # noqa: E402
from conversion import base  # noqa: E402

def _no_sentencepiece(self, *args, **kwargs):
    raise FileNotFoundError("tokenizer.model")


try:
    import sentencepiece  # noqa: F401
except ImportError:
    base.TextModel._set_vocab_sentencepiece = _no_sentencepiece
for i in range(0, len(jobs), 3):
    model, out, pre = jobs[i:i + 3]
    base.TextModel.get_vocab_base_pre = lambda self, tokenizer, pre=pre: pre
    sys.argv = ["convert_hf_to_gguf.py", model, "--outfile", out]
    convert_hf_to_gguf.main()
