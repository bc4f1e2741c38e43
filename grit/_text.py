r"""Text for a terminal: what grit prints of a file never acts on the terminal.

A file name, a tensor name, a message quoting either, a grade string read
from a file: any of them may hold ESC sequences, C1 controls, bidi
overrides (U+202E) or, on Linux, bytes that are not UTF-8 (which Python
carries as the surrogates U+DC80..U+DCFF).  The human outputs of grit scan,
grit check and grit explain pass every such text through printable().  The
rule is Python's str.isprintable(): a character it calls non-printable
(categories Cc, Cf, Cs, Co, Cn, Zl, Zp, and Zs other than the space) is
written as an escape, and nothing else is touched (a backslash stays a
backslash, so printable() is idempotent: printable(printable(s)) ==
printable(s)).  The escapes:

  \xHH        a byte: an ASCII control (\x1b is ESC, \x0a a newline), or
              a byte of a name that is not UTF-8 (surrogateescape U+DCHH)
  \uHHHH      any other code point (\u009b the C1 CSI, \u202e RLO)
  \UHHHHHHHH  a code point past U+FFFF

The same escapes stand for a character the output encoding cannot carry
(the "grit-escape" error handler the command line installs on its
streams).  JSON output is json.dumps with ensure_ascii: pure ASCII, the
names exact (a non-UTF-8 byte is the escape \udcHH of its surrogate).
"""
from __future__ import annotations

__all__ = ["escape_char", "printable", "ESCAPE_ERRORS", "escape_errors"]


def escape_char(ch: str) -> str:
    """The escape of one character (see above)."""
    cp = ord(ch)
    if cp < 0x80:
        return f"\\x{cp:02x}"
    if 0xDC80 <= cp <= 0xDCFF:           # a byte surrogateescape carried
        return f"\\x{cp - 0xDC00:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def printable(text: object) -> str:
    """``text`` (``str()`` of it) with every non-printable character escaped."""
    s = text if isinstance(text, str) else str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else escape_char(c) for c in s)


#: the name of the codec error handler that writes :func:`escape_char` escapes
ESCAPE_ERRORS = "grit-escape"


def escape_errors(exc: UnicodeError) -> tuple[str, int]:
    """Codec error handler: each character the encoding cannot carry becomes
    its escape (registered as :data:`ESCAPE_ERRORS` by ``grit.cli``)."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return "".join(escape_char(c) for c in exc.object[exc.start:exc.end]), exc.end
