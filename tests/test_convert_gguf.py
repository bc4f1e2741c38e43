"""grit convert with GGUF on either side (grit.convert_gguf, docs/convert.md "GGUF").

Sources are built by the official libraries: tiny transformers models of each
family, quantised by compressed-tensors itself (tests/hf_tiny.py), and GGUF
files written by gguf-py.  Targets are checked by the target's own reader:
gguf-py's GGUFReader and ``gguf.quants.dequantize`` for GGUF, raw safetensors
bytes for the way back.  Where a llama.cpp source tree is named by
GRIT_LLAMA_CPP, its convert_hf_to_gguf.py converts the same checkpoints and
every tensor must be byte-identical; where llama-cpp-python is installed,
llama.cpp runs the written GGUF.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch (CPU) is not installed")
pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("tokenizers", reason="tokenizers is not installed")
pytest.importorskip("compressed_tensors", reason="compressed-tensors is not installed")
gguf = pytest.importorskip("gguf", reason="gguf-py is not installed")

import ml_dtypes  # noqa: E402

import grit  # noqa: E402
from grit import convert as C  # noqa: E402
from grit import convert_gguf as CG  # noqa: E402
from grit.errors import GritUsageError  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma3")
#: family -> (gguf-py architecture name, whether llama.cpp permutes q/k, pre-tokenizer)
EXPECT = {"llama": ("llama", True, "llama-bpe"), "mistral": ("llama", True, "llama-bpe"),
          "qwen2": ("qwen2", False, "qwen2"), "qwen3": ("qwen3", False, "qwen2"),
          "gemma3": ("gemma3", False, "llama-bpe")}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """family -> a folder holding the tiny model quantised to NVFP4 by
    compressed-tensors (built on first use)."""
    import hf_tiny
    root = tmp_path_factory.mktemp("hf")
    made: dict[str, str] = {}

    def get(fam: str) -> str:
        if fam not in made:
            made[fam] = hf_tiny.write_model(str(root / fam), fam, seed=FAMILIES.index(fam))
        return made[fam]
    return get


@pytest.fixture(scope="module")
def converted(models, tmp_path_factory):
    """family -> (source folder, the --to gguf output folder, its report)."""
    root = tmp_path_factory.mktemp("gguf")
    done: dict[str, tuple] = {}

    def get(fam: str):
        if fam not in done:
            src = models(fam)
            rep = C.convert(src, str(root / fam), "gguf")
            done[fam] = (src, str(root / fam), rep)
        return done[fam]
    return get


def _raw_safetensors(path: str) -> dict[str, tuple[str, list, bytes]]:
    """name -> (dtype, shape, bytes), parsed from the file independently of grit."""
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in h.items()}


_E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def _ct_nvfp4_level0(raw, module: str) -> np.ndarray:
    """compressed-tensors' stored codes times their E4M3 block scales, f32,
    computed from the raw bytes (element 2j in the low nibble)."""
    _, shape, packed = raw[module + ".weight_packed"]
    _, sshape, sc = raw[module + ".weight_scale"]
    p = np.frombuffer(packed, np.uint8).reshape(shape)
    codes = np.stack([p & 15, p >> 4], axis=-1).reshape(shape[0], shape[1] * 2)
    s = np.frombuffer(sc, np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    return _E2M1[codes] * np.repeat(s.reshape(sshape), 16, axis=1)


def _ulps(x: np.ndarray, y: np.ndarray) -> int:
    xi = x.astype(np.float32).view(np.int32).astype(np.int64)
    yi = y.astype(np.float32).view(np.int32).astype(np.int64)
    xi = np.where(xi < 0, -2**31 - xi, xi)
    yi = np.where(yi < 0, -2**31 - yi, yi)
    return int(np.abs(xi - yi).max()) if x.size else 0


def _rows(name: str, fam: str, n: int) -> np.ndarray:
    """llama.cpp's q/k row order, written out from convert_hf_to_gguf's
    LlamaModel.permute: reshape(n_head, 2, rows/n_head/2).swapaxes(1, 2)."""
    if not EXPECT[fam][1] or not name.endswith(("q_proj", "k_proj")):
        return np.arange(n)
    heads = 4 if name.endswith("q_proj") else 2
    return np.arange(n).reshape(heads, 2, n // heads // 2).swapaxes(1, 2).reshape(-1)


@pytest.mark.parametrize("fam", FAMILIES)
def test_to_gguf_read_by_gguf_py(converted, fam):
    src, dst, rep = converted(fam)
    assert rep.counts == {"bit-exact": 14}
    r = gguf.GGUFReader(os.path.join(dst, CG.GGUF_FILE))
    arch, _, pre = EXPECT[fam]
    kv = {k: f.contents() for k, f in r.fields.items()}
    assert kv["general.architecture"] == arch
    assert kv[f"{arch}.block_count"] == 2
    assert kv[f"{arch}.attention.head_count"] == 4
    assert kv[f"{arch}.attention.head_count_kv"] == 2
    assert kv[f"{arch}.embedding_length"] == 128
    assert kv[f"{arch}.feed_forward_length"] == 256
    assert kv[f"{arch}.context_length"] == 256
    assert kv["general.file_type"] == int(gguf.LlamaFileType.MOSTLY_NVFP4)
    # the tokenizer, as transformers reads it
    from transformers import PreTrainedTokenizerFast
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(src, "tokenizer.json"))
    assert kv["tokenizer.ggml.model"] == "gpt2" and kv["tokenizer.ggml.pre"] == pre
    assert kv["tokenizer.ggml.tokens"] == tok.convert_ids_to_tokens(list(range(len(tok))))
    with open(os.path.join(src, "tokenizer.json")) as f:
        merges = json.load(f)["model"]["merges"]
    assert len(kv["tokenizer.ggml.merges"]) == len(merges)
    # the tensors: llama.cpp's names, NVFP4 blocks equal to the source's codes and scales
    raw = _raw_safetensors(os.path.join(src, "model.safetensors"))
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], 2)
    tensors = {t.name: t for t in r.tensors}
    modules = sorted({k.rsplit(".", 1)[0] for k in raw if k.endswith(".weight_packed")})
    assert len(modules) == 14
    src_arrays = grit.load(os.path.join(src, "model.safetensors"))
    for m in modules:
        gname = tmap.get_name(m + ".weight", try_suffixes=(".weight",))
        t = tensors[gname]
        assert t.tensor_type == gguf.GGMLQuantizationType.NVFP4
        level0 = gguf.quants.dequantize(t.data, t.tensor_type)
        want = _ct_nvfp4_level0(raw, m)[_rows(m, fam, level0.shape[0])]
        assert level0.shape == want.shape
        # bit for bit, but for the sign of zero: ggml reads the E2M1 code of
        # -0 (0x8) as +0 (docs/convert.md)
        nz = want != 0
        assert np.array_equal(level0[nz].view(np.uint32), want[nz].view(np.uint32)), m
        assert (level0[~nz] == 0).all()
        # the companion is 1/g, and llama.cpp's product (blocks x companion)
        # is GRIT's decode within the one ulp the proof's arithmetic note allows
        comp = tensors[gname.removesuffix(".weight") + ".scale"]
        assert comp.tensor_type == gguf.GGMLQuantizationType.F32
        g = np.frombuffer(raw[m + ".weight_global_scale"][2], np.float32)
        assert comp.data.reshape(-1).view(np.uint32)[0] == \
            (np.float32(1) / g).astype(np.float32).view(np.uint32)[0]
        ref = np.asarray(grit.decode(src_arrays[m + ".weight"]), np.float32)
        ref = ref[_rows(m, fam, ref.shape[0])]
        prod = level0 * comp.data.reshape(-1)[0]
        nz = ref != 0
        assert _ulps(prod[nz], ref[nz]) <= 1 and (prod[~nz] == 0).all()
    # plain tensors: BF16 kept, norms F32 (Gemma 3: 1 + w)
    emb = tensors["token_embd.weight"]
    assert emb.tensor_type == gguf.GGMLQuantizationType.BF16
    assert emb.data.tobytes() == raw["model.embed_tokens.weight"][2]
    norm = tensors["blk.0.attn_norm.weight"]
    assert norm.tensor_type == gguf.GGMLQuantizationType.F32
    w = np.frombuffer(raw["model.layers.0.input_layernorm.weight"][2],
                      ml_dtypes.bfloat16).astype(np.float32)
    want = w + np.float32(1) if fam == "gemma3" else w
    assert np.array_equal(norm.data.view(np.uint32), want.view(np.uint32))
    # the proof holds and grit verify says so
    assert C.verify(src, dst).ok


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """source convention -> a tiny llama checkpoint in it: compressed-tensors
    NVFP4 and MXFP4 as the library writes them, and ModelOpt NVFP4 and GRIT
    safetensors as grit convert writes them from those."""
    import hf_tiny
    root = tmp_path_factory.mktemp("src")
    nv = hf_tiny.write_model(str(root / "ct-nvfp4"), "llama", seed=7)
    mx = hf_tiny.write_model(str(root / "ct-mxfp4"), "llama", fmt="mxfp4-pack-quantized",
                             seed=8)
    w4a4 = hf_tiny.write_model(str(root / "ct-w4a4"), "llama", seed=9, w4a4=True)
    out = {"ct-nvfp4": nv, "ct-mxfp4": mx, "ct-w4a4": w4a4}
    for name, src, to in (("modelopt-nvfp4", nv, "modelopt"), ("grit-nvfp4", nv, "grit"),
                          ("grit-mxfp4", mx, "grit")):
        C.convert(src, str(root / name), to)
        out[name] = str(root / name)
    return out


@pytest.mark.parametrize("conv", ("ct-nvfp4", "ct-mxfp4", "modelopt-nvfp4", "grit-nvfp4",
                                  "grit-mxfp4"))
def test_each_source_convention_to_gguf(sources, conv, tmp_path):
    """Every source convention --to gguf: the ggml type of its format, and
    gguf-py's dequantisation (times the companion for NVFP4) equal to
    grit.decode of the source, rows in llama.cpp's order — bit for bit but
    for ggml's +0 for the code of -0, and NVFP4's companion product within
    one ulp (docs/convert.md)."""
    src = sources[conv]
    rep = C.convert(src, str(tmp_path / "g"), "gguf")
    assert rep.counts == {"bit-exact": 14}
    r = gguf.GGUFReader(str(tmp_path / "g" / CG.GGUF_FILE))
    tensors = {t.name: t for t in r.tensors}
    arrays = grit.load(os.path.join(src, "model.safetensors"))
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2)
    want_type = "NVFP4" if conv.endswith("nvfp4") else "MXFP4"
    n = 0
    for name, a in arrays.items():
        if not isinstance(a, grit.GritArray):
            continue
        t = tensors[tmap.get_name(name, try_suffixes=(".weight",))]
        assert t.tensor_type.name == want_type
        got = gguf.quants.dequantize(t.data, t.tensor_type)
        comp = tensors.get(t.name.removesuffix(".weight") + ".scale")
        if want_type == "NVFP4":
            got = got * comp.data.reshape(-1)[0]
        else:
            assert comp is None
        ref = np.asarray(grit.decode(a), np.float32)
        ref = ref[_rows(name.removesuffix(".weight"), "llama", ref.shape[0])]
        nz = ref != 0
        assert (got[~nz] == 0).all()
        assert _ulps(got[nz], ref[nz]) <= (1 if want_type == "NVFP4" else 0), name
        n += 1
    assert n == 14
    assert C.verify(src, str(tmp_path / "g")).ok


def test_verify_finds_a_changed_gguf(converted, tmp_path):
    src, dst, _ = converted("llama")
    bad = str(tmp_path / "bad")
    shutil.copytree(dst, bad)
    path = os.path.join(bad, CG.GGUF_FILE)
    r = gguf.GGUFReader(path)
    t = next(t for t in r.tensors if t.name == "blk.1.attn_q.weight")
    with open(path, "r+b") as f:
        f.seek(int(t.data_offset) + 40)
        b = f.read(1)
        f.seek(int(t.data_offset) + 40)
        f.write(bytes([b[0] ^ 0x11]))
    rep = C.verify(src, bad)
    assert not rep.ok
    assert any("q_proj" in p for p in rep.problems)


def test_cli_convert_to_gguf(models, tmp_path):
    from click.testing import CliRunner
    from grit.cli import main
    res = CliRunner().invoke(main, ["convert", models("qwen3"), str(tmp_path / "o"),
                                    "--to", "gguf"])
    assert res.exit_code == 0, res.output
    assert "14 weight(s) written as gguf" in res.output
    res = CliRunner().invoke(main, ["verify", models("qwen3"), str(tmp_path / "o")])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("fam", ("llama", "qwen2", "gemma3"))
def test_ct_gguf_ct_round_trip_gives_the_bytes_back(converted, fam, tmp_path):
    src, dst, _ = converted(fam)
    back = str(tmp_path / "ct")
    rep = C.convert(os.path.join(dst, CG.GGUF_FILE), back, "compressed-tensors")
    assert rep.counts == {"bit-exact": 14}
    a = _raw_safetensors(os.path.join(src, "model.safetensors"))
    b = _raw_safetensors(os.path.join(back, "model.safetensors"))
    assert set(a) == set(b)
    assert [k for k in a if a[k] != b[k]] == []
    with open(os.path.join(back, "config.json")) as f:
        q = json.load(f)["quantization_config"]
    assert q["format"] == "nvfp4-pack-quantized"
    assert C.verify(os.path.join(dst, CG.GGUF_FILE), back).ok


def test_gguf_to_modelopt(converted, tmp_path):
    src, dst, _ = converted("qwen3")
    out = str(tmp_path / "mo")
    rep = C.convert(os.path.join(dst, CG.GGUF_FILE), out, "modelopt")
    assert rep.counts == {"bit-exact": 14}
    b = _raw_safetensors(os.path.join(out, "model.safetensors"))
    a = _raw_safetensors(os.path.join(src, "model.safetensors"))
    m = "model.layers.1.self_attn.k_proj"
    # ModelOpt's weight_scale_2 multiplies: it is the companion, f32(1/g)
    g = np.frombuffer(a[m + ".weight_global_scale"][2], np.float32)
    s2 = np.frombuffer(b[m + ".weight_scale_2"][2], np.float32)
    assert s2.view(np.uint32)[0] == (np.float32(1) / g).astype(np.float32).view(np.uint32)[0]
    assert b[m + ".weight"][2] == a[m + ".weight_packed"][2]
    assert C.verify(os.path.join(dst, CG.GGUF_FILE), out).ok


def test_gguf_to_grit(converted, tmp_path):
    src, dst, _ = converted("mistral")
    out = str(tmp_path / "g")
    rep = C.convert(os.path.join(dst, CG.GGUF_FILE), out, "grit")
    assert rep.counts == {"bit-exact": 14}
    a = grit.load(os.path.join(src, "model.safetensors"))
    b = grit.load(os.path.join(out, "model.safetensors"))
    for n, v in a.items():
        if isinstance(v, grit.GritArray):
            x = np.asarray(grit.decode(v), np.float32)
            y = np.asarray(grit.decode(b[n]), np.float32)
            assert np.array_equal(x.view(np.uint32), y.view(np.uint32)), n
    assert C.verify(os.path.join(dst, CG.GGUF_FILE), out).ok


def _gguf_py_file(path: str, qtype: str) -> dict[str, np.ndarray]:
    """A one-block llama GGUF written by gguf-py: its q/k/v/o and MLP weights
    quantised by ``gguf.quants.quantize`` to ``qtype``; returns the values
    gguf-py dequantises each tensor to."""
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(path, "llama")
    for add, v in ((w.add_block_count, 1), (w.add_context_length, 64),
                   (w.add_embedding_length, 64), (w.add_feed_forward_length, 128),
                   (w.add_head_count, 2), (w.add_head_count_kv, 2)):
        add(v)
    w.add_layer_norm_rms_eps(1e-5)
    t = gguf.GGMLQuantizationType[qtype]
    shapes = {"token_embd.weight": (32, 64), "blk.0.attn_norm.weight": (64,),
              "blk.0.attn_q.weight": (64, 64), "blk.0.attn_k.weight": (64, 64),
              "blk.0.attn_v.weight": (64, 64), "blk.0.attn_output.weight": (64, 64),
              "blk.0.ffn_gate.weight": (128, 64), "blk.0.ffn_up.weight": (128, 64),
              "blk.0.ffn_down.weight": (64, 128), "blk.0.ffn_norm.weight": (64,),
              "output_norm.weight": (64,)}
    values = {}
    for name, shape in shapes.items():
        x = rng.standard_normal(shape).astype(np.float32)
        if len(shape) == 2 and name != "token_embd.weight":
            q = gguf.quants.quantize(x, t)
            w.add_tensor(name, q, raw_dtype=t)
            values[name] = gguf.quants.dequantize(q, t)
        else:
            w.add_tensor(name, x)
            values[name] = x
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return values


def test_gguf_py_file_to_grit(tmp_path):
    path = str(tmp_path / "q8.gguf")
    values = _gguf_py_file(path, "Q8_0")
    out = str(tmp_path / "g")
    rep = C.convert(path, out, "grit")
    assert rep.counts == {"bit-exact": 7}
    b = grit.load(os.path.join(out, "model.safetensors"))
    x = np.asarray(grit.decode(b["model.layers.0.self_attn.q_proj.weight"]), np.float32)
    # llama.cpp's q rows, put back: the GGUF's row r came from source row rows[r]
    rows = np.arange(64).reshape(2, 2, 16).swapaxes(1, 2).reshape(-1)
    want = np.empty_like(x)
    want[rows] = values["blk.0.attn_q.weight"]
    assert np.array_equal(x.view(np.uint32), want.view(np.uint32))
    y = np.asarray(grit.decode(b["model.layers.0.mlp.down_proj.weight"]), np.float32)
    assert np.array_equal(y.view(np.uint32), values["blk.0.ffn_down.weight"].view(np.uint32))
    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["hidden_size"] == 64
    assert rep.proof["tokenizer"] == {"files": [], "none": "the GGUF holds no tokenizer "
                                                           "(tokenizer.ggml.model)"}
    assert C.verify(path, out).ok


def test_gguf_py_file_refused_where_the_target_has_no_format(tmp_path):
    path = str(tmp_path / "q4.gguf")
    _gguf_py_file(path, "Q4_0")
    with pytest.raises(GritUsageError) as e:
        C.convert(path, str(tmp_path / "m"), "modelopt")
    assert "q_proj" in str(e.value)
    assert not os.path.exists(tmp_path / "m")


def test_unsupported_architecture_is_refused(models, tmp_path):
    src = str(tmp_path / "gpt2")
    shutil.copytree(models("llama"), src)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    cfg["architectures"] = ["GPT2LMHeadModel"]
    with open(os.path.join(src, "config.json"), "w") as f:
        json.dump(cfg, f)
    with pytest.raises(GritUsageError) as e:
        C.convert(src, str(tmp_path / "o"), "gguf")
    assert "GPT2LMHeadModel" in str(e.value) and "LlamaForCausalLM" in str(e.value)
    assert not os.path.exists(tmp_path / "o")


def test_allow_requant_is_refused_for_gguf(models, tmp_path):
    from click.testing import CliRunner
    from grit.cli import main
    res = CliRunner().invoke(main, ["convert", models("qwen3"), str(tmp_path / "o"),
                                    "--to", "gguf", "--allow-requant"])
    assert res.exit_code == 2, res.output
    assert "--allow-requant is not supported by the gguf converter" in res.output
    assert not os.path.exists(tmp_path / "o")


def test_missing_tokenizer_is_refused(models, tmp_path):
    src = str(tmp_path / "notok")
    shutil.copytree(models("llama"), src)
    os.remove(os.path.join(src, "tokenizer.json"))
    with pytest.raises(GritUsageError) as e:
        C.convert(src, str(tmp_path / "o"), "gguf")
    assert "tokenizer.json" in str(e.value)


def test_weight_no_ggml_type_holds_is_refused(tmp_path):
    """An FP8 (compressed-tensors float-quantized) weight: ggml has no FP8
    block type, so --to gguf refuses it by name."""
    import hf_tiny
    import torch
    model, tok = hf_tiny.build("llama", layers=1)
    hf_tiny.quantise(model, dict(num_bits=8, type="float", strategy="channel", symmetric=True),
                     "float-quantized")
    src = str(tmp_path / "fp8")
    os.makedirs(src)
    model.config.save_pretrained(src)
    tok.save_pretrained(src)
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              os.path.join(src, "model.safetensors"))
    model._ct_compressor.update_config(src)
    del torch
    with pytest.raises(GritUsageError) as e:
        C.convert(src, str(tmp_path / "o"), "gguf")
    assert "q_proj.weight" in str(e.value) and "no ggml block type" in str(e.value)


def test_qk_rows_is_llama_cpp_permute():
    torch = pytest.importorskip("torch")
    w = torch.arange(96 * 3).reshape(96, 3)
    # LlamaModel.permute as convert_hf_to_gguf writes it, for 6 heads of 2 KV
    for n_head, n_kv in ((6, 6), (6, 2)):
        h = n_kv
        ref = w.reshape(h, 2, w.shape[0] // h // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
        got = w.numpy()[CG.qk_rows(96, h)]
        assert np.array_equal(got, ref.numpy())
        del n_head


# ---------------------------------------------------------------------------
# llama.cpp itself


def _llama_cpp_dir() -> str:
    d = os.environ.get("GRIT_LLAMA_CPP", "")
    if not d or not os.path.isfile(os.path.join(d, "convert_hf_to_gguf.py")):
        pytest.skip("GRIT_LLAMA_CPP names no llama.cpp source tree with convert_hf_to_gguf.py")
    return d


@pytest.fixture(scope="module")
def llama_cpp_refs(converted, sources, tmp_path_factory):
    """name -> the GGUF llama.cpp's converter writes for the same checkpoint:
    each family's, and the ModelOpt source's (one converter process)."""
    d = _llama_cpp_dir()
    root = tmp_path_factory.mktemp("llama-cpp")
    jobs = {fam: (converted(fam)[0], EXPECT[fam][2]) for fam in FAMILIES}
    jobs["modelopt-nvfp4"] = (sources["modelopt-nvfp4"], "llama-bpe")
    jobs["ct-w4a4"] = (sources["ct-w4a4"], "llama-bpe")
    args = [x for name, (src, pre) in jobs.items() for x in (src, str(root / f"{name}.gguf"), pre)]
    p = subprocess.run([sys.executable, os.path.join(HERE, "llama_cpp_convert.py"), d, *args],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return {name: str(root / f"{name}.gguf") for name in jobs}


def _same_tensors(ref: str, ours: str) -> None:
    a, b = gguf.GGUFReader(ref), gguf.GGUFReader(ours)
    ta = {t.name: (t.tensor_type, list(t.shape), t.data.tobytes()) for t in a.tensors}
    tb = {t.name: (t.tensor_type, list(t.shape), t.data.tobytes()) for t in b.tensors}
    assert set(ta) == set(tb)
    assert [n for n in ta if ta[n] != tb[n]] == []


@pytest.mark.parametrize("fam", FAMILIES)
def test_byte_identical_to_llama_cpp_converter(converted, llama_cpp_refs, fam):
    _, dst, _ = converted(fam)
    ours = os.path.join(dst, CG.GGUF_FILE)
    _same_tensors(llama_cpp_refs[fam], ours)
    # every KV entry but the name llama.cpp makes up from the folder and the size label
    a, b = gguf.GGUFReader(llama_cpp_refs[fam]), gguf.GGUFReader(ours)
    skip = {"general.name", "general.size_label", "GGUF.kv_count"}
    for k, f in a.fields.items():
        if k not in skip:
            assert k in b.fields and b.fields[k].contents() == f.contents(), k


@pytest.mark.parametrize("conv", ("modelopt-nvfp4", "ct-w4a4"))
def test_other_sources_byte_identical_to_llama_cpp_converter(sources, llama_cpp_refs, conv,
                                                             tmp_path):
    C.convert(sources[conv], str(tmp_path / "g"), "gguf")
    _same_tensors(llama_cpp_refs[conv], str(tmp_path / "g" / CG.GGUF_FILE))


def test_activation_scales_written_as_llama_cpp_names_them(sources, tmp_path):
    """compressed-tensors' input_global_scale g of an NVFP4 (W4A4) module is
    llama.cpp's ``<base>.input_scale``, f32(1/g)."""
    src = sources["ct-w4a4"]
    assert C.convert(src, str(tmp_path / "g"), "gguf").counts == {"bit-exact": 14}
    r = gguf.GGUFReader(str(tmp_path / "g" / CG.GGUF_FILE))
    tensors = {t.name: t for t in r.tensors}
    raw = _raw_safetensors(os.path.join(src, "model.safetensors"))
    g = np.frombuffer(raw["model.layers.1.mlp.up_proj.input_global_scale"][2], np.float32)
    t = tensors["blk.1.ffn_up.input_scale"]
    assert t.tensor_type == gguf.GGMLQuantizationType.F32
    assert t.data.view(np.uint32).tolist() == \
        (np.float32(1) / g).astype(np.float32).view(np.uint32).tolist()
    assert sum(n.endswith(".input_scale") for n in tensors) == 14
    assert C.verify(src, str(tmp_path / "g")).ok


