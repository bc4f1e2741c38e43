"""The package's import graph against the layer map of docs/layers.md.

Every import between grit's own modules counts, module-level and
function-local alike, so a cycle cannot be hidden inside a function.  The
graph must be acyclic, every import must point to the same layer or a lower
one, and every module must appear in the map.  A package's ``__init__`` is a
module like the others: importing any submodule runs it first, so it sits in
the layer of what it imports and may import nothing above its submodules'
layers (grit.codec imports none of its modules for that reason)."""
from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "grit"
DOC = ROOT / "docs" / "layers.md"
EXTENSIONS = ("grit._ext", "grit._kernels")


def _modules() -> dict[str, pathlib.Path]:
    mods = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _layer_map() -> dict[str, int]:
    """module pattern -> layer, from the table of docs/layers.md."""
    out = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|[^|]*\|([^|]*)\|", line)
        if m:
            for name in re.findall(r"`([\w.*]+)`", m.group(2)):
                out[name] = int(m.group(1))
    return out


def _layer_of(mod: str, layers: dict[str, int]) -> int | None:
    if mod in layers:
        return layers[mod]
    parts = mod.split(".")
    for i in range(len(parts) - 1, 0, -1):
        star = ".".join(parts[:i]) + ".*"
        if star in layers:
            return layers[star]
    return None


def _edges(mods: dict[str, pathlib.Path]) -> dict[str, set[str]]:
    known = set(mods) | set(EXTENSIONS)
    edges: dict[str, set[str]] = {m: set() for m in known}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        parts = mod.split(".")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = parts if is_pkg else parts[:-1]
                    base = base[:len(base) - node.level + 1]
                    b = ".".join(base + ([node.module] if node.module else []))
                else:
                    b = node.module or ""
                for a in node.names:
                    targets.append(f"{b}.{a.name}" if f"{b}.{a.name}" in known else b)
            for t in targets:
                while t and t not in known and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in known and t != mod:
                    edges[mod].add(t)
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in sorted(edges[v]):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(edges):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def test_every_module_has_a_layer():
    layers = _layer_map()
    assert len(layers) > 30
    missing = sorted(m for m in list(_modules()) + list(EXTENSIONS)
                     if _layer_of(m, layers) is None)
    assert not missing, f"modules missing from docs/layers.md: {missing}"


def test_import_graph_is_acyclic():
    cyc = _cycle(_edges(_modules()))
    assert cyc is None, "import cycle: " + " -> ".join(cyc)


def test_a_package_imports_nothing_above_its_submodules():
    layers = _layer_map()
    mods = _modules()
    edges = _edges(mods)
    for pkg, path in mods.items():
        if path.name != "__init__.py" or pkg == "grit":
            continue
        subs = [m for m in mods if m.startswith(pkg + ".")]
        floor = min(_layer_of(m, layers) for m in subs)
        above = [t for t in edges[pkg] if _layer_of(t, layers) > floor]
        assert not above, f"{pkg}/__init__ imports {above}, above its layer-{floor} submodules"


def test_no_import_points_upward():
    layers = _layer_map()
    mods = _modules()
    bad = []
    for mod, targets in _edges(mods).items():
        here = _layer_of(mod, layers)
        for t in sorted(targets):
            there = _layer_of(t, layers)
            if here is not None and there is not None and there > here:
                bad.append(f"{mod} (layer {here}) imports {t} (layer {there})")
    assert not bad, "\n".join(bad)


def test_the_graph_sees_function_local_imports():
    """A lazy import is an edge like any other: the check cannot be dodged."""
    edges = _edges(_modules())
    assert "grit.codec.decode" in edges["grit.array"]
    assert "grit.io.safetensors" in edges["grit.io"]          # grit/io imports it lazily


def test_the_byte_source_sits_below_the_container_readers():
    """grit.io.source is what the readers read through: it imports no other
    io module, and both container readers import it."""
    layers = _layer_map()
    assert layers["grit.io.source"] == layers["grit.io"]
    edges = _edges(_modules())
    assert not {t for t in edges["grit.io.source"] if t.startswith("grit.io")}
    assert "grit.io.source" in edges["grit.io.gguf_file"]
    assert "grit.io.source" in edges["grit.io.safetensors"]
