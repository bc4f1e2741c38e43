"""Every ```python block of README.md and docs/*.md runs, so the examples stay true.

The blocks of one file run in order in one namespace (a later block may use an
earlier one's names), in a scratch directory where ``examples/`` is the
repository's.  A statement followed by comment lines of the form

    # grit.errors.GritSizeError: first line of the message
    #   further lines

must raise that exception with exactly that message (what Python prints
after the traceback).  A block that cannot run here (it needs a GPU, a
server, a model) is preceded in its document by the line
``<!-- doc-test: skip REASON -->``, and the test says so."""
from __future__ import annotations

import ast
import builtins
import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*doc-test:\s*skip\s+(.+?)\s*-->")
RAISES = re.compile(r"#\s((?:\w+\.)*\w+(?:Error|Exception)): (.*)$")


def _blocks(path: pathlib.Path) -> list[tuple[int, str, str | None]]:
    """(first line number, code, skip reason or None) of each python block."""
    out: list[tuple[int, str, str | None]] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            skip = None
            if i and (m := SKIP.search(lines[i - 1])):
                skip = m.group(1)
            j = i + 1
            while lines[j].strip() != "```":
                j += 1
            out.append((i + 2, "\n".join(lines[i + 1:j]) + "\n", skip))
            i = j
        i += 1
    return out


def _exception(name: str) -> type[BaseException]:
    mod, _, cls = name.rpartition(".")
    return getattr(importlib.import_module(mod) if mod else builtins, cls)



def _steps(code: str) -> list[tuple[str, str | None, str | None]]:
    """The block's top-level statements: (source, expected exception name or
    None, expected message or None)."""
    lines = code.splitlines()
    tree = ast.parse(code)
    steps = []
    for k, node in enumerate(tree.body):
        src = "\n".join(lines[node.lineno - 1:node.end_lineno])
        stop = tree.body[k + 1].lineno - 1 if k + 1 < len(tree.body) else len(lines)
        after = [ln for ln in lines[node.end_lineno:stop] if ln.strip()]
        m = RAISES.match(after[0]) if after else None
        if m is None:
            steps.append((src, None, None))
            continue
        msg = [m.group(2)]
        for ln in after[1:]:
            if not ln.startswith("#   "):
                break
            msg.append(ln[2:])
        steps.append((src, m.group(1), "\n".join(msg)))
    return steps


BLOCKS = {path: _blocks(path) for path in DOCS}


def test_the_documents_have_examples():
    # the collector reads the fences the documents use: a renamed fence
    # would otherwise leave nothing checked
    assert len(BLOCKS[ROOT / "README.md"]) >= 2
    assert sum(len(b) for b in BLOCKS.values()) >= 8


@pytest.mark.parametrize("path", [p for p in DOCS if BLOCKS[p]], ids=lambda p: p.name)
def test_examples_run(path, tmp_path, monkeypatch):
    runnable = [(line, code) for line, code, skip in BLOCKS[path] if skip is None]
    if any("torch" in code for _, code in runnable):
        pytest.importorskip("torch", reason="the examples need torch (the [torch] extra)")
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "__doc_example__"}
    for line, code in runnable:
        for src, exc, msg in _steps(code):
            compiled = compile(src, f"{path.name}:{line}", "exec")
            if exc is None:
                exec(compiled, ns)
                continue
            with pytest.raises(_exception(exc)) as info:
                exec(compiled, ns)
            assert type(info.value) is _exception(exc), f"{path.name}:{line}"
            assert str(info.value) == msg, f"{path.name}:{line}: the documented message is stale"


@pytest.mark.parametrize("where, reason", [
    (f"{p.name}:{line}", skip) for p in DOCS for line, _, skip in BLOCKS[p] if skip is not None])
def test_examples_not_run_here(where, reason):
    pytest.skip(f"{where}: {reason}")


def test_the_documents_name_no_missing_file():
    # the spec is cited by title and version; a file name would point at
    # something the repository does not have
    for path in [*DOCS, ROOT / "spec" / "reference.py"]:
        text = path.read_text(encoding="utf-8")
        assert "GRIT-v1.txt" not in text, path.name


def test_the_readme_test_command_is_what_ci_runs():
    # the README's second line is the command CI runs (.ci/run), flags and all
    readme = (ROOT / "README.md").read_text(encoding="utf-8").split("```")[1].splitlines()
    install, _, command = readme[2].partition(" && ")
    assert install == "pip install -e '.[test]'" and command.startswith("python -m pytest")
    ci = [ln.split("#")[0].strip() for ln in
          (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert command in ci
    assert "pip install -e '.[test,torch]'" in ci   # the test extra, as the README's line
