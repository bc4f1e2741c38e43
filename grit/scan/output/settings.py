"""A project's settings for ``grit scan``: ``[tool.grit.scan]`` in
``pyproject.toml``, or ``[scan]`` in ``.grit.toml`` (which wins when both
are in one folder), found by walking up from the working directory — the
first folder that has either is the project's (ruff's rule).

Keys (all optional)::

    select = ["S1", "S3"]        # only codes starting so count (default: all)
    ignore = ["S601", "S7"]      # codes starting so never count
    per-file-ignores = { "vendor/**" = ["S1"], "*.gguf" = ["S602"] }
    exit-policy = "graded"       # or "simple"
    fail-on = "disagreement"     # structural | disagreement | warning
    format = "text"              # text | json | jsonl | sarif | markdown
    baseline = "grit-baseline.json"

A code pattern is a code or a prefix of codes (``S1`` is every structural
code).  A ``per-file-ignores`` glob is matched against the finding's file
relative to the settings' folder (``/`` between parts; ``*`` matches within
a name, ``**`` across folders) and against the file's name alone.  The
``baseline`` path is relative to the settings' folder.  A finding the rules
drop is not listed, not counted by the exit status, and counted in the
report's ``suppressed``.  Command-line flags override the file."""
from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from ..._files import read_regular
from ...errors import GritUsageError
from ...io.hub import is_remote
from ..findings import REGISTRY, Finding
from .formats import FORMATS
from .policy import FAIL_ON
from .report import ScanReport

if sys.version_info >= (3, 11):
    import tomllib
else:                                    # the same parser, before 3.11
    import tomli as tomllib

__all__ = ["Settings", "find_settings", "load_settings", "parse_codes", "SETTINGS_FILES"]

#: the files that hold settings, in the order one folder's are taken
SETTINGS_FILES = (".grit.toml", "pyproject.toml")
_KEYS = {"select", "ignore", "per-file-ignores", "exit-policy", "fail-on", "format",
         "baseline"}
_MAX_SETTINGS = 4 << 20


@dataclass(frozen=True, kw_only=True)
class Settings:
    """One project's settings (see the module's docstring); ``root`` is
    the folder of the file they came from (None: no file)."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exit_policy: str | None = None
    fail_on: str | None = None
    format: str | None = None
    baseline: str | None = None
    root: str | None = None
    source: str | None = None
    _globs: tuple[tuple[re.Pattern, tuple[str, ...]], ...] = field(default=(), repr=False,
                                                                   compare=False)

    def with_cli(self, **given: Any) -> "Settings":
        """These settings with each value the command line gave (not None)
        in place of the file's."""
        return dataclasses.replace(self, **{k: v for k, v in given.items() if v is not None})

    def counts(self, f: Finding) -> bool:
        """Whether the rules keep ``f``."""
        if self.select and not f.code.startswith(self.select):
            return False
        if self.ignore and f.code.startswith(self.ignore):
            return False
        if self._globs and f.file and not is_remote(f.file):
            rel = _relative(f.file, self.root or os.getcwd())
            name = rel.rsplit("/", 1)[-1]
            for rx, codes in self._globs:
                if (rx.fullmatch(rel) or rx.fullmatch(name)) and f.code.startswith(codes):
                    return False
        return True

    def apply(self, report: ScanReport) -> ScanReport:
        """``report`` with the findings the rules drop taken out (and counted
        in ``suppressed``)."""
        keep = [f for f in report.findings if self.counts(f)]
        return dataclasses.replace(report, findings=keep,
                                   suppressed=report.suppressed + len(report.findings)
                                   - len(keep))


def _relative(path: str, root: str) -> str:
    try:
        rel = os.path.relpath(os.path.abspath(path), root)
    except ValueError:
        rel = path
    return rel.replace(os.sep, "/")


