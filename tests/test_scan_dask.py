"""grit scan on many checkpoints (grit.scan.distributed): one task per entry
on a real Dask LocalCluster (2 worker processes, 1 thread each), its JSONL
records equal to the sequential in-process run's (keyed by entry and path:
the completion order differs); --resume after a run cut part-way; the CLI
with --scheduler pointed at the cluster; a task that fails (after Dask's
retries) is a record, not a crash.

The cluster is one per module, with worker processes (the workers import
grit afresh and every record crosses a process boundary, as on a real
cluster; it starts in a few seconds).  The failure test needs to make the
task itself fail, which only an in-process cluster lets a test arrange, so
it has a small cluster of its own with processes=False."""
from __future__ import annotations

import io
import json
import os
import sys

import pytest
from click.testing import CliRunner

distributed = pytest.importorskip("distributed")
import dask  # noqa: E402

import grit  # noqa: E402
from grit.cli import main  # noqa: E402
from grit.errors import GritUsageError  # noqa: E402
from grit.scan import distributed as many  # noqa: E402
from grit.scan import output as scan_report  # noqa: E402
from grit.scan import scan  # noqa: E402

from http_server import Server  # noqa: E402
from test_scan_jobs import write_set  # noqa: E402


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GRIT_CACHE_DIR", str(tmp_path / "cache"))


def _served() -> tuple[Server, list[str]]:
    import numpy as np  # noqa: PLC0415
    s = Server()
    x = np.random.default_rng(5).standard_normal((8, 256)).astype(np.float32)
    buf = io.BytesIO()
    import tempfile  # noqa: PLC0415
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "m.safetensors")
        grit.save(p, {"w": grit.encode(x, grit.GRADE_MXFP4)})
        buf.write(open(p, "rb").read())
    data = buf.getvalue()
    s.files["/a/model.safetensors"] = data
    s.files["/b/model.safetensors"] = data[:-200]
    s.files["/c/model.safetensors"] = b"\x00" * 40
    s.faults["/d/model.safetensors"] = {"status": 404}
    return s, [s.url(f"/{k}/model.safetensors") for k in "abcd"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The checkpoints (≥ 50 entries: 4 sets of local ones and 4 URLs), a
    manifest of them, and a LocalCluster whose workers see the test's cache
    folder."""
    root = tmp_path_factory.mktemp("many")
    entries: list[str] = []
    for i in range(4):
        entries += write_set(root / f"set{i}")
    server, urls = _served()
    entries += urls
    manifest = root / "entries.txt"
    # relative paths are read from the manifest's folder
    manifest.write_text("# checkpoints\n" + "\n".join(
        os.path.relpath(e, root) if not e.startswith("http") and i % 2 else e
        for i, e in enumerate(entries)) + "\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRIT_CACHE_DIR", str(root / "cache"))
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address="127.0.0.1:0")
        client = distributed.Client(cluster)
        try:
            yield {"root": root, "entries": entries, "manifest": str(manifest),
                   "client": client, "address": cluster.scheduler_address}
        finally:
            client.close()
            cluster.close()
            server.close()


@pytest.fixture(scope="module")
def reference(world):
    """The sequential in-process run: every record, in order."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRIT_CACHE_DIR", str(world["root"] / "cache"))
        run = many.scan_many(world["entries"])
    assert run.records is not None
    return run


def keyed(records) -> dict:
    out: dict = {}
    for r in records:
        k = (r["type"], r["entry"], r.get("path") if r["type"] == "file" else None)
        assert k not in out, k
        out[k] = r
    return out


def lines(path) -> list[dict]:
    with open(path) as f:
        return [json.loads(ln) for ln in f]


def blocks_are_whole(recs) -> None:
    """Each entry's file records come together, right before its entry record."""
    pending: list[dict] = []
    for r in recs:
        if r["type"] == "file":
            assert not pending or pending[-1]["entry"] == r["entry"]
            pending.append(r)
        else:
            assert [p["path"] for p in pending] == r["files"]
            assert all(p["entry"] == r["entry"] for p in pending)
            pending = []
    assert not pending


def test_manifest_entries(world):
    assert many.entries_of([world["manifest"]]) == world["entries"]
    assert len(world["entries"]) >= 50


def test_the_records_are_the_reports(world, reference):
    """Each entry's records say what the JSON report of scan([entry]) says."""
    for e in world["entries"][:14]:
        buf = io.StringIO()
        scan_report.write_json(scan([e]), "graded", file=buf)
        doc = json.loads(buf.getvalue())
        recs = [r for r in reference.records if r["entry"] == e]
        files = [r for r in recs if r["type"] == "file"]
        entry = recs[-1]
        assert entry["type"] == "entry" and entry["complete"] is True
        assert doc["files"] and [{k: r[k] for k in doc["files"][0]} for r in files] == \
            doc["files"]
        mine = [f for r in files for f in r["findings"]] + entry["findings"]
        assert sorted(map(json.dumps, mine)) == sorted(map(json.dumps, doc["findings"]))
        assert all(f["file"] == r["path"] for r in files for f in r["findings"])
        for r in files:
            assert r["coverage"] == doc["coverage"]["files"].get(r["path"])
        assert entry["exit_codes"]["graded"] == doc["exit_code"]
        assert entry["summary"] == doc["summary"]
    kinds = {f["code"] for r in reference.records for f in r["findings"]}
    assert {"S101", "S151", "S201", "S301", "S310", "S805"} <= kinds


