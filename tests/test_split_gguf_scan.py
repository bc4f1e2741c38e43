"""``grit scan`` of a GGUF model in llama.cpp's gguf-split shards
(grit.io.gguf_split, grit.scan.shards; docs/scan.md "Split GGUF models").

The shards are written by gguf-py's own writer, as
tests/test_convert_gguf_split.py writes them (``GGUFWriter(split_max_tensors
=8)``: three shards of a two-block Llama, 20 tensors), and broken by
writing one shard again by hand with gguf-py (``shard``) with one count
changed.  A folder of shards, or any one shard, is scanned as the model:
every shard present is read, each keeps its own per-tensor findings, and
what the shards say of each other is checked as ``grit convert`` checks it
before reading them — each refusal a finding with its own code (S160–S165),
never a traceback."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf-py is not installed")

from grit.scan import scan  # noqa: E402
from test_convert_gguf_split import (_llama_q8, _names, _tensors_of, nvfp4,  # noqa: E402,F401
                                     shard, split)

#: the tensors of _llama_q8's model, and the Q8_0 ones (S602 notes, per shard)
TENSORS = 20
SPLIT_CODES = {"S160", "S161", "S162", "S163", "S164", "S165"}


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("split")
    src = str(root / "one.gguf")
    _llama_q8(src)
    return split(src, root / "sh", 8)


def _copy(paths: list[str], d) -> list[str]:
    shutil.copytree(os.path.dirname(paths[0]), d)
    return [os.path.join(d, os.path.basename(p)) for p in paths]


def _rewrite(paths: list[str], i: int, **kw) -> None:
    """Shard ``i`` of ``paths`` written again by gguf-py with the split
    entries of ``kw`` (the rest as gguf-split writes them)."""
    total = sum(len(n) for n in _names(paths))
    tensors = kw.pop("tensors", None) or _tensors_of(paths[i])
    args = {"no": i, "count": len(paths), "total": total, **kw}
    data = paths[i] + ".tmp"
    os.replace(paths[i], data)
    shard(paths[i], tensors, kv_from=data if i == 0 else None, **args)
    os.unlink(data)


def _codes(rep) -> list[str]:
    return sorted(f.code for f in rep.findings if f.code in SPLIT_CODES)


def _one(rep, code: str):
    (f,) = [f for f in rep.findings if f.code == code]
    return f


@pytest.mark.parametrize("which", ("folder", "first", "middle", "last"))
def test_a_split_model_scans_as_one_checkpoint(shards, which):
    """Named by its folder or any shard, every shard is scanned: 20
    tensors in 3 files of one checkpoint, and no split finding."""
    arg = {"folder": os.path.dirname(shards[0]), "first": shards[0], "middle": shards[1],
           "last": shards[2]}[which]
    rep = scan([arg])
    assert sorted(f.path for f in rep.files) == shards
    assert all(f.parsed for f in rep.files)
    assert sum(f.tensors for f in rep.files) == TENSORS
    assert {f.checkpoint for f in rep.files} == {os.path.join(os.path.dirname(shards[0]),
                                                              "model.gguf")}
    assert _codes(rep) == [] and rep.exit_code() == 0


def test_a_missing_shard_is_s161_and_the_others_are_scanned(shards, tmp_path):
    paths = _copy(shards, tmp_path / "sh")
    os.unlink(paths[1])
    for arg in (paths[2], str(tmp_path / "sh")):
        rep = scan([arg])
        assert sorted(f.path for f in rep.files) == [paths[0], paths[2]]
        f = _one(rep, "S161")
        assert f.file == paths[0]
        assert f.message == "split model: shard 2 of 3 is missing: 'model-00002-of-00003.gguf'"
        assert f.detail["numbers"] == [2] and f.detail["count"] == 3
        assert _codes(rep) == ["S161"]            # no total without every shard
        assert rep.exit_code() == 1
        # each present shard's own per-tensor findings (the Q8_0 notes)
        assert {g.file for g in rep.findings if g.code == "S602"} == {paths[0], paths[2]}


def test_one_shard_without_its_siblings(shards, tmp_path):
    """A lone shard: its tensors scanned as a file's, and one S161 naming
    the shards that are not beside it."""
    d = tmp_path / "lone"
    d.mkdir()
    p = str(d / os.path.basename(shards[1]))
    shutil.copy(shards[1], p)
    rep = scan([p])
    assert [f.path for f in rep.files] == [p]
    assert rep.files[0].tensors == len(gguf.GGUFReader(p).tensors)
    f = _one(rep, "S161")
    assert f.file == p and f.detail["numbers"] == [1, 3]
    assert f.message.startswith("split model: shards 1, 3 of 3 are missing")
    assert any(g.code == "S602" and g.file == p for g in rep.findings)


@pytest.mark.parametrize("count", (2, 4))
def test_a_split_count_that_disagrees_is_s162(shards, tmp_path, count):
    paths = _copy(shards, tmp_path / "sh")
    _rewrite(paths, 1, count=count)
    rep = scan([str(tmp_path / "sh")])
    f = _one(rep, "S162")
    assert f.file == paths[1]
    assert f"split.count = {count}" in f.message and "model-00001-of-00003.gguf says 3" \
        in f.message
    assert _codes(rep) == ["S162"] and rep.exit_code() == 1


def test_a_tensor_count_that_disagrees_is_s162(shards, tmp_path):
    paths = _copy(shards, tmp_path / "sh")
    total = sum(len(n) for n in _names(shards))
    _rewrite(paths, 2, total=total + 5)
    f = _one(scan([paths[0]]), "S162")
    assert f.file == paths[2] and f"split.tensors.count = {total + 5}" in f.message


def test_a_split_no_other_than_the_name_is_s163(shards, tmp_path):
    paths = _copy(shards, tmp_path / "sh")
    _rewrite(paths, 2, no=1)
    rep = scan([paths[1]])
    f = _one(rep, "S163")
    assert f.file == paths[2]
    assert "split.no = 1" in f.message and "shard 3 of 3" in f.message
    assert _codes(rep) == ["S163"]


def test_a_first_shard_whose_count_is_not_its_name_is_s163(shards, tmp_path):
    paths = _copy(shards, tmp_path / "sh")
    _rewrite(paths, 0, count=2)
    rep = scan([str(tmp_path / "sh")])
    f = _one(rep, "S163")
    assert f.file == paths[0] and "-00001-of-00002.gguf" in f.message


def test_a_renamed_shard_is_s163_and_leaves_its_place_missing(shards, tmp_path):
    paths = _copy(shards, tmp_path / "sh")
    other = str(tmp_path / "sh" / "other.gguf")
    os.rename(paths[1], other)
    rep = scan([str(tmp_path / "sh")])
    assert _one(rep, "S163").file == other
    assert _one(rep, "S161").detail["numbers"] == [2]


def test_a_tensor_in_two_shards_is_s164(shards, tmp_path):
    paths = _copy(shards, tmp_path / "sh")
    dup = _tensors_of(shards[0])[1]
    total = sum(len(n) for n in _names(shards)) + 1
    _rewrite(paths, 1, tensors=[*_tensors_of(shards[1]), dup], total=total)
    for i in (0, 2):
        _rewrite(paths, i, total=total)
    rep = scan([paths[0]])
    f = _one(rep, "S164")
    assert f.file == paths[1] and f.tensor == dup[0]
    assert f.detail["shards"] == [paths[0], paths[1]]
    assert _codes(rep) == ["S164"]


@pytest.mark.parametrize("delta", (-1, 1))
def test_tensors_in_all_other_than_split_tensors_count_is_s165(shards, tmp_path, delta):
    paths = _copy(shards, tmp_path / "sh")
    total = sum(len(n) for n in _names(shards))
    for i in range(3):
        _rewrite(paths, i, total=total + delta)
    rep = scan([str(tmp_path / "sh")])
    f = _one(rep, "S165")
    assert f.detail["expected"] == total + delta
    # more than it says: found at the shard that passes it; fewer: after the last
    assert f.file == (paths[2] if delta < 0 else paths[0])
    assert f.detail["actual"] == total
    assert _codes(rep) == ["S165"]


@pytest.mark.parametrize("key,kind,value,words", [
    ("split.count", "string", "3", "split.count is not an integer"),
    ("split.tensors.count", "int32", -1, "split.tensors.count = -1 is outside 0.."),
    ("split.tensors.count", "uint64", 1 << 40, "split.tensors.count = 1099511627776"),
    ("split.no", "uint16", 3, "split.no = 3 is outside 0..2"),
])
def test_split_entries_that_cannot_be_used_are_s160(shards, tmp_path, key, kind, value, words):
    paths = _copy(shards, tmp_path / "sh")
    _rewrite(paths, 1, kv={key: (kind, value)})
    rep = scan([paths[0]])
    f = _one(rep, "S160")
    assert f.file == paths[1] and words in f.message
    assert len(rep.files) == 3 and all(r.parsed for r in rep.files)


def test_a_later_shard_without_split_entries_is_s160(shards, tmp_path):
    paths = _copy(shards, tmp_path / "sh")
    w = gguf.GGUFWriter(paths[2] + ".new", "llama")
    w.kv_data[0].clear()
    for name, data, ty in _tensors_of(paths[2]):
        w.add_tensor_info(name, data.shape, data.dtype, data.nbytes, ty)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _, data, _ in _tensors_of(paths[2]):
        w.write_tensor_data(data)
    w.close()
    os.replace(paths[2] + ".new", paths[2])
    f = _one(scan([paths[0]]), "S160")
    assert f.file == paths[2] and "absent" in f.message


def test_an_unreadable_shard_is_its_own_s805_and_no_total(shards, tmp_path):
    paths = _copy(shards, tmp_path / "sh")
    with open(paths[1], "r+b") as f:
        f.truncate(40)
    rep = scan([paths[0]])
    assert any(f.code == "S805" and f.file == paths[1] for f in rep.findings)
    assert _codes(rep) == []


def test_a_model_of_one_file_with_split_count_one(shards, tmp_path):
    """split.count 1 is a model of one file; its split.tensors.count must
    be the file's tensors (S165 otherwise)."""
    src = os.path.join(os.path.dirname(os.path.dirname(shards[0])), "one.gguf")
    n = len(gguf.GGUFReader(src).tensors)
    good, bad = str(tmp_path / "m-00001-of-00001.gguf"), str(tmp_path / "b" / "b.gguf")
    os.makedirs(os.path.dirname(bad))
    shard(good, _tensors_of(src), no=0, count=1, total=n, kv_from=src)
    shard(bad, _tensors_of(src), no=0, count=1, total=n + 2, kv_from=src)
    assert _codes(scan([good])) == []
    f = _one(scan([bad]), "S165")
    assert f.detail == {"fault": "total", "expected": n + 2, "actual": n}


