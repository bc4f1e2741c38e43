"""The SARIF 2.1.0 log of a scan: :func:`to_sarif`, :func:`write_sarif`."""
from __future__ import annotations

import json
import os
import pathlib
import sys
import urllib.parse
from typing import Any, Iterator

from ..findings import REGISTRY, SECTIONS, Severity, status_name
from .json import no_lone_surrogates
from .policy import exit_code
from .record import Record
from .report import ScanReport

__all__ = ["to_sarif", "write_sarif", "sarif_rules", "SARIF_SCHEMA", "SARIF_VERSION"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
#: SARIF result level of each severity
SARIF_LEVEL = {Severity.STRUCTURAL: "error", Severity.DISAGREEMENT: "warning",
               Severity.WARNING: "note", Severity.UNPARSED: "error", Severity.NOTE: "none"}


def _camel(title: str) -> str:
    words = "".join(c if c.isalnum() else " " for c in title).split()
    return "".join(w[:1].upper() + w[1:] for w in words) or "Finding"


def sarif_rules() -> list[dict]:
    """One SARIF reportingDescriptor per finding code of the registry."""
    rules = []
    for code in sorted(REGISTRY):
        spec = REGISTRY[code]
        status = None if spec.status is None else status_name(spec.status)
        rules.append({
            "id": code, "name": _camel(spec.title),
            "shortDescription": {"text": spec.title},
            "fullDescription": {"text": f"{spec.what} {spec.why}"},
            "help": {"text": f"Fix: {spec.fix}  (grit explain {code})"},
            "defaultConfiguration": {"level": SARIF_LEVEL[spec.severity]},
            "properties": {"category": spec.category.value, "severity": int(spec.severity),
                           "severity_name": spec.severity.label, "status": status,
                           "section": SECTIONS.get(spec.category)}})
    return rules


def _uri(path: str) -> dict:
    """An artifactLocation for ``path``: a relative path as a relative URI
    against %SRCROOT% (the working directory), an absolute one as a file URI."""
    raw = os.fsencode(path)
    if os.path.isabs(path):             # (a byte that is not UTF-8 is %-encoded as itself)
        return {"uri": "file://" + urllib.parse.quote(raw)}
    return {"uri": urllib.parse.quote(raw.replace(os.sep.encode(), b"/")),
            "uriBaseId": "SRCROOT"}


def _region(br) -> dict | None:
    if isinstance(br, dict) and isinstance(br.get("offset"), int) \
            and isinstance(br.get("length"), int) and br["offset"] >= 0 and br["length"] >= 0:
        return {"byteOffset": br["offset"], "byteLength": br["length"]}
    return None


def _results(report: ScanReport, artifacts: dict[str, int]) -> Iterator[dict]:
    index = {code: i for i, code in enumerate(sorted(REGISTRY))}
    uris: dict[str, dict] = {}
    cwd = os.getcwd()
    for f in report.findings:
        d = Record.of(f, cwd).to_dict()
        text = f.message if not f.lines else f.message + "\n" + "\n".join(f.lines)
        res: dict[str, Any] = {"ruleId": f.code, "ruleIndex": index[f.code],
                               "level": SARIF_LEVEL[f.severity], "message": {"text": text}}
        if f.file:
            u = uris.get(f.file)
            if u is None:
                u = uris[f.file] = _uri(f.file)
            loc: dict[str, Any] = dict(u)
            if f.file in artifacts:
                loc["index"] = artifacts[f.file]
            phys: dict[str, Any] = {"artifactLocation": loc}
            br = f.detail.get("byte_range")
            reg = _region(br)
            if reg is not None:
                phys["region"] = reg
            location: dict[str, Any] = {"physicalLocation": phys}
            group = f.detail.get("tensors")
            if f.tensor and not (isinstance(group, list) and f.tensor not in group):
                location["logicalLocations"] = [{"name": f.tensor, "kind": "member"}]
            res["locations"] = [location]
            related: list[dict] = []

            def relate(text: str, name: str, r) -> None:
                reg = _region(r)
                if reg is not None:
                    related.append({"id": len(related), "message": {"text": text},
                                    "physicalLocation": {"artifactLocation": loc,
                                                         "region": reg},
                                    "logicalLocations": [{"name": name, "kind": "member"}]})

            # a tensor of several planes: each plane but the one the region is
            if isinstance(br, dict) and isinstance(br.get("planes"), dict):
                for role, r in br["planes"].items():
                    if _region(r) != reg:
                        relate(f"{f.tensor}: {role} plane", str(f.tensor), r)
            # several tensors: each tensor, or each plane of a tensor of several
            brs = f.detail.get("byte_ranges")
            if isinstance(brs, dict):
                for name, r in brs.items():
                    planes = r.get("planes") if isinstance(r, dict) else None
                    if isinstance(planes, dict):
                        for role, pr in planes.items():
                            relate(f"{name}: {role} plane", str(name), pr)
                    else:
                        relate(str(name), str(name), r)
            if related:
                res["relatedLocations"] = related
        res["properties"] = {"category": d["category"], "severity": d["severity"],
                             "status": d["status"], "tensor": d["tensor"],
                             "detail": d["detail"],
                             **{k: d[k] for k in ("role", "label", "omitted") if k in d},
                             "consequences": d["consequences"]}
        res["partialFingerprints"] = {"gritFinding/v1": d["fingerprint"]}
        if report.baseline is not None:     # the findings a baseline held are not listed
            res["baselineState"] = "new"
        yield res


def _sarif_run(report: ScanReport, policy: str, fail_on: str | None,
               version: str | None) -> tuple[dict, dict[str, int]]:
    """The run object of the SARIF log, less its results, and the artifact
    index of each file."""
    artifacts: dict[str, int] = {}
    arts: list[dict] = []
    for sf in report.files:
        if sf.path in artifacts:
            continue
        artifacts[sf.path] = len(arts)
        a: dict[str, Any] = {"location": _uri(sf.path)}
        try:
            a["length"] = os.stat(sf.path).st_size
        except (OSError, ValueError):
            pass
        if sf.format:
            a["properties"] = {"format": sf.format, "parsed": sf.parsed}
        arts.append(a)
    driver: dict[str, Any] = {"name": "grit", "rules": sarif_rules()}
    if version:
        driver["version"] = version
    code = exit_code(report, policy, fail_on)
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "originalUriBaseIds": {"SRCROOT": {"uri": pathlib.Path(os.getcwd()).as_uri() + "/"}},
        "invocations": [{"executionSuccessful": True, "exitCode": code}],
        "artifacts": arts,
        "properties": {**report._head(policy, fail_on), "summary": report.summary(),
                       "coverage": report.coverage_dict()}}
    return run, artifacts


