"""What ``grit scan`` / ``grit check`` / ``grit explain`` write (#12 item 8):
text from a file never reaches the terminal raw, every output encoding
works, and the human scan report is written in linear time and memory."""
import io
import json
import os
import re
import subprocess
import sys
import time
import tracemalloc
import unicodedata
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import grit
import grit.cli  # noqa: F401  (registers the grit-escape codec error handler)
from grit.explain import ESCAPE_ERRORS, diff, escape_char, printable, render as explain_render
from grit.scan import output as scan_report
from grit.scan.collect import ScannedFile
from grit.scan.findings import Finding

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples", "descriptors.json")

#: a tensor name carrying an OSC title sequence, BEL, RLO, a C1 CSI and a newline
HOSTILE_TENSOR = "w\x1b]0;pwn\x07\u202e\x9b\nx"
#: a file name (bytes: Linux allows any but / and NUL) with a CSI, a byte that
#: is not UTF-8 and an RLO
HOSTILE_FILE = b"m\x1b[2J\xff\xe2\x80\xae.safetensors"

#: the Unicode categories that must never be written raw (Python's
#: str.isprintable() refuses these, and the separators other than the space)
_UNSAFE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"}


# ---------------------------------------------------------------------------
# printable(): the escaping rule, checked over the whole BMP


def test_printable_escapes_exactly_the_non_printable_characters_of_the_bmp():
    esc = re.compile(r"\\x[0-9a-f]{2}|\\u[0-9a-f]{4}")
    for cp in range(0x10000):
        ch = chr(cp)
        got = printable(ch)
        cat = unicodedata.category(ch)
        if cat in _UNSAFE and ch != " ":
            assert esc.fullmatch(got), (hex(cp), got)
            # the escape names the character (a surrogateescape byte names the byte)
            want = cp - 0xDC00 if 0xDC80 <= cp <= 0xDCFF else cp
            assert int(got[2:], 16) == want, (hex(cp), got)
            assert got.startswith("\\x") == (cp < 0x80 or 0xDC80 <= cp <= 0xDCFF)
        else:
            assert got == ch, (hex(cp), got)


@pytest.mark.parametrize("raw, shown", [
    ("\x1b[31mred", "\\x1b[31mred"),                 # ESC: a CSI colour
    ("a\nb\tc\rd\x00e\x7f", "a\\x0ab\\x09c\\x0dd\\x00e\\x7f"),
    ("\x9b2J", "\\u009b2J"),                         # C1 CSI
    ("abc\u202edef\u2066", "abc\\u202edef\\u2066"),   # bidi overrides / isolates
    ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),
    ("line\u2028para\u2029", "line\\u2028para\\u2029"),
    ("tag\U000e0041", "tag\\U000e0041"),             # a format character past U+FFFF
    (os.fsdecode(b"caf\xe9"), "caf\\xe9"),           # a latin-1 byte in a UTF-8 locale
    ("café — 日本 ✓ a\\x1b", "café — 日本 ✓ a\\x1b"),  # printable text is untouched
])
def test_printable_examples(raw, shown):
    assert printable(raw) == shown
    assert printable(shown) == shown                  # idempotent: escapes are printable


def test_escape_handler_matches_printable():
    # what an encoding cannot carry is written with the same escapes
    # (grit.cli, imported above, registers the handler)
    assert "a—b\udcff".encode("ascii", ESCAPE_ERRORS) == b"a\\u2014b\\xff"
    assert "\U0001f600".encode("latin-1", ESCAPE_ERRORS) == b"\\U0001f600"
    assert escape_char("\u2014") == "\\u2014"


# ---------------------------------------------------------------------------
# the human scan report: no raw text from a file


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory):
    """A folder holding one truncated file with a hostile name and a hostile
    tensor name (the truncation gives a finding naming both)."""
    d = tmp_path_factory.mktemp("hostile")
    a = grit.encode(np.ones((4, 32), np.float32), grit.GRADE_MXFP4)
    p = os.path.join(os.fsencode(str(d)), HOSTILE_FILE)
    grit.save(os.fsdecode(p), {HOSTILE_TENSOR: a})
    os.truncate(p, os.path.getsize(p) - 3)
    return str(d)


@pytest.fixture(scope="module")
def clean_file(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("clean") / "clean.safetensors")
    grit.save(p, {"w": grit.encode(np.ones((4, 32), np.float32), grit.GRADE_MXFP4)})
    return p


