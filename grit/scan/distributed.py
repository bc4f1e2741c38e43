"""``grit scan`` of many checkpoints, one task per entry: in this process one
after the other, or on a Dask distributed cluster (the optional extra
``grit-tensor[dask]``), the results streamed as JSON Lines and resumable.

An *entry* is one checkpoint as a PATH names it — a model file, a folder, a
shard index, a manifest of its own, an http(s) URL — and is scanned with the
ordinary :func:`grit.scan.scan` of that entry alone, so its checkpoint-wide
checks (shards and index, config.json) run within it and never across two
entries.  :func:`scan_many` writes, per entry, one ``file`` record per file
the entry's report lists and then one ``entry`` record that marks the entry
complete (:func:`entry_records`); the records of one entry are written
together, in one piece, so blocks of two entries never interleave.

Order: with no client the entries come in input order; on Dask in the order
their tasks complete.  Within an entry, the file records come in the
report's order (sorted by path), the entry record last.

Dask schedules, retries (``retries=``) and reports: a task that still fails
after its retries is an ``entry`` record with ``complete: false`` and the
error, not a failed run; a resumed run scans that entry again.

Resume (``resume=True``, ``out`` a path): the entries whose last entry record
in OUT is complete are skipped; OUT's bytes up to the end of its last entry
record are kept as they are, and whatever follows (the records of an entry
cut part-way, a cut last line) is cut off before the new records are
appended.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterable, Iterator, Sequence

from .._files import loads_json, open_regular
from ..errors import GritError, GritUsageError
from ..io.location import Location
from . import scan
from .collect import INDEX_SUFFIX, MODEL_SUFFIXES, read_manifest, sniff
from .output import FAIL_ON, SCHEMA_VERSION, ScanReport, exit_code, no_lone_surrogates
from .output.record import Record

__all__ = ["scan_many", "entries_of", "entry_records", "failed_record", "read_out",
           "ManyRun", "run_exit_code", "POLICIES", "DASK_EXTRA", "DASK_THREADS",
           "WORKER_CONFIG", "cluster_size", "local_client", "connect"]

#: what installs the Dask engine
DASK_EXTRA = "pip install 'grit-tensor[dask]'"
#: the exit policies an entry record carries a code for (``exit_codes``)
POLICIES = ("graded", "simple", *(f"fail-on {k}" for k in FAIL_ON))


# ---------------------------------------------------------------------------
# entries and their records


def entries_of(paths: Iterable[str]) -> list[str]:
    """The entries PATHs name: a manifest (a file that is neither a model
    file nor a shard index) contributes each path it lists, relative paths
    read from its folder; anything else is one entry itself (a path that
    cannot be read is an entry whose scan reports why).  Duplicates are
    dropped, the first kept."""
    out: list[str] = []
    seen: set[str] = set()
    for p in paths:
        p = os.fspath(p)
        listed = [p]
        loc = Location.of(p)
        if loc.free_reads and loc.is_file(p) and not p.lower().endswith(
                MODEL_SUFFIXES + (INDEX_SUFFIX,)) and sniff(p) is None:
            try:
                listed = read_manifest(p)
            except (OSError, ValueError):
                listed = [p]         # the scan of the entry says what is wrong with it
        for q in listed:
            if q not in seen:
                seen.add(q)
                out.append(q)
    return out


def _codes(report: ScanReport) -> dict[str, int]:
    return {"graded": exit_code(report, "graded"), "simple": exit_code(report, "simple"),
            **{f"fail-on {k}": exit_code(report, "graded", k) for k in FAIL_ON}}


def entry_records(entry: str, deep: bool = False, cache: bool = True,
                  jobs: int = 1) -> list[dict[str, Any]]:
    """The records of one entry (the task a worker runs): ``scan([entry])``,
    then one ``file`` record per file of its report — the file as the JSON
    report lists it, its coverage, and its findings as the JSON report gives
    them — and the ``entry`` record: complete, the files' paths, the
    findings that name no file of the report (a shard index, a folder), the
    summary and coverage of the entry's report, and its exit code under
    each policy."""
    rep = scan([entry], deep=deep, cache=cache, jobs=jobs)
    paths = [f.path for f in rep.files]
    known = set(paths)
    by_file: dict[str, list[dict]] = {p: [] for p in paths}
    loose: list[dict] = []
    for f in rep.findings:
        (by_file[f.file] if f.file in known else loose).append(Record.of(f).to_dict())
    recs: list[dict[str, Any]] = []
    for sf in rep.files:        # (a path listed twice has its findings once, on the first)
        cov = rep.coverage.get(sf.path)
        recs.append({"type": "file", "entry": entry, **sf.to_dict(),
                     "coverage": cov.to_dict() if cov is not None else None,
                     "findings": by_file.pop(sf.path, [])})
    cov_all = rep.coverage_dict()
    cov_all.pop("files")
    recs.append({"type": "entry", "entry": entry, "complete": True, "error": None,
                 "version": SCHEMA_VERSION, "deep": deep, "files": paths, "findings": loose,
                 "summary": rep.summary(), "coverage": cov_all, "exit_codes": _codes(rep)})
    return recs


def failed_record(entry: str, error: BaseException | str, deep: bool = False) -> dict[str, Any]:
    """The entry record of an entry whose task failed (after Dask's retries):
    not complete, the error in words, every exit code the no-input one."""
    msg = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    rep = ScanReport([], [], deep)
    return {"type": "entry", "entry": entry, "complete": False, "error": msg[:2000],
            "version": SCHEMA_VERSION, "deep": deep, "files": [], "findings": [],
            "summary": rep.summary(), "coverage": None, "exit_codes": _codes(rep)}


def run_exit_code(codes: Iterable[dict[str, int]], policy: str = "graded",
                  fail_on: str | None = None) -> int:
    """The run's exit code from its entries' codes under one policy: the
    no-input code (4; 2 under ``simple``) when no entry parsed anything (or
    there are none); otherwise the most severe entry's code, where an entry
    nothing of which could be parsed counts as a structural finding (1), as
    its unreadable findings do in a scan of everything at once."""
    key = policy if fail_on is None else f"fail-on {fail_on}"
    if key not in POLICIES:
        raise GritUsageError(f"unknown exit policy {key!r}")
    none = 2 if key == "simple" else 4
    vals = [c[key] for c in codes]
    if all(v == none for v in vals):
        return none
    worst = [1 if v == none else v for v in vals if v]
    return min(worst, default=0)


# ---------------------------------------------------------------------------
# the output file


@dataclass
class Kept:
    """What :func:`read_out` found in an output file: the last entry record
    of each entry, and the number of leading bytes that hold whole entries."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    keep: int = 0

    @property
    def complete(self) -> set[str]:
        return {e for e, r in self.entries.items() if r.get("complete") is True}


def read_out(path: str) -> Kept:
    """Read a JSONL output of :func:`scan_many` for resuming.  Lines after the
    last entry record (an entry cut part-way, a last line cut short) are not
    kept; a line before it that is not a record is an error (the file is not
    one this function wrote, or was damaged inside)."""
    kept = Kept()
    if not os.path.exists(path):
        return kept
    bad: int | None = None
    off = 0
    with open_regular(path) as f:
        for n, line in enumerate(iter(lambda: f.readline(MAX_LINE + 1), b""), 1):
            end = off + len(line)
            rec = _record(line)
            if rec is None:
                if bad is None:
                    bad = n
            elif rec.get("type") == "entry":
                if bad is not None:
                    raise GritUsageError(f"{path}: line {bad} is not a scan record; it cannot "
                                         "be resumed")
                kept.entries[rec["entry"]] = rec
                kept.keep = end
            off = end
    return kept


#: the longest record line read back (a longer one is not a record)
MAX_LINE = 64 << 20


def _record(line: bytes) -> dict | None:
    """One line of an output file as a record, or None when it is not one:
    cut short, not JSON (or nested past MAX_JSON_DEPTH), not a file or
    entry record, or an entry record without its fields (``complete`` a
    bool, ``exit_codes`` an integer for every policy)."""
    if not line.endswith(b"\n") or len(line) > MAX_LINE:
        return None
    try:
        rec = loads_json(line, "record")
    except ValueError:
        return None
    if not isinstance(rec, dict) or rec.get("type") not in ("file", "entry") or \
            not isinstance(rec.get("entry"), str):
        return None
    if rec["type"] == "entry":
        codes = rec.get("exit_codes")
        if not isinstance(rec.get("complete"), bool) or not isinstance(codes, dict) or \
                not all(isinstance(codes.get(k), int) and not isinstance(codes.get(k), bool)
                        and 0 <= codes[k] <= 4 for k in POLICIES):
            return None
    return rec


# ---------------------------------------------------------------------------
# the run


@dataclass
class ManyRun:
    """A run of :func:`scan_many`: the entries (in input order), those skipped
    as already complete in OUT, the last entry record of every entry (kept
    and new), and, when ``out`` was None, every record in the order made."""

    entries: list[str]
    skipped: list[str]
    results: dict[str, dict[str, Any]]
    records: list[dict[str, Any]] | None = None

    @property
    def failed(self) -> dict[str, str]:
        return {e: r["error"] for e, r in self.results.items() if not r.get("complete")}

    def exit_code(self, policy: str = "graded", fail_on: str | None = None) -> int:
        return run_exit_code((self.results[e]["exit_codes"] for e in self.entries),
                             policy, fail_on)


def scan_many(entries: Sequence[str], *, client: Any = None, deep: bool = False,
              cache: bool = True, jobs: int = 1, out: str | IO[str] | None = None,
              resume: bool = False, retries: int = 1,
              progress: Callable[[int, int, str], None] | None = None) -> ManyRun:
    """Scan each entry with ``scan([entry])`` and stream its records.

    ``client``: a ``dask.distributed.Client`` — one task per entry
    (``client.submit(entry_records, …, retries=retries)``), records written
    as tasks complete (``distributed.as_completed``); None — the entries one
    after the other in this process, in input order (the reference a Dask
    run equals, record for record).  ``out``: a path (written afresh, or
    with ``resume`` appended to after the entries it holds complete), an
    open text file, or None (the records are returned in ``records``).
    ``progress(done, total, entry)`` is called as entries finish."""
    entries = list(dict.fromkeys(os.fspath(e) for e in entries))
    if resume and not isinstance(out, (str, os.PathLike)):
        raise GritUsageError("resume needs the output file's path")
    kept = read_out(os.fspath(out)) if resume and isinstance(out, (str, os.PathLike)) \
        else Kept()
    for e, r in kept.entries.items():
        if r.get("complete") and bool(r.get("deep")) != deep:
            raise GritUsageError(f"{out} was written {'with' if r.get('deep') else 'without'} "
                                 f"--deep (entry {e!r}); resume it the same way")
    done = kept.complete
    todo = [e for e in entries if e not in done]
    run = ManyRun(entries, [e for e in entries if e in done],
                  {e: kept.entries[e] for e in entries if e in kept.entries},
                  [] if out is None else None)
    sink, close = _sink(out, resume, kept.keep)
    try:
        n = len(todo)
        if progress is not None:
            progress(0, n, "")
        for i, (e, recs) in enumerate(_results(todo, client, deep, cache, jobs, retries), 1):
            if sink is not None:
                sink.write("".join(no_lone_surrogates(json.dumps(r, default=str)) + "\n"
                                   for r in recs))
                sink.flush()
            elif run.records is not None:
                run.records.extend(recs)
            run.results[e] = recs[-1]
            if progress is not None:
                progress(i, n, e)
    finally:
        if close and sink is not None:
            sink.close()
    return run


def _sink(out, resume: bool, keep: int) -> tuple[IO[str] | None, bool]:
    if out is None:
        return None, False
    if not isinstance(out, (str, os.PathLike)):
        return out, False
    path = os.fspath(out)
    if resume and os.path.exists(path):
        f = open(path, "r+", encoding="ascii", newline="\n")
        f.truncate(keep)       # the entry cut part-way and a cut last line go
        f.seek(keep)
        return f, True
    return open(path, "w", encoding="ascii", newline="\n"), True


def _results(todo: list[str], client: Any, deep: bool, cache: bool, jobs: int,
             retries: int) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(entry, its records) as each entry is done."""
    if client is None:
        for e in todo:
            yield e, entry_records(e, deep, cache, jobs)
        return
    try:
        from distributed import as_completed  # noqa: PLC0415 - the optional extra
    except ImportError:
        raise GritUsageError(f"the Dask engine needs the dask extra: {DASK_EXTRA}") from None
    futures = {client.submit(entry_records, e, deep, cache, jobs, pure=False,
                             retries=retries): e for e in todo}
    which = {f.key: e for f, e in futures.items()}
    try:
        for fut in as_completed(list(futures)):
            e = which[fut.key]
            try:
                recs = fut.result()
            except Exception as exc:  # noqa: BLE001 - Dask's report of the failed task
                recs = [failed_record(e, exc, deep)]
            fut.release()
            yield e, recs
    finally:
        for fut in futures:
            if not fut.done():
                fut.cancel()


#: threads per worker of the LocalCluster ``--engine dask`` starts: a scan of
#: a remote entry spends its time waiting on the network, not on a core
DASK_THREADS = 16
#: the most worker processes it starts by default (one per core up to this)
DASK_WORKERS = 8
#: what the workers grit starts run with: Dask's statistical profiler off.
#: The profiler samples every thread's stack (``sys._current_frames``) every
#: 10 ms; with many threads waiting on sockets it costs time for nothing, and
#: under CPython 3.11 it can deadlock with the threads of a thread pool
#: (python/cpython gh-106883)
WORKER_CONFIG = {"distributed.worker.profile.enabled": False}


def cluster_size(workers: int | None = None, threads: int | None = None) -> tuple[int, int]:
    """(worker processes, threads per worker) of the LocalCluster
    ``--engine dask`` starts: ``workers`` (default one per core, at most
    :data:`DASK_WORKERS`) and ``threads`` (default :data:`DASK_THREADS`)."""
    for name, v in (("workers", workers), ("threads", threads)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise GritUsageError(f"{name} must be a positive integer, not {v!r}")
    return (workers or max(1, min(os.cpu_count() or 1, DASK_WORKERS)),
            threads or DASK_THREADS)


def local_client(workers: int | None = None, threads: int | None = None, **cluster: Any):
    """A Client of a LocalCluster started for one run (``with`` closes both):
    :func:`cluster_size` workers and threads, Dask's profiler off on them
    (:data:`WORKER_CONFIG`), its HTTP server on a free loopback port;
    ``cluster`` goes to LocalCluster."""
    try:
        import dask  # noqa: PLC0415 - the optional extra
        from distributed import Client, LocalCluster  # noqa: PLC0415
    except ImportError:
        raise GritUsageError(f"--engine dask needs the dask extra: {DASK_EXTRA}") from None
    n, t = cluster_size(workers, threads)
    # (a Nanny takes the configuration in force when it is made to its worker)
    with dask.config.set(WORKER_CONFIG):
        lc = LocalCluster(dashboard_address="127.0.0.1:0", n_workers=n, threads_per_worker=t,
                          **cluster)
    try:
        return _Both(Client(lc), lc)
    except BaseException:
        lc.close()
        raise


def connect(address: str, timeout: float = 30.0):
    """A Client of the scheduler at ``address`` (``with`` closes it)."""
    try:
        from distributed import Client  # noqa: PLC0415 - the optional extra
    except ImportError:
        raise GritUsageError(f"--scheduler needs the dask extra: {DASK_EXTRA}") from None
    try:
        return _Both(Client(address, timeout=timeout), None)
    except (OSError, ValueError, TypeError) as e:
        raise GritError(f"cannot reach the Dask scheduler at {address}: {e}") from None


class _Both:
    """A client (and the cluster it was started with) closed together."""

    def __init__(self, client: Any, cluster: Any):
        self.client, self.cluster = client, cluster

    def __enter__(self) -> Any:
        return self.client

    def __exit__(self, *exc: Any) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()
