"""grit scan's expansion of its inputs (grit.scan.collect.expand) takes one
way through grit.io.location for a local folder, the same files over HTTP
(tests/http_server.py) and in a Hub repository (tests/hub_server.py): the
model files and indexes a folder walk finds, the shards a named index
brings in (and, for a broken index, the shards named after it where the
folder can be listed), a named model file, an absent one — each compared,
as names relative to the checkpoint's root, with the list written out here
from the layout. The expansion and the checkpoint checks ask no kind
themselves (an AST check of their imports and calls)."""
from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub")

from grit.errors import GritUsageError  # noqa: E402
from grit.io import remote as _remote  # noqa: E402
from grit.io.location import Location  # noqa: E402
from grit.scan.collect import expand  # noqa: E402

from test_location import laid_out  # noqa: E402
from test_scan_hub import hub, isolated  # noqa: E402,F401 - the Hub fixtures

REPO = "org/layout"
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
INDEX = "model.safetensors.index.json"
#: the index maps a tensor to a shard that is not there too
WEIGHT_MAP = {"a": SHARDS[0], "b": SHARDS[1], "c": "model-gone.safetensors"}
LAYOUT = {
    SHARDS[0]: b"0", SHARDS[1]: b"1", INDEX: json.dumps({"weight_map": WEIGHT_MAP}).encode(),
    "z.safetensors": b"z", "config.json": b"{}", "README.md": b"# a model",
    "sub/other.gguf": b"g", "sub/a.safetensors": b"a", "sub/notes.txt": b"n",
    "sub/deeper/x.safetensors": b"x", "sub/deeper/x.safetensors.index.json": b"{}",
    # a broken index, beside its checkpoint's shards (by name) and another's
    "broken/w-00001-of-00002.safetensors": b"w1", "broken/w-00002-of-00002.safetensors": b"w2",
    "broken/v.safetensors": b"v", "broken/w.safetensors.index.json": b"not json",
}
#: a top-down walk with sorted names: a folder's files, then its sub-folders'
WALKED = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
          "z.safetensors", "broken/v.safetensors", "broken/w-00001-of-00002.safetensors",
          "broken/w-00002-of-00002.safetensors", "sub/a.safetensors", "sub/other.gguf",
          "sub/deeper/x.safetensors"]
WALKED_INDEXES = [INDEX, "broken/w.safetensors.index.json",
                  "sub/deeper/x.safetensors.index.json"]


@pytest.fixture
def roots(hub, tmp_path):  # noqa: F811
    """kind -> (the checkpoint's root as an input names it, the prefix its
    files are named with in the expansion)."""
    with laid_out(hub, tmp_path, REPO, LAYOUT) as (d, s, sha):
        yield {"local": (str(d), str(d) + os.sep),
               "http": (s.url("/ckpt"), s.url("/ckpt/")),
               "hub": (f"hf://{REPO}", f"hf://{REPO}@{sha}/")}


def _expand(paths: list[str]):
    findings, files, indexes = [], [], []
    with _remote.session():
        out = expand(paths, findings, files, indexes)
    return out, indexes, [(f.code, f.file) for f in findings]


def _rel(names: list[str], prefix: str) -> list[str]:
    assert all(n.startswith(prefix) for n in names), (names, prefix)
    return [n[len(prefix):].replace(os.sep, "/") for n in names]


def _name(root: str, kind: str, rel: str) -> str:
    """The input naming ``rel`` under ``root`` (a local one with the
    platform's separator)."""
    return os.path.join(root, *rel.split("/")) if kind == "local" else f"{root}/{rel}"


def test_a_folder_and_a_repository_walk_alike(roots):
    for kind in ("local", "hub"):
        root, prefix = roots[kind]
        out, indexes, findings = _expand([root])
        assert (_rel(out, prefix), _rel(indexes, prefix), findings) == \
            (WALKED, WALKED_INDEXES, []), kind
        out, indexes, _ = _expand([_name(root, kind, "sub")])
        assert (_rel(out, prefix), _rel(indexes, prefix)) == \
            (["sub/a.safetensors", "sub/other.gguf", "sub/deeper/x.safetensors"],
             ["sub/deeper/x.safetensors.index.json"]), kind


def test_a_named_index_brings_in_its_shards_that_are_there_for_every_kind(roots):
    for kind, (root, prefix) in roots.items():
        out, indexes, findings = _expand([_name(root, kind, INDEX)])
        # the shard the index names that is not there is the checks' finding (S151)
        assert (_rel(out, prefix), _rel(indexes, prefix), findings) == \
            (SHARDS, [INDEX], []), kind
        # named twice (the index and one of its shards), each file is one input
        out, _, _ = _expand([_name(root, kind, SHARDS[1]), _name(root, kind, INDEX)])
        assert _rel(out, prefix) == [SHARDS[1], SHARDS[0]], kind


