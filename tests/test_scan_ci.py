"""grit scan in CI: the pre-commit hook (.pre-commit-hooks.yaml) and the GitHub
Action (action.yml) of the repository root, each run against a temporary git
checkout with a planted finding — the hook's ``entry`` as pre-commit runs it
(and pre-commit itself, where it is installed), the Action's ``run`` scripts
with the environment GitHub gives them."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys

import numpy as np
import pytest

import grit

yaml = pytest.importorskip("yaml")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if shutil.which("git") is None:
    pytest.skip("git is not installed", allow_module_level=True)


def _env(tmp_path) -> dict[str, str]:
    """The environment of a CI job here: this checkout's grit first on
    PYTHONPATH, and a ``grit`` command on PATH that runs it (what installing
    the package gives)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    shim = bin_ / "grit"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m grit.cli "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GRIT_"))}
    env["PATH"] = f"{bin_}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["NO_COLOR"] = "1"
    return env


def _git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture
def checkout(tmp_path):
    """A git checkout with a clean model and one whose ``w`` plane is cut short
    (S101), both committed."""
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    a = grit.encode(np.ones((4, 64), np.float32), grit.GRADE_MXFP4)
    grit.save(str(repo / "models" / "good.safetensors"), {"w": a})
    bad = repo / "models" / "bad.safetensors"
    grit.save(str(bad), {"v": a, "w": a})
    os.truncate(bad, os.path.getsize(bad) - 10)
    (repo / "README.md").write_text("a model\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "m")
    return repo


# ---------------------------------------------------------------------------
# the pre-commit hook


def _hook() -> dict:
    with open(os.path.join(ROOT, ".pre-commit-hooks.yaml"), encoding="utf-8") as f:
        (hook,) = yaml.safe_load(f)
    return hook


def _run_hook(repo, env) -> subprocess.CompletedProcess:
    """The hook as pre-commit runs it: its ``entry`` and ``args``, then the
    tracked files its ``files`` pattern matches (``require_serial``: in one
    call)."""
    hook = _hook()
    files = [p for p in _git(repo, "ls-files").splitlines() if re.search(hook["files"], p)]
    cmd = shlex.split(hook["entry"]) + list(hook.get("args", [])) + files
    return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=300)


def test_the_hook_manifest():
    hook = _hook()
    assert hook["id"] == "grit-scan" and hook["language"] == "python"
    assert shlex.split(hook["entry"])[:2] == ["grit", "scan"]
    assert hook["require_serial"] is True            # one scan: the cross-file checks
    rx = re.compile(hook["files"])
    assert rx.search("m/model-00001-of-00002.safetensors") and rx.search("x.gguf")
    assert rx.search("model.safetensors.index.json") and not rx.search("README.md")
    # the package the hook installs (language: python) provides the entry
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts["grit"] == "grit.cli:main"


