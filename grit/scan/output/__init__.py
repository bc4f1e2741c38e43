"""The output end of ``grit scan``: the :class:`ScanReport` a scan returns
and its forms — JSON (schema version 2, streamed; its JSON Schema ships as
``schema.json``), JSON Lines, SARIF 2.1.0, markdown and the human report
(plain text, streamed) — with the §13 exit codes and ``--fail-on``, the
byte accounting behind them, baselines and a project's settings.

One module each: :mod:`.report` (the report), :mod:`.record` (a finding as
the reports give it, and its identity across runs), :mod:`.accounting`
(which bytes of each file were checked, where each tensor's bytes lie),
:mod:`.policy` (the exit codes), :mod:`.baseline`, :mod:`.settings`
(``[tool.grit.scan]``), and one per renderer, registered in
:data:`WRITERS`: :mod:`.text`, :mod:`.json`, :mod:`.sarif`,
:mod:`.markdown`."""
from __future__ import annotations

from .accounting import Coverage, Ranges, account, attach_ranges
from .baseline import apply_baseline, read_baseline, write_baseline
from .json import no_lone_surrogates, schema, write_json, write_jsonl
from .formats import FORMATS, WRITERS, write
from .markdown import write_markdown
from .policy import FAIL_ON, exit_code
from .record import ByteRange, Record
from .report import SCHEMA_VERSION, ScanReport
from .sarif import SARIF_SCHEMA, to_sarif, write_sarif
from .settings import Settings, find_settings, load_settings
from .text import render

__all__ = ["ScanReport", "Record", "ByteRange", "Coverage", "Ranges", "exit_code", "render",
           "write_json", "write_jsonl", "write_sarif", "write_markdown", "to_sarif", "write",
           "account", "attach_ranges", "FORMATS", "WRITERS", "FAIL_ON", "SCHEMA_VERSION",
           "SARIF_SCHEMA", "no_lone_surrogates", "schema", "apply_baseline", "read_baseline",
           "write_baseline", "Settings", "find_settings", "load_settings"]
