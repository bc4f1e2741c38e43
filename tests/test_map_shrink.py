"""A file truncated after grit.load mapped it: reading a loaded tensor,
decode, digest and save raise GritFileError instead of killing the process
with SIGBUS (grit._files.check_mapped).  Each case runs in a subprocess, so
a SIGBUS fails the test rather than ending pytest."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent("""
    import os, sys, numpy as np, grit
    p, kind, op = sys.argv[1], sys.argv[2], sys.argv[3]
    x = np.random.default_rng(0).standard_normal((256, 4096)).astype(np.float32)
    if kind.endswith("plain"):
        grit.save(p, {"a": x})
    elif kind == "gguf-q8":
        import gguf
        w = gguf.GGUFWriter(p, "llama")
        w.add_tensor("a", gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0),
                     raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file()
        w.close()
    else:
        grit.save(p, {"a": grit.encode(x, "GRADE_MXFP4")})
    t = grit.load(p)
    held = dict.__getitem__(t, "a")        # a value taken before the file changed
    os.truncate(p, 0)
    try:
        if op == "get":
            v = t["a"]
            print(np.asarray(v).sum() if isinstance(v, np.ndarray) else grit.decode(v).sum())
        elif op == "values":
            list(t.values())
        elif op == "decode":
            grit.decode(held)
        elif op == "digest":
            held.digest
        elif op == "save":
            grit.save(p + ".out" + os.path.splitext(p)[1], {"a": held})
        print("NO ERROR")
    except grit.io.GritFileError as e:
        print("GritFileError", e)
""")

CASES = [(k, op) for k in ("st-plain", "st-grit", "gguf-plain", "gguf-grit", "gguf-q8")
         for op in ("get", "values", "decode", "digest", "save")
         if not (k.endswith("plain") and op in ("decode", "digest"))]


@pytest.mark.parametrize("kind,op", CASES)
def test_a_truncated_mapped_file_is_an_error_not_sigbus(tmp_path, kind, op):
    if kind == "gguf-q8":
        pytest.importorskip("gguf")
    ext = ".gguf" if kind.startswith("gguf") else ".safetensors"
    env = {**os.environ, "PYTHONPATH": ROOT}
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / f"m{ext}"), kind, op],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, f"exit {r.returncode} (SIGBUS is -7)\n{r.stderr[-2000:]}"
    assert "GritFileError" in r.stdout and "changed while it was mapped" in r.stdout, \
        r.stdout + r.stderr[-2000:]


def test_an_intact_file_reads_as_before(tmp_path):
    import numpy as np  # noqa: PLC0415

    import grit  # noqa: PLC0415
    x = np.arange(4096, dtype=np.float32).reshape(4, 1024)
    p = tmp_path / "m.safetensors"
    grit.save(p, {"a": grit.encode(x, "GRADE_MXFP4"), "b": x})
    t = grit.load(p)
    assert np.array_equal(t["b"], x) and t.get("zz") is None
    assert grit.decode(t["a"]).shape == x.shape and len(t["a"].digest) == 16
    with open(p, "ab") as f:                # a file that grows is still readable
        f.write(b"\0" * 64)
    assert np.array_equal(dict(t.items())["b"], x)