def _cli(*args, env=None, cwd=None):
    e = dict(os.environ, PYTHONPATH=ROOT)
    e.pop("NO_COLOR", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "grit.cli", *args], capture_output=True,
                          env=e, cwd=cwd, timeout=120)


def _no_raw_controls(data: bytes) -> None:
    text = data.decode("utf-8")                       # valid UTF-8: no raw non-UTF-8 byte
    bad = [c for c in text if unicodedata.category(c) in _UNSAFE - {"Zs"} and c != "\n"]
    assert not bad, bad


def test_scan_human_output_escapes_file_and_tensor_names(hostile_dir):
    r = _cli("scan", hostile_dir, env={"PYTHONIOENCODING": "utf-8"})
    assert r.returncode == 1, r.stderr
    _no_raw_controls(r.stdout)
    out = r.stdout.decode()
    assert "m\\x1b[2J\\xff\\u202e.safetensors" in out
    assert "tensor: w\\x1b]0;pwn\\x07\\u202e\\u009b\\x0ax" in out   # piped: no padding
    assert b"Traceback" not in r.stderr


def test_scan_json_keeps_the_names_exact_and_ascii(hostile_dir):
    r = _cli("scan", "--json", hostile_dir)
    r.stdout.decode("ascii")                          # ensure_ascii: pure ASCII
    doc = json.loads(r.stdout)
    [f] = doc["findings"]
    assert f["tensor"] == HOSTILE_TENSOR
    # the byte that is not UTF-8 is its text escape (docs/scan.md), the rest exact
    assert f["file"].endswith("m\x1b[2J" + "\\xff" + "\u202e.safetensors")
    f["file"].encode("utf-8")                         # no lone surrogate
    assert r.returncode == doc["exit_code"] == 1


def _finding(i: int, path: str, tensor: str = "t") -> Finding:
    return Finding("S101", path, f"{tensor}.{i}", f"SizeMismatch: message {i}",
                   ("line one", "line two"))


def _report(n: int, path="/m/model.safetensors") -> scan_report.ScanReport:
    return scan_report.ScanReport([ScannedFile(path, "safetensors", path, True, n, n)],
                                  [_finding(i, path) for i in range(n)])


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_colour_only_on_a_terminal_and_never_from_the_file(monkeypatch):
    rep = scan_report.ScanReport([ScannedFile("/m/x", "safetensors", "/m/x", True, 1, 1)],
                                 [_finding(0, "/m/a\x1b[2Jb", HOSTILE_TENSOR)])
    monkeypatch.delenv("NO_COLOR", raising=False)
    tty = _Tty()
    scan_report.render(rep, "graded", file=tty)
    text = tty.getvalue()
    assert "\x1b[" in text                            # colour on a terminal
    # the only escape sequences are the report's own SGR colours
    assert "\x1b" not in re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert "a\\x1b[2Jb" in text and "\\u202e" in text
    monkeypatch.setenv("NO_COLOR", "1")
    tty = _Tty()
    scan_report.render(rep, "graded", file=tty)
    assert "\x1b" not in tty.getvalue()
    plain = io.StringIO()
    monkeypatch.delenv("NO_COLOR")
    scan_report.render(rep, "graded", file=plain)
    assert "\x1b" not in plain.getvalue()


# ---------------------------------------------------------------------------
# the human scan report: streamed, linear


class _Counting(io.StringIO):
    def __init__(self):
        super().__init__()
        self.writes = 0

    def write(self, s):
        self.writes += 1
        return super().write(s)


def test_render_streams_one_write_per_finding():
    rep = _report(500)
    out = _Counting()
    scan_report.render(rep, "graded", file=out)
    assert out.writes >= 500                          # not one string built at the end
    text = out.getvalue()
    assert text.count("\n  1 structural  S101 SizeMismatch\n") == 500
    assert "500 findings, exit 1" in text and "graded 1, simple 1" in text


def test_render_time_and_memory_are_linear(tmp_path):
    """20 000 findings: the rich table this renderer replaced took 22 s for
    10 000 and 242 s for 80 000 (bench/bench_scan.py --render) and held every
    cell; streaming needs a fraction of a second and only the per-category
    lists of references (a few hundred KiB)."""
    rep = _report(20000)
    with open(tmp_path / "out.txt", "w", encoding="utf-8") as f:
        tracemalloc.start()
        t0 = time.perf_counter()
        scan_report.render(rep, "graded", file=f)
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert elapsed < 20, elapsed
    assert peak < 4 << 20, f"peak {peak >> 10} KiB"
    assert (tmp_path / "out.txt").read_text().count("S101 SizeMismatch") == 20000