def _f32_twin(src: str, dst: str, *, break_qk: bool = False) -> str:
    """The source's weights as grit decodes them, F32, converted --to gguf."""
    os.makedirs(dst + "-st")
    t = grit.load(os.path.join(src, "model.safetensors"))
    grit.save(os.path.join(dst + "-st", "model.safetensors"),
              {k: np.asarray(grit.decode(v) if isinstance(v, grit.GritArray) else v, np.float32)
               for k, v in t.items()})
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("quantization_config", None)           # (none: an unquantised source)
    with open(os.path.join(dst + "-st", "config.json"), "w") as f:
        json.dump(cfg, f)
    for n in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, n), dst + "-st")
    if break_qk:
        saved = CG.qk_rows
        CG.qk_rows = lambda rows, n: np.arange(rows)
    try:
        C.convert(dst + "-st", dst, "gguf")
    finally:
        if break_qk:
            CG.qk_rows = saved
    return os.path.join(dst, CG.GGUF_FILE)


def test_llama_cpp_runs_the_gguf(converted, tmp_path):
    """llama.cpp's logits of the NVFP4 GGUF against those of the same weights
    as F32.  Not bit-equal: llama.cpp's CPU NVFP4 matmul quantises the
    activations; the bound is checked against a GGUF whose q/k rows are not
    permuted, which llama.cpp computes visibly otherwise."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    src, dst, _ = converted("llama")

    def logits(path):
        m = llama_cpp.Llama(model_path=path, n_ctx=64, logits_all=True, verbose=False,
                            n_threads=1)
        toks = [0, 5, 17, 42, 99, 250, 3, 7]
        m.eval(toks)
        return np.array(m.scores[:len(toks)], np.float32)
    q = logits(os.path.join(dst, CG.GGUF_FILE))
    f = logits(_f32_twin(src, str(tmp_path / "f32")))
    bad = logits(_f32_twin(src, str(tmp_path / "bad"), break_qk=True))
    scale = float(np.abs(f).max())
    assert float(np.abs(q - f).max()) < 0.1 * scale
    assert float(np.abs(bad - f).max()) > 0.3 * scale
    assert (q.argmax(-1) == f.argmax(-1)).all()


def test_bad_config_value_is_refused(models, tmp_path):
    src = str(tmp_path / "bad")
    shutil.copytree(models("llama"), src)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    cfg["num_attention_heads"] = "four"
    with open(os.path.join(src, "config.json"), "w") as f:
        json.dump(cfg, f)
    with pytest.raises(GritUsageError, match="num_attention_heads"):
        C.convert(src, str(tmp_path / "o"), "gguf")


def test_gguf_source_of_another_architecture_is_refused(tmp_path):
    path = str(tmp_path / "gpt2.gguf")
    w = gguf.GGUFWriter(path, "gpt2")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(GritUsageError) as e:
        C.convert(path, str(tmp_path / "o"), "grit")
    assert "'gpt2'" in str(e.value) and "llama" in str(e.value)


def test_gemma3_embedding_rows_beyond_the_tokenizer_are_dropped(tmp_path):
    """As llama.cpp's Gemma3Model does: token_embd keeps the tokenizer's
    vocabulary and added tokens; the rows beyond are out of vocabulary."""
    import hf_tiny
    import torch
    from safetensors.torch import save_file
    model, tok = hf_tiny.build("gemma3", layers=1)
    src = str(tmp_path / "g3")
    model.resize_token_embeddings(len(tok) + 13)
    model.config.save_pretrained(src)
    tok.save_pretrained(src)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              os.path.join(src, "model.safetensors"))
    with open(os.path.join(src, "tokenizer.json")) as f:
        tj = json.load(f)
    keep = len(tj["model"]["vocab"]) + len(tj["added_tokens"])
    assert keep < len(tok) + 13
    C.convert(src, str(tmp_path / "o"), "gguf")
    r = gguf.GGUFReader(str(tmp_path / "o" / CG.GGUF_FILE))
    emb = next(t for t in r.tensors if t.name == "token_embd.weight")
    raw = _raw_safetensors(os.path.join(src, "model.safetensors"))["model.embed_tokens.weight"]
    assert list(emb.shape)[::-1] == [keep, 128]
    assert emb.data.tobytes() == raw[2][:keep * 128 * 2]
    assert C.verify(src, str(tmp_path / "o")).ok
    del torch


@pytest.mark.parametrize("fam", ("gemma3", "mistral"))
def test_sentencepiece_tokenizer(models, fam, tmp_path):
    """A tokenizer.model beside the checkpoint is read with sentencepiece
    (llama.cpp's converter prefers it to tokenizer.json): its pieces, scores
    and types, padded to the config's vocabulary; and where GRIT_LLAMA_CPP
    names llama.cpp, its converter writes the same tokenizer entries."""
    spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")
    import hf_tiny
    src = str(tmp_path / "sp")
    shutil.copytree(models(fam), src)
    n = hf_tiny.sentencepiece_model(src)
    C.convert(src, str(tmp_path / "o"), "gguf")
    ours = str(tmp_path / "o" / CG.GGUF_FILE)
    kv = {k: f.contents() for k, f in gguf.GGUFReader(ours).fields.items()}
    sp = spm.SentencePieceProcessor(model_file=os.path.join(src, "tokenizer.model"))
    assert kv["tokenizer.ggml.model"] == "llama"
    toks = kv["tokenizer.ggml.tokens"]
    assert len(toks) == 300 and toks[n:] == [f"[PAD{i}]" for i in range(n, 300)]
    assert toks[3:n] == [sp.IdToPiece(i) for i in range(3, n)]
    assert kv["tokenizer.ggml.scores"][5] == pytest.approx(sp.GetScore(5))
    if fam == "gemma3":
        assert kv["tokenizer.ggml.add_space_prefix"] is False
    d = os.environ.get("GRIT_LLAMA_CPP", "")
    if not d or not os.path.isfile(os.path.join(d, "convert_hf_to_gguf.py")):
        return
    ref = str(tmp_path / "ref.gguf")
    p = subprocess.run([sys.executable, os.path.join(HERE, "llama_cpp_convert.py"), d, src, ref,
                        "llama-bpe"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    _same_tensors(ref, ours)
    a = gguf.GGUFReader(ref)
    for k, f in a.fields.items():
        if k.startswith("tokenizer."):
            assert f.contents() == kv[k], k


@pytest.mark.parametrize("grade, shape", [
    ("grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)", (64, 128)),
    ("GRADE_MXFP4", (96, 64)),
    ("grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)", (32, 96)),
    ("GRADE_NVF4", (8, 48)),
    ("grit1(e=e2m1,k0=16,s0=e4m3,k1=2,s1=binary32,esr=ratiomaxabs)", (16, 64)),
    ("grit1(e=e2m1,k0=16,s0=e4m3,k1=2,s1=binary32,esr=ratiomaxabs)", (16, 48)),
])
def test_row_move_fast_path_equals_the_laws(grade, shape):
    """The byte-row move of q/k rows gives the array grit's slicing and
    concatenation laws give, row by row; where a plane is not on the row grid
    it declines (and the laws refuse such a move too)."""
    from grit.array import canonical, concat
    g = getattr(grit, grade) if grade.startswith("GRADE_") else grit.register_grade(grade)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    a = canonical(grit.encode(x, g))
    rows = CG.qk_rows(shape[0], 2)
    fast = CG._rows_moved(a, rows)
    if shape == (16, 48):            # level-1 groups of 2 straddle rows of 3 groups
        assert fast is None
        with pytest.raises(grit.GritLayoutError):
            CG._permuted(a, rows)
        return
    slow = concat([a[int(r):int(r) + 1] for r in rows], axis=0)
    assert fast.descriptor == slow.descriptor and fast.shape == slow.shape
    assert [bytes(p) for p in fast.planes] == [bytes(p) for p in slow.planes]
    y = np.asarray(grit.decode(fast), np.float32)
    assert np.array_equal(y.view(np.uint32),
                          np.asarray(grit.decode(a), np.float32)[rows].view(np.uint32))


def test_llama_cpp_written_gguf_to_compressed_tensors(converted, llama_cpp_refs, tmp_path):
    """A GGUF llama.cpp's converter wrote (no grit records in it) converts
    back: codes and block scales are the source's bytes; the divisor is
    f32(1/s1) of llama.cpp's companion, the source's within one ulp; the
    BF16 tensors are BF16 again, the norms llama.cpp widened stay F32."""
    src = converted("llama")[0]
    out = str(tmp_path / "ct")
    rep = C.convert(llama_cpp_refs["llama"], out, "compressed-tensors")
    assert rep.counts == {"bit-exact": 14}
    a = _raw_safetensors(os.path.join(src, "model.safetensors"))
    b = _raw_safetensors(os.path.join(out, "model.safetensors"))
    assert set(a) == set(b)
    for k in a:
        if k.endswith("_global_scale"):
            x, y = (np.frombuffer(v[2], np.float32) for v in (a[k], b[k]))
            assert _ulps(x, y) <= 1, k
        elif k.endswith("norm.weight"):
            assert b[k][0] == "F32"
            w = np.frombuffer(a[k][2], ml_dtypes.bfloat16).astype(np.float32)
            assert b[k][2] == w.tobytes(), k
        else:
            assert a[k] == b[k], k
    assert C.verify(llama_cpp_refs["llama"], out).ok


#: strings the tiny tokenizers split into many tokens (words of the corpus,
#: unseen ones, digits, spaces, newlines, the special tokens' text)
_TEXTS = ["hello world, hello grit", "The quick brown FOX!  123456 <s> x</s>",
          "llama.cpp loads GGUF files\n\n  ok\tdone", "émigré naïve 数字 0123456789"]


def _same_tokenizer(src: str, out: str) -> None:
    """The tokenizer transformers loads from ``out`` encodes every text of
    _TEXTS to the ids the source's own tokenizer gives (and decodes them
    back alike)."""
    from transformers import AutoTokenizer
    ref, got = AutoTokenizer.from_pretrained(src), AutoTokenizer.from_pretrained(out)
    for t in _TEXTS:
        ids = ref(t, add_special_tokens=False)["input_ids"]
        assert got(t, add_special_tokens=False)["input_ids"] == ids, t
        assert got.decode(ids) == ref.decode(ids), t


@pytest.mark.parametrize("fam", FAMILIES)
def test_gguf_source_gives_back_the_tokenizer_and_config(converted, fam, tmp_path):
    """A GGUF SRC writes the tokenizer files transformers' GGUF reader makes
    of its tokenizer.ggml.* entries, and a config.json transformers loads
    as the source's architecture (Mistral's as Llama) and sizes."""
    from transformers import AutoConfig
    src, dst, _ = converted(fam)
    out = str(tmp_path / "ct")
    rep = C.convert(os.path.join(dst, CG.GGUF_FILE), out, "compressed-tensors")
    assert "tokenizer.json" in rep.proof["tokenizer"]["files"]
    _same_tokenizer(src, out)
    a, b = AutoConfig.from_pretrained(src), AutoConfig.from_pretrained(out)
    # (llama.cpp writes Mistral as its llama architecture: it comes back as Llama)
    assert type(b).__name__ == ("LlamaConfig" if fam == "mistral" else type(a).__name__)
    for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings",
              "rms_norm_eps", "bos_token_id", "eos_token_id"):
        assert getattr(b, k) == pytest.approx(getattr(a, k)), k


def test_llama_cpp_written_gguf_gives_back_the_tokenizer(converted, llama_cpp_refs, tmp_path):
    """The same from the GGUF llama.cpp's converter wrote."""
    for fam in ("llama", "qwen2"):
        out = str(tmp_path / fam)
        C.convert(llama_cpp_refs[fam], out, "modelopt")
        _same_tokenizer(converted(fam)[0], out)


