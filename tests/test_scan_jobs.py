"""grit scan --jobs N: files read and checked on N threads, the report the
sequential run's byte for byte — on a tree of many checkpoints with findings
of every kind (shards and their index, config.json contracts, grade drift,
cross-file disagreement, deep digests, unreadable files) and on remote files
served with latency by a real server on loopback.  The expected report is
the jobs=1 run's (the existing sequential path); no timing is asserted."""
from __future__ import annotations

import io
import json
import os
import pathlib
import runpy

import numpy as np
import pytest
from click.testing import CliRunner

import grit
from grit.cli import main
from grit.errors import GritUsageError
from grit.scan import output as scan_report
from grit.scan import scan

from http_server import Server
from test_scan_config import ct_config, fp8, group, model, args as ct_args, write as write_ct
from test_shards import write_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
make_examples = runpy.run_path(os.path.join(ROOT, "scripts", "make_examples.py"))["main"]


def write_set(d) -> list[str]:
    """One set of checkpoints under ``d``, each an entry of its own (a file, a
    folder, a manifest or a missing path): the shipped examples (clean,
    sharded with a short shard, wrong group size, half-converted drift,
    escape hatch, two revisions that disagree, a ggml GGUF, corrupted bytes),
    a sharded checkpoint whose index names a shard that is not there, a
    compressed-tensors config contradicted by its tensors, unreadable and
    truncated files, an empty folder and a missing path."""
    d = str(d)
    os.makedirs(d, exist_ok=True)
    make_examples(d)
    entries = [os.path.join(d, n) for n in (
        "clean", "sharded", "wrong-group-size.safetensors", "half-converted.safetensors",
        "escape-hatch.safetensors", "revisions.txt", "llama-ggml.gguf",
        "corrupted-bytes.safetensors")]
    sh = os.path.join(d, "shards-missing")
    write_checkpoint(sh)
    os.remove(os.path.join(sh, "model-00002-of-00003.safetensors"))
    entries.append(sh)
    cfg = ct_config({"group_0": group(["Linear"], ct_args())})
    entries.append(write_ct(pathlib.Path(d), model(layers=1, quant=fp8), cfg, shards=2))
    rng = np.random.default_rng(len(d))
    garbage = os.path.join(d, "garbage.safetensors")
    with open(garbage, "wb") as f:
        f.write(rng.integers(0, 256, 300, dtype=np.uint8).tobytes())
    entries.append(garbage)
    gguf = os.path.join(d, "llama-ggml.gguf")
    cut = os.path.join(d, "cut.gguf")
    with open(gguf, "rb") as f, open(cut, "wb") as g:
        g.write(f.read()[:700])
    entries.append(cut)
    empty = os.path.join(d, "empty")
    os.makedirs(empty, exist_ok=True)
    entries.append(empty)
    entries.append(os.path.join(d, "not-there.safetensors"))
    return entries


def report_json(rep) -> str:
    out = io.StringIO()
    scan_report.write_json(rep, "graded", file=out)
    return out.getvalue()


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("GRIT_CACHE_DIR", str(d))
    return d


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    entries = []
    for i in range(4):
        entries += write_set(root / f"set{i}")
    return str(root), entries


def test_the_tree_has_findings_of_every_kind(tree):
    root, _ = tree
    rep = scan([root], deep=True)
    codes = {f.code for f in rep.findings}
    # shards + index, config contracts, drift, cross-file, escape hatch, deep, unreadable
    for c in ("S101", "S151", "S156", "S201", "S301", "S310", "S401", "S501", "S602",
              "S805"):
        assert c in codes, sorted(codes)
    assert len(rep.files) >= 50


@pytest.mark.parametrize("deep", [False, True])
@pytest.mark.parametrize("jobs", [4, 8])
def test_jobs_report_equals_the_sequential_report(tree, deep, jobs):
    root, entries = tree
    one = report_json(scan([root], deep=deep))
    assert report_json(scan([root], deep=deep, jobs=jobs)) == one
    # the entries one by one as PATHs (a manifest, folders, missing paths among them)
    listed = report_json(scan(entries, deep=deep))
    assert report_json(scan(entries, deep=deep, jobs=jobs)) == listed


