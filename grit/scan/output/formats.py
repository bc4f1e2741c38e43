"""The report formats of ``grit scan --format``, one writer each
(:data:`WRITERS`), and :func:`write`, the one dispatch."""
from __future__ import annotations

from typing import IO, Callable

from .json import write_json, write_jsonl
from .markdown import write_markdown
from .report import ScanReport
from .sarif import write_sarif
from .text import render

__all__ = ["WRITERS", "FORMATS", "write"]


def _sarif(report: ScanReport, policy: str, file=None, fail_on: str | None = None,
           version: str | None = None) -> None:
    write_sarif(report, policy, file=file, fail_on=fail_on, version=version)


def _plain(writer) -> Callable[..., None]:
    def w(report: ScanReport, policy: str, file=None, fail_on: str | None = None,
          version: str | None = None) -> None:
        writer(report, policy, file=file, fail_on=fail_on)
    return w


#: the report formats of ``grit scan --format``, each with its writer
#: ``(report, policy, file=None, fail_on=None, version=None)``
WRITERS: dict[str, Callable[..., None]] = {
    "text": _plain(render), "json": _plain(write_json), "jsonl": _plain(write_jsonl),
    "sarif": _sarif, "markdown": _plain(write_markdown)}
#: the output formats of ``grit scan --format``
FORMATS = tuple(WRITERS)


def write(report: ScanReport, fmt: str, policy: str = "graded", file: IO[str] | None = None,
          fail_on: str | None = None, version: str | None = None) -> None:
    """Write ``report`` in the format ``fmt`` (:data:`FORMATS`) to ``file``
    (default stdout)."""
    WRITERS[fmt](report, policy, file=file, fail_on=fail_on, version=version)