def test_the_cli_reports_without_a_traceback(shards, tmp_path):
    from click.testing import CliRunner
    from grit.cli import main
    paths = _copy(shards, tmp_path / "sh")
    os.unlink(paths[0])
    r = CliRunner().invoke(main, ["scan", paths[1]])
    assert r.exit_code == 1, r.output
    assert "S161" in r.output and "shard 1 of 3 is missing" in r.output
    assert "Traceback" not in r.output


# ---------------------------------------------------------------------------
# each shard checked as its part of the model: the first shard's KV entries,
# annotations and recipe, companion scales in other shards


def _model_findings(rep) -> list[tuple]:
    """The findings that are the model's, not a file's: code, tensor and
    message (the S602 notes are per file: one per shard and ggml type)."""
    return sorted((f.code, f.tensor, f.message) for f in rep.findings if f.code != "S602")


def test_a_mixed_recipe_across_shards_is_by_design(tmp_path):
    """general.file_type (Q4_K_M) is in the first shard alone; the shard
    holding the Q6_K ffn_down is judged by it as the unsplit file is: S302
    (mixed by design), not S301."""
    rng = np.random.default_rng(1)
    q4, q6 = gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q6_K
    src = str(tmp_path / "one.gguf")
    w = gguf.GGUFWriter(src, "llama")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    for i, ty in enumerate((q4, q6)):
        for name, t in ((f"blk.{i}.ffn_down.weight", ty), (f"blk.{i}.attn_q.weight", q4)):
            be, bb = gguf.GGML_QUANT_SIZES[t]
            w.add_tensor(name, rng.integers(0, 256, (4, 256 // be * bb), dtype=np.uint8),
                         raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    paths = split(src, tmp_path / "sh", 2)
    assert "blk.1.ffn_down.weight" in _names(paths)[1]
    one, sh = scan([src]), scan([paths[1]])
    assert "S302" in {f.code for f in one.findings}
    assert _model_findings(sh) == _model_findings(one)
    assert sh.exit_code() == one.exit_code()


@pytest.mark.parametrize("jobs", (1, 3))
def test_grit_annotations_in_the_first_shard_hold_for_every_shard(tmp_path, jobs):
    """A GRIT-annotated GGUF (grit.save_gguf) split by gguf-py: the grit.*
    entries are in the first shard, the annotated tensors in all three;
    scan, load and info see what they see of the unsplit file."""
    import warnings

    import grit
    from test_io_gguf_grit import _arrays
    src = str(tmp_path / "one.gguf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # a payload ggml runtimes cannot use
        grit.save_gguf(src, _arrays(), {"general.architecture": "llama"})
    paths = split(src, tmp_path / "sh", 3)
    assert "blk.0.tile" in _names(paths)[1] and "blk.0.assumed" in _names(paths)[2]
    assert not [k for k in gguf.GGUFReader(paths[1]).fields if k.startswith("grit.")]
    one, sh = scan([src]), scan([paths[2]], jobs=jobs)   # jobs: the shards read on threads
    assert _model_findings(sh) == _model_findings(one)
    a, b = grit.load(src), grit.load(paths[1])
    assert list(a) == list(b)
    for k, v in a.items():
        if isinstance(v, grit.GritArray):
            assert isinstance(b[k], grit.GritArray) and b[k].descriptor == v.descriptor
            assert np.array_equal(grit.decode(b[k]), grit.decode(v), equal_nan=True)
    ia, ib = grit.info(src), grit.info(tmp_path / "sh")
    assert [(r.name, r.kind, r.grade) for r in ia.tensors] == \
        [(r.name, r.kind, r.grade) for r in ib.tensors]


def test_an_nvfp4_companion_in_the_next_shard(nvfp4):  # noqa: F811
    """An NVFP4 weight whose companion scale lies in the next shard: the
    shards scan as the unsplit file does (no S603 'without a companion',
    the same S604 and no grade drift), with the same coverage."""
    src, _, paths = nvfp4
    one, sh = scan([src]), scan([os.path.dirname(paths[0])])
    assert _model_findings(sh) == _model_findings(one)
    assert sh.exit_code() == one.exit_code()
    total = {k: sum(c.checked for c in r.coverage.values()) for k, r in (("a", one), ("b", sh))}
    assert total["a"] == total["b"]
    inferred = [sum(sum(c.inferred.values()) for c in r.coverage.values()) for r in (one, sh)]
    assert inferred[0] == inferred[1] > 0


def test_a_lone_shard_of_a_long_series_lists_the_first_missing(shards, tmp_path):
    """A local shard saying it is 1 of 5000: one S161, its detail listing
    the first 1000 missing shards and counting all 4999."""
    p = str(tmp_path / "model-00001-of-05000.gguf")
    shard(p, _tensors_of(shards[2]), no=0, count=5000, total=5000, kv_from=shards[0])
    f = _one(scan([p]), "S161")
    assert f.detail["missing_count"] == 4999
    assert f.detail["numbers"][:3] == [2, 3, 4] and len(f.detail["numbers"]) == 1000
    assert f.message.startswith("split model: shards 2, 3, 4,")


def test_jobs_give_the_sequential_report(shards, tmp_path):
    """A tree of a sound split model, a broken one and a file of one: the
    report with --jobs 3 is the sequential one, finding for finding."""
    root = tmp_path / "tree"
    good = _copy(shards, root / "good")
    bad = _copy(shards, root / "bad")
    os.unlink(bad[1])
    shutil.copy(os.path.join(os.path.dirname(os.path.dirname(shards[0])), "one.gguf"),
                root / "one.gguf")
    a, b = scan([str(root)]), scan([str(root)], jobs=3)
    assert a.to_dict() == b.to_dict()
    assert len(a.files) == 6 and _codes(a) == ["S161"]
    assert _one(a, "S161").file == bad[0] and good[0] in [f.path for f in a.files]
