"""The ``grit`` command line."""
from __future__ import annotations

import codecs
import contextlib
import dataclasses
import io
import json
import os
import sys
import threading

import click

from . import __version__
from . import convert as convert_mod
from . import convert_gguf  # noqa: F401 - registers GGUF with grit convert / verify
from ._files import check_output, loads_json, read_regular
from .boundary import diagnose
from .ecosystem import grade_named, names_of
from .errors import GritError, Status
from . import info as info_mod
from ._text import ESCAPE_ERRORS, escape_errors, printable
from .explain import ExplainInputError, diff, render, resolve, to_dict
from .grade import register_grade
from .io.http import NetPolicy, is_url, parse_url
from .io.hub import HubPath, is_hub
from .io.source import LIMITS, limit
from .scan import exit_code, scan
from .scan import output as scan_report
from .scan.findings import REGISTRY, Severity, explain as explain_code, status_name

_STATUS_HELP = {
    Status.OK: ("The descriptor, shape and planes agree.", "Nothing to do."),
    Status.SIZE_MISMATCH: (
        "A plane's byte count differs from what the §7.3 size equations derive from the "
        "descriptor and shape (exactly; too large is as wrong as too small).",
        "Check the group size (k0), dense vs PAD8 container, dense vs sparse, and whether "
        "the shard was truncated. The message names the plane and the derivation."),
    Status.GRADE_UNKNOWN: (
        "The descriptor does not denote a grade this process knows: the frame is not a v1 "
        "frame (magic, version, reserved bits, inconsistent flags), its grade_id is not "
        "registered, or its fields disagree with the grade's canonical string.",
        "Register the producer's canonical grade string (grit.register_grade), or fix the "
        "descriptor field the message names."),
    Status.PLACEMENT_UNKNOWN: (
        "A placement word is not UNSPECIFIED, a registered class-0x1 word, class 0x8 or "
        "class 0xF; or an aux placement is given without an aux plane (or the reverse).",
        "Relayout to a registered placement (grit.relayout) or fix placement_meta."),
    Status.DIGEST_MISMATCH: (
        "The plane contents disagree with what the descriptor asserts: the digest differs, "
        "or ASC_LSB sparse metadata is not strictly increasing.",
        "Re-fetch the bytes (corruption or partial write), or re-sort the metadata."),
}


codecs.register_error(ESCAPE_ERRORS, escape_errors)


class _TextOnly(io.TextIOBase):
    """A text stream with its byte buffer hidden.  Click re-wraps a stream
    whose encoding is ASCII as UTF-8 (it takes ASCII for an unset locale);
    through this wrapper it writes in the declared encoding instead, so that
    an ASCII stream receives ASCII."""

    def __init__(self, stream) -> None:
        super().__init__()
        self._stream = stream

    @property
    def encoding(self):  # type: ignore[override]
        return self._stream.encoding

    @property
    def errors(self):  # type: ignore[override]
        return self._stream.errors

    def write(self, text):
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def writable(self) -> bool:
        return True


def _is_ascii(stream) -> bool:
    try:
        return codecs.lookup(stream.encoding or "ascii").name == "ascii"
    except (LookupError, AttributeError, TypeError):
        return False


@contextlib.contextmanager
def _output_streams():
    """For one command: stdout and stderr write every character their
    encoding cannot carry as an escape (the ``grit-escape`` handler: \\u2014
    for an em dash under ASCII or latin-1) instead of raising
    UnicodeEncodeError, and an ASCII stream stays ASCII.  Restored after."""
    saved = []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            continue
        errors = getattr(stream, "errors", None)
        try:
            stream.reconfigure(errors=ESCAPE_ERRORS)
        except (AttributeError, ValueError, TypeError, io.UnsupportedOperation):
            errors = None                    # not a reconfigurable text stream: as it is
        if errors is not None and _is_ascii(stream):
            setattr(sys, name, _TextOnly(stream))
        saved.append((name, stream, getattr(sys, name), errors))
    try:
        yield
    finally:
        for name, stream, current, errors in saved:
            if getattr(sys, name) is current:   # (click swaps in its own after EPIPE)
                setattr(sys, name, stream)
            if errors is not None:
                with contextlib.suppress(ValueError, OSError):
                    stream.flush()
                    stream.reconfigure(errors=errors)


class _Main(click.Group):
    """The ``grit`` group: every command runs inside :func:`_output_streams`
    (``--help`` and ``--version`` included)."""

    def main(self, *args, **kwargs):
        with _output_streams():
            return super().main(*args, **kwargs)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="grit")
def main() -> None:
    """GRIT v1 toolkit: scan checkpoints, check descriptors, canonicalise grades,
    explain statuses."""