def _glob(pattern: str) -> re.Pattern:
    """A glob as a regex: ``**/`` any folders (or none), ``**`` anything,
    ``*`` and ``?`` within one name, ``[…]`` as fnmatch has it."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            j = pattern.find("]", i + 2)
            if j < 0:
                out.append(re.escape("["))
                i += 1
            else:                        # fnmatch's translation of one class
                out.append(fnmatch.translate(pattern[i:j + 1])[4:-3])
                i = j + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.S)


def _codes(where: str, key: str, v: Any) -> tuple[str, ...]:
    if not (isinstance(v, list) and all(isinstance(c, str) for c in v)):
        raise GritUsageError(f"{where}: {key} must be a list of codes")
    for c in v:
        if not any(code.startswith(c.upper()) for code in REGISTRY) or not c:
            raise GritUsageError(f"{where}: {key}: {c!r} is no finding code or prefix of one "
                                 "(grit explain CODE)")
    return tuple(c.upper() for c in v)


def parse_codes(option: str, text: str) -> tuple[str, ...]:
    """A comma-separated list of codes or prefixes (``--select S1,S301``)."""
    return _codes("grit scan", option, [c.strip() for c in text.split(",") if c.strip()])


def _choice(where: str, key: str, v: Any, choices) -> str:
    if v not in choices:
        raise GritUsageError(f"{where}: {key} must be one of {', '.join(choices)}, not {v!r}")
    return v


def parse_settings(table: Any, where: str, root: str | None) -> Settings:
    """The settings of one TOML table (``where`` names it in errors)."""
    if not isinstance(table, dict):
        raise GritUsageError(f"{where}: must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise GritUsageError(f"{where}: unknown key {unknown[0]!r} (known: "
                             f"{', '.join(sorted(_KEYS))})")
    pfi = table.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise GritUsageError(f"{where}: per-file-ignores must be a table of glob = [codes]")
    per = tuple((g, _codes(where, f"per-file-ignores {g!r}", c)) for g, c in pfi.items())
    if "exit-policy" in table and "fail-on" in table:
        raise GritUsageError(f"{where}: fail-on replaces exit-policy; give one of them")
    base = table.get("baseline")
    if base is not None and not isinstance(base, str):
        raise GritUsageError(f"{where}: baseline must be a path")
    return Settings(
        select=_codes(where, "select", table.get("select", [])),
        ignore=_codes(where, "ignore", table.get("ignore", [])),
        per_file_ignores=per,
        exit_policy=None if "exit-policy" not in table else _choice(
            where, "exit-policy", table["exit-policy"], ("graded", "simple")),
        fail_on=None if "fail-on" not in table else _choice(
            where, "fail-on", table["fail-on"], tuple(FAIL_ON)),
        format=None if "format" not in table else _choice(
            where, "format", table["format"], FORMATS),
        baseline=None if base is None else os.path.join(root or "", base),
        root=root, source=where,
        _globs=tuple((_glob(g), codes) for g, codes in per))


def load_settings(path: str) -> Settings:
    """The settings of one file: ``[scan]`` of a ``.grit.toml`` (or any other
    name), ``[tool.grit.scan]`` of a ``pyproject.toml`` (empty settings
    when it has none)."""
    try:
        doc = tomllib.loads(read_regular(path, _MAX_SETTINGS).decode("utf-8"))
    except OSError as e:
        raise GritUsageError(f"cannot read {path}: {e.strerror or e}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise GritUsageError(f"{path}: not TOML: {e}") from None
    root = os.path.dirname(os.path.abspath(path))
    if os.path.basename(path) == "pyproject.toml":
        table = doc.get("tool", {}).get("grit", {}).get("scan") \
            if isinstance(doc.get("tool"), dict) and isinstance(doc["tool"].get("grit"), dict) \
            else None
        if table is None:
            return Settings(root=root)
        return parse_settings(table, f"{path} [tool.grit.scan]", root)
    return parse_settings(doc.get("scan", {}), f"{path} [scan]", root)


def _has_table(path: str) -> bool:
    if os.path.basename(path) != "pyproject.toml":
        return True
    try:
        doc = tomllib.loads(read_regular(path, _MAX_SETTINGS).decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False         # not this project's settings file: walk on
    tool = doc.get("tool")
    return isinstance(tool, dict) and isinstance(tool.get("grit"), dict) \
        and "scan" in tool["grit"]


def find_settings(start: str | None = None) -> str | None:
    """The settings file of the project ``start`` (default: the working
    directory) is in: walking up, the first ``.grit.toml``, or
    ``pyproject.toml`` with a ``[tool.grit.scan]`` table."""
    d = os.path.abspath(start if start is not None else os.getcwd())
    while True:
        for name in SETTINGS_FILES:
            p = os.path.join(d, name)
            if os.path.isfile(p) and _has_table(p):
                return p
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up
