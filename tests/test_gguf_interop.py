"""GGUF files grit writes, read by the other public implementation of the
spec, grit-datatype 1.1.0 (its ``python -m grit.scan --json``).

grit-datatype also imports as ``grit``, so it lives in a folder of its own
(``pip install --no-deps --target DIR grit_datatype-1.1.0-py3-none-any.whl``;
.ci/run does this) named by the environment variable GRIT_DATATYPE_SITE, and
runs in a subprocess whose working directory holds no ``grit``.  Without it
the tests skip.

What interoperates and what does not is docs/file-format.md, "GGUF and
grit-datatype"; these tests keep that text true.  grit-datatype 1.1.0 writes
no GGUF (its GGUF support is the scanner), so there is no file of its to
read back."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import grit
from grit.io.gguf import GGML_GRADES

ml_dtypes = pytest.importorskip("ml_dtypes")
SITE = os.environ.get("GRIT_DATATYPE_SITE", "")
pytestmark = pytest.mark.skipif(
    not os.path.isfile(os.path.join(SITE, "grit", "scan.py")),
    reason="grit-datatype is not installed: set GRIT_DATATYPE_SITE to a pip --target folder "
           "holding grit-datatype 1.1.0 (.ci/run does)")
RNG = np.random.default_rng(20261203)


def peer(tmp_path, *args) -> subprocess.CompletedProcess:
    """grit-datatype's ``python -m grit.<args>``, run where only it is ``grit``."""
    run = tmp_path / "peer-cwd"
    run.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = SITE
    return subprocess.run([sys.executable, *args], cwd=run, env=env, capture_output=True,
                          text=True, timeout=120)


def peer_scan(tmp_path, path) -> tuple[int, dict]:
    r = peer(tmp_path, "-m", "grit.scan", "--json", str(path))
    assert r.stdout, r.stderr
    return r.returncode, json.loads(r.stdout)


def test_the_peer_is_grit_datatype_1_1_0(tmp_path):
    r = peer(tmp_path, "-c", "import grit; print(grit.__version__, grit.__file__)")
    version, where = r.stdout.split()
    assert version == "1.1.0", r.stdout
    assert os.path.realpath(where).startswith(os.path.realpath(SITE)), r.stdout


def test_ggml_typed_tensors_grit_writes_are_read_by_grit_datatype(tmp_path):
    """Arrays written as ggml block types (relayout=True) and plain BF16/F32
    tensors: grit-datatype parses the file, finds no violation, sizes every
    tensor as grit wrote it, and infers for Q8_0, MXFP4 and Q4_K the very
    grade (id and canonical string) grit loads them as."""
    x = RNG.standard_normal((64, 512)).astype(np.float32)
    arrays = {
        "blk.0.q8.weight": grit.encode(x, GGML_GRADES["Q8_0"]),
        "blk.0.mx.weight": grit.encode(x, grit.GRADE_MXFP4),
        "blk.0.q4k.weight": grit.encode(x, grit.GRADE_Q4KS),
        "blk.0.q5k.weight": grit.encode(x, GGML_GRADES["Q5_K"]),
        "blk.0.nv.weight": grit.encode(x, grit.GRADE_NVF4),
        "blk.0.bf.weight": x.astype(ml_dtypes.bfloat16),
        "blk.0.f.weight": x,
    }
    p = tmp_path / "native.gguf"
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # every array as a ggml type
        grit.save(str(p), arrays, relayout=True)
    ours = grit.load(str(p))
    code, doc = peer_scan(tmp_path, p)
    assert doc["files_parsed"] == 1 and not doc["unparseable"]
    assert not [f for f in doc["findings"] if f["severity"] != "warning"], doc["findings"]
    assert code in (0, 3)
    theirs = {t["name"]: t for t in doc["tensors"]}
    assert set(theirs) == set(ours)
    for name in ("blk.0.q8.weight", "blk.0.mx.weight", "blk.0.q4k.weight"):
        t, a = theirs[name], ours[name]
        assert int(t["grade_id"], 16) == a.grade.id, name
        assert t["grade_string"] == a.grade.canonical, name
        assert t["nbytes"] == a.nbytes, name
    assert theirs["blk.0.bf.weight"]["dtype"] == "BF16"
    assert theirs["blk.0.bf.weight"]["nbytes"] == x.size * 2
    # the documented gaps: Q5_K is labelled, not expressed; NVFP4 (ggml type 40)
    # is not in grit-datatype 1.1.0's table
    assert theirs["blk.0.q5k.weight"]["grade_id"] is None
    kinds = {(f["kind"], f["where"].split("::")[-1]) for f in doc["findings"]}
    assert ("inferred_inexpressible", "blk.0.q5k.weight") in kinds
    assert ("unknown_ggml_type", "blk.0.nv.weight") in kinds


def test_a_grit_payload_tensor_is_the_documented_gap(tmp_path):
    """A GRIT payload tensor (a 1-D I8 blob, its logical shape in
    grit.shape.<name>): grit-datatype reads the descriptor — the same 64
    bytes — but takes the tensor's shape from its GGUF dims, the payload's
    length, and so cannot size it.  This is the gap docs/file-format.md
    names; when it closes, this test says so."""
    x = RNG.standard_normal((32, 64)).astype(np.float32)
    a = grit.encode(x, grit.GRADE_I8S24)            # no ggml type carries it
    p = tmp_path / "payload.gguf"
    with pytest.warns(UserWarning, match="'w'"):
        grit.save(str(p), {"w": a})
    code, doc = peer_scan(tmp_path, p)
    (t,) = doc["tensors"]
    assert t["desc_hex"] == a.descriptor.hex()
    assert t["shape"] == [a.nbytes] and list(a.shape) != [a.nbytes]
    (f,) = [f for f in doc["findings"] if f["severity"] == "violation"]
    assert f["kind"] == "size" and "rank 1" in f["message"]
    assert code == 1
