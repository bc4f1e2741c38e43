#!/usr/bin/env python3
"""The example outputs of docs/scan.md, built and scanned here, so that the
document shows what ``grit scan`` prints and cannot drift from it.

    python scripts/scan_doc_examples.py           # check: exit 1 naming each stale block
    python scripts/scan_doc_examples.py --write   # rewrite the stale blocks in place

A block is an example when the line before its opening fence is
``<!-- scan-example: NAME -->``: NAME is a key of :data:`EXAMPLES`, which
builds the files the example scans (in a scratch folder, the command's
working directory) and names the arguments.  The block holds the piped
report (stdout not a terminal: no padding, no colour), after a first line
``$ grit scan ARGS`` where the document shows the command; an ``excerpt``
example holds one section of the report: the one whose title begins as the
block's first line does (the title up to its `` — ``), up to the next.
tests/test_scan_doc_examples.py runs the check.  An example whose input is
absent here (the real llama.cpp checkpoint, cached only where it was
fetched) is left as it is and said so.
"""
from __future__ import annotations

import json
import os
import re
import runpy
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

DOC = os.path.join(ROOT, "docs", "scan.md")
MARK = re.compile(r"^<!-- scan-example: (\S+) -->$")


@dataclass(frozen=True)
class Example:
    #: build(folder) -> the folder the command runs in (None: input absent here)
    build: Callable[[str], str | None]
    args: tuple[str, ...]
    excerpt: bool = False


# ---------------------------------------------------------------------------
# the inputs


def _examples(folder: str) -> str:
    runpy.run_path(os.path.join(HERE, "make_examples.py"))["main"](
        os.path.join(folder, "examples"))
    return folder


def _shards(folder: str) -> str:
    """Three shards of a two-layer model written by safetensors.numpy, the
    index as transformers writes it; shards 1 and 3 lost 100 and 600 bytes."""
    from safetensors.numpy import save_file
    rng = np.random.default_rng(11)
    shards = [
        {"model.embed_tokens.weight": rng.standard_normal((64, 32)).astype(np.float32),
         "model.layers.0.self_attn.q_proj.weight":
             rng.standard_normal((32, 32)).astype(np.float16)},
        {"model.layers.0.mlp.up_proj.weight": rng.standard_normal((64, 32)).astype(np.float16),
         "model.layers.0.mlp.down_proj.weight":
             rng.standard_normal((32, 64)).astype(np.float16),
         "model.layers.1.input_layernorm.weight": np.ones(32, np.float32)},
        {"model.layers.1.mlp.up_proj.weight": rng.standard_normal((64, 32)).astype(np.float16),
         "lm_head.weight": rng.standard_normal((64, 32)).astype(np.float32)},
    ]
    d = os.path.join(folder, "ckpt")
    os.makedirs(d)
    weight_map, total = {}, 0
    for i, ts in enumerate(shards, 1):
        name = f"model-{i:05d}-of-00003.safetensors"
        save_file(ts, os.path.join(d, name), metadata={"format": "pt"})
        for n, a in ts.items():
            weight_map[n] = name
            total += a.nbytes
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
    for i, cut in ((1, 100), (3, 600)):
        p = os.path.join(d, f"model-{i:05d}-of-00003.safetensors")
        os.truncate(p, os.path.getsize(p) - cut)
    return folder


def _ct_nvfp4(folder: str) -> str:
    """An NVFP4 checkpoint as llm-compressor writes it: weight_packed,
    weight_scale, weight_global_scale per linear layer, the config.json of
    compressed-tensors, lm_head ignored and kept in BF16; two layers."""
    import ml_dtypes
    from safetensors.numpy import save_file
    rng = np.random.default_rng(5)
    t: dict[str, np.ndarray] = {}
    for i in range(2):
        pre = f"model.layers.{i}.mlp.down_proj"
        t[f"{pre}.weight_packed"] = rng.integers(0, 256, (64, 128), dtype=np.uint8)
        t[f"{pre}.weight_scale"] = rng.integers(0x28, 0x58, (64, 16), dtype=np.uint8) \
            .view(ml_dtypes.float8_e4m3fn)
        t[f"{pre}.weight_global_scale"] = np.array([512.0], np.float32)   # amax 5.25
    t["model.norm.weight"] = np.ones(256, np.float32)
    t["lm_head.weight"] = rng.standard_normal((64, 128)).astype(ml_dtypes.bfloat16)
    d = os.path.join(folder, "ct-nvfp4")
    os.makedirs(d)
    save_file(t, os.path.join(d, "model.safetensors"))
    weights = {"num_bits": 4, "type": "float", "symmetric": True, "group_size": 16,
               "strategy": "tensor_group", "dynamic": False, "observer": "minmax"}
    cfg = {"architectures": ["LlamaForCausalLM"], "quantization_config": {
        "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
        "quantization_status": "compressed", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                      "input_activations": None,
                                      "format": "nvfp4-pack-quantized"}}}}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return folder


