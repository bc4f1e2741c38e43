"""The findings section of docs/scan.md, rendered from the registry of
finding codes (:data:`grit.scan.findings.REGISTRY`).

    python -m grit.scan.docs [docs/scan.md]     # regenerate the section in place

tests/test_scan_findings.py checks that the committed section is what
:func:`render` gives.
"""
from __future__ import annotations

import sys

from .findings import CATEGORIES, REGISTRY, SECTIONS, Category, Severity, status_name

__all__ = ["render", "section", "write", "BEGIN", "END"]

BEGIN = ("<!-- BEGIN finding codes: generated from grit/scan/findings.py by "
         "`python -m grit.scan.docs docs/scan.md`; do not edit by hand -->")
END = "<!-- END finding codes -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    """The generated section (between the markers)."""
    out = ["| category | § | severity | codes |", "|---|---|---|---|"]
    for cat in Category:
        specs = [s for s in REGISTRY.values() if s.category is cat]
        sev = sorted({int(s.severity) for s in specs})
        sev_text = " or ".join(f"{v} {Severity(v).label}" for v in sev)
        if cat is Category.UNREADABLE:
            sev_text += " (4 unparsed when no input at all could be parsed)"
        out.append(f"| `{cat.value}` | {SECTIONS[cat]} | {sev_text} | "
                   f"{', '.join(s.code for s in specs)} |")
    out += ["", "| code | status | severity | finding |", "|---|---|---|---|"]
    for s in REGISTRY.values():
        status = f"`{status_name(s.status)}`" if s.status is not None else "the check's"
        out.append(f"| [`{s.code}`](#{s.code.lower()}) | {status} | {int(s.severity)} | "
                   f"{_cell(s.title)} |")
    for cat in Category:
        out += ["", f"### `{cat.value}` — {CATEGORIES[cat]}"]
        for s in REGISTRY.values():
            if s.category is not cat:
                continue
            status = status_name(s.status) if s.status is not None else "the check's status"
            out += ["", f"#### {s.code}", "",
                    f"`{status}`, severity {int(s.severity)} ({s.severity.label}): {s.title}.",
                    "",
                    f"- *What it means:* {s.what}", f"- *Why it matters:* {s.why}",
                    f"- *Fix:* {s.fix}"]
    return "\n".join(out)


def _bounds(text: str) -> tuple[int, int]:
    return text.index(BEGIN) + len(BEGIN), text.index(END)


def section(text: str) -> str:
    """The generated part of a docs/scan.md text (between the markers)."""
    a, b = _bounds(text)
    return text[a:b].strip("\n")


def write(path: str) -> bool:
    """Regenerate the section of the file at ``path`` in place; whether it changed."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    a, b = _bounds(text)
    new = text[:a] + "\n" + render() + "\n" + text[b:]
    if new == text:
        return False
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)
    return True


if __name__ == "__main__":  # pragma: no cover
    for p in sys.argv[1:] or ["docs/scan.md"]:
        print(f"{p}: {'regenerated' if write(p) else 'up to date'}")
