"""The output end of ``grit scan``: the :class:`ScanReport` a scan returns
and its forms — JSON (schema version 1, streamed), JSON Lines, SARIF 2.1.0
and the human report (plain text, streamed) — with the §13 exit codes and
``--fail-on`` and the byte accounting behind them.

One module each: :mod:`.report` (the report), :mod:`.accounting` (which
bytes of each file were checked, where each tensor's bytes lie),
:mod:`.policy` (the exit codes), :mod:`.text`, :mod:`.json`, :mod:`.sarif`
(the renderers)."""
from __future__ import annotations

from .accounting import Coverage, Ranges, account, attach_ranges
from .json import no_lone_surrogates, write_json, write_jsonl
from .policy import FAIL_ON, exit_code
from .report import SCHEMA_VERSION, ScanReport
from .sarif import SARIF_SCHEMA, to_sarif, write_sarif
from .text import render

__all__ = ["ScanReport", "Coverage", "Ranges", "exit_code", "render", "write_json",
           "write_jsonl", "write_sarif", "to_sarif", "account", "attach_ranges", "FORMATS",
           "FAIL_ON", "SCHEMA_VERSION", "SARIF_SCHEMA", "no_lone_surrogates"]

#: the output formats of ``grit scan --format``
FORMATS = ("text", "json", "jsonl", "sarif")
