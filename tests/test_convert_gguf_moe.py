"""grit convert --to gguf of mixture-of-experts models (grit.convert_gguf,
docs/convert.md "GGUF"): Qwen3-MoE, Qwen2-MoE and Mixtral, each MoE block's experts
stacked into llama.cpp's 3-D ``blk.N.ffn_{gate,up,down}_exps`` tensors, and
gpt-oss, whose experts are stacked already (its gate_up_proj split).

Sources are tiny transformers models in the per-expert layout of Hugging
Face checkpoints, quantised by compressed-tensors itself, and a gpt-oss in
its own MXFP4 layout (tests/hf_tiny.py).  Targets are checked by gguf-py's GGUFReader and
``gguf.quants.dequantize``; where GRIT_LLAMA_CPP names a llama.cpp tree, by
its convert_hf_to_gguf.py (byte for byte); where llama-cpp-python is
installed, by llama.cpp running the GGUF.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch (CPU) is not installed")
pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("tokenizers", reason="tokenizers is not installed")
pytest.importorskip("compressed_tensors", reason="compressed-tensors is not installed")
gguf = pytest.importorskip("gguf", reason="gguf-py is not installed")

import grit  # noqa: E402
from grit import convert as C  # noqa: E402
from grit import convert_gguf as CG  # noqa: E402
from grit.errors import GritUsageError  # noqa: E402
from _support import recorded, then  # noqa: E402
from test_convert_gguf import (HERE, _ct_nvfp4_level0, _f32_twin, _llama_cpp_dir,  # noqa: E402
                               _raw_safetensors, _same_tensors, _ulps)

#: source name -> (family, compressed-tensors format or None for bfloat16, W4A4)
SOURCES = {"qwen3moe": ("qwen3moe", "nvfp4-pack-quantized", False),
           "mixtral": ("mixtral", "nvfp4-pack-quantized", False),
           "qwen3moe-mxfp4": ("qwen3moe", "mxfp4-pack-quantized", False),
           "qwen3moe-w4a4": ("qwen3moe", "nvfp4-pack-quantized", True),
           "mixtral-bf16": ("mixtral", None, False),
           "gpt-oss": ("gpt_oss", "mxfp4", False),        # (gpt-oss's own MXFP4 layout)
           "qwen2moe": ("qwen2moe", "nvfp4-pack-quantized", False),
           "qwen2moe-bf16": ("qwen2moe", None, False)}
#: family -> (gguf architecture, the checkpoint's MoE block, its gate/up/down
#: names, llama.cpp's pre-tokenizer)
FAM = {"qwen3moe": ("qwen3moe", "mlp", ("gate_proj", "up_proj", "down_proj"), "qwen2"),
       "mixtral": ("llama", "block_sparse_moe", ("w1", "w3", "w2"), "llama-bpe"),
       "gpt_oss": ("gpt-oss", "mlp", (), "llama-bpe"),
       "qwen2moe": ("qwen2moe", "mlp", ("gate_proj", "up_proj", "down_proj"), "qwen2")}
N_EXPERTS, LAYERS = 4, 2


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    import hf_tiny
    assert hf_tiny.N_EXPERTS == N_EXPERTS
    assert all(hf_tiny.MOE[f] == FAM[f][1:3] for f in FAM if f in hf_tiny.MOE)
    root = tmp_path_factory.mktemp("moe")
    made: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in made:
            fam, fmt, w4a4 = SOURCES[name]
            seed = list(SOURCES).index(name) + 20
            made[name] = hf_tiny.write_gpt_oss(str(root / name), seed=seed) \
                if fam == "gpt_oss" else \
                hf_tiny.write_model(str(root / name), fam, fmt=fmt, w4a4=w4a4, seed=seed)
        return made[name]
    return get


@pytest.fixture(scope="module")
def converted(models, tmp_path_factory):
    root = tmp_path_factory.mktemp("moe-gguf")
    done: dict[str, tuple] = {}

    def get(name: str):
        if name not in done:
            src = models(name)
            done[name] = (src, str(root / name), C.convert(src, str(root / name), "gguf"))
        return done[name]
    return get


def _expert(fam: str, layer: int, e: int, proj: int) -> str:
    _, block, names, _ = FAM[fam]
    return f"model.layers.{layer}.{block}.experts.{e}.{names[proj]}"


def _tensors(dst: str) -> dict:
    return {t.name: t for t in gguf.GGUFReader(os.path.join(dst, CG.GGUF_FILE)).tensors}


@pytest.mark.parametrize("name", ("qwen3moe", "mixtral", "qwen3moe-mxfp4", "qwen2moe"))
def test_stacked_experts_read_by_gguf_py(converted, name):
    """Each block's experts are one 3-D tensor of the experts' ggml type,
    expert 0 first; gguf-py's dequantisation of expert e's share is
    grit.decode of the source's expert e bit for bit (but for ggml's +0 for
    the code of -0): for NVFP4 the blocks' values with the level-1 scale
    taken out, the companion one f32(1/g) per expert, and the product within
    the one ulp of docs/convert.md.  The router is F32, the KV entries
    llama.cpp's; the proof has one entry per source expert.  Qwen2-MoE's
    shared expert is three plain weights of its own (``ffn_*_shexp``), its
    one-row gate F32 (``ffn_gate_inp_shexp``)."""
    src, dst, rep = converted(name)
    fam = SOURCES[name][0]
    nvfp4 = SOURCES[name][1].startswith("nvfp4")
    shared = 3 if fam == "qwen2moe" else 0
    assert rep.counts == {"bit-exact": LAYERS * (4 + shared + 3 * N_EXPERTS)}
    arch = FAM[fam][0]
    kv = {k: f.contents() for k, f in
          gguf.GGUFReader(os.path.join(dst, CG.GGUF_FILE)).fields.items()}
    assert kv["general.architecture"] == arch
    assert kv[f"{arch}.expert_count"] == N_EXPERTS and kv[f"{arch}.expert_used_count"] == 2
    if fam in ("qwen3moe", "qwen2moe"):
        assert kv[f"{arch}.expert_feed_forward_length"] == 64
    if shared:
        assert kv[f"{arch}.expert_shared_feed_forward_length"] == 128
        sh = _tensors(dst)
        for layer in range(LAYERS):
            assert sh[f"blk.{layer}.ffn_gate_inp_shexp.weight"].tensor_type.name == "F32"
            for gn in ("gate", "up", "down"):
                t = sh[f"blk.{layer}.ffn_{gn}_shexp.weight"]
                assert t.tensor_type.name == "NVFP4" and list(t.shape) == [128, 128]
    assert kv["general.file_type"] == int(gguf.LlamaFileType.MOSTLY_NVFP4 if nvfp4
                                          else gguf.LlamaFileType.MOSTLY_MXFP4_MOE)
    tensors = _tensors(dst)
    raw = _raw_safetensors(os.path.join(src, "model.safetensors"))
    arrays = grit.load(os.path.join(src, "model.safetensors"))
    proof = {w["name"]: w for w in rep.proof["weights"]}
    from grit.fingerprint import digest
    for layer in range(LAYERS):
        for proj, gn in enumerate(("gate", "up", "down")):
            t = tensors[f"blk.{layer}.ffn_{gn}_exps.weight"]
            assert t.tensor_type.name == ("NVFP4" if nvfp4 else "MXFP4")
            got = gguf.quants.dequantize(t.data, t.tensor_type)
            rows, cols = (64, 128) if gn != "down" else (128, 64)
            assert got.shape == (N_EXPERTS, rows, cols)
            comp = tensors.get(t.name.removesuffix(".weight") + ".scale")
            assert (comp is not None) == nvfp4
            for e in range(N_EXPERTS):
                m = _expert(fam, layer, e, proj)
                a = arrays[m + ".weight"]
                ref = np.asarray(grit.decode(a), np.float32)
                if nvfp4:
                    # the blocks: codes times E4M3 scales, from the raw bytes and as
                    # grit decodes the source's planes with its level-1 scale 1
                    one = grit.GritArray(a.descriptor, a.shape,
                                         (*a.planes[:2], np.float32(1).tobytes(), a.planes[3]))
                    for want in (_ct_nvfp4_level0(raw, m), np.asarray(grit.decode(one))):
                        nz = want != 0
                        assert np.array_equal(got[e][nz].view(np.uint32),
                                              want[nz].view(np.uint32)), m
                        assert (got[e][~nz] == 0).all()
                    g = np.frombuffer(raw[m + ".weight_global_scale"][2], np.float32)
                    s1 = comp.data.reshape(-1)[e]
                    assert s1.view(np.uint32) == (np.float32(1) / g).astype(np.float32).view(
                        np.uint32)[0]
                    prod, nz = got[e] * s1, ref != 0
                    assert _ulps(prod[nz], ref[nz]) <= 1 and (prod[~nz] == 0).all(), m
                else:
                    nz = ref != 0
                    assert np.array_equal(got[e][nz].view(np.uint32), ref[nz].view(np.uint32))
                    assert (got[e][~nz] == 0).all()
                w = proof[m + ".weight"]
                assert (w["gguf_name"], w["expert"]) == (t.name, e)
                assert w["source"]["digest"] == digest(a.planes).hex()
            if nvfp4:
                assert comp.data.shape == (N_EXPERTS,)
        router = tensors[f"blk.{layer}.ffn_gate_inp.weight"]
        block = FAM[fam][1]
        import ml_dtypes
        w = np.frombuffer(raw[f"model.layers.{layer}.{block}.gate.weight"][2],
                          ml_dtypes.bfloat16).astype(np.float32)
        assert router.tensor_type == gguf.GGMLQuantizationType.F32
        assert router.data.reshape(-1).tobytes() == w.tobytes()
    assert C.verify(src, dst).ok


@pytest.fixture(scope="module")
def llama_cpp_refs(models, tmp_path_factory):
    """source name -> the GGUF llama.cpp's converter writes of it (one
    process).  Its converter stacks NVFP4 experts named gate/up/down_proj
    only (``_generate_nvfp4_tensors``): an NVFP4 Mixtral is compared
    unquantised (mixtral-bf16) instead."""
    d = _llama_cpp_dir()
    root = tmp_path_factory.mktemp("moe-llama-cpp")
    names = ("qwen3moe", "qwen3moe-w4a4", "mixtral-bf16", "gpt-oss", "qwen2moe")
    args = [x for n in names for x in (models(n), str(root / f"{n}.gguf"),
                                        FAM[SOURCES[n][0]][3])]
    p = subprocess.run([sys.executable, os.path.join(HERE, "llama_cpp_convert.py"), d, *args],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return {n: str(root / f"{n}.gguf") for n in names}


@pytest.mark.parametrize("name", ("qwen3moe", "qwen3moe-w4a4", "mixtral-bf16", "gpt-oss",
                                  "qwen2moe"))
def test_byte_identical_to_llama_cpp_converter(converted, llama_cpp_refs, name):
    """Every tensor (the stacked experts, their companions and activation
    scales, the F32 router) and every KV entry but the name and size label
    are what llama.cpp's converter writes."""
    _, dst, _ = converted(name)
    ours = os.path.join(dst, CG.GGUF_FILE)
    _same_tensors(llama_cpp_refs[name], ours)
    a, b = gguf.GGUFReader(llama_cpp_refs[name]), gguf.GGUFReader(ours)
    for k, f in a.fields.items():
        if k not in ("general.name", "general.size_label", "GGUF.kv_count"):
            assert k in b.fields and b.fields[k].contents() == f.contents(), k
    if name == "qwen3moe-w4a4":        # one activation scale per expert, f32(1/g)
        t = _tensors(dst)["blk.0.ffn_up_exps.input_scale"]
        raw = _raw_safetensors(os.path.join(converted(name)[0], "model.safetensors"))
        g = np.array([np.frombuffer(raw[_expert("qwen3moe", 0, e, 1) + ".input_global_scale"][2],
                                    np.float32)[0] for e in range(N_EXPERTS)], np.float32)
        assert t.data.view(np.uint32).tolist() == (np.float32(1) / g).view(np.uint32).tolist()