@main.command("grade")
@click.argument("text")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def grade_cmd(text: str, as_json: bool) -> None:
    """Canonicalise a grade string (or a name like GRADE_MXFP4, or a name the
    ecosystem gives the format: Q4_K, MXFP4, MXFP8, NVFP4, ggml:NVFP4,
    nvfp4-pack-quantized, FP8(k0=4096), INT8(k0=128,s0=binary16) …;
    docs/info.md lists them) and print its id and the names it is known by.

    \b
    Examples: grit grade 'GRIT1(esr=ocpmx, s0=ue8m0, k0=32, e=fp4)'
              grit grade q4_k
    """
    try:
        g = grade_named(text)
    except GritError as e:
        _die(e, as_json)
    out = {"canonical": g.canonical, "grade_id": f"0x{g.id:016X}",
           "decode_projection": g.decode_projection, "name": g.name,
           "known_as": names_of(g) or None}
    if as_json:
        click.echo(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            if v is not None:
                click.echo(f"{k:18} {', '.join(v) if isinstance(v, list) else v}")


@main.command("check")
@click.argument("target")
@click.option("--shape", help="Comma-separated extents, e.g. 4096,4096 (with a hex descriptor).")
@click.option("--planes", help="Comma-separated plane byte counts data,scale0,scale1,aux.")
@click.option("--level", type=click.IntRange(0, 1), default=1, show_default=True,
              help="Check level (byte-reading levels need the planes themselves).")
@click.option("--grade", "grades", multiple=True,
              help="Teach a grade string before checking (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def check_cmd(target, shape, planes, level, grades, as_json) -> None:
    """Run grit_check on a hex descriptor, or on every case of a JSON file.

    TARGET is 128 hex digits (then give --shape and --planes) or a JSON file holding
    a list of {"name", "desc_hex", "shape", "plane_bytes", "grades"?} cases.

    Exit status: 0 all OK, 1 any check failed, 4 the input could not be read.
    """
    try:
        for g in grades:
            register_grade(g)
        cases = _load_cases(target, shape, planes)
    except (GritError, OSError, ValueError) as e:
        _die(e, as_json, code=4)
    results = []
    for i, c in enumerate(cases):
        name = c.get("name", "-") if isinstance(c, dict) else f"case {i}"
        name = name if isinstance(name, str) else f"case {i}"
        try:
            _check_case(c, i)
            for g in c.get("grades", []):
                register_grade(g)
            det = diagnose(c["desc_hex"], c["shape"], c["plane_bytes"], level=level)
            results.append({"name": name, **det.to_dict()})
        except (GritError, ValueError) as e:
            results.append({"name": name, "status": "Unreadable", "code": None,
                            "message": str(e)})
    failed = sum(r["status"] != "Ok" for r in results)
    if as_json:
        click.echo(json.dumps({"results": results, "failed": failed}, indent=2))
    else:
        P = printable                        # names and messages may come from a file
        for r in results:
            mark = "ok " if r["status"] == "Ok" else "FAIL"
            click.echo(f"{mark} {P(r['name'])}: {P(r['status'])}")
            if r["status"] != "Ok":
                for line in str(r["message"]).splitlines():
                    click.echo(f"     {P(line)}")
                for line in r.get("lines", []):
                    click.echo(f"       {P(line)}")
        click.echo(f"{len(results) - failed} ok, {failed} failed")
    sys.exit(1 if failed else 0)


@main.command("explain")
@click.argument("refs", nargs=-1, required=True, metavar="CODE | STATUS | A B")
@click.option("--json", "as_json", is_flag=True,
              help="Machine-readable output (a finding code, or the diff of A B).")
@click.option("--all", "show_all", is_flag=True, help="Also print the fields that are equal.")
def explain_cmd(refs, as_json: bool, show_all: bool) -> None:
    """Explain a scan finding code or a check status, or diff two descriptors.

    \b
    grit explain CODE     what a grit scan finding code (S101 …, shown in the
                          report) means, why it matters and how to fix it.
    grit explain STATUS   what Ok, SizeMismatch, GradeUnknown, PlacementUnknown,
                          DigestMismatch (or its number) means and how to fix it.
    grit explain A B      field-by-field descriptor diff (§7.5): every frame field,
                          the note, the placements, the canonical grade strings key
                          by key, the decode projections, and a verdict.

    \b
    A and B are each 128 hex digits (whitespace allowed), a grade string
    grit1(...), a registered grade name (GRADE_MXFP4 or mxfp4; a grade stands
    for its canonical descriptor), or FILE:TENSOR (a tensor of a checkpoint: every
    name grit scan reports resolves, a recognised weight under its logical name,
    a role of a drift finding; FILE may be a sharded checkpoint's index.json).

    \b
    Example:  grit explain GRADE_MXFP4 GRADE_MXFP4_RNE

    \b
    The verdict (A B; "verdict" in --json) is one of
      same contract                      the frames are byte-identical (the note aside)
      same decode, different placement   one grade, one frame but for the placement
                                         words / INTERLEAVED flag: relayout connects them
      same decode, different encode (…)  decode-equivalent grades (supersedes edge named)
      different contracts: …             the bytes are not interchangeable

    Exit status (A B): 0 same contract, 1 any other verdict, 4 an argument cannot be
    resolved (also a tensor that is not a GRIT array: a plain tensor, a layout v1
    cannot express — the message says why).
    """
    if len(refs) == 1:
        if refs[0].upper() in REGISTRY:
            _explain_code(refs[0].upper(), as_json)
        else:
            _explain_status(refs[0])
        return
    if len(refs) != 2:
        raise click.UsageError("give one CODE or STATUS, or two descriptors A B")
    sides = []
    loaded: dict = {}                  # a file named on both sides is read once
    for which, ref in zip("AB", refs):
        try:
            sides.append(resolve(ref, loaded=loaded))
        except (ExplainInputError, GritError, OSError) as e:
            msg = f"cannot resolve {which} ({ref!r}): {e}"
            if as_json:
                click.echo(json.dumps({"error": type(e).__name__, "argument": which,
                                       "message": msg}))
            else:
                click.echo(f"error: {printable(msg)}", err=True)
            sys.exit(4)
    ex = diff(*sides)
    if as_json:
        click.echo(json.dumps(to_dict(ex), indent=2, default=str))
    else:
        click.echo(render(ex, color=False, show_all=show_all))
    sys.exit(0 if ex.same else 1)


@main.command("scan")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--deep", is_flag=True,
              help="Also read the planes: level-2 digest and sparse metadata order, level-3 "
                   "probe warnings.")
@click.option("--format", "fmt", type=click.Choice(scan_report.FORMATS), default=None,
              help="Report format: text (default), json, jsonl (one finding per line, then a "
                   "summary line), sarif (SARIF 2.1.0) or markdown (a pull-request comment "
                   "or job summary).")
@click.option("--json", "as_json", is_flag=True, help="Alias of --format json.")
@click.option("--exit-policy", type=click.Choice(["graded", "simple"]), default=None,
              help="How findings map to the exit status (default: graded).")
@click.option("--no-cache", "no_cache", is_flag=True,
              help="Read remote headers afresh (do not use or fill the header cache, "
                   "$GRIT_CACHE_DIR or ~/.cache/grit).")
@click.option("--fail-on", type=click.Choice(list(scan_report.FAIL_ON)), default=None,
              help="Exit non-zero iff a finding at or above this severity exists "
                   "(replaces --exit-policy).")
@click.option("--jobs", "-j", type=click.IntRange(1, 256), default=1, show_default=True,
              metavar="N",
              help="Read and check N files at once (threads: remote headers and --deep "
                   "streams overlap); the report is the same as with 1.")
@click.option("--engine", type=click.Choice(["local", "dask"]), default=None,
              help="Scan each entry (checkpoint) of the PATHs/manifests on its own and "
                   "stream per-entry JSON Lines records.  dask: one task per entry on a Dask "
                   "cluster — the one --scheduler names, else a LocalCluster started for the "
                   "run (needs grit-tensor[dask]); local: the same records entry by entry in "
                   "this process.  Without --engine: one report of every PATH together.")
@click.option("--scheduler", metavar="ADDRESS", default=None,
              help="The Dask scheduler to run on (tcp://HOST:PORT); implies --engine dask.")
# (the size of the LocalCluster --engine dask starts: grit.scan.distributed.cluster_size)
@click.option("--workers", type=click.IntRange(1, 256), default=None, metavar="N",
              help="--engine dask: worker processes of the cluster started for the run "
                   "(default: one per core, at most 8).")
@click.option("--threads", type=click.IntRange(1, 1024), default=None, metavar="N",
              help="--engine dask: threads per worker (default 16: a remote scan waits on "
                   "the network, not on a core).")
@click.option("--output", "-o", "output", metavar="OUT.jsonl", default=None,
              type=click.Path(dir_okay=False),
              help="Write the report to OUT (afresh) instead of stdout, in --format, else the "
                   "format OUT's suffix names (.json, .jsonl, .sarif, .txt); with --engine, "
                   "--scheduler: the per-entry JSON Lines records.")
@click.option("--resume", metavar="OUT.jsonl", default=None, type=click.Path(dir_okay=False),
              help="Like --output, but skip the entries OUT already holds complete and append "
                   "the rest; OUT's complete records are never rewritten.")
# -- CI adoption: a project's settings, code selection, baselines
@click.option("--select", metavar="CODES", default=None,
              help="Only findings of these codes count (comma-separated codes or prefixes: "
                   "S1,S301).")
@click.option("--ignore", metavar="CODES", default=None,
              help="Findings of these codes (or prefixes) never count.")
@click.option("--baseline", metavar="FILE", default=None, type=click.Path(dir_okay=False),
              help="Findings FILE holds are known: not listed, not counted for the exit "
                   "status; the rest are shown as new.")
@click.option("--write-baseline", metavar="FILE", default=None,
              type=click.Path(dir_okay=False),
              help="Write the findings that count to FILE as the baseline (they are then known).")
@click.option("--config", "config_file", metavar="FILE", default=None,
              type=click.Path(dir_okay=False),
              help="Read the settings from FILE, not the .grit.toml or pyproject.toml "
                   "[tool.grit.scan] found by walking up from the working directory.")
@click.option("--isolated", is_flag=True, help="Read no settings file.")
def scan_cmd(paths, deep: bool, fmt: str | None, as_json: bool, exit_policy: str | None,
             fail_on: str | None, no_cache: bool, jobs: int, engine: str | None,
             scheduler: str | None, workers: int | None, threads: int | None,
             output: str | None, resume: str | None,
             select: str | None, ignore: str | None, baseline: str | None,
             write_baseline: str | None, config_file: str | None, isolated: bool) -> None:
    """Check every tensor of safetensors / GGUF checkpoints against its bytes (§13).

    PATH is a .safetensors or .gguf file, a directory tree (walked in sorted
    order), a manifest (a JSON list of paths, or one path per line), an
    http(s) URL of a safetensors or GGUF file (read by Range requests: the
    header alone at level 1), or a Hub repository hf://ORG/REPO[@REVISION][/PATH]
    (pip install 'grit-tensor[hub]'; read at one commit).  A shard of a split
    GGUF model (NAME-00001-of-0000N.gguf) brings its sibling shards: the model
    is scanned as one checkpoint (S160-S165).  Input files are opened
    read-only and never modified.

    \b
    Reports: (1) descriptor-vs-bytes violations on the on-disk plane lengths,
    (2) cross-file gid disagreement with the field-by-field diff, (3) grade
    drift within one checkpoint (same role: disagreement; across roles:
    warning), (4) NOTE_ASSUMED tensors by producer tag, (5) with --deep,
    digest / metadata-order failures and level-3 probe warnings; plus
    inferred descriptors, tensors v1 cannot express, and unreadable inputs;
    and the coverage: tensor bytes checked against a recorded descriptor,
    against an inferred one, and not checkable.
    Every finding has a code (S101 …): grit explain CODE says what it means
    and how to fix it.

    \b
    Exit status, --exit-policy graded (default):
      0 clean   1 structural violation   2 disagreement (no structural)
      3 warnings only   4 no input could be parsed
    --exit-policy simple:  0 clean   1 any finding   2 no input could be parsed
    --fail-on LEVEL (structural | disagreement | warning):
      0 no finding at or above LEVEL; otherwise the graded code of the most
      severe finding (1, 2 or 3); 4 no input could be parsed.
      --fail-on warning exits as graded does; --fail-on structural
      passes a report with disagreements and warnings only.

    \b
    Many checkpoints (--engine, --scheduler, --resume): each
    entry — a PATH, or each path a manifest PATH lists — is one checkpoint,
    scanned on its own (one Dask task; its shard and config checks within
    it).  The output is JSON Lines: per entry one "file" record per file
    (path, format, parsed, error, coverage, findings) and an "entry" record
    that marks it complete (its exit codes); entries in completion order.
    The exit status is the worst entry's under the policy (an entry nothing
    of which parsed counts as structural; 4 only if no entry parsed).
    --jobs N reads N files at once within each scan.  --engine dask starts
    --workers processes (default one per core) of --threads threads each
    (default 16), Dask's profiler off on them.

    \b
    Network policy (http(s) and hf:// alike; docs/scan.md "Network policy"):
    every request has total deadlines (GRIT_NET_TIMEOUT, default 10 s, to
    connect and to the end of the headers; a body must come at
    GRIT_NET_MIN_RATE bytes/s on average), bounded headers and redirects
    (http(s) only), bounded retries (GRIT_NET_RETRIES, GRIT_NET_RETRY_TIME)
    and caps on requests and bytes per file and per scan (GRIT_NET_FILE_*,
    GRIT_NET_SCAN_*: S808 when reached).  A malformed URL or hf:// name is a
    usage error before anything is sent.  Readers refuse more than
    GRIT_MAX_GGUF_KV GGUF KV entries (65536) and GRIT_MAX_TENSORS tensors
    (131072) per file (S808).

    \b
    Settings (docs/scan.md "CI"): [tool.grit.scan] in pyproject.toml or [scan]
    in .grit.toml, found walking up from the working directory: select,
    ignore, per-file-ignores, exit-policy, fail-on, format, baseline.  The
    flags override them.  --baseline FILE: only findings not in FILE count
    and are listed (as new); --write-baseline FILE records the current ones.

    \b
    Example:  grit scan examples/
              grit scan --format sarif --fail-on disagreement ckpt/ > scan.sarif
              grit scan --jobs 8 https://host/ckpt/model.safetensors
              grit scan hf://ORG/REPO@main
            grit scan --scheduler tcp://HOST:8786 --resume out.jsonl repos.txt
    """
    if as_json and fmt not in (None, "json"):
        raise click.UsageError(f"--json is --format json; it cannot be given with "
                               f"--format {fmt}")
    if fail_on is not None and exit_policy is not None:
        raise click.UsageError("--fail-on replaces --exit-policy; give one of them")
    settings = _scan_settings(config_file, isolated, select, ignore, exit_policy, fail_on,
                              baseline)
    exit_policy, fail_on = settings.exit_policy or "graded", settings.fail_on
    if scheduler is not None and engine == "local":
        raise click.UsageError("--scheduler runs on Dask; it cannot be given with "
                               "--engine local")
    if (workers is not None or threads is not None) and (engine != "dask" or scheduler):
        raise click.UsageError("--workers and --threads size the cluster --engine dask starts; "
                               "give them with --engine dask and without --scheduler")
    if output is not None and resume is not None:
        raise click.UsageError("--resume OUT writes OUT too; give one of --output, --resume")
    _check_scan_args(paths, output or resume)
    if scheduler is not None or engine is not None or resume is not None:
        if as_json or fmt not in (None, "jsonl"):
            raise click.UsageError("many-checkpoint runs write their own JSON Lines records; "
                                   "--format/--json cannot be given with --engine, "
                                   "--scheduler or --resume")
        if any(v is not None for v in (select, ignore, baseline, write_baseline)):
            raise click.UsageError("--select, --ignore, --baseline and --write-baseline "
                                   "apply to one report; not with --engine, --scheduler or "
                                   "--resume")
        _scan_many(paths, deep, not no_cache, jobs, engine == "dask" or scheduler is not None,
                   scheduler, output or resume, resume is not None, exit_policy, fail_on,
                   (workers, threads))
        return
    # one report, of every PATH together (the cross-file checks included): on
    # stdout, or in --output OUT in --format, else the format OUT's suffix names
    fmt = "json" if as_json else (fmt or _format_of(output) or settings.format or "text")
    with _scan_progress(enabled=fmt == "text" and output is None, deep=deep) as (
            progress, hashed):
        report = scan(paths, deep=deep, progress=progress, cache=not no_cache, jobs=jobs,
                      advance=hashed)
    report = _settle(report, settings, write_baseline)
    try:
        with _report_to(output):
            _write_report(report, fmt, exit_policy, fail_on)
    except BrokenPipeError:
        raise                                # (click ends quietly on a closed pipe)
    except OSError as e:
        _write_failed(output or "the report", e)
    sys.exit(exit_code(report, exit_policy, fail_on))


#: the report format an --output file's suffix names
_SUFFIX_FORMATS = {".json": "json", ".jsonl": "jsonl", ".sarif": "sarif", ".txt": "text",
                   ".md": "markdown"}


# -- grit scan in CI: the project's settings, code selection and baselines


def _scan_settings(config_file: str | None, isolated: bool, select: str | None,
                   ignore: str | None, exit_policy: str | None, fail_on: str | None,
                   baseline: str | None) -> scan_report.Settings:
    """The settings of this run: the project's file (``config_file``, else
    the one found walking up from the working directory, none under
    ``isolated``), then each flag given in place of its key."""
    try:
        found = config_file if config_file is not None else (
            None if isolated else scan_report.find_settings())
        s = scan_report.load_settings(found) if found is not None else scan_report.Settings()
        given: dict = {"baseline": baseline}
        if exit_policy is not None or fail_on is not None:   # the flags replace both keys
            s = dataclasses.replace(s, exit_policy=exit_policy, fail_on=fail_on)
        for key, v in (("select", select), ("ignore", ignore)):
            if v is not None:
                given[key] = scan_report.settings.parse_codes(f"--{key}", v)
        return s.with_cli(**given)
    except GritError as e:
        raise click.UsageError(str(e)) from None


def _settle(report, settings: scan_report.Settings, write_baseline: str | None):
    """``report`` under the settings' rules, then its baseline: the one
    written now (``write_baseline``: the findings that count), else the
    settings' (``--baseline`` or the file's ``baseline``)."""
    report = settings.apply(report)
    try:
        if write_baseline is not None:
            scan_report.write_baseline(report, write_baseline)
            return scan_report.apply_baseline(report, write_baseline)
        if settings.baseline is not None:
            return scan_report.apply_baseline(report, settings.baseline)
    except GritError as e:
        raise click.UsageError(str(e)) from None
    return report


def _format_of(path: str | None) -> str | None:
    if path is None:
        return None
    return next((f for s, f in _SUFFIX_FORMATS.items() if path.lower().endswith(s)), None)


@contextlib.contextmanager
def _report_to(path: str | None):
    """stdout, or the file ``path`` (written afresh) in its place."""
    if path is None:
        yield
        return
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as f, \
            contextlib.redirect_stdout(f):
        yield


def _write_report(report, fmt: str, exit_policy: str, fail_on) -> None:
    scan_report.write(report, fmt, exit_policy, fail_on=fail_on, version=__version__)
    sys.stdout.flush()


#: the exit status of a run whose output could not be written
WRITE_FAILED = 4


def _write_failed(what: str, e: OSError) -> None:
    """One line on stderr saying ``what`` could not be written, and exit
    WRITE_FAILED."""
    with contextlib.suppress(OSError, ValueError):
        click.echo(f"grit scan: cannot write {printable(what)}: "
                   f"{printable(e.strerror or str(e))}", err=True)
    sys.exit(WRITE_FAILED)


def _check_scan_args(paths, out: str | None) -> None:
    """What grit scan can check before it reads anything, as usage errors:
    the network policy and count limits in the environment, every URL and
    hf:// name among the PATHs (nothing is sent for a malformed one), and the
    output file (a regular file or a character device, in a folder that
    exists)."""
    try:
        NetPolicy.from_env()
        for name in LIMITS:
            limit(name)
    except GritError as e:
        raise click.UsageError(str(e)) from None
    for p in paths:
        try:
            if is_url(p):
                parse_url(p)
            elif is_hub(p):
                HubPath.parse(p)
        except GritError as e:
            raise click.BadParameter(str(e), param_hint="PATH") from None
    if out is not None:
        try:
            check_output(out)
        except GritError as e:
            raise click.BadParameter(str(e), param_hint="--output/--resume") from None


def _scan_many(paths, deep: bool, cache: bool, jobs: int, dask: bool, scheduler: str | None,
               out: str | None, resume: bool, policy: str, fail_on: str | None,
               size: tuple[int | None, int | None] = (None, None)) -> None:
    """grit scan over entries, one checkpoint each (grit.scan.distributed)."""
    from .scan import distributed as many  # noqa: PLC0415 - only these runs need it
    entries = many.entries_of(paths)
    sink = out if out is not None else click.get_text_stream("stdout")
    try:
        with _scan_progress(enabled=True, label="entries") as (progress, _):
            if not dask:
                run = many.scan_many(entries, deep=deep, cache=cache, jobs=jobs, out=sink,
                                     resume=resume, progress=progress)
            else:
                opened = (many.connect(scheduler) if scheduler is not None
                          else many.local_client(*size))
                with opened as client:
                    run = many.scan_many(entries, client=client, deep=deep, cache=cache,
                                         jobs=jobs, out=sink, resume=resume,
                                         progress=progress)
    except GritError as e:
        click.echo(f"grit scan: {printable(e)}", err=True)
        sys.exit(int(Severity.UNPARSED))
    except OSError as e:          # the output could not be written (or read, to resume)
        _write_failed(out if out is not None else "stdout", e)
    if run.skipped:
        click.echo(f"grit scan: {len(run.skipped)} of {len(entries)} entries already complete "
                   f"in {out}", err=True)
    for e, why in sorted(run.failed.items()):
        click.echo(f"grit scan: entry {printable(e)} failed: {printable(why)}", err=True)
    sys.exit(run.exit_code(policy, fail_on))


#: trees with at least this many model files get a progress bar (on a TTY only)
_PROGRESS_MIN_FILES = 8


def _size(n: int) -> str:
    """A byte count for people: 812 B, 8.0 KiB, 1.3 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


class _Bar:
    """The feeds of the progress bar: ``files(i, n, path)`` as each file is
    taken in, ``hashed(nbytes)`` as --deep hashes plane bytes (thread-safe:
    the worker threads of --jobs call it)."""

    def __init__(self, bar, min_files: int):
        self.bar, self.min_files = bar, min_files
        self.task = None
        self.total = 0
        self.done = 0
        self.nbytes = 0
        self.path = ""
        self.lock = threading.Lock()

    def _show(self) -> None:
        if self.task is None:
            if self.total < self.min_files:
                return
            self.bar.start()
            self.task = self.bar.add_task("", total=max(1, self.total))
        hashed = f"{_size(self.nbytes)} hashed  " if self.nbytes else ""
        self.bar.update(self.task, completed=self.done,
                        description=hashed + printable(os.path.basename(self.path)))

    def files(self, done: int, total: int, path: str) -> None:
        with self.lock:
            self.done, self.total, self.path = done, total, path
            self._show()

    def hashed(self, n: int) -> None:
        with self.lock:
            self.nbytes += n
            self._show()

    def stop(self) -> None:
        if self.task is not None:
            self.bar.stop()


@contextlib.contextmanager
def _scan_progress(enabled: bool, label: str = "scanning", deep: bool = False):
    """A rich progress bar on stderr, only on a terminal: for trees of at
    least _PROGRESS_MIN_FILES files, and under --deep for any input (with
    the plane bytes hashed so far), whatever the report's format, since the
    report goes to stdout; otherwise (None, None).  Yields the two feeds
    (files, hashed)."""
    if not (enabled or deep) or not sys.stderr.isatty():
        yield None, None
        return
    # rich is heavy to import and only a terminal's progress bar needs it
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn  # noqa: PLC0415
    bar = _Bar(Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.description}", markup=False),
                        console=Console(stderr=True), transient=True),
               1 if deep else _PROGRESS_MIN_FILES)
    try:
        yield bar.files, (bar.hashed if deep else None)
    finally:
        bar.stop()


def _explain_code(code: str, as_json: bool) -> None:
    if as_json:
        spec = REGISTRY[code]
        click.echo(json.dumps({
            "code": spec.code, "category": spec.category.value,
            "severity": int(spec.severity),
            "status": None if spec.status is None else status_name(spec.status),
            "title": spec.title, "what": spec.what, "why": spec.why, "fix": spec.fix},
            indent=2))
    else:
        click.echo(explain_code(code))


def _explain_status(status: str) -> None:
    try:
        s = Status(int(status)) if status.isdigit() else Status.from_spec_name(status)
    except (ValueError, GritError):
        raise click.BadParameter(
            f"{status!r}: expected a finding code (S101 …; grit scan shows them), one of "
            f"{', '.join(s.spec_name for s in Status)}, or two descriptors A B to diff them")
    what, fix = _STATUS_HELP[s]
    click.echo(f"{s.spec_name} ({int(s)})\n\nWhat it means: {what}\n\nFix: {fix}")


def _load_cases(target, shape, planes):
    t = "".join(target.split())
    if len(t) == 128 and all(c in "0123456789abcdefABCDEF" for c in t):
        if shape is None or planes is None:
            raise ValueError("a hex descriptor needs --shape and --planes")
        return [{"name": "descriptor", "desc_hex": t,
                 "shape": [int(x) for x in shape.split(",") if x.strip()],
                 "plane_bytes": [int(x) for x in planes.split(",")]}]
    data = loads_json(read_regular(target, MAX_CASES_FILE), target)
    cases = data.get("cases", data) if isinstance(data, dict) else data
    if not isinstance(cases, list):
        raise ValueError(f"{target}: expected a list of cases")
    return cases


@main.command("convert")
@click.argument("src", metavar="SRC")
@click.argument("dst", metavar="DST")
@click.option("--to", "to", type=click.Choice(sorted(
                  set(convert_mod.TARGETS) |
                  {t for c in convert_mod.CONTAINERS.values() for t in c.targets})),
              required=True,
              help="The convention to write: compressed-tensors, modelopt (NVFP4), gpt-oss "
                   "(MXFP4), grit (GRIT safetensors) or gguf (the GGUF llama.cpp loads).")
@click.option("--force", is_flag=True, help="Replace DST if it exists (once the new one is "
                                            "complete).")
@click.option("--allow-requant", is_flag=True,
              help="Re-quantise a weight the target cannot hold into the target's nearest "
                   "format (docs/convert.md) instead of refusing; each one is reported with "
                   "its error (max abs, RMS, ulps).")
@click.option("--jobs", "-j", type=click.IntRange(1, convert_mod.MAX_JOBS), default=1,
              show_default=True, help="Tensors handled at once (the output is the same).")
@click.option("--fsync", is_flag=True,
              help="Flush every output file to disk before DST is moved into place, so "
                   "that it survives a power loss once the command returns (off by "
                   "default, as for cp or a framework's save: it waits for the disk).")
@click.option("--json", "as_json", is_flag=True, help="Print the proof's summary as JSON.")
def convert_cmd(src: str, dst: str, to: str, force: bool, allow_requant: bool, jobs: int,
                fsync: bool, as_json: bool) -> None:
    """Move the safetensors checkpoint SRC (a file or a folder of shards) into
    the convention --to, as the folder DST, without re-quantising: element
    codes and scale bytes are moved, never re-derived.  A weight the target
    cannot hold refuses the whole conversion, with the reason, before
    anything is written (--allow-requant: it is re-quantised into the
    target's nearest format and reported).  DST holds the model files,
    config.json (the target's quantisation entry in place of the source's),
    the files that were beside SRC, and grit-proof.json: per weight the
    source's and the target's gid, grade and plane digests and the decode
    verdict (bit-exact; scalar-rounded with the elements that differ and by
    how many ulps; re-quantised with the max abs, RMS and ulps error).
    `grit verify SRC DST` re-derives every verdict.  --to gguf writes
    DST/model.gguf for llama.cpp (llama, mistral, qwen2, qwen3, gemma3), and
    a .gguf SRC converts to the safetensors conventions.

    \b
    Examples:
      grit convert ./llama-nvfp4-ct ./llama-nvfp4-modelopt --to modelopt
      grit convert ./model.safetensors ./model-grit --to grit
      grit convert ./llama-nvfp4-ct ./llama-gguf --to gguf
      grit convert hf://org/model-mxfp4 ./model-nvfp4 --to modelopt --allow-requant -j 4
    Exit status: 0 written (every verdict bit-exact), 3 written with
    scalar-rounded or re-quantised weights, 2 refused or unreadable."""
    try:
        with _convert_progress() as progress:
            rep = convert_mod.convert(src, dst, to, overwrite=force, progress=progress,
                                      allow_requant=allow_requant, jobs=jobs, fsync=fsync)
    except (GritError, OSError) as e:
        _die(e, as_json)
    changed = rep.counts.get("scalar-rounded", 0) + rep.counts.get("re-quantised", 0)
    if as_json:
        click.echo(json.dumps({"dst": rep.dst, "to": to, "verdicts": rep.counts,
                               "proof": os.path.join(rep.dst, convert_mod.PROOF_FILE),
                               "requantised": {w["name"]: w["verdict"]
                                               for w in rep.proof["weights"]
                                               if w["verdict"]["verdict"] == "re-quantised"}}))
    else:
        n = sum(rep.counts.values())
        click.echo(f"{n} weight(s) written as {to} to {rep.dst}: "
                   + ", ".join(f"{v} {k}" for k, v in sorted(rep.counts.items())))
        for w in rep.proof["weights"]:
            v = w["verdict"]
            if v["verdict"] == "re-quantised":
                click.echo(f"  {printable(w['name'])}: re-quantised into "
                           f"{w['requant']['into']}: max abs {v['max_abs']:.6g}, RMS "
                           f"{v['rms']:.6g}, max {v['max_ulps']} ulp(s); {v['differ']} of "
                           f"{v['elements']} elements differ"
                           + (f", {v['nonfinite']} of them not finite"
                              if v["nonfinite"] else ""))
            elif v["verdict"] != "bit-exact":
                click.echo(f"  {printable(w['name'])}: {v['differ']} of {v['elements']} "
                           f"elements differ, at most {v['max_ulps']} ulp(s); "
                           + "; ".join(w["notes"]))
        click.echo(f"proof: {os.path.join(rep.dst, convert_mod.PROOF_FILE)}")
    sys.exit(3 if changed else 0)


@contextlib.contextmanager
def _convert_progress():
    """grit convert's progress bar on stderr, only on a terminal: the model
    file being written or proved and the bytes done; otherwise None."""
    if not sys.stderr.isatty():
        yield None
        return
    # rich is heavy to import and only a terminal's progress bar needs it
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import (BarColumn, Progress, TextColumn,  # noqa: PLC0415
                               TimeRemainingColumn)
    bar = Progress(TextColumn("converting"), BarColumn(),
                   TextColumn("{task.percentage:>3.0f}%"), TimeRemainingColumn(),
                   TextColumn("{task.description}", markup=False),
                   console=Console(stderr=True), transient=True)
    task = None

    def update(path: str, done: int | None = None, total: int | None = None) -> None:
        # (a converter that counts no bytes calls it with the file alone)
        nonlocal task
        if task is None:
            bar.start()
            task = bar.add_task("", total=max(1, total or 1))
        name = printable(path.split("?")[0].rstrip("/").rsplit("/", 1)[-1])
        if done is None or total is None:
            bar.update(task, description=name)
        else:
            bar.update(task, completed=done, total=max(1, total), description=name)

    try:
        yield update
    finally:
        if task is not None:
            bar.stop()


@main.command("verify")
@click.argument("src", metavar="SRC")
@click.argument("dst", metavar="DST")
@click.option("--proof", default=None, metavar="PROOF.json",
              help="The proof to check against (default: DST's grit-proof.json, whose SHA-256 "
                   "must be the one DST's config.json records). A DST on a server (hf:// or "
                   "https://) needs it: a local copy, beside which its files are read one "
                   "at a time.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def verify_cmd(src: str, dst: str, proof: str | None, as_json: bool) -> None:
    """Re-derive every verdict of `grit convert SRC DST` from the two
    checkpoints alone (gids, grades, plane digests, the decodes compared
    element by element) and compare them with the proof.  Exit status: 0 the
    proof holds, 1 a disagreement (each one printed), 2 unreadable input."""
    try:
        rep = convert_mod.verify(src, dst, proof)
    except (GritError, OSError) as e:
        _die(e, as_json)
    if as_json:
        click.echo(json.dumps({"ok": rep.ok, "checked": rep.checked, "problems": rep.problems}))
    else:
        for p in rep.problems:
            click.echo(f"disagrees: {p}")
        click.echo(f"{rep.checked} weight(s) checked: "
                   + ("the proof holds" if rep.ok else f"{len(rep.problems)} disagreement(s)"))
    sys.exit(0 if rep.ok else 1)


# ---------------------------------------------------------------------------
# grit info


@main.command("info")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--json", "as_json", is_flag=True,
              help="Machine-readable output (docs/info.md, \"JSON\": schema grit-info/1).")
@click.option("--no-cache", "no_cache", is_flag=True,
              help="Read remote headers afresh (do not use or fill the header cache).")
def info_cmd(paths, as_json: bool, no_cache: bool) -> None:
    """List every tensor of safetensors / GGUF checkpoints, as gguf-dump does,
    with its GRIT grade, and the totals a machine is sized by.

    PATH is what grit scan takes: a .safetensors or .gguf file, a folder (its
    shards, with their index), a *.safetensors.index.json, an http(s) URL or
    hf://ORG/REPO[@REVISION][/PATH]; a shard of a split GGUF model (or its
    folder) is the model, every shard listed.  Headers alone are read (and
    the few small tensors a convention is recognised by).

    \b
    Per tensor: parameters, shape, the name the ecosystem knows its format by
    (Q4_K, nvfp4-pack-quantized, BF16 …), the convention (ggml, grit,
    compressed-tensors …), bytes at rest, the GRIT grade (registered name or
    canonical string) and the name; a recognised quantised weight is one row
    holding its scale tensors.  Totals: parameters, bytes at rest, bytes per
    parameter, bytes decoded to bf16 and to f32.

    \b
    Example:  grit info model.gguf
              grit info --json ./llama-nvfp4/ > info.json
    Exit status: 0 listed, 4 an input cannot be read (the message names it),
    2 a usage error.
    """
    _check_scan_args(paths, None)
    try:
        got = info_mod.info(list(paths), cache=not no_cache)
    except GritError as e:
        _die(e, as_json, code=info_mod.EXIT_UNREADABLE)
    if as_json:
        click.echo(json.dumps(got.to_dict(), indent=2))
    else:
        click.echo(info_mod.render(got, printable))
    sys.exit(info_mod.EXIT_OK)


#: the largest case file grit check reads
MAX_CASES_FILE = 64 << 20
_CASE_TYPES = {"name": str, "desc_hex": str, "shape": list, "plane_bytes": list,
               "grades": list}


def _check_case(c, i: int) -> None:
    """One case of a case file checked against its schema (a ValueError
    saying what is wrong): an object with desc_hex (a string), shape and
    plane_bytes (lists of integers), and optionally name (a string) and
    grades (a list of strings)."""
    if not isinstance(c, dict):
        raise ValueError(f"case {i}: a case is a JSON object, got {type(c).__name__}")
    missing = [k for k in ("desc_hex", "shape", "plane_bytes") if k not in c]
    if missing:
        raise ValueError(f"case {i}: missing {', '.join(missing)}")
    for k, t in _CASE_TYPES.items():
        if k in c and not isinstance(c[k], t):
            raise ValueError(f"case {i}: {k} must be a {t.__name__}, got {type(c[k]).__name__}")
    for k in ("shape", "plane_bytes"):
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in c[k]):
            raise ValueError(f"case {i}: {k} must hold integers")
    if not all(isinstance(g, str) for g in c.get("grades", [])):
        raise ValueError(f"case {i}: grades must hold strings")


def _die(e: Exception, as_json: bool, code: int = 2):
    if as_json:
        click.echo(json.dumps({"error": type(e).__name__, "message": str(e)}))
    else:
        first, *more = str(e).splitlines() or [""]
        click.echo(f"error: {printable(first)}", err=True)
        for line in more:
            click.echo(printable(line), err=True)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