def test_a_broken_index_brings_in_its_checkpoints_shards_where_the_folder_lists(roots):
    want = {"local": ["broken/w-00001-of-00002.safetensors",
                      "broken/w-00002-of-00002.safetensors"],
            "hub": ["broken/w-00001-of-00002.safetensors",
                    "broken/w-00002-of-00002.safetensors"],
            "http": []}              # an https server lists no folder: the index alone
    for kind, (root, prefix) in roots.items():
        out, indexes, findings = _expand([_name(root, kind, "broken/w.safetensors.index.json")])
        assert (_rel(out, prefix), _rel(indexes, prefix), findings) == \
            (want[kind], ["broken/w.safetensors.index.json"], []), kind


def test_a_named_file_and_an_absent_one(roots):
    for kind, (root, prefix) in roots.items():
        out, _, findings = _expand([_name(root, kind, "sub/other.gguf")])
        assert (_rel(out, prefix), findings) == (["sub/other.gguf"], []), kind
        absent = _name(root, kind, "sub/absent.safetensors")
        out, _, findings = _expand([absent])
        if kind == "http":
            # a URL names one file, asked nothing here: its reader reports the 404
            assert (out, findings) == ([absent], []), kind
        else:
            assert (out, findings) == ([], [("S801", absent)]), kind


def test_the_kinds_list_the_same_files(roots):
    for kind in ("local", "hub"):
        root, prefix = roots[kind]
        entry = Location.of(root).entry()
        assert entry.what == "folder", kind
        got = _rel(list(entry.at.files(lambda e: pytest.fail(str(e)))), prefix)
        assert got == sorted(LAYOUT, key=lambda n: [(1, d) for d in n.split("/")[:-1]]
                             + [(0, n.split("/")[-1])]), kind
        assert Location.of(_name(root, kind, INDEX)).listing() == \
            sorted({n.split("/")[0] for n in LAYOUT}), kind
        assert Location.of(_name(root, kind, "sub/absent.safetensors")).entry().what == \
            "absent", kind
    root, _ = roots["http"]
    assert Location.of(root + "/" + INDEX).entry().what == "file"
    with pytest.raises(GritUsageError, match="cannot be listed"):
        list(Location.of(root + "/").files(lambda e: None))


# ---------------------------------------------------------------------------
# the structure: no kind asked outside grit.io.location

GRIT = Path(__file__).resolve().parent.parent / "grit"
#: names that ask what kind a path is, or walk a local folder
KIND_NAMES = {"is_hub", "is_url", "is_remote", "parse_url", "HubPath", "hub", "http"}
LOCAL_WALK = {"walk", "listdir", "scandir", "isdir", "isfile"}


def _asks(path: Path) -> set[str]:
    """The kind questions a module's source asks: a name of KIND_NAMES
    imported, an import from grit.io.hub, a LOCAL_WALK attribute used."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            found |= {a.name for a in node.names if a.name in KIND_NAMES}
            if (node.module or "").split(".")[-1] == "hub":
                found.add(node.module or "")
        elif isinstance(node, ast.Attribute) and node.attr in LOCAL_WALK:
            found.add(node.attr)
    return found


@pytest.mark.parametrize("module", ["scan/collect.py", "scan/shards.py"])
def test_the_expansion_and_the_checkpoint_checks_ask_no_kind(module):
    assert _asks(GRIT / module) == set()


def test_the_session_asks_no_kind():
    tree = ast.parse((GRIT / "io/remote.py").read_text())
    imported = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                for a in n.names}
    assert not {m for m, _ in imported} & {"hub", "location"}
    assert not {a for _, a in imported} & KIND_NAMES


def test_the_check_sees_what_it_looks_for(tmp_path):
    # the AST check finds each kind of question it is there to refuse
    p = tmp_path / "m.py"
    p.write_text("import os\nfrom ..io.hub import HubPath\nfrom ..io.http import parse_url\n"
                 "from ..io import hub\nos.walk('.')\nos.path.isfile('x')\n")
    assert _asks(p) == {"HubPath", "io.hub", "parse_url", "hub", "walk", "isfile"}


def test_a_url_index_is_named_by_its_path_without_query_or_fragment(roots):
    # a fragment is no part of a file's name (checkpoint_of strips it too): the
    # index named with one is read as the index, not scanned as a model file;
    # named with a query (a pre-signed URL), it is the index too, and the files
    # beside it are not asked for
    root, prefix = roots["http"]
    for tail, shards in (("#part", SHARDS), ("?v=1", [])):
        out, indexes, findings = _expand([f"{root}/{INDEX}{tail}"])
        assert (_rel(out, prefix), indexes, findings) == \
            (shards, [f"{root}/{INDEX}{tail}"], []), tail