def to_sarif(report: ScanReport, policy: str = "graded", fail_on: str | None = None,
             version: str | None = None) -> dict:
    """The SARIF 2.1.0 log of a scan: one run of the ``grit`` tool, one rule
    per finding code (:data:`REGISTRY`: id, name, short / full description,
    help, default level from the severity), one result per finding (the file
    as artifact location; the tensor's byte range in the file, where known,
    as the region's byteOffset / byteLength; other planes and several
    tensors' ranges as related locations), the scanned files as artifacts
    (with their size), and the coverage, summary and exit codes as run
    properties."""
    run, artifacts = _sarif_run(report, policy, fail_on, version)
    run["results"] = list(_results(report, artifacts))
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def write_sarif(report: ScanReport, policy: str, file=None, fail_on: str | None = None,
                version: str | None = None) -> None:
    """The SARIF 2.1.0 log (``--format sarif``): :func:`to_sarif`'s log,
    written result by result as each is formed (the results are never held
    together), one result a line.  ASCII."""
    out = file if file is not None else sys.stdout
    run, artifacts = _sarif_run(report, policy, fail_on, version)
    head = no_lone_surrogates(json.dumps(run, indent=2, default=str))   # the run less results
    pad = " " * 8
    out.write(f'{{\n  "$schema": {json.dumps(SARIF_SCHEMA)},\n  "version": '
              f'{json.dumps(SARIF_VERSION)},\n  "runs": [\n    '
              + head[:-1].rstrip().replace("\n", "\n    ") + ',\n      "results": [')
    enc = json.JSONEncoder(default=str)        # one result a line (the C encoder)
    sep = "\n"
    for res in _results(report, artifacts):
        out.write(sep + pad + no_lone_surrogates(enc.encode(res)))
        sep = ",\n"
    out.write(("\n      ]" if sep != "\n" else "]") + "\n    }\n  ]\n}\n")
    out.flush()
