"""The human report of ``grit scan`` (plain text, streamed): :func:`render`."""
from __future__ import annotations

import io
import os
import re
import sys
from typing import Iterable, Mapping

from ..._text import printable
from ...io.hub import is_remote
from ..findings import CATEGORIES, SEVERITY, Category, Finding, Severity
from .accounting import GGML, NOT_CHECKABLE, Coverage
from .policy import VERDICT, exit_code
from .record import ROLE_CODES
from .report import ScanReport

__all__ = ["render", "coverage_line", "fill", "wrap"]


#: SGR colours of the severity labels (on a terminal only)
_SEVERITY_STYLE = {Severity.STRUCTURAL: "1;31", Severity.DISAGREEMENT: "1;33",
                   Severity.WARNING: "36", Severity.UNPARSED: "1;31", Severity.NOTE: "2"}


def _use_color(out) -> bool:
    """Colour on a terminal, unless NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _width(out) -> int:
    """The terminal's width (80 when it cannot be told)."""
    try:
        return max(40, os.get_terminal_size(out.fileno()).columns)
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        try:
            return max(40, int(os.environ.get("COLUMNS", "80")))
        except ValueError:
            return 80


_IN_WORD = re.compile(r"[^ ][(\[{]")


def _tokens(text: str) -> list[str]:
    """``text`` split at its spaces, except those inside a bracket opened
    within a word: a word is never split, and a grade string
    ``GRIT1(esr=ocpmx, s0=ue8m0, k0=32, e=fp4)`` or an indexed name stays
    whole."""
    if _IN_WORD.search(text) is None:        # no bracket opened inside a word
        return [t for t in text.split(" ") if t]
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        # a bracket opened inside a word (grit1(…), x[…]) holds its group
        # together; a parenthesis that starts a word is prose and may break
        if ch in "([{" and (depth or cur):
            depth += 1
        elif ch in ")]}" and depth:
            depth -= 1
        if ch == " " and depth == 0:
            if cur:
                out.append("".join(cur))
                cur = []
            continue
        cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def fill(tokens: Iterable[str], width: int, indent: str, first: str | None = None) -> list[str]:
    """``tokens`` joined by spaces and filled to ``width`` columns, breaking
    only between tokens (one longer than the line stands alone on its line,
    whole); the first line begins with ``first`` (default ``indent``), the
    others with ``indent``."""
    lines: list[str] = []
    cur = ""
    lead = indent if first is None else first
    for tok in tokens:
        if cur and len(lead) + len(cur) + 1 + len(tok) > width:
            lines.append(lead + cur)
            lead, cur = indent, tok
        else:
            cur = f"{cur} {tok}" if cur else tok
    lines.append(lead + cur)
    return lines


def wrap(text: str, width: int, indent: str) -> list[str]:
    """``text`` filled to ``width`` columns after ``indent`` (continuation
    lines two columns further in), breaking only between :func:`_tokens`."""
    return fill(_tokens(text), width, indent + "  ", indent)


_GROUP = re.compile(r"^(\d+ tensors:) (.+)$", re.S)


def _name_tokens(text: str) -> list[str]:
    """A finding's tensor field as tokens: one name is one token (a name is
    never broken, spaces and all); ``N tensors: a, b, c`` breaks only after
    the commas between names."""
    m = _GROUP.match(text)
    if m is None:
        return [text]
    names = m[2].split(", ")
    return m[1].split(" ") + [n + "," for n in names[:-1]] + names[-1:]


def _inferred_title(fs: list[Finding]) -> str:
    srcs: list[str] = []
    for f in fs:
        src = f.detail.get("inferred_from")
        if not isinstance(src, str):
            src = GGML if f.code in ("S602", "S603", "S604") else "a recognised convention"
        if src not in srcs:
            srcs.append(src)
    return ("Inferred descriptors (no GRIT metadata in the file; inferred from "
            + "; ".join(printable(s) for s in sorted(srcs)) + ")")


def coverage_line(c: Coverage) -> str:
    """The coverage line of the human report."""
    def why(d: dict[str, int], words: Mapping[str, str]) -> str:
        if not d:
            return ""
        return " (" + ", ".join(f"{printable(words.get(k, k))} {n:,}"
                                for k, n in sorted(d.items())) + ")"

    return (f"coverage: {c.total:,} tensor bytes — {c.checked:,} checked (descriptor "
            f"recorded), {c.inferred_total:,} checked against an inferred descriptor"
            f"{why(c.inferred, {})}, {c.not_checkable_total:,} not checkable"
            f"{why(c.not_checkable, NOT_CHECKABLE)}")