def test_the_hook_fails_on_a_planted_finding_and_passes_with_a_baseline(checkout, tmp_path):
    env = _env(tmp_path)
    r = _run_hook(checkout, env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "S101" in r.stdout and "models/bad.safetensors" in r.stdout
    # the project's settings apply: the finding recorded in a baseline is known
    subprocess.run(["grit", "scan", "--write-baseline", "grit-baseline.json", "models"],
                   cwd=checkout, env=env, check=True, capture_output=True, timeout=300)
    (checkout / "pyproject.toml").write_text('[tool.grit.scan]\nbaseline = "grit-baseline.json"\n')
    r = _run_hook(checkout, env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "known finding" in r.stdout


def test_pre_commit_runs_the_hook(checkout, tmp_path):
    """pre-commit itself, with the manifest's hook as a local hook (language
    system: the hook's own language would build grit in a fresh virtualenv)."""
    pytest.importorskip("pre_commit")
    hook = {**_hook(), "language": "system"}
    hook.pop("description", None)
    (checkout / ".pre-commit-config.yaml").write_text(
        yaml.safe_dump({"repos": [{"repo": "local", "hooks": [hook]}]}))
    env = {**_env(tmp_path), "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    r = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"], cwd=checkout,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"grit scan\.+Failed", r.stdout) and "S101" in r.stdout
    assert "models/bad.safetensors" in r.stdout
    os.remove(checkout / "models" / "bad.safetensors")
    _git(checkout, "add", "-A")
    r = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"], cwd=checkout,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and re.search(r"grit scan\.+Passed", r.stdout), r.stdout


# ---------------------------------------------------------------------------
# the GitHub Action

_EXPR = re.compile(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}")


def _action() -> dict:
    with open(os.path.join(ROOT, "action.yml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


def _run_action(repo, tmp_path, **given: str) -> tuple[list[int], str, dict[str, str]]:
    """Each step's ``run`` script as the runner runs it (bash --noprofile
    --norc -eo pipefail, in the workspace), with the step's ``env`` (its
    ``${{ inputs.X }}`` expressions evaluated) and the variables GitHub sets.
    The exit status of each step run, the job summary, the step outputs."""
    action = _action()
    inputs = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    assert set(given) <= set(inputs)
    inputs.update(given)
    summary = tmp_path / "step_summary.md"
    summary.write_text("")
    temp = tmp_path / "runner_temp"
    temp.mkdir(exist_ok=True)
    codes: list[int] = []
    outputs: dict[str, str] = {}
    for i, step in enumerate(action["runs"]["steps"]):
        assert step["shell"] == "bash"
        out_file = tmp_path / f"output_{i}"
        out_file.write_text("")
        env = {**_env(tmp_path), "CI": "true", "GITHUB_ACTIONS": "true",
               "GITHUB_WORKSPACE": str(repo), "GITHUB_ACTION_PATH": ROOT,
               "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(out_file),
               "RUNNER_TEMP": str(temp), "RUNNER_OS": "Linux"}
        for k, v in step.get("env", {}).items():
            env[k] = _EXPR.sub(lambda m: inputs[m.group(1)], str(v))
            assert "${{" not in env[k]
        script = tmp_path / f"step_{i}.sh"
        script.write_text(step["run"])
        r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                           cwd=repo, env=env, capture_output=True, text=True, timeout=300)
        codes.append(r.returncode)
        for ln in out_file.read_text().splitlines():
            k, _, v = ln.partition("=")
            outputs[k] = v
        if r.returncode != 0:
            break
    return codes, summary.read_text(), outputs


def test_the_action_puts_no_input_into_a_script():
    action = _action()
    assert action["runs"]["using"] == "composite"
    for step in action["runs"]["steps"]:
        assert "${{" not in step["run"]                # inputs come in through env only
    assert action["outputs"]["exit-code"]["value"] == "${{ steps.scan.outputs.exit-code }}"
    assert [s.get("id") for s in action["runs"]["steps"]].count("scan") == 1


def test_the_action_reports_a_planted_finding(checkout, tmp_path):
    sarif = tmp_path / "grit.sarif"
    codes, summary, outputs = _run_action(checkout, tmp_path, install="",
                                          python=sys.executable, paths="models",
                                          sarif=str(sarif), args="--jobs 2")
    assert codes == [0, 1]                             # installed; the scan fails the job
    assert outputs["exit-code"] == "1"
    assert summary.startswith("### grit scan — exit 1: structural violations")
    row = next(ln for ln in summary.splitlines() if "S101" in ln)
    assert "models/bad.safetensors" in row and "| w |" in row
    log = json.loads(sarif.read_text())
    assert log["version"] == "2.1.0"
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["S101"]


def test_the_action_with_a_baseline_and_fail_on(checkout, tmp_path):
    env = _env(tmp_path)
    subprocess.run(["grit", "scan", "--write-baseline", "b.json", "models"], cwd=checkout,
                   env=env, check=True, capture_output=True, timeout=300)
    codes, summary, outputs = _run_action(checkout, tmp_path, install="",
                                          python=sys.executable, paths="models",
                                          baseline="b.json")
    assert codes == [0, 0] and outputs["exit-code"] == "0"
    assert "Baseline b.json: 1 known finding" in summary
    # the fail-on input reaches grit scan: a clean file passes it
    codes, _, outputs = _run_action(checkout, tmp_path, install="", python=sys.executable,
                                    paths="models/good.safetensors", **{"fail-on": "structural"})
    assert codes == [0, 0] and outputs["exit-code"] == "0"


# ---------------------------------------------------------------------------
# the CI recipe of docs/scan.md, run


def _marked_block(text: str, mark: str) -> str:
    """The fenced block after ``<!-- doc-test: MARK -->``."""
    lines = text.splitlines()
    i = lines.index(f"<!-- doc-test: {mark} -->")
    assert lines[i + 1].startswith("```")
    j = lines.index("```", i + 2)
    return "\n".join(lines[i + 2:j]) + "\n"


def test_the_documented_ci_recipe_runs(checkout, tmp_path):
    """docs/scan.md "CI": its settings go into the checkout's pyproject.toml
    and each of its commands runs there, with the exit status its comment
    gives.  Only ``grit scan`` commands are run (nothing else of the
    document)."""
    with open(os.path.join(ROOT, "docs", "scan.md"), encoding="utf-8") as f:
        doc = f.read()
    (checkout / "pyproject.toml").write_text(_marked_block(doc, "ci-settings"))
    env = _env(tmp_path)
    ran = 0
    for line in _marked_block(doc, "ci-shell").splitlines():
        cmd, _, comment = line.partition("#")
        m = re.match(r"\s*exit (\d+)", comment)
        assert m, line
        argv = shlex.split(cmd)
        assert argv[:2] == ["grit", "scan"], line        # nothing but grit scan runs
        r = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == int(m[1]), (line, r.stdout, r.stderr)
        ran += 1
    assert ran >= 4
    assert (checkout / "grit-baseline.json").is_file()
    assert (checkout / "grit-scan.md").read_text().startswith("### grit scan — exit 0")


def _stub_wheel(folder) -> str:
    """A wheel whose package is a stub ``grit`` (version 0.0.test), so the
    Action's install step can be run without an index."""
    import base64
    import hashlib
    import zipfile
    name = "grit_tensor_stub-0.0.1"
    files = {"grit/__init__.py": b"__version__ = '0.0.test'\n",
             f"{name}.dist-info/METADATA": b"Metadata-Version: 2.1\nName: grit-tensor-stub\n"
                                           b"Version: 0.0.1\n",
             f"{name}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
                                        b"Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(
        f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()},"
        f"{len(b)}\n" for p, b in files.items()) + f"{name}.dist-info/RECORD,,\n"
    path = os.path.join(folder, f"{name}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as z:
        for p, b in files.items():
            z.writestr(p, b)
        z.writestr(f"{name}.dist-info/RECORD", record)
    return path


def test_the_action_installs_what_its_input_names(tmp_path):
    """The install step, run: pip installs the ``install`` input into the
    ``python`` input's environment (a fresh virtualenv here, a local wheel
    for the index), and the step prints the grit it then imports."""
    venv = tmp_path / "venv"
    try:                   # virtualenv (pre-commit's) seeds pip faster than venv's ensurepip
        import virtualenv  # noqa: F401
        make = [sys.executable, "-m", "virtualenv", "-q"]
    except ImportError:
        make = [sys.executable, "-m", "venv"]
    subprocess.run([*make, str(venv)], check=True, capture_output=True, timeout=300)
    py = str(venv / "bin" / "python")
    step = _action()["runs"]["steps"][0]
    inputs = {"install": _stub_wheel(str(tmp_path)), "python": py}
    env = {k: v for k, v in _env(tmp_path).items() if k != "PYTHONPATH"}
    env["PIP_NO_INDEX"] = "1"                          # nothing is fetched
    for k, v in step["env"].items():
        env[k] = _EXPR.sub(lambda m: inputs[m.group(1)], str(v))
    script = tmp_path / "install.sh"
    script.write_text(step["run"])
    r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "grit 0.0.test"