def _gemma(folder: str) -> str | None:
    """The real llama.cpp checkpoint of tests/test_real_checkpoint.py, where
    it is cached."""
    cache = os.environ.get("GRIT_REAL_CHECKPOINT_CACHE",
                           os.path.expanduser("~/.cache/grit-real-checkpoint"))
    return cache if os.path.isfile(os.path.join(cache, "gemma-3-270m-q4_k_m.gguf")) else None


EXAMPLES: dict[str, Example] = {
    "shards": Example(_shards, ("ckpt",)),
    "examples": Example(_examples, ("examples/",)),
    "examples-deep": Example(_examples, ("--deep", "examples/"), excerpt=True),
    "ct-nvfp4": Example(_ct_nvfp4, ("ct-nvfp4/",)),
    "gemma": Example(_gemma, ("gemma-3-270m-q4_k_m.gguf",)),
}


# ---------------------------------------------------------------------------
# running and comparing


def report(name: str) -> list[str] | None:
    """The lines ``grit scan`` prints for example ``name`` (None: its input
    is absent here)."""
    from click.testing import CliRunner

    from grit.cli import main
    ex = EXAMPLES[name]
    with tempfile.TemporaryDirectory() as tmp:
        cwd = ex.build(tmp)
        if cwd is None:
            return None
        old = os.getcwd()
        os.chdir(cwd)
        try:
            r = CliRunner().invoke(main, ["scan", *ex.args])
        finally:
            os.chdir(old)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.stdout.rstrip("\n").splitlines()


def blocks(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, end line) of each example block's body (0-based line
    indices into ``text.splitlines()``, end exclusive)."""
    lines = text.splitlines()
    out = []
    for i, ln in enumerate(lines):
        m = MARK.match(ln)
        if m is None:
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```":
            raise ValueError(f"line {i + 1}: {m[1]}: the mark is not followed by a ``` fence")
        j = i + 2
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if m[1] not in EXAMPLES:
            raise ValueError(f"line {i + 1}: no example named {m[1]!r}")
        out.append((m[1], i + 2, j))
    return out


def expected(name: str, shown: list[str], got: list[str]) -> list[str]:
    """What the block of example ``name`` should hold, given what it shows
    (its ``$`` line and, for an excerpt, where the excerpt starts)."""
    ex = EXAMPLES[name]
    head = [f"$ grit scan {' '.join(ex.args)}"] if shown[:1] and shown[0].startswith("$ ") \
        else []
    if not ex.excerpt:
        return head + got
    title = (shown[len(head):] or [""])[0].split(" — ")[0]
    start = next((i for i, ln in enumerate(got) if ln.split(" — ")[0] == title), None)
    if start is None:
        return head + got
    end = next((k for k in range(start + 1, len(got)) if got[k] and not got[k][0].isspace()),
               len(got))
    while end > start and not got[end - 1]:
        end -= 1
    return head + got[start:end]


def check(write: bool = False, path: str = DOC) -> list[str]:
    """The names of the stale example blocks of ``path`` (rewritten in place
    when ``write``), and those skipped, as ``name (skipped: why)``."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.splitlines()
    stale: list[str] = []
    for name, a, b in reversed(blocks(text)):
        got = report(name)
        if got is None:
            stale.append(f"{name} (skipped: its input is not here)")
            continue
        want = expected(name, lines[a:b], got)
        if lines[a:b] != want:
            stale.append(name)
            lines[a:b] = want
    if write and any("skipped" not in s for s in stale):
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + ("\n" if text.endswith("\n") else ""))
    return stale[::-1]


if __name__ == "__main__":  # pragma: no cover
    w = "--write" in sys.argv[1:]
    bad = check(write=w)
    for s in bad:
        print(("rewritten: " if w and "skipped" not in s else "stale: " if "skipped" not in s
               else "") + s)
    sys.exit(1 if not w and any("skipped" not in s for s in bad) else 0)