def test_a_dask_run_equals_the_sequential_run(world, reference, tmp_path):
    out = tmp_path / "out.jsonl"
    seen = []
    run = many.scan_many(world["entries"], client=world["client"], out=str(out),
                         progress=lambda i, n, e: seen.append(i))
    recs = lines(out)
    assert keyed(recs) == keyed(reference.records)
    blocks_are_whole(recs)
    assert seen == list(range(len(world["entries"]) + 1))
    assert not run.failed and not run.skipped
    assert run.exit_code() == reference.exit_code() == 1
    assert run.exit_code("simple") == 1


def _cut_output(reference, path, whole: int) -> tuple[bytes, set[str]]:
    """OUT as a run cut part-way leaves it: ``whole`` complete entries, then
    one file record of an entry with several files, then a line cut short."""
    recs = reference.records
    ends = [i for i, r in enumerate(recs) if r["type"] == "entry"]
    head = recs[:ends[whole - 1] + 1]
    done = {r["entry"] for r in head if r["type"] == "entry"}
    rest = recs[ends[whole - 1] + 1:]
    multi = next(e for e in (r["entry"] for r in rest if r["type"] == "entry")
                 if sum(r["type"] == "file" and r["entry"] == e for r in rest) > 1)
    part = [r for r in rest if r["type"] == "file" and r["entry"] == multi][:1]
    kept = "".join(json.dumps(r) + "\n" for r in head).encode()
    tail = "".join(json.dumps(r) + "\n" for r in part) + json.dumps(rest[-1])[:37]
    path.write_bytes(kept + tail.encode())
    return kept, done


def test_resume_scans_only_the_missing_entries(world, reference, tmp_path):
    out = tmp_path / "out.jsonl"
    kept, done = _cut_output(reference, out, 20)
    r = CliRunner().invoke(main, ["scan", "--scheduler", world["address"], "--resume",
                                  str(out), world["manifest"]])
    assert r.exit_code == 1, r.output
    assert "20 of" in r.output
    data = out.read_bytes()
    assert data.startswith(kept)                        # kept records are not rewritten
    new = [json.loads(ln) for ln in data[len(kept):].decode().splitlines()]
    assert {x["entry"] for x in new} == set(world["entries"]) - done
    assert keyed(lines(out)) == keyed(reference.records)
    # resumed again: nothing left to do, nothing written
    r = CliRunner().invoke(main, ["scan", "--resume", str(out), world["manifest"]])
    assert r.exit_code == 1 and out.read_bytes() == data


def test_cli_scheduler_output_and_local_engine(world, reference, tmp_path):
    out = tmp_path / "out.jsonl"
    r = CliRunner().invoke(main, ["scan", "--scheduler", world["address"], "-o", str(out),
                                  world["manifest"]])
    assert r.exit_code == 1, r.output
    assert keyed(lines(out)) == keyed(reference.records)
    # --engine local: the sequential run, in input order, record for record
    seq = tmp_path / "seq.jsonl"
    r = CliRunner().invoke(main, ["scan", "--engine", "local", "--output", str(seq),
                                  world["manifest"]])
    assert r.exit_code == 1
    assert lines(seq) == json.loads(json.dumps(reference.records))


def test_cli_engine_dask_starts_and_closes_a_local_cluster(world, reference, tmp_path):
    few = world["entries"][:4]
    m = tmp_path / "few.txt"
    m.write_text("\n".join(few))
    out = tmp_path / "out.jsonl"
    r = CliRunner().invoke(main, ["scan", "--engine", "dask", "-o", str(out), str(m)])
    assert r.exit_code == reference_code(reference, few), r.output
    assert keyed(lines(out)) == keyed(x for x in reference.records if x["entry"] in few)


def test_the_cluster_grit_starts_is_sized_for_io_with_the_profiler_off():
    """--engine dask's LocalCluster: the workers and threads asked for (by
    default one worker per core, at most 8, of 16 threads), and on each
    worker no profiler callback (Dask's is on by default)."""
    assert many.cluster_size() == (max(1, min(os.cpu_count() or 1, 8)), many.DASK_THREADS)
    assert many.cluster_size(3, 5) == (3, 5)
    with pytest.raises(GritUsageError):
        many.cluster_size(0)
    assert dask.config.get("distributed.worker.profile.enabled") is True   # Dask's default
    with many.local_client(1, 3) as client:
        info = client.scheduler_info()["workers"]
        assert [w["nthreads"] for w in info.values()] == [3]
        got = client.run(lambda dask_worker: sorted(dask_worker.periodic_callbacks))
        [callbacks] = got.values()
        assert callbacks and not [c for c in callbacks if c.startswith("profile")], callbacks