def _rotated(src: str, dst: str, fam: str) -> str:
    """``src`` with expert e's tensors named expert (e + 1) mod n: the same
    weights, experts in another order."""
    from safetensors.torch import load_file, save_file
    shutil.copytree(src, dst)
    block = FAM[fam][1]
    sd = load_file(os.path.join(src, "model.safetensors"))
    out = {}
    for k, v in sd.items():
        parts = k.split(".")
        if f".{block}.experts." in k:
            i = parts.index("experts") + 1
            parts[i] = str((int(parts[i]) + 1) % N_EXPERTS)
        out[".".join(parts)] = v
    save_file(out, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    return dst


def _gguf_py_f32(path: str, out: str, *, roll: bool = False) -> str:
    """The GGUF ``path`` with every tensor as gguf-py dequantises it, F32,
    and its KV entries, written by gguf-py (``roll``: each stacked expert
    tensor's experts moved one place along)."""
    r = gguf.GGUFReader(path)
    w = gguf.GGUFWriter(out, r.fields["general.architecture"].contents())
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        vt = gguf.GGUFValueType(f.types[0])
        w.add_key_value(k, f.contents(), vt,
                        gguf.GGUFValueType(f.types[-1]) if vt == gguf.GGUFValueType.ARRAY
                        else None)
    for t in r.tensors:
        x = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), np.float32)
        w.add_tensor(t.name, np.roll(x, 1, axis=0) if roll and "_exps." in t.name else x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


@pytest.mark.parametrize("name", ("qwen3moe", "mixtral", "gpt-oss", "qwen2moe-bf16"))
def test_llama_cpp_runs_the_moe_gguf(converted, name, tmp_path):
    """llama.cpp's logits of the quantised MoE GGUF against those of the
    same weights as F32 (the source's decode converted by grit, experts
    stacked as plain tensors; for gpt-oss, whose unquantised layout grit
    does not write, the GGUF's tensors dequantised by gguf-py): the same
    next tokens, within the bound of its activation-quantising matmul; the
    F32 weights with the experts in another order are visibly otherwise
    (the order is what llama.cpp's router reads).  Qwen2-MoE runs unquantised:
    llama.cpp's qwen2moe graph does not apply NVFP4 companion scales to the
    experts or the shared expert (its converter's NVFP4 GGUF, which grit's
    is byte for byte, does not run there)."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    src, dst, _ = converted(name)
    ours = os.path.join(dst, CG.GGUF_FILE)

    def logits(path):
        m = llama_cpp.Llama(model_path=path, n_ctx=64, logits_all=True, verbose=False,
                            n_threads=1)
        toks = [0, 5, 17, 42, 99, 250, 3, 7]
        m.eval(toks)
        return np.array(m.scores[:len(toks)], np.float32)
    q = logits(ours)
    if name == "gpt-oss":
        f = logits(_gguf_py_f32(ours, str(tmp_path / "f32.gguf")))
        bad = logits(_gguf_py_f32(ours, str(tmp_path / "bad.gguf"), roll=True))
    else:
        f = logits(_f32_twin(src, str(tmp_path / "f32")))
        bad = logits(_f32_twin(_rotated(src, str(tmp_path / "rot"), SOURCES[name][0]),
                               str(tmp_path / "bad")))
    scale, noise = float(np.abs(f).max()), float(np.abs(q - f).max())
    assert noise < 0.1 * scale
    assert float(np.abs(bad - f).max()) > 0.3 * scale
    # the same next token wherever the F32 logits' top two are further apart
    # than twice the position's largest difference (elsewhere the quantised
    # matmul may swap a near-tie of these random models)
    top2 = np.sort(f, axis=-1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * np.abs(q - f).max(axis=-1)
    assert clear.any()
    assert (q.argmax(-1) == f.argmax(-1))[clear].all()


def _flip(path: str, tensor: str, at: int) -> None:
    t = next(t for t in gguf.GGUFReader(path).tensors if t.name == tensor)
    with open(path, "r+b") as f:
        f.seek(int(t.data_offset) + at)
        b = f.read(1)
        f.seek(int(t.data_offset) + at)
        f.write(bytes([b[0] ^ 0x11]))


@pytest.mark.parametrize("where", ("blocks", "companion"))
def test_verify_finds_a_changed_expert(converted, where, tmp_path):
    """A byte of expert 2's blocks of blk.1.ffn_down_exps, or its value of
    the companion scale, changed: verify fails naming that expert alone."""
    src, dst, _ = converted("qwen3moe")
    bad = str(tmp_path / "bad")
    shutil.copytree(dst, bad)
    path = os.path.join(bad, CG.GGUF_FILE)
    if where == "blocks":      # 128 rows of 64 values: 36 bytes per row of NVFP4
        _flip(path, "blk.1.ffn_down_exps.weight", 2 * 128 * 36 + 1000)
    else:
        _flip(path, "blk.1.ffn_down_exps.scale", 2 * 4 + 1)
    rep = C.verify(src, bad)
    assert not rep.ok
    named = {p.split(":")[0] for p in rep.problems}
    assert named == {"model.layers.1.mlp.experts.2.down_proj.weight"}, rep.problems


def _edit(src: str, dst: str, change) -> str:
    from safetensors.torch import load_file, save_file
    shutil.copytree(src, dst)
    sd = load_file(os.path.join(src, "model.safetensors"))
    change(sd)
    save_file(sd, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    return dst


def test_refusals(models, tmp_path):
    """A block missing an expert, experts of two formats or of two shapes:
    each a GritUsageError naming the stacked tensor, nothing written."""
    import torch
    q = "model.layers.1.mlp.experts"

    def missing(sd):
        for k in [k for k in sd if k.startswith(f"{q}.3.up_proj.")]:
            del sd[k]

    def plain_one(sd):              # expert 1's gate_proj as a bfloat16 weight
        for k in [k for k in sd if k.startswith(f"{q}.1.gate_proj.")]:
            del sd[k]
        sd[f"{q}.1.gate_proj.weight"] = torch.zeros(64, 128, dtype=torch.bfloat16)

    def narrower(sd):
        k = "model.layers.0.block_sparse_moe.experts.2.w2.weight"
        sd[k] = sd[k][:64].contiguous()
    cases = [("qwen3moe", missing, f"{q}.up_proj.weight: experts [0, 1, 2]"),
             ("qwen3moe", plain_one, f"{q}.gate_proj.weight: its experts differ"),
             ("mixtral-bf16", narrower,
              "model.layers.0.block_sparse_moe.experts.w2.weight: its experts differ")]
    for i, (name, change, want) in enumerate(cases):
        src = _edit(models(name), str(tmp_path / f"src{i}"), change)
        with pytest.raises(GritUsageError) as e:
            C.convert(src, str(tmp_path / f"o{i}"), "gguf")
        assert want in str(e.value)
        assert not os.path.exists(tmp_path / f"o{i}")
    # an expert count config.json does not give
    src = str(tmp_path / "nocount")
    shutil.copytree(models("mixtral"), src)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    cfg["num_local_experts"] = 8
    with open(os.path.join(src, "config.json"), "w") as f:
        json.dump(cfg, f)
    with pytest.raises(GritUsageError, match=r"experts \[0, 1, 2, 3\] .* is 8"):
        C.convert(src, str(tmp_path / "o"), "gguf")
    cfg["num_local_experts"] = "four"
    with open(os.path.join(src, "config.json"), "w") as f:
        json.dump(cfg, f)
    with pytest.raises(GritUsageError, match="num_local_experts is 'four', not a count"):
        C.convert(src, str(tmp_path / "o"), "gguf")
    assert not os.path.exists(tmp_path / "o")


def test_stacked_experts_are_not_written_back(converted, tmp_path):
    """A GGUF of stacked experts converts back to no safetensors convention:
    qwen3moe is not an architecture named back, and Mixtral's (llama)
    stacked experts are refused by name; nothing is written."""
    for name, want in (("qwen3moe", "'qwen3moe' is not one grit names back"),
                       ("mixtral", "'blk.0.ffn_gate_exps.weight' is a mixture-of-experts")):
        _, dst, _ = converted(name)
        with pytest.raises(GritUsageError, match=want):
            C.convert(os.path.join(dst, CG.GGUF_FILE), str(tmp_path / name), "grit")
        assert not os.path.exists(tmp_path / name)


def test_lazy_plain_tensor_is_written_as_the_ndarray(tmp_path):
    """A plain tensor built when the file reaches it (how stacked plain
    experts are written) gives the file its ndarray gives, byte for byte;
    one built with another shape is an error, not a file."""
    import ml_dtypes
    from grit.errors import GritError
    from grit.io.gguf_writer import LazyPlain, save_gguf
    rng = np.random.default_rng(5)
    xs = {"blk.0.ffn_up_exps.weight": rng.standard_normal((3, 8, 32)).astype(ml_dtypes.bfloat16),
          "blk.0.ffn_down_exps.weight": rng.standard_normal((3, 32, 8)).astype(np.float32),
          "blk.0.ffn_gate_exps.weight": rng.standard_normal((3, 8, 32)).astype(np.float16)}
    save_gguf(tmp_path / "a.gguf", xs, arch="llama")
    save_gguf(tmp_path / "b.gguf", {k: LazyPlain(x.shape, x.dtype, lambda x=x: x.copy())
                                    for k, x in xs.items()}, arch="llama")
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes()
    x = xs["blk.0.ffn_down_exps.weight"]
    with pytest.raises(GritError, match="another shape"):
        save_gguf(tmp_path / "c.gguf", {"t": LazyPlain(x.shape, x.dtype, lambda: x[:1])},
                  arch="llama")
    assert not (tmp_path / "c.gguf").exists()


def test_experts_of_over_2_16_groups(tmp_path):
    """An NVFP4 expert of 1024 x 1024 (65536 groups, more than a uint16 k1
    counts) stacks as ggml's blocks and a companion of one F32 per expert
    (GRIT's reader then reads the blocks and the companion apart); each
    expert's share of what is written, with its companion value, is the
    source expert's planes, and gguf-py's dequantisation times the
    companion is its decode within one ulp."""
    from grit.io.gguf_writer import save_gguf
    rng = np.random.default_rng(9)
    parts = [grit.encode(rng.standard_normal((1024, 1024)).astype(np.float32) * (e + 1),
                         grit.GRADE_NVF4) for e in range(2)]
    ex = CG._Experts([f"e{e}" for e in range(2)], parts)
    comp = ex.companion()
    path = tmp_path / "x.gguf"
    save_gguf(path, {"blk.0.ffn_up_exps.weight": ex.stacked(),
                     "blk.0.ffn_up_exps.scale": comp}, arch="qwen3moe", relayout=True)
    t = {t.name: t for t in gguf.GGUFReader(path).tensors}
    assert t["blk.0.ffn_up_exps.weight"].tensor_type.name == "NVFP4"
    assert t["blk.0.ffn_up_exps.scale"].data.tolist() == comp.tolist()
    got = gguf.quants.dequantize(t["blk.0.ffn_up_exps.weight"].data, gguf.GGMLQuantizationType.NVFP4)
    back = grit.load(str(path))
    b = back["blk.0.ffn_up_exps.weight"]
    # the stack read back in the canonical placement by ggml's direct inverse
    # is what a relayout gives
    from grit.array import canonical
    fast, slow = CG._canonical_once(b), canonical(b)
    assert fast is not b and fast.descriptor == slow.descriptor
    assert [bytes(p) for p in fast.planes] == [bytes(p) for p in slow.planes]
    del slow
    for e, a in enumerate(parts):
        y = ex.expert(b, e, back["blk.0.ffn_up_exps.scale"])
        assert y.descriptor == a.descriptor
        assert [bytes(p) for p in y.planes] == [bytes(p) for p in a.planes]
        ref = np.asarray(grit.decode(a), np.float32)
        prod, nz = got[e] * comp[e], ref != 0
        assert _ulps(prod[nz], ref[nz]) <= 1 and (prod[~nz] == 0).all()
    assert ex.expert(b, 0, comp[:1]) is None          # a companion of another size



def test_gpt_oss_read_by_gguf_py(converted):
    """gpt-oss's stacked experts in its own MXFP4 layout: gate_up_proj's even
    rows (axis 1) are ffn_gate_exps and its odd ones ffn_up_exps, down_proj
    ffn_down_exps, each MXFP4 with gguf-py's dequantisation grit.decode of
    the source's rows bit for bit (but for ggml's +0 for the code of -0);
    the biases split likewise and F32, the sinks attn_sinks; the proof has
    one entry for gate_up_proj."""
    import ml_dtypes
    src, dst, rep = converted("gpt-oss")
    assert rep.counts == {"bit-exact": 2 * LAYERS}
    kv = {k: f.contents() for k, f in
          gguf.GGUFReader(os.path.join(dst, CG.GGUF_FILE)).fields.items()}
    assert kv["general.architecture"] == "gpt-oss"
    assert (kv["gpt-oss.expert_count"], kv["gpt-oss.expert_used_count"],
            kv["gpt-oss.expert_feed_forward_length"], kv["gpt-oss.attention.sliding_window"]) \
        == (N_EXPERTS, 2, 64, 64)
    assert kv["general.file_type"] == int(gguf.LlamaFileType.MOSTLY_MXFP4_MOE)
    tensors = _tensors(dst)
    arrays = grit.load(os.path.join(src, "model.safetensors"))
    raw = _raw_safetensors(os.path.join(src, "model.safetensors"))
    for layer in range(LAYERS):
        p = f"model.layers.{layer}."
        gate_up = np.asarray(grit.decode(arrays[p + "mlp.experts.gate_up_proj"]), np.float32)
        down = np.asarray(grit.decode(arrays[p + "mlp.experts.down_proj"]), np.float32)
        bias = np.frombuffer(raw[p + "mlp.experts.gate_up_proj_bias"][2], ml_dtypes.bfloat16
                             ).astype(np.float32).reshape(N_EXPERTS, -1)
        for gn, want, b in (("gate", gate_up[:, 0::2], bias[:, 0::2]),
                            ("up", gate_up[:, 1::2], bias[:, 1::2]), ("down", down, None)):
            t = tensors[f"blk.{layer}.ffn_{gn}_exps.weight"]
            assert t.tensor_type.name == "MXFP4"
            got = gguf.quants.dequantize(t.data, t.tensor_type)
            nz = want != 0
            assert got.shape == want.shape
            assert np.array_equal(got[nz].view(np.uint32), want[nz].view(np.uint32)), t.name
            assert (got[~nz] == 0).all()
            if b is not None:
                tb = tensors[f"blk.{layer}.ffn_{gn}_exps.bias"]
                assert tb.tensor_type == gguf.GGMLQuantizationType.F32
                assert np.array_equal(tb.data.view(np.uint32), b.view(np.uint32))
        sinks = tensors[f"blk.{layer}.attn_sinks.weight"]
        assert sinks.data.tobytes() == np.frombuffer(raw[p + "self_attn.sinks"][2],
                                                     ml_dtypes.bfloat16).astype(np.float32
                                                                                ).tobytes()
    w = {w["name"]: w for w in rep.proof["weights"]}["model.layers.1.mlp.experts.gate_up_proj"]
    assert w["gguf_names"] == ["blk.1.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight"]
    assert C.verify(src, dst).ok


def test_gpt_oss_verify_finds_a_changed_half(converted, tmp_path):
    """A byte of ffn_up_exps changed: verify names gate_up_proj, whose odd
    rows it holds; an unquantised gpt-oss ([expert, in, out] experts) is
    refused."""
    src, dst, _ = converted("gpt-oss")
    bad = str(tmp_path / "bad")
    shutil.copytree(dst, bad)
    _flip(os.path.join(bad, CG.GGUF_FILE), "blk.0.ffn_up_exps.weight", 777)
    rep = C.verify(src, bad)
    assert {p.split(":")[0] for p in rep.problems} == {"model.layers.0.mlp.experts.gate_up_proj"}
    plain = str(tmp_path / "plain")
    os.makedirs(plain)
    t = grit.load(os.path.join(src, "model.safetensors"))
    grit.save(os.path.join(plain, "model.safetensors"),
              {k: np.asarray(grit.decode(v), np.float32).swapaxes(1, 2).copy()
               if isinstance(v, grit.GritArray) else v for k, v in t.items()})
    for n in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        shutil.copy(os.path.join(src, n), plain)
    with pytest.raises(GritUsageError, match="unquantised experts") as e:
        C.convert(plain, str(tmp_path / "o"), "gguf")
    for w in ("gate_up_proj", "down_proj"):
        assert f"model.layers.1.mlp.experts.{w}: gpt-oss's unquantised" in str(e.value)


@pytest.mark.parametrize("name, kind", [("qwen3moe", "NVFP4"), ("qwen3moe-mxfp4", "MXFP4")])
def test_stacked_blocks_compared_as_unblocked_give_the_planes_proof(models, tmp_path,
                                                                    monkeypatch, name, kind):
    """The proof of stacked experts compares each expert's share of the
    written blocks (and of an NVFP4 stack's companion scale) with the
    expert as it is unblocked, its digests four at a time, nothing built
    (``_experts_compared``): the GGUF and the proof are those of moving the
    stack into the canonical placement and comparing each share."""
    src = models(name)
    calls = recorded(monkeypatch, CG, "unblocks_to")
    rep = C.convert(src, str(tmp_path / "fast"), "gguf")
    experts = [w for w in rep.proof["weights"] if "expert" in w]
    assert len(experts) == LAYERS * 3 * N_EXPERTS
    assert calls.count(kind) >= len(experts)
    _the_planes_way_is_the_same(src, tmp_path, monkeypatch, calls)


def _the_planes_way_is_the_same(src: str, tmp_path, monkeypatch, calls: list) -> None:
    """``tmp_path / "fast"``, converted from ``src`` with the blocks compared
    as unblocked (``calls``: the record of ``unblocks_to``), verifies, and is
    the conversion with the planes built, byte for byte, which calls none."""
    from test_convert_gguf_split import _same_output
    assert C.verify(src, str(tmp_path / "fast")).ok
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", False)
    calls.clear()
    C.convert(src, str(tmp_path / "planes"), "gguf")
    assert not calls
    _same_output(tmp_path / "fast", tmp_path / "planes")


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("where", [("blk.1.ffn_down_exps.weight", 2 * 128 * 36 + 1000),
                                   ("blk.0.ffn_up_exps.weight", 3 * 2 * 64 * 36 + 2),
                                   ("blk.1.ffn_down_exps.scale", 2 * 4 + 1)])
def test_a_changed_expert_byte_is_found_in_its_expert_alone(models, tmp_path, monkeypatch,
                                                           fast, where):
    """A byte of one expert's share of the written NVFP4 stack (a code; a
    block scale: up_proj's experts are 64 rows of two 36-byte blocks) or of
    its companion scale changed before the proof reads
    the file back: that expert alone is not bit-exact, blocks compared as
    unblocked or the stack moved into the canonical placement; verify, the
    other way, re-derives the same proof."""
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", fast)
    then(monkeypatch, CG, "save_gguf", lambda path, *a: _flip(path, *where))
    src = models("qwen3moe")
    dst = str(tmp_path / "out")
    rep = C.convert(src, dst, "gguf")
    layer, proj = where[0].split(".")[1], where[0].split(".")[2].split("_")[1]
    e = 2 if "down" in where[0] else 3
    bad = f"model.layers.{layer}.mlp.experts.{e}.{proj}_proj.weight"
    wrong = [w["name"] for w in rep.proof["weights"] if w["verdict"]["verdict"] != "bit-exact"]
    assert wrong == [bad]
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", not fast)
    rep = C.verify(src, dst)
    assert rep.ok, rep.problems


def test_gpt_oss_blocks_compared_as_unblocked_give_the_planes_proof(models, tmp_path,
                                                                     monkeypatch):
    """The proof of gpt-oss's experts compares the written MXFP4 blocks
    with the source as they are unblocked, expert by expert
    (``_GateUp.hold``, ``_unblocks_hold``), building neither the halves'
    canonical planes nor gate_up_proj interleaved again: the GGUF and the
    proof are those of building them and comparing."""
    src = models("gpt-oss")
    calls = recorded(monkeypatch, CG, "unblocks_to")
    assert C.convert(src, str(tmp_path / "fast"), "gguf").counts == {"bit-exact": 2 * LAYERS}
    # gate_up: each expert's two halves; down_proj: once
    assert calls == ["MXFP4"] * (LAYERS * (2 * N_EXPERTS + 1))
    _the_planes_way_is_the_same(src, tmp_path, monkeypatch, calls)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("where", [("blk.0.ffn_up_exps.weight", 0),       # expert 0's E8M0
                                   ("blk.1.ffn_gate_exps.weight", -3),    # the last code
                                   ("blk.1.ffn_down_exps.weight", 17 * 9 + 5)])
def test_gpt_oss_a_changed_byte_is_found_in_its_weight_alone(models, tmp_path, monkeypatch,
                                                             fast, where):
    """A byte of a written MXFP4 block (a scale, a code; of either half of
    gate_up_proj or of down_proj) changed before the proof reads the file
    back: that weight alone is not bit-exact, whether the blocks are
    compared as unblocked or the planes built; verify, the other way,
    re-derives the same proof."""
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", fast)
    gname, at = where

    def change(path, *a):
        t = next(t for t in gguf.GGUFReader(path).tensors if t.name == gname)
        _flip(path, gname, at % int(t.n_bytes))
    then(monkeypatch, CG, "save_gguf", change)
    src = models("gpt-oss")
    dst = str(tmp_path / "out")
    rep = C.convert(src, dst, "gguf")
    layer = gname.split(".")[1]
    bad = f"model.layers.{layer}.mlp.experts." + \
        ("down_proj" if "down" in gname else "gate_up_proj")
    assert rep.counts.get("bit-exact") == 2 * LAYERS - 1
    for w in rep.proof["weights"]:
        assert (w["verdict"]["verdict"] == "bit-exact") == (w["name"] != bad), w["name"]
        if w["name"] == bad and "gate_up" in bad:
            assert w["target"]["digest"] != w["source"]["digest"]
    monkeypatch.setattr(CG, "_BLOCKS_HOLD", not fast)      # verify the other way: the same
    rep = C.verify(src, dst)
    assert rep.ok and rep.checked == 2 * LAYERS, rep.problems


@pytest.mark.parametrize("name", ("qwen3moe", "gpt-oss"))
def test_a_remote_moe_checkpoint_streams_to_the_local_output(converted, name, tmp_path,
                                                             monkeypatch):
    """An MoE checkpoint in three shards by the https URL of its index,
    streamed one shard at a time: a stacked expert tensor (built from many
    source tensors, in several shards) waits for every shard it needs, and
    the GGUF and its proof are the local folder's conversion, byte for
    byte, with no spool left; verify of the remote source streams too and
    checks every weight."""
    from http_server import Server
    from test_convert_gguf_sources import SMALL, shard
    src, _, _ = converted(name)
    d = tmp_path / "ckpt"
    shard(src, d, parts=3)
    monkeypatch.setattr(C, "SMALL_MAX", SMALL)
    local = C.convert(str(d), str(tmp_path / "local"), "gguf")
    s = Server()
    try:
        for n in os.listdir(d):
            s.files[f"/ckpt/{n}"] = (d / n).read_bytes()
        rep = C.convert(s.url("/ckpt/model.safetensors.index.json"), str(tmp_path / "out"),
                        "gguf")
        # verify reads the remote checkpoint as the conversion did, a shard at a time
        ver = C.verify(s.url("/ckpt/model.safetensors.index.json"), str(tmp_path / "out"))
        assert ver.ok and ver.checked == sum(local.counts.values()), ver.problems
    finally:
        s.close()
    assert rep.counts == local.counts
    for n in sorted(os.listdir(tmp_path / "local")):
        assert (tmp_path / "out" / n).read_bytes() == (tmp_path / "local" / n).read_bytes(), n
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".grit")]