def test_omitted_findings_are_counted_not_dropped():
    rep = _report(3)
    rep.findings[0].omitted = 12345                   # Finding.omitted (getattr-read)
    out = io.StringIO()
    scan_report.render(rep, "graded", file=out)
    text = out.getvalue()
    assert "… and 12,345 more S101 in this file (not listed)" in text
    assert "3 findings (and 12,345 more not listed), exit 1" in text
    assert "3 findings listed (and 12,345 more)" in text


# ---------------------------------------------------------------------------
# every output encoding


_ENCODINGS = {
    "ascii": {"PYTHONIOENCODING": "ascii"},
    "latin-1": {"PYTHONIOENCODING": "latin-1"},
    # the C locale without Python's UTF-8 coercion: ASCII, surrogateescape
    "C": {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0",
          "PYTHONIOENCODING": ""},
}


def _commands(hostile_dir, clean_file):
    return [
        (["scan", clean_file], 0),
        (["scan", hostile_dir], 1),
        (["scan", "--json", hostile_dir], 1),
        (["check", EXAMPLES], 1),
        (["explain", "S101"], 0),
        (["explain", "mxfp4", "nvf4"], 1),
        (["explain", "SizeMismatch"], 0),
        (["--help"], 0),
        (["scan", "--help"], 0),
    ]


@pytest.mark.parametrize("enc", sorted(_ENCODINGS))
def test_every_command_survives_a_non_utf8_stdout(enc, hostile_dir, clean_file):
    env = _ENCODINGS[enc]
    cmds = _commands(hostile_dir, clean_file)
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda c: _cli(*c[0], env=env), cmds))
    codec = "latin-1" if enc == "latin-1" else "ascii"
    for (args, want), r in zip(cmds, runs):
        assert b"Traceback" not in r.stderr and b"UnicodeEncodeError" not in r.stderr, \
            (args, r.stderr.decode(errors="replace"))
        assert r.returncode == want, (args, r.returncode, r.stderr)
        text = r.stdout.decode(codec)                 # what the stream declared
        if "--json" in args:
            assert json.loads(text)["exit_code"] == want
        assert not any(unicodedata.category(c) in {"Cc", "Cf", "Cs"} and c != "\n"
                       for c in text), args
    # what the encoding cannot carry is escaped, not dropped or replaced by '?'
    by_args = {tuple(a): r.stdout.decode(codec) for (a, _), r in zip(cmds, runs)}
    summary = by_args[("scan", clean_file)]
    assert "0 findings \\u2014 exit 0 (clean; graded 0, simple 0)" in summary
    explained = by_args[("explain", "S101")]
    assert explained.startswith("S101 SizeMismatch \\u2014 structural, severity 1")
    if enc == "latin-1":                              # latin-1 carries § and é
        assert "§" in by_args[("scan", "--help")]
        assert "\\xff" in by_args[("scan", hostile_dir)]
    else:
        assert "\\u00a7" in by_args[("scan", "--help")]


def test_help_and_version_on_an_ascii_stdout_are_ascii():
    # click would write UTF-8 to a stream that says ASCII; the CLI keeps it ASCII
    r = _cli("scan", "--help", env={"PYTHONIOENCODING": "ascii"})
    assert r.returncode == 0
    r.stdout.decode("ascii")
    assert "\\u00a713" in r.stdout.decode("ascii")
    r = _cli("--version", env={"PYTHONIOENCODING": "ascii"})
    assert r.returncode == 0 and r.stdout.decode("ascii").startswith("grit")


# ---------------------------------------------------------------------------
# grit explain and grit check print file text escaped too


def test_explain_render_escapes_labels(tmp_path):
    p = str(tmp_path / "m.safetensors")
    grit.save(p, {HOSTILE_TENSOR: grit.encode(np.ones((4, 32), np.float32),
                                              grit.GRADE_MXFP4)})
    text = explain_render(diff(f"{p}:{HOSTILE_TENSOR}", "nvf4"), color=True)
    assert "\x1b" not in re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert "w\\x1b]0;pwn\\x07\\u202e\\u009b\\x0ax" in text
    r = _cli("explain", f"{p}:{HOSTILE_TENSOR}", "nvf4")
    assert r.returncode == 1
    _no_raw_controls(r.stdout)