def test_the_scans_of_a_process_share_one_thread_pool(world):
    """jobs > 1 takes its threads from one pool per process: scanning many
    entries starts no pool per entry."""
    import grit.scan as gs  # noqa: PLC0415
    entries = world["entries"][:3]
    pool = gs._pool()
    made = []
    real = gs.ThreadPoolExecutor
    try:
        gs.ThreadPoolExecutor = lambda *a, **k: made.append(1) or real(*a, **k)
        for e in entries:
            many.entry_records(e, jobs=4)
    finally:
        gs.ThreadPoolExecutor = real
    assert made == [] and gs._pool() is pool


def reference_code(reference, entries) -> int:
    return many.run_exit_code(reference.results[e]["exit_codes"] for e in entries)


def test_flag_combinations_are_refused(world, tmp_path):
    m = world["manifest"]
    for args in (["--engine", "dask", "--json"], ["--scheduler", "tcp://x:1", "--format",
                                                  "sarif"],
                 ["--engine", "local", "--scheduler", "tcp://x:1"],
                 ["--workers", "2"], ["--engine", "local", "--threads", "4"],
                 ["--scheduler", "tcp://x:1", "--threads", "4"],
                 ["--engine", "dask", "--workers", "0"],
                 ["--output", str(tmp_path / "a"), "--resume", str(tmp_path / "b")]):
        r = CliRunner().invoke(main, ["scan", *args, m])
        assert r.exit_code == 2, (args, r.output)


def test_without_dask_the_engine_names_the_extra(world, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)
    r = CliRunner().invoke(main, ["scan", "--engine", "dask", "-o", str(tmp_path / "o"),
                                  world["manifest"]])
    assert r.exit_code == 4
    # the distribution is grit-tensor (grit on the package index is another project)
    assert "pip install 'grit-tensor[dask]'" in r.output
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------
# the exit code of a run, the output file


@pytest.mark.parametrize("codes, policy, want", [
    ([], "graded", 4), ([4, 4], "graded", 4), ([0, 4], "graded", 1), ([3, 2, 0], "graded", 2),
    ([0, 0], "graded", 0), ([3, 1], "graded", 1), ([2, 0], "simple", 1), ([2, 2], "simple", 2),
    ([0, 0], "simple", 0)])
def test_the_run_exit_code_is_the_worst_entry(codes, policy, want):
    assert many.run_exit_code([{policy: c} | {"graded": c} for c in codes], policy) == want


def test_the_exit_code_under_fail_on(reference):
    codes = [r["exit_codes"] for r in reference.results.values()]
    for k in scan_report.FAIL_ON:
        combined = scan_report.exit_code(scan(list(reference.entries)), "graded", k)
        assert many.run_exit_code(codes, fail_on=k) == combined


def test_a_damaged_output_is_not_resumed(tmp_path, reference):
    out = tmp_path / "out.jsonl"
    recs = reference.records[:40]
    text = [json.dumps(r) for r in recs]
    text.insert(3, "{not json")
    out.write_text("\n".join(text) + "\n")
    with pytest.raises(GritUsageError, match="line 4"):
        many.read_out(str(out))
    with pytest.raises(GritUsageError, match="--deep"):
        out.write_text("".join(json.dumps(r) + "\n" for r in recs))
        many.scan_many(reference.entries, deep=True, out=str(out), resume=True)


# ---------------------------------------------------------------------------
# a task that fails


def test_a_failing_task_is_a_record_and_is_retried(tmp_path, monkeypatch, reference):
    ok = reference.entries[0]
    calls: dict[str, int] = {}
    real = many.scan

    def flaky(paths, **kw):
        e = paths[0]
        calls[e] = calls.get(e, 0) + 1
        if e == "boom" or (e == ok and calls[e] == 1):
            raise RuntimeError(f"worker trouble on {e}")
        return real(paths, **kw)

    monkeypatch.setattr(many, "scan", flaky)
    out = tmp_path / "out.jsonl"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address="127.0.0.1:0") as lc, distributed.Client(lc) as c:
        run = many.scan_many([ok, "boom"], client=c, out=str(out), retries=1)
    assert calls == {ok: 2, "boom": 2}            # Dask's retries: one more try each
    assert set(run.failed) == {"boom"} and "RuntimeError: worker trouble" in run.failed["boom"]
    got = keyed(lines(out))
    assert got[("entry", "boom", None)]["complete"] is False
    assert {k: v for k, v in got.items() if k[1] == ok} == {
        k: v for k, v in keyed(reference.records).items() if k[1] == ok}
    assert run.exit_code() == many.run_exit_code([reference.results[ok]["exit_codes"],
                                                  {"graded": 4}])
    # resumed: the failed entry is scanned again, the complete one is not
    monkeypatch.setattr(many, "scan", real)
    run2 = many.scan_many([ok, "boom"], out=str(out), resume=True)
    assert run2.skipped == [ok]
    assert run2.results["boom"]["complete"] is True


def test_an_unreachable_scheduler_is_a_clear_error():
    with pytest.raises(grit.GritError, match="cannot reach the Dask scheduler"):
        many.connect("tcp://127.0.0.1:1", timeout=1)
