"""A conversion carries bfloat16 and FP8 elements as their bits
(grit.dtypes.StDtype.bits_dtype): it never imports ml_dtypes, which grit
does not require, and gives the same files where ml_dtypes cannot be
imported at all; the public functions still hand out ml_dtypes' types."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from _support import raw_tensors
from grit.dtypes import ST_DTYPES, as_float32, bits_dtype, st_dtype_of, with_ml_dtypes

ml_dtypes = pytest.importorskip("ml_dtypes", reason="the comparisons here are with ml_dtypes")

HERE = os.path.dirname(os.path.abspath(__file__))

#: a child process converting each source in argv to each target and
#: verifying it; "block" first: ml_dtypes cannot be imported there
_CHILD = r"""
import hashlib, json, os, sys
if sys.argv[1] == "block":
    sys.modules["ml_dtypes"] = None          # import ml_dtypes raises ImportError
from grit.convert import convert, verify
out = {}
for src, to, dst in json.loads(sys.argv[2]):
    convert(src, dst, to)
    rep = verify(src, dst)
    assert rep.ok, rep.problems
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(dst)):
        for n in sorted(files):
            with open(os.path.join(root, n), "rb") as f:
                h.update(n.encode() + f.read())
    out[dst.rsplit(os.sep, 2)[-2] + "/" + to] = h.hexdigest()
print(json.dumps({"digests": out, "ml_dtypes": "ml_dtypes" in sys.modules
                  and sys.modules["ml_dtypes"] is not None}))
"""


def _run(mode: str, jobs: list[tuple[str, str, str]]) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _CHILD, mode, json.dumps(jobs)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sources(tmp_path_factory, ct):
    """An NVFP4 Llama (BF16 embeddings and norms, FP8 block scales) written
    by compressed-tensors, and an FP8 checkpoint (FP8 weights, BF16 plain
    tensors)."""
    pytest.importorskip("transformers", reason="transformers is not installed")
    import hf_tiny
    root = tmp_path_factory.mktemp("bits")
    llama = hf_tiny.write_model(str(root / "llama"), "llama")
    fp8 = str(root / "fp8")
    ct.write_checkpoint(fp8, {"g": ("float-quantized", ["Linear"])})
    return root, llama, fp8


def _jobs(tag: str, root, llama: str, fp8: str) -> list[tuple[str, str, str]]:
    out = root / tag
    return [(llama, "gguf", str(out / "gguf" / "o")),
            (llama, "grit", str(out / "grit" / "o")),
            (llama, "modelopt", str(out / "modelopt" / "o")),
            (str(out / "gguf" / "o"), "compressed-tensors", str(out / "from-gguf" / "o")),
            (fp8, "grit", str(out / "fp8" / "o")),
            (str(out / "fp8" / "o"), "compressed-tensors", str(out / "fp8-back" / "o"))]


def test_conversions_import_no_ml_dtypes_and_need_none(sources):
    root, llama, fp8 = sources
    plain = _run("plain", _jobs("plain", root, llama, fp8))
    blocked = _run("block", _jobs("block", root, llama, fp8))
    assert plain["ml_dtypes"] is False          # installed, and never imported
    assert len(plain["digests"]) == 6
    assert blocked["digests"] == plain["digests"]
    # the FP8 checkpoint's way back is the source's bytes
    a = raw_tensors(os.path.join(fp8, "model.safetensors"))
    b = raw_tensors(root / "plain" / "fp8-back" / "o" / "model.safetensors")
    assert a.keys() == b.keys() and [k for k in a if a[k] != b[k]] == []


def test_bits_dtypes_name_their_safetensors_types():
    for name, ml in (("BF16", "bfloat16"), ("F8_E4M3", "float8_e4m3fn"),
                     ("F8_E5M2", "float8_e5m2")):
        dt = ST_DTYPES[name].bits_dtype()
        assert dt == bits_dtype(ml) and dt.itemsize == ST_DTYPES[name].itemsize
        assert dt.names == (ml,) and st_dtype_of(dt) == name
        assert st_dtype_of(np.dtype(getattr(ml_dtypes, ml))) == name
    assert ST_DTYPES["F32"].bits_dtype() == np.dtype("<f4")
    assert ST_DTYPES["F8_E8M0"].bits_dtype() is None
    with pytest.raises(TypeError):               # no arithmetic on bits by mistake
        np.ones(3, bits_dtype("bfloat16")) + 1   # type: ignore[operator]


def test_bf16_bits_widen_as_ml_dtypes_does_every_pattern():
    u = np.arange(1 << 16, dtype="<u2")
    got = as_float32(u.view(bits_dtype("bfloat16")))
    want = u.view(ml_dtypes.bfloat16).astype(np.float32)
    assert got.dtype == np.float32
    # every pattern, NaNs and signed zeros included: the same binary32 bits
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.array_equal(as_float32(np.arange(3, dtype="<f2")), np.arange(3, dtype=np.float32))


@pytest.mark.parametrize("ml", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_bits_widen_as_ml_dtypes_does_every_code(ml):
    u = np.arange(256, dtype=np.uint8)
    got = as_float32(u.view(bits_dtype(ml)))
    want = u.view(getattr(ml_dtypes, ml)).astype(np.float32)
    nan = np.isnan(want)
    assert nan.any() and np.array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
    assert set(got[nan].view(np.uint32).tolist()) == {0x7FC00000}     # canonical


def test_bf16_narrowing_is_exact_or_declined():
    from grit.convert_gguf import _narrowed
    u = np.arange(1 << 16, dtype="<u2")
    wide = u.view(ml_dtypes.bfloat16).astype(np.float32)
    n = _narrowed(wide, "BF16")
    assert st_dtype_of(n.dtype) == "BF16"
    np.testing.assert_array_equal(n.view("<u2"), u)          # every pattern back
    off = wide.copy()
    off.view(np.uint32)[7] |= 1                               # one value bfloat16 cannot hold
    assert _narrowed(off, "BF16") is off


def test_public_functions_hand_out_ml_dtypes_types(ct, sources, tmp_path):
    import grit
    from grit import conventions
    x = np.arange(4, dtype="<u2").view(bits_dtype("bfloat16"))
    y = with_ml_dtypes(x)
    assert y.dtype == ml_dtypes.bfloat16 and y.tobytes() == x.tobytes()
    assert with_ml_dtypes(np.arange(3)) is not None
    src = tmp_path / "src"
    ct.write_checkpoint(str(src), {"g": ("nvfp4-pack-quantized", ["Linear"])})
    loaded = grit.load(str(src / "model.safetensors"))
    em = conventions.emit("compressed-tensors", dict(loaded))
    scales = [v for k, v in em.tensors.items() if k.endswith(".weight_scale")]
    assert scales and all(v.dtype == ml_dtypes.float8_e4m3fn for v in scales)
    llama = grit.load(os.path.join(sources[1], "model.safetensors"))
    assert llama["model.norm.weight"].dtype == ml_dtypes.bfloat16