def test_progress_is_called_in_input_order(tree):
    root, _ = tree
    seen: list[tuple[int, int, str]] = []
    scan([root], progress=lambda i, n, p: seen.append((i, n, p)), jobs=4)
    n = seen[0][1]
    assert [i for i, _, _ in seen] == list(range(n + 1))
    ref: list[tuple[int, int, str]] = []
    scan([root], progress=lambda i, n, p: ref.append((i, n, p)))
    assert seen == ref


@pytest.mark.parametrize("jobs", [0, -1, True, 1.5])
def test_jobs_must_be_a_positive_integer(jobs):
    with pytest.raises(GritUsageError):
        scan(["x"], jobs=jobs)


@pytest.mark.parametrize("fmt", ["json", "jsonl", "sarif", "text"])
def test_cli_jobs_gives_the_same_output(tree, fmt):
    root, _ = tree
    r1 = CliRunner().invoke(main, ["scan", "--format", fmt, "--deep", root])
    r8 = CliRunner().invoke(main, ["scan", "--format", fmt, "--deep", "--jobs", "8", root])
    assert r1.exit_code == r8.exit_code == 1
    assert r1.output == r8.output


@pytest.mark.parametrize("jobs", [1, 3])
def test_at_most_two_jobs_files_are_ahead(tree, monkeypatch, jobs):
    import grit.scan as gs  # noqa: PLC0415
    root, _ = tree
    started = []
    real = gs._check_file

    def counted(p, *a):
        started.append(p)
        return real(p, *a)

    ahead: list[int] = []
    monkeypatch.setattr(gs, "_check_file", counted)
    scan([root], jobs=jobs, progress=lambda i, n, p: ahead.append(len(started) - i))
    assert max(ahead) <= 2 * jobs       # files begun before file i is taken in: i + 2·jobs
    assert len(started) == len(set(started)) == len(ahead) - 1



def test_cli_jobs_must_be_positive(tree):
    bad = CliRunner().invoke(main, ["scan", "--jobs", "0", tree[0]])
    assert bad.exit_code == 2 and "--jobs" in bad.output


# ---------------------------------------------------------------------------
# remote files, with latency


@pytest.fixture
def served(tmp_path):
    s = Server()
    rng = np.random.default_rng(3)
    names = []
    for i in range(12):
        x = rng.standard_normal((8, 256)).astype(np.float32)
        a = grit.encode(x, grit.GRADE_MXFP4)
        p = tmp_path / f"f{i}.safetensors"
        meta = {}
        if i % 3 == 1:          # a stale digest: S501 under --deep
            meta["grit.digest.w"] = grit.base32_encode(grit.encode(x * 2, grit.GRADE_MXFP4)
                                                       .digest)
        grit.save(str(p), {"w": a}, meta)
        data = p.read_bytes()
        if i % 4 == 2:          # cut short: a size mismatch
            data = data[:-300]
        if i == 7:              # not safetensors at all
            data = b"\x00" * 64
        s.files[f"/f{i}.safetensors"] = data
        s.faults[f"/f{i}.safetensors"] = {"latency": 0.02}
        names.append(f"/f{i}.safetensors")
    s.files["/gone.safetensors"] = b""
    s.faults["/gone.safetensors"] = {"status": 404}
    names.append("/gone.safetensors")
    yield s, [s.url(n) for n in names]
    s.close()


@pytest.mark.parametrize("deep", [False, True])
def test_remote_jobs_report_equals_the_sequential_report(served, deep, tmp_path, monkeypatch):
    s, urls = served
    one = report_json(scan(urls, deep=deep, cache=False))
    codes = {f["code"] for f in json.loads(one)["findings"]}
    assert {"S101", "S805"} <= codes and (not deep or "S501" in codes)
    assert report_json(scan(urls, deep=deep, cache=False, jobs=4)) == one
    # through the header cache: filled by a concurrent run, read by the next
    monkeypatch.setenv("GRIT_CACHE_DIR", str(tmp_path / "fresh"))
    assert report_json(scan(urls, deep=deep, jobs=8)) == one
    assert report_json(scan(urls, deep=deep, jobs=8)) == one