def render(report: ScanReport, policy: str, file=None, fail_on: str | None = None) -> None:
    """The human report, written as it is formed (one finding at a time, in
    time and memory linear in the findings): per category a title line, then
    each finding — severity, code and status; file; tensor; the message and
    its derivation lines; how many more of its code in its file were not
    listed — then the coverage line and a summary line with the exit codes.

    On a terminal the labels are aligned, colour is used (unless NO_COLOR)
    and messages are filled to the terminal's width, breaking only between
    words (never inside a file name, a word or a bracketed grade string);
    written to a pipe or a file nothing is padded or wrapped: each message is
    one line and each label is followed by ``: ``.

    Every text from a file passes :func:`grit.explain.printable`; the only
    escape sequences written are the colours, and only on a terminal."""
    out = file if file is not None else sys.stdout
    color = _use_color(out)
    tty = _is_tty(out)
    width = _width(out) if tty else 0
    P = printable

    def sgr(text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if color and code else text

    def text_rows(text: str, indent: str, style: str = "") -> list[str]:
        if not tty:
            return [sgr(indent + text, style)]
        return [sgr(ln, style) for ln in wrap(text, width, indent)]

    def label(name: str) -> str:
        return f"{name:<6}  " if tty else f"{name}: "

    cwd = os.getcwd()
    shown: dict[str, str] = {}              # path -> how it is shown (relpath is slow)

    def where(p: str | None) -> str:
        if not p:
            return "-"
        got = shown.get(p)
        if got is None:
            if is_remote(p):                # a URL or hf:// name as given (no "https:/")
                got = shown[p] = P(p)
                return got
            try:
                r = os.path.relpath(p, cwd)
            except ValueError:
                r = p
            got = shown[p] = P(p if r.startswith("..") else r)
        return got

    def finding_rows(f: Finding, pad: str) -> list[str]:
        """One finding's rows, each begun with ``pad``; the findings its root
        cause explains (``consequences``) follow, two columns further in."""
        rows = [f"{pad}  {sev_label[f.severity]}  {f.code} {P(f.status)}",
                f"{pad}    {label('file')}{where(f.file)}"]
        if f.tensor:
            what = "role" if f.code in ROLE_CODES else "tensor"
            head = f"{pad}    {label(what)}"
            if tty:
                rows.extend(sgr(ln, "1") if i else head + sgr(ln[len(head):], "1")
                            for i, ln in enumerate(fill(_name_tokens(P(f.tensor)), width,
                                                        " " * len(head), head)))
            else:
                rows.append(head + P(f.tensor))
        rows.extend(text_rows(P(f.message), pad + "    "))
        for ln in f.lines:
            rows.extend(text_rows(P(ln), pad + "      ", "2"))
        n = getattr(f, "omitted", 0)
        if n:
            rows.extend(text_rows(f"… and {n:,} more {f.code} in this file (not listed)",
                                  pad + "    "))
        if f.consequences:
            rows.extend(text_rows(f"{_count(len(f.consequences), 'finding')} this one "
                                  "explains:", pad + "    "))
            for c in f.consequences:
                rows.extend(finding_rows(c, pad + "    "))
        return rows

    write = out.write
    sev_label = {v: sgr(f"{int(v)} {SEVERITY[v]}", _SEVERITY_STYLE.get(v, "")) for v in Severity}
    by_cat: dict[Category, list[Finding]] = {}
    for f in report.findings:
        by_cat.setdefault(f.category, []).append(f)
    omitted_total = 0
    for cat, title in CATEGORIES.items():
        fs = by_cat.get(cat)
        if not fs:
            continue
        if cat is Category.INFERRED:
            title = _inferred_title(fs)
        sev = min(f.severity for f in fs)  # the most severe of the category
        more = sum(getattr(f, "omitted", 0) for f in fs)
        omitted_total += more
        head = f"{title} — {_count(len(fs), 'finding')}"
        if more:
            head += f" (and {more:,} more not listed)"
        # a category of notes only sets no exit code (grit.scan.findings.Severity.NOTE)
        tail = f"exit {int(sev)}" if sev.sets_exit else "notes (no exit code)"
        write("\n".join(text_rows(f"{head}, {tail}", "", "1")) + "\n\n")
        for f in fs:
            write("\n".join(finding_rows(f, "")) + "\n\n")
    s = report.summary()
    code = exit_code(report, policy, fail_on)
    if report.coverage:
        write("\n".join(text_rows(coverage_line(report.total_coverage()), "")) + "\n")
    parts = [f"{s['parsed']}/{s['files']} files parsed", f"{s['tensors']} tensors "
             f"({s['grit_tensors']} GRIT)", _count(s["findings"], "finding")]
    if omitted_total:
        parts[-1] += f" listed (and {omitted_total:,} more)"
    if s["by_severity"]:
        parts.append(", ".join(f"{n} {k}" for k, n in sorted(s["by_severity"].items())))
    policy_note = "" if fail_on is None else f"; --fail-on {fail_on}"
    tail = (f"exit {code} ({VERDICT.get(report.exit_code_graded)}{policy_note}; graded "
            f"{report.exit_code_graded}, simple {report.exit_code_simple})")
    write("\n".join(text_rows("; ".join(parts) + " — " + tail, "")) + "\n")
    if report.baseline is not None:
        write("\n".join(text_rows(f"baseline {P(report.baseline)}: "
                                  f"{_count(len(report.known), 'known finding')} not listed "
                                  "and not counted; every finding above is new", "")) + "\n")
    if report.suppressed:
        write("\n".join(text_rows(f"{_count(report.suppressed, 'finding')} ignored by the "
                                  "settings (select / ignore / per-file-ignores)", "")) + "\n")
    if report.findings:
        write("\n".join(text_rows("grit explain CODE explains a finding code (the code is "
                                  "beside each severity).", "", "2")) + "\n")
    out.flush()


def _is_tty(out) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'s' * (n != 1)}"