#: a YaRN rope scaling as Hugging Face configs write it
_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
         "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": 1.25,
         "extrapolation_factor": 1.0}


def test_yarn_rope_scaling(models, tmp_path):
    """A YaRN rope scaling (Gemma 3's on its full-attention layers) is the
    rope.scaling.* entries of the config's values; and where GRIT_LLAMA_CPP
    names llama.cpp, every KV entry and tensor is what its converter writes."""
    srcs = {}
    for fam in ("llama", "qwen3", "gemma3"):
        src = str(tmp_path / f"src-{fam}")
        shutil.copytree(models(fam), src)
        with open(os.path.join(src, "config.json")) as f:
            cfg = json.load(f)
        rp = cfg["rope_parameters"]
        (rp["full_attention"] if "full_attention" in rp else rp).update(_YARN)
        with open(os.path.join(src, "config.json"), "w") as f:
            json.dump(cfg, f)
        srcs[fam] = src
        C.convert(src, str(tmp_path / fam), "gguf")
        kv = {k: f.contents() for k, f in
              gguf.GGUFReader(str(tmp_path / fam / CG.GGUF_FILE)).fields.items()}
        a = EXPECT[fam][0]
        assert kv[f"{a}.rope.scaling.type"] == "yarn"
        assert kv[f"{a}.rope.scaling.original_context_length"] == 64
        for key, hf in (("factor", "factor"), ("yarn_ext_factor", "extrapolation_factor"),
                        ("yarn_attn_factor", "attention_factor"),
                        ("yarn_beta_fast", "beta_fast"), ("yarn_beta_slow", "beta_slow")):
            assert kv[f"{a}.rope.scaling.{key}"] == _YARN[hf], key
    with open(os.path.join(srcs["llama"], "config.json")) as f:
        cfg = json.load(f)
    del cfg["rope_parameters"]["original_max_position_embeddings"]
    with open(os.path.join(srcs["llama"], "config.json"), "w") as f:
        json.dump(cfg, f)
    with pytest.raises(GritUsageError, match="original_max_position_embeddings"):
        C.convert(srcs["llama"], str(tmp_path / "no"), "gguf")
    del srcs["llama"]
    d = os.environ.get("GRIT_LLAMA_CPP", "")
    if not d or not os.path.isfile(os.path.join(d, "convert_hf_to_gguf.py")):
        return
    args = [x for fam, src in srcs.items()
            for x in (src, str(tmp_path / f"{fam}.ref.gguf"), EXPECT[fam][2])]
    p = subprocess.run([sys.executable, os.path.join(HERE, "llama_cpp_convert.py"), d, *args],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    for fam in srcs:
        ref, ours = str(tmp_path / f"{fam}.ref.gguf"), str(tmp_path / fam / CG.GGUF_FILE)
        _same_tensors(ref, ours)
        b = gguf.GGUFReader(ours).fields
        for k, f in gguf.GGUFReader(ref).fields.items():
            if k not in ("general.name", "general.size_label", "GGUF.kv_count"):
                assert k in b and b[k].contents() == f.contents(), (fam, k)


@pytest.mark.parametrize("fam", ["llama", "qwen3"])
def test_proof_digests_are_the_source_and_written_planes(converted, fam):
    """Every weight's source digest is §6.5's digest of the source weight's
    planes (grit.load, one at a time), and its target digest that of the
    planes the written GGUF reads back as — whether its blocks moved as they
    are (digested a few weights at a time) or its rows moved."""
    from grit.fingerprint import digest
    src, dst, rep = converted(fam)
    source = {}
    for n in sorted(os.listdir(src)):
        if n.endswith(".safetensors"):
            source.update(grit.load(os.path.join(src, n)))
    back = grit.load(os.path.join(dst, CG.GGUF_FILE))
    moved = {w["rows"] is not None for w in rep.proof["weights"]}
    assert moved == ({True, False} if fam == "llama" else {False})   # llama's q/k rows move
    for w in rep.proof["weights"]:
        assert w["source"]["digest"] == digest(source[w["name"]].planes).hex(), w["name"]
        assert w["target"]["digest"] == digest(back[w["gguf_name"]].planes).hex(), w["name"]
