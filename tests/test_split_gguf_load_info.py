"""``grit.load`` and ``grit info`` of a GGUF model in llama.cpp's
gguf-split shards: any shard, or the folder, is the model.

The shards are gguf-py's (``GGUFWriter(split_max_tensors=8)``, as
tests/test_convert_gguf_split.py writes them) of a model gguf-py also
writes unsplit; what the shards give is compared with what the unsplit
file gives, and each tensor with gguf-py's own reading of the shard that
holds it."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf-py is not installed")

import grit  # noqa: E402
from grit.errors import GritUsageError  # noqa: E402
from grit.info import InfoInputError  # noqa: E402
from test_convert_gguf_split import _llama_q8, _names, _tensors_of, shard, split  # noqa: E402


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> tuple[str, list[str]]:
    root = tmp_path_factory.mktemp("split")
    src = str(root / "one.gguf")
    _llama_q8(src)
    return src, split(src, root / "sh", 8)


def _copy(paths: list[str], d) -> list[str]:
    shutil.copytree(os.path.dirname(paths[0]), d)
    return [os.path.join(d, os.path.basename(p)) for p in paths]


@pytest.mark.parametrize("which", ("first", "last", "folder"))
def test_load_of_a_shard_or_the_folder_is_the_model(model, which):
    src, paths = model
    arg = {"first": paths[0], "last": paths[2], "folder": os.path.dirname(paths[0])}[which]
    got, want = grit.load(arg), grit.load(src)
    assert list(got) == list(want)
    assert len(got) == sum(len(n) for n in _names(paths))
    assert got.ggml_types == want.ggml_types
    assert sorted(got.metadata) == sorted(want.metadata)       # split.* not among them
    assert not any(k.startswith("split.") for k in got.metadata)
    # every tensor: its bytes as gguf-py reads them in the shard that holds it
    for p in paths:
        for t in gguf.GGUFReader(p).tensors:
            v = got[t.name]
            if isinstance(v, grit.GritArray):
                assert np.array_equal(np.asarray(v.planes[0]).view(np.uint8).reshape(-1),
                                      np.asarray(t.data).view(np.uint8).reshape(-1)), t.name
                assert np.array_equal(grit.decode(v), grit.decode(want[t.name]))
            else:
                assert np.array_equal(np.asarray(v), np.asarray(t.data)), t.name


def test_load_of_a_file_that_is_no_shard_is_unchanged(model):
    src, _ = model
    assert "split.count" not in gguf.GGUFReader(src).fields
    assert len(grit.load(src)) == len(gguf.GGUFReader(src).tensors)


def test_load_of_a_broken_split_is_a_typed_error(model, tmp_path):
    _, paths = model
    miss = _copy(paths, tmp_path / "miss")
    os.unlink(miss[1])
    with pytest.raises(GritUsageError, match=r"missing \(1 of 3\): model-00002-of-00003"):
        grit.load(miss[0])
    with pytest.raises(GritUsageError, match="missing"):
        grit.load(str(tmp_path / "miss"))
    dup = _copy(paths, tmp_path / "dup")
    total = sum(len(n) for n in _names(paths)) + 1
    extra = _tensors_of(paths[0])[1]
    for i, p in enumerate(dup):
        tensors = _tensors_of(paths[i]) + ([extra] if i == 1 else [])
        os.unlink(p)
        shard(p, tensors, no=i, count=3, total=total, kv_from=paths[0] if i == 0 else None)
    with pytest.raises(GritUsageError, match=f"tensor {extra[0]!r} is also in the shard"):
        grit.load(dup[2])


def test_load_of_a_folder_without_gguf_files_says_what_it_reads(tmp_path):
    with pytest.raises(GritUsageError, match="a folder; grit.load reads a model file"):
        grit.load(str(tmp_path))


@pytest.mark.parametrize("which", ("first", "middle", "folder"))
def test_info_of_a_shard_describes_the_model(model, which):
    src, paths = model
    arg = {"first": paths[0], "middle": paths[1], "folder": os.path.dirname(paths[0])}[which]
    got, want = grit.info(arg), grit.info(src)
    assert [f.path for f in got.files] == paths
    assert [f.tensors for f in got.files] == [len(n) for n in _names(paths)]
    assert [(r.name, r.kind, r.ecosystem, r.grade, r.shape, r.bytes) for r in got.tensors] == \
        [(r.name, r.kind, r.ecosystem, r.grade, r.shape, r.bytes) for r in want.tensors]
    assert [r.file for r in got.tensors] == [p for p, n in zip(paths, _names(paths)) for _ in n]
    assert got.totals == want.totals
    (sp,) = got.splits
    assert (sp.path, sp.shards, sp.files, sp.tensors) == (paths[0], 3, tuple(paths),
                                                         len(want.tensors))
    assert got.to_dict()["splits"] == [{"path": paths[0], "shards": 3, "files": paths,
                                        "tensors": len(want.tensors)}]
    assert got.problems == ()
    text = grit.info.render(got)
    assert f"* {paths[0]}: split GGUF model, 3 shards (3 read), 20 tensor(s) in all" in text
    assert "tensors       20 in 3 file(s)" in text
    assert grit.info(src).splits == ()


def test_info_of_a_split_missing_a_shard_lists_nothing(model, tmp_path):
    _, paths = model
    miss = _copy(paths, tmp_path / "miss")
    os.unlink(miss[2])
    with pytest.raises(InfoInputError, match="model-00003-of-00003.gguf"):
        grit.info(miss[1])
    from click.testing import CliRunner
    from grit.cli import main
    r = CliRunner().invoke(main, ["info", miss[0]])
    assert r.exit_code == 4 and "missing (1 of 3)" in r.output and "Traceback" not in r.output


def test_info_of_a_split_whose_counts_disagree_lists_it_with_the_problem(model, tmp_path):
    _, paths = model
    bad = _copy(paths, tmp_path / "bad")
    total = sum(len(n) for n in _names(paths))
    os.unlink(bad[1])
    shard(bad[1], _tensors_of(paths[1]), no=1, count=3, total=total + 4)
    got = grit.info(bad[0])
    assert len(got.tensors) == total
    assert any(p.startswith(bad[1]) and f"split.tensors.count = {total + 4}" in p
               for p in got.problems)
