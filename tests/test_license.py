"""The licence pyproject.toml declares is in the repository and in the sdist."""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_declared_licence_is_the_file():
    assert 'license = { text = "Apache-2.0" }' in (ROOT / "pyproject.toml").read_text("utf-8")
    text = (ROOT / "LICENSE").read_text("utf-8")
    # the Apache License 2.0 as the ASF publishes it: title, the nine sections
    # of its terms, the appendix
    assert text.split("\n")[1].strip() == "Apache License"
    assert "Version 2.0, January 2004" in text
    for n, title in enumerate(["Definitions", "Grant of Copyright License",
                               "Grant of Patent License", "Redistribution",
                               "Submission of Contributions", "Trademarks",
                               "Disclaimer of Warranty", "Limitation of Liability",
                               "Accepting Warranty or Additional Liability"], 1):
        assert f"{n}. {title}." in text, title
    assert "END OF TERMS AND CONDITIONS" in text
    assert "APPENDIX: How to apply the Apache License to your work." in text
    assert len(text.splitlines()) == 202


def test_the_sdist_carries_the_licence(tmp_path):
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a checkout: the sdist is built from the tracked files")
    files = subprocess.run([git, "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    src = tmp_path / "src"
    for f in filter(None, files + ["LICENSE"]):
        if (ROOT / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, src / f)
    r = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "out")],
                       cwd=src, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    [sdist] = (tmp_path / "out").glob("*.tar.gz")
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
        assert "LICENSE" in names
        top = t.getnames()[0].split("/")[0]
        got = t.extractfile(f"{top}/LICENSE").read()
        pkg_info = t.extractfile(f"{top}/PKG-INFO").read().decode()
    assert got == (ROOT / "LICENSE").read_bytes()
    assert "License-File: LICENSE" in pkg_info