def test_check_escapes_case_names(tmp_path):
    d = grit.GRADE_MXFP4.descriptor().hex()
    cases = [{"name": "ok\x1b[2J\u202e", "desc_hex": d, "shape": [32],
              "plane_bytes": [16, 1, 0, 0]},
             {"name": "bad\x9b", "desc_hex": d, "shape": [32], "plane_bytes": [16, 2, 0, 0]}]
    p = tmp_path / "cases.json"
    p.write_text(json.dumps(cases))
    r = _cli("check", str(p))
    assert r.returncode == 1
    _no_raw_controls(r.stdout)
    out = r.stdout.decode()
    assert "ok  ok\\x1b[2J\\u202e: Ok" in out and "FAIL bad\\u009b: SizeMismatch" in out
    r = _cli("check", "--json", str(p))
    assert [x["name"] for x in json.loads(r.stdout)["results"]] == [c["name"] for c in cases]


def test_each_finding_has_its_own_severity_code_and_names():
    p = "/m/model.safetensors"
    rep = scan_report.ScanReport(
        [ScannedFile(p, "safetensors", p, True, 3, 3)],
        [Finding("S101", p, "a.weight", "m1"),
         Finding("S301", p, "mlp.up_proj", "m2", ("GRADE_NVF4: 1 × a",)),
         Finding("S602", p, "b.weight", "m3"),
         Finding("S101", p, "c.weight", "m4")])
    rep.findings.sort(key=lambda f: f.category != "structural")
    out = io.StringIO()
    scan_report.render(rep, "graded", file=out)
    blocks = [b.splitlines() for b in out.getvalue().split("\n\n")]
    found = [b for b in blocks if b and b[0].startswith("  ")]
    f = "    file: /m/model.safetensors"          # not a terminal: no alignment padding
    assert found == [
        ["  1 structural  S101 SizeMismatch", f, "    tensor: a.weight", "    m1"],
        ["  1 structural  S101 SizeMismatch", f, "    tensor: c.weight", "    m4"],
        ["  2 disagreement  S301 RoleDrift", f, "    role: mlp.up_proj", "    m2",
         "      GRADE_NVF4: 1 × a"],
        ["  5 note  S602 Inferred", f, "    tensor: b.weight", "    m3"],
    ]


def test_progress_bar_shows_file_names_escaped_and_without_markup(monkeypatch):
    from grit.cli import _scan_progress
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    with _scan_progress(True) as (update, hashed):
        update(1, 10, "/x/a\x1b[2J[bold]b\u202e.safetensors")
    text = err.getvalue()
    assert "a\\x1b[2J[bold]b\\u202e.safetensors" in text   # escaped; [bold] is not markup
    assert "\x1b[2J" not in text and "\u202e" not in text
    assert hashed is None                                  # no byte feed without --deep


def test_deep_progress_counts_hashed_bytes_for_one_file_and_any_format(monkeypatch, tmp_path):
    """--deep gets a bar for a single file, fed the plane bytes hashed (the
    scan's advance callback), on stderr only; not on a pipe."""
    import numpy as np

    import grit
    from grit.cli import _scan_progress
    from grit.scan import scan
    a = grit.encode(np.ones((64, 256), np.float32), grit.GRADE_MXFP4)
    path = tmp_path / "m.safetensors"
    grit.save(str(path), {"w": a}, {"grit.digest.w": grit.base32_encode(a.digest)})
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    seen: list[int] = []
    with _scan_progress(False, deep=True) as (update, hashed):
        rep = scan([str(path)], deep=True, progress=update,
                   advance=lambda n: (seen.append(n), hashed(n)))
    assert rep.exit_code_graded == 0
    assert sum(seen) == sum(memoryview(p).nbytes for p in a.planes if p is not None)
    assert "8.5 KiB hashed" in err.getvalue()       # 8192 element + 512 scale bytes
    monkeypatch.setattr(sys, "stderr", io.StringIO())       # not a terminal
    with _scan_progress(True, deep=True) as feeds:
        assert feeds == (None, None)


def test_write_json_is_json_dumps_byte_for_byte():
    rep = _report(3000)
    rep.findings[5].message = "tensor 'w\x1b\u202e' é \udcff"
    out = io.StringIO()
    scan_report.write_json(rep, "simple", file=out)
    # the lone surrogate (a byte of a name that is not UTF-8) is its text escape \xff
    # (docs/scan.md, "Human output"); everything else json.dumps byte for byte
    want = rep.to_dict("simple")
    want["findings"][5]["message"] = "tensor 'w\x1b\u202e' é \\xff"
    assert out.getvalue() == json.dumps(want, indent=2, default=str) + "\n"
    out.getvalue().encode("ascii")
